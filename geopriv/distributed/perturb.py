"""``perturb`` on dask-geopandas: the in-memory release plan, with noise keyed by row.

The public part of the release (frame, lattice, finite-precision bound, provenance record) is
:func:`geopriv.release.plan_release`, built once on the client; each partition validates its
rows and runs the plan's ``draw`` and ``finish`` with one random stream per block of row keys
(see :mod:`geopriv.distributed`).
"""
from __future__ import annotations

import contextlib
import gc

import numpy as np
import pandas as pd

from ..frame import DEFAULT_MAX_DISTORTION
from ..provenance import make_record
from . import BLOCK, root_entropy, row_keys

__all__ = ["perturb_dask", "release_partition"]


def _block_generator(root: int, block: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(root, spawn_key=(int(block),))))


def _dummy_point(plan):
    """A public point inside the release's domain, for the absent slots of a block (its draws are discarded)."""
    area = plan.rect or plan.lattice_frame.area
    if area is None and plan.mechanism.frame_policy == "own":
        area = plan.mechanism.public_bounds(plan.crs)
    if area is None:  # the whole CRS (longitude/latitude): the origin
        return np.zeros(2)
    return np.array([(area[0] + area[2]) / 2.0, (area[1] + area[3]) / 2.0])


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


def release_partition(part, plan, root: int, record: dict, keep=(), bounds=None, region=None):
    """One partition's release: validation, then per block of row keys a keyed stream, draw and finish."""
    with paused_cyclic_gc():
        return _release_partition(part, plan, root, record, keep, bounds, region)


def _release_partition(part, plan, root, record, keep, bounds, region):
    from ..exceptions import GeoprivError
    from ..release import assemble, check_release_input

    if len(part) == 0:
        out = part.copy()
        out.attrs = dict(part.attrs, geopriv=record)
        return out
    geoms, xy = check_release_input(part, keep, bounds, region)
    labels = geoms.index
    plan.check_inside(xy, labels)
    keys, integer = row_keys(labels)
    increasing = bool(np.all(keys[1:] > keys[:-1]))  # e.g. a RangeIndex partition: no sort needed
    order = np.arange(len(keys)) if increasing else np.argsort(keys, kind="stable")
    if not increasing and np.any(keys[order][1:] == keys[order][:-1]):
        raise GeoprivError(
            "The index has duplicate labels: each row's noise is keyed by its index label, so two rows would share "
            "their noise. Give every row a unique label first (e.g. ddf = ddf.reset_index(drop=True) before "
            "repartitioning, or a unique id column as the index)."
        )
    block_size = BLOCK if integer else 1
    blocks = keys // np.uint64(block_size)
    slots = (keys % np.uint64(block_size)).astype(np.int64)
    out = np.empty_like(xy)
    dummy = _dummy_point(plan)
    starts = np.flatnonzero(np.r_[True, blocks[order][1:] != blocks[order][:-1]])
    bounds_ = np.r_[starts, len(order)]
    for a, b in zip(bounds_[:-1], bounds_[1:]):
        rows = order[a:b]
        full = np.tile(dummy, (block_size, 1))
        full[slots[rows]] = xy[rows]
        named = np.full(block_size, None, dtype=object)
        named[slots[rows]] = np.asarray(labels[rows], dtype=object)
        work = plan.draw(full, pd.Index(named), _block_generator(root, int(blocks[rows[0]])))
        out[rows] = plan.finish(np.array(work[slots[rows]], dtype=float))
    result = assemble(part, geoms, out, record)
    return result


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
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    progress=None,
):
    """Lazy :func:`geopriv.perturb` of a dask-geopandas GeoDataFrame or GeoSeries (same parameters).

    Everything public is fixed now (the frame, lattice, bound and provenance record: errors in
    the parameters are raised here, before anything is computed), and so is the root entropy:
    computing the result twice gives the same points.  ``progress`` is ignored (use dask's
    diagnostics).  The record is the same on every partition, with ``n`` None (the output shows it).
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
    # validate the schema (columns, geometry type, CRS) on the empty meta: no data is read
    try:
        check_release_input(meta, keep, bounds, region)
    except Exception as exc:
        from ..exceptions import EmptyInputError

        if not isinstance(exc, EmptyInputError):
            raise
    from .._points import check_coordinates

    check_coordinates(np.empty((0, 2)), crs, pd.Index([]), bounds=bounds)  # CRS kind, bounds in its units
    plan = plan_release(crs, mech, grid=grid, continuous=continuous, bounds=bounds, region=region, keep=keep,
                        max_distortion=max_distortion)
    root, seeded = root_entropy(rng)
    record = make_record(plan.fields(), seeded=seeded, n=None)
    shipped = dask.delayed(plan, pure=True)  # the plan (and a built mechanism in it) goes to each worker once
    out_meta = meta.copy()
    out_meta.attrs = dict(meta.attrs, geopriv=record)
    return data.map_partitions(release_partition, shipped, root, record, tuple(keep or ()), bounds, region,
                               meta=out_meta)
