"""``sanitize_traces`` on dask-geopandas: whole traces in public buckets, one keyed stream per bucket.

The predictive mechanism releases a trace step by step, each step depending on what the trace
released before, so a trace cannot be split across partitions.  The lazy release here:

1. **Buckets.**  Every trace goes to one of :data:`BUCKETS` public buckets: the stable 64-bit
   hash of its id (``pandas.util.hash_pandas_object(ids, index=False)``) modulo ``BUCKETS``.
   The bucket depends on the trace id only, never on the partitioning.
2. **Shuffle.**  The frame is shuffled on the bucket (``ddf.shuffle(on=...)``): every row of a
   bucket, hence every row of a trace, ends up in one partition.  A shuffle is a full data
   exchange (every row may move; on a cluster it goes over the network).  Unless dask's
   ``dataframe.shuffle.method`` is configured, or a distributed client is active (dask then
   picks its ``p2p`` shuffle, which keeps its shards on the workers' local disks), the in-memory
   ``"tasks"`` shuffle is used: dask's local default, ``"disk"``, would write the true locations
   to temporary files.
3. **One keyed stream per trace.**  Inside a partition, each bucket's rows are sorted canonically
   (by trace-id hash, trace id, time stamp, then index label: an order that does not depend on
   the partitioning) and released by the in-memory :func:`geopriv.sanitize_traces` with per-row
   streams keyed by (root, the trace's typed id, a digest of the trace's whole content, the
   row's position in the trace) (:func:`trace_streams`, :mod:`geopriv.keys`), where ``root`` is
   the secret drawn once when the lazy release is built.  So a trace's noise depends only on
   the root and the trace itself: identical for any number of partitions and any scheduler,
   a recomputation on unchanged data replays the identical release, a changed trace is a new
   release of that trace only, and adding another user's trace to its bucket changes nothing.

Budgets are per trace, reserved and spent by the mechanism inside the one call that holds the
trace (its bucket's): each trace is charged once per computation of its bucket, never per
partition.  A persistent budget store (``budget_store=``) is charged by the driver, once, when
the release is built: each trace's worst case in full, to the trace's person
(:mod:`geopriv.distributed.budget`); the buckets' in-memory calls never see the store.  Because the root is fixed when the graph is built, a recomputation (a second
``.compute()``, a lost worker, a ledger computed separately) replays the identical release:
the same points from the same noise, so no new privacy loss; a *new* release is a new call.

Output: the input's columns plus ``predicted``, ``status`` and ``epsilon_spent`` (``meta=`` is
always passed), rows grouped by bucket in the canonical order above (not the input order;
unknown divisions), the same index labels.  Every partition carries the same provenance record,
built when the release is built from public parameters only (``n``, ``traces``, ``n_released``
and ``ledger`` are None: the output shows them), so pandas keeps it when the partitions are
concatenated.  The per-trace ledger of the whole release is :func:`trace_ledger_dask`
(``geopriv.trace_ledger(result)`` dispatches to it), computed from the output's columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..exceptions import ParameterError
from .forms import lazy_form

__all__ = ["sanitize_traces_dask", "trace_ledger_dask", "release_buckets", "BUCKETS"]

#: Number of public buckets traces are grouped in (trace-id hash modulo BUCKETS).  A public
#: constant: changing it changes which traces share a random stream, so seeded releases differ.
BUCKETS = 1024

#: the key the input partitions' digests are bound to (geopriv.keys)
BIND_PURPOSE = "traces-bind"

#: the temporary column that carries each row's bucket through the shuffle
_BUCKET = "__geopriv_bucket__"


# ---------------------------------------------------------------------------- helpers
def trace_streams(root, rows, traj_id, time):
    """Per-row keyed streams for the rows of whole traces (in canonical order, traces contiguous).

    Row ``j`` of trace ``T`` draws from a stream keyed by (root, ``"traces"``, T's typed id
    digest, a 128-bit BLAKE2b digest of T's whole content (geometries and time stamps, in
    order), j) (:mod:`geopriv.keys`): an unchanged trace replays its release (no new loss), a
    changed trace is released anew with independent noise, and no other trace's rows (another
    user's trace appended to its bucket, say) change it.
    """
    import hashlib

    import shapely

    from ..keys import identity_digests, row_streams
    from ..traces import time_seconds

    n = len(rows)
    if traj_id is None:
        ids = pd.Index(np.zeros(n, dtype=np.int64))
    else:
        ids = pd.Index(rows[traj_id])
    a, b = identity_digests(ids, "trace id", rows.index)
    starts = np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])]) if n else np.zeros(0, np.int64)
    ends = np.r_[starts[1:], n]
    geoms = rows.geometry if hasattr(rows, "geometry") else rows
    wkb = shapely.to_wkb(np.asarray(geoms.values), hex=False)
    secs = np.zeros(n) if time is None else np.asarray(time_seconds(rows[time]), dtype=np.float64)
    c0 = np.empty(n, np.uint64)
    c1 = np.empty(n, np.uint64)
    pos = np.empty(n, np.uint64)
    for s0, e0 in zip(starts, ends):
        h = hashlib.blake2b(digest_size=16, person=b"geopriv-trace")
        for w in wkb[s0:e0]:
            h.update(b"\x00" if w is None else len(w).to_bytes(4, "little") + w)
        h.update(np.ascontiguousarray(secs[s0:e0]).tobytes())
        d = h.digest()
        c0[s0:e0] = int.from_bytes(d[:8], "little")
        c1[s0:e0] = int.from_bytes(d[8:], "little")
        pos[s0:e0] = np.arange(e0 - s0, dtype=np.uint64)
    return row_streams(root, "traces", (a, b), [c0, c1, pos])


def trace_hashes(ids: pd.Series) -> np.ndarray:
    """The identity key of each trace id (:mod:`geopriv.identity`) as uint64: ``5`` and ``"5"`` share a bucket."""
    from ..identity import identities

    return identities(ids, ids.index, "trace id").keys.view(np.uint64)


def _with_bucket(part, traj_id, buckets):
    """The partition with its rows' bucket (trace-id hash modulo ``buckets``) as a new column."""
    out = part.copy()
    b = trace_hashes(part[traj_id]) % np.uint64(buckets) if len(part) else np.zeros(0, dtype=np.uint64)
    out[_BUCKET] = b.astype(np.int64)
    return out


