"""Network distances (hops, effective resistance), graph inputs and epsilon schedules."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.spatial import cKDTree
from shapely.geometry import LineString, Point

from geopriv.exceptions import CRSError, EmptyInputError, GeometryError, GeoprivError
from geopriv.mechanisms.diffusion import DiffusionPath
from geopriv.network import (
    EpsilonSchedule,
    Network,
    UnreachableRecipientsWarning,
    as_network,
    diffuse_over_network,
    epsilon_of_distance,
    hop_distance,
    resistance_distance,
)

from .conftest import ROOT


def geometric_graph(n=150, radius=0.16, seed=0):
    """A random geometric graph like the paper's synthetic example (edges by proximity)."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 1, (n, 2))
    pairs = np.array(sorted(cKDTree(xy).query_pairs(radius)))
    return xy, pairs


def dense_resistance(adj: np.ndarray, s: int) -> np.ndarray:
    """Reference: the paper's eq. (10) with a dense pseudo-inverse of the Laplacian."""
    lap = np.diag(adj.sum(1)) - adj
    g = np.linalg.pinv(lap)
    return g[s, s] + np.diag(g) - 2 * g[s]


def bfs(adj: np.ndarray, s: int) -> np.ndarray:
    dist = np.full(len(adj), np.inf)
    dist[s] = 0
    frontier = [s]
    while frontier:
        nxt = []
        for i in frontier:
            for j in np.flatnonzero(adj[i]):
                if dist[j] == np.inf:
                    dist[j] = dist[i] + 1
                    nxt.append(j)
        frontier = nxt
    return dist


@pytest.fixture(scope="module")
def graph():
    xy, pairs = geometric_graph()
    n = len(xy)
    adj = np.zeros((n, n))
    adj[pairs[:, 0], pairs[:, 1]] = adj[pairs[:, 1], pairs[:, 0]] = 1
    return xy, pairs, adj


# ---------------------------------------------------------------------------------------------
# distances
# ---------------------------------------------------------------------------------------------


def test_hops_and_resistance_against_dense_references(graph):
    xy, pairs, adj = graph
    comp = bfs(adj, 0) < np.inf
    assert comp.all(), "fixture graph should be connected"
    for s in (0, 17, 149):
        hops = hop_distance(pairs, s, nodes=range(len(xy)))
        assert np.array_equal(hops.to_numpy(), bfs(adj, s))
        ref = dense_resistance(adj, s)
        res = resistance_distance(pairs, s, nodes=range(len(xy)))
        assert np.max(np.abs(res.to_numpy() - ref) / np.maximum(ref, 1e-300)) < 1e-10
        assert res[s] == 0.0
        dense = resistance_distance(pairs, s, nodes=range(len(xy)), method="dense")
        assert np.allclose(dense.to_numpy(), ref, rtol=1e-10, atol=1e-12)


def test_resistance_closed_forms():
    # a path/tree: resistance = hops; a complete graph K_n: 2/n; a cycle C_n: k(n-k)/n
    rng = np.random.default_rng(1)
    parents = [rng.integers(0, i) for i in range(1, 60)]
    tree = np.array([(p, i) for i, p in enumerate(parents, start=1)])
    assert np.allclose(resistance_distance(tree, 7).to_numpy(), hop_distance(tree, 7).to_numpy(), atol=1e-12)
    n = 12
    complete = np.array([(i, j) for i in range(n) for j in range(i + 1, n)])
    r = resistance_distance(complete, 3).to_numpy()
    assert np.allclose(np.delete(r, 3), 2 / n, rtol=1e-12)
    cycle = np.array([(i, (i + 1) % n) for i in range(n)])
    k = np.arange(n)
    assert np.allclose(resistance_distance(cycle, 0).to_numpy(), k * (n - k) / n, atol=1e-12)


def test_weighted_resistance_uses_conductances(graph):
    xy, pairs, adj = graph
    w = np.random.default_rng(2).uniform(0.5, 3.0, len(pairs))
    wadj = np.zeros_like(adj)
    wadj[pairs[:, 0], pairs[:, 1]] = wadj[pairs[:, 1], pairs[:, 0]] = w
    res = resistance_distance(pairs, 5, nodes=range(len(xy)), weight=w).to_numpy()
    assert np.allclose(res, dense_resistance(wadj, 5), rtol=1e-10, atol=1e-12)
    # hops ignore weights
    assert np.array_equal(hop_distance(pairs, 5, nodes=range(len(xy)), weight=w).to_numpy(), bfs(adj, 5))


