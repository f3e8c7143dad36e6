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

What is detected
----------------
For a GeoDataFrame every attribute column other than the active geometry is checked, and the
index; for a GeoSeries only the index.  Other geometry-dtype columns are refused elsewhere
(:func:`geopriv._points.check_no_other_geometries`) and ignored here.

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
2. Object and string columns whose values are geometries: WKT (``POINT (...)``, ``SRID=4326;
   MULTIPOLYGON EMPTY``, ..., case-insensitive), GeoJSON (dicts or JSON text with ``"type"`` and
   ``"coordinates"``), hex WKB/EWKB text, WKB ``bytes``, shapely geometry objects; or
   coordinate pairs: text such as ``"39.9042, 116.4074"`` or ``"(448000 4416000)"`` and tuples
   or lists of 2 or 3 numbers, close to the coordinates as in 1 (either order); or numbers
   (numeric text, numbers in an object column) checked as in 1.  A column is flagged when at
   least 50 % of its sampled non-null values look so.  Categorical columns are checked on
   their values.
3. The index (each level of a MultiIndex) as a column in 1 and 2.  A RangeIndex is never
   flagged.

Cost
----
Every check runs on a deterministic sample: at most 20,000 evenly spaced rows (2,000 for
text, which is parsed value by value), so the cost does not grow with the number of rows.  A
column whose sample is (nearly) all missing is re-sampled among its non-missing rows, so a
few leaked values in a mostly empty column are still found.  Rows whose geometry is not a
non-empty point are ignored by the coordinate comparisons.

