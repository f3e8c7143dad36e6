"""Network distances for graded release: hops and effective resistance from one source.

The diffusion mechanism (:mod:`geopriv.mechanisms.diffusion`; Koufogiannis and Pappas,
"Diffusing private data over networks") gives recipient ``j`` a privacy level
``eps(d_j)`` that decreases with its network distance ``d_j`` from the owner of the data.
This module turns a graph into those distances and the distances into privacy levels.

Graphs
------
Every function accepts any of these (normalised by :func:`as_network` to a symmetric CSR
adjacency matrix plus an index of node labels):

=====================================  ===========================================================
input                                  nodes, weights
=====================================  ===========================================================
a networkx ``Graph``/``MultiGraph``     its nodes in ``G.nodes`` order; ``weight=`` names an edge
                                       attribute (default: every edge 1; parallel edges add up).
                                       networkx is imported only when such a graph is passed.
a square scipy.sparse matrix           rows 0..N-1 (or ``nodes=`` labels); non-zero entries are
                                       edges, their values the weights; must be symmetric.
an edge list: (m, 2) array, pairs,    ``nodes=`` labels (include isolated nodes there), else the
or a DataFrame (first two columns)     sorted distinct endpoints; ``weight=`` an (m,) array
                                       (or a column name; default 1).  Each edge once: ``(a, b)`` and
                                       ``(b, a)`` are two parallel edges (weights add; unweighted
                                       duplicates are merged).
a GeoDataFrame of LineStrings          with ``points=`` a GeoDataFrame of Points: the nodes are
                                       the point rows (labels = ``points.index``); each line joins
                                       the points at its first and last vertex, matched exactly
                                       (``tolerance=0``) or within ``tolerance`` CRS units.  An
                                       end within tolerance of no point or of two points is an
                                       error naming the line's label.  ``weight=`` a column.
=====================================  ===========================================================

Weights are conductances (1 / resistance) for :func:`resistance_distance`; hop distances
ignore them.  Self-loops, negative, zero, NaN or infinite weights, directed graphs and
asymmetric matrices are refused with a message saying how to fix the input.

Distances
---------
* :func:`hop_distance`: number of edges on a shortest path (BFS; scipy's csgraph).
* :func:`resistance_distance`: effective resistance with unit (or ``weight``) conductances,
  the paper's eq. (10) ``d_sj = Gamma_ss + Gamma_jj - 2 Gamma_sj`` with ``Gamma = L^+``.
  Equivalently, grounding the source (deleting its row and column from the Laplacian of its
  connected component gives the SPD matrix ``L_s``), ``d_sj = (L_s^{-1})_jj``: we need the
  whole DIAGONAL of an inverse, which we get without forming the inverse by *selected
  inversion* (Takahashi's recurrences, Erisman and Tinney 1975): a sparse LDL^T factorisation
  of ``L_s`` (SuperLU with a minimum-degree ordering and diagonal pivots; for an SPD matrix
  this is the Cholesky factorisation) and, going from the last column to the first,
  ``Z[S, j] = -Z[S, S] l_j`` and ``Z_jj = 1/D_j - l_j . Z[S, j]`` where ``S`` is the pattern
  of column j of the factor.  Only entries of ``Z = L_s^{-1}`` on the factor's pattern are
  computed and stored.  Cost: ``O(sum_j c_j^2)`` flops and ``O(nnz(factor))`` memory, ``c_j``
  the column counts; on SNAP's ego-Facebook (4,039 nodes, 88,234 edges) the factor has about
  264,000 entries and one source takes about 1 s (target 5 s), with a largest relative
  difference of 1.9e-12 (median 8e-13) from a dense ``numpy.linalg.pinv`` of the Laplacian
  (which itself takes about 50 s; docs/diffusion.md has the measurement).
  ``method="dense"`` computes the paper's formula with a dense pseudo-inverse: O(N^3) time,
  O(N^2) memory, for checking small graphs.

Over a layer's rows
-------------------
:func:`network_distances` is the distance from one row of a GeoDataFrame of people to every row,
the graph's nodes named by the rows' index labels, their order or their points
(:func:`layer_network`).  The nodes are put in publication order first (:func:`recipient_order`,
:func:`in_label_order`), so the distances a graded release publishes
(:func:`geopriv.diffuse_locations`) are functions of the labels and the edges only, never of
the rows' order.

Unreachable recipients
----------------------
Nodes not connected to the source have distance ``inf``.  They get NO answer:
:func:`diffuse_over_network` leaves them out, lists them in ``unreachable`` and warns (or
raises, or stays quiet, with ``on_unreachable=``).  Epsilon schedules refuse infinite
distances rather than invent a level for them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse import csgraph

from .exceptions import (
    CRSError,
    EmptyInputError,
    GeometryError,
    GeoprivError,
    GeoprivWarning,
    NetworkError,
    ParameterError,
    ParameterTypeError,
    format_labels,
)
from .mechanisms.diffusion import DiffusionPath, diffuse

__all__ = [
    "EpsilonSchedule",
    "ExponentialEpsilon",
    "Network",
    "NetworkDiffusion",
    "UnreachableRecipientsWarning",
    "as_network",
    "diffuse_over_network",
    "epsilon_of_distance",
    "hop_distance",
    "in_label_order",
    "layer_network",
    "network_distances",
    "recipient_order",
    "resistance_distance",
]


class UnreachableRecipientsWarning(GeoprivWarning):
    """Some nodes are not connected to the source: they get no answer."""


@dataclass(frozen=True)
class Network:
    """A normalised undirected graph: symmetric CSR ``adjacency`` (edge weights) and node ``labels``."""

    adjacency: sp.csr_matrix
    labels: pd.Index

    @property
    def n_nodes(self) -> int:
        return self.adjacency.shape[0]

    @property
    def n_edges(self) -> int:
        return int(sp.triu(self.adjacency, k=1).nnz)

    def index_of(self, label) -> int:
        """Position of node ``label`` (GeoprivError naming the label if it is not a node)."""
        try:
            pos = self.labels.get_loc(label)
        except (KeyError, TypeError):
            pos = None
        if not isinstance(pos, (int, np.integer)):
            raise NetworkError(
                f"source {label!r} is not a node of the graph ({self.n_nodes} nodes, e.g. "
                f"{format_labels(self.labels[:5])}). Pass the label of the node that owns the data."
            )
        return int(pos)


# --------------------------------------------------------------------------------------------
# normalisation
# --------------------------------------------------------------------------------------------


def _is_networkx(obj) -> bool:
    return type(obj).__module__.split(".")[0] == "networkx" and hasattr(obj, "nodes") and hasattr(obj, "edges")


def _is_geodataframe(obj) -> bool:
    return type(obj).__name__ == "GeoDataFrame" and hasattr(obj, "geometry")


def _unique_labels(labels, what: str) -> pd.Index:
    index = pd.Index(labels)
    if index.has_duplicates:
        dup = index[index.duplicated()].unique()
        raise NetworkError(f"{what} has duplicate node labels {format_labels(dup)}; every node needs its own label.")
    return index


def _finish(adj: sp.spmatrix, labels: pd.Index, zero_is_edge: bool = True) -> Network:
    """Checks shared by all inputs; returns the Network.

    ``zero_is_edge``: the input lists edges explicitly (networkx, edge list, lines), so a stored
    zero is an edge with weight 0 and is refused; in a sparse matrix a stored zero is no edge.
    """
    adj = sp.csr_matrix(adj, dtype=float)
    adj.sum_duplicates()
    if zero_is_edge and np.any(adj.data == 0):
        raise NetworkError(
            "some edges have weight 0; weights are conductances and must be > 0. Drop those edges instead."
        )
    adj.eliminate_zeros()
    n = adj.shape[0]
    if n == 0:
        raise EmptyInputError("the graph has no nodes; give a graph with at least the source node.")
    if len(labels) != n:
        raise NetworkError(f"{len(labels)} node labels for a graph of {n} nodes; give one label per node.")
    data = adj.data
    if not np.all(np.isfinite(data)) or np.any(data < 0):
        raise NetworkError(
            "the graph has negative, NaN or infinite edge weights; weights are conductances and must be finite "
            "and > 0 (drop an edge instead of giving it weight 0)."
        )
    diag = adj.diagonal()
    if np.any(diag != 0):
        loops = labels[np.flatnonzero(diag)]
        raise NetworkError(
            f"the graph has self-loops at nodes {format_labels(loops)}; they have no meaning for distances. Remove "
            "them (networkx: G.remove_edges_from(nx.selfloop_edges(G)); sparse: A.setdiag(0); A.eliminate_zeros())."
        )
    asym = abs(adj - adj.T)
    if asym.nnz and asym.max() > 1e-12 * max(1.0, float(np.abs(data).max(initial=0.0))):
        raise NetworkError(
            "the adjacency matrix is not symmetric; distances here are for undirected graphs. Symmetrise it, e.g. "
            "A = A.maximum(A.T) (an edge either way) or A = A + A.T."
        )
    adj.sort_indices()
    return Network(adj, labels)


def _check_weights(w: np.ndarray) -> np.ndarray:
    if not (np.all(np.isfinite(w)) and np.all(w > 0)):
        raise NetworkError(
            "edge weights must be finite and > 0 (they are conductances); drop an edge instead of giving it weight 0."
        )
    return w


def as_network(graph, *, nodes=None, points=None, tolerance: float = 0.0, weight=None) -> Network:
    """Normalise a graph given in any supported form (see the module docstring) to a :class:`Network`.

    Parameters
    ----------
    graph : networkx graph, scipy.sparse matrix, edge list, GeoDataFrame of lines, or Network
    nodes : sequence, optional
        Node labels: for a sparse matrix, one per row; for an edge list, all nodes (including
        isolated ones) that the edges refer to.
    points : GeoDataFrame, optional
        The nodes of a GeoDataFrame of lines (one Point per row).
    tolerance : float
        Largest distance (CRS units) between a line end and its point; 0 means exact equality.
    weight : str or array_like, optional
        Edge weights (conductances): an edge attribute (networkx), a column (lines), or one
        number per edge (edge list).  Default: every edge 1.
    """
    if isinstance(graph, Network):
        return graph
    if _is_networkx(graph):
        return _from_networkx(graph, weight)
    if sp.issparse(graph):
        if graph.ndim != 2 or graph.shape[0] != graph.shape[1]:
            raise NetworkError(f"an adjacency matrix must be square, got shape {graph.shape}.")
        labels = pd.RangeIndex(graph.shape[0]) if nodes is None else _unique_labels(nodes, "nodes")
        return _finish(graph, labels)
    if _is_geodataframe(graph):
        return _from_lines(graph, points, tolerance, weight)
    if isinstance(graph, pd.DataFrame):  # an edge table: its first two columns are the endpoints
        if graph.shape[1] < 2:
            raise NetworkError("an edge table needs two columns (the two ends of each edge).")
        if isinstance(weight, str):
            weight = graph[weight].to_numpy()
        return _from_edges(graph.iloc[:, :2].to_numpy(), nodes, weight)
    if isinstance(graph, (np.ndarray, list, tuple)):
        return _from_edges(graph, nodes, weight)
    raise ParameterTypeError(
        "graph must be a networkx graph, a square scipy.sparse adjacency matrix, an (m, 2) edge list, or a "
        f"GeoDataFrame of LineStrings with points=; got {type(graph).__name__}."
    )


def _from_networkx(G, weight) -> Network:
    import networkx as nx  # only when the caller already uses networkx

    if G.is_directed():
        raise NetworkError(
            "the networkx graph is directed; distances here are for undirected graphs. Pass G.to_undirected()."
        )
    labels = _unique_labels(list(G.nodes), "the graph")
    if len(labels) == 0:
        raise EmptyInputError("the graph has no nodes; give a graph with at least the source node.")
    if weight is not None:
        missing = [e for e in G.edges(data=True) if weight not in e[2]]
        if missing:
            raise NetworkError(
                f"{len(missing)} edge(s) have no {weight!r} attribute (e.g. between {missing[0][0]!r} and "
                f"{missing[0][1]!r}); give every edge a weight or pass weight=None for unit weights."
            )
    adj = nx.to_scipy_sparse_array(G, nodelist=list(G.nodes), weight=weight, format="csr", dtype=float)
    return _finish(sp.csr_matrix(adj), labels, zero_is_edge=weight is not None)


def _from_edges(edges, nodes, weight) -> Network:
    try:
        arr = np.asarray(edges, dtype=object) if not isinstance(edges, np.ndarray) else edges
    except ValueError:
        raise NetworkError("the edge list must be pairs (a, b); some entries are not pairs.") from None
    if arr.size == 0:
        arr = np.zeros((0, 2), dtype=object)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise NetworkError(f"an edge list must have shape (m, 2) (one pair per edge), got shape {arr.shape}.")
    flat = arr.reshape(-1)
    if nodes is None:
        ends = pd.unique(pd.Series(flat, dtype=object if arr.dtype == object else arr.dtype))
        try:
            ends = np.sort(ends)
        except TypeError:  # labels of mixed types: keep first-appearance order
            pass
        labels = pd.Index(list(ends))  # infer the labels' dtype (int64 for integer ids)
    else:
        labels = _unique_labels(nodes, "nodes")
    if len(labels) == 0:
        raise EmptyInputError("the edge list is empty and no nodes= were given; give at least the source node.")
    pos = labels.get_indexer(pd.Index(flat))
    if np.any(pos < 0):
        unknown = pd.unique(pd.Series(flat[pos < 0], dtype=object))
        raise NetworkError(
            f"the edge list refers to {len(unknown)} node(s) not in nodes=: {format_labels(unknown)}. Add them to "
            "nodes= or fix the edges."
        )
    m = arr.shape[0]
    if weight is None:
        w = np.ones(m)
    else:
        w = np.asarray(weight, dtype=float).reshape(-1)
        if w.size != m:
            raise NetworkError(f"weight= has {w.size} values for {m} edges; give one weight per edge.")
        _check_weights(w)
    i, j = pos[0::2], pos[1::2]
    n = len(labels)
    loops = i == j
    if loops.any():
        raise NetworkError(
            f"the edge list has {int(loops.sum())} self-loop(s) (at nodes {format_labels(labels[i[loops]])}); "
            "remove them."
        )
    adj = sp.coo_matrix(
        (np.concatenate([w, w]), (np.concatenate([i, j]), np.concatenate([j, i]))), shape=(n, n)
    ).tocsr()
    adj.sum_duplicates()
    if weight is None:
        adj.data[:] = 1.0  # duplicate unweighted edges are the same edge
    return _finish(adj, labels)


def _from_lines(lines, points, tolerance, weight) -> Network:
    import shapely
    from scipy.spatial import cKDTree

    if points is None or not _is_geodataframe(points):
        raise NetworkError(
            "a GeoDataFrame of lines needs points=, a GeoDataFrame of Points whose rows are the nodes the lines join."
        )
    if lines.crs != points.crs:
        raise CRSError(
            f"the lines (CRS {lines.crs}) and the points (CRS {points.crs}) are not in the same CRS; reproject one, "
            "e.g. lines = lines.to_crs(points.crs)."
        )
    tol = float(tolerance)
    if not math.isfinite(tol) or tol < 0:
        raise NetworkError(f"tolerance must be finite and >= 0 (CRS units), got {tolerance!r}.")
    labels = _unique_labels(points.index, "points")
    if len(labels) == 0:
        raise EmptyInputError("points= has no rows; the graph needs at least the source node.")
    pg = points.geometry.values
    bad = np.asarray(pg.isna() | pg.is_empty | (shapely.get_type_id(pg) != 0), dtype=bool)
    if bad.any():
        raise GeometryError(
            "of points= are not single non-empty Points",
            points.index[bad],
            "Every node must be one Point; drop or fix these rows.",
        )
    xy = shapely.get_coordinates(pg)
    if not np.all(np.isfinite(xy)):
        raise GeometryError(
            "of points= have non-finite coordinates", points.index[~np.isfinite(xy).all(1)], "Fix or drop them."
        )
    lg = lines.geometry.values
    badl = np.asarray(lg.isna() | lg.is_empty | (shapely.get_type_id(lg) != 1), dtype=bool)
    if badl.any():
        raise GeometryError(
            "of the lines are not single non-empty LineStrings",
            lines.index[badl],
            "Explode MultiLineStrings (lines.explode()) and drop empty or missing geometries.",
        )
    starts = shapely.get_coordinates(shapely.get_point(lg, 0))
    ends = shapely.get_coordinates(shapely.get_point(lg, -1))
    tree = cKDTree(xy)
    k = 2 if len(xy) > 1 else 1
    idx = []
    for ends_xy in (starts, ends):
        dist, nearest = tree.query(ends_xy, k=k)
        dist = np.asarray(dist, dtype=float).reshape(len(ends_xy), k)
        nearest = np.asarray(nearest).reshape(len(ends_xy), k)
        unmatched = dist[:, 0] > tol
        if unmatched.any():
            raise NetworkError(
                f"{int(unmatched.sum())} line(s) have an end that is not at any point "
                f"{'exactly' if tol == 0 else f'within tolerance={tol:g}'}: labels {format_labels(lines.index[unmatched])}. "
                "Snap the lines to the points or pass a larger tolerance= (CRS units)."
            )
        if k == 2:
            ambiguous = dist[:, 1] <= tol
            if ambiguous.any():
                raise NetworkError(
                    f"{int(ambiguous.sum())} line end(s) are within tolerance={tol:g} of two or more points: lines "
                    f"{format_labels(lines.index[ambiguous])}. Lower tolerance= or merge the duplicate points."
                )
        idx.append(nearest[:, 0])
    i, j = idx
    loops = i == j
    if loops.any():
        raise NetworkError(
            f"{int(loops.sum())} line(s) start and end at the same point (self-loops): labels "
            f"{format_labels(lines.index[loops])}. Drop them."
        )
    n = len(labels)
    w = np.ones(len(i)) if weight is None else _check_weights(np.asarray(lines[weight], dtype=float))
    adj = sp.coo_matrix(
        (np.concatenate([w, w]), (np.concatenate([i, j]), np.concatenate([j, i]))), shape=(n, n)
    ).tocsr()
    adj.sum_duplicates()
    if weight is None:
        adj.data[:] = 1.0
    return _finish(adj, labels)


# --------------------------------------------------------------------------------------------
# distances
# --------------------------------------------------------------------------------------------


def hop_distance(graph, source, **graph_options) -> pd.Series:
    """Number of edges on a shortest path from ``source`` to every node (``inf`` if unreachable).

    Parameters
    ----------
    graph : networkx graph, scipy.sparse matrix, edge list, GeoDataFrame of lines, or Network
        The network, in any form accepted by :func:`as_network`.
    source : hashable
        The label of the node that owns the data.
    **graph_options
        ``nodes=``, ``points=``, ``tolerance=``, ``weight=`` for :func:`as_network` (weights are
        ignored: every edge is one hop).

    Returns
    -------
    pandas.Series
        Hops (float; ``inf``: not connected) indexed by node label, named ``"hops"``.

    Raises
    ------
    geopriv.exceptions.NetworkError
        If the graph cannot be used, or ``source`` is not one of its nodes.

    See Also
    --------
    resistance_distance : A smoother distance that counts every path.
    network_distances : Either distance from a row of a GeoDataFrame to every row.
    epsilon_of_distance : A privacy level per distance.

    Examples
    --------
    >>> edges = [("ann", "bob"), ("bob", "cat"), ("ann", "cat"), ("cat", "dan")]
    >>> geopriv.hop_distance(edges, "ann")
    ann    0.0
    bob    1.0
    cat    1.0
    dan    2.0
    Name: hops, dtype: float64

    A node named in ``nodes=`` but on no edge is not connected:

    >>> geopriv.hop_distance(edges, "ann", nodes=["ann", "bob", "cat", "dan", "eve"]).tolist()
    [0.0, 1.0, 1.0, 2.0, inf]
    """
    net = as_network(graph, **graph_options)
    s = net.index_of(source)
    d = csgraph.shortest_path(net.adjacency, method="D", unweighted=True, directed=False, indices=s)
    return pd.Series(np.asarray(d, dtype=float), index=net.labels, name="hops")


def resistance_distance(graph, source, *, method: str = "sparse", **graph_options) -> pd.Series:
    """Effective resistance between ``source`` and every node (``inf`` if unreachable).

    Edges are unit resistors (or conductances ``weight``).  ``method="sparse"`` (default):
    selected inversion of the grounded Laplacian's sparse Cholesky factor (module docstring);
    ``method="dense"``: the paper's ``Gamma_ss + Gamma_jj - 2 Gamma_sj`` with a dense
    pseudo-inverse of the component's Laplacian (O(N^3); a reference for small graphs).

    Parameters
    ----------
    graph : networkx graph, scipy.sparse matrix, edge list, GeoDataFrame of lines, or Network
        The network, in any form accepted by :func:`as_network`.
    source : hashable
        The label of the node that owns the data.
    method : {"sparse", "dense"}
        Sparse selected inversion (default), or a dense pseudo-inverse (small graphs).
    **graph_options
        ``nodes=``, ``points=``, ``tolerance=``, ``weight=`` for :func:`as_network` (weights
        are conductances: an edge of weight 2 is a resistor of 1/2).

    Returns
    -------
    pandas.Series
        Effective resistance (float, in units of one edge's resistance; ``inf``: not connected)
        indexed by node label, named ``"resistance"``.

    Raises
    ------
    NetworkError
        The graph cannot be used, or its weights span a range too wide for float64 (the
        Laplacian is numerically singular): the message says how to rescale them.
    geopriv.exceptions.ParameterError
        If ``method`` is not "sparse" or "dense".

    See Also
    --------
    hop_distance : The number of edges on a shortest path.
    network_distances : Either distance from a row of a GeoDataFrame to every row.
    diffuse_over_network : Answers graded by either distance.

    Examples
    --------
    Two routes join ann and bob (one edge, and two through cat): resistances 1 and 2 in parallel, 2/3.

    >>> edges = [("ann", "bob"), ("bob", "cat"), ("ann", "cat"), ("cat", "dan")]
    >>> geopriv.resistance_distance(edges, "ann").round(3)
    ann    0.000
    bob    0.667
    cat    0.667
    dan    1.667
    Name: resistance, dtype: float64
    >>> geopriv.resistance_distance(edges, "ann", method="dense").round(3).tolist()
    [0.0, 0.667, 0.667, 1.667]
    """
    if method not in ("sparse", "dense"):
        raise ParameterError(f"method must be 'sparse' or 'dense', got {method!r}.")
    net = as_network(graph, **graph_options)
    s = net.index_of(source)
    n = net.n_nodes
    _, comp = csgraph.connected_components(net.adjacency, directed=False)
    members = np.flatnonzero(comp == comp[s])
    out = np.full(n, np.inf)
    out[s] = 0.0
    if members.size > 1:
        sub = net.adjacency[members][:, members]
        lap = csgraph.laplacian(sub).tocsc()
        local_s = int(np.searchsorted(members, s))
        if not np.all(np.isfinite(lap.data)):  # weights near the float64 limits: degrees overflow
            raise NetworkError(_SINGULAR)
        if method == "dense":
            try:
                gamma = np.linalg.pinv(lap.toarray(), hermitian=True)
            except np.linalg.LinAlgError:
                raise NetworkError(_SINGULAR) from None
            g = np.diag(gamma)
            out[members] = g[local_s] + g - 2.0 * gamma[local_s]
            out[s] = 0.0
        else:
            keep = np.ones(members.size, dtype=bool)
            keep[local_s] = False
            grounded = lap[keep][:, keep].tocsc()
            out[members[keep]] = _inverse_diagonal_spd(grounded)
            if not np.all(out[members[keep]] > 0):
                raise NetworkError(_SINGULAR)
        if not np.all(np.isfinite(out[members])):
            raise NetworkError(_SINGULAR)
    return pd.Series(out, index=net.labels, name="resistance")


#: why resistance distances failed on extreme weights, and what to do (no weight is quoted: they are data)
_SINGULAR = (
    "the resistance distances cannot be computed: the edge weights (conductances) span a range too wide for "
    "float64 (the largest and smallest differ by more than about 1e15, or some are near the limits of floating "
    "point), so the network's Laplacian is numerically singular. Rescale the weights into a moderate range (e.g. "
    "divide them by their median), merge nodes joined by edges far stronger than the rest, or drop edges far "
    "weaker than the rest (their resistance is practically infinite); or use distance='hops'."
)


def _inverse_diagonal_spd(a: sp.csc_matrix) -> np.ndarray:
    """Diagonal of the inverse of a sparse SPD matrix by selected inversion (Takahashi).

    ``P a P^T = L D L^T`` (SuperLU with a symmetric minimum-degree ordering and diagonal
    pivots), then for j = n-1 .. 0 with ``S`` the sub-diagonal pattern of column j of L:
    ``Z[S, j] = -Z[S, S] L[S, j]``, ``Z[j, j] = 1/D_j - L[S, j] . Z[S, j]``; ``Z = (P a P^T)^{-1}``
    is needed only on the pattern of L, which is closed under this recurrence once completed to
    the symbolic Cholesky pattern (for ``a, b`` in ``S_j``, ``a > b``: ``a`` is in ``S_b``).
    """
    from scipy.sparse.linalg import splu

    n = a.shape[0]
    if n == 1:
        return np.array([1.0 / a[0, 0]])
    try:
        lu = splu(a, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    except RuntimeError:  # SuperLU: "Factor is exactly singular"
        raise NetworkError(_SINGULAR) from None
    perm = lu.perm_c
    if not np.array_equal(lu.perm_r, perm):
        # SuperLU pivoted off the diagonal (not expected for an SPD matrix): factor the
        # symmetrically permuted matrix in natural order instead.
        inv = np.empty(n, dtype=np.int64)
        inv[perm] = np.arange(n)
        permuted = a[inv][:, inv].tocsc()
        try:
            lu = splu(permuted, permc_spec="NATURAL", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        except RuntimeError:
            raise NetworkError(_SINGULAR) from None
        if not np.array_equal(lu.perm_r, np.arange(n)):
            raise NetworkError(_SINGULAR)
    d = lu.U.diagonal()
    if not (np.all(np.isfinite(d)) and np.all(d > 0)):
        raise NetworkError(_SINGULAR)
    low = sp.tril(lu.L.tocsc(), k=-1).tocsc()
    low.sort_indices()
    # pattern of the permuted matrix (the factor's pattern must contain it) and symbolic closure
    coo = a.tocoo()
    pa = sp.csc_matrix((np.ones(coo.nnz), (perm[coo.row], perm[coo.col])), shape=(n, n))
    pa = sp.tril(pa, k=-1).tocsc()
    pa.sort_indices()
    struct = []
    for j in range(n):
        rows = np.union1d(low.indices[low.indptr[j] : low.indptr[j + 1]], pa.indices[pa.indptr[j] : pa.indptr[j + 1]])
        struct.append(rows)
    for j in range(n):  # forward pass: S_j minus its first entry p must lie in S_p
        rows = struct[j]
        if rows.size > 1:
            p = rows[0]
            extra = rows[1:]
            if not np.isin(extra, struct[p], assume_unique=True).all():
                struct[p] = np.union1d(struct[p], extra)
    counts = np.fromiter((r.size for r in struct), dtype=np.int64, count=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(counts + 1)
    rows = np.empty(ptr[-1], dtype=np.int64)
    for j in range(n):
        rows[ptr[j]] = j
        rows[ptr[j] + 1 : ptr[j + 1]] = struct[j]
    keys = np.repeat(np.arange(n, dtype=np.int64), counts + 1) * n + rows
    lval = np.zeros(ptr[-1])
    lc = low.tocoo()
    lval[np.searchsorted(keys, lc.col.astype(np.int64) * n + lc.row)] = lc.data
    z = np.zeros(ptr[-1])
    tri: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for j in range(n - 1, -1, -1):
        a0, a1 = ptr[j], ptr[j + 1]
        m = a1 - a0 - 1
        if m == 0:
            z[a0] = 1.0 / d[j]
            continue
        s = rows[a0 + 1 : a1]
        lj = lval[a0 + 1 : a1]
        t = tri.get(m)
        if t is None:
            t = tri[m] = np.tril_indices(m)
        ia, ib = t
        want = s[ib] * n + s[ia]
        pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        if not np.array_equal(keys[pos], want):  # the pattern is closed by construction; never silently misread
            raise NetworkError("internal error in selected inversion (pattern not closed); use method='dense'.")
        vals = z[pos]
        block = np.empty((m, m))
        block[ia, ib] = vals
        block[ib, ia] = vals
        zj = -(block @ lj)
        z[a0 + 1 : a1] = zj
        z[a0] = 1.0 / d[j] - lj @ zj
    diag_permuted = z[ptr[:-1]]
    return diag_permuted[perm]


# --------------------------------------------------------------------------------------------
# distances over a layer's rows (the people of a graded release, named by their index labels)
# --------------------------------------------------------------------------------------------

#: the network distances a graded release over a layer can be graded by
DISTANCES = ("hops", "resistance")


def recipient_order(labels) -> np.ndarray:
    """Positions that put ``labels`` in publication order: sorted labels (a function of the labels only).

    Labels that cannot be compared with each other (mixed types) are ordered by type name,
    then by value within a type (:func:`geopriv.mechanisms.diffusion.typed_label` text).

    Parameters
    ----------
    labels : pandas.Index

    Returns
    -------
    numpy.ndarray of int
    """
    from .mechanisms.diffusion import typed_label

    labels = pd.Index(labels)
    try:
        return np.asarray(labels.argsort(kind="stable"))
    except TypeError:
        keys = [typed_label(v) for v in labels]
        return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.intp)


def layer_network(graph, data, tolerance: float = 0.0, weight=None) -> Network:
    """The network between the rows of ``data`` (a layer of people), from any form :func:`network_distances` takes.

    A sparse matrix's rows are the layer's rows in order, an edge list's ends are its index
    labels, a GeoDataFrame of lines joins its points; a networkx graph names its own nodes.
    Nodes that are not rows of the layer are refused here (a sparse matrix of another size,
    edge ends that are no label); a graph's are refused by :func:`network_distances`.
    """
    import geopandas as gpd

    if sp.issparse(graph):
        if graph.shape[0] != len(data):
            raise GeoprivError(
                f"the adjacency matrix is {graph.shape[0]} x {graph.shape[1]} but the layer has {len(data)} rows; its "
                "rows must be the layer's rows, in order."
            )
        return as_network(graph, nodes=data.index, weight=weight)
    if isinstance(graph, gpd.GeoDataFrame):
        return as_network(graph, points=data, tolerance=tolerance, weight=weight)
    if isinstance(graph, (np.ndarray, list, tuple, pd.DataFrame)):
        ends = graph.iloc[:, :2].to_numpy() if isinstance(graph, pd.DataFrame) else np.asarray(graph, dtype=object)
        if ends.ndim != 2 or ends.shape[1] != 2:
            raise GeoprivError("an edge list must have two entries per edge (the row labels of its two ends).")
        extra = pd.Index(pd.unique(ends.ravel())).difference(data.index)
        if len(extra):
            raise GeoprivError(
                f"{len(extra)} node(s) of the edge list are not rows of the layer: {format_labels(extra)}. Name the "
                "edges' ends by the layer's index labels (gdf.index), or drop those edges."
            )
        return as_network(graph, nodes=data.index, weight=weight)
    return as_network(graph, weight=weight)


def in_label_order(net: Network) -> Network:
    """``net`` with its nodes in publication order (:func:`recipient_order` of its labels).

    A resistance distance's low-order bits depend on the order of the nodes in the solver; the
    nodes come in the order of the layer's rows (or of the graph's nodes), which is often spatial
    and never published.  In label order the distances, and so the published epsilons, their
    largest value and the lattice step that follows it, are functions of the labels and the edges only.
    """
    perm = recipient_order(net.labels)
    if np.array_equal(perm, np.arange(len(perm))):
        return net
    adj = net.adjacency[perm][:, perm].tocsr()
    adj.sort_indices()
    return Network(adj, net.labels[perm])


def network_distances(data, graph, source, *, distance: str = "hops", tolerance: float = 0.0, weight=None) -> pd.Series:
    """Network distance from row ``source`` to every row of ``data`` (inf: not connected, or not in the graph).

    Parameters
    ----------
    data : GeoDataFrame
        The people, one row each, named by their index labels.
    graph : networkx graph, edge list, scipy sparse matrix or GeoDataFrame of lines
        A networkx graph or an (m, 2) edge list / two-column table of row labels, a scipy
        sparse adjacency matrix over the rows in order, or a GeoDataFrame of LineStrings between
        the rows' points (ends matched within ``tolerance`` CRS units).
    source : hashable
        The index label of the source row.
    distance : {"hops", "resistance"}
        Shortest-path hops, or effective resistance (sparse selected inversion).
    tolerance : float
        Matching of line ends to points (line networks only).
    weight : column label or array, optional
        Edge weights (conductances); default every edge 1.

    Returns
    -------
    pandas.Series
        ``distance``, indexed like ``data``: hops (a whole number) or ohms of unit resistors.

    Raises
    ------
    geopriv.GeoprivError
        If ``distance`` is unknown, the graph names nodes that are not rows of ``data``, or
        ``source`` is not a node of the graph.

    See Also
    --------
    diffuse_locations : A location released to every row, graded by this distance.
    hop_distance : Hops from a node of a network.
    resistance_distance : Effective resistance from a node of a network.

    Notes
    -----
    Duplicate edges count differently by input type (:func:`geopriv.network.as_network`), and
    only for ``"resistance"`` (hops never depend on them):

    * edge list, table or line layer: an edge given twice (also as ``(a, b)`` and ``(b, a)``)
      is ONE edge of weight 1 without ``weight=``; with ``weight=`` the weights of the copies add
      up (parallel conductances);
    * networkx ``MultiGraph``: parallel edges add up, also without ``weight=`` (k parallel edges
      are one edge of conductance k); a ``Graph`` has no duplicates;
    * scipy sparse matrix: an entry is the weight; duplicate COO entries add up.

    De-duplicate the input (or give it weights) when this matters for your resistance distances.

    Examples
    --------
    Four people (UTM zone 50N, metres) and who knows whom, as an edge list of index labels:

    >>> people = gpd.GeoDataFrame(index=["ann", "bob", "cat", "dan"], crs="EPSG:32650",
    ...                           geometry=gpd.points_from_xy([500300, 500000, 500900, 500100],
    ...                                                       [4400100, 4400600, 4400200, 4400000]))
    >>> edges = [("ann", "bob"), ("bob", "cat"), ("ann", "cat"), ("cat", "dan")]
    >>> geopriv.network_distances(people, edges, "ann").tolist()
    [0.0, 1.0, 1.0, 2.0]

    Effective resistance counts the two routes from ann to bob (1 and 2 edges): 2/3.

    >>> geopriv.network_distances(people, edges, "ann", distance="resistance").round(3).tolist()
    [0.0, 0.667, 0.667, 1.667]
    """
    if distance not in DISTANCES:
        raise GeoprivError(f"distance must be 'hops' or 'resistance', got {distance!r}.")
    net = layer_network(graph, data, tolerance, weight)
    extra = net.labels.difference(data.index)
    if len(extra):
        raise GeoprivError(
            f"{len(extra)} node(s) of the graph are not rows of the layer: {format_labels(extra)}. Name the graph's "
            "nodes by the layer's index labels (gdf.index), or drop those nodes."
        )
    if source not in net.labels:
        net.index_of(source)  # raises, naming the source
    net = in_label_order(net)
    d = hop_distance(net, source) if distance == "hops" else resistance_distance(net, source)
    return d.reindex(data.index, fill_value=np.inf).rename("distance")


# --------------------------------------------------------------------------------------------
# epsilon of distance
# --------------------------------------------------------------------------------------------


class EpsilonSchedule:
    """A privacy level per distance: positive, and never larger for a farther recipient.

    Build with :func:`epsilon_of_distance`; call with an array of finite distances.
    """

    def __init__(
        self, function: Callable | None = None, table: tuple[np.ndarray, np.ndarray] | None = None, kind: str = "linear"
    ):
        self._function = function
        self._table = table
        self._kind = kind

    def __repr__(self) -> str:
        if self._table is not None:
            return f"EpsilonSchedule(table of {self._table[0].size} points, kind={self._kind!r})"
        return f"EpsilonSchedule({getattr(self._function, '__name__', 'function')})"

    def __call__(self, distances) -> np.ndarray:
        d = np.asarray(distances, dtype=float)
        scalar = d.ndim == 0
        d = np.atleast_1d(d)
        if np.any(np.isnan(d)) or np.any(d < 0):
            raise ParameterError("distances must be >= 0 (and not NaN).")
        if np.any(np.isinf(d)):
            raise ParameterError(
                f"{int(np.isinf(d).sum())} distance(s) are inf: those recipients are not connected to the source and "
                "get no answer. Drop them before asking for their epsilon (diffuse_over_network does this)."
            )
        if self._table is not None:
            xs, ys = self._table
            if self._kind == "linear":
                eps = np.interp(d, xs, ys)
            else:  # step: eps_i on [d_i, d_{i+1}), eps_0 below d_0, eps_last beyond
                eps = ys[np.clip(np.searchsorted(xs, d, side="right") - 1, 0, xs.size - 1)]
        else:
            eps = self._evaluate(d)
        if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
            bad = ~np.isfinite(eps) | (eps <= 0)
            raise ParameterError(
                f"the epsilon function gives {int(bad.sum())} value(s) that are not finite and > 0 (e.g. at distance "
                f"{d[bad][0]:g}); every reachable recipient needs a positive finite epsilon. Fix the function, e.g. "
                "add a floor: lambda d: np.maximum(f(d), 1e-3)."
            )
        order = np.argsort(d, kind="stable")
        ds, es = d[order], eps[order]
        rise = np.flatnonzero(es[1:] > es[:-1] * (1 + 1e-12))
        if rise.size:
            k = rise[0]
            raise ParameterError(
                f"the epsilon function increases with distance (eps({ds[k + 1]:g}) = {es[k + 1]:g} > eps({ds[k]:g}) = "
                f"{es[k]:g}): a farther recipient would get a more accurate answer than a closer one. Use a "
                "non-increasing function of distance, e.g. lambda d: np.exp(-3.3 * d + 4)."
            )
        return eps[0] if scalar else eps

    def _evaluate(self, d: np.ndarray) -> np.ndarray:
        try:
            eps = np.asarray(self._function(d), dtype=float)
        except Exception:
            eps = None
        if eps is None or eps.shape != d.shape:
            eps = np.array([float(self._function(float(x))) for x in d])
        return eps


class ExponentialEpsilon:
    """epsilon(d) = exp(b - a d): Koufogiannis and Pappas' form (their Facebook example: a = 3.3, b = 4)."""

    def __init__(self, a: float, b: float):
        a, b = float(a), float(b)
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ParameterError("epsilon(d) = exp(b - a d): a and b must be finite numbers.")
        if a < 0:
            raise ParameterError(
                f"epsilon(d) = exp(b - a d) with a = {a:g} < 0 increases with distance: a farther recipient would get "
                "a more accurate answer than a closer one. Give a >= 0."
            )
        self.a, self.b = a, b
        self.__name__ = f"exp({b:g} - {a:g} d)"

    def __call__(self, d):
        return np.exp(self.b - self.a * np.asarray(d, dtype=float))


