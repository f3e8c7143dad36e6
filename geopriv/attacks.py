"""Attacks on released location traces: what an adversary still learns from a release (issue 34).

Three attacks an analyst runs on a release of traces (``geopriv.sanitize_traces``, or any
release that keeps a person id and the rows' labels) against the true data, to measure what a
release leaks rather than what its parameters promise:

* :func:`home_inference` / :func:`home_attack`: each person's home is taken to be the centre of
  the public grid cell (``cell`` metres, 200 by default) holding most of their night-time
  points (22:00 to 06:00 local time by default); the attack compares the home inferred from
  the release with the one inferred the same way from the true data.
* :func:`top_places_uniqueness` / :func:`top_places_attack`: each person's top-N places are the
  N grid cells holding most of their points (Zang and Bolot, MobiCom 2011: the top 2 places of
  most people are unique); how many people are unique given them, and how many persons of a
  release are re-identified by matching their released top-N places with the true data's.
* :func:`query_error`: per released point, the ground distance to its true point
  (displacement) and, with an ``adversary=`` (:class:`geopriv.adversary.AdversaryError`), the
  distance from the adversary's guess (its optimal remap of the released point) to the truth.

The grid is public and anchored at the origin of a projected CRS in metres: the data's own CRS
when it is projected and within 1 % of true ground metres at the data's centre, else the UTM
zone of the (true) data; ``crs=`` chooses another.  One grid serves both sides of an attack
(the true data's), so cell ids compare.  Cell ids are ``"ix:iy"``: the cell's column and row
(``floor(x / cell)``, ``floor(y / cell)`` in that CRS).  Distances are geodesic metres
(:func:`geopriv.metrics.ground_distance`).

Inputs are GeoDataFrames of points with a person column (and, for home inference, a time
column), or MovingPandas ``TrajectoryCollection``s (read through their ``trajectories``, each
with ``df`` and ``id``: movingpandas itself is never imported here).  Released rows without a
geometry (a trace's budget ran out: status ``"exhausted"``) were not released and are left out.
Nothing here releases anything: these functions read true locations, so their results are the
analyst's, never to be published next to the release.
"""

from __future__ import annotations

import math
import numbers

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from pyproj import CRS, Transformer

from .crs import as_crs, ground_scale
from .exceptions import EmptyInputError, Fix, GeoprivError, ParameterError, ParameterTypeError, format_labels
from .metrics import ground_distance, is_synthetic
from .points import as_geoseries, point_xy

__all__ = [
    "home_inference",
    "home_attack",
    "top_places_uniqueness",
    "top_places_attack",
    "query_error",
    "DEFAULT_CELL",
    "DEFAULT_NIGHT",
    "DEFAULT_RADII",
]

#: side of the public grid's cells, metres
DEFAULT_CELL = 200.0
#: night-time hours (local time): from 22:00 to 06:00
DEFAULT_NIGHT = (22, 6)
#: distances (m) within which an inferred home counts as a hit
DEFAULT_RADII = (200.0, 500.0)

PERSON_FIX = Fix(
    "person_column",
    python="Name the column of person ids with person='...' (the user; a trace id only if every trace is a "
    "different person).",
)
TIME_FIX = Fix(
    "time_column",
    python="Name the column of time stamps with time='...' (datetimes or ISO 8601 text), or pass night=None to use "
    "every point whatever its hour.",
)
TZ_FIX = Fix(
    "time_zone",
    python="Pass tz= the time zone the people live in (e.g. tz='Asia/Shanghai' for Beijing) so that night is local "
    "night; tz='solar' uses local mean solar time from each point's longitude.",
)


# ---------------------------------------------------------------------------- parameters
def _check_cell(cell) -> float:
    if isinstance(cell, bool) or not isinstance(cell, numbers.Real):
        raise ParameterTypeError(f"cell must be a number of metres, got {type(cell).__name__}.")
    cell = float(cell)
    if not (math.isfinite(cell) and cell > 0):
        raise ParameterError("cell (the side of the public grid's cells, metres) must be a positive number.")
    return cell


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ParameterError(f"{name} must be a whole number of at least 1, got {value!r}.")
    return int(value)


def _check_night(night):
    if night is None:
        return None
    try:
        start, end = (float(v) for v in night)
    except (TypeError, ValueError):
        raise ParameterError("night must be None or a pair of hours (start, end), e.g. (22, 6).") from None
    if not (0 <= start <= 24 and 0 <= end <= 24) or start % 24 == end % 24:
        raise ParameterError("night must be two different hours between 0 and 24, e.g. (22, 6): from 22:00 to 06:00.")
    return start % 24, end % 24


def _check_radii(radii) -> tuple:
    try:
        out = tuple(float(r) for r in radii)
    except (TypeError, ValueError):
        raise ParameterError("radii must be a sequence of distances in metres, e.g. (200, 500).") from None
    if not out or not all(math.isfinite(r) and r > 0 for r in out):
        raise ParameterError("radii must be positive distances in metres, e.g. (200, 500).")
    return out


# ---------------------------------------------------------------------------- inputs
class _Points:
    """One side of an attack: points, their persons, their time stamps (or None), the rows' labels."""

    def __init__(self, geoms, xy, persons, times, person_name):
        self.geoms = geoms  # GeoSeries (the rows with a point)
        self.xy = xy  # (n, 2) in geoms.crs
        self.persons = persons  # Series of person ids, index = geoms.index
        self.times = times  # Series or None
        self.person_name = person_name


