"""Trace sanitisation: ``geopriv.sanitize_traces`` (``gdf.priv.sanitize_traces``) and query sampling.

A *trace* is the sequence of locations one user queries a location-based service from, with
public time stamps.  :func:`sanitize_traces` releases every trace of a GeoDataFrame with the
predictive mechanism of Chatzikokolakis, Palamidessi and Stronati (PETS 2014; see
:mod:`geopriv.mechanisms.predictive`) or with independent planar Laplace noise, within a
total budget per trace, and returns one row per input row plus a per-trace ledger
(:func:`trace_ledger`).  :func:`sample_queries` turns raw GPS trajectories into query traces
with the paper's sampling protocol (sec. 5), so its evaluation can be reproduced.
"""

from __future__ import annotations

import math
import sys

import geopandas as gpd
import numpy as np
import pandas as pd
from pandas.api.extensions import no_default
from pyproj import CRS, Transformer

from .budget import open_store, opens_budget_store
from .daskhook import dispatches_dask, schema_of
from .exceptions import Fix, GeoprivError, LocationAttributeError, ParameterError, ParameterTypeError
from .frame import DEFAULT_MAX_DISTORTION
from .identity import canonical_order, identities
from .points import as_geoseries, point_xy
from .release import plan_traces
from .release.base import input_crs
from .release.common import data_errors_first
from .release.traces import (  # noqa: F401 - their old home: geopriv.traces.X keeps working
    OUTPUT_COLUMNS,
    PANDAS3,
    TIME_FIX,
    TRAJ_ID_FIX,
    check_output_columns,
    check_trace_input,
    column_of,
    fill_last,
    ledger_dict,
    time_seconds,
    trace_layout,
    trace_persons,
)
from .rng import make_rng

__all__ = [
    "sanitize_traces",
    "sample_queries",
    "trace_ledger",
    "OUTPUT_COLUMNS",
    "ledger_from_columns",
    "ledger_rows",
    "finish_ledger",
    "trace_record",
    "check_output_columns",
    "column_of",
    "time_seconds",
    "PANDAS3",
]

# ---------------------------------------------------------------------------- MovingPandas
#: What MovingPandas derives from the true positions (its default column names; a trajectory's
#: ``<kind>_col_name`` overrides them): released next to noisy points they would undo the noise.
_DERIVED_COLUMNS = ("speed", "direction", "distance", "acceleration", "angular_difference")


def _movingpandas(data):
    """The movingpandas module when ``data`` is one of its objects, else None (never imports it)."""
    mpd = sys.modules.get("movingpandas")
    if mpd is not None and isinstance(data, (mpd.TrajectoryCollection, mpd.Trajectory)):
        return mpd
    return None


class _Collection:
    """Where the rows of a TrajectoryCollection went in :func:`_collection_frame` (public layout only)."""

    def __init__(self, module, trajectories, spans, time_col):
        self.module = module
        self.trajectories = trajectories
        self.spans = spans
        self.time_col = time_col


def _collection_frame(mpd, collection, traj_id, time, keep):
    """A TrajectoryCollection as one GeoDataFrame of points (RangeIndex, trajectories one after another).

    Returns (frame, traj_id, time, layout): ``traj_id`` is the trajectory id column unless the
    caller named another column (or None), ``time`` the column holding each trajectory's
    DatetimeIndex.
    """
    if isinstance(collection, mpd.Trajectory):
        raise GeoprivError(
            "sanitize_traces takes a movingpandas.TrajectoryCollection (or a GeoDataFrame), not a single Trajectory: "
            "pass movingpandas.TrajectoryCollection([trajectory])."
        )
    if time is not no_default:
        raise ParameterError(
            "A TrajectoryCollection's time stamps are its trajectories' DatetimeIndex: do not pass time= "
            "(it names a column of a GeoDataFrame)."
        )
    trajectories = list(collection.trajectories)
    if not trajectories:
        raise GeoprivError("The TrajectoryCollection has no trajectories: there is nothing to release.")
    first = trajectories[0]
    id_col = first.get_traj_id_col()
    time_col = first.df.index.name or "t"
    crs = first.df.crs
    parts, spans, start = [], [], 0
    derived = set(_DERIVED_COLUMNS)
    for tr in trajectories:
        df = tr.df
        if df.crs != crs:
            raise GeoprivError(
                f"The trajectories are in different CRSs ({first.id!r}: {crs}, {tr.id!r}: {df.crs}): one release has "
                "one public frame. Reproject them to one CRS first (tc.to_crs(...))."
            )
        if time_col in df.columns:
            raise GeoprivError(
                f"Trajectory {tr.id!r} has a column {time_col!r} beside its time index of that name: rename it first."
            )
        part = df.reset_index(names=time_col)
        part[id_col] = tr.id  # the trajectory's id, whatever its own id column holds
        parts.append(part)
        spans.append((start, start + len(part)))
        start += len(part)
        derived.update(getattr(tr, f"{kind}_col_name", kind) for kind in _DERIVED_COLUMNS)
    frame = gpd.GeoDataFrame(pd.concat(parts, ignore_index=True), geometry=first.df.geometry.name, crs=crs)
    prior = getattr(collection, "attrs", None)  # a collection released before: its record becomes "previous"
    frame.attrs = dict(prior) if isinstance(prior, dict) else {}

    kept = [keep] if isinstance(keep, str) else list(keep or ())
    found = [c for c in frame.columns if c in derived and c not in kept]
    if found:
        raise LocationAttributeError(
            f"Column(s) {found} hold what MovingPandas derives from the true positions (speed, direction, distance, "
            "...): released unchanged next to the noisy points, they would let anyone retrace the true trajectories. "
            f"Drop them before releasing (e.g. traj.df.drop(columns={found!r}) for each trajectory), or keep them "
            f"deliberately with keep={found!r} if they do not come from the positions.",
            {c: "derived by MovingPandas from the true positions" for c in found},
        )
    if traj_id is no_default:
        objects = {}
        for tr in trajectories:
            if getattr(tr, "obj_id", None) is not None:
                objects.setdefault(tr.obj_id, []).append(tr.id)
        shared = {o: ids for o, ids in objects.items() if len(ids) > 1}
        if shared:
            o, ids = next(iter(shared.items()))
            raise GeoprivError(
                f"{sum(len(v) for v in shared.values())} trajectories belong to {len(shared)} moving object(s) that "
                f"have several (e.g. object {o!r}: trajectories {ids[:5]}): with one budget per trajectory, each "
                "object would get one budget per trajectory. Pass traj_id='<column of object ids>' for one budget "
                f"per object (recommended), or traj_id={id_col!r} to give each trajectory its own budget deliberately."
            )
        traj_id = id_col
    return frame, traj_id, time_col, _Collection(mpd, trajectories, spans, time_col)


