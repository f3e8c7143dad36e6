"""Eikonal mechanism: location-dependent privacy from a privacy level map.

Koufogiannis and Pappas. "Location-dependent privacy". IEEE CDC 2016 (arXiv:1604.02264),
Algorithm 1; also Koufogiannis' PhD thesis (UPenn 2017), chapter 6, Algorithm 3.

Definition (their Definition 3, local Lipschitz privacy)
    For every set S of outputs, ln P(Q(u) in S) is locally Lipschitz in u with constant
    epsilon(u).  Integrated along a path: two locations joined by a segment are at most
    exp(integral of epsilon along it) times more or less likely to produce any output.

Derivation note (what is built here and why it is exact)
--------------------------------------------------------
Algorithm 1 takes, for every output y, a solution f_y of the eikonal equation
|grad f_y| = epsilon, f_y(y) = 0, and weights w(y) >= 0 with sum_y w(y) exp(-f_y(u)) = 1;
then P(Q(u) = y) = w(y) exp(-f_y(u)) is private because ln P(Q(u) = y) = ln w(y) - f_y(u) has
gradient norm epsilon(u).  Taken literally (outputs = inputs, one square solve) it fails on
real maps: negative weights; clipping them breaks the guarantee.  We keep the *structure*
and change what makes it fragile:

1. Grid.  Inputs are the raster's cell centres (nodes).  The discrete guarantee checked is:
   for every 8-neighbour pair of nodes a, b and every output y,
       |ln P(Q(a) = y) - ln P(Q(b) = y)| <= |a - b| (epsilon(a) + epsilon(b)) / 2,
   the right-hand side being the integral of epsilon along the segment when epsilon is
   constant on cells (or linear between nodes).  Ratios of sums are bounded by the largest
   ratio, so every set S of outputs is covered.
2. Kernels.  f_y is a discrete eikonal solution: the shortest travel time from y on the
   16-neighbour grid graph whose edges carry the integral of (1 - margin) * epsilon along
   them (Dijkstra, as in Tsitsiklis 1995, the paper's reference [13]; within ~3 % of the
   Euclidean geodesic).  Shortest-path distances satisfy |f_y(a) - f_y(b)| <= w(a, b) on
   every edge exactly, so no numerical error can break the guarantee.  (``solver="fmm"``
   uses fast marching, scikit-fmm, instead; its solutions overshoot by up to ~20 % next to
   the source and at jumps of epsilon, so they are then made exactly Lipschitz by a min-plus
   envelope that only lowers f_y.)  Any 1-Lipschitz transformation keeps the property, so
   we also use
       f~_y = min(sqrt(f_y^2 + A_y^2) - A_y, T):
   the hyperbolic apex (A_y ~ epsilon times the local output spacing, where outputs are
   thinned) removes the cusp of exp(-f) at y, which makes sums over a lattice of outputs
   smooth, and the cap T makes the kernel exactly "sparse + constant": exp(-f~) = S +
   exp(-T) with S zero beyond travel time T.  The cap keeps the guarantee (a minimum of
   Lipschitz functions), unlike truncation to zero.
   Real rasters (jumps between municipalities, single cells of sea inside a city) cannot be
   normalised with nonnegative weights (the paper's "not smooth enough" failure), so the
   kernel map is first lowered where needed: 1/epsilon made ``smooth``-Lipschitz and
   epsilon allowed to change by at most a factor exp(``jump``) between neighbouring cells
   (lowering only; the target map is unchanged).
3. Outputs.  A lattice over the raster padded by a few noise lengths on each side (so
   locations at the edge are not pushed inwards), thinned to every 2nd node where
   spacing * epsilon stays below ``output_spacing``.
4. Weights and exact normalisation.  w >= 0 from projected Barzilai-Borwein gradient steps
   on |K w - 1|^2 (sparse products on threads), started at the continuous normaliser.  They need not solve sum_y w exp(-f~) = 1 exactly: we
   normalise exactly, P(Q(u) = y) = w(y) exp(-f~_y(u)) / s(u) with s(u) = sum_y w exp(-f~),
   and the log-ratio between neighbours is then <= (1 - margin) * allowed + |delta ln s|.
   The weights only have to make ln s flat to within ``margin`` of the allowed loss.
5. Verification.  :meth:`EikonalMechanism.verify` recomputes, from the stored arrays, the
   realised |delta ln P| / allowed over every neighbouring pair of nodes and every output
   (the cap term outside each kernel's support is checked through ln s) and reports the
   maximum and where it is.  ``build`` refuses to return a mechanism above 1 + 1e-9.
   Since |alpha_y - d| with alpha_y = ln K_y(a) - ln K_y(b) and d = ln s(a) - ln s(b) is
   largest at the largest or the smallest alpha_y, the kernels enter only through those two
   numbers per edge; ``build`` and the load of a compact file have the kernel workers compute
   them from the very column blocks that are then placed into the sampled arrays
   (:class:`.kernels.LogRatioExtremes`), so verification needs no second pass over the kernels.

Kernels on demand
-----------------
Each kernel column is a deterministic function of the kernel rate map, its output, its apex
radius and the cap, whatever other columns are solved with it.  So a mechanism need not hold
its kernels (``build``/``load`` with ``kernels="on_demand"``, :mod:`.ondemand`): the weight
solve holds the columns truncated at ``solve_cap`` (what it iterates on anyway), a second pass
computes the exact normaliser and the verification's extremes in the workers (each over the
band of raster lines its columns touch) and holds nothing, and sampling recomputes the rows of
the nodes it draws from.  Those rows are the verified values bit for bit, computed one of two
ways.  Many nodes: the same function computes the columns of every output that reaches them
(found by one multi-source shortest-path search on the same, symmetric graph, with a relative
slack of 1e-9; fast marching has no such bound and solves every column), and only the
requested rows are kept.  Few nodes: one search from each node.  That is exact because the
graph's edge weights are rounded down to multiples of a power of two (``kernels.GRAPH_BITS``):
path lengths are then exact sums, so the travel time from u to y is the float the column
search from y computed, bit for bit (unquantised, about half of them differ in the last bit).
What is checked is therefore still exactly what is sampled.

Inputs between nodes
--------------------
A location u inside the cell formed by four neighbouring nodes is released as node a with
the bilinear weights of u (randomised rounding: x and y rounded independently, with
probability equal to the fractional position), then sampled from that node's row.  Hence
P(Q(u) in S) = sum_a lambda_a(u) P(Q(a) in S), a convex combination, so:
  * P(Q(u) in S) is continuous in u (no jumps at cell borders);
  * for u, v in the same cell, the log-ratio is at most the largest log-ratio between two
    corners of the cell (mixtures of distributions pairwise within e^L are within e^L), i.e.
    at most the allowed loss between the two farthest corners; between cells, chain along
    any path of cells.
  * Outside the nodes' hull but inside the raster (half a cell at the border) and, with
    ``with_outside("clamp")``, outside the raster, u is moved to the nearest point of the hull
    first (a 1-Lipschitz map), so it gets the guarantee of that point.
The infinitesimal constant of this interpolation can exceed epsilon inside a cell (up to
(e^L - 1)/L for a per-edge loss L); the guarantee is the grid one stated above, at the
resolution of the raster.

Released points
---------------
The output node plus uniform jitter within +- half its lattice spacing (post-processing: it
does not change the guarantee), so releases do not sit on a visible lattice.

Package layout (one module per step, in the order a build runs them)
--------------------------------------------------------------------
``lowering``      the kernel rate map (lowered copy of the target) and the output lattice;
``kernels``       travel times and kernels per output (worker processes, any start method);
``weights``       nonnegative weights that flatten the normaliser;
``verification``  the guarantee recomputed from exactly what is sampled;
``sampling``      locations to nodes to outputs to released positions;
``persistence``   full and compact files, checksums and signatures;
``stamps``        verification stamps: a file verified once is not verified again by the same user;
``ondemand``      kernels recomputed when needed instead of held (rows for sampling, passes);
``mechanism``     :class:`EikonalMechanism`, which strings them together;
``report``        :class:`VerifyReport`.
"""

from __future__ import annotations

from .mechanism import EikonalMechanism
from .persistence import COMPACT_VERSION, FORMAT, FORMAT_VERSION
from .report import NORMALISER_RTOL, TOLERANCE, VerifyReport

__all__ = [
    "EikonalMechanism",
    "VerifyReport",
    "FORMAT",
    "FORMAT_VERSION",
    "COMPACT_VERSION",
    "TOLERANCE",
    "NORMALISER_RTOL",
]
