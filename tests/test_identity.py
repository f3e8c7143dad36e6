"""geopriv.identity: one rule for who is who, and every release kind bounds, charges and keys by it.

Issue 41.1: on dask, person 5 written as ``5`` in one partition and ``"5"`` in another was bounded as two
people and charged as one (loss 2 epsilon, charge 1 epsilon); NFC and NFD forms of "Renée" got two budgets.
The property tests below draw each person's id in a random written form (int, numpy int, decimal text with
spaces or leading zeros, NFC or NFD text) and check, for every release kind, in memory and on dask, that the
rows kept per identity, the identities charged and the charge per identity agree.
"""

from __future__ import annotations

import unicodedata

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

import geopriv
from geopriv.budget import person_keys
from geopriv.exceptions import IdentityError
from geopriv.identity import canonical_order, identities
from geopriv.keys import identity_digests

pytestmark = pytest.mark.filterwarnings("ignore::geopriv.exceptions.LowUtilityWarning")

#: the discrete Laplace noise is 0 with probability ~1 at this epsilon: counts are the true ones
EXACT = 1e6
BOX = (500_000.0, 4_000_000.0, 501_000.0, 4_001_000.0)
NAMES = ["Renée", "Zoë", "Łukasz", "Ångström", "José"]


# ------------------------------------------------------------------------------------------ the rule
def test_the_written_forms_of_one_person_are_one_identity():
    nfd = unicodedata.normalize("NFD", "Renée")
    assert nfd != "Renée"
    forms = [5, np.int64(5), np.uint8(5), "5", " 5", "5 ", "05", "+5", "5.0", "\u00a05\t"]
    assert set(identities(pd.Index(forms, dtype=object)).keys.tolist()) == {5}
    ident = identities(pd.Index([nfd, "Renée", " Renée ", "renée"], dtype=object))
    assert len(set(ident.keys[:3].tolist())) == 1 and ident.keys[3] != ident.keys[0]  # case is kept
    assert ident.shown(ident.keys[:1]) == ["Renée"]  # shown in its canonical form
    assert identities(pd.Series(["7", "x"], dtype="string")).keys[0] == 7  # pandas' string dtype alike
    assert identities(pd.array([5, 6], dtype="Int64")).keys.tolist() == [5, 6]
    assert identities(pd.Categorical(["5", 5])).keys.tolist() == [5, 5]
    # the budget store and keyed noise read ids with the same function
    for ids in (forms, [nfd, "Renée"], ["a", "b", 3]):
        keys = identities(pd.Index(ids, dtype=object)).keys
        assert (person_keys(pd.Index(ids, dtype=object)).keys == np.unique(keys)).all()
        assert (identity_digests(pd.Index(ids, dtype=object))[0].view(np.int64) == keys).all()


@pytest.mark.parametrize(
    "bad",
    [[1, None], ["a", float("nan")], ["a", pd.NA], [True, 2], [1.0, 2.0], [448_123.25, 1], ["a", "  "], [2**70, 1],
     ["1" + "0" * 20, 1], [b"5", 1], [(1, 2), 3]],
)  # fmt: skip
def test_what_cannot_name_a_person_is_refused_by_row_label_never_by_value(bad):
    with pytest.raises(IdentityError) as err:
        identities(pd.Index(bad, dtype=object), pd.Index([10, 11]))
    text = str(err.value)
    assert "448123" not in text and "1e+20" not in text
    assert "11" in text or "10" in text or "row" in text


def test_the_canonical_order_is_integers_then_texts():
    ident = identities(pd.Index(["b", 3, "a", "-2", 3, "b"], dtype=object))
    persons, codes = ident.sorted_persons()
    assert persons == [-2, 3, "a", "b"]
    assert codes.tolist() == [3, 1, 2, 0, 1, 3]
    assert canonical_order([3, "a", -1]).tolist() == [2, 0, 1]


# ------------------------------------------------------------------------------------------ the property
def _written(gen, person: int, k: int):
    """Person ``person``'s id as row ``k`` writes it: one of the forms that all name that person."""
    if person < len(NAMES):  # a person known by a name
        name = NAMES[person]
        return [name, unicodedata.normalize("NFD", name), f" {name}", f"{name} "][gen.integers(4)]
    return [person, np.int64(person), str(person), f" {person}", f"0{person}", f"{person} "][gen.integers(6)]