def _released_collection(out, layout: _Collection, traj_id):
    """The release as a TrajectoryCollection: each trajectory's released rows, provenance in its ``df.attrs``.

    Rows without a location (exhausted, ``on_exhausted="empty"``) are left out, and so is a
    trajectory left with fewer than two rows (a movingpandas Trajectory needs two); the ledger
    still counts them.  Each trajectory's ``df.attrs["geopriv"]`` is the release's record with
    the ledger of its own trace(s); the collection's ``attrs["geopriv"]`` has the whole ledger.
    """
    mpd = layout.module
    if traj_id is None:  # all rows one trace
        codes = np.zeros(len(out), dtype=np.int64)
    else:  # each row's trace, numbered as the release numbered them (geopriv.identity)
        codes = identities(out[traj_id], out.index, "trace id").sorted_persons()[1]
    record = out.attrs["geopriv"]
    ledger = record["ledger"]
    geoms = out.geometry.values
    located = ~(geoms.isna() | geoms.is_empty)
    trajectories = []
    for tr, (a, b) in zip(layout.trajectories, layout.spans):
        rows = np.flatnonzero(located[a:b]) + a
        if len(rows) < 2:
            continue
        part = out.iloc[rows].set_index(layout.time_col)
        part.index.name = tr.df.index.name
        new = mpd.Trajectory(part, tr.id, traj_id_col=tr.get_traj_id_col(), obj_id=getattr(tr, "obj_id", None))
        own = np.unique(codes[a:b])
        sub = {k: ([v[i] for i in own] if isinstance(v, list) else v) for k, v in ledger.items()}
        attrs = {k: v for k, v in tr.df.attrs.items() if k != "geopriv"}
        attrs["geopriv"] = dict(record, ledger=sub)
        new.df.attrs = attrs
        trajectories.append(new)
    result = mpd.TrajectoryCollection(trajectories)
    result.attrs = dict(out.attrs)  # pandas' convention, so geopriv.trace_ledger(result) reads it
    return result


