"""Attribute columns that hold the true locations: find them, and refuse to release them.

Why this exists
---------------
geopriv perturbs the *geometry* of every row and returns all other attribute columns
unchanged.  If one of those columns (or the index) still holds the true location, the release
leaks it verbatim and the privacy guarantee on the geometry is worthless: the adversary simply
reads the location from the column.  This is common in practice, because the data was often
built *from* such columns (``points_from_xy(df.lon, df.lat)`` keeps ``lon`` and ``lat``;
exports from PostGIS, spreadsheets and GPS loggers carry WKT, WKB, GeoJSON or "lat, lon"
text; ``set_index(["x", "y"])`` moves coordinates into the index).  So such columns are
detected and refused unless the user explicitly keeps them.

The *order* of the rows leaks too: a release keeps it, and files and query results are often
in spatial order (GDAL writes FlatGeobuf sorted on a Hilbert curve; spatial joins and database
exports are often spatially sorted).  Then neighbouring released rows are neighbouring true
points, and averaging each released point with its neighbours cancels much of the noise.  An
index or id column assigned in a spatial order leaks the same way even after the rows are
shuffled: the adversary sorts by it.  :func:`order_leaks` detects both.

What is detected
----------------
For a GeoDataFrame every attribute column other than the active geometry is checked, and the
index; for a GeoSeries only the index.  Other geometry-dtype columns are refused elsewhere
(:func:`geopriv.points.check_no_other_geometries`) and ignored here.

1. Numeric (integer or float, not boolean) columns whose values are *close to the points'
   coordinates*, compared with the points' x and y in the data's own CRS, in EPSG:4326
   longitude/latitude and in EPSG:3857 (``always_xy``).  Close means within 1,000 CRS units
   (metres, feet, ...) or within 0.01 degree, in at least 90 % of the sampled non-null rows,
   *and* the match is row-specific: the median error must be at most half the median error
   against the coordinates of other rows (or below 1 % of the tolerance).  The second
   condition keeps constant or small-valued columns (counts, flags) from matching data that
   happens to lie within 1,000 units of a CRS origin.  Also flagged: a numeric column that is
   an affine function of the coordinates (correlation above 0.999 with a linear combination
   of x and y in the data's CRS or in longitude/latitude, over at least 20 rows and 10
   distinct values), i.e. the coordinates in other units (feet), another projected CRS or with
   a local offset.  Integer columns that are an affine function of the row position (row
   numbers, sequential ids) are not flagged as affine: they tell no more than the row order.
   And a numeric column that is a *monotone* (not necessarily affine) function of x or of y in
   the data's CRS or in longitude/latitude: Spearman rank correlation above 0.995 over at least
   20 rows and 20 distinct values (British National Grid or UTM eastings of longitude/latitude
   data over a whole country or zone, logarithms, squares), row numbers excepted.  With fewer
   than 20 rows only closeness is tested; a single row holding its own coordinates is enough.
2. Object and string columns whose values are geometries: WKT (``POINT (...)``, ``SRID=4326;
   MULTIPOLYGON EMPTY``, ..., case-insensitive), GeoJSON (dicts, or JSON or ``str(dict)`` text
   with ``"type"``/``'type'`` and ``"coordinates"``), hex WKB/EWKB text, WKB ``bytes``, shapely
   geometry objects; or coordinate pairs: text such as ``"39.9042, 116.4074"`` or
   ``"(448000 4416000)"`` and tuples or lists of 2 or 3 numbers, close to the coordinates as in
   1 (either order); or *texts whose numbers include the row's coordinates*: every number of a
   text (or of ``str()`` of a dict or longer list) is read, including angles written in
   degrees, minutes and seconds or with hemisphere letters (``51°30'52"N 0°7'45"W``,
   ``N51°30.866'``, ``51.5142N``), converted to signed degrees; the text is flagged when its
   numbers include both coordinates, or one of them, of its own row (close and row-specific
   as in 1), so URLs (``https://maps.google.com/?q=51.5,-0.13``), ``"lat=51.5 lon=-0.13"`` and
   the like are found; or geohashes (5 to 12 characters of the geohash alphabet), decoded to
   their cells, when the row's point lies in (or within the tolerance of) its own cell and the
   cells are row-specific (a 5 km cell over a 1 km study area is not); or numbers (numeric
   text, numbers in an object column) checked as in 1.  A column is flagged when at least 50 %
   of its sampled non-null values look so.  Categorical columns are checked on their values.
3. The index (each level of a MultiIndex) as a column in 1 and 2.  A RangeIndex is never
   flagged.
4. (:func:`order_leaks`, run by :func:`check_location_attributes`) the row order, when
   consecutive rows are much closer together than random pairs of rows (key ``"<row order>"``);
   the index, when sorting the rows by it does the same (unless it follows the row order: then
   it tells what the row order tells); and each column with at least 50 % distinct values
   (numbers, datetimes, text) that does.  Columns whose order is public (a trace release's
   trace id and time stamps, ``allow_order=``) are not tested, and rows in their order are not
   a leak.

Cost
----
Every check runs on a deterministic sample: at most 20,000 evenly spaced rows (2,000 for
text, which is parsed value by value; the order test reads 20,000 pairs of consecutive rows
and sorts text columns on 5,000 rows), so the cost does not grow with the number of rows: tens
of milliseconds on 3 million rows.  A
column whose sample is (nearly) all missing is re-sampled among its non-missing rows, so a
few leaked values in a mostly empty column are still found.  Rows whose geometry is not a
non-empty point are ignored by the coordinate comparisons.

Nothing here ever puts a coordinate value in a message: reasons name columns, CRSs,
tolerances and fractions only.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import shlex
from dataclasses import dataclass, field

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from pyproj import CRS, Transformer
from pyproj.exceptions import CRSError as _PyprojCRSError
from pyproj.exceptions import ProjError as _ProjError

from .exceptions import Fix, LocationAttributeError, ParameterError, ParameterTypeError

__all__ = [
    "INDEX",
    "ROW_ORDER",
    "check_location_attributes",
    "find_location_columns",
    "order_leaks",
    "row_order_fix",
    "drop_columns_fix",
    "index_fix",
]

#: The label standing for the index in results and in ``keep``.
INDEX = "<index>"
#: The label standing for the order of the rows in results and in ``keep``.
ROW_ORDER = "<row order>"

SAMPLE_ROWS = 20_000
TEXT_SAMPLE_ROWS = 2_000
METRE_TOLERANCE = 1_000.0  # CRS units (metres, feet, ...)
DEGREE_TOLERANCE = 0.01
NUMERIC_FRACTION = 0.9
TEXT_FRACTION = 0.5
AFFINE_MIN_ROWS = 20
AFFINE_MIN_DISTINCT = 10
AFFINE_CORRELATION = 0.999
RANK_CORRELATION = 0.995
RANK_MIN_DISTINCT = 20
ORDER_PAIRS = 20_000  # consecutive-row pairs (and random pairs) sampled by the order test
TEXT_ORDER_ROWS = 5_000  # rows of a text column sorted by the order test
ORDER_RATIO = 0.5
ORDER_ALPHA = 1e-5  # one-sided binomial p-value a spatial order must also reach
ORDER_DISTINCT = 0.5
_ORDER_SEED = 0x9E0_5EED
_SCREEN_PAIRS = 2_000
_SCREEN_RATIO = 0.7
_SPARSE = 20  # fewer sampled non-null values than this: re-sample among the non-null rows

_PLURAL = {"metre": "metres", "meter": "metres", "foot": "feet", "US survey foot": "US survey feet"}
_WGS84 = CRS.from_epsg(4326)
_WEB_MERCATOR = CRS.from_epsg(3857)
_MERCATOR_RADIUS = 6_378_137.0

_WKT = re.compile(
    r"(?:SRID\s*=\s*\d+\s*;\s*)?"
    r"(?:MULTIPOINT|MULTILINESTRING|MULTIPOLYGON|MULTICURVE|MULTISURFACE|GEOMETRYCOLLECTION|"
    r"POINT|LINESTRING|LINEARRING|POLYGON|TRIANGLE|TIN|POLYHEDRALSURFACE|CIRCULARSTRING|"
    r"COMPOUNDCURVE|CURVEPOLYGON)"
    r"\s*(?:ZM|Z|M)?\s*(?:\(|EMPTY\b)",
    re.IGNORECASE,
)
_HEX = re.compile(r"0[01](?:[0-9A-Fa-f]{2}){8,}")
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NUMBER = re.compile(r"\s*" + _NUM + r"\s*")
# every number in a text, not glued to a word before it ("x1", hex digests)
_NUMBERS = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# angles with a degree mark (51°30'52"N, 51d30m52s, N51°30.866', -0.1365°), or decimal degrees
# with a hemisphere letter (51.5142N, W0.1365)
_DMS = re.compile(
    r"(?<![A-Za-z])(?P<pre>[NSEW])?\s*(?P<sign>[-+])?(?P<deg>\d{1,3}(?:\.\d+)?)\s*(?:°|º|˚|deg\b|d(?=\s*\d))\s*"
    r"(?:(?P<min>\d{1,2}(?:\.\d+)?)\s*(?:'|′|’|min\b|m(?![a-z]))\s*)?"
    r"(?:(?P<sec>\d{1,2}(?:\.\d+)?)\s*(?:\"|″|”|''|sec\b|s(?![a-z]))\s*)?"
    r"(?P<post>[NSEW](?![A-Za-z0-9]))?",
    re.IGNORECASE,
)
_HEMISPHERE = re.compile(
    r"(?<![A-Za-z])(?P<pre>[NSEW])\s*(?P<a>\d{1,3}(?:\.\d+)?)(?![\d°º˚'′’])"
    r"|(?<![\w.])(?P<b>\d{1,3}(?:\.\d+)?)\s*(?P<post>[NSEW])(?![A-Za-z])",
)
_GEOJSON_KEYS = (re.compile(r"[\"']coordinates[\"']"), re.compile(r"[\"']type[\"']"))
_GEOHASH_ALPHABET = "0123456789bcdefghjkmnpqrstuvwxyz"
_GEOHASH_TABLE = np.zeros(256, dtype=np.int64)
_GEOHASH_TABLE[np.frombuffer(_GEOHASH_ALPHABET.encode("ascii"), dtype=np.uint8)] = np.arange(32)
_GEOHASH = re.compile(r"[0-9b-hjkmnp-z]{5,12}", re.IGNORECASE)
_PAIR = re.compile(
    r"\s*[\(\[\{]?\s*(" + _NUM + r")\s*(?:[,;]\s*|\s+)(" + _NUM + r")"
    r"(?:\s*(?:[,;]\s*|\s+)" + _NUM + r")?\s*[\)\]\}]?\s*"
)


@dataclass(frozen=True)
class _Frame:
    """The sampled points' coordinates in one CRS."""

    label: str  # e.g. "EPSG:4326"
    names: tuple  # ("longitude", "latitude") or ("x", "y")
    x: np.ndarray
    y: np.ndarray
    tolerance: float
    unit: str  # "degree", "metre", "US survey foot", ...
    affine: bool  # also test for affine and monotone functions of (x, y) in this frame
    ranks: dict = field(default_factory=dict, compare=False, repr=False)  # cached ranks of x, y

    def axis(self, i: int) -> np.ndarray:
        return self.x if i == 0 else self.y

    def tolerance_text(self) -> str:
        if self.unit == "degree":
            return f"{self.tolerance:g} degree"
        unit = _PLURAL.get(self.unit, f"{self.unit} units" if self.unit != "CRS units" else self.unit)
        return f"{self.tolerance:,.0f} {unit}"


