"""geopriv adversary-error and geopriv calibrate on a Web Mercator and a lon/lat area (issue 44, item 1): the
expected displacement the command prints is the library's finite figure, never "inf m"."""

from __future__ import annotations

import json
import math

import geopriv

from .test_cli import one_line_error, run

#: the README's Soho study area (EPSG:3857) and the same rectangle in degrees
SOHO = ("-15800", "6711900", "-14600", "6713300")
SOHO_LONLAT = ("-0.1419", "51.5094", "-0.1312", "51.5172")


def test_adversary_error_prints_a_finite_displacement_on_web_mercator(capsys):
    code, text, err = run(
        capsys, "adversary-error", "--level", "ln4", "--radius", 200, "--bounds", *SOHO, "--crs", "EPSG:3857"
    )
    assert code == 0, err
    lib = geopriv.adversary_error(level=math.log(4), radius=200, area=tuple(float(v) for v in SOHO), crs="EPSG:3857")
    assert f"expected displacement of the releases: {lib.displacement_m:,.1f} m" in text
    assert "inf" not in text
    code, text, err = run(
        capsys, "adversary-error", "--level", "ln4", "--radius", 200, "--bounds", *SOHO, "--crs", "EPSG:3857", "--json"
    )
    got = json.loads(text)
    assert math.isfinite(got["expected_displacement_m"]) and 200 < got["expected_displacement_m"] < 260


def test_adversary_error_on_a_lon_lat_area(capsys):
    code, text, err = run(
        capsys,
        "adversary-error",
        "--level",
        "ln4",
        "--radius",
        200,
        "--bounds",
        *SOHO_LONLAT,
        "--crs",
        "EPSG:4326",
        "--json",
    )
    assert code == 0, err
    got = json.loads(text)
    assert 180 < got["adversary_error_m"] < 230 and 200 < got["expected_displacement_m"] < 260
    # Web Mercator coordinates named as degrees: one line saying what to give
    code, _, err = run(
        capsys, "adversary-error", "--level", "ln4", "--radius", 200, "--bounds", *SOHO, "--crs", "EPSG:4326"
    )
    assert code != 0
    one_line_error(err, "not longitudes", "--bounds", "--crs")


def test_calibrate_displacement_on_web_mercator_meets_it(capsys, tmp_path):
    curve = tmp_path / "curve.csv"
    code, text, err = run(
        capsys,
        "calibrate",
        "displacement",
        150,
        "--bounds",
        *SOHO,
        "--crs",
        "EPSG:3857",
        "--cell",
        31,
        "--curve",
        curve,
        "--json",
    )
    assert code == 0, err
    got = json.loads(text)
    assert got["met"] is True
    import pandas as pd

    table = pd.read_csv(curve)
    assert table["displacement_m"].map(math.isfinite).all()
    lib = geopriv.calibrate("displacement", 150, area=tuple(float(v) for v in SOHO), crs="EPSG:3857", cell=31)
    assert got["epsilon_per_m"] == lib.epsilon_per_m
