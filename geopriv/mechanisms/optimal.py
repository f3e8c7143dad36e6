"""Optimal mechanism under a privacy map, by linear programming (the benchmark for the eikonal one).

Koufogiannis and Pappas. "Location-dependent privacy". IEEE CDC 2016 (arXiv:1604.02264),
section IV: the eikonal mechanism is compared with the optimal mechanism, computed as a
linear program on a coarse (35 x 35) discretisation of the problem

    minimise    int pi(u) g(u, y) |y - u|^2 du dy
    subject to  int g(u, y) dy = 1,   |grad_u g(u, y)| <= epsilon(u) g(u, y).

Derivation note (what is solved here)
-------------------------------------
Inputs a and outputs y are nodes of the map's grid (cell centres; outputs optionally on a grid
padded by ``pad`` cells on each side).  The constraint is the *same discrete guarantee* that
:meth:`geopriv.EikonalMechanism.verify` checks: for every 8-neighbour pair of input nodes a, b
and every output y,

    |ln P(y|a) - ln P(y|b)| <= allowed(a, b) = |a - b| (epsilon(a) + epsilon(b)) / 2,

with epsilon per CRS unit (``PrivacyMap.epsilon_crs``, conservative for the CRS's ground
scale) and the 4 edge families of :func:`geopriv.privacy_map.edge_weights`.  Taking
exponentials, it is linear in the variables P(y|a):

    P(y|a) >= 0,   sum_y P(y|a) = 1                          (one row per input a),
    P(y|a) <= exp(allowed(a, b)) P(y|b)  and  P(y|b) <= exp(allowed(a, b)) P(y|a)
                                                          (per neighbouring pair and output),

and the objective sum_a prior(a) sum_y P(y|a) |a - y|^2 is linear too.  (Zero probabilities are
allowed; on a connected grid the constraints then force the whole output column to zero.)  By
default (``solver="auto"``) it is solved by column generation (``solver="colgen"``, below; it
needs ``highspy``, the ``lp`` extra), the fastest at every size measured (6 x 6: 0.2 s against
0.7 s; 12 x 12: 2.5 s against 27 s; 20 x 20: 20-30 s against more than 5 minutes); where that
does not apply (no ``highspy``, ``pad`` > 0, a ``window`` or a ``method``) the full LP is solved with
HiGHS (``scipy.optimize.linprog``, sparse constraint matrices built with numpy, no Python loop
over outputs or edges).  Its size is N M variables and about 8 N M
inequality rows for N inputs and M outputs, so it is meant for coarse grids: use
:func:`coarsen` (block minimum of epsilon: lowering epsilon only strengthens privacy) or
:func:`coarsen_to` (any target shape, e.g. the paper's 35 x 35 from a 200 x 200 raster).

Structure, solvers and the certified bound
------------------------------------------
Every output column lies in the *same* cone (the constraints do not depend on y); only the row
sums couple the columns.  Relaxing the privacy rows with multipliers u <= 0 therefore leaves one
simplex per input, and for any u

    OPT >= sum_a min_y r(a, y),   r = c - A_ub^T u

(``_dual_bound``).  With the solver's multipliers (rescaled onto the exact rows, see below) this
is a certified lower bound on the *exact* (margin 0) optimum, reported as ``params["dual_bound"]``
with the gap of the repaired mechanism: the comparison with the eikonal mechanism is bracketed
whatever the solver's accuracy.  Because the repair makes any near-feasible solution exactly
private, vertex solutions are unnecessary: ``solver="ipm"`` (HiGHS interior point without
crossover) and ``solver="pdlp"`` (first order) go through the optional ``highspy`` package.
``window=w`` keeps only the variables with |a - y| <= w cells (a restriction: the repaired result
is exactly private and an upper bound; the bound is still for the full problem, the outside
variables priced at their cost).  Measured on the paper-scaled Tokyo map (bench/results/optimal.md):
the interior point is not faster than the simplex at 14 x 14 and did not finish 20 x 20 in 6 min;
small windows are fast but lose much (rows of zero-prior inputs push mass to the window edges).

``solver="colgen"`` uses the structure directly (Dantzig-Wolfe): a master LP over the row sums
whose columns are generated cone elements, one per output and round, found by a small pricing
LP over the cone (N variables, 2 rows per edge, the same matrix for every output, so each solve
warm-starts from the previous basis).  Relaxing the row sums instead of the privacy rows, any
multipliers v give OPT >= sum v + sum_y min_{k in cone, 0 <= k <= 1} (c(., y) - v) . k, which the
pricing round computes exactly: a certified bound that closes on the master's value.  Pricing
uses duals smoothed towards those of the best bound so far (Wentges), which the master's own
duals, jumping between extreme points, would not give.  Inputs without prior weight (water,
empty land: ~40 % of the cells on Tokyo) cost nothing, and the master's multipliers on their
rows start large and positive, which every output's pricing then exploits: the bound stayed
negative for minutes at 35 x 35.  So a first phase relaxes those rows to sum_y P(y|a) <= 1
(multipliers <= 0; the bound above holds for any v, so its bounds are bounds for the exact
problem) and converges in about a dozen rounds to within ~1 % of the optimum; the second phase
restores the equalities, starting from the phase-1 mechanism made feasible by the repair.  The
master leaves out column entries below ``COLGEN_DROP`` (1e-6; dense columns made it the slow
part), the master runs primal simplex after its first solve (new columns keep its basis primal
feasible), and the pricing LPs can run in worker processes (``n_jobs``).  Measured on the Tokyo
map: 20 x 20 to a certified 1e-3 gap in 19 s with 2 workers (53 s before these changes); 35 x 35
bracketed to 3.8 % in 321 s (0.3057 .. 0.3173 x Laplace; bench/results/optimal.md).  Phase 2 is
what is slow there: the relaxed optimum leaves the empty cells almost empty, and for half of
them no extension of the populated rows reaches a row sum of 1 (docs/eikonal.md).

Solver tolerances
-----------------
HiGHS meets the constraints up to absolute tolerances (~1e-7), while the optimum has
probabilities far below that (they fall off by up to exp(-allowed) per cell).  Taken as is, a
tiny probability next to an exact zero has an infinite log-ratio.  So the LP imposes
``(1 - margin) * allowed`` (default margin 1e-4) and its solution is repaired (``repair=True``,
default): negative values are clipped to 0, every output column is raised to its smallest
upper envelope that meets ``(1 - margin) * allowed`` exactly (max-plus over the grid:
ln P(y|a) >= ln P(y|b) - (1 - margin) allowed(a, b)), and rows are renormalised by their sums
s(a).  Raising adds mass of the order of the solver tolerance (``params["repair_added_mass"]``),
so |delta ln s| on an edge is ~1e-7, within the ``margin * allowed`` left for it:
:meth:`OptimalMechanism.verify` is then <= 1 up to float rounding.  With ``margin=0`` it may
exceed 1 by ~1e-7 (tolerance level; reported, never hidden).  The mean squared error is
computed from the repaired probabilities; it differs from the LP objective by ~margin.  When
the repair adds much mass (windows), repair and renormalisation are repeated until verify() <= 1
(``params["repair_rounds"]``).  The dual bound uses the margin LP's multipliers on the exact rows,
each rescaled so that its large coefficient exp(w/2) matches exactly; the mismatch is left on the
small one and costs the bound ~margin w relative.

Squared errors are reported in square ground metres: CRS units divided by the map's mean
ground scale, as :meth:`geopriv.EikonalMechanism.expected_mse` does (1 for metric CRSs away
from distortion).  The error is that of releasing the output *node* (no jitter), at input
nodes: a discrete problem, which favours coarse grids (a cell may hide a whole noise radius).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import InfeasibleMechanismError, ParameterError, ParameterTypeError, RasterError
from ..privacy_map import PrivacyMap
from .grid import allowed as _allowed
from .grid import edge_list
from .grid import edge_slices as _edge_slices
from .grid import mean_ground_scale as _mean_ground_scale
from .pool import process_pool, worker_state

__all__ = ["OptimalMechanism", "optimal_mechanism", "coarsen", "coarsen_to", "lp_size", "SOLVERS"]

#: ``solver=`` choices of :func:`optimal_mechanism` ("auto", its default, picks one of the others)
SOLVERS = ("auto", "highs", "ipm", "pdlp", "colgen")

# probabilities below this on both ends of an edge are not checked by verify()
VERIFY_FLOOR = 1e-12
# with window=, the LP objective's prior is at least this times the mean prior of populated nodes
WINDOW_PRIOR_FLOOR = 1e-2
_log = logging.getLogger(__name__)

#: relative gap between master and bound at which column generation stops
COLGEN_GAP = 1e-3
#: weight of the best-bound duals in the duals column generation prices at (dual smoothing)
COLGEN_SMOOTHING = 0.5
#: relative gap at which column generation leaves phase 1 (rows of zero-prior inputs relaxed to <= 1)
COLGEN_RELAXED_GAP = 3e-3
#: column entries below this are left out of the master LP (the mechanism is rebuilt from full columns)
COLGEN_DROP = 1e-6
SIMPLEX_DUAL, SIMPLEX_PRIMAL = 1, 4  # HiGHS simplex_strategy values


# ============================================================================================
# coarsening
# ============================================================================================
def coarsen(privacy_map: PrivacyMap, factor: int, *, trim: bool = False) -> PrivacyMap:
    """The map on blocks of ``factor`` x ``factor`` cells: epsilon = block minimum.

    Parameters
    ----------
    privacy_map : PrivacyMap
    factor : int
        Block size in cells (>= 1).
    trim : bool
        The grid must be divisible by ``factor``; with ``trim=True`` the ragged last rows
        (south) and columns (east) are dropped instead.

    Returns
    -------
    PrivacyMap
        Same CRS; transform with cells ``factor`` times larger, same north-west corner.
        ``epsilon`` is the **minimum** epsilon of each block: lowering epsilon only strengthens
        privacy, so no part of a block gets a weaker level than it asked for (the guarantee is
        that of the coarse grid, at its resolution).  ``population`` (density per km2) is the
        block mean, so the prior it defines is proportional to the block *sum* of population
        (the people living in the block).  A block is no data only if all its cells are.
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, np.integer)) or factor < 1:
        raise ParameterError(f"factor must be an integer >= 1; got {factor!r}.")
    factor = int(factor)
    ny, nx = privacy_map.shape
    cy, cx = ny // factor, nx // factor
    if (ny % factor or nx % factor) and not trim:
        raise RasterError(
            f"The {ny} x {nx} grid is not divisible by factor={factor}. Pick a factor dividing both sizes "
            f"(divisors of {math.gcd(ny, nx)}), or pass trim=True to drop the last {ny % factor} row(s) and "
            f"{nx % factor} column(s)."
        )
    if cy < 2 or cx < 2:
        raise RasterError(f"factor={factor} leaves a {cy} x {cx} grid; a privacy map needs at least 2 x 2 cells.")

    pm = privacy_map
    if ny % factor or nx % factor:  # trim=True: drop the ragged south rows and east columns first
        sl = (slice(0, cy * factor), slice(0, cx * factor))
        pm = PrivacyMap(
            np.asarray(pm.epsilon)[sl],
            pm.transform,
            pm.crs,
            np.asarray(pm.nodata_mask)[sl],
            None if pm.population is None else np.asarray(pm.population)[sl],
            dict(pm.info),
        )
    out = coarsen_to(pm, (cy, cx))  # equal whole blocks: block minimum of epsilon, block mean density
    info = dict(out.info)
    info["coarsened"] = {
        "factor": factor,
        "from_shape": [ny, nx],
        "trimmed": [ny - cy * factor, nx - cx * factor],
        "epsilon": "block minimum",
        "population": None if pm.population is None else "block mean density (prior proportional to block sum)",
    }
    return dataclasses.replace(out, info=info)


