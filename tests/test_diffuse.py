"""gdf.priv.diffuse_locations: one row's location to its network, through the public release path, with the ledger."""

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
        return people.priv.diffuse_locations(policy, source="p0", graph=edges, **kw)


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
        res, _ = people.priv.diffuse_locations(policy, source="p0", graph=edges, rng=1)
    assert "p5" not in res.index
    named = str(caught[0].message)
    unreachable = sorted(set(people.index) - set(res.index) - {"p0"})
    assert "p5" in unreachable and f"{len(unreachable)} row(s)" in named
    assert named.index(repr(unreachable[0])) < named.index(repr(unreachable[1]))  # named in label order
    with pytest.raises(GeoprivError, match="not connected"):
        people.priv.diffuse_locations(policy, source="p0", graph=edges, on_unreachable="raise")


def test_bad_input(people, knn_edges):
    with pytest.raises(GeoprivError, match="not a row label"):
        people.priv.diffuse_locations(policy, source="nobody", graph=knn_edges)
    with pytest.raises(GeoprivError, match="increases with distance"):
        people.priv.diffuse_locations(lambda h: 0.01 * (1 + h), source="p0", graph=knn_edges, on_unreachable="ignore")
    with pytest.raises(GeoprivError, match="not rows of the layer"):
        people.priv.diffuse_locations(
            policy, source="p0", graph=knn_edges + [("p0", "stranger")], on_unreachable="ignore"
        )
    with pytest.raises(GeoprivError, match="bounds"):  # longitude/latitude: a plane needs declared bounds
        people.to_crs(4326).priv.diffuse_locations(policy, source="p0", graph=knn_edges, on_unreachable="ignore")
    out, _ = people.to_crs(4326).priv.diffuse_locations(
        policy, source="p0", graph=knn_edges, on_unreachable="ignore", bounds=(-0.2, 51.45, -0.05, 51.56), rng=1
    )
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
    lines = gpd.GeoDataFrame(
        geometry=[__import__("shapely").LineString([people.geometry[a], people.geometry[b]]) for a, b in knn_edges],
        crs=people.crs,
    )
    forms = [knn_edges, pd.DataFrame(knn_edges), nx.Graph(knn_edges), adjacency, lines]
    dist = [geopriv.network_distances(people, g, "p0") for g in forms]
    for d in dist[1:]:
        assert np.array_equal(d.to_numpy(), dist[0].to_numpy())


def test_infection_bit_with_projection(people, knn_edges):
    flagged = people.assign(infected=(np.arange(len(people)) % 3 == 0).astype(int))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        res, path = flagged.priv.diffuse_locations(
            lambda d: np.exp(-3.3 * d + 4),
            source="p0",
            graph=knn_edges,
            distance="resistance",
            value="infected",
            support=[0, 1],
            rng=1,
        )
    assert isinstance(res, pd.DataFrame) and not isinstance(res, gpd.GeoDataFrame)
    assert set(np.unique(res.response)) <= {0.0, 1.0}
    assert res.attrs["geopriv"]["coalition_epsilon"] == pytest.approx(res.epsilon.max())
    assert path.dim == 1


# ---------------------------------------------------------------------------------------------
# issue 30: secrets bound to what they answer, value lattice, publication order, bounds guard
# ---------------------------------------------------------------------------------------------


def test_a_path_answers_only_its_source_value_column_and_frame(people, knn_edges):
    """Each reuse the old code accepted is refused, before any noise and any charge."""
    from geopriv.exceptions import PathBindingError

    ledger = geopriv.DiffusionLedger()
    res, path = run(people, knn_edges, rng=1, ledger=ledger)
    assert path.is_bound and path.binding["source"] == "str:'p0'" and path.binding["released"] == "location"
    spent = ledger.spent("p0")
    # another source: answers would differ by exactly u_A - u_B
    with pytest.raises(PathBindingError, match="source") as info:
        people.priv.diffuse_locations(
            policy, source="p1", graph=knn_edges, path=path, on_unreachable="ignore", ledger=ledger
        )
    assert "fresh path" in str(info.value)
    # the same person after a move of 7 m: answers would differ by exactly the move
    moved = people.copy()
    moved.loc["p0", "geometry"] = __import__("shapely").Point(
        people.loc["p0"].geometry.x + 7.0, people.loc["p0"].geometry.y
    )
    with pytest.raises(PathBindingError, match="value") as info:
        run(moved, knn_edges, path=path, ledger=ledger)
    g = people.loc["p0"].geometry
    assert f"{g.x:.0f}" not in str(info.value) and f"{g.x + 7:.0f}" not in str(info.value)
    # other bounds, or another CRS: the same noise in two frames
    with pytest.raises(PathBindingError, match="bounds"):
        run(people, knn_edges, path=path, bounds=(520000, 175000, 540000, 185000))
    with pytest.raises(PathBindingError, match="CRS"):
        run(people.to_crs(32630), knn_edges, path=path)
    with pytest.raises(PathBindingError, match="lattice"):
        run(people, knn_edges, path=path, grid=0.5)
    # a location path does not answer a value, a value path not another column
    flagged = people.assign(infected=1.0, exposed=1.0)
    with pytest.raises(PathBindingError, match="released"):
        run(flagged, knn_edges, path=path, value="infected")
    _, bit_path = run(flagged, knn_edges, value="infected", rng=2)
    with pytest.raises(PathBindingError, match="exposed"):
        run(flagged, knn_edges, value="exposed", path=bit_path)
    with pytest.raises(PathBindingError, match="value"):  # the bit changed
        run(flagged.assign(infected=0.0), knn_edges, value="infected", path=bit_path)
    assert ledger.spent("p0") == spent  # nothing charged by the refusals
    # the same use still works and gives the same answers
    again, _ = run(people, knn_edges, path=path, rng=7)
    assert again.geometry.equals(res.geometry)