# --------------------------------------------------------------------------------------------
# public API


def find_location_columns(data, *, crs=None) -> dict:
    """Attribute columns and index levels that hold the true point locations.

    Parameters
    ----------
    data : geopandas.GeoDataFrame or geopandas.GeoSeries
        For a GeoDataFrame, every column other than the active geometry is checked (other
        geometry-dtype columns are skipped: they are refused elsewhere), and the index; for a
        GeoSeries, only its index.
    crs : optional
        CRS of the geometries (anything :meth:`pyproj.CRS.from_user_input` accepts).  By default
        the data's own CRS.  Without any CRS only the raw coordinates are compared (read as
        degrees when they all lie within longitude/latitude bounds).

    Returns
    -------
    dict
        ``{column label: reason}``, with the string ``"<index>"`` (:data:`INDEX`) as the label
        of the index.  Empty when nothing was found.  Reasons never contain coordinates.

    Notes
    -----
    The checks and their thresholds are described in the module docstring.  Everything is
    computed on a deterministic sample of at most 20,000 rows, so the cost is milliseconds
    whatever the number of rows.

    Examples
    --------
    >>> pts = gdf.to_crs(4326)
    >>> gdf["lon"], gdf["lat"] = pts.x, pts.y
    >>> sorted(find_location_columns(gdf))
    ['lat', 'lon']
    """
    return _find(data, crs=crs, skip=())


def check_location_attributes(data, *, keep=(), allow_order=(), check_order=True) -> None:
    """Refuse data whose attribute columns, index or row order give the true locations away.

    Parameters
    ----------
    data : geopandas.GeoDataFrame or geopandas.GeoSeries
        The data about to be released (see :func:`find_location_columns` and
        :func:`order_leaks`).
    keep : iterable of column labels, optional
        Columns to release as they are although they look like locations (say, a column of
        altitudes that happens to track the y coordinate); ``"<index>"`` keeps the index and
        ``"<row order>"`` the order of the rows.  A single string is one label.  Kept columns
        are not checked.
    allow_order : iterable of column labels, optional
        Columns whose *order* is public, such as a trace release's trace id and time stamps:
        they are not tested for a spatial order (nor as monotone functions of the coordinates;
        they still are for holding coordinates), and a row order that follows them is not
        refused.  See :func:`order_leaks`.
    check_order : bool, default True
        Also refuse a row order, index or column whose order follows the locations
        (:func:`order_leaks`).

    Raises
    ------
    geopriv.exceptions.LocationAttributeError
        If any column, the index or the row order gives the locations away.  The message names
        them and the reasons (never coordinate values) and says how to fix or keep them.
    ValueError
        If an entry of ``keep`` is not a column of ``data`` (nor ``"<index>"`` or
        ``"<row order>"``), or an entry of ``allow_order`` is not a column.
    TypeError
        If ``data`` is not a GeoDataFrame or GeoSeries.
    """
    _check_type(data)
    keep = _normalise_keep(keep)
    allow_order = _normalise_keep(allow_order)
    valid = list(data.columns) if isinstance(data, gpd.GeoDataFrame) else []
    unknown = [k for k in keep if k not in (INDEX, ROW_ORDER) and not _in_labels(k, valid)]
    if unknown:
        what = f"columns {valid!r}" if valid else "no columns (it is a GeoSeries)"
        raise ParameterError(
            f"The kept column(s) {unknown!r} name no column of the data: it has {what}, "
            f"{INDEX!r} stands for its index and {ROW_ORDER!r} for the order of its rows.",
            fix=Fix(
                "fix_keep",
                python="Fix the spelling or remove them from keep=.",
                cli="Fix the spelling or remove them from --keep.",
                qgis=f"Fix the advanced parameter '{QGIS_KEEP_LABEL}'.",
            ),
        )
    unknown = [k for k in allow_order if not _in_labels(k, valid)]
    if unknown:
        what = f"columns {valid!r}" if valid else "no columns (it is a GeoSeries)"
        raise ParameterError(f"allow_order={unknown!r} names no column of the data: it has {what}.")
    found = _find(data, crs=None, skip=keep, rank_exempt=allow_order)
    ordered = {}
    if check_order:
        ordered = _order_leaks(data, None, allow=allow_order, skip=keep)
        for label, reason in ordered.items():
            found[label] = f"{found[label]}; also {reason}" if label in found else reason
    if found:
        message, fix = _message(found, ordered)
        raise LocationAttributeError(message, found, fix=fix)


