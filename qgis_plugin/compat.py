"""Is a compatible geopriv importable in the Python that runs QGIS?  If not, say what to install.

"Compatible" means: geopriv imports, its version is at least :data:`MIN_GEOPRIV_VERSION`, it
provides every public function or class the plugin's algorithms call (each algorithm lists
them in its ``GEOPRIV_API``), and those functions take the keyword arguments the algorithms
pass (``GEOPRIV_KEYWORDS``: e.g. ``bounds``, ``grid``, ``continuous``, ``keep`` of a release).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

MIN_GEOPRIV_VERSION = "0.1.0"
DOCS = "docs/qgis.md in the geopriv source tree"


def _version_tuple(text: str) -> tuple:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def install_hint() -> str:
    return (
        "In QGIS Desktop the plugin offers to install what is missing (a message at start-up, or "
        "Plugins > geopriv > Install requirements); it installs into this QGIS profile and never replaces "
        "the PROJ, GDAL or NumPy QGIS ships. From a terminal, with the Python that QGIS runs "
        f"(Python {sys.version_info.major}.{sys.version_info.minor}): python3 -m pip install --user --no-deps "
        "-r <plugin folder>/requirements.txt <plugin folder>/wheels/geopriv-*.whl (Debian/Ubuntu: add "
        "--break-system-packages, and sudo apt install python3-pyproj). Details: " + DOCS + "."
    )


def dependencies_dir() -> Path:
    """The QGIS profile's folder for geopriv and the requirements the plugin installs (see installer.py)."""
    from qgis.core import QgsApplication

    from .installer import DEPENDENCIES_FOLDER

    return Path(QgsApplication.qgisSettingsDirPath()) / "python" / DEPENDENCIES_FOLDER


def check_binaries(modules=("pyproj",)):
    """Raise ImportError if importing geopriv would load a second PROJ into QGIS (a pip pyproj wheel).

    Checked without importing anything compiled: importing such a pyproj inside QGIS Desktop aborts
    the whole application (std::bad_alloc), so it must be found before ``import geopriv``.
    """
    from .installer import QGIS_PACKAGES, bundled_proj

    for module in modules:
        if bundled_proj(module):
            import importlib.util

            where = Path(importlib.util.find_spec(module).origin).parent.parent
            raise ImportError(
                f"QGIS would import a {module} that carries its own copy of PROJ (a pip wheel, in {where}); "
                "loading it inside QGIS crashes QGIS. Remove it from that folder (python3 -m pip uninstall "
                f"{module}) and use the {module} that comes with QGIS ({QGIS_PACKAGES.get(module, 'its package')})."
            )


def check_geopriv():
    """Raise ImportError with installation instructions unless a compatible geopriv is importable."""
    check_binaries()
    try:
        import geopriv
    except ImportError as exc:
        raise _cannot_import(exc) from exc
    version = getattr(geopriv, "__version__", "0")
    if _version_tuple(version) < _version_tuple(MIN_GEOPRIV_VERSION):
        raise ImportError(
            f"The geopriv plugin needs geopriv >= {MIN_GEOPRIV_VERSION}; QGIS imports geopriv "
            f"{version} from {geopriv.__file__}. " + install_hint()
        )
    from .provider import ALGORITHMS

    try:  # geopriv imports each name's module on first use: its dependencies (numpy, GeoPandas, ...) load here
        missing = sorted({name for alg in ALGORITHMS for name in alg.GEOPRIV_API if not hasattr(geopriv, name)})
    except ImportError as exc:
        raise _cannot_import(exc) from exc
    if missing:
        raise ImportError(
            f"The geopriv {version} that QGIS imports ({geopriv.__file__}) lacks {', '.join(missing)}, "
            "which this plugin calls: it is older than the plugin. " + install_hint()
        )
    lacking = sorted(
        {
            f"{function}({keyword}=)"
            for alg in ALGORITHMS
            for function, keywords in getattr(alg, "GEOPRIV_KEYWORDS", {}).items()
            for keyword in keywords
            if not _takes(getattr(geopriv, function), keyword)
        }
    )
    if lacking:
        raise ImportError(
            f"The geopriv {version} that QGIS imports ({geopriv.__file__}) lacks {', '.join(lacking)}, "
            "which this plugin passes: it is older than the plugin. " + install_hint()
        )
    return geopriv


def _cannot_import(exc: ImportError) -> ImportError:
    return ImportError(
        f"The geopriv plugin needs the geopriv Python library, which QGIS cannot import ({exc}). " + install_hint()
    )


def _takes(function, keyword: str) -> bool:
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):  # no signature to read: assume it does
        return True
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
