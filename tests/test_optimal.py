"""Optimal mechanism (LP, HiGHS) under the eikonal mechanism's discrete guarantee.

Deterministic: fixed small grids, no randomness.  The privacy check has a negative control (an
LP solved for twice the epsilon must fail verification against the original map).
"""

from __future__ import annotations

import numpy as np
import pytest
import rasterio

import geopriv
from geopriv import OptimalMechanism, PrivacyMap, optimal_mechanism
from geopriv.crs import local_aeqd
from geopriv.exceptions import InfeasibleMechanismError, RasterError
from geopriv.mechanisms import grid
from geopriv.mechanisms import optimal as opt


def _transform(h, ny):
    return rasterio.Affine(h, 0.0, -0.5 * h * ny, 0.0, -h, 0.5 * h * ny)


CRS = local_aeqd(0.0, 0.0)


def _eps_map(eps, h=1.0):
    eps = np.asarray(eps, float)
    return PrivacyMap.from_epsilon(eps, transform=_transform(h, eps.shape[0]), crs=CRS)


def _blob(n=8):
    i, j = np.mgrid[0:n, 0:n]
    return 1000.0 * np.exp(-((i - 2.5) ** 2 + (j - 4.5) ** 2) / 3.0)


def _laplace_like(pm: PrivacyMap, eps: float) -> np.ndarray:
    """P(y|a) proportional to exp(-eps/2 |a - y|) over the node grid, normalised per row.

    Feasible for a constant map eps: the kernel's log-ratio between neighbours is at most
    eps/2 |a - b| (triangle inequality) and so is that of the row sum, total <= eps |a - b|.
    """
    x, y = np.meshgrid(pm.node_x, pm.node_y)
    xy = np.column_stack([x.ravel(), y.ravel()])
    d = np.hypot(xy[:, None, 0] - xy[None, :, 0], xy[:, None, 1] - xy[None, :, 1])
    k = np.exp(-0.5 * eps * d)
    return k / k.sum(axis=1, keepdims=True), xy


@pytest.fixture(scope="module")
def const_pm():
    return _eps_map(np.full((8, 8), 0.5))


@pytest.fixture(scope="module")
def const_mech(const_pm):
    return optimal_mechanism(const_pm, "uniform")


def test_constant_map_is_private_and_normalised(const_pm, const_mech):
    m = const_mech
    assert isinstance(m, OptimalMechanism)
    assert m.status == 0 and ("ptimal" in m.message or "column generation: gap" in m.message)
    assert m.probs.shape == (64, 64) and m.output_xy.shape == (64, 2)
    assert np.all(m.probs >= 0)
    np.testing.assert_allclose(m.probs.sum(axis=1), 1.0, atol=1e-12)
    assert m.verify() <= 1 + 1e-6
    assert m.verify() <= 1 + 1e-9  # with the default margin, exact up to rounding
    # MSE from the probabilities agrees with the LP optimum (up to margin/tolerance)
    assert m.expected_mse("uniform") == pytest.approx(m.objective, rel=1e-3)
    assert not m.probs.flags.writeable


def test_same_edges_as_the_eikonal_guarantee(const_pm):
    ia, ib, w = opt._edges(const_pm.shape, grid.allowed(const_pm))
    assert len(w) == opt.lp_size(const_pm.shape)["edges"] == 8 * 7 * 2 + 2 * 7 * 7
    # horizontal, vertical, diagonal lengths times eps
    assert sorted(set(np.round(w / 0.5, 9))) == pytest.approx([1.0, np.sqrt(2)], rel=1e-6)
    assert set(np.abs(ia - ib).tolist()) == {1, 7, 8, 9}  # E, SW, S, SE neighbours on an 8-wide grid


