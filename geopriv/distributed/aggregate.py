"""``aggregate``, ``heatmap`` and ``flows`` on dask-geopandas: the in-memory plan, counted per partition.

The same release as in memory (:mod:`geopriv.release.counts`: ``plan_counts`` / ``plan_flows``, the rows
located in the public cells, their counts, ``release_counts``), with the data read partition by
partition.  :func:`run_counts` and :func:`run_flows` are the plans' lazy runners (registered by
:mod:`geopriv.distributed` under their plan's kind): each runs the pass over the partitions and
hands its result to :func:`geopriv.release.counts.publish`, the orchestration the in-memory run
uses too (the charge, the noise, the record, the warning, the output).  These calls are **eager**: they read the data, charge the budget store, draw the noise
once on the driver and return an in-memory result (the cells are public and few): a GeoDataFrame of
cells, a :class:`~geopriv.Heatmap`, a GeoDataFrame of flows.  There is no lazy result, so nothing
can be recomputed into a second release, and no secret is left in a graph after the call.

How the plan runs on partitions
-------------------------------
* **Public first**: the plan (cells, hierarchy, split of epsilon, expected errors) is built from the
  frame's CRS and the parameters before any row is read.
* **Pass 1**, one dask computation over ALL partitions, tree-reduced: each partition's rows are
  validated as in memory (rows outside the public area and rows without a person id are refused by
  label, in the partition that holds them); its partial counts are ``np.bincount`` of the cell ids
  (``minlength`` = the number of cells); the few points it holds on the public lines and corners
  that the "area computed from the data" check looks at (:func:`area_witnesses`), on which the
  driver then runs that check, :func:`geopriv.release.counts.check_area_public`, for all the data at once;
  with ``user=`` (or the index labels, with a budget store and no ``user=``, as in memory), every
  person's number of counted rows (keyed by :func:`person_digests`).  Memory: a partition, the
  cells, and (with ``user=``) the persons.  Data without rows are released, as in memory.
* **Bounding by person across partitions** (``user=``): a person whose rows over ALL partitions
  number more than ``max_per_user`` keeps ``max_per_user`` of them chosen uniformly at random with
  fresh randomness.  Pass 2 gives every row a random priority from its partition's generator, derived
  from a secret root drawn for this release and the partition's number
  (:meth:`geopriv.keys.SecretRoot.seed_for`); each partition counts the rows of persons under the cap
  and keeps, per capped person, its ``max_per_user`` smallest priorities (ties, of probability about
  2^-53, go to the earlier partition, then the earlier row) with their cells; these are merged up a tree keeping the
  ``max_per_user`` smallest per person, i.e. the person's ``max_per_user`` smallest priorities over
  all partitions: a uniformly random subset of that size, as in memory.  Their cells are counted.
  Pass 2 runs only when someone is over the cap; it is bound to pass 1 by a keyed multiset digest
  of (person, cell) (:class:`~geopriv.exceptions.StaleReleaseError` when the data changed between
  the passes: persons under the cap in pass 1 must be the persons counted whole in pass 2).
* **Noise once, on the driver**: ``release_counts`` with the generator of ``make_rng(rng)``, after
  the budget store (``budget_store=``) is charged every person once, on the driver.  A seeded call
  draws the same noise as the in-memory call with the same seed (the root of the priorities comes
  from a jumped copy of the generator, which leaves it untouched), so when nobody is over the cap
  the release is the in-memory one exactly.  The provenance record is the in-memory one.
* ``flows`` of trajectory points: a trip's rows may lie in several partitions.  Each partition
  sends, per trip, its first row and its earliest and latest rows (picked by
  :func:`geopriv.release.counts.trip_ends`, the in-memory rule); on these candidates, in partition then
  row order, the driver runs ``trip_ends`` again: the ends and the order of the trips are those of
  the concatenated frame in memory.  The driver then holds at most three rows per trip and
  partition, and bounds and counts the trips exactly as in memory (the same generator: a seeded
  release is the in-memory one).  ``flows`` of one LineString per trip counts rows like
  ``aggregate``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ..exceptions import GeoprivError, StaleReleaseError
from ..identity import identities
from ..release.counts import (
    Counted,
    bounded_counts,
    check_area_public,
    check_lines,
    check_meta,
    check_plan_crs,
    check_trip_columns,
    locate_rows,
    meta_crs,
    person_codes,
    publish,
    refuse_mixed_trips,
    trip_cells,
    trip_ends,
)
from .forms import lazy_form

__all__ = ["aggregate_dask", "heatmap_dask", "flows_dask", "run_counts", "run_flows", "person_digests", "dask_counts"]

#: the purpose of the keyed digests binding pass 2 to pass 1 (geopriv.keys)
DIGEST_PURPOSE = "aggregate-bind"
#: the purpose of the partitions' priority generators (contribution bounding)
BOUND_PURPOSE = "aggregate-bounding"
#: partitions (or partial results) merged per task of the tree reductions
SPLIT_EVERY = 8


#: ``user=INDEX``: the persons are the index labels (a budget store's persons when no user= is given, as in memory)
class _IndexLabels:
    def __repr__(self) -> str:
        return "INDEX"

    def __reduce__(self):  # one object, also on dask workers
        return "INDEX"


INDEX = _IndexLabels()

_INT_TAG = np.uint64(0x9E3779B97F4A7C15)  # as geopriv.keys: integers keep their value, with this tag
_M64 = (1 << 64) - 1


# ----------------------------------------------------------------------------- person keys
def person_digests(col, labels=None) -> tuple[np.ndarray, np.ndarray]:
    """128-bit keys ``(a, b)`` of person ids: the identity key of :mod:`geopriv.identity` and a fixed tag.

    The same function keys the persons in memory, in every partition (whatever dtype a partition gave
    the column: ``5`` in one and ``"5"`` in another are one person) and in the budget store, so the
    persons bounded across partitions are the persons charged.  Unusable ids are refused by row label.
    """
    keys = identities(col, labels, "person id").keys
    return keys.view(np.uint64).copy(), np.full(len(keys), _INT_TAG, np.uint64)


def _groups(a: np.ndarray, b: np.ndarray, *more) -> tuple[np.ndarray, np.ndarray]:
    """(order sorting by person then ``more`` (last key first, as lexsort), start of each person's run in it)."""
    order = np.lexsort((*more, b, a))
    sa, sb = a[order], b[order]
    new = np.ones(len(order), bool)
    if len(order) > 1:
        new[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    return order, new


def _member(keys: tuple, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether each (a, b) is one of ``keys`` (two arrays sorted by a, then b)."""
    ka, kb = keys
    found = np.zeros(len(a), bool)
    if not len(ka) or not len(a):
        return found
    lo = np.searchsorted(ka, a, "left")
    hi = np.searchsorted(ka, a, "right")
    for step in range(int((hi - lo).max())):  # 1 but for 64-bit collisions of a
        at = lo + step
        ok = at < hi
        found[ok] |= kb[at[ok]] == b[ok]
    return found


@dataclasses.dataclass
class _PersonCounts:
    """Counted rows per person: keys (sorted by a, then b) and counts."""

    a: np.ndarray
    b: np.ndarray
    count: np.ndarray

    @classmethod
    def of(cls, a, b, count=None) -> "_PersonCounts":
        count = np.ones(len(a), np.int64) if count is None else count
        order, new = _groups(a, b)
        starts = np.flatnonzero(new)
        total = np.add.reduceat(count[order], starts) if len(starts) else np.zeros(0, np.int64)
        return cls(a[order][starts], b[order][starts], total.astype(np.int64))

    @classmethod
    def merge(cls, parts) -> "_PersonCounts":
        parts = list(parts)
        return cls.of(
            np.concatenate([p.a for p in parts]),
            np.concatenate([p.b for p in parts]),
            np.concatenate([p.count for p in parts]),
        )

    def over(self, k: int) -> tuple:
        """The persons with more than ``k`` rows (sorted keys)."""
        big = self.count > k
        return self.a[big], self.b[big]


@dataclasses.dataclass
class _Candidates:
    """Rows of capped persons that may be kept: person, priority and cell, in partition then row order."""

    a: np.ndarray
    b: np.ndarray
    prio: np.ndarray
    cell: np.ndarray

    def smallest(self, k: int) -> "_Candidates":
        """Each person's ``k`` smallest priorities; the sort is stable and every merge keeps partition then row
        order, so ties (of probability about 2^-53) go to the earlier partition, then the earlier row."""
        order, new = _groups(self.a, self.b, self.prio)
        n = len(order)
        start = np.maximum.accumulate(np.where(new, np.arange(n), 0)) if n else np.zeros(0, np.int64)
        keep = order[(np.arange(n) - start) < k]
        return _Candidates(*(getattr(self, f.name)[keep] for f in dataclasses.fields(self)))

    @classmethod
    def merge(cls, parts, k: int) -> "_Candidates":
        parts = list(parts)
        return cls(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(cls))).smallest(k)

    @classmethod
    def empty(cls) -> "_Candidates":
        z = np.zeros(0, np.uint64)
        return cls(z, z, np.zeros(0), np.zeros(0, np.int64))


def _digest(root, a, b, cell) -> tuple:
    """Keyed multiset digest of the partition's (person, cell) rows (geopriv.keys.RowStreams.digest)."""
    from ..keys import row_streams

    return row_streams(root, DIGEST_PURPOSE, (a, b), [np.asarray(cell, np.int64).view(np.uint64)]).digest()


def _add_digests(ds) -> tuple:
    ds = [d for d in ds if d is not None]
    return (sum(d[0] for d in ds), sum(d[1] for d in ds) & _M64, sum(d[2] for d in ds) & _M64) if ds else None


def _priorities(root, number: int, n: int, whole=None) -> np.ndarray:
    """The rows' priorities: uniforms from the partition's own generator (root, partition number, whole data).

    ``whole``: pass 1's keyed digest of all the (person, cell) rows, so a seeded root draws other
    priorities for any other data (a seed replays only for the same data).
    """
    bound = b"".join(int(v & _M64).to_bytes(8, "little") for v in (whole or ()))
    seed = root.seed_for(BOUND_PURPOSE, int(number).to_bytes(8, "little") + bound)
    return np.random.Generator(np.random.PCG64DXSM(seed)).random(n)


# ----------------------------------------------------------------------------- rows and their cells
class _PointRows:
    """aggregate / heatmap: every row is a point counted in its cell (rows outside refused by label)."""

    def __init__(self, plan, bounds, region):
        self.plan, self.bounds, self.region = plan, bounds, region

    @property
    def n(self) -> int:
        return self.plan.cells.n

    def cells(self, part, witnesses: bool = True):
        """(cell of every row, its labels, the points the area check looks at) for one partition."""
        from ..release import check_release_input

        geoms, xy = check_release_input(part, bounds=self.bounds, region=self.region, attributes=False)
        labels = geoms.index
        seen = area_witnesses(self.plan, xy) if witnesses else None
        return locate_rows(self.plan, xy, labels), labels, seen


class _LineRows:
    """flows of one LineString per trip: every row is a trip counted in its (origin, destination) pair."""

    def __init__(self, plan):
        self.plan = plan

    @property
    def n(self) -> int:
        return self.plan.cells.n

    def cells(self, part, witnesses: bool = True):
        from ..points import check_no_other_geometries

        check_no_other_geometries(part)
        geoms = part.geometry
        labels = geoms.index
        check_lines(geoms)
        o_xy, d_xy, _, trip_ids = trip_ends(part, geoms, None, None, None, labels)
        seen = area_witnesses(self.plan, np.concatenate([o_xy, d_xy])) if witnesses else None
        return trip_cells(self.plan, o_xy, d_xy, trip_ids).astype(np.int64), labels, seen


def area_witnesses(plan, xy: np.ndarray) -> np.ndarray:
    """The points of ``xy`` that the "area computed from the data" check can depend on (a superset of them).

    :func:`geopriv.release.counts.check_area_public` looks at the points lying on an edge of a public
    rectangle (the declared bounds, a region's box, the polygons' extent: ``touched_edges``) and at
    the points lying on a public polygon's corners or centres (cells, a region, flow regions), to
    about 1e-9 of the area's size.  This keeps every point within 1e-6 of that size of those lines
    and points: the check on the witnesses of ALL partitions, concatenated, is the check on all the
    data (the same refusal, word for word), while each partition sends the driver only the few
    points lying there (usually none).
    """
    import shapely

    from ..cells import FlowCells, PolygonCells

    if not len(xy):
        return np.zeros((0, 2))
    rects, polys = [], []
    cells = plan.cells.regions if isinstance(plan.cells, FlowCells) else plan.cells
    if isinstance(cells, PolygonCells):
        polys.append(np.asarray(cells.geoms))
        rects.append(tuple(shapely.total_bounds(cells.geoms)))
    if plan.area is not None:
        rects.append(tuple(plan.area))
    region = getattr(plan, "region_geom", None)
    if region is not None:
        polys.append(np.asarray(shapely.get_parts(region)))
        rects.append(tuple(region.bounds))
    size = max([max(r[2] - r[0], r[3] - r[1]) for r in rects] + [1.0])
    tol = 1e-6 * size
    near = np.zeros(len(xy), bool)
    for xmin, ymin, xmax, ymax in rects:
        near |= (np.abs(xy[:, 0] - xmin) <= tol) | (np.abs(xy[:, 0] - xmax) <= tol)
        near |= (np.abs(xy[:, 1] - ymin) <= tol) | (np.abs(xy[:, 1] - ymax) <= tol)
    if polys:
        geoms = np.concatenate(polys)
        ref = np.vstack(
            [
                shapely.get_coordinates(geoms),
                shapely.get_coordinates(shapely.centroid(geoms)),
                shapely.get_coordinates(shapely.point_on_surface(geoms)),
            ]
        )
        found, _ = shapely.STRtree(shapely.points(ref)).query(shapely.points(xy), predicate="dwithin", distance=tol)
        near[found] = True
    return xy[near]


# ----------------------------------------------------------------------------- the two passes
@dataclasses.dataclass
class _Scan:
    """Pass 1 over some partitions: rows, partial counts, area witnesses, counted rows per person, digest."""

    n: int
    counts: np.ndarray
    witnesses: np.ndarray
    persons: _PersonCounts | None
    digest: tuple | None


def _person_ids(part, user, labels):
    """The rows' person ids: the ``user`` column (missing ids refused by row label, as in memory), or with
    ``user=INDEX`` the index labels (refused when they look like positions, as in memory)."""
    if user is INDEX:
        from ..keys import row_identities

        return row_identities(part, None, refuse_positions=True)[0]
    person_codes(part, user, labels)
    return part[user]


def _scan(part, number, rows, user, root) -> _Scan:
    """Pass 1, one partition: its rows validated and counted (no randomness, nothing released)."""
    if len(part) == 0:
        return _Scan(0, np.zeros(rows.n, np.int64), np.zeros((0, 2)), None, None)
    cell, labels, witnesses = rows.cells(part)
    counted = cell >= 0
    counts = np.bincount(cell[counted], minlength=rows.n).astype(np.int64)
    persons = digest = None
    if user is not None:
        a, b = person_digests(_person_ids(part, user, labels), labels)
        persons = _PersonCounts.of(a[counted], b[counted])
        digest = _digest(root, a, b, cell)
    return _Scan(len(part), counts, witnesses, persons, digest)


def _merge_scans(scans) -> _Scan:
    scans = list(scans)
    persons = [s.persons for s in scans if s.persons is not None]
    return _Scan(
        sum(s.n for s in scans),
        np.sum([s.counts for s in scans], axis=0),
        np.concatenate([s.witnesses for s in scans]),
        _PersonCounts.merge(persons) if persons else None,
        _add_digests(s.digest for s in scans),
    )


@dataclasses.dataclass
class _Bounded:
    """Pass 2 over some partitions: counts of uncapped persons' rows, capped persons' candidates, digest."""

    counts: np.ndarray
    candidates: _Candidates
    digest: tuple | None


def _bounded(part, number, rows, user, root, over, k, whole=None) -> _Bounded:
    """Pass 2, one partition: rows of persons under the cap counted, the rest's k smallest priorities kept."""
    if len(part) == 0:
        return _Bounded(np.zeros(rows.n, np.int64), _Candidates.empty(), None)
    cell, labels, _ = rows.cells(part, witnesses=False)
    a, b = person_digests(_person_ids(part, user, labels), labels)
    digest = _digest(root, a, b, cell)
    counted = cell >= 0
    capped = counted & _member(over, a, b)
    counts = np.bincount(cell[counted & ~capped], minlength=rows.n).astype(np.int64)
    prio = _priorities(root, number, len(part), whole)
    at = np.flatnonzero(capped)  # in row order
    cands = _Candidates(a[at], b[at], prio[at], cell[at]).smallest(k)
    return _Bounded(counts, cands, digest)


def _merge_bounded(parts, k) -> _Bounded:
    parts = list(parts)
    return _Bounded(
        np.sum([p.counts for p in parts], axis=0),
        _Candidates.merge([p.candidates for p in parts], k),
        _add_digests(p.digest for p in parts),
    )


def _tree(tasks, combine, **kwargs):
    """Reduce delayed partial results up a tree (SPLIT_EVERY per task): no task holds all partitions' results."""
    import dask

    tasks = list(tasks)
    while len(tasks) > 1:
        tasks = [
            dask.delayed(combine, pure=True)(tasks[i : i + SPLIT_EVERY], **kwargs)
            for i in range(0, len(tasks), SPLIT_EVERY)
        ]
    return tasks[0]


def _count(data, rows, k, user, root, charge=None, want_persons=False):
    """Pass 1 (with the budget's persons); returns (function giving the bounded true counts, persons).

    The function runs pass 2 when some person is over the cap (call it after the budget is reserved:
    if it fails, nothing is charged).
    """
    import dask

    from .budget import partition_persons

    parts = data.to_delayed()
    shipped = dask.delayed(rows, pure=True)  # the plan goes to each worker once
    tasks = [
        _tree([dask.delayed(_scan, pure=True)(p, i, shipped, user, root) for i, p in enumerate(parts)], _merge_scans)
    ]
    if want_persons:  # the charge's persons, in the same pass over ALL partitions
        tasks += [dask.delayed(partition_persons, pure=True)(p, charge) for p in parts]
    computed = dask.compute(*tasks)
    scan, persons = computed[0], computed[1:]
    check_area_public(rows.plan, scan.witnesses)  # over ALL partitions: the in-memory check (area_witnesses)
    over = scan.persons.over(k) if scan.persons is not None else None
    if over is None or not len(over[0]):
        counts = scan.counts
        return (lambda: counts), persons

    def bounded():
        ship = dask.delayed(over, pure=True)
        leaves = [
            dask.delayed(_bounded, pure=True)(p, i, shipped, user, root, ship, k, scan.digest)
            for i, p in enumerate(parts)
        ]
        (res,) = dask.compute(_tree(leaves, _merge_bounded, k=k))
        if res.digest != scan.digest:
            raise StaleReleaseError(
                "the data changed between the two passes over it (each person's rows are counted in the first, "
                "bounded in the second): compute from stable data (persist it, or read it from files that do not "
                "change during the call)."
            )
        return res.counts + np.bincount(res.candidates.cell, minlength=rows.n).astype(np.int64)

    return bounded, persons


def dask_counts(data, plan, *, user=None, bounds=None, region=None, rng=None) -> np.ndarray:
    """The true counts of ``plan``'s cells in a dask frame, after bounding (no noise: for tests and checks).

    What :func:`aggregate_dask` releases with noise: the same passes, the same randomness for the
    same ``rng``.  Not a release: the result is the data's exact statistic, keep it like the data.
    """
    from ..rng import make_rng

    root = _root(rng, make_rng(rng).generator)
    counts, _ = _count(data, _PointRows(plan, bounds, region), plan.mechanism.sensitivity, user, root)
    return counts()


def _root(rng, gen):
    """The secret root of the priorities: OS entropy, or (seeded) a jumped copy of the noise generator.

    The jumped copy leaves ``gen`` untouched, so the noise is the in-memory noise for the same seed.
    """
    from ..keys import SecretRoot

    if rng is None:
        return SecretRoot.draw(None)
    bits = getattr(gen, "bit_generator", None)
    if bits is not None and hasattr(bits, "jumped"):
        return SecretRoot.draw(np.random.Generator(bits.jumped()))
    return SecretRoot.draw(gen)


# ----------------------------------------------------------------------------- the release
def _check_charge_column(meta, store, column) -> None:
    if store is not None and column is not None and (not hasattr(meta, "columns") or column not in meta.columns):
        from ..budget import PERSON_FIX

        raise GeoprivError(f"person={column!r} is not a column of the data.", fix=PERSON_FIX)


def run_counts(plan, data, *, store=None, rng=None, progress=None):
    """The lazy runner of a count plan (``aggregate``, ``heatmap``): its pass over ALL partitions, then the release.

    Eager (module docstring): the data are read, the budget store charged and the noise drawn once
    on the driver, by :func:`geopriv.release.counts.publish` as in memory; the cells (or the
    heatmap) are returned in memory.  ``store``: a :class:`~geopriv.budget.BudgetStore` or its URL
    (opened on the driver for the call).
    """
    from .budget import driver_store

    with driver_store(store) as store:
        plan = plan.for_store(store)
        return publish(plan, _point_scan(plan, data, store, rng), store)


def _point_scan(plan, data, store, rng) -> Counted:
    """Pass 1 over ALL partitions, with the persons charged (the in-memory checks against the plan first)."""
    from ..rng import make_rng
    from .budget import merge_persons

    meta = data._meta
    check_plan_crs(plan, meta_crs(meta))
    check_meta(meta, plan.bounds, plan.region)
    user = None if plan.by_index else plan.user
    if user is not None:
        person_codes(meta, user, meta.index)  # a column of the data (no row is read)
    _check_charge_column(meta, store, user)
    source = make_rng(rng)
    counts, persons = _count(
        data,
        _PointRows(plan, plan.bounds, plan.region),
        plan.mechanism.sensitivity,
        INDEX if plan.by_index else user,
        _root(rng, source.generator),
        user,
        store is not None,
    )
    return Counted(counts, source, merge_persons(persons, once=True) if store is not None else None)


@lazy_form("aggregate.aggregate")
def aggregate_dask(data, *args, **kwargs):
    """:func:`geopriv.aggregate` of a dask-geopandas GeoDataFrame or GeoSeries (same parameters, same release).

    Eager: the data are read (one pass; two when ``user=`` and someone has more than
    ``max_per_user`` rows over all partitions), the budget store charged, the noise drawn once on
    the driver, and the cells returned as an in-memory GeoDataFrame (module docstring).
    ``budget_store``: every person is charged ``epsilon`` once, on the driver, before the noise;
    the persons are counted over all partitions in the first pass.
    """


@lazy_form("aggregate.heatmap")
def heatmap_dask(data, *args, **kwargs):
    """:func:`geopriv.heatmap` of a dask-geopandas frame: the grid release of :func:`aggregate_dask` as a raster.

    Eager, in-memory :class:`~geopriv.Heatmap` (written to ``path`` when given).  ``values`` and
    ``path`` are checked by :func:`geopriv.release.counts.plan_heatmap` before any partition is read.
    """


# ----------------------------------------------------------------------------- flows
@lazy_form("aggregate.flows")
def flows_dask(data, *args, **kwargs):
    """:func:`geopriv.flows` of a dask-geopandas GeoDataFrame (same parameters, same release), eager.

    Trajectory points: a trip's rows may lie in several partitions; its origin and destination are
    its earliest and latest rows over all partitions (module docstring).  The driver then holds
    one row per trip.  One LineString per trip: counted per partition like :func:`aggregate_dask`.
    Returns the flows as an in-memory GeoDataFrame.
    """


def run_flows(plan, data, *, store=None, rng=None, progress=None):
    """The lazy runner of a flow plan: the trips over ALL partitions, then the release (eager, as :func:`run_counts`)."""
    from .budget import driver_store

    with driver_store(store) as store:
        plan = plan.for_store(store)
        return publish(plan, _trip_scan(plan, data, store, rng), store)


def _trip_scan(plan, data, store, rng) -> Counted:
    """The trips' cells over ALL partitions, with the persons charged (the in-memory checks against the plan first)."""
    from ..rng import make_rng
    from .budget import merge_persons

    meta = data._meta
    check_plan_crs(plan, meta_crs(meta))
    check_trip_columns(meta, plan.traj_id, plan.time)
    if plan.user is not None:
        person_codes(meta, plan.user, meta.index)  # a column of the data (no row is read)
    source = make_rng(rng)
    charged = store is not None
    if plan.traj_id is None:
        root = _root(rng, source.generator)
        counts, persons = _count(data, _LineRows(plan), plan.mechanism.sensitivity, plan.user, root, plan.user, charged)
    else:
        counts, persons = _trip_counts(data, plan, source, charged)
    return Counted(counts, source, merge_persons(persons, once=True) if charged else None)


def _trip_rows(part, number, traj_id, time, user):
    """One partition's candidate ends of trips: per trip, its first row and its earliest and latest rows.

    The rows are validated as in memory, and :func:`geopriv.release.counts.trip_ends` picks the earliest
    and latest rows (its rule: by time, ties to the earlier row; missing ids or times refused by
    label).  Returns (a frame of those rows in row order: trip id, time, x, y, user, partition,
    position; the (trip, user) pairs of the partition, or None).
    """
    from ..points import as_geoseries, check_coordinates, check_no_other_geometries, point_xy

    if len(part) == 0:
        return None, None
    geoms = as_geoseries(part)
    check_no_other_geometries(part)
    labels = geoms.index
    xy = point_xy(geoms)
    check_coordinates(xy, geoms.crs, labels)
    persons = None
    if user is not None:  # persons as identity keys: 5 here and "5" in another partition are one person
        person_codes(part, user, labels)  # missing ids refused by row label
        persons = identities(part[user], labels).keys
    n = len(part)
    at = np.column_stack([xy, np.arange(n, dtype=np.float64)])  # trip_ends picks rows: their positions come along
    first_xy, last_xy, _, _ = trip_ends(part, geoms, at, traj_id, time, labels)
    trips = identities(part[traj_id], labels, "trip id")  # one rule for ids: 5 here and "5" there are one trip
    tid, _ = pd.factorize(trips.keys, sort=False)
    seen = np.unique(tid, return_index=True)[1]  # each trip's first row: the trips' order of appearance
    rows = np.unique(np.concatenate([seen, first_xy[:, 2].astype(np.int64), last_xy[:, 2].astype(np.int64)]))
    out = pd.DataFrame(
        {
            traj_id: part[traj_id].to_numpy()[rows],
            time: part[time].to_numpy()[rows],
            "x": xy[rows, 0],
            "y": xy[rows, 1],
            "part": np.full(len(rows), number, np.int64),
            "pos": rows,
        }
    )
    pairs = None
    if user is not None:
        out["user"] = persons[rows]
        pairs = pd.DataFrame({"trip": pd.Series(trips.canonical(), dtype=object), "user": persons}).drop_duplicates()
    return out, pairs


def _trip_counts(data, plan, source, charged: bool):
    """Trips over ALL partitions, combined on the driver; returns (function giving the bounded counts, persons).

    The candidate rows of every partition, in partition then row order, hold each trip's first row and its
    earliest and latest rows over all the data; :func:`geopriv.release.counts.trip_ends` on them is the in-memory
    rule on the concatenated frame: the same ends, the trips in the same order, and
    :func:`geopriv.release.counts.bounded_counts` bounds them with the same generator as in memory.
    """
    import dask

    from .budget import partition_persons

    traj_id, time, user = plan.traj_id, plan.time, plan.user
    parts = data.to_delayed()
    tasks = [dask.delayed(_trip_rows, pure=True)(p, i, traj_id, time, user) for i, p in enumerate(parts)]
    if charged:
        tasks += [dask.delayed(partition_persons, pure=True)(p, user) for p in parts]
    computed = dask.compute(*tasks)
    found, persons = computed[: len(parts)], computed[len(parts) :]
    frames = [f[0] for f in found if f[0] is not None]
    if not frames:  # no rows: refused as in memory (points without rows are no trips)
        from ..points import as_geoseries, point_xy

        point_xy(as_geoseries(data._meta))
    cands = pd.concat(frames, ignore_index=True)
    xy = cands[["x", "y"]].to_numpy()
    o_xy, d_xy, first, trip_ids = trip_ends(cands, None, xy, traj_id, time, cands.index)
    check_area_public(plan, np.concatenate([o_xy, d_xy]))  # regions built on the trips would publish them
    leaf = trip_cells(plan, o_xy, d_xy, trip_ids)
    codes = None
    if user is not None:
        pairs = pd.concat([f[1] for f in found if f[1] is not None], ignore_index=True).drop_duplicates()
        per_trip = np.bincount(pd.Index(trip_ids).get_indexer(pairs["trip"]), minlength=len(trip_ids))
        refuse_mixed_trips(trip_ids, per_trip > 1)
        codes = identities(cands["user"].to_numpy(np.int64)[first], trip_ids).codes()
    return (lambda: bounded_counts(plan, leaf, codes, source)), persons