def _overlap(n: int, k: int):
    """(lo, hi, W): fine index range [lo[i], hi[i]) touched by coarse cell i, and the (k, n) overlap
    fractions W[i, j] of fine cell j inside coarse cell i (coarse cells n / k fine cells wide)."""
    i = np.arange(k)
    lo = (i * n) // k
    hi = -((-(i + 1) * n) // k)  # ceil((i + 1) n / k)
    j = np.arange(n)
    # overlap of [j, j + 1) with [i n / k, (i + 1) n / k), exact in units of 1 / k
    W = np.clip(
        np.minimum((j[None, :] + 1) * k, (i[:, None] + 1) * n) - np.maximum(j[None, :] * k, i[:, None] * n), 0, None
    )
    return lo, hi, W / k


def coarsen_to(privacy_map: PrivacyMap, shape) -> PrivacyMap:
    """The map on a ``shape`` = (ny', nx') grid of equal blocks over the same extent (uneven in cells).

    For any target shape, not only divisors of the grid (:func:`coarsen` needs ``factor`` to
    divide it, or trims): coarse cell (i, j) covers ``ny / ny'`` x ``nx / nx'`` fine cells, a
    fractional number, so blocks cut through fine cells.

    Parameters
    ----------
    privacy_map : PrivacyMap
    shape : (int, int)
        Coarse grid (rows, columns), each between 2 and the fine size.

    Returns
    -------
    PrivacyMap
        Same CRS and bounds (nothing trimmed); cells ``ny / ny'`` (``nx / nx'``) times larger.
        ``epsilon`` is the **minimum** over every fine cell the block *touches* (even partly),
        so no point of the block gets a weaker level than it asked for.  ``population`` is the
        area-weighted block mean density, so the prior is proportional to the people in the
        block (fine cells cut by a block edge are shared in proportion to area; the total is
        kept).  A block is no data only if all cells it touches are.  With a shape dividing
        the grid this is exactly ``coarsen(privacy_map, factor)``.
    """
    try:
        cy, cx = (int(v) for v in shape)
        bad = len(tuple(shape)) != 2 or any(isinstance(v, bool) or int(v) != v for v in shape)
    except (TypeError, ValueError):
        bad = True
    if bad:
        raise ParameterError(f"shape must be two integers (rows, columns); got {shape!r}.")
    ny, nx = privacy_map.shape
    if not (2 <= cy <= ny and 2 <= cx <= nx):
        raise RasterError(
            f"Cannot coarsen a {ny} x {nx} grid to {cy} x {cx}: each size must be between 2 and the fine size."
        )
    rlo, rhi, Wr = _overlap(ny, cy)
    clo, chi, Wc = _overlap(nx, cx)
    eps_f = np.asarray(privacy_map.epsilon, float)
    mask_f = np.asarray(privacy_map.nodata_mask, bool)
    eps_r = np.stack([eps_f[a:b].min(axis=0) for a, b in zip(rlo, rhi)])
    eps = np.stack([eps_r[:, a:b].min(axis=1) for a, b in zip(clo, chi)], axis=1)
    mask_r = np.stack([mask_f[a:b].all(axis=0) for a, b in zip(rlo, rhi)])
    mask = np.stack([mask_r[:, a:b].all(axis=1) for a, b in zip(clo, chi)], axis=1)
    pop = None
    if privacy_map.population is not None:
        pop = (Wr @ np.asarray(privacy_map.population, float) @ Wc.T) / ((ny / cy) * (nx / cx))
    from affine import Affine

    t = privacy_map.transform
    transform = Affine(t.a * nx / cx, 0.0, t.c, 0.0, t.e * ny / cy, t.f)
    info = dict(privacy_map.info)
    info["coarsened"] = {
        "shape": [cy, cx],
        "from_shape": [ny, nx],
        "block_cells": [ny / cy, nx / cx],
        "trimmed": [0, 0],
        "epsilon": "minimum over the fine cells each block touches",
        "population": None if pop is None else "area-weighted block mean density (prior proportional to block sum)",
    }
    return PrivacyMap(eps, transform, privacy_map.crs, mask, pop, info)


# ============================================================================================
# LP construction
# ============================================================================================
def _output_grid(shape, pad: int):
    """(ij (M, 2) int, (Mh, Mw)) of the output nodes: the grid padded by ``pad`` cells each side."""
    ny, nx = shape
    oi, oj = np.mgrid[-pad : ny + pad, -pad : nx + pad]
    return np.column_stack([oi.ravel(), oj.ravel()]), oi.shape


def _edges(shape, allowed):
    """(ia, ib, w): flat node indices and allowed log-ratio of every 8-neighbour edge."""
    return edge_list(shape, allowed)


def lp_size(shape, pad: int = 0) -> dict:
    """Variables, inequality rows and nonzeros of the LP for a grid of ``shape`` (ny, nx)."""
    ny, nx = shape
    n = ny * nx
    m = (ny + 2 * pad) * (nx + 2 * pad)
    e = ny * (nx - 1) + (ny - 1) * nx + 2 * (ny - 1) * (nx - 1)
    return {
        "inputs": n,
        "outputs": m,
        "edges": e,
        "variables": n * m,
        "constraints": 2 * e * m + n,
        "nonzeros": 4 * e * m + n * m,
    }


def _window(shape, out_ij: np.ndarray, window: int | None) -> np.ndarray | None:
    """(N, M) bool: P(y|a) is an LP variable iff |a - y| <= window cells (Chebyshev); None = all."""
    if window is None:
        return None
    ny, nx = shape
    ai, aj = np.divmod(np.arange(ny * nx), nx)
    return (np.abs(ai[:, None] - out_ij[None, :, 0]) <= window) & (np.abs(aj[:, None] - out_ij[None, :, 1]) <= window)


def _build_lp(pm: PrivacyMap, prior: np.ndarray, out_ij: np.ndarray, allowed, win: np.ndarray | None = None):
    """c, cscale, A_ub, b_ub, A_eq, b_eq of the LP; variables are the True entries of ``win``
    (row-major over (a, y)), all N M of them when ``win`` is None."""
    import scipy.sparse as sp

    ny, nx = pm.shape
    n, m = ny * nx, len(out_ij)
    ia, ib, w = _edges(pm.shape, allowed)
    if win is None:
        win = np.ones((n, m), bool)
    var = np.full((n, m), -1, np.int64)
    nv = int(win.sum())
    var[win] = np.arange(nv)
    # one pair of rows per edge and output with both ends in the window
    both = win[ia] & win[ib]
    ke, ky = np.nonzero(both)
    va, vb = var[ia[ke], ky], var[ib[ke], ky]
    del both
    # rows scaled by exp(-w/2) so coefficients are exp(-w/2) and -exp(w/2) (range exp(+-w/2), not 1..exp(w))
    lo = np.exp(-0.5 * w[ke])
    hi = np.exp(0.5 * w[ke])
    k = len(ke)
    del ke, ky
    rows = np.concatenate([np.arange(k), np.arange(k), np.arange(k, 2 * k), np.arange(k, 2 * k)])
    cols = np.concatenate([va, vb, vb, va])
    vals = np.concatenate([lo, -hi, lo, -hi])
    del va, vb, lo, hi
    A_ub = sp.csr_matrix((vals, (rows, cols)), shape=(2 * k, nv))
    del rows, cols, vals
    b_ub = np.zeros(2 * k)
    counts = win.sum(axis=1)
    A_eq = sp.csr_matrix((np.ones(nv), np.arange(nv), np.concatenate([[0], np.cumsum(counts)])), shape=(n, nv))
    b_eq = np.ones(n)
    c = _cost(pm, prior, out_ij)[win]
    cscale = float(c.max()) if c.size and c.max() > 0 else 1.0
    return c / cscale, cscale, A_ub, b_ub, A_eq, b_eq


def _cost(pm: PrivacyMap, prior: np.ndarray, out_ij: np.ndarray) -> np.ndarray:
    """(N, M) objective coefficients prior(a) |a - y|^2, CRS units^2."""
    ny, nx = pm.shape
    hx, hy = pm.cell_size
    ai, aj = np.divmod(np.arange(ny * nx), nx)
    d2 = ((ai[:, None] - out_ij[None, :, 0]) * hy) ** 2 + ((aj[:, None] - out_ij[None, :, 1]) * hx) ** 2
    return np.asarray(prior, float).ravel()[:, None] * d2


# ============================================================================================
# solvers
# ============================================================================================
def _quiet_highs():
    """``highspy.Highs()`` without the banner its constructor prints on the process's standard output.

    The banner goes to file descriptor 1 from C++, so it is sent to the null device for the
    constructor's duration (C stdio flushed before restoring); the solver's own output is off.
    """
    import ctypes
    import os
    import sys

    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        h = highspy.Highs()
        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError, TypeError):  # no C library to flush (not POSIX): the banner may show
            pass
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    h.setOptionValue("output_flag", False)
    return h


