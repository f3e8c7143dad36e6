"""KEEP_ORDER and layers whose features are in spatial order.

* A release lists the features in the input's order, so geopriv refuses a layer in spatial order
  (FlatGeobuf files are Hilbert-sorted, spatial joins, database exports): the run stops with the
  library's explanation, the QGIS way to shuffle a layer and the QGIS parameter that keeps the
  order deliberately, and never a coordinate.
* KEEP_ORDER ("The row order is public (keep it)") passes the library's ``"<row order>"`` in
  ``keep=``: the layer is released in its order and the provenance names it in kept_columns.
* The advised fix works in QGIS: 'Order by expression' with randf(), after dropping a
  GeoPackage's fid (which a GeoPackage output would use to restore the old order).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from qgis_helpers import Log, attributes, data_path, memory_layer, points_xy

pytestmark = pytest.mark.qgis

RELEASES = {
    "perturbpoints": "Perturb points (geo-indistinguishability)",
    "perturblocationdependent": "Perturb points with location-dependent privacy",
    "sanitizetraces": "Sanitize traces (predictive mechanism)",
}
UTM = "EPSG:32650"
LABEL = "The row order is public (keep it)"
FIELDS = (("count", "integer"), ("trace", "integer"), ("t", "double"))


def coordinate_texts(xs, ys):
    """Ways a coordinate could appear in a message: integer metres and a few decimals."""
    texts = set()
    for v in np.concatenate([xs, ys]):
        texts |= {str(int(v)), f"{v:.1f}", f"{v:.2f}", f"{v:g}", repr(float(v))}
    return texts


@pytest.fixture(scope="module")
def tokyo_mechanism(provider, tmp_path_factory):
    """A small saved location-dependent mechanism (20 x 20 cells of the Tokyo raster) and its raster's geotransform."""
    import processing
    from osgeo import gdal

    folder = tmp_path_factory.mktemp("row_order")
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


def west_to_east(alg_id, tokyo_mechanism, n=60, seed=0):
    """n points listed from west to east (one trace, random times and counts): a spatial order and nothing else."""
    rng = np.random.default_rng(seed)
    if alg_id == "perturblocationdependent":  # inside the mechanism's raster
        _, (x0, dx, y0, dy) = tokyo_mechanism
        xs, ys, crs = x0 + dx * 20 * rng.uniform(0.3, 0.7, n), y0 + dy * 20 * rng.uniform(0.3, 0.7, n), "EPSG:30166"
    else:
        xs, ys, crs = 448_000 + rng.uniform(0, 2_000, n), 4_416_000 + rng.uniform(0, 2_000, n), UTM
    order = np.argsort(xs)
    xs, ys = xs[order], ys[order]
    values = [[int(c), 1, float(t)] for c, t in zip(rng.integers(0, 10, n), rng.uniform(0, 86_400, n))]
    layer = memory_layer([f"POINT({x} {y})" for x, y in zip(xs, ys)], crs=crs, fields=FIELDS, values=values)
    return layer, xs, ys


def params(alg_id, layer, tokyo_mechanism, **extra):
    out = {"INPUT": layer, "SEED": 3, "OUTPUT": "TEMPORARY_OUTPUT", **extra}
    if alg_id == "perturblocationdependent":
        out["MECHANISM_FILE"] = tokyo_mechanism[0]
    if alg_id == "sanitizetraces":  # the time order is public; the features are listed in another order
        out.update(TRAJ_ID_FIELD="trace", TIME_FIELD="t", RATE=0.05, LEDGER="TEMPORARY_OUTPUT")
    return out


# --- the parameter ------------------------------------------------------------------------------------
@pytest.mark.parametrize("alg_id", sorted(RELEASES))
def test_keep_order_is_an_advanced_boolean_off_by_default(provider, alg_id):
    from qgis.core import QgsProcessingParameterBoolean, QgsProcessingParameterDefinition

    param = provider.algorithm(alg_id).parameterDefinition("KEEP_ORDER")
    assert isinstance(param, QgsProcessingParameterBoolean)
    assert param.description() == LABEL
    assert param.defaultValue() is False
    assert param.flags() & QgsProcessingParameterDefinition.FlagAdvanced
    text = param.help()
    for phrase in (
        "FlatGeobuf",
        "Hilbert",
        "spatial joins",
        "database exports",
        "publishes the order of the true points",
        "'Order by expression'",
        "randf()",
        "'Drop field(s)'",
    ):
        assert phrase in text, phrase


def test_only_releases_have_it(provider):
    for alg in provider.algorithms():
        assert (alg.parameterDefinition("KEEP_ORDER") is not None) == (alg.name() in RELEASES), alg.name()


def test_the_plugin_passes_the_librarys_row_order_label():
    from geopriv.attributes import ROW_ORDER

    from geopriv_qgis.algorithms import base

    assert base.ROW_ORDER == ROW_ORDER


