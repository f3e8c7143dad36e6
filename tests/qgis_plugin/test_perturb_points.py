"""geopriv:perturbpoints in a real QGIS, on the shipped data."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from qgis_helpers import CancelAt, attributes, data_path, memory_layer, points_xy, vector

pytestmark = pytest.mark.qgis

SOHO = ("soho_cholera.gpkg", "deaths")
BEIJING = "115.4,117.6,39.4,41.1 [EPSG:4326]"  # public study area of the GeoLife sample (xmin,xmax,ymin,ymax)


def released_stats(original, released):
    """Displacement statistics measured by the library on what QGIS wrote (independent of the plugin)."""
    import geopandas as gpd

    import geopriv

    def frame(layer):
        layer = vector(layer)
        xy = points_xy(layer)
        return gpd.GeoDataFrame(geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=layer.crs().authid())

    return geopriv.utility_report(frame(original), frame(released))


def test_soho_web_mercator_keeps_attributes_and_crs(run):
    source = data_path(*SOHO)
    result = run("perturbpoints", {"INPUT": source, "RADIUS": 50.0, "SEED": 11, "OUTPUT": "TEMPORARY_OUTPUT"})
    out = result["OUTPUT"]
    assert out.featureCount() == 324
    assert out.crs().authid() == "EPSG:3857"
    assert [f.name() for f in out.fields()] == ["fid", "Id", "Count"]
    assert attributes(out) == attributes(source)
    assert sum(row[2] for row in attributes(out)) == 392  # Count: 392 deaths
    # ln 4 within 50 m, in ground metres although Web Mercator stretches 1.61x at London
    eps = math.log(4) / 50
    assert result["EPSILON_PER_M"] == pytest.approx(eps)
    stats = released_stats(source, out)
    assert stats["mean_m"] == pytest.approx(2 / eps, rel=0.15)
    record = json.loads(result["PROVENANCE"])
    # Web Mercator is not used as a plane: noise is drawn on the ellipsoid's sphere
    assert record["mechanism"] == "spherical_laplace" and record["frame"] == "spherical"
    assert record["seeded"] is True and record["declared_bounds"] is None and record["kept_columns"] == []


def test_geolife_geographic_crs_to_geopackage(run, tmp_path, geolife_fixes):
    source = geolife_fixes
    target = str(tmp_path / "released.gpkg")
    result = run("perturbpoints", {"INPUT": source, "EPSILON": 0.01, "OUTPUT": target})
    assert result["OUTPUT"] == target
    out = vector(target)
    assert out.featureCount() == 5908
    assert out.crs().authid() == "EPSG:4326"
    assert [f.name() for f in out.fields()] == ["fid", "id", "trajectory_id", "tracker"]
    assert attributes(out) == attributes(source)  # fid and ids kept exactly, in the (shuffled) input's order
    assert result["EPSILON_PER_M"] == 0.01
    record = json.loads(result["PROVENANCE"])
    assert record["seeded"] is False and record["mechanism"] == "spherical_laplace"
    assert record["grid_m"] == 1.0 and record["lattice"] == "latitude rows from the equator"
    stats = released_stats(source, target)
    assert stats["n"] == 5908
    assert stats["mean_m"] == pytest.approx(200.0, rel=0.05)  # 2 / epsilon
    # alpha(0.9) of planar Laplace: 3.8897 / epsilon
    assert stats["alpha_0.9_m"] == pytest.approx(388.97, rel=0.06)


def test_seed_reproduces_and_empty_seed_does_not(run):
    source = data_path(*SOHO)
    a = points_xy(run("perturbpoints", {"INPUT": source, "SEED": 5, "OUTPUT": "TEMPORARY_OUTPUT"})["OUTPUT"])
    b = points_xy(run("perturbpoints", {"INPUT": source, "SEED": 5, "OUTPUT": "TEMPORARY_OUTPUT"})["OUTPUT"])
    c = points_xy(run("perturbpoints", {"INPUT": source, "OUTPUT": "TEMPORARY_OUTPUT"})["OUTPUT"])
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)
    assert not np.allclose(a, points_xy(source))


def test_grid_and_region(run):
    import geopriv

    xs = 448_500 + 10 * np.random.default_rng(0).permutation(50)  # a row of points, in random order
    layer = memory_layer([f"POINT({x} 4416500)" for x in xs])
    region = memory_layer(
        ["POLYGON((448000 4416000, 449500 4416000, 449500 4417000, 448000 4417000, 448000 4416000))"],
        geometry="Polygon",
    )
    result = run(
        "perturbpoints",
        {"INPUT": layer, "RADIUS": 100.0, "GRID": 10.0, "REGION": region, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    xy = points_xy(result["OUTPUT"])
    record = json.loads(result["PROVENANCE"])
    assert record["grid_m"] == 10.0 and record["region"] is True and record["frame"] == "planar"
    step = 10.0 * geopriv.public_frame("EPSG:32650").scale_min  # 10 ground metres in UTM units, from the CRS only
    assert np.allclose(xy / step, np.round(xy / step), rtol=0, atol=1e-6)  # on the public 10 m lattice
    assert (xy[:, 0] >= 448_000).all() and (xy[:, 0] <= 449_500).all()
    assert (xy[:, 1] >= 4_416_000).all() and (xy[:, 1] <= 4_417_000).all()
    assert result["EFFECTIVE_EPSILON_PER_M"] > result["EPSILON_PER_M"]


def test_single_part_multipoints_are_points(run):
    layer = memory_layer(["MULTIPOINT((448000 4416000))", "MULTIPOINT((448100 4416000))"], geometry="MultiPoint")
    out = run("perturbpoints", {"INPUT": layer, "SEED": 2, "OUTPUT": "TEMPORARY_OUTPUT"})["OUTPUT"]
    assert out.featureCount() == 2
    assert attributes(out) == [["p0"], ["p1"]]


@pytest.mark.parametrize(
    "layer_args, params, message",
    [
        ((["POINT(0 0)"],), {"LEVEL": 0.0}, "level must be finite and > 0"),
        ((["POINT(0 0)"],), {"RADIUS": 0.0}, "radius"),
        ((["POINT(448000 4416000)"],), {"EPSILON": 0.0}, "epsilon must be finite and > 0"),
        ((["POINT(1 2)"],), {"_crs": ""}, "no CRS"),
        ((["MULTIPOINT((448000 4416000), (448100 4416000))"],), {"_geometry": "MultiPoint"}, "MultiPoints"),
        ((["POINT(448000 4416000)", None],), {}, "have no geometry"),
        (([],), {}, "nothing to release"),
    ],
)
def test_bad_inputs_raise_processing_exceptions(run, layer_args, params, message):
    from qgis.core import QgsProcessingException

    params = dict(params)
    crs = params.pop("_crs", "EPSG:32650")
    geometry = params.pop("_geometry", "Point")
    layer = memory_layer(*layer_args, crs=crs, geometry=geometry)
    with pytest.raises(QgsProcessingException, match=message):
        run("perturbpoints", {"INPUT": layer, "OUTPUT": "TEMPORARY_OUTPUT", **params})


def test_polygon_layer_is_refused(run):
    from qgis.core import QgsProcessingException

    polygons = memory_layer(["POLYGON((0 0, 1 0, 1 1, 0 0))"], geometry="Polygon")
    with pytest.raises(QgsProcessingException):
        run("perturbpoints", {"INPUT": polygons, "OUTPUT": "TEMPORARY_OUTPUT"})


def test_cancellation_during_the_release_writes_nothing(run, tmp_path, geolife_fixes):
    """Cancelled once the release has begun (reading is 0-10 %, the one geopriv call 10-90 %): nothing is written."""
    from qgis.core import QgsProcessingException

    feedback = CancelAt(10.0)
    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run("perturbpoints", {"INPUT": geolife_fixes, "OUTPUT": str(target)}, feedback=feedback)
    assert max(feedback.seen) <= 90.0  # writing (90-100 %) never started
    assert not target.exists()


def test_cancellation_before_start(run):
    from qgis.core import QgsProcessingException, QgsProcessingFeedback

    feedback = QgsProcessingFeedback()
    feedback.cancel()
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run("perturbpoints", {"INPUT": data_path(*SOHO), "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)


def test_progress_is_reported(run, geolife_fixes):
    from qgis.core import QgsProcessingFeedback

    feedback = QgsProcessingFeedback()
    seen = []
    feedback.progressChanged.connect(seen.append)
    run("perturbpoints", {"INPUT": geolife_fixes, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    # reading 0-10 %, the one geopriv call 10-90 % (it reports per chunk of its own), writing 90-100 %
    assert seen == sorted(seen) and 90.0 in seen and seen[-1] == 100


def test_other_warnings_go_to_the_debug_log(run, monkeypatch):
    """A warning from outside geopriv raised during the release reaches the log as debug information."""
    import warnings

    import geopriv
    from qgis.core import QgsProcessingFeedback

    class Log(QgsProcessingFeedback):
        def __init__(self):
            super().__init__()
            self.warnings, self.debug = [], []

        def pushWarning(self, text):  # noqa: N802
            self.warnings.append(text)

        def pushDebugInfo(self, text):  # noqa: N802
            self.debug.append(text)

    original = geopriv.perturb

    def perturb(data, *args, **kwargs):
        warnings.warn("a dependency's deprecation", DeprecationWarning)
        return original(data, *args, **kwargs)

    perturb.__signature__ = __import__("inspect").signature(original)
    monkeypatch.setattr(geopriv, "perturb", perturb)
    feedback = Log()
    run("perturbpoints", {"INPUT": data_path(*SOHO), "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    assert any(d.startswith("DeprecationWarning: a dependency's deprecation") for d in feedback.debug)
    assert not any("DeprecationWarning" in w for w in feedback.warnings)
