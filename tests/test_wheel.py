"""geopriv installs from its wheel (issue 32): build, check, install into a fresh virtual environment, run.

From a clean copy of the tree (the files git tracks or would track: ``git ls-files --cached
--others --exclude-standard``, so no .venv/, build/, dist/ or egg-info), ``python -m build``
makes the sdist and then the wheel *from the sdist* (so the sdist holds what a build needs);
``twine check`` passes on both.  A fresh virtual environment (``python -m venv``, never
``--system-site-packages``) gets the wheel with its ``plot`` extra, the dependencies coming from
PyPI (pip's cache keeps it fast); then, in an empty temporary folder (the checkout is not on
``sys.path``), ``import geopriv`` must come from that environment and find its shipped data,
``geopriv.show_versions()`` must print, and the console script ``geopriv demo --out OUT`` must
write its GeoPackage and PNG.  A second fresh environment gets the wheel alone, as a plain
``pip install geopriv`` installs it (no extra, so no matplotlib): there ``geopriv demo`` must write
its GeoPackage, print its figures and say how to get the map, and exit 0 (issue 44).

Both environments of scripts/test.sh run it.  The dependencies are the newest releases, unless
the environment variable ``GEOPRIV_WHEEL_CONSTRAINTS`` names a pip constraints file: scripts/test.sh
sets it to constraints/floor.txt in the floors environment (.venv/qgis), so there the wheel is
checked with the oldest versions geopriv supports, installed from PyPI rather than taken from
Debian.  Nothing here skips: a missing tool (git, build, twine, venv) or an unreachable package
index fails the test.  It takes about half a minute to a minute (marked ``slow``).
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import geopandas as gpd
import pytest

import geopriv
from geopriv.versions import REQUIRED

from .conftest import ROOT

pytestmark = pytest.mark.slow

#: the data files geopriv ships (pyproject.toml's package-data): every one must be in the wheel
SHIPPED = sorted(p.name for p in (ROOT / "geopriv" / "data").iterdir() if p.suffix in (".gpkg", ".tif"))
#: a pip constraints file for the wheel's dependencies (scripts/test.sh: constraints/floor.txt in the floors env)
CONSTRAINTS = os.environ.get("GEOPRIV_WHEEL_CONSTRAINTS")


def _env() -> dict[str, str]:
    """The environment of the subprocesses: no PYTHONPATH (nothing of the checkout leaks in), no VIRTUAL_ENV."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1", MPLBACKEND="Agg")
    return env


def _run(argv, cwd, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, argv))} exited {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n"
            f"--- stderr\n{done.stderr[-3000:]}",
            pytrace=False,
        )
    return done


def _clean_copy(dest: Path) -> Path:
    """The tree as git sees it (tracked files, and new ones not ignored), copied from the working tree."""
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout
    for rel in filter(None, listed.split("\0")):
        source = ROOT / rel
        if source.is_file():  # a file deleted but not yet committed is listed and absent
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """(wheel, sdist) built from a clean copy of the tree."""
    src = _clean_copy(tmp_path_factory.mktemp("tree"))
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, src], cwd=src)  # the sdist, then the wheel from it
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert [w.name for w in wheels] == [f"geopriv-{geopriv.__version__}-py3-none-any.whl"]
    assert [s.name for s in sdists] == [f"geopriv-{geopriv.__version__}.tar.gz"]
    return wheels[0], sdists[0]


def _fresh_venv(tmp_path_factory, requirement: str) -> Path:
    """A fresh virtual environment (never --system-site-packages) with ``requirement`` installed: its folder."""
    env = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", env], cwd=env)
    cfg = (env / "pyvenv.cfg").read_text()
    assert re.search(r"include-system-site-packages\s*=\s*false", cfg), cfg
    constraints = ["-c", CONSTRAINTS] if CONSTRAINTS else []
    _run([env / "bin" / "python", "-m", "pip", "install", "-q", *constraints, requirement], cwd=env)
    return env


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory):
    """A fresh virtual environment with the wheel (and its ``plot`` extra) installed: its folder."""
    wheel, _ = dists
    return _fresh_venv(tmp_path_factory, f"{wheel}[plot]")


