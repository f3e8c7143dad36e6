"""Private counts over a public hierarchy of cells: exact discrete Laplace noise and tree consistency.

Paper
-----
M. Hay, V. Rastogi, G. Miklau, D. Suciu, "Boosting the Accuracy of Differentially Private
Histograms Through Consistency", PVLDB 3(1), 2010: noisy counts on every level of a tree of
cells, then the least-squares estimate that is consistent (a node equals the sum of its
children).  Here the tree may be irregular (a grid's edge, H3's up-to-7 children, districts
grouped by a quadtree) and the levels may carry different budgets (G. Cormode, C. Procopiuc,
D. Srivastava, E. Shen, T. Yu, "Differentially Private Spatial Decompositions", ICDE 2012), so
the estimate is computed by the general two-pass form of the same least squares (inverse-variance
weighting up the tree, the Rauch-Tung-Striebel correction down it), which is exact for any tree
with independent noise of known variance.

The noise is the discrete Laplace law from integer draws only
(:func:`~geopriv.mechanisms.discrete.sample_discrete_laplace`): counts are integers with no
floating-point surface (Mironov 2012).  Everything after the noise (consistency, rounding to
integers that add up, non-negativity) is post-processing.

Privacy
-------
A person contributes at most ``sensitivity`` rows, and every row is counted once on every level,
so removing a person changes the counts of a level by at most ``sensitivity`` in l1 norm.  Level
``l`` gets ``epsilon_l`` (exact rationals summing to ``epsilon``) and discrete Laplace noise of
scale ``sensitivity / epsilon_l``: each level is ``epsilon_l``-DP and the whole release is
``epsilon``-DP by basic composition.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from fractions import Fraction

import numpy as np

from ..exceptions import ParameterError, ParameterTypeError
from .discrete import exact_scale, sample_discrete_laplace

__all__ = ["CellTree", "HierarchicalCounts", "discrete_laplace_variance", "split_levels"]


def discrete_laplace_variance(t: Fraction) -> float:
    """Variance of the discrete Laplace law of scale ``t``: ``2 r / (1 - r)**2`` with ``r = exp(-1/t)``."""
    d = -math.expm1(-1.0 / float(t))  # 1 - r, without cancellation at large t
    return 2.0 * (1.0 - d) / (d * d)


@dataclasses.dataclass(frozen=True)
class CellTree:
    """A public tree over cells: ``parents[l][i]`` is the level ``l + 1`` node holding node ``i`` of level ``l``.

    Level 0 are the released cells (leaves), the last level the coarsest.  Built from public
    cell sets only (a grid over the declared area, H3 parents, public polygons).
    """

    sizes: tuple
    parents: tuple

    @classmethod
    def from_keys(cls, keys) -> "CellTree":
        """A tree from one key array per level, each giving every leaf's ancestor at that level.

        ``keys[0]`` must hold distinct values (the leaves); ``keys[l]`` any integer labels of the
        level-``l`` ancestor of each leaf, nested (leaves with one ancestor at level ``l`` share
        their ancestor at level ``l + 1``).
        """
        keys = [np.asarray(k) for k in keys]
        n = len(keys[0])
        if n == 0:
            raise ParameterError("There are no cells to release.")
        ids = [np.arange(n, dtype=np.int64)]
        sizes = [n]
        for k in keys[1:]:
            uniq, inv = np.unique(k, return_inverse=True)
            ids.append(inv.astype(np.int64).reshape(-1))
            sizes.append(len(uniq))
        # a level that merges nothing (same number of nodes as the one below) adds noise, not information
        kept = [0] + [i for i in range(1, len(ids)) if sizes[i] != sizes[i - 1]]
        parents = []
        for lo, hi in zip(kept[:-1], kept[1:]):
            par = np.full(sizes[lo], -1, dtype=np.int64)
            par[ids[lo]] = ids[hi]
            parents.append(par)
        sizes = [sizes[i] for i in kept]
        return cls(tuple(sizes), tuple(parents))

    @property
    def depth(self) -> int:
        """Number of levels (leaves included)."""
        return len(self.sizes)

    def level_counts(self, leaf_counts: np.ndarray) -> list:
        """Exact integer counts of every level from the leaves' counts."""
        out = [np.asarray(leaf_counts, dtype=np.int64)]
        for par, size in zip(self.parents, self.sizes[1:]):
            out.append(np.bincount(par, weights=out[-1], minlength=size).round().astype(np.int64))
        return out


