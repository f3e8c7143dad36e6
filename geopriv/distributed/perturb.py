"""``perturb`` on dask-geopandas: the in-memory release plan, with noise keyed by person and content.

The public part of the release (frame, lattice, finite-precision bound, provenance record) is
:func:`geopriv.release.plan_release`, built once on the client; each partition validates its
rows and runs the plan's ``draw`` and ``finish`` with per-row streams keyed by (root, the row's
identity, its coordinates) (:mod:`geopriv.keys`).  Identities are checked unique over the whole
frame by a reduction that every output partition waits for.

With a budget store (``budget_store=``), the driver charges every row's person once, when the
release is built (:mod:`geopriv.distributed.budget`); a person may then have several rows (each is
charged), but never two rows at exactly the same point: see :func:`perturb_dask`.
"""

from __future__ import annotations

import contextlib
import gc

import numpy as np
import pandas as pd

from ..exceptions import Fix, IdentityError
from ..frame import DEFAULT_MAX_DISTORTION
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

__all__ = ["perturb_dask", "release_partition", "partition_checks", "whole_data_checks"]

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


def _rows(part, plan, root, keep, bounds, region, person, repeats=False):
    """Validate one partition's rows exactly as its release does; its points, identity digests, xy and streams.

    ``repeats``: person ids may repeat (a budget store charged every row), but not with the same point.
    """
    from ..release import check_release_input

    geoms, xy = check_release_input(part, keep, bounds, region)  # attributes first: no coordinate reaches a message
    labels = geoms.index
    ids, _ = row_identities(part, person, refuse_positions=True)
    a, b = identity_digests(ids, "person id" if person is not None else "index label", labels)
    if repeats:
        _check_pairs(pair_fingerprints(root, a, b, xy), labels)
    else:
        check_unique(fold_digests(a, b), labels)
    plan.check_inside(xy, labels)
    return geoms, (a, b), xy, row_streams(root, PURPOSE, (a, b), float_words(xy))


def partition_checks(part, plan, root, keep=(), bounds=None, region=None, person=None, areas=(), repeats=False):
    """Build time, one partition: the rows validated, and what binds and checks the whole release.

    Returns (folded identity digests, or with ``repeats`` the rows' (identity, point) fingerprints;
    the edges of each declared area its points touch; the partition's digest (rows, keyed multiset
    hash of (identity, content))).
    """
    from ..frame import touched_edges

    if len(part) == 0:
        return np.zeros(0, np.uint64), np.zeros((len(areas), 4), bool), (0, 0, 0)
    _, (a, b), xy, streams = _rows(part, plan, root, keep, bounds, region, person, repeats)
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


def release_partition(
    part,
    plan,
    root,
    record: dict,
    keep=(),
    bounds=None,
    region=None,
    person=None,
    digests=None,
    partition_info=None,
    repeats=False,
):
    """One partition's release: the rows validated and checked against the build's digest, then keyed draws."""
    with paused_cyclic_gc():
        return _release_partition(
            part, plan, root, record, keep, bounds, region, person, digests, partition_info, repeats
        )


def check_binding(root, digest, binding, partition_info=None) -> None:
    """Refuse rows other than those of a partition the release was built on (:meth:`geopriv.keys.Binding.check`)."""
    from ..exceptions import StaleReleaseError

    if binding is None:
        raise StaleReleaseError("this lazy release carries no binding to its data; build it again.")
    binding.check(root, digest, None if partition_info is None else partition_info.get("number"))


def _release_partition(part, plan, root, record, keep, bounds, region, person, digests, partition_info, repeats):
    from ..release import assemble

    if len(part) == 0:
        check_binding(root, (0, 0, 0), digests, partition_info)
        out = part.copy()
        out.attrs = dict(part.attrs, geopriv=record)
        return out
    geoms, _, xy, streams = _rows(part, plan, root, keep, bounds, region, person, repeats)
    check_binding(root, streams.digest(), digests, partition_info)
    work = plan.draw(xy, geoms.index, streams)
    out = plan.finish(np.asarray(work, dtype=float))
    return assemble(part, geoms, out, record)


def perturb_dask(
    data,
    epsilon=None,
    *,
    level=None,
    radius=None,
    mechanism=None,
    rng=None,
    grid="auto",
    continuous: bool = False,
    bounds=None,
    region=None,
    keep=(),
    person=None,
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    progress=None,
    budget_store=None,
):
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
    from .budget import driver_store

    with driver_store(budget_store) as store:
        return _perturb_dask(
            data,
            epsilon,
            level=level,
            radius=radius,
            mechanism=mechanism,
            rng=rng,
            grid=grid,
            continuous=continuous,
            bounds=bounds,
            region=region,
            keep=keep,
            person=person,
            max_distortion=max_distortion,
            store=store,
        )