def test_against_networkx(graph):
    nx = pytest.importorskip("networkx")
    G = nx.karate_club_graph()  # has a 'weight' attribute; weight=None means unit edges
    for s in (0, 33):
        hops = hop_distance(G, s)
        ref = nx.single_source_shortest_path_length(G, s)
        assert all(hops[k] == v for k, v in ref.items())
        res = resistance_distance(G, s)
        for j in (1, 9, 25, 33 - s):
            assert res[j] == pytest.approx(nx.resistance_distance(G, s, j), rel=1e-9)
        wres = resistance_distance(G, s, weight="weight")
        assert wres[5] == pytest.approx(nx.resistance_distance(G, s, 5, weight="weight", invert_weight=False), rel=1e-9)


# ---------------------------------------------------------------------------------------------
# the four input forms
# ---------------------------------------------------------------------------------------------


def _forms(graph):
    xy, pairs, adj = graph
    labels = [f"n{i}" for i in range(len(xy))]
    forms = {
        "sparse": (sp.csr_matrix(adj), {"nodes": labels}),
        "edges": ([(labels[i], labels[j]) for i, j in pairs], {"nodes": labels}),
    }
    points = gpd.GeoDataFrame(geometry=[Point(x * 1000, y * 1000) for x, y in xy], index=labels, crs=3857)
    jitter = np.random.default_rng(3).uniform(-1e-7, 1e-7, (len(pairs), 2))
    lines = gpd.GeoDataFrame(
        {"kind": "road"},
        geometry=[
            LineString(
                [
                    (xy[i, 0] * 1000 + jitter[k, 0], xy[i, 1] * 1000),
                    ((xy[i, 0] + xy[j, 0]) * 500, (xy[i, 1] + xy[j, 1]) * 500),
                    (xy[j, 0] * 1000, xy[j, 1] * 1000 + jitter[k, 1]),
                ]
            )
            for k, (i, j) in enumerate(pairs)
        ],
        index=[f"line{k}" for k in range(len(pairs))],
        crs=3857,
    )
    forms["lines"] = (lines, {"points": points, "tolerance": 1e-3})
    try:
        import networkx as nx
    except ImportError:
        pass
    else:
        G = nx.Graph()
        G.add_nodes_from(labels)
        G.add_edges_from((labels[i], labels[j]) for i, j in pairs)
        forms["networkx"] = (G, {})
    return labels, forms, points, lines


def test_all_input_forms_agree(graph):
    labels, forms, _, _ = _forms(graph)
    hops, res = {}, {}
    for name, (g, kw) in forms.items():
        net = as_network(g, **kw)
        assert isinstance(net, Network) and net.n_nodes == len(labels), name
        assert net.n_edges == len(graph[1]), name
        hops[name] = hop_distance(g, "n4", **kw).reindex(labels).to_numpy()
        res[name] = resistance_distance(g, "n4", **kw).reindex(labels).to_numpy()
    ref = "sparse"
    for name in forms:
        assert np.array_equal(hops[name], hops[ref]), name
        assert np.allclose(res[name], res[ref], rtol=1e-10), name


def test_lines_matching_is_exact_or_within_tolerance(graph):
    _, _, points, lines = _forms(graph)
    with pytest.raises(GeoprivError, match=r"not at any point exactly.*line") as info:
        as_network(lines, points=points)  # jittered ends: no exact match
    assert "tolerance" in str(info.value)
    assert "'line0'" in str(info.value)
    assert not re.search(r"\d\.\d{3}", str(info.value))  # names labels, prints no coordinates
    dup = pd.concat(
        [
            points,
            gpd.GeoDataFrame(
                geometry=[Point(points.geometry.iloc[0].x + 1e-4, points.geometry.iloc[0].y)], index=["twin"], crs=3857
            ),
        ]
    )
    with pytest.raises(GeoprivError, match="two or more points"):
        as_network(lines, points=dup, tolerance=1e-3)
    with pytest.raises(CRSError, match="to_crs"):
        as_network(lines.set_crs(4326, allow_override=True), points=points, tolerance=1e-3)
    with pytest.raises(GeoprivError, match="points="):
        as_network(lines)
    bad = lines.copy()
    bad.loc["line0", "geometry"] = Point(0, 0)
    with pytest.raises(GeometryError, match="line0"):
        as_network(bad, points=points, tolerance=1e-3)


