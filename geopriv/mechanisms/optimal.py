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
allowed; on a connected grid the constraints then force the whole output column to zero.)  The
problem is solved with HiGHS (``scipy.optimize.linprog``, sparse constraint matrices built with
numpy, no Python loop over outputs or edges).  Its size is N M variables and about 8 N M
inequality rows for N inputs and M outputs, so it is meant for coarse grids: use
:func:`coarsen` (block minimum of epsilon: lowering epsilon only strengthens privacy).

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
computed from the repaired probabilities; it differs from the LP objective by ~margin.

Squared errors are reported in square ground metres: CRS units divided by the map's mean
ground scale, as :meth:`geopriv.EikonalMechanism.expected_mse` does (1 for metric CRSs away
from distortion).  The error is that of releasing the output *node* (no jitter), at input
nodes: a discrete problem, which favours coarse grids (a cell may hide a whole noise radius).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import InfeasibleMechanismError, RasterError
from ..privacy_map import PrivacyMap
from .grid import allowed as _allowed, edge_list, edge_slices as _edge_slices, mean_ground_scale as _mean_ground_scale

__all__ = ["OptimalMechanism", "optimal_mechanism", "coarsen", "lp_size"]

# probabilities below this on both ends of an edge are not checked by verify()
VERIFY_FLOOR = 1e-12


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
        raise ValueError(f"factor must be an integer >= 1; got {factor!r}.")
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

    def blocks(arr):
        return np.asarray(arr)[: cy * factor, : cx * factor].reshape(cy, factor, cx, factor)

    eps = blocks(privacy_map.epsilon).min(axis=(1, 3))
    mask = blocks(privacy_map.nodata_mask).all(axis=(1, 3))
    pop = None if privacy_map.population is None else blocks(privacy_map.population).mean(axis=(1, 3))
    from affine import Affine

    t = privacy_map.transform
    transform = Affine(t.a * factor, 0.0, t.c, 0.0, t.e * factor, t.f)
    info = dict(privacy_map.info)
    info["coarsened"] = {
        "factor": factor,
        "from_shape": [ny, nx],
        "trimmed": [ny - cy * factor, nx - cx * factor],
        "epsilon": "block minimum",
        "population": None if pop is None else "block mean density (prior proportional to block sum)",
    }
    return PrivacyMap(eps, transform, privacy_map.crs, mask, pop, info)


# ============================================================================================
# LP construction
# ============================================================================================
def _output_grid(shape, pad: int):
    """(ij (M, 2) int, (Mh, Mw)) of the output nodes: the grid padded by ``pad`` cells each side."""
    ny, nx = shape
    oi, oj = np.mgrid[-pad:ny + pad, -pad:nx + pad]
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
    return {"inputs": n, "outputs": m, "edges": e, "variables": n * m, "constraints": 2 * e * m + n,
            "nonzeros": 4 * e * m + n * m}


