"""The real QGIS Desktop application, as a user starts it: under Xvfb, a fresh profile, the plugin
installed from the built zip and enabled, nothing of geopriv installed in QGIS's Python.

First run: the plugin must not crash QGIS, must offer to install its requirements (a message and a
dialog), must install them into the profile without a second PROJ or GDAL (pip's pyproj and
pyogrio wheels abort QGIS 3.22), and must then start its provider; "Perturb points" runs through
QGIS's own Python.  Second run (a restart with the same profile): the toolbox is there at once.
Each run must end with exit code 0, and QGIS must not have marked the plugin as crashed.
Screenshots go to $GEOPRIV_DESKTOP_SHOTS if set (the closing note's pictures), else a temp folder.
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from qgis_helpers import ROOT, data_path

pytestmark = pytest.mark.qgis

HERE = Path(__file__).parent
SCRIPT = HERE / "desktop" / "desktop_run.py"
PACKAGE = "geopriv_qgis"


def _desktop_env(home: Path) -> dict:
    keep = {
        k: v
        for k, v in os.environ.items()
        if k.startswith(("PIP_", "http_", "https_", "HTTP_", "HTTPS_", "NO_PROXY", "no_proxy"))
    }
    return dict(
        keep, HOME=str(home), PATH="/usr/local/bin:/usr/bin:/bin", LANG="C.UTF-8", XDG_RUNTIME_DIR=str(home / "run")
    )


@pytest.fixture(scope="module")
def desktop(tmp_path_factory):
    qgis, xvfb = shutil.which("qgis"), shutil.which("xvfb-run")
    if not (qgis and xvfb):
        pytest.fail(
            "QGIS Desktop (the 'qgis' package) and Xvfb ('xvfb', 'xauth') are needed: scripts/test.sh "
            "installs them with apt"
        )
    base = tmp_path_factory.mktemp("desktop")
    out = Path(os.environ.get("GEOPRIV_DESKTOP_SHOTS") or base / "out")
    out.mkdir(parents=True, exist_ok=True)
    home = base / "home"
    (home / "run").mkdir(parents=True)
    os.chmod(home / "run", 0o700)
    built = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_plugin.py"), "--out", str(base / "z.zip")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    profiles = base / "profiles"
    profile = profiles / "profiles" / "default"
    plugins = profile / "python" / "plugins"
    plugins.mkdir(parents=True)
    with zipfile.ZipFile(base / "z.zip") as zf:
        zf.extractall(plugins)  # what Plugins > Install from ZIP does
    (profile / "QGIS").mkdir()
    (profile / "QGIS" / "QGIS3.ini").write_text(f"[PythonPlugins]\n{PACKAGE}=true\n")  # enabled
    source = base / "soho_cholera.gpkg"
    shutil.copy(data_path("soho_cholera.gpkg", "deaths").split("|")[0], source)
    raster = base / "tokyo_density_40.tif"
    shutil.copy(data_path("tokyo_density_40.tif"), raster)

    def run(stage: str, timeout: float):
        env = dict(
            _desktop_env(home),
            GEOPRIV_DESKTOP_STAGE=stage,
            GEOPRIV_DESKTOP_DIR=str(out),
            GEOPRIV_DESKTOP_INPUT=f"{source}|layername=deaths",
            GEOPRIV_DESKTOP_RASTER=str(raster),
        )
        done = subprocess.run(
            [
                xvfb,
                "-a",
                "-s",
                "-screen 0 1600x1000x24",
                qgis,
                "--profiles-path",
                str(profiles),
                "--nologo",
                "--noversioncheck",
                "--code",
                str(SCRIPT),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=str(base),
        )
        report_file = out / f"{stage}-report.json"
        report = json.loads(report_file.read_text()) if report_file.exists() else {}
        settings = configparser.ConfigParser(strict=False, interpolation=None)
        settings.read(profile / "QGIS" / "QGIS3.ini")
        crashed = [
            key
            for section in settings.sections()
            for key in settings[section]
            if "watchdog" in key.lower() and PACKAGE in key.lower() and settings[section][key] == "true"
        ]
        return done, report, crashed

    first = run("first-run", 1500)
    second = run("restart", 600)
    return {"first": first, "second": second, "profile": profile, "out": out}


def _check_run(done, report, crashed):
    assert done.returncode == 0, f"QGIS exited with {done.returncode}: {done.stderr[-2000:]}"
    assert not crashed, "QGIS marked the plugin as having crashed it"
    assert report, f"the start-up script wrote no report: {done.stderr[-2000:]}"
    assert report["errors"] == [], report["errors"]


def test_first_run_offers_installs_and_starts_without_crashing(desktop):
    done, report, crashed = desktop["first"]
    _check_run(done, report, crashed)
    assert report["plugin_class"] == "SetupPlugin"  # nothing installed yet: the installer, not a traceback
    assert report["install_ok"], report.get("install_log_tail")
    assert report["started_in_place"]  # the toolbox without a restart
    assert "geopriv:perturbpoints" in report["algorithms"]
    assert report["output_valid"] and report["output_features"] == 324
    assert report["pyproj"].startswith("/usr/lib/python3/"), report["pyproj"]  # QGIS's own PROJ binding
    assert not report["pyogrio_loaded"]  # pyogrio's wheel carries a second GDAL: never loaded in QGIS
    # location-dependent privacy: a raster read with rasterio's wheel, kernels, verification, inside QGIS Desktop
    assert report["location_dependent_features"] == 1 and report["verified_max_ratio"] <= 1
    check_budget_store(report)
    installed = desktop["profile"] / "python" / "geopriv-dependencies"
    assert report["geopriv"].startswith(str(installed))
    names = {p.name.split("-")[0].lower() for p in installed.glob("*.dist-info")}
    assert {"geopriv", "pandas", "geopandas", "shapely", "scipy", "rasterio", "scikit_fmm"} <= names
    assert report["rasterio"].startswith(str(installed))  # pip's rasterio wheel, inside QGIS Desktop
    assert not names & {"pyproj", "pyogrio", "numpy", "fiona", "gdal"}  # QGIS's own, never a second copy
    for name in ("message", "install-dialog", "installed", "algorithm-dialog", "finished-run"):
        assert f"first-run-{name}.png" in report["shots"]
        assert (desktop["out"] / f"first-run-{name}.png").stat().st_size > 10_000


def test_restart_has_the_toolbox_at_once(desktop):
    done, report, crashed = desktop["second"]
    _check_run(done, report, crashed)
    assert report["plugin_class"] == "GeoprivPlugin"
    assert report["output_valid"] and report["output_features"] == 324
    assert report["location_dependent_features"] == 1
    assert not report["pyogrio_loaded"]
    check_budget_store(report)


def check_budget_store(report):
    """Inside QGIS Desktop, a release charged to a budget store that affords one: all 324 persons charged once, the
    second release refused naming persons, no second output, one release in the audit."""
    assert report["budget_first_features"] == 324
    assert report["budget_refusal"] is not None and "would exceed their lifetime budget" in report["budget_refusal"]
    assert not report["budget_refused_output_written"]
    assert report["budget_persons_charged"] == 324 and report["budget_releases"] == 1