def _shuffle_method():
    """The shuffle to use: dask's configured one, its choice on a distributed client, else in-memory tasks."""
    import dask

    configured = dask.config.get("dataframe.shuffle.method", None)
    if configured:
        return configured
    try:
        from distributed import default_client

        default_client()
        return None  # a cluster: dask picks (p2p)
    except (ImportError, ValueError):
        return "tasks"  # never the local default "disk": it writes the true locations to temporary files


def _canonical_order(gpart, traj_id, time, buckets_col) -> np.ndarray:
    """Row positions sorted by (bucket, trace-id hash, trace id, time stamp, index label): partition-independent."""
    from ..traces import time_seconds

    n = len(gpart)
    if traj_id is None:
        hashes = np.zeros(n, dtype=np.uint64)
        codes = np.zeros(n, dtype=np.int64)
    else:
        from ..identity import identities

        ids = gpart[traj_id]
        hashes = trace_hashes(ids)
        codes = identities(ids, ids.index, "trace id").sorted_persons()[1]  # the in-memory order of the traces
    secs = np.zeros(n) if time is None else time_seconds(gpart[time])
    index_keys = pd.util.hash_pandas_object(gpart.index, index=False).to_numpy(dtype=np.uint64)  # ties only
    return np.lexsort((index_keys, secs, codes, hashes, buckets_col))