def _solve_highspy(c, A_ub, b_ub, A_eq, b_eq, solver: str, time_limit, options):
    """Solve with ``highspy`` directly: IPM without crossover, or PDLP.  Returns (ok, x, u, v, fun, message).

    ``u`` (<= 0) and ``v`` are the duals of the inequality and equality rows in scipy's
    ``marginals`` convention (d objective / d right-hand side).
    """
    import highspy
    import scipy.sparse as sp

    A = sp.vstack([A_ub, A_eq]).tocsc()
    nr, nc = A.shape
    k = A_ub.shape[0]
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = nc, nr
    lp.col_cost_ = np.asarray(c, float)
    lp.col_lower_ = np.zeros(nc)
    lp.col_upper_ = np.ones(nc)
    lp.row_lower_ = np.concatenate([np.full(k, -highspy.kHighsInf), b_eq])
    lp.row_upper_ = np.concatenate([b_ub, b_eq])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr
    lp.a_matrix_.index_ = A.indices
    lp.a_matrix_.value_ = A.data
    del A
    h = _quiet_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("solver", solver)
    h.setOptionValue("run_crossover", "off")
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    for key, val in (options or {}).items():
        h.setOptionValue(key, val)
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    message = h.modelStatusToString(status)
    sol = h.getSolution()
    ok = status == highspy.HighsModelStatus.kOptimal
    if status == highspy.HighsModelStatus.kUnknown and sol.value_valid and sol.dual_valid:
        # IPM without crossover ends "imprecise"/Unknown with a valid interior solution: accepted
        # when it is (nearly) feasible; the repair makes it exact and the dual bound measures it.
        x = np.asarray(sol.col_value)
        viol = max(float(np.max(A_ub @ x - b_ub, initial=0.0)), float(np.max(np.abs(A_eq @ x - b_eq))))
        ok = viol < 1e-4
        message += f" (interior solution without crossover, max row violation {viol:.1e})"
    if not ok or not sol.value_valid:
        code = 1 if status in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kIterationLimit) else 4
        return False, code, None, None, None, message
    x = np.asarray(sol.col_value, float)
    y = np.asarray(sol.row_dual, float) if sol.dual_valid else None
    u = None if y is None else y[:k]
    v = None if y is None else y[k:]
    return True, 0, x, u, v, message


def _dual_bound(r_full: np.ndarray, u: np.ndarray, b_ub: np.ndarray) -> float:
    """Lagrangian lower bound: u b_ub + sum_a min_y r(a, y), for any multipliers u <= 0.

    ``r_full`` (N, M) = c - A_ub^T u with ``u`` clipped to <= 0 (the caller's job); entries not in
    the LP are their cost.  Valid because every row of P lies in the simplex: for P feasible,
    c P >= c P + u (A_ub P - b_ub) - u b_ub... i.e. c P >= u b_ub + sum_a sum_y r(a, y) P(y|a)
    >= u b_ub + sum_a min_y r(a, y).  Relaxing only the privacy rows keeps the bound tight even
    when the multipliers come from a slightly different LP (the margin) or are inexact.
    """
    return float(np.minimum(u, 0.0) @ b_ub + r_full.min(axis=1).sum())


def _cone_matrix(pm: PrivacyMap, allowed):
    """(indptr, indices, data, rows) of the cone's rows for one output, column-wise (picklable)."""
    A = _build_lp(pm, np.zeros(pm.shape), np.zeros((1, 2), np.int64), allowed)[2].tocsc()
    return A.indptr, A.indices, A.data, A.shape[0]


def _pricing_model(cone):
    """HiGHS model of  min r.k  s.t.  k in the privacy cone,  0 <= k <= 1  (costs set per output).

    The cone is the same for every output: its rows are :func:`_build_lp`'s privacy rows for a
    single output (k(a) <= exp(allowed(a, b)) k(b) both ways on every 8-neighbour edge).
    """
    import highspy

    indptr, indices, data, rows = cone
    n = len(indptr) - 1
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, rows
    lp.col_cost_ = np.zeros(n)
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.ones(n)
    lp.row_lower_ = np.full(rows, -highspy.kHighsInf)
    lp.row_upper_ = np.zeros(rows)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = indptr
    lp.a_matrix_.index_ = indices
    lp.a_matrix_.value_ = data
    h = _quiet_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.passModel(lp)
    return h


def _price_block(state: dict, ys: np.ndarray, v: np.ndarray, want_columns: bool, cone: str):
    """(sum over ys of min(0, min_k (C[:, y] - v) k), [(y, k) with negative reduced cost]).

    One small LP per output, each warm-started from the previous basis of the same model
    (``state["model_" + cone]``, built on first use from ``state["cone_" + cone]``).
    """
    key = "model_" + cone
    if key not in state:
        state[key] = _pricing_model(state["cone_" + cone])
    h, C = state[key], state["C"]
    n = C.shape[0]
    idx = np.arange(n, dtype=np.int32)
    total, new = 0.0, []
    for y in ys:
        h.changeColsCost(n, idx, C[:, y] - v)
        h.run()
        val = h.getInfo().objective_function_value
        total += min(val, 0.0)
        if want_columns and val < -1e-9:
            new.append((int(y), np.clip(np.asarray(h.getSolution().col_value, float), 0.0, 1.0)))
    return total, new


def _price_block_worker(ys, v, want_columns, cone):
    return _price_block(worker_state, ys, v, want_columns, cone)  # the worker's problem and its models