def test_two_answers_never_differ_by_the_move(people, knn_edges):
    """Negative control of the old leak: after a move, a second answer comes from a fresh path only."""
    from geopriv.exceptions import PathBindingError

    moved = people.copy()
    moved.loc["p0", "geometry"] = __import__("shapely").Point(
        people.loc["p0"].geometry.x + 30.0, people.loc["p0"].geometry.y + 40.0
    )
    a, path = run(people, knn_edges, rng=3)
    with pytest.raises(PathBindingError):
        run(moved, knn_edges, rng=3, path=path)
    b, _ = run(moved, knn_edges, rng=4)  # what is left: a fresh, independent path
    diff = np.column_stack([b.geometry.x - a.geometry.x, b.geometry.y - a.geometry.y])
    assert not np.all(np.isclose(diff, [30.0, 40.0], atol=1.0))


def test_typed_source_labels_are_different_sources(people, knn_edges):
    from geopriv.exceptions import PathBindingError

    numbered = people.reset_index(drop=True)
    pos = {label: i for i, label in enumerate(people.index)}
    edges = [(pos[a], pos[b]) for a, b in knn_edges]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        _, path = numbered.priv.diffuse_locations(policy, source=1, graph=edges, rng=1)
        texted = numbered.set_axis(numbered.index.astype(str))
        with pytest.raises(PathBindingError, match="source"):
            texted.priv.diffuse_locations(policy, source="1", graph=[(str(a), str(b)) for a, b in edges], path=path)
        numbered.priv.diffuse_locations(policy, source=np.int64(1), graph=edges, path=path)  # numpy int is int


def test_value_answers_are_on_a_public_lattice_with_their_bound(people, knn_edges):
    flagged = people.assign(infected=(np.arange(len(people)) % 3 == 0).astype(int))
    schedule = lambda d: np.exp(-3.3 * np.asarray(d) + 1)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        res, _ = flagged.priv.diffuse_locations(schedule, source="p0", graph=knn_edges, value="infected", rng=1)
        rec = res.attrs["geopriv"]
        step = min(1.0, 1.0 / (20.0 * res.epsilon.max()))
        k = np.round(res.response.to_numpy() / step)
        assert np.array_equal(res.response.to_numpy(), k * step)  # exactly the lattice nodes, bit for bit
        assert "1-D lattice" in rec["finite_precision"] and f"{step:g}" in rec["finite_precision"]
        assert rec["epsilon_max"] < rec["effective_epsilon"] < rec["epsilon_max"] * 1.01
        # a declared public range clamps answers to its nodes
        ranged, _ = geopriv.diffuse_locations(
            flagged, schedule, source="p0", graph=knn_edges, value="infected", value_range=(0, 1), rng=1
        )
        assert ranged.response.between(0, 1).all()
        assert ranged.attrs["geopriv"]["effective_epsilon"] >= rec["epsilon_max"]
        with pytest.raises(GeoprivError, match="outside the public range"):
            geopriv.diffuse_locations(
                flagged.assign(infected=5), schedule, source="p0", graph=knn_edges, value="infected", value_range=(0, 1)
            )
        raw, _ = geopriv.diffuse_locations(
            flagged, schedule, source="p0", graph=knn_edges, value="infected", continuous=True, rng=1
        )
    assert raw.attrs["geopriv"]["finite_precision"] == "none: continuous float64 output (explicitly requested)"
    assert "effective_epsilon" not in raw.attrs["geopriv"]
    assert not np.array_equal(raw.response.to_numpy(), np.round(raw.response.to_numpy() / step) * step)
    with pytest.raises(GeoprivError, match="value release"):
        geopriv.diffuse_locations(people, policy, source="p0", graph=knn_edges, continuous=True)


