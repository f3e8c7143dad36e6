"""The trace release kind: everything public about a trace release, fixed before any trace is looked at."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, ClassVar

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from ..accounting import BudgetAccountant
from ..budget import PER_METRE
from ..identity import identities
from ..keys import rows_of
from ..mechanisms.predictive import EXHAUSTED, NOISE, STATUS_NAMES, Traces
from ..provenance import attach, make_record
from ..rng import make_rng

from ..exceptions import Fix, GeoprivError, ParameterError, format_labels
from ..frame import (
    DEFAULT_MAX_DISTORTION,
    PublicFrame,
    check_grid,
    check_noise_above_precision,
    public_frame,
    auto_grid_too_fine,
    public_lattice,
    truncate_and_snap,
)
from ..precision import check_noise_scale
from .base import Executes
from .charging import budget_fields, reserve
from .common import answered, check_release_input, declared_diameter


@dataclasses.dataclass(frozen=True)
class TracePlan(Executes):
    """Everything public about a trace release, fixed before any trace is looked at.

    Built by :func:`plan_traces` from the CRS and the public parameters only: the mechanism
    and its budget manager, the planar frame (traces need a plane), the lattice and its
    finite-precision text, and the provenance fields.  The in-memory
    :func:`geopriv.sanitize_traces` and the lazy one (:mod:`geopriv.distributed.traces`, which
    runs this plan's :meth:`run_memory` per bucket) share it: one source for the record.
    ``plan.run(data, store=, rng=, progress=)`` releases ``data`` (see :mod:`geopriv.release.base`).
    """

    kind: ClassVar[str] = "traces"

    mechanism: Any  # a trace mechanism (run)
    manager: object
    method: str
    epsilon_per_m: float
    level: object
    radius: object
    frame: PublicFrame
    lattice: object
    bounds: object
    keep: tuple
    traj_id: object
    time: object
    on_exhausted: str
    skip_speed: object
    stale_after: object
    person: object = None  # the column of person ids a budget store charges (default: the trace id)
    predictor: object = "parrot"  # as given (the mechanism holds it resolved)

    def run_memory(self, data, *, store=None, rng=None, progress=None):
        """Release ``data`` (a GeoDataFrame of points, or a GeoSeries: one trace in row order) under this plan.

        Checks every row against the plan, charges each trace's person its worst case in
        ``store`` before any noise (settled afterwards to what the public ledger says was spent),
        runs the mechanism on a stream bound to the data and the plan, and attaches the record.
        """
        rows = trace_rows(self, data)
        source = make_rng(rng)
        reservation, worst = self.reserve(rows, store)
        with reservation:
            if store is not None:
                reservation.start()
            run, accountant = self.draw(rows, source, progress)
            if store is not None:  # settle: what the public ledger says each trace spent, plus its draws' increments
                draws = np.bincount(rows.codes[rows.order][run.status == NOISE], minlength=len(rows.uniques))
                used = np.minimum(accountant.spent + accountant.reserved + draws * self.draw_increment(), worst)
                reservation.commit(
                    np.minimum(
                        np.bincount(reservation.persons.inverse, weights=used, minlength=len(reservation.persons)),
                        reservation.amounts,
                    )
                )
        return self.assemble(rows, run, store, source.seeded)

    def reserve(self, rows, store):
        """Each trace's worst case, reserved for its person before any noise: (reservation, worst per trace)."""
        worst = self.epsilon_per_m + rows.lengths * self.draw_increment()
        if store is None:
            return contextlib.nullcontext(), worst
        charged = self.fields()
        charged.update(budget_fields(store, PER_METRE, None))
        reservation = reserve(
            store,
            trace_persons(rows.data, self.person, rows.codes, rows.uniques, self.traj_id),
            worst,
            unit=PER_METRE,
            kind="sanitize_traces",
            fields=charged,
            rows=len(rows.xy),
            spend=False,
        )
        return reservation, worst

    def draw(self, rows, source, progress):
        """The mechanism's run over the traces in their public order: (run, accountant)."""
        frame, unit, order = self.frame, self.unit, rows.order
        # "conservative metres": working units / scale_max, so a distance here is <= the ground distance
        # (see geopriv.frame), and epsilon per metre here is perturb's epsilon per working unit.
        work = frame.to_work(rows.xy[order]) / unit
        traces = Traces.from_lengths(work, rows.secs[order], rows.lengths)
        accountant = BudgetAccountant(np.full(len(rows.uniques), self.epsilon_per_m), labels=list(rows.uniques))

        def released_in_work(noisy):
            # what the predictor and the tests may see: the released value, not its unrounded bits
            return frame.to_work(self.to_release(noisy)) / unit

        answered_rows = answered(rows.data, rows.geoms, self.traj_id, self.time, *self.keep, self.person)
        # a seed replays only for the same data and parameters (keyed per-row streams are bound already); the
        # rows in the release's own order (trace, time, then input position for ties): a permutation that the
        # release undoes digests alike; one that swaps tied rows draws anew
        bound = source.bind(
            *(x.iloc[order] for x in answered_rows), params=[repr(self.person), self.fields()], purpose="traces"
        )
        run = self.mechanism.run(
            traces,
            self.epsilon_per_m,
            rows_of(bound.generator, order),  # per-row keyed streams (lazy releases) follow their rows
            accountant,
            progress=progress,
            **({"postprocess": released_in_work} if self.method == "predictive" and self.lattice is not None else {}),
        )
        return run, accountant

    def assemble(self, rows, run, store, seeded):
        """The released rows back in the input order and CRS, with the three columns and the record."""
        data, geoms, order = rows.data, rows.geoms, rows.order
        released_sorted, status_sorted = run.reported, run.status
        if self.on_exhausted == "last":
            released_sorted = fill_last(released_sorted, status_sorted, rows.lengths)
        ok = np.isfinite(released_sorted[:, 0])
        out_xy = np.full_like(released_sorted, np.nan)
        out_xy[ok] = self.to_release(released_sorted[ok])
        inv = np.empty_like(order)
        inv[order] = np.arange(len(order))
        out_xy, status, ok = out_xy[inv], status_sorted[inv], ok[inv]

        pts = np.full(len(out_xy), None, dtype=object)
        pts[ok] = shapely.points(out_xy[ok])
        new_geoms = gpd.GeoSeries(pts, index=geoms.index, crs=geoms.crs, name=geoms.name)
        if isinstance(data, gpd.GeoDataFrame):
            out = data.copy()
            out[geoms.name] = new_geoms
        else:  # a GeoSeries: one trace (traj_id=None) in row order (time=None); columns need a frame
            out = gpd.GeoDataFrame(geometry=new_geoms.rename(geoms.name or "geometry"))
        out["predicted"] = (status != NOISE) & (status != EXHAUSTED)
        out["status"] = pd.Series(np.asarray(STATUS_NAMES, dtype=object)[status], index=out.index).astype(
            "str" if PANDAS3 else object
        )
        out["epsilon_spent"] = run.epsilon[inv]

        ledger = ledger_dict(run, rows.uniques, self.traj_id)
        fields = self.fields(traces=len(rows.uniques), n_released=int((status != EXHAUSTED).sum()), ledger=ledger)
        if store is not None:
            fields.update(budget_fields(store, PER_METRE, None))
        return attach(out, data, make_record(fields, seeded=seeded, n=len(out)))

    @property
    def unit(self) -> float:
        """Working units per 'conservative metre' (distances there are <= ground distances)."""
        return self.frame.scale_max

    def to_release(self, work_m):
        """Work metres -> released coordinates in the input CRS: truncated and snapped (a fresh array)."""
        return truncate_and_snap(self.frame.from_work(work_m * self.unit), self.frame.area, self.lattice)

    def draw_increment(self) -> float:
        """How much each noisy draw's epsilon per metre may grow by snapping to the lattice (0 when continuous)."""
        from ..precision import ANGLE_RESOLUTION, discretisation_epsilon

        if self.lattice is None:
            return 0.0
        eps = self.epsilon_per_m
        return max(
            0.0,
            float(
                discretisation_epsilon(eps, self.lattice.min_cell_m, self.frame.r_max_metres(), ANGLE_RESOLUTION) - eps
            ),
        )

    def finite_precision_text(self) -> str:
        from ..precision import ANGLE_RESOLUTION, discretisation_epsilon

        if self.lattice is None:
            return "none: continuous float64 output (explicitly requested), no finite-precision bound"
        r_max = self.frame.r_max_metres()
        eps = self.epsilon_per_m
        per_draw = discretisation_epsilon(eps, self.lattice.min_cell_m, r_max, ANGLE_RESOLUTION) - eps
        return (
            f"snapped to a public {self.lattice.grid_m:g} m lattice; each noisy draw's epsilon grows by at most "
            f"{per_draw:.3g} per metre (Andres et al. 2013 Thm 4.1, r_max {r_max:.4g} m)"
        )

    def fields(self, *, traces=None, n_released=None, ledger=None) -> dict:
        """The provenance fields; ``traces``, ``n_released`` and ``ledger`` are None for a lazy release."""
        from ..mechanisms.predictive import FixedRate, FixedUtility

        mgr = self.manager
        fields = dict(
            mechanism=f"{self.method}_trace",
            definition="epsilon * d_inf per trace (Chatzikokolakis et al. 2014, Thm 3.1); epsilon is each trace's total",
            epsilon_per_m=self.epsilon_per_m,
            level=None if self.level is None else float(self.level),
            radius_m=None if self.radius is None else float(self.radius),
            method=self.method,
            budget="fixed_rate" if isinstance(mgr, FixedRate) else "fixed_utility",
            budget_config={"eta": float(mgr.eta), "gamma": float(mgr.gamma), "delta": float(mgr.delta)},
            rate=float(mgr.rate) if isinstance(mgr, FixedRate) else None,
            accuracy_m=float(mgr.accuracy) if isinstance(mgr, FixedUtility) else None,
            skip_speed_mps=None if self.skip_speed is None else float(self.skip_speed),
            stale_after_s=None if self.stale_after is None else float(self.stale_after),
            predictor=None if self.method == "independent" else self.mechanism.predictor.name,
            on_exhausted=self.on_exhausted,
            traces=traces,
            n_released=n_released,
            traj_id=self.traj_id,
            time=self.time,
            ledger=ledger,
            finite_precision=self.finite_precision_text(),
            declared_bounds=None if self.bounds is None else [float(v) for v in self.frame.area],
            kept_columns=sorted(str(k) for k in self.keep),
            **self.frame.describe(),
        )
        if self.lattice is not None:
            fields.update(self.lattice.describe())
        return fields


_TIME_FIX = Fix(
    "time_column",
    python="Pass time='<column>'.",
    cli="Give the time stamp column with --time COLUMN.",
    qgis="Choose the 'Time field'.",
)


def plan_traces(
    crs,
    epsilon=None,
    *,
    level=None,
    radius=None,
    method="predictive",
    budget="fixed_rate",
    rate=None,
    accuracy=None,
    skip_speed=None,
    stale_after=None,
    predictor="parrot",
    on_exhausted="empty",
    eta: float = 0.5,
    gamma: float = 0.8,
    delta: float = 0.9,
    prediction_rate: float = 0.5,
    bounds=None,
    grid="auto",
    continuous: bool = False,
    keep=(),
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    traj_id=None,
    time=None,
    person=None,
) -> TracePlan:
    """The public part of a trace release (no data involved): parameters checked, frame and lattice fixed."""
    from ..mechanisms.predictive import IndependentMechanism, PredictiveMechanism, TimeSkip, budget_manager
    from ..precision import resolve_epsilon

    if method not in ("predictive", "independent"):
        raise ParameterError(f"method must be 'predictive' or 'independent', got {method!r}.")
    if on_exhausted not in ("empty", "last"):
        raise ParameterError(
            f"on_exhausted must be 'empty' (no geometry) or 'last' (last released point), got {on_exhausted!r}."
        )
    eps = resolve_epsilon(epsilon, level, radius)
    manager = budget_manager(budget, rate, accuracy, eta, gamma, delta, prediction_rate)
    if method == "independent":
        if skip_speed is not None or stale_after is not None or predictor not in ("parrot", None):
            raise ParameterError(
                "The time skip rule, the staleness rule and the predictor apply to the predictive method only.",
                fix=Fix(
                    "predictive_only",
                    python="Leave skip_speed, stale_after and predictor out with method='independent'.",
                    cli="Leave --skip-speed, --stale-after and --predictor out with --method independent.",
                    qgis="Leave them empty with 'Independent planar Laplace noise'.",
                ),
            )
        mech = IndependentMechanism(manager)
    else:
        if skip_speed is not None and time is None:
            raise ParameterError("The time skip rule (skip_speed) needs time stamps.", fix=_TIME_FIX)
        if stale_after is not None and time is None:
            raise ParameterError("The staleness rule (stale_after) needs time stamps.", fix=_TIME_FIX)
        mech = PredictiveMechanism(
            manager,
            predictor=predictor,
            skip=None if skip_speed is None else TimeSkip(skip_speed),
            stale_after=stale_after,
        )
    frame = public_frame(crs, bounds=bounds, max_distortion=max_distortion, planar_only=True)
    lattice = None
    if continuous:
        check_noise_above_precision(eps, frame)  # no draw spends more than the trace's total
    else:
        too_fine = auto_grid_too_fine(eps) if isinstance(grid, str) and grid == "auto" else None  # no grid given
        lattice = public_lattice(frame, check_grid(grid, eps), too_fine=too_fine)
    check_noise_scale(
        eps,
        grid_m=None if lattice is None else lattice.grid_m,
        area_m=declared_diameter(crs, bounds, None),
        what="each trace's whole budget",
    )
    return TracePlan(
        mech,
        manager,
        method,
        eps,
        level,
        radius,
        frame,
        lattice,
        bounds,
        tuple(keep or ()),
        traj_id,
        time,
        on_exhausted,
        skip_speed,
        stale_after,
        person,
        predictor,
    )


@dataclasses.dataclass(frozen=True)
class TraceRows:
    """The checked input of a trace release: its rows, their traces and the public order (trace, time, position)."""

    data: Any
    geoms: Any
    xy: np.ndarray
    codes: np.ndarray
    uniques: pd.Index
    secs: np.ndarray
    order: np.ndarray
    lengths: np.ndarray


def check_trace_input(data, traj_id, time, keep, bounds):
    """The points, their CRS, attributes and row order, and the output columns free: (GeoSeries, xy)."""
    # the trace id and time stamps are public and order the release anyway; rows of one trace
    # given without them are in query order by definition
    cols = data.columns if isinstance(data, gpd.GeoDataFrame) else ()
    order_cols = tuple(c for c in (traj_id, time) if c is not None and c in cols)
    keep_all = tuple(keep or ()) + (() if order_cols else ("<row order>",))
    geoms, xy = check_release_input(data, keep_all, bounds, None, allow_order=order_cols)
    check_output_columns(data)
    return geoms, xy


def trace_rows(plan: TracePlan, data) -> TraceRows:
    """Every row checked against ``plan`` (points, area, attributes, ids, time stamps): the release's input."""
    traj_id, time = plan.traj_id, plan.time
    geoms, xy = check_trace_input(data, traj_id, time, plan.keep, plan.bounds)
    codes, uniques, secs, order = trace_layout(data, geoms, traj_id, time)
    plan.frame.check_inside(xy, geoms.index)
    lengths = np.bincount(codes, minlength=len(uniques)).astype(np.int64)
    return TraceRows(data, geoms, xy, codes, uniques, secs, order, lengths)


PANDAS3 = int(pd.__version__.split(".")[0]) >= 3

#: Columns :func:`sanitize_traces` adds to its result.
OUTPUT_COLUMNS = ("predicted", "status", "epsilon_spent")


# ---------------------------------------------------------------------------- input helpers
#: a trace id column that is missing
TRAJ_ID_FIX = Fix(
    "traj_id_column",
    python="Name the column that says which trace (user, trajectory) each row belongs to, or pass traj_id=None if "
    "all rows are one trace.",
    cli="Name the column that says which trace (user, trajectory) each row belongs to with --traj-id COLUMN, or give "
    "--traj-id '' if all rows are one trace.",
    qgis="Choose the 'Trace id field' that says which trace (user, trajectory) each point belongs to, or leave it "
    "empty if all points are one trace.",
)
#: a time column that is missing
TIME_FIX = Fix(
    "time_column",
    python="Name the column of time stamps (datetimes or seconds), or pass time=None if the rows are already in query "
    "order within each trace (then skip_speed cannot be used).",
    cli="Name the column of time stamps (datetimes or seconds) with --time COLUMN, or give --time '' if the rows are "
    "already in query order within each trace (then --skip-speed cannot be used).",
    qgis="Choose the 'Time field', or leave it empty if the features are already in query order within each trace.",
)


def column_of(data, name, what, hint):
    """The column ``name`` of ``data``, or a GeoprivError naming the columns there are (and ``hint``, a str or Fix)."""
    if name not in data.columns:
        cols = [c for c in data.columns if c != data.geometry.name]
        problem = f"The {what} column {name!r} is not in the data (columns: {cols})."
        if isinstance(hint, Fix):
            raise GeoprivError(problem, fix=hint)
        raise GeoprivError(f"{problem} {hint}")
    return data[name]


def time_seconds(col: pd.Series, what: str = "time") -> np.ndarray:
    """Time stamps as float seconds (relative to the earliest); NaT/NaN named by row label."""
    s = col
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        secs = s.to_numpy(dtype=float, na_value=np.nan)
    elif pd.api.types.is_timedelta64_dtype(s):
        secs = (s / pd.Timedelta(seconds=1)).to_numpy(dtype=float, na_value=np.nan)
    else:
        if not (pd.api.types.is_datetime64_any_dtype(s) or isinstance(s.dtype, pd.DatetimeTZDtype)):
            try:
                s = pd.to_datetime(s, utc=True, format="mixed")
            except (ValueError, TypeError, OverflowError):
                # never echo the parser's message: it quotes the offending cell, which may be a location
                parsed = pd.to_datetime(s, utc=True, format="mixed", errors="coerce")
                bad_rows = (parsed.isna() & s.notna()).to_numpy()
                raise GeoprivError(
                    f"{int(bad_rows.sum())} row(s) of the {what} column {col.name!r} cannot be read as time stamps: "
                    f"labels {format_labels(col.index[bad_rows])}. Give datetimes, ISO 8601 text, or numbers of seconds."
                ) from None
        secs = ((s - s.min()) / pd.Timedelta(seconds=1)).to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(secs)
    if bad.any():
        raise GeoprivError(
            f"{int(bad.sum())} row(s) have no valid {what} in column {col.name!r}: labels "
            f"{format_labels(col.index[bad])}. Fill or drop them: time stamps order each trace and drive the skip rule."
        )
    return secs


def trace_layout(data, geoms, traj_id, time):
    """Trace codes, time in seconds, and the stable order (trace, time, input position)."""
    n = len(geoms)
    if traj_id is None:
        codes = np.zeros(n, dtype=np.int64)
        uniques = pd.Index([None])
    else:
        if not isinstance(data, gpd.GeoDataFrame):
            raise GeoprivError("traj_id and time name columns: pass a GeoDataFrame, not a GeoSeries.")
        ids = column_of(data, traj_id, "trace id", TRAJ_ID_FIX)
        if traj_id == data.geometry.name or isinstance(ids.dtype, gpd.array.GeometryDtype):
            raise GeoprivError(
                f"The trace id column {traj_id!r} is a geometry column: every location would become its own trace id, "
                "published in the ledger.",
                fix=TRAJ_ID_FIX,
            )
        from ..attributes import find_location_columns

        if find_location_columns(data[[traj_id, data.geometry.name]].set_geometry(data.geometry.name)):
            raise GeoprivError(
                f"The trace id column {traj_id!r} looks like locations (coordinates, WKT, ...); trace ids are "
                "published with the release and in its ledger.",
                fix=Fix(
                    "opaque_ids",
                    python="Use an opaque id (e.g. pd.factorize(...)[0]).",
                    cli="Use a column of opaque ids (numbers or names that say nothing about places).",
                    qgis="Use a field of opaque ids (numbers or names that say nothing about places).",
                ),
            )
        missing = ids.isna().to_numpy()
        if missing.any():
            raise GeoprivError(
                f"{int(missing.sum())} row(s) have no trace id in {traj_id!r}: labels {format_labels(ids.index[missing])}. "
                "Fill or drop them: every query belongs to one trace, which has its own budget."
            )
        # one rule for who is who (geopriv.identity): 5 and "5" are one trace, charged and released as one; the
        # traces in canonical order, a function of the ids only (the release cannot depend on the row order)
        persons, codes = identities(ids, ids.index, "trace id").sorted_persons()
        uniques = pd.Index(persons)
    if time is None:
        secs = np.zeros(n)
    else:
        if not isinstance(data, gpd.GeoDataFrame):
            raise GeoprivError("traj_id and time name columns: pass a GeoDataFrame, not a GeoSeries.")
        secs = time_seconds(column_of(data, time, "time", TIME_FIX))
    order = np.lexsort((np.arange(n), secs, codes))  # stable: ties in time keep the input order
    return codes, uniques, secs, order


def check_output_columns(data):
    """Refuse data that already has a column sanitize_traces adds (``OUTPUT_COLUMNS``)."""
    if isinstance(data, gpd.GeoDataFrame):
        clash = [c for c in OUTPUT_COLUMNS if c in data.columns]
        if clash:
            raise GeoprivError(
                f"The data already has column(s) {clash} that the trace release adds.",
                fix=Fix(
                    "rename_columns",
                    python=f"Rename them first, e.g. gdf.rename(columns={{{clash[0]!r}: "
                    f"{clash[0] + '_in'!r}}}), or drop them.",
                    cli="Rename them in the file, or leave them out with "
                    + " ".join(f"--drop {c}" for c in clash)
                    + ".",
                    qgis="Rename them ('Rename field') or remove them ('Drop field(s)') first.",
                ),
            )


def trace_persons(data, person, codes, uniques, traj_id):
    """The person of each trace (in ``uniques`` order): the trace id, or the ``person`` column, constant per trace."""
    from ..budget import PERSON_FIX

    if person is None:
        if traj_id is None:
            raise GeoprivError(
                "A budget store charges persons: a single trace (traj_id=None) needs person=.", fix=PERSON_FIX
            )
        return pd.Index(uniques)
    col = column_of(data, person, "person id", PERSON_FIX)
    first = np.full(len(uniques), -1, np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]  # each trace's first row
    ids = col.iloc[first]
    keys = identities(col, col.index, "person id").keys  # one rule for who is who: 5 and "5" are one person
    same = keys == keys[first][codes]
    if not same.all():
        bad = pd.Index(uniques)[np.unique(codes[~same])]
        raise GeoprivError(
            f"The person id column {person!r} changes within {len(bad)} trace(s): trace ids "
            f"{format_labels(bad)}. A trace belongs to one person.",
            fix=PERSON_FIX,
        )
    return pd.Index(ids.to_numpy(object) if ids.dtype == object else ids.to_numpy())


def fill_last(reported, status, lengths):
    """Exhausted rows get the trace's last released point (NaN if none): forward fill within traces."""
    out = reported.copy()
    n = len(out)
    idx = np.where(status != EXHAUSTED, np.arange(n), -1)
    np.maximum.accumulate(idx, out=idx)
    starts = np.repeat(np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    valid = idx >= starts
    out[valid] = reported[idx[valid]]
    return out


def ledger_dict(run, uniques, traj_id) -> dict:
    """Per-trace ledger as a dict of plain lists (safe in DataFrame.attrs: copies and compares cleanly)."""
    pt = run.per_trace()
    released = pt["released"]
    rate = np.divide(pt["spent"], pt["budget"] * np.maximum(released, 1))
    ids = [None if v is None else (v.item() if hasattr(v, "item") else v) for v in list(uniques)]
    return {
        "trace": ids,
        "trace_column": traj_id,
        "queries": pt["queries"].tolist(),
        "released": released.tolist(),
        "noise": pt["noise"].tolist(),
        "predicted": pt["predicted"].tolist(),
        "skipped": pt["skipped"].tolist(),
        "exhausted": pt["exhausted"].tolist(),
        "tests": pt["tests"].tolist(),
        "budget": pt["budget"].tolist(),
        "spent": pt["spent"].tolist(),
        "remaining": pt["remaining"].tolist(),
        "spent_test": pt["spent_test"].tolist(),
        "spent_noise": pt["spent_noise"].tolist(),
        "prediction_rate": pt["prediction_rate"].tolist(),
        "budget_rate": rate.tolist(),
    }