class _Pricer:
    """Pricing rounds over every output, in this process or spread over ``n_jobs`` worker processes.

    The problem (costs and cone matrices) goes to each worker once, through the pool's
    initializer (:func:`geopriv.mechanisms.pool.process_pool`: every start method works; inside
    a daemonic process it runs in this process).  Outputs are split into contiguous blocks
    (neighbouring outputs have similar solutions: warm starts) and the round's bound adds the
    blocks' sums in output order.
    """

    def __init__(self, problem: dict, n_jobs: int, mp_context=None):
        self.m = problem["C"].shape[1]
        self.state = dict(problem)
        self.pool = process_pool(min(n_jobs, self.m), problem, mp_context)
        self.blocks = (
            [np.arange(self.m)] if self.pool is None else np.array_split(np.arange(self.m), min(self.m, 2 * n_jobs))
        )

    def __call__(self, v: np.ndarray, want_columns: bool, cone: str = "lp"):
        if self.pool is None:
            return _price_block(self.state, self.blocks[0], v, want_columns, cone)
        futures = [self.pool.submit(_price_block_worker, b, v, want_columns, cone) for b in self.blocks]
        total, new = 0.0, []
        for f in futures:
            t, nw = f.result()
            total += t
            new.extend(nw)
        return total, new

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None


def _solve_colgen(
    pm: PrivacyMap,
    prior: np.ndarray,
    out_ij: np.ndarray,
    lp_allowed,
    exact_allowed,
    time_limit,
    gap: float,
    n_jobs: int = 1,
    mp_context=None,
):
    """Column generation (Dantzig-Wolfe over outputs) for the LP.  Returns (P, bound, objective, rounds, message,
    info); ``exact_allowed`` None: no bound for the exact problem (None returned); ``info``: phase 1's
    rounds, bound (for the margin's cone, CRS units^2) and seconds (0, None, None without phase 1).

    Every output column P(. | y) lies in the same cone; only the row sums couple them.  The master
    LP keeps, per output, nonnegative combinations of generated cone elements k (0 <= k <= 1)
    under the row sums; its multipliers v of the row sums price new elements, one small LP per
    output (:func:`_pricing_model`, warm-started).  For any v,

        OPT >= sum_a v(a) + sum_y min_{k in cone, 0 <= k <= 1} (c(., y) - v) . k

    (Lagrangian relaxation of the row sums; 0 <= P <= 1 holds at the optimum), so each pricing
    round certifies a lower bound; the bound for the exact problem prices over the exact cone.

    Two phases.  The rows of inputs without prior weight cost nothing, and the master's
    multipliers on them start large and positive: every output's pricing then covers them, and
    the bound stays far below the master for many rounds (35 x 35: no positive bound in 5
    minutes before this).  Phase 1 solves the *relaxed* problem where those rows only need sum_y P(y|a) <= 1
    (their multipliers are then <= 0); it converges in a few rounds, and since the bound above
    holds for any v, its bounds are bounds for the exact problem (about 1 % below its optimum on
    Tokyo).  Phase 2 restores the equalities, seeds the master with the phase-1 mechanism made
    exactly feasible (renormalised and repaired), and continues from there.

    Stops when (master - bound) / bound <= ``gap`` in phase 2, when no column prices out, or at
    ``time_limit`` (in phase 1, after one phase-2 master so the result is a mechanism).  Starts from
    exp(-d(., y)) for every output (d: shortest paths over the margin's allowed losses, an element
    of the cone) and the uniform column.  The master LP leaves out column entries below
    ``COLGEN_DROP`` (dense columns made it the slow part); ``P`` is rebuilt from the full columns
    and the repair renormalises the rows.
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    t0 = time.perf_counter()
    C = _cost(pm, prior, out_ij)
    cscale = float(C.max()) if C.size and C.max() > 0 else 1.0
    C = C / cscale
    n, m = C.shape
    ia, ib, w = _edges(pm.shape, lp_allowed)
    G = sp.csr_matrix((np.concatenate([w, w]), (np.concatenate([ia, ib]), np.concatenate([ib, ia]))), shape=(n, n))
    ny, nx = pm.shape
    inside = (out_ij[:, 0] >= 0) & (out_ij[:, 0] < ny) & (out_ij[:, 1] >= 0) & (out_ij[:, 1] < nx)
    if not inside.all():
        raise ParameterError("solver='colgen' needs pad=0 (outputs on the map's nodes).")
    D = dijkstra(G, directed=True, indices=out_ij[:, 0] * nx + out_ij[:, 1])  # (m, n)
    free = np.flatnonzero(np.asarray(prior, float).ravel() == 0).astype(np.int32)  # rows without prior weight
    problem = {"C": C, "cone_lp": _cone_matrix(pm, lp_allowed)}
    if exact_allowed is not None:
        problem["cone_exact"] = _cone_matrix(pm, exact_allowed)
    master = _Master(C, cscale, free, pm, lp_allowed)
    master.add(np.exp(-D), np.arange(m))
    master.add(np.ones((1, n)), [int(np.argmin(C.sum(axis=0)))])
    del D
    price = _Pricer(problem, n_jobs, mp_context)
    try:
        upper, v_best, rounds, message, info = _colgen_rounds(master, price, time_limit, gap, t0)
        P = master.mechanism()
        exact_bound = None
        if (
            exact_allowed is not None
        ):  # the certified bound is for the exact problem: the best duals over the exact cone
            exact_total, _ = price(v_best, want_columns=False, cone="exact")
            exact_bound = (float(v_best.sum()) + exact_total) * cscale
    finally:
        price.close()
    return P, exact_bound, upper * cscale, rounds, message, info


class _Master:
    """The master LP of column generation (:func:`_solve_colgen`): nonnegative combinations of the
    generated cone elements of each output, under the row sums.

    ``C`` the (scaled) costs, ``free`` the rows without prior weight: relaxed to sum_y P(y|a) <= 1
    in phase 1 (``relaxed``), restored to equalities by :meth:`restore_rows`.
    """

    def __init__(self, C: np.ndarray, cscale: float, free: np.ndarray, pm: PrivacyMap, lp_allowed):
        import highspy

        self.C, self.cscale, self.free, self.pm, self.lp_allowed = C, cscale, free, pm, lp_allowed
        self.relaxed = len(free) > 0
        n = C.shape[0]
        h = _quiet_highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        mlp = highspy.HighsLp()
        mlp.num_col_, mlp.num_row_ = 0, n
        lower = np.ones(n)
        if self.relaxed:
            lower[free] = -highspy.kHighsInf
        mlp.row_lower_ = lower
        mlp.row_upper_ = np.ones(n)
        h.passModel(mlp)
        self.h = h
        self.columns, self.owners = [], []

    def add(self, ks, ys) -> None:
        """Add columns ``ks`` (j, n), one cone element of output ``ys[i]`` each (entries below ``COLGEN_DROP`` left out)."""
        import highspy

        ks = np.asarray(ks, float)  # (j, n)
        j = len(ks)
        cost = np.einsum("jn,nj->j", ks, self.C[:, ys])
        keep = ks >= COLGEN_DROP
        starts = np.concatenate([[0], np.cumsum(keep.sum(axis=1))[:-1]]).astype(np.int32)
        self.h.addCols(
            j,
            cost,
            np.zeros(j),
            np.full(j, highspy.kHighsInf),
            int(keep.sum()),
            starts,
            np.nonzero(keep)[1].astype(np.int32),
            ks[keep],
        )
        self.columns.extend(ks)
        self.owners.extend(int(y) for y in ys)

    def solve(self):
        """(objective, row duals) of the master; a failed warm start is solved once from scratch by dual simplex."""
        import highspy

        master = self.h
        master.run()
        if master.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            master.clearSolver()  # a failed warm start: solve from scratch once, by dual simplex
            master.setOptionValue("simplex_strategy", SIMPLEX_DUAL)
            master.run()
        if master.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise InfeasibleMechanismError(
                f"The column generation master LP failed ({master.modelStatusToString(master.getModelStatus())})."
            )
        return master.getInfo().objective_function_value, np.asarray(master.getSolution().row_dual, float)

    def simplex(self, strategy: int) -> None:
        self.h.setOptionValue("simplex_strategy", strategy)

    def mechanism(self) -> np.ndarray:
        """P (n, m) of the master's solution, from the full columns."""
        lam = np.asarray(self.h.getSolution().col_value, float)
        P = np.zeros((self.C.shape[0], self.C.shape[1]))
        for j in np.flatnonzero(lam > 0):
            P[:, self.owners[j]] += lam[j] * self.columns[j]
        return P

    def restore_rows(self) -> None:
        """Phase 2: the exact row sums, and the phase-1 mechanism made feasible (renormalised and
        repaired) as a starting point.  The phase-1 columns stay: they make the exact master slower
        (2.6 M entries at 35 x 35), but without them 20 x 20 took more than 60 rounds instead of 26."""
        P0 = _repaired(np.clip(self.mechanism(), 0.0, None), self.pm, self.lp_allowed, {}, True)
        for a in self.free:  # (changeRowsBounds is not in highspy 1.8)
            self.h.changeRowBounds(int(a), 1.0, 1.0)
        self.add(P0.T, np.arange(self.C.shape[1]))
        self.simplex(SIMPLEX_DUAL)  # the restored rows leave the basis primal infeasible
        self.relaxed = False