def _is_collection(data) -> bool:
    """A MovingPandas TrajectoryCollection or Trajectory, by duck-typing (movingpandas is never imported)."""
    if isinstance(data, (gpd.GeoDataFrame, gpd.GeoSeries, pd.DataFrame)):
        return False
    return hasattr(data, "trajectories") or (hasattr(data, "df") and hasattr(data, "id"))


def _collection_frame(data, person, time, what):
    """A TrajectoryCollection (or Trajectory) as one GeoDataFrame: (frame, person column, time column)."""
    if time is not None:
        raise ParameterError(
            f"The {what} is a TrajectoryCollection: its time stamps are its trajectories' DatetimeIndex, so do not "
            "pass time= (it names a column of a GeoDataFrame)."
        )
    trajectories = list(data.trajectories) if hasattr(data, "trajectories") else [data]
    if not trajectories:
        raise EmptyInputError(f"The {what} has no trajectories.")
    crs = trajectories[0].df.crs
    traj_col, time_col = "trajectory", "__time__"  # a person column of that name replaces the trajectory ids
    parts = []
    for tr in trajectories:
        df = tr.df
        if df.crs != crs:
            raise GeoprivError(
                f"The {what}'s trajectories are in different CRSs (e.g. trajectory {tr.id!r}): "
                "reproject them to one CRS first (tc.to_crs(...))."
            )
        part = pd.DataFrame({traj_col: np.full(len(df), tr.id, dtype=object), time_col: df.index.to_numpy()})
        if person is not None:
            if person not in df.columns:
                cols = [c for c in df.columns if c != df.geometry.name]
                raise GeoprivError(
                    f"The person column {person!r} is not in trajectory {tr.id!r} of the {what} (columns: {cols}).",
                    fix=PERSON_FIX,
                )
            part[person] = df[person].to_numpy()
        part["geometry"] = df.geometry.to_numpy()
        parts.append(part)
    frame = gpd.GeoDataFrame(pd.concat(parts, ignore_index=True), geometry="geometry", crs=crs)
    return frame, (traj_col if person is None else person), time_col


def _points(data, person, time, what, *, need_time=False, released=False) -> _Points:
    """Points, persons and time stamps of one side; released rows without a geometry are left out."""
    if _is_collection(data):
        data, person, time = _collection_frame(data, person, time, what)
    elif not isinstance(data, gpd.GeoDataFrame):
        raise ParameterTypeError(
            f"The {what} must be a GeoDataFrame of points (with a person column) or a movingpandas "
            f"TrajectoryCollection, got {type(data).__name__}."
        )
    geoms = as_geoseries(data, f"the {what}")
    if person is None:
        raise GeoprivError(f"The {what} is a GeoDataFrame: name its column of person ids with person=.", fix=PERSON_FIX)
    if person not in data.columns:
        cols = [c for c in data.columns if c != geoms.name]
        raise GeoprivError(f"The person column {person!r} is not in the {what} (columns: {cols}).", fix=PERSON_FIX)
    persons = data[person]
    if person == geoms.name or isinstance(persons.dtype, gpd.array.GeometryDtype):
        raise GeoprivError(f"The person column {person!r} of the {what} is a geometry column.", fix=PERSON_FIX)
    times = None
    if need_time:
        if time is None:
            raise GeoprivError(f"Night-time points need the {what}'s time stamps: time= is missing.", fix=TIME_FIX)
        if time not in data.columns:
            cols = [c for c in data.columns if c != geoms.name]
            raise GeoprivError(f"The time column {time!r} is not in the {what} (columns: {cols}).", fix=TIME_FIX)
        times = data[time]
    if released:  # rows a trace's budget could not pay for carry no point: not released
        keep = ~(geoms.isna() | geoms.is_empty).to_numpy()
        if not keep.all():
            geoms, persons = geoms[keep], persons[keep]
            times = None if times is None else times[keep]
    if len(geoms) == 0:
        if not released:
            raise EmptyInputError(f"The {what} has no rows: there is nothing to attack.")
        xy = np.empty((0, 2))
    else:
        xy = point_xy(geoms, f"the {what}")
    missing = persons.isna().to_numpy()
    if missing.any():
        raise GeoprivError(
            f"{int(missing.sum())} row(s) of the {what} have no person id in {person!r}: labels "
            f"{format_labels(persons.index[missing])}.",
            fix=Fix("drop_rows", python="Fill or drop them: every point belongs to one person."),
        )
    return _Points(geoms, xy, persons, times, person)


def _is_release(data) -> bool:
    """Whether ``data`` carries geopriv's release record (then rows without a point were not released)."""
    record = getattr(data, "attrs", None)
    return isinstance(record, dict) and isinstance(record.get("geopriv"), dict)


def _factorize(values) -> tuple[np.ndarray, pd.Index]:
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:  # ids of mixed, unorderable types
        codes, uniques = pd.factorize(values, sort=False)
    return codes.astype(np.int64), pd.Index(uniques)


# ---------------------------------------------------------------------------- the public grid
def _is_metric(crs: CRS) -> bool:
    if not crs.is_projected:
        return False
    units = {(a.unit_name or "").lower() for a in crs.axis_info[:2]}
    return units <= {"metre", "meter", "m"}