def _perturb_dask(
    data,
    epsilon,
    *,
    level,
    radius,
    mechanism,
    rng,
    grid,
    continuous,
    bounds,
    region,
    keep,
    person,
    max_distortion,
    store,
):
    import dask

    from ..perturb import mechanism_for
    from ..release import check_release_input, plan_release

    mech = mechanism_for(epsilon, level, radius, mechanism, region)
    meta = data._meta
    crs = meta.crs if hasattr(meta, "crs") else None
    if crs is None:
        from ..exceptions import MissingCRSError

        raise MissingCRSError("The dask GeoDataFrame")
    if person is not None and (not hasattr(meta, "columns") or person not in meta.columns):
        from ..exceptions import GeoprivError

        raise GeoprivError(f"person={person!r} is not a column of the data; name the column of stable person ids.")
    # validate the schema (columns, geometry type, CRS) on the empty meta: no data is read
    try:
        check_release_input(meta, keep, bounds, region)
    except Exception as exc:
        from ..exceptions import EmptyInputError

        if not isinstance(exc, EmptyInputError):
            raise
    from ..points import check_coordinates

    check_coordinates(np.empty((0, 2)), crs, pd.Index([]), bounds=bounds)  # CRS kind, bounds in its units
    plan = plan_release(
        crs,
        mech,
        grid=grid,
        continuous=continuous,
        bounds=bounds,
        region=region,
        keep=keep,
        max_distortion=max_distortion,
    )
    extra = {}
    if store is not None:  # what a row costs, as in memory (geopriv.release.point_charge), in the record
        from ..budget import PER_METRE
        from ..release import budget_fields, point_charge

        per_row = point_charge(plan)
        extra = budget_fields(store, PER_METRE, per_row)
    # a seed is bound to the whole data and the public parameters: it replays only for the same ones
    root, drawn = root_entropy(rng, data, [repr(person), plan.fields()], PURPOSE)
    record = make_record(plan.fields(extra), seeded=root.seeded, n=None)
    repeats = store is not None  # a store charges every row: a person may have several (never at one point)
    shipped = dask.delayed(plan, pure=True)  # the plan (and a built mechanism in it) goes to each worker once
    # build time: every row validated once and the whole data checked (ids unique over ALL partitions,
    # declared bounds= / region= not taken from the data), and each partition's digest recorded: the
    # release answers exactly these data, and refuses other rows when computed (StaleReleaseError)
    from ..frame import declared_bounds

    area_frame = plan.frame if mech.frame_policy != "own" else plan.lattice_frame
    areas = []
    if area_frame.area_source == "bounds" and (mech.frame_policy != "own" or bounds is not None):
        areas.append((area_frame.area, "bounds"))
    if region is not None:
        areas.append((declared_bounds(crs, None, region), "region"))
    keep = tuple(keep or ())
    parts = data.to_delayed()
    tasks = [
        dask.delayed(partition_checks, pure=True)(p, plan, root, keep, bounds, region, person, tuple(areas), repeats)
        for p in parts
    ]
    if store is not None:  # the charge's persons and rows, in the same pass over ALL partitions
        from .budget import partition_persons

        tasks += [dask.delayed(partition_persons, pure=True)(p, person) for p in parts]
    computed = dask.compute(*tasks)
    checks, persons = computed[: len(parts)], computed[len(parts) :]
    duplicates = whole_data_checks(checks, tuple(areas))
    if len(duplicates):
        found = [
            lab
            for labs in dask.compute(
                *[dask.delayed(duplicate_labels)(p, person, duplicates, root, repeats) for p in parts]
            )
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
    digests = Binding(root, PURPOSE, [c[2] for c in checks])  # sealed: one-way tags, never shown
    out_meta = meta.copy()
    out_meta.attrs = dict(meta.attrs, geopriv=record)
    result = data.map_partitions(
        release_partition, shipped, root, record, keep, bounds, region, person, digests, repeats=repeats, meta=out_meta
    )
    if store is not None:  # the driver's one charge, before the lazy release exists for anyone to compute
        from ..budget import PER_METRE
        from .budget import charge_at_build, merge_persons

        pk = merge_persons(persons)
        charge_at_build(
            store, pk, per_row, unit=PER_METRE, kind="perturb", fields=plan.fields(extra), rows=int(pk.counts.sum())
        )
    built(rng, drawn)  # only now does a caller's generator advance
    return result