def _as_geo(part, geom_name, crs, series):
    """A partition as a GeoDataFrame / GeoSeries with the release's CRS (a shuffle may hand a plain DataFrame)."""
    import geopandas as gpd

    if series:
        return part if isinstance(part, gpd.GeoSeries) else gpd.GeoSeries(part, crs=crs)
    if isinstance(part, gpd.GeoDataFrame) and part.geometry.name == geom_name and part.crs is not None:
        return part
    return gpd.GeoDataFrame(part, geometry=geom_name, crs=crs)


def release_buckets(part, *, root, attrs, out_meta, geom_name, crs, series, ordered, plan):
    """One partition's release: canonical order, then the in-memory sanitize_traces per bucket, keyed stream each.

    ``plan`` is the release's :class:`~geopriv.release.TracePlan` (each bucket is its
    in-memory run, with no store: the driver charged at build).  ``ordered``: one trace in row order (``traj_id`` and ``time``
    None): no sort, bucket 0.
    """
    if len(part) == 0:
        out = out_meta.copy()
        out.attrs = dict(attrs)
        return out
    traj_id, time = plan.traj_id, plan.time
    buckets = (
        part[_BUCKET].to_numpy(dtype=np.int64)
        if (not series and _BUCKET in part.columns)
        else np.zeros(len(part), dtype=np.int64)
    )
    if not series and _BUCKET in part.columns:
        part = part.drop(columns=[_BUCKET])
    gpart = _as_geo(part, geom_name, crs, series)
    if not ordered:
        order = _canonical_order(gpart, traj_id, time, buckets)
        gpart = gpart.iloc[order]
        buckets = buckets[order]
    # the rows' checks (coordinates, location-like attributes, ids, time stamps) run in sanitize_traces, on each
    # bucket: a bucket's content does not depend on the partitioning, so neither does whether they pass
    starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    ends = np.r_[starts[1:], len(buckets)]
    outs = []
    for a, b in zip(starts, ends):
        rows = gpart.iloc[a:b]
        outs.append(plan.run_memory(rows, rng=trace_streams(root, rows, traj_id, time)))
    out = outs[0] if len(outs) == 1 else pd.concat(outs)
    out.attrs = dict(attrs)
    return out


# ---------------------------------------------------------------------------- the lazy release
def _empty_output(meta, series, geom_name, crs):
    """The output schema: the input's columns plus predicted (bool), status (str), epsilon_spent (float)."""
    import geopandas as gpd

    from ..traces import PANDAS3

    if series:
        out = gpd.GeoDataFrame(
            geometry=gpd.GeoSeries(meta.iloc[:0].values, index=meta.index[:0], crs=crs, name=geom_name), crs=crs
        )
    else:
        out = meta.iloc[:0].copy()
    out["predicted"] = pd.Series([], dtype=bool, index=out.index)
    out["status"] = pd.Series([], dtype="str" if PANDAS3 else object, index=out.index)
    out["epsilon_spent"] = pd.Series([], dtype=float, index=out.index)
    return out


