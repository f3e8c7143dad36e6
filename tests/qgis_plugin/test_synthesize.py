"""geopriv:synthesize in a real QGIS, on the shipped Soho cholera deaths (324 points, EPSG:3857).

* A public area (an extent, in any CRS: converted to the layer's) gives n synthetic points in the
  layer's CRS, inside it, without the input's attributes, with the library's provenance.
* Features outside the area are refused, named by feature id; the input layer's own extent is refused.
* No extent and no region: refused (the CRS's area of use is no study area).
* The parameters are the library's (defaults read from its signature; epsilon has none).
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from qgis_helpers import Log, data_path, memory_layer, points_xy, vector

pytestmark = pytest.mark.qgis

SOHO = ("soho_cholera.gpkg", "deaths")
BOUNDS = (-15800, 6711900, -14600, 6713300)  # public area around Soho, round numbers (EPSG:3857)
EXTENT = f"{BOUNDS[0]},{BOUNDS[2]},{BOUNDS[1]},{BOUNDS[3]} [EPSG:3857]"  # as QGIS writes extents: xmin,xmax,ymin,ymax


def synthesize(run, **params):
    return run("synthesize", {"INPUT": data_path(*SOHO), "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT", **params})


def test_soho_with_a_public_area(run):
    feedback = Log()
    result = run(
        "synthesize",
        {"INPUT": data_path(*SOHO), "EPSILON": 1.0, "BOUNDS": EXTENT, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT"},
        feedback=feedback,
    )
    out = result["OUTPUT"]
    assert out.featureCount() == 324 == result["N_SYNTHETIC"]
    assert out.crs().authid() == vector(data_path(*SOHO)).crs().authid() == "EPSG:3857"
    assert out.fields().count() == 0  # attributes are not carried over
    xy = points_xy(out)
    assert (xy >= BOUNDS[:2]).all() and (xy <= BOUNDS[2:]).all()
    assert not np.array_equal(np.sort(xy, axis=0), np.sort(points_xy(data_path(*SOHO)), axis=0))
    record = json.loads(result["PROVENANCE"])
    assert record["method"] == "srw" and record["epsilon"] == 1.0 and record["seeded"] is True
    assert record["frame_area"] == "bounds" and record["public_area"] == pytest.approx(BOUNDS)
    assert record["n"] == 324 and record["n_people"] == 324 and result["TREE_DEPTH"] == record["depth"]
    assert "differential privacy" in record["definition"]
    line = next(t for t in feedback.infos if t.startswith("mechanism = "))
    assert "method = srw" in line and "epsilon = 1.0" in line and f"depth = {record['depth']}" in line
    assert not any("area of use" in w for w in feedback.warnings)  # an area was declared
    assert any("Random seed 1" in w for w in feedback.warnings)


def test_the_seed_reproduces_and_an_empty_seed_does_not(run):
    a = points_xy(synthesize(run, BOUNDS=EXTENT, SEED=5)["OUTPUT"])
    b = points_xy(synthesize(run, BOUNDS=EXTENT, SEED=5)["OUTPUT"])
    c = run("synthesize", {"INPUT": data_path(*SOHO), "BOUNDS": EXTENT, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert np.array_equal(a, b)
    assert not np.array_equal(a, points_xy(c["OUTPUT"]))
    assert json.loads(c["PROVENANCE"])["seeded"] is False


def test_an_extent_in_another_crs_is_converted(run):
    """The area given in longitude/latitude is converted to the layer's Web Mercator (its bounding box)."""
    from pyproj import Transformer

    lon, lat = Transformer.from_crs("EPSG:3857", "EPSG:4326", always_xy=True).transform(
        [BOUNDS[0], BOUNDS[2]], [BOUNDS[1], BOUNDS[3]]
    )
    extent = f"{lon[0]:.6f},{lon[1]:.6f},{lat[0]:.6f},{lat[1]:.6f} [EPSG:4326]"
    result = synthesize(run, BOUNDS=extent)
    record = json.loads(result["PROVENANCE"])
    assert record["frame_area"] == "bounds" and record["input_crs"] == "EPSG:3857"
    assert record["public_area"] == pytest.approx(BOUNDS, abs=1.0)  # metres of Web Mercator, not degrees
    xy = points_xy(result["OUTPUT"])
    assert result["OUTPUT"].crs().authid() == "EPSG:3857"
    assert (xy >= np.array(BOUNDS[:2]) - 1).all() and (xy <= np.array(BOUNDS[2:]) + 1).all()


def test_points_outside_the_area_are_refused_naming_feature_ids(run, tmp_path):
    from qgis.core import QgsProcessingException

    target = tmp_path / "never.gpkg"
    narrow = f"{-15000},{BOUNDS[2]},{BOUNDS[1]},{BOUNDS[3]} [EPSG:3857]"
    with pytest.raises(QgsProcessingException) as refused:
        synthesize(run, BOUNDS=narrow, OUTPUT=str(target))
    message = str(refused.value)
    assert message.startswith("Synthesize points (differential privacy, private measure): ")
    assert "row(s) lie outside the declared study area" in message and "labels " in message
    assert "'Public study area'" in message and "bounds=" not in message and "--" not in message
    assert "the labels are feature ids" in message and "'Public study area' parameter" in message
    ids = {f.id() for f in vector(data_path(*SOHO)).getFeatures() if f.geometry().asPoint().x() < -15000}
    shown = message.split("labels ", 1)[1].split(".", 1)[0]
    assert {int(t) for t in shown.replace("...", "").split("(")[0].split(",") if t.strip()} <= ids
    for value in ("-15539", "6712903", "51.51", "-0.13"):  # feature ids, never coordinates
        assert value not in message
    assert not target.exists()