def test_edge_list_labels_and_isolated_nodes():
    net = as_network([("a", "b"), ("b", "c")], nodes=["a", "b", "c", "lonely"])
    assert list(net.labels) == ["a", "b", "c", "lonely"]
    assert hop_distance(net, "a")["lonely"] == np.inf
    net = as_network(np.array([[3, 1], [1, 2], [1, 3]]))  # sorted endpoints; duplicates merged
    assert list(net.labels) == [1, 2, 3] and net.n_edges == 2 and net.labels.dtype == np.int64
    table = pd.DataFrame({"a": [0, 1], "b": [1, 2], "g": [2.0, 4.0]})
    assert resistance_distance(table, 0, weight="g").tolist() == pytest.approx([0, 0.5, 0.75])
    with pytest.raises(GeoprivError, match="not in nodes="):
        as_network([("a", "zz")], nodes=["a", "b"])


# ---------------------------------------------------------------------------------------------
# disconnected graphs, errors
# ---------------------------------------------------------------------------------------------


def test_disconnected_recipients_get_inf_and_no_answer():
    edges = [(0, 1), (1, 2), (2, 0), (3, 4)]
    nodes = [0, 1, 2, 3, 4, 5]
    hops = hop_distance(edges, 0, nodes=nodes)
    res = resistance_distance(edges, 0, nodes=nodes)
    assert list(hops) == [0, 1, 1, np.inf, np.inf, np.inf]
    assert np.allclose(res[[1, 2]], 2 / 3) and np.all(np.isinf(res[[3, 4, 5]]))
    assert resistance_distance(edges, 5, nodes=nodes).tolist() == [np.inf] * 5 + [0.0]
    eps = lambda d: np.exp(-3.3 * d + 4)
    with pytest.warns(UnreachableRecipientsWarning, match="3 node"):
        out = diffuse_over_network(edges, 0, 1.0, eps, nodes=nodes, rng=1)
    assert list(out.recipients) == [1, 2] and list(out.unreachable) == [3, 4, 5]
    assert out.responses.shape == (2,) and np.allclose(out.epsilons, math.exp(-3.3 + 4))
    with pytest.raises(GeoprivError, match="not connected"):
        diffuse_over_network(edges, 0, 1.0, eps, nodes=nodes, rng=1, on_unreachable="raise")
    quiet = diffuse_over_network(
        edges, 3, [0.0, 0.0], eps, nodes=nodes, rng=1, on_unreachable="ignore", distance="resistance"
    )
    assert list(quiet.recipients) == [4] and quiet.responses.shape == (1, 2)
    with pytest.raises(EmptyInputError, match="nobody"):
        diffuse_over_network(edges, 5, 1.0, eps, nodes=nodes, on_unreachable="ignore")


def test_source_not_in_graph_is_named():
    with pytest.raises(GeoprivError, match="'alice' is not a node"):
        hop_distance([("a", "b")], "alice")
    with pytest.raises(GeoprivError, match="99 is not a node"):
        resistance_distance(sp.csr_matrix(np.ones((3, 3)) - np.eye(3)), 99)


def test_bad_graphs_are_refused_with_a_fix():
    with pytest.raises(EmptyInputError):
        as_network(sp.csr_matrix((0, 0)))
    with pytest.raises(EmptyInputError):
        as_network([])
    loop = sp.csr_matrix(np.array([[1.0, 1], [1, 0]]))
    with pytest.raises(GeoprivError, match="self-loops.*setdiag"):
        as_network(loop)
    with pytest.raises(GeoprivError, match="self-loop"):
        as_network([(1, 1), (1, 2)])
    with pytest.raises(GeoprivError, match="negative"):
        as_network(sp.csr_matrix(np.array([[0, -1.0], [-1.0, 0]])))
    with pytest.raises(GeoprivError, match="symmetric.*maximum"):
        as_network(sp.csr_matrix(np.array([[0, 1.0], [0, 0]])))
    with pytest.raises(GeoprivError, match="square"):
        as_network(sp.csr_matrix(np.ones((2, 3))))
    with pytest.raises(GeoprivError, match=r"\(m, 2\)"):
        as_network(np.zeros((3, 3)))
    with pytest.raises(GeoprivError, match="> 0"):
        as_network([(0, 1), (1, 2)], weight=[1.0, 0.0])
    with pytest.raises(GeoprivError, match="one weight per edge"):
        as_network([(0, 1)], weight=[1.0, 2.0])
    with pytest.raises(TypeError, match="networkx"):
        as_network("0 1")
    nx = pytest.importorskip("networkx")
    with pytest.raises(GeoprivError, match="to_undirected"):
        as_network(nx.DiGraph([(0, 1)]))
    with pytest.raises(EmptyInputError):
        as_network(nx.Graph())
    with pytest.raises(GeoprivError, match="weight 0"):
        as_network(nx.Graph([(0, 1, {"w": 0.0})]), weight="w")
    with pytest.raises(GeoprivError, match="no 'w' attribute"):
        as_network(nx.Graph([(0, 1, {"w": 1.0}), (1, 2)]), weight="w")


