"""Eikonal mechanism: location-dependent privacy from a privacy level map.

Koufogiannis and Pappas. "Location-dependent privacy". IEEE CDC 2016 (arXiv:1604.02264),
Algorithm 1; also Koufogiannis' PhD thesis (UPenn 2017), chapter 6, Algorithm 3.

Definition (their Definition 3, local Lipschitz privacy)
    For every set S of outputs, ln P(Q(u) in S) is locally Lipschitz in u with constant
    epsilon(u).  Integrated along a path: two locations joined by a segment are at most
    exp(integral of epsilon along it) times more or less likely to produce any output.

Derivation note (what is built here and why it is exact)
--------------------------------------------------------
Algorithm 1 takes, for every output y, a solution f_y of the eikonal equation
|grad f_y| = epsilon, f_y(y) = 0, and weights w(y) >= 0 with sum_y w(y) exp(-f_y(u)) = 1;
then P(Q(u) = y) = w(y) exp(-f_y(u)) is private because ln P(Q(u) = y) = ln w(y) - f_y(u) has
gradient norm epsilon(u).  Taken literally (outputs = inputs, one square solve) it fails on
real maps: negative weights; clipping them breaks the guarantee.  We keep the *structure*
and change what makes it fragile:

1. Grid.  Inputs are the raster's cell centres (nodes).  The discrete guarantee checked is:
   for every 8-neighbour pair of nodes a, b and every output y,
       |ln P(Q(a) = y) - ln P(Q(b) = y)| <= |a - b| (epsilon(a) + epsilon(b)) / 2,
   the right-hand side being the integral of epsilon along the segment when epsilon is
   constant on cells (or linear between nodes).  Ratios of sums are bounded by the largest
   ratio, so every set S of outputs is covered.
2. Kernels.  f_y is a discrete eikonal solution: the shortest travel time from y on the
   16-neighbour grid graph whose edges carry the integral of (1 - margin) * epsilon along
   them (Dijkstra, as in Tsitsiklis 1995, the paper's reference [13]; within ~3 % of the
   Euclidean geodesic).  Shortest-path distances satisfy |f_y(a) - f_y(b)| <= w(a, b) on
   every edge exactly, so no numerical error can break the guarantee.  (``solver="fmm"``
   uses fast marching, scikit-fmm, instead; its solutions overshoot by up to ~20 % next to
   the source and at jumps of epsilon, so they are then made exactly Lipschitz by a min-plus
   envelope that only lowers f_y.)  Any 1-Lipschitz transformation keeps the property, so
   we also use
       f~_y = min(sqrt(f_y^2 + A_y^2) - A_y, T):
   the hyperbolic apex (A_y ~ epsilon times the local output spacing, where outputs are
   thinned) removes the cusp of exp(-f) at y, which makes sums over a lattice of outputs
   smooth, and the cap T makes the kernel exactly "sparse + constant": exp(-f~) = S +
   exp(-T) with S zero beyond travel time T.  The cap keeps the guarantee (a minimum of
   Lipschitz functions), unlike truncation to zero.
   Real rasters (jumps between municipalities, single cells of sea inside a city) cannot be
   normalised with nonnegative weights (the paper's "not smooth enough" failure), so the
   kernel map is first lowered where needed: 1/epsilon made ``smooth``-Lipschitz and
   epsilon allowed to change by at most a factor exp(``jump``) between neighbouring cells
   (lowering only; the target map is unchanged).
3. Outputs.  A lattice over the raster padded by a few noise lengths on each side (so
   locations at the edge are not pushed inwards), thinned to every 2nd node where
   spacing * epsilon stays below ``output_spacing``.
4. Weights and exact normalisation.  w >= 0 from projected Barzilai-Borwein gradient steps
   on |K w - 1|^2 (sparse products on threads), started at the continuous normaliser.  They need not solve sum_y w exp(-f~) = 1 exactly: we
   normalise exactly, P(Q(u) = y) = w(y) exp(-f~_y(u)) / s(u) with s(u) = sum_y w exp(-f~),
   and the log-ratio between neighbours is then <= (1 - margin) * allowed + |delta ln s|.
   The weights only have to make ln s flat to within ``margin`` of the allowed loss.
5. Verification.  :meth:`EikonalMechanism.verify` recomputes, from the stored arrays, the
   realised |delta ln P| / allowed over every neighbouring pair of nodes and every output
   (the cap term outside each kernel's support is checked through ln s) and reports the
   maximum and where it is.  ``build`` refuses to return a mechanism above 1 + 1e-9.

Inputs between nodes
--------------------
A location u inside the cell formed by four neighbouring nodes is released as node a with
the bilinear weights of u (randomised rounding: x and y rounded independently, with
probability equal to the fractional position), then sampled from that node's row.  Hence
P(Q(u) in S) = sum_a lambda_a(u) P(Q(a) in S), a convex combination, so:
  * P(Q(u) in S) is continuous in u (no jumps at cell borders);
  * for u, v in the same cell, the log-ratio is at most the largest log-ratio between two
    corners of the cell (mixtures of distributions pairwise within e^L are within e^L), i.e.
    at most the allowed loss between the two farthest corners; between cells, chain along
    any path of cells.
  * Outside the nodes' hull but inside the raster (half a cell at the border) and, with
    ``with_outside("clamp")``, outside the raster, u is moved to the nearest point of the hull
    first (a 1-Lipschitz map), so it gets the guarantee of that point.
The infinitesimal constant of this interpolation can exceed epsilon inside a cell (up to
(e^L - 1)/L for a per-edge loss L); the guarantee is the grid one stated above, at the
resolution of the raster.

Released points
---------------
The output node plus uniform jitter within +- half its lattice spacing (post-processing: it
does not change the guarantee), so releases do not sit on a visible lattice.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import time
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..exceptions import (
    CRSError,
    GeometryError,
    InfeasibleMechanismError,
    MechanismFileError,
)
from ..privacy_map import PrivacyMap, affine6, edge_weights, lipschitz_envelope
from .grid import allowed as _allowed, edge_slices as _edge_slices, mean_ground_scale as _mean_ground_scale

__all__ = ["EikonalMechanism", "VerifyReport"]

FORMAT = "geopriv.eikonal"
FORMAT_VERSION = 1  # full files: the kernels are stored
COMPACT_VERSION = 2  # compact files: the kernels are recomputed from the stored kernel rate map at load
TOLERANCE = 1e-9
# largest relative difference allowed between the stored normaliser and the one recomputed from
# the weights and kernels (the build stores exactly that recomputation; float64 sums of positive
# terms in another order differ by far less)
NORMALISER_RTOL = 1e-10
FMM_SLACK = 0.98
# window half-sizes tried for each output (cells): about 6 % apart, so windows are rarely much
# larger than the kernel's support
_RADII = np.unique(np.round(4 * 1.06 ** np.arange(90)).astype(int))


# ============================================================================================
# verification report
# ============================================================================================
@dataclass(frozen=True, eq=False)
class VerifyReport:
    """Realised local Lipschitz constant of a mechanism against its privacy map.

    Attributes
    ----------
    max_ratio : float
        max over neighbouring node pairs (a, b) and outputs y of
        |ln P(Q(a)=y) - ln P(Q(b)=y)| / (|a - b| (eps(a) + eps(b)) / 2), lengths in ground
        metres.  <= 1 means the guarantee holds on the grid.
    normaliser_ratio : float
        The same maximum for the normaliser term |delta ln s| alone (the part of the budget
        the weights used).
    worst : dict
        Where ``max_ratio`` is reached: the two raster (row, col) nodes, the output index and
        its position (CRS), the realised and allowed log-ratios.
    node_ratio : ndarray (ny, nx)
        Largest ratio over the edges at each node (for maps).
    n_nodes, n_outputs, n_edges : int
    seconds : float
    normaliser_mismatch : float
        Largest relative difference between the stored normaliser and the one recomputed
        from the weights and kernels (what sampling really divides by).  The ratios above are
        computed with the recomputed one; a mismatch above ``NORMALISER_RTOL`` (1e-10) means
        the arrays were edited after the build, and the report is not ``ok``.
    """

    max_ratio: float
    normaliser_ratio: float
    worst: dict
    node_ratio: np.ndarray = field(repr=False)
    n_nodes: int = 0
    n_outputs: int = 0
    n_edges: int = 0
    seconds: float = 0.0
    tolerance: float = TOLERANCE
    normaliser_mismatch: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the realised constant is within the target (up to ``tolerance``) and the
        stored normaliser is the one the weights and kernels give."""
        return bool(self.max_ratio <= 1.0 + self.tolerance and self.normaliser_mismatch <= NORMALISER_RTOL)

    def to_dict(self) -> dict:
        return {
            "max_ratio": self.max_ratio,
            "normaliser_ratio": self.normaliser_ratio,
            "worst": self.worst,
            "n_nodes": self.n_nodes,
            "n_outputs": self.n_outputs,
            "n_edges": self.n_edges,
            "seconds": self.seconds,
            "tolerance": self.tolerance,
            "normaliser_mismatch": self.normaliser_mismatch,
            "ok": self.ok,
        }

    def __str__(self) -> str:
        w = self.worst
        return (
            f"realised/target local Lipschitz constant: max {self.max_ratio:.6f} "
            f"({'OK' if self.ok else 'VIOLATED'}; normaliser share {self.normaliser_ratio:.4f}) over "
            f"{self.n_edges} neighbouring node pairs x {self.n_outputs} outputs; worst between raster nodes "
            f"{w.get('node_a')} and {w.get('node_b')}, output {w.get('output')}"
            + (
                f"; the stored normaliser differs from the weights' row sums by up to {self.normaliser_mismatch:.3g} "
                "(relative): the arrays were edited after the build"
                if self.normaliser_mismatch > NORMALISER_RTOL else ""
            )
        )


# ============================================================================================
# kernels: one output at a time (module level so worker processes can run it)
# ============================================================================================
_SHARED: dict = {}


def _kernel_columns(outputs: np.ndarray):
    """Kernels of the given outputs: (counts, rows int32, values float64, colmass, sweeps)."""
    if _SHARED["solver"] == "graph":
        return _kernel_columns_graph(outputs)
    return _kernel_columns_fmm(outputs)


def _stencil_graph(kp: np.ndarray, hy: float, hx: float):
    """Sparse 16-neighbour grid graph; edge weight = integral of the rate along the segment.

    8-neighbour edges: length * mean of the two end cells.  Knight moves (1, 2): length *
    mean of the 4 cells the segment crosses (a quarter of its length in each).  Shortest
    paths on this graph differ from Euclidean geodesics by at most ~3 %, and every edge
    (a, b) satisfies |d(y, a) - d(y, b)| <= w(a, b) exactly (triangle inequality).
    """
    import scipy.sparse as sp

    NY, NX = kp.shape
    idx = np.arange(NY * NX).reshape(NY, NX)
    rows, cols, vals = [], [], []

    def add(a_sl, b_sl, w):
        a = idx[a_sl].ravel()
        b = idx[b_sl].ravel()
        w = w.ravel()
        rows.extend([a, b])
        cols.extend([b, a])
        vals.extend([w, w])

    s_, e0, e1 = slice(None), slice(0, -1), slice(1, None)
    lh, lv, ld = hx, hy, math.hypot(hx, hy)
    add((s_, e0), (s_, e1), lh * 0.5 * (kp[:, :-1] + kp[:, 1:]))
    add((e0, s_), (e1, s_), lv * 0.5 * (kp[:-1, :] + kp[1:, :]))
    add((e0, e0), (e1, e1), ld * 0.5 * (kp[:-1, :-1] + kp[1:, 1:]))
    add((e0, e1), (e1, e0), ld * 0.5 * (kp[:-1, 1:] + kp[1:, :-1]))
    if NX >= 3 and NY >= 2:
        lk = math.hypot(2 * hx, hy)
        q = lambda a, b, c, d: lk * 0.25 * (a + b + c + d)  # noqa: E731
        # (i, j) -> (i+1, j+2) crosses (i, j), (i, j+1), (i+1, j+1), (i+1, j+2)
        add((e0, slice(0, -2)), (e1, slice(2, None)), q(kp[:-1, :-2], kp[:-1, 1:-1], kp[1:, 1:-1], kp[1:, 2:]))
        # (i, j+2) -> (i+1, j)
        add((e0, slice(2, None)), (e1, slice(0, -2)), q(kp[:-1, 2:], kp[:-1, 1:-1], kp[1:, 1:-1], kp[1:, :-2]))
    if NY >= 3 and NX >= 2:
        lk = math.hypot(hx, 2 * hy)
        q = lambda a, b, c, d: lk * 0.25 * (a + b + c + d)  # noqa: E731
        # (i, j) -> (i+2, j+1)
        add((slice(0, -2), e0), (slice(2, None), e1), q(kp[:-2, :-1], kp[1:-1, :-1], kp[1:-1, 1:], kp[2:, 1:]))
        # (i, j+1) -> (i+2, j)
        add((slice(0, -2), e1), (slice(2, None), e0), q(kp[:-2, 1:], kp[1:-1, 1:], kp[1:-1, :-1], kp[2:, :-1]))
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    v = np.concatenate(vals)
    return sp.csr_matrix((v, (r, c)), shape=(NY * NX, NY * NX))