# --------------------------------------------------------------------------------------------
# driver


def _check_type(data) -> None:
    if not isinstance(data, (gpd.GeoDataFrame, gpd.GeoSeries)):
        raise ParameterTypeError(f"data must be a GeoDataFrame or GeoSeries, got {type(data).__name__}.")


def _normalise_keep(keep) -> list:
    if keep is None:
        return []
    if isinstance(keep, (str, bytes)) or not np.iterable(keep):
        return [keep]
    return list(keep)


def _in_labels(label, labels) -> bool:
    for other in labels:
        try:
            if label == other:
                return True
        except (TypeError, ValueError):  # pragma: no cover - exotic labels
            continue
    return False


def _find(data, *, crs, skip, rank_exempt=()) -> dict:
    _check_type(data)
    n = len(data)
    if n == 0:
        return {}
    if isinstance(data, gpd.GeoSeries):
        geoms = data
    else:
        try:
            geoms = data.geometry
        except AttributeError:  # no active geometry: only the coordinate-free checks can run
            geoms = None
    if crs is None and geoms is not None:
        crs = geoms.crs
    crs = CRS.from_user_input(crs) if crs is not None else None
    geom_array = None
    if geoms is not None:
        values = geoms.values
        geom_array = values._data if hasattr(values, "_data") else np.asarray(values, dtype=object)

    positions = _positions(n, SAMPLE_ROWS)
    frames = _frames(geom_array, positions, crs)
    found = {}

    if isinstance(data, gpd.GeoDataFrame):
        active = geoms.name if geoms is not None else None
        for i, label in enumerate(data.columns):
            if _in_labels(label, skip) or (active is not None and _same_label(label, active)):
                continue
            column = data.iloc[:, i]
            if isinstance(column.dtype, gpd.array.GeometryDtype):
                continue
            reason = _column_reason(column, positions, frames, geom_array, crs, rank=not _in_labels(label, rank_exempt))
            if reason and label not in found:
                found[label] = reason

    if INDEX not in skip:
        reason = _index_reason(data.index, positions, frames)
        if reason:
            found[INDEX] = reason
    return found


