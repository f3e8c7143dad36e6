"""``geopriv.show_versions()``: what it prints, and that its package lists follow pyproject.toml."""

from __future__ import annotations

import importlib.metadata
import io
import re
import subprocess
import sys
import tomllib

import pyproj
import shapely

import geopriv
from geopriv import versions as versions_module

from .conftest import ROOT


def _requirement_name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()


def test_show_versions_prints_every_section_and_the_installed_versions(capsys):
    geopriv.show_versions()
    out = capsys.readouterr().out
    for title in ("SYSTEM INFO", "GEOS, PROJ, GDAL INFO", "PYTHON DEPENDENCIES", "OPTIONAL DEPENDENCIES"):
        assert title in out
    lines = dict(re.findall(r"^(\S.*?)\s+: (.*)$", out, flags=re.M))
    assert lines["geopriv"] == geopriv.__version__
    assert lines["python"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
    assert lines["executable"] == sys.executable
    for name in versions_module.REQUIRED:  # all required: each has a version, the installed one
        assert lines[name] == importlib.metadata.version(name), name
    for name in versions_module.OPTIONAL:  # each listed, with its version or None
        assert name in lines, name
    assert lines["PROJ (pyproj)"] == pyproj.proj_version_str
    assert lines["GEOS (shapely)"] == shapely.geos_version_string
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", lines["GDAL (pyogrio)"])
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", lines["GDAL (rasterio)"])


def test_show_versions_writes_to_the_file_given_and_says_none_for_what_is_missing(monkeypatch):
    monkeypatch.setattr(versions_module, "OPTIONAL", versions_module.OPTIONAL + ("geopriv-no-such-package",))
    buf = io.StringIO()
    assert geopriv.show_versions(file=buf) is None
    assert re.search(r"^geopriv-no-such-package\s+: None$", buf.getvalue(), flags=re.M)


def test_the_package_lists_are_pyproject_tomls_dependencies_and_extras():
    """Every dependency and every optional one is shown; the tooling extras (test, bench, docs) are not."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = {_requirement_name(r) for r in project["dependencies"]}
    assert set(versions_module.REQUIRED) == required
    extras = project["optional-dependencies"]
    optional = {
        _requirement_name(r) for name, reqs in extras.items() if name not in ("test", "bench", "docs") for r in reqs
    }
    assert set(versions_module.OPTIONAL) == optional


def test_show_versions_is_public_and_loaded_on_first_use():
    assert "show_versions" in geopriv.__all__
    code = (
        "import sys, geopriv\n"
        "assert 'geopriv.versions' not in sys.modules\n"
        "geopriv.show_versions\n"
        "assert 'geopriv.versions' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