def _people(seed: int, n_persons: int = 12, rows_each: int = 3):
    """Points of ``n_persons`` persons, ``rows_each`` rows each, every row writing its person's id its own way."""
    gen = np.random.default_rng(seed)
    person = np.repeat(np.arange(n_persons), rows_each)
    ids = pd.Series([_written(gen, int(p), k) for k, p in enumerate(person)], dtype=object)
    xy = np.column_stack([gen.uniform(500_100, 500_900, len(person)), gen.uniform(4_000_100, 4_000_900, len(person))])
    gdf = gpd.GeoDataFrame(
        {"user": ids.to_numpy(object), "truth": person},
        geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]),
        crs=32650,
        index=pd.Index(np.arange(len(person)) + 1000, name="row"),
    )
    return gdf.iloc[gen.permutation(len(gdf))]


def _store(tmp_path, name, total=1e7, unit="epsilon"):
    store = geopriv.BudgetStore(tmp_path / f"{name}.db", create=True)
    store.grant(total, unit=unit)
    return store


def _charged(store, unit="epsilon") -> pd.Series:
    bal = store.balances(unit=unit)
    return bal.set_index("person")["spent"]


def _lazy(gdf, n):
    import dask
    import dask_geopandas

    with dask.config.set({"dataframe.convert-string": False}):  # keep each partition's own types
        return dask_geopandas.from_geopandas(gdf, npartitions=n)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("backend", ["memory", "dask"])
@pytest.mark.parametrize("kind", ["aggregate", "heatmap"])
def test_counts_bound_and_charge_the_same_identities(tmp_path, seed, backend, kind):
    gdf = _people(seed)
    n_persons = gdf["truth"].nunique()
    store = _store(tmp_path, "b")
    data = gdf.drop(columns="truth")
    if backend == "dask":
        pytest.importorskip("dask_geopandas")
        data = _lazy(data, 3)
    if kind == "aggregate":
        out = geopriv.aggregate(data, EXACT, cells=500, bounds=BOX, user="user", max_per_user=1, budget_store=store)
        total = int(out["count"].sum())
    else:
        out = geopriv.heatmap(data, EXACT, resolution=500, bounds=BOX, user="user", max_per_user=1, budget_store=store)
        total = int(np.asarray(out.values).sum())
    assert total == n_persons  # one row kept per identity: 12 people, not one per written form
    charged = _charged(store)
    assert len(charged) == n_persons and np.allclose(charged.to_numpy(), EXACT)  # each identity charged once
    assert sorted(map(str, charged.index)) == sorted(
        map(str, [NAMES[p] if p < len(NAMES) else p for p in range(n_persons)])
    )


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("backend", ["memory", "dask"])
def test_flows_bound_and_charge_the_same_identities(tmp_path, seed, backend):
    gen = np.random.default_rng(seed)
    n_persons, trips_each = 6, 2
    rows = []
    for p in range(n_persons):
        for t in range(trips_each):
            for k, x in enumerate((500_100.0, 500_900.0)):  # every trip W -> E
                rows.append((f"t{p}-{t}", k, x, _written(gen, p, k)))
    df = pd.DataFrame(rows, columns=["trip", "t", "x", "user"])
    df["user"] = df["user"].astype(object)
    tracks = gpd.GeoDataFrame(df, geometry=gpd.points_from_xy(df.x, np.full(len(df), 4_000_500.0)), crs=32650)
    tracks = tracks.drop(columns="x").iloc[gen.permutation(len(tracks))]
    boxes = [shapely.box(500_000 + 500 * i, 4_000_000, 500_500 + 500 * i, 4_001_000) for i in range(2)]
    zones = gpd.GeoDataFrame({"zone": ["W", "E"]}, geometry=boxes, crs=32650)
    store = _store(tmp_path, "f")
    data = tracks if backend == "memory" else _lazy(tracks, 3)
    if backend == "dask":
        pytest.importorskip("dask_geopandas")
    out = geopriv.flows(
        data, EXACT, regions=zones, traj_id="trip", time="t", user="user", max_per_user=1, region_id="zone",
        budget_store=store,
    )  # fmt: skip
    assert int(out["count"].sum()) == n_persons  # one trip per identity
    charged = _charged(store)
    assert len(charged) == n_persons and np.allclose(charged.to_numpy(), EXACT)


