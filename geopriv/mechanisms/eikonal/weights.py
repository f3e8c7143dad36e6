"""Weights of the eikonal mechanism: make the normaliser s(u) = sum_y w_y exp(-f~_y(u)) flat.

The mechanism normalises exactly (P(Q(u) = y) = w_y exp(-f~_y(u)) / s(u)), so the weights only
have to keep |delta ln s| between neighbouring nodes within the share of the privacy loss the
kernels leave (``budget``: the allowed loss minus the kernels' own Lipschitz bound on each
edge).  :func:`solve_weights` does it with projected Barzilai-Borwein steps on |K w - 1|^2.
"""

from __future__ import annotations

import math

import numpy as np

from ...privacy_map import PrivacyMap
from ..grid import allowed, edge_slices
from .kernels import KernelColumns


def max_normaliser_share(s: np.ndarray, pm: PrivacyMap) -> float:
    """max over neighbouring nodes of |delta ln s| / allowed log-ratio."""
    ny, nx = pm.shape
    ls = np.log(np.maximum(s, 1e-300)).reshape(ny, nx)
    return max(float((np.abs(ls[a] - ls[b]) / al).max()) for (a, b), al in zip(edge_slices(), allowed(pm)))


def relative_share(s: np.ndarray, pm: PrivacyMap, budget) -> float:
    """max over neighbouring nodes of |delta ln s| / budget (per-edge allowance of the normaliser)."""
    ny, nx = pm.shape
    ls = np.log(np.maximum(s, 1e-300)).reshape(ny, nx)
    return max(float((np.abs(ls[a] - ls[b]) / bd).max()) for (a, b), bd in zip(edge_slices(), budget))


def row_blocks(indptr, chunk: int = 10_000_000):
    """(r0, r1, lo, hi) over blocks of CSR rows holding about ``chunk`` entries each (at least one row).

    The one loop behind every O(entries) pass over the kernels (:func:`row_sums`,
    :func:`column_sums`, the checks of :func:`.verification.check_arrays`): memory stays one
    block whatever the raster.
    """
    n = len(indptr) - 1
    r0 = 0
    while r0 < n:
        lo = int(indptr[r0])
        r1 = min(max(int(np.searchsorted(indptr, lo + chunk, side="right")) - 1, r0 + 1), n)
        yield r0, r1, lo, int(indptr[r1])
        r0 = r1


def row_sums(indptr, indices, data, w, chunk: int = 10_000_000, group: int | None = None) -> np.ndarray:
    """sum_k w[indices[k]] * data[k] per CSR row, in float64, in blocks of rows (bounded memory).

    Added in the order the builds add them (:func:`.kernels.band_row_sums`, chunk by chunk): the
    entries of each group of ``group`` consecutive outputs (default :data:`.kernels.CHUNK`) one
    after the other, then the groups' partial sums in output order.  So the normaliser recomputed
    from a held mechanism's rows is the stored one bit for bit.
    """
    from .kernels import CHUNK

    group = CHUNK if group is None else int(group)
    out = np.zeros(len(indptr) - 1)
    for r0, r1, lo, hi in row_blocks(indptr, chunk):
        if hi == lo:
            continue
        vals = w[indices[lo:hi]] * data[lo:hi].astype(np.float64)
        row = np.repeat(np.arange(r0, r1), np.diff(indptr[r0 : r1 + 1]))
        grp = indices[lo:hi] // group
        # runs of one (row, group): columns are sorted in each row, so a run is contiguous
        new = np.ones(hi - lo, bool)
        new[1:] = (row[1:] != row[:-1]) | (grp[1:] != grp[:-1])
        run = np.cumsum(new) - 1
        partial = np.bincount(run, vals)  # sequential within a run, from 0.0
        out[r0:r1] = np.bincount(row[new] - r0, partial, minlength=r1 - r0)  # runs in group order
    return out