@lazy_form("traces.sanitize_traces")
def sanitize_traces_dask(data, *args, **kwargs):
    """Lazy :func:`geopriv.sanitize_traces` of a dask-geopandas GeoDataFrame (same parameters).

    See :mod:`geopriv.distributed.traces` for the design: traces are grouped whole into
    :data:`BUCKETS` public buckets by a hash of their id, the frame is shuffled on the bucket
    (a full data exchange), and each bucket is released by the in-memory function with one
    keyed stream per trace (root, trace id, trace content).  A seeded release is identical for
    any partitioning and scheduler; computing the result twice on the same data gives the same
    release (the secret root is drawn now, once), so a recomputation is a replay, not a new
    privacy loss; a changed trace is released anew, and only it.  The lazy result holds the
    root: keep it like the data.

    Everything that needs no data is checked now, before the graph is returned: the columns
    named (on the schema), ``method``, ``on_exhausted``, the budget (``epsilon`` or
    ``level``/``radius``), the budget manager and its parameters, the mechanism's options, the
    public frame, lattice and precision, ``keep``, ``rng``.  Checks of the rows themselves
    (coordinates inside the public area, location-like attributes and row orders, missing trace
    ids or time stamps) run when the partitions are computed, by the in-memory function on each
    bucket: a bucket's content does not depend on the partitioning, so neither does whether a
    release passes.  They see one bucket at a time, not the whole data: a sequential id or
    index that is a row number of the whole input is not one within a bucket (other buckets'
    rows leave gaps), and may then be refused as an affine function of the locations when a
    bucket's traces lie along a line; drop such columns, or keep them deliberately
    (``keep=["id", "<index>"]``) if they are not locations.

    Differences from the in-memory call:

    * ``time`` must name a column when ``traj_id`` does: the shuffle does not keep the row
      order, so "rows already in query order" cannot be honoured.  With ``traj_id=None`` (all
      rows one trace; also a dask GeoSeries) the frame is gathered into one partition in row
      order, and ``time=None`` is allowed.
    * Rows come back grouped by bucket, in the canonical order, with their index labels.
    * ``progress`` is ignored (use dask's diagnostics).
    * ``result.attrs["geopriv"]`` (the same on every partition) has ``n``, ``traces``,
      ``n_released`` and ``ledger`` None; the ledger is :func:`trace_ledger_dask`
      (``geopriv.trace_ledger(result)``).
    * ``budget_store`` (a :class:`~geopriv.BudgetStore` or its URL) and ``person`` (the column of
      person ids, constant within a trace; default: the trace id): the driver charges each
      trace's person the trace's **worst case in full** (``epsilon`` plus the lattice's
      finite-precision increment for every row of the trace, counted over all partitions),
      **once, here**, before the lazy object is returned.  In memory that worst case is reserved
      and settled afterwards to what the public ledger says each trace spent; a lazy release's
      ledger is only known when it is computed, perhaps many times or never, so nothing is given
      back.  Before the charge, the rows' checks that do not depend on the partitioning run too
      (trace and person ids, points inside the public area); a refusal, of these or of the
      budget (:class:`~geopriv.BudgetExceededError`, naming persons), is raised here with nothing
      charged and no graph.  The per-bucket checks that still run when computed (location-like
      attributes) refuse after the charge: the charge stays (never undercounted).  Computing the
      result again replays it and charges nothing more; the store never enters the graph.
    """


def run_traces_lazy(plan, data, *, store=None, rng=None, progress=None):
    """The lazy runner of a trace plan (:class:`geopriv.release.TracePlan`): see :func:`sanitize_traces_dask`.

    Three stages: the schema checked against the plan (no row read), one build-time pass over
    every partition (digests, declared bounds, and with a store the traces' persons, charged
    before the graph exists), then the graph (verify, bucket, release each bucket by the plan's
    in-memory run).
    """
    import dataclasses

    from ..provenance import attach, make_record
    from . import built, root_entropy

    traj_id, time, person = plan.traj_id, plan.time, plan.person
    meta, series, geom_name, crs = check_trace_schema(plan, data, store)
    # the one random draw at build time (a SecretRoot: the lazy result is secret); a seed is bound to the
    # whole data and the public parameters (it replays only for the same ones)
    root, drawn = root_entropy(rng, data, [repr(person), plan.fields()], "traces")
    # traces, n_released and the ledger: per bucket, the output's columns show them (trace_ledger_dask)
    fields = plan.fields()
    if store is not None:  # as in memory: the unit, no single cost per row (each trace's ledger says what it spent)
        from ..budget import PER_METRE
        from ..release import budget_fields

        fields.update(budget_fields(store, PER_METRE, None))
    record = make_record(fields, seeded=root.seeded, n=None)

    out_meta = _empty_output(meta, series, geom_name, crs)
    out_meta = attach(out_meta, meta, record)
    attrs = dict(out_meta.attrs)
    checks, charge = build_time_pass(plan, data, root, store, geom_name, crs, series)
    from ..keys import Binding

    # sealed one-way tags; in row order (one trace without ids or time stamps) each partition keeps its place
    digests = Binding(root, BIND_PURPOSE, [c[1] for c in checks], ordered=traj_id is None and time is None)
    data = data.map_partitions(verify_partition, root, traj_id, time, geom_name, crs, series, digests, meta=meta)
    ordered = traj_id is None and time is None
    if traj_id is None:  # one trace, one bucket: gather it in row order
        staged = data.repartition(npartitions=1)
    else:
        with_bucket = meta.iloc[:0].copy()
        with_bucket[_BUCKET] = pd.Series([], dtype=np.int64, index=with_bucket.index)
        staged = data.map_partitions(_with_bucket, traj_id, BUCKETS, meta=with_bucket)
        staged = staged.shuffle(on=_BUCKET, npartitions=min(data.npartitions, BUCKETS), method=_shuffle_method())
    result = staged.map_partitions(
        release_buckets,
        root=root,
        attrs=attrs,
        out_meta=out_meta.iloc[:0],
        geom_name=geom_name,
        crs=crs,
        series=series,
        ordered=ordered,
        plan=dataclasses.replace(plan, person=None),  # each bucket's run charges nothing
        meta=out_meta,
    )
    if store is not None:  # the driver's one charge, before the lazy release exists for anyone to compute
        from ..budget import PER_METRE
        from .budget import charge_at_build

        ids, worst, rows = charge
        charged = plan.fields()
        charged.update(budget_fields(store, PER_METRE, None))
        charge_at_build(store, ids, worst, unit=PER_METRE, kind="sanitize_traces", fields=charged, rows=rows)
    built(rng, drawn)  # only now does a caller's generator advance
    return result