def _kernel_columns_graph(outputs: np.ndarray):
    """Kernels by Dijkstra on the 16-neighbour graph (exactly Lipschitz by construction).

    Only the nodes Dijkstra reached (travel time below the cap plus apex) are processed;
    every other node of the padded grid holds the cap value exp(-T).
    """
    from scipy.sparse.csgraph import dijkstra

    g = _SHARED
    graph, T, NX = g["graph"], g["cap"], g["NX"]
    oi, oj, apex = g["oi"], g["oj"], g["apex"]
    to_dom = g["to_domain"]  # padded node -> raster node, -1 in the padding
    n_all = graph.shape[0]
    cT = math.exp(-T)
    counts = np.zeros(len(outputs), np.int64)
    colmass = np.zeros(len(outputs))
    rows_out, vals_out = [], []
    batch = 32
    for start in range(0, len(outputs), batch):
        ms = outputs[start:start + batch]
        a = apex[ms]
        D = dijkstra(graph, directed=True, indices=oi[ms] * NX + oj[ms], limit=T + float(a.max()) + 1e-9)
        bi, bj = np.nonzero(D < np.inf)
        d = D[bi, bj]
        del D
        ab = a[bi]
        F = np.sqrt(d * d + ab * ab) - ab
        inside = F < T
        bi, bj, F = bi[inside], bj[inside], F[inside]
        ker = np.exp(-F)
        per = np.bincount(bi, minlength=len(ms))
        colmass[start:start + len(ms)] = np.bincount(bi, ker, minlength=len(ms)) + (n_all - per) * cT
        dj = to_dom[bj]
        keep = dj >= 0
        counts[start:start + len(ms)] = np.bincount(bi[keep], minlength=len(ms))
        rows_out.append(dj[keep].astype(np.int32))
        vals_out.append((ker[keep] - cT).astype(np.float32))
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, np.int32)
    vals = np.concatenate(vals_out) if vals_out else np.zeros(0, np.float32)
    return counts, rows, vals, colmass, 0


def _kernel_columns_fmm(outputs: np.ndarray):
    """Kernels by fast marching (scikit-fmm) plus the exact Lipschitz envelope."""
    import skfmm

    g = _SHARED
    kf, mins, wts = g["kf"], g["mins"], g["weights"]
    hy, hx, T, P, ny, nx = g["hy"], g["hx"], g["cap"], g["pad"], g["ny"], g["nx"]
    oi, oj, apex = g["oi"], g["oj"], g["apex"]
    NY, NX = kf.shape
    hmin = min(hx, hy)
    hd = math.hypot(hx, hy)
    cT = math.exp(-T)
    counts = np.zeros(len(outputs), np.int64)
    colmass = np.zeros(len(outputs))
    rows_out, vals_out = [], []
    sweeps = 0
    for n, m in enumerate(outputs):
        i, j = int(oi[m]), int(oj[m])
        a_y = float(apex[m])
        # window: any path leaving it costs more than T + A (plus a safety ring of 3 cells)
        for R in mins:
            if (R - 3) * hmin * mins[R][i, j] >= T + a_y or R >= max(NY, NX):
                break
        a0, a1 = max(0, i - R), min(NY, i + R + 1)
        b0, b1 = max(0, j - R), min(NX, j + R + 1)
        speed_eps = kf[a0:a1, b0:b1]
        dy = (np.arange(a0, a1) - i)[:, None] * hy
        dx = (np.arange(b0, b1) - j)[None, :] * hx
        r = np.sqrt(dy * dy + dx * dx)
        r0 = 2.5 * hmin
        disc = r <= r0 + 1.5 * hd
        e0 = float(speed_eps[disc].min())
        phi = r - r0
        narrow = T + a_y + 2.0 * hd * float(speed_eps.max())
        t = skfmm.travel_time(phi, 1.0 / speed_eps, dx=[hy, hx], order=g.get('order', 2), narrow=max(narrow - e0 * r0, hd))
        t = np.ma.filled(np.ma.masked_invalid(t), np.inf) if np.ma.isMaskedArray(t) else np.asarray(t)
        f = np.where(phi < 0, e0 * r, e0 * r0 + t)
        # values above T + A never matter: a constant ceiling keeps the envelope exact below it
        # (min(f, C) with C constant is Lipschitz) and stops it from filling the far window
        ceiling = T + a_y + hd * float(speed_eps.max())
        np.minimum(f, ceiling, out=f)
        # crop to where the kernel lives (plus a ring): the window was sized for the worst case
        rows_in = np.flatnonzero((f < ceiling).any(axis=1))
        cols_in = np.flatnonzero((f < ceiling).any(axis=0))
        r_lo, r_hi = max(rows_in[0] - 2, 0), min(rows_in[-1] + 3, f.shape[0])
        c_lo, c_hi = max(cols_in[0] - 2, 0), min(cols_in[-1] + 3, f.shape[1])
        f = f[r_lo:r_hi, c_lo:c_hi]
        a0, a1, b0, b1 = a0 + r_lo, a0 + r_hi, b0 + c_lo, b0 + c_hi
        w = (
            wts[0][a0:a1, b0:b1 - 1],
            wts[1][a0:a1 - 1, b0:b1],
            wts[2][a0:a1 - 1, b0:b1 - 1],
            wts[3][a0:a1 - 1, b0:b1 - 1],
        )
        if _violates(f, w):
            f, k = lipschitz_envelope(f, w)
            sweeps += k
        if a_y > 0:
            f = np.sqrt(f * f + a_y * a_y) - a_y
        ker = np.exp(-np.minimum(f, T))
        colmass[n] = float(ker.sum())
        c0, c1 = max(a0, P), min(a1, P + ny)
        d0, d1 = max(b0, P), min(b1, P + nx)
        if c0 < c1 and d0 < d1:
            fd = f[c0 - a0:c1 - a0, d0 - b0:d1 - b0]
            gi, gj = np.nonzero(fd < T)
            rows_out.append(((gi + (c0 - P)) * nx + (gj + (d0 - P))).astype(np.int32))
            vals_out.append((np.exp(-fd[gi, gj]) - cT).astype(np.float32))
            counts[n] = len(gi)
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, np.int32)
    vals = np.concatenate(vals_out) if vals_out else np.zeros(0, np.float32)
    return counts, rows, vals, colmass, sweeps


def _violates(f, w, tol=1e-12) -> bool:
    """True when some 8-neighbour difference of f exceeds its edge weight."""
    return bool(
        (np.abs(f[:, 1:] - f[:, :-1]) > w[0] + tol).any()
        or (np.abs(f[1:, :] - f[:-1, :]) > w[1] + tol).any()
        or (np.abs(f[1:, 1:] - f[:-1, :-1]) > w[2] + tol).any()
        or (np.abs(f[1:, :-1] - f[:-1, 1:]) > w[3] + tol).any()
    )


def _init_worker(shared: dict) -> None:
    """Worker-process initializer: receive the kernel problem once (works with spawn, forkserver and fork)."""
    _SHARED.clear()
    _SHARED.update(shared)


def _run_kernels(order: np.ndarray, n_jobs: int, progress, mp_context=None):
    """Kernels for all outputs, in output order, optionally in worker processes.

    The problem (graph or speed map, outputs, cap) is sent to each worker once through the
    pool's initializer, so the pool works under every start method (``spawn`` on Windows and
    macOS, ``forkserver``/``fork`` on Linux); ``mp_context`` picks one (default: the platform's).
    """
    M = len(order)
    chunk = 256
    chunks = [order[k:k + chunk] for k in range(0, M, chunk)]
    results = [None] * len(chunks)
    bar, callback = _progress(progress, M, "eikonal kernels")
    done = 0
    if n_jobs > 1 and len(chunks) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = mp.get_context(mp_context) if isinstance(mp_context, (str, type(None))) else mp_context
        shared = dict(_SHARED)
        with ProcessPoolExecutor(max_workers=min(n_jobs, len(chunks)), mp_context=ctx,
                                 initializer=_init_worker, initargs=(shared,)) as pool:
            futures = {pool.submit(_kernel_columns, c): k for k, c in enumerate(chunks)}
            for fut in as_completed(futures):
                k = futures[fut]
                results[k] = fut.result()
                done += len(chunks[k])
                if callback:
                    callback(done, M)
    else:
        for k, c in enumerate(chunks):
            results[k] = _kernel_columns(c)
            done += len(c)
            if callback:
                callback(done, M)
    if bar is not None:
        bar.close()
    counts = np.concatenate([r[0] for r in results])
    rows = np.concatenate([r[1] for r in results])
    vals = np.concatenate([r[2] for r in results])
    colmass = np.concatenate([r[3] for r in results])
    sweeps = sum(r[4] for r in results)
    return counts, rows, vals, colmass, sweeps


def _compute_kernels(kp, shape, cell, P, oi, oj, apex_t, cap, solver, n_jobs, progress=None, mp_context=None):
    """All kernels as a CSC matrix (inputs x outputs) of exp(-f~) - exp(-cap), plus column masses.

    A deterministic function of the padded kernel rate map ``kp``, the outputs (padded grid
    indices ``oi``, ``oj``), their apex radii, the cap and the solver: :meth:`EikonalMechanism.build`
    and :meth:`EikonalMechanism.load` of a compact file both call it, so a loaded mechanism samples
    from the very kernels the build verified (and ``load`` verifies them again).
    """
    import scipy.sparse as sp
    from scipy.ndimage import minimum_filter

    ny, nx = shape
    hy, hx = cell
    NY, NX = kp.shape
    _SHARED.clear()
    _SHARED.update(solver=solver, hy=hy, hx=hx, cap=float(cap), pad=P, ny=ny, nx=nx, NX=NX, oi=oi, oj=oj, apex=apex_t)
    if solver == "fmm":
        # speed map for fast marching: no larger than the edge means (fewer repairs)
        kf = kp * FMM_SLACK
        mh = 0.5 * (kp[:, 1:] + kp[:, :-1])
        mv = 0.5 * (kp[1:, :] + kp[:-1, :])
        np.minimum(kf[:, 1:], mh, out=kf[:, 1:])
        np.minimum(kf[:, :-1], mh, out=kf[:, :-1])
        np.minimum(kf[1:, :], mv, out=kf[1:, :])
        np.minimum(kf[:-1, :], mv, out=kf[:-1, :])
        radii = [int(R) for R in _RADII if R < max(NY, NX)] + [int(_RADII[_RADII >= max(NY, NX)][0])]
        mins = {R: minimum_filter(kf, size=2 * R + 1, mode="nearest") for R in radii}
        _SHARED.update(kf=kf, mins=mins, weights=edge_weights(kp, hy, hx))
    else:
        dom = ((np.arange(ny)[:, None] + P) * NX + (np.arange(nx)[None, :] + P)).ravel()
        to_domain = np.full(NY * NX, -1, np.int64)
        to_domain[dom] = np.arange(ny * nx)
        _SHARED.update(graph=_stencil_graph(kp, hy, hx), to_domain=to_domain)
    try:
        counts, rows, vals, colmass, sweeps = _run_kernels(np.arange(len(oi)), int(n_jobs), progress, mp_context)
    finally:
        _SHARED.clear()
    colptr = np.concatenate([[0], np.cumsum(counts)])
    S = sp.csc_matrix((vals, rows, colptr), shape=(ny * nx, len(oi)))
    return S, colmass, sweeps