# ---------------------------------------------------------------------------- sanitize_traces
@opens_budget_store
def sanitize_traces(
    data,
    epsilon=None,
    *,
    traj_id=no_default,
    time=no_default,
    level=None,
    radius=None,
    method: str = "predictive",
    budget: str = "fixed_rate",
    rate=None,
    accuracy=None,
    skip_speed=None,
    stale_after=None,
    predictor="parrot",
    on_exhausted: str = "empty",
    eta: float = 0.5,
    gamma: float = 0.8,
    delta: float = 0.9,
    prediction_rate: float = 0.5,
    rng=None,
    bounds=None,
    grid="auto",
    continuous: bool = False,
    keep=(),
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    progress=None,
    budget_store=None,
    person=None,
):
    """Release location traces within a privacy budget per trace (predictive or independent noise).

    Every trace (rows sharing ``traj_id``, ordered by ``time``) gets the total budget
    ``epsilon`` per ground metre, whatever the CRS: the release of the whole trace is
    ``epsilon * d_inf``-private (two traces whose points are pairwise within r metres are
    ``exp(epsilon * r)``-indistinguishable).  With ``method="predictive"`` each query is first
    compared, by a private test, to a prediction from what was already released; if the test
    passes the prediction is reported at the cost of the test only, otherwise fresh planar
    Laplace noise is drawn (Chatzikokolakis, Palamidessi, Stronati, PETS 2014).  A budget
    manager spends the budget; when a query can no longer be paid for, the trace stops.

    Parameters
    ----------
    data : GeoDataFrame of points, GeoSeries, or movingpandas.TrajectoryCollection
        One row per query; any CRS with a datum.  Never modified.  A GeoSeries is one trace in
        row order (``traj_id=None, time=None``) and gives a GeoDataFrame.  A
        ``TrajectoryCollection`` (``pip install 'geopriv[mobility]'``) gives one: see Returns.
    epsilon : float, optional
        Total budget of each trace per ground metre.  Or give ``level`` and ``radius``:
        ``level=math.log(10), radius=100`` is the paper's "ln 10 within 100 m".  The only
        argument after ``data`` that may be given by position, as in :func:`geopriv.perturb`.
    traj_id : str or None
        Column of trace ids (one budget per trace).  ``None``: all rows are one trace.
        Required for a GeoDataFrame.  For a TrajectoryCollection the default is each
        trajectory's id (one budget per trajectory); name a column of the trajectories'
        frames (e.g. the moving object's id) to give all trajectories of one person one
        budget, as you should when a person's movement was split into several trajectories.
        Trajectories sharing an ``obj_id`` are refused without it.
    time : str or None
        Column of time stamps (datetimes, ISO text, or seconds).  Public: they order each
        trace and drive ``skip_speed``.  ``None``: rows are in query order already.
        Rows with equal time stamps keep their input order.  Required for a GeoDataFrame;
        not given for a TrajectoryCollection (its trajectories' DatetimeIndex).
    level : float, optional
        Privacy level within ``radius`` metres, for the whole trace: epsilon = level / radius.
    radius : float, optional
        The radius in ground metres of ``level``.
    method : {"predictive", "independent"}
        ``"predictive"`` (default): a private test against a prediction before any fresh noise;
        ``"independent"``: fresh planar Laplace noise at every query.
    budget : {"fixed_rate", "fixed_utility"} or a budget manager
        ``fixed_rate`` with ``rate`` (fraction of the budget per query on average: 0.033 is
        about 30 queries) gives the best accuracy at that rate; ``fixed_utility`` with
        ``accuracy`` (metres: alpha(delta) of each hard query) covers as many queries as it can.
        Or a configured :class:`~geopriv.FixedRate` / :class:`~geopriv.FixedUtility` (then
        ``rate``, ``accuracy``, ``eta``, ``gamma``, ``delta``, ``prediction_rate`` are its own).
    rate : float, optional
        For ``budget="fixed_rate"``: the share of the trace's budget each query spends on
        average (0.033: about 30 queries).
    accuracy : float, optional
        For ``budget="fixed_utility"``: the accuracy aimed at, in ground metres (alpha(delta) of
        each query that needs fresh noise).
    skip_speed : float, optional
        Assumed top speed in metres per second for the time skip rule: when
        ``skip_speed * (time since the last noisy release)`` is below the accuracy aimed at, the
        prediction is reported without a test, for free.  The paper uses 0.5 km/h (0.139 m/s).
        Faster users get less accurate points, never less privacy.
    stale_after : float, optional
        Seconds since the last noisy release after which the test is skipped and fresh noise
        drawn directly (a prediction that old is presumed wrong; saves the test's budget).
    predictor : "parrot", "cluster_mean" or callable
        "parrot" reports the last released point (the paper's).  "cluster_mean" predicts the
        precision-weighted mean of the noisy releases made at the current place.  A callable
        receives a :class:`~geopriv.mechanisms.predictive.PublicRun` (public run only, metres
        in the local frame) and returns an (m, 2) array.
    on_exhausted : {"empty", "last"}
        Rows a trace's budget cannot pay for get status ``"exhausted"``, ``epsilon_spent`` 0
        and either no geometry (``"empty"``, the default: None) or the trace's last released
        point (``"last"``: free post-processing of the public run).  Never the true point.
    eta, gamma, delta, prediction_rate : float
        Budget manager configuration (paper sec. 4; defaults are the paper's): utility slack
        eta (0.5 .. 1), test-noise to threshold ratio gamma (about 0.8), accuracy level delta
        (0.9), prior prediction rate for fixed_rate.  Ignored when ``budget`` is a manager.
    rng : None, int, SeedSequence or Generator
        ``None`` (default, and the only choice for real releases) uses OS entropy.
    bounds : (xmin, ymin, xmax, ymax), optional
        Public study area in the data's CRS (choose it without looking at individual points).
        Needed for longitude/latitude data (noise is drawn in an equidistant frame centred on
        it); otherwise a projected CRS's area of use is used.  Inputs must lie inside.
    grid : "auto" or float
        Released points are snapped to a public lattice of this step in ground metres
        (default 1 m); see :func:`geopriv.perturb`.
    continuous : bool
        ``True``: unrounded float64 output, no finite-precision bound (recorded).
    keep : sequence of column labels
        Location-like attribute columns kept deliberately (see :func:`geopriv.perturb`).
    max_distortion : float
        As in :func:`geopriv.perturb`: CRS scale variation over the public area accepted.
    progress : None, True or callable(done, total)
        As in :func:`geopriv.perturb`: ``True`` shows a tqdm bar; a callable receives the
        number of rows decided (about 100 times, from inside the run) and may raise to cancel
        (nothing is returned).
    budget_store : geopriv.BudgetStore or str, optional
        A persistent store of lifetime budgets (or its URL).  Before any noise is drawn, each
        trace's person is charged the trace's worst case (``epsilon`` plus the lattice's
        finite-precision increment for every row), in epsilon per ground metre; after the run
        the charge is settled to what the public ledger says was spent and the rest is given
        back.  A person who cannot afford their traces is named in a
        :class:`~geopriv.BudgetExceededError` and nothing is drawn or charged.
    person : column label, optional
        The column of stable person ids charged in ``budget_store`` (constant within a trace;
        a person with several traces pays for each).  Default: the trace id.

    Returns
    -------
    GeoDataFrame or movingpandas.TrajectoryCollection
        Same index, columns and CRS as ``data`` (rows in the input order), geometry = the
        released point, and three new columns:

        * ``predicted`` (bool): the released point is the prediction (test passed or skipped);
        * ``status`` (str): ``"noise"`` (fresh noise), ``"predicted"`` (test passed),
          ``"skipped"`` (time rule, no test), ``"exhausted"`` (budget ran out: not released);
        * ``epsilon_spent`` (float): budget per metre spent at that step (test + noise).

        ``result.attrs["geopriv"]`` holds the provenance and the per-trace ledger; read the
        ledger as a DataFrame with :func:`geopriv.trace_ledger` (``result.priv.trace_ledger()``).

        For a TrajectoryCollection: a new TrajectoryCollection of the released points, each
        trajectory with its id, ``obj_id``, time stamps and columns, and the three columns
        above.  Rows without a location (budget exhausted, ``on_exhausted="empty"``) are
        left out (with ``"last"`` they stay, at the last released point), and so is a
        trajectory left with fewer than two points; the ledger counts them all.  The
        collection's ``attrs["geopriv"]`` holds the provenance and the whole ledger
        (``geopriv.trace_ledger(result)``; ``TrajectoryCollection.copy()`` does not keep it),
        each trajectory's ``df.attrs["geopriv"]`` the same record with its own trace's ledger.

    Raises
    ------
    GeoprivError
        Missing columns, rows without trace id or time, geometries that are not points.
    BudgetExceededError
        Never in normal use: the budget managers stop a trace before it overspends, and the
        accountant refuses, before any noise is drawn, a step that would.

    See Also
    --------
    sample_queries : Query traces from raw GPS trajectories (the paper's protocol).
    trace_ledger : The per-trace ledger of the result.
    FixedRate : The budget manager for a rate of queries.
    FixedUtility : The budget manager for an accuracy in metres.
    perturb : Independent points, each with its own epsilon per ground metre.

    Examples
    --------
    Five GeoLife trajectories in Beijing (longitude/latitude), sampled into queries, released with
    "ln 10 within 100 m" per trace:

    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))
    >>> queries = geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", rng=0)
    >>> out = geopriv.sanitize_traces(queries, traj_id="trajectory_id", time="t", level=math.log(10), radius=100,
    ...                               rate=0.033, bounds=(116.0, 39.5, 117.0, 40.5), rng=0)
    >>> len(out) == len(queries), list(out.columns[-3:])
    (True, ['predicted', 'status', 'epsilon_spent'])
    >>> sorted(out["status"].unique())
    ['exhausted', 'noise', 'predicted']
    >>> ledger = geopriv.trace_ledger(out)
    >>> bool((ledger["spent"] <= ledger["budget"]).all())
    True
    >>> out = queries.priv.sanitize_traces(traj_id="trajectory_id", time="t", level=math.log(10), radius=100,
    ...                                    rate=0.033, bounds=(116.0, 39.5, 117.0, 40.5))   # doctest: +SKIP
    """
    store = open_store(budget_store)
    layout = None
    mpd = _movingpandas(data)
    if mpd is not None:
        data, traj_id, time, layout = _collection_frame(mpd, data, traj_id, time, keep)
    elif isinstance(schema_of(data), gpd.GeoDataFrame):
        if traj_id is no_default:
            raise ParameterTypeError(
                "sanitize_traces needs traj_id=: the column that says which trace (user, trajectory) each row "
                "belongs to (one budget per trace), or traj_id=None if all rows are one trace."
            )
        if time is no_default:
            raise ParameterTypeError(
                "sanitize_traces needs time=: the column of time stamps that orders each trace, or time=None if the "
                "rows are already in query order."
            )
    else:  # a GeoSeries (one trace in row order) or something check_release_input refuses
        traj_id = None if traj_id is no_default else traj_id
        time = None if time is no_default else time
    # everything public (mechanism, budget manager, frame, lattice, record) from the one trace plan, then its run
    with data_errors_first(data, lambda d: check_trace_input(d, traj_id, time, keep, bounds)):
        plan = plan_traces(
            input_crs(data),
            epsilon,
            level=level,
            radius=radius,
            method=method,
            budget=budget,
            rate=rate,
            accuracy=accuracy,
            skip_speed=skip_speed,
            stale_after=stale_after,
            predictor=predictor,
            on_exhausted=on_exhausted,
            eta=eta,
            gamma=gamma,
            delta=delta,
            prediction_rate=prediction_rate,
            bounds=bounds,
            grid=grid,
            continuous=continuous,
            keep=keep,
            max_distortion=max_distortion,
            traj_id=traj_id,
            time=time,
            person=person,
        )
    out = plan.run(data, store=store, rng=rng, progress=progress)
    if layout is not None:
        return _released_collection(out, layout, traj_id)
    return out