def check_trace_schema(plan, data, store):
    """A dask frame's schema checked against a trace plan, before any row is read: (meta, series, geometry, CRS)."""
    import geopandas as gpd

    from ..exceptions import EmptyInputError, GeoprivError, MissingCRSError
    from ..points import check_coordinates
    from ..release import check_release_input
    from ..traces import check_output_columns, column_of

    traj_id, time, person, keep, bounds, predictor = (
        plan.traj_id,
        plan.time,
        plan.person,
        plan.keep,
        plan.bounds,
        plan.predictor,
    )
    meta = data._meta
    series = isinstance(meta, gpd.GeoSeries)
    if not series and not isinstance(meta, gpd.GeoDataFrame):
        raise GeoprivError("sanitize_traces on dask takes a dask_geopandas GeoDataFrame (or GeoSeries) of points.")
    if series:
        if traj_id is not None or time is not None:
            raise GeoprivError("traj_id and time name columns: pass a GeoDataFrame, not a GeoSeries.")
    else:
        if traj_id is not None and time is None:
            raise ParameterError(
                "On a dask GeoDataFrame, time=None (rows already in query order) works only with traj_id=None: the "
                "shuffle that brings each trace into one partition does not keep the row order. Pass "
                "time='<column>' (time stamps or sequence numbers)."
            )
    crs = getattr(meta, "crs", None)
    if crs is None:
        raise MissingCRSError("The dask GeoDataFrame")
    geom_name = (meta.name or "geometry") if series else meta.geometry.name

    # the schema: columns named, output columns free, keep; on the empty meta (no data is read)
    if not series:
        if _BUCKET in meta.columns:
            raise GeoprivError(f"The data has a column {_BUCKET!r}, which the distributed release uses: rename it.")
        for name, what, hint in (
            (
                traj_id,
                "trace id (traj_id)",
                "Name the column that says which trace each row "
                "belongs to, or pass traj_id=None if all rows are one trace.",
            ),
            (time, "time", "Name the column of time stamps (datetimes or seconds)."),
        ):
            if name is not None:
                column_of(meta, name, what, hint)
        if traj_id is not None and (traj_id == geom_name or isinstance(meta[traj_id].dtype, gpd.array.GeometryDtype)):
            raise GeoprivError(
                f"traj_id={traj_id!r} names a geometry column: every location would become its own trace id, "
                "published in the ledger. Name the column that identifies the user or trajectory."
            )
        check_output_columns(meta)
    order_cols = tuple(c for c in (traj_id, time) if c is not None)
    keep_all = tuple(keep or ()) + (() if order_cols else ("<row order>",))
    try:
        check_release_input(meta, keep_all, bounds, None, allow_order=order_cols)
    except EmptyInputError:
        pass
    check_coordinates(np.empty((0, 2)), crs, pd.Index([]), bounds=bounds)  # CRS kind; bounds= in degrees for metres
    from ..attributes import check_location_attributes

    check_location_attributes(meta, keep=keep_all, allow_order=order_cols)  # keep names (no rows: nothing else)

    # a vectorised custom predictor sees every trace of a bucket at once: one trace's tests, and so the
    # scale its (keyed, replayed) noise is drawn at, would depend on the others in its bucket
    if callable(predictor) and not isinstance(predictor, str) and not getattr(predictor, "per_trace", False):
        raise GeoprivError(
            "On a dask GeoDataFrame a custom vectorised predictor is refused: it sees all the traces of a bucket at "
            "once, so a trace's release would depend on other people's traces. Use predictor='parrot' or "
            "'cluster_mean', wrap a per-trace function with geopriv.mechanisms.predictive.per_trace_predictor, or "
            "release in memory."
        )
    # the parameters, the frame, the lattice and the record: the plan's (built before any data is read)
    if store is not None:  # whose traces they are: a column of the schema (checked before any data is read)
        from ..budget import PERSON_FIX

        if person is None and traj_id is None:
            raise GeoprivError(
                "A budget store charges persons: a single trace (traj_id=None) needs person=.", fix=PERSON_FIX
            )
        if person is not None:
            if series:
                raise GeoprivError("person names a column: pass a GeoDataFrame, not a GeoSeries.", fix=PERSON_FIX)
            column_of(meta, person, "person id", PERSON_FIX)
    return meta, series, geom_name, crs


