"""The installable zip: built by scripts/build_plugin.py, installed into a fresh QGIS profile,
loaded and started by QGIS's plugin manager API in a separate headless QGIS process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from qgis_helpers import ROOT, data_path

pytestmark = pytest.mark.qgis

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def plugin_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "geopriv_qgis.zip"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_plugin.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_zip_layout(plugin_zip):
    with zipfile.ZipFile(plugin_zip) as zf:
        names = set(zf.namelist())
        metadata = zf.read("geopriv_qgis/metadata.txt").decode()
    for required in (
        "__init__.py",
        "metadata.txt",
        "LICENSE",
        "plugin.py",
        "provider.py",
        "compat.py",
        "icon.svg",
        "algorithms/base.py",
        "algorithms/layers.py",
        "algorithms/perturb_points.py",
        "algorithms/utility_report.py",
        "algorithms/sanitize_traces.py",
        "algorithms/build_privacy_map.py",
        "algorithms/perturb_location_dependent.py",
        "algorithms/synthesize.py",
        "algorithms/diffuse.py",
        "algorithms/counts.py",
        "algorithms/aggregate.py",
        "algorithms/heatmap.py",
        "algorithms/flows.py",
    ):
        assert f"geopriv_qgis/{required}" in names
    assert all(name.startswith("geopriv_qgis/") for name in names)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert "hasProcessingProvider=yes" in metadata


def test_zip_installs_into_a_fresh_profile_and_loads(plugin_zip, tmp_path):
    profile = tmp_path / "profiles" / "default"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path))
    done = subprocess.run(
        [
            sys.executable,
            str(HERE / "install_check.py"),
            str(plugin_zip),
            str(profile),
            data_path("soho_cholera.gpkg", "deaths"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(report["settings_dir"]).resolve() == profile.resolve()
    assert "geopriv_qgis" in report["available"]
    assert report["installer_error"] == ""  # the plugin manager sees a valid, compatible plugin
    assert report["installer_name"] == "geopriv"
    assert report["processing_provider"] == "yes"
    assert report["loaded"] and report["started"]
    assert Path(report["module_file"]).resolve().is_relative_to(profile.resolve())  # the installed copy ran
    from test_provider import EXPECTED

    assert set(report["algorithms"]) == EXPECTED
    assert report["perturbed"] == 324
    assert report["unloaded"] and not report["provider_after_unload"]