Nothing here ever puts a coordinate value in a message: reasons name columns, CRSs,
tolerances and fractions only.
"""
from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from pyproj import CRS, Transformer
from pyproj.exceptions import CRSError as _PyprojCRSError
from pyproj.exceptions import ProjError as _ProjError

from .exceptions import LocationAttributeError

__all__ = ["find_location_columns", "check_location_attributes", "INDEX"]

#: The label standing for the index in results and in ``keep``.
INDEX = "<index>"

SAMPLE_ROWS = 20_000
TEXT_SAMPLE_ROWS = 2_000
METRE_TOLERANCE = 1_000.0  # CRS units (metres, feet, ...)
DEGREE_TOLERANCE = 0.01
NUMERIC_FRACTION = 0.9
TEXT_FRACTION = 0.5
AFFINE_MIN_ROWS = 20
AFFINE_MIN_DISTINCT = 10
AFFINE_CORRELATION = 0.999
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
    affine: bool  # also test for affine functions of (x, y) in this frame

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


def check_location_attributes(data, *, keep=()) -> None:
    """Refuse data whose attribute columns or index hold the true point locations.

    Parameters
    ----------
    data : geopandas.GeoDataFrame or geopandas.GeoSeries
        The data about to be released (see :func:`find_location_columns`).
    keep : iterable of column labels, optional
        Columns to release as they are although they look like locations (say, a column of
        altitudes that happens to track the y coordinate); ``"<index>"`` keeps the index.  A
        single string is one label.  Kept columns are not checked.

    Raises
    ------
    geopriv.exceptions.LocationAttributeError
        If any column or the index holds locations.  The message names the columns and the
        reasons (never coordinate values) and says how to drop or keep them.
    ValueError
        If an entry of ``keep`` is not a column of ``data`` (nor ``"<index>"``).
    TypeError
        If ``data`` is not a GeoDataFrame or GeoSeries.
    """
    _check_type(data)
    keep = _normalise_keep(keep)
    valid = list(data.columns) if isinstance(data, gpd.GeoDataFrame) else []
    unknown = [k for k in keep if k != INDEX and not _in_labels(k, valid)]
    if unknown:
        what = f"columns {valid!r}" if valid else "no columns (it is a GeoSeries)"
        raise ValueError(
            f"keep={unknown!r} names no column of the data: it has {what}, "
            f"and {INDEX!r} stands for its index. Fix the spelling or remove them from keep."
        )
    found = _find(data, crs=None, skip=keep)
    if found:
        raise LocationAttributeError(_message(found), found)


# --------------------------------------------------------------------------------------------
# driver


def _check_type(data) -> None:
    if not isinstance(data, (gpd.GeoDataFrame, gpd.GeoSeries)):
        raise TypeError(f"data must be a GeoDataFrame or GeoSeries, got {type(data).__name__}.")


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


def _find(data, *, crs, skip) -> dict:
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
            reason = _column_reason(column, positions, frames, geom_array, crs)
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
            return [_Frame("their coordinates (no CRS; read as degrees)", ("x", "y"), x, y,
                           DEGREE_TOLERANCE, "degree", True)]
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
        frames.append(_Frame("EPSG:4326", ("longitude", "latitude"), lon, lat, DEGREE_TOLERANCE, "degree",
                             not crs.is_geographic))
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


def _column_reason(column: pd.Series, positions, frames, geom_array, crs):
    kind = _kind(column.dtype)
    if kind is None:
        return None
    sample = column.iloc[positions]
    reason = _sample_reason(kind, sample, frames, positions)
    if reason is not None:
        return reason
    # a (nearly) all-missing sample: look at the column's non-missing rows instead
    if len(column) > len(positions) and _count_present(sample) < _SPARSE:
        present = np.flatnonzero(column.notna().to_numpy())
        if len(present) > _count_present(sample):
            positions = present[_positions(len(present), SAMPLE_ROWS)]
            frames = _frames(geom_array, positions, crs)
            return _sample_reason(kind, column.iloc[positions], frames, positions)
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


def _sample_reason(kind, sample: pd.Series, frames, positions):
    if kind == "categorical":
        categories = sample.cat.categories
        codes = sample.cat.codes.to_numpy()
        if _kind(categories.dtype) == "numeric":
            cats = categories.to_numpy(dtype=float, na_value=np.nan)
            values = np.where(codes >= 0, cats[np.maximum(codes, 0)], np.nan)
            return _numeric_reason(values, frames, positions)
        cats = np.asarray(categories, dtype=object)
        values = np.where(codes >= 0, cats[np.maximum(codes, 0)], None)
        return _object_reason(values, frames, positions)
    if kind == "numeric":
        return _numeric_reason(sample.to_numpy(dtype=float, na_value=np.nan), frames, positions)
    return _object_reason(np.asarray(sample, dtype=object), frames, positions)


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
    fraction = np.count_nonzero(error <= tolerance) / total
    if fraction < TEXT_FRACTION:  # below both thresholds: skip the medians
        return fraction
    median = float(np.median(error))
    if median <= 0.01 * tolerance:
        return fraction
    shift = max(1, len(values) // 2)
    other = np.abs(values - np.roll(coords, shift, axis=0)).max(axis=1)
    if median <= 0.5 * float(np.median(other)):
        return fraction
    return 0.0


def _numeric_reason(values: np.ndarray, frames, positions, *, what: str = "values"):
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


def _object_reason(values: np.ndarray, frames, positions):
    if len(values) > TEXT_SAMPLE_ROWS:
        idx = _positions(len(values), TEXT_SAMPLE_ROWS)
        values, positions, frames = values[idx], positions[idx], _subsample(frames, idx)

    kinds = {}
    wkb_rows, wkb_values, wkb_kind = [], [], []
    pair_rows, pairs = [], []
    numbers = np.full(len(values), np.nan)
    total = 0
    for row, value in enumerate(values):
        if _is_missing(value):
            continue
        if isinstance(value, shapely.Geometry):
            total += 1
            kinds["shapely geometry objects"] = kinds.get("shapely geometry objects", 0) + 1
        elif isinstance(value, str):
            text = value.strip()
            if not text:
                continue
            total += 1
            if _WKT.match(text):
                kinds["WKT geometries"] = kinds.get("WKT geometries", 0) + 1
            elif text[0] in "{[" and '"coordinates"' in text and '"type"' in text:
                kinds["GeoJSON geometries"] = kinds.get("GeoJSON geometries", 0) + 1
            elif _HEX.fullmatch(text):
                wkb_rows.append(row)
                wkb_values.append(text)
                wkb_kind.append("hex WKB geometries")
            elif (match := _PAIR.fullmatch(text)) is not None:
                pair_rows.append(row)
                pairs.append((float(match.group(1)), float(match.group(2))))
            elif _NUMBER.fullmatch(text):
                numbers[row] = float(text)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            total += 1
            wkb_rows.append(row)
            wkb_values.append(bytes(value))
            wkb_kind.append("WKB geometries")
        elif isinstance(value, dict):
            total += 1
            if _geojson_dict(value):
                kinds["GeoJSON geometries"] = kinds.get("GeoJSON geometries", 0) + 1
        elif isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.ndim == 1):
            total += 1
            if len(value) in (2, 3) and all(_is_real(v) for v in value):
                pair_rows.append(row)
                pairs.append((float(value[0]), float(value[1])))
        elif _is_real(value):
            total += 1
            numbers[row] = float(value)
        else:
            total += 1
    if total == 0:
        return None

    if wkb_values:
        parsed = shapely.from_wkb(np.array(wkb_values, dtype=object), on_invalid="ignore")
        for kind, geometry in zip(wkb_kind, parsed):
            if geometry is not None:
                kinds[kind] = kinds.get(kind, 0) + 1
    geometric = sum(kinds.values())
    if geometric >= TEXT_FRACTION * total:
        named = " and ".join(sorted(kinds, key=kinds.get, reverse=True))
        return f"holds {named} ({geometric / total:.0%} of {total:,} sampled non-missing values)"

    if len(pairs) >= TEXT_FRACTION * total:
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

    if np.isfinite(numbers).sum() >= TEXT_FRACTION * total:
        return _numeric_reason(numbers, frames, positions, what="numbers stored as text or objects")
    return None


# --------------------------------------------------------------------------------------------
# the error message


def _message(found: dict) -> str:
    columns = [label for label in found if label != INDEX]
    parts = []
    if columns:
        listed = "; ".join(f"{label!r} {found[label]}" for label in columns)
        cli = " ".join(f"--keep {shlex.quote(str(label))}" for label in columns)
        parts.append(
            f"{len(columns)} attribute column(s) would be released unchanged next to the perturbed "
            f"geometry and hold the true locations: {listed}. Drop them before releasing: "
            f"gdf = gdf.drop(columns={columns!r}). If they are not really locations, keep them "
            f"deliberately: keep={columns!r} (Python), {cli} (command line), or list them in the "
            "\"Keep these attribute columns\" option (QGIS)."
        )
    if INDEX in found:
        parts.append(
            f"The index would be released unchanged and holds the true locations ({found[INDEX]}). "
            "Replace it before releasing: gdf = gdf.reset_index(drop=True). If it is not really a "
            f"location, keep it deliberately: keep=[{INDEX!r}] (Python), --keep '{INDEX}' (command "
            f"line), or list {INDEX} in the \"Keep these attribute columns\" option (QGIS)."
        )
    return " ".join(parts)