@dispatches_dask("trace_ledger")  # a lazy release: a lazy ledger (geopriv.distributed.traces.trace_ledger_dask)
def trace_ledger(result) -> pd.DataFrame:
    """The per-trace ledger of a :func:`sanitize_traces` result, as a DataFrame indexed by trace id.

    Columns: ``queries`` (rows of the trace), ``released`` (rows not exhausted), ``noise``,
    ``predicted``, ``skipped``, ``exhausted`` (rows by status), ``tests`` (private tests run),
    ``budget`` (total epsilon per metre), ``spent`` (the accountant's ledger: the Lemma 1
    sum of test and noise budgets; never more than ``budget``), ``remaining``,
    ``spent_test``, ``spent_noise``, ``prediction_rate`` (released rows that were
    predictions), ``budget_rate`` (spent / budget per released query).

    On dask (:mod:`geopriv.distributed.traces`): a lazy release gives a lazy ledger, a computed
    one a DataFrame, both built from the release's columns (``tests``, ``spent_test`` and
    ``spent_noise`` are missing for the predictive mechanism there: see
    :func:`ledger_from_columns`).

    Parameters
    ----------
    result : GeoDataFrame, movingpandas.TrajectoryCollection or dask-geopandas GeoDataFrame
        A result of :func:`sanitize_traces`, with its ``attrs["geopriv"]`` record.

    Returns
    -------
    DataFrame
        One row per trace, indexed by trace id (the ``traj_id`` column's name); budgets and
        spending in epsilon per ground metre.  Lazy (a dask DataFrame) for a lazy release.

    Raises
    ------
    GeoprivError
        ``result`` carries no ledger (not a result of :func:`sanitize_traces`, or its ``attrs``
        were dropped by a pandas operation).

    See Also
    --------
    sanitize_traces : Makes the release and its ledger.

    Examples
    --------
    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))
    >>> queries = geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", rng=0)
    >>> out = geopriv.sanitize_traces(queries, traj_id="trajectory_id", time="t", level=math.log(10), radius=100,
    ...                               rate=0.033, bounds=(116.0, 39.5, 117.0, 40.5), rng=0)
    >>> ledger = geopriv.trace_ledger(out)
    >>> ledger.index.name, len(ledger)
    ('trajectory_id', 5)
    >>> bool((ledger["released"] + ledger["exhausted"] == ledger["queries"]).all())
    True
    >>> bool((ledger["spent"] <= ledger["budget"]).all())   # never more than the trace's budget
    True
    """
    rec = getattr(result, "attrs", {}).get("geopriv") or {}
    led = rec.get("ledger")
    if led is None and "ledger" in rec and str(rec.get("mechanism", "")).endswith("_trace"):
        # a computed dask release: its record carries no per-bucket ledgers; the columns give the ledger
        return ledger_from_columns(result)
    if led is None:
        raise GeoprivError(
            "This object carries no trace ledger: it is not (or no longer) a result of sanitize_traces. "
            "Ledgers live in result.attrs['geopriv']; some pandas operations drop attrs, so read it right after releasing."
        )
    cols = {k: v for k, v in led.items() if k not in ("trace", "trace_column")}
    df = pd.DataFrame(cols, index=pd.Index(led["trace"], name=led.get("trace_column") or "trace"))
    return df


