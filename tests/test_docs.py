"""The README and docs/*.md run verbatim: every fenced code block is executed as written.

A reader pastes the examples of one page into one session, in order, standing at the root of a fresh
clone: the Python examples reach the shipped data with ``geopriv.datasets.get_path`` (from anywhere),
the shell examples by their path in the clone (``geopriv/data/soho_cholera.gpkg``).  Nothing is
copied.  So, per Markdown file:

* a temporary working directory is made to look like the clone's root: a symbolic link to each of
  the repository's top-level entries that git tracks (``geopriv/``, ``docs/``, ``README.md`` ...),
  so the files a page writes land beside them, never in the repository;
* its ```python blocks run in order in one namespace (like one interpreter session);
* its ```bash / ```sh / ```console blocks run with ``bash -e`` in the same directory, with this
  interpreter's ``bin`` directory first on PATH (the ``geopriv`` a user types, not
  ``python -m geopriv.cli``).

A block that cannot run in a test (installing system packages, starting QGIS Desktop, another
operating system, ``pip install``) is skipped only when the Markdown says so right before it, in a
visible HTML comment on the line above the fence::

    <!-- not run: installs system packages -->

and blocks that need QGIS's Processing framework (``processing.run``) are marked::

    <!-- runs in QGIS -->

they are marked ``qgis`` and run in a headless QGIS with the geopriv provider where QGIS imports (the
QGIS environment of scripts/test.sh); elsewhere they are deselected (``-m "not qgis"``) or skipped.  Every skipped block is listed by
pytest's ``-ra`` summary (id ``file:line``).  A fence without a language, an unknown language, or a
marker not followed by a block fails :func:`test_every_block_is_run_or_marked`.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def clone_entries() -> list[str]:
    """The top-level entries of the repository that git tracks: what a fresh clone's root holds."""
    try:
        listed = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):  # not a git checkout (a source tree): its entries
        return sorted(p.name for p in ROOT.iterdir() if not p.name.startswith(".") or p.name in {".ci"})
    return sorted({line.split("/", 1)[0] for line in listed if line and (ROOT / line.split("/", 1)[0]).exists()})


PYTHON = {"python", "py", "pycon"}
SHELL = {"bash", "sh", "console", "shell"}
#: fenced blocks that are not code to run (output, configuration)
NOT_CODE = {"text", "toml", "ini", "json", "yaml", "csv", "output"}

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.+?)\s*-->\s*$")
IN_QGIS = re.compile(r"^\s*<!--\s*runs in QGIS\s*-->\s*$")
ANY_MARKER = re.compile(r"^\s*<!--\s*(not run|runs in QGIS)\b")

#: timeout of one shell block, seconds
SHELL_TIMEOUT = 300


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    source: str
    not_run: str | None = None  # the marker's reason
    in_qgis: bool = False

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