def split_levels(epsilon, weights) -> tuple:
    """``epsilon`` split exactly (as Fractions summing to it) in proportion to rational ``weights``.

    A weight of 0 leaves its level unmeasured.
    """
    eps = _exact(epsilon, "epsilon")
    w = [Fraction(x) for x in weights]
    if any(x < 0 for x in w) or sum(w) <= 0 or w[0] <= 0:
        raise ParameterError("level weights must be >= 0, with a positive weight on the cells themselves.")
    total = sum(w)
    return tuple(eps * x / total for x in w)


def _exact(value, name) -> Fraction:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ParameterTypeError(f"{name} must be a positive number, got {type(value).__name__}.")
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise ParameterError(f"{name} must be finite and > 0, got {float(value)!r}.")
        value = Fraction(float(value))
    else:
        value = Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    if value <= 0:
        raise ParameterError(f"{name} must be > 0, got {float(value)!r}.")
    return value


@dataclasses.dataclass(frozen=True)
class HierarchicalCounts:
    """Counts of a tree of cells with discrete Laplace noise per level, made consistent.

    Parameters
    ----------
    level_epsilons : tuple of Fraction
        Budget of each level of the tree, leaves first (0: the level is not measured); they sum
        to the release's epsilon.
    sensitivity : int
        Most rows one person contributes (each counted once per level).
    """

    level_epsilons: tuple
    sensitivity: int = 1

    def __post_init__(self):
        if (
            isinstance(self.sensitivity, (bool, np.bool_))
            or not isinstance(self.sensitivity, (int, np.integer))
            or self.sensitivity < 1
        ):
            raise ParameterError(f"the contribution bound must be a positive integer, got {self.sensitivity!r}.")
        if not self.level_epsilons or self.level_epsilons[0] <= 0:
            raise ParameterError("the cells themselves need a positive share of epsilon.")

    @property
    def epsilon(self) -> Fraction:
        """The release's total privacy loss (exact)."""
        return sum(self.level_epsilons, Fraction(0))

    def scales(self) -> tuple:
        """Discrete Laplace scale of every level (None where unmeasured)."""
        return tuple(None if e == 0 else exact_scale(epsilon=e / self.sensitivity) for e in self.level_epsilons)

    def variances(self) -> tuple:
        """Noise variance of every level (inf where unmeasured; at least 1e-12, for epsilons so large that
        the noise is 0 in floating point)."""
        return tuple(math.inf if t is None else max(discrete_laplace_variance(t), 1e-12) for t in self.scales())

    def _check(self, tree: CellTree):
        if len(self.level_epsilons) != tree.depth:
            raise ParameterError(f"{len(self.level_epsilons)} level budgets for a tree of {tree.depth} levels.")

    def noisy(self, tree: CellTree, leaf_counts, gen) -> list:
        """The noisy integer counts of every measured level (None where unmeasured): the only randomness."""
        self._check(tree)
        counts = tree.level_counts(leaf_counts)
        out = []
        for c, t in zip(counts, self.scales()):
            out.append(None if t is None else c + sample_discrete_laplace(t, len(c), gen))
        return out

    def release(self, tree: CellTree, leaf_counts, gen, *, nonnegative: bool = True) -> np.ndarray:
        """Released integer counts of the leaves: noise, consistency, integers that add up (int64)."""
        return self.postprocess(tree, self.noisy(tree, leaf_counts, gen), gen, nonnegative=nonnegative)

    def postprocess(self, tree: CellTree, noisy, gen, *, nonnegative: bool = True) -> np.ndarray:
        """Consistent integer leaf counts from the noisy level counts (no data; ``gen`` only breaks ties)."""
        x, _, _ = _consistent(tree, noisy, self.variances())
        return _integers(tree, x, nonnegative, gen)

    def leaf_error(self, tree: CellTree) -> np.ndarray:
        """Root mean squared error of every leaf's consistent estimate (before rounding): public."""
        self._check(tree)
        _, _, p = _consistent(tree, None, self.variances())
        return np.sqrt(p[0])

    def describe(self) -> dict:
        return {
            "mechanism": "discrete Laplace counts on a tree of cells, made consistent (Hay et al. 2010)",
            "definition": "pure epsilon-differential privacy, user level (one person with all of their rows)",
            "epsilon": float(self.epsilon),
            "max_per_user": int(self.sensitivity),
            "epsilon_per_level": [float(e) for e in self.level_epsilons],
            "level_scales": [None if t is None else float(t) for t in self.scales()],
        }