def build_time_pass(plan, data, root, store, geom_name, crs, series):
    """One pass over every partition at build time: (per-partition checks, the charge or None).

    Each partition's digest (the release answers exactly these data, and refuses other rows when
    computed), declared ``bounds=`` checked against ALL the data (a bucket sees only part of it),
    and with a store each trace's person and rows, refused here (persons named) before anything
    is charged.
    """
    traj_id, time, person, bounds = plan.traj_id, plan.time, plan.person, plan.bounds
    import dask

    from ..frame import check_area_not_from_data

    rect = plan.frame.area if bounds is not None else None
    parts = data.to_delayed()
    tasks = [
        dask.delayed(trace_partition_checks, pure=True)(p, root, traj_id, time, geom_name, crs, series, rect)
        for p in parts
    ]
    if store is not None:  # the charge's traces, their persons and lengths, in the same pass over ALL partitions
        tasks += [
            dask.delayed(trace_partition_persons, pure=True)(p, traj_id, person, geom_name, crs, series, plan.frame)
            for p in parts
        ]
    computed = dask.compute(*tasks)
    checks, persons = computed[: len(parts)], computed[len(parts) :]
    if rect is not None and checks:
        check_area_not_from_data(np.logical_or.reduce([c[0] for c in checks]), "bounds")
    charge = None
    if store is not None:  # refused here (persons named) before anything is charged
        charge = trace_charges(persons, plan, traj_id, person)
    return checks, charge


