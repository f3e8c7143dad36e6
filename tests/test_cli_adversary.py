"""geopriv adversary-error and geopriv calibrate: the library's numbers, the maps, the refusals.

Deterministic (no randomness: both read no data, only public parameters).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import rasterio

import geopriv

from .test_cli import one_line_error, run

AREA = ("400000", "4400000", "404000", "4403000")
BOUNDS = tuple(float(v) for v in AREA)


def test_adversary_error_prints_the_librarys_numbers_and_writes_the_map(capsys, tmp_path):
    out = tmp_path / "adv.tif"
    code, text, err = run(
        capsys,
        "adversary-error",
        "--level",
        "ln4",
        "--radius",
        200,
        "--bounds",
        *AREA,
        "--crs",
        "EPSG:32650",
        "--cell",
        100,
        "--map",
        out,
        "--json",
    )
    assert code == 0, err
    got = json.loads(text)
    lib = geopriv.adversary_error(level=math.log(4), radius=200, area=BOUNDS, crs="EPSG:32650", cell=100)
    assert got["adversary_error_m"] == pytest.approx(lib.expected_error_m, abs=1e-3)
    assert got["expected_displacement_m"] == pytest.approx(lib.displacement_m, abs=1e-3)
    assert got["grid_shape"] == [30, 40] and got["k_equivalent"] is None
    with rasterio.open(out) as ds:
        np.testing.assert_allclose(ds.read(1), lib.error_map.astype(np.float32))
    code, _, err = run(
        capsys,
        "adversary-error",
        "--level",
        "ln4",
        "--radius",
        200,
        "--bounds",
        *AREA,
        "--crs",
        "EPSG:32650",
        "--cell",
        100,
        "--map",
        out,
    )
    assert code != 0 and "exists" in err  # never replaced unless --overwrite


def test_calibrate_prints_the_epsilon_and_writes_the_curve(capsys, tmp_path):
    curve = tmp_path / "curve.csv"
    code, text, err = run(
        capsys,
        "calibrate",
        "adversary_error",
        300,
        "--bounds",
        *AREA,
        "--crs",
        "EPSG:32650",
        "--cell",
        200,
        "--curve",
        curve,
        "--json",
    )
    assert code == 0, err
    got = json.loads(text)
    lib = geopriv.calibrate("adversary_error", 300, area=BOUNDS, crs="EPSG:32650", cell=200)
    assert got["epsilon_per_m"] == pytest.approx(lib.epsilon_per_m) and got["met"] is True
    assert got["level"] == pytest.approx(lib.epsilon_per_m * 200)
    table = pd.read_csv(curve)
    assert list(table.columns) == ["epsilon_per_m", "displacement_m", "adversary_error_m", "k_equivalent"]
    code, text, err = run(
        capsys, "calibrate", "adversary_error", 1e6, "--bounds", *AREA, "--crs", "EPSG:32650", "--cell", 200
    )
    assert code == 1 and "closest" in err


def test_refusals_are_one_line(capsys):
    code, _, err = run(
        capsys, "adversary-error", "--level", "ln4", "--radius", 200, "--bounds", *AREA, "--crs", "EPSG:4326"
    )
    assert code != 0
    line = one_line_error(err, "not longitudes", "--bounds", "--crs")  # the command line's advice, not Python's
    assert ".to_crs" not in line
    code, _, err = run(capsys, "adversary-error", "--bounds", *AREA, "--crs", "EPSG:32650")
    assert code != 0
    one_line_error(err, "privacy level", "--level and --radius")
    code, _, err = run(
        capsys,
        "adversary-error",
        "--epsilon",
        "0.01",
        "--bounds",
        "0",
        "0",
        "100000",
        "100000",
        "--crs",
        "EPSG:32650",
        "--cell",
        "10",
    )
    assert code != 0
    line = one_line_error(err, "limited to", "--cell")
    assert "cell=" not in line
    code, _, err = run(
        capsys,
        "adversary-error",
        "--epsilon",
        "0.01",
        "--bounds",
        *AREA,
        "--crs",
        "EPSG:32650",
        "--prior",
        "population",
    )
    assert code != 0
    one_line_error(err, "--population RASTER")
