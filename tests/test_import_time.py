"""Start-up stays light (issue 31): what ``import geopriv`` and the command line's help import, never how long.

``import geopriv`` imports no third-party package: the public names are imported from their
modules on first use, and ``gdf.priv`` is registered the moment pandas is imported.  The command
line builds its parser and prints ``geopriv --help`` without the library; a command's own options
(and their defaults, read from the library's signatures) load it.  bench/import_time.py measures
the times (bench/results/import_time.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import geopriv

from .conftest import ROOT

#: never imported by ``import geopriv`` nor by ``geopriv --help``
HEAVY = {"scipy", "rasterio", "matplotlib", "dask", "dask_geopandas", "pyogrio", "skfmm", "networkx"}
#: the numeric and geometry stack, not imported by them either (it is most of the start-up time)
STACK = {"numpy", "pandas", "geopandas", "shapely", "pyproj"}


def loaded_after(code: str) -> set[str]:
    """The top-level packages imported by ``code``, in a fresh interpreter."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code + "\nimport sys, json; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_geopriv_imports_neither_the_heavy_dependencies_nor_the_numeric_stack():
    loaded = loaded_after("import geopriv")
    assert not loaded & (HEAVY | STACK), sorted(loaded & (HEAVY | STACK))


def test_the_parser_and_the_top_level_help_import_neither():
    code = (
        "import contextlib, io\n"
        "from geopriv import cli\n"
        "cli.build_parser()\n"
        "for argv in (['--help'], ['--version']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        cli.main(argv)\n"
    )
    loaded = loaded_after(code)
    assert not loaded & (HEAVY | STACK), sorted(loaded & (HEAVY | STACK))


@pytest.mark.parametrize("how", ["console script", "python -m"])
def test_geopriv_help_exits_0_and_lists_the_commands(how):
    if how == "console script":
        script = shutil.which("geopriv", path=str(Path(sys.executable).parent))
        if script is None:
            pytest.skip("the geopriv console script is not installed beside this interpreter")
        argv = [script, "--help"]
    else:
        argv = [sys.executable, "-m", "geopriv.cli", "--help"]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    assert "perturb" in out.stdout and "build-mechanism" in out.stdout and not out.stderr


def test_a_commands_help_still_shows_the_librarys_defaults():
    out = subprocess.run(
        [sys.executable, "-m", "geopriv.cli", "report", "--help"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert out.returncode == 0, out.stderr
    assert f"(default: {geopriv.utility_report.__defaults__[0]:g})" in " ".join(out.stdout.split())


@pytest.mark.parametrize(
    "code",
    [
        "import geopriv, pandas",  # pandas after geopriv: registered by the import hook
        "import pandas, geopriv",  # pandas first: registered by import geopriv
        "import importlib.util, geopriv; importlib.util.find_spec('pandas'); import pandas",  # a look-up leaves the hook
    ],
)
def test_the_accessor_is_registered_as_soon_as_pandas_is_imported(code):
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code + "\nimport pandas as pd, geopandas as gpd\n"
            "print(type(gpd.GeoDataFrame(geometry=gpd.points_from_xy([0], [0]), crs=3857).priv).__name__, "
            "'priv' in pd.DataFrame._accessors)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert out.stdout.split() == ["PrivAccessor", "True"]


def test_importing_geopriv_and_geopandas_loads_the_accessor_without_the_release_functions():
    extra = loaded_after("import geopriv, geopandas") - loaded_after("import geopandas")
    assert not extra & HEAVY, sorted(extra & HEAVY)


def test_public_names_resolve_and_functions_keep_their_names_over_their_modules():
    code = (
        "import geopriv, geopriv.perturb, geopriv.synthesize, geopriv.diffuse\n"
        "import inspect\n"
        "assert all(inspect.isfunction(getattr(geopriv, n)) for n in ('perturb', 'synthesize', 'diffuse'))\n"
        "assert geopriv.diffuse.__module__ == 'geopriv.mechanisms.diffusion'\n"
        "assert set(geopriv.__all__) <= set(dir(geopriv))\n"
        "assert all(getattr(geopriv, n) is not None for n in geopriv.__all__)\n"
        "assert geopriv.io.write_new_file and geopriv.frame.DEFAULT_MAX_DISTORTION\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        geopriv.nonexistent  # noqa: B018