def test_optimal_beats_a_feasible_reference(const_pm, const_mech):
    ref, xy = _laplace_like(const_pm, 0.5)
    assert opt._max_ratio(ref, const_pm)[0] <= 1 + 1e-12  # the reference really is feasible
    np.testing.assert_allclose(xy, const_mech.output_xy)
    ref_mse = float((ref * ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1)).sum(axis=1).mean())
    assert const_mech.expected_mse("uniform") <= ref_mse * (1 + 1e-6)
    # and planar Laplace at eps (continuous, unbounded) is 6 / eps^2 = 24 m^2
    assert const_mech.laplace_mse() == pytest.approx(24.0)


def test_negative_control_twice_epsilon_fails_the_original_map(const_pm, const_mech):
    loose = _eps_map(np.full((8, 8), 1.0))
    m2 = optimal_mechanism(loose, "uniform")
    assert m2.verify() <= 1 + 1e-6
    assert m2.verify(const_pm) > 1.5  # clearly violates the stricter map
    assert m2.expected_mse("uniform") < const_mech.expected_mse("uniform")


def test_population_map_beats_laplace_at_eps_min():
    dens = _blob()
    pm = PrivacyMap.from_population(dens, epsilon_range=(0.3, 1.5), transform=_transform(1.0, 8), crs=CRS)
    m = optimal_mechanism(pm)  # prior = population
    assert m.verify() <= 1 + 1e-6
    cmp = m.compare_laplace()
    assert set(cmp) == {"optimal_mse_m2", "laplace_mse_m2", "ratio", "epsilon_min_per_m"}
    assert cmp["laplace_mse_m2"] == pytest.approx(6 / pm.epsilon_min**2)
    assert cmp["epsilon_min_per_m"] == pytest.approx(0.3, rel=1e-3)
    assert cmp["ratio"] < 1
    # the same prior on a constant map at eps_min: the dense cells' larger epsilon must pay off
    flat = _eps_map(np.full((8, 8), pm.epsilon_min))
    m_flat = optimal_mechanism(flat, pm.prior())
    assert m.expected_mse() < 0.8 * m_flat.expected_mse(pm.prior())
    # dense nodes get less error than the sparse ones
    nm = m.node_mse()
    dense = dens > 0.5 * dens.max()
    assert nm[dense].mean() < nm[dens < 0.01 * dens.max()].mean()


def test_padding_adds_outputs():
    pm = _eps_map(np.full((5, 5), 0.6))
    m = optimal_mechanism(pm, "uniform", pad=1)
    assert m.probs.shape == (25, 49)
    assert m.verify() <= 1 + 1e-6
    m0 = optimal_mechanism(pm, "uniform")
    assert m.expected_mse("uniform") <= m0.expected_mse("uniform") * (1 + 1e-4)


def test_too_large_says_how_to_fix():
    pm = _eps_map(np.full((40, 40), 0.5))
    # the full LP (solver="highs"; column generation, the default, never builds it)
    with pytest.raises(InfeasibleMechanismError, match=r"coarsen\(pm, \d+"):
        optimal_mechanism(pm, "uniform", max_variables=10_000, solver="highs")
    with pytest.raises(ValueError):  # InfeasibleMechanismError is a ValueError
        optimal_mechanism(pm, "uniform", max_variables=10_000, solver="highs")


def test_highs_failure_is_a_clear_error(monkeypatch):
    import scipy.optimize
    from scipy.optimize import OptimizeResult

    def fake(*args, **kwargs):
        return OptimizeResult(status=1, x=None, message="Time limit reached.", fun=None)

    monkeypatch.setattr(scipy.optimize, "linprog", fake)
    with pytest.raises(InfeasibleMechanismError, match="time_limit"):
        optimal_mechanism(_eps_map(np.full((3, 3), 0.5)), "uniform", time_limit=1.0, solver="highs")


def test_prior_population_needs_population():
    with pytest.raises(ValueError, match="population"):
        optimal_mechanism(_eps_map(np.full((3, 3), 0.5)))