def _same_label(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # pragma: no cover
        return False


def _positions(n: int, m: int) -> np.ndarray:
    """At most ``m`` evenly spaced positions in ``range(n)``, first and last included."""
    if n <= m:
        return np.arange(n)
    return np.floor(np.linspace(0, n - 1, m)).astype(np.int64)


@functools.lru_cache(maxsize=32)
def _transformer(source: CRS, target: CRS):
    try:
        return Transformer.from_crs(source, target, always_xy=True)
    except (_PyprojCRSError, _ProjError):
        return None


def _crs_label(crs: CRS) -> str:
    auth = crs.to_authority(min_confidence=90)
    return f"{auth[0]}:{auth[1]}" if auth else repr(crs.name)


def _frames(geom_array, positions, crs) -> list:
    """The sampled points' coordinates in the data's CRS, EPSG:4326 and EPSG:3857."""
    if geom_array is None:
        return []
    sample = geom_array[positions]
    points = shapely.get_type_id(sample) == 0
    points[points] = ~shapely.is_empty(sample[points])
    if not points.any():
        return []
    x = np.full(len(sample), np.nan)
    y = np.full(len(sample), np.nan)
    x[points] = shapely.get_x(sample[points])
    y[points] = shapely.get_y(sample[points])
    if crs is None:
        ok = np.isfinite(x) & np.isfinite(y)
        degrees = bool(np.all(np.abs(x[ok]) <= 180) and np.all(np.abs(y[ok]) <= 90))
        if degrees:
            return [
                _Frame(
                    "their coordinates (no CRS; read as degrees)", ("x", "y"), x, y, DEGREE_TOLERANCE, "degree", True
                )
            ]
        return [_Frame("their coordinates (no CRS)", ("x", "y"), x, y, METRE_TOLERANCE, "CRS units", True)]

    frames = []
    is_wgs84 = crs.equals(_WGS84, ignore_axis_order=True)
    is_mercator = crs.equals(_WEB_MERCATOR)
    if crs.is_geographic:
        frames.append(_Frame(_crs_label(crs), ("longitude", "latitude"), x, y, DEGREE_TOLERANCE, "degree", True))
    else:
        unit = crs.axis_info[0].unit_name if crs.axis_info else "CRS units"
        frames.append(_Frame(_crs_label(crs), ("x", "y"), x, y, METRE_TOLERANCE, unit or "CRS units", True))
    if is_wgs84:
        lon, lat = x, y
    else:
        transformer = _transformer(crs, _WGS84)
        if transformer is None:
            return frames
        # one extra point: pyproj < 3.7 takes a one-element array for a scalar (DeprecationWarning)
        lon, lat = transformer.transform(np.append(x, x[:1]), np.append(y, y[:1]))
        lon, lat = np.asarray(lon, dtype=float)[:-1], np.asarray(lat, dtype=float)[:-1]
        # the affine test in lon/lat also catches lon/lat-like columns of projected data far apart
        frames.append(
            _Frame("EPSG:4326", ("longitude", "latitude"), lon, lat, DEGREE_TOLERANCE, "degree", not crs.is_geographic)
        )
    if not is_mercator:
        # EPSG:3857 is the spherical Mercator formula on WGS 84 longitude/latitude
        with np.errstate(all="ignore"):
            mx = _MERCATOR_RADIUS * np.radians(lon)
            my = _MERCATOR_RADIUS * np.log(np.tan(np.pi / 4 + np.radians(lat) / 2))
        frames.append(_Frame("EPSG:3857", ("x", "y"), mx, my, METRE_TOLERANCE, "metre", False))
    return frames


def _subsample(frames, idx) -> list:
    return [_Frame(f.label, f.names, f.x[idx], f.y[idx], f.tolerance, f.unit, f.affine) for f in frames]


# --------------------------------------------------------------------------------------------
# columns and index


def _column_reason(column: pd.Series, positions, frames, geom_array, crs, *, rank=True):
    kind = _kind(column.dtype)
    if kind is None:
        return None
    sample = column.iloc[positions]
    reason = _sample_reason(kind, sample, frames, positions, rank)
    if reason is not None:
        return reason
    # a (nearly) all-missing sample: look at the column's non-missing rows instead
    if len(column) > len(positions) and _count_present(sample) < _SPARSE:
        present = np.flatnonzero(column.notna().to_numpy())
        if len(present) > _count_present(sample):
            positions = present[_positions(len(present), SAMPLE_ROWS)]
            frames = _frames(geom_array, positions, crs)
            return _sample_reason(kind, column.iloc[positions], frames, positions, rank)
    return None


def _index_reason(index: pd.Index, positions, frames):
    if isinstance(index, pd.RangeIndex):
        return None
    sample = index.take(positions)
    if isinstance(sample, pd.MultiIndex):
        parts = []
        for level in range(sample.nlevels):
            values = sample.get_level_values(level)
            kind = _kind(values.dtype)
            reason = _sample_reason(kind, pd.Series(values), frames, positions) if kind else None
            if reason:
                name = f" {sample.names[level]!r}" if sample.names[level] is not None else ""
                parts.append(f"index level {level}{name} {reason}")
        return "; ".join(parts) or None
    kind = _kind(sample.dtype)
    if kind is None:
        return None
    reason = _sample_reason(kind, pd.Series(sample), frames, positions)
    return f"the index {reason}" if reason else None


def _kind(dtype):
    """'numeric', 'object' or 'categorical' for checkable dtypes, None for the others."""
    if isinstance(dtype, gpd.array.GeometryDtype):
        return None
    if isinstance(dtype, pd.CategoricalDtype):
        return "categorical"
    if pd.api.types.is_bool_dtype(dtype):
        return None
    if pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_float_dtype(dtype):
        return "numeric"
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
        return "object"
    return None  # datetimes, timedeltas, periods, intervals, complex, ...


def _count_present(sample: pd.Series) -> int:
    return int(sample.notna().sum())


def _sample_reason(kind, sample: pd.Series, frames, positions, rank=True):
    if kind == "categorical":
        categories = sample.cat.categories
        codes = sample.cat.codes.to_numpy()
        if _kind(categories.dtype) == "numeric":
            cats = categories.to_numpy(dtype=float, na_value=np.nan)
            values = np.where(codes >= 0, cats[np.maximum(codes, 0)], np.nan)
            return _numeric_reason(values, frames, positions, rank=rank)
        cats = np.asarray(categories, dtype=object)
        values = np.where(codes >= 0, cats[np.maximum(codes, 0)], None)
        return _object_reason(values, frames, positions, rank=rank)
    if kind == "numeric":
        return _numeric_reason(sample.to_numpy(dtype=float, na_value=np.nan), frames, positions, rank=rank)
    return _object_reason(np.asarray(sample, dtype=object), frames, positions, rank=rank)


# --------------------------------------------------------------------------------------------
# numeric values


def _match_fraction(values: np.ndarray, coords: np.ndarray, tolerance: float, total: int) -> float:
    """Fraction of ``total`` rows whose values are within ``tolerance`` of their own coordinates.

    ``values`` and ``coords`` are (k, d) arrays of finite numbers, row by row.  Returns 0 when
    the match is not row-specific: the median error must be at most half the median error
    against other rows' coordinates (a constant column near the data is not a location), unless
    it is below 1 % of the tolerance (an exact copy of coordinates that are all the same).
    """
    if total == 0 or len(values) == 0:
        return 0.0
    error = np.abs(values - coords).max(axis=1)
    shift = max(1, len(values) // 2)
    return _specific_fraction(
        error, lambda: np.abs(values - np.roll(coords, shift, axis=0)).max(axis=1), tolerance, total
    )


def _specific_fraction(error: np.ndarray, other: np.ndarray, tolerance: float, total: int) -> float:
    """Fraction of ``total`` rows with ``error`` within ``tolerance``, 0 unless row-specific.

    ``other`` is the error of the same values against other rows' coordinates (see
    :func:`_match_fraction`), or a function computing it (only called when needed).
    """
    if total == 0 or len(error) == 0:
        return 0.0
    fraction = np.count_nonzero(error <= tolerance) / total
    if fraction < TEXT_FRACTION:  # below both thresholds: skip the medians
        return fraction
    median = float(np.median(error))
    if median <= 0.01 * tolerance:
        return fraction
    if callable(other):
        other = other()
    if median <= 0.5 * float(np.median(other)):
        return fraction
    return 0.0


def _numeric_reason(values: np.ndarray, frames, positions, *, what: str = "values", rank: bool = True):
    present = np.isfinite(values)
    total = int(present.sum())
    if total == 0:
        return None
    for frame in frames:
        for i, name in enumerate(frame.names):
            c = frame.axis(i)
            ok = present & np.isfinite(c)
            k = int(ok.sum())
            if k == 0:
                continue
            fraction = _match_fraction(values[ok, None], c[ok, None], frame.tolerance, k)
            if fraction >= NUMERIC_FRACTION:
                return (
                    f"holds the points' {name} in {frame.label} ({what} within "
                    f"{frame.tolerance_text()} in {fraction:.0%} of {k:,} sampled rows)"
                )
    for frame in frames:
        if frame.affine:
            r = _affine_correlation(values, frame, positions)
            if r is not None:
                return (
                    f"is an affine function of the points' {frame.names[0]}/{frame.names[1]} in "
                    f"{frame.label} (correlation {r:.4f} over the sampled rows): the coordinates in "
                    "other units, another CRS or with an offset"
                )
    if rank:
        for frame in frames:
            if frame.affine:
                hit = _rank_correlation(values, frame, positions)
                if hit is not None:
                    name, rho, k = hit
                    return (
                        f"is a monotone function of the points' {name} in {frame.label} (rank correlation "
                        f"{rho:.4f} over {k:,} sampled rows): the coordinates in another CRS or a non-linear scale"
                    )
    return None


def _affine_correlation(values, frame, positions):
    """Multiple correlation of ``values`` with (x, y) of ``frame``, if above the threshold.

    Plain sums rather than BLAS (``@``, ``lstsq``): on 20,000 rows a threaded BLAS call can
    cost milliseconds of thread start-up on a busy machine, the sums cost microseconds.
    """
    ok = np.isfinite(values) & np.isfinite(frame.x) & np.isfinite(frame.y)
    if int(ok.sum()) < AFFINE_MIN_ROWS:
        return None
    v, x, y = values[ok], frame.x[ok], frame.y[ok]
    v = v - v.mean()
    x = x - x.mean()
    y = y - y.mean()
    svv = float((v * v).sum())
    sxx, syy, sxy = float((x * x).sum()), float((y * y).sum()), float((x * y).sum())
    if not (svv > 0 and (sxx > 0 or syy > 0)):
        return None
    sxv, syv = float((x * v).sum()), float((y * v).sum())
    det = sxx * syy - sxy * sxy
    if sxx > 0 and syy > 0 and det > 1e-9 * sxx * syy:
        r2 = (syy * sxv * sxv - 2.0 * sxy * sxv * syv + sxx * syv * syv) / (det * svv)
    else:  # one coordinate constant or the points on a line: the better single regressor
        r2 = max(sxv * sxv / (sxx * svv) if sxx > 0 else 0.0, syv * syv / (syy * svv) if syy > 0 else 0.0)
    if not r2 > AFFINE_CORRELATION**2:
        return None
    if len(np.unique(values[ok])) < AFFINE_MIN_DISTINCT:
        return None
    if _is_row_number(values[ok], positions[ok]):
        return None
    return float(np.sqrt(min(r2, 1.0)))


def _ranks(values: np.ndarray):
    """Average ranks (ties share the mean of their ranks) and the number of distinct values."""
    n = len(values)
    order = np.argsort(values, kind="stable")
    s = values[order]
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    ends = np.append(starts[1:], n)
    ranks = np.empty(n)
    ranks[order] = np.repeat((starts + ends - 1) / 2.0, ends - starts)
    return ranks, len(starts)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    aa, bb = float((a * a).sum()), float((b * b).sum())
    if not (aa > 0 and bb > 0):
        return 0.0
    return float((a * b).sum()) / math.sqrt(aa * bb)


def _rank_correlation(values, frame, positions):
    """(coordinate name, Spearman rho, rows) if ``values`` is a monotone function of x or y.

    A projected easting of longitude/latitude data (British National Grid over the UK, UTM over
    its zone) is not an affine function of longitude and latitude, but it orders the points as
    their longitude does.  Needs 20 rows and 20 distinct values; row numbers are not flagged.
    """
    ok = np.isfinite(values) & np.isfinite(frame.x) & np.isfinite(frame.y)
    k = int(ok.sum())
    if k < AFFINE_MIN_ROWS:
        return None
    v = values[ok]
    cache = frame.ranks if bool(ok.all()) else {}
    if k > 4 * _SCREEN_PAIRS:  # a quick look at a tenth of the rows first (rho moves by < 0.01)
        sub = _positions(k, _SCREEN_PAIRS)
        for i in range(2):
            if ("screen", i) not in cache:
                cache[("screen", i)] = _ranks(frame.axis(i)[ok][sub])[0]
        rs = _ranks(v[sub])[0]
        if max(abs(_pearson(rs, cache[("screen", i)])) for i in range(2)) < RANK_CORRELATION - 0.01:
            return None
    rv, distinct = _ranks(v)
    if distinct < RANK_MIN_DISTINCT or _is_row_number(v, positions[ok]):
        return None
    best = None
    for i, name in enumerate(frame.names):
        if i not in cache:
            cache[i] = _ranks(frame.axis(i)[ok])[0]
        rho = _pearson(rv, cache[i])
        if abs(rho) > RANK_CORRELATION and (best is None or abs(rho) > abs(best[1])):
            best = (name, rho, k)
    return best


def _is_row_number(values, positions) -> bool:
    """Integer values that are an affine function of the row position (ids 0..n-1 and the like)."""
    if not np.all(values == np.round(values)):
        return False
    p = positions.astype(float)
    p = p - p.mean()
    v = values - values.mean()
    pp, vv = float((p * p).sum()), float((v * v).sum())
    if pp == 0 or vv == 0:
        return False
    return abs(float((p * v).sum())) / np.sqrt(pp * vv) > 1 - 1e-9


# --------------------------------------------------------------------------------------------
# objects and text


def _is_missing(value) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return False


def _is_real(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _geojson_dict(value, depth: int = 0) -> bool:
    if not isinstance(value, dict) or depth > 3:
        return False
    if "type" in value and ("coordinates" in value or "geometries" in value):
        return True
    if "geometry" in value:
        return _geojson_dict(value["geometry"], depth + 1)
    if isinstance(value.get("features"), list) and value["features"]:
        return _geojson_dict(value["features"][0], depth + 1)
    return False


def _text_numbers(text: str) -> list:
    """Every number in ``text``, and its angles (DMS, hemisphere letters) in signed degrees."""
    out = [float(m) for m in _NUMBERS.findall(text)]
    for m in _DMS.finditer(text):
        value = float(m["deg"]) + float(m["min"] or 0) / 60 + float(m["sec"] or 0) / 3600
        hemisphere = (m["pre"] or m["post"] or "").upper()
        out.append(-value if m["sign"] == "-" or hemisphere in ("S", "W") else value)
    for m in _HEMISPHERE.finditer(text):
        value, hemisphere = (m["a"], m["pre"]) if m["a"] is not None else (m["b"], m["post"])
        out.append(-float(value) if hemisphere.upper() in ("S", "W") else float(value))
    return out


def _geohash_cells(texts: list) -> np.ndarray:
    """(k, 4) centres (longitude, latitude) and half-sizes of geohashes' cells.

    Each character holds 5 bits, longitude and latitude bits alternating from the first (a
    longitude bit), each halving that coordinate's interval, from [-180, 180] x [-90, 90].
    """
    out = np.empty((len(texts), 4))
    lengths = np.array([len(t) for t in texts])
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        chars = np.frombuffer("".join(texts[r] for r in rows).lower().encode("ascii"), dtype=np.uint8)
        values = _GEOHASH_TABLE[chars].reshape(len(rows), length)
        bits = ((values[:, :, None] >> np.arange(4, -1, -1)) & 1).reshape(len(rows), 5 * length)
        for axis, span in ((0, 360.0), (1, 180.0)):
            b = bits[:, axis::2].astype(float)
            weights = span / 2.0 ** np.arange(1, b.shape[1] + 1)
            half = span / 2.0 ** (b.shape[1] + 1)
            out[rows, axis] = -span / 2 + b @ weights + half
            out[rows, 2 + axis] = half
    return out


def _nearest(rows, numbers, c, k):
    """Per row of ``range(k)``: the distance from ``c[row]`` to the nearest of the row's numbers."""
    out = np.full(k, np.inf)
    with np.errstate(invalid="ignore"):
        np.minimum.at(out, rows, np.abs(numbers - c[rows]))
    return out


def _text_reason(rows, numbers, frames, total):
    """Texts holding, among all their numbers, the row's own coordinates (both, or one)."""
    if len(numbers) == 0:
        return None
    k = len(frames[0].x) if frames else 0
    for single in (False, True):
        for frame in frames:
            present = np.zeros(k, dtype=bool)
            present[rows] = True
            present &= np.isfinite(frame.x) & np.isfinite(frame.y)
            idx = np.flatnonzero(present)
            if len(idx) == 0:
                continue
            shift = max(1, len(idx) // 2)
            own, other = [], []
            for i in (0, 1):
                c = frame.axis(i)
                shifted = np.full(k, np.nan)
                shifted[idx] = np.roll(c[idx], shift)
                own.append(_nearest(rows, numbers, c, k)[idx])
                other.append(_nearest(rows, numbers, shifted, k)[idx])
            tests = (
                [(i, own[i], other[i]) for i in (0, 1)]
                if single
                else [(None, np.maximum(own[0], own[1]), np.maximum(other[0], other[1]))]
            )
            for i, error, other_error in tests:
                fraction = _specific_fraction(error, other_error, frame.tolerance, total)
                if fraction >= TEXT_FRACTION:
                    what = frame.names[i] if single else f"({frame.names[0]}, {frame.names[1]})"
                    return (
                        f"holds text whose numbers include the points' {what} in {frame.label} (within "
                        f"{frame.tolerance_text()} in {fraction:.0%} of {total:,} sampled non-missing values)"
                    )
    return None


def _geohash_reason(rows, cells, frames, total):
    """Geohashes whose cells hold the rows' own points (and not most other rows' points)."""
    frame = next((f for f in frames if f.unit == "degree"), None)
    if frame is None or not rows:
        return None
    rows = np.asarray(rows)
    cells = _geohash_cells(cells)
    lon, lat = frame.x[rows], frame.y[rows]
    ok = np.isfinite(lon) & np.isfinite(lat)
    rows, cells, lon, lat = rows[ok], cells[ok], lon[ok], lat[ok]
    if len(rows) == 0:
        return None
    # error in units of the cell's half-size plus the tolerance: the point is in (or within the
    # tolerance of) its cell when the error is at most 1
    scale = np.maximum(cells[:, 2], cells[:, 3]) + frame.tolerance
    shift = max(1, len(rows) // 2)
    olon, olat = np.roll(lon, shift), np.roll(lat, shift)
    error = np.maximum(np.abs(lon - cells[:, 0]), np.abs(lat - cells[:, 1])) / scale
    other = np.maximum(np.abs(olon - cells[:, 0]), np.abs(olat - cells[:, 1])) / scale
    fraction = _specific_fraction(error, other, 1.0, total)
    if fraction >= TEXT_FRACTION:
        return (
            f"holds geohashes of the points' cells (the point lies in its cell, or within "
            f"{frame.tolerance_text()} of it, in {fraction:.0%} of {total:,} sampled non-missing values)"
        )
    return None


@dataclass(eq=False)
class _ObjectSort:
    """Sampled object values sorted, in one pass, by what they look like.

    Geometries are counted by kind (WKB ones once parsed); pairs of numbers, numbers found in
    text and geohash-like texts keep their row, so that the checks after the pass can compare
    them with the row's own point.
    """

    numbers: np.ndarray  #: the value of each row that is one number (NaN elsewhere)
    total: int = 0  #: non-missing, non-blank values
    kinds: dict = field(default_factory=dict)  #: geometry kind -> count (in the order first met)
    wkb_values: list = field(default_factory=list)
    wkb_kind: list = field(default_factory=list)
    pair_rows: list = field(default_factory=list)
    pairs: list = field(default_factory=list)
    text_rows: list = field(default_factory=list)
    text_numbers: list = field(default_factory=list)
    hash_rows: list = field(default_factory=list)  # rows and texts that look like geohashes
    hash_cells: list = field(default_factory=list)

    def count(self, kind: str) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def add(self, row: int, value) -> None:
        """Sort one non-missing value; the numbers of any text it is (or prints as) are kept."""
        text = None
        if isinstance(value, shapely.Geometry):
            self.total += 1
            self.count("shapely geometry objects")
        elif isinstance(value, str):
            text = value.strip()
            if not text:
                return
            self.total += 1
            text = self._add_text(row, text)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            self.total += 1
            self.wkb_values.append(bytes(value))
            self.wkb_kind.append("WKB geometries")
        elif isinstance(value, dict):
            self.total += 1
            if _geojson_dict(value):
                self.count("GeoJSON geometries")
            text = str(value)
        elif isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.ndim == 1):
            self.total += 1
            if len(value) in (2, 3) and all(_is_real(v) for v in value):
                self.pair_rows.append(row)
                self.pairs.append((float(value[0]), float(value[1])))
            else:
                text = str(list(value))
        elif _is_real(value):
            self.total += 1
            self.numbers[row] = float(value)
        else:
            self.total += 1
        if text is not None:
            found = _text_numbers(text)
            self.text_rows.extend([row] * len(found))
            self.text_numbers.extend(found)

    def _add_text(self, row: int, text: str) -> str | None:
        """Sort a non-blank text; returns it when its numbers are still to be read, else None."""
        if _WKT.match(text):
            self.count("WKT geometries")
        elif text[0] in "{[" and all(key.search(text) for key in _GEOJSON_KEYS):
            self.count("GeoJSON geometries")
        elif _HEX.fullmatch(text):
            self.wkb_values.append(text)
            self.wkb_kind.append("hex WKB geometries")
            text = None
        elif (match := _PAIR.fullmatch(text)) is not None:
            self.pair_rows.append(row)
            self.pairs.append((float(match.group(1)), float(match.group(2))))
        elif _NUMBER.fullmatch(text):
            self.numbers[row] = float(text)
            self.text_rows.append(row)
            self.text_numbers.append(self.numbers[row])
            text = None  # a number is not a geohash, and holds no other number
        if text is not None and _GEOHASH.fullmatch(text):
            self.hash_rows.append(row)
            self.hash_cells.append(text)
        return text


def _sort_objects(values: np.ndarray) -> _ObjectSort:
    """The values sorted by what they look like (missing ones skipped)."""
    s = _ObjectSort(numbers=np.full(len(values), np.nan))
    for row, value in enumerate(values):
        if not _is_missing(value):
            s.add(row, value)
    return s


def _geometry_reason(s: _ObjectSort) -> str | None:
    """Geometries (objects, WKT, GeoJSON, WKB that parses) in most values."""
    if s.wkb_values:
        parsed = shapely.from_wkb(np.array(s.wkb_values, dtype=object), on_invalid="ignore")
        for kind, geometry in zip(s.wkb_kind, parsed):
            if geometry is not None:
                s.count(kind)
    geometric = sum(s.kinds.values())
    if geometric >= TEXT_FRACTION * s.total:
        named = " and ".join(sorted(s.kinds, key=s.kinds.get, reverse=True))
        return f"holds {named} ({geometric / s.total:.0%} of {s.total:,} sampled non-missing values)"
    return None


def _pair_reason(pair_rows, pairs, frames, total) -> str | None:
    """Pairs of numbers that are the rows' own coordinates in some frame, in either order."""
    rows = np.asarray(pair_rows)
    pair_values = np.asarray(pairs, dtype=float)
    finite = np.isfinite(pair_values).all(axis=1)
    rows, pair_values = rows[finite], pair_values[finite]
    for frame in frames:
        coords = np.column_stack([frame.x[rows], frame.y[rows]])
        ok = np.isfinite(coords).all(axis=1)
        for order, swap in (("", False), (" in reverse order", True)):
            c = coords[ok][:, ::-1] if swap else coords[ok]
            fraction = _match_fraction(pair_values[ok], c, frame.tolerance, total)
            if fraction >= TEXT_FRACTION:
                names = frame.names[::-1] if swap else frame.names
                return (
                    f"holds pairs of numbers that are the points' ({names[0]}, {names[1]}) in "
                    f"{frame.label} (within {frame.tolerance_text()} in {fraction:.0%} of {total:,} "
                    "sampled non-missing values)"
                )
    return None


def _object_reason(values: np.ndarray, frames, positions, *, rank: bool = True):
    """Why an object column holds locations (geometries, coordinate pairs, numbers or geohashes), or None."""
    if len(values) > TEXT_SAMPLE_ROWS:
        idx = _positions(len(values), TEXT_SAMPLE_ROWS)
        values, positions, frames = values[idx], positions[idx], _subsample(frames, idx)
    s = _sort_objects(values)
    if s.total == 0:
        return None
    reason = _geometry_reason(s)
    if reason is not None:
        return reason
    if len(s.pairs) >= TEXT_FRACTION * s.total:
        reason = _pair_reason(s.pair_rows, s.pairs, frames, s.total)
        if reason is not None:
            return reason
    if s.text_numbers:
        text_values = np.asarray(s.text_numbers, dtype=float)
        finite = np.isfinite(text_values)
        reason = _text_reason(np.asarray(s.text_rows)[finite], text_values[finite], frames, s.total)
        if reason is not None:
            return reason
    if len(s.hash_rows) >= TEXT_FRACTION * s.total:
        reason = _geohash_reason(s.hash_rows, s.hash_cells, frames, s.total)
        if reason is not None:
            return reason
    if np.isfinite(s.numbers).sum() >= TEXT_FRACTION * s.total:
        return _numeric_reason(s.numbers, frames, positions, what="numbers stored as text or objects", rank=rank)
    return None


# --------------------------------------------------------------------------------------------
# the order of the rows


def _order_xy(data, xy, positions):
    """Ground-ish planar coordinates of the rows at ``positions`` (NaN where there is no point).

    Planar coordinates in the data's CRS; for a geographic CRS longitude is scaled by the cosine
    of the sample's mean latitude.  Other geometry types use the centre of their bounds.
    """
    if xy is not None:
        xy = np.asarray(xy, dtype=float)
        if xy.ndim != 2 or xy.shape[0] != len(data) or xy.shape[1] < 2:
            raise ParameterError(f"xy must be an (n, 2) array of the {len(data):,} rows' coordinates.")
        return xy[positions, 0], xy[positions, 1]
    if isinstance(data, gpd.GeoSeries):
        geoms = data
    else:
        try:
            geoms = data.geometry
        except AttributeError:
            return None
    values = geoms.values
    geom_array = values._data if hasattr(values, "_data") else np.asarray(values, dtype=object)
    with np.errstate(invalid="ignore"):
        bounds = shapely.bounds(geom_array[positions])
        return (bounds[:, 0] + bounds[:, 2]) / 2, (bounds[:, 1] + bounds[:, 3]) / 2


def _geographic(data) -> bool:
    crs = data.crs if isinstance(data, gpd.GeoSeries) else getattr(data, "crs", None)
    if crs is None:
        return False
    try:
        return bool(CRS.from_user_input(crs).is_geographic)
    except (_PyprojCRSError, TypeError, ValueError):  # pragma: no cover
        return False


def _differences(ax, ay, bx, by) -> np.ndarray:
    """|difference| of pairs: distance, and along x, y and both diagonals; (5, k)."""
    dx, dy = bx - ax, by - ay
    return np.abs(np.stack([np.hypot(dx, dy), dx, dy, dx + dy, dx - dy]))


_DIRECTIONS = (
    "distance",
    "x distance",
    "y distance",
    "distance along one diagonal",
    "distance along the other diagonal",
)


def _log_binomial_tail(m: int, k: int) -> float:
    """log P(Binomial(m, 1/2) >= k)."""
    if k <= 0:
        return 0.0
    log_factorial = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, m + 1, dtype=float)))))
    j = np.arange(k, m + 1)
    logs = log_factorial[m] - log_factorial[j] - log_factorial[m - j] - m * math.log(2.0)
    top = float(logs.max())
    return top + math.log(float(np.exp(logs - top).sum()))