def trace_partition_persons(part, traj_id, person, geom_name, crs, series, frame):
    """Build time, one input partition (with a budget store): its traces, each one's person(s) and rows.

    Runs the per-row checks that do not depend on the partitioning, before the driver charges:
    points inside the public area, trace ids present, person ids usable (named by row label).
    Returns a DataFrame with one row per (trace id, person id) pair: ``trace``, ``person``, ``rows``.
    """
    from ..budget import PERSON_FIX
    from ..exceptions import GeoprivError, format_labels
    from ..identity import identities
    from ..points import as_geoseries, point_xy
    from ..traces import column_of

    if len(part) == 0:
        return pd.DataFrame(
            {
                "trace": pd.Series([], dtype=object),
                "person": pd.Series([], dtype=object),
                "rows": pd.Series([], dtype=np.int64),
            }
        )
    gpart = _as_geo(part, geom_name, crs, series)
    frame.check_inside(point_xy(as_geoseries(gpart)), gpart.index)
    n = len(gpart)
    if traj_id is None:
        traces = pd.Series(np.zeros(n, np.int64), index=gpart.index)
    else:
        traces = gpart[traj_id]
        missing = traces.isna().to_numpy()
        if missing.any():
            raise GeoprivError(
                f"{int(missing.sum())} row(s) have no trace id in {traj_id!r}: labels "
                f"{format_labels(traces.index[missing])}. Fill or drop them: every query belongs to one trace, which "
                "has its own budget."
            )
    persons = traces if person is None else column_of(gpart, person, "person id", PERSON_FIX)
    # one rule for who is who (geopriv.identity), in every partition: 5 here and "5" there are one trace, one person;
    # unusable ids are refused by row label
    trace_ids = identities(traces, gpart.index, "trace id").canonical()
    person_ids = identities(persons, gpart.index, "person id").canonical()
    pairs = pd.DataFrame({"trace": pd.Series(trace_ids, dtype=object), "person": pd.Series(person_ids, dtype=object)})
    rows = pairs.groupby(["trace", "person"], sort=False, dropna=False).size()
    return pd.DataFrame(
        {
            "trace": rows.index.get_level_values(0).to_numpy(object),
            "person": rows.index.get_level_values(1).to_numpy(object),
            "rows": rows.to_numpy(np.int64),
        }
    )


def trace_charges(parts, plan, traj_id, person):
    """Each trace's person and worst case, from :func:`trace_partition_persons` of every input partition.

    A trace whose rows are in several partitions is one trace with all its rows.  Its worst case
    is what the in-memory release reserves: ``epsilon`` plus the lattice's finite-precision
    increment (:meth:`~geopriv.release.TracePlan.draw_increment`) for every row; the traces are in
    sorted id order, as in memory.  Returns (person ids, one per trace; worst cases; rows).
    """
    from ..budget import PERSON_FIX
    from ..exceptions import GeoprivError, format_labels
    from ..identity import canonical_order

    pairs = (
        pd.concat([p for p in parts if len(p)], ignore_index=True)
        if any(len(p) for p in parts)
        else pd.DataFrame({"trace": [], "person": [], "rows": []})
    )
    pairs = pairs.groupby(["trace", "person"], sort=False, dropna=False)["rows"].sum().reset_index()
    per_trace = pairs.groupby("trace", sort=False, dropna=False)
    changes = per_trace["person"].size()
    if person is not None and (changes > 1).any():
        bad = changes.index[changes.to_numpy() > 1]
        raise GeoprivError(
            f"The person id column {person!r} changes within {len(bad)} trace(s): trace ids "
            f"{format_labels(bad)}. A trace belongs to one person.",
            fix=PERSON_FIX,
        )
    lengths = per_trace["rows"].sum()
    first = per_trace["person"].first()
    order = canonical_order(list(lengths.index))  # canonical ids in canonical order, as the in-memory release
    n_rows = lengths.to_numpy(np.int64)[order]
    ids = first.to_numpy(object)[order]
    worst = plan.epsilon_per_m + n_rows * plan.draw_increment()
    return pd.Index(ids.tolist()), worst, int(n_rows.sum())


