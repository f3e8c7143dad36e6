"""The hierarchical count mechanism (geopriv.mechanisms.hierarchy): noise law, consistency, error, rounding.

Statistical tests use fixed seeds; each states its false-failure rate, and the noise-law test has
a negative control (the law of a wrong epsilon) that must be rejected.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from geopriv.exceptions import ParameterError
from geopriv.mechanisms.hierarchy import CellTree, HierarchicalCounts, discrete_laplace_variance, split_levels


def quadtree(n: int) -> CellTree:
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    i, j = i.ravel(), j.ravel()
    depth = max(1, math.ceil(math.log2(n)))
    return CellTree.from_keys([(i >> lev) * 10_000 + (j >> lev) for lev in range(depth + 1)])


def dlap_pmf(k, t):
    r = math.exp(-1 / t)
    return (1 - r) / (1 + r) * r ** np.abs(k)


def chi_square_p(z, t):
    """p-value of a chi-square fit of integer draws z to the discrete Laplace law of scale t (tails pooled)."""
    lim = int(max(3, 4 * t))
    ks = np.arange(-lim, lim + 1)
    expected = dlap_pmf(ks, t) * z.size
    observed = np.array([(z == k).sum() for k in ks], dtype=float)
    tail = z.size - observed.sum()
    exp_tail = z.size - expected.sum()
    return stats.chisquare(np.append(observed, tail), np.append(expected, exp_tail)).pvalue


def test_tree_from_keys_builds_levels_and_drops_levels_that_merge_nothing():
    tree = quadtree(8)
    assert tree.sizes == (64, 16, 4, 1)
    assert all(p.min() >= 0 for p in tree.parents)
    # a level repeated (same grouping twice) is dropped
    keys = [np.arange(4), np.arange(4) // 2, np.arange(4) // 2, np.zeros(4)]
    assert CellTree.from_keys(keys).sizes == (4, 2, 1)


def test_split_levels_is_exact_and_sums_to_epsilon():
    parts = split_levels(0.1, [7, 0, 0, 1])
    assert sum(parts) == Fraction(0.1)
    assert parts[1] == 0 and parts[0] == Fraction(0.1) * 7 / 8
    with pytest.raises(ParameterError):
        split_levels(1.0, [0, 1])  # the cells need a share
    with pytest.raises(ParameterError):
        split_levels(0.0, [1])


@pytest.mark.slow
def test_noise_of_every_level_follows_the_discrete_laplace_law_and_a_wrong_epsilon_is_rejected():
    """Chi-square fit of (noisy - true) per level at alpha = 1e-4 (false failure 1e-4 per level, 3 levels);
    negative control: the same draws tested against the law of epsilon 10 % larger must be rejected."""
    tree = quadtree(16)
    mech = HierarchicalCounts(split_levels(Fraction(1, 2), [2, 1, 0, 0, 1]), sensitivity=3)
    counts = np.random.default_rng(0).integers(0, 50, size=tree.sizes[0])
    true = tree.level_counts(counts)
    gen = np.random.default_rng(2026)
    noise = {lev: [] for lev in range(tree.depth)}
    for _ in range(400):
        noisy = mech.noisy(tree, counts, gen)
        for lev, (y, c) in enumerate(zip(noisy, true)):
            if y is not None:
                noise[lev].append(y - c)
    scales = mech.scales()
    assert scales[2] is None and scales[3] is None  # unmeasured levels draw nothing
    for lev, parts in noise.items():
        if not parts:
            continue
        z = np.concatenate(parts)
        t = float(scales[lev])
        assert t == pytest.approx(3 / float(mech.level_epsilons[lev]))
        assert chi_square_p(z, t) > 1e-4, f"level {lev}"
        wrong = t / 1.1  # the law at epsilon 10 % larger: must be rejected
        if z.size >= 20_000:
            assert chi_square_p(z, wrong) < 1e-4, f"negative control not rejected at level {lev}"


def test_reported_error_matches_the_measured_error_of_the_linear_estimate():
    """Pooled over 64 cells x 300 releases (19,200 errors), the measured RMSE of the integer release
    (nonnegative=False) is within 4 % of the reported one (about 4.5 standard errors: false failure < 1e-5)."""
    tree = quadtree(8)
    mech = HierarchicalCounts(split_levels(1.0, [1, 1, 1, 1]))
    counts = np.zeros(64, dtype=np.int64)
    counts[:5] = [100, 50, 0, 3, 9]
    gen = np.random.default_rng(11)
    errs = np.array([mech.release(tree, counts, gen, nonnegative=False) - counts for _ in range(300)])
    reported = mech.leaf_error(tree)
    measured = np.sqrt((errs.astype(float) ** 2).mean(axis=0))
    ratio = np.sqrt((measured**2).mean()) / np.sqrt((reported**2 + 1 / 12).mean())
    assert abs(ratio - 1) < 0.04, ratio
    # cells only: the reported error is the discrete Laplace standard deviation
    flat = HierarchicalCounts(split_levels(1.0, [1, 0, 0, 0]))
    assert flat.leaf_error(tree)[0] == pytest.approx(math.sqrt(discrete_laplace_variance(Fraction(1))))


def test_consistency_reduces_the_error_below_the_cells_own_noise():
    tree = quadtree(8)
    mech = HierarchicalCounts(split_levels(1.0, [1, 1, 1, 1]))
    own = math.sqrt(mech.variances()[0])
    assert (mech.leaf_error(tree) < own).all()


@pytest.mark.parametrize("nonnegative", [True, False])
def test_released_counts_are_integers_that_add_up_and_are_non_negative(nonnegative):
    tree = quadtree(8)
    mech = HierarchicalCounts(split_levels(0.5, [1, 1, 1, 1]))
    counts = np.zeros(64, dtype=np.int64)
    counts[10] = 20
    gen = np.random.default_rng(3)
    for _ in range(50):
        out = mech.release(tree, counts, gen, nonnegative=nonnegative)
        assert out.dtype == np.int64
        if nonnegative:
            assert (out >= 0).all()
    # a consistent release: each node of the tree equals the sum of its children, by construction
    noisy = mech.noisy(tree, counts, gen)
    leaves = mech.postprocess(tree, noisy, gen, nonnegative=nonnegative)
    levels = tree.level_counts(leaves)
    assert levels[-1].sum() == leaves.sum()


def test_rounding_is_unbiased_for_every_child_position():
    """Siblings have equal fractional parts; a fixed tie order would favour the first child by ~0.3.
    Mean error per position over 3,000 releases (standard error ~0.09): every |mean| < 0.4 (4.4 SE,
    false failure < 1e-3 over 64 cells); the negative control (tie order by position) had 0.29."""
    tree = quadtree(8)
    mech = HierarchicalCounts(split_levels(1.0, [1, 1, 1, 1]))
    counts = np.full(64, 50, dtype=np.int64)
    gen = np.random.default_rng(5)
    errs = np.array([mech.release(tree, counts, gen, nonnegative=False) - counts for _ in range(3000)])
    by_position = errs.mean(axis=0)
    assert np.abs(by_position).max() < 0.4
    # positions (i even, j even) vs (i odd, j odd): no systematic difference
    grid = by_position.reshape(8, 8)
    assert abs(grid[::2, ::2].mean() - grid[1::2, 1::2].mean()) < 0.15


def test_noisy_is_the_only_randomness_and_uses_the_generator_only():
    tree = quadtree(4)
    mech = HierarchicalCounts(split_levels(1.0, [7, 0, 1]))
    a = mech.release(tree, np.arange(16), np.random.default_rng(9))
    b = mech.release(tree, np.arange(16), np.random.default_rng(9))
    assert (a == b).all()


def test_bad_parameters_are_refused():
    with pytest.raises(ParameterError):
        HierarchicalCounts(split_levels(1.0, [1]), sensitivity=0)
    with pytest.raises(ParameterError):
        HierarchicalCounts(split_levels(1.0, [1, 1]), sensitivity=1).leaf_error(quadtree(8))
