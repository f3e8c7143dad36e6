"""geopriv:adversaryerror on a Web Mercator study area in a real, headless QGIS (issue 44, item 1): the expected
displacement is the library's finite figure (it was inf whenever the grid overhung the area)."""

from __future__ import annotations

import math

import pytest

from qgis_helpers import Log

pytestmark = [pytest.mark.qgis]

SOHO = (-15800.0, 6711900.0, -14600.0, 6713300.0)  # the README's study area, EPSG:3857
EXTENT = f"{SOHO[0]},{SOHO[2]},{SOHO[1]},{SOHO[3]} [EPSG:3857]"


def test_adversary_error_on_web_mercator_has_a_finite_displacement(run):
    import geopriv

    log = Log()
    result = run(
        "adversaryerror",
        {"LEVEL": "ln4", "RADIUS": 200, "BOUNDS": EXTENT, "CRS": "EPSG:3857", "OUTPUT": "TEMPORARY_OUTPUT"},
        feedback=log,
    )
    library = geopriv.adversary_error(level=math.log(4), radius=200, area=SOHO, crs="EPSG:3857")
    assert math.isfinite(result["DISPLACEMENT_M"])
    assert result["DISPLACEMENT_M"] == pytest.approx(library.displacement_m, rel=1e-9)
    assert 200 < result["DISPLACEMENT_M"] < 260
    assert not any("inf m" in line for line in log.infos)