@pytest.fixture(scope="module")
def plain_venv(dists, tmp_path_factory):
    """A fresh virtual environment with the wheel alone (``pip install geopriv``: no extra, no matplotlib)."""
    wheel, _ = dists
    return _fresh_venv(tmp_path_factory, str(wheel))


def test_twine_check_passes_on_the_wheel_and_the_sdist(dists, tmp_path):
    done = _run([sys.executable, "-m", "twine", "check", "--strict", *dists], cwd=tmp_path)
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_holds_the_package_its_data_py_typed_and_its_metadata(dists):
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = email.parser.Parser().parsestr(zf.read(f"geopriv-{geopriv.__version__}.dist-info/METADATA").decode())
        entry_points = zf.read(f"geopriv-{geopriv.__version__}.dist-info/entry_points.txt").decode()
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "geopriv").rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    assert SHIPPED and {f"geopriv/data/{n}" for n in SHIPPED} <= names, SHIPPED
    assert "geopriv/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "qgis_plugin/", "bench/", "scripts/")) or ".pyc" in n]
    assert meta["Name"] == "geopriv" and meta["Version"] == geopriv.__version__
    assert meta["License-Expression"] == "BSD-3-Clause"
    assert meta["Description-Content-Type"] == "text/markdown"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert set(project["dependencies"]) <= set(meta.get_all("Requires-Dist"))
    assert re.search(r"^geopriv\s*=\s*geopriv\.cli:main$", entry_points, flags=re.M), entry_points


