"""Issue 41 item 2: every float diffuse_locations publishes is a function of public information, in any row order.

The answers are snapped to a public lattice whose step follows the largest epsilon, and the epsilons follow
the network distances.  Effective resistances used to be solved with the nodes in the layer's row order
(often spatial, never published), so their low-order bits, the published distances and epsilons, the
largest epsilon and the lattice step all depended on that order: answers of a shuffled layer were off the
lattice of the same release in label order.  Property-style checks over fixed seeds: random relabellings
(permuted integers, strings, non-integer floats, mixed types), shuffled rows and edges, duplicated values.
"""

from __future__ import annotations

import math
import warnings

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from pyproj import CRS
from scipy.spatial import cKDTree

import geopriv
from geopriv.diffuse import VALUE_RANGE_STEPS, recipient_order
from geopriv.exceptions import WeakProtectionWarning
from geopriv.frame import default_grid, public_frame, public_lattice
from geopriv.network import UnreachableRecipientsWarning
from tests.conftest import data_path

SEEDS = range(8)
LABEL_KINDS = ("permuted_int", "string", "non_integer", "mixed")


@pytest.fixture(scope="module")
def deaths():
    """The 324 Soho deaths in British National Grid metres, deduplicated; rows in file order."""
    d = gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths").to_crs(27700)
    return d[~d.geometry.duplicated()].reset_index(drop=True)


@pytest.fixture(scope="module")
def knn(deaths):
    """5-nearest-neighbour edges between row positions."""
    xy = np.column_stack([deaths.geometry.x, deaths.geometry.y])
    _, nn = cKDTree(xy).query(xy, 5)
    return [(i, int(j)) for i in range(len(deaths)) for j in nn[i, 1:] if i != j]


def relabel(n, kind, rs):
    """A random relabelling of n people (labels unique, never in spatial order)."""
    p = rs.permutation(n)
    if kind == "permuted_int":
        return [int(k) for k in p]
    if kind == "string":
        return [f"id{k}" for k in p]
    if kind == "non_integer":
        return [float(k) + 0.37 for k in p]
    return [int(k) if k % 2 else f"id{k}" for k in p]  # mixed types: ordered by type name, then value


def layer(deaths, knn, seed, **columns):
    """(people with random labels and shuffled rows, shuffled edge list by label, source label)."""
    rs = np.random.default_rng(seed)
    labels = relabel(len(deaths), LABEL_KINDS[seed % len(LABEL_KINDS)], rs)
    people = deaths.assign(**columns).set_axis(pd.Index(labels, dtype=object), axis=0)
    people = people.iloc[rs.permutation(len(people))]
    edges = [(labels[a], labels[b]) for a, b in (knn[i] for i in rs.permutation(len(knn)))]
    return people, edges, labels[int(rs.integers(len(labels)))]


def in_label_order(people):
    return people.iloc[recipient_order(people.index)]


