"""The exact discrete Laplace sampler (geopriv/mechanisms/discrete.py).

Statistical tests: chi-square goodness of fit of 10**6 draws against the exact law
``P(k) = (1 - r) / (1 + r) r**|k|``, ``r = exp(-1/t)``, over bins of at least 20 expected
draws, each at level ALPHA = 1e-4 with a fixed seed.  A correct sampler fails one of the
27 statistical checks here (23 fits, 3 symmetry checks, 1 positive control) with probability
below 27 * 1e-4 ~ 0.3 % (the seeds are fixed, so a pass is reproducible).  The negative
controls (the law of a scale 10 % off, numpy's geometric with a wrong success probability)
must be rejected at the same level.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import geopriv.mechanisms.private_measure as pm
from geopriv.exceptions import ParameterError
from geopriv.mechanisms.discrete import (
    MAX_SCALE,
    SMALL,
    exact_scale,
    sample_discrete_laplace,
)

ALPHA = 1e-4
N = 10**6


# ----------------------------------------------------------------------------- helpers
def cdf(z, t: float) -> np.ndarray:
    """P(Z <= z) for the discrete Laplace law of scale t (float arithmetic: a test oracle)."""
    z = np.asarray(z, dtype=float)
    one_plus_r = 1.0 + math.exp(-1.0 / t)
    with np.errstate(over="ignore"):
        neg = np.exp(np.minimum(z, 0) / t) / one_plus_r
        pos = 1.0 - np.exp(-(np.maximum(z, 0) + 1.0) / t) / one_plus_r
    return np.where(z < 0, neg, pos)


def edges_for(t: float, n: int = N, bins: int = 80, min_expected: float = 20.0) -> np.ndarray:
    """Integer bin edges fixed in advance (quantiles of the exact law), merged to >= min_expected."""
    one_plus_r = 1.0 + math.exp(-1.0 / t)
    p = np.linspace(0, 1, bins + 1)[1:-1]
    with np.errstate(divide="ignore"):
        lo = t * np.log(p * one_plus_r)  # z < 0 branch of the inverse cdf
        hi = -t * np.log((1 - p) * one_plus_r) - 1  # z >= 0 branch
    q = np.where(p < 1 / one_plus_r, np.floor(lo), np.floor(hi))
    cand = np.unique(np.concatenate([q, q + 1, np.arange(-50, 52)]))  # edge e: bin [e_prev, e)
    cand = cand[np.isfinite(cand)]
    edges = []
    last = 0.0
    for e in cand:
        if (cdf(e - 1, t) - last) * n >= min_expected:
            edges.append(e)
            last = float(cdf(e - 1, t))
    if edges and (1 - last) * n < min_expected:
        edges.pop()
    return np.array(edges)


def chi_square_p(sample: np.ndarray, t: float) -> float:
    """p-value of the chi-square goodness of fit of ``sample`` to the discrete Laplace law of scale t."""
    edges = edges_for(t, sample.size)
    assert len(edges) >= 1, "the law has a single bin here: test it another way"
    below = np.concatenate([[0.0], cdf(edges - 1, t), [1.0]])
    expected = np.diff(below) * sample.size
    observed = np.bincount(np.searchsorted(edges, sample, side="right"), minlength=len(edges) + 1)
    assert observed.sum() == sample.size
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(chi2, df=len(expected) - 1))


class IntegerOnlyGenerator:
    """A Generator that only allows ``integers`` with integer bounds: any float draw fails the test."""

    def __init__(self, seed):
        self.gen = np.random.default_rng(seed)
        self.calls = 0

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        for bound in (low, high):
            assert bound is None or (isinstance(bound, (int, np.integer)) and not isinstance(bound, bool)), bound
        assert np.dtype(dtype).kind in "iub", dtype
        self.calls += 1
        return self.gen.integers(low, high, size=size, dtype=dtype, endpoint=endpoint)

    def __getattr__(self, name):
        raise AssertionError(f"the exact sampler called the non-integer method Generator.{name}")


#: (id, keyword arguments, the exact scale) covering every code path: integer and non-integer
#: scales, numerators below and above int64 (Algorithm 1 rounds in one draw or as a product
#: of two trials), huge denominators (lazy Bernoulli trials), t < 1, tiny and huge epsilon
CASES = [
    ("t=5/2", dict(scale=Fraction(5, 2)), Fraction(5, 2)),
    ("t=10", dict(scale=10), Fraction(10)),
    ("t=37.123 float", dict(scale=37.123), Fraction(37.123)),
    ("eps=0.1 float", dict(epsilon=0.1), 1 / Fraction(0.1)),
    ("t=1/3", dict(scale=Fraction(1, 3)), Fraction(1, 3)),
    ("eps=5 (t=0.2)", dict(epsilon=5.0), Fraction(1, 5)),
    ("t=1", dict(scale=1), Fraction(1)),
    ("huge numerator t~10", dict(scale=Fraction(10**30 + 1, 10**29)), Fraction(10**30 + 1, 10**29)),
    ("huge denominator t~0.1", dict(scale=Fraction(10**25 + 1, 10**26)), Fraction(10**25 + 1, 10**26)),
    ("huge denominator t~1/3", dict(scale=Fraction(10**25 + 1, 3 * 10**25)), Fraction(10**25 + 1, 3 * 10**25)),
    ("eps=1e-6", dict(epsilon=1e-6), 1 / Fraction(1e-6)),
    ("eps=1e-10 (huge numerator)", dict(epsilon=1e-10), 1 / Fraction(1e-10)),
]


#: left out of the one-at-a-time fit: tails too thin for 2 * 10**5 draws (its code is
#: exercised by the integer-only test, and "huge denominator t~1/3" takes the same branches)
SLOW_ONE_AT_A_TIME = ("huge denominator t~0.1",)


def draw(kwargs, size, gen):
    kw = dict(kwargs)
    scale = kw.pop("scale", None)
    return sample_discrete_laplace(scale, size, gen, **kw)


# ----------------------------------------------------------------------------- the law
@pytest.mark.slow
@pytest.mark.parametrize("kwargs,t", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_chi_square_goodness_of_fit_against_the_exact_law(kwargs, t):
    z = draw(kwargs, N, np.random.default_rng(20260))
    assert z.dtype == np.int64 and z.shape == (N,)
    p = chi_square_p(z, float(t))
    assert p > ALPHA, f"chi-square p = {p:.3g} for t = {float(t)}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "kwargs,t",
    [c[1:] for c in CASES if c[0] not in SLOW_ONE_AT_A_TIME],
    ids=[c[0] for c in CASES if c[0] not in SLOW_ONE_AT_A_TIME],
)
def test_few_draws_per_call_follow_the_same_law(kwargs, t):
    """Calls of at most SMALL draws take the one-at-a-time path: the same exact law (2 * 10**5 draws)."""
    gen = np.random.default_rng(31)
    z = np.concatenate([draw(kwargs, SMALL if i % 2 else 1 + i % SMALL, gen) for i in range(200_000 // SMALL * 2)])
    p = chi_square_p(z, float(t))
    assert p > ALPHA, f"chi-square p = {p:.3g} for t = {float(t)} ({z.size} draws)"


@pytest.mark.slow
@pytest.mark.parametrize("t", [Fraction(5, 2), Fraction(37123, 1000), Fraction(1, 3)])
def test_negative_control_a_scale_ten_percent_off_is_rejected(t):
    """The same test must reject the law of epsilon off by 10 % (scale t / 1.1 and t * 1.1)."""
    gen = np.random.default_rng(7)
    for wrong in (t * Fraction(11, 10), t / Fraction(11, 10)):
        z = sample_discrete_laplace(wrong, N, gen)
        assert chi_square_p(z, float(t)) < ALPHA


@pytest.mark.slow
def test_negative_control_numpy_geometric_with_a_wrong_parameter_is_rejected():
    """numpy's geometric with success probability 1/t (a common slip for 1 - exp(-1/t)) is caught."""
    t = 2.5
    g = np.random.default_rng(3).geometric(1 / t, size=(2, N))
    assert chi_square_p((g[0] - g[1]).astype(np.int64), t) < ALPHA
    # and the correct parameter passes (the oracle is not simply rejecting everything)
    g = np.random.default_rng(3).geometric(-math.expm1(-1 / t), size=(2, N))
    assert chi_square_p((g[0] - g[1]).astype(np.int64), t) > ALPHA