# -------------------------------------------------------------------------------- coarsen
def test_coarsen_block_min_and_population():
    dens = np.arange(64, dtype=float).reshape(8, 8)
    dens[:2, :2] = np.nan  # one whole block without data
    dens[2, 2] = np.nan  # one cell without data
    pm = PrivacyMap.from_population(dens, epsilon_range=(0.2, 1.0), transform=_transform(2.0, 8), crs=CRS)
    c = opt.coarsen(pm, 2)
    assert c.shape == (4, 4)
    assert c.cell_size == (4.0, 4.0)
    assert c.bounds == pytest.approx(pm.bounds)
    assert c.crs == pm.crs
    np.testing.assert_allclose(c.epsilon, pm.epsilon.reshape(4, 2, 4, 2).min(axis=(1, 3)))
    assert np.all(c.epsilon <= pm.epsilon.reshape(4, 2, 4, 2).max(axis=(1, 3)))
    # prior = block sums of the fine prior (population summed)
    np.testing.assert_allclose(c.prior(), pm.prior().reshape(4, 2, 4, 2).sum(axis=(1, 3)))
    np.testing.assert_allclose(c.population, pm.population.reshape(4, 2, 4, 2).mean(axis=(1, 3)))
    assert c.nodata_mask[0, 0] and not c.nodata_mask[1, 1] and c.nodata_mask.sum() == 1
    assert c.info["coarsened"]["factor"] == 2
    np.testing.assert_allclose(c.node_x, pm.node_x.reshape(4, 2).mean(axis=1))


def test_coarsen_divisibility_and_trim():
    pm = _eps_map(np.arange(1, 65, dtype=float).reshape(8, 8) / 64)
    with pytest.raises(RasterError, match="not divisible"):
        opt.coarsen(pm, 3)
    c = opt.coarsen(pm, 3, trim=True)
    assert c.shape == (2, 2)
    np.testing.assert_allclose(c.epsilon, pm.epsilon[:6, :6].reshape(2, 3, 2, 3).min(axis=(1, 3)))
    assert c.info["coarsened"]["trimmed"] == [2, 2]
    with pytest.raises(RasterError, match="2 x 2"):
        opt.coarsen(pm, 5, trim=True)
    with pytest.raises(ValueError):
        opt.coarsen(pm, 0)
    assert opt.coarsen(pm, 1).epsilon.tolist() == pm.epsilon.tolist()


def test_public_api():
    assert geopriv.optimal_mechanism is optimal_mechanism
    assert "OptimalMechanism" in geopriv.__all__ and "optimal_mechanism" in geopriv.__all__


# -------------------------------------------------------------------------------- solvers, bound, window
@pytest.fixture(scope="module")
def pop_pm():
    return PrivacyMap.from_population(_blob(), epsilon_range=(0.3, 1.5), transform=_transform(1.0, 8), crs=CRS)


@pytest.fixture(scope="module")
def pop_simplex(pop_pm):
    return optimal_mechanism(pop_pm, solver="highs", method="highs-ds")


def test_dual_bound_brackets_the_simplex_optimum(pop_pm, pop_simplex):
    m = pop_simplex
    lb, mse = m.params["dual_bound"], m.expected_mse()
    assert lb is not None and m.params["gap"] == pytest.approx((mse - lb) / lb)
    # a lower bound on the exact (margin 0) LP, and tight: within 1% of the repaired MSE
    exact = optimal_mechanism(pop_pm, margin=0.0, dual_bound=False, solver="highs")
    assert lb <= exact.objective * (1 + 1e-7)
    assert 0 <= m.params["gap"] < 0.01
    # the bound is not vacuous: a clearly worse feasible mechanism (twice-as-strict map) is above it
    strict = optimal_mechanism(_eps_map(pop_pm.epsilon / 2), pop_pm.prior())
    assert strict.expected_mse(pop_pm.prior()) > 1.2 * lb