class _Grid:
    """The public grid: square cells of ``cell`` metres in a projected CRS, anchored at its origin."""

    def __init__(self, crs: CRS, cell: float):
        self.crs = crs
        self.cell = cell

    @classmethod
    def of(cls, pts: _Points, crs, cell: float) -> _Grid:
        if crs is not None:
            grid_crs = as_crs(crs)
            if not _is_metric(grid_crs):
                raise ParameterError(
                    f"crs= must be a projected CRS in metres for the grid of {cell:g} m cells; {grid_crs.name!r} is not.",
                    fix=Fix(
                        "grid_crs",
                        python="Pass a local projected CRS in metres (e.g. its UTM zone: "
                        "crs=gdf.estimate_utm_crs()), or leave crs=None.",
                    ),
                )
            return cls(grid_crs, cell)
        if len(pts.xy) == 0:
            raise EmptyInputError(
                "The release has no point (every trace's budget was exhausted): there is no grid to place it on.",
                fix=Fix("grid_crs", python="Pass crs= (a projected CRS in metres)."),
            )
        own = as_crs(pts.geoms.crs)
        if _is_metric(own):
            lo, hi = pts.xy.min(axis=0), pts.xy.max(axis=0)
            smax, smin = ground_scale(own, [(lo[0] + hi[0]) / 2], [(lo[1] + hi[1]) / 2])
            if abs(float(smax[0]) - 1) <= 0.01 and abs(float(smin[0]) - 1) <= 0.01:
                return cls(own, cell)
        return cls(CRS.from_user_input(pts.geoms.estimate_utm_crs()), cell)

    def project(self, pts: _Points) -> np.ndarray:
        """The points in the grid's CRS."""
        if len(pts.xy) == 0:
            return np.empty((0, 2))
        src = as_crs(pts.geoms.crs)
        if src.equals(self.crs):
            return pts.xy
        x, y = Transformer.from_crs(src, self.crs, always_xy=True).transform(pts.xy[:, 0], pts.xy[:, 1])
        return np.column_stack([x, y])

    def cells(self, pts: _Points) -> np.ndarray:
        """(n, 2) int64 cell indices (column, row) of the points."""
        return np.floor(self.project(pts) / self.cell).astype(np.int64)

    def centres(self, ij: np.ndarray) -> np.ndarray:
        return (ij.astype(float) + 0.5) * self.cell

    def record(self) -> dict:
        return {"cell_m": self.cell, "grid_crs": self.crs.to_string()}


def _cell_ids(ij: np.ndarray) -> list:
    return [f"{i}:{j}" for i, j in ij.tolist()]


def _ranked_cells(codes: np.ndarray, ij: np.ndarray) -> pd.DataFrame:
    """Points per (person, cell), most first, ties by the smaller column then the smaller row."""
    counts = (
        pd.DataFrame({"p": codes, "i": ij[:, 0], "j": ij[:, 1]})
        .groupby(["p", "i", "j"], sort=False)
        .size()
        .rename("n")
        .reset_index()
    )
    counts = counts.sort_values(["p", "n", "i", "j"], ascending=[True, False, True, True], kind="mergesort")
    counts["rank"] = counts.groupby("p", sort=False).cumcount()
    return counts


# ---------------------------------------------------------------------------- time of day
def _local_hours(times: pd.Series, tz, lon_of, what: str) -> np.ndarray:
    """Hour of the day (0 .. 24, fractional) of each time stamp, in local time."""
    name = times.name
    s = times
    if pd.api.types.is_bool_dtype(s) or pd.api.types.is_numeric_dtype(s) or pd.api.types.is_timedelta64_dtype(s):
        raise GeoprivError(
            f"The time column {name!r} of the {what} holds numbers or durations: night hours need dates and times of "
            "day.",
            fix=Fix(
                "datetimes",
                python=f"Convert it first, e.g. gdf[{name!r}] = pd.to_datetime(gdf[{name!r}], "
                "unit='s', utc=True), and pass tz=.",
            ),
        )
    if not (pd.api.types.is_datetime64_any_dtype(s) or isinstance(s.dtype, pd.DatetimeTZDtype)):
        parsed = None
        for kw in ({}, {"utc": True}):
            try:
                parsed = pd.to_datetime(s, format="mixed", **kw)
            except (ValueError, TypeError, OverflowError):
                continue
            if pd.api.types.is_datetime64_any_dtype(parsed) or isinstance(parsed.dtype, pd.DatetimeTZDtype):
                break
            parsed = None
        if parsed is None:  # never echo the parser's message: it quotes the offending cell
            coerced = pd.to_datetime(s, format="mixed", utc=True, errors="coerce")
            bad = (coerced.isna() & s.notna()).to_numpy()
            raise GeoprivError(
                f"{int(bad.sum())} row(s) of the time column {name!r} of the {what} cannot be read as time stamps: "
                f"labels {format_labels(s.index[bad])}.",
                fix=Fix("datetimes", python="Give datetimes or ISO 8601 text."),
            )
        s = parsed
    missing = s.isna().to_numpy()
    if missing.any():
        raise GeoprivError(
            f"{int(missing.sum())} row(s) of the {what} have no time stamp in {name!r}: labels "
            f"{format_labels(s.index[missing])}.",
            fix=Fix("drop_rows", python="Fill or drop them."),
        )
    aware = isinstance(s.dtype, pd.DatetimeTZDtype)
    if tz is None:
        if aware:
            raise GeoprivError(
                f"The time stamps of the {what} ({name!r}) carry a time zone, so their hour is not local time until "
                "the people's time zone is known.",
                fix=TZ_FIX,
            )
        local = s
    elif tz == "solar":
        utc = s.dt.tz_convert("UTC") if aware else s
        hours = (utc.dt.hour + utc.dt.minute / 60 + utc.dt.second / 3600).to_numpy(dtype=float)
        return np.mod(hours + lon_of() / 15.0, 24.0)
    else:
        utc = s if aware else s.dt.tz_localize("UTC")
        try:
            local = utc.dt.tz_convert(tz)
        except Exception:  # an unknown zone: pytz/zoneinfo errors differ by version
            raise ParameterError(f"tz={tz!r} is not a time zone name.", fix=TZ_FIX) from None
    return (local.dt.hour + local.dt.minute / 60 + local.dt.second / 3600).to_numpy(dtype=float)


