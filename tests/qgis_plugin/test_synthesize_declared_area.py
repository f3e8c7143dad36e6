"""geopriv:synthesize without a public study area stops as geopriv:heatmap does (issue 44.3), in a real QGIS.

The synthetic points are spread over the whole public area, so the CRS's area of use (the whole
world for the Soho deaths' Web Mercator) is no study area: the run stops before anything is
written, with the library's one fix for a missing area in the dialog's terms; a region alone
declares it.
"""

from __future__ import annotations

import json

import pytest

from qgis_helpers import Log, data_path

pytestmark = pytest.mark.qgis

SOHO = ("soho_cholera.gpkg", "deaths")
NEEDS = "needs a declared public area"


def refusal(run, alg_id, params) -> str:
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException, match=NEEDS) as err:
        run(alg_id, {"INPUT": data_path(*SOHO), "EPSILON": 1.0, "SEED": 1, **params}, feedback=Log())
    return str(err.value)


def test_no_extent_and_no_region_stops_like_the_heatmap(run, tmp_path):
    from geopriv.frame import STUDY_AREA_FIX

    target = tmp_path / "synthetic.gpkg"
    message = refusal(run, "synthesize", {"OUTPUT": str(target)})
    assert message.startswith("Synthesize points") and "WGS 84 / Pseudo-Mercator" in message
    assert message.endswith(STUDY_AREA_FIX.qgis) and "'Public study area' parameter" in message
    assert "bounds=" not in message and "--bounds" not in message
    heat = refusal(run, "heatmap", {"RESOLUTION": 50.0, "OUTPUT": str(tmp_path / "heat.tif")})
    assert heat.endswith(STUDY_AREA_FIX.qgis)
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_region_alone_declares_the_area(run):
    log = Log()
    result = run(
        "synthesize",
        {
            "INPUT": data_path(*SOHO),
            "REGION": data_path("study_area.gpkg"),
            "SEED": 1,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
        feedback=log,
    )
    record = json.loads(result["PROVENANCE"])
    assert record["frame_area"] == "region" and result["OUTPUT"].featureCount() == 324
    assert not any("area of use" in w for w in log.warnings)
