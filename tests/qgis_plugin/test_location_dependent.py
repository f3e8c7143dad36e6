"""geopriv:buildprivacymap and geopriv:perturblocationdependent on the shipped Tokyo population raster.

Mechanisms are built on a 25 x 25 average-resampled copy of the 200 x 200 raster (about a
second; the full raster takes minutes, which is what saving a mechanism is for).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from qgis_helpers import CancelAt, attributes, data_path, memory_layer, points_xy, shuffled

pytestmark = pytest.mark.qgis

LOW, HIGH = math.log(4) / 3000, math.log(4) / 600  # the dialog's defaults: geopriv.defaults.SUGGESTED_EPSILON_RANGE


def read_raster(path):
    from osgeo import gdal

    ds = gdal.Open(str(path))
    return ds.GetRasterBand(1).ReadAsArray().astype(float), ds


@pytest.fixture(scope="module")
def small_raster(tmp_path_factory):
    from osgeo import gdal

    path = tmp_path_factory.mktemp("tokyo") / "tokyo_25.tif"
    gdal.Translate(str(path), data_path("tokyo_density_200.tif"), width=25, height=25, resampleAlg="average")
    return str(path)


@pytest.fixture(scope="module")
def centroids(provider):
    """The 262 Tokyo municipalities as points (EPSG:30166), with their attributes, in random order.

    The file lists them by municipality code (GEOCODE: prefecture by prefecture, i.e. in spatial
    order), which a release would publish: the points are shuffled, ``fid`` is renumbered in the
    new order, and the code, numbered in the old one, is dropped.
    """
    import processing
    from qgis.core import QgsFeatureRequest, QgsProcessingContext

    context = QgsProcessingContext()
    context.setInvalidGeometryCheck(QgsFeatureRequest.GeometryNoCheck)  # a few polygons self-intersect
    points = processing.run(
        "native:pointonsurface",
        {"INPUT": data_path("tokyo_municipalities.gpkg"), "ALL_PARTS": False, "OUTPUT": "TEMPORARY_OUTPUT"},
        context=context,
    )["OUTPUT"]
    return shuffled(points, seed=1, renumber=("fid",), drop=("GEOCODE",), name="tokyo centroids")


@pytest.fixture(scope="module")
def built(provider, centroids, small_raster, tmp_path_factory):
    import processing

    saved = str(tmp_path_factory.mktemp("mech") / "tokyo_25.npz")
    result = processing.run(
        "geopriv:perturblocationdependent",
        {
            "INPUT": centroids,
            "POPULATION": small_raster,
            "SEED": 21,
            "SAVE_MECHANISM": saved,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    return result, saved


def test_build_privacy_map_on_the_full_raster(run):
    source = data_path("tokyo_density_200.tif")
    result = run("buildprivacymap", {"POPULATION": source, "OUTPUT": "TEMPORARY_OUTPUT"})
    eps, ds = read_raster(result["OUTPUT"])
    density, src = read_raster(source)
    assert eps.shape == (200, 200)
    assert ds.GetGeoTransform() == pytest.approx(src.GetGeoTransform())
    from qgis.core import QgsRasterLayer

    assert QgsRasterLayer(result["OUTPUT"], "eps").crs().authid() == "EPSG:30166"
    assert result["EPSILON_MIN"] == pytest.approx(LOW) and result["EPSILON_MAX"] == pytest.approx(HIGH)
    assert eps[density < 0].min() == pytest.approx(LOW) and eps[density < 0].max() == pytest.approx(LOW)  # sea
    densest = np.unravel_index(np.argmax(density), density.shape)
    assert eps[densest] == pytest.approx(HIGH)
    assert np.all(np.diff(eps[density >= 0][np.argsort(density[density >= 0])]) >= -1e-15)  # grows with density


def test_build_privacy_map_with_floor_and_slope(run, small_raster):
    result = run(
        "buildprivacymap", {"POPULATION": small_raster, "FLOOR": 1e-3, "SLOPE": 1e-6, "OUTPUT": "TEMPORARY_OUTPUT"}
    )
    eps, _ = read_raster(result["OUTPUT"])
    density, _ = read_raster(small_raster)
    valid = density >= 0
    assert np.allclose(eps[valid], 1e-3 + 1e-6 * density[valid])


def test_bad_rasters(run, tmp_path):
    from osgeo import gdal, osr
    from qgis.core import QgsProcessingException

    def raster(name, srs=None, values=None):
        path = str(tmp_path / name)
        ds = gdal.GetDriverByName("GTiff").Create(path, 10, 10, 1, gdal.GDT_Float32)
        ds.SetGeoTransform((400_000, 100, 0, 4_400_000, 0, -100) if srs != 4326 else (116, 0.01, 0, 40, 0, -0.01))
        if srs:
            ref = osr.SpatialReference()
            ref.ImportFromEPSG(srs)
            ds.SetProjection(ref.ExportToWkt())
        ds.GetRasterBand(1).WriteArray(np.ones((10, 10)) if values is None else values)
        ds = None
        return path

    cases = [
        ({"POPULATION": raster("nocrs.tif")}, "no CRS"),
        ({"POPULATION": raster("lonlat.tif", 4326)}, "not projected"),
        ({"POPULATION": raster("negative.tif", 32650, -np.ones((10, 10)))}, "negative population"),
        ({"POPULATION": raster("ok.tif", 32650), "FLOOR": 0.001}, "Give both the floor and the slope"),
    ]
    for params, message in cases:
        with pytest.raises(QgsProcessingException, match=message):
            run("buildprivacymap", {"OUTPUT": "TEMPORARY_OUTPUT", **params})


def test_perturb_location_dependent(built, centroids):
    result, saved = built
    out = result["OUTPUT"]
    assert out.featureCount() == centroids.featureCount() == 262
    assert out.crs().authid() == "EPSG:30166"
    assert attributes(out) == attributes(centroids)
    assert result["VERIFIED_MAX_RATIO"] <= 1.0
    record = json.loads(result["PROVENANCE"])
    assert record["mechanism"] == "eikonal" and record["mechanism_id"] == result["MECHANISM_ID"]
    moved = np.hypot(*(points_xy(out) - points_xy(centroids)).T)  # EPSG:30166 metres
    # between the noise of the densest (2 / HIGH = 866 m) and the emptiest (2 / LOW = 4,328 m) places
    assert 2 / HIGH * 0.5 < moved.mean() < 2 / LOW * 1.5
    assert result["SAVE_MECHANISM"] == saved


def test_saved_mechanism_reproduces_the_release(run, built, centroids):
    result, saved = built
    again = run(
        "perturblocationdependent",
        {"INPUT": centroids, "MECHANISM_FILE": saved, "SEED": 21, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    assert again["MECHANISM_ID"] == result["MECHANISM_ID"]
    assert np.array_equal(points_xy(again["OUTPUT"]), points_xy(result["OUTPUT"]))


def test_kernels_on_demand_release_the_same_points(run, built, centroids, small_raster):
    """Kernels computed on demand (loaded or built): the same release as held kernels, with the same seed."""
    result, saved = built
    alg = algorithm("perturblocationdependent")
    on_demand = alg.parameterDefinition("KERNELS").options().index("Computed on demand (large rasters: least memory)")
    loaded = run(
        "perturblocationdependent",
        {"INPUT": centroids, "MECHANISM_FILE": saved, "SEED": 21, "KERNELS": on_demand, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    assert loaded["MECHANISM_ID"] == result["MECHANISM_ID"]
    assert np.array_equal(points_xy(loaded["OUTPUT"]), points_xy(result["OUTPUT"]))
    built_lazy = run(
        "perturblocationdependent",
        {
            "INPUT": centroids,
            "POPULATION": small_raster,
            "SEED": 21,
            "KERNELS": on_demand,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    assert built_lazy["VERIFIED_MAX_RATIO"] == pytest.approx(result["VERIFIED_MAX_RATIO"], rel=1e-9)
    assert np.array_equal(points_xy(built_lazy["OUTPUT"]), points_xy(result["OUTPUT"]))


def test_points_in_another_crs(run, built, centroids, provider):
    import processing

    _, saved = built
    lonlat = processing.run(
        "native:reprojectlayer", {"INPUT": centroids, "TARGET_CRS": "EPSG:4326", "OUTPUT": "TEMPORARY_OUTPUT"}
    )["OUTPUT"]
    out = run("perturblocationdependent", {"INPUT": lonlat, "MECHANISM_FILE": saved, "OUTPUT": "TEMPORARY_OUTPUT"})[
        "OUTPUT"
    ]
    assert out.crs().authid() == "EPSG:4326" and out.featureCount() == 262
    report = run("utilityreport", {"ORIGINAL": centroids, "RELEASED": out, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert 2 / HIGH * 0.5 < report["MEAN_M"] < 2 / LOW * 1.5


def test_points_outside_the_raster(run, built):
    from qgis.core import QgsProcessingException

    _, saved = built
    london = data_path("soho_cholera.gpkg", "deaths")
    with pytest.raises(QgsProcessingException, match=r"outside (the mechanism's privacy map|the declared study area)"):
        run("perturblocationdependent", {"INPUT": london, "MECHANISM_FILE": saved, "OUTPUT": "TEMPORARY_OUTPUT"})
    out = run(
        "perturblocationdependent",
        {"INPUT": london, "MECHANISM_FILE": saved, "OUTSIDE": 1, "OUTPUT": "TEMPORARY_OUTPUT"},
    )["OUTPUT"]
    assert out.featureCount() == 324 and out.crs().authid() == "EPSG:3857"


def test_bad_mechanism_inputs(run, tmp_path):
    from qgis.core import QgsProcessingException

    points = memory_layer(["POINT(-20000 -30000)"], crs="EPSG:30166")
    with pytest.raises(QgsProcessingException, match="Give a population raster"):
        run("perturblocationdependent", {"INPUT": points, "OUTPUT": "TEMPORARY_OUTPUT"})
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"not a mechanism")
    with pytest.raises(QgsProcessingException, match="not a readable geopriv mechanism file"):
        run("perturblocationdependent", {"INPUT": points, "MECHANISM_FILE": str(corrupt), "OUTPUT": "TEMPORARY_OUTPUT"})


def test_cancellation_during_the_build(run, centroids, small_raster, tmp_path):
    from qgis.core import QgsProcessingException

    feedback = CancelAt(12.0)  # the build reports 10-70 %
    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run(
            "perturblocationdependent",
            {"INPUT": centroids, "POPULATION": small_raster, "OUTPUT": str(target)},
            feedback=feedback,
        )
    assert max(feedback.seen) < 70.0
    assert not target.exists()


def test_nodata_nearest_rule(run, small_raster):
    strict = run("buildprivacymap", {"POPULATION": small_raster, "OUTPUT": "TEMPORARY_OUTPUT"})
    near = run("buildprivacymap", {"POPULATION": small_raster, "NODATA": 1, "OUTPUT": "TEMPORARY_OUTPUT"})
    a, _ = read_raster(strict["OUTPUT"])
    b, _ = read_raster(near["OUTPUT"])
    density, _ = read_raster(small_raster)
    sea = density < 0
    assert sea.any()
    np.testing.assert_allclose(b[~sea], a[~sea])
    assert np.allclose(a[sea], LOW) and b[sea].max() > LOW  # the sea takes the coast's level


def test_posterior_mean_release(run, built, centroids):
    result, saved = built
    plain = run(
        "perturblocationdependent",
        {"INPUT": centroids, "MECHANISM_FILE": saved, "SEED": 5, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    remapped = run(
        "perturblocationdependent",
        {"INPUT": centroids, "MECHANISM_FILE": saved, "SEED": 5, "REMAP": True, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    record = json.loads(remapped["PROVENANCE"])
    assert "posterior mean" in record["remap"] and json.loads(plain["PROVENANCE"])["remap"] is None
    assert remapped["VERIFIED_MAX_RATIO"] == plain["VERIFIED_MAX_RATIO"]  # same mechanism, post-processed
    assert not np.array_equal(points_xy(remapped["OUTPUT"]), points_xy(plain["OUTPUT"]))
    assert attributes(remapped["OUTPUT"]) == attributes(centroids)


# --- the plugin's defaults are the library's -------------------------------------------------------------
def algorithm(alg_id):
    from qgis.core import QgsApplication

    alg = QgsApplication.processingRegistry().createAlgorithmById(f"geopriv:{alg_id}")
    assert alg is not None, alg_id
    return alg


#: QGIS parameter -> EikonalMechanism.build keyword (every mechanism option the algorithm offers)
BUILD_OPTIONS = {
    "MARGIN": "margin",
    "SMOOTH": "smooth",
    "JUMP": "jump",
    "OUTPUT_SPACING": "output_spacing",
    "PAD": "pad",
    "CAP": "cap",
    "MAX_STEP": "max_step",
    "KERNELS": "kernels",
}


def test_mechanism_options_default_to_eikonal_mechanism_build(provider):
    import dataclasses
    import inspect

    import geopriv

    alg = algorithm("perturblocationdependent")
    build = inspect.signature(geopriv.EikonalMechanism.build).parameters
    for name, keyword in BUILD_OPTIONS.items():
        default = alg.parameterDefinition(name).defaultValue()
        if name == "MAX_STEP":  # an enum: its default is an index into the offered steps
            default = alg.STEPS[default]
        if name == "KERNELS":  # an enum of the library's names: load's default ("auto"), build's when building
            assert (
                alg.kernel_modes()[default]
                == inspect.signature(geopriv.EikonalMechanism.load).parameters["kernels"].default
                == "auto"
            )
            continue
        if name == "MARGIN":  # a number field cannot show "auto": empty stands for it
            assert default is None and build[keyword].default == "auto"
            continue
        assert default == build[keyword].default, name
    outside = {f.name: f.default for f in dataclasses.fields(geopriv.EikonalMechanism)}["outside"]
    assert alg.OUTSIDE_RULES[alg.parameterDefinition("OUTSIDE").defaultValue()] == outside


def test_privacy_map_options_default_to_from_population(provider):
    import inspect

    import geopriv

    from_population = inspect.signature(geopriv.PrivacyMap.from_population).parameters
    for alg_id in ("buildprivacymap", "perturblocationdependent"):
        alg = algorithm(alg_id)
        assert alg.parameterDefinition("BAND").defaultValue() == from_population["band"].default
        units = alg.parameterDefinition("UNITS").defaultValue()
        assert ["per_km2", "per_cell"][units] == from_population["units"].default
        nodata = alg.parameterDefinition("NODATA").defaultValue()
        assert alg.NODATA_RULES[nodata] == from_population["nodata_epsilon"].default
        from geopriv.defaults import SUGGESTED_EPSILON_RANGE

        assert (LOW, HIGH) == SUGGESTED_EPSILON_RANGE
        assert alg.parameterDefinition("EPSILON_LOW").defaultValue() == pytest.approx(LOW)
        assert alg.parameterDefinition("EPSILON_HIGH").defaultValue() == pytest.approx(HIGH)


def test_a_build_without_options_is_the_librarys_default_build(run, monkeypatch, small_raster):
    """Left out (a script) or left as shown (the dialog): the mechanism is built as geopriv builds it by default;
    an emptied SMOOTH turns smoothing off; JUMP (off by default) can be set."""
    import functools
    import inspect

    import geopriv

    original = geopriv.EikonalMechanism.build
    seen = []

    @functools.wraps(original.__func__)  # the signature stays build's: the algorithm reads its defaults there
    def build(cls, privacy_map, **kwargs):
        seen.append(kwargs)
        return original(privacy_map, **kwargs)

    monkeypatch.setattr(geopriv.EikonalMechanism, "build", classmethod(build))
    defaults = {k: p.default for k, p in inspect.signature(original).parameters.items()}
    points = memory_layer(["POINT(-20000 -30000)"], crs="EPSG:30166")
    run(
        "perturblocationdependent",
        {"INPUT": points, "POPULATION": small_raster, "OUTSIDE": 1, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    alg = algorithm("perturblocationdependent")
    shown = {name: alg.parameterDefinition(name).defaultValue() for name in BUILD_OPTIONS}
    run(
        "perturblocationdependent",
        {"INPUT": points, "POPULATION": small_raster, "OUTSIDE": 1, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT", **shown},
    )
    for kwargs in seen:
        for keyword in BUILD_OPTIONS.values():
            assert kwargs[keyword] == defaults[keyword], keyword
    run(
        "perturblocationdependent",
        {
            "INPUT": points,
            "POPULATION": small_raster,
            "OUTSIDE": 1,
            "SEED": 1,
            "SMOOTH": None,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    assert len(seen) == 3 and seen[-1]["smooth"] is None
    run(
        "perturblocationdependent",
        {
            "INPUT": points,
            "POPULATION": small_raster,
            "OUTSIDE": 1,
            "SEED": 1,
            "JUMP": 0.2,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    assert len(seen) == 4 and seen[-1]["jump"] == 0.2
    for label, step in (("8", 8), ("no cap", None)):  # MAX_STEP offers 8 and the library's None (no cap)
        index = alg.parameterDefinition("MAX_STEP").options().index(label)
        run(
            "perturblocationdependent",
            {
                "INPUT": points,
                "POPULATION": small_raster,
                "OUTSIDE": 1,
                "SEED": 1,
                "MAX_STEP": index,
                "OUTPUT": "TEMPORARY_OUTPUT",
            },
        )
        assert seen[-1]["max_step"] == step


# ---------------------------------------------------------------------------- outputs that are inputs, error texts
@pytest.fixture
def points_file(tmp_path, small_raster):
    """30 points inside the small raster, in random order, as a GeoPackage file (an input on disk)."""
    import geopandas as gpd
    import rasterio

    with rasterio.open(small_raster) as ds:
        left, bottom, right, top = ds.bounds
        crs = ds.crs.to_wkt()
    rng = np.random.default_rng(5)
    xy = rng.uniform([left, bottom], [right, top], size=(30, 2)) * 0.8 + 0.1 * np.array([left + right, bottom + top])
    path = tmp_path / "points.gpkg"
    gpd.GeoDataFrame({"k": np.arange(30)}, geometry=gpd.points_from_xy(*xy.T), crs=crs).to_file(path)
    return str(path)


def test_build_privacy_map_refuses_to_write_over_its_input_raster(run, small_raster, tmp_path):
    import os
    import shutil

    from qgis.core import QgsProcessingException

    raster = tmp_path / "density.tif"
    shutil.copy(small_raster, raster)
    before = raster.read_bytes()
    (tmp_path / "link.tif").symlink_to(raster)
    os.link(raster, tmp_path / "hard.tif")
    for out in (raster, tmp_path / "link.tif", tmp_path / "hard.tif"):
        with pytest.raises(QgsProcessingException, match="is the input file"):
            run("buildprivacymap", {"POPULATION": str(raster), "OUTPUT": str(out)})
    assert raster.read_bytes() == before
    other = tmp_path / "map.tif"  # negative control
    assert run("buildprivacymap", {"POPULATION": str(raster), "OUTPUT": str(other)})["OUTPUT"] == str(other)


def test_perturb_location_dependent_refuses_outputs_that_are_inputs(run, built, points_file, small_raster, tmp_path):
    from qgis.core import QgsProcessingException

    _, mechanism_file = built
    link = tmp_path / "link.npz"
    link.symlink_to(points_file)
    protected = {p: Path(p).read_bytes() for p in (points_file, small_raster, mechanism_file)}
    cases = [
        {"POPULATION": small_raster, "SAVE_MECHANISM": points_file},  # the mechanism over the input layer
        {"POPULATION": small_raster, "SAVE_MECHANISM": str(link)},  # ... through a symbolic link
        {"POPULATION": small_raster, "SAVE_MECHANISM": small_raster},  # over the population raster
        {"MECHANISM_FILE": mechanism_file, "SAVE_MECHANISM": mechanism_file},  # over the mechanism it loads
        {"POPULATION": small_raster, "OUTPUT": points_file},  # the released points over the true ones
    ]
    for params in cases:
        with pytest.raises(QgsProcessingException, match="is the input file"):
            run("perturblocationdependent", {"INPUT": points_file, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT", **params})
    assert all(Path(p).read_bytes() == data for p, data in protected.items())


def test_foreign_error_texts_are_withheld_and_geoprivs_own_are_shown(run, small_raster, monkeypatch):
    """A pandas/pyproj/numpy text can quote data values (coordinates): QGIS shows the type only."""
    import geopriv
    import pandas as pd
    from qgis.core import QgsProcessingException

    original = geopriv.PrivacyMap.from_population

    @functools.wraps(original)  # the algorithm reads the library's defaults from the signature
    def leaky(*args, **kwargs):
        pd.to_datetime(pd.Series(["-15539.127 not a date"]), format="%Y")  # pandas quotes the value

    with pytest.raises(ValueError, match="-15539"):
        leaky()
    monkeypatch.setattr(geopriv.PrivacyMap, "from_population", leaky)
    with pytest.raises(QgsProcessingException) as info:
        run("buildprivacymap", {"POPULATION": small_raster, "OUTPUT": "TEMPORARY_OUTPUT"})
    text = str(info.value)
    assert "-15539" not in text and "ValueError" in text and "withheld" in text and "GEOPRIV_TRACEBACK" in text

    @functools.wraps(original)
    def bare(*args, **kwargs):
        raise ValueError("no density at 6712903.4, 51.51")  # a bare ValueError: withheld as well

    monkeypatch.setattr(geopriv.PrivacyMap, "from_population", bare)
    with pytest.raises(QgsProcessingException) as info:
        run("buildprivacymap", {"POPULATION": small_raster, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert "6712903" not in str(info.value) and "ValueError" in str(info.value)

    @functools.wraps(original)
    def ours(*args, **kwargs):
        raise geopriv.RasterError("The raster has 3 band(s); band=4 does not exist.")

    monkeypatch.setattr(geopriv.PrivacyMap, "from_population", ours)
    with pytest.raises(QgsProcessingException, match="band=4 does not exist"):
        run("buildprivacymap", {"POPULATION": small_raster, "OUTPUT": "TEMPORARY_OUTPUT"})


@pytest.mark.parametrize(
    "alg_id, extra",
    [
        ("perturbpoints", {"EPSILON": 0.05}),
        ("synthesize", {"EPSILON": 1.0}),
    ],
)
def test_every_algorithm_refuses_an_output_over_its_input(run, points_file, tmp_path, alg_id, extra):
    """The base checks every destination against every input before any work (issue 30: was two algorithms)."""
    from qgis.core import QgsProcessingException

    before = Path(points_file).read_bytes()
    link = tmp_path / "link.gpkg"
    link.symlink_to(points_file)
    for out in (points_file, str(link)):
        with pytest.raises(QgsProcessingException, match="is the input file"):
            run(alg_id, {"INPUT": points_file, "SEED": 1, "OUTPUT": out, **extra})
    assert Path(points_file).read_bytes() == before