def _price_round(price: _Pricer, C: np.ndarray, v: np.ndarray, v_best, bound: float):
    """One round's pricing: new columns, and the best Lagrangian bound so far with its duals.

    Prices at duals smoothed towards those of the best bound so far (Wentges): the master's own
    duals jump between extreme points and give poor bounds and columns.  Keeps the columns that
    improve the master; if smoothing found none, prices at the master's own duals.  Returns
    ``(bound, v_best, new)``.
    """
    vs = v if v_best is None else COLGEN_SMOOTHING * v_best + (1.0 - COLGEN_SMOOTHING) * v
    total, new = price(vs, want_columns=True)
    if float(vs.sum()) + total > bound:
        bound, v_best = float(vs.sum()) + total, vs.copy()
    new = [(y, k) for y, k in new if float((C[:, y] - v) @ k) < -1e-9]  # columns that improve the master
    if not new and vs is not v:  # smoothing found nothing for the master: price at its own duals
        total, new = price(v, want_columns=True)
        if float(v.sum()) + total > bound:
            bound, v_best = float(v.sum()) + total, v.copy()
    return bound, v_best, new


def _colgen_rounds(master: _Master, price: _Pricer, time_limit, gap: float, t0: float):
    """The rounds of column generation (master, pricing, new columns) until a stopping rule
    (:func:`_solve_colgen`); returns ``(upper, v_best, rounds, message, info)``.

    Phase 1 (relaxed rows) ends when no column prices out, at ``COLGEN_RELAXED_GAP`` or at the time
    limit (then one phase-2 master); phase 2 at ``gap``, when no column prices out, or at the time limit.
    """
    info = {"relaxed_rounds": 0, "relaxed_bound": None, "relaxed_seconds": None}
    cscale = master.cscale
    bound, rounds, message, v_best = -np.inf, 0, "column generation", None
    while True:
        rounds += 1
        t_round = time.perf_counter()
        upper, v = master.solve()
        t_master = time.perf_counter() - t_round
        # new columns keep the basis primal feasible: primal simplex from here (35 x 35: phase-1
        # masters 1.6-4.5 s instead of 5-15 s, phase-2 masters 13-50 s instead of 40-80 s)
        master.simplex(SIMPLEX_PRIMAL)
        bound, v_best, new = _price_round(price, master.C, v, v_best, bound)
        elapsed = time.perf_counter() - t0
        _log.info(
            "column generation round %d (%.0f s, %s; master LP %.1f s, pricing %.1f s): master %.6g, bound %.6g, "
            "%d new columns",
            rounds,
            elapsed,
            "relaxed rows" if master.relaxed else "exact rows",
            t_master,
            time.perf_counter() - t_round - t_master,
            upper * cscale,
            bound * cscale,
            len(new),
        )
        if master.relaxed and (
            not new
            or (bound > 0 and (upper - bound) / bound <= COLGEN_RELAXED_GAP)
            or (time_limit is not None and elapsed > time_limit)
        ):
            info.update(relaxed_rounds=rounds, relaxed_bound=bound * cscale, relaxed_seconds=elapsed)
            if new:
                master.add([k for _, k in new], [y for y, _ in new])
            master.restore_rows()
            if time_limit is not None and elapsed > time_limit:
                upper, v = master.solve()
                message = f"column generation: time limit in phase 1 after {rounds} rounds"
                break
            continue
        if not new:
            message = f"column generation: no column prices out after {rounds} rounds"
            break
        if bound > 0 and (upper - bound) / bound <= gap:
            message = f"column generation: gap {(upper - bound) / bound:.1e} after {rounds} rounds"
            break
        if time_limit is not None and elapsed > time_limit:
            gap_now = f"gap {(upper - bound) / bound:.1e}" if bound > 0 else "no positive bound yet"
            message = f"column generation: time limit after {rounds} rounds, {gap_now}"
            break
        master.add([k for _, k in new], [y for y, _ in new])
    return upper, v_best, rounds, message, info


def _repaired(P: np.ndarray, pm: PrivacyMap, lp_allowed, params: dict, repair: bool) -> np.ndarray:
    """Rows renormalised and, with ``repair``, made exactly private (see the module notes); fills ``params``."""
    P /= P.sum(axis=1, keepdims=True)
    if repair:
        params["raw_verify_ratio"] = _max_ratio(P, pm)[0]
        R, sweeps = _repair(P, lp_allowed, pm.shape)
        s = R.sum(axis=1, keepdims=True)
        params["repair_added_mass"] = float(s.max() - 1.0)
        params["repair_sweeps"] = sweeps
        P = R / s
        # the renormalisation moves ln P by ln s(a); when the repair added much mass (windows) that can
        # exceed the margin: repair and renormalise again (a contraction in practice; bounded)
        rounds = 1
        while rounds < 50 and _max_ratio(P, pm)[0] > 1.0:
            R, _ = _repair(P, lp_allowed, pm.shape)
            P = R / R.sum(axis=1, keepdims=True)
            rounds += 1
        params["repair_rounds"] = rounds
    return P


def _mechanism(P, pm, p, lp_allowed, output_xy, message, seconds, objective, bound, repair, t_start, params):
    """The common end of every solver: renormalise, repair, record and return the mechanism (errors in m^2)."""
    P = np.clip(P, 0.0, None)
    params.update(
        lp_residual_row_sum=float(np.max(np.abs(P.sum(axis=1) - 1.0))),
        raw_verify_ratio=None,
        repair=repair,
        dual_bound=bound,
        gap=None,
    )
    P = _repaired(P, pm, lp_allowed, params, repair)
    params["build_seconds"] = time.perf_counter() - t_start
    mech = OptimalMechanism(pm, P, output_xy, 0, message, seconds, objective, params)
    if bound is not None and bound > 0:
        params["gap"] = (mech.expected_mse(p) - bound) / bound
    return mech


# ============================================================================================
# repair and verification
# ============================================================================================
def _repair(P: np.ndarray, allowed, shape, max_sweeps: int | None = None):
    """Smallest exactly private upper envelope of every output column, in log space.

    P : (N, M) >= 0; ``allowed`` the 4 edge-family arrays.  Returns (P', sweeps) with
    ln P'(y|a) = max_b (ln P(y|b) - dist(a, b)), dist the shortest path over ``allowed`` on the
    8-neighbour graph (max-plus relaxation vectorised over outputs; at most N sweeps, a few in
    practice).  All-zero columns stay zero.
    """
    ny, nx = shape
    m = P.shape[1]
    with np.errstate(divide="ignore"):
        L = np.log(P).reshape(ny, nx, m)
    allowed = [np.asarray(a, float)[..., None] for a in allowed]
    slices = _edge_slices()
    max_sweeps = max_sweeps or ny * nx + 1
    with np.errstate(invalid="ignore"):  # -inf + inf in the change test of all-zero columns
        for sweep in range(max_sweeps):
            changed = False
            for (sa, sb), al in zip(slices, allowed):
                for dst, src in ((sa, sb), (sb, sa)):
                    cand = L[src] - al
                    view = L[dst]
                    if np.any(cand > view + 1e-13 * np.maximum(1.0, np.abs(cand))):
                        changed = True
                        np.maximum(view, cand, out=view)
            if not changed:
                break
        else:  # pragma: no cover - bounded by the longest shortest path
            raise RuntimeError("Repair of the LP solution did not converge; this is a bug, please report it.")
    return np.exp(L).reshape(ny * nx, m), sweep + 1


def _max_ratio(P: np.ndarray, pm: PrivacyMap, floor: float = VERIFY_FLOOR):
    """max over edges and outputs of |ln P(y|a) - ln P(y|b)| / allowed(a, b), and where."""
    ny, nx = pm.shape
    m = P.shape[1]
    if P.shape[0] != ny * nx:
        raise ParameterError(f"The mechanism has {P.shape[0]} inputs; the map has {ny} x {nx} = {ny * nx} nodes.")
    Pg = P.reshape(ny, nx, m)
    with np.errstate(divide="ignore"):
        L = np.log(np.maximum(Pg, 0.0))
    best, where = 0.0, None
    for fam, ((sa, sb), al) in enumerate(zip(_edge_slices(), _allowed(pm))):
        with np.errstate(invalid="ignore"):
            r = np.abs(L[sa] - L[sb]) / np.asarray(al)[..., None]
        r[(Pg[sa] < floor) & (Pg[sb] < floor)] = 0.0
        k = int(np.argmax(r))
        if r.flat[k] > best:
            best = float(r.flat[k])
            where = (fam, np.unravel_index(k, r.shape))
    return best, where