def test_ipm_without_crossover_agrees_with_simplex(pop_pm, pop_simplex):
    import highspy  # noqa: F401  (in the test extra: a missing solver fails, never skips)

    m = optimal_mechanism(pop_pm, solver="ipm")
    assert m.params["solver"] == "highspy-ipm"
    assert m.verify() <= 1 + 1e-9
    np.testing.assert_allclose(m.probs.sum(axis=1), 1.0, atol=1e-12)
    # same optimum within 1e-4 relative (interior point vs vertex, both repaired)
    assert m.expected_mse() == pytest.approx(pop_simplex.expected_mse(), rel=1e-4)
    assert m.params["dual_bound"] <= pop_simplex.expected_mse() and m.params["gap"] < 0.01
    # negative control: its solution for twice the epsilon fails the original map
    loose = optimal_mechanism(_eps_map(2 * pop_pm.epsilon), pop_pm.prior(), solver="ipm")
    assert loose.verify() <= 1 + 1e-9 and loose.verify(pop_pm) > 1.5


def test_ipm_falls_back_to_scipy_without_highspy(pop_pm, pop_simplex, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_highspy(name, *args, **kwargs):
        if name == "highspy":
            raise ImportError("no highspy")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_highspy)
    with pytest.warns(RuntimeWarning, match="highspy"):
        m = optimal_mechanism(pop_pm, solver="ipm")
    assert m.params["solver"] == "highs-ipm (fallback)"
    assert m.verify() <= 1 + 1e-9
    assert m.expected_mse() == pytest.approx(pop_simplex.expected_mse(), rel=1e-4)


def test_window_is_private_an_upper_bound_and_certified(pop_pm, pop_simplex):
    m = optimal_mechanism(pop_pm, window=3, margin=1e-3)
    assert m.params["window"] == 3 and m.params["lp_variables"] < m.params["variables"]
    assert m.probs.shape == pop_simplex.probs.shape
    used = m.probs.sum(axis=0) > 0
    assert used.sum() > 10 and np.all(m.probs[:, used] > 0)  # the repair filled the outside of the windows
    assert m.verify() <= 1 + 1e-9
    opt_mse = pop_simplex.expected_mse()
    assert m.expected_mse() >= opt_mse * (1 - 1e-6)  # a restriction cannot beat the optimum
    assert m.params["dual_bound"] <= opt_mse * (1 + 1e-7)  # and the full problem's bound stays below it
    # the window costs here (epsilon 0.3 per cell: the envelope outside 3 cells is heavy) and the gap says so
    assert m.expected_mse() <= opt_mse * 1.25
    assert m.params["gap"] >= (m.expected_mse() - opt_mse) / opt_mse
    assert m.params["repair_rounds"] >= 1


def test_column_generation_reaches_the_simplex_optimum_with_a_certified_bound(pop_pm, pop_simplex):
    import highspy  # noqa: F401  (in the test extra: a missing solver fails, never skips)

    m = optimal_mechanism(pop_pm, solver="colgen")
    assert m.params["solver"] == "highspy-colgen" and m.params["colgen_rounds"] >= 2
    assert m.verify() <= 1 + 1e-9
    np.testing.assert_allclose(m.probs.sum(axis=1), 1.0, atol=1e-12)
    opt = pop_simplex.expected_mse()
    exact = optimal_mechanism(pop_pm, margin=0.0, dual_bound=False, solver="highs").objective  # the exact LP's optimum
    lb = m.params["dual_bound"]
    # bound <= exact optimum <= colgen's (feasible) mechanism, and the stopping gap (1e-3) plus the margin
    assert lb <= exact * (1 + 1e-7)
    assert m.expected_mse() >= exact * (1 - 1e-6)
    assert m.expected_mse() == pytest.approx(opt, rel=2e-3)
    assert 0 <= m.params["gap"] < 3e-3
    # negative control: the column generation optimum for twice the epsilon fails the original map
    loose = optimal_mechanism(_eps_map(2 * pop_pm.epsilon), pop_pm.prior(), solver="colgen")
    assert loose.verify() <= 1 + 1e-9 and loose.verify(pop_pm) > 1.5
    with pytest.raises(ValueError, match="window"):
        optimal_mechanism(pop_pm, solver="colgen", window=3)
    with pytest.raises(ValueError, match="pad=0"):
        optimal_mechanism(pop_pm, solver="colgen", pad=1)


