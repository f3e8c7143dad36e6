"""geopriv:utilityreport in a real QGIS."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from qgis_helpers import memory_layer, vector

pytestmark = pytest.mark.qgis

COLUMNS = ["n", "mean_m", "median_m", "alpha_0.9_m", "max_m", "mse_m2", "rmse_m"]


SOHO = Path(__file__).resolve().parents[2] / "geopriv" / "data" / "soho_cholera.gpkg"  # shipped with the package


def data_path(name: str, layer: str | None = None) -> str:
    """The shipped Soho layer as a QGIS source string (no data outside the checkout)."""
    assert name == SOHO.name and SOHO.exists()
    return f"{SOHO}|layername={layer}" if layer else str(SOHO)


def table_row(layer):
    layer = vector(layer)
    rows = [f.attributes() for f in layer.getFeatures()]
    assert len(rows) == 1
    return dict(zip([f.name() for f in layer.fields()], rows[0]))


@pytest.fixture(scope="module")
def soho_release(provider, tmp_path_factory):
    import processing

    target = str(tmp_path_factory.mktemp("soho") / "released.gpkg")
    processing.run(
        "geopriv:perturbpoints",
        {"INPUT": data_path("soho_cholera.gpkg", "deaths"), "RADIUS": 50.0, "SEED": 8, "OUTPUT": target},
    )
    return target


def test_report_table_and_numbers(run, soho_release):
    result = run(
        "utilityreport",
        {"ORIGINAL": data_path("soho_cholera.gpkg", "deaths"), "RELEASED": soho_release, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    table = result["OUTPUT"]
    assert table.wkbType() == 100  # QgsWkbTypes.NoGeometry
    row = table_row(table)
    assert list(row) == COLUMNS
    assert row["n"] == result["N"] == 324
    eps = math.log(4) / 50
    assert row["mean_m"] == pytest.approx(2 / eps, rel=0.15)
    assert row["median_m"] <= row["alpha_0.9_m"] <= row["max_m"]
    assert row["rmse_m"] == pytest.approx(math.sqrt(row["mse_m2"]))
    assert result["ALPHA_M"] == row["alpha_0.9_m"] and result["MEAN_M"] == row["mean_m"]


def test_match_by_field_and_other_quantile(run, soho_release, provider):
    """Match rows by 'fid' with the released rows in reverse order: same statistics as by order."""
    import processing

    reordered = processing.run(
        "native:orderbyexpression",
        {
            "INPUT": soho_release,
            "EXPRESSION": '"fid"',
            "ASCENDING": False,
            "NULLS_FIRST": False,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )["OUTPUT"]
    by_order = run(
        "utilityreport",
        {
            "ORIGINAL": data_path("soho_cholera.gpkg", "deaths"),
            "RELEASED": soho_release,
            "QUANTILE": 0.5,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    by_field = run(
        "utilityreport",
        {
            "ORIGINAL": data_path("soho_cholera.gpkg", "deaths"),
            "RELEASED": reordered,
            "ID_FIELD": "fid",
            "QUANTILE": 0.5,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    assert by_field["MEAN_M"] == pytest.approx(by_order["MEAN_M"])
    assert by_field["ALPHA_M"] == pytest.approx(by_order["MEDIAN_M"])  # alpha(0.5) is the median
    assert "alpha_0.5_m" in table_row(by_field["OUTPUT"])


def test_layers_in_different_crs(run, soho_release, provider):
    import processing

    lonlat = processing.run(
        "native:reprojectlayer", {"INPUT": soho_release, "TARGET_CRS": "EPSG:4326", "OUTPUT": "TEMPORARY_OUTPUT"}
    )["OUTPUT"]
    a = run(
        "utilityreport",
        {"ORIGINAL": data_path("soho_cholera.gpkg", "deaths"), "RELEASED": soho_release, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    b = run(
        "utilityreport",
        {"ORIGINAL": data_path("soho_cholera.gpkg", "deaths"), "RELEASED": lonlat, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    assert b["MEAN_M"] == pytest.approx(a["MEAN_M"], rel=1e-6)


def test_bad_inputs(run, soho_release):
    from qgis.core import QgsProcessingException

    original = data_path("soho_cholera.gpkg", "deaths")
    with pytest.raises(QgsProcessingException, match="has no field 'Id'"):
        run(
            "utilityreport",
            {
                "ORIGINAL": original,
                "RELEASED": memory_layer(["POINT(0 0)"], crs="EPSG:3857"),
                "ID_FIELD": "Id",
                "OUTPUT": "TEMPORARY_OUTPUT",
            },
        )
    short = memory_layer(["POINT(-15000 6700000)"] * 3, crs="EPSG:3857")
    with pytest.raises(QgsProcessingException, match="have no released counterpart"):
        run("utilityreport", {"ORIGINAL": original, "RELEASED": short, "OUTPUT": "TEMPORARY_OUTPUT"})
    with pytest.raises(QgsProcessingException, match="quantile must be strictly between 0 and 1"):
        run(
            "utilityreport",
            {"ORIGINAL": original, "RELEASED": soho_release, "QUANTILE": 1.0, "OUTPUT": "TEMPORARY_OUTPUT"},
        )


def test_quantile_parameter_and_its_former_id(run, soho_release, provider):
    """QUANTILE (not DELTA: no (epsilon, delta) reader should take it for a privacy parameter); DELTA still works."""
    import inspect

    from qgis.core import QgsProcessingException, QgsProcessingFeedback

    import geopriv

    alg = provider.algorithm("utilityreport")
    param = alg.parameterDefinition("QUANTILE")
    assert param is not None and alg.parameterDefinition("DELTA") is None
    assert param.defaultValue() == inspect.signature(geopriv.utility_report).parameters["quantile"].default
    assert "delta" not in param.description().lower()

    original = data_path("soho_cholera.gpkg", "deaths")

    class Feedback(QgsProcessingFeedback):
        warnings = []

        def pushWarning(self, text):  # noqa: N802
            self.warnings.append(text)

    feedback = Feedback()
    old = run(
        "utilityreport",
        {"ORIGINAL": original, "RELEASED": soho_release, "DELTA": 0.5, "OUTPUT": "TEMPORARY_OUTPUT"},
        feedback=feedback,
    )
    new = run(
        "utilityreport", {"ORIGINAL": original, "RELEASED": soho_release, "QUANTILE": 0.5, "OUTPUT": "TEMPORARY_OUTPUT"}
    )
    assert old["ALPHA_M"] == pytest.approx(new["ALPHA_M"]) == pytest.approx(new["MEDIAN_M"])
    assert any("QUANTILE" in w for w in feedback.warnings)
    with pytest.raises(QgsProcessingException, match="QUANTILE only"):
        run(
            "utilityreport",
            {
                "ORIGINAL": original,
                "RELEASED": soho_release,
                "DELTA": 0.5,
                "QUANTILE": 0.5,
                "OUTPUT": "TEMPORARY_OUTPUT",
            },
        )


def test_the_same_layer_as_both_inputs_is_refused_before_the_run(provider):
    from qgis.core import QgsProcessingContext

    from qgis_helpers import data_path

    alg = provider.algorithm("utilityreport")
    source = data_path("soho_cholera.gpkg", "deaths")
    ok, message = alg.checkParameterValues(
        {"ORIGINAL": source, "RELEASED": source, "OUTPUT": "TEMPORARY_OUTPUT"}, QgsProcessingContext()
    )
    assert not ok and "same layer" in message