# ============================================================================================
# the mechanism
# ============================================================================================
@dataclass(frozen=True, eq=False, repr=False)
class OptimalMechanism:
    """Optimal (minimum expected squared error) mechanism on a privacy map's grid, from an LP.

    Made by :func:`optimal_mechanism`; the constructor's parameters are also its attributes.

    Parameters
    ----------
    privacy_map : PrivacyMap
        The map whose discrete guarantee the LP imposes (see the module notes).
    probs : ndarray (n_inputs, n_outputs)
        P(y|a); inputs are the map's nodes in row-major raster order, rows sum to 1.
    output_xy : ndarray (n_outputs, 2)
        Output node positions in the map's CRS.
    status : int
        0: the solver's solution was accepted (optimal, or for ``solver="ipm"`` an interior
        solution without crossover that meets the rows to 1e-4 before the repair).
    message : str
        Solver message.
    seconds : float
        Wall time of the solve.
    objective : float
        LP optimum, expected squared error in square ground metres under the prior used.
    params : dict
        Prior, pad, solver, LP size (``lp_variables``/``lp_constraints`` as solved), repair
        statistics, ``dual_bound`` (certified lower bound on the exact optimum, m^2) and ``gap``,
        build time.

    Raises
    ------
    ParameterError
        ``probs`` is not (number of map nodes, number of outputs).

    See Also
    --------
    optimal_mechanism : Solves the LP and returns this mechanism.
    EikonalMechanism : A mechanism for maps of any size (this one is for coarse maps).

    Examples
    --------
    >>> from geopriv.mechanisms.optimal import coarsen_to
    >>> pm = geopriv.PrivacyMap.from_population(geopriv.datasets.get_path("tokyo_density_40"),
    ...                                         epsilon_range=(math.log(4) / 2000, math.log(4) / 400))
    >>> mech = geopriv.optimal_mechanism(coarsen_to(pm, (8, 8)))
    >>> mech.probs.shape, mech.status, bool(np.allclose(mech.probs.sum(axis=1), 1))
    ((64, 64), 0, True)
    >>> bool(mech.verify() <= 1), bool(mech.compare_laplace()["ratio"] < 1)
    (True, True)
    """

    privacy_map: PrivacyMap
    probs: np.ndarray
    output_xy: np.ndarray
    status: int
    message: str
    seconds: float
    objective: float = float("nan")
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("probs", "output_xy"):
            arr = np.array(getattr(self, name), dtype=float)
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        n = self.privacy_map.shape[0] * self.privacy_map.shape[1]
        if self.probs.shape != (n, len(self.output_xy)):
            raise ParameterError(
                f"probs must be (n_inputs={n}, n_outputs={len(self.output_xy)}); got {self.probs.shape}."
            )

    @property
    def shape(self) -> tuple[int, int]:
        return self.privacy_map.shape

    # ------------------------------------------------------------------ utility
    def node_mse(self) -> np.ndarray:
        """E|Q(a) - a|^2 at every input node, square ground metres (ny, nx); outputs are nodes (no jitter)."""
        pm = self.privacy_map
        ux = np.tile(pm.node_x, pm.shape[0])
        uy = np.repeat(pm.node_y, pm.shape[1])
        d2 = (ux[:, None] - self.output_xy[None, :, 0]) ** 2 + (uy[:, None] - self.output_xy[None, :, 1]) ** 2
        per = (self.probs * d2).sum(axis=1)
        return (per / _mean_ground_scale(pm) ** 2).reshape(pm.shape)

    def expected_mse(self, prior=None) -> float:
        """Expected squared error E|Q(u) - u|^2 in square ground metres, u ~ ``prior`` over nodes.

        ``prior``: None (the map's population when it has one, else uniform over cells with
        data), "population", "uniform" or an (ny, nx) array; see :meth:`PrivacyMap.prior`.
        """
        p = self.privacy_map.prior(prior)
        return float((p * self.node_mse()).sum())

    def laplace_mse(self) -> float:
        """Expected squared error of planar Laplace at the map's smallest epsilon: 6 / eps_min^2 (m^2)."""
        from .planar_laplace import PlanarLaplace

        return PlanarLaplace(self.privacy_map.epsilon_min).mse()

    def compare_laplace(self, prior=None) -> dict:
        """Expected MSE of this mechanism vs planar Laplace at the minimum epsilon.

        Keys as :meth:`geopriv.EikonalMechanism.compare_laplace`, with ``optimal_mse_m2`` in
        place of ``eikonal_mse_m2``: ``optimal_mse_m2``, ``laplace_mse_m2``, ``ratio``,
        ``epsilon_min_per_m``.
        """
        e = self.expected_mse(prior)
        lap = self.laplace_mse()
        return {
            "optimal_mse_m2": e,
            "laplace_mse_m2": lap,
            "ratio": e / lap,
            "epsilon_min_per_m": self.privacy_map.epsilon_min,
        }

    # ------------------------------------------------------------------ verification
    def verify(self, privacy_map: PrivacyMap | None = None) -> float:
        """Largest ``|ln P(y|a) - ln P(y|b)| / allowed(a, b)`` over neighbouring nodes and outputs.

        Against this mechanism's map, or another map of the same grid (e.g. a stricter one).
        Pairs where both probabilities are below 1e-12 are skipped.  <= 1 means the guarantee
        holds; HiGHS tolerances (see the module notes) can leave it ~1e-6 above 1.
        """
        return _max_ratio(self.probs, privacy_map or self.privacy_map)[0]

    def __repr__(self) -> str:
        ny, nx = self.shape
        return (
            f"OptimalMechanism({ny} x {nx} inputs, {len(self.output_xy)} outputs, status {self.status}, "
            f"HiGHS {self.seconds:.1f} s)"
        )


def _has_highspy() -> bool:
    import importlib.util

    return importlib.util.find_spec("highspy") is not None