def _night_mask(pts: _Points, night, tz, what: str) -> np.ndarray:
    if night is None:
        return np.ones(len(pts.xy), dtype=bool)
    if len(pts.xy) == 0:
        return np.zeros(0, dtype=bool)

    def lon_of():
        crs = as_crs(pts.geoms.crs)
        lon, _ = Transformer.from_crs(crs, crs.geodetic_crs, always_xy=True).transform(pts.xy[:, 0], pts.xy[:, 1])
        return np.asarray(lon, dtype=float)

    h = _local_hours(pts.times, tz, lon_of, what)
    start, end = night
    return (h >= start) & (h < end) if start < end else (h >= start) | (h < end)


# ---------------------------------------------------------------------------- home inference
def _homes(pts: _Points, grid: _Grid, night, tz, min_points: int, what: str) -> gpd.GeoDataFrame:
    """One row per person of ``pts`` (sorted ids): the home cell, its centre (in the grid CRS), counts."""
    codes, persons = _factorize(pts.persons.to_numpy())
    mask = _night_mask(pts, night, tz, what)
    ij = grid.cells(pts)[mask]
    c = codes[mask]
    n_night = np.bincount(c, minlength=len(persons))
    best = _ranked_cells(c, ij)
    best = best[best["rank"] == 0]
    home_ij = np.zeros((len(persons), 2), dtype=np.int64)
    home_n = np.zeros(len(persons), dtype=np.int64)
    home_ij[best["p"].to_numpy()] = best[["i", "j"]].to_numpy()
    home_n[best["p"].to_numpy()] = best["n"].to_numpy()
    has = n_night >= min_points
    centres = grid.centres(home_ij)
    geom = np.full(len(persons), None, dtype=object)
    geom[has] = shapely.points(centres[has])
    ids = np.full(len(persons), None, dtype=object)
    ids[has] = _cell_ids(home_ij[has])
    index = persons.rename(pts.person_name)
    out = gpd.GeoDataFrame(
        {
            "cell": pd.Series(ids, index=index, dtype=object),  # None without a home (object on every pandas)
            "night_points": n_night,
            "home_points": np.where(has, home_n, 0),
        },
        index=index,
    )
    out = out.set_geometry(gpd.GeoSeries(geom, index=out.index, crs=grid.crs).rename("geometry"))
    out["share"] = np.divide(
        out["home_points"], out["night_points"], out=np.zeros(len(out)), where=out["night_points"].to_numpy() > 0
    )
    return out


def home_inference(
    traces,
    *,
    person=None,
    time=None,
    night=DEFAULT_NIGHT,
    tz=None,
    cell: float = DEFAULT_CELL,
    crs=None,
    min_points: int = 1,
    released=None,
) -> gpd.GeoDataFrame:
    """Each person's home: the centre of the public grid cell holding most of their night-time points.

    The rule: keep the points whose local time of day is in ``night`` (22:00 to 06:00 by
    default); count them per cell of the public grid (square cells of ``cell`` metres anchored
    at the origin of the grid's CRS, see the module's notes); the home is the centre of the cell
    with the most, ties broken by the smaller cell column, then the smaller row (deterministic,
    independent of the row order).  A person with fewer than ``min_points`` night-time points
    has no home (empty geometry).

    Parameters
    ----------
    traces : GeoDataFrame of points or movingpandas.TrajectoryCollection
        Any CRS with a datum.  A GeoDataFrame needs ``person`` (and ``time`` unless
        ``night=None``); a TrajectoryCollection gives its time stamps (its DatetimeIndex) and,
        unless ``person`` names a column of its trajectories (e.g. the moving object's id), one
        person per trajectory.
    person : column label
        Person ids (a person's traces are pooled).
    time : column label
        Time stamps: datetimes or ISO 8601 text.  Naive time stamps are local time when
        ``tz=None`` and UTC otherwise (as GPS logs and MovingPandas keep them).
    night : (start, end) hours or None
        Local hours counted as night, ``start`` included, ``end`` excluded, wrapping past
        midnight when ``start > end``.  None: every point (the most visited place).
    tz : str, "solar" or None
        Time zone of the people (``"Asia/Shanghai"``): time stamps are converted to it.
        ``"solar"``: local mean solar time, UTC plus longitude / 15 hours.  Required for time
        stamps that carry a time zone.
    cell : float
        Side of the grid's cells in metres (200).
    crs : CRS, optional
        The projected CRS in metres of the grid (default: see the module's notes).
    min_points : int
        Night-time points a person needs to be given a home (1).
    released : bool, optional
        The traces are a release: rows without a geometry (budget exhausted) are left out
        instead of refused.  Default: whether ``traces`` carries a release record
        (``attrs["geopriv"]``, as ``sanitize_traces`` results do).

    Returns
    -------
    GeoDataFrame
        Indexed by person id (sorted), in the grid's CRS: ``cell`` (the home cell's id
        ``"ix:iy"``, None without a home), ``night_points``, ``home_points`` (night-time points
        in the home cell), ``share`` (their share), geometry = the home cell's centre (None
        without a home).  ``attrs["geopriv_attack"]`` holds the rule's parameters.

    See Also
    --------
    home_attack : The same rule on a release, scored against the truth.
    top_places_uniqueness : Who is unique by their most visited places.

    Examples
    --------
    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))          # GeoLife GPS fixes, 3 trackers
    >>> fixes["t"] = pd.to_datetime(fixes["t"])
    >>> homes = geopriv.home_inference(fixes, person="tracker", time="t", tz="Asia/Shanghai")
    >>> len(homes), list(homes.columns[:2])
    (3, ['cell', 'night_points'])
    """
    cell = _check_cell(cell)
    night = _check_night(night)
    min_points = _check_count(min_points, "min_points")
    released = _is_release(traces) if released is None else bool(released)
    pts = _points(traces, person, time, "traces", need_time=night is not None, released=released)
    grid = _Grid.of(pts, crs, cell)
    out = _homes(pts, grid, night, tz, min_points, "traces")
    out.attrs["geopriv_attack"] = {
        "attack": "home_inference",
        "night": night,
        "tz": tz,
        "min_points": min_points,
        **grid.record(),
    }
    return out