def _trace_rows(part, traj_id, time, geom_name, crs, series, root):
    """(xy, keyed digest) of one input partition's rows: everything a trace's noise key depends on.

    Per row: the trace id, the geometry's WKB (Z included), the time stamp, the index label (it
    breaks ties in the canonical order) and, when the row order is the query order (no trace id,
    no time stamps), the row's position.
    """
    import shapely

    from ..keys import identity_digests, row_streams
    from ..points import as_geoseries, point_xy

    gpart = _as_geo(part, geom_name, crs, series)
    xy = point_xy(as_geoseries(gpart))
    n = len(xy)
    if traj_id is None:
        a, b = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    else:
        a, b = identity_digests(pd.Index(gpart[traj_id]), "trace id", gpart.index)
    geoms = gpart.geometry if hasattr(gpart, "geometry") else gpart
    wkb = pd.Series(shapely.to_wkb(np.asarray(geoms.values), hex=False), dtype=object)
    w0 = pd.util.hash_pandas_object(wkb, index=False, hash_key="geopriv-wkb-aaa1").to_numpy(dtype=np.uint64)
    w1 = pd.util.hash_pandas_object(wkb, index=False, hash_key="geopriv-wkb-bbb2").to_numpy(dtype=np.uint64)
    t = (
        np.zeros(n, np.uint64)
        if time is None
        else pd.util.hash_pandas_object(gpart[time], index=False).to_numpy(dtype=np.uint64)
    )
    label = pd.util.hash_pandas_object(gpart.index.to_series(), index=False).to_numpy(dtype=np.uint64)
    words = [w0, w1, t, label]
    if traj_id is None and time is None:
        words.append(np.arange(n, dtype=np.uint64))
    return xy, row_streams(root, BIND_PURPOSE, (a, b), words).digest()


def trace_partition_checks(part, root, traj_id, time, geom_name, crs, series, rect=None):
    """Build time, one input partition: its digest, and the edges of declared bounds= its points touch."""
    from ..frame import touched_edges

    if len(part) == 0:
        return np.zeros(4, bool), (0, 0, 0)
    xy, digest = _trace_rows(part, traj_id, time, geom_name, crs, series, root)
    return (touched_edges(xy, rect) if rect is not None else np.zeros(4, bool)), digest


def verify_partition(part, root, traj_id, time, geom_name, crs, series, binding, partition_info=None):
    """Compute time, one input partition: refuse rows other than those the release was built on."""
    from .perturb import check_binding

    digest = (0, 0, 0) if len(part) == 0 else _trace_rows(part, traj_id, time, geom_name, crs, series, root)[1]
    check_binding(root, digest, binding, partition_info)
    return part


# ---------------------------------------------------------------------------- the ledger
def trace_ledger_dask(result):
    """The per-trace ledger of the whole release, as one table.

    ``result`` is a lazy release (a dask GeoDataFrame from :func:`sanitize_traces_dask`): a lazy
    ledger (one partition; ``.compute()`` it) is returned, built from the release's columns by a
    groupby over all partitions, so it holds every trace once whatever the partitioning (and
    also after a repartition).  Computing it computes the release (the identical one: the root
    is fixed); compute both at once with ``dask.compute(result, ledger)``, or ``persist()`` the
    release first, to run the mechanism once.  A computed release (a GeoDataFrame, whose
    partitions' records carry no per-bucket ledgers) gives a pandas DataFrame.

    Why from the columns: each bucket's in-memory ledger lives in its own result's attrs, which
    differ per bucket and so are dropped when pandas concatenates the partitions; the columns
    ``traj_id``, ``status`` and ``epsilon_spent`` determine the ledger (see
    :func:`ledger_from_columns` for the three columns that they determine only for the
    independent mechanism), work lazily and on a computed result alike, and need no second
    output from the release.
    """
    from ..daskhook import is_dask
    from ..traces import finish_ledger, ledger_from_columns, ledger_rows, trace_record

    if not is_dask(result):
        return ledger_from_columns(result)
    rec = trace_record(result._meta)
    traj_id = rec.get("traj_id")
    cols = [c for c in (traj_id, "status", "epsilon_spent") if c is not None]
    rows_meta = ledger_rows(result._meta[cols], traj_id)
    rows = result[cols].map_partitions(ledger_rows, traj_id, meta=rows_meta)
    sums = rows.groupby("key", sort=False).sum(split_out=1)
    sums_meta = rows_meta.groupby("key").sum()
    ledger_meta = finish_ledger(sums_meta, rec)
    return sums.map_partitions(finish_ledger, rec, meta=ledger_meta)