def _lake_pm():
    """8 x 8 population with no one on a third of the cells (a lake and the far corner)."""
    pop = _blob()
    pop[:, :2] = 0.0
    pop[6:, 5:] = 0.0
    return PrivacyMap.from_population(pop, epsilon_range=(0.3, 1.5), transform=_transform(1.0, 8), crs=CRS)


def test_column_generation_with_zero_prior_rows_relaxes_them_first_and_still_reaches_the_optimum():
    import highspy  # noqa: F401  (in the test extra: a missing solver fails, never skips)

    pm = _lake_pm()
    assert (pm.prior() == 0).sum() > 16
    simplex = optimal_mechanism(pm, solver="highs", method="highs-ds")
    exact = optimal_mechanism(pm, margin=0.0, dual_bound=False, solver="highs").objective
    m = optimal_mechanism(pm, solver="colgen")
    p = m.params
    # phase 1 ran (rows of zero-prior inputs relaxed to <= 1), then phase 2 on the exact rows
    assert p["colgen_relaxed_rounds"] >= 1 and p["colgen_rounds"] > p["colgen_relaxed_rounds"]
    # the relaxed problem's bound is a bound for the exact problem, and it is strictly below the
    # optimum here (negative control: phase 1 alone would not certify the optimum)
    assert p["colgen_relaxed_bound"] <= exact * (1 + 1e-7)
    assert p["colgen_relaxed_bound"] < exact * (1 - 2e-3)
    assert p["dual_bound"] <= exact * (1 + 1e-7) and p["dual_bound"] > p["colgen_relaxed_bound"]
    assert m.verify() <= 1 + 1e-9
    np.testing.assert_allclose(m.probs.sum(axis=1), 1.0, atol=1e-12)
    assert m.expected_mse() >= exact * (1 - 1e-6)
    assert m.expected_mse() == pytest.approx(simplex.expected_mse(), rel=2e-3)
    assert 0 <= p["gap"] < 3e-3
    # the same problem with the pricing LPs in two worker processes
    m2 = optimal_mechanism(pm, solver="colgen", n_jobs=2)
    assert m2.params["n_jobs"] == 2 and m2.verify() <= 1 + 1e-9
    assert m2.params["dual_bound"] <= exact * (1 + 1e-7)
    assert m2.expected_mse() == pytest.approx(simplex.expected_mse(), rel=2e-3)
    with pytest.raises(ValueError, match="n_jobs"):
        optimal_mechanism(pm, solver="colgen", n_jobs=0)


def test_pricing_in_spawned_workers_equals_pricing_in_process():
    """The pricing pool gets its problem through the initializer, so ``spawn`` (Windows, macOS) works."""
    import highspy  # noqa: F401
    from geopriv.mechanisms import optimal as opt

    pm = _lake_pm()
    out_ij, _ = opt._output_grid(pm.shape, 0)
    allowed = [a * (1 - 1e-4) for a in opt._allowed(pm)]
    C = opt._cost(pm, pm.prior(), out_ij)
    C = C / C.max()
    problem = {"C": C, "cone_lp": opt._cone_matrix(pm, allowed)}
    v = np.random.default_rng(3).uniform(0.0, 0.05, C.shape[0])
    here = opt._Pricer(problem, 1)
    there = opt._Pricer(problem, 2, mp_context="spawn")
    try:
        t1, new1 = here(v, want_columns=True)
        t2, new2 = there(v, want_columns=True)
    finally:
        here.close()
        there.close()
    assert t1 < 0 and t2 == pytest.approx(t1, rel=1e-9, abs=1e-12)
    assert [y for y, _ in new1] == [y for y, _ in new2]
    # every column is an element of the cone within the box (what the master may combine)
    ia, ib, w = opt._edges(pm.shape, allowed)
    for _, k in new2:
        assert k.min() >= 0 and k.max() <= 1 + 1e-12
        assert np.all(k[ia] <= np.exp(w) * k[ib] + 1e-9) and np.all(k[ib] <= np.exp(w) * k[ia] + 1e-9)