# ---------------------------------------------------------------------------- sampling queries
def _geodetic_xy(geoms, xy):
    crs = CRS.from_user_input(geoms.crs)
    geodetic = crs.geodetic_crs
    if geodetic is None:
        from .exceptions import CRSError

        raise CRSError(f"The CRS {crs.name!r} has no datum; ground distances cannot be measured. Reproject first.")
    lon, lat = Transformer.from_crs(crs, geodetic, always_xy=True).transform(xy[:, 0], xy[:, 1])
    return np.asarray(lon), np.asarray(lat), geodetic.get_geod()


#: sample_queries refuses to draw more candidate query times than this (about 1.2 GB of working memory)
_MAX_CANDIDATES = 50_000_000
#: seconds per unit of a numeric time column (``sample_queries(time_unit=...)``)
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0, "D": 86400.0}


def _is_numeric_time(col: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col))


def _time_unit_seconds(time_unit, numeric: bool, name) -> float:
    """Seconds per unit of a numeric time column (1 when ``time_unit`` is None)."""
    if time_unit is None:
        return 1.0
    if not isinstance(time_unit, str) or time_unit not in TIME_UNITS:
        raise ParameterError(f"time_unit must be None or one of {sorted(TIME_UNITS)}, got {time_unit!r}.")
    if not numeric:
        raise ParameterError(
            f"A time unit applies to numeric time columns only; {name!r} holds datetimes or text, which carry their "
            "own unit.",
            fix=Fix("time_unit", python="Leave time_unit=None.", cli="Leave --time-unit out.", qgis=""),
        )
    return TIME_UNITS[time_unit]


