"""Statistics of the planar Laplace sampler.

Every test uses a fixed seed; each hypothesis test is run at significance alpha = 1e-3, which
is the false-failure rate stated for a correct sampler (were the seed redrawn).  Each has a
negative control (a wrong epsilon) that the same test must reject.
"""

import numpy as np
import pytest
from scipy import stats

from geopriv.mechanisms.planar_laplace import (
    PlanarLaplace,
    discretisation_epsilon,
    polar_noise,
    radius_cdf,
    radius_quantile,
)

ALPHA = 1e-3
N = 20_000
EPS = 0.05  # per unit


@pytest.fixture(scope="module")
def noise():
    return polar_noise(N, EPS, np.random.default_rng(2024))


def _radius_pvalue(noise, eps):
    r = np.hypot(noise[:, 0], noise[:, 1])
    return stats.kstest(r, stats.gamma(a=2, scale=1 / eps).cdf).pvalue


def test_radius_is_gamma_2(noise):
    assert _radius_pvalue(noise, EPS) > ALPHA


@pytest.mark.parametrize("factor", [0.7, 1.3])
def test_radius_negative_control_wrong_epsilon_is_rejected(noise, factor):
    assert _radius_pvalue(noise, EPS * factor) < 1e-6


def test_angle_is_uniform(noise):
    theta = np.arctan2(noise[:, 1], noise[:, 0]) % (2 * np.pi)
    assert stats.kstest(theta, stats.uniform(0, 2 * np.pi).cdf).pvalue > ALPHA


def test_angle_negative_control_biased_angle_is_rejected():
    rng = np.random.default_rng(5)
    theta = rng.uniform(0, 2 * np.pi, N) ** 1.05 % (2 * np.pi)  # slightly non-uniform
    assert stats.kstest(theta, stats.uniform(0, 2 * np.pi).cdf).pvalue < 1e-6


def test_radius_and_angle_independent(noise):
    r = np.hypot(noise[:, 0], noise[:, 1])
    theta = np.arctan2(noise[:, 1], noise[:, 0])
    assert stats.spearmanr(r, np.cos(theta)).pvalue > ALPHA


def test_closed_forms():
    m = PlanarLaplace(0.01)
    assert m.expected_radius() == pytest.approx(200)
    assert m.mse() == pytest.approx(6e4)
    q = m.alpha(0.9)
    assert radius_cdf(q, 0.01) == pytest.approx(0.9, abs=1e-12)
    assert radius_quantile(0.0, 0.01) == pytest.approx(0.0, abs=1e-9)
    assert stats.gamma(a=2, scale=100).ppf(0.9) == pytest.approx(q, rel=1e-9)


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf"), None, "x"])
def test_invalid_epsilon_is_value_error(eps):
    with pytest.raises(ValueError):
        PlanarLaplace(eps)


def test_sample_does_not_modify_input_and_never_returns_it():
    xy = np.array([[1.0, 2.0], [3.0, 4.0]])
    before = xy.copy()
    out = PlanarLaplace(1.0).sample(xy, np.random.default_rng(0))
    assert np.array_equal(xy, before)
    assert not np.any(np.all(out == xy, axis=1))


def test_discretisation_epsilon_close_to_epsilon_for_sane_grid():
    # 1 m grid over a 50 km region: the finite-precision degradation is negligible
    e = discretisation_epsilon(0.01, 1.0, 50_000)
    assert 0.01 < e < 0.01 * (1 + 1e-6)
    with pytest.raises(ValueError, match="coarser grid"):
        discretisation_epsilon(0.01, 1e-12, 1e9)
