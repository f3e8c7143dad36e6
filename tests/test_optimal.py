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
from geopriv.mechanisms import eikonal as eik
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
    assert m.status == 0 and "ptimal" in m.message
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
    with pytest.raises(InfeasibleMechanismError, match=r"coarsen\(pm, \d+"):
        optimal_mechanism(pm, "uniform", max_variables=10_000)
    with pytest.raises(ValueError):  # InfeasibleMechanismError is a ValueError
        optimal_mechanism(pm, "uniform", max_variables=10_000)


def test_highs_failure_is_a_clear_error(monkeypatch):
    import scipy.optimize
    from scipy.optimize import OptimizeResult

    def fake(*args, **kwargs):
        return OptimizeResult(status=1, x=None, message="Time limit reached.", fun=None)

    monkeypatch.setattr(scipy.optimize, "linprog", fake)
    with pytest.raises(InfeasibleMechanismError, match="time_limit"):
        optimal_mechanism(_eps_map(np.full((3, 3), 0.5)), "uniform", time_limit=1.0)


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