def _check_seconds_plausible(t: np.ndarray, codes: np.ndarray, name) -> None:
    """Refuse numeric times that cannot be seconds of GPS fixes (``t`` sorted within each trace).

    Never quotes a value: the message gives the likely unit and the fix.
    """
    top = float(np.max(np.abs(t))) if len(t) else 0.0
    if top > 1e11:
        unit = "ns" if top > 1e17 else ("us" if top > 1e14 else "ms")
        raise GeoprivError(
            f"The time column {name!r} holds numbers that, read as seconds, lie after the year 5000: they look like "
            f"epoch {dict(ms='milliseconds', us='microseconds', ns='nanoseconds')[unit]}, and sampled as seconds the "
            f"protocol's intervals would be {dict(ms='1,000', us='a million', ns='a billion')[unit]} times too short "
            "(thousands of queries too many).",
            fix=Fix(
                "time_unit",
                python=f"Pass time_unit={unit!r}, or convert the column to datetimes first: "
                f"gdf[{name!r}] = pd.to_datetime(gdf[{name!r}], unit={unit!r}, utc=True).",
                cli=f"Give --time-unit {unit}.",
                qgis="",
            ),
        )
    same = codes[1:] == codes[:-1]
    steps = np.diff(t)[same]
    steps = steps[steps > 0]
    if steps.size and float(np.median(steps)) < 1e-3:
        raise GeoprivError(
            f"Consecutive fixes are a median of less than a millisecond apart when the time column {name!r} is read as "
            "seconds: the numbers look like days or hours (e.g. GeoLife's or Excel's fractional days since 1899-12-30), "
            "and sampling them as seconds would draw almost no queries.",
            fix=Fix(
                "time_unit",
                python=f"Pass time_unit='D' (or 'h'), or convert the column to datetimes first: "
                f"gdf[{name!r}] = pd.to_datetime(gdf[{name!r}], unit='D', origin='1899-12-30', "
                "utc=True).",
                cli="Give --time-unit D (or h).",
                qgis="",
            ),
        )


