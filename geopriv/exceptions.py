"""Exceptions raised by geopriv.

Every message says what is wrong *and how to fix it*.  Messages name row labels, never
coordinates: an error log must not become a leak of the locations it was protecting.
"""
from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "GeoprivError",
    "MissingCRSError",
    "CRSError",
    "GeometryError",
    "EmptyInputError",
    "IdentityError",
    "StaleReleaseError",
    "BudgetExceededError",
    "RasterError",
    "InfeasibleMechanismError",
    "MechanismFileError",
    "LocationAttributeError",
    "PathBindingError",
    "InputError",
    "OutputError",
    "ParameterError",
    "ParameterTypeError",
    "UsageError",
    "NetworkError",
    "GeoprivWarning",
    "DistortionWarning",
    "format_labels",
    "user_message",
    "shows_message",
]


def format_labels(labels: Iterable, limit: int = 10) -> str:
    """Render row labels for an error message: the first ``limit`` and a count of the rest."""
    labels = list(labels)
    shown = ", ".join(repr(label) for label in labels[:limit])
    if len(labels) > limit:
        shown += f", ... ({len(labels) - limit} more)"
    return shown


class GeoprivError(ValueError):
    """Base class of geopriv's errors (a ValueError: bad input, nothing was released)."""


class MissingCRSError(GeoprivError):
    """The data has no coordinate reference system, so metres cannot be known."""

    def __init__(self, what: str = "the GeoDataFrame"):
        super().__init__(
            f"{what} has no CRS, so geopriv cannot tell how far a metre is and cannot honour "
            "an epsilon per metre. Set the CRS the coordinates are really in, e.g. "
            "gdf = gdf.set_crs('EPSG:4326') for longitude/latitude or gdf.set_crs(32650) for "
            "UTM zone 50N metres, then call again."
        )


class CRSError(GeoprivError):
    """The CRS cannot be related to ground metres, or two inputs disagree on CRS."""


class GeometryError(GeoprivError):
    """Geometries the mechanism cannot release (not points, empty, missing, non-finite)."""

    def __init__(self, problem: str, labels: Iterable, hint: str):
        labels = list(labels)
        self.labels = labels
        super().__init__(f"{len(labels)} row(s) {problem}: labels {format_labels(labels)}. {hint}")


class IdentityError(GeoprivError):
    """Row identities that cannot key noise soundly: repeated, mixed-type, missing or positional.

    Names the rows by label when the labels are integers or strings; labels of any other type
    (floats: possibly coordinates) are counted, never shown.
    """

    def __init__(self, problem: str, labels: Iterable | None, hint: str, count: int | None = None):
        self.labels = None if labels is None else list(labels)
        n = count if count is not None else (len(self.labels) if self.labels is not None else 0)
        shown = "" if self.labels is None else f": labels {format_labels(self.labels)}"
        super().__init__(f"{n} row(s) {problem}{shown}. {hint}")


class StaleReleaseError(GeoprivError):
    """A lazy release computed on data other than the data it was built on (it answers those only)."""


class EmptyInputError(GeoprivError):
    """Nothing to release."""


class BudgetExceededError(GeoprivError):
    """A release would spend more privacy budget than is left; nothing was drawn."""


class RasterError(GeoprivError):
    """A raster (population or privacy map) that cannot be used: no data, bad values, bad geometry."""


class InfeasibleMechanismError(GeoprivError):
    """No mechanism meeting the privacy map could be built with the given options; nothing was returned."""


class MechanismFileError(GeoprivError):
    """A saved mechanism file is corrupt, truncated, from another format version, or not the one expected."""


class LocationAttributeError(GeoprivError):
    """Attribute columns or the index hold the true locations and would be released verbatim.

    ``reasons`` maps each offending column label (``"<index>"`` for the index) to why it was
    flagged; neither the reasons nor the message contain coordinate values.
    """

    def __init__(self, message: str, reasons: dict | None = None):
        self.reasons = dict(reasons or {})
        super().__init__(message)


class InputError(GeoprivError):
    """An input file that cannot be read: missing, unreadable, too large, ambiguous layer, wrong CRS."""


class OutputError(GeoprivError):
    """An output that cannot be written safely: unknown format, exists, or is one of the inputs."""


class ParameterError(GeoprivError):
    """An option (keyword argument, command-line option, QGIS parameter) with a value that cannot be used."""


class ParameterTypeError(TypeError):
    """An option of the wrong type: a ``TypeError`` (as Python's own checks raise), written by geopriv, so shown."""


