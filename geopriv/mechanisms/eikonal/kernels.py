"""Kernels of the eikonal mechanism: travel times from each output, exp(-f~) on the grid.

For every output y, f_y is a discrete eikonal solution on the (padded, lowered) kernel rate
map: Dijkstra on the 16-neighbour grid graph whose edges carry the integral of the rate
(``solver="graph"``, exactly Lipschitz by construction) or fast marching plus the exact
Lipschitz envelope (``solver="fmm"``).  Then f~_y = min(sqrt(f_y^2 + A_y^2) - A_y, T) and the
kernel is stored as the sparse part exp(-f~_y) - exp(-T).  See the package notes
(:mod:`geopriv.mechanisms.eikonal`) for why this keeps the guarantee.

:func:`compute_kernels` is a deterministic function of its arguments: the build and the
load of a compact file both call it, so a loaded mechanism samples from the kernels the build
verified.  Outputs are independent: they run in worker processes that receive the problem
once through the pool's initializer (every start method works: ``spawn`` on Windows/macOS).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ...exceptions import ParameterError
from ...privacy_map import edge_weights, lipschitz_envelope
from ..grid import edge_slices, edge_window
from ..pool import can_start_workers, process_pool, startup_seconds, worker_state

FMM_SLACK = 0.98
# window half-sizes tried for each output (cells): about 6 % apart, so windows are rarely much
# larger than the kernel's support
_RADII = np.unique(np.round(4 * 1.06 ** np.arange(90)).astype(int))

#: outputs per chunk of kernel solves (a worker's unit of work; the row sums are added by chunk)
CHUNK = 256

#: bits of an edge weight kept below the largest weight's leading bit (the weights are rounded
#: down to multiples of a power of two, see :func:`stencil_graph`)
GRAPH_BITS = 30


def _kernel_columns(outputs: np.ndarray, g: dict | None = None):
    """Kernels of the given outputs: (counts, rows int32, values float32, colmass, sweeps, extremes, info).

    Reductions run here, in the worker, from the very arrays computed (before any filter):
    ``extremes`` (:class:`LogRatioExtremes` of these columns over the band of raster lines
    they touch, or None when not asked for) and, when the problem carries ``weights``, the
    band's part of the row sums sum_y w_y kernel_y(u) (``info["rowsum"]``, float64, from
    line ``info["band"]``).  Then the returned arrays are filtered: rows outside
    ``keep_rows`` dropped, values below ``truncate`` dropped, or everything dropped with
    ``hold=False`` (``info["nnz"]`` counts the entries before filtering).

    ``g`` is the problem (:func:`kernel_pass`); worker processes receive it once through the
    pool's initializer (:data:`geopriv.mechanisms.pool.worker_state`, private to each worker), the calling process passes it
    explicitly, so passes in several threads of one process never see each other's problem.
    """
    g = worker_state if g is None else g
    if g["solver"] == "graph":
        counts, rows, vals, colmass, sweeps = _kernel_columns_graph(outputs, g)
    else:
        counts, rows, vals, colmass, sweeps = _kernel_columns_fmm(outputs, g)
    ny, nx = g["ny"], g["nx"]
    cT = math.exp(-g["cap"])
    ext = None
    info = {"nnz": int(len(rows)), "band": 0, "rowsum": None, "outputs": outputs}
    w = g.get("weights")
    if (g.get("extremes") or w is not None) and len(rows):
        # the band of raster lines the columns touch, plus one line each side (edges leaving it)
        b0 = max(int(rows.min()) // nx - 1, 0)
        b1 = min(int(rows.max()) // nx + 2, ny)
        local = rows - np.int32(b0 * nx)
        if g.get("extremes"):
            track = g.get("extremes") == "track"
            ext = LogRatioExtremes((b1 - b0, nx), row0=b0, track=track)
            ext.add_columns(counts, local, vals, cT, outputs=outputs if track else None)
        if w is not None:
            info["band"], info["rowsum"] = band_row_sums(counts, rows, vals, w[outputs], ny, nx)
    keep = None
    if not g.get("hold", True):  # reductions only
        keep = np.zeros(len(rows), bool)
    else:
        if g.get("keep_rows") is not None:
            keep = g["keep_rows"][rows]
        if g.get("truncate") is not None:
            t = vals >= g["truncate"]
            keep = t if keep is None else keep & t
    if keep is not None:
        col = np.repeat(np.arange(len(outputs)), counts)
        counts = np.bincount(col[keep], minlength=len(outputs)).astype(np.int64)
        rows, vals = rows[keep], vals[keep]
    return counts, rows, vals, colmass, sweeps, ext, info


def band_row_sums(counts, rows, vals, w, ny: int, nx: int) -> tuple[int, np.ndarray]:
    """(b0, sums): sum_y w_y kernel_y(u) over one chunk's columns, for the raster nodes u of lines
    b0 .. (those the columns touch, plus one each side), in float64.  The one formula for the
    workers' row sums and :meth:`KernelColumns.row_sums`, so held and on-demand builds add the
    same numbers in the same order."""
    b0 = max(int(rows.min()) // nx - 1, 0)
    b1 = min(int(rows.max()) // nx + 2, ny)
    wy = np.repeat(np.asarray(w, np.float64), counts)
    return b0, np.bincount(rows - np.int32(b0 * nx), wy * vals.astype(np.float64), minlength=(b1 - b0) * nx)


class LogRatioExtremes:
    """Per pair of neighbouring raster nodes (a, b): the extremes of ln K_y(a) - ln K_y(b) over outputs y.

    K_y = stored kernel value + exp(-cap), in float64, exactly as sampling and
    :func:`~geopriv.mechanisms.eikonal.verification.verify` read it.  ``hi`` and ``lo`` start
    at 0: an output whose support holds neither node has K_y(a) = K_y(b) = exp(-cap) (there is
    always one on a real map, and counting it is conservative).  Verification needs only
    these two numbers per edge: for the released probabilities P(y | u) = w_y K_y(u) / s(u)
    the log-ratio over an edge is alpha_y - (ln s(a) - ln s(b)), so its largest absolute value
    over y is max(hi - d, d - lo) with d the normaliser's term.  Computing them per column
    block, in the worker that solved the block and from the arrays it returns, makes the
    verification parallel and saves it a second pass over 10^8 entries.  Which output
    attains the worst edge is found afterwards from that edge's two rows, or, with
    ``track=True`` (kernels on demand, where rows are not at hand), recorded here: ``hi_at``
    and ``lo_at`` hold the output attaining ``hi`` and ``lo`` (-1: the start value 0).
    """

    def __init__(self, shape, row0: int = 0, track: bool = False):
        ny, nx = (int(v) for v in shape)
        self.shape = (ny, nx)
        self.row0 = int(row0)  # first raster line covered (a band of a larger raster)
        shapes = [(ny, nx - 1), (ny - 1, nx), (ny - 1, nx - 1), (ny - 1, nx - 1)]
        self.hi = [np.zeros(sh) for sh in shapes]
        self.lo = [np.zeros(sh) for sh in shapes]
        self.hi_at = [np.full(sh, -1, np.int32) for sh in shapes] if track else None
        self.lo_at = [np.full(sh, -1, np.int32) for sh in shapes] if track else None

    def add_columns(self, counts, rows, vals, cT: float, outputs=None) -> None:
        """Account for columns given as per-column counts, rows (raster nodes) and values
        (``outputs``: the output index of each column, needed when tracking)."""
        ny, nx = self.shape
        slices = edge_slices()
        ends = np.cumsum(np.asarray(counts, np.int64))
        for k, (hi_e, n) in enumerate(zip(ends, counts)):
            if n == 0:
                continue
            lo_e = hi_e - n
            gi, gj = np.divmod(rows[lo_e:hi_e], nx)
            r0, r1 = max(int(gi.min()) - 1, 0), min(int(gi.max()) + 2, ny)
            c0, c1 = max(int(gj.min()) - 1, 0), min(int(gj.max()) + 2, nx)
            K = np.full((r1 - r0, c1 - c0), cT)
            K[gi - r0, gj - c0] += vals[lo_e:hi_e]
            L = np.log(K, out=K)
            for f, (sa, sb) in enumerate(slices):
                a = np.subtract(L[sa], L[sb])
                if a.size == 0:
                    continue
                win = edge_window(f, r0, r1, c0, c1)
                hi, lo = self.hi[f][win], self.lo[f][win]
                if self.hi_at is None:
                    np.maximum(hi, a, out=hi)
                    np.minimum(lo, a, out=lo)
                else:
                    y = int(outputs[k])
                    m = a > hi
                    np.copyto(hi, a, where=m)
                    np.copyto(self.hi_at[f][win], y, where=m)
                    m = np.less(a, lo, out=m)
                    np.copyto(lo, a, where=m)
                    np.copyto(self.lo_at[f][win], y, where=m)

    def merge(self, other: "LogRatioExtremes", row: int | None = None) -> None:
        """Fold in the extremes of other columns, or of a band of raster lines starting at line ``row``
        (default: the band's own ``row0``)."""
        row = other.row0 if row is None else int(row)
        for f in range(4):
            h, w = other.hi[f].shape
            hi, lo = self.hi[f][row : row + h, :w], self.lo[f][row : row + h, :w]
            if self.hi_at is None:
                np.maximum(hi, other.hi[f], out=hi)
                np.minimum(lo, other.lo[f], out=lo)
            else:  # ties keep the smaller output, and the start (-1) against any output
                for mine, theirs, at, at_o, better in (
                    (hi, other.hi[f], self.hi_at[f], other.hi_at[f], np.greater),
                    (lo, other.lo[f], self.lo_at[f], other.lo_at[f], np.less),
                ):
                    at = at[row : row + h, :w]
                    m = better(theirs, mine) | ((theirs == mine) & (at >= 0) & (at_o >= 0) & (at_o < at))
                    np.copyto(mine, theirs, where=m)
                    np.copyto(at, at_o, where=m)


def graph_quantum(max_weight: float, bits: int) -> float:
    """The power of two q to whose multiples edge weights are rounded down: 2^-bits of the largest weight's binade."""
    return math.ldexp(1.0, math.frexp(float(max_weight))[1] - int(bits))


def exact_limit(graph, bits: int | None) -> float:
    """Largest travel time below which every Dijkstra sum on a quantised ``graph`` is exact (0 if not quantised).

    With weights multiples of q, every path length is an integer times q, exact in float64 below
    2^53 q; a search up to a limit L forms sums up to L + the largest weight.
    """
    if bits is None or graph.nnz == 0:
        return 0.0
    wmax = float(graph.data.max())
    return math.ldexp(graph_quantum(wmax, bits), 53) - 2.0 * wmax


def stencil_graph(kp: np.ndarray, hy: float, hx: float, bits: int | None = None):
    """Sparse 16-neighbour grid graph; edge weight = integral of the rate along the segment.

    ``bits`` (new builds: :data:`GRAPH_BITS`; None for mechanisms of earlier versions): each
    weight is rounded **down** to a multiple of the power of two q = :func:`graph_quantum`.
    Path lengths are then exact sums (below :func:`exact_limit`), so the travel time from y to u
    is the same float as from u to y, bit for bit: one search from an input node gives its whole
    kernel row exactly as the column searches from the outputs give it (:func:`kernel_rows`).
    Rounding down only shortens edges by < q (about 1e-9 of the largest), so kernels decay no
    faster than the rate map allows.

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
    if bits is not None and len(v):
        q = graph_quantum(v.max(), bits)
        v = np.floor(v / q) * q  # exact: q is a power of two
    return sp.csr_matrix((v, (r, c)), shape=(NY * NX, NY * NX))


def _kernel_columns_graph(outputs: np.ndarray, g: dict):
    """Kernels by Dijkstra on the 16-neighbour graph (exactly Lipschitz by construction).

    Only the nodes Dijkstra reached (travel time below the cap plus apex) are processed;
    every other node of the padded grid holds the cap value exp(-T).
    """
    from scipy.sparse.csgraph import dijkstra

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
        ms = outputs[start : start + batch]
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
        colmass[start : start + len(ms)] = np.bincount(bi, ker, minlength=len(ms)) + (n_all - per) * cT
        dj = to_dom[bj]
        keep = dj >= 0
        counts[start : start + len(ms)] = np.bincount(bi[keep], minlength=len(ms))
        rows_out.append(dj[keep].astype(np.int32))
        vals_out.append((ker[keep] - cT).astype(np.float32))
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, np.int32)
    vals = np.concatenate(vals_out) if vals_out else np.zeros(0, np.float32)
    return counts, rows, vals, colmass, 0


def _kernel_columns_fmm(outputs: np.ndarray, g: dict):
    """Kernels by fast marching (scikit-fmm) plus the exact Lipschitz envelope."""
    import skfmm

    kf, mins, wts = g["kf"], g["mins"], g["weights_edges"]
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
        t = skfmm.travel_time(
            phi, 1.0 / speed_eps, dx=[hy, hx], order=g.get("order", 2), narrow=max(narrow - e0 * r0, hd)
        )
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
            wts[0][a0:a1, b0 : b1 - 1],
            wts[1][a0 : a1 - 1, b0:b1],
            wts[2][a0 : a1 - 1, b0 : b1 - 1],
            wts[3][a0 : a1 - 1, b0 : b1 - 1],
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
            fd = f[c0 - a0 : c1 - a0, d0 - b0 : d1 - b0]
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


def _run_kernels(order: np.ndarray, problem: dict, n_jobs: int, progress, mp_context=None, on_result=None):
    """Kernels for all outputs as a list of per-chunk results in output order, optionally in worker processes.

    ``on_result(k, result)``, if given, is applied to chunk ``k``'s result as it arrives and its
    return value is kept instead (a reduction that should not wait for every chunk).

    The problem (graph or speed map, outputs, cap) is sent to each worker once through the
    pool's initializer (:func:`geopriv.mechanisms.pool.process_pool`: every start method works;
    ``mp_context`` picks one, default the platform's; inside a daemonic process the chunks run
    in this process).
    """
    M = len(order)
    chunk = CHUNK
    chunks = [order[k : k + chunk] for k in range(0, M, chunk)]
    results = [None] * len(chunks)
    bar, callback = progress_reporter(progress, M, "eikonal kernels")
    done = 0
    pool = process_pool(min(n_jobs, len(chunks)), problem, mp_context)
    if pool is not None:
        from concurrent.futures import as_completed

        with pool:
            futures = {pool.submit(_kernel_columns, c): k for k, c in enumerate(chunks)}
            for fut in as_completed(futures):
                k = futures[fut]
                results[k] = fut.result() if on_result is None else on_result(k, fut.result())
                done += len(chunks[k])
                if callback:
                    callback(done, M)
    else:
        for k, c in enumerate(chunks):
            res = _kernel_columns(c, problem)
            results[k] = res if on_result is None else on_result(k, res)
            done += len(c)
            if callback:
                callback(done, M)
    if bar is not None:
        bar.close()
    return results


@dataclass
class KernelPass:
    """What one pass of kernel solves returns (:func:`kernel_pass`).

    ``columns``: the kept entries as :class:`KernelColumns` over the pass's outputs (None with
    ``hold=False``); ``colmass`` (one per output of the pass), ``sweeps``; ``extremes``
    (:class:`LogRatioExtremes` of every output of the pass, or None); ``rowsum``: sum_y w_y
    kernel_y(u) per raster node (float64, without the cap term; None unless ``weights``);
    ``nnz``: entries before any filter.
    """

    columns: "KernelColumns | None"
    colmass: np.ndarray
    sweeps: int
    extremes: "LogRatioExtremes | None"
    rowsum: np.ndarray | None
    nnz: int


@dataclass(frozen=True, eq=False)
class KernelProblem:
    """What defines an eikonal mechanism's kernels: the inputs every pass of kernel solves shares.

    Public data only, and the same at the build, at the load of a compact file and for kernels
    on demand (:func:`.ondemand.kernel_problem`), so each of them solves the kernels the build
    verified.

    Parameters
    ----------
    kp : ndarray (NY, NX)
        The padded, lowered kernel rate map (epsilon per CRS unit).
    shape : (ny, nx)
        The raster's shape (the inputs: its cell centres).
    cell : (hy, hx)
        Cell height and width in CRS units.
    P : int
        Padding in cells on each side of the raster (``kp`` is ``(ny + 2 P, nx + 2 P)``).
    oi, oj : ndarray (M,) of int
        The outputs as padded grid indices.
    apex_t : ndarray (M,)
        Apex radius of each output's kernel, travel-time units.
    cap : float
        The kernel cap T, travel-time units.
    solver : {"graph", "fmm"}
        How travel times are computed.
    graph_bits : int or None
        Quantisation of the stencil graph's weights (:func:`stencil_graph`; None for mechanisms
        of earlier versions and for solver "fmm").
    """

    kp: np.ndarray
    shape: tuple
    cell: tuple
    P: int
    oi: np.ndarray
    oj: np.ndarray
    apex_t: np.ndarray
    cap: float
    solver: str = "graph"
    graph_bits: int | None = None


def compute_kernels(problem: KernelProblem, *, n_jobs: int = 1, progress=None, mp_context=None, extremes: bool = False):
    """All kernels (inputs x outputs) of exp(-f~) - exp(-cap) as :class:`KernelColumns`, plus column masses.

    Returns ``(kernels, colmass, sweeps, extremes)``; ``extremes`` is None, or with
    ``extremes=True`` the :class:`LogRatioExtremes` of all columns, computed by the workers from
    the arrays they return (what verification needs from the kernels).  See :func:`kernel_pass`.
    """
    r = kernel_pass(problem, n_jobs=n_jobs, progress=progress, mp_context=mp_context, extremes=extremes)
    return r.columns, r.colmass, r.sweeps, r.extremes


def kernel_pass(
    problem: KernelProblem,
    *,
    n_jobs: int = 1,
    progress=None,
    mp_context=None,
    extremes: bool = False,
    weights=None,
    outputs=None,
    keep_rows=None,
    truncate=None,
    hold: bool = True,
    on_chunk=None,
    graph=None,
) -> KernelPass:
    """One pass of kernel solves over ``outputs`` (default: all), with reductions and filters in the workers.

    A deterministic function of ``problem`` (:class:`KernelProblem`: the padded kernel rate
    map, the outputs, their apex radii, the cap and the solver), output by output (a column
    does not depend on which others are solved with it): :meth:`EikonalMechanism.build`, the
    load of a compact file and the verification passes of kernels on demand all call it, so
    what is sampled is what the build verified (rows searched from the input nodes,
    :func:`kernel_rows`, are the same values bit for bit on a quantised graph).

    ``n_jobs`` worker processes (started with ``mp_context``) solve chunks of outputs;
    ``progress`` (None, True or callable(done, total)) follows them.
    ``extremes``: also the kernels' per-edge extremes (verification; ``"track"``: with the
    outputs attaining them); ``weights`` (M,): also
    the row sums sum_y w_y kernel_y(u) (the normaliser without its cap term); ``keep_rows``
    (bool per raster node): return only those rows' entries; ``truncate``: return only values
    >= it; ``hold=False``: keep no entries (the reductions only: memory one chunk per worker).
    ``on_chunk(outputs, counts, rows, values)``, if given, is called in this process on each
    chunk's (filtered) entries as it arrives, in any order (a reduction over the entries that
    the workers do not do: expected errors, posterior means); with ``hold=False`` the chunk is
    then dropped.  ``graph``: the stencil graph of ``kp`` if the caller has it (solver "graph"),
    else built with the problem's ``graph_bits`` (:func:`stencil_graph`).
    """
    ny, nx = problem.shape
    order = np.arange(len(problem.oi)) if outputs is None else np.asarray(outputs, np.int64)
    g = _worker_problem(problem, graph)
    g.update(
        extremes="track" if extremes == "track" else bool(extremes),
        weights=None if weights is None else np.asarray(weights, np.float64),
        keep_rows=None if keep_rows is None else np.asarray(keep_rows, bool),
        truncate=None if truncate is None else np.float32(truncate),
        hold=bool(hold) or on_chunk is not None,
    )
    fold = _PassFold(
        extremes=LogRatioExtremes((ny, nx), track=extremes == "track") if extremes else None,
        rowsum=np.zeros(ny * nx) if weights is not None else None,
        nx=nx,
        hold=hold,
        on_chunk=on_chunk,
    )
    results = _run_kernels(order, g, int(n_jobs), progress, mp_context, on_result=fold)
    return _assemble_pass(results, problem.shape, len(order), hold, fold)


def _worker_problem(problem: KernelProblem, graph=None) -> dict:
    """The dict a worker solves kernel columns from (:func:`_kernel_columns`): the problem, plus the
    solver's own arrays (the stencil graph, or fast marching's speed map and its window minima)."""
    from scipy.ndimage import minimum_filter

    kp, P = problem.kp, problem.P
    ny, nx = problem.shape
    hy, hx = problem.cell
    NY, NX = kp.shape
    g = dict(
        solver=problem.solver,
        hy=hy,
        hx=hx,
        cap=float(problem.cap),
        pad=P,
        ny=ny,
        nx=nx,
        NX=NX,
        oi=problem.oi,
        oj=problem.oj,
        apex=problem.apex_t,
    )
    if problem.solver == "fmm":
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
        g.update(kf=kf, mins=mins, weights_edges=edge_weights(kp, hy, hx))
    else:
        g.update(
            graph=stencil_graph(kp, hy, hx, problem.graph_bits) if graph is None else graph,
            to_domain=_to_domain(problem.shape, P, NX, NY),
        )
    return g


class _PassFold:
    """The reductions of one pass, folded as each chunk arrives (:func:`_run_kernels`'s ``on_result``):
    one set held, not one per chunk.

    ``extremes`` merge in any order (max / min; ties to the smaller output).  The row sums and
    ``on_chunk`` take the chunks in chunk order (a few chunks wait for an earlier one): the sums
    then associate the same way whatever the workers' timing, so the normaliser is reproducible
    bit for bit.
    """

    def __init__(self, extremes, rowsum, nx: int, hold: bool, on_chunk):
        self.extremes, self.rowsum, self.nx = extremes, rowsum, nx
        self.hold, self.on_chunk = hold, on_chunk
        self.nnz = 0
        self.pending, self.next = {}, 0

    def __call__(self, k, result):
        counts, rows, vals, colmass, sweeps, ext, info = result
        if self.extremes is not None and ext is not None:
            self.extremes.merge(ext)
        self.nnz += info["nnz"]
        self.pending[k] = (info, counts, rows, vals) if self.on_chunk is not None else (info, None, None, None)
        while self.next in self.pending:
            inf, c, r, v = self.pending.pop(self.next)
            if self.rowsum is not None and inf["rowsum"] is not None:
                b0 = inf["band"] * self.nx
                self.rowsum[b0 : b0 + len(inf["rowsum"])] += inf["rowsum"]
            if self.on_chunk is not None:
                self.on_chunk(inf["outputs"], c, r, v)
            self.next += 1
        if not self.hold:
            counts = rows = vals = None
        return counts, rows, vals, colmass, sweeps


def _assemble_pass(results: list, shape, n_outputs: int, hold: bool, fold: _PassFold) -> KernelPass:
    """The :class:`KernelPass` of the folded chunk results: held entries as column blocks in output order."""
    import scipy.sparse as sp

    ny, nx = shape
    blocks, m0 = [], 0
    for k, (counts, rows, vals, _colmass, _sweeps) in enumerate(results):
        if hold:
            colptr = np.zeros(len(counts) + 1, np.int64)
            np.cumsum(counts, out=colptr[1:])
            blocks.append((m0, sp.csc_matrix((vals, rows, colptr), shape=(ny * nx, len(counts)))))
            m0 += len(counts)
        results[k] = (None, None, None, results[k][3], results[k][4])
    colmass = np.concatenate([r[3] for r in results]) if results else np.zeros(0)
    sweeps = sum(r[4] for r in results)
    S = KernelColumns(blocks, (ny * nx, n_outputs)) if hold else None
    return KernelPass(S, colmass, sweeps, fold.extremes, fold.rowsum, fold.nnz)


def _to_domain(shape, P, NX, NY) -> np.ndarray:
    """Padded node -> raster node (row-major), -1 in the padding."""
    ny, nx = shape
    dom = ((np.arange(ny)[:, None] + P) * NX + (np.arange(nx)[None, :] + P)).ravel()
    to_domain = np.full(NY * NX, -1, np.int64)
    to_domain[dom] = np.arange(ny * nx)
    return to_domain


def outputs_reaching(
    kp, shape, cell, P, oi, oj, apex_t, cap, solver, nodes, graph=None, graph_bits: int | None = None
) -> np.ndarray:
    """Sorted indices of the outputs whose kernel may have an entry at one of the raster ``nodes``.

    Kernel y has an entry at u iff f~_y(u) < cap, i.e. d(y, u) < sqrt(cap^2 + 2 cap A_y) for
    the graph solver (d: shortest path on the symmetric stencil graph, so one multi-source
    Dijkstra from ``nodes`` finds every such output; a relative slack of 1e-9 covers the
    rounding of sums taken in the other direction).  The fast-marching solver has no such
    bound: every output is returned.
    """
    from scipy.sparse.csgraph import dijkstra

    nodes = np.unique(np.asarray(nodes, np.int64))
    M = len(oi)
    if solver != "graph" or len(nodes) == 0:
        return np.arange(M) if len(nodes) else np.zeros(0, np.int64)
    ny, nx = shape
    hy, hx = cell
    NY, NX = kp.shape
    reach = np.sqrt(cap * cap + 2.0 * cap * np.asarray(apex_t, np.float64))
    limit = float(reach.max()) * (1 + 1e-9) + 1e-9
    gi, gj = np.divmod(nodes, nx)
    G = stencil_graph(kp, hy, hx, graph_bits) if graph is None else graph
    D = dijkstra(G, directed=True, indices=(gi + P) * NX + (gj + P), limit=limit, min_only=True)
    d = D[np.asarray(oi, np.int64) * NX + np.asarray(oj, np.int64)]
    return np.flatnonzero(d <= reach * (1 + 1e-9) + 1e-9)


def searchable(graph, graph_bits: int | None, limit: float) -> bool:
    """True when Dijkstra sums on ``graph`` are exact up to ``limit``: its weights are multiples of the
    quantum of ``graph_bits`` (:func:`stencil_graph`) and ``limit`` is below :func:`exact_limit`.
    O(edges): callers that search often check once (:func:`.ondemand.can_solve_rows`)."""
    if graph_bits is None or not limit < exact_limit(graph, graph_bits):
        return False
    q = graph_quantum(graph.data.max(), graph_bits) if graph.nnz else 1.0
    return bool(np.array_equal(np.floor(graph.data / q) * q, graph.data))


#: node searches per worker process below which :func:`kernel_rows` stays in this process
ROWS_PER_WORKER_MIN = 128

#: estimated pool start-up (seconds) above which :func:`kernel_rows` first times a batch of
#: searches here to decide whether workers pay for themselves (forked workers: started at once)
ROWS_STARTUP_TIMED = 0.5


def _search_rows(src: np.ndarray, g: dict | None = None):
    """(entries per node, output numbers int32, kernel values float32) of the rows searched from
    the padded-grid nodes ``src``, in the order of ``src`` (outputs ascending within each row)."""
    from scipy.sparse.csgraph import dijkstra

    g = worker_state if g is None else g
    graph, O, a, T, limit, batch = g["graph"], g["O"], g["a"], g["T"], g["limit"], g["batch"]
    cT = math.exp(-T)
    counts, idx_out, val_out = [], [], []
    for start in range(0, len(src), batch):
        D = dijkstra(graph, directed=True, indices=src[start : start + batch], limit=limit)
        Dy = D[:, O]
        del D
        bi, bj = np.nonzero(Dy < np.inf)  # row-major: outputs ascending within each node
        d = Dy[bi, bj]
        ab = a[bj]
        F = np.sqrt(d * d + ab * ab) - ab  # as in _kernel_columns_graph, element by element
        inside = F < T
        bi, bj, F = bi[inside], bj[inside], F[inside]
        ker = np.exp(-F)
        counts.append(np.bincount(bi, minlength=len(src[start : start + batch])))
        idx_out.append(bj.astype(np.int32))
        val_out.append((ker - cT).astype(np.float32))
    cat = lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dt)  # noqa: E731
    return cat(counts, np.int64), cat(idx_out, np.int32), cat(val_out, np.float32)


def kernel_rows(
    kp, shape, P, oi, oj, apex_t, cap, nodes, graph, graph_bits, checked: bool = False, n_jobs: int = 1, mp_context=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kernel rows of raster ``nodes`` by one shortest-path search from each node (solver "graph").

    Returns CSR arrays over every raster node (rows not asked for are empty): ``indptr``,
    ``indices`` (output numbers, ascending in each row) and the kernel values (float32), entry
    for entry those of the columns :func:`kernel_pass` computes.  On a quantised graph
    (``graph_bits``, :func:`stencil_graph`) travel times are exact sums, so d(u, y) searched from
    u is the float d(y, u) searched from y; the values are then formed by the same operations
    as :func:`_kernel_columns_graph`'s.  A graph that is not quantised (mechanisms of earlier
    versions) is refused: its sums depend on the direction of the search (``checked=True``: the
    caller has established :func:`searchable` for this graph and limit).  One search costs
    about one column's, so this is the cheaper way when there are fewer nodes than outputs
    reaching them (a few points on a large raster).

    ``n_jobs``: with at least ``ROWS_PER_WORKER_MIN`` nodes per worker, contiguous runs of the
    nodes are searched in that many worker processes (the graph sent once through the pool's
    initializer, :func:`geopriv.mechanisms.pool.process_pool`).  Where the pool's start-up is
    more than ``ROWS_STARTUP_TIMED`` seconds (:func:`geopriv.mechanisms.pool.startup_seconds`:
    spawned workers import numpy and scipy, as on Windows and macOS), the first batch of
    searches runs in this process and is timed, and workers start only if the rest, split
    between them, is expected to save more than that start-up (the first batch, the lowest
    node numbers, may be cheaper than average: the estimate leans towards staying here).  The
    runs are joined in node order and each run's arrays do not depend on where it ran, so the
    timing decides where the work runs, never what it returns.  (Threads do not help:
    scipy's search on the 16-neighbour graph ran no faster in two threads than in one.)
    """
    ny, nx = shape
    NY, NX = kp.shape
    T = float(cap)
    a = np.asarray(apex_t, np.float64)
    limit = T + float(a.max()) + 1e-9 if len(a) else T
    if not checked and not searchable(graph, graph_bits, limit):
        raise ParameterError(
            "kernel_rows needs a quantised graph (weights multiples of its quantum: "
            f"stencil_graph(kp, hy, hx, {graph_bits})) whose path sums are exact up to the kernels' reach."
        )
    nodes = np.unique(np.asarray(nodes, np.int64))
    n = ny * nx
    gi, gj = np.divmod(nodes, nx)
    src = (gi + P) * NX + (gj + P)
    g = {
        "graph": graph,
        "O": np.asarray(oi, np.int64) * NX + np.asarray(oj, np.int64),
        "a": a,
        "T": T,
        "limit": limit,
        "batch": max(1, min(64, int(2e7 // max(NY * NX, 1)))),
    }
    workers = max(1, min(int(n_jobs), len(nodes) // ROWS_PER_WORKER_MIN)) if can_start_workers() else 1
    parts, rest = [], src
    startup = (
        startup_seconds(mp_context, int(graph.data.nbytes + graph.indices.nbytes + graph.indptr.nbytes))
        if workers > 1
        else 0.0
    )
    if startup > ROWS_STARTUP_TIMED:  # time the first batch here: do workers pay for their start-up on the rest?
        head, rest = src[: g["batch"]], src[g["batch"] :]
        t0 = time.perf_counter()
        parts.append(_search_rows(head, g))
        here = (time.perf_counter() - t0) / len(head) * len(rest)
        if startup + here / workers >= here:
            workers = 1
    pool = process_pool(workers, g, mp_context)
    if pool is None:
        parts.append(_search_rows(rest, g))
    else:
        runs = np.array_split(rest, 2 * workers)
        try:
            parts.extend(pool.map(_search_rows, runs))  # in order of the runs
        finally:
            pool.shutdown(cancel_futures=True)  # on an error: do not wait for the other runs
    counts = np.zeros(n, np.int64)
    counts[nodes] = np.concatenate([c for c, _, _ in parts])
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, np.concatenate([i for _, i, _ in parts]), np.concatenate([v for _, _, v in parts])


def kept_indptr(indptr: np.ndarray, keep: np.ndarray) -> np.ndarray:
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


class KernelColumns:
    """The kernels as blocks of columns (outputs): CSC float32 matrices, inputs x outputs.

    What a build holds between the kernel solves and the CSR arrays sampling uses.  Kept in the
    blocks the workers returned, so that :meth:`to_csr` can free each block as soon as its
    entries are placed: building the CSR needs about one copy of the kernels, not two (a
    400 x 400 raster has about 10^9 entries).
    """

    def __init__(self, blocks, shape):
        self.blocks = list(blocks)  # (first output, csc (inputs x block outputs)) in output order
        self.shape = tuple(shape)

    @property
    def nnz(self) -> int:
        return int(sum(b.nnz for _, b in self.blocks if b is not None))

    def row_sums(self, w, ny: int, nx: int) -> np.ndarray:
        """sum_y w_y kernel_y(u) per raster node (float64): each block's band sums added in block
        order, as :func:`kernel_pass` adds its chunks' (the same numbers, bit for bit, when the
        blocks are its chunks)."""
        w = np.asarray(w, np.float64)
        out = np.zeros(self.shape[0])
        for m0, b in self.blocks:
            if b is None or b.nnz == 0:
                continue
            b0, band = band_row_sums(np.diff(b.indptr), b.indices, b.data, w[m0 : m0 + b.shape[1]], ny, nx)
            out[b0 * nx : b0 * nx + len(band)] += band
        return out

    def truncated(self, threshold: float) -> "KernelColumns":
        """The same kernels without the entries below ``threshold`` (a new, smaller object)."""
        import scipy.sparse as sp

        out = []
        for m0, b in self.blocks:
            keep = b.data >= threshold
            colptr = kept_indptr(b.indptr, keep)
            out.append((m0, sp.csc_matrix((b.data[keep], b.indices[keep], colptr), shape=b.shape)))
        return KernelColumns(out, self.shape)

    def to_csr(self, release: bool = False, threads: int = 1):
        """(indptr int64, indices int32, data float32) of the CSR matrix, column indices sorted in each row.

        Two passes over the blocks: count the entries of each row, then turn each block into
        rows and append every row's run at that row's cursor, blocks in output order (so every
        row's columns come out sorted).  With ``release=True`` each block is dropped once
        placed (this object is then empty): the peak is one copy of the kernels plus about
        three blocks.  ``threads`` > 1 split each block's rows between threads (numpy releases
        the GIL in the copies); blocks are still placed one after the other, so the CSR arrays
        fill from one front and memory stays as with one thread.
        """
        n, M = self.shape
        counts = np.zeros(n, np.int64)
        for _, b in self.blocks:
            counts += np.bincount(b.indices, minlength=n)
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        del counts
        nnz = int(indptr[-1])
        indices = np.empty(nnz, np.int32)
        data = np.empty(nnz, np.float32)
        cursor = indptr[:-1].copy()
        threads = max(1, int(threads))

        def place(r, m0, rlo, rhi):
            lo, hi = int(r.indptr[rlo]), int(r.indptr[rhi])
            if hi == lo:
                return
            pos = np.repeat(cursor[rlo:rhi] - r.indptr[rlo:rhi], np.diff(r.indptr[rlo : rhi + 1]))
            pos += np.arange(lo, hi, dtype=np.int64)
            indices[pos] = np.add(r.indices[lo:hi], m0, dtype=np.int32)
            data[pos] = r.data[lo:hi]

        ex = None
        if threads > 1:
            from concurrent.futures import ThreadPoolExecutor

            ex = ThreadPoolExecutor(threads)
        try:
            for k in range(len(self.blocks)):
                m0, b = self.blocks[k]
                # the block as rows (scipy's transpose leaves each row's columns sorted), then
                # every row's run appended at that row's cursor
                r = b.tocsr()
                if release:
                    self.blocks[k] = (m0, None)
                del b
                if ex is None:
                    place(r, m0, 0, n)
                else:  # rows split into ranges of about equal entries, one per thread
                    cuts = np.searchsorted(r.indptr, np.arange(1, threads) * r.nnz / threads)
                    edges = [0, *[int(min(max(c, 0), n)) for c in cuts], n]
                    list(ex.map(place, [r] * threads, [m0] * threads, edges[:-1], edges[1:]))
                cursor += np.diff(r.indptr)
                del r
        finally:
            if ex is not None:
                ex.shutdown()
        if release:
            self.blocks = []
        return indptr, indices, data


def progress_reporter(progress, total, desc, unit: str = "output"):
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return None, progress
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "pt", disable=None)  # no bar on a pipe

    def update(done, _total):
        bar.n = done
        bar.refresh()

    return bar, update