def home_attack(
    true,
    released,
    *,
    person=None,
    time=None,
    night=DEFAULT_NIGHT,
    tz=None,
    cell: float = DEFAULT_CELL,
    crs=None,
    radii=DEFAULT_RADII,
    min_points: int = 1,
) -> gpd.GeoDataFrame:
    """Infer each person's home from a release and compare it with the home the true data gives.

    Both homes follow :func:`home_inference`'s rule on one grid (the true data's): the true
    home from ``true`` (e.g. all raw GPS fixes), the inferred one from ``released`` (what the
    adversary sees).  An inferred home within ``r`` metres of the true home is a hit.

    Parameters
    ----------
    true, released : GeoDataFrame of points or movingpandas.TrajectoryCollection
        The true traces and a release of them (or of a subset: queries sampled from them),
        sharing person ids.  Released rows without a geometry are left out.  Every released
        person must be a true person.
    person, time, night, tz, cell, crs
        As in :func:`home_inference`, the same for both sides.
    radii : sequence of float
        Hit distances in metres (200 and 500).
    min_points : int
        As in :func:`home_inference`.

    Returns
    -------
    GeoDataFrame
        One row per true person (sorted ids): ``true_cell``, ``inferred_cell``,
        ``night_points_true``, ``night_points_released``, ``distance_m`` (geodesic, NaN when a
        home is missing), ``same_cell``, ``hit_<r>m`` for each radius (nullable booleans: NA
        when the true data give no home, False when the release gives none), ``true_home``
        (geometry) and ``inferred_home`` (the active geometry), in the grid's CRS.
        ``attrs["summary"]``: ``persons`` (with a true home), ``inferred`` (of them, with an
        inferred home), ``hit_rate_<r>m`` and ``same_cell_rate`` (over persons with a true
        home: a person the release gives no home counts as a miss), ``median_distance_m``.

    See Also
    --------
    home_inference : The rule on one trace set.
    top_places_attack : Re-identification by the most visited places.

    Examples
    --------
    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))          # GeoLife GPS fixes, 3 trackers
    >>> fixes["t"] = pd.to_datetime(fixes["t"])
    >>> same = geopriv.home_attack(fixes, fixes, person="tracker", time="t", tz="Asia/Shanghai")
    >>> same.attrs["summary"]["hit_rate_200m"]     # the truth itself finds every home
    1.0
    """
    cell = _check_cell(cell)
    night = _check_night(night)
    radii = _check_radii(radii)
    min_points = _check_count(min_points, "min_points")
    t = _points(true, person, time, "true data", need_time=night is not None)
    r = _points(released, person, time, "released data", need_time=night is not None, released=True)
    _check_persons(t, r)
    grid = _Grid.of(t, crs, cell)
    ht = _homes(t, grid, night, tz, min_points, "true data")
    hr = _homes(r, grid, night, tz, min_points, "released data").reindex(ht.index)
    has_t = ht.geometry.notna().to_numpy()
    has_r = hr.geometry.notna().to_numpy()
    both = has_t & has_r
    dist = np.full(len(ht), np.nan)
    if both.any():
        a = shapely.get_coordinates(ht.geometry.to_numpy()[both])
        b = shapely.get_coordinates(hr.geometry.to_numpy()[both])
        dist[both] = ground_distance(ht.geometry, a, b)
    out = gpd.GeoDataFrame(
        {
            "true_cell": pd.Series(ht["cell"].to_numpy(), index=ht.index, dtype=object),
            "inferred_cell": pd.Series(hr["cell"].to_numpy(dtype=object, na_value=None), index=ht.index, dtype=object),
            "night_points_true": ht["night_points"].to_numpy(),
            "night_points_released": hr["night_points"].fillna(0).to_numpy(dtype=np.int64),
            "distance_m": dist,
        },
        index=ht.index,
    )

    def hits(ok):
        return pd.array(np.where(has_t, ok & has_r, None), dtype="boolean")

    out["same_cell"] = hits(both & (out["true_cell"].to_numpy() == out["inferred_cell"].to_numpy()))
    for rad in radii:
        out[_hit(rad)] = hits(both & (np.nan_to_num(dist, nan=np.inf) <= rad))
    out["true_home"] = gpd.GeoSeries(ht.geometry.to_numpy(), index=ht.index, crs=grid.crs)
    out = out.set_geometry(gpd.GeoSeries(hr.geometry.to_numpy(), index=ht.index, crs=grid.crs).rename("inferred_home"))
    n = int(has_t.sum())
    summary = {"persons": n, "inferred": int(both.sum())}
    for rad in radii:
        summary["hit_rate" + _hit(rad)[3:]] = float(out[_hit(rad)].sum()) / n if n else math.nan
    summary["same_cell_rate"] = float(out["same_cell"].sum()) / n if n else math.nan
    summary["median_distance_m"] = float(np.median(dist[both])) if both.any() else math.nan
    out.attrs["summary"] = summary
    out.attrs["geopriv_attack"] = {
        "attack": "home",
        "night": night,
        "tz": tz,
        "min_points": min_points,
        "radii": radii,
        **grid.record(),
    }
    return out


