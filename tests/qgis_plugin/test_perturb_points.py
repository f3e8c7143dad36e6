"""geopriv:perturbpoints in a real QGIS, on the shipped data."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from qgis_helpers import CancelAt, attributes, data_path, memory_layer, points_xy, vector

pytestmark = pytest.mark.qgis

SOHO = ("soho_cholera.gpkg", "deaths")


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
    assert '"mechanism": "planar_laplace"' in result["PROVENANCE"] and '"seeded": true' in result["PROVENANCE"]


def test_geolife_geographic_crs_to_geopackage(run, tmp_path):
    source = data_path("geolife_sample.gpkg")
    target = str(tmp_path / "released.gpkg")
    result = run("perturbpoints", {"INPUT": source, "EPSILON": 0.01, "OUTPUT": target})
    assert result["OUTPUT"] == target
    out = vector(target)
    assert out.featureCount() == 5908
    assert out.crs().authid() == "EPSG:4326"
    assert attributes(out) == attributes(source)  # fid, ids and the time text kept exactly
    assert result["EPSILON_PER_M"] == 0.01
    assert '"seeded": false' in result["PROVENANCE"]
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
    xs = [448_500 + 10 * i for i in range(50)]
    layer = memory_layer([f"POINT({x} 4416500)" for x in xs])
    region = memory_layer(["POLYGON((448000 4416000, 449500 4416000, 449500 4417000, 448000 4417000, 448000 4416000))"],
                          geometry="Polygon")
    result = run("perturbpoints", {"INPUT": layer, "RADIUS": 100.0, "GRID": 10.0, "REGION": region, "SEED": 1,
                                   "OUTPUT": "TEMPORARY_OUTPUT"})
    xy = points_xy(result["OUTPUT"])
    record = json.loads(result["PROVENANCE"])
    step = 10.0 * (record["scale_max_units_per_m"] + record["scale_min_units_per_m"]) / 2  # 10 m in UTM units
    assert np.allclose(xy / step, np.round(xy / step), atol=1e-6)  # on the 10 m grid
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


def test_cancellation_stops_between_chunks(run, tmp_path):
    """Cancelled during the first of six chunks: the later chunks never run and nothing is written."""
    from qgis.core import QgsProcessingException

    feedback = CancelAt(12.0)  # reading is 0-10 %, then six chunks of ~1,000 points share 10-90 %
    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run("perturbpoints", {"INPUT": data_path("geolife_sample.gpkg"), "OUTPUT": str(target)}, feedback=feedback)
    assert max(feedback.seen) < 30.0
    assert not target.exists()


def test_cancellation_before_start(run):
    from qgis.core import QgsProcessingException, QgsProcessingFeedback

    feedback = QgsProcessingFeedback()
    feedback.cancel()
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run("perturbpoints", {"INPUT": data_path(*SOHO), "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)


def test_progress_is_reported(run):
    from qgis.core import QgsProcessingFeedback

    feedback = QgsProcessingFeedback()
    seen = []
    feedback.progressChanged.connect(seen.append)
    run("perturbpoints", {"INPUT": data_path("geolife_sample.gpkg"), "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    assert len(seen) >= 6 and seen == sorted(seen) and seen[-1] == 100


def test_library_warnings_reach_the_log(run):
    """geopriv's DistortionWarning (data spanning thousands of km) is a Processing warning, not an error."""
    from qgis.core import QgsProcessingFeedback

    class Log(QgsProcessingFeedback):
        warnings = []

        def pushWarning(self, text):  # noqa: N802
            self.warnings.append(text)

    layer = memory_layer(["POINT(0 0)", "POINT(40 60)"], crs="EPSG:4326")
    feedback = Log()
    out = run("perturbpoints", {"INPUT": layer, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)["OUTPUT"]
    assert out.featureCount() == 2
    assert any(w.startswith("DistortionWarning") for w in feedback.warnings)
