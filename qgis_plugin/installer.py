"""Install what the plugin needs into QGIS's Python, without ever loading a second PROJ or GDAL there.

QGIS ships its own compiled geospatial libraries (PROJ, GDAL, GEOS) and the Python bindings built
against them (``osgeo``, ``pyproj`` on Debian/Ubuntu, OSGeo4W and the macOS bundle), and NumPy.
pip's ``pyproj`` and ``pyogrio`` wheels carry private copies of PROJ, GDAL, SQLite and curl;
imported into the QGIS Desktop process they abort it (``std::bad_alloc``: QGIS 3.22, Debian 12).
So the installer

* takes ``numpy`` and ``pyproj`` from QGIS (lines marked ``# from QGIS`` in ``requirements.txt``):
  when they are missing or too old it says which package of the QGIS distribution to install and
  installs nothing;
* installs the other requirements (wheels without a PROJ or GDAL of their own, and rasterio, whose
  wheel is tested inside QGIS Desktop) and the geopriv wheel shipped in the plugin zip, with
  ``--no-deps`` (exactly the list, so pip never pulls a pyproj or pyogrio wheel in), into a folder
  of the QGIS profile that the plugin puts first on ``sys.path``; the system's own packages are
  never touched;
* never lets that folder shadow a compiled package QGIS ships itself (:data:`QGIS_OWN`: NumPy,
  pyproj, GDAL's ``osgeo``, PyQt, sip, ``qgis``, psycopg2): a folder holding one that QGIS's own
  Python also provides (a ``pip install --target`` by hand, an older plugin) goes *last* on
  ``sys.path`` instead, the plugin says which folders to delete (:func:`shadowing_packages`,
  :func:`shadowing_message`), and the next installation removes them;
* never imports a compiled module to decide what is missing: versions are read from the installed
  distributions' metadata.

This module uses the standard library only and no Qt: the dialog (``setup_dialog.py``) and the
tests call :func:`plan` and :func:`install`.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
WHEELS = HERE / "wheels"
#: the folder of the QGIS profile the dependencies go to (``<profile>/python/<this>``)
DEPENDENCIES_FOLDER = "geopriv-dependencies"
#: geopriv's ``requires-python`` (pyproject.toml): a QGIS running an older Python cannot use it
MIN_PYTHON = (3, 11)
FROM_QGIS = "from QGIS"
OPTIONAL = "optional"
#: what to install when a library that must come from QGIS is missing or too old
QGIS_PACKAGES = {
    "numpy": "Debian/Ubuntu: sudo apt install python3-numpy; Windows: the OSGeo4W package python3-numpy; "
    "macOS: a newer QGIS.app",
    "pyproj": "Debian/Ubuntu: sudo apt install python3-pyproj; Windows: the OSGeo4W package python3-pyproj; "
    "macOS: a newer QGIS.app",
}

#: compiled packages QGIS ships itself, built against its own PROJ, GDAL, Qt, libpq and NumPy (top-level
#: module -> where QGIS gets it).  The installer never installs them; a copy of one in the dependency folder
#: must never shadow QGIS's.  (pandas, scipy, shapely are not here: the installer puts newer wheels of those
#: in the folder on purpose when QGIS's are missing or too old, e.g. Debian 12's pandas 1.5.)
QGIS_OWN = {
    **QGIS_PACKAGES,
    "osgeo": "GDAL's Python bindings, from QGIS (Debian/Ubuntu: python3-gdal; OSGeo4W: python3-gdal)",
    "PyQt5": "from QGIS (Debian/Ubuntu: python3-pyqt5; OSGeo4W: python3-pyqt5)",
    "PyQt6": "from QGIS (the Qt 6 builds of QGIS)",
    "sip": "from QGIS (Debian/Ubuntu: python3-sip)",
    "qgis": "QGIS's own Python bindings",
    "psycopg2": "from QGIS (Debian/Ubuntu: python3-psycopg2; OSGeo4W: python3-psycopg2)",
}


@dataclass(frozen=True)
class Shadowing:
    """A package of :data:`QGIS_OWN` in the dependency folder that QGIS's own Python also provides."""

    module: str  # the top-level module, e.g. "numpy"
    entries: tuple  # what to delete from the folder: package folders, module files, *.libs, *.dist-info
    qgis_copy: str  # where QGIS's own copy is (the sys.path entry outside the folder)