def column_sums(indptr, indices, data, vectors, n_columns: int, chunk: int = 10_000_000) -> list:
    """sum_u v[u] * data[u, y] per column y of a CSR matrix, for each v in ``vectors`` (float64).

    In blocks of rows, without a float64 copy of ``data`` (bounded memory on 10^9 entries).
    """
    out = [np.zeros(n_columns) for _ in vectors]
    for r0, r1, lo, hi in row_blocks(indptr, chunk):
        rows = np.repeat(np.arange(r0, r1), np.diff(indptr[r0 : r1 + 1]))
        cols = indices[lo:hi]
        d = data[lo:hi].astype(np.float64)
        for acc, v in zip(out, vectors):
            acc += np.bincount(cols, weights=d * v[rows], minlength=n_columns)
    return out


#: weight iterations without a 1 % better normaliser before a solve stops (the share is not
#: monotone: 50 stopped the 200 x 200 max_step=4 build at 1.09, 150 lets it reach 0.91)
STALL = 150


class _BlockProducts:
    """S @ w and S.T @ r over the column blocks of :class:`~.kernels.KernelColumns`, on threads.

    The blocks are dealt to ``threads`` groups of consecutive columns; scipy's sparse products
    release the GIL, so the groups run in parallel.  No copies of the kernels.
    """

    def __init__(self, S, threads: int):
        self.shape = S.shape
        blocks = [(m0, m0 + b.shape[1], b) for m0, b in S.blocks]
        k = max(1, min(int(threads), len(blocks)))
        nnz = np.cumsum([b.nnz for _, _, b in blocks]) if blocks else np.zeros(0)
        cuts = np.searchsorted(nnz, np.linspace(0, nnz[-1] if len(nnz) else 0, k + 1)[1:-1], side="right")
        edges = [0, *sorted(set(int(c) for c in cuts if 0 < c < len(blocks))), len(blocks)]
        self.groups = [blocks[a:b] for a, b in zip(edges[:-1], edges[1:]) if b > a]
        self.pool = None
        if len(self.groups) > 1:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(len(self.groups))

    def _map(self, fn):
        if self.pool is None:
            return [fn(g) for g in self.groups]
        return list(self.pool.map(fn, self.groups))

    def mul(self, w32):
        def part(group):
            acc = np.zeros(self.shape[0])
            for a, b, blk in group:
                acc += blk @ w32[a:b]
            return acc

        return np.sum(self._map(part), axis=0, dtype=np.float64)

    def rmul(self, r32):
        parts = self._map(lambda group: [blk.T @ r32 for _, _, blk in group])
        return np.concatenate([p for group in parts for p in group]).astype(np.float64)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()


def solve_weights(
    S: KernelColumns,
    cT,
    ostep,
    colmass,
    pm: PrivacyMap,
    budget,
    max_iter: int,
    threads: int = 1,
    solve_cap: float | None = 8.0,
):
    """Nonnegative weights making ln s flat (s = K w, K = S + exp(-T)).

    Projected Barzilai-Borwein gradient on 1/2 |K w - 1|^2 (float32 products), in the
    variables v = w / w0 where w0 = spacing^2 / column mass is the continuous normaliser
    (columns of comparable scale converge together).  The iterations use the kernel
    truncated at travel time ``solve_cap`` (entries below exp(-solve_cap) dropped: the tail
    holds a share (1 + T') exp(-T') of each kernel's mass, about 3e-3 at T' = 8, spread
    smoothly, so it barely moves ln s); iterations on the full kernel (up to ``max_iter``) follow
    only if the exact normaliser misses.  ``budget`` is the per-edge allowance (4 families,
    as :func:`geopriv.mechanisms.grid.allowed`) that |delta ln s| may use; the solve stops when the normaliser uses
    at most 90 % of it or stops improving (the best iterate is kept; ``build`` computes the
    exact normaliser and decides).

    Returns (w, iterations, history of (iteration, relative share), s): ``s`` is the exact
    normaliser of ``w`` (:meth:`KernelColumns.row_sums` + cap term) when the solve computed it for
    the returned weights, else None (the caller computes it).
    """
    w0 = ostep.astype(float) ** 2 / colmass
    goal = 0.9
    history = []
    if solve_cap is not None and solve_cap < -math.log(cT):
        St = S.truncated(np.float32(math.exp(-solve_cap) - cT))
        v, it, hist = _bb(St, cT, w0, pm, budget, goal, max_iter, threads, v=None)
        del St
        history.extend(hist)
        # exact, float64, summed as the on-demand build's pass sums it (same decision, same history)
        w = w0 * v
        s = S.row_sums(w, *pm.shape) + cT * float(w.sum())
        exact = relative_share(s, pm, budget)
        history.append((it, exact))
        if exact < 0.97:
            return w, it, history, s
        # up to max_iter more (100 was too few where the truncated kernels plateau just above the budget)
        v, it2, hist = _bb(S, cT, w0, pm, budget, goal, max_iter, threads, v=v)
        history.extend((it + i, sh) for i, sh in hist)
        return w0 * v, it + it2, history, None
    v, it, hist = _bb(S, cT, w0, pm, budget, goal, max_iter, threads, v=None)
    return w0 * v, it, hist, None