def test_import_geopriv_does_not_import_networkx():
    code = (
        "import sys, geopriv, geopriv.network, geopriv.mechanisms.diffusion; "
        "assert 'networkx' not in sys.modules, 'networkx imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ---------------------------------------------------------------------------------------------
# epsilon of distance
# ---------------------------------------------------------------------------------------------


def test_epsilon_function_and_tables():
    paper = epsilon_of_distance(lambda d: np.exp(-3.3 * d + 4))
    d = np.array([0.05, 0.5, 1.2])
    assert np.allclose(paper(d), np.exp(-3.3 * d + 4))
    assert isinstance(paper, EpsilonSchedule) and epsilon_of_distance(paper) is paper
    scalar_only = epsilon_of_distance(lambda d: math.exp(-d))  # not vectorised: applied per element
    assert np.allclose(scalar_only([0.0, 1.0]), [1.0, math.exp(-1)])
    linear = epsilon_of_distance(([1, 2, 4], [10.0, 5.0, 1.0]))
    assert np.allclose(linear([0, 1, 1.5, 3, 9]), [10, 10, 7.5, 3, 1])
    step = epsilon_of_distance({1: 10.0, 2: 5.0, 4: 1.0}, kind="step")
    assert np.allclose(step([0, 1, 1.5, 2, 3.9, 4, 9]), [10, 10, 10, 5, 5, 1, 1])


def test_increasing_epsilon_is_refused():
    with pytest.raises(GeoprivError, match="increases with distance"):
        epsilon_of_distance(lambda d: 1.0 + d)([0.0, 1.0, 2.0])
    with pytest.raises(GeoprivError, match="increases with distance"):
        epsilon_of_distance(([1, 2], [1.0, 2.0]))
    with pytest.raises(GeoprivError, match="increases with distance"):
        diffuse_over_network([(0, 1), (1, 2)], 0, 1.0, lambda d: d, rng=1)
    with pytest.raises(GeoprivError, match="finite and > 0"):
        epsilon_of_distance(lambda d: 1.0 - d)([0.0, 2.0])
    with pytest.raises(GeoprivError, match="inf"):
        epsilon_of_distance(lambda d: np.exp(-d))([1.0, np.inf])
    with pytest.raises(GeoprivError, match="strictly increasing"):
        epsilon_of_distance(([2, 1], [1.0, 0.5]))


# ---------------------------------------------------------------------------------------------
# release over a network
# ---------------------------------------------------------------------------------------------


def test_diffuse_over_network_uses_one_path(graph):
    xy, pairs, _ = graph
    eps = lambda d: np.exp(-0.5 * d + 2)
    out = diffuse_over_network(pairs, 0, [10.0, 20.0], eps, nodes=range(len(xy)), rng=4)
    assert len(out.recipients) == len(xy) - 1 and 0 not in out.recipients
    assert out.path.eps_max == pytest.approx(out.epsilons.max())
    assert np.allclose(out.responses, np.array([10.0, 20.0]) + out.path.noise(out.epsilons))
    same_d = out.distances == out.distances[0]
    assert np.all(out.responses[same_d] == out.responses[same_d][0])  # same distance, same answer
    assert "responses and path not shown" in repr(out)
    # the same path answers again identically and extends to new levels
    again = diffuse_over_network(pairs, 0, [10.0, 20.0], eps, nodes=range(len(xy)), path=out.path, rng=5)
    assert np.array_equal(again.responses, out.responses)
    assert isinstance(again.path, DiffusionPath)


@pytest.mark.parametrize(
    "weights",
    [[1e300, 1e-300, 1.0], [1e-320, 1.0, 1.0], [1e200, 1e-200, 1e200], [1e308, 1e308, 1e-308]],
    ids=["1e300-1e-300", "subnormal", "1e200", "overflow"],
)
def test_extreme_weights_give_a_named_error_that_says_what_to_do(weights):
    """Valid (finite, > 0) but extreme conductances: a NetworkError that says how to rescale, never a bare RuntimeError."""
    from geopriv.exceptions import NetworkError

    edges = np.array([[0, 1], [1, 2], [2, 3]])
    with pytest.raises(NetworkError, match="Rescale the weights") as info:
        resistance_distance(edges, 0, weight=np.array(weights))
    assert isinstance(info.value, GeoprivError) and "e+" not in str(info.value) and "e-" not in str(info.value)
    # negative control: moderate weights on the same graph
    r = resistance_distance(edges, 0, weight=np.array([2.0, 1.0, 3.0]))
    assert r.tolist() == pytest.approx([0.0, 0.5, 1.5, 1.5 + 1 / 3])