@dataclass
class Page:
    blocks: list[Block] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse(page: Path) -> Page:
    """The fenced blocks of one Markdown file, with their markers, and what is malformed."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out = Page()
    rel = page.relative_to(ROOT).as_posix()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if ANY_MARKER.match(lines[i]):
                nxt = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
                if nxt is None or not FENCE.match(lines[nxt]) or nxt != i + 1:
                    out.problems.append(f"{rel}:{i + 1}: a marker must be the line right before a fenced block")
                elif not (NOT_RUN.match(lines[i]) or IN_QGIS.match(lines[i])):
                    out.problems.append(
                        f"{rel}:{i + 1}: malformed marker {lines[i].strip()!r} "
                        "(<!-- not run: REASON --> or <!-- runs in QGIS -->)"
                    )
            i += 1
            continue
        indent, fence, lang = m["indent"], m["fence"], m["lang"].lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        if i == len(lines):
            out.problems.append(f"{rel}:{start + 1}: fence never closed")
        i += 1
        prev = lines[start - 1] if start > 0 else ""
        nr, qg = NOT_RUN.match(prev), IN_QGIS.match(prev)
        if not lang:
            out.problems.append(f"{rel}:{start + 1}: fenced block without a language (```python, ```bash, ```text ...)")
            continue
        if lang not in PYTHON | SHELL | NOT_CODE:
            out.problems.append(f"{rel}:{start + 1}: unknown language {lang!r}: cannot tell whether to run it")
            continue
        if lang in NOT_CODE:
            if nr or qg:
                out.problems.append(f"{rel}:{start + 1}: a marker on a ```{lang} block, which is never run")
            continue
        if qg and lang not in PYTHON:
            out.problems.append(f"{rel}:{start + 1}: <!-- runs in QGIS --> is for ```python blocks")
        out.blocks.append(
            Block(page, start + 1, lang, "\n".join(body) + "\n", not_run=nr["reason"] if nr else None, in_qgis=bool(qg))
        )
    return out


PARSED = {page: parse(page) for page in PAGES}
BLOCKS = [block for page in PAGES for block in PARSED[page].blocks]


def test_every_block_is_run_or_marked():
    """Each fenced block is code we run, or visibly marked; the pages hold blocks at all."""
    problems = [p for page in PAGES for p in PARSED[page].problems]
    assert not problems, "\n".join(problems)
    assert len(BLOCKS) >= 20, f"only {len(BLOCKS)} code blocks found: is the parser broken?"
    skipped = [b for b in BLOCKS if b.not_run]
    # the run/skip inventory, for the log (pytest -rA or -s shows it)
    print(f"{len(BLOCKS)} blocks: {len(BLOCKS) - len(skipped)} run, {len(skipped)} marked not run")
    for b in skipped:
        print(f"  not run  {b.id}: {b.not_run}")
    for b in BLOCKS:
        if b.in_qgis:
            print(f"  in QGIS  {b.id} (marked qgis: runs in the QGIS environment only)")
    # a page's blocks are never all skipped: a marker is for the exception
    assert len(skipped) <= len(BLOCKS) // 4, "more than a quarter of the blocks are marked not run"


def qgis_available() -> bool:
    try:
        import qgis.core  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------------------------------ sessions
class Session:
    """One reader's session on one page: a working directory and a Python namespace."""

    def __init__(self, page: Path, root: Path):
        self.dir = root / page.stem
        self.dir.mkdir()
        for name in clone_entries():  # the clone's root, by links: nothing copied, nothing written into it
            (self.dir / name).symlink_to(ROOT / name, target_is_directory=(ROOT / name).is_dir())
        self.namespace: dict = {"__name__": "__main__"}
        self.done: set[int] = set()  # lines of the Python blocks already run

    def run_python(self, block: Block) -> None:
        code = compile(block.source, block.id, "exec")
        cwd = os.getcwd()
        os.chdir(self.dir)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                exec(code, self.namespace)  # noqa: S102 - running the docs is the point
        finally:
            os.chdir(cwd)
            self.done.add(block.line)
        for w in caught:  # a reader sees them: so does the test log, but they do not fail the block
            warnings.warn(f"{block.id}: {w.category.__name__}: {w.message}", UserWarning, stacklevel=2)


_SESSIONS: dict[Path, Session] = {}


@pytest.fixture(scope="session")
def docs_root(tmp_path_factory):
    return tmp_path_factory.mktemp("docs")


def session_for(page: Path, root: Path) -> Session:
    if page not in _SESSIONS:
        _SESSIONS[page] = Session(page, root)
    return _SESSIONS[page]


def shell_env(home: Path) -> dict:
    env = dict(os.environ)
    # the interpreter's own bin directory (not resolved: a venv's python is a symlink), where `geopriv` is
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["GEOPRIV_HOME"] = str(home)
    env.setdefault("MPLBACKEND", "Agg")
    env.pop("PYTHONPATH", None)
    return env


def shell_source(block: Block) -> str:
    if block.lang != "console":
        return block.source
    # $ commands only; other lines are their output
    return "\n".join(line[2:] for line in block.source.splitlines() if line.startswith("$ ")) + "\n"


_QGIS_PROCESSING = None


def qgis_processing():
    """Processing in a headless QGIS with the geopriv provider (as tests/qgis_plugin/conftest.py).

    In the QGIS environment the whole suite runs in one process: a QgsApplication and the provider
    already started by tests/qgis_plugin are reused (a process has one QgsApplication).
    """
    global _QGIS_PROCESSING
    if _QGIS_PROCESSING is None:
        import importlib.util

        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        from qgis.core import QgsApplication

        app = QgsApplication.instance()
        if app is None:
            app = QgsApplication([], False)
            app.initQgis()
        plugins = os.path.join(QgsApplication.pkgDataPath(), "python", "plugins")
        if plugins not in sys.path:
            sys.path.append(plugins)
        from processing.core.Processing import Processing

        Processing.initialize()
        plugin = None
        if QgsApplication.processingRegistry().providerById("geopriv") is None:
            if "geopriv_qgis" not in sys.modules:
                spec = importlib.util.spec_from_file_location(
                    "geopriv_qgis",
                    ROOT / "qgis_plugin" / "__init__.py",
                    submodule_search_locations=[str(ROOT / "qgis_plugin")],
                )
                module = importlib.util.module_from_spec(spec)
                sys.modules["geopriv_qgis"] = module
                spec.loader.exec_module(module)
            plugin = sys.modules["geopriv_qgis"].classFactory(None)
            plugin.initProcessing()
        import processing

        _QGIS_PROCESSING = (app, plugin, processing)
    return _QGIS_PROCESSING[2]


