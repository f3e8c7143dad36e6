"""Private synthetic locations: private measures through a super-regular random walk.

Papers
------
* M. Boedihardjo, T. Strohmer, R. Vershynin, "Private measures, random walks, and synthetic
  data", Probability Theory and Related Fields (2024): the super-regular random walk
  (``method="srw"``).
* Y. He, R. Vershynin, Y. Zhu, "Algorithmically effective differentially private synthetic
  data", COLT 2023: the private measure mechanism (``method="pmm"``), a noisy binary partition
  tree with level-dependent noise.

Privacy model: the data are the locations of ``n`` people in a **public** box (the unit
interval or the unit square here; :mod:`geopriv.release` maps the user's public area onto it).
``n`` is public; two datasets are neighbours when one person's location is replaced by any
other location in the box.  The output is a synthetic point set (a measure); its accuracy is
measured by the Wasserstein-1 distance.

Derivation (what the tests check numerically)
---------------------------------------------
**The tree.**  Fix a depth ``L``.  In 1-D the leaves are the ``2**L`` dyadic intervals of
[0, 1]; in 2-D they are the first ``L`` bits of the Hilbert index of a point on a
``2**p x 2**p`` grid (``p = ceil(L / 2)``): a prefix of ``2k`` bits is a square of the
quadtree, a prefix of ``2k + 1`` bits is half of one (the Hilbert order visits the two halves
of a square one after the other).  So both are *binary partition trees* whose nodes at depth
``j`` have diameter about ``2**(-j/d)`` (times the box's diameter).  A person sits in exactly
one node at every depth.

**Super-regular random walk (srw).**  Z_k = sum_j Lambda_j psi_j(k) with the Haar functions
psi_j = (1_left - 1_right) / |support| and i.i.d. Laplace Lambda_j is, in coefficient space,
noise on the *differences* ``left count - right count`` of every internal node, with the total
``n`` left exact (it is public).  Replacing one person changes the differences only at and below
the lowest common ancestor of the old and new leaves: by 2 at that ancestor (one person leaves
one side, arrives on the other) and by 1 at two nodes on each lower level (one node loses a
person, another gains one).  Above it nothing changes.  So the l1 change of the difference
vector is at most ``2`` per level and at most ``2 L`` in all; noise of scale ``b = 2 L / eps``
on every difference makes the whole vector ``eps``-DP (the density ratio is
``exp(||delta||_1 / b) <= exp(eps)``), tight when the two leaves differ in their first bit.
Partial sums of each psi_j are at most 1/2 and only one psi_j per level is non-zero at a
point, which is why the walk's partial sums are O(log^(3/2)) rather than O(sqrt(n)).

**Private measure mechanism (pmm).**  Noise on the *counts* of every node at depths
1..L, with scale ``sigma_j`` at depth ``j``.  Replacing one person changes at most two counts
by 1 at each depth (0 above the common ancestor): l1 change 2 per level, so the tree is
``eps``-DP when ``sum_j 2 / sigma_j <= eps``.  The split: the W1 cost of the noise at depth
``j`` is about ``sigma_j * N_j * diam_j`` with ``N_j = 2**j`` nodes of diameter
``diam_j ~ 2**(-j/d)``, i.e. ``sigma_j * a_j`` with ``a_j = 2**(j (1 - 1/d))``.  Minimising
``sum_j sigma_j a_j`` subject to ``sum_j 2 / sigma_j = eps`` (Lagrange) gives
``sigma_j = (2 / eps) (sum_k sqrt(a_k)) / sqrt(a_j)``: the budget normalised over the whole
tree (the only public code we found leaves it unnormalised).  In 1-D the split is uniform.

**Exactness.**  The counts and differences are integers, so the noise is the *discrete*
Laplace (two-sided geometric) distribution ``P(k) ~ exp(-|k| / scale)``, for which the density
ratio argument above is exact: no floating-point output of the mechanism exists to attack
(Mironov 2012).  The noise itself is drawn exactly (:mod:`geopriv.mechanisms.discrete`: integer
draws and rational arithmetic, the law of the float ``scale``'s exact binary value; not numpy's
floating-point ``geometric``).  Everything after the noisy tree is post-processing: the top-down
reconstruction (each node's consistent count is split between its children by the noisy
difference or the noisy child counts, clipped to [0, count] with randomised rounding), the
placement of each synthetic point uniformly inside its leaf (or at its centre) and the
public lattice.  Nodes whose reconstructed count is 0 have no children to split, so their
noise is never drawn: this gives the same output distribution as drawing it and throwing it
away, and keeps the work proportional to the non-empty part of the tree.

The code here is pure: unit-box coordinates in, unit-box coordinates out, with a numpy
Generator.  Public areas, CRSs, lattices and provenance are :mod:`geopriv.release`'s job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..exceptions import ParameterError, ParameterTypeError
from .discrete import sample_discrete_laplace

__all__ = [
    "PrivateMeasure",
    "METHODS",
    "hilbert_key",
    "hilbert_cell",
    "leaf_keys",
    "leaf_boxes",
    "discrete_laplace",
    "level_scales",
    "coefficient_change",
    "classical_walk_counts",
    "tree_w1_bound",
    "MAX_DEPTH",
]

METHODS = ("srw", "pmm")
#: deepest tree supported, per dimension (2-D: Hilbert order 24 on uint64 keys)
MAX_DEPTH = {1: 52, 2: 48}


# --------------------------------------------------------------------------- Hilbert curve
def hilbert_key(ix, iy, order: int) -> np.ndarray:
    """Hilbert index (uint64) of integer cells (ix, iy) on a ``2**order`` square grid."""
    x = np.asarray(ix, dtype=np.uint64).copy()
    y = np.asarray(iy, dtype=np.uint64).copy()
    d = np.zeros(x.shape, dtype=np.uint64)
    full = np.uint64((1 << order) - 1)
    s = 1 << (order - 1) if order > 0 else 0
    while s > 0:
        su = np.uint64(s)
        rx = (x & su) > 0
        ry = (y & su) > 0
        d += su * su * ((np.uint64(3) * rx.astype(np.uint64)) ^ ry.astype(np.uint64))
        flip = (~ry) & rx
        x = np.where(flip, full - x, x)
        y = np.where(flip, full - y, y)
        swap = ~ry
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        s >>= 1
    return d


def hilbert_cell(key, order: int):
    """Inverse of :func:`hilbert_key`: integer cells (ix, iy) of Hilbert indexes."""
    t = np.asarray(key, dtype=np.uint64).copy()
    x = np.zeros(t.shape, dtype=np.uint64)
    y = np.zeros(t.shape, dtype=np.uint64)
    s = 1
    while s < (1 << order):
        su = np.uint64(s)
        rx = np.uint64(1) & (t >> np.uint64(1))
        ry = np.uint64(1) & (t ^ rx)
        flip = (ry == 0) & (rx == 1)
        x = np.where(flip, su - np.uint64(1) - x, x)
        y = np.where(flip, su - np.uint64(1) - y, y)
        swap = ry == 0
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        x += su * rx
        y += su * ry
        t >>= np.uint64(2)
        s <<= 1
    return x, y


def _order(depth: int, dim: int) -> int:
    return depth if dim == 1 else (depth + 1) // 2


def leaf_keys(unit, depth: int) -> np.ndarray:
    """Leaf index (uint64, depth ``depth``) of unit-box coordinates: (n,) or (n, 1) in [0, 1], or (n, 2) in [0, 1]^2."""
    u = np.asarray(unit, dtype=float)
    dim = 1 if u.ndim == 1 or u.shape[1] == 1 else 2
    u = u.reshape(len(u), dim)
    p = _order(depth, dim)
    cells = np.clip(np.floor(u * float(1 << p)), 0, (1 << p) - 1).astype(np.uint64)
    if dim == 1:
        return cells[:, 0]
    key = hilbert_key(cells[:, 0], cells[:, 1], p)
    return key >> np.uint64(2 * p - depth)


def leaf_boxes(keys, depth: int, dim: int, rng=None, placement: str = "uniform") -> np.ndarray:
    """Points in the leaves ``keys``: uniform inside each leaf (``rng`` needed) or at its centre."""
    keys = np.asarray(keys, dtype=np.uint64)
    p = _order(depth, dim)
    extra = (p * dim) - depth  # 0 or 1 in 2-D: a leaf of odd depth is two Hilbert cells
    if extra:
        if placement == "uniform":
            sub = rng.integers(0, 1 << extra, size=len(keys), dtype=np.uint64)
            fine = (keys << np.uint64(extra)) | sub
            cells = _cells(fine, p, dim)
            offset = rng.random((len(keys), dim))
            return (cells + offset) / float(1 << p)
        # centre of a two-cell leaf: the midpoint of its two cells' centres
        c0 = _cells(keys << np.uint64(extra), p, dim)
        c1 = _cells((keys << np.uint64(extra)) | np.uint64(1), p, dim)
        return ((c0 + c1) / 2.0 + 0.5) / float(1 << p)
    cells = _cells(keys, p, dim)
    offset = rng.random((len(keys), dim)) if placement == "uniform" else 0.5
    return (cells + offset) / float(1 << p)


def _cells(keys, p, dim):
    if dim == 1:
        return keys.astype(float)[:, None]
    x, y = hilbert_cell(keys, p)
    return np.column_stack([x.astype(float), y.astype(float)])


# --------------------------------------------------------------------------- noise and scales
def discrete_laplace(scale: float, size, rng: np.random.Generator) -> np.ndarray:
    """Two-sided geometric noise, P(k) proportional to exp(-|k| / scale), as int64, exactly.

    Parameters
    ----------
    scale : float or Fraction
        The scale ``t``; a float is taken at its exact binary value.
    size : int
        Number of draws.
    rng : numpy.random.Generator
        Only ``rng.integers`` is called (integer bounds).

    Returns
    -------
    numpy.ndarray
        int64 noise of length ``size``.

    Notes
    -----
    Drawn by :func:`geopriv.mechanisms.discrete.sample_discrete_laplace` (Canonne, Kamath and
    Steinke 2020): integer draws and rational arithmetic only, so the law is exactly the
    discrete Laplace law of the exact scale; numpy's ``geometric`` (a floating-point inversion
    of a 53-bit uniform) is not used.
    """
    return sample_discrete_laplace(scale, int(size), rng)


def level_scales(method: str, depth: int, epsilon: float, dim: int) -> np.ndarray:
    """Discrete-Laplace scale per tree level, so that the whole tree is ``epsilon``-DP.

    ``srw``: entry ``j`` (0..depth-1) is the scale of the differences at the internal nodes of
    depth ``j``: uniform ``2 * depth / epsilon``.  ``pmm``: entry ``j`` is the scale of the
    counts at depth ``j + 1``: ``(2 / eps) (sum_k sqrt(a_k)) / sqrt(a_j)`` with
    ``a_j = 2**(j (1 - 1/dim))`` (see the module docstring).  In both,
    ``sum_j 2 / scale_j == epsilon``.
    """
    if method == "srw":
        return np.full(depth, 2.0 * depth / epsilon)
    j = np.arange(1, depth + 1, dtype=float)
    root_a = 2.0 ** (j * (1.0 - 1.0 / dim) / 2.0)  # sqrt(a_j)
    return (2.0 / epsilon) * root_a.sum() / root_a


def coefficient_change(method: str, depth: int, key_a: int, key_b: int) -> np.ndarray:
    """Per-level l1 change of the noised coefficients when one person moves from leaf ``key_a`` to ``key_b``.

    The privacy proof's key step: ``sum_j change_j / scale_j <= epsilon`` for every pair.
    Computed directly from the coefficients of the two one-person datasets (not from the
    formula in the proof), so a test of it can fail.
    """

    def coefficients(key):
        out = []
        for j in range(depth):
            if method == "srw":  # differences at depth-j nodes: +1 in the node's left child, -1 in its right
                diff = np.zeros(1 << j)
                node = key >> (depth - j)
                bit = (key >> (depth - j - 1)) & 1
                diff[node] = 1.0 if bit == 0 else -1.0
                out.append(diff)
            else:  # counts at depth j + 1
                counts = np.zeros(1 << (j + 1))
                counts[key >> (depth - j - 1)] = 1.0
                out.append(counts)
        return out

    ca, cb = coefficients(int(key_a)), coefficients(int(key_b))
    return np.array([np.abs(a - b).sum() for a, b in zip(ca, cb)])


# --------------------------------------------------------------------------- the mechanism
def _auto_depth(method: str, n: int, epsilon: float, dim: int) -> int:
    """The depth minimising a public proxy of the expected W1 error (a function of n, epsilon, dim only).

    proxy(L) = half the leaf diameter + sum over internal levels of the mass the noise moves
    (capped by the mass there) times that level's diameter, over n.  The proxy ignores the
    clipping of noise in empty nodes, which helps the srw's uniform noise most: on clustered
    data (bench/synthesize_eval.py, the Soho deaths) its best depth is one level deeper than
    the proxy's minimum, so srw takes that.
    """
    best, best_err = 1, math.inf
    for L in range(1, MAX_DEPTH[dim] + 1):
        scales = level_scales(method, L, epsilon, dim)
        j = np.arange(L, dtype=float)
        diam = 2.0 ** (-j / dim) * math.sqrt(dim)  # internal node at depth j
        per_node = scales / 2.0 if method == "srw" else 0.75 * scales
        moved = np.minimum(2.0**j * per_node, n / 2.0)
        err = 2.0 ** (-L / dim) * math.sqrt(dim) / 2.0 + float((moved * diam / 2.0).sum()) / max(n, 1)
        if err < best_err:
            best, best_err = L, err
        if 2.0**L > 64 * max(n, 1) * max(epsilon, 1.0):
            break
    return min(best + 1, MAX_DEPTH[dim]) if method == "srw" else best


@dataclass(frozen=True)
class PrivateMeasure:
    """An epsilon-DP private measure on the unit interval or square (srw or pmm).

    Parameters
    ----------
    epsilon : float
        Differential privacy loss (dimensionless): replacing one person's location by any
        other in the public box changes the probability of any output by at most exp(epsilon).
    method : {"srw", "pmm"}
        Super-regular random walk (Boedihardjo, Strohmer, Vershynin) or private measure
        mechanism (He, Vershynin, Zhu).
    depth : int or "auto"
        Levels of the binary partition tree (leaves: ``2**depth`` cells along the curve).
        ``"auto"``: a public function of n, epsilon and the dimension.
    dim : 1 or 2
        Values on the unit interval (1) or points in the unit square, along a Hilbert curve (2).

    Raises
    ------
    ParameterError
        ``epsilon`` is not finite and > 0, or ``method``, ``depth`` or ``dim`` is not one of the
        values above.
    ParameterTypeError
        ``epsilon`` is not a number.

    See Also
    --------
    synthesize : Releases a GeoDataFrame's points with this mechanism, in ground metres.
    synthesize_xy : The same for plain coordinates in a public box.
    wasserstein : How far a synthetic set is from the true one, in metres.

    Examples
    --------
    >>> mech = geopriv.PrivateMeasure(1.0)   # srw in the unit square
    >>> mech.resolved_depth(500), round(mech.privacy_loss(500), 6)   # the tree's levels share epsilon
    (6, 1.0)
    >>> unit = geopriv.make_rng(1).generator.random((500, 2))
    >>> points, depth = mech.sample_unit(unit, geopriv.make_rng(0).generator)
    >>> points.shape, bool(((points >= 0) & (points <= 1)).all())
    ((500, 2), True)
    """

    epsilon: float
    method: str = "srw"
    depth: int | str = "auto"
    dim: int = 2

    def __post_init__(self):
        eps = self.epsilon
        if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.integer, np.floating)):
            raise ParameterTypeError(f"epsilon must be a positive number, got {type(eps).__name__}.")
        if not math.isfinite(float(eps)) or float(eps) <= 0:
            raise ParameterError("epsilon must be finite and > 0 (e.g. epsilon=1.0).")
        object.__setattr__(self, "epsilon", float(eps))
        if self.method not in METHODS:
            raise ParameterError(f"method must be one of {METHODS}, got {self.method!r}.")
        if self.dim not in (1, 2):
            raise ParameterError("dim must be 1 or 2 (points on a line or in the plane).")
        if self.depth != "auto":
            d = self.depth
            if (
                isinstance(d, (bool, np.bool_))
                or not isinstance(d, (int, np.integer))
                or not 1 <= int(d) <= MAX_DEPTH[self.dim]
            ):
                raise ParameterError(f"depth must be 'auto' or an integer from 1 to {MAX_DEPTH[self.dim]}, got {d!r}.")
            object.__setattr__(self, "depth", int(d))

    def resolved_depth(self, n: int) -> int:
        """The tree depth for ``n`` people (public: n is public in this privacy model)."""
        return self.depth if self.depth != "auto" else _auto_depth(self.method, int(n), self.epsilon, self.dim)

    def scales(self, n: int) -> np.ndarray:
        return level_scales(self.method, self.resolved_depth(n), self.epsilon, self.dim)

    def privacy_loss(self, n: int) -> float:
        """Worst-case loss of the whole tree: sum over levels of (max l1 change 2) / scale."""
        return float((2.0 / self.scales(n)).sum())

    def leaf_counts(self, keys, rng: np.random.Generator, depth: int | None = None, counts=None):
        """(leaf ids, counts): the noisy, consistent, nonnegative integer measure of the leaf ``keys``.

        ``keys`` are leaf indexes at ``depth`` (see :func:`leaf_keys`), one per person, or, with
        ``counts``, distinct leaves and how many people each holds (a histogram aggregated
        elsewhere, e.g. across dask partitions: the same release).  The result sums to the
        number of people.
        """
        keys = np.asarray(keys, dtype=np.uint64)
        if counts is None:
            keys = np.sort(keys)
            cum = None
            n = len(keys)
        else:
            order = np.argsort(keys, kind="stable")
            keys = keys[order]
            weights = np.asarray(counts, dtype=np.int64)[order]
            if np.any(weights < 0) or np.any(keys[1:] == keys[:-1]):
                raise ParameterError("counts must be >= 0, one per distinct leaf key.")
            cum = np.concatenate([[0], np.cumsum(weights)])
            n = int(cum[-1])
        L = self.resolved_depth(n) if depth is None else int(depth)
        scales = level_scales(self.method, L, self.epsilon, self.dim)
        nodes = np.zeros(1 if n else 0, dtype=np.uint64)
        counts = np.full(1 if n else 0, n, dtype=np.int64)
        one = np.uint64(1)

        def count_below(bound):  # people with key < bound
            pos = np.searchsorted(keys, bound)
            return pos if cum is None else cum[pos]

        for j in range(L):
            if len(nodes) == 0:
                break
            sh = np.uint64(L - j - 1)
            left = nodes << one
            lo = count_below(left << sh)
            mid = count_below((left | one) << sh)
            hi = count_below((left + np.uint64(2)) << sh)
            tl, tr = (mid - lo).astype(np.int64), (hi - mid).astype(np.int64)
            if self.method == "srw":
                d = tl - tr + discrete_laplace(scales[j], len(nodes), rng)
                twice = counts + d  # twice the left child's estimate
                x_left = twice // 2 + ((twice % 2 == 1) & (rng.random(len(nodes)) < 0.5))
            else:
                a = np.maximum(tl + discrete_laplace(scales[j], len(nodes), rng), 0).astype(float)
                c = np.maximum(tr + discrete_laplace(scales[j], len(nodes), rng), 0).astype(float)
                tot = a + c
                share = np.divide(a, tot, out=np.full(len(nodes), 0.5), where=tot > 0)
                target = share * counts
                x_left = np.floor(target).astype(np.int64)
                x_left += rng.random(len(nodes)) < (target - x_left)
            x_left = np.clip(x_left, 0, counts)
            children = np.concatenate([left, left | one])
            child_counts = np.concatenate([x_left, counts - x_left])
            keep = child_counts > 0
            order = np.argsort(children[keep], kind="stable")
            nodes, counts = children[keep][order], child_counts[keep][order]
        return nodes, counts

    def sample_unit(self, unit, rng: np.random.Generator, *, n_out: int | None = None, placement: str = "uniform"):
        """Synthetic unit-box coordinates for the unit-box data ``unit`` ((n,) or (n, dim)).

        ``n_out`` (default n): size of the synthetic set; a different size is drawn from the private
        measure by proportional allocation with randomised rounding (post-processing).
        Returns (points (n_out, dim), depth).
        """
        unit = np.asarray(unit, dtype=float).reshape(-1, self.dim)
        depth = self.resolved_depth(len(unit))
        nodes, counts = self.leaf_counts(leaf_keys(unit, depth), rng, depth)
        return self.place(nodes, counts, depth, rng, n_out=n_out, placement=placement), depth

    def place(
        self,
        nodes,
        counts,
        depth: int,
        rng: np.random.Generator,
        *,
        n_out: int | None = None,
        placement: str = "uniform",
    ) -> np.ndarray:
        """Unit-box points for a noisy measure (leaf ids, counts): post-processing only.

        ``n_out`` (default: the total count) points; a different size is drawn by proportional
        allocation with randomised rounding.
        """
        counts = np.asarray(counts, dtype=np.int64)
        n = int(counts.sum())
        n_out = n if n_out is None else int(n_out)
        if n_out != n and n > 0:
            target = counts * (n_out / n)
            base = np.floor(target).astype(np.int64)
            rest = n_out - int(base.sum())
            if rest > 0:
                frac = target - base
                extra = rng.choice(len(frac), size=rest, replace=False, p=frac / frac.sum())
                base[extra] += 1
            counts = base
        leaves = np.repeat(np.asarray(nodes, dtype=np.uint64), counts)
        return leaf_boxes(leaves, depth, self.dim, rng, placement)

    def describe(self, n: int) -> dict:
        depth = self.resolved_depth(n)
        scales = level_scales(self.method, depth, self.epsilon, self.dim)
        return {
            "mechanism": "super-regular random walk (private measure)"
            if self.method == "srw"
            else "private measure mechanism (noisy partition tree)",
            "method": self.method,
            "definition": "epsilon-differential privacy: one person's location replaced anywhere in the public area; "
            "the number of people is public",
            "epsilon": self.epsilon,
            "depth": depth,
            "curve": "dyadic intervals" if self.dim == 1 else f"Hilbert curve of order {_order(depth, self.dim)}",
            "level_scales": [float(s) for s in scales],
        }


# --------------------------------------------------------------------------- baselines and metrics
def classical_walk_counts(keys, depth: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Baseline: independent discrete Laplace on every leaf count (l1 sensitivity 2), clipped and rescaled to n.

    The "classical random walk" of the paper: its partial sums wander like sqrt(#leaves).
    Returns dense counts over the ``2**depth`` leaves (floats summing to n).
    """
    m = 1 << depth
    counts = np.bincount(np.asarray(keys, dtype=np.int64), minlength=m).astype(float)
    noisy = np.maximum(counts + discrete_laplace(2.0 / epsilon, m, rng), 0).astype(float)
    total = noisy.sum()
    return noisy * (len(keys) / total) if total > 0 else np.full(m, len(keys) / m)


