"""geopriv.datasets: the shipped data, reachable by name from anywhere (API and CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import geopriv
from geopriv import datasets


def test_every_name_gives_an_existing_absolute_path_in_the_package():
    for name in datasets.names():
        path = datasets.get_path(name)
        assert path.is_absolute() and path.is_file(), name
        assert path.parent == Path(geopriv.__file__).resolve().parent / "data"
    assert datasets.get_path("soho") == datasets.get_path("soho_cholera.gpkg")


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError) as info:
        datasets.get_path("london")
    message = str(info.value)
    assert "'london'" in message and "'soho'" in message and "'geolife'" in message


def test_reading_from_another_folder(tmp_path, monkeypatch):
    """Where a reader stands does not matter: nothing needs copying beside them."""
    import geopandas as gpd

    monkeypatch.chdir(tmp_path)
    deaths = gpd.read_file(datasets.get_path("soho"), layer="deaths")
    pumps = gpd.read_file(datasets.get_path("soho"), layer="pumps")
    assert (len(deaths), len(pumps)) == (324, 13)
    for name, dataset in datasets.DATASETS.items():
        if dataset.file.endswith(".gpkg"):
            assert gpd.read_file(dataset.path, rows=1).crs.to_string() == dataset.crs, name


def _geopriv(*args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "geopriv.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_cli_prints_a_path_and_lists_the_names(tmp_path):
    one = _geopriv("datasets", "soho", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert one.stdout == f"{datasets.get_path('soho')}\n"
    listing = _geopriv("datasets", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    for name in datasets.names():
        assert name in listing.stdout
    unknown = _geopriv("datasets", "london", cwd=tmp_path)
    assert unknown.returncode == 2 and "soho" in unknown.stderr.replace("'", "") and "Traceback" not in unknown.stderr
