"""``perturb`` on dask-geopandas: the in-memory release plan, with noise keyed by person and content.

The public part of the release (frame, lattice, finite-precision bound, provenance record) is
the plan of the kind ``"points"`` (:func:`geopriv.release.plan_release`), built once on the
client by :func:`geopriv.perturb`; :func:`run_points_lazy` is its lazy run (registered for the
kind, :meth:`geopriv.release.base.Executes.run_lazy`): each partition validates its rows and runs
the plan's ``draw`` and ``finish`` with per-row streams keyed by (root, the row's identity, its
coordinates) (:mod:`geopriv.keys`).  Identities are checked unique over the whole frame by a
reduction that every output partition waits for.  What a row costs, the record and what a seed
is bound to are the plan's own (:meth:`~geopriv.release.ReleasePlan.charged_fields`,
:meth:`~geopriv.release.ReleasePlan.seed_params`), as in memory.

With a budget store (``budget_store=``), the driver charges every row's person once, when the
release is built (:mod:`geopriv.distributed.budget`); a person may then have several rows (each is
charged), but never two rows at exactly the same point: see :func:`perturb_dask`.
"""

from __future__ import annotations

import contextlib
import gc

import numpy as np

from ..budget import PER_METRE
from ..exceptions import Fix, IdentityError
from ..keys import (
    Binding,
    check_unique,
    float_words,
    fold_digests,
    identity_digests,
    repeated_rows,
    row_identities,
    row_streams,
    shown_labels,
    siphash24_128,
)
from ..provenance import make_record
from . import built, root_entropy
from .forms import lazy_form

__all__ = ["perturb_dask", "run_points_lazy", "release_partition", "partition_checks", "whole_data_checks"]

#: the purpose a perturb release's per-row keys are bound to (see geopriv.keys)
PURPOSE = "perturb"
#: the purpose of the keyed fingerprints that find rows sharing a noise key (person id and point) over all partitions
PAIR_PURPOSE = "perturb person-point"

_SAME_POINT_FIX = Fix(
    "same_person_same_point",
    python="Drop the rows that repeat another row of the same person at the same point, or release in memory "
    "(geopriv.perturb on a GeoDataFrame draws each row's noise independently).",
)


def pair_fingerprints(root, a, b, xy) -> np.ndarray:
    """64-bit keyed fingerprints of (identity digest, coordinate bits): equal for rows whose noise keys are equal.

    The same message as the rows' noise keys (:func:`geopriv.keys.row_streams`), under another
    purpose key: they say which rows would share noise and nothing about the noise.
    """
    k0, k1 = siphash24_128(root.purpose_key(PAIR_PURPOSE), [a, b, *float_words(xy)])
    return fold_digests(k0, k1)


def _check_pairs(folded, labels) -> None:
    """Refuse rows of one person at exactly the same point in one array of pair fingerprints (names rows)."""
    rows = repeated_rows(folded, labels)
    if len(rows):
        raise IdentityError(_SAME_POINT, shown_labels(rows), _SAME_POINT_FIX, count=len(rows))


_SAME_POINT = (
    "repeat a person at exactly the same point: keyed noise would give them the same output, which shows "
    "that their true points are equal"
)