def optimal_mechanism(
    privacy_map: PrivacyMap,
    prior="population",
    *,
    pad: int = 0,
    time_limit: float | None = None,
    max_variables: int = 400_000,
    margin: float = 1e-4,
    repair: bool = True,
    method: str | None = None,
    solver: str = "auto",
    options: dict | None = None,
    dual_bound: bool = True,
    window: int | None = None,
    n_jobs: int = 1,
) -> OptimalMechanism:
    """Solve the LP for the minimum expected squared error mechanism meeting ``privacy_map``.

    Parameters
    ----------
    privacy_map : PrivacyMap
        A coarse map (the LP has (ny nx) x (ny + 2 pad)(nx + 2 pad) variables); see
        :func:`coarsen` and :func:`coarsen_to`.
    prior : "population" (default), "uniform", None or array (ny, nx)
        The input distribution of the objective (:meth:`PrivacyMap.prior`); the paper uses the
        population.
    pad : int
        Extra rings of output nodes around the grid (0: outputs = the map's nodes).
    time_limit : float, optional
        Seconds for the solver.  Column generation returns the best mechanism so far, with its
        certified bound; for the other solvers reaching it is an error.
    max_variables : int
        Refuse larger problems before building them (memory grows ~100 bytes per variable).
    margin : float
        The LP imposes ``(1 - margin) * allowed``; the rest of the budget absorbs the row
        renormalisation after the repair (see the module notes).  Costs ~``margin`` relative
        MSE.  0 gives the LP exactly as stated, whose repaired solution may exceed the map by
        the solver tolerance (verify() ~ 1 + 1e-7).
    repair : bool
        Make the solution exactly private (see the module notes).  False keeps the clipped,
        renormalised solver solution (for inspecting tolerance effects).
    method : {None, "highs", "highs-ds", "highs-ipm"}
        Passed to :func:`scipy.optimize.linprog` when ``solver="highs"`` (None: ``"highs"``, its
        own choice of simplex or interior point); giving one makes ``solver="auto"`` take "highs".
    solver : {"auto", "colgen", "highs", "ipm", "pdlp"}
        "auto" (default): "colgen" wherever it applies (``highspy`` installed, ``pad=0``, no
        ``window`` and no ``method``), else "highs"; ``params["solver"]`` says which ran.
        "colgen": column generation over the outputs (one small pricing LP per output and round,
        a master LP over the row sums; needs ``highspy``, ``pad=0`` and no ``window``), stopping
        at a certified relative gap of ``COLGEN_GAP`` (1e-3) or at ``time_limit`` (then the best
        mechanism so far, with its bound): the fastest route to the paper's sizes (20 x 20 in
        ~20-30 s with ``n_jobs=2``, where the full LP with "highs" ran past 5 minutes).  It
        never builds the full LP, so ``max_variables`` does not limit it.  "highs":
        :func:`scipy.optimize.linprog` on the full LP with ``method``.  "ipm": HiGHS
        interior point **without crossover**, "pdlp": HiGHS' first-order PDLP, both through the
        optional ``highspy`` package, single-threaded (an interior or approximate solution is
        enough: the repair makes it exactly private and ``params["dual_bound"]`` says how far
        from optimal it can be).  Without ``highspy`` they fall back to scipy's
        ``method="highs-ipm"`` (with crossover) and warn.
    options : dict, optional
        Extra HiGHS options (scipy ``linprog`` options, or ``highspy`` option names).
    dual_bound : bool
        Also compute a certified lower bound on the optimum of the *unmargined* LP (margin 0,
        the exact discrete problem) from the solver's duals: ``params["dual_bound"]`` (square
        ground metres) and ``params["gap"]`` = (repaired MSE - bound) / bound.
    window : int, optional
        Keep only the variables P(y|a) with ``|a - y| <= window`` cells (Chebyshev distance)
        and the constraints among them; the rest start at 0 and the repair fills them with the
        exactly private envelope (then rows are renormalised).  The result is still exactly
        private (checked by verify()) and its MSE an upper bound on the optimum, while the
        dual bound is computed for the *full* problem (the multipliers of the windowed LP,
        with the outside variables priced at c - lambda), so ``params["gap"]`` certifies how
        much the window cost.  Use a larger ``margin`` (e.g. 1e-3) with small windows: the
        envelope adds mass ~exp(-window * epsilon * cell) that the renormalisation must fit in.
        The windowed LP's objective gives zero-prior inputs a small weight
        (``WINDOW_PRIOR_FLOOR`` x the mean prior), else their free rows pile mass on the window
        edges; MSE and bound are for the true prior.
    n_jobs : int
        Worker processes pricing the outputs with ``solver="colgen"`` (default 1).

    Returns
    -------
    OptimalMechanism
        P(y|a) for every input node a and output y, exactly private for ``privacy_map`` after the
        repair (``verify() <= 1``), with the solver's statistics in ``params``.

    Raises
    ------
    InfeasibleMechanismError
        The problem is too large, or HiGHS did not return an optimal solution.
    ParameterError
        An option is out of range, or options that do not go together (``solver="colgen"`` with
        ``pad`` or ``window``).
    ParameterTypeError
        ``privacy_map`` is not a :class:`PrivacyMap`.
    ImportError
        ``solver="colgen"`` without the optional package highspy.

    See Also
    --------
    OptimalMechanism : The result.
    EikonalMechanism : A mechanism for maps of any size, close to this optimum.
    PrivacyMap : The privacy level, epsilon per ground metre, place by place.

    Examples
    --------
    The central Tokyo map coarsened to 8 x 8 cells (the LP has 64 x 64 variables):

    >>> from geopriv.mechanisms.optimal import coarsen_to
    >>> pm = geopriv.PrivacyMap.from_population(geopriv.datasets.get_path("tokyo_density_40"),
    ...                                         epsilon_range=(math.log(4) / 2000, math.log(4) / 400))
    >>> mech = geopriv.optimal_mechanism(coarsen_to(pm, (8, 8)))
    >>> mech.shape, bool(mech.verify() <= 1)
    ((8, 8), True)
    >>> comparison = mech.compare_laplace()   # square ground metres, population prior
    >>> bool(comparison["optimal_mse_m2"] < comparison["laplace_mse_m2"])
    True
    """
    if not isinstance(privacy_map, PrivacyMap):
        raise ParameterTypeError("privacy_map must be a geopriv.PrivacyMap.")
    opts = _LPOptions.checked(
        pad=pad,
        time_limit=time_limit,
        max_variables=max_variables,
        margin=margin,
        repair=repair,
        method=method,
        solver=solver,
        options=options,
        dual_bound=dual_bound,
        window=window,
        n_jobs=n_jobs,
    )
    t_start = time.perf_counter()
    setup = _LPSetup.of(privacy_map, prior, opts, t_start)
    params = {
        "prior": prior if isinstance(prior, str) or prior is None else "array",
        "pad": opts.pad,
        "margin": opts.margin,
        "method": opts.method,
        "solver": opts.solver,
        **setup.size,
        "window": opts.window,
    }
    if opts.solver == "colgen":
        return _optimal_colgen(setup, opts, params)
    return _optimal_lp(setup, opts, params)


@dataclass(frozen=True)
class _LPOptions:
    """:func:`optimal_mechanism`'s options, checked, with ``solver="auto"`` and ``method=None`` resolved."""

    pad: int
    time_limit: float | None
    max_variables: int
    margin: float
    repair: bool
    method: str
    solver: str
    options: dict | None
    dual_bound: bool
    window: int | None
    n_jobs: int

    @classmethod
    def checked(cls, *, pad, method, solver, n_jobs, margin, window, **rest) -> "_LPOptions":
        """The options validated in :func:`optimal_mechanism`'s order (pad, solver, n_jobs, margin, window).

        Raises
        ------
        ParameterError
            The first option out of range.
        """
        if isinstance(pad, bool) or not isinstance(pad, (int, np.integer)) or pad < 0:
            raise ParameterError(f"pad must be an integer >= 0; got {pad!r}.")
        if solver not in SOLVERS:
            raise ParameterError(f"solver must be one of {SOLVERS}; got {solver!r}.")
        if solver == "auto":
            solver = "colgen" if (_has_highspy() and pad == 0 and window is None and method is None) else "highs"
        method = "highs" if method is None else method
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
            raise ParameterError(
                f"n_jobs must be an integer >= 1 (worker processes for solver='colgen'); got {n_jobs!r}."
            )
        pad = int(pad)
        margin = float(margin)
        if not 0.0 <= margin < 1.0:
            raise ParameterError(f"margin must be in [0, 1); got {margin!r}.")
        if window is not None:
            if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
                raise ParameterError(f"window must be an integer >= 1 (cells) or None; got {window!r}.")
            window = int(window)
        return cls(pad=pad, margin=margin, method=method, solver=solver, n_jobs=n_jobs, window=window, **rest)


