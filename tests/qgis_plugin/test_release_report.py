"""geopriv:utilityreport's HTML output: the release report (geopriv.report.release_report) in a real QGIS."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from qgis_helpers import data_path

pytestmark = pytest.mark.qgis


@pytest.fixture(scope="module")
def soho_release(provider, tmp_path_factory):
    """The Soho deaths released by geopriv:perturbpoints: the layer and the release's PROVENANCE output."""
    import processing

    target = str(tmp_path_factory.mktemp("soho") / "released.gpkg")
    result = processing.run(
        "geopriv:perturbpoints",
        {
            "INPUT": data_path("soho_cholera.gpkg", "deaths"),
            "LEVEL": math.log(4),
            "RADIUS": 200.0,
            "SEED": 8,
            "OUTPUT": target,
        },
    )
    return target, result["PROVENANCE"]


def test_the_report_is_an_html_output(provider):
    """The Processing dialog adds every QgsProcessingOutputHtml result to its Results Viewer (AlgorithmDialog.finish
    tests isinstance): an optional .html file destination is one."""
    from qgis.core import QgsProcessingOutputHtml

    alg = provider.algorithm("utilityreport")
    assert isinstance(alg.outputDefinition("REPORT"), QgsProcessingOutputHtml)
    param = alg.parameterDefinition("REPORT")
    assert param.type() == "fileDestination" and param.flags() & param.FlagOptional
    assert param.defaultFileExtension() == "html"
    # Processing lists an .html file destination as an HTML output, which its results viewer shows
    assert alg.outputDefinition("REPORT").type() == "outputHtml"
    assert "private" in param.description().lower()


def test_report_with_the_release_record(run, soho_release, tmp_path):
    released, provenance = soho_release
    report = tmp_path / "soho.private-report.html"
    result = run(
        "utilityreport",
        {
            "ORIGINAL": data_path("soho_cholera.gpkg", "deaths"),
            "RELEASED": released,
            "RELEASE_RECORD": provenance,
            "OUTPUT": "TEMPORARY_OUTPUT",
            "REPORT": str(report),
        },
    )
    assert result["REPORT"] == str(report)
    doc = report.read_text(encoding="utf-8")
    assert "change by at most 4.01x when A and B are within 200 m" in doc
    assert "Private: for the data holder, not for publication." in doc
    assert f"<td>{result['MEAN_M']:.4g}</td>" in doc  # the same statistics as the table output
    assert int(re.search(r'data-figures-expected="(\d+)"', doc).group(1)) >= 3
    # a temporary output gets an .html name of its own
    temp = run(
        "utilityreport",
        {
            "ORIGINAL": data_path("soho_cholera.gpkg", "deaths"),
            "RELEASED": released,
            "RELEASE_RECORD": provenance,
            "OUTPUT": "TEMPORARY_OUTPUT",
            "REPORT": "TEMPORARY_OUTPUT",
        },
    )
    assert temp["REPORT"].endswith(".html") and Path(temp["REPORT"]).exists()


def test_the_public_study_area_gives_the_adversary(run, soho_release, tmp_path):
    released, provenance = soho_release
    report = tmp_path / "area.html"
    run(
        "utilityreport",
        {
            "ORIGINAL": data_path("soho_cholera.gpkg", "deaths"),
            "RELEASED": released,
            "RELEASE_RECORD": provenance,
            "BOUNDS": "-16500,-13800,6711000,6714200 [EPSG:3857]",
            "OUTPUT": "TEMPORARY_OUTPUT",
            "REPORT": str(report),
        },
    )
    doc = report.read_text(encoding="utf-8")
    assert "optimal adversary&#x27;s expected error (m)" in doc and 'alt="adversary error map"' in doc


def test_report_reads_the_record_of_a_file_written_by_geopriv(run, tmp_path):
    import geopriv
    from geopriv import io

    deaths = io.read_vector(data_path("soho_cholera.gpkg"), "deaths")
    released = geopriv.perturb(deaths, level=math.log(4), radius=100, rng=2)
    path = tmp_path / "released.gpkg"
    io.write_vector(released, path)  # the record goes into the GeoPackage's metadata, as the command line writes it
    report = tmp_path / "r.html"
    run(
        "utilityreport",
        {
            "ORIGINAL": data_path("soho_cholera.gpkg", "deaths"),
            "RELEASED": str(path),
            "OUTPUT": "TEMPORARY_OUTPUT",
            "REPORT": str(report),
        },
    )
    doc = report.read_text(encoding="utf-8")
    assert "change by at most 16x when A and B are within 200 m" in doc  # ln 4 within 100 m: 16x at 200 m


def test_without_a_record_the_report_is_refused_and_nothing_written(run, soho_release, tmp_path):
    from qgis.core import QgsProcessingException

    released, _ = soho_release
    report = tmp_path / "none.html"
    with pytest.raises(QgsProcessingException, match="needs the release's record.*PROVENANCE"):
        run(
            "utilityreport",
            {
                "ORIGINAL": data_path("soho_cholera.gpkg", "deaths"),
                "RELEASED": released,
                "OUTPUT": "TEMPORARY_OUTPUT",
                "REPORT": str(report),
            },
        )
    assert not report.exists()
    with pytest.raises(QgsProcessingException, match="not a release's PROVENANCE output"):
        run(
            "utilityreport",
            {
                "ORIGINAL": data_path("soho_cholera.gpkg", "deaths"),
                "RELEASED": released,
                "RELEASE_RECORD": "not json",
                "OUTPUT": "TEMPORARY_OUTPUT",
                "REPORT": str(report),
            },
        )
    assert json.loads(soho_release[1])["mechanism"]  # the PROVENANCE output is the record itself


def test_without_a_report_nothing_changes(run, soho_release):
    released, _ = soho_release
    result = run(
        "utilityreport",
        {"ORIGINAL": data_path("soho_cholera.gpkg", "deaths"), "RELEASED": released, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    assert result.get("REPORT") in (None, "") and result["N"] == 324
