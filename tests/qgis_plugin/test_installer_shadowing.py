"""The dependency folder never shadows a compiled package QGIS ships itself (NumPy, pyproj, GDAL, Qt...)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from conftest import import_plugin

pytestmark = pytest.mark.qgis


@pytest.fixture(scope="module")
def installer():
    import_plugin()
    import geopriv_qgis.installer as module

    return module


def _package(site: Path, name: str) -> None:
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("raise SystemExit('imported')\n")  # found, never imported


def _pip_folder(tmp_path: Path) -> Path:
    """A folder laid out as ``pip install --target`` leaves it: a pip NumPy and sip next to pandas and osgeo."""
    deps = tmp_path / "geopriv-dependencies"
    _package(deps, "numpy")
    (deps / "numpy.libs").mkdir()
    info = deps / "numpy-2.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 2.1.0\n")
    (info / "RECORD").write_text("numpy/__init__.py,,\nnumpy.libs/libopenblas.so,,\nnumpy-2.1.0.dist-info/RECORD,,\n")
    (deps / "sip.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    _package(deps, "pandas")  # installed on purpose when QGIS's is too old: not QGIS's own
    _package(deps, "osgeo")  # QGIS's own, but this QGIS has none: shadows nothing
    return deps


def _system(tmp_path: Path, monkeypatch=None) -> Path:
    """QGIS's own packages, alone on ``sys.path`` with the standard library (with ``monkeypatch``)."""
    system = tmp_path / "system"
    for name in ("numpy", "pandas"):
        _package(system, name)
    (system / "sip.py").write_text("")
    if monkeypatch is not None:
        stdlib = [p for p in sys.path if p and "packages" not in p and not p.startswith(str(Path.cwd()))]
        monkeypatch.setattr(sys, "path", [str(system), *stdlib])
    return system


def test_the_packages_qgis_ships_are_found_in_the_folder_without_importing(installer, tmp_path):
    deps, system = _pip_folder(tmp_path), _system(tmp_path)
    found = installer.shadowing_packages(deps, [str(deps), str(system)])
    assert [s.module for s in found] == ["numpy", "sip"]
    numpy = found[0]
    assert {Path(e).name for e in numpy.entries} == {"numpy", "numpy.libs", "numpy-2.1.0.dist-info"}
    assert Path(numpy.qgis_copy).parent == system / "numpy"
    assert installer.shadowing_packages(deps, [str(system / "elsewhere")]) == []  # QGIS has none of its own
    assert installer.shadowing_packages(system, [str(system)]) == []  # the system's own never shadow themselves
    assert "numpy" not in sys.modules or not Path(sys.modules["numpy"].__file__).is_relative_to(deps)


def test_the_folder_goes_last_and_the_message_says_what_to_delete(installer, tmp_path, monkeypatch):
    deps, system = _pip_folder(tmp_path), _system(tmp_path, monkeypatch)
    messages = []
    assert installer.activate(deps, warn=messages.append)
    assert sys.path[-1] == str(deps) and sys.path[0] == str(system)  # after QGIS's own, never first
    (message,) = messages
    assert "numpy, sip" in message and str(deps / "numpy") in message and str(deps / "numpy.libs") in message
    assert str(deps / "numpy-2.1.0.dist-info") in message and str(deps / "pandas") not in message
    assert not installer.activate(deps, warn=messages.append) and len(messages) == 1  # once


def test_a_pip_numpy_in_the_folder_never_replaces_qgiss_own(installer, tmp_path, monkeypatch):
    """With the real sys.path of QGIS's Python: its own NumPy is still the one found."""
    qgis_numpy = importlib.util.find_spec("numpy").origin
    deps = tmp_path / "deps"
    _package(deps, "numpy")
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert installer.activate(deps, warn=[].append)
    assert importlib.util.find_spec("numpy").origin == qgis_numpy
    from importlib.machinery import PathFinder

    assert PathFinder.find_spec("numpy", sys.path).origin != str(deps / "numpy" / "__init__.py")


def test_a_clean_folder_still_goes_first(installer, tmp_path, monkeypatch):
    deps = tmp_path / "deps"
    _package(deps, "pandas")
    _package(deps, "geopriv")
    monkeypatch.setattr(sys, "path", list(sys.path))
    messages = []
    assert installer.activate(deps, warn=messages.append) and sys.path[0] == str(deps) and not messages


def test_the_installer_removes_them(installer, tmp_path, monkeypatch):
    deps = _pip_folder(tmp_path)
    _system(tmp_path, monkeypatch)
    outcome = installer.install(installer.Plan(), deps, python=sys.executable)  # nothing to install: the repair
    if "pip is not available" in " ".join(outcome.log):
        pytest.skip("no pip for this Python")
    assert outcome.ok, outcome.log
    left = {p.name for p in deps.iterdir()}
    assert left == {"pandas", "osgeo"}, left  # QGIS's NumPy and sip are no longer shadowed; the rest is kept
    assert "numpy" in outcome.summary() and installer.shadowing_packages(deps, sys.path) == []