# --- refused, with the QGIS fix ---------------------------------------------------------------------------
@pytest.mark.parametrize("alg_id", sorted(RELEASES))
def test_a_layer_in_spatial_order_is_refused_with_the_qgis_fix(run, alg_id, tokyo_mechanism):
    from qgis.core import QgsProcessingException

    layer, xs, ys = west_to_east(alg_id, tokyo_mechanism)
    feedback = Log()
    with pytest.raises(QgsProcessingException) as refused:
        run(alg_id, params(alg_id, layer, tokyo_mechanism), feedback=feedback)
    message = str(refused.value)
    assert message.startswith(f"{RELEASES[alg_id]}: The row order gives the true locations away")  # the library's
    assert "publish the order of the true points" in message
    # the QGIS way to shuffle, and the QGIS parameter that keeps the order deliberately
    assert "'Order by expression'" in message and "randf()" in message and "'Drop field(s)'" in message
    assert f"tick the advanced parameter '{LABEL}' (KEEP_ORDER)" in message
    assert "'count'" not in message and "'t'" not in message  # ordinary fields are not blamed
    assert "the 'Drop field(s)' algorithm removes fields" not in message  # no field to drop
    for text in coordinate_texts(xs, ys):
        assert text not in message
        assert not any(text in line for line in feedback.lines)


@pytest.mark.parametrize("alg_id", sorted(RELEASES))
def test_keep_order_releases_the_layer_in_its_order(run, alg_id, tokyo_mechanism):
    layer, _, _ = west_to_east(alg_id, tokyo_mechanism)
    feedback = Log()
    result = run(alg_id, params(alg_id, layer, tokyo_mechanism, KEEP_ORDER=True), feedback=feedback)
    record = json.loads(result["PROVENANCE"])
    assert record["kept_columns"] == ["<row order>"]
    out = result["OUTPUT"]
    assert out.featureCount() == layer.featureCount() == record["n"]
    assert [a[:3] for a in attributes(out)] == attributes(layer)  # in the input's order
    assert any("row order is kept" in w for w in feedback.warnings)


def test_keep_order_adds_to_the_kept_columns(run):
    """KEEP_ORDER with KEEP: both are kept; the row order listed in KEEP (a script) is not passed twice."""
    layer, _, _ = west_to_east("perturbpoints", None)
    both = run("perturbpoints", {"INPUT": layer, "KEEP": ["count"], "KEEP_ORDER": True, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert json.loads(both["PROVENANCE"])["kept_columns"] == ["<row order>", "count"]
    twice = run(
        "perturbpoints", {"INPUT": layer, "KEEP": ["<row order>"], "KEEP_ORDER": True, "OUTPUT": "TEMPORARY_OUTPUT"}
    )
    assert json.loads(twice["PROVENANCE"])["kept_columns"] == ["<row order>"]


def test_traces_in_their_time_order_need_no_keep_order(run):
    """The trace id and time fields are public: features in their order are released without KEEP_ORDER."""
    layer, _, _ = west_to_east("sanitizetraces", None)
    rows = sorted(range(layer.featureCount()), key=lambda i: attributes(layer)[i][2])  # by time
    xy = points_xy(layer)[rows]
    in_time = memory_layer(
        [f"POINT({x} {y})" for x, y in xy], crs=UTM, fields=FIELDS, values=[attributes(layer)[i] for i in rows]
    )
    for extra in ({"TIME_FIELD": "t"}, {"TIME_FIELD": None}):  # empty: the feature order is the time order
        result = run(
            "sanitizetraces",
            {
                "INPUT": in_time,
                "TRAJ_ID_FIELD": "trace",
                "RATE": 0.05,
                "SEED": 1,
                "OUTPUT": "TEMPORARY_OUTPUT",
                "LEDGER": "TEMPORARY_OUTPUT",
                **extra,
            },
        )
        assert json.loads(result["PROVENANCE"])["kept_columns"] == []


# --- the advised fix works in QGIS ------------------------------------------------------------------------
def test_the_advised_shuffle_fixes_a_geopackage_in_spatial_order(run, tmp_path):
    """The Soho deaths as a GeoPackage listed from west to east: refused; shuffled with 'Order by expression' and
    randf() but with its fid kept, the GeoPackage comes back in the old order (refused again); with the fid dropped
    first, as advised, the shuffled layer is released."""
    import processing
    from qgis.core import QgsProcessingException

    def drop_fid(source):
        return processing.run(
            "native:deletecolumn", {"INPUT": source, "COLUMN": ["fid"], "OUTPUT": "TEMPORARY_OUTPUT"}
        )["OUTPUT"]

    def order_by(source, expression, name):
        target = str(tmp_path / f"{name}.gpkg")
        processing.run(
            "native:orderbyexpression",
            {"INPUT": source, "EXPRESSION": expression, "ASCENDING": True, "NULLS_FIRST": False, "OUTPUT": target},
        )
        return target

    def refused(source):
        with pytest.raises(QgsProcessingException) as error:
            run("perturbpoints", {"INPUT": source, "OUTPUT": "TEMPORARY_OUTPUT"})
        return str(error.value)

    west_east = order_by(drop_fid(data_path("soho_cholera.gpkg", "deaths")), "x($geometry)", "west_east")
    assert np.all(np.diff(points_xy(west_east)[:, 0]) >= 0)
    assert "The row order gives the true locations away" in refused(west_east)

    with_fid = order_by(west_east, "randf()", "shuffled_with_fid")
    assert np.all(np.diff(points_xy(with_fid)[:, 0]) >= 0)  # the fid field put the features back in order
    assert "The row order gives the true locations away" in refused(with_fid)

    shuffled = order_by(drop_fid(west_east), "randf()", "shuffled")
    assert not np.all(np.diff(points_xy(shuffled)[:, 0]) >= 0)
    result = run("perturbpoints", {"INPUT": shuffled, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert result["OUTPUT"].featureCount() == 324
    assert json.loads(result["PROVENANCE"])["kept_columns"] == []