def tree_w1_bound(unit_a, unit_b, depth: int = 20) -> float:
    """An upper bound on W1 between two point sets in the unit box (uniform weights), in box units.

    The tree (ultra)metric of the binary partition dominates the Euclidean one: two points
    whose deepest common node is B are at most diam(B) apart.  W1 in a tree metric is exact and
    cheap: ``sum_B (diam(parent B) - diam(B)) / 2 * |mu(B) - nu(B)| + diam(leaf)``, O((n + m) depth).
    """
    a = np.asarray(unit_a, dtype=float)
    b = np.asarray(unit_b, dtype=float)
    dim = 1 if a.ndim == 1 or a.shape[1] == 1 else 2
    a, b = a.reshape(-1, dim), b.reshape(-1, dim)
    ka, kb = leaf_keys(a, depth), leaf_keys(b, depth)
    wa, wb = 1.0 / len(a), 1.0 / len(b)

    def diam(j):  # diameter of a depth-j node of the unit box
        if dim == 1:
            return 2.0**-j
        return math.hypot(2.0 ** -((j + 1) // 2), 2.0 ** -(j // 2))

    total = 0.0
    for j in range(1, depth + 1):
        sh = np.uint64(depth - j)
        na, ca = np.unique(ka >> sh, return_counts=True)
        nb, cb = np.unique(kb >> sh, return_counts=True)
        nodes = np.union1d(na, nb)
        ma = np.zeros(len(nodes))
        mb = np.zeros(len(nodes))
        ma[np.searchsorted(nodes, na)] = ca * wa
        mb[np.searchsorted(nodes, nb)] = cb * wb
        total += (diam(j - 1) - diam(j)) / 2.0 * float(np.abs(ma - mb).sum())
    return total + diam(depth)
