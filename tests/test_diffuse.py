"""gdf.priv.diffuse: one row's location to its network, through the public release path, with the ledger."""
from __future__ import annotations

import math
import warnings

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.spatial import cKDTree

import geopriv
from geopriv.exceptions import BudgetExceededError, GeoprivError
from geopriv.network import UnreachableRecipientsWarning
from geopriv.provenance import ALLOWED_FIELDS
from tests.conftest import data_path


@pytest.fixture(scope="module")
def people():
    """The 324 Soho deaths in British National Grid metres, deduplicated, as a social network's members."""
    d = gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths").to_crs(27700)
    d = d[~d.geometry.duplicated()].reset_index(drop=True)
    d.index = [f"p{i}" for i in range(len(d))]
    return d


@pytest.fixture(scope="module")
def knn_edges(people):
    xy = np.column_stack([people.geometry.x, people.geometry.y])
    _, nn = cKDTree(xy).query(xy, 5)
    return [(people.index[i], people.index[j]) for i in range(len(people)) for j in nn[i, 1:] if i != j]


def policy(h):
    return math.log(4) / (50.0 * (1.0 + h))  # ln 4 within 50 m for friends, halving-ish with every hop


def run(people, edges, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        return people.priv.diffuse(policy, source="p0", graph=edges, **kw)


def test_one_answer_per_connected_row_with_public_provenance(people, knn_edges):
    before = people.copy()
    res, path = run(people, knn_edges, rng=1)
    pd.testing.assert_frame_equal(people, before)
    assert "p0" not in res.index and res.index.isin(people.index).all()
    assert list(res.columns) == ["network_distance", "epsilon_per_m", "effective_epsilon_per_m", "geometry"]
    assert res.crs == people.crs
    assert np.all(np.diff(res.sort_values("network_distance").epsilon_per_m.to_numpy()) <= 0)
    rec = res.attrs["geopriv"]
    assert set(rec) <= set(ALLOWED_FIELDS)
    assert rec["coalition_epsilon_per_m"] == pytest.approx(res.epsilon_per_m.max())
    assert rec["recipients"] == len(res) and rec["seeded"] is True
    src = people.loc["p0"].geometry
    text = repr(rec) + repr(path)
    assert f"{src.x:.0f}" not in text and f"{src.y:.0f}" not in text  # neither the location nor the path is shown
    xy = np.column_stack([res.geometry.x, res.geometry.y])
    assert np.allclose(xy, np.round(xy))  # snapped to the 1 m public lattice of the BNG


def test_recipients_at_the_same_distance_get_the_same_answer(people, knn_edges):
    res, _ = run(people, knn_edges, rng=2)
    for _, group in res.groupby("network_distance"):
        assert group.geometry.nunique() == 1  # one path: the same level is the same answer


def test_each_recipient_is_planar_laplace_in_ground_metres(people, knn_edges):
    """Over independent releases, a 1-hop recipient's error is Gamma(2, 1/eps) in ground metres.

    KS at alpha = 1e-3 (false-failure rate 0.1 %); negative control: twice the epsilon is rejected.
    """
    src = people.loc["p0"].geometry
    res0, _ = run(people, knn_edges, rng=0)
    friend = res0.index[res0.network_distance == 1][0]
    eps = float(res0.loc[friend, "epsilon_per_m"])
    errors = []
    for seed in range(150):
        res, _ = run(people, knn_edges, rng=seed)
        g = res.loc[friend].geometry
        errors.append(math.hypot(g.x - src.x, g.y - src.y))
    errors = np.array(errors)
    assert stats.kstest(errors, stats.gamma(2, scale=1 / eps).cdf).pvalue > 1e-3
    assert stats.kstest(errors, stats.gamma(2, scale=1 / (2 * eps)).cdf).pvalue < 1e-3


def test_a_path_answers_later_requests_consistently_and_costs_its_largest_epsilon(people, knn_edges):
    ledger = geopriv.DiffusionLedger(total=0.1)
    res1, path = run(people, knn_edges, rng=3, ledger=ledger)
    first = ledger.spent("p0")
    assert first == pytest.approx(res1.epsilon_per_m.max())
    res2, path2 = run(people, knn_edges, rng=99, path=path, ledger=ledger)
    assert res2.geometry.equals(res1.geometry)  # same path, same levels: the same answers
    assert ledger.spent("p0") == pytest.approx(first)  # nothing more to pay
    run(people, knn_edges, rng=4, ledger=ledger)  # a fresh path is a new release
    assert ledger.spent("p0") == pytest.approx(2 * first)
    frame = ledger.to_frame()
    assert frame.loc[0, "paths"] == 2
    tight = geopriv.DiffusionLedger(total=first * 1.5)
    run(people, knn_edges, rng=5, ledger=tight)
    with pytest.raises(BudgetExceededError, match="p0"):
        run(people, knn_edges, rng=6, ledger=tight)
    assert tight.spent("p0") == pytest.approx(first)  # refused before any noise, nothing recorded


def test_unconnected_rows_get_nothing_and_are_named(people, knn_edges):
    edges = [e for e in knn_edges if "p5" not in e]
    with pytest.warns(UnreachableRecipientsWarning, match="not connected") as caught:
        res, _ = people.priv.diffuse(policy, source="p0", graph=edges, rng=1)
    assert "p5" not in res.index
    named = str(caught[0].message)
    unreachable = sorted(set(people.index) - set(res.index) - {"p0"})
    assert "p5" in unreachable and f"{len(unreachable)} row(s)" in named
    assert named.index(repr(unreachable[0])) < named.index(repr(unreachable[1]))  # named in label order
    with pytest.raises(GeoprivError, match="not connected"):
        people.priv.diffuse(policy, source="p0", graph=edges, on_unreachable="raise")


def test_bad_input(people, knn_edges):
    with pytest.raises(GeoprivError, match="not a row label"):
        people.priv.diffuse(policy, source="nobody", graph=knn_edges)
    with pytest.raises(GeoprivError, match="increases with distance"):
        people.priv.diffuse(lambda h: 0.01 * (1 + h), source="p0", graph=knn_edges, on_unreachable="ignore")
    with pytest.raises(GeoprivError, match="not rows of the layer"):
        people.priv.diffuse(policy, source="p0", graph=knn_edges + [("p0", "stranger")], on_unreachable="ignore")
    with pytest.raises(GeoprivError, match="bounds"):  # longitude/latitude: a plane needs declared bounds
        people.to_crs(4326).priv.diffuse(policy, source="p0", graph=knn_edges, on_unreachable="ignore")
    out, _ = people.to_crs(4326).priv.diffuse(policy, source="p0", graph=knn_edges, on_unreachable="ignore",
                                               bounds=(-0.2, 51.45, -0.05, 51.56), rng=1)
    assert out.crs == "EPSG:4326"


def test_graph_forms_agree(people, knn_edges):
    nx = pytest.importorskip("networkx")
    import scipy.sparse as sp

    pos = {label: i for i, label in enumerate(people.index)}
    rows = [pos[a] for a, _ in knn_edges]
    cols = [pos[b] for _, b in knn_edges]
    adjacency = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(people),) * 2).tocsr()
    adjacency = adjacency.maximum(adjacency.T)
    adjacency.data[:] = 1.0
    lines = gpd.GeoDataFrame(geometry=[
        __import__("shapely").LineString([people.geometry[a], people.geometry[b]]) for a, b in knn_edges], crs=people.crs)
    forms = [knn_edges, pd.DataFrame(knn_edges), nx.Graph(knn_edges), adjacency, lines]
    dist = [geopriv.network_distances(people, g, "p0") for g in forms]
    for d in dist[1:]:
        assert np.array_equal(d.to_numpy(), dist[0].to_numpy())


def test_infection_bit_with_projection(people, knn_edges):
    flagged = people.assign(infected=(np.arange(len(people)) % 3 == 0).astype(int))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        res, path = flagged.priv.diffuse(lambda d: np.exp(-3.3 * d + 4), source="p0", graph=knn_edges,
                                         distance="resistance", value="infected", support=[0, 1], rng=1)
    assert isinstance(res, pd.DataFrame) and not isinstance(res, gpd.GeoDataFrame)
    assert set(np.unique(res.response)) <= {0.0, 1.0}
    assert res.attrs["geopriv"]["coalition_epsilon"] == pytest.approx(res.epsilon.max())
    assert path.dim == 1
