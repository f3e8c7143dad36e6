"""``perturb`` on dask-geopandas: the in-memory release plan, with noise keyed by person and content.

The public part of the release (frame, lattice, finite-precision bound, provenance record) is
:func:`geopriv.release.plan_release`, built once on the client; each partition validates its
rows and runs the plan's ``draw`` and ``finish`` with per-row streams keyed by (root, the row's
identity, its coordinates) (:mod:`geopriv.keys`).  Identities are checked unique over the whole
frame by a reduction that every output partition waits for.
"""
from __future__ import annotations

import contextlib
import gc

import numpy as np
import pandas as pd

from ..frame import DEFAULT_MAX_DISTORTION
from ..keys import (
    Binding,
    check_unique,
    float_words,
    fold_digests,
    identity_digests,
    row_identities,
    row_streams,
    shown_labels,
)
from ..provenance import make_record
from . import root_entropy

__all__ = ["perturb_dask", "release_partition", "partition_checks", "whole_data_checks"]

#: the purpose a perturb release's per-row keys are bound to (see geopriv.keys)
PURPOSE = "perturb"


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


def _rows(part, plan, root, keep, bounds, region, person):
    """Validate one partition's rows exactly as its release does; its points, identity digests, xy and streams."""
    from ..release import check_release_input

    geoms, xy = check_release_input(part, keep, bounds, region)  # attributes first: no coordinate reaches a message
    labels = geoms.index
    ids, _ = row_identities(part, person, refuse_positions=True)
    a, b = identity_digests(ids, "person id" if person is not None else "index label", labels)
    check_unique(fold_digests(a, b), labels)
    plan.check_inside(xy, labels)
    return geoms, (a, b), xy, row_streams(root, PURPOSE, (a, b), float_words(xy))


def partition_checks(part, plan, root, keep=(), bounds=None, region=None, person=None, areas=()):
    """Build time, one partition: the rows validated, and what binds and checks the whole release.

    Returns (folded identity digests, the edges of each declared area its points touch, the
    partition's digest (rows, keyed multiset hash of (identity, content))).
    """
    from ..frame import touched_edges

    if len(part) == 0:
        return np.zeros(0, np.uint64), np.zeros((len(areas), 4), bool), (0, 0, 0)
    _, (a, b), xy, streams = _rows(part, plan, root, keep, bounds, region, person)
    touched = np.array([touched_edges(xy, rect) for rect, _ in areas], dtype=bool).reshape(len(areas), 4)
    return fold_digests(a, b), touched, streams.digest()


def duplicate_labels(part, person, duplicates):
    """Build time, when ids repeat across partitions: the labels of this partition's rows among them."""
    if len(part) == 0:
        return []
    ids, labels = row_identities(part, person, refuse_positions=True)
    folded = fold_digests(*identity_digests(ids, "person id" if person is not None else "index label", labels))
    return list(labels[np.isin(folded, duplicates)])


def whole_data_checks(checks, areas=()) -> np.ndarray:
    """The checks over ALL partitions: no declared area taken from the data; the folded ids seen twice."""
    from ..frame import check_area_not_from_data

    for k, (_, source) in enumerate(areas):
        check_area_not_from_data(np.logical_or.reduce([c[1][k] for c in checks]), source)
    arrays = [np.asarray(c[0], dtype=np.uint64) for c in checks]
    allv = np.sort(np.concatenate(arrays)) if arrays else np.zeros(0, np.uint64)
    return np.unique(allv[1:][allv[1:] == allv[:-1]])


def release_partition(part, plan, root, record: dict, keep=(), bounds=None, region=None, person=None,
                      digests=None, partition_info=None):
    """One partition's release: the rows validated and checked against the build's digest, then keyed draws."""
    with paused_cyclic_gc():
        return _release_partition(part, plan, root, record, keep, bounds, region, person, digests, partition_info)


def check_binding(root, digest, binding, partition_info=None) -> None:
    """Refuse rows other than those of a partition the release was built on (:meth:`geopriv.keys.Binding.check`)."""
    from ..exceptions import StaleReleaseError

    if binding is None:
        raise StaleReleaseError("this lazy release carries no binding to its data; build it again.")
    binding.check(root, digest, None if partition_info is None else partition_info.get("number"))


def _release_partition(part, plan, root, record, keep, bounds, region, person, digests, partition_info):
    from ..release import assemble

    if len(part) == 0:
        check_binding(root, (0, 0, 0), digests, partition_info)
        out = part.copy()
        out.attrs = dict(part.attrs, geopriv=record)
        return out
    geoms, _, xy, streams = _rows(part, plan, root, keep, bounds, region, person)
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
    """
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
    plan = plan_release(crs, mech, grid=grid, continuous=continuous, bounds=bounds, region=region, keep=keep,
                        max_distortion=max_distortion)
    root = root_entropy(rng)
    record = make_record(plan.fields(), seeded=root.seeded, n=None)
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
    checks = dask.compute(*[dask.delayed(partition_checks, pure=True)(p, plan, root, keep, bounds, region, person,
                                                                      tuple(areas)) for p in parts])
    duplicates = whole_data_checks(checks, tuple(areas))
    if len(duplicates):
        from ..exceptions import IdentityError

        found = [lab for labs in dask.compute(*[dask.delayed(duplicate_labels)(p, person, duplicates) for p in parts])
                 for lab in labs]
        raise IdentityError("share their person id with rows of other partitions: two rows would answer for the same "
                            "person", shown_labels(found), "Make the ids unique over the whole data (a person id "
                            "column: person='<column>').", count=len(found))
    digests = Binding(root, PURPOSE, [c[2] for c in checks])  # sealed: one-way tags, never shown
    out_meta = meta.copy()
    out_meta.attrs = dict(meta.attrs, geopriv=record)
    return data.map_partitions(release_partition, shipped, root, record, keep, bounds, region, person, digests,
                               meta=out_meta)