@pytest.mark.parametrize("backend", ["memory", "dask"])
def test_perturb_refuses_one_person_written_twice_or_charges_them_per_row(tmp_path, backend):
    gdf = _people(0, n_persons=6, rows_each=1).drop(columns="truth")
    # "0" and 0 are the same person: two rows would answer for one person
    gdf["user"] = pd.Series(["0", 0, unicodedata.normalize("NFD", "Zoë"), "Renée", 7, " 8"], dtype=object).to_numpy()
    if backend == "dask":
        pytest.importorskip("dask_geopandas")

    def run(data, **kw):
        out = geopriv.perturb(data if backend == "memory" else _lazy(data, 2), epsilon=0.01, bounds=BOX, **kw)
        return out if backend == "memory" else out.compute()

    # one row per person (keyed noise): "0" and 0 are one person twice, refused
    with pytest.raises(IdentityError, match="same person"):
        run(gdf, person="user")
    # with a budget store a person may have several rows and pays for each: "0" and 0 pay together
    store = _store(tmp_path, "p", total=1.0, unit="epsilon/m")
    out = run(gdf, person="user", budget_store=store)
    charged = _charged(store, "epsilon/m")
    assert len(out) == len(gdf) and len(charged) == len(gdf) - 1
    assert np.isclose(charged.loc[0], 2 * charged.drop(index=0).iloc[0])  # two rows, one identity: twice
    assert "Zoë" in charged.index  # shown in its canonical (NFC) form


@pytest.mark.parametrize("backend", ["memory", "dask"])
def test_traces_are_one_trace_per_identity_charged_once(tmp_path, backend):
    gen = np.random.default_rng(3)
    n = 30
    t = pd.date_range("2024-01-01", periods=n, freq="min")
    xy = 500_500 + np.cumsum(gen.normal(0, 10, (n, 2)), axis=0)
    ids = pd.Series([_written(gen, 7, k) for k in range(n)], dtype=object)  # one person, written 6 ways
    gdf = gpd.GeoDataFrame(
        {"user": ids, "t": t}, geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1] + 3_500_000), crs=32650
    )
    gdf.index = pd.Index(np.arange(n) + 10, name="row")
    store = _store(tmp_path, "t", total=100.0, unit="epsilon/m")
    data = gdf if backend == "memory" else _lazy(gdf, 3)
    if backend == "dask":
        pytest.importorskip("dask_geopandas")
    out = geopriv.sanitize_traces(data, traj_id="user", time="t", epsilon=0.01, rate=0.1, budget_store=store)
    if backend == "dask":
        out = out.compute()
    ledger = geopriv.trace_ledger(out)
    assert len(ledger) == 1  # one trace, not one per written form
    charged = _charged(store, "epsilon/m")
    assert charged.index.tolist() == [7]
    assert np.isclose(charged.iloc[0], ledger["spent"].iloc[0], rtol=1e-6) or charged.iloc[0] >= ledger["spent"].iloc[0]


@pytest.mark.parametrize("backend", ["memory", "dask"])
def test_synthesize_charges_each_row_to_its_identity(tmp_path, backend):
    gdf = _people(1, n_persons=8, rows_each=2).drop(columns="truth")
    store = _store(tmp_path, "s")
    if backend == "dask":
        pytest.importorskip("dask_geopandas")
    out = geopriv.synthesize(
        gdf if backend == "memory" else _lazy(gdf, 3), 1.0, bounds=BOX, budget_store=store, person="user"
    )
    if backend == "dask":
        out.compute()
    charged = _charged(store)
    assert len(charged) == 8 and np.allclose(charged.to_numpy(), 2.0)  # two rows each, every form one person


def test_repeated_people_in_a_network_are_refused():
    from geopriv.people import index_people

    people = gpd.GeoDataFrame(
        {"pid": ["Renée", unicodedata.normalize("NFD", "Renée"), "Zoë"]},
        geometry=gpd.points_from_xy([0, 1, 2], [0, 0, 0]),
        crs=32650,
    )
    with pytest.raises(geopriv.GeoprivError, match="duplicate"):
        index_people(people, "pid")