def _coherence(diffs: np.ndarray, base: np.ndarray):
    """(ratio, pairs, direction) if the pairs are much closer than random pairs of rows.

    ``diffs`` is a (5, k) array of :func:`_differences`, ``base`` their medians over random
    pairs (one per kind of difference).  A direction counts when
    the median of the pairs is below ``ORDER_RATIO`` times the baseline's median *and* more of
    the pairs fall below the baseline's median than a fair coin would put there (one-sided
    binomial p-value below ``ORDER_ALPHA``): few rows in random order can have a small median
    by chance, many cannot.
    """
    m = diffs.shape[1]
    if m == 0:
        return None
    if m > 4 * _SCREEN_PAIRS:  # most orderings are nowhere near: a quick look at a tenth first
        screen = np.median(diffs[:, :: m // _SCREEN_PAIRS], axis=1)
        if np.all(~(base > 0) | (screen >= _SCREEN_RATIO * base)):
            return None
    med = np.median(diffs, axis=1)
    best = None
    for d in range(len(base)):
        if not (base[d] > 0) or not (med[d] < ORDER_RATIO * base[d]):
            continue
        below = int(np.count_nonzero(diffs[d] < base[d]))
        if _log_binomial_tail(m, below) >= math.log(ORDER_ALPHA):
            continue
        ratio = float(med[d] / base[d])
        if d == 0:  # the plain distance, when it qualifies, is the easiest to read
            return ratio, m, _DIRECTIONS[d]
        if best is None or ratio < best[0]:
            best = (ratio, m, _DIRECTIONS[d])
    return best


def _order_key(values):
    """Numbers in the order of the values (NaN for missing), or None if they cannot be sorted.

    Numbers as floats, datetimes and timedeltas as their integer nanoseconds, anything else
    (text, categoricals, a MultiIndex) as codes in sorted order.
    """
    array = values.array if isinstance(values, pd.Series) else values
    try:
        if isinstance(values, pd.Index) and not isinstance(values, pd.MultiIndex):
            array = values.array
        if pd.api.types.is_bool_dtype(array.dtype):
            return None
        if hasattr(array, "asi8"):  # datetimes, timedeltas, periods
            key = array.asi8.astype(float)
            key[np.asarray(array.isna())] = np.nan
            return key
        if pd.api.types.is_numeric_dtype(array.dtype) and not isinstance(array.dtype, pd.CategoricalDtype):
            return np.asarray(array.to_numpy(dtype=float, na_value=np.nan), dtype=float)
        codes, _ = pd.factorize(values, sort=True)
    except (TypeError, ValueError, AttributeError):  # unorderable or unhashable values
        return None
    key = np.asarray(codes, dtype=float)
    key[key < 0] = np.nan
    return key


def _explained(first: list, second: list) -> np.ndarray:
    """Pairs (first row, second row) in the order of the allowed columns' keys, lexicographically.

    Tries the columns in every order (up to 3 columns; more are taken in the given order) and
    each column ascending or descending; keeps the arrangement explaining the most pairs.
    """
    k = len(first)
    m = len(first[0]) if k else 0
    if k == 0 or m == 0:
        return np.zeros(m, dtype=bool)
    with np.errstate(invalid="ignore"):
        steps = [np.where(np.isfinite(a) & np.isfinite(b), np.sign(b - a), 2) for a, b in zip(first, second)]
    perms = itertools.permutations(range(k)) if k <= 3 else [tuple(range(k))]
    best = np.zeros(m, dtype=bool)
    for perm in perms:
        for signs in itertools.product((1, -1), repeat=k):
            ok = np.ones(m, dtype=bool)
            undecided = np.ones(m, dtype=bool)
            for col, sign in zip(perm, signs):
                step = steps[col]
                missing = step == 2
                ok &= ~(undecided & missing)
                ok &= ~(undecided & (step * sign < 0))
                undecided &= step == 0
            if ok.sum() > best.sum():
                best = ok
    return best


def order_leaks(data, xy=None, *, allow=()) -> dict:
    """Orderings of the rows that follow the true locations.

    A release keeps the input's row order, its index and its attribute columns.  When the rows
    are in spatial order (FlatGeobuf files written by GDAL are sorted on a Hilbert curve; spatial
    joins, clustering and database exports are often spatially sorted), the released order
    publishes the order of the true points, and averaging each released point with its
    neighbours in the row order cancels much of the noise.  The same holds for an index or a
    column whose values were assigned in a spatial order, even after the rows are shuffled: an
    adversary sorts the rows by it.

    Parameters
    ----------
    data : geopandas.GeoDataFrame or geopandas.GeoSeries
    xy : (n, 2) array, optional
        The rows' coordinates, if already at hand (by default read from the geometry).
    allow : iterable of column labels, optional
        Columns whose order is public (a trace release's trace id and time stamps): they are not
        tested, and pairs of neighbouring rows that are in the order of these columns
        (lexicographically, in any order of the columns, each ascending or descending) do not
        count as a spatial order.

    Returns
    -------
    dict
        ``{label: reason}``: ``"<row order>"`` (:data:`ROW_ORDER`) when consecutive rows are close
        together; ``"<index>"`` when sorting the rows by the index puts them in spatial order;
        a column label when sorting by that column does.  Reasons never contain coordinates.

    Notes
    -----
    The test: on a deterministic sample of at most 20,000 pairs of neighbouring rows (in the row
    order, or in the order of the index or column), the median distance between the rows of a
    pair, compared with its median over 20,000 random pairs of rows (fixed pseudo-random
    pairing).  A ratio below 0.5 flags the ordering, for the distance or for the distance along
    x, y or a diagonal (a sort on one coordinate), provided the pairs also beat the random pairs'
    median more often than chance allows (binomial p < 1e-5: about 20 rows are needed).
    Distances are planar in the data's CRS (longitude scaled by the cosine of the mean latitude).
    The index is tested unless it is monotonic in the row order (a RangeIndex: it tells no more
    than the row order); columns are tested when they are numeric, datetime, timedelta, text or
    categorical with at least 50 % distinct values among the sampled rows (so group ids, which
    reveal groups but no order, are not), pairs of equal values excluded.  Text columns are
    sorted on a sample of 5,000 rows.  The cost does not grow with the number of rows.
    """
    _check_type(data)
    return _order_leaks(data, xy, allow=_normalise_keep(allow), skip=())


def _order_leaks(data, xy, *, allow, skip) -> dict:
    n = len(data)
    if n < 3:
        return {}
    positions = _positions(n - 1, ORDER_PAIRS)
    a = _order_xy(data, xy, positions)
    if a is None:  # a GeoDataFrame without an active geometry column
        return {}
    ax, ay = a
    bx, by = _order_xy(data, xy, positions + 1)
    if _geographic(data):
        lat = np.concatenate([ay, by])
        lat = lat[np.isfinite(lat)]
        scale = math.cos(math.radians(float(lat.mean()))) if len(lat) else 1.0
        ax, bx = ax * scale, bx * scale
    ok = np.isfinite(ax) & np.isfinite(ay)
    if int(ok.sum()) < 3:
        return {}

    rng = np.random.default_rng(_ORDER_SEED)
    valid = np.flatnonzero(ok)
    i = valid[rng.integers(0, len(valid), ORDER_PAIRS)]
    j = valid[(np.searchsorted(valid, i) + rng.integers(1, len(valid), ORDER_PAIRS)) % len(valid)]
    base = np.median(_differences(ax[i], ay[i], ax[j], ay[j]), axis=1)
    # sample rows in a fixed random order: a stable sort then breaks ties at random, so ties
    # never inherit the row order
    everything = rng.permutation(len(positions))
    text_rows = rng.permutation(_positions(len(positions), TEXT_ORDER_ROWS))

    columns = list(data.columns) if isinstance(data, gpd.GeoDataFrame) else []
    allowed_first, allowed_second = [], []
    for label in allow:
        column = _column_by_label(data, label, columns)
        if column is None:
            continue
        both = _order_key(pd.concat([column.iloc[positions], column.iloc[positions + 1]], ignore_index=True))
        if both is not None:
            allowed_first.append(both[: len(positions)])
            allowed_second.append(both[len(positions) :])

    found = {}

    # (a) the row order: rows p and p + 1
    if ROW_ORDER not in skip:
        pair_ok = ok & np.isfinite(bx) & np.isfinite(by)
        if allowed_first:
            pair_ok &= ~_explained(allowed_first, allowed_second)
        hit = _coherence(_differences(ax[pair_ok], ay[pair_ok], bx[pair_ok], by[pair_ok]), base)
        if hit is not None:
            found[ROW_ORDER] = _order_text("the rows are in spatial order", "consecutive rows", hit)

    def sorted_by(key, rows):
        """Coherence of neighbours in the order of ``key``, over the sample rows ``rows``."""
        keep = np.isfinite(key) & ok[rows]
        rows, key = rows[keep], key[keep]
        if len(rows) < 3:
            return None
        o = np.argsort(key, kind="stable")
        ordered, sorted_key = rows[o], key[o]
        distinct = sorted_key[1:] != sorted_key[:-1]
        if int(distinct.sum()) + 1 < ORDER_DISTINCT * len(rows):
            return None
        first, second = ordered[:-1][distinct], ordered[1:][distinct]
        if allowed_first:
            explained = _explained([a[first] for a in allowed_first], [a[second] for a in allowed_first])
            first, second = first[~explained], second[~explained]
        return _coherence(_differences(ax[first], ay[first], ax[second], ay[second]), base)

    # (b) the index, unless it follows the row order (then it tells what the row order tells)
    if INDEX not in skip and not isinstance(data.index, pd.RangeIndex):
        key = _order_key(data.index.take(positions))
        if key is not None:
            steps = np.diff(key[np.isfinite(key)])
            if not (np.all(steps >= 0) or np.all(steps <= 0)):
                rows = everything if _is_numberlike(data.index.dtype) else text_rows
                hit = sorted_by(key[rows], rows)
                if hit is not None:
                    found[INDEX] = _order_text(
                        "the index puts the rows in spatial order when they are sorted by it", "neighbours", hit
                    )

    # (c) the columns
    active = None
    if isinstance(data, gpd.GeoDataFrame):
        try:
            active = data.geometry.name
        except AttributeError:  # pragma: no cover - handled above
            active = None
    for k, label in enumerate(columns):
        if _in_labels(label, skip) or _in_labels(label, allow) or (active is not None and _same_label(label, active)):
            continue
        column = data.iloc[:, k]
        dtype = column.dtype
        if isinstance(dtype, gpd.array.GeometryDtype) or pd.api.types.is_bool_dtype(dtype):
            continue
        rows = everything if _is_numberlike(dtype) else text_rows
        key = _order_key(column.iloc[positions[rows]])
        if key is None:
            continue
        hit = sorted_by(key, rows)
        if hit is not None:
            found[label] = _order_text("puts the rows in spatial order when they are sorted by it", "neighbours", hit)
    return found


def _is_numberlike(dtype) -> bool:
    return (
        pd.api.types.is_numeric_dtype(dtype)
        or pd.api.types.is_datetime64_any_dtype(dtype)
        or pd.api.types.is_timedelta64_dtype(dtype)
    )


def _column_by_label(data, label, columns):
    for k, other in enumerate(columns):
        if _same_label(other, label):
            return data.iloc[:, k]
    return None


def _order_text(lead: str, pairs: str, hit) -> str:
    ratio, m, direction = hit
    return (
        f"{lead} (median {direction} between {pairs} {ratio:.2f} times that between random rows, "
        f"over {m:,} sampled pairs)"
    )


# --------------------------------------------------------------------------------------------
# the error message


#: what the QGIS dialogs call the parameters that keep columns and the row order (qgis_plugin/algorithms/base.py)
QGIS_KEEP_LABEL = "Keep these attribute columns"
QGIS_KEEP_ORDER_LABEL = "The row order is public (keep it)"


def _cli_flags(flag: str, labels) -> str:
    return " ".join(f"{flag} {shlex.quote(str(label))}" for label in labels)


def row_order_fix() -> Fix:
    """How to fix a release refused for its row order (:data:`ROW_ORDER`), per front end."""
    return Fix(
        "shuffle_rows",
        python="Shuffle the rows and renumber them before releasing: gdf = gdf.sample(frac=1).reset_index(drop=True); "
        f"if the order is public anyway, keep it deliberately: keep=[{ROW_ORDER!r}].",
        cli=f"Add --shuffle to release the rows in a random order; if the order is public anyway, keep it deliberately "
        f"with --keep {shlex.quote(ROW_ORDER)}.",
        qgis="Shuffle the features with the 'Order by expression' algorithm and the expression randf(), after "
        "removing any id field numbered in the old order (a GeoPackage's 'fid' too) with 'Drop field(s)'; if the "
        f"order is public anyway, tick the advanced parameter '{QGIS_KEEP_ORDER_LABEL}' (KEEP_ORDER).",
    )


def drop_columns_fix(columns, shuffled_too: bool = False) -> Fix:
    """How to fix a release refused for location-bearing ``columns``, per front end.

    ``shuffled_too``: some of them put the rows in spatial order when sorted by them, which a
    shuffle does not change.
    """
    columns = list(columns)
    note = " (shuffling the rows does not help: sorted by them, the rows are in spatial order)" if shuffled_too else ""
    return Fix(
        "drop_columns",
        python=f"Drop them before releasing: gdf = gdf.drop(columns={columns!r}){note}; if they are not really "
        f"locations, keep them deliberately: keep={columns!r}.",
        cli=f"Drop them with {_cli_flags('--drop', columns)}{note}; if they are not really locations, keep them "
        f"deliberately with {_cli_flags('--keep', columns)}.",
        qgis=f"Remove them with the 'Drop field(s)' algorithm{note}; if they are not really locations, "
        f"choose them in the advanced parameter '{QGIS_KEEP_LABEL}'.",
    )


def index_fix() -> Fix:
    """How to fix a release refused for its index (:data:`INDEX`), per front end."""
    return Fix(
        "replace_index",
        python=f"Replace it before releasing: gdf = gdf.reset_index(drop=True); if it is not really a location, keep "
        f"it deliberately: keep=[{INDEX!r}].",
        cli=f"Add --shuffle (it also renumbers the rows, replacing the index); if it is not really a location, keep it "
        f"deliberately with --keep {shlex.quote(INDEX)}.",
        qgis="In QGIS the index is the feature ids: save the layer without its 'fid' field ('Drop field(s)'), so its "
        "features are numbered afresh.",
    )


def _short(reason: str) -> str:
    """A reason without its figures (they stay in ``LocationAttributeError.reasons``): one clause per finding."""
    return " and ".join(part.split(" (")[0] for part in reason.split("; also "))


def _message(found: dict, ordered=()) -> tuple[str, Fix]:
    """The problem, short (the figures are in the reasons), and how to fix it, per front end."""
    columns = [label for label in found if label not in (INDEX, ROW_ORDER)]
    parts, fixes = [], []
    if ROW_ORDER in found:
        parts.append(
            f"The row order gives the true locations away: {_short(found[ROW_ORDER])}, and a release keeps the row "
            "order, so it would publish the order of the true points (averaging neighbours cancels much of the noise)."
        )
        fixes.append(row_order_fix())
    if columns:
        listed = "; ".join(f"{label!r} {_short(found[label])}" for label in columns)
        parts.append(
            f"{len(columns)} attribute column(s) would be released unchanged and give the true locations "
            f"away: {listed}."
        )
        fixes.append(drop_columns_fix(columns, shuffled_too=any(_in_labels(label, columns) for label in ordered)))
    if INDEX in found:
        parts.append(
            f"The index would be released unchanged and gives the true locations away: {_short(found[INDEX])}."
        )
        fixes.append(index_fix())
    return " ".join(parts), Fix.join(*fixes)