def epsilon_of_distance(spec, *, kind: str = "linear") -> EpsilonSchedule:
    """Turn a privacy policy into an :class:`EpsilonSchedule` (distance -> epsilon).

    Parameters
    ----------
    spec : callable, (distances, epsilons) pair, mapping {distance: epsilon}, or EpsilonSchedule
        A callable is applied to arrays of distances (element by element if it does not
        vectorise), e.g. the paper's Facebook example ``lambda d: np.exp(-3.3 * d + 4)``.  A
        table gives epsilon at increasing distances.
    kind : {"linear", "step"}
        For tables: linear interpolation between the points, or piecewise constant
        (``eps_i`` on ``[d_i, d_{i+1})``).  Either way the first epsilon applies below the
        first distance and the last beyond the last distance.

    Returns
    -------
    EpsilonSchedule
        A callable from an array of finite distances to epsilons (per ground metre for a
        location, per unit of a value).  Every evaluation checks that epsilon is finite, > 0 and
        non-increasing in distance over the distances asked (a farther recipient must not get a
        more accurate answer); a table is checked when it is built.

    Raises
    ------
    GeoprivError
        An increasing or non-positive epsilon, a malformed table, an infinite distance.

    See Also
    --------
    diffuse_over_network : Answers graded by an epsilon function of distance.
    diffuse_locations : A location released to a network, graded the same way.
    hop_distance : Distances in hops.

    Examples
    --------
    The paper's Facebook example, exp(4 - 3.3 d) per unit of the value:

    >>> schedule = geopriv.epsilon_of_distance(lambda d: np.exp(-3.3 * d + 4))
    >>> schedule([1, 2, 3]).round(3).tolist()
    [2.014, 0.074, 0.003]

    A table, interpolated linearly, or piecewise constant:

    >>> geopriv.epsilon_of_distance({1: 2.0, 3: 0.5})([0, 1, 2, 4]).tolist()
    [2.0, 2.0, 1.25, 0.5]
    >>> geopriv.epsilon_of_distance({1: 2.0, 3: 0.5}, kind="step")([0, 1, 2, 4]).tolist()
    [2.0, 2.0, 2.0, 0.5]

    A farther recipient must not get a more accurate answer:

    >>> try:
    ...     geopriv.epsilon_of_distance(lambda d: 0.1 * d)([1, 2])
    ... except geopriv.GeoprivError as exc:
    ...     print(type(exc).__name__)
    ParameterError
    """
    if isinstance(spec, EpsilonSchedule):
        return spec
    if kind not in ("linear", "step"):
        raise ParameterError(f"kind must be 'linear' or 'step', got {kind!r}.")
    if callable(spec):
        return EpsilonSchedule(function=spec)
    if isinstance(spec, Mapping):
        items = sorted(spec.items())
        spec = ([k for k, _ in items], [v for _, v in items])
    try:
        xs, ys = spec
        xs = np.asarray(xs, dtype=float).reshape(-1)
        ys = np.asarray(ys, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ParameterError(
            "spec must be a function of distance, a (distances, epsilons) pair or a {distance: epsilon} mapping."
        ) from None
    if xs.size == 0 or xs.size != ys.size:
        raise ParameterError(
            f"the table needs as many epsilons as distances (got {xs.size} and {ys.size}), at least one."
        )
    if not (np.all(np.isfinite(xs)) and np.all(xs >= 0) and np.all(np.diff(xs) > 0)):
        raise ParameterError("the table's distances must be finite, >= 0 and strictly increasing.")
    if not (np.all(np.isfinite(ys)) and np.all(ys > 0)):
        raise ParameterError("the table's epsilons must be finite and > 0.")
    if np.any(np.diff(ys) > 0):
        k = int(np.flatnonzero(np.diff(ys) > 0)[0])
        raise ParameterError(
            f"the table's epsilon increases with distance ({ys[k]:g} at {xs[k]:g}, then {ys[k + 1]:g} at {xs[k + 1]:g}): "
            "a farther recipient would get a more accurate answer. Give non-increasing epsilons."
        )
    return EpsilonSchedule(table=(xs, ys), kind=kind)


# --------------------------------------------------------------------------------------------
# one source to the whole network
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class NetworkDiffusion:
    """Answers of one diffusion release over a network.

    ``responses[i]`` goes to ``recipients[i]`` (at ``distances[i]``, privacy level
    ``epsilons[i]``).  ``unreachable`` lists the nodes that got nothing (no path to the
    source).  ``path`` is SECRET (see :class:`~geopriv.mechanisms.diffusion.DiffusionPath`).
    """

    recipients: pd.Index
    responses: np.ndarray
    distances: np.ndarray
    epsilons: np.ndarray
    unreachable: pd.Index
    source: object
    distance: str
    path: DiffusionPath

    def __repr__(self) -> str:
        return (
            f"NetworkDiffusion({len(self.recipients)} recipients, {len(self.unreachable)} unreachable, "
            f"distance={self.distance!r}, eps in [{self.epsilons.min():g}, {self.epsilons.max():g}], "
            "responses and path not shown)"
        )


def diffuse_over_network(
    graph,
    source,
    value,
    epsilon,
    *,
    distance: str = "hops",
    rng=None,
    path: DiffusionPath | None = None,
    on_unreachable: str = "warn",
    **graph_options,
) -> NetworkDiffusion:
    """Answer every node reachable from ``source`` with ``value + V_{eps(d_j)}`` from one path.

    Each recipient alone is ``eps(d_j)``-private; any coalition is ``max eps``-private.

    Parameters
    ----------
    graph : networkx graph, scipy.sparse matrix, edge list, GeoDataFrame of lines, or Network
        The (public) network, in any form accepted by :func:`as_network`.
    source : hashable
        The node that owns ``value``; it gets no answer itself.
    value : float or 1-D array_like
        The private value (a number, a bit as 0/1, a location in metres).
    epsilon : callable, table or EpsilonSchedule
        The privacy level per unit of the value as a non-increasing function of the network
        distance; passed to :func:`epsilon_of_distance`.
    distance : {"hops", "resistance"}
        Shortest-path hops (:func:`hop_distance`) or effective resistance
        (:func:`resistance_distance`).
    rng : None, int, SeedSequence or Generator
        Randomness of the path (``None``: OS entropy, for real releases).
    path : DiffusionPath, optional
        The secret path already used for this value (extended exactly if needed).
    on_unreachable : {"warn", "raise", "ignore"}
        What to do when some nodes have no path to the source.  They never get an answer.
    **graph_options
        ``nodes=``, ``points=``, ``tolerance=``, ``weight=`` for :func:`as_network`.

    Returns
    -------
    NetworkDiffusion
        ``recipients``, their ``responses``, ``distances`` and ``epsilons`` (in the same order),
        the ``unreachable`` nodes, and the SECRET ``path`` (keep it to answer later recipients).

    Raises
    ------
    geopriv.exceptions.NetworkError
        If the graph cannot be used, or nodes are unreachable with ``on_unreachable="raise"``.
    geopriv.exceptions.ParameterError
        If ``distance`` or ``on_unreachable`` is unknown, or the epsilon function increases.

    Warns
    -----
    geopriv.network.UnreachableRecipientsWarning
        Nodes not connected to the source get no answer (``on_unreachable="warn"``).

    See Also
    --------
    diffuse_locations : The same release for a row of a GeoDataFrame (a location or a column).
    diffuse : Answers at given privacy levels, without a network.
    epsilon_of_distance : The privacy level as a function of distance.

    Examples
    --------
    A private number told to ann's network, at 2 per unit for friends and 1 for friends of
    friends:

    >>> edges = [("ann", "bob"), ("bob", "cat"), ("ann", "cat"), ("cat", "dan")]
    >>> result = geopriv.diffuse_over_network(edges, "ann", 1.0, lambda d: 2.0 / d, rng=1)
    >>> list(result.recipients), result.epsilons.tolist()
    (['bob', 'cat', 'dan'], [2.0, 2.0, 1.0])
    >>> result.responses.round(3).tolist()  # the same level, the same answer
    [0.942, 0.942, 1.791]
    """
    if on_unreachable not in ("warn", "raise", "ignore"):
        raise ParameterError(f"on_unreachable must be 'warn', 'raise' or 'ignore', got {on_unreachable!r}.")
    schedule = epsilon_of_distance(epsilon)
    net = as_network(graph, **graph_options)
    if distance == "hops":
        d = hop_distance(net, source)
    elif distance == "resistance":
        d = resistance_distance(net, source)
    else:
        raise ParameterError(f"distance must be 'hops' or 'resistance', got {distance!r}.")
    s = net.index_of(source)
    reach = np.isfinite(d.to_numpy())
    reach[s] = False
    unreachable = net.labels[~np.isfinite(d.to_numpy())]
    if len(unreachable):
        msg = (
            f"{len(unreachable)} node(s) are not connected to source {source!r} and get no answer: "
            f"{format_labels(unreachable)}."
        )
        if on_unreachable == "raise":
            raise NetworkError(msg + " Connect them or pass on_unreachable='warn' or 'ignore'.")
        if on_unreachable == "warn":
            warnings.warn(msg + " They are listed in result.unreachable.", UnreachableRecipientsWarning, stacklevel=2)
    if not reach.any():
        raise EmptyInputError(
            f"no node other than the source {source!r} is connected to it; there is nobody to answer."
        )
    dist = d.to_numpy()[reach]
    eps = schedule(dist)
    responses, path = diffuse(value, eps, rng, path=path)
    return NetworkDiffusion(net.labels[reach], responses, dist, eps, unreachable, source, distance, path)