def test_the_input_layers_own_extent_is_refused(run):
    from qgis.core import QgsProcessingException

    layer = vector(data_path(*SOHO))
    extent = layer.extent()
    own = f"{extent.xMinimum()},{extent.xMaximum()},{extent.yMinimum()},{extent.yMaximum()} [EPSG:3857]"
    with pytest.raises(QgsProcessingException, match="bounding box of the true points"):
        synthesize(run, INPUT=layer, BOUNDS=own)


def test_no_extent_is_refused(run):
    """British National Grid: its area of use (Great Britain) is no study area (issue 44.3): the run stops."""
    from pyproj import Transformer
    from qgis.core import QgsProcessingException

    xy = points_xy(data_path(*SOHO))
    x, y = Transformer.from_crs("EPSG:3857", "EPSG:27700", always_xy=True).transform(xy[:, 0], xy[:, 1])
    order = np.random.default_rng(0).permutation(len(x))
    layer = memory_layer([f"POINT({x[k]} {y[k]})" for k in order], crs="EPSG:27700")
    with pytest.raises(QgsProcessingException, match="needs a declared public area") as err:
        run("synthesize", {"INPUT": layer, "SEED": 2, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=Log())
    assert "'Public study area' parameter" in str(err.value) and "bounds=" not in str(err.value)


def test_pmm_method_n_depth_placement_grid(run):
    result = synthesize(run, BOUNDS=EXTENT, METHOD=1, N=1000, DEPTH=6, PLACEMENT=1, GRID=5.0)
    record = json.loads(result["PROVENANCE"])
    assert record["method"] == "pmm" and "private measure" in record["mechanism"]
    assert record["depth"] == 6 == result["TREE_DEPTH"] and record["placement"] == "centre"
    assert record["grid_m"] == 5.0 and record["n"] == 1000 and record["n_people"] == 324
    assert result["OUTPUT"].featureCount() == 1000


def test_region_keeps_the_points_inside(run):
    west = (
        f"POLYGON(({BOUNDS[0]} {BOUNDS[1]}, -15000 {BOUNDS[1]}, -15000 {BOUNDS[3]}, "
        f"{BOUNDS[0]} {BOUNDS[3]}, {BOUNDS[0]} {BOUNDS[1]}))"
    )
    half = memory_layer([west], crs="EPSG:3857", geometry="Polygon")
    result = synthesize(run, BOUNDS=EXTENT, REGION=half)
    record = json.loads(result["PROVENANCE"])
    assert record["region"] is True
    assert (points_xy(result["OUTPUT"])[:, 0] <= -15000).all()


def test_parameters_are_the_librarys(provider):
    import geopriv
    from qgis.core import QgsProcessingParameterDefinition, QgsProcessingParameterExtent

    alg = provider.algorithm("synthesize")
    library = inspect.signature(geopriv.synthesize).parameters
    assert library["epsilon"].default is inspect.Parameter.empty  # the plugin proposes 1.0 and says so
    epsilon = alg.parameterDefinition("EPSILON")
    assert epsilon.defaultValue() == 1.0 and "dimensionless" in epsilon.description()
    assert "no default" in epsilon.help()
    method = alg.parameterDefinition("METHOD")
    assert method.options()[method.defaultValue()].startswith(library["method"].default + ":")
    placement = alg.parameterDefinition("PLACEMENT")
    assert ["uniform", "centre"][placement.defaultValue()] == library["placement"].default
    for name in ("N", "DEPTH", "GRID", "REGION", "BOUNDS", "SEED"):
        param = alg.parameterDefinition(name)
        assert param.flags() & QgsProcessingParameterDefinition.FlagOptional, name
        assert param.defaultValue() is None, name  # empty: the library's default
    bounds = alg.parameterDefinition("BOUNDS")
    assert isinstance(bounds, QgsProcessingParameterExtent)
    assert not bounds.flags() & QgsProcessingParameterDefinition.FlagAdvanced  # the public area is not hidden
    assert "area of use" in bounds.help() and "without looking at individual points" in bounds.help()
    assert alg.parameterDefinition("KEEP_ORDER") is None  # nothing of the input's order is released
    text = alg.shortHelpString()
    for phrase in (
        "dimensionless",
        "not per metre",
        "any</i> other location in the",
        "number of people is public",
        "attributes are not carried over",
        "area of use",
    ):
        assert phrase in text, phrase


def test_bad_parameters_raise_processing_exceptions(run):
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException, match="epsilon must be finite and > 0"):
        synthesize(run, BOUNDS=EXTENT, EPSILON=0.0)
    no_crs = memory_layer(["POINT(1 2)"], crs="")
    with pytest.raises(QgsProcessingException, match="no CRS"):
        run("synthesize", {"INPUT": no_crs, "OUTPUT": "TEMPORARY_OUTPUT"})