def _consistent(tree: CellTree, noisy, variances):
    """Least-squares consistent estimates of every level, and their variances.

    Bottom-up: ``z`` combines a node's own measurement with the sum of its children's ``z``
    (inverse-variance weights); top-down: each child gets the parent's correction in proportion
    to its variance.  With ``noisy=None`` only the variances are computed (public).
    """
    L = tree.depth
    z, v, s, vs = [None] * L, [None] * L, [None] * L, [None] * L
    for lev in range(L):
        own_var = variances[lev]
        own = None if noisy is None else noisy[lev]
        if lev == 0:
            v[0] = np.full(tree.sizes[0], own_var)
            z[0] = None if noisy is None else own.astype(float)
            continue
        par = tree.parents[lev - 1]
        size = tree.sizes[lev]
        vs[lev] = np.bincount(par, weights=v[lev - 1], minlength=size)
        s[lev] = None if noisy is None else np.bincount(par, weights=z[lev - 1], minlength=size)
        if math.isinf(own_var):
            v[lev] = vs[lev]
            z[lev] = s[lev]
        else:
            w_own = 1.0 / own_var
            w_sum = 1.0 / vs[lev]
            v[lev] = 1.0 / (w_own + w_sum)
            if noisy is not None:
                z[lev] = (own * w_own + s[lev] * w_sum) * v[lev]
    x, p = [None] * L, [None] * L
    x[L - 1], p[L - 1] = z[L - 1], v[L - 1]
    for lev in range(L - 2, -1, -1):
        par = tree.parents[lev]
        gain = v[lev] / vs[lev + 1][par]
        p[lev] = v[lev] + gain**2 * (p[lev + 1][par] - vs[lev + 1][par])
        if noisy is not None:
            x[lev] = z[lev] + gain * (x[lev + 1][par] - s[lev + 1][par])
    return x, v, p


def _group_starts(par_sorted: np.ndarray, size: int):
    counts = np.bincount(par_sorted, minlength=size)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return counts, starts


def _integers(tree: CellTree, x, nonnegative: bool, gen) -> np.ndarray:
    """Integer counts that add up level by level, from the top: each node's integer total is
    shared among its children closest (least squares) to their consistent estimates, rounded
    by largest remainders; with ``nonnegative`` the share is the projection onto counts >= 0.

    Siblings often have equal fractional parts (integer noise plus an equal correction), so ties
    between remainders are broken at random: otherwise the first child of every node would be
    rounded up more often (a bias, measured in the tests)."""
    L = tree.depth
    top = np.rint(x[L - 1])
    if nonnegative:
        top = np.maximum(top, 0)
    total = top.astype(np.int64)
    for lev in range(L - 2, -1, -1):
        par = tree.parents[lev]
        size = tree.sizes[lev + 1]
        target = total[par].astype(float)
        est = x[lev]
        order = np.lexsort((-est, par))
        p_sorted = par[order]
        counts, starts = _group_starts(p_sorted, size)
        rank = np.arange(len(order)) - starts[p_sorted]
        e_sorted = est[order]
        if nonnegative:  # Euclidean projection of the children onto {y >= 0, sum y = parent}
            csum = np.cumsum(e_sorted)
            base = np.concatenate([[0.0], csum])[starts][p_sorted]
            cs = csum - base
            theta_j = (cs - target[order]) / (rank + 1)
            ok = e_sorted - theta_j > 0
            rho = np.zeros(size, dtype=np.int64)  # number of positive children per parent (>= 1 when parent > 0)
            np.maximum.at(rho, p_sorted[ok], rank[ok] + 1)
            rho = np.maximum(rho, 1)
            theta = np.zeros(size)
            last = starts + rho - 1
            valid = counts > 0
            theta[valid] = (
                (np.concatenate([[0.0], csum])[last[valid] + 1] - np.concatenate([[0.0], csum])[starts[valid]])
                - total[valid]
            ) / rho[valid]
            y = np.maximum(est - theta[par], 0.0)
        else:  # shift the children equally by the parent's rounding
            ksum = np.bincount(par, weights=est, minlength=size)
            kn = np.bincount(par, minlength=size)
            y = est + ((total - ksum) / np.maximum(kn, 1))[par]
        fl = np.floor(y)
        deficit = total - np.bincount(par, weights=fl, minlength=size).round().astype(np.int64)
        frac = np.round(y - fl, 9)  # equal remainders compare equal despite float error
        order = np.lexsort((gen.random(len(y)), -frac, par))
        p_sorted = par[order]
        _, starts = _group_starts(p_sorted, size)
        rank = np.arange(len(order)) - starts[p_sorted]
        bump = np.zeros(len(y), dtype=np.int64)
        bump[order] = (rank < deficit[p_sorted]).astype(np.int64)
        total = fl.astype(np.int64) + bump
    return total