def sample_queries(
    data,
    *,
    traj_id,
    time,
    p: float = 0.0,
    short: float = 60.0,
    jump: float = 3600.0,
    jitter: float = 0.1,
    max_speed: float = 15 / 3.6,
    speed_window: float = 60.0,
    max_gap: float = 600.0,
    rng=None,
    time_unit: str | None = None,
) -> gpd.GeoDataFrame:
    """Turn raw GPS trajectories into query traces (Chatzikokolakis et al. 2014, sec. 5).

    For each trajectory, query times start at its first fix and follow each other after a
    *short* interval (``short`` seconds, 1 min) or, with probability ``p``, a *jump*
    (``jump`` seconds, 60 min), each interval multiplied by ``1 + jitter * N(0, 1)`` (clipped
    to at least half of itself).  A query is kept only while the user is slow: the fix at or
    before its time moves slower than ``max_speed`` (m/s; 15 km/h), measured as displacement
    over ``speed_window`` seconds centred on the fix, and is at most ``max_gap`` seconds old
    (GPS gaps: the user's position is unknown).  The query's location is that fix.

    Parameters
    ----------
    data : GeoDataFrame of points
        GPS fixes, any CRS with a datum.  Never modified.
    traj_id, time : str
        Trajectory id column and time stamp column (datetimes, ISO text, or numbers: seconds
        unless ``time_unit`` says otherwise).
    p : float
        Probability of a jump, 0 (frequent user) .. 1 (occasional user).
    short : float
        The short interval between queries, in seconds (default 60).
    jump : float
        The long interval (a jump), in seconds (default 3600).
    jitter : float
        Relative standard deviation of every interval, in [0, 1) (default 0.1).
    max_speed : float
        Queries are kept while the user moves slower than this, in metres per second
        (default 15 km/h).
    speed_window : float
        The window, in seconds centred on a fix, its speed is measured over (default 60).
    max_gap : float
        The oldest a fix may be, in seconds, to stand for a query's location (default 600).
    rng : None, int, SeedSequence or Generator
        Randomness of the sampling (not a privacy mechanism: a seed is fine here).
    time_unit : None or {"s", "ms", "us", "ns", "min", "h", "D"}
        Unit of a *numeric* time column.  None (default): seconds, checked for plausibility:
        numbers above 1e11 (epoch milliseconds or finer read as seconds would be after the year
        5000) or consecutive fixes a median of less than 1 ms apart (days or hours read as
        seconds) are refused, since the protocol's 1 min / 60 min intervals would then sample
        thousands of queries too many or too few.  A unit given here is trusted: the numbers
        are converted to seconds for sampling, and the output's time column is in the same
        unit as the input's.  Datetime and text columns carry their own unit (leave None).

    Returns
    -------
    GeoDataFrame
        One row per query, a new RangeIndex: the fix's columns, its time column replaced by the
        query time (same type and unit as the input's), and ``source_row`` (the fix's index
        label in ``data``).

    Raises
    ------
    ParameterError
        ``p``, ``jitter`` or an interval, speed or window is out of range.
    GeoprivError
        ``data`` is not a GeoDataFrame, a column is missing, or numeric times look like another
        unit than seconds (give ``time_unit``), or sampling would draw too many query times.

    See Also
    --------
    sanitize_traces : Releases the query traces within a budget per trace.

    Examples
    --------
    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))   # 5 GeoLife trajectories, 5,908 fixes
    >>> queries = geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", rng=0)
    >>> len(queries) < len(fixes), queries["trajectory_id"].nunique(), list(queries.columns[-2:])
    (True, 5, ['geometry', 'source_row'])
    >>> occasional = geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", p=0.5, rng=0)
    >>> len(occasional) < len(queries)   # jumps of an hour: fewer queries
    True
    """
    if not 0 <= float(p) <= 1:
        raise ParameterError("p (probability of a jump) must be in [0, 1].")
    for name, v in (
        ("short", short),
        ("jump", jump),
        ("max_speed", max_speed),
        ("speed_window", speed_window),
        ("max_gap", max_gap),
    ):
        if not (math.isfinite(float(v)) and float(v) > 0):
            raise ParameterError(f"{name} must be a positive number.")
    if not 0 <= float(jitter) < 1:
        raise ParameterError("jitter (relative standard deviation of the intervals) must be in [0, 1).")
    geoms = as_geoseries(data)
    if not isinstance(data, gpd.GeoDataFrame):
        raise GeoprivError("sample_queries needs a GeoDataFrame with trajectory id and time columns.")
    xy = point_xy(geoms)
    codes, uniques, secs, order = trace_layout(data, geoms, traj_id, time)
    gen = make_rng(rng).generator
    c = codes[order]
    numeric = time is not None and _is_numeric_time(data[time])
    to_seconds = _time_unit_seconds(time_unit, numeric, time)
    t = secs[order] * to_seconds
    if numeric and time_unit is None:
        _check_seconds_plausible(t, c, time)
    # relative to the earliest fix: the search keys below stay exact for epoch times
    t_base = float(t.min())
    t = t - t_base
    lon, lat, geod = _geodetic_xy(geoms, xy[order])
    n = len(t)
    n_tr = len(uniques)
    lengths = np.bincount(c, minlength=n_tr)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    ends = starts + lengths

    # speed at each fix: displacement over a window centred on it, within the trajectory
    half = speed_window / 2.0
    key = c.astype(float) * 1e12 + t  # trajectories never overlap in this key
    lo = np.searchsorted(key, key - half, side="left")
    hi = np.searchsorted(key, key + half, side="right") - 1
    lo = np.maximum(lo, starts[c])
    hi = np.minimum(hi, ends[c] - 1)
    single = hi <= lo  # no other fix in the window: use the neighbours
    lo = np.where(single, np.maximum(np.arange(n) - 1, starts[c]), lo)
    hi = np.where(single, np.minimum(np.arange(n) + 1, ends[c] - 1), hi)
    _, _, dist = geod.inv(lon[lo], lat[lo], lon[hi], lat[hi])
    dt = t[hi] - t[lo]
    speed = np.where(dt > 0, np.asarray(dist) / np.where(dt > 0, dt, 1.0), np.where(hi == lo, 0.0, np.inf))
    slow = speed < max_speed

    # query times: a renewal process per trajectory, vectorised with a per-trajectory cumulative sum
    t0 = t[starts]
    dur = t[ends - 1] - t0
    # jittered intervals are clipped to at least half their nominal length, so this many cover dur
    per = np.ceil(dur / (0.5 * short)).astype(np.int64) + 1
    if per.sum() > _MAX_CANDIDATES:
        raise GeoprivError(
            f"The trajectories last so long in seconds that sampling would draw more than {_MAX_CANDIDATES:,} query "
            f"times (a query every {short:g} s). Check the unit of the time column {time!r}: numbers are read as "
            "seconds unless a time unit says otherwise; or split the trajectories.",
            fix=Fix("time_unit", python="E.g. time_unit='ms'.", cli="E.g. --time-unit ms.", qgis=""),
        )
    gaps = np.where(gen.random(per.sum()) < p, jump, short)
    if jitter > 0:
        gaps = gaps * np.maximum(1.0 + jitter * gen.standard_normal(len(gaps)), 0.5)
    owner = np.repeat(np.arange(n_tr), per)
    first = np.concatenate([[0], np.cumsum(per)[:-1]])
    before = np.cumsum(gaps) - gaps  # exclusive cumulative sum over all trajectories
    qt = t0[owner] + before - np.repeat(before[first], per)  # first query at the first fix
    inside = qt <= t0[owner] + dur[owner]
    qt, owner = qt[inside], owner[inside]
    # the fix at or before each query time
    qkey = owner.astype(float) * 1e12 + qt
    fix = np.searchsorted(key, qkey, side="right") - 1
    keep = (fix >= starts[owner]) & slow[np.maximum(fix, 0)] & (qt - t[np.maximum(fix, 0)] <= max_gap)
    fix, qt = fix[keep], qt[keep]

    src = order[fix]
    out = data.iloc[src].copy()
    out.index = pd.RangeIndex(len(out))
    out["source_row"] = data.index[src]
    tcol = data[time]
    if numeric:
        out[time] = (qt + t_base) / to_seconds  # in the input's unit
    elif pd.api.types.is_timedelta64_dtype(tcol):
        out[time] = pd.to_timedelta(np.round((qt + t_base) * 1e6).astype(np.int64), unit="us")
    else:  # _seconds made datetimes relative to the earliest: t_base is 0 here
        parsed = tcol if pd.api.types.is_datetime64_any_dtype(tcol) else pd.to_datetime(tcol, utc=True, format="mixed")
        out[time] = parsed.min() + pd.to_timedelta(np.round(qt * 1e6).astype(np.int64), unit="us")
    return out