def _build_lp(pm: PrivacyMap, prior: np.ndarray, out_ij: np.ndarray, allowed):
    import scipy.sparse as sp

    ny, nx = pm.shape
    n, m = ny * nx, len(out_ij)
    ia, ib, w = _edges(pm.shape, allowed)
    e = len(w)
    # variable index of P(y|a): a * m + y
    ys = np.arange(m)
    va = (ia[:, None] * m + ys[None, :]).ravel()  # edge-major, then output
    vb = (ib[:, None] * m + ys[None, :]).ravel()
    # rows scaled by exp(-w/2) so coefficients are exp(-w/2) and -exp(w/2) (range exp(+-w/2), not 1..exp(w))
    lo = np.repeat(np.exp(-0.5 * w), m)
    hi = np.repeat(np.exp(0.5 * w), m)
    k = e * m
    rows = np.concatenate([np.arange(k), np.arange(k), np.arange(k, 2 * k), np.arange(k, 2 * k)])
    cols = np.concatenate([va, vb, vb, va])
    vals = np.concatenate([lo, -hi, lo, -hi])
    del va, vb, lo, hi
    A_ub = sp.csr_matrix((vals, (rows, cols)), shape=(2 * k, n * m))
    del rows, cols, vals
    b_ub = np.zeros(2 * k)
    A_eq = sp.csr_matrix((np.ones(n * m), np.arange(n * m), np.arange(0, n * m + 1, m)), shape=(n, n * m))
    b_eq = np.ones(n)
    # objective: prior(a) |a - y|^2 in CRS units^2 (scaled to O(1) for the solver)
    hx, hy = pm.cell_size
    ai, aj = np.divmod(np.arange(n), nx)
    d2 = ((ai[:, None] - out_ij[None, :, 0]) * hy) ** 2 + ((aj[:, None] - out_ij[None, :, 1]) * hx) ** 2
    c = (prior.ravel()[:, None] * d2).ravel()
    cscale = float(c.max()) if c.max() > 0 else 1.0
    return c / cscale, cscale, A_ub, b_ub, A_eq, b_eq


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
        raise ValueError(f"The mechanism has {P.shape[0]} inputs; the map has {ny} x {nx} = {ny * nx} nodes.")
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

    Attributes
    ----------
    privacy_map : PrivacyMap
        The map whose discrete guarantee the LP imposes (see the module notes).
    probs : ndarray (n_inputs, n_outputs)
        P(y|a); inputs are the map's nodes in row-major raster order, rows sum to 1.
    output_xy : ndarray (n_outputs, 2)
        Output node positions in the map's CRS.
    status : int
        HiGHS status via :func:`scipy.optimize.linprog` (0 = optimal).
    message : str
        HiGHS message.
    seconds : float
        Wall time of the HiGHS solve.
    objective : float
        LP optimum, expected squared error in square ground metres under the prior used.
    params : dict
        Prior, pad, LP size, repair statistics, build time.
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
            raise ValueError(f"probs must be (n_inputs={n}, n_outputs={len(self.output_xy)}); got {self.probs.shape}.")

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
        return {"optimal_mse_m2": e, "laplace_mse_m2": lap, "ratio": e / lap, "epsilon_min_per_m": self.privacy_map.epsilon_min}

    # ------------------------------------------------------------------ verification
    def verify(self, privacy_map: PrivacyMap | None = None) -> float:
        """Largest |ln P(y|a) - ln P(y|b)| / allowed(a, b) over neighbouring nodes and outputs.

        Against this mechanism's map, or another map of the same grid (e.g. a stricter one).
        Pairs where both probabilities are below 1e-12 are skipped.  <= 1 means the guarantee
        holds; HiGHS tolerances (see the module notes) can leave it ~1e-6 above 1.
        """
        return _max_ratio(self.probs, privacy_map or self.privacy_map)[0]

    def __repr__(self) -> str:
        ny, nx = self.shape
        return (f"OptimalMechanism({ny} x {nx} inputs, {len(self.output_xy)} outputs, status {self.status}, "
                f"HiGHS {self.seconds:.1f} s)")