class UsageError(GeoprivError):
    """Options that do not go together, or a required option missing (the command line's errors)."""


class NetworkError(GeoprivError):
    """A network (graph) that cannot be used: unknown nodes, bad weights, or weights so extreme that its
    distances cannot be computed accurately."""


class PathBindingError(GeoprivError):
    """A secret diffusion path was offered for another source, value, column, dimension or frame than it answers."""


class GeoprivWarning(UserWarning):
    """Base class of geopriv's warnings."""


class DistortionWarning(GeoprivWarning):
    """The CRS scale varies over the data: the guarantee holds, some points get more noise."""


def shows_message(exc: BaseException) -> bool:
    """Whether :func:`user_message` shows ``exc``'s own text: geopriv's errors and warnings, nothing else.

    Every error geopriv raises is one of its named classes (:class:`GeoprivError` and its
    subclasses, :class:`ParameterTypeError`); a plain ``ValueError`` or ``TypeError`` comes from
    another library (or Python) and may quote data values, so its text is withheld.
    """
    return isinstance(exc, (GeoprivError, GeoprivWarning, ParameterTypeError))


#: what went wrong in a foreign library, by its top-level module: how to proceed (no data values)
_FOREIGN_HINTS = {
    "pyproj": "the coordinate reference system could not be used: check the file's CRS (or give the CRS explicitly)",
    "pyogrio": "GDAL could not read or write a file: check its format, layer and columns",
    "fiona": "GDAL could not read or write a file: check its format, layer and columns",
    "osgeo": "GDAL could not read or write a file: check its format, layer and columns",
    "rasterio": "GDAL could not read or write a raster: check that it is a GeoTIFF with a CRS",
    "shapely": "a geometry could not be processed: check the input's geometries",
    "pandas": "a column could not be processed: check the input's attribute columns and their types",
    "numpy": "an array computation failed: check the input's values and sizes",
    "scipy": "a numerical computation failed: check the input's values and sizes",
}
_LIBRARY_NAMES = {"builtins": "Python", "osgeo": "GDAL", "pyogrio": "GDAL (pyogrio)", "fiona": "GDAL (fiona)",
                  "rasterio": "GDAL (rasterio)"}


def user_message(exc: BaseException, debug_hint: str = "rerun with GEOPRIV_TRACEBACK=1 to see it") -> str:
    """The one-line text shown to a user for ``exc`` (the command line and the QGIS plugin).

    geopriv's own errors and warnings (:class:`GeoprivError`, :class:`GeoprivWarning` and their
    subclasses) are written by geopriv to name row labels, never coordinates: their message is
    shown, on one line (so, for now, is a plain ``ValueError``/``TypeError`` raised by a
    ``raise`` statement of geopriv's not yet converted to a named class, outside any exception
    handler).  Any other exception (pandas, pyproj, numpy, GDAL, a bare ``ValueError``)
    may quote values from the data in its text, so only its type, the library it comes from and a
    generic hint are shown; the text is withheld.  An :class:`OSError` with a file name shows the
    operating system's reason and the file name (both written by the user or the system, not
    data).  :class:`MemoryError` says how to proceed.

    Parameters
    ----------
    exc : BaseException
        The exception to describe.
    debug_hint : str, optional
        How the user can see the withheld text (the command line: ``GEOPRIV_TRACEBACK=1``; QGIS:
        the Python console).

    Returns
    -------
    str
        One line, without a trailing period.

    Examples
    --------
    >>> user_message(GeoprivError("2 row(s) are outside the bounds: labels 3, 7. Widen bounds="))
    '2 row(s) are outside the bounds: labels 3, 7. Widen bounds='
    >>> user_message(ValueError("could not convert string to float: '51.5123'"))[:43]
    'an error in Python (ValueError): its messag'
    """
    if shows_message(exc):
        text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
        return text or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror and exc.filename and type(exc).__module__ == "builtins":
        return f"{exc.strerror}: {exc.filename}"
    name = type(exc).__qualname__
    module = (type(exc).__module__ or "builtins").split(".")[0]
    library = _LIBRARY_NAMES.get(module, module)
    if isinstance(exc, MemoryError):
        hint = "not enough memory: process the data in parts, or resample or clip large rasters"
    else:
        hint = _FOREIGN_HINTS.get(module)
    return (f"an error in {library} ({name}): " + (f"{hint}; " if hint else "")
            + f"its message is withheld because it may quote data values; {debug_hint}")