@pytest.mark.parametrize("kwargs,t", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_only_integer_draws_are_made(kwargs, t):
    for size in (20_000, SMALL, 1):  # the vectorised and the one-at-a-time paths
        gen = IntegerOnlyGenerator(5)
        z = draw(kwargs, size, gen)
        assert gen.calls > 0 and z.dtype == np.int64 and z.shape == (size,)


def test_private_measure_noise_uses_the_exact_sampler():
    """synthesize's noise (pm.discrete_laplace) makes integer draws only; numpy's geometric is gone."""
    gen = IntegerOnlyGenerator(1)
    z = pm.discrete_laplace(12.5, 1000, gen)
    assert z.dtype == np.int64 and gen.calls > 0
    gen = IntegerOnlyGenerator(1)
    assert pm.discrete_laplace(12.5, 2, gen).shape == (2,) and gen.calls > 0
    np.testing.assert_array_equal(
        pm.discrete_laplace(12.5, 1000, np.random.default_rng(4)),
        sample_discrete_laplace(12.5, 1000, np.random.default_rng(4)),
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "kwargs",
    [dict(scale=Fraction(5, 2)), dict(scale=Fraction(10**30 + 1, 10**29)), dict(epsilon=5.0)],
    ids=["t=5/2", "huge numerator", "t<1"],
)
def test_symmetric(kwargs):
    """Sign test: among nonzero draws, + and - are equally likely (two-sided, 4.42 sigma: alpha ~ 1e-5),
    and |Z| has the same distribution on both sides (two-sample chi-square over |Z| bins)."""
    z = draw(kwargs, N, np.random.default_rng(11))
    pos, neg = int((z > 0).sum()), int((z < 0).sum())
    assert abs(pos - neg) <= 4.42 * math.sqrt(pos + neg)
    top = int(np.quantile(np.abs(z[z != 0]), 0.99))
    a = np.bincount(np.minimum(z[z > 0], top), minlength=top + 1)[1:]
    b = np.bincount(np.minimum(-z[z < 0], top), minlength=top + 1)[1:]
    keep = (a + b) >= 40
    if keep.sum() >= 2:
        table = np.array([a[keep], b[keep]])
        assert stats.chi2_contingency(table)[1] > ALPHA


def test_huge_epsilon_gives_zero_and_tiny_epsilon_gives_huge_noise():
    # eps = 40: P(Z != 0) = 2 e^-40 / (1 + e^-40) ~ 8.5e-18 per draw
    z = sample_discrete_laplace(None, N, np.random.default_rng(2), epsilon=40.0)
    assert z.dtype == np.int64 and not z.any()
    z = sample_discrete_laplace(None, 10, np.random.default_rng(2), epsilon=1e4)  # gamma = 10**4: exp(-1) chains
    assert not z.any()
    # the largest scale accepted: int64 output, no overflow, the right order of magnitude
    z = sample_discrete_laplace(MAX_SCALE, 10_000, np.random.default_rng(2))
    assert z.dtype == np.int64
    assert 0.5 < np.abs(z).mean() / float(MAX_SCALE) < 2.0


def test_shapes_dtype_and_reproducibility():
    a = sample_discrete_laplace(3.0, (3, 4), np.random.default_rng(9))
    b = sample_discrete_laplace(3.0, (3, 4), np.random.default_rng(9))
    assert a.shape == (3, 4) and a.dtype == np.int64
    np.testing.assert_array_equal(a, b)
    e = sample_discrete_laplace(3.0, 0, np.random.default_rng(9))
    assert e.shape == (0,) and e.dtype == np.int64
    assert pm.discrete_laplace(3.0, 0, np.random.default_rng(9)).shape == (0,)


def test_exact_scale_conversions_and_refusals():
    assert exact_scale(0.1) == Fraction(0.1) != Fraction(1, 10)  # the double's exact value, not 1/10
    assert exact_scale(epsilon=0.1) == 1 / Fraction(0.1)
    assert exact_scale(Fraction(7, 3)) == Fraction(7, 3)
    assert exact_scale(np.float64(2.5)) == Fraction(5, 2) and exact_scale(np.int64(4)) == 4
    for bad in (0, -1.0, float("nan"), float("inf"), True, "1", None):
        with pytest.raises(ParameterError):
            exact_scale(bad)
    with pytest.raises(ParameterError):
        exact_scale(1.0, epsilon=1.0)
    with pytest.raises(ParameterError):
        exact_scale(MAX_SCALE + 1)
    with pytest.raises(ParameterError):
        sample_discrete_laplace(None, 5, np.random.default_rng(0), epsilon=1e-300)
