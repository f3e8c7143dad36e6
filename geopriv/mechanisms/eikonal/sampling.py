"""Sampling an eikonal mechanism: input locations to output nodes to released positions.

A location is rounded to one of the 4 nodes around it with its bilinear weights (randomised
rounding), an output is drawn from that node's row (exact, float64 cumulative tables), and the
output's position (or its remapped one) is jittered within its lattice box.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ...exceptions import GeometryError, ParameterError
from ...keys import rows_of
from .weights import row_blocks


def row(mech, node: int):
    """Output distribution of one input node: (output indices, probabilities, floor mass).

    ``probabilities`` covers the kernel support; every other output y has probability
    ``weights[y] * exp(-cap) / s``, totalling ``floor mass`` (all together sum to 1).
    """
    lo, hi = mech.indptr[node], mech.indptr[node + 1]
    cols = mech.indices[lo:hi]
    s = mech.normaliser[node]
    cT = math.exp(-mech.cap)
    p = mech.weights[cols] * (mech.kernel[lo:hi].astype(np.float64) + cT) / s
    floor = cT * (mech.weights.sum() - mech.weights[cols].sum()) / s
    return cols, p, floor


def distribution(mech, x: float, y: float) -> np.ndarray:
    """P(Q(u) = y) for all outputs at a location u = (x, y) in the map's CRS (bilinear mixture of nodes)."""
    nodes, lam = _corners(mech, np.array([[x, y]], float), outside="error", labels=["location"])
    p = np.zeros(len(mech.weights))
    cT = math.exp(-mech.cap)
    src = mech.rows_for(nodes[0])  # the mechanism, or its rows computed on demand
    for k in range(4):
        node, wt = int(nodes[0, k]), float(lam[0, k])
        if wt == 0:
            continue
        lo, hi = src.indptr[node], src.indptr[node + 1]
        s = mech.normaliser[node]
        q = mech.weights * cT / s
        q[src.indices[lo:hi]] += mech.weights[src.indices[lo:hi]] * src.kernel[lo:hi] / s
        p += wt * q
    return p


def _corners(mech, xy: np.ndarray, outside: str, labels):
    """Four corner nodes and their bilinear weights for each location (CRS of the map)."""
    base, tx, ty = _cell(mech, xy, outside, labels)
    nx = mech.shape[1]
    nodes = np.stack([base, base + 1, base + nx, base + nx + 1], axis=1)
    lam = np.stack([(1 - ty) * (1 - tx), (1 - ty) * tx, ty * (1 - tx), ty * tx], axis=1)
    return nodes, lam


def outside_map(pm, xy: np.ndarray) -> np.ndarray:
    """True for the locations ``xy`` ((n, 2), the map's CRS) outside the map's raster (or not finite)."""
    xmin, ymin, xmax, ymax = pm.bounds
    x, y = np.asarray(xy[:, 0], float), np.asarray(xy[:, 1], float)
    return ~((x >= xmin) & (x <= xmax) & (y >= ymin) & (y <= ymax))


def plain_labels(labels) -> list:
    """Row labels as Python values (``0``, ``'a'``), never numpy scalars (``np.int64(0)``) in a message."""
    values = labels.tolist() if hasattr(labels, "tolist") else list(labels)
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def _crs_text(crs) -> str:
    code = crs.to_string()
    return code if code == crs.name else f"{code} '{crs.name}'"