def test_low_order_bits_no_longer_read_the_bit():
    """Mironov's attack on a bit: raw float answers below 0.5 in size that are not multiples of 2^-53
    are impossible under u = 1.  Negative control on continuous output (fixed seeds: deterministic);
    on the lattice, answers under u = 0 and u = 1 lie on the same public set of nodes."""
    from geopriv.mechanisms.diffusion import diffuse, snap_values

    def impossible_under_one(y):
        return (np.abs(y) < 0.5) & (y * 2.0**53 != np.round(y * 2.0**53))

    zeros = np.concatenate([diffuse(0.0, [1.0], rng=seed)[0] for seed in range(400)])
    ones = np.concatenate([diffuse(1.0, [1.0], rng=seed)[0] for seed in range(400)])
    assert impossible_under_one(zeros).mean() > 0.15  # the old leak: u = 0 read with certainty
    assert not impossible_under_one(ones).any()
    step = 1.0 / 20.0
    for y in (snap_values(zeros, step, -1e6, 1e6), snap_values(ones, step, -1e6, 1e6)):
        assert np.array_equal(y, np.round(y / step) * step)
    snapped = np.concatenate([snap_values(zeros, step, -1e6, 1e6), snap_values(ones, step, -1e6, 1e6)])
    nodes = np.round(snapped / step)
    assert np.array_equal(snapped, nodes * step)  # one lattice for both values: nothing below the step


def test_recipients_are_published_in_label_order_whatever_the_row_order(people, knn_edges):
    res, _ = run(people, knn_edges, rng=5)
    shuffled = people.sample(frac=1.0, random_state=7)
    res2, _ = run(shuffled, knn_edges, rng=5)
    assert list(res.index) == list(res2.index) == sorted(res.index)
    assert res.geometry.equals(res2.geometry)
    # old behaviour as a negative control: recipients followed the input's row order
    assert list(shuffled.index[shuffled.index.isin(res.index)]) != list(res.index)


def test_labels_assigned_in_spatial_order_are_refused(people, knn_edges):
    from geopriv.exceptions import LocationAttributeError

    order = np.argsort(people.geometry.hilbert_distance(total_bounds=(520000, 175000, 540000, 185000)).to_numpy())
    hilbert = people.iloc[order]
    rename = {label: i for i, label in enumerate(hilbert.index)}  # ids assigned in Hilbert order
    ranked = hilbert.set_axis(range(len(hilbert)))
    edges = [(rename[a], rename[b]) for a, b in knn_edges]
    with pytest.raises(LocationAttributeError):
        geopriv.diffuse_locations(ranked, policy, source=rename["p0"], graph=edges, on_unreachable="ignore")
    out, _ = geopriv.diffuse_locations(
        ranked, policy, source=rename["p0"], graph=edges, on_unreachable="ignore", keep=("<index>",), rng=1
    )
    assert list(out.index) == sorted(out.index)


def test_bounds_from_the_data_are_refused_for_every_row(people, knn_edges):
    xmin, ymin, xmax, ymax = people.total_bounds
    g = people.loc["p0"].geometry
    assert xmin < g.x < xmax and ymin < g.y < ymax  # the source itself touches no edge
    with pytest.raises(GeoprivError, match="computed from the data"):
        run(people, knn_edges, bounds=tuple(people.total_bounds))
    out, _ = run(people, knn_edges, bounds=(520000, 175000, 540000, 185000), rng=1)  # a declared study area
    assert len(out)


def test_duplicate_edges_count_as_documented(people, knn_edges):
    nx = pytest.importorskip("networkx")
    knn_edges = sorted({tuple(sorted(e)) for e in knn_edges})  # each edge once
    base = geopriv.network_distances(people, knn_edges, "p0", distance="resistance")
    doubled = geopriv.network_distances(people, knn_edges + knn_edges, "p0", distance="resistance")
    assert np.allclose(base.to_numpy(), doubled.to_numpy(), equal_nan=True)  # edge list: de-duplicated
    multi = nx.MultiGraph()
    multi.add_nodes_from(people.index)
    multi.add_edges_from(knn_edges + knn_edges)
    summed = geopriv.network_distances(people, multi, "p0", distance="resistance")
    reach = np.isfinite(base.to_numpy())
    assert np.allclose(summed.to_numpy()[reach], base.to_numpy()[reach] / 2)  # MultiGraph: parallel edges add up
    hops = [geopriv.network_distances(people, g, "p0") for g in (knn_edges, knn_edges + knn_edges, multi)]
    assert all(np.array_equal(h.to_numpy(), hops[0].to_numpy()) for h in hops)


def test_a_repeated_label_is_refused_for_value_releases_too(people, knn_edges):
    """Review finding: a value release skipped the label-order check when the index was not unique, and an
    index of rounded coordinates (with repeats) published every recipient's x."""
    from geopriv.exceptions import IdentityError

    leaky = people.assign(infected=1)
    leaky.index = [f"x{int(x // 100)}" if i else "p0" for i, x in enumerate(people.geometry.x)]
    edges = [(leaky.index[people.index.get_loc(a)], leaky.index[people.index.get_loc(b)]) for a, b in knn_edges]
    with pytest.raises(IdentityError, match="share their index label"):
        geopriv.diffuse_locations(leaky, policy, source="p0", graph=edges, value="infected", rng=1)