# ------------------------------------------------------------------------------------------ the test
@pytest.mark.parametrize(
    "block", [pytest.param(b, id=b.id, marks=[pytest.mark.qgis] if b.in_qgis else []) for b in BLOCKS]
)
def test_block_runs_verbatim(block: Block, docs_root, geopriv_home, monkeypatch):
    if block.not_run:
        pytest.skip(f"{block.id} not run: {block.not_run}")
    if block.in_qgis and not qgis_available():
        pytest.skip(f"{block.id} runs in QGIS: QGIS's Python bindings are not importable here")
    session = session_for(block.page, docs_root)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if block.lang in SHELL:
        result = subprocess.run(
            ["bash", "-e", "-c", shell_source(block)],
            check=False,
            cwd=session.dir,
            env=shell_env(geopriv_home),
            capture_output=True,
            text=True,
            timeout=SHELL_TIMEOUT,
        )
        assert result.returncode == 0, (
            f"{block.id} exited with {result.returncode}\n"
            f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"
        )
        return
    # a page's Python blocks run in order in one namespace: run the earlier ones first if this test
    # was selected alone (pytest -k), as a reader would have pasted them
    for earlier in PARSED[block.page].blocks:
        if earlier is block:
            break
        if (
            earlier.lang in PYTHON
            and earlier.line not in session.done
            and not earlier.not_run
            and (qgis_available() or not earlier.in_qgis)
        ):
            with contextlib.suppress(Exception):  # its own test reports it
                run_block_python(session, earlier)
    run_block_python(session, block)


def run_block_python(session: Session, block: Block) -> None:
    if block.in_qgis and "processing" not in session.namespace:
        session.namespace["processing"] = qgis_processing()  # the QGIS Python console imports it
    try:
        session.run_python(block)
    finally:
        if block is [b for b in PARSED[block.page].blocks if b.lang in PYTHON][-1]:
            close_clusters(session.namespace)  # the reader's session ends with the page


def close_clusters(namespace: dict) -> None:
    """Close the dask clients and clusters a page started (their worker processes would outlive it)."""
    for value in list(namespace.values()):
        if type(value).__module__.startswith("distributed") and type(value).__name__ in {"Client", "LocalCluster"}:
            value.close()


@pytest.fixture(scope="module", autouse=True)
def _close_all_clusters():
    yield
    for session in _SESSIONS.values():
        close_clusters(session.namespace)


# ------------------------------------------------------------------------------- blocks as scripts
#: blocks that start a local dask cluster: its worker processes import the script that started it,
#: so a reader who saves the block as a file and runs it needs the ``if __name__ == "__main__":`` guard
SCRIPT_BLOCKS = [b for b in BLOCKS if b.lang in PYTHON and "LocalCluster(" in b.source and not b.not_run]


def test_cluster_blocks_are_found():
    assert len(SCRIPT_BLOCKS) >= 2, [b.id for b in SCRIPT_BLOCKS]


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in SCRIPT_BLOCKS])
def test_cluster_block_runs_as_a_script(block: Block, tmp_path, geopriv_home):
    """Saved as ``example.py`` and run with ``python example.py`` at the clone's root, as written."""
    pytest.importorskip("distributed")
    pytest.importorskip("dask_geopandas")
    here = tmp_path / "clone"
    here.mkdir()
    for name in clone_entries():
        (here / name).symlink_to(ROOT / name, target_is_directory=(ROOT / name).is_dir())
    (here / "example.py").write_text(block.source, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "example.py"],
        check=False,
        cwd=here,
        env=shell_env(geopriv_home),
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT,
    )
    assert result.returncode == 0, f"{block.id} as a script exited with {result.returncode}\n{result.stderr[-4000:]}"
    assert (here / "released").is_dir(), f"{block.id}: the release was not written"
