"""QGIS shows QGIS advice only (issue 31), and says the unit of every epsilon.

* an error is the library's problem and its fix for QGIS (``user_message(exc, "qgis")``): no Python code, no
  command-line option, short; the QGIS names it uses are the dialogs' own;
* a planar Laplace epsilon that protects almost nothing is logged as a warning (with its expected displacement);
  ln 4 within 200 m is not;
* epsilon parameters say "per ground metre", the synthetic one "dimensionless (total)".
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from qgis_helpers import Log, data_path, memory_layer

pytestmark = pytest.mark.qgis

PYTHON_CODE = re.compile(r"gdf\.|\b[a-z_]+=[\[('<\w]|math\.log")
UTM = "EPSG:32650"


def refused(run, alg_id, params):
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException) as error:
        run(alg_id, params)
    message = str(error.value)
    assert not PYTHON_CODE.search(message), message
    assert "--" not in message and "command line" not in message and "(Python)" not in message, message
    return message


def points(n=60, seed=0, ordered=False, fields=(("count", "integer"),), values=None, crs=UTM):
    rng = np.random.default_rng(seed)
    xs, ys = 448_000 + rng.uniform(0, 2_000, n), 4_416_000 + rng.uniform(0, 2_000, n)
    if ordered:
        order = np.argsort(xs)
        xs, ys = xs[order], ys[order]
    values = values(xs, ys) if values else [[int(c)] for c in rng.integers(0, 10, n)]
    return memory_layer([f"POINT({x} {y})" for x, y in zip(xs, ys)], crs=crs, fields=fields, values=values)


def test_a_layer_in_spatial_order_gets_the_qgis_fix_only(run):
    message = refused(run, "perturbpoints", {"INPUT": points(ordered=True), "OUTPUT": "TEMPORARY_OUTPUT"})
    assert "'Order by expression'" in message and "'The row order is public (keep it)'" in message
    assert "shuffle" in message.lower() and "keep=" not in message
    assert len(message) < 700, len(message)  # was a 1,900-character wall of Python, CLI and QGIS


def test_location_fields_get_the_qgis_fix_only(run):
    import pyproj

    to_lonlat = pyproj.Transformer.from_crs(UTM, "EPSG:4326", always_xy=True)

    def lonlat(xs, ys):
        lon, lat = to_lonlat.transform(xs, ys)
        return [[float(a), float(b)] for a, b in zip(lon, lat)]

    layer = points(fields=(("lon", "double"), ("lat", "double")), values=lonlat)
    message = refused(run, "perturbpoints", {"INPUT": layer, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert "'lon'" in message and "'Drop field(s)'" in message and "'Keep these attribute columns'" in message


def test_a_layer_without_crs_gets_the_qgis_fix_only(run):
    message = refused(run, "perturbpoints", {"INPUT": points(crs=None), "OUTPUT": "TEMPORARY_OUTPUT"})
    assert "no CRS" in message and "'Assign projection'" in message


def test_degrees_in_a_metric_crs_are_a_crs_error(run):
    rng = np.random.default_rng(1)
    lon, lat = 116.3 + rng.uniform(0, 0.05, 40), 39.9 + rng.uniform(0, 0.05, 40)
    layer = memory_layer(
        [f"POINT({x} {y})" for x, y in zip(lon, lat)],
        crs="EPSG:3857",
        fields=(("count", "integer"),),
        values=[[1]] * 40,
    )
    message = refused(run, "perturbpoints", {"INPUT": layer, "KEEP_ORDER": True, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert "Pseudo-Mercator" in message and "'Assign projection'" in message
    assert not any(f"{v:.3f}" in message for v in np.concatenate([lon, lat]))


def test_epsilon_zero_gets_the_qgis_typical_values(run):
    message = refused(run, "perturbpoints", {"INPUT": points(), "EPSILON": 0.0, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert "1.386 (ln 4) within a radius of 200 metres" in message


def test_an_epsilon_that_protects_nothing_is_a_warning_in_the_log(run):
    log = Log()
    run("perturbpoints", {"INPUT": points(), "EPSILON": 200.0, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=log)
    weak = [w for w in log.warnings if w.startswith("WeakProtectionWarning:")]
    assert len(weak) == 1, log.warnings
    assert "0.01 m on average" in weak[0] and "'Epsilon' empty" in weak[0]
    assert "--" not in weak[0] and not PYTHON_CODE.search(weak[0])
    log = Log()
    run(
        "perturbpoints",
        {"INPUT": points(), "LEVEL": 1.3862943611198906, "RADIUS": 200.0, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT"},
        feedback=log,
    )
    assert not [w for w in log.warnings if "Warning:" in w], log.warnings


def test_epsilon_parameters_say_their_unit(provider):
    for alg_id in ("perturbpoints", "sanitizetraces"):
        assert "per ground metre" in provider.algorithm(alg_id).parameterDefinition("EPSILON").description()
    assert "per ground metre" in provider.algorithm("diffuse").parameterDefinition("EPSILON_TABLE").description()
    for name in ("EPSILON_LOW", "EPSILON_HIGH"):
        assert "per ground metre" in provider.algorithm("buildprivacymap").parameterDefinition(name).description()
    assert "dimensionless (total)" in provider.algorithm("synthesize").parameterDefinition("EPSILON").description()


def test_the_qgis_names_in_the_librarys_fixes_are_the_dialogs(provider):
    """The library words the QGIS fixes with the dialogs' parameter labels: they must exist."""
    from geopriv.attributes import QGIS_KEEP_LABEL, QGIS_KEEP_ORDER_LABEL

    labels = [d.description() for alg in provider.algorithms() for d in alg.parameterDefinitions()]
    for quoted in (
        QGIS_KEEP_LABEL,
        QGIS_KEEP_ORDER_LABEL,
        "Public study area",
        "Grid step of the released points",
        "Continuous output",
        "Id field of the people",
        "Trace id field",
        "Time field",
        "Epsilon",
    ):
        assert any(label.startswith(quoted) for label in labels), quoted


def test_a_gpkg_in_spatial_order_shuffled_as_advised_is_released(run, tmp_path):
    """The advice works: the deaths sorted west to east are refused; 'Order by expression' with randf() (fid dropped)
    gives a layer that is released."""
    import processing

    def order_by(source, expression, name):
        target = str(tmp_path / f"{name}.gpkg")
        no_fid = processing.run(
            "native:deletecolumn", {"INPUT": source, "COLUMN": ["fid"], "OUTPUT": "TEMPORARY_OUTPUT"}
        )["OUTPUT"]
        processing.run(
            "native:orderbyexpression",
            {"INPUT": no_fid, "EXPRESSION": expression, "ASCENDING": True, "NULLS_FIRST": False, "OUTPUT": target},
        )
        return target

    west_east = order_by(data_path("soho_cholera.gpkg", "deaths"), "x($geometry)", "west_east")
    assert "randf()" in refused(run, "perturbpoints", {"INPUT": west_east, "OUTPUT": "TEMPORARY_OUTPUT"})
    shuffled = order_by(west_east, "randf()", "shuffled")
    assert run("perturbpoints", {"INPUT": shuffled, "OUTPUT": "TEMPORARY_OUTPUT"})["OUTPUT"].featureCount() == 324