@dataclass(frozen=True, eq=False)
class _LPSetup:
    """What every solver of :func:`optimal_mechanism` works from: the map, the priors, the outputs and the margin's cone."""

    pm: PrivacyMap
    p: np.ndarray  # the prior of the objective (and of the MSE and bound)
    p_lp: np.ndarray  # the windowed LP's objective prior (zero-prior inputs given a small weight)
    out_ij: np.ndarray
    win: np.ndarray | None  # the variables a window keeps, or None
    output_xy: np.ndarray
    lp_allowed: list  # the allowed losses per edge family, times (1 - margin)
    gs2: float  # squared mean ground scale: CRS units^2 to square ground metres
    size: dict  # lp_size, with lp_variables for a window
    t_start: float

    @classmethod
    def of(cls, pm: PrivacyMap, prior, opts: _LPOptions, t_start: float) -> "_LPSetup":
        """The setup for ``pm``, refusing solver options that do not go together and LPs over ``max_variables``."""
        pad, window, solver, max_variables = opts.pad, opts.window, opts.solver, opts.max_variables
        size = lp_size(pm.shape, pad)
        out_ij, _ = _output_grid(pm.shape, pad)
        win = _window(pm.shape, out_ij, window)
        if win is not None:
            size["lp_variables"] = int(win.sum())
        if solver == "colgen" and window is not None:
            raise ParameterError(
                "window restricts the LP for the other solvers; solver='colgen' solves the full problem (leave window=None)."
            )
        if solver == "colgen" and pad:
            raise ParameterError("solver='colgen' needs pad=0 (outputs on the map's nodes).")
        if solver != "colgen" and size.get("lp_variables", size["variables"]) > max_variables:
            ny, nx = pm.shape
            f = 2
            while lp_size((ny // f, nx // f), pad)["variables"] > max_variables and min(ny // f, nx // f) > 2:
                f += 1
            raise InfeasibleMechanismError(
                f"The LP for a {ny} x {nx} grid with pad={pad} has {size['variables']:,} variables and "
                f"{size['constraints']:,} constraints (limit max_variables={max_variables:,}). Coarsen the map first, e.g. "
                f"geopriv.mechanisms.optimal.coarsen(pm, {f}{'' if ny % f == 0 and nx % f == 0 else ', trim=True'}) "
                f"-> {ny // f} x {nx // f} cells (or coarsen_to(pm, (rows, columns)) for any shape), or raise "
                "max_variables if you have the memory and time (HiGHS time grows much faster than the size)."
            )
        p = pm.prior(prior)
        t = pm.transform
        output_xy = np.column_stack([t.c + t.a * (out_ij[:, 1] + 0.5), t.f + t.e * (out_ij[:, 0] + 0.5)])
        lp_allowed = [a * (1.0 - opts.margin) for a in _allowed(pm)]
        p_lp = p
        if win is not None and np.any(p > 0):
            # inputs without prior weight would put their (free) mass on the window edges, where the repair's
            # envelope then leaks much mass outside the windows: the windowed LP gives them a small weight
            p_lp = np.maximum(p, WINDOW_PRIOR_FLOOR * p[p > 0].mean())
            p_lp = p_lp / p_lp.sum()
        gs2 = _mean_ground_scale(pm) ** 2
        return cls(pm, p, p_lp, out_ij, win, output_xy, lp_allowed, gs2, size, t_start)


def _optimal_colgen(setup: _LPSetup, opts: _LPOptions, params: dict) -> OptimalMechanism:
    """:func:`optimal_mechanism` by column generation (:func:`_solve_colgen`): the full problem's rows,
    implicitly (its cone, priced per output)."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        from ..exceptions import MissingDependencyError

        raise MissingDependencyError(
            "solver='colgen' needs the optional package highspy, which is not installed (or use solver='highs').",
            package="highspy",
            extra="lp",
        ) from None
    pm, p, gs2 = setup.pm, setup.p, setup.gs2
    t0 = time.perf_counter()
    P, bound, objective, rounds, message, info = _solve_colgen(
        pm,
        p,
        setup.out_ij,
        setup.lp_allowed,
        _allowed(pm) if opts.dual_bound else None,
        opts.time_limit,
        COLGEN_GAP,
        int(opts.n_jobs),
    )
    # the full problem's rows, implicitly: its cone, priced per output
    params.update(
        method="column generation",
        solver="highspy-colgen",
        lp_constraints=setup.size["constraints"],
        colgen_rounds=rounds,
        n_jobs=int(opts.n_jobs),
        colgen_relaxed_rounds=info["relaxed_rounds"],
        colgen_relaxed_bound=None if info["relaxed_bound"] is None else info["relaxed_bound"] / gs2,
        colgen_relaxed_seconds=info["relaxed_seconds"],
    )
    return _mechanism(
        P,
        pm,
        p,
        setup.lp_allowed,
        setup.output_xy,
        message,
        time.perf_counter() - t0,
        objective / gs2,
        None if bound is None else bound / gs2,
        opts.repair,
        setup.t_start,
        params,
    )


def _optimal_lp(setup: _LPSetup, opts: _LPOptions, params: dict) -> OptimalMechanism:
    """:func:`optimal_mechanism` on the full (or windowed) LP: built, solved by HiGHS (scipy or highspy),
    its dual bound computed for the exact problem, the solution repaired."""
    pm, p, out_ij, win, gs2 = setup.pm, setup.p, setup.out_ij, setup.win, setup.gs2
    size = setup.size
    c, cscale, A_ub, b_ub, A_eq, b_eq = _build_lp(pm, setup.p_lp, out_ij, setup.lp_allowed, win)
    size["lp_constraints"] = int(A_ub.shape[0] + A_eq.shape[0])
    high = -A_ub.min(axis=1).toarray().ravel() if opts.dual_bound else None  # exp(w/2) of every privacy row
    solver, method, used = _lp_solver(opts.solver, opts.method, stacklevel=4)
    ok, status, x, u, v, message, seconds = _solve_full_lp(
        (c, A_ub, b_ub, A_eq, b_eq), solver, method, opts.time_limit, dict(opts.options or {})
    )
    del A_ub, A_eq
    if not ok:
        _refuse_lp(status, message, seconds, opts.time_limit)
    n, m = pm.shape[0] * pm.shape[1], len(out_ij)
    x = np.asarray(x, float)
    fun = float(c @ x)
    bound = None
    if opts.dual_bound and u is not None and v is not None:
        bound = _exact_dual_bound(setup, u, high, cscale)
    if win is None:
        P = np.clip(x.reshape(n, m), 0.0, None)
    else:
        P = np.zeros((n, m))
        P[win] = np.clip(x, 0.0, None)
    params.update(method=method, solver=used, lp_constraints=size["lp_constraints"])
    return _mechanism(
        P,
        pm,
        p,
        setup.lp_allowed,
        setup.output_xy,
        message,
        seconds,
        fun * cscale / gs2,
        bound,
        opts.repair,
        setup.t_start,
        params,
    )


def _lp_solver(solver: str, method: str, stacklevel: int) -> tuple[str, str, str]:
    """(solver, method, name recorded in ``params["solver"]``): "ipm" and "pdlp" need highspy; without it
    they fall back to scipy's ``method="highs-ipm"`` with a RuntimeWarning (at ``stacklevel``: the user's call)."""
    used = solver if solver == "highs" else f"highspy-{solver}"
    if solver != "highs":
        try:
            import highspy  # noqa: F401
        except ImportError:
            import warnings

            warnings.warn(
                f"solver={solver!r} needs the optional package highspy (pip install highspy); "
                "falling back to scipy's linprog(method='highs-ipm').",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
            solver, method, used = "highs", "highs-ipm", "highs-ipm (fallback)"
    return solver, method, used


def _solve_full_lp(lp: tuple, solver: str, method: str, time_limit, opts: dict):
    """Solve the LP ``(c, A_ub, b_ub, A_eq, b_eq)`` with scipy's linprog (``solver="highs"``) or highspy.

    Returns ``(ok, status, x, u, v, message, seconds)``: ``u``, ``v`` the duals of the inequality
    and equality rows (scipy's ``marginals``), or None.
    """
    import scipy.optimize

    c, A_ub, b_ub, A_eq, b_eq = lp
    t0 = time.perf_counter()
    if solver == "highs":
        if time_limit is not None:
            opts["time_limit"] = float(time_limit)
        res = scipy.optimize.linprog(
            c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=(0, 1), method=method, options=opts
        )
        status, message, x = int(res.status), str(res.message), res.x
        ok = status == 0 and x is not None
        u = getattr(getattr(res, "ineqlin", None), "marginals", None)
        v = getattr(getattr(res, "eqlin", None), "marginals", None)
    else:
        ok, status, x, u, v, message = _solve_highspy(c, A_ub, b_ub, A_eq, b_eq, solver, time_limit, opts)
    return ok, status, x, u, v, message, time.perf_counter() - t0


def _refuse_lp(status: int, message: str, seconds: float, time_limit) -> None:
    """Raise the InfeasibleMechanismError for a solver that returned no optimal mechanism, with what to try."""
    hint = {
        1: f"HiGHS stopped at its iteration or time limit after {seconds:.0f} s; raise time_limit "
        "(now {}) or coarsen the map (geopriv.mechanisms.optimal.coarsen).".format(time_limit),
        2: "The LP is infeasible, which cannot happen (the uniform mechanism is feasible): numerical trouble; "
        "coarsen the map or lower its largest epsilon per cell.",
        4: "HiGHS had numerical difficulties; the allowed log-ratios per edge may be too large "
        "(exp(allowed) spans too many orders of magnitude): coarsen less or cap epsilon.",
    }.get(status, "Try solver='ipm', method='highs-ipm' or 'highs-ds', or coarsen the map.")
    raise InfeasibleMechanismError(f"HiGHS did not return an optimal mechanism (status {status}: {message}). {hint}")


def _exact_dual_bound(setup: _LPSetup, u, high: np.ndarray, cscale: float) -> float:
    """A certified lower bound (square ground metres) on the exact (margin 0) LP's optimum from the margin LP's duals ``u``.

    The multipliers of the margin LP's privacy rows, on the exact rows: any multipliers give a
    valid bound; variables outside the window have no rows (reduced cost = cost).
    """
    pm, p, out_ij, win = setup.pm, setup.p, setup.out_ij, setup.win
    n, m = pm.shape[0] * pm.shape[1], len(out_ij)
    c0, cs0, A0, b0, E0, _ = _build_lp(pm, p, out_ij, _allowed(pm), win)
    # rescale each multiplier so its "high" coefficient exp(w/2) matches the exact row's exp(w0/2):
    # the mismatch then sits on the small coefficient, exp(-w/2) (1 - exp(-margin w0)), not exp(w/2)
    u0 = np.minimum(np.asarray(u, float), 0.0) * high / -A0.min(axis=1).toarray().ravel() * (cscale / cs0)
    if win is None:
        r_full = (c0 - A0.T @ u0).reshape(n, m)
    else:
        r_full = _cost(pm, p, out_ij) / cs0
        r_full[win] = c0 - A0.T @ u0
    del A0, E0
    return _dual_bound(r_full, u0, b0) * cs0 / setup.gs2
