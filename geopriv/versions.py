"""``geopriv.show_versions()``: the versions to paste into a bug report.

Like ``geopandas.show_versions()``: geopriv's version, Python and the platform, the C libraries
underneath (GEOS, and PROJ and GDAL as each package that carries a copy of them sees them: a pip
wheel of pyproj, pyogrio or rasterio brings its own, which may differ from the system's or
QGIS's), then the versions of the dependencies and of the optional ones.

The package versions are read from the installed distributions' metadata
(``importlib.metadata``), so nothing but the four geometry packages that report the C libraries
is imported.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import platform
import sys
from typing import IO

from ._version import __version__

#: the distributions geopriv requires (pyproject.toml's ``dependencies``), by their PyPI names
REQUIRED = (
    "numpy",
    "pandas",
    "geopandas",
    "shapely",
    "pyproj",
    "pyogrio",
    "rasterio",
    "scipy",
    "scikit-fmm",
    "tqdm",
    "filelock",
)
#: the distributions of geopriv's extras (pyproject.toml's ``optional-dependencies``)
OPTIONAL = (
    "h3",
    "dask",
    "dask-geopandas",
    "distributed",
    "movingpandas",
    "networkx",
    "psycopg",
    "matplotlib",
    "highspy",
    "pot",
)


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _attribute(module: str, *path: str) -> str | None:
    """``module.path[0].path[1]...`` called if callable, or None when the module does not import."""
    try:
        value = importlib.import_module(module)
    except Exception:  # a broken install is reported as a missing version, never raised from here
        return None
    for name in path:
        value = getattr(value, name, None)
        if value is None:
            return None
    if callable(value):
        try:
            value = value()
        except Exception:
            return None
    return None if value is None else str(value)


def _system() -> dict[str, str | None]:
    return {
        "geopriv": __version__,
        "python": sys.version.replace("\n", " "),
        "executable": sys.executable,
        "machine": platform.platform(),
    }


def _libraries() -> dict[str, str | None]:
    libs = {
        "GEOS (shapely)": _attribute("shapely", "geos_version_string"),
        "PROJ (pyproj)": _attribute("pyproj", "proj_version_str"),
        "PROJ data (pyproj)": _attribute("pyproj", "datadir", "get_data_dir"),
        "PROJ (rasterio)": _attribute("rasterio", "__proj_version__"),
        "GDAL (pyogrio)": _attribute("pyogrio", "__gdal_version_string__"),
        "GDAL (rasterio)": _attribute("rasterio", "__gdal_version__"),
    }
    # inside QGIS (or wherever they are already loaded): QGIS's own GDAL and QGIS itself, never imported here
    if "osgeo.gdal" in sys.modules:
        libs["GDAL (osgeo)"] = _attribute("osgeo.gdal", "__version__")
    if "qgis.core" in sys.modules:
        libs["QGIS"] = _attribute("qgis.core", "Qgis", "QGIS_VERSION")
    return libs


def versions() -> dict[str, dict[str, str | None]]:
    """The versions :func:`show_versions` prints, as a dictionary of sections.

    Returns
    -------
    dict
        ``{"system": ..., "libraries": ..., "dependencies": ..., "optional": ...}``, each a dictionary
        from a name to its version (``None``: not installed, or not importable).
    """
    return {
        "system": _system(),
        "libraries": _libraries(),
        "dependencies": {name: _distribution_version(name) for name in REQUIRED},
        "optional": {name: _distribution_version(name) for name in OPTIONAL},
    }


_TITLES = {
    "system": "SYSTEM INFO",
    "libraries": "GEOS, PROJ, GDAL INFO",
    "dependencies": "PYTHON DEPENDENCIES",
    "optional": "OPTIONAL DEPENDENCIES (extras)",
}


def show_versions(file: IO[str] | None = None) -> None:
    """Print geopriv's version, Python, the platform, the C libraries and every dependency's version.

    Paste its output into a bug report.  Packages that are not installed are shown as ``None``.

    Parameters
    ----------
    file : file-like, optional
        Where to print (default: ``sys.stdout``).

    See Also
    --------
    geopandas.show_versions : The same for GeoPandas.

    Examples
    --------
    >>> geopriv.show_versions()
    <BLANKLINE>
    SYSTEM INFO
    -----------
    geopriv    : ...
    GEOS, PROJ, GDAL INFO
    ---------------------
    GEOS (shapely)     : ...

    Or into a file, to attach to the report:

    >>> with open("versions.txt", "w") as f:
    ...     geopriv.show_versions(file=f)
    >>> open("versions.txt").read().splitlines()[1]
    'SYSTEM INFO'
    """
    out = sys.stdout if file is None else file
    for section, values in versions().items():
        title = _TITLES[section]
        print(f"\n{title}\n{'-' * len(title)}", file=out)
        width = max(len(name) for name in values)
        for name, value in values.items():
            print(f"{name:<{width}} : {value}", file=out)
