"""GRID, CONTINUOUS, BOUNDS and KEEP: the public lattice, the public study area and kept columns, as the library has them.

* The parameters exist on every release algorithm with the library's names and defaults (an
  empty GRID is the library's ``grid="auto"``, CONTINUOUS defaults to the library's default).
* KEEP lets a longitude/latitude attribute column through deliberately; without it the run
  fails naming the column.
* BOUNDS (any CRS, converted to the layer's) refuses features outside it, naming feature ids
  and never coordinates; the input layer's own extent is refused as a study area.
* The default output lies on the public lattice; CONTINUOUS is recorded in the provenance.
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from qgis_helpers import attributes, data_path, memory_layer, points_xy

pytestmark = pytest.mark.qgis

RELEASES = {"perturbpoints": "perturb", "perturblocationdependent": "perturb", "sanitizetraces": "sanitize_traces"}
UTM = "EPSG:32650"


def released_xy(layer):
    """Coordinates of the released points (features a trace's budget did not cover have no geometry)."""
    return np.array(
        [
            [f.geometry().asPoint().x(), f.geometry().asPoint().y()]
            for f in layer.getFeatures()
            if not f.geometry().isNull()
        ]
    )


def outputs(alg_id):
    return {"OUTPUT": "TEMPORARY_OUTPUT", **({"LEDGER": "TEMPORARY_OUTPUT"} if alg_id == "sanitizetraces" else {})}


def lonlat(xs, ys, crs=UTM):
    from pyproj import Transformer

    return Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform(np.asarray(xs), np.asarray(ys))


def utm_layer(n=30, fields=(("name", "string"),), values=None, seed=0):
    """n points in Beijing (UTM 50N) at irregular coordinates."""
    rng = np.random.default_rng(seed)
    xs = 448_000 + rng.uniform(0, 2_000, n).round(3)
    ys = 4_416_000 + rng.uniform(0, 2_000, n).round(3)
    layer = memory_layer([f"POINT({x} {y})" for x, y in zip(xs, ys)], crs=UTM, fields=fields, values=values)
    return layer, xs, ys


def layer_with_lonlat(n=30, crs=UTM, origin=(448_000, 4_416_000), span=2_000, seed=0):
    """Points with two attribute columns holding their own longitude and latitude (a leak)."""
    rng = np.random.default_rng(seed)
    xs = origin[0] + rng.uniform(0, span, n)
    ys = origin[1] + rng.uniform(0, span, n)
    lon, lat = lonlat(xs, ys, crs)
    layer = memory_layer(
        [f"POINT({x} {y})" for x, y in zip(xs, ys)],
        crs=crs,
        fields=(("name", "string"), ("trace", "integer"), ("lon", "double"), ("lat", "double")),
        values=[[f"p{i}", 1, float(a), float(b)] for i, (a, b) in enumerate(zip(lon, lat))],
    )
    return layer


@pytest.fixture(scope="module")
def tokyo_mechanism(provider, tmp_path_factory):
    """A small saved location-dependent mechanism (20 x 20 cells of the Tokyo raster) and its raster's geotransform."""
    import processing
    from osgeo import gdal

    folder = tmp_path_factory.mktemp("release_parameters")
    raster = str(folder / "tokyo_20.tif")
    gdal.Translate(raster, data_path("tokyo_density_200.tif"), width=20, height=20, resampleAlg="average")
    x0, dx, _, y0, _, dy = gdal.Open(raster).GetGeoTransform()
    saved = str(folder / "tokyo_20.npz")
    layer = memory_layer([f"POINT({x0 + 10 * dx} {y0 + 10 * dy})"], crs="EPSG:30166")
    processing.run(
        "geopriv:perturblocationdependent",
        {"INPUT": layer, "POPULATION": raster, "SAVE_MECHANISM": saved, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    return saved, (x0, dx, y0, dy)


def tokyo_points(tokyo_mechanism, n=30, seed=0):
    """(xs, ys) inside the middle of the mechanism's raster, in EPSG:30166."""
    _, (x0, dx, y0, dy) = tokyo_mechanism
    rng = np.random.default_rng(seed)
    return x0 + dx * 20 * rng.uniform(0.3, 0.7, n), y0 + dy * 20 * rng.uniform(0.3, 0.7, n)


def release_params(alg_id, layer, tokyo_mechanism=None, **extra):
    if alg_id == "perturblocationdependent":  # its privacy is the mechanism's
        extra = {k: v for k, v in extra.items() if k not in ("EPSILON", "RATE")}
    if alg_id == "perturbpoints":
        extra.pop("RATE", None)
    params = {"INPUT": layer, "SEED": 3, **outputs(alg_id), **extra}
    if alg_id == "perturblocationdependent":
        params["MECHANISM_FILE"] = tokyo_mechanism[0]
    if alg_id == "sanitizetraces":
        params.setdefault("TRAJ_ID_FIELD", "trace")
    return params


# --- the parameters are the library's -----------------------------------------------------------------
@pytest.mark.parametrize("alg_id", sorted(RELEASES))
def test_release_parameters_have_the_library_names_and_defaults(provider, alg_id):
    import geopriv
    from qgis.core import (
        QgsProcessingParameterBoolean,
        QgsProcessingParameterDefinition,
        QgsProcessingParameterExtent,
        QgsProcessingParameterField,
        QgsProcessingParameterNumber,
    )

    alg = provider.algorithm(alg_id)
    library = inspect.signature(getattr(geopriv, RELEASES[alg_id])).parameters
    assert library["grid"].default == "auto" and library["bounds"].default is None
    assert tuple(library["keep"].default) == () and library["continuous"].default is False

    grid = alg.parameterDefinition("GRID")
    assert isinstance(grid, QgsProcessingParameterNumber)
    assert grid.defaultValue() is None and grid.flags() & QgsProcessingParameterDefinition.FlagOptional  # empty: "auto"
    assert "(metres" in grid.description() and "auto" in grid.help()
    assert f"{geopriv.frame.DEFAULT_GRID_M:g} m" in grid.help()

    continuous = alg.parameterDefinition("CONTINUOUS")
    assert isinstance(continuous, QgsProcessingParameterBoolean)
    assert continuous.defaultValue() is library["continuous"].default
    assert "no finite-precision bound" in continuous.description() + continuous.help()

    bounds = alg.parameterDefinition("BOUNDS")
    assert isinstance(bounds, QgsProcessingParameterExtent)
    assert (
        bounds.description() == "Public study area" and bounds.flags() & QgsProcessingParameterDefinition.FlagOptional
    )
    assert "public: choose it without looking at individual points" in bounds.help()

    keep = alg.parameterDefinition("KEEP")
    assert isinstance(keep, QgsProcessingParameterField)
    assert keep.description() == "Keep these attribute columns (location-like columns are refused otherwise)"
    assert keep.allowMultiple() and keep.parentLayerParameterName() == "INPUT"
    assert keep.flags() & QgsProcessingParameterDefinition.FlagOptional

    for name in ("GRID", "CONTINUOUS", "BOUNDS", "KEEP"):
        assert name.lower() in alg.GEOPRIV_KEYWORDS[RELEASES[alg_id]]


def test_plugin_refuses_a_library_whose_release_lacks_the_keywords(plugin, monkeypatch):
    import geopriv

    from geopriv_qgis import compat

    def perturb(
        data,
        epsilon=None,
        *,
        level=None,
        radius=None,
        mechanism=None,
        rng=None,
        grid="auto",
        region=None,
        progress=None,
    ):  # an older perturb: no bounds, keep, continuous
        raise AssertionError("never called")

    monkeypatch.setattr(geopriv, "perturb", perturb)
    with pytest.raises(
        ImportError,
        match=r"lacks perturb\(bounds=\), perturb\(budget_store=\), perturb\(continuous=\), "
        r"perturb\(keep=\), perturb\(person=\)",
    ):
        compat.check_geopriv()


# --- BUDGET_STORE and PERSON: the library's budget_store= and person= on every release ---------------------------
def test_every_release_has_the_budget_parameters_of_its_library_function(provider, tmp_path):
    """Every algorithm that releases (RELEASE_FUNCTION) has BUDGET_STORE and PERSON, named as the library's own QGIS
    advice names them, empty by default (the library's budget_store=None: nothing charged), and passes them."""
    import geopriv
    from geopriv.budget import PERSON_FIX
    from geopriv.exceptions import BudgetStoreError
    from qgis.core import QgsProcessingParameterDefinition, QgsProcessingParameterField, QgsProcessingParameterString

    from geopriv_qgis.algorithms.base import BUDGET_KEYWORDS

    with pytest.raises(BudgetStoreError) as missing:
        geopriv.BudgetStore(str(tmp_path / "missing.db"))
    store_advice = missing.value.fix.qgis
    releases = {alg.id().split(":")[1]: alg.RELEASE_FUNCTION for alg in provider.algorithms() if alg.RELEASE_FUNCTION}
    assert releases == {
        **RELEASES,
        "synthesize": "synthesize",
        "diffuse": "diffuse_locations",
        "aggregate": "aggregate",
        "heatmap": "heatmap",
        "flows": "flows",
    }
    for alg_id, function in releases.items():
        alg = provider.algorithm(alg_id)
        library = inspect.signature(getattr(geopriv, function)).parameters
        assert library["budget_store"].default is None and library["person"].default is None
        assert set(BUDGET_KEYWORDS) <= set(alg.GEOPRIV_KEYWORDS[function])
        # the count releases declare the person field themselves, as the library's user= (USER, not advanced)
        store, person = alg.parameterDefinition("BUDGET_STORE"), alg.parameterDefinition(alg.PERSON)
        assert isinstance(store, QgsProcessingParameterString)  # a file parameter refuses postgresql:// URLs
        assert store.defaultValue() is None and store.checkValueIsAcceptable("postgresql://user@host/budgets")
        assert isinstance(person, QgsProcessingParameterField) and person.parentLayerParameterName() == "INPUT"
        for param in (store, person):
            assert param.flags() & QgsProcessingParameterDefinition.FlagOptional
        assert store.flags() & QgsProcessingParameterDefinition.FlagAdvanced
        assert bool(person.flags() & QgsProcessingParameterDefinition.FlagAdvanced) == alg.PERSON_BUDGET_ONLY
        # one name per concept: the library's QGIS advice names these parameters
        assert f"'{store.description().split(' (')[0]}' parameter" in store_advice
        assert f"'{person.description()}'" in PERSON_FIX.qgis
    for alg in provider.algorithms():
        if not alg.RELEASE_FUNCTION:
            assert alg.parameterDefinition("BUDGET_STORE") is None, alg.id()


# --- KEEP -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alg_id", sorted(RELEASES))
def test_lonlat_columns_are_refused_unless_kept(run, alg_id, tokyo_mechanism):
    from qgis.core import QgsProcessingException

    if alg_id == "perturblocationdependent":
        xs, ys = tokyo_points(tokyo_mechanism)
        x0, y0 = xs.min(), ys.min()
        layer = layer_with_lonlat(crs="EPSG:30166", origin=(x0, y0), span=min(np.ptp(xs), np.ptp(ys)))
    else:
        layer = layer_with_lonlat()

    with pytest.raises(QgsProcessingException) as refused:
        run(alg_id, release_params(alg_id, layer, tokyo_mechanism))
    message = str(refused.value)
    assert "'lon'" in message and "'lat'" in message
    assert "Keep these attribute columns" in message  # the library names the QGIS option
    assert "'name'" not in message and "'trace'" not in message

    with pytest.raises(QgsProcessingException) as half:
        run(alg_id, release_params(alg_id, layer, tokyo_mechanism, KEEP=["lon"]))
    assert "'lat'" in str(half.value) and "'lon'" not in str(half.value)

    result = run(alg_id, release_params(alg_id, layer, tokyo_mechanism, KEEP=["lon", "lat"]))
    out = result["OUTPUT"]
    assert out.featureCount() == 30
    assert [a[:4] for a in attributes(out)] == attributes(layer)  # the kept columns are written unchanged
    record = json.loads(result["PROVENANCE"])
    assert record["kept_columns"] == ["lat", "lon"]


def test_wkt_text_field_named_geometry_is_checked(run):
    """A text field called "geometry" holding WKT is an attribute like any other: refused unless kept."""
    from qgis.core import QgsProcessingException

    layer, xs, ys = utm_layer(fields=(("geometry", "string"),), values=None)
    layer.startEditing()
    for feature, x, y in zip(layer.getFeatures(), xs, ys):
        layer.changeAttributeValue(feature.id(), 0, f"POINT ({x} {y})")
    assert layer.commitChanges()
    with pytest.raises(QgsProcessingException, match="'geometry'"):
        run("perturbpoints", {"INPUT": layer, "OUTPUT": "TEMPORARY_OUTPUT"})
    out = run("perturbpoints", {"INPUT": layer, "KEEP": ["geometry"], "OUTPUT": "TEMPORARY_OUTPUT"})["OUTPUT"]
    assert attributes(out) == attributes(layer)


# --- BOUNDS -----------------------------------------------------------------------------------------
def coordinate_texts(xs, ys):
    """Ways a coordinate could appear in a message: integer metres and a few decimals."""
    texts = set()
    for v in np.concatenate([xs, ys]):
        texts |= {str(int(v)), f"{v:.1f}", f"{v:.2f}", f"{v:g}", repr(float(v))}
    return texts


@pytest.mark.parametrize("alg_id", ["perturbpoints", "sanitizetraces"])
def test_bounds_excluding_points_names_feature_ids_never_coordinates(run, alg_id):
    from qgis.core import QgsProcessingException, QgsProcessingFeedback

    class Log(QgsProcessingFeedback):
        def __init__(self):
            super().__init__()
            self.lines = []

        def pushInfo(self, text):  # noqa: N802
            self.lines.append(text)

        pushWarning = pushDebugInfo = reportError = pushInfo  # noqa: N815

    layer, xs, ys = utm_layer(fields=(("trace", "integer"),), values=[[1]] * 30)
    ids = np.array([f.id() for f in layer.getFeatures()])
    inside = (xs <= 449_500) & (ys <= 4_417_500)
    assert 0 < (~inside).sum() < 30
    feedback = Log()
    with pytest.raises(QgsProcessingException) as refused:
        run(
            alg_id,
            release_params(alg_id, layer, BOUNDS="447000,449500,4415000,4417500 [EPSG:32650]"),
            feedback=feedback,
        )
    message = str(refused.value)
    assert f"{(~inside).sum()} row(s) lie outside" in message
    named = sorted(ids[~inside])[:10]
    assert "labels " + ", ".join(str(i) for i in named) in message  # QGIS feature ids
    assert "In QGIS, the labels are feature ids" in message and "'Public study area' parameter" in message
    for text in coordinate_texts(xs, ys):
        assert text not in message
        assert not any(text in line for line in feedback.lines)


def test_bounds_excluding_points_location_dependent(run, tokyo_mechanism):
    from qgis.core import QgsProcessingException

    xs, ys = tokyo_points(tokyo_mechanism, n=20)
    layer = memory_layer([f"POINT({x} {y})" for x, y in zip(xs, ys)], crs="EPSG:30166")
    ids = np.array([f.id() for f in layer.getFeatures()])
    cut = float(np.median(xs))
    bounds = f"{xs.min() - 5_000},{cut},{ys.min() - 5_000},{ys.max() + 5_000} [EPSG:30166]"
    with pytest.raises(QgsProcessingException) as refused:
        run(
            "perturblocationdependent",
            release_params("perturblocationdependent", layer, tokyo_mechanism, BOUNDS=bounds),
        )
    message = str(refused.value)
    assert "lie outside the declared study area" in message and "'Public study area'" in message
    assert "bounds=" not in message and "--bounds" not in message
    assert "labels " + ", ".join(str(i) for i in sorted(ids[xs > cut])[:10]) in message
    for text in coordinate_texts(xs, ys):
        assert text not in message


def test_bounds_in_another_crs_are_converted_to_the_layer_crs(run, geolife_fixes):
    """The GeoLife sample (EPSG:4326) with a study area given in UTM 50N: declared in degrees, inputs inside."""
    from qgis.core import (
        QgsCoordinateReferenceSystem,
        QgsCoordinateTransform,
        QgsProject,
        QgsRectangle,
    )

    utm = QgsRectangle(420_000, 4_400_000, 480_000, 4_450_000)
    expected = QgsCoordinateTransform(
        QgsCoordinateReferenceSystem(UTM), QgsCoordinateReferenceSystem("EPSG:4326"), QgsProject.instance()
    ).transformBoundingBox(utm)
    result = run(
        "perturbpoints",
        {
            "INPUT": geolife_fixes,
            "EPSILON": 0.01,
            "SEED": 1,
            "BOUNDS": "420000,480000,4400000,4450000 [EPSG:32650]",
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    record = json.loads(result["PROVENANCE"])
    assert record["declared_bounds"] == pytest.approx(
        [expected.xMinimum(), expected.yMinimum(), expected.xMaximum(), expected.yMaximum()], abs=1e-9
    )
    assert 116 < record["declared_bounds"][0] < 116.3 and 40.1 < record["declared_bounds"][3] < 40.3
    assert record["frame_area"] == "bounds" and result["OUTPUT"].featureCount() == 5908
    xy = points_xy(result["OUTPUT"])
    lo, hi = record["declared_bounds"][:2], record["declared_bounds"][2:]
    assert (xy >= np.array(lo) - 1e-9).all() and (xy <= np.array(hi) + 1e-9).all()  # outputs kept in the area


def test_the_input_layers_own_extent_is_refused(run):
    from qgis.core import QgsProcessingException

    layer, xs, ys = utm_layer()
    extent = layer.extent()
    as_text = f"{extent.xMinimum()!r},{extent.xMaximum()!r},{extent.yMinimum()!r},{extent.yMaximum()!r} [EPSG:32650]"
    for bounds in (layer, as_text):  # "Calculate from layer" on the input, as a layer or as numbers
        with pytest.raises(QgsProcessingException, match="extent of the input layer") as refused:
            run("perturbpoints", {"INPUT": layer, "BOUNDS": bounds, "OUTPUT": "TEMPORARY_OUTPUT"})
        for text in coordinate_texts(xs, ys):
            assert text not in str(refused.value)
    # a study area in round numbers that holds the points is fine
    out = run(
        "perturbpoints",
        {"INPUT": layer, "BOUNDS": "447000,451000,4415000,4419000 [EPSG:32650]", "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    assert json.loads(out["PROVENANCE"])["declared_bounds"] == [447000.0, 4415000.0, 451000.0, 4419000.0]


# --- the public lattice and CONTINUOUS ------------------------------------------------------------------
@pytest.mark.parametrize("alg_id", ["perturbpoints", "sanitizetraces"])
def test_default_output_lies_on_the_public_lattice(run, alg_id):
    import geopriv

    layer, xs, ys = utm_layer(fields=(("trace", "integer"),), values=[[1]] * 30)
    result = run(alg_id, release_params(alg_id, layer, EPSILON=0.5, RATE=0.05))
    record = json.loads(result["PROVENANCE"])
    assert record["frame"] == "planar" and record["frame_area"] == "crs_scale_band"
    assert "working_crs" not in record  # UTM 50N is used as is
    assert record["lattice"] == "CRS origin" and record["grid_m"] > 0
    step = record["grid_m"] * geopriv.public_frame(UTM).scale_min  # from the CRS and the grid only
    xy = released_xy(result["OUTPUT"])
    assert len(xy) and np.allclose(xy / step, np.round(xy / step), rtol=0, atol=1e-6)
    assert not np.allclose(xs / step, np.round(xs / step), rtol=0, atol=1e-6)  # the inputs were not
    assert record["finite_precision"].startswith(f"snapped to a public {record['grid_m']:g} m lattice")


def test_grid_parameter_sets_the_lattice_step(run):
    import geopriv

    layer, _, _ = utm_layer()
    result = run("perturbpoints", {"INPUT": layer, "GRID": 5.0, "OUTPUT": "TEMPORARY_OUTPUT"})
    record = json.loads(result["PROVENANCE"])
    assert record["grid_m"] == 5.0
    step = 5.0 * geopriv.public_frame(UTM).scale_min
    xy = points_xy(result["OUTPUT"])
    assert np.allclose(xy / step, np.round(xy / step), rtol=0, atol=1e-6)


@pytest.mark.parametrize("alg_id", ["perturbpoints", "sanitizetraces"])
def test_continuous_is_recorded_in_the_provenance(run, alg_id):
    from qgis.core import QgsProcessingFeedback

    class Log(QgsProcessingFeedback):
        def __init__(self):
            super().__init__()
            self.warnings = []

        def pushWarning(self, text):  # noqa: N802
            self.warnings.append(text)

    layer, _, _ = utm_layer(fields=(("trace", "integer"),), values=[[1]] * 30)
    feedback = Log()
    result = run(alg_id, release_params(alg_id, layer, EPSILON=0.5, RATE=0.05, CONTINUOUS=True), feedback=feedback)
    record = json.loads(result["PROVENANCE"])
    assert record["finite_precision"].startswith("none: continuous")
    assert "grid_m" not in record and "lattice" not in record
    if alg_id == "perturbpoints":
        assert record["effective_epsilon_per_m"] is None and result["EFFECTIVE_EPSILON_PER_M"] is None
    assert any("no finite-precision bound" in w for w in feedback.warnings)
    xy = released_xy(result["OUTPUT"])
    assert len(xy) and not np.allclose(xy, np.round(xy), rtol=0, atol=1e-6)  # not rounded to a metre lattice


def test_continuous_with_a_grid_step_is_refused_with_the_qgis_names(run):
    from qgis.core import QgsProcessingException

    layer, _, _ = utm_layer()
    with pytest.raises(QgsProcessingException, match="continuous") as refused:
        run("perturbpoints", {"INPUT": layer, "CONTINUOUS": True, "GRID": 2.0, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert "'Grid step of the released points' parameter" in str(refused.value)
    assert "'Continuous output' parameter" in str(refused.value)


def test_location_dependent_takes_grid_and_continuous(run, tokyo_mechanism):
    xs, ys = tokyo_points(tokyo_mechanism)
    layer = memory_layer([f"POINT({x} {y})" for x, y in zip(xs, ys)], crs="EPSG:30166")
    params = release_params("perturblocationdependent", layer, tokyo_mechanism)
    gridded = json.loads(run("perturblocationdependent", dict(params, GRID=25.0))["PROVENANCE"])
    assert gridded["grid_m"] == 25.0 and "25 m lattice" in gridded["finite_precision"]
    continuous = json.loads(run("perturblocationdependent", dict(params, CONTINUOUS=True))["PROVENANCE"])
    assert continuous["finite_precision"].startswith("none: continuous") and "grid_m" not in continuous


def test_a_level_typed_as_ln4_is_exactly_ln4(provider, run):
    import math

    alg = provider.algorithm("perturbpoints")
    assert alg.parameterDefinition("LEVEL").defaultValue() == "ln4"
    result = run(
        "perturbpoints",
        {
            "INPUT": data_path("soho_cholera.gpkg", "deaths"),
            "LEVEL": "ln4",
            "RADIUS": 200.0,
            "SEED": 1,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    assert result["EPSILON_PER_M"] == math.log(4) / 200  # exactly, not 1.386294 / 200
    numeric = run(
        "perturbpoints",
        {
            "INPUT": data_path("soho_cholera.gpkg", "deaths"),
            "LEVEL": math.log(4),
            "RADIUS": 200.0,
            "SEED": 1,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    assert numeric["EPSILON_PER_M"] == math.log(4) / 200  # a float passed by processing.run keeps its precision


def test_help_panels_are_real_paragraphs(provider):
    for alg in provider.algorithms():
        text = alg.shortHelpString()
        assert "\n" not in text, alg.id()  # QGIS turns every source line into its own paragraph