def outside_error(pm, labels, points_crs=None) -> GeometryError:
    """The error for rows outside the map's raster: plain labels, both CRSs, and how to go on (per front end).

    ``points_crs``: the CRS the points were given in, when it is known (the release path, a front
    end's early check); when it is not the map's, the message says that geopriv reprojected them.
    """
    from pyproj import CRS

    from ...exceptions import Fix

    note = ""
    if points_crs is not None:
        pc = CRS.from_user_input(points_crs)
        if not pc.equals(pm.crs):
            note = (
                f"The points are in {_crs_text(pc)}, not the map's CRS: geopriv reprojected them to "
                f"{pm.crs.to_string()} for this check and the release, so they are outside the map's area "
                f"(unless {pc.to_string()} is not the CRS their coordinates are in). "
            )
    options = (
        f"{note}Drop them, build the mechanism on a raster that covers them, or release them as if they were "
        "at the nearest point of the raster"
    )
    fix = Fix(
        "outside_clamp",
        python=f"{options} with mech.with_outside('clamp') (the documented fallback).",
        cli=f"{options} with --outside clamp (the documented fallback).",
        qgis=f"{options}: set 'Points outside the raster' to 'Release them as if at the nearest point of the raster'.",
    )
    return GeometryError(
        f"lie outside the mechanism's privacy map (its raster's extent in {_crs_text(pm.crs)})",
        plain_labels(labels),
        fix,
    )


def _cell(mech, xy: np.ndarray, outside: str, labels):
    """Upper-left node of the cell of nodes holding each location, and the fractions (tx, ty)."""
    pm = mech.privacy_map
    ny, nx = pm.shape
    t = pm.transform
    x, y = xy[:, 0], xy[:, 1]
    out = outside_map(pm, xy)
    if out.any() and outside == "error":
        raise outside_error(pm, np.asarray(labels, dtype=object)[out])
    fx = np.clip((x - t.c) / t.a - 0.5, 0.0, nx - 1.0)
    fy = np.clip((y - t.f) / t.e - 0.5, 0.0, ny - 1.0)
    j0 = np.minimum(np.floor(fx).astype(np.int64), nx - 2)
    i0 = np.minimum(np.floor(fy).astype(np.int64), ny - 2)
    return i0 * nx + j0, fx - j0, fy - i0


#: padded entries per group of rows when building the cumulative tables
TABLE_BLOCK = 4_000_000


def tables(mech):
    """Per-row cumulative probabilities (row-local, float64) and the floor sampler."""
    n = len(mech.normaliser)
    cdf = row_cdf(mech.indptr, mech.indices, mech.kernel, mech.weights, mech.normaliser)
    ip = mech.indptr
    sparse_mass = np.zeros(n)
    nonempty = ip[1:] > ip[:-1]
    sparse_mass[nonempty] = cdf[ip[1:][nonempty] - 1]
    return (cdf, sparse_mass, *floor_tables(mech))


def floor_tables(mech):
    """(floor mass per row, cumulative weights): the part of every row outside its kernel support.

    Outputs y have probability w_y exp(-T) / s there (all outputs, including those in the row's
    support: the kernel there is S + exp(-T)).
    """
    cT = math.exp(-mech.cap)
    cumw = np.cumsum(mech.weights)
    total = float(cumw[-1])
    cumw /= total
    cumw[-1] = 1.0
    floor_mass = cT * total / mech.normaliser
    return floor_mass, cumw


def row_cdf(ip, idx, ker, w, s, block: int = TABLE_BLOCK, threads: int | None = None) -> np.ndarray:
    """cumsum(w[idx] * ker) / s within each row, in float64 (bit for bit the per-row computation).

    Products and divisions run over blocks of rows at once; only the accumulation is per row
    (one in-place call each).  Blocks are independent: ``threads`` (default: up to 4, the
    machine's cores) work on them in parallel; numpy releases the GIL in the arithmetic.
    """
    cdf = np.empty(len(ker), np.float64)  # the only array the size of the kernels
    ip = np.asarray(ip, np.int64)
    s = np.asarray(s, np.float64)

    def part(r0, r1, lo, hi):
        seg = cdf[lo:hi]
        np.multiply(w[idx[lo:hi]], ker[lo:hi], out=seg)
        for a, b in zip(ip[r0:r1] - lo, ip[r0 + 1 : r1 + 1] - lo):
            if b - a > 1:
                np.cumsum(seg[a:b], out=seg[a:b])
        seg /= np.repeat(s[r0:r1], np.diff(ip[r0 : r1 + 1]))

    parts = list(row_blocks(ip, block))
    threads = min(4, os.cpu_count() or 1) if threads is None else int(threads)
    if threads <= 1 or len(parts) <= 1:
        for p in parts:
            part(*p)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(threads, len(parts))) as ex:
            list(ex.map(lambda p: part(*p), parts))
    return cdf