def _hit(radius: float) -> str:
    """The column of hits within ``radius`` metres: hit_200m, hit_2.5m."""
    return f"hit_{int(radius)}m" if float(radius).is_integer() else f"hit_{radius:g}m"


def _check_persons(t: _Points, r: _Points) -> None:
    """Every released person must be a true person (compared by value)."""
    known = pd.Index(pd.unique(t.persons.to_numpy()))
    unknown = pd.Index(pd.unique(r.persons.to_numpy())).difference(known, sort=False)
    if len(unknown):
        raise GeoprivError(
            f"{len(unknown)} person(s) of the released data are not in the true data: person ids "
            f"{format_labels(unknown)}.",
            fix=Fix(
                "same_persons",
                python="Compare a release with the data it was made from, with the same person "
                "column (and the same types of ids) on both sides.",
            ),
        )


# ---------------------------------------------------------------------------- top places
def _top_places(pts: _Points, grid: _Grid, n: int, ordered: bool) -> pd.DataFrame:
    """Per person (sorted ids): the tuple of their top-``n`` cell ids and the points in them."""
    codes, persons = _factorize(pts.persons.to_numpy())
    ranked = _ranked_cells(codes, grid.cells(pts))
    top = ranked[ranked["rank"] < n]
    if not ordered:  # a set: listed by (column, row)
        top = top.sort_values(["p", "i", "j"], kind="mergesort")
    ids = _cell_ids(top[["i", "j"]].to_numpy())
    places = pd.Series(ids, index=top["p"].to_numpy()).groupby(level=0, sort=True).agg(tuple)
    visits = top.groupby("p", sort=True)["n"].sum()
    total = np.bincount(codes, minlength=len(persons))
    return pd.DataFrame(
        {
            "places": places.reindex(range(len(persons))).to_numpy(),
            "n_places": places.reindex(range(len(persons))).map(len).to_numpy(dtype=np.int64),
            "top_points": visits.reindex(range(len(persons))).to_numpy(dtype=np.int64),
            "points": total,
        },
        index=persons.rename(pts.person_name),
    )


def top_places_uniqueness(
    traces, *, person=None, n: int = 2, cell: float = DEFAULT_CELL, crs=None, ordered: bool = False, released=None
) -> pd.DataFrame:
    """How many people are unique given their top-``n`` places (cells of a public grid).

    A person's top-``n`` places are the ``n`` cells holding most of their points (every point
    counts once, whatever its time; ties by the smaller cell column, then row), compared as an
    unordered set by default (``ordered=True``: as a ranked list, most visited first).  A
    person with points in fewer than ``n`` cells keeps the shorter set.  The anonymity set of a
    person is the number of persons (themselves included) with exactly the same top places.

    Parameters
    ----------
    traces : GeoDataFrame of points or movingpandas.TrajectoryCollection
        As in :func:`home_inference` (no time stamps needed).
    person : column label
        Person ids, as in :func:`home_inference`.
    n : int
        Places per person (2: home and work, Zang and Bolot 2011).
    cell : float
        Side of the grid's cells in metres.
    crs : CRS, optional
        Projected CRS in metres of the grid.
    ordered : bool
        Compare ranked lists instead of sets.
    released : bool, optional
        As in :func:`home_inference`: rows without a geometry are left out of a release.

    Returns
    -------
    DataFrame
        Indexed by person id: ``places`` (tuple of cell ids ``"ix:iy"``), ``n_places``,
        ``top_points`` (points in them), ``points``, ``anonymity_set``, ``unique``.
        ``attrs["summary"]``: ``persons``, ``unique_share``, ``mean_anonymity_set``, ``n``,
        ``ordered``, ``cell_m``, ``grid_crs``.

    See Also
    --------
    top_places_attack : The same on a release: re-identification.
    home_inference : The most visited night-time place.

    Examples
    --------
    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))          # GeoLife GPS fixes, 3 trackers
    >>> fixes["t"] = pd.to_datetime(fixes["t"])
    >>> top = geopriv.top_places_uniqueness(fixes, person="tracker", n=2)
    >>> top.attrs["summary"]["persons"]
    3
    """
    cell = _check_cell(cell)
    n = _check_count(n, "n")
    released = _is_release(traces) if released is None else bool(released)
    pts = _points(traces, person, None, "traces", released=released)
    grid = _Grid.of(pts, crs, cell)
    out = _top_places(pts, grid, n, bool(ordered))
    out["anonymity_set"] = out.groupby("places", sort=False)["places"].transform("size").to_numpy(dtype=np.int64)
    out["unique"] = out["anonymity_set"] == 1
    out.attrs["summary"] = {
        "persons": len(out),
        "unique_share": float(out["unique"].mean()),
        "mean_anonymity_set": float(out["anonymity_set"].mean()),
        "n": n,
        "ordered": bool(ordered),
        **grid.record(),
    }
    return out