def optimal_mechanism(
    privacy_map: PrivacyMap,
    prior="population",
    *,
    pad: int = 0,
    time_limit: float | None = None,
    max_variables: int = 400_000,
    margin: float = 1e-4,
    repair: bool = True,
    method: str = "highs",
    options: dict | None = None,
) -> OptimalMechanism:
    """Solve the LP for the minimum expected squared error mechanism meeting ``privacy_map``.

    Parameters
    ----------
    privacy_map : PrivacyMap
        A coarse map (the LP has (ny nx) x (ny + 2 pad)(nx + 2 pad) variables); see :func:`coarsen`.
    prior : "population" (default), "uniform", None or array (ny, nx)
        The input distribution of the objective (:meth:`PrivacyMap.prior`); the paper uses the
        population.
    pad : int
        Extra rings of output nodes around the grid (0: outputs = the map's nodes).
    time_limit : float, optional
        Seconds for HiGHS; reaching it is an error.
    max_variables : int
        Refuse larger problems before building them (memory grows ~100 bytes per variable).
    margin : float
        The LP imposes ``(1 - margin) * allowed``; the rest of the budget absorbs the row
        renormalisation after the repair (see the module notes).  Costs ~``margin`` relative
        MSE.  0 gives the LP exactly as stated, whose repaired solution may exceed the map by
        the solver tolerance (verify() ~ 1 + 1e-7).
    repair : bool
        Make the solution exactly private (see the module notes).  False keeps the clipped,
        renormalised HiGHS solution (for inspecting tolerance effects).
    method : {"highs", "highs-ds", "highs-ipm"}
        Passed to :func:`scipy.optimize.linprog`.
    options : dict, optional
        Extra HiGHS options for :func:`scipy.optimize.linprog`.

    Raises
    ------
    InfeasibleMechanismError
        The problem is too large, or HiGHS did not return an optimal solution.
    """
    from scipy.optimize import linprog

    if not isinstance(privacy_map, PrivacyMap):
        raise TypeError("privacy_map must be a geopriv.PrivacyMap.")
    if isinstance(pad, bool) or not isinstance(pad, (int, np.integer)) or pad < 0:
        raise ValueError(f"pad must be an integer >= 0; got {pad!r}.")
    pad = int(pad)
    margin = float(margin)
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1); got {margin!r}.")
    t_start = time.perf_counter()
    pm = privacy_map
    size = lp_size(pm.shape, pad)
    if size["variables"] > max_variables:
        ny, nx = pm.shape
        f = 2
        while lp_size((ny // f, nx // f), pad)["variables"] > max_variables and min(ny // f, nx // f) > 2:
            f += 1
        raise InfeasibleMechanismError(
            f"The LP for a {ny} x {nx} grid with pad={pad} has {size['variables']:,} variables and "
            f"{size['constraints']:,} constraints (limit max_variables={max_variables:,}). Coarsen the map first, e.g. "
            f"geopriv.mechanisms.optimal.coarsen(pm, {f}{'' if ny % f == 0 and nx % f == 0 else ', trim=True'}) "
            f"-> {ny // f} x {nx // f} cells, or raise max_variables if you have the memory and time "
            "(HiGHS time grows much faster than the size)."
        )
    p = pm.prior(prior)
    out_ij, _ = _output_grid(pm.shape, pad)
    t = pm.transform
    output_xy = np.column_stack([t.c + t.a * (out_ij[:, 1] + 0.5), t.f + t.e * (out_ij[:, 0] + 0.5)])
    lp_allowed = [a * (1.0 - margin) for a in _allowed(pm)]
    c, cscale, A_ub, b_ub, A_eq, b_eq = _build_lp(pm, p, out_ij, lp_allowed)
    opts = dict(options or {})
    if time_limit is not None:
        opts["time_limit"] = float(time_limit)
    t0 = time.perf_counter()
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=(0, 1), method=method, options=opts)
    seconds = time.perf_counter() - t0
    del A_ub, A_eq
    if res.status != 0 or res.x is None:
        hint = {
            1: f"HiGHS stopped at its iteration or time limit after {seconds:.0f} s; raise time_limit "
               "(now {}) or coarsen the map (geopriv.mechanisms.optimal.coarsen).".format(time_limit),
            2: "The LP is infeasible, which cannot happen (the uniform mechanism is feasible): numerical trouble; "
               "coarsen the map or lower its largest epsilon per cell.",
            4: "HiGHS had numerical difficulties; the allowed log-ratios per edge may be too large "
               "(exp(allowed) spans too many orders of magnitude): coarsen less or cap epsilon.",
        }.get(res.status, "Try method='highs-ipm' or 'highs-ds', or coarsen the map.")
        raise InfeasibleMechanismError(f"HiGHS did not return an optimal mechanism (status {res.status}: {res.message}). {hint}")
    n, m = pm.shape[0] * pm.shape[1], len(out_ij)
    P = np.clip(np.asarray(res.x, float).reshape(n, m), 0.0, None)
    params = {
        "prior": prior if isinstance(prior, str) or prior is None else "array",
        "pad": pad,
        "margin": margin,
        "method": method,
        **size,
        "lp_residual_row_sum": float(np.max(np.abs(P.sum(axis=1) - 1.0))),
        "raw_verify_ratio": None,
        "repair": repair,
    }
    P /= P.sum(axis=1, keepdims=True)
    if repair:
        params["raw_verify_ratio"] = _max_ratio(P, pm)[0]
        R, sweeps = _repair(P, lp_allowed, pm.shape)
        s = R.sum(axis=1, keepdims=True)
        params["repair_added_mass"] = float(s.max() - 1.0)
        params["repair_sweeps"] = sweeps
        P = R / s
    objective = float(res.fun) * cscale / _mean_ground_scale(pm) ** 2
    params["build_seconds"] = time.perf_counter() - t_start
    return OptimalMechanism(pm, P, output_xy, int(res.status), str(res.message), seconds, objective, params)