def _progress(progress, total, desc, unit: str = "output"):
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return None, progress
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "pt")

    def update(done, _total):
        bar.n = done
        bar.refresh()

    return bar, update


# ============================================================================================
# helpers on the node grid
# ============================================================================================


def _kernel_rate(kp: np.ndarray, hy: float, hx: float, smooth, despeckle: int, jump=None) -> np.ndarray:
    """Regularise the (padded) kernel rate map; only ever lowers it.

    ``despeckle``: grey opening with a square of that many cells (removes peaks of epsilon
    narrower than the square, e.g. isolated dense cells; plateaus are kept).  ``smooth``:
    lower epsilon where 1/epsilon changes faster than ``smooth`` units per unit (the
    largest map below whose noise scale is ``smooth``-Lipschitz).
    """
    out = kp
    if despeckle and despeckle > 1:
        from scipy.ndimage import grey_opening

        out = np.minimum(out, grey_opening(out, size=(int(despeckle), int(despeckle)), mode="nearest"))
    if smooth:
        k = float(smooth)
        if not (math.isfinite(k) and k > 0):
            raise ValueError("smooth must be a number > 0 (e.g. 0.3), or None.")
        lh, lv, ld = hx, hy, math.hypot(hx, hy)
        shp = out.shape
        w = (
            np.full((shp[0], shp[1] - 1), k * lh),
            np.full((shp[0] - 1, shp[1]), k * lv),
            np.full((shp[0] - 1, shp[1] - 1), k * ld),
            np.full((shp[0] - 1, shp[1] - 1), k * ld),
        )
        neg, _ = lipschitz_envelope(-1.0 / out, w)
        out = np.minimum(out, -1.0 / neg)
    if jump:
        r = float(jump)
        hmin = min(hx, hy)
        # the limit is per noise length where a cell is longer than one (epsilon * length > 1 on an
        # edge, coarse rasters): there a cell-to-cell jump is already smoothed by the kernel's own
        # decay within the cell, and a per-cell limit would lower dense cells for nothing
        lh, lv, ld = hx, hy, math.hypot(hx, hy)
        e = out
        w = (
            r * lh / hmin * np.maximum(1.0, np.minimum(e[:, 1:], e[:, :-1]) * lh),
            r * lv / hmin * np.maximum(1.0, np.minimum(e[1:, :], e[:-1, :]) * lv),
            r * ld / hmin * np.maximum(1.0, np.minimum(e[1:, 1:], e[:-1, :-1]) * ld),
            r * ld / hmin * np.maximum(1.0, np.minimum(e[1:, :-1], e[:-1, 1:]) * ld),
        )
        low, _ = lipschitz_envelope(np.log(out), w)
        out = np.minimum(out, np.exp(low))
    return out


def _levels(kp: np.ndarray, hy: float, hx: float, sigma: float, max_step: int):
    """Output spacing (1, 2, 4, ... cells) per padded node: spacing * h * eps_local <= sigma."""
    from scipy.ndimage import maximum_filter

    step = np.ones(kp.shape, np.int64)
    hmax = max(hx, hy)
    k = 2
    while k <= max_step:
        local = maximum_filter(kp, size=2 * k + 1, mode="nearest")
        step[local * k * hmax <= sigma] = k
        k *= 2
    return step