def test_bad_solver_and_window():
    pm = _eps_map(np.full((3, 3), 0.5))
    with pytest.raises(ValueError, match="solver"):
        optimal_mechanism(pm, "uniform", solver="cplex")
    with pytest.raises(ValueError, match="window"):
        optimal_mechanism(pm, "uniform", window=0)


# -------------------------------------------------------------------------------- coarsen_to
def test_coarsen_to_divisor_equals_coarsen():
    dens = np.arange(144, dtype=float).reshape(12, 12) ** 1.5
    dens[:3, :3] = np.nan
    pm = PrivacyMap.from_population(dens, epsilon_range=(0.2, 1.0), transform=_transform(2.0, 12), crs=CRS)
    a, b = opt.coarsen(pm, 3), opt.coarsen_to(pm, (4, 4))
    np.testing.assert_array_equal(a.epsilon, b.epsilon)
    np.testing.assert_allclose(a.population, b.population, rtol=1e-12)
    np.testing.assert_array_equal(a.nodata_mask, b.nodata_mask)
    assert a.transform == b.transform


def test_coarsen_to_uneven_blocks():
    rng = np.random.default_rng(3)
    dens = rng.gamma(0.5, 100.0, size=(10, 13))
    dens[0, :] = np.nan
    pm = PrivacyMap.from_population(dens, epsilon_range=(0.2, 1.0), transform=_transform(1.0, 10), crs=CRS)
    c = opt.coarsen_to(pm, (3, 4))
    assert c.shape == (3, 4)
    assert c.bounds == pytest.approx(pm.bounds)  # nothing trimmed
    assert c.cell_size == pytest.approx((13 / 4, 10 / 3))
    # people are conserved: coarse density x coarse cell area = fine total
    assert (c.population.sum() * (13 / 4) * (10 / 3)) == pytest.approx(pm.population.sum())
    # epsilon: minimum over every fine cell the block touches (row 0 covers fine rows 0..3, 3.33 of them)
    assert c.epsilon[0, 0] == pytest.approx(pm.epsilon[0:4, 0:4].min())
    assert c.epsilon[1, 1] == pytest.approx(pm.epsilon[3:7, 3:7].min())
    assert c.epsilon[2, 3] == pytest.approx(pm.epsilon[6:10, 9:13].min())
    assert np.all(c.epsilon >= pm.epsilon.min())
    # a coarse node's epsilon never exceeds the fine epsilon at any fine node inside its block
    for fy, fx, e in zip(np.repeat(pm.node_y, 13), np.tile(pm.node_x, 10), pm.epsilon.ravel()):
        i = np.argmin(np.abs(c.node_y - fy))
        j = np.argmin(np.abs(c.node_x - fx))
        assert c.epsilon[i, j] <= e + 1e-12
    assert c.info["coarsened"]["shape"] == [3, 4]
    with pytest.raises(RasterError):
        opt.coarsen_to(pm, (1, 4))
    with pytest.raises(RasterError):
        opt.coarsen_to(pm, (11, 4))
    with pytest.raises(ValueError):
        opt.coarsen_to(pm, (2.5, 4))


def test_the_default_solver_prints_nothing(capfd, pop_pm):
    """Column generation (the default where it applies) builds HiGHS objects, whose constructor prints a banner
    on the process's standard output: a library call must not write to the user's terminal or pipe."""
    assert optimal_mechanism(pop_pm).params["solver"] == "highspy-colgen"
    out, _ = capfd.readouterr()
    assert "HiGHS" not in out
