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
    "BudgetExceededError",
    "RasterError",
    "InfeasibleMechanismError",
    "MechanismFileError",
    "LocationAttributeError",
    "GeoprivWarning",
    "DistortionWarning",
    "format_labels",
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


class GeoprivWarning(UserWarning):
    """Base class of geopriv's warnings."""


class DistortionWarning(GeoprivWarning):
    """The CRS scale varies over the data: the guarantee holds, some points get more noise."""
