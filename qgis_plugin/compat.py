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

MIN_GEOPRIV_VERSION = "0.1.0"
DOCS = "docs/qgis.md in the geopriv source tree"


def _version_tuple(text: str) -> tuple:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def install_hint() -> str:
    return (
        f"Install geopriv >= {MIN_GEOPRIV_VERSION} into the Python that QGIS runs ({sys.executable}, "
        f"Python {sys.version_info.major}.{sys.version_info.minor}), then restart QGIS. "
        "Debian/Ubuntu: python3 -m pip install --user --break-system-packages "
        "-c constraints/floor.txt <geopriv source folder or wheel> (the constraints keep NumPy below 2, "
        "which Debian's GDAL bindings need). Windows: from the OSGeo4W Shell, python -m pip install "
        "<geopriv source folder or wheel>. macOS (QGIS.app): /Applications/QGIS.app/Contents/MacOS/bin/python3 "
        f"-m pip install <geopriv source folder or wheel>. Details: {DOCS}."
    )


def check_geopriv():
    """Raise ImportError with installation instructions unless a compatible geopriv is importable."""
    try:
        import geopriv
    except ImportError as exc:
        raise ImportError(f"The geopriv plugin needs the geopriv Python library, which QGIS cannot import ({exc}). "
                          + install_hint()) from exc
    version = getattr(geopriv, "__version__", "0")
    if _version_tuple(version) < _version_tuple(MIN_GEOPRIV_VERSION):
        raise ImportError(f"The geopriv plugin needs geopriv >= {MIN_GEOPRIV_VERSION}; QGIS imports geopriv "
                          f"{version} from {geopriv.__file__}. " + install_hint())
    from .provider import ALGORITHMS

    missing = sorted({name for alg in ALGORITHMS for name in alg.GEOPRIV_API if not hasattr(geopriv, name)})
    if missing:
        raise ImportError(f"The geopriv {version} that QGIS imports ({geopriv.__file__}) lacks {', '.join(missing)}, "
                          "which this plugin calls: it is older than the plugin. " + install_hint())
    lacking = sorted({f"{function}({keyword}=)" for alg in ALGORITHMS
                      for function, keywords in getattr(alg, "GEOPRIV_KEYWORDS", {}).items()
                      for keyword in keywords if not _takes(getattr(geopriv, function), keyword)})
    if lacking:
        raise ImportError(f"The geopriv {version} that QGIS imports ({geopriv.__file__}) lacks {', '.join(lacking)}, "
                          "which this plugin passes: it is older than the plugin. " + install_hint())
    return geopriv


def _takes(function, keyword: str) -> bool:
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):  # no signature to read: assume it does
        return True
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