def test_the_sdist_holds_what_a_build_needs(dists):
    _, sdist = dists
    top = f"geopriv-{geopriv.__version__}"
    with tarfile.open(sdist) as tf:
        names = set(tf.getnames())
    for rel in (
        "pyproject.toml",
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "CITATION.cff",
        "PKG-INFO",
        "geopriv/_version.py",
        "geopriv/py.typed",
        *(f"geopriv/data/{n}" for n in SHIPPED),
    ):
        assert f"{top}/{rel}" in names, rel
    modules = {f"{top}/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / "geopriv").rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    # the wheel fixture built the wheel from this sdist (python -m build's default), so it builds


def test_import_geopriv_from_the_fresh_environment_finds_its_data(venv, tmp_path):
    code = f"""
import importlib.resources, json, sys
import geopriv
import pyogrio, rasterio
data = importlib.resources.files("geopriv") / "data"
found = {{}}
for name in {SHIPPED!r}:
    path = data / name
    assert path.is_file(), name
    found[name] = (pyogrio.list_layers(str(path)).tolist() if name.endswith(".gpkg")
                   else rasterio.open(str(path)).shape)
by_name = {{n: geopriv.datasets.get_path(n).name for n in geopriv.datasets.names()}}
assert all(geopriv.datasets.get_path(n).is_file() for n in by_name)
print(json.dumps({{"by_name": by_name, "file": geopriv.__file__, "version": geopriv.__version__, "path": sys.path, "prefix": sys.prefix,
                  "found": {{k: str(v) for k, v in found.items()}}}}))
"""
    done = _run([venv / "bin" / "python", "-c", code], cwd=tmp_path)
    info = json.loads(done.stdout.splitlines()[-1])
    assert Path(info["file"]).resolve().is_relative_to(venv.resolve()), info["file"]
    assert Path(info["prefix"]).resolve() == venv.resolve()
    assert info["version"] == geopriv.__version__
    assert not [p for p in info["path"] if p and Path(p).resolve().is_relative_to(ROOT)], info["path"]
    outside = [
        p
        for p in info["path"]
        if ("site-packages" in p or "dist-packages" in p) and not Path(p).resolve().is_relative_to(venv.resolve())
    ]
    assert not outside, f"site folders outside the fresh environment: {outside}"
    assert set(info["found"]) == set(SHIPPED)
    assert "deaths" in info["found"]["soho_cholera.gpkg"]
    assert sorted(info["by_name"].values()) == SHIPPED  # geopriv.datasets reaches every shipped file


def test_show_versions_prints_from_the_fresh_environment(venv, tmp_path):
    done = _run([venv / "bin" / "python", "-c", "import geopriv; geopriv.show_versions()"], cwd=tmp_path)
    lines = dict(re.findall(r"^(\S.*?)\s+: (.*)$", done.stdout, flags=re.M))
    assert lines["geopriv"] == geopriv.__version__
    missing = [name for name in REQUIRED if lines.get(name) in (None, "None")]
    assert not missing, done.stdout
    assert lines["matplotlib"] != "None"  # the plot extra
    assert lines["executable"].startswith(str(venv)), lines["executable"]
    if CONSTRAINTS:  # the floors: each pinned dependency at its pin
        pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", Path(CONSTRAINTS).read_text(), flags=re.M))
        wrong = {n: (lines[n], pins[n]) for n in REQUIRED if n in pins and lines[n] != pins[n]}
        assert not wrong, f"installed vs pinned in {CONSTRAINTS}: {wrong}"


def test_the_console_script_runs_the_demo_from_the_fresh_environment(venv, tmp_path):
    script = venv / "bin" / "geopriv"
    assert script.is_file(), "the wheel installed no geopriv console script"
    done = _run([script, "demo", "--out", "OUT", "--seed", "1"], cwd=tmp_path)
    assert "Wrote" in done.stdout, done.stdout
    gpkg, png = tmp_path / "OUT" / "soho_perturbed.gpkg", tmp_path / "OUT" / "soho_map.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "not drawn" not in done.stdout, done.stdout
    released = gpd.read_file(gpkg, layer="deaths_perturbed")
    deaths = gpd.read_file(ROOT / "geopriv" / "data" / "soho_cholera.gpkg", layer="deaths")
    assert len(released) == len(deaths) and released.crs == deaths.crs
    assert released.geometry.is_valid.all() and not released.geometry.is_empty.any()
    moved = released.geometry.distance(deaths.geometry)
    assert (moved > 0).all()  # perturbed, every point


def _check_demo_release(gpkg: Path) -> None:
    released = gpd.read_file(gpkg, layer="deaths_perturbed")
    deaths = gpd.read_file(ROOT / "geopriv" / "data" / "soho_cholera.gpkg", layer="deaths")
    assert len(released) == len(deaths) and released.crs == deaths.crs
    assert (released.geometry.distance(deaths.geometry) > 0).all()


def test_the_demo_runs_after_the_plain_install_and_says_how_to_get_the_map(plain_venv, tmp_path):
    """Issue 44: a plain ``pip install geopriv`` has no matplotlib; the demo still releases, and says so in plain words."""
    probe = "import importlib.util; print(importlib.util.find_spec('matplotlib') is None)"
    assert _run([plain_venv / "bin" / "python", "-c", probe], cwd=tmp_path).stdout.strip() == "True"
    done = _run([plain_venv / "bin" / "geopriv", "demo", "--out", "OUT", "--seed", "1"], cwd=tmp_path)
    out = tmp_path / "OUT"
    assert sorted(p.name for p in out.iterdir()) == ["soho_perturbed.gpkg"], done.stdout
    _check_demo_release(out / "soho_perturbed.gpkg")
    assert "Utility: mean" in done.stdout and f"Wrote  : {Path('OUT') / 'soho_perturbed.gpkg'}" in done.stdout
    assert "Map    : not drawn. Plotting needs matplotlib, which is not installed." in done.stdout, done.stdout
    assert "pip install 'geopriv[plot]'" in done.stdout and "withheld" not in done.stdout + done.stderr
    assert "soho_map.png" in done.stdout.split("Map    :")[1]  # where the map goes once matplotlib is there


def test_a_plot_without_matplotlib_says_why_in_geoprivs_words(plain_venv, tmp_path):
    """The library's message (not the import's) for a Python caller, and what the CLI/QGIS show of it."""
    code = """
import geopandas as gpd, geopriv
from geopriv.exceptions import MissingDependencyError, user_message
from geopriv.plot import plot_release
pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy([0.0], [0.0]), crs="EPSG:32630")
try:
    plot_release(pts, pts)
except MissingDependencyError as exc:
    assert isinstance(exc, ImportError)
    print(exc)
    print(user_message(exc, "cli"))
"""
    lines = _run([plain_venv / "bin" / "python", "-c", code], cwd=tmp_path).stdout.splitlines()
    said = "Plotting needs matplotlib, which is not installed. Install it: pip install 'geopriv[plot]' (or pip install matplotlib)."
    assert lines == [said, said], lines
