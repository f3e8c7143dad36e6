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
from ..keys import check_unique, float_words, fold_digests, identity_digests, row_identities, row_streams
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


def partition_checks(part, person=None, area=None):
    """What the whole-data checks need from one partition: (folded identity digests, touched area edges).

    ``part`` is the partition, or only what the checks read of it (the id column, or the index
    alone: a column projection, so that a real source reads just that column for the checks).
    Refuses positional and untyped identities and duplicates inside the partition (naming rows).
    """
    from ..frame import touched_edges

    if isinstance(part, pd.Index):
        part = pd.DataFrame(index=part)
    ids, labels = row_identities(part, person, refuse_positions=True)
    a, b = identity_digests(ids, "person id" if person is not None else "index label", labels)
    folded = fold_digests(a, b)
    check_unique(folded, labels)
    touched = np.zeros(4, bool)
    if area is not None and len(part):
        from ..release import check_release_input

        geoms, xy = check_release_input(part, (), None, None, attributes=False)
        touched = touched_edges(xy, area)
    return folded, touched


def whole_data_checks(*parts, area_source=None) -> np.ndarray:
    """The checks over ALL partitions: a declared area not taken from the data; the folded ids seen twice.

    Returns the duplicated digests (sorted; usually empty): each release partition refuses its
    rows among them, so the error names rows.
    """
    from ..frame import check_area_not_from_data

    if area_source is not None and parts:
        check_area_not_from_data(np.logical_or.reduce([p[1] for p in parts]), area_source)
    arrays = [np.asarray(p[0], dtype=np.uint64) for p in parts]
    allv = np.sort(np.concatenate(arrays)) if arrays else np.zeros(0, np.uint64)
    return np.unique(allv[1:][allv[1:] == allv[:-1]])


def release_partition(part, plan, root, record: dict, keep=(), bounds=None, region=None, person=None,
                      duplicates=None):
    """One partition's release: validation, identity checks, then per-row keyed draws and finish."""
    with paused_cyclic_gc():
        return _release_partition(part, plan, root, record, keep, bounds, region, person, duplicates)


def _release_partition(part, plan, root, record, keep, bounds, region, person, duplicates):
    from ..exceptions import IdentityError
    from ..release import assemble, check_release_input

    if len(part) == 0:
        out = part.copy()
        out.attrs = dict(part.attrs, geopriv=record)
        return out
    geoms, xy = check_release_input(part, keep, bounds, region)
    labels = geoms.index
    ids, _ = row_identities(part, person, refuse_positions=True)
    a, b = identity_digests(ids, "person id" if person is not None else "index label", labels)
    folded = fold_digests(a, b)
    check_unique(folded, labels)
    if duplicates is not None and len(duplicates):
        shared = np.isin(folded, duplicates)
        if shared.any():
            raise IdentityError(
                "share their person id with rows of other partitions: two rows would answer for the same person",
                labels[shared], "Make the ids unique over the whole data (e.g. a person id column: person='<column>').")
    plan.check_inside(xy, labels)
    streams = row_streams(root, PURPOSE, (a, b), float_words(xy))
    work = plan.draw(xy, labels, streams)
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
    the parameters are raised here, before anything is computed), and so is the secret root:
    computing the result twice on the same data gives the same points, and a row whose identity
    or location changed draws new, independent noise.  ``person`` names the column of stable
    person ids (default: the index labels, which must then not be a RangeIndex).  The returned
    lazy object holds the root: keep it like the data.  ``progress`` is ignored (use dask's
    diagnostics).  The record is the same on every partition, with ``n`` None.
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
    area_frame = plan.frame if mech.frame_policy != "own" else plan.lattice_frame
    declared = area_frame.area_source in ("bounds", "region") and (mech.frame_policy != "own" or bounds is not None)
    area = area_frame.area if declared else None
    # the checks read only what they need (dask projects the columns down to the source: a parquet
    # read of the id column or the index), so the data are not held in memory until the reduction ends
    if area is not None:
        geom = meta.geometry.name if hasattr(meta, "geometry") else None
        src = data if geom is None else data[[c for c in (person, geom) if c is not None]]
    else:
        src = data[[person]] if person is not None else data.index
    checks = [dask.delayed(partition_checks, pure=True)(p, person, area) for p in src.to_delayed()]
    duplicates = dask.delayed(whole_data_checks, pure=True)(*checks, area_source=area_frame.area_source if declared else None)
    out_meta = meta.copy()
    out_meta.attrs = dict(meta.attrs, geopriv=record)
    return data.map_partitions(release_partition, shipped, root, record, tuple(keep or ()), bounds, region, person,
                               duplicates, meta=out_meta)