def release(people, schedule, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        warnings.simplefilter("ignore", WeakProtectionWarning)  # fine epsilons: the grid follows them
        return geopriv.diffuse_locations(people, schedule, **kw)


def public_distances(people, edges, source, distance):
    """The reference: distances and epsilons of the same layer with its rows in label order."""
    d = geopriv.network_distances(in_label_order(people), edges, source, distance=distance)
    return d[np.isfinite(d.to_numpy()) & (d.index != source)]


def on_value_lattice(v, step, lo, hi):
    """Every answer is the lattice node k * step (bit for bit, integer k) within [lo, hi].

    ``v / step == round(v / step)`` is not the test: k * step rounded to float64 divided by step is not
    always k exactly (0.3 / 0.1 != 3) when the step is not a power of two.
    """
    k = np.round(v / step)
    return bool(np.all(v == k * step) and np.all(np.abs(v / step - k) < 1e-6) and np.all((v >= lo) & (v <= hi)))


@pytest.mark.parametrize("seed", SEEDS)
def test_value_answers_are_on_the_public_lattice_for_any_relabelling(deaths, knn, seed):
    rs = np.random.default_rng(1000 + seed)
    values = rs.choice([0.0, 0.0, 1.0, 0.37, -2.5], len(deaths))  # duplicated values, some not integers
    people, edges, source = layer(deaths, knn, seed, v=values)
    a = rs.uniform(0.5, 40.0)
    schedule = lambda d: a / (1.0 + np.asarray(d)) ** 2  # noqa: E731
    options = [{}, {"value_range": (-3.0, 3.0)}, {"grid": 0.013}][seed % 3]
    distance = ("resistance", "hops")[seed % 2] if seed < 6 else "resistance"
    ref = public_distances(people, edges, source, distance)
    eps_ref = schedule(ref.to_numpy())
    eps_max = float(eps_ref.max())
    step = options.get("grid", default_grid(eps_max))
    lo, hi = options.get("value_range", (-VALUE_RANGE_STEPS * step, VALUE_RANGE_STEPS * step))
    for rng in (seed, None):
        res, _ = release(people, schedule, source=source, graph=edges, value="v", distance=distance, rng=rng, **options)
        assert list(res.index) == list(ref.index)  # label order
        assert np.array_equal(res.network_distance.to_numpy(), ref.to_numpy())  # bit for bit
        assert np.array_equal(res.epsilon.to_numpy(), eps_ref)
        assert res.attrs["geopriv"]["epsilon_max"] == eps_max
        assert on_value_lattice(res.response.to_numpy(), step, lo, hi)


@pytest.mark.parametrize("seed", SEEDS)
def test_location_answers_are_on_the_public_lattice_for_any_relabelling(deaths, knn, seed):
    people, edges, source = layer(deaths, knn, seed)
    schedule = lambda d: 0.3 / (0.5 + np.asarray(d))  # noqa: E731  # fine enough that the grid follows epsilon
    ref = public_distances(people, edges, source, "resistance")
    eps_ref = schedule(ref.to_numpy())
    grid_m = default_grid(float(eps_ref.max()))
    step = public_lattice(public_frame(CRS(people.crs), bounds=None, planar_only=True), grid_m).step
    res, _ = release(people, schedule, source=source, graph=edges, distance="resistance", rng=seed)
    assert list(res.index) == list(ref.index)
    assert np.array_equal(res.network_distance.to_numpy(), ref.to_numpy())
    assert np.array_equal(res.epsilon_per_m.to_numpy(), eps_ref)
    assert res.attrs["geopriv"]["grid_m"] == grid_m
    xy = np.column_stack([res.geometry.x.to_numpy(), res.geometry.y.to_numpy()])
    assert np.array_equal(xy, np.round(xy / step) * step)


def test_published_floats_do_not_depend_on_the_row_or_edge_order(deaths, knn):
    """Negative control in one place: the same people and network in four row and edge orders publish the
    same bits in every column and in attrs["geopriv"] (unseeded answers aside, which are fresh draws)."""
    labels = [f"id{k}" for k in np.random.default_rng(7).permutation(len(deaths))]
    people = deaths.assign(v=(np.arange(len(deaths)) % 3 == 0).astype(int)).set_axis(labels, axis=0)
    edges = [(labels[a], labels[b]) for a, b in knn]
    schedule = lambda d: 2.0 / (1.0 + np.asarray(d))  # noqa: E731
    nx = pytest.importorskip("networkx")
    graph = nx.Graph()
    graph.add_nodes_from(reversed(labels))
    graph.add_edges_from(reversed(edges))
    outs = []
    for order, g in enumerate((edges, edges[::-1], graph, edges)):
        shuffled = people if order == 0 else people.sample(frac=1.0, random_state=order)
        res, _ = release(shuffled, schedule, source=labels[0], graph=g, value="v", distance="resistance")
        rec = {k: v for k, v in res.attrs["geopriv"].items() if k not in ("created_utc",)}
        outs.append((res.drop(columns="response"), rec))
    for res, rec in outs[1:]:
        pd.testing.assert_frame_equal(res, outs[0][0], check_exact=True)
        assert rec == outs[0][1]
    step = default_grid(outs[0][1]["epsilon_max"])
    assert f"{step:g}" in outs[0][1]["finite_precision"]
    assert math.isclose(outs[0][1]["epsilon_max"], 2.0 / (1.0 + outs[0][0].network_distance.min()))