# ============================================================================================
# the mechanism
# ============================================================================================
@dataclass(frozen=True, eq=False, repr=False)
class EikonalMechanism:
    """A location-dependent private mechanism on a privacy map's grid (see the module notes).

    Build with :meth:`build`, or :meth:`load` a saved one; release with
    ``gdf.priv.perturb(mechanism=mech)`` or :meth:`sample`.

    Attributes
    ----------
    privacy_map : PrivacyMap
        The target: what :meth:`verify` checks against.
    kernel_epsilon : ndarray (ny, nx)
        Epsilon per CRS unit the kernels were built with (smoothed map times 1 - margin).
    output_ij : ndarray (M, 2) of int
        Output nodes as (row, col) of the raster grid; may be outside it (padding).
    output_step : ndarray (M,) of int
        Lattice spacing of each output in cells (its jitter box).
    weights : ndarray (M,)
    indptr, indices, kernel : CSR arrays over input nodes (row-major raster order)
        ``kernel`` = exp(-f~) - exp(-cap) on the support of each node's row.
    cap : float
    normaliser : ndarray (ny * nx,)
        s(u); P(Q(u) = y) = weights[y] * (kernel + exp(-cap)) / s(u).
    params : dict
    report : VerifyReport
    kernel_rate : ndarray (ny + 2 pad, nx + 2 pad) or None
        The padded, lowered epsilon per CRS unit the kernels' travel times were computed on
        (with ``output_apex`` and ``cap``, what a compact file stores instead of the kernels).
    output_apex : ndarray (M,) or None
        Apex radius A_y of each output's kernel, travel-time units.
    """

    privacy_map: PrivacyMap
    kernel_epsilon: np.ndarray
    output_ij: np.ndarray
    output_step: np.ndarray
    weights: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    kernel: np.ndarray
    cap: float
    normaliser: np.ndarray
    params: dict
    report: VerifyReport | None = None
    outside: str = "error"
    remap_xy: np.ndarray | None = None
    remap_prior: str | None = None
    kernel_rate: np.ndarray | None = None
    output_apex: np.ndarray | None = None

    def __post_init__(self):
        if self.outside not in ("error", "clamp"):
            raise ValueError("outside must be 'error' (default) or 'clamp'.")
        if self.remap_xy is not None and np.shape(self.remap_xy) != (len(self.weights), 2):
            raise ValueError("remap_xy must have one (x, y) row per output.")
        for name in ("kernel_epsilon", "output_ij", "output_step", "weights", "indptr", "indices", "kernel", "normaliser", "remap_xy",
                     "kernel_rate", "output_apex"):
            arr = getattr(self, name)
            if isinstance(arr, np.ndarray):
                arr.flags.writeable = False

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls,
        privacy_map: PrivacyMap,
        *,
        margin: float = 0.1,
        smooth: float | None = 0.5,
        despeckle: int = 0,
        jump: float | None = 0.2,
        cap: float = 16.0,
        output_spacing: float = 0.8,
        max_step: int = 2,
        pad: float = 4.0,
        apex: float = 0.5,
        max_iter: int = 400,
        solve_cap: float | None = 8.0,
        solver: str = "graph",
        n_jobs: int = 1,
        progress=None,
        verify: bool = True,
        mp_context=None,
    ) -> "EikonalMechanism":
        """Build the mechanism for ``privacy_map`` and verify it.

        Parameters
        ----------
        privacy_map : PrivacyMap
            Target epsilon per ground metre; its cell centres are the inputs.
        margin : float in (0, 1)
            Share of the privacy loss kept for exact normalisation: kernels use
            ``(1 - margin) * epsilon``, the weights may use the rest.  Larger is easier to
            build and costs utility (expected squared error grows like 1/(1 - margin)^2).
        smooth : float or None
            Kernel map lowered where the noise scale 1/epsilon changes faster than
            ``smooth`` metres per metre (as :meth:`PrivacyMap.regularised`).  Sharp jumps
            between sparse and dense areas cannot be normalised with nonnegative weights
            (the paper's failure mode); this fixes them by lowering epsilon on the dense side
            only.  None turns it off.
        jump : float or None
            Kernel map lowered so that epsilon changes by at most a factor exp(jump) between
            neighbouring cells (lowering only); on edges longer than the noise length
            (epsilon * length > 1, coarse rasters) by at most exp(jump * epsilon * length).  Handles cell-level irregularities of real
            rasters (single cells of sea inside a city, rasterised polygon edges) that
            ``smooth`` does not reach where epsilon * cell size is large.  None turns it off.
        despeckle : int
            Also remove peaks of epsilon narrower than ``despeckle`` cells (grey opening;
            lowers only; 0 = off).
        cap : float
            Kernel cap T (travel-time units): exp(-f) is replaced by max(exp(-f), exp(-T)).
            Larger: less probability on the flat part, larger kernels (time, memory).
        output_spacing : float
            Largest lattice spacing times epsilon (dimensionless) where outputs may be
            thinned to every 2nd (4th, ...) node.  Smaller: more outputs, slower, smoother.
        max_step : int
            Largest output spacing in cells (1 disables thinning; 4 is faster but leaves
            more lattice ripple for the weights to absorb).
        pad : float
            Outputs extend beyond the raster by ``pad`` noise lengths (pad / epsilon at the
            border).
        apex : float
            Apex smoothing radius in output spacings (0 keeps the exact cone).
        max_iter : int
            Iteration limit of the weight solve.
        solve_cap : float or None
            The weight iterations use the kernels truncated at this travel time (about 30 %
            of the entries at the default 8 with ``cap=16``; the dropped tail holds ~0.3 % of
            each kernel's mass), then the exact normaliser is computed from the full kernels
            (and a few full iterations follow if it misses).  None: iterate on the full
            kernels (about 2.5x slower, same guarantee).
        solver : {"graph", "fmm"}
            How travel times f_y are computed.  ``"graph"`` (default): Dijkstra on the
            16-neighbour grid graph whose edges carry the integral of epsilon (a discrete
            eikonal solution, exact Lipschitz by construction, within ~3 % of Euclidean
            geodesics).  ``"fmm"``: fast marching (scikit-fmm, second order) followed by the
            exact Lipschitz envelope on the 8-neighbour graph (closer to Euclidean, ~3x
            slower).
        n_jobs : int
            Worker processes for the kernels and threads for the weight solve.
        mp_context : None, str or multiprocessing context
            Start method of the kernel workers (``"spawn"``, ``"forkserver"``, ``"fork"``);
            None: the platform's default.  Workers receive the problem through the pool's
            initializer, so every start method works (Windows and macOS use ``spawn``).
        progress : None, True or callable(done, total)
        verify : bool
            Run :meth:`verify` (always recommended; ``build`` refuses a failing mechanism).

        Raises
        ------
        InfeasibleMechanismError
            When the weights cannot flatten the normaliser within ``margin`` or the verified
            ratio exceeds 1; the message says which option to change.

        Notes
        -----
        Only the kernels use the lowered maps; :meth:`verify` always checks against
        ``privacy_map`` itself, so every option trades utility or time, never the guarantee.
        """
        if not isinstance(privacy_map, PrivacyMap):
            raise TypeError("privacy_map must be a geopriv.PrivacyMap (PrivacyMap.from_population(...) or from_epsilon(...)).")
        marr = np.asarray(margin, dtype=float)
        if marr.ndim not in (0, 2) or (marr.ndim == 2 and marr.shape != privacy_map.shape):
            raise ValueError(f"margin must be a number or an array of the map's shape {privacy_map.shape}.")
        if not (np.all(np.isfinite(marr)) and np.all(marr > 0) and np.all(marr < 1)):
            raise ValueError("margin must be in (0, 1), e.g. 0.05 (5 % of the privacy loss kept for normalisation).")
        for name, v in (("cap", cap), ("output_spacing", output_spacing), ("pad", pad)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0.")
        if solver not in ("graph", "fmm"):
            raise ValueError("solver must be 'graph' (Dijkstra, default) or 'fmm' (fast marching).")
        if apex < 0 or not math.isfinite(apex):
            raise ValueError("apex must be >= 0.")
        max_step = int(max_step)
        if max_step < 1 or max_step & (max_step - 1):
            raise ValueError("max_step must be a power of two >= 1 (1, 2, 4, ...).")
        timings = {}
        t_start = time.perf_counter()
        pm = privacy_map
        ny, nx = pm.shape
        hx, hy = pm.cell_size
        keps = (1.0 - marr) * np.asarray(pm.epsilon_crs)
        # padding (cells), from the smallest epsilon on the border
        border = np.concatenate([keps[0], keps[-1], keps[:, 0], keps[:, -1]])
        P = int(math.ceil(pad / (float(border.min()) * min(hx, hy))))
        P = max(P, 2)
        kp = _kernel_rate(np.pad(keps, P, mode="edge"), hy, hx, smooth, despeckle, jump)
        keps = kp[P:P + ny, P:P + nx]
        NY, NX = kp.shape
        # outputs: lattice thinned where the noise is wide
        step = _levels(kp, hy, hx, output_spacing, max_step)
        ii, jj = np.mgrid[0:NY, 0:NX]
        sel = (ii % step == 0) & (jj % step == 0)
        oi, oj = np.nonzero(sel)
        ostep = step[oi, oj]
        M = len(oi)
        # apex smoothing A_y (travel-time units) where outputs are thinned; a lattice of spacing 1
        # coincides with the inputs, where the cone needs no smoothing
        apex_t = np.where(ostep > 1, apex * ostep * math.sqrt(hx * hy) * kp[oi, oj], 0.0)
        timings["prepare_s"] = time.perf_counter() - t_start
        t0 = time.perf_counter()
        S, colmass, sweeps = _compute_kernels(
            kp, (ny, nx), (hy, hx), P, oi, oj, apex_t, float(cap), solver, int(n_jobs), progress, mp_context
        )
        timings["kernels_s"] = time.perf_counter() - t0
        cT = math.exp(-cap)
        # ------------------------------------------------------------ weights
        t0 = time.perf_counter()
        # what the normaliser may use on each edge: the allowed loss minus the kernels' own
        # Lipschitz bound there (at least margin * allowed; more where the map was lowered)
        budget = [np.maximum(al - kw, 1e-300) for al, kw in zip(_allowed(pm), edge_weights(keps, hy, hx))]
        w, iters, history = _solve_weights(S, cT, ostep, colmass, pm, budget, max_iter, threads=max(1, int(n_jobs)), solve_cap=solve_cap)
        S = S.tocsr()  # the CSC copy is released here
        S.sort_indices()
        s = _row_sums(S.indptr, S.indices, S.data, w) + cT * float(w.sum())  # exact, float64
        rel = _relative_share(s, pm, budget)
        rough = _normaliser_share(s, pm)
        timings["weights_s"] = time.perf_counter() - t0
        if rel >= 1.0:
            raise InfeasibleMechanismError(
                f"The weights could not make the normaliser flat enough: somewhere it needs {rel:.2f} times the share of "
                f"the privacy loss left to it (margin up to {float(np.max(marr)):g}). Raise margin (e.g. margin={min(0.5, 2 * float(np.max(marr))):g}), "
                f"smooth the map (smooth=0.5), use finer outputs (output_spacing={output_spacing / 2:g} or max_step=1), "
                f"or pad more (pad={2 * pad:g})."
            )
        params = {
            "margin": float(marr) if marr.ndim == 0 else {"min": float(marr.min()), "max": float(marr.max())}, "smooth": smooth, "despeckle": despeckle, "jump": jump, "cap": float(cap), "output_spacing": output_spacing,
            "max_step": max_step, "solve_cap": solve_cap, "pad": pad, "pad_cells": P, "apex": apex, "n_outputs": M,
            "nnz": int(S.nnz), "weight_iterations": iters, "normaliser_budget_used": rel,
            "cap_mass_max": float(cT * w.sum() / s.min()), "normaliser_share": rough, "weight_history": history,
            "repair_sweeps_mean": sweeps / max(M, 1), "solver": solver,
        }
        mech = cls(
            privacy_map=pm,
            kernel_epsilon=keps,
            output_ij=np.column_stack([oi - P, oj - P]).astype(np.int64),
            output_step=ostep.astype(np.int64),
            weights=w,
            indptr=S.indptr.astype(np.int64),
            indices=S.indices.astype(np.int32),
            kernel=S.data.astype(np.float32),
            cap=float(cap),
            normaliser=s,
            params=params,
            kernel_rate=kp,
            output_apex=apex_t,
        )
        if verify:
            t0 = time.perf_counter()
            report = mech.verify()
            timings["verify_s"] = time.perf_counter() - t0
            if not report.ok:
                raise InfeasibleMechanismError(
                    f"The built mechanism does not meet the privacy map: {report}. Nothing was returned. "
                    f"Raise margin (now {float(np.max(marr)):g}), smooth the map (smooth=0.5) or use finer outputs (max_step=1)."
                )
            object.__setattr__(mech, "report", report)
        timings["total_s"] = time.perf_counter() - t_start
        params["timings"] = timings
        return mech

    # ------------------------------------------------------------------ geometry helpers
    @property
    def crs(self):
        return self.privacy_map.crs

    @property
    def shape(self) -> tuple[int, int]:
        return self.privacy_map.shape

    @cached_property
    def output_xy(self) -> np.ndarray:
        """(M, 2) output positions in the map's CRS."""
        t = self.privacy_map.transform
        x = t.c + t.a * (self.output_ij[:, 1] + 0.5)
        y = t.f + t.e * (self.output_ij[:, 0] + 0.5)
        out = np.column_stack([x, y])
        out.flags.writeable = False
        return out

    def normaliser_share(self) -> np.ndarray:
        """Per cell: the largest |delta ln s| / allowed loss over its edges (ny, nx).

        The part of the privacy loss the exact normalisation uses at each cell; it must stay
        below the cell's ``margin``.  Where it is far below, the margin there is wasted.
        """
        pm = self.privacy_map
        ny, nx = pm.shape
        ls = np.log(self.normaliser).reshape(ny, nx)
        node = np.zeros((ny, nx))
        for (sa, sb), al in zip(_edge_slices(), _allowed(pm)):
            r = np.abs(ls[sa] - ls[sb]) / al
            for sl in (sa, sb):
                view = node[sl]
                np.maximum(view, r, out=view)
        return node

    def suggest_margin(self, *, floor: float = 0.04, factor: float = 1.5, size: int = 7, ceiling: float = 0.3) -> np.ndarray:
        """A per-cell ``margin`` for a second build: small where this build's normaliser used little.

        ``factor`` times the largest normaliser share within ``size`` cells (then averaged
        over ``size`` cells, so the margin changes smoothly), clipped to [floor, ceiling].
        Rebuilding with it puts the kernels closer to the target map where normalisation is
        easy; on the Tokyo benchmark it lowered the expected squared error by about 6 % (at
        twice the build time).  The second build is verified like any other, and raises
        :class:`InfeasibleMechanismError` if the suggestion was too tight (raise ``floor``).

        Examples
        --------
        >>> mech = EikonalMechanism.build(pm)                                  # doctest: +SKIP
        >>> mech = EikonalMechanism.build(pm, margin=mech.suggest_margin())    # doctest: +SKIP
        """
        from scipy.ndimage import maximum_filter, uniform_filter

        if not (0 < floor <= ceiling < 1):
            raise ValueError("Need 0 < floor <= ceiling < 1 (margins are shares of the privacy loss).")
        if not factor > 1:
            raise ValueError("factor must be > 1: the new margin must leave room above the measured share.")
        size = max(1, int(size))
        m = np.clip(factor * maximum_filter(self.normaliser_share(), size=size, mode="nearest"), floor, ceiling)
        return np.clip(uniform_filter(m, size=size, mode="nearest"), floor, ceiling)

    @property
    def release_xy(self) -> np.ndarray:
        """(M, 2) position released for each output: the remapped one (:meth:`with_remap`) or the node."""
        return self.output_xy if self.remap_xy is None else self.remap_xy

    def with_remap(self, prior="population") -> "EikonalMechanism":
        """The same mechanism, releasing for each output y its posterior mean E[u | Q(u) = y].

        Post-processing (the paper's remark that "post-processing the responses of our
        approach can further improve performance"): each output y is replaced by
        g(y) = sum_u prior(u) P(Q(u) = y) u / sum_u prior(u) P(Q(u) = y), the release that
        minimises the expected squared error under ``prior`` for this mechanism.  It is a
        fixed function of the output computed from public data only, so the privacy
        guarantee is unchanged, and the expected squared error can only go down (under that
        prior).  The price: releases are pulled towards where the prior puts people (e.g.
        off the sea, out of empty areas), so a map of releases is smoother and more
        concentrated than a map of noisy nodes.

        Parameters
        ----------
        prior : "population" (default), "uniform" or array (ny, nx)
            Must be public knowledge, like the census population behind the map.  Never
            derive it from the locations being released: that would leak them.

        Returns
        -------
        EikonalMechanism
            Same arrays and guarantee; :meth:`sample` and ``gdf.priv.perturb`` release the
            remapped positions (plus the usual jitter), :meth:`expected_mse` scores them.
        """
        import dataclasses

        import scipy.sparse as sp

        pm = self.privacy_map
        ny, nx = pm.shape
        n = ny * nx
        p = pm.prior(prior).ravel()
        ux = np.tile(pm.node_x, ny)
        uy = np.repeat(pm.node_y, nx)
        S = sp.csr_matrix((self.kernel.astype(np.float64), self.indices, self.indptr), shape=(n, len(self.weights)))
        cT = math.exp(-self.cap)
        a = p / self.normaliser  # P(Q(u) = y) = w_y (S[u, y] + cT) / s(u); w_y cancels
        den = S.T @ a + cT * a.sum()
        gx = (S.T @ (a * ux) + cT * float((a * ux).sum())) / den
        gy = (S.T @ (a * uy) + cT * float((a * uy).sum())) / den
        label = prior if isinstance(prior, str) else "array"
        new = dataclasses.replace(self, remap_xy=np.column_stack([gx, gy]), remap_prior=label)
        if "_tables" in self.__dict__:
            new.__dict__["_tables"] = self.__dict__["_tables"]
        return new

    @cached_property
    def mechanism_id(self) -> str:
        """SHA-256 of the arrays and parameters that define the mechanism (recorded in provenance)."""
        compact = self.can_save_compact  # the compact content determines the kernels; older mechanisms: the full one
        return _digest(self._arrays(compact=compact), self._meta(include_report=False, compact=compact))

    def _csc(self):
        import scipy.sparse as sp

        S = sp.csr_matrix((self.kernel, self.indices, self.indptr), shape=(self.shape[0] * self.shape[1], len(self.weights)))
        return S.tocsc()

    # ------------------------------------------------------------------ verify
    def verify(self) -> VerifyReport:
        """Realised local Lipschitz constant of ln P(Q(u)=y) over all neighbouring node pairs and outputs.

        Recomputed from the arrays sampling uses (weights, kernel, indptr, indices, cap), in
        float64.  The normaliser is not trusted: it is recomputed from the weights and kernels
        (sampling draws from w_y (kernel + exp(-cap)) relative to the row's total, i.e. divides
        by that row sum whatever is stored), the ratios are computed with the recomputed one,
        and a stored normaliser that differs from it by more than ``NORMALISER_RTOL`` makes the
        report not ``ok`` (``normaliser_mismatch``).  See the module notes for the exact
        statement.

        Raises
        ------
        MechanismFileError
            Arrays that cannot describe a distribution (non-finite or negative weights or
            kernel values, indices out of range, indptr not monotone, ...): rebuild.
        """
        t0 = time.perf_counter()
        self._check_arrays()
        pm = self.privacy_map
        ny, nx = pm.shape
        allowed = _allowed(pm)
        inv = [1.0 / a for a in allowed]
        slices = _edge_slices()
        cT = math.exp(-self.cap)
        s = self._exact_normaliser()
        mismatch = _normaliser_mismatch(self.normaliser, s)
        lns = np.log(s).reshape(ny, nx)
        node = np.zeros((ny, nx))
        best = (-1.0, None)

        def account(ratio, sa, sb, r0, c0, m):
            nonlocal best
            k = int(np.argmax(ratio))
            val = float(ratio.flat[k])
            if val > best[0]:
                best = (val, (k, ratio.shape, sa, sb, r0, c0, m))

        # normaliser only (every output outside its kernel's support)
        norm_share = 0.0
        for (sa, sb), iw in zip(slices, inv):
            ratio = np.abs(lns[sa] - lns[sb]) * iw
            norm_share = max(norm_share, float(ratio.max()))
            _node_max(node, ratio, sa, sb, 0, 0)
            account(ratio, sa, sb, 0, 0, -1)
        S = self._csc()
        ip, idx, dat = S.indptr, S.indices, S.data
        for m in range(S.shape[1]):
            lo, hi = ip[m], ip[m + 1]
            if lo == hi:
                continue
            gi, gj = np.divmod(idx[lo:hi], nx)
            r0, r1 = max(int(gi.min()) - 1, 0), min(int(gi.max()) + 2, ny)
            c0, c1 = max(int(gj.min()) - 1, 0), min(int(gj.max()) + 2, nx)
            K = np.full((r1 - r0, c1 - c0), cT)
            K[gi - r0, gj - c0] += dat[lo:hi]
            L = np.log(K) - lns[r0:r1, c0:c1]
            for (sa, sb), iw in zip(slices, inv):
                win = _win(iw, sa, r0, r1, c0, c1)
                ratio = np.abs(L[sa] - L[sb]) * win
                _node_max(node, ratio, sa, sb, r0, c0)
                account(ratio, sa, sb, r0, c0, m)
        val, where = best
        k, shp, sa, _sb, r0, c0, m = where
        a_r, a_c = np.unravel_index(k, shp)
        off_a = (0 if sa[0].start is None else sa[0].start, 0 if sa[1].start is None else sa[1].start)
        fam = [i for i, (x, _) in enumerate(slices) if x == sa][0]
        da = [(0, 1), (1, 0), (1, 1), (1, -1)][fam]
        ra, ca = r0 + a_r + off_a[0], c0 + a_c + off_a[1]
        rb, cb = ra + da[0], ca + da[1]
        allowed_ab = float(allowed[fam][min(ra, rb), min(ca, cb)])
        worst = {
            "node_a": (int(ra), int(ca)),
            "node_b": (int(rb), int(cb)),
            "output": None if m < 0 else int(m),
            "output_xy": None if m < 0 else tuple(float(v) for v in self.output_xy[m]),
            "allowed_log_ratio": allowed_ab,
            "realised_log_ratio": val * allowed_ab,
        }
        n_edges = sum(int(a.size) for a in allowed)
        return VerifyReport(
            max_ratio=val, normaliser_ratio=norm_share, worst=worst, node_ratio=node,
            n_nodes=ny * nx, n_outputs=len(self.weights), n_edges=n_edges,
            seconds=time.perf_counter() - t0, normaliser_mismatch=mismatch,
        )

    def _exact_normaliser(self) -> np.ndarray:
        """s(u) = sum_y w_y (kernel + exp(-cap)) recomputed from the weights and kernels (float64),
        exactly as :meth:`build` computes the stored one."""
        w = np.asarray(self.weights, np.float64)
        return _row_sums(self.indptr, self.indices, self.kernel, w) + math.exp(-self.cap) * float(w.sum())

    def _check_arrays(self, chunk: int = 10_000_000) -> None:
        """Raise :class:`MechanismFileError` unless every array sampling uses is well formed.

        Checks (O(nnz), in blocks of rows): shapes and dtypes; ``cap`` finite > 0; weights
        finite, >= 0, not all zero; kernel values finite and >= 0; indptr starting at 0,
        monotone and ending at len(indices); indices in range and strictly increasing within
        each row (no duplicates: verification and sampling must see the same entries);
        output_ij within the padded grid; output_step >= 1; remap_xy finite.
        """
        fix = "Rebuild the mechanism (EikonalMechanism.build(privacy_map).save(path)); do not release with it."

        def bad(what):
            raise MechanismFileError(f"The mechanism's arrays are invalid: {what}. {fix}")

        ny, nx = self.privacy_map.shape
        n = ny * nx
        w, ker, ip, idx, s = self.weights, self.kernel, self.indptr, self.indices, self.normaliser
        arrays = {"weights": w, "kernel": ker, "indptr": ip, "indices": idx, "normaliser": s,
                  "output_ij": self.output_ij, "output_step": self.output_step}
        for name, a in arrays.items():
            if not isinstance(a, np.ndarray):
                bad(f"{name} is not an array")
        for name in ("weights", "kernel", "normaliser"):
            if arrays[name].dtype.kind != "f":
                bad(f"{name} has dtype {arrays[name].dtype} (floating point expected)")
        for name in ("indptr", "indices", "output_ij", "output_step"):
            if arrays[name].dtype.kind not in "iu":
                bad(f"{name} has dtype {arrays[name].dtype} (integers expected)")
        M = len(w) if w.ndim == 1 else -1
        if M < 1:
            bad(f"weights must be a non-empty 1-D array (shape {w.shape})")
        if self.output_ij.shape != (M, 2) or self.output_step.shape != (M,):
            bad(f"output_ij {self.output_ij.shape} / output_step {self.output_step.shape} do not match {M} weights")
        if ip.shape != (n + 1,) or s.shape != (n,) or idx.ndim != 1 or ker.shape != idx.shape:
            bad(f"inconsistent sizes (indptr {ip.shape}, normaliser {s.shape}, indices {idx.shape}, kernel {ker.shape} "
                f"for {n} nodes)")
        if not (isinstance(self.cap, (int, float)) and math.isfinite(self.cap) and self.cap > 0):
            bad(f"cap {self.cap!r} is not a finite number > 0")
        if not np.all(np.isfinite(w)):
            bad(f"{int((~np.isfinite(w)).sum())} weight(s) are not finite (NaN or infinite)")
        if np.any(w < 0):
            bad(f"{int((w < 0).sum())} weight(s) are negative")
        total = float(w.sum())
        if not (math.isfinite(total) and total > 0):
            bad("the weights sum to zero or overflow")
        if not (np.all(np.isfinite(s)) and np.all(s > 0)):
            bad("the stored normaliser has values that are not finite and > 0")
        if ip[0] != 0 or ip[-1] != len(idx) or np.any(ip[1:] < ip[:-1]):
            bad("indptr does not start at 0, end at the number of kernel entries and increase monotonically")
        r0 = 0
        while r0 < n:  # blocks of rows: bounded memory on 10^8 entries
            lo = int(ip[r0])
            r1 = min(max(int(np.searchsorted(ip, lo + chunk, side="right")) - 1, r0 + 1), n)
            hi = int(ip[r1])
            kb, ib = ker[lo:hi], idx[lo:hi]
            if not np.all(np.isfinite(kb)):
                bad("kernel values are not finite (NaN or infinite)")
            if np.any(kb < 0):
                bad("kernel values are negative")
            if hi > lo and (int(ib.min()) < 0 or int(ib.max()) >= M):
                bad(f"indices outside 0 .. {M - 1} (the outputs)")
            inc = np.diff(ib.astype(np.int64)) > 0
            starts = ip[r0 + 1:r1] - lo  # positions where a new row begins
            starts = starts[(starts > 0) & (starts < hi - lo)]
            inc[starts - 1] = True
            if not inc.all():
                bad("indices are not strictly increasing within a row (duplicate or unsorted kernel entries)")
            r0 = r1
        P = self.params.get("pad_cells") if isinstance(self.params, dict) else None
        if not isinstance(P, int) or P < 0:
            bad("params['pad_cells'] (the output padding) is missing or invalid")
        oi, oj = self.output_ij[:, 0], self.output_ij[:, 1]
        if np.any(oi < -P) or np.any(oi >= ny + P) or np.any(oj < -P) or np.any(oj >= nx + P):
            bad(f"output_ij outside the padded grid ({P} cells beyond the {ny} x {nx} raster)")
        if np.any(self.output_step < 1):
            bad("output_step has values < 1")
        if self.remap_xy is not None:
            r = np.asarray(self.remap_xy)
            if r.shape != (M, 2) or r.dtype.kind != "f" or not np.all(np.isfinite(r)):
                bad("remap_xy is not a finite (outputs x 2) array")

    # ------------------------------------------------------------------ distributions
    def row(self, node: int):
        """Output distribution of one input node: (output indices, probabilities, floor mass).

        ``probabilities`` covers the kernel support; every other output y has probability
        ``weights[y] * exp(-cap) / s``, totalling ``floor mass`` (all together sum to 1).
        """
        lo, hi = self.indptr[node], self.indptr[node + 1]
        cols = self.indices[lo:hi]
        s = self.normaliser[node]
        cT = math.exp(-self.cap)
        p = self.weights[cols] * (self.kernel[lo:hi].astype(np.float64) + cT) / s
        floor = cT * (self.weights.sum() - self.weights[cols].sum()) / s
        return cols, p, floor

    def distribution(self, x: float, y: float) -> np.ndarray:
        """P(Q(u) = y) for all outputs at a location u = (x, y) in the map's CRS (bilinear mixture of nodes)."""
        nodes, lam = self._corners(np.array([[x, y]], float), outside="error", labels=["location"])
        p = np.zeros(len(self.weights))
        cT = math.exp(-self.cap)
        for k in range(4):
            node, wt = int(nodes[0, k]), float(lam[0, k])
            if wt == 0:
                continue
            lo, hi = self.indptr[node], self.indptr[node + 1]
            s = self.normaliser[node]
            q = self.weights * cT / s
            q[self.indices[lo:hi]] += self.weights[self.indices[lo:hi]] * self.kernel[lo:hi] / s
            p += wt * q
        return p

    def _corners(self, xy: np.ndarray, outside: str, labels):
        """Four corner nodes and their bilinear weights for each location (CRS of the map)."""
        base, tx, ty = self._cell(xy, outside, labels)
        nx = self.shape[1]
        nodes = np.stack([base, base + 1, base + nx, base + nx + 1], axis=1)
        lam = np.stack([(1 - ty) * (1 - tx), (1 - ty) * tx, ty * (1 - tx), ty * tx], axis=1)
        return nodes, lam

    def _cell(self, xy: np.ndarray, outside: str, labels):
        """Upper-left node of the cell of nodes holding each location, and the fractions (tx, ty)."""
        pm = self.privacy_map
        ny, nx = pm.shape
        t = pm.transform
        xmin, ymin, xmax, ymax = pm.bounds
        x, y = xy[:, 0], xy[:, 1]
        out = (x < xmin) | (x > xmax) | (y < ymin) | (y > ymax)
        if out.any() and outside == "error":
            raise GeometryError(
                "lie outside the mechanism's extent (the privacy map's raster)", np.asarray(labels)[out],
                "Drop them, build the mechanism on a raster that covers them, or use mech.with_outside('clamp') to release them "
                "as if they were at the nearest point of the raster (documented fallback).",
            )
        fx = np.clip((x - t.c) / t.a - 0.5, 0.0, nx - 1.0)
        fy = np.clip((y - t.f) / t.e - 0.5, 0.0, ny - 1.0)
        j0 = np.minimum(np.floor(fx).astype(np.int64), nx - 2)
        i0 = np.minimum(np.floor(fy).astype(np.int64), ny - 2)
        return i0 * nx + j0, fx - j0, fy - i0

    # ------------------------------------------------------------------ sampling
    @cached_property
    def _tables(self):
        """Per-row cumulative probabilities (row-local, float64) and the floor sampler."""
        n = len(self.normaliser)
        cT = math.exp(-self.cap)
        p = self.weights[self.indices] * self.kernel
        cdf = np.empty_like(p)
        ip = self.indptr
        for r in range(n):
            lo, hi = ip[r], ip[r + 1]
            if hi > lo:
                np.cumsum(p[lo:hi], out=cdf[lo:hi])
                cdf[lo:hi] /= self.normaliser[r]
        sparse_mass = np.zeros(n)
        nonempty = ip[1:] > ip[:-1]
        sparse_mass[nonempty] = cdf[ip[1:][nonempty] - 1]
        cumw = np.cumsum(self.weights)
        total = float(cumw[-1])
        cumw /= total
        cumw[-1] = 1.0
        # floor part: outputs y with prob w_y exp(-T) / s (all outputs, including those in the row's
        # support: the kernel there is S + exp(-T))
        floor_mass = cT * total / self.normaliser
        return cdf, sparse_mass, floor_mass, cumw

    def sample_nodes(self, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Output indices drawn from the rows of the given input nodes (exact, float64)."""
        cdf, sparse_mass, floor_mass, cumw = self._tables
        nodes = np.asarray(nodes, np.int64)
        n = len(nodes)
        u = rng.random(n) * (sparse_mass[nodes] + floor_mass[nodes])
        # the floor's uniform is drawn for every row, used or not: the number of draws depends on n
        # only, so a row's output never depends on which other rows are sampled with it (the keyed
        # streams of geopriv.distributed rely on this)
        v = rng.random(n)
        out = np.empty(n, np.int64)
        in_floor = u >= sparse_mass[nodes]
        k = np.flatnonzero(in_floor)
        if len(k):
            out[k] = np.minimum(np.searchsorted(cumw, v[k], side="right"), len(cumw) - 1)
        k = np.flatnonzero(~in_floor)
        if len(k):
            r = nodes[k]
            lo = self.indptr[r].copy()
            hi = self.indptr[r + 1] - 1
            target = u[k]
            while True:  # smallest position in [lo, hi] with cdf > target
                active = lo < hi
                if not active.any():
                    break
                mid = (lo + hi) >> 1
                go_right = cdf[mid] <= target
                lo = np.where(active & go_right, mid + 1, lo)
                hi = np.where(active & ~go_right, mid, hi)
            out[k] = self.indices[lo]
        return out

    def sample(self, xy, rng: np.random.Generator, *, outside: str | None = None, jitter: bool = True, labels=None, progress=None) -> np.ndarray:
        """Release locations ``xy`` ((n, 2) in the map's CRS): a new (n, 2) array.

        Each location is rounded to one of its 4 surrounding nodes with its bilinear weights,
        an output node is drawn from that node's distribution, and (``jitter=True``) moved
        uniformly within its lattice box.  ``xy`` is not modified.
        """
        outside = self.outside if outside is None else outside
        if outside not in ("error", "clamp"):
            raise ValueError("outside must be 'error' (default) or 'clamp'.")
        xy = np.asarray(xy, float)
        n = len(xy)
        labels = np.arange(n) if labels is None else labels
        base, tx, ty = self._cell(xy, outside, labels)
        out = np.empty((n, 2))
        chunk = 1_000_000
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            # bilinear randomised rounding: x and y rounded up independently with their fractions
            up_x = rng.random(stop - start) < tx[start:stop]
            up_y = rng.random(stop - start) < ty[start:stop]
            node = base[start:stop] + up_y * self.shape[1] + up_x
            y = self.sample_nodes(node, rng)
            pos = self.release_xy[y].copy()
            if jitter:
                hx, hy = self.privacy_map.cell_size
                half = self.output_step[y][:, None] * np.array([hx, hy]) * 0.5
                pos += (rng.random((stop - start, 2)) * 2.0 - 1.0) * half
            out[start:stop] = pos
            if progress is not None:
                progress(stop, n)
        return out

    def with_outside(self, outside: str) -> "EikonalMechanism":
        """The same mechanism with another rule for points outside the raster.

        ``"error"`` (default): :class:`~geopriv.exceptions.GeometryError` naming the rows.
        ``"clamp"``: such a point is released as if it were at the nearest point of the
        raster (clamping is 1-Lipschitz, so it gets that point's guarantee; its released
        position says nothing more about how far outside it was).
        """
        import dataclasses

        new = dataclasses.replace(self, outside=outside)
        if "_tables" in self.__dict__:
            new.__dict__["_tables"] = self.__dict__["_tables"]
        return new

    # ------------------------------------------------------------------ release contract
    #: the release path (:mod:`geopriv.release`) works in the mechanism's own public CRS
    frame_policy = "own"

    def public_bounds(self, crs):
        """The map's extent (public) as (xmin, ymin, xmax, ymax) in ``crs``: the release's public area."""
        from pyproj import CRS, Transformer

        pm = self.privacy_map
        ny, nx = pm.shape
        t = pm.transform
        xs = [t.c, t.c + t.a * nx]
        ys = [t.f, t.f + t.e * ny]
        b = (min(xs), min(ys), max(xs), max(ys))
        crs = CRS.from_user_input(crs)
        if crs.equals(self.crs):
            return b
        if crs.geodetic_crs is None:
            raise CRSError(f"The points' CRS {crs.name!r} has no datum; it cannot be related to the map's CRS.")
        return tuple(Transformer.from_crs(self.crs, crs, always_xy=True).transform_bounds(*b, densify_pts=21))

    def grid_epsilon_per_m(self) -> float:
        """The map's largest epsilon: fixes the default lattice step (public)."""
        return float(self.privacy_map.epsilon_max)

    def release(self, xy, frame, rng: np.random.Generator, labels=None) -> np.ndarray:
        """Release (n, 2) locations given in the map's CRS (the release path transforms them)."""
        return self.sample(xy, rng, outside=self.outside, labels=labels)

    def finite_precision(self, frame, lattice):
        return None, (
            f"discrete outputs with verified probability tables; within-cell jitter snapped to a public "
            f"{lattice.grid_m:g} m lattice (post-processing)"
        )

    def describe(self, frame) -> dict:
        """Public parameters for the provenance record (functions of the privacy map only)."""
        return {
            "mechanism": "eikonal",
            "definition": "local Lipschitz privacy (Koufogiannis & Pappas 2016), verified on the raster grid",
            "epsilon_min_per_m": float(self.privacy_map.epsilon_min),
            "epsilon_max_per_m": float(self.privacy_map.epsilon_max),
            "verified_max_ratio": None if self.report is None else float(self.report.max_ratio),
            "mechanism_id": self.mechanism_id,
            "map_crs": self.crs.to_string(),
            "between_nodes": "bilinear randomised rounding",
            "remap": None if self.remap_xy is None else f"posterior mean under the {self.remap_prior} prior",
            "outside": self.outside,
        }

    # ------------------------------------------------------------------ utility
    def expected_mse(self, prior=None, *, jitter: bool = True) -> float:
        """Expected squared error E|Q(u) - u|^2 in square ground metres, u ~ ``prior`` over nodes.

        Parameters
        ----------
        prior : None, "population", "uniform" or array (ny, nx)
            None: the map's population when it has one (the paper's choice), else uniform
            over cells with data.
        jitter : bool
            Include the variance of the release jitter (as :meth:`sample` does by default).
        """
        p = self.privacy_map.prior(prior)
        mask = p > 0
        return float((p[mask] * self.node_mse(jitter=jitter, where=mask)[mask]).sum())

    def node_mse(self, *, jitter: bool = True, where=None) -> np.ndarray:
        """Expected squared error E|Q(a) - a|^2 of every input node a, square ground metres (ny, nx).

        ``where`` (boolean (ny, nx)) limits the work to those nodes (others are NaN).
        Releases are the mechanism's (remapped ones after :meth:`with_remap`).
        """
        pm = self.privacy_map
        ny, nx = pm.shape
        n = ny * nx
        hx, hy = pm.cell_size
        sel = np.ones(n, bool) if where is None else np.asarray(where, bool).ravel()
        ux = np.tile(pm.node_x, ny)
        uy = np.repeat(pm.node_y, nx)
        ox, oy = self.release_xy[:, 0], self.release_xy[:, 1]
        w = self.weights
        cT = math.exp(-self.cap)
        jit = (self.output_step.astype(float) ** 2) * (hx * hx + hy * hy) / 12.0 if jitter else np.zeros(len(w))
        per = np.full(n, np.nan)
        ip = self.indptr
        step = max(1, n // 16)
        for r0 in range(0, n, step):  # blocks of rows: bounded memory
            r1 = min(n, r0 + step)
            rows_b = np.flatnonzero(sel[r0:r1]) + r0
            if len(rows_b) == 0:
                continue
            lo, hi = ip[r0], ip[r1]
            rows = np.repeat(np.arange(r0, r1), np.diff(ip[r0:r1 + 1]))
            keep = sel[rows]
            r, c = rows[keep], self.indices[lo:hi][keep]
            v = self.kernel[lo:hi][keep].astype(np.float64)
            d2 = (ux[r] - ox[c]) ** 2 + (uy[r] - oy[c]) ** 2 + jit[c]
            per[rows_b] = np.bincount(r - r0, w[c] * v * d2, minlength=r1 - r0)[rows_b - r0]
        W, mx, my = w.sum(), (w * ox).sum(), (w * oy).sum()
        q = (w * (ox**2 + oy**2 + jit)).sum()
        per += cT * (W * (ux**2 + uy**2) - 2 * (ux * mx + uy * my) + q)
        per /= self.normaliser
        return (per / _mean_ground_scale(pm) ** 2).reshape(ny, nx)

    def laplace_mse(self) -> float:
        """Expected squared error of planar Laplace at the map's smallest epsilon: 6 / eps_min^2 (m^2)."""
        from .planar_laplace import PlanarLaplace

        return PlanarLaplace(self.privacy_map.epsilon_min).mse()

    def compare_laplace(self, prior=None) -> dict:
        """Expected MSE of this mechanism vs planar Laplace at the minimum epsilon (which also meets the map)."""
        e = self.expected_mse(prior)
        lap = self.laplace_mse()
        return {"eikonal_mse_m2": e, "laplace_mse_m2": lap, "ratio": e / lap, "epsilon_min_per_m": self.privacy_map.epsilon_min}

    # ------------------------------------------------------------------ persistence
    @property
    def can_save_compact(self) -> bool:
        """True when the mechanism knows what recomputes its kernels (built or loaded by this version)."""
        return self.kernel_rate is not None and self.output_apex is not None

    def _arrays(self, compact: bool = False) -> dict:
        pm = self.privacy_map
        arrays = {
            "map_epsilon": pm.epsilon,
            "map_nodata": pm.nodata_mask.astype(np.uint8),
            "kernel_epsilon": self.kernel_epsilon,
            "output_ij": self.output_ij,
            "output_step": self.output_step,
            "weights": self.weights,
            "normaliser": self.normaliser,
        }
        if self.can_save_compact:  # full files keep them too (a few MB): they can be saved compact later
            arrays["kernel_rate"] = self.kernel_rate
            arrays["output_apex"] = self.output_apex
        if not compact:
            arrays.update(indptr=self.indptr, indices=self.indices, kernel=self.kernel)
        if pm.population is not None:
            arrays["map_population"] = pm.population
        if self.remap_xy is not None:
            arrays["remap_xy"] = self.remap_xy
        return arrays

    def _meta(self, include_report: bool = True, compact: bool = False) -> dict:
        pm = self.privacy_map
        meta = {
            "format": FORMAT,
            "format_version": COMPACT_VERSION if compact else FORMAT_VERSION,
            "crs_wkt": pm.crs.to_wkt(),
            "transform": list(affine6(pm.transform)),
            "map_info": pm.info,
            "cap": self.cap,
            "params": {k: v for k, v in self.params.items() if k != "timings"},
        }
        if self.remap_xy is not None:
            meta["remap_prior"] = self.remap_prior
        if include_report and self.report is not None:
            meta["report"] = self.report.to_dict()
        return meta

    def save(self, path, *, key: bytes | str | None = None, compact: bool | None = None) -> str:
        """Write the mechanism to ``path`` (a .npz file; built once, perturb many times).

        Parameters
        ----------
        compact : bool or None
            True: store only what cannot be recomputed cheaply (the maps, the kernel rate map,
            outputs, weights, normaliser, options: a few MB) and recompute the kernels at
            :meth:`load` (one pass of travel-time solves, as long as the build's kernel step).
            False: also store the kernels (fast loads; about 1.4 GB at 200 x 200 with the
            paper's scaling).  None (default): compact when possible (:attr:`can_save_compact`;
            mechanisms loaded from full files of earlier versions are saved in full).
        key : bytes or str, optional
            A secret signing key.  The file then also stores an HMAC-SHA256 under ``key`` of
            the same content as the checksum (arrays and metadata, not the stored report), and
            ``load(path, key=key)`` refuses the file if anything was changed.  Without a key,
            the file carries only the unkeyed SHA-256, which detects accidental corruption but
            not tampering (anyone can recompute it).  The signature protects only while the
            key is secret: keep it out of the file's directory, the repository and the logs.

        Returns the SHA-256 digest of the file's content (for a compact file, :attr:`mechanism_id`).
        """
        if compact is None:
            compact = self.can_save_compact
        if compact and not self.can_save_compact:
            raise ValueError(
                "This mechanism was loaded from a full file of an earlier version and does not know its kernel rate map: "
                "save it with compact=False, or rebuild it to save a compact file."
            )
        arrays = self._arrays(compact=compact)
        meta = self._meta(compact=compact)
        digest, mac = _digests(arrays, self._meta(include_report=False, compact=compact), None if key is None else _hmac_key(key))
        meta["sha256"] = digest
        if mac is not None:
            meta["hmac_sha256"] = mac
        path = os.fspath(path)
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta, default=_json_default)), **arrays)
        os.replace(tmp, path)
        return digest

    @classmethod
    def load(
        cls, path, *, privacy_map: PrivacyMap | None = None, verify: bool = True, key: bytes | str | None = None,
        n_jobs: int = 1, progress=None, mp_context=None,
    ) -> "EikonalMechanism":
        """Read a mechanism written by :meth:`save`.

        A compact file (the default of :meth:`save`) holds no kernels: they are recomputed here
        from the stored kernel rate map, outputs, apex radii and cap by the same code the build
        used (``n_jobs`` worker processes, ``progress`` as in :meth:`build`), so what is sampled is
        exactly what is checked below.

        Whatever the options, the file's SHA-256 checksum is checked (accidental corruption),
        every array sampling uses is checked for validity (finite, non-negative weights and
        kernel values, indices in range, ...), and the normaliser is recomputed from the
        weights and kernels and must match the stored one (to 1e-10, relative).

        Parameters
        ----------
        privacy_map : PrivacyMap, optional
            If given, the file must have been built for this exact map (same epsilon grid,
            transform and CRS), else :class:`MechanismFileError`.  Without it, the guarantee is
            verified against the map stored in the file: pass the map you mean to honour.
        verify : bool
            True (default): re-run :meth:`verify` on the loaded arrays, the full check of the
            realised ratio against the map (about as long as it took in ``build``: a load of
            the 1.4 GB file of a 200 x 200 map took 16-30 s on 2 cores, against 4-7 s with
            ``verify=False``).  False: skip it and trust the stored report; the checks above still
            run, but a file whose weights and normaliser were both edited consistently is then
            caught only by a key (below) or by ``verify=True``.
        key : bytes or str, optional
            The key the file was signed with (``save(path, key=...)``): the file must carry a
            valid HMAC-SHA256 under it, else :class:`MechanismFileError` (unsigned, changed
            after signing, or another key).  Without a key a signed file loads with the checks
            above.

        Raises
        ------
        MechanismFileError
            Missing, truncated or corrupt file (checksum), another format or version, a
            mismatch with ``privacy_map``, invalid arrays, a normaliser that does not match the
            weights, a failed verification, or (with ``key``) a missing or invalid signature.
        """
        from affine import Affine

        path = os.fspath(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise MechanismFileError(f"No mechanism file at {path!r}. Build one with EikonalMechanism.build(...).save(path).") from None
        except Exception as exc:  # zipfile.BadZipFile, ValueError, OSError, EOFError ...
            raise MechanismFileError(
                f"{path!r} is not a readable geopriv mechanism file ({type(exc).__name__}); it may be truncated, "
                "corrupt or another kind of file. Rebuild it with EikonalMechanism.build(...).save(path)."
            ) from None
        if "meta" not in data:
            raise MechanismFileError(f"{path!r} is an .npz file but not a geopriv mechanism (no metadata).")
        try:
            meta = json.loads(str(data.pop("meta")))
        except ValueError:
            raise MechanismFileError(f"{path!r} has unreadable metadata; the file is corrupt. Rebuild it.") from None
        if meta.get("format") != FORMAT:
            raise MechanismFileError(f"{path!r} is not an eikonal mechanism file (format {meta.get('format')!r}).")
        version = meta.get("format_version")
        if version not in (FORMAT_VERSION, COMPACT_VERSION):
            raise MechanismFileError(
                f"{path!r} has format version {version}, this geopriv reads versions {FORMAT_VERSION} (full) and "
                f"{COMPACT_VERSION} (compact). Rebuild the mechanism with this version."
            )
        compact = version == COMPACT_VERSION
        required = ["map_epsilon", "map_nodata", "kernel_epsilon", "output_ij", "output_step", "weights", "normaliser"]
        required += ["kernel_rate", "output_apex"] if compact else ["indptr", "indices", "kernel"]
        missing = [k for k in required if k not in data]
        if missing:
            raise MechanismFileError(f"{path!r} lacks {missing}; the file is truncated or corrupt. Rebuild it.")
        stored = meta.get("sha256")
        signature = meta.get("hmac_sha256")
        check = dict(meta)
        check.pop("sha256", None)
        check.pop("hmac_sha256", None)
        check.pop("report", None)
        if key is not None:
            key = _hmac_key(key)
            if not isinstance(signature, str):
                raise MechanismFileError(
                    f"{path!r} is not signed, but a key was given: it cannot be authenticated. Load a file saved with "
                    "save(path, key=...), or rebuild and save it with your key."
                )
        digest, mac = _digests(data, check, key)
        if stored != digest:
            raise MechanismFileError(
                f"{path!r} fails its checksum: the arrays were changed or corrupted after saving. Rebuild it; do not "
                "release with it."
            )
        if key is not None and not hmac.compare_digest(signature, mac):
            raise MechanismFileError(
                f"{path!r} fails its signature: it was changed after it was signed, or signed with another key. "
                "Do not release with it; rebuild it and save(path, key=...) with your key."
            )
        try:
            crs = meta["crs_wkt"]
            transform = Affine(*meta["transform"])
            pm = PrivacyMap(
                data["map_epsilon"], transform, crs, data["map_nodata"].astype(bool), data.get("map_population"), meta.get("map_info", {})
            )
        except Exception as exc:
            raise MechanismFileError(f"{path!r} holds an invalid privacy map ({exc}). Rebuild it.") from None
        n = pm.shape[0] * pm.shape[1]
        if compact:
            data.update(_recompute_kernels(path, pm, meta, data, n_jobs, progress, mp_context))
        if len(data["indptr"]) != n + 1 or len(data["normaliser"]) != n or len(data["indices"]) != len(data["kernel"]):
            raise MechanismFileError(f"{path!r} has inconsistent array sizes; it is corrupt. Rebuild it.")
        remap = data.get("remap_xy")
        if remap is not None and np.shape(remap) != (len(data["weights"]), 2):
            raise MechanismFileError(f"{path!r} has a remap_xy of the wrong shape; it is corrupt. Rebuild it.")
        if privacy_map is not None:
            same = (
                privacy_map.shape == pm.shape
                and np.array_equal(privacy_map.epsilon, pm.epsilon)
                and affine6(privacy_map.transform) == affine6(pm.transform)
                and privacy_map.crs.equals(pm.crs)
            )
            if not same:
                raise MechanismFileError(
                    f"{path!r} was built for another privacy map (different epsilon grid, extent or CRS). Load the file "
                    "built for this map, or build one: EikonalMechanism.build(privacy_map).save(path)."
                )
        rep = meta.get("report")
        report = None
        if rep is not None:
            report = VerifyReport(
                max_ratio=rep["max_ratio"], normaliser_ratio=rep["normaliser_ratio"], worst=rep["worst"],
                node_ratio=np.zeros(pm.shape), n_nodes=rep["n_nodes"], n_outputs=rep["n_outputs"],
                n_edges=rep["n_edges"], seconds=rep["seconds"], tolerance=rep.get("tolerance", TOLERANCE),
                normaliser_mismatch=rep.get("normaliser_mismatch", 0.0),
            )
        mech = cls(
            privacy_map=pm,
            kernel_epsilon=data["kernel_epsilon"],
            output_ij=data["output_ij"],
            output_step=data["output_step"],
            weights=data["weights"],
            indptr=data["indptr"],
            indices=data["indices"],
            kernel=data["kernel"],
            cap=float(meta["cap"]),
            normaliser=data["normaliser"],
            params=dict(meta.get("params", {})),
            report=report,
            remap_xy=data.get("remap_xy"),
            remap_prior=meta.get("remap_prior"),
            kernel_rate=data.get("kernel_rate"),
            output_apex=data.get("output_apex"),
        )
        try:
            if verify or report is None:
                fresh = mech.verify()  # checks the arrays, recomputes the normaliser and the ratios
                mismatch = fresh.normaliser_mismatch
            else:
                fresh = None
                mech._check_arrays()
                mismatch = _normaliser_mismatch(mech.normaliser, mech._exact_normaliser())
        except MechanismFileError as exc:
            raise MechanismFileError(f"{path!r}: {exc}") from None
        if not mismatch <= NORMALISER_RTOL:
            raise MechanismFileError(
                f"{path!r} stores a normaliser that is not the row sums of its weights and kernels (relative difference "
                f"up to {mismatch:.3g}): the arrays were edited after the build, and what sampling draws from is not what "
                "was verified. Do not release with it; rebuild it (EikonalMechanism.build(privacy_map).save(path))."
            )
        if fresh is not None:
            if not fresh.ok:
                raise MechanismFileError(
                    f"{path!r} does not meet its privacy map on verification: {fresh}. Do not release with it; rebuild it."
                )
            object.__setattr__(mech, "report", fresh)
        return mech

    def __repr__(self) -> str:
        pm = self.privacy_map
        r = "unverified" if self.report is None else f"verified ratio {self.report.max_ratio:.4f}"
        return (
            f"EikonalMechanism({pm.shape[0]} x {pm.shape[1]} inputs, {len(self.weights)} outputs, "
            f"epsilon {pm.epsilon_min:.4g} .. {pm.epsilon_max:.4g} per metre, {r})"
        )


def _recompute_kernels(path, pm: PrivacyMap, meta: dict, data: dict, n_jobs: int, progress, mp_context) -> dict:
    """Kernels of a compact file (indptr, indices, kernel), recomputed as :meth:`EikonalMechanism.build` computed them."""
    ny, nx = pm.shape
    params = meta.get("params") or {}
    P, solver, cap = params.get("pad_cells"), params.get("solver", "graph"), meta.get("cap")
    kp, apex_t, oij = data["kernel_rate"], data["output_apex"], data["output_ij"]
    M = len(data["weights"])
    problems = []
    if not isinstance(P, int) or P < 0:
        problems.append("params['pad_cells'] is missing or invalid")
    elif np.shape(kp) != (ny + 2 * P, nx + 2 * P):
        problems.append(f"kernel_rate has shape {np.shape(kp)}, expected {(ny + 2 * P, nx + 2 * P)}")
    if solver not in ("graph", "fmm"):
        problems.append(f"unknown solver {solver!r}")
    if not (isinstance(cap, (int, float)) and math.isfinite(cap) and cap > 0):
        problems.append("cap is not a finite number > 0")
    if np.asarray(kp).dtype.kind != "f" or not (np.all(np.isfinite(kp)) and np.all(np.asarray(kp) > 0)):
        problems.append("kernel_rate is not finite and > 0 everywhere")
    if np.shape(apex_t) != (M,) or np.asarray(apex_t).dtype.kind != "f" or not (np.all(np.isfinite(apex_t)) and np.all(np.asarray(apex_t) >= 0)):
        problems.append("output_apex is not one finite radius >= 0 per output")
    if np.shape(oij) != (M, 2) or np.asarray(oij).dtype.kind not in "iu":
        problems.append("output_ij is not one (row, col) pair per output")
    elif not problems:
        oi, oj = oij[:, 0] + P, oij[:, 1] + P
        if np.any(oi < 0) or np.any(oj < 0) or np.any(oi >= ny + 2 * P) or np.any(oj >= nx + 2 * P):
            problems.append("output_ij outside the padded grid")
    if problems:
        raise MechanismFileError(f"{path!r} is a compact mechanism file with invalid contents ({'; '.join(problems)}). Rebuild it.")
    hx, hy = pm.cell_size
    S, _colmass, _sweeps = _compute_kernels(
        np.asarray(kp, np.float64), (ny, nx), (hy, hx), P, oij[:, 0] + P, oij[:, 1] + P, np.asarray(apex_t, np.float64),
        float(cap), solver, int(n_jobs), progress, mp_context,
    )
    S = S.tocsr()
    S.sort_indices()
    return {"indptr": S.indptr.astype(np.int64), "indices": S.indices.astype(np.int32), "kernel": S.data.astype(np.float32)}


# ============================================================================================
# weights
# ============================================================================================
def _normaliser_share(s: np.ndarray, pm: PrivacyMap) -> float:
    """max over neighbouring nodes of |delta ln s| / allowed log-ratio."""
    ny, nx = pm.shape
    ls = np.log(np.maximum(s, 1e-300)).reshape(ny, nx)
    return max(float((np.abs(ls[a] - ls[b]) / al).max()) for (a, b), al in zip(_edge_slices(), _allowed(pm)))


def _normaliser_mismatch(stored: np.ndarray, exact: np.ndarray) -> float:
    """Largest relative difference |stored - exact| / exact (inf when shapes differ, NaN propagates as inf)."""
    if np.shape(stored) != np.shape(exact):
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        d = float(np.max(np.abs(np.asarray(stored, np.float64) - exact) / exact))
    return d if math.isfinite(d) else math.inf


def _relative_share(s: np.ndarray, pm: PrivacyMap, budget) -> float:
    """max over neighbouring nodes of |delta ln s| / budget (per-edge allowance of the normaliser)."""
    ny, nx = pm.shape
    ls = np.log(np.maximum(s, 1e-300)).reshape(ny, nx)
    return max(float((np.abs(ls[a] - ls[b]) / bd).max()) for (a, b), bd in zip(_edge_slices(), budget))


def _row_sums(indptr, indices, data, w, chunk: int = 10_000_000) -> np.ndarray:
    """sum_k w[indices[k]] * data[k] per CSR row, in float64, in blocks of rows (bounded memory)."""
    n = len(indptr) - 1
    out = np.zeros(n)
    r0 = 0
    while r0 < n:
        lo = indptr[r0]
        r1 = int(np.searchsorted(indptr, lo + chunk, side="right")) - 1
        r1 = min(max(r1, r0 + 1), n)
        hi = indptr[r1]
        vals = w[indices[lo:hi]] * data[lo:hi].astype(np.float64)
        starts = indptr[r0:r1] - lo
        nonempty = indptr[r0 + 1:r1 + 1] > indptr[r0:r1]
        if nonempty.any():
            out[r0:r1][nonempty] = np.add.reduceat(vals, starts[nonempty])
        r0 = r1
    return out


class _BlockProducts:
    """S @ w and S.T @ r for a CSC matrix, split into column blocks run on threads (no copies).

    scipy's sparse products release the GIL, so blocks run in parallel.
    """

    def __init__(self, S, threads: int):
        import scipy.sparse as sp

        self.shape = S.shape
        M = S.shape[1]
        k = max(1, int(threads))
        cuts = np.searchsorted(S.indptr, np.linspace(0, S.indptr[-1], k + 1)[1:-1])
        edges = [0, *sorted(set(int(c) for c in cuts if 0 < c < M)), M]
        self.blocks = []
        for a, b in zip(edges[:-1], edges[1:]):
            lo, hi = S.indptr[a], S.indptr[b]
            blk = sp.csc_matrix((S.data[lo:hi], S.indices[lo:hi], S.indptr[a:b + 1] - lo), shape=(S.shape[0], b - a))
            self.blocks.append((a, b, blk))
        self.pool = None
        if len(self.blocks) > 1:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(len(self.blocks))

    def _map(self, fn):
        if self.pool is None:
            return [fn(b) for b in self.blocks]
        return list(self.pool.map(fn, self.blocks))

    def mul(self, w32):
        parts = self._map(lambda blk: blk[2] @ w32[blk[0]:blk[1]])
        return np.sum(parts, axis=0, dtype=np.float64) if len(parts) > 1 else parts[0].astype(np.float64)

    def rmul(self, r32):
        parts = self._map(lambda blk: blk[2].T @ r32)
        return np.concatenate(parts).astype(np.float64)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()


def _kept_indptr(indptr: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Column pointers of a compressed sparse matrix after dropping the entries where ``keep`` is False.

    Counts the kept entries of each column from a cumulative sum, so columns without entries
    (outputs whose kernel never reaches the raster above the solve cap, common at the ends of
    the padded output lattice) are handled wherever they are.  ``np.add.reduceat`` on the
    column starts cannot do this: it reads one entry past the end when the last columns are
    empty, and returns an entry instead of 0 for an empty column.
    """
    kept = np.zeros(len(keep) + 1, np.int64)
    np.cumsum(keep, out=kept[1:])
    return kept[np.asarray(indptr, dtype=np.int64)]


def _solve_weights(S, cT, ostep, colmass, pm: PrivacyMap, budget, max_iter: int, threads: int = 1, solve_cap: float | None = 8.0):
    """Nonnegative weights making ln s flat (s = K w, K = S + exp(-T)).

    Projected Barzilai-Borwein gradient on 1/2 |K w - 1|^2 (float32 products), in the
    variables v = w / w0 where w0 = spacing^2 / column mass is the continuous normaliser
    (columns of comparable scale converge together).  The iterations use the kernel
    truncated at travel time ``solve_cap`` (entries below exp(-solve_cap) dropped: the tail
    holds a share (1 + T') exp(-T') of each kernel's mass, about 3e-3 at T' = 8, spread
    smoothly, so it barely moves ln s); a few polishing iterations on the full kernel follow
    only if the exact normaliser misses.  ``budget`` is the per-edge allowance (4 families,
    as :func:`_allowed`) that |delta ln s| may use; the solve stops when the normaliser uses
    at most 90 % of it or stops improving (the best iterate is kept; ``build`` computes the
    exact normaliser and decides).

    Returns (w, iterations, history of (iteration, relative share)).
    """
    import scipy.sparse as sp

    w0 = ostep.astype(float) ** 2 / colmass
    goal = 0.9
    history = []
    if solve_cap is not None and solve_cap < -math.log(cT):
        thr = np.float32(math.exp(-solve_cap) - cT)
        keep = S.data >= thr
        St = sp.csc_matrix((S.data[keep], S.indices[keep], _kept_indptr(S.indptr, keep)), shape=S.shape)
        del keep
        v, it, hist = _bb(St, cT, w0, pm, budget, goal, max_iter, threads, v=None)
        del St
        history.extend(hist)
        s = _BlockProducts(S, threads)
        exact = _relative_share(s.mul((w0 * v).astype(np.float32)) + cT * float((w0 * v).sum()), pm, budget)
        s.close()
        history.append((it, exact))
        if exact < 0.97:
            return w0 * v, it, history
        v, it2, hist = _bb(S, cT, w0, pm, budget, goal, min(100, max_iter), threads, v=v)
        history.extend((it + i, sh) for i, sh in hist)
        return w0 * v, it + it2, history
    v, it, hist = _bb(S, cT, w0, pm, budget, goal, max_iter, threads, v=None)
    return w0 * v, it, hist


def _bb(S, cT, w0, pm, budget, goal, max_iter, threads, v=None):
    """Projected Barzilai-Borwein iterations on 1/2 |K diag(w0) v - 1|^2, v >= 0."""
    ops = _BlockProducts(S, threads)

    def kw(v):
        w = w0 * v
        return ops.mul(w.astype(np.float32)) + cT * float(w.sum())

    if v is None:
        v = np.ones_like(w0)
        s = kw(v)
        v /= float(np.median(s))
    s = kw(v)
    best = (_relative_share(s, pm, budget), v)
    history = [(0, best[0])]
    prev_v = prev_g = None
    it = 0
    stall = 0
    while it < max_iter and best[0] > goal and stall < 50:
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
        if it % 5 == 0:
            share = _relative_share(s, pm, budget)
            if it % 25 == 0:
                history.append((it, share))
            if share < best[0] * (1 - 1e-2):
                best = (share, v)
                stall = 0
            else:
                stall += 5
                if share < best[0]:
                    best = (share, v)
    ops.close()
    return best[1], it, history


def _win(iw, sa, r0, r1, c0, c1):
    """Slice of a per-edge array (full grid) matching the window [r0:r1, c0:c1] and family slices."""
    # edge arrays are indexed by their 'a' node for families 0-2, and by (row, col-1) for family 3
    ra = slice(r0, r1 - (0 if sa[0] == slice(None) else 1))
    if sa[1] == slice(None):
        ca = slice(c0, c1)
    elif sa[1] == slice(0, -1):
        ca = slice(c0, c1 - 1)
    else:  # (e0, e1): anti-diagonal, edge stored at (row, col - 1)
        ca = slice(c0, c1 - 1)
    return iw[ra, ca]


def _node_max(node, ratio, sa, sb, r0, c0):
    """Update per-node maxima with an edge-ratio array (both endpoints)."""
    for s in (sa, sb):
        ro = r0 + (0 if s[0].start is None else s[0].start)
        co = c0 + (0 if s[1].start is None else s[1].start)
        view = node[ro:ro + ratio.shape[0], co:co + ratio.shape[1]]
        np.maximum(view, ratio, out=view)


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _digest(arrays: dict, meta: dict) -> str:
    """Unkeyed SHA-256 of the metadata and arrays: detects accidental corruption only (anyone can recompute it)."""
    return _digests(arrays, meta)[0]


def _digests(arrays: dict, meta: dict, key: bytes | None = None) -> tuple[str, str | None]:
    """(SHA-256, HMAC-SHA256 under ``key`` or None) of the same content, in one pass over the arrays."""
    hs = [hashlib.sha256()]
    if key is not None:
        hs.append(hmac.new(key, digestmod=hashlib.sha256))

    def update(b):
        for h in hs:
            h.update(b)

    update(json.dumps(meta, sort_keys=True, default=_json_default).encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        update(k.encode())
        update(str(a.dtype).encode())
        update(str(a.shape).encode())
        update(memoryview(a.reshape(-1)).cast("B") if a.size else b"")  # the bytes of a.tobytes(), without a copy
    return hs[0].hexdigest(), (hs[1].hexdigest() if key is not None else None)


def _hmac_key(key) -> bytes:
    """A signing key as bytes (str is UTF-8 encoded)."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise TypeError("key must be bytes or str (a secret kept apart from the mechanism files).")
    key = bytes(key)
    if not key:
        raise ValueError("key must not be empty.")
    return key