# ---------------------------------------------------------------------------- ledgers from columns
def ledger_rows(part, traj_id):
    """Per-row indicators of the ledger (summed per trace): the key, counts by status, epsilon spent."""
    status = part["status"].astype(object).to_numpy()
    released = status != "exhausted"
    if traj_id is None:
        key = np.zeros(len(part), dtype=np.int64)
    else:  # each trace by its identity (geopriv.identity): 5 and "5" are one trace, as the release had them
        key = pd.Index(identities(part[traj_id], part.index, "trace id").canonical(), dtype=object)
        key = key.astype(np.int64) if len(key) and all(type(v) is int for v in key) else key  # noqa: E721
        key = np.asarray(key)
    return pd.DataFrame(
        {
            "key": key,
            "queries": np.ones(len(part), dtype=np.int64),
            "released": released.astype(np.int64),
            "noise": (status == "noise").astype(np.int64),
            "predicted": (status == "predicted").astype(np.int64),
            "skipped": (status == "skipped").astype(np.int64),
            "exhausted": (~released).astype(np.int64),
            "spent": part["epsilon_spent"].to_numpy(dtype=float),
        },
        index=pd.RangeIndex(len(part)),
    )


def finish_ledger(sums, record):
    """The ledger's columns from the per-trace sums (as geopriv.trace_ledger has them)."""
    traj_id = record.get("traj_id")
    budget = float(record["epsilon_per_m"])
    sums = sums.iloc[canonical_order(list(sums.index))]  # integers, then texts: as the release orders its traces
    n = len(sums)
    released = sums["released"].to_numpy(dtype=np.int64)
    # the accountant's running sum never exceeds the budget; summed again here, rounding could pass it by an ulp
    spent = np.minimum(sums["spent"].to_numpy(dtype=float), budget)
    independent = record.get("method") == "independent"
    easy = released - sums["noise"].to_numpy(dtype=np.int64)
    out = pd.DataFrame(
        {
            "queries": sums["queries"].to_numpy(dtype=np.int64),
            "released": released,
            "noise": sums["noise"].to_numpy(dtype=np.int64),
            "predicted": sums["predicted"].to_numpy(dtype=np.int64),
            "skipped": sums["skipped"].to_numpy(dtype=np.int64),
            "exhausted": sums["exhausted"].to_numpy(dtype=np.int64),
            # which noise rows ran a (failed) test, and the test/noise split, are not in the output's columns
            "tests": pd.array(np.zeros(n, dtype=np.int64) if independent else [pd.NA] * n, dtype="Int64"),
            "budget": np.full(n, budget),
            "spent": spent,
            "remaining": np.maximum(budget - spent, 0.0),
            "spent_test": np.zeros(n) if independent else np.full(n, np.nan),
            "spent_noise": spent.copy() if independent else np.full(n, np.nan),
            "prediction_rate": np.divide(easy, released, out=np.zeros(n), where=released > 0),
            "budget_rate": spent / (budget * np.maximum(released, 1)),
        },
        index=pd.Index(sums.index if traj_id is not None else [None] * n, name=traj_id or "trace"),
    )
    return out


def trace_record(obj):
    """The provenance record of a trace release (refused when ``obj`` carries none)."""
    rec = (getattr(obj, "attrs", None) or {}).get("geopriv") or {}
    if not str(rec.get("mechanism", "")).endswith("_trace"):
        raise GeoprivError(
            "This object carries no trace release record: it is not (or no longer) a result of sanitize_traces. "
            "The record lives in result.attrs['geopriv']; some operations drop attrs, so read the ledger right after "
            "releasing."
        )
    return rec


def ledger_from_columns(result) -> pd.DataFrame:
    """The per-trace ledger of a computed release, from its columns (trace id, status, epsilon_spent).

    Counts by status, ``budget`` (the record's ``epsilon_per_m``), ``spent`` (sum of
    ``epsilon_spent``: the accountant's Lemma 1 sum, up to rounding, capped at the budget),
    ``remaining``, ``prediction_rate`` and ``budget_rate`` are exact.  ``tests``,
    ``spent_test`` and ``spent_noise`` are exact for ``method="independent"`` (no tests) and
    missing (NA/NaN) for the predictive mechanism: whether a noisy row ran a failed test first,
    and how its ``epsilon_spent`` splits between test and noise, is not in the output.
    """
    rec = trace_record(result)
    traj_id = rec.get("traj_id")
    rows = ledger_rows(result, traj_id)
    sums = rows.groupby("key", sort=False).sum()
    return finish_ledger(sums, rec)