def sample_nodes(mech, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Output indices drawn from the rows of the given input nodes (exact, float64)."""
    n = len(nodes)
    raw = rng.random(n)
    # the floor's uniform is drawn for every row, used or not: the number of draws depends on n
    # only, so a row's output never depends on which other rows are sampled with it (the keyed
    # streams of geopriv.distributed rely on this)
    v = rng.random(n)
    return draw(mech, nodes, raw, v)


def draw(mech, nodes: np.ndarray, raw: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Outputs for ``nodes`` from two uniforms per node (``raw`` picks the row's part, ``v`` the floor's output).

    ``mech`` is anything with ``sampling_tables``, ``indptr`` and ``indices`` holding these
    nodes' rows (the mechanism, or a snapshot of rows computed on demand).
    """
    cdf, sparse_mass, floor_mass, cumw = mech.sampling_tables
    nodes = np.asarray(nodes, np.int64)
    n = len(nodes)
    u = raw * (sparse_mass[nodes] + floor_mass[nodes])
    out = np.empty(n, np.int64)
    in_floor = u >= sparse_mass[nodes]
    k = np.flatnonzero(in_floor)
    if len(k):
        out[k] = np.minimum(np.searchsorted(cumw, v[k], side="right"), len(cumw) - 1)
    k = np.flatnonzero(~in_floor)
    if len(k):
        r = nodes[k]
        lo = mech.indptr[r].copy()
        hi = mech.indptr[r + 1] - 1
        target = u[k]
        while True:  # smallest position in [lo, hi] with cdf > target
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) >> 1
            go_right = cdf[mid] <= target
            lo = np.where(active & go_right, mid + 1, lo)
            hi = np.where(active & ~go_right, mid, hi)
        out[k] = mech.indices[lo]
    return out


def sample(
    mech, xy, rng: np.random.Generator, *, outside: str | None = None, jitter: bool = True, labels=None, progress=None
) -> np.ndarray:
    """Release locations ``xy`` ((n, 2) in the map's CRS): a new (n, 2) array.

    Each location is rounded to one of its 4 surrounding nodes with its bilinear weights,
    an output node is drawn from that node's distribution, and (``jitter=True``) moved
    uniformly within its lattice box.  ``xy`` is not modified.
    """
    outside = mech.outside if outside is None else outside
    if outside not in ("error", "clamp"):
        raise ParameterError("outside must be 'error' (default) or 'clamp'.")
    xy = np.asarray(xy, float)
    n = len(xy)
    labels = np.arange(n) if labels is None else labels
    base, tx, ty = _cell(mech, xy, outside, labels)
    out = np.empty((n, 2))
    chunk = 1_000_000
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        gen = rng if (start, stop) == (0, n) else rows_of(rng, np.arange(start, stop))  # per-row streams: these rows
        # bilinear randomised rounding: x and y rounded up independently with their fractions
        up_x = gen.random(stop - start) < tx[start:stop]
        up_y = gen.random(stop - start) < ty[start:stop]
        node = base[start:stop] + up_y * mech.shape[1] + up_x
        y = mech.sample_nodes(node, gen)
        pos = mech.release_xy[y].copy()
        if jitter:
            hx, hy = mech.privacy_map.cell_size
            half = mech.output_step[y][:, None] * np.array([hx, hy]) * 0.5
            pos += (gen.random((stop - start, 2)) * 2.0 - 1.0) * half
        out[start:stop] = pos
        if progress is not None:
            progress(stop, n)
    return out