def test_diffusion_recipients_named_twice_are_refused():
    from scipy.spatial import cKDTree

    from tests.conftest import data_path

    d = gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths").to_crs(27700)
    d = d[~d.geometry.duplicated()].reset_index(drop=True).iloc[:40]
    labels = [f"p{i}" for i in range(len(d))]
    labels[5], labels[6] = "Renée", unicodedata.normalize("NFD", "Renée")  # one person, two labels
    d.index = pd.Index(labels, dtype=object)
    xy = np.column_stack([d.geometry.x, d.geometry.y])
    _, nn = cKDTree(xy).query(xy, 4)
    edges = [(labels[i], labels[j]) for i in range(len(d)) for j in nn[i, 1:]]
    with pytest.raises(IdentityError, match="share their index label"):
        d.priv.diffuse_locations(lambda h: 0.01 / (1 + h), source="p0", graph=edges)
    d.index = pd.Index([*labels[:6], 6, *labels[7:]], dtype=object)  # distinct people, of mixed types: released
    edges = [(d.index[i], d.index[j]) for i in range(len(d)) for j in nn[i, 1:]]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res, _ = d.priv.diffuse_locations(lambda h: 0.01 / (1 + h), source="p0", graph=edges)
    assert 6 in res.index and "Renée" in res.index


def test_ids_that_display_alike_are_one_person():
    alike = ["Renée", "Renée\u200b", "\ufeffRenée", unicodedata.normalize("NFD", "Renée"), "Ren\u00e9e\u00a0"]
    assert len(set(identities(pd.Index(alike, dtype=object)).keys.tolist())) == 1
    assert set(identities(pd.Index(["５", "5", "\u200b5"], dtype=object)).keys.tolist()) == {5}  # full-width digit


def test_more_ids_that_display_alike_are_one_person():
    """From an attack review: joiners, variation selectors, fillers, controls and other scripts' digits."""
    alike = ["Renée", "Renée\u034f", "Renée\ufe0f", "Renée\u3164", "Renée\x00", "Ren\u00adée"]
    assert len(set(identities(pd.Index(alike, dtype=object)).keys.tolist())) == 1
    assert set(identities(pd.Index(["5\x00", "\u0665", "5\t", "5"], dtype=object)).keys.tolist()) == {5}


@pytest.mark.parametrize("backend", ["memory", "dask"])
def test_flows_trips_are_one_trip_per_identity(backend):
    """Without user= the trip is the unit counted once: trip 5 and trip "5" are one trip, not two."""
    rows = [(5, 0, 500_100.0), ("5", 1, 500_900.0), (" 5", 2, 500_950.0), (6, 0, 500_900.0), (6, 1, 500_100.0)]
    df = pd.DataFrame(rows, columns=["trip", "t", "x"])
    df["trip"] = df["trip"].astype(object)
    tracks = gpd.GeoDataFrame(df, geometry=gpd.points_from_xy(df.x, np.full(len(df), 4_000_500.0)), crs=32650)
    boxes = [shapely.box(500_000 + 500 * i, 4_000_000, 500_500 + 500 * i, 4_001_000) for i in range(2)]
    zones = gpd.GeoDataFrame({"zone": ["W", "E"]}, geometry=boxes, crs=32650)
    if backend == "dask":
        pytest.importorskip("dask_geopandas")
    data = tracks if backend == "memory" else _lazy(tracks, 2)
    out = geopriv.flows(data, EXACT, regions=zones, traj_id="trip", time="t", region_id="zone")
    got = {(o, d): c for o, d, c in zip(out.origin, out.destination, out["count"])}
    assert got == {("W", "W"): 0, ("W", "E"): 1, ("E", "W"): 1, ("E", "E"): 0}


def test_diffusion_recipients_mixed_with_other_labels_are_still_read_as_people():
    from geopriv.diffuse import _repeated_people

    labels = pd.Index(["Renée", unicodedata.normalize("NFD", "Renée"), 2.5, "x", 7, "7"], dtype=object)
    assert _repeated_people(labels).tolist() == [True, True, False, False, True, True]