@contextlib.contextmanager
def paused_cyclic_gc():
    """Pause Python's cyclic garbage collector (restored after): a partition builds about a million
    shapely geometries, which it tracks, and its full collections took about half of a worker's time
    (bench/results/dask.md).  Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _rows(part, plan, root, repeats=False):
    """Validate one partition's rows exactly as its release does; its points, identity digests, xy and streams.

    ``repeats``: person ids may repeat (a budget store charged every row), but not with the same point.
    """
    from ..release import check_release_input

    # attributes first: no coordinate reaches a message; the region's CRS was checked by the plan
    geoms, xy = check_release_input(part, plan.keep, plan.bounds)
    labels = geoms.index
    ids, _ = row_identities(part, plan.person, refuse_positions=True)
    a, b = identity_digests(ids, "person id" if plan.person is not None else "index label", labels)
    if repeats:
        _check_pairs(pair_fingerprints(root, a, b, xy), labels)
    else:
        check_unique(fold_digests(a, b), labels)
    plan.check_inside(xy, labels)
    return geoms, (a, b), xy, row_streams(root, PURPOSE, (a, b), float_words(xy))


def partition_checks(part, plan, root, areas=(), repeats=False):
    """Build time, one partition: the rows validated, and what binds and checks the whole release.

    Returns (folded identity digests, or with ``repeats`` the rows' (identity, point) fingerprints;
    the edges of each declared area its points touch; the partition's digest (rows, keyed multiset
    hash of (identity, content))).
    """
    from ..frame import touched_edges

    if len(part) == 0:
        return np.zeros(0, np.uint64), np.zeros((len(areas), 4), bool), (0, 0, 0)
    _, (a, b), xy, streams = _rows(part, plan, root, repeats)
    touched = np.array([touched_edges(xy, rect) for rect, _ in areas], dtype=bool).reshape(len(areas), 4)
    unique_by = pair_fingerprints(root, a, b, xy) if repeats else fold_digests(a, b)
    return unique_by, touched, streams.digest()


def duplicate_labels(part, person, duplicates, root=None, repeats=False):
    """Build time, when ids (or, with ``repeats``, (id, point) pairs) repeat across partitions: this partition's
    rows among them, by label."""
    if len(part) == 0:
        return []
    ids, labels = row_identities(part, person, refuse_positions=True)
    a, b = identity_digests(ids, "person id" if person is not None else "index label", labels)
    if repeats:
        from ..points import as_geoseries, point_xy

        folded = pair_fingerprints(root, a, b, point_xy(as_geoseries(part)))
    else:
        folded = fold_digests(a, b)
    return list(labels[np.isin(folded, duplicates)])


def whole_data_checks(checks, areas=()) -> np.ndarray:
    """The checks over ALL partitions: no declared area taken from the data; the folded ids seen twice."""
    from ..frame import check_area_not_from_data

    for k, (_, source) in enumerate(areas):
        check_area_not_from_data(np.logical_or.reduce([c[1][k] for c in checks]), source)
    arrays = [np.asarray(c[0], dtype=np.uint64) for c in checks]
    allv = np.sort(np.concatenate(arrays)) if arrays else np.zeros(0, np.uint64)
    return np.unique(allv[1:][allv[1:] == allv[:-1]])


def release_partition(part, plan, root, record: dict, digests=None, partition_info=None, repeats=False):
    """One partition's release: the rows validated and checked against the build's digest, then keyed draws."""
    with paused_cyclic_gc():
        return _release_partition(part, plan, root, record, digests, partition_info, repeats)


def check_binding(root, digest, binding, partition_info=None) -> None:
    """Refuse rows other than those of a partition the release was built on (:meth:`geopriv.keys.Binding.check`)."""
    from ..exceptions import StaleReleaseError

    if binding is None:
        raise StaleReleaseError("this lazy release carries no binding to its data; build it again.")
    binding.check(root, digest, None if partition_info is None else partition_info.get("number"))


def _release_partition(part, plan, root, record, digests, partition_info, repeats):
    from ..release import assemble

    if len(part) == 0:
        check_binding(root, (0, 0, 0), digests, partition_info)
        out = part.copy()
        out.attrs = dict(part.attrs, geopriv=record)
        return out
    geoms, _, xy, streams = _rows(part, plan, root, repeats)
    check_binding(root, streams.digest(), digests, partition_info)
    work = plan.draw(xy, geoms.index, streams)
    out = plan.finish(np.asarray(work, dtype=float))
    return assemble(part, geoms, out, record)


@lazy_form("perturb.perturb")
def perturb_dask(data, *args, **kwargs):
    """Lazy :func:`geopriv.perturb` of a dask-geopandas GeoDataFrame or GeoSeries (same parameters).

    Everything public is fixed now (the frame, lattice, bound and provenance record: errors in
    the parameters are raised here), and so is the secret root.  Building also reads the data
    once (no noise is drawn): every row is validated, the whole data are checked (person ids
    unique over all partitions, declared ``bounds=``/``region=`` not taken from the data), and
    each partition's digest is recorded.  Computing the result replays the same points on the
    same data and refuses partitions whose rows changed (:class:`~geopriv.exceptions.StaleReleaseError`):
    a recompute on changed data would show which rows changed.  ``person`` names the column of
    stable person ids (default: the index labels, refused when they look like positions).  The
    returned lazy object holds the root: keep it like the data.  ``progress`` is ignored (use
    dask's diagnostics).  The record is the same on every partition, with ``n`` None.

    ``budget_store`` (a :class:`~geopriv.BudgetStore` or its URL): the driver charges every row's
    person the same epsilon per metre per row as the in-memory release, **once, here**, after
    the build's checks and before the lazy object is returned; the persons and their rows are
    counted over all partitions in the same pass (a person whose rows are in several partitions
    pays for all of them).  A person who cannot afford it is named in a
    :class:`~geopriv.BudgetExceededError` raised here: nothing is charged and no graph is
    returned.  Computing the result (twice, or a retried task) replays the same release and
    charges nothing more; the store never enters the graph (workers need no access to it).
    With a store a person may have several rows, as in memory, but not two rows at exactly the
    same point: their noise keys (root, person id, coordinates) would be equal, so they would
    get the same output, which shows that the true points are equal (refused by row label, over
    all partitions).  Without a store ids stay unique: each row is one person.
    """


def _check_schema(plan, data) -> None:
    """The whole-data checks a lazy run makes on the frame's schema (its empty ``_meta``): no row is read."""
    meta = data._meta
    if plan.person is not None and (not hasattr(meta, "columns") or plan.person not in meta.columns):
        from ..exceptions import GeoprivError

        raise GeoprivError(f"person={plan.person!r} is not a column of the data; name the column of stable person ids.")
    from ..exceptions import EmptyInputError
    from ..release import check_release_input

    try:  # the schema (geometry columns, type, CRS) on the empty meta
        check_release_input(meta, plan.keep, plan.bounds)
    except EmptyInputError:
        pass


def _build_pass(plan, data, root, repeats: bool, charged: bool):
    """Build time: every row validated once and the whole data checked; (the partitions' checks, their persons).

    Ids unique over ALL partitions (with ``repeats``: no (id, point) pair twice), declared
    ``bounds=`` / ``region=`` not taken from the data, and each partition's digest recorded: the
    release answers exactly these data, and refuses other rows when computed
    (:class:`~geopriv.exceptions.StaleReleaseError`).  ``charged``: each partition's persons and
    their rows too, in the same pass (:func:`geopriv.distributed.budget.partition_persons`).
    """
    import dask

    areas = plan.declared_areas()
    parts = data.to_delayed()
    tasks = [dask.delayed(partition_checks, pure=True)(p, plan, root, areas, repeats) for p in parts]
    if charged:
        from .budget import partition_persons

        tasks += [dask.delayed(partition_persons, pure=True)(p, plan.person) for p in parts]
    computed = dask.compute(*tasks)
    checks, persons = computed[: len(parts)], computed[len(parts) :]
    duplicates = whole_data_checks(checks, areas)
    if len(duplicates):
        _refuse_duplicates(parts, plan.person, duplicates, root, repeats)
    return checks, persons


def _refuse_duplicates(parts, person, duplicates, root, repeats: bool) -> None:
    """Name the rows, over all partitions, whose ids (or (id, point) pairs) another partition repeats."""
    import dask

    found = [
        lab
        for labs in dask.compute(*[dask.delayed(duplicate_labels)(p, person, duplicates, root, repeats) for p in parts])
        for lab in labs
    ]
    if repeats:
        raise IdentityError(
            _SAME_POINT + " (rows in different partitions)", shown_labels(found), _SAME_POINT_FIX, count=len(found)
        )
    raise IdentityError(
        "share their person id with rows of other partitions: two rows would answer for the same person",
        shown_labels(found),
        "Make the ids unique over the whole data (a person id column: person='<column>').",
        count=len(found),
    )


def run_points_lazy(plan, data, *, store=None, rng=None, progress=None):
    """The lazy run of a point plan (:class:`geopriv.release.ReleasePlan`) on a dask frame: see :func:`perturb_dask`.

    The schema and every row are checked (one pass over the data, with the charge's persons),
    the store is charged once by the driver (:func:`geopriv.distributed.budget.charge_at_build`)
    and only then is the lazy release returned, and a caller's generator advanced.  ``progress``
    is ignored (dask's diagnostics).
    """
    import dask

    _check_schema(plan, data)
    per_row, fields = plan.charged_fields(store)
    # a seed is bound to the whole data and the public parameters: it replays only for the same ones
    root, drawn = root_entropy(rng, data, plan.seed_params(), PURPOSE)
    record = make_record(fields, seeded=root.seeded, n=None)
    repeats = store is not None  # a store charges every row: a person may have several (never at one point)
    checks, persons = _build_pass(plan, data, root, repeats, charged=store is not None)
    digests = Binding(root, PURPOSE, [c[2] for c in checks])  # sealed: one-way tags, never shown
    out_meta = data._meta.copy()
    out_meta.attrs = dict(data._meta.attrs, geopriv=record)
    shipped = dask.delayed(plan, pure=True)  # the plan (and a built mechanism in it) goes to each worker once
    result = data.map_partitions(release_partition, shipped, root, record, digests, repeats=repeats, meta=out_meta)
    if store is not None:  # the driver's one charge, before the lazy release exists for anyone to compute
        from .budget import charge_at_build, merge_persons

        pk = merge_persons(persons)
        charge_at_build(
            store, pk, per_row, unit=PER_METRE, kind=plan.release_kind, fields=fields, rows=int(pk.counts.sum())
        )
    built(rng, drawn)  # only now does a caller's generator advance
    return result