@dataclass(frozen=True)
class Requirement:
    """One line of ``requirements.txt``: a distribution, its version bounds and where it comes from."""

    name: str
    specifiers: tuple  # ((operator, version text), ...)
    from_qgis: bool = False
    optional: bool = False

    @property
    def spec(self) -> str:
        """The requirement as pip reads it, e.g. ``pandas>=2.2.3,<3``."""
        return self.name + ",".join(op + version for op, version in self.specifiers)

    def satisfied_by(self, version: str | None) -> bool:
        """Whether an installed ``version`` (``None``: not installed) meets every bound."""
        if version is None:
            return False
        have = version_tuple(version)
        for op, bound in self.specifiers:
            want = version_tuple(bound)
            width = max(len(have), len(want))
            a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
            ok = {">=": a >= b, ">": a > b, "<": a < b, "<=": a <= b, "==": a == b, "!=": a != b}[op]
            if not ok:
                return False
        return True


@dataclass(frozen=True)
class Plan:
    """What an installation would do: requirements to install, and those only QGIS can provide."""

    install: tuple = ()  # Requirement objects pip installs into the profile folder
    from_qgis: tuple = ()  # (Requirement, installed version or None) QGIS must provide
    geopriv_missing: bool = False
    python: tuple = MIN_PYTHON  # the Python QGIS runs (major, minor)

    @property
    def needed(self) -> bool:
        return bool(self.install or self.from_qgis or self.geopriv_missing)

    @property
    def possible(self) -> bool:
        """Whether the installer can finish the job (nothing is missing that only QGIS provides)."""
        return not self.from_qgis and tuple(self.python) >= MIN_PYTHON

    def describe(self) -> str:
        """A short, readable account for the dialog."""
        lines = []
        if tuple(self.python) < MIN_PYTHON:
            lines.append(
                f"This QGIS runs Python {self.python[0]}.{self.python[1]}; geopriv needs Python "
                f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer: use a newer QGIS (Debian 12, Ubuntu 24.04, "
                "a current OSGeo4W or QGIS.app)."
            )
        if self.from_qgis:
            lines.append("These come with QGIS and cannot be installed by the plugin:")
            for requirement, version in self.from_qgis:
                have = f"version {version} found" if version else "not found"
                lines.append(f"  {requirement.spec} ({have}). {QGIS_PACKAGES.get(requirement.name, '')}")
        names = [r.name for r in self.install] + (["geopriv"] if self.geopriv_missing else [])
        if names:
            lines.append("To install into this QGIS profile: " + ", ".join(names) + ".")
        return "\n".join(lines) if lines else "Everything the plugin needs is installed."


@dataclass
class Outcome:
    """What :func:`install` did: success, the log, where it installed."""

    ok: bool
    target: Path
    log: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    def summary(self) -> str:
        if self.ok:
            return " ".join([f"Installed into {self.target}."] + self.warnings)
        return "The installation failed; nothing in QGIS was changed. " + (self.log[-1] if self.log else "")


def version_tuple(text: str) -> tuple:
    """``'2.2.3'`` -> ``(2, 2, 3)``; pre-release and local parts are ignored."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    return tuple(int(part) for part in match.group(1).split(".")) if match else (0,)


def read_requirements(path: Path = REQUIREMENTS) -> list:
    """Parse ``requirements.txt`` (names, ``>=``/``<``/``==`` bounds, the ``# from QGIS`` marker)."""
    requirements = []
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line, _, comment = raw.partition("#")
        line = line.strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*((?:[<>=!]=?\s*[\w.]+\s*,?\s*)*)", line)
        if not match:
            raise ValueError(f"{path}: cannot read requirement line {raw!r}")
        specifiers = tuple(re.findall(r"([<>=!]=?)\s*([\w.]+)", match.group(2)))
        marker = comment.strip().lower()
        requirements.append(
            Requirement(match.group(1), specifiers, marker.startswith(FROM_QGIS.lower()), marker.startswith(OPTIONAL))
        )
    return requirements


def installed_version(name: str, path: list | None = None) -> str | None:
    """The version of distribution ``name`` the first entry of ``path`` (default ``sys.path``) holding it gives."""
    for dist in importlib.metadata.distributions(path=sys.path if path is None else path):
        dist_name = dist.metadata["Name"] or ""
        if re.sub(r"[-_.]+", "-", dist_name).lower() == re.sub(r"[-_.]+", "-", name).lower():
            return dist.version
    return None


def plan(requirements: list | None = None, path: list | None = None, need_geopriv: bool = True) -> Plan:
    """What must be installed for the plugin to work in this Python (reads metadata; imports nothing)."""
    requirements = read_requirements() if requirements is None else requirements
    install, from_qgis = [], []
    for requirement in requirements:
        version = installed_version(requirement.name, path)
        if requirement.satisfied_by(version):
            continue
        (from_qgis.append((requirement, version)) if requirement.from_qgis else install.append(requirement))
    have, wheel = installed_version("geopriv", path), geopriv_wheel()
    shipped = wheel.name.split("-")[1] if wheel is not None else None
    geopriv_missing = need_geopriv and (
        have is None or (shipped is not None and version_tuple(have) < version_tuple(shipped))
    )
    return Plan(tuple(install), tuple(from_qgis), geopriv_missing, tuple(sys.version_info[:2]))


def python_executable() -> str | None:
    """The Python interpreter of the running QGIS (``sys.executable`` is QGIS itself inside QGIS)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    exe = Path(sys.executable)
    candidates = []
    if exe.name.lower().startswith("python"):
        candidates.append(exe)
    for prefix in (Path(sys.exec_prefix), Path(sys.base_exec_prefix)):
        candidates += [
            prefix / "bin" / f"python{version}",
            prefix / "bin" / "python3",  # Linux, macOS bundle
            prefix / "python.exe",
            prefix / "python3.exe",  # OSGeo4W, Windows installer
            prefix.parent / "bin" / f"python{version}",
        ]
    candidates += [exe.parent / "bin" / "python3", exe.parent / "python3", exe.parent / "python.exe"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def pip_command(python: str) -> list | None:
    """How to run pip with ``python``: its own pip, else the pip wheel Debian ships with python3-venv."""
    probe = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, timeout=120)
    if probe.returncode == 0:
        return [python, "-m", "pip"]
    for wheel in sorted(glob.glob("/usr/share/python-wheels/pip-*.whl"), reverse=True):
        return [python, os.path.join(wheel, "pip")]
    return None


def geopriv_wheel(folder: Path = WHEELS) -> Path | None:
    """The geopriv wheel shipped in the plugin zip (``wheels/geopriv-*.whl``)."""
    wheels = sorted(Path(folder).glob("geopriv-*.whl"))
    return wheels[-1] if wheels else None


def _same_path(a, b) -> bool:
    return os.path.normcase(os.path.realpath(str(a))) == os.path.normcase(os.path.realpath(str(b)))


def _dist_modules(info: Path) -> set:
    """The top-level modules a ``*.dist-info``/``*.egg-info`` folder installed (top_level.txt, else RECORD)."""
    top = info / "top_level.txt"
    if top.is_file():
        return {line.strip() for line in top.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()}
    names = set()
    record = info / "RECORD"
    if record.is_file():
        for line in record.read_text(encoding="utf-8", errors="replace").splitlines():
            first = line.split(",", 1)[0].replace("\\", "/").split("/", 1)[0]
            if (
                first
                and not first.endswith((".dist-info", ".egg-info", ".data", ".libs"))
                and first not in ("..", "bin")
            ):
                names.add(first.split(".", 1)[0])
    if not names:  # no record: the distribution's own name
        names.add(re.split(r"-\d", info.name, maxsplit=1)[0].split("-")[0])
    return names


def folder_modules(folder: Path) -> dict:
    """The top-level modules in ``folder`` (a ``pip --target`` folder) -> the entries that make each of them.

    Read from the folder's listing and its distributions' metadata; nothing is imported.  An entry is
    a package folder (``numpy``), a module file (``sip.cpython-311-x86_64-linux-gnu.so``, ``x.py``), a
    wheel's bundled libraries (``numpy.libs``) or a distribution's metadata (``numpy-2.1.0.dist-info``).
    """
    folder = Path(folder)
    found: dict = {}
    try:
        listing = sorted(folder.iterdir())
    except OSError:
        return found
    for entry in listing:
        name = entry.name
        if name.startswith(".") or name in ("__pycache__", "bin"):
            continue
        if entry.is_dir() and name.endswith((".dist-info", ".egg-info")):
            modules = _dist_modules(entry)
        elif entry.is_dir() and name.endswith(".libs"):
            modules = {name[: -len(".libs")]}
        elif entry.is_dir():
            modules = {name}
        elif name.endswith((".py", ".pyc", ".so", ".pyd")):
            modules = {name.split(".", 1)[0]}
        else:
            continue
        for module in modules:
            found.setdefault(module, []).append(entry)
    return found


def shadowing_packages(folder: Path, sys_path: list | None = None, own=None) -> list:
    """The packages of :data:`QGIS_OWN` in ``folder`` that ``sys_path`` also provides outside it.

    A pure look-up (the folder's listing and :class:`importlib.machinery.PathFinder`, which locates
    modules without importing them): such a package in the folder, first on ``sys.path``, would replace
    QGIS's own copy, built against QGIS's own PROJ, GDAL or Qt.  Returns :class:`Shadowing` records.
    """
    import importlib.machinery

    sys_path = list(sys.path if sys_path is None else sys_path)
    own = QGIS_OWN if own is None else own
    outside = [p for p in sys_path if isinstance(p, str) and p and not _same_path(p, folder)]
    result = []
    for module, entries in sorted(folder_modules(folder).items()):
        if module not in own:
            continue
        spec = importlib.machinery.PathFinder.find_spec(module, outside)
        if spec is None:
            continue  # QGIS has none of its own: nothing is shadowed (plan() says what QGIS lacks)
        where = (
            spec.origin
            if spec.origin not in (None, "namespace")
            else next(iter(spec.submodule_search_locations or []), "")
        )
        result.append(Shadowing(module, tuple(str(e) for e in entries), str(where)))
    return result


def shadowing_message(folder: Path, found: list) -> str:
    """What to tell the user about :func:`shadowing_packages`: which packages, and what to delete."""
    if not found:
        return ""
    names = ", ".join(s.module for s in found)
    lines = [
        f"The geopriv dependency folder {folder} holds {names}, which QGIS provides itself (built against its "
        "own PROJ, GDAL and Qt). So that they never replace QGIS's own, the folder was put last on the Python "
        "path, after QGIS's packages. To repair it, quit QGIS and delete from that folder:"
    ]
    for s in found:
        lines += [f"  {entry}" for entry in s.entries]
        lines.append(f"  (QGIS's own {s.module}: {s.qgis_copy}; {QGIS_OWN.get(s.module, '')})")
    lines.append("(the plugin's installer, Plugins > geopriv > Install requirements, also removes them when it runs).")
    return "\n".join(lines)


def remove_shadowing(found: list, folder: Path | None = None) -> list:
    """Delete the entries of :func:`shadowing_packages` (re-rooted in ``folder``, e.g. a staging copy)."""
    removed = []
    for s in found:
        for entry in s.entries:
            path = Path(entry) if folder is None else Path(folder) / Path(entry).name
            if path.is_dir():
                _remove_tree(path)
            elif path.exists():
                path.unlink()
            removed.append(str(path))
    return removed


def activate(target: Path, warn=None) -> bool:
    """Put the profile's dependency folder on ``sys.path`` (if it exists); True if it was added.

    First, unless it holds a package QGIS ships itself that QGIS's Python also provides
    (:func:`shadowing_packages`): then last, after QGIS's own paths, and ``warn(message)`` is called
    with what to delete (:func:`shadowing_message`).  The folder never shadows QGIS's own NumPy,
    pyproj, GDAL or Qt.
    """
    target = str(target)
    if not os.path.isdir(target) or any(_same_path(p, target) for p in sys.path if isinstance(p, str) and p):
        return False
    found = shadowing_packages(Path(target), sys.path)
    if found:
        sys.path.append(target)
        if warn is not None:
            warn(shadowing_message(Path(target), found))
    else:
        sys.path.insert(0, target)
    importlib.invalidate_caches()
    return True


class CannotInstall(Exception):
    """Why :func:`install` cannot start (no Python, no pip, no wheel...): one line for the log."""


@dataclass(frozen=True)
class PipJob:
    """What :func:`install` asks pip for: the command that runs pip, the required and the optional specs."""

    pip: tuple  # the command, e.g. (python, "-m", "pip")
    specs: tuple  # wheels only, all at once: any failure fails the installation
    optional: tuple  # one by one, built from source if need be: a failure is a warning


def pip_job(the_plan: Plan, wheel: Path | None = None, python: str | None = None) -> PipJob:
    """The pip work ``the_plan`` needs; raises :class:`CannotInstall` when it cannot be done from QGIS."""
    if not the_plan.possible:
        raise CannotInstall(the_plan.describe())
    python = python or python_executable()
    if python is None:
        raise CannotInstall(
            "QGIS's Python interpreter was not found; install the requirements from a terminal (docs/qgis.md)."
        )
    pip = pip_command(python)
    if pip is None:
        raise CannotInstall(
            "pip is not available to QGIS's Python: install it (Debian/Ubuntu: "
            "sudo apt install python3-pip) and try again."
        )
    specs = [r.spec for r in the_plan.install if not r.optional]
    optional = [r.spec for r in the_plan.install if r.optional]
    if the_plan.geopriv_missing:
        wheel = wheel or geopriv_wheel()
        if wheel is None:
            raise CannotInstall(
                "this plugin zip holds no geopriv wheel; install geopriv from a terminal (docs/qgis.md)."
            )
        specs.append(str(wheel))
    return PipJob(tuple(pip), tuple(specs), tuple(optional))


def staging_copy(target: Path, found: list, outcome: Outcome) -> Path:
    """The folder pip installs into: a copy of ``target`` (if any) without the packages QGIS provides itself.

    pip never writes into ``target`` itself, so a failed installation leaves it as it was.
    """
    staging = target.with_name(target.name + ".part")
    _remove_tree(staging)
    if target.exists():  # keep what is there; pip adds to a copy of it
        import shutil

        shutil.copytree(target, staging)
        if found:  # the repair: QGIS's own NumPy, pyproj, GDAL, Qt... are never kept in the folder
            removed = remove_shadowing(found, staging)
            outcome.log.append("removed what QGIS provides itself: " + ", ".join(removed))
            outcome.warnings.append(
                "Removed " + ", ".join(s.module for s in found) + " from the folder: QGIS provides them itself."
            )
    return staging


@dataclass
class PipRunner:
    """Runs ``pip install --no-deps --target staging``, logging its output into ``outcome``.

    Each package pip starts on moves the progress bar over 5-90 %, counted over all the runs of
    one installation (``total`` packages).
    """

    pip: tuple
    staging: Path
    total: int
    timeout: float
    outcome: Outcome
    report: Callable[[int, str], None]  # progress(percent, text)
    started: int = 0  # packages pip has started on, over every run

    def run(self, requirements, binary_only: bool) -> int:
        """pip's exit code for ``requirements`` (-1: pip could not run or timed out)."""
        command = list(self.pip) + [
            "install",
            "--no-deps",
            "--upgrade",
            "--target",
            str(self.staging),
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
        ]
        command += (["--only-binary", ":all:"] if binary_only else []) + list(requirements)
        try:
            with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
                for line in proc.stdout:
                    line = line.rstrip()
                    self.outcome.log.append(line)
                    if line.startswith(("Collecting", "Processing")):
                        self.started += 1
                        self.report(5 + int(85 * self.started / self.total), line)
                proc.wait(timeout=self.timeout)
                return proc.returncode
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.outcome.log.append(f"pip could not run ({type(exc).__name__})")
            return -1


def optional_failure(spec: str) -> str:
    """The warning for an optional requirement pip could not install (the plugin works without it)."""
    name = re.match(r"[A-Za-z0-9_.\-]+", spec).group(0)
    return (
        f"{name} could not be installed (it is built from source: a C/C++ compiler is needed; on "
        f"Debian/Ubuntu: sudo apt install python3-{name}, or g++ and python3-dev, then install again); "
        "the algorithms that need it will say so."
    )


def move_into_place(staging: Path, target: Path) -> None:
    """Replace ``target`` by the finished ``staging`` folder (the old one is removed only after the swap)."""
    if target.exists():
        old = target.with_name(target.name + ".old")
        _remove_tree(old)
        target.rename(old)
        staging.rename(target)
        _remove_tree(old)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(target)


def install(
    the_plan: Plan,
    target: Path,
    wheel: Path | None = None,
    python: str | None = None,
    progress=None,
    timeout: float = 1800,
) -> Outcome:
    """Install ``the_plan`` into ``target`` with pip (``--no-deps``, binary wheels only); never raises.

    ``progress(percent, text)`` is called as the work goes.  Nothing outside ``target`` is written;
    a failed installation leaves ``target`` as it was (pip writes into a staging folder first).
    """
    target = Path(target)
    outcome = Outcome(False, target)
    report = progress or (lambda percent, text: None)
    try:
        job = pip_job(the_plan, wheel, python)
    except CannotInstall as exc:
        outcome.log.append(str(exc))
        return outcome
    found = shadowing_packages(target, sys.path) if target.is_dir() else []
    if not job.specs and not job.optional and not found:
        outcome.ok = True
        return outcome
    staging = staging_copy(target, found, outcome)
    total = max(1, len(job.specs) + len(job.optional))
    pip = PipRunner(job.pip, staging, total, timeout, outcome, report)

    report(5, f"installing {total} package(s) with pip")
    if job.specs:
        code = pip.run(job.specs, binary_only=True)
        if code != 0:
            outcome.log.append(f"pip failed (exit code {code}); see the log above")
            _remove_tree(staging)
            return outcome
    for spec in job.optional:  # built from source if there is no wheel; the plugin works without it
        if pip.run([spec], binary_only=False) != 0:
            outcome.warnings.append(optional_failure(spec))
    report(95, "moving the installed packages into place")
    move_into_place(staging, target)
    report(100, "done")
    outcome.ok = True
    return outcome


def bundled_proj(module: str = "pyproj") -> bool:
    """Whether the importable ``module`` is a pip wheel carrying its own PROJ/GDAL (found without importing it)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return False
    package = Path(spec.origin).parent
    return any(
        p.exists()
        for p in (
            package / "proj_dir",
            package.with_name(package.name + ".libs"),
            package / ".dylibs",
            package / "gdal_data",
        )
    )


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