def refine_weights(
    S: KernelColumns, cT, w, w0, tail: np.ndarray, pm: PrivacyMap, budget, max_iter: int, threads: int = 1
):
    """More weight iterations on truncated kernels ``S`` with the dropped tail's part of the normaliser frozen.

    ``tail`` = exact normaliser - (S w + exp(-T) sum w) at the current ``w`` (from a pass over the
    full kernels): the iterations flatten S w' + exp(-T) sum w' + tail.  The tail moves little
    with w (about 0.3 % of the mass, spread smoothly), so the exact normaliser of the result is
    close to what they flattened; the caller measures it exactly again.  What a build with
    kernels on demand does instead of iterating on the full kernels.  ``w0``: the variables'
    scale (:func:`solve_weights`'s).  Returns (w, iterations, history).
    """
    v, it, hist = _bb(S, cT, w0, pm, budget, 0.9, max_iter, threads, v=np.asarray(w, np.float64) / w0, offset=tail)
    return w0 * v, it, hist


def kernel_products(S: KernelColumns, cT, w, threads: int = 1) -> np.ndarray:
    """S w + exp(-T) sum w with the weight iterations' float32 products (what they flatten)."""
    ops = _BlockProducts(S, threads)
    try:
        return ops.mul(np.asarray(w).astype(np.float32)) + cT * float(np.sum(w))
    finally:
        ops.close()


def _bb(S, cT, w0, pm, budget, goal, max_iter, threads, v=None, offset=None):
    """Projected Barzilai-Borwein iterations on 1/2 |K diag(w0) v + offset - 1|^2, v >= 0."""
    ops = _BlockProducts(S, threads)

    def kw(v):
        w = w0 * v
        s = ops.mul(w.astype(np.float32)) + cT * float(w.sum())
        return s if offset is None else s + offset

    if v is None:
        v = np.ones_like(w0)
        s = kw(v)
        v /= float(np.median(s))
    s = kw(v)
    best = (relative_share(s, pm, budget), v)
    history = [(0, best[0])]
    prev_v = prev_g = None
    it = 0
    stall = 0
    while it < max_iter and best[0] > goal and stall < STALL:
        r = s - 1.0
        g = (ops.rmul(r.astype(np.float32)) + cT * float(r.sum())) * w0
        if prev_g is None:
            step = 0.5 / float(np.abs(g).max()) * float(v.mean())
        else:
            dv, dg = v - prev_v, g - prev_g
            den = float(dv @ dg)
            step = float(dv @ dv) / den if den > 0 else 0.5 / float(np.abs(g).max()) * float(v.mean())
        prev_v, prev_g = v, g
        v = np.maximum(v - step * g, 0.0)
        s = kw(v)
        it += 1
        # every iterate is scored (O(nodes), next to the O(entries) products): the iterations are
        # not monotone in the share, and a good iterate between two checks would be lost
        share = relative_share(s, pm, budget)
        if it % 25 == 0:
            history.append((it, share))
        if share < best[0] * (1 - 1e-2):
            best = (share, v)
            stall = 0
        else:
            stall += 1
            if share < best[0]:
                best = (share, v)
    ops.close()
    return best[1], it, history