def top_places_attack(
    true, released, *, person=None, n: int = 2, cell: float = DEFAULT_CELL, crs=None, ordered: bool = False
) -> pd.DataFrame:
    """Re-identify released persons by their top-``n`` places.

    The adversary knows every true person's top-``n`` places (from ``true``) and computes each
    released person's from the release, on the same grid (the true data's).  A released person
    is re-identified when exactly one true person has the same top places, and that person is
    them.  The person ids of the release are used only to score the attack.

    Parameters
    ----------
    true, released : GeoDataFrame of points or movingpandas.TrajectoryCollection
        The true traces and a release of them, sharing person ids (every released person must
        be a true person).  Released rows without a geometry are left out.
    person, n, cell, crs, ordered
        As in :func:`top_places_uniqueness`, the same for both sides.

    Returns
    -------
    DataFrame
        One row per released person (with at least one released point): ``released_places``,
        ``true_places``, ``candidates`` (true persons with the released top places),
        ``matched`` (the one candidate, None unless there is exactly one), ``reidentified``.
        ``attrs["summary"]``: ``persons`` (released), ``reidentification_rate``,
        ``unique_match_rate`` (exactly one candidate, right or wrong), ``true_unique_share``
        (the true data's :func:`top_places_uniqueness`), ``n``, ``ordered``, the grid.

    See Also
    --------
    top_places_uniqueness : Uniqueness on one trace set.
    home_attack : The home attack.

    Examples
    --------
    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))          # GeoLife GPS fixes, 3 trackers
    >>> fixes["t"] = pd.to_datetime(fixes["t"])
    >>> attack = geopriv.top_places_attack(fixes, fixes, person="tracker", n=2)
    >>> attack.attrs["summary"]["reidentification_rate"]     # the truth re-identifies everyone unique
    1.0
    """
    cell = _check_cell(cell)
    n = _check_count(n, "n")
    t = _points(true, person, None, "true data")
    r = _points(released, person, None, "released data", released=True)
    _check_persons(t, r)
    grid = _Grid.of(t, crs, cell)
    tp = _top_places(t, grid, n, bool(ordered))
    out = pd.DataFrame(index=pd.Index([], name=r.person_name), columns=["released_places"])
    if len(r.xy):
        rp = _top_places(r, grid, n, bool(ordered))
        counts, first = {}, {}
        for p, who in zip(tp["places"], tp.index):
            counts[p] = counts.get(p, 0) + 1
            first.setdefault(p, who)
        cand = np.array([counts.get(p, 0) for p in rp["places"]], dtype=np.int64)
        matched = np.array([first[p] if c == 1 else None for p, c in zip(rp["places"], cand)], dtype=object)
        out = pd.DataFrame(
            {
                "released_places": rp["places"].to_numpy(),
                "true_places": tp["places"].reindex(rp.index).to_numpy(),
                "candidates": cand,
                "matched": matched,
            },
            index=rp.index,
        )
        out["reidentified"] = np.array([c == 1 and m == p for c, m, p in zip(cand, matched, rp.index)], dtype=bool)
    else:
        out = out.assign(true_places=[], candidates=np.zeros(0, np.int64), matched=[], reidentified=np.zeros(0, bool))
    anon = tp.groupby("places", sort=False)["places"].transform("size")
    m = len(out)
    out.attrs["summary"] = {
        "persons": m,
        "reidentification_rate": float(out["reidentified"].mean()) if m else math.nan,
        "unique_match_rate": float((out["candidates"] == 1).mean()) if m else math.nan,
        "true_unique_share": float((anon == 1).mean()),
        "n": n,
        "ordered": bool(ordered),
        **grid.record(),
    }
    return out


# ---------------------------------------------------------------------------- per-query error
def _query_frame(data, what: str):
    """(GeoSeries, is a collection): a collection's rows labelled by (trajectory id, time stamp)."""
    if _is_collection(data):
        frame, traj, tcol = _collection_frame(data, None, None, what)
        geoms = frame.geometry
        geoms.index = pd.MultiIndex.from_arrays([frame[traj], frame[tcol]], names=["trajectory", "t"])
        return geoms, True
    if not isinstance(data, (gpd.GeoDataFrame, gpd.GeoSeries)):
        raise ParameterTypeError(
            f"The {what} must be a GeoDataFrame or GeoSeries of points, or a movingpandas "
            f"TrajectoryCollection, got {type(data).__name__}."
        )
    return as_geoseries(data, f"the {what}"), False


