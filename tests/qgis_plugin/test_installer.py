"""The plugin's installer logic (qgis_plugin/installer.py), without a network: what it reads, what it
decides to install, what it refuses to install into QGIS.  The real installation, into a fresh QGIS
profile, runs in QGIS Desktop in test_desktop.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from conftest import import_plugin
from qgis_helpers import ROOT

pytestmark = pytest.mark.qgis


@pytest.fixture(scope="module")
def installer():
    import_plugin()
    import geopriv_qgis.installer as module

    return module


def _fake_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_requirements_keep_proj_and_numpy_with_qgis(installer):
    requirements = {r.name: r for r in installer.read_requirements()}
    assert requirements["pyproj"].from_qgis and requirements["numpy"].from_qgis
    assert not any(r.from_qgis for name, r in requirements.items() if name not in {"pyproj", "numpy"})
    assert "pyogrio" not in requirements and "fiona" not in requirements and "gdal" not in requirements
    assert requirements["scikit-fmm"].optional


def test_requirement_floors_are_the_library_floors(installer):
    floors = {}
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        match = re.fullmatch(r"([\w.\-]+)>=([\w.]+)", line)
        floors[match.group(1)] = match.group(2)
    for requirement in installer.read_requirements():
        if requirement.name in floors:
            assert (">=", floors[requirement.name]) in requirement.specifiers, requirement.spec
    assert set(floors) - {r.name for r in installer.read_requirements()} == {"pyogrio"}  # the CLI's reader only


def test_versions_compare_numerically(installer):
    requirement = installer.Requirement("pandas", ((">=", "2.2.3"), ("<", "3")))
    assert requirement.spec == "pandas>=2.2.3,<3"
    assert requirement.satisfied_by("2.2.3") and requirement.satisfied_by("2.10.0")
    assert not requirement.satisfied_by("2.2.2") and not requirement.satisfied_by("3.0.0")
    assert not requirement.satisfied_by(None)


def test_plan_installs_what_is_missing_and_never_a_proj(installer, tmp_path):
    site = tmp_path / "site"
    _fake_dist(site, "numpy", "1.24.2")
    _fake_dist(site, "pandas", "1.5.3")  # Debian 12's: too old
    _fake_dist(site, "tqdm", "4.66.0")
    the_plan = installer.plan(path=[str(site)])
    names = {r.name for r in the_plan.install}
    assert "pandas" in names and "geopandas" in names and "tqdm" not in names and "numpy" not in names
    assert [r.name for r, version in the_plan.from_qgis] == ["pyproj"]  # missing, and not pip's to install
    assert not the_plan.possible and the_plan.geopriv_missing
    assert "python3-pyproj" in the_plan.describe()
    outcome = installer.install(the_plan, tmp_path / "target")
    assert not outcome.ok and not (tmp_path / "target").exists()  # refused before pip ran


def test_a_pip_pyproj_is_recognised_without_importing_it(installer, tmp_path, monkeypatch):
    name = "pyproj_like_wheel"  # pyproj itself is imported already in this process: its twin, laid out as pip's
    wheel_like = tmp_path / "wheel"
    (wheel_like / name / "proj_dir" / "share").mkdir(parents=True)
    (wheel_like / name / "__init__.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.syspath_prepend(str(wheel_like))
    assert installer.bundled_proj(name)
    import geopriv_qgis.compat as compat

    with pytest.raises(ImportError, match="carries its own copy of PROJ"):
        compat.check_binaries((name,))
    assert name not in __import__("sys").modules


def test_the_systems_pyproj_is_accepted(installer):
    import pyproj

    assert not installer.bundled_proj("pyproj"), pyproj.__file__  # the floor environment uses QGIS's own


def test_activate_puts_the_profile_folder_first(installer, tmp_path, monkeypatch):
    import sys

    monkeypatch.setattr(sys, "path", list(sys.path))
    assert not installer.activate(tmp_path / "missing")
    assert installer.activate(tmp_path) and sys.path[0] == str(tmp_path)
    assert not installer.activate(tmp_path)  # once


def test_an_old_python_is_refused_with_the_way_out(installer, tmp_path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=%d.%d" % installer.MIN_PYTHON
    old = installer.Plan(python=(3, 10))
    assert not old.possible and "Python 3.10" in old.describe()
    assert not installer.install(old, tmp_path / "target").ok and not (tmp_path / "target").exists()
