"""The eikonal mechanism object: build (lowering, kernels, weights, verification) and use.

See the package notes (:mod:`geopriv.mechanisms.eikonal`) for the construction and why it is
exact; each step lives in its own module and this class strings them together.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...exceptions import CRSError, InfeasibleMechanismError, ParameterError, ParameterTypeError
from ...privacy_map import PrivacyMap, edge_weights
from ..grid import allowed as grid_allowed
from ..grid import edge_slices, mean_ground_scale
from . import ondemand, persistence, sampling, verification
from .kernels import GRAPH_BITS, KernelProblem, compute_kernels, kernel_pass
from .lowering import AUTO_MARGIN, AUTO_MARGIN_FLOOR, auto_margin, lower_rate, output_levels
from .report import VerifyReport
from .weights import column_sums, kernel_products, max_normaliser_share, refine_weights, relative_share, solve_weights

#: how a mechanism keeps its kernels (:meth:`EikonalMechanism.build`, :meth:`EikonalMechanism.load`)
KERNELS = ("held", "on_demand")
#: ... and :meth:`EikonalMechanism.load`'s choices: "auto" (its default) holds them, unless this user
#: verified the file before (a stamp): then none is computed at load (on demand)
LOAD_KERNELS = persistence.LOAD_KERNELS
#: weight refinements (one pass of kernel solves each) an on-demand build makes where a held one
#: would polish its weights on the full kernels
ON_DEMAND_REFINES = 2


def _staged_progress(progress, lo: float, hi: float):
    """The ``progress=`` callable reporting over [lo, hi] of one range, so a build of several passes
    moves one progress bar forward only (QGIS).  A tqdm bar (``progress=True``) or None is returned
    as it is: a bar per pass."""
    if not callable(progress):
        return progress

    def staged(done, total):
        progress(lo + (hi - lo) * (done / total if total else 1.0), 1.0)

    return staged


def _staged(problem: tuple, lo: float, hi: float) -> tuple:
    """:func:`_staged_progress` on a tuple of a pass's arguments in the positional order of earlier
    versions (kp, shape, cell, P, oi, oj, apex_t, cap, solver, n_jobs, progress, mp_context)."""
    return problem[:10] + (_staged_progress(problem[10], lo, hi),) + problem[11:]


@dataclass(frozen=True, eq=False)
class BuildOptions:
    """The options of one build: :meth:`EikonalMechanism.build`'s keywords, with the margin it is built with.

    ``margin`` is a number or a per-cell array (never "auto": :meth:`EikonalMechanism.build`
    resolves it, and may build twice), ``margin_rule`` says where it came from (``params``);
    the other fields are documented at :meth:`EikonalMechanism.build`.  :meth:`checked`
    validates them for a map.
    """

    margin: float | np.ndarray
    margin_rule: str
    smooth: float | None
    despeckle: int
    jump: float | None
    cap: float
    output_spacing: float
    max_step: int | None
    pad: float
    apex: float
    max_iter: int
    solve_cap: float | None
    solver: str
    n_jobs: int
    progress: object
    verify: bool
    mp_context: object
    kernels: str

    def checked(self, shape) -> "BuildOptions":
        """These options for a map of ``shape``, validated: the margin as a float array, ``max_step`` an int.

        Raises
        ------
        ParameterError
            The first option out of range (margin, then cap, output spacing, pad, solver,
            kernels, apex, max_step), with what it must be.
        """
        marr = np.asarray(self.margin, dtype=float)
        if marr.ndim not in (0, 2) or (marr.ndim == 2 and marr.shape != shape):
            raise ParameterError(f"margin must be a number or an array of the map's shape {shape}.")
        if not (np.all(np.isfinite(marr)) and np.all(marr > 0) and np.all(marr < 1)):
            raise ParameterError(
                "margin must be in (0, 1), e.g. 0.05 (5 % of the privacy loss kept for normalisation)."
            )
        for name, v in (("cap", self.cap), ("output_spacing", self.output_spacing), ("pad", self.pad)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ParameterError(f"{name} must be a finite number > 0.")
        if self.solver not in ("graph", "fmm"):
            raise ParameterError("solver must be 'graph' (Dijkstra, default) or 'fmm' (fast marching).")
        if self.kernels not in KERNELS:
            raise ParameterError(
                "kernels must be 'held' (default: every kernel entry kept in memory) or 'on_demand' "
                "(none kept: for rasters whose kernels do not fit in memory)."
            )
        if self.apex < 0 or not math.isfinite(self.apex):
            raise ParameterError("apex must be >= 0.")
        max_step = self.max_step
        if max_step is not None:
            if (
                isinstance(max_step, bool)
                or not isinstance(max_step, (int, np.integer))
                or max_step < 1
                or max_step & (max_step - 1)
            ):
                raise ParameterError(
                    "max_step must be a power of two >= 1 (1, 2, 4, ...), or None (no cap: the spacing follows 1/epsilon)."
                )
            max_step = int(max_step)
        return dataclasses.replace(self, margin=marr, max_step=max_step)

    def pass_options(self, staged: tuple[float, float] | None = None) -> dict:
        """The workers and progress of one pass of kernel solves (:func:`.kernels.kernel_pass`'s keywords);
        ``staged=(lo, hi)``: its progress reported over [lo, hi] of one range (:func:`_staged_progress`)."""
        progress = self.progress if staged is None else _staged_progress(self.progress, *staged)
        return {"n_jobs": int(self.n_jobs), "progress": progress, "mp_context": self.mp_context}


@dataclass(frozen=True, eq=False)
class _Layout:
    """The build's first stage (:func:`_layout`): the lowered kernel map and the outputs, as a kernel problem."""

    keps: np.ndarray  # kernel epsilon per CRS unit on the raster (ny, nx): (1 - margin) epsilon, lowered
    problem: KernelProblem  # the padded rate map, the outputs, their apex radii, cap, solver, graph bits
    ostep: np.ndarray  # lattice spacing of each output in cells


@dataclass
class _Solved:
    """What the kernel and weight stages found (:func:`_solve_held`, :func:`_solve_on_demand`)."""

    w: np.ndarray  # the output weights
    s: np.ndarray  # the exact normaliser
    iters: int
    history: list
    nnz: int
    sweeps: int
    extremes: object  # the kernels' LogRatioExtremes for verification, or None
    rowsum: np.ndarray | None  # the on-demand pass's row sums (None when held)
    csr: tuple  # (indptr, indices, kernel) of held kernels, or (None, None, None)
    rel: float = 0.0  # the share of its budget the normaliser uses (>= 1: infeasible)
    rough: float = 0.0  # the largest normaliser share (params["normaliser_share"])


def _layout(pm: PrivacyMap, opts: BuildOptions) -> _Layout:
    """Stage 1: the kernel rate map (padded, lowered) and the output lattice with its apex radii.

    The kernels use ``(1 - margin) * epsilon``, padded by ``pad`` noise lengths (from the
    smallest epsilon on the border) and lowered where it changes too fast (:func:`.lowering.lower_rate`);
    outputs are the padded grid's nodes, thinned where the noise is wide
    (:func:`.lowering.output_levels`), with an apex radius where they are thinned.
    """
    ny, nx = pm.shape
    hx, hy = pm.cell_size
    keps = (1.0 - opts.margin) * np.asarray(pm.epsilon_crs)
    # padding (cells), from the smallest epsilon on the border
    border = np.concatenate([keps[0], keps[-1], keps[:, 0], keps[:, -1]])
    P = int(math.ceil(opts.pad / (float(border.min()) * min(hx, hy))))
    P = max(P, 2)
    kp = lower_rate(np.pad(keps, P, mode="edge"), hy, hx, opts.smooth, opts.despeckle, opts.jump)
    keps = kp[P : P + ny, P : P + nx]
    NY, NX = kp.shape
    # outputs: lattice thinned where the noise is wide
    step = output_levels(kp, hy, hx, opts.output_spacing, opts.max_step)
    ii, jj = np.mgrid[0:NY, 0:NX]
    sel = (ii % step == 0) & (jj % step == 0)
    oi, oj = np.nonzero(sel)
    ostep = step[oi, oj]
    # apex smoothing A_y (travel-time units) where outputs are thinned; a lattice of spacing 1
    # coincides with the inputs, where the cone needs no smoothing
    apex_t = np.where(ostep > 1, opts.apex * ostep * math.sqrt(hx * hy) * kp[oi, oj], 0.0)
    graph_bits = GRAPH_BITS if opts.solver == "graph" else None  # exact path sums: rows = columns bit for bit
    problem = KernelProblem(kp, (ny, nx), (hy, hx), P, oi, oj, apex_t, float(opts.cap), opts.solver, graph_bits)
    return _Layout(keps, problem, ostep)


def _edge_budget(pm: PrivacyMap, keps: np.ndarray) -> list:
    """What the normaliser may use on each edge: the allowed loss minus the kernels' own Lipschitz
    bound there (at least margin * allowed; more where the map was lowered)."""
    hx, hy = pm.cell_size
    return [np.maximum(al - kw, 1e-300) for al, kw in zip(grid_allowed(pm), edge_weights(keps, hy, hx))]


def _solve_held(pm: PrivacyMap, layout: _Layout, opts: BuildOptions, timings: dict) -> _Solved:
    """Stages 2-3, kernels held: every kernel solved and kept, the weights solved on them, the CSR placed.

    With ``verify``, the workers also take the kernels' part of the check (:func:`.verification.verify`).
    """
    t0 = time.perf_counter()
    ny, nx = pm.shape
    cT = math.exp(-opts.cap)
    budget = _edge_budget(pm, layout.keps)
    threads = max(1, int(opts.n_jobs))
    S, colmass, sweeps, extremes = compute_kernels(layout.problem, **opts.pass_options(), extremes=bool(opts.verify))
    timings["kernels_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    w, iters, history, s = solve_weights(
        S, cT, layout.ostep, colmass, pm, budget, opts.max_iter, threads=threads, solve_cap=opts.solve_cap
    )
    nnz = S.nnz
    if s is None:  # exact, float64, added as the on-demand pass adds them (same normaliser, same id)
        s = S.row_sums(w, ny, nx) + cT * float(w.sum())
    csr = S.to_csr(release=True, threads=threads)  # each column block freed once placed
    del S
    solved = _Solved(w, s, iters, history, nnz, sweeps, extremes, None, csr)
    solved.rel = relative_share(s, pm, budget)
    solved.rough = max_normaliser_share(s, pm)
    timings["weights_s"] = time.perf_counter() - t0
    return solved


def _solve_on_demand(pm: PrivacyMap, layout: _Layout, opts: BuildOptions, timings: dict) -> _Solved:
    """Stages 2-3, kernels on demand: no kernel entry kept beyond the weight solve.

    The weight solve holds the kernels truncated at ``solve_cap`` only (the same truncation
    :func:`.weights.solve_weights` makes); a second pass computes the exact normaliser (and the
    kernels' part of the check) without holding any entry; :func:`_refine_on_demand` may then
    polish the weights.  The passes report over one progress range: 0-0.4, 0.4-0.8, the rest.
    """
    t0 = time.perf_counter()
    cT = math.exp(-opts.cap)
    budget = _edge_budget(pm, layout.keps)
    solve_cap, cap = opts.solve_cap, opts.cap
    truncate = np.float32(math.exp(-solve_cap) - cT) if solve_cap is not None and solve_cap < cap else None
    first = kernel_pass(layout.problem, **opts.pass_options(staged=(0.0, 0.4)), truncate=truncate)
    colmass, sweeps = first.colmass, first.sweeps
    timings["kernels_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    St = first.columns
    w, iters, history, _ = solve_weights(
        St, cT, layout.ostep, colmass, pm, budget, opts.max_iter, threads=max(1, int(opts.n_jobs)), solve_cap=None
    )
    timings["weights_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # the kernels' extremes do not depend on the weights: computed in this pass only
    second = kernel_pass(
        layout.problem,
        **opts.pass_options(staged=(0.4, 0.8)),
        extremes="track" if opts.verify else False,
        weights=w,
        hold=False,
    )
    timings["normaliser_pass_s"] = time.perf_counter() - t0
    nnz, extremes, rowsum = second.nnz, second.extremes, second.rowsum
    del second
    s = rowsum + cT * float(w.sum())
    rel = relative_share(s, pm, budget)
    history.append((iters, rel))
    solved = _Solved(w, s, iters, history, nnz, sweeps, extremes, rowsum, (None, None, None), rel)
    _refine_on_demand(solved, St, colmass, pm, layout, budget, opts, timings)
    del first, St
    t0 = time.perf_counter()
    solved.rel = relative_share(solved.s, pm, budget)
    solved.rough = max_normaliser_share(solved.s, pm)
    timings["normaliser_s"] = time.perf_counter() - t0
    if callable(opts.progress):
        opts.progress(1.0, 1.0)  # the refinement passes, if any, had the last fifth
    return solved


def _refine_on_demand(solved: _Solved, St, colmass, pm, layout: _Layout, budget, opts: BuildOptions, timings) -> None:
    """Stage 3b, kernels on demand: polish ``solved``'s weights where a held build would (exact share >= 0.97).

    Iterates on the truncated kernels ``St`` with the dropped tail's part of the normaliser
    frozen at its exact value, then measures exactly again (one pass each, up to
    ``ON_DEMAND_REFINES``); keeps the better weights (``solved`` is updated in place).
    """
    cT = math.exp(-opts.cap)
    threads = max(1, int(opts.n_jobs))
    for k in range(ON_DEMAND_REFINES if solved.rel >= 0.97 else 0):
        t0 = time.perf_counter()
        w, s, rel = solved.w, solved.s, solved.rel
        tail = s - kernel_products(St, cT, w, threads)
        w2, it2, hist2 = refine_weights(
            St, cT, w, layout.ostep.astype(float) ** 2 / colmass, tail, pm, budget, opts.max_iter, threads
        )
        lo = 0.8 + 0.2 * k / ON_DEMAND_REFINES
        again = kernel_pass(
            layout.problem, **opts.pass_options(staged=(lo, lo + 0.2 / ON_DEMAND_REFINES)), weights=w2, hold=False
        )
        s2 = again.rowsum + cT * float(w2.sum())
        rel2 = relative_share(s2, pm, budget)
        solved.history.extend((solved.iters + i, sh) for i, sh in hist2)
        solved.iters += it2
        solved.history.append((solved.iters, rel2))
        timings["refine_s"] = timings.get("refine_s", 0.0) + time.perf_counter() - t0
        if rel2 >= rel:
            break
        solved.w, solved.s, solved.rowsum, solved.rel = w2, s2, again.rowsum, rel2
        if solved.rel < 0.97:
            break


def _check_feasible(solved: _Solved, opts: BuildOptions) -> None:
    """Stage 4: refuse weights that cannot make the normaliser flat enough, saying which option to change."""
    rel = solved.rel
    if rel < 1.0:
        return
    marr, output_spacing, pad, solve_cap = opts.margin, opts.output_spacing, opts.pad, opts.solve_cap
    raise InfeasibleMechanismError(
        f"The weights could not make the normaliser flat enough: somewhere it needs {rel:.2f} times the share of "
        f"the privacy loss left to it (margin up to {float(np.max(marr)):g}). Raise margin (e.g. margin={min(0.5, 2 * float(np.max(marr))):g}), "
        f"smooth the map (smooth=0.5), use finer outputs (output_spacing={output_spacing / 2:g} or max_step=1), "
        f"or pad more (pad={2 * pad:g})."
        + (
            " With kernels='on_demand' the weights are solved on the kernels truncated at solve_cap only: "
            "kernels='held' (if they fit in memory) polishes them on the full kernels, or raise solve_cap "
            f"(now {solve_cap:g}; more memory)."
            if opts.kernels == "on_demand" and solve_cap is not None
            else ""
        )
    )


def _build_params(opts: BuildOptions, layout: _Layout, solved: _Solved) -> dict:
    """Stage 5: the build's options and statistics, as ``params`` records them (JSON-serialisable)."""
    marr, pr = opts.margin, layout.problem
    M = len(pr.oi)
    cT = math.exp(-opts.cap)
    return {
        "margin": float(marr) if marr.ndim == 0 else {"min": float(marr.min()), "max": float(marr.max())},
        "margin_rule": opts.margin_rule,
        "smooth": opts.smooth,
        "despeckle": opts.despeckle,
        "jump": opts.jump,
        "cap": float(opts.cap),
        "output_spacing": opts.output_spacing,
        "max_step": opts.max_step,
        "solve_cap": opts.solve_cap,
        "pad": opts.pad,
        "pad_cells": pr.P,
        "apex": opts.apex,
        "n_outputs": M,
        "nnz": int(solved.nnz),
        "weight_iterations": solved.iters,
        "normaliser_budget_used": solved.rel,
        "cap_mass_max": float(cT * solved.w.sum() / solved.s.min()),
        "normaliser_share": solved.rough,
        "weight_history": solved.history,
        "repair_sweeps_mean": solved.sweeps / max(M, 1),
        "solver": opts.solver,
        "graph_bits": pr.graph_bits,
    }


def _verify_build(mech, solved: _Solved, opts: BuildOptions, timings: dict) -> None:
    """Stage 6: verify the built mechanism against its map and record the report, or refuse it."""
    t0 = time.perf_counter()
    report = verification.verify(
        mech, solved.extremes, rowsum=solved.rowsum
    )  # the kernels' extremes, from the blocks placed above
    timings["verify_s"] = time.perf_counter() - t0
    if not report.ok:
        raise InfeasibleMechanismError(
            f"The built mechanism does not meet the privacy map: {report}. Nothing was returned. "
            f"Raise margin (now {float(np.max(opts.margin)):g}), smooth the map (smooth=0.5) or use finer outputs (max_step=1)."
        )
    object.__setattr__(mech, "report", report)
    object.__setattr__(mech, "_verification", "full")


@dataclass(frozen=True, eq=False, repr=False)
class EikonalMechanism:
    """A location-dependent private mechanism on a privacy map's grid (see the package notes, :mod:`geopriv.mechanisms.eikonal`).

    Build with :meth:`build`, or :meth:`load` a saved one; release with
    ``gdf.priv.perturb(mechanism=mech)`` or :meth:`sample`.  The constructor's parameters
    (what :meth:`build` computes; not meant to be given by hand) are also its attributes.

    Parameters
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
        The output weights w_y the build solved for (they flatten the normaliser).
    indptr, indices, kernel : CSR arrays over input nodes (row-major raster order), or None
        ``kernel`` = exp(-f~) - exp(-cap) on the support of each node's row.  None for a
        mechanism whose kernels are computed on demand (``kernels="on_demand"``).
    cap : float
        The kernel cap T in travel-time units: exp(-f) is replaced by max(exp(-f), exp(-T)).
    normaliser : ndarray (ny * nx,)
        The normaliser s(u): P(Q(u) = y) = weights[y] * (kernel + exp(-cap)) / s(u).
    params : dict
        The build's options and statistics (JSON-serialisable).
    report : VerifyReport or None
        The verification's result (:meth:`verify`).
    outside : {"error", "clamp"}
        Inputs outside the raster are refused (default: a GeometryError naming the rows) or
        released as if at the raster's nearest point (:meth:`with_outside`).
    remap_xy : ndarray (M, 2) or None
        Where each output is released (:meth:`with_remap`); None: the output nodes, jittered.
    remap_prior : str or None
        The prior the remap was computed for.
    kernel_rate : ndarray (ny + 2 pad, nx + 2 pad) or None
        The padded, lowered epsilon per CRS unit the kernels' travel times were computed on
        (with ``output_apex`` and ``cap``, what a compact file stores instead of the kernels).
    output_apex : ndarray (M,) or None
        Apex radius A_y of each output's kernel, travel-time units.

    Raises
    ------
    ParameterError
        ``outside`` is not "error" or "clamp", or ``remap_xy`` has not one row per output.

    See Also
    --------
    PrivacyMap : The privacy level, epsilon per ground metre, place by place.
    OptimalMechanism : The LP's optimum on a coarse map (a benchmark).
    perturb : Releases points with a mechanism (``mechanism=``).

    Examples
    --------
    Central Tokyo: "ln 4 within 2 km" where nobody lives, up to "ln 4 within 400 m" in the
    densest cells; the build verifies the guarantee against the map:

    >>> pm = geopriv.PrivacyMap.from_population(geopriv.datasets.get_path("tokyo_density_40"),
    ...                                         epsilon_range=(math.log(4) / 2000, math.log(4) / 400))
    >>> mech = geopriv.EikonalMechanism.build(pm)
    >>> mech.shape, mech.verification
    ((40, 40), 'full')
    >>> bool(mech.report.max_ratio <= 1)   # realised / target local Lipschitz constant
    True
    >>> bool(mech.compare_laplace()["ratio"] < 1)   # less error than Laplace at the map's smallest epsilon
    True
    >>> x0, y0, x1, y1 = pm.bounds
    >>> homes = gpd.GeoDataFrame(geometry=gpd.points_from_xy([x0 + 5000, x1 - 5000], [y0 + 5000, y1 - 5000]),
    ...                          crs=pm.crs)
    >>> out = geopriv.perturb(homes, mechanism=mech, rng=0)
    >>> out.attrs["geopriv"]["mechanism"]
    'eikonal'
    """

    privacy_map: PrivacyMap
    kernel_epsilon: np.ndarray
    output_ij: np.ndarray
    output_step: np.ndarray
    weights: np.ndarray
    indptr: np.ndarray | None
    indices: np.ndarray | None
    kernel: np.ndarray | None
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
            raise ParameterError("outside must be 'error' (default) or 'clamp'.")
        if self.remap_xy is not None and np.shape(self.remap_xy) != (len(self.weights), 2):
            raise ParameterError("remap_xy must have one (x, y) row per output.")
        for name in (
            "kernel_epsilon",
            "output_ij",
            "output_step",
            "weights",
            "indptr",
            "indices",
            "kernel",
            "normaliser",
            "remap_xy",
            "kernel_rate",
            "output_apex",
        ):
            arr = getattr(self, name)
            if isinstance(arr, np.ndarray):
                arr.flags.writeable = False

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls,
        privacy_map: PrivacyMap,
        *,
        margin: float | np.ndarray | str = "auto",
        smooth: float | None = 0.5,
        despeckle: int = 0,
        jump: float | None = None,
        cap: float = 16.0,
        output_spacing: float = 0.8,
        max_step: int | None = None,
        pad: float = 4.0,
        apex: float = 0.5,
        max_iter: int = 400,
        solve_cap: float | None = 8.0,
        solver: str = "graph",
        n_jobs: int = 1,
        progress=None,
        verify: bool = True,
        mp_context=None,
        kernels: str = "held",
    ) -> "EikonalMechanism":
        """Build the mechanism for ``privacy_map`` and verify it.

        Parameters
        ----------
        privacy_map : PrivacyMap
            Target epsilon per ground metre; its cell centres are the inputs.
        margin : "auto", float in (0, 1) or array (ny, nx)
            Share of the privacy loss kept for exact normalisation: kernels use
            ``(1 - margin) * epsilon``, the weights may use the rest.  Larger is easier to
            build and costs utility (expected squared error grows like 1/(1 - margin)^2).
            ``"auto"`` (default): 0.1 per noise length, i.e. ``0.1 / max(1, epsilon * cell)``
            per cell, at least 0.01 (:func:`~geopriv.mechanisms.eikonal.lowering.auto_margin`):
            the uniform 0.1 wherever cells are shorter than 1/epsilon, less on coarse maps,
            where a share of each edge's large allowed loss is mostly unused.  If that build is
            infeasible, the uniform 0.1 is built instead (``params["margin_rule"]`` says which).
            A per-cell array: e.g. :meth:`suggest_margin` of a first build.
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
        max_step : None or int (power of two)
            Largest output spacing in cells.  None (default): no cap, the spacing follows the
            local decay length (``spacing * epsilon * cell <= output_spacing``), so a finer
            raster of the same map has as many outputs per noise length, not per cell: 400 x 400
            at the paper's scaling builds in ~4 min at 5.8 GiB (``max_step=2``: about four times
            the kernels).  1 disables thinning; small values leave the weights more room.
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
            True: a tqdm bar per pass of kernel solves.  A callable is called with the work done
            and the total (read ``done / total`` as the fraction: a held build counts outputs, an
            on-demand build reports its passes as fractions of one range, ``total = 1``), and
            ends at ``done == total``.
        verify : bool
            Run :meth:`verify` (always recommended; ``build`` refuses a failing mechanism).
        kernels : {"held", "on_demand"}
            ``"held"`` (default): keep every kernel entry in memory (about 2,900 per raster
            node at the paper's scaling; fastest sampling).  ``"on_demand"``: keep none.  The
            weight solve holds only the kernels truncated at ``solve_cap`` (about 30 % of the
            entries), a second pass of solves computes the normaliser and the verification
            without holding anything, and sampling recomputes the rows of the nodes it draws
            from (:mod:`~geopriv.mechanisms.eikonal.ondemand`; the same values the build
            verified).  For rasters whose kernels do not fit in memory (1000 x 1000 and up);
            the same mechanism as ``"held"`` whenever the truncated weight solve suffices.

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
            raise ParameterTypeError(
                "privacy_map must be a geopriv.PrivacyMap (PrivacyMap.from_population(...) or from_epsilon(...))."
            )
        options = BuildOptions(
            margin=margin,
            margin_rule="given",
            smooth=smooth,
            despeckle=despeckle,
            jump=jump,
            cap=cap,
            output_spacing=output_spacing,
            max_step=max_step,
            pad=pad,
            apex=apex,
            max_iter=max_iter,
            solve_cap=solve_cap,
            solver=solver,
            n_jobs=n_jobs,
            progress=progress,
            verify=verify,
            mp_context=mp_context,
            kernels=kernels,
        )
        if not isinstance(margin, str):
            return cls._build(privacy_map, options)
        if margin != "auto":
            raise ParameterError('margin must be "auto" (default), a number in (0, 1) or an array of the map\'s shape.')
        per_cell = auto_margin(privacy_map)  # a function of the public map only, as is the fallback below
        if np.all(per_cell == AUTO_MARGIN):  # cells shorter than the noise length: the uniform margin
            rule = f"auto: uniform {AUTO_MARGIN:g} (every cell shorter than its noise length)"
            return cls._build(privacy_map, dataclasses.replace(options, margin=AUTO_MARGIN, margin_rule=rule))
        try:
            rule = f"auto: {AUTO_MARGIN:g} per noise length (at least {AUTO_MARGIN_FLOOR:g})"
            return cls._build(privacy_map, dataclasses.replace(options, margin=per_cell, margin_rule=rule))
        except InfeasibleMechanismError:
            rule = f"auto: uniform {AUTO_MARGIN:g} (the per-noise-length margin was infeasible on this map)"
            return cls._build(privacy_map, dataclasses.replace(options, margin=AUTO_MARGIN, margin_rule=rule))

    @classmethod
    def _build(cls, privacy_map: PrivacyMap, options: BuildOptions) -> "EikonalMechanism":
        """:meth:`build` with a given margin (a number or a per-cell array, :class:`BuildOptions`), stage by stage.

        Lay out the kernel map and the outputs (:func:`_layout`), solve the kernels and the
        weights (:func:`_solve_held` or :func:`_solve_on_demand`), refuse an infeasible
        normaliser (:func:`_check_feasible`), record the options (:func:`_build_params`) and
        verify the mechanism against the map (:func:`_verify_build`).
        """
        opts = options.checked(privacy_map.shape)
        timings = {}
        t_start = time.perf_counter()
        pm = privacy_map
        layout = _layout(pm, opts)
        timings["prepare_s"] = time.perf_counter() - t_start
        solved = (_solve_held if opts.kernels == "held" else _solve_on_demand)(pm, layout, opts, timings)
        _check_feasible(solved, opts)
        params = _build_params(opts, layout, solved)
        pr = layout.problem
        indptr, indices, kernel = solved.csr
        mech = cls(
            privacy_map=pm,
            kernel_epsilon=layout.keps,
            output_ij=np.column_stack([pr.oi - pr.P, pr.oj - pr.P]).astype(np.int64),
            output_step=layout.ostep.astype(np.int64),
            weights=solved.w,
            indptr=indptr,
            indices=indices,
            kernel=kernel,
            cap=float(opts.cap),
            normaliser=solved.s,
            params=params,
            kernel_rate=pr.kp,
            output_apex=pr.apex_t,
        )
        object.__setattr__(mech, "_n_jobs", int(opts.n_jobs))  # workers for kernels recomputed on demand
        mp_context = opts.mp_context
        object.__setattr__(mech, "_mp_context", mp_context if isinstance(mp_context, (str, type(None))) else None)
        if opts.verify:
            _verify_build(mech, solved, opts, timings)
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
        """Per cell: the largest ``|delta ln s|`` / allowed loss over its edges (ny, nx).

        The part of the privacy loss the exact normalisation uses at each cell; it must stay
        below the cell's ``margin``.  Where it is far below, the margin there is wasted.
        """
        pm = self.privacy_map
        ny, nx = pm.shape
        ls = np.log(self.normaliser).reshape(ny, nx)
        node = np.zeros((ny, nx))
        for (sa, sb), al in zip(edge_slices(), grid_allowed(pm)):
            r = np.abs(ls[sa] - ls[sb]) / al
            for sl in (sa, sb):
                view = node[sl]
                np.maximum(view, r, out=view)
        return node

    def suggest_margin(
        self, *, floor: float = 0.04, factor: float = 1.5, size: int = 7, ceiling: float = 0.3
    ) -> np.ndarray:
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
            raise ParameterError("Need 0 < floor <= ceiling < 1 (margins are shares of the privacy loss).")
        if not factor > 1:
            raise ParameterError("factor must be > 1: the new margin must leave room above the measured share.")
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

        pm = self.privacy_map
        ny, nx = pm.shape
        p = pm.prior(prior).ravel()
        ux = np.tile(pm.node_x, ny)
        uy = np.repeat(pm.node_y, nx)
        cT = math.exp(-self.cap)
        a = p / self.normaliser  # P(Q(u) = y) = w_y (S[u, y] + cT) / s(u); w_y cancels
        if self.kernels_held:
            sa, sx, sy = column_sums(self.indptr, self.indices, self.kernel, [a, a * ux, a * uy], len(self.weights))
        else:  # one pass of kernel solves
            sa, sx, sy = ondemand.column_sums_pass(self, [a, a * ux, a * uy])
        den = sa + cT * a.sum()
        gx = (sx + cT * float((a * ux).sum())) / den
        gy = (sy + cT * float((a * uy).sum())) / den
        label = prior if isinstance(prior, str) else "array"
        new = dataclasses.replace(self, remap_xy=np.column_stack([gx, gy]), remap_prior=label)
        self._carry(new)
        return new

    def _carry(self, new) -> None:
        """Caches and runtime settings that a copy with another release rule keeps (same kernels)."""
        for k in (
            "sampling_tables",
            "_row_cache",
            "_n_jobs",
            "_mp_context",
            "_graph",
            "_rows_searchable",
            "_verification",
        ):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k]

    def __getstate__(self):
        """Pickled without the rows computed on demand: their cache records which nodes were sampled
        (private), and the stencil graph is recomputed from public data."""
        state = dict(self.__dict__)
        for k in ("_row_cache", "_graph"):
            state.pop(k, None)
        return state

    @cached_property
    def mechanism_id(self) -> str:
        """SHA-256 of the arrays and parameters that define the mechanism (recorded in provenance)."""
        compact = self.can_save_compact  # the compact content determines the kernels; older mechanisms: the full one
        return persistence.digest(
            persistence.file_arrays(self, compact), persistence.file_meta(self, include_report=False, compact=compact)
        )

    # ------------------------------------------------------------------ verify
    @property
    def verification(self) -> str | None:
        """How this mechanism's guarantee was established in this process.

        ``"full"``: :meth:`build` verified it, or :meth:`load` verified the file (kernels,
        normaliser and every edge of the raster).  ``"stamp"``: :meth:`load` found your stamp of an
        earlier full verification of exactly this file's content (made by ``save`` after a build,
        or by an earlier load; :mod:`~geopriv.mechanisms.eikonal.stamps`) and did not repeat it.
        None: not verified (``build(..., verify=False)``, ``load(..., verify=False)``, or made by
        hand).  Only a verified mechanism's saved file is stamped.
        """
        return self.__dict__.get("_verification")

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
        return verification.verify(self)

    # ------------------------------------------------------------------ distributions and sampling
    @property
    def kernels_held(self) -> bool:
        """True when the kernel arrays are in memory; False for kernels computed on demand."""
        return self.kernel is not None

    def rows_for(self, nodes):
        """What holds the rows of ``nodes`` for sampling: this mechanism, or (kernels on demand)
        its :class:`~geopriv.mechanisms.eikonal.ondemand.RowCache` after computing the missing rows."""
        if self.kernels_held:
            return self
        return ondemand.row_cache(self).ensure(self, nodes)

    def row(self, node: int):
        """Output distribution of one input node: (output indices, probabilities, floor mass).

        ``probabilities`` covers the kernel support; every other output y has probability
        ``weights[y] * exp(-cap) / s``, totalling ``floor mass`` (all together sum to 1).
        """
        return sampling.row(self.rows_for([int(node)]), int(node))

    def distribution(self, x: float, y: float) -> np.ndarray:
        """P(Q(u) = y) for all outputs at a location u = (x, y) in the map's CRS (bilinear mixture of nodes)."""
        return sampling.distribution(self, x, y)

    @cached_property
    def sampling_tables(self):
        """Per-row cumulative probabilities (row-local, float64) and the floor sampler (built on first use)."""
        if not self.kernels_held:
            raise AttributeError(
                "A mechanism with kernels on demand has no tables for every row: use rows_for(nodes).sampling_tables."
            )
        return sampling.tables(self)

    def sample_nodes(self, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Output indices drawn from the rows of the given input nodes (exact, float64)."""
        if self.kernels_held:
            return sampling.sample_nodes(self, nodes, rng)
        return ondemand.sample_nodes(self, nodes, rng)  # the same draws, rows computed in bounded groups

    def sample(
        self,
        xy,
        rng: np.random.Generator,
        *,
        outside: str | None = None,
        jitter: bool = True,
        labels=None,
        progress=None,
    ) -> np.ndarray:
        """Release locations ``xy`` ((n, 2) in the map's CRS): a new (n, 2) array.

        Each location is rounded to one of its 4 surrounding nodes with its bilinear weights,
        an output node is drawn from that node's distribution, and (``jitter=True``) moved
        uniformly within its lattice box.  ``xy`` is not modified.
        """
        return sampling.sample(self, xy, rng, outside=outside, jitter=jitter, labels=labels, progress=progress)

    def check_domain(self, xy, labels, crs=None) -> None:
        """Refuse locations outside the map's raster, before anything is sampled (``outside="error"``).

        ``xy`` ((n, 2)) in the map's CRS, ``labels`` the rows' labels; ``crs`` the CRS the points
        were given in (named in the message when it is not the map's).  The release path calls
        this for every row before it draws any (:class:`~geopriv.exceptions.GeometryError`
        naming the rows; nothing is computed from the kernels first).
        """
        if self.outside != "error":
            return
        out = sampling.outside_map(self.privacy_map, np.asarray(xy, float))
        if out.any():
            raise sampling.outside_error(self.privacy_map, np.asarray(labels, dtype=object)[out], crs)

    @staticmethod
    def check_points(source, points) -> None:
        """Refuse the rows of ``points`` outside the privacy map of ``source``, reading nothing else.

        ``source`` is a mechanism or the path of a saved one, of which only the public map is read
        (no checksum, no verification, no kernel): a front end calls this before a :meth:`load`
        that may verify the file in full (about half a minute at 200 x 200), so that points
        outside the map are refused at once.  ``points`` (GeoDataFrame or GeoSeries of points) are
        reprojected to the map's CRS first, as the release does.

        Raises
        ------
        GeometryError
            Rows outside the map (named by label; both CRSs named when they differ), or not points.
        MissingCRSError
            ``points`` without a CRS.
        """
        from pyproj import Transformer

        from ...exceptions import MissingCRSError
        from ...points import as_geoseries, point_xy

        pm = source.privacy_map if isinstance(source, EikonalMechanism) else persistence.read_map(source)
        geoms = as_geoseries(points)
        if geoms.crs is None:
            raise MissingCRSError("the points")
        xy = point_xy(geoms)
        if not pm.crs.equals(geoms.crs):
            x, y = Transformer.from_crs(geoms.crs, pm.crs, always_xy=True).transform(xy[:, 0], xy[:, 1])
            xy = np.column_stack([x, y])
        out = sampling.outside_map(pm, xy)
        if out.any():
            raise sampling.outside_error(pm, geoms.index[out], geoms.crs)

    def with_outside(self, outside: str) -> "EikonalMechanism":
        """The same mechanism with another rule for points outside the raster.

        ``"error"`` (default): :class:`~geopriv.exceptions.GeometryError` naming the rows.
        ``"clamp"``: such a point is released as if it were at the nearest point of the
        raster (clamping is 1-Lipschitz, so it gets that point's guarantee; its released
        position says nothing more about how far outside it was).
        """
        import dataclasses

        new = dataclasses.replace(self, outside=outside)
        self._carry(new)
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

    def loss_per_m(self) -> float:
        """A bound on the privacy loss per ground metre between any two inputs: what a budget store charges a row.

        Local Lipschitz privacy with the map bounds the loss between u and v by the map's
        integral along a path, at most ``epsilon_max * d(u, v)``; the verified realised ratio
        (when above 1, within its tolerance) scales it.
        """
        ratio = 1.0 if self.report is None else max(1.0, float(self.report.max_ratio))
        return float(self.privacy_map.epsilon_max) * ratio

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
        if not self.kernels_held:  # one pass of kernel solves
            per[sel] = ondemand.node_mse_pass(self, sel, ux, uy, ox, oy, jit)[sel]
            step = n + 1  # nothing left for the loop below
        for r0 in range(0, n if self.kernels_held else 0, step):  # blocks of rows: bounded memory
            r1 = min(n, r0 + step)
            rows_b = np.flatnonzero(sel[r0:r1]) + r0
            if len(rows_b) == 0:
                continue
            lo, hi = ip[r0], ip[r1]
            rows = np.repeat(np.arange(r0, r1), np.diff(ip[r0 : r1 + 1]))
            keep = sel[rows]
            r, c = rows[keep], self.indices[lo:hi][keep]
            v = self.kernel[lo:hi][keep].astype(np.float64)
            d2 = (ux[r] - ox[c]) ** 2 + (uy[r] - oy[c]) ** 2 + jit[c]
            per[rows_b] = np.bincount(r - r0, w[c] * v * d2, minlength=r1 - r0)[rows_b - r0]
        W, mx, my = w.sum(), (w * ox).sum(), (w * oy).sum()
        q = (w * (ox**2 + oy**2 + jit)).sum()
        per += cT * (W * (ux**2 + uy**2) - 2 * (ux * mx + uy * my) + q)
        per /= self.normaliser
        return (per / mean_ground_scale(pm) ** 2).reshape(ny, nx)

    def laplace_mse(self) -> float:
        """Expected squared error of planar Laplace at the map's smallest epsilon: 6 / eps_min^2 (m^2)."""
        from ..planar_laplace import PlanarLaplace

        return PlanarLaplace(self.privacy_map.epsilon_min).mse()

    def compare_laplace(self, prior=None) -> dict:
        """Expected MSE of this mechanism vs planar Laplace at the minimum epsilon (which also meets the map)."""
        e = self.expected_mse(prior)
        lap = self.laplace_mse()
        return {
            "eikonal_mse_m2": e,
            "laplace_mse_m2": lap,
            "ratio": e / lap,
            "epsilon_min_per_m": self.privacy_map.epsilon_min,
        }

    # ------------------------------------------------------------------ persistence
    @property
    def can_save_compact(self) -> bool:
        """True when the mechanism knows what recomputes its kernels (built or loaded by this version)."""
        return self.kernel_rate is not None and self.output_apex is not None

    def save(
        self, path, *, key: bytes | str | None = None, compact: bool | None = None, overwrite: bool = False
    ) -> str:
        """Write the mechanism to ``path`` (a .npz file; built once, perturb many times).

        The file is written to a temporary file in the same directory, flushed to disk and moved
        into place atomically, so a crash never leaves a half-written mechanism and no other file
        (such as an unrelated ``PATH.tmp``) is touched.  An existing file is never replaced unless
        ``overwrite=True``; a symbolic link at ``path`` is then replaced itself, never written
        through.

        A mechanism verified in this process (:attr:`verification`: built with ``verify=True``,
        or loaded) also leaves your stamp of the written content in your data directory (never
        in the file), so that :meth:`load` of this file by you need not verify it again.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write (.npz).
        overwrite : bool
            Replace an existing ``path`` (default False: :class:`FileExistsError`).
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

        Returns
        -------
        str
            The SHA-256 digest of the file's content (for a compact file, :attr:`mechanism_id`).

        Raises
        ------
        FileExistsError
            ``path`` exists (or is a symbolic link) and ``overwrite`` is False; nothing was written.
        """
        return persistence.save(self, path, key=key, compact=compact, overwrite=overwrite)

    @classmethod
    def load(
        cls,
        path,
        *,
        privacy_map: PrivacyMap | None = None,
        verify: bool | str = True,
        key: bytes | str | None = None,
        n_jobs: int = 1,
        progress=None,
        mp_context=None,
        kernels: str = "auto",
    ) -> "EikonalMechanism":
        """Read a mechanism written by :meth:`save`.

        A compact file (the default of :meth:`save`) holds no kernels: they are recomputed here
        from the stored kernel rate map, outputs, apex radii and cap by the same code the build
        used (``n_jobs`` worker processes, ``progress`` as in :meth:`build`), so what is sampled is
        exactly what is checked below.

        Whatever the options, the file's SHA-256 checksum is checked (accidental corruption).  A
        file is then verified in full: every array sampling uses is checked for validity
        (finite, non-negative weights and kernel values, indices in range, ...), the normaliser
        is recomputed from the weights and kernels and must match the stored one (to 1e-10,
        relative), and :meth:`verify` is re-run, **unless you verified exactly this content
        before**: a full verification that passes (at :meth:`build`, remembered by :meth:`save`,
        or at an earlier load) leaves a stamp, an HMAC-SHA256 of the file's content digest under
        a secret key of yours (:mod:`~geopriv.mechanisms.eikonal.stamps`, kept in your data
        directory, ``$GEOPRIV_HOME``; never in the file).  A stamped compact file loads in a
        fraction of a second with no kernel solve (``kernels="auto"``); a file changed in any
        way, one made or verified by someone else, or one of an earlier version is verified in
        full, as before, and stamped if it passes.  :attr:`verification` says which happened.

        Parameters
        ----------
        privacy_map : PrivacyMap, optional
            If given, the file must have been built for this exact map (same epsilon grid,
            transform and CRS), else :class:`MechanismFileError`.  Without it, the guarantee is
            verified against the map stored in the file: pass the map you mean to honour.
        verify : bool or "full"
            True (default): re-run :meth:`verify` on the loaded arrays, the full check of the
            realised ratio against the map (about as long as it took in ``build``: a load of
            the 1.4 GB file of a 200 x 200 map took 16-30 s on 2 cores, against 4-7 s with
            ``verify=False``), unless your stamp says this content passed it before.  ``"full"``:
            re-run it even then.  False: skip it and trust the stored report; the checks above still
            run, but a file whose weights and normaliser were both edited consistently is then
            caught only by a key (below) or by ``verify=True``.
        key : bytes or str, optional
            The key the file was signed with (``save(path, key=...)``): the file must carry a
            valid HMAC-SHA256 under it, else :class:`MechanismFileError` (unsigned, changed
            after signing, or another key).  Without a key a signed file loads with the checks
            above.
        kernels : {"auto", "held", "on_demand"}
            ``"held"``: recompute (compact file) or read (full file) every kernel entry and keep
            it.  ``"on_demand"`` (compact files): keep none; the checks above run over one pass of
            kernel solves that holds nothing (none for a stamped file), and sampling recomputes
            the rows it draws from, bit for bit the verified values (see :meth:`build`; a few
            points cost a few shortest-path searches, a city-wide release about one pass).
            ``"auto"`` (default): ``"on_demand"`` for a compact file you stamped (nothing to
            verify, so nothing to solve at load), ``"held"`` otherwise (the verification
            computes every kernel anyway).

        Raises
        ------
        MechanismFileError
            Missing, truncated or corrupt file (checksum), another format or version, a
            mismatch with ``privacy_map``, invalid arrays, a normaliser that does not match the
            weights, a failed verification, or (with ``key``) a missing or invalid signature.
        """
        return persistence.load(
            cls,
            path,
            privacy_map=privacy_map,
            verify=verify,
            key=key,
            n_jobs=n_jobs,
            progress=progress,
            mp_context=mp_context,
            kernels=kernels,
        )

    def __repr__(self) -> str:
        pm = self.privacy_map
        r = "unverified" if self.report is None else f"verified ratio {self.report.max_ratio:.4f}"
        return (
            f"EikonalMechanism({pm.shape[0]} x {pm.shape[1]} inputs, {len(self.weights)} outputs, "
            f"epsilon {pm.epsilon_min:.4g} .. {pm.epsilon_max:.4g} per metre, {r})"
        )