def _stats(d: np.ndarray, prefix: str) -> dict:
    if d.size == 0:
        return {f"{prefix}_mean_m": math.nan, f"{prefix}_median_m": math.nan, f"{prefix}_p90_m": math.nan}
    return {
        f"{prefix}_mean_m": float(d.mean()),
        f"{prefix}_median_m": float(np.median(d)),
        f"{prefix}_p90_m": float(np.quantile(d, 0.9)),
    }


def query_error(true, released, *, adversary=None) -> pd.DataFrame:
    """Per released point: its distance to the truth, and the adversary's guess's distance to the truth.

    Parameters
    ----------
    true, released : GeoDataFrame/GeoSeries of points or movingpandas.TrajectoryCollection
        The data and its release, rows matched by index label (for TrajectoryCollections: by
        trajectory id and time stamp).  Released rows without a geometry (budget exhausted)
        were not released and are left out; every other released row must have a true row.
    adversary : geopriv.adversary.AdversaryError, optional
        An adversary (``geopriv.adversary_error(...)``): its ``guess(released)`` is the
        optimal Bayesian adversary's estimate of each true point from its released point.

    Returns
    -------
    DataFrame
        Indexed like the released rows that carry a point: ``displacement_m`` (geodesic metres
        from the released point to the true point) and, with ``adversary``,
        ``adversary_error_m`` (from the adversary's guess to the true point).
        ``attrs["summary"]``: ``n``, ``not_released`` (rows without a point),
        ``displacement_mean_m`` / ``_median_m`` / ``_p90_m``, the same for ``adversary_error``,
        and the adversary's model figures ``expected_error_m`` and ``expected_displacement_m``.

    See Also
    --------
    empirical_adversary_error : The adversary's error for any point release.
    displacement : Displacement per row.

    Examples
    --------
    >>> true = gpd.GeoDataFrame(geometry=gpd.points_from_xy([1000.0, 1500.0], [1000.0, 700.0]), crs="EPSG:32650")
    >>> out = true.priv.perturb(epsilon=0.01, bounds=(0, 0, 2000, 2000), rng=1)
    >>> adv = geopriv.adversary_error(out, cell=100)
    >>> geopriv.query_error(true, out, adversary=adv).columns.tolist()
    ['displacement_m', 'adversary_error_m']
    """
    if is_synthetic(getattr(released, "attrs", {}).get("geopriv")):
        raise GeoprivError(
            "The released points are a synthetic set (made by synthesize): no row of it is the release of a row of "
            "the true data, so there is no per-query error.",
            fix=Fix(
                "compare_distributions",
                python="Compare the two point sets as distributions: geopriv.wasserstein(true, released).",
            ),
        )
    if adversary is not None and not callable(getattr(adversary, "guess", None)):
        raise ParameterTypeError(
            f"adversary must be a geopriv.adversary.AdversaryError (from geopriv.adversary_error(...)), got "
            f"{type(adversary).__name__}."
        )
    a, a_coll = _query_frame(true, "true data")
    b, b_coll = _query_frame(released, "released data")
    if a_coll != b_coll:
        raise GeoprivError(
            "Compare a TrajectoryCollection with a TrajectoryCollection, a GeoDataFrame with a "
            "GeoDataFrame: rows are matched by (trajectory, time) or by index label."
        )
    keep = ~(b.isna() | b.is_empty).to_numpy()
    not_released = int((~keep).sum())
    b = b[keep]
    if not a.index.is_unique:
        raise GeoprivError(
            "The true data's index has repeated labels: released rows cannot be matched to it.",
            fix=Fix("unique_index", python="Give the true data a unique index (and release it with that index)."),
        )
    missing = b.index.difference(a.index)
    if len(missing):
        raise GeoprivError(
            f"{len(missing)} released row(s) have no true counterpart: labels {format_labels(missing)}.",
            fix=Fix(
                "same_rows",
                python="Compare a release with the data it was made from (rows are matched by index label).",
            ),
        )
    out = pd.DataFrame(index=b.index)
    summary = {"n": len(b), "not_released": not_released}
    if len(b):
        a = a.loc[b.index]
        if not as_crs(a.crs).equals(as_crs(b.crs)):
            bb = b.to_crs(a.crs)
        else:
            bb = b
        xy_a = point_xy(a, "the true data")
        out["displacement_m"] = ground_distance(a, xy_a, point_xy(bb, "the released data"))
    else:
        out["displacement_m"] = np.zeros(0)
    summary.update(_stats(out["displacement_m"].to_numpy(), "displacement"))
    if adversary is not None:
        if len(b):
            guess = adversary.guess(b)
            guess = (
                guess if isinstance(guess, gpd.GeoSeries) else gpd.GeoSeries(guess, crs=getattr(adversary, "crs", None))
            )
            if len(guess) != len(b):
                raise GeoprivError(f"The adversary guessed {len(guess)} point(s) for {len(b)} released point(s).")
            if guess.crs is None:
                guess = guess.set_crs(b.crs)
            if not as_crs(guess.crs).equals(as_crs(a.crs)):
                guess = guess.to_crs(a.crs)
            guess.index = b.index
            out["adversary_error_m"] = ground_distance(a, xy_a, point_xy(guess, "the adversary's guesses"))
        else:
            out["adversary_error_m"] = np.zeros(0)
        summary.update(_stats(out["adversary_error_m"].to_numpy(), "adversary_error"))
        for key in ("expected_error_m", "displacement_m"):
            value = getattr(adversary, key, None)
            if value is not None:
                summary["expected_" + key if key == "displacement_m" else key] = float(value)
    out.attrs["summary"] = summary
    return out
