"""A budget store on dask: the driver charges once, when the lazy release is built (before the graph runs).

A lazy release's noise is keyed (secret root, person id, row content), so computing it again, or a
retried task, replays the same release: it is charged once, at the call, with what the build's pass
over ALL partitions counted (rows per person, traces and their lengths), and the same amounts as
the in-memory release of the same data.  Real SQLite files, a real PostgreSQL server (``pg_url``)
and real dask-geopandas frames; the data are fixed (seeded), so nothing here is statistical.
"""

from __future__ import annotations

import math
import pickle

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

import geopriv
from geopriv.budget import PER_METRE, PURE
from geopriv.exceptions import BudgetExceededError, GeoprivError, IdentityError

dask = pytest.importorskip("dask")
dask_geopandas = pytest.importorskip("dask_geopandas")

from geopriv.distributed.perturb import perturb_dask  # noqa: E402
from geopriv.distributed.synthesize import synthesize_dask  # noqa: E402

EPS = {"level": math.log(4), "radius": 200}
TRACE_EPS = math.log(10) / 100
#: GeoLife's study area in UTM 50N metres, declared (as in tests/test_distributed_traces.py)
BEIJING_UTM = (362_000.0, 4_362_000.0, 550_000.0, 4_550_000.0)
TRACES = {"traj_id": "trip", "time": "t", "epsilon": TRACE_EPS, "rate": 0.1, "bounds": BEIJING_UTM}


@pytest.fixture(scope="module")
def people():
    """600 points in UTM 50N of 150 persons (string ids, 4 rows each), rows in random order, a named index."""
    rng = np.random.default_rng(11)
    n = 600
    pid = np.repeat([f"person-{i}" for i in range(150)], 4)
    order = rng.permutation(n)
    gdf = gpd.GeoDataFrame(
        {"pid": pid[order]},
        geometry=gpd.points_from_xy(448_000 + rng.uniform(0, 8_000, n), 4_416_000 + rng.uniform(0, 8_000, n)),
        crs=32650,
    )
    gdf.index = pd.Index(np.arange(n) * 7 + 3, name="row")
    return gdf


@pytest.fixture
def trips(geolife_sample):
    """GeoLife in UTM 50N cut into trips of 300 fixes (22 traces of 5 persons: ``trajectory_id``), opaque labels.

    The random labels scatter every trip over all partitions (from_geopandas sorts by label).
    """
    g = geolife_sample.to_crs(32650).drop(columns=["id", "sequence", "tracker"])
    g["trip"] = g["trajectory_id"] * 1000 + g.groupby("trajectory_id").cumcount() // 300
    g.index = np.random.default_rng(0).permutation(len(g)) * 3 + 11
    return g


def lazy(gdf, k):
    return dask_geopandas.from_geopandas(gdf, npartitions=k)


def store_at(tmp_path, name, per_metre=1.0, pure=100.0):
    """A fresh SQLite store with default lifetime budgets in both units."""
    store = geopriv.BudgetStore(f"sqlite:///{tmp_path / name}.db", create=True)
    store.grant(per_metre, unit=PER_METRE)
    store.grant(pure, unit=PURE)
    return store


def spent(store, unit):
    """Each person's spent budget in ``unit``, by person (the store's key order)."""
    b = store.balances(unit=unit)
    return pd.Series(b["spent"].to_numpy(), index=pd.Index(b["person"].to_numpy(object), name="person"))


def partitions_of(ddf, column):
    """For each value of ``column``, the number of partitions holding its rows."""
    seen = {}
    for i in range(ddf.npartitions):
        for v in pd.unique(ddf.partitions[i][column].compute()):
            seen.setdefault(v, set()).add(i)
    return pd.Series({k: len(v) for k, v in seen.items()})


def test_the_lazy_functions_take_the_in_memory_budget_parameters():
    import inspect

    for mem, dsk in ((geopriv.perturb, perturb_dask), (geopriv.synthesize, synthesize_dask)):
        a = [(p.name, p.kind, p.default) for p in inspect.signature(mem).parameters.values()]
        b = [(p.name, p.kind, p.default) for p in inspect.signature(dsk).parameters.values()]
        assert sorted(map(str, a)) == sorted(map(str, b))  # perturb_dask takes person= for its keyed noise too


# ---------------------------------------------------------------------------- perturb
def test_perturb_charges_each_person_once_at_build_as_in_memory(people, tmp_path):
    mem_store, dask_store = store_at(tmp_path, "mem"), store_at(tmp_path, "dask")
    d = lazy(people, 4)
    assert (partitions_of(d, "pid") > 1).sum() > 100  # most persons have rows in several partitions
    mem = people.priv.perturb(**EPS, budget_store=mem_store, person="pid")
    out = d.priv.perturb(**EPS, budget_store=dask_store, person="pid")  # charged here, before anything is computed
    a, b = spent(mem_store, PER_METRE), spent(dask_store, PER_METRE)
    pd.testing.assert_series_equal(a, b)  # the same persons, the same amounts (bit for bit)
    per_row = mem.attrs["geopriv"]["charged_per_row"]
    assert len(b) == 150 and np.all(b.to_numpy() == per_row * 4)  # four rows each, wherever they are
    rel = dask_store.releases().iloc[0]
    assert (rel["kind"], rel["unit"], rel["state"], rel["persons"], rel["rows_released"]) == (
        "perturb",
        PER_METRE,
        "charged",
        150,
        600,
    )
    record = out.compute().attrs["geopriv"]
    for key in ("budget_store", "budget_unit", "charged_per_row", "effective_epsilon_per_m"):
        assert record[key] == mem.attrs["geopriv"][key]
    assert record["budget_store"] == "sqlite"


def test_computing_a_lazy_release_again_charges_nothing_more(people, tmp_path):
    store = store_at(tmp_path, "s")
    out = lazy(people, 3).priv.perturb(**EPS, budget_store=store, person="pid")
    after_build = spent(store, PER_METRE)
    first, second = out.compute(), out.compute(scheduler="threads")
    persisted = out.persist().compute()
    assert first.geometry.equals(second.geometry) and first.geometry.equals(persisted.geometry)  # a replay
    pd.testing.assert_series_equal(spent(store, PER_METRE), after_build)
    assert len(store.releases()) == 1


def test_an_overspend_is_refused_at_the_call_counting_rows_in_every_partition(people, tmp_path):
    store = store_at(tmp_path, "s")
    d = lazy(people, 4)
    spread = partitions_of(d, "pid")
    victim = spread.index[spread.to_numpy() == spread.max()][0]  # rows in the most partitions
    probe = people.priv.perturb(**EPS, budget_store=store_at(tmp_path, "probe"), person="pid")
    per_row = probe.attrs["geopriv"]["charged_per_row"]
    store.grant(3.5 * per_row, unit=PER_METRE, persons=[victim])  # any partition alone fits, all four rows do not
    before = store.balances()
    with pytest.raises(BudgetExceededError) as err:
        d.priv.perturb(**EPS, budget_store=store, person="pid")
    assert repr(victim) in str(err.value) and "Nothing was drawn or charged" in str(err.value)
    assert "448" not in str(err.value) and "4416" not in str(err.value)  # no coordinate
    pd.testing.assert_frame_equal(store.balances(), before)  # nothing charged
    assert store.releases().empty
    assert err.value.fix is not None


def test_rows_of_one_person_at_the_same_point_are_refused_over_all_partitions(people, tmp_path):
    store = store_at(tmp_path, "s")
    twin = people.iloc[[0]].copy()
    twin.index = pd.Index([10**6], name="row")  # the same person at the same point, the largest label: last partition
    data = pd.concat([people, twin])
    d = lazy(data, 3)
    assert d.partitions[0].compute().index.min() == people.index.min()
    with pytest.raises(IdentityError) as err:
        d.priv.perturb(**EPS, budget_store=store, person="pid")
    assert {int(people.index[0]), 10**6} <= set(err.value.labels)
    assert "same point" in str(err.value) and err.value.fix is not None
    assert store.releases().empty and (store.balances()["spent"] == 0).all()
    with pytest.raises(IdentityError):  # the same within one partition
        lazy(data, 1).priv.perturb(**EPS, budget_store=store, person="pid")
    # the same person elsewhere is another release of that person, each charged: accepted
    moved = twin.set_geometry(twin.geometry.translate(1.0, 0.0))
    out = lazy(pd.concat([people, moved]), 3).priv.perturb(**EPS, budget_store=store, person="pid")
    assert len(out.compute()) == 601
    assert spent(store, PER_METRE)[people["pid"].iloc[0]] == pytest.approx(
        5 * spent(store, PER_METRE)[people["pid"].iloc[1]] / 4
    )


def test_without_a_store_person_ids_stay_unique(people):
    with pytest.raises(IdentityError, match="repeat"):
        lazy(people, 2).priv.perturb(**EPS, person="pid")


def test_the_index_is_the_person_by_default_and_positions_are_refused(people, tmp_path):
    mem_store, dask_store = store_at(tmp_path, "mem"), store_at(tmp_path, "dask")
    people.priv.perturb(**EPS, budget_store=mem_store)
    lazy(people, 2).priv.perturb(**EPS, budget_store=dask_store)
    pd.testing.assert_series_equal(spent(mem_store, PER_METRE), spent(dask_store, PER_METRE))
    assert len(spent(dask_store, PER_METRE)) == 600
    with pytest.raises(IdentityError, match="positions"):
        lazy(people.reset_index(drop=True), 2).priv.perturb(**EPS, budget_store=dask_store)
    assert len(dask_store.releases()) == 1


def test_the_store_never_enters_the_graph(people, tmp_path):
    url = f"sqlite:///{tmp_path / 'by-url-store'}.db"
    store_at(tmp_path, "by-url-store").close()
    out = lazy(people, 2).priv.perturb(**EPS, budget_store=url, person="pid")  # opened and closed on the driver
    with geopriv.keys.allow_secret_pickling():  # a lazy release pickles only by opt-in (it holds its root)
        blob = pickle.dumps(out)  # a BudgetStore refuses to be pickled: none is in the graph, nor its URL
    assert b"by-url-store" not in blob and b"BudgetStore" not in blob  # the record says "sqlite", its kind, only
    computed = out.compute(scheduler="processes", num_workers=2)  # tasks pickled to worker processes
    assert computed.attrs["geopriv"]["budget_store"] == "sqlite"
    with geopriv.BudgetStore(url) as store:
        assert len(store.releases()) == 1 and (spent(store, PER_METRE) > 0).all()


# ---------------------------------------------------------------------------- synthesize
def test_synthesize_charges_epsilon_per_row_once_as_in_memory(people, tmp_path):
    mem_store, dask_store = store_at(tmp_path, "mem"), store_at(tmp_path, "dask")
    mem = people.priv.synthesize(0.5, bounds=BEIJING_UTM, budget_store=mem_store, person="pid", rng=1)
    out = lazy(people, 4).priv.synthesize(0.5, bounds=BEIJING_UTM, budget_store=dask_store, person="pid", rng=1)
    pd.testing.assert_series_equal(spent(mem_store, PURE), spent(dask_store, PURE))
    assert np.all(spent(dask_store, PURE).to_numpy() == 4 * 0.5)  # four rows in up to four partitions: 4 epsilon
    assert spent(dask_store, PER_METRE).empty  # units apart
    first, second = out.compute(), out.compute()
    assert first.geometry.equals(second.geometry)
    assert len(dask_store.releases()) == 1 and np.all(spent(dask_store, PURE).to_numpy() == 2.0)
    for key in ("budget_store", "budget_unit", "charged_per_row"):
        assert first.attrs["geopriv"][key] == mem.attrs["geopriv"][key]


def test_synthesize_overspend_is_refused_at_the_call(people, tmp_path):
    store = store_at(tmp_path, "s", pure=1.9)  # 4 rows at 0.5 each: 2.0 > 1.9 for everyone
    with pytest.raises(BudgetExceededError, match="150 person"):
        lazy(people, 3).priv.synthesize(0.5, bounds=BEIJING_UTM, budget_store=store, person="pid")
    assert store.releases().empty and store.balances().empty
    with pytest.raises(GeoprivError, match="not a column"):
        lazy(people, 3).priv.synthesize(0.5, bounds=BEIJING_UTM, budget_store=store, person="nope")


# ---------------------------------------------------------------------------- traces
def test_traces_charge_each_traces_worst_case_once_at_build(trips, tmp_path):
    mem_store, dask_store = store_at(tmp_path, "mem"), store_at(tmp_path, "dask")
    d = lazy(trips, 4)
    assert (partitions_of(d, "trip") == 4).all()  # every trip is split over the partitions
    mem = trips.priv.sanitize_traces(**TRACES, budget_store=mem_store, person="trajectory_id", rng=2)
    out = d.priv.sanitize_traces(**TRACES, budget_store=dask_store, person="trajectory_id", rng=2)
    charged = spent(dask_store, PER_METRE)
    assert list(charged.index) == [1, 2, 3, 4, 5]  # the persons, not the 22 trips
    # the worst case the in-memory release reserved (epsilon + the lattice's increment per row, per trace),
    # spent in full: the lazy ledger is known only when computed
    worst = mem_store.charges().groupby("person")["reserved"].sum()
    np.testing.assert_array_equal(charged.to_numpy(), worst.loc[charged.index].to_numpy())
    assert (charged >= spent(mem_store, PER_METRE)).all()
    trips_per_person = trips.groupby("trajectory_id")["trip"].nunique()
    assert (charged > trips_per_person.loc[charged.index] * TRACE_EPS).all()  # a person pays for every trip
    assert dask_store.releases()["state"].tolist() == ["charged"]
    assert mem_store.releases()["state"].tolist() == ["settled"]
    result = out.compute()
    again = out.compute()
    assert result.sort_index().geometry.equals(again.sort_index().geometry)
    pd.testing.assert_series_equal(spent(dask_store, PER_METRE), charged)
    assert len(dask_store.releases()) == 1
    rec = result.attrs["geopriv"]
    assert (rec["budget_store"], rec["budget_unit"], rec["charged_per_row"]) == ("sqlite", PER_METRE, None)
    assert mem.attrs["geopriv"]["budget_unit"] == PER_METRE


def test_traces_default_person_is_the_trace_id(trips, tmp_path):
    store = store_at(tmp_path, "s")
    lazy(trips, 3).priv.sanitize_traces(**TRACES, budget_store=store)
    charged = spent(store, PER_METRE)
    assert sorted(charged.index) == sorted(trips["trip"].unique())


def test_traces_refusals_come_at_the_call_with_nothing_charged(trips, tmp_path):
    store = store_at(tmp_path, "s")
    store.grant(2.5 * TRACE_EPS, unit=PER_METRE, persons=[4])  # person 4 has 7 trips
    d = lazy(trips, 4)
    with pytest.raises(BudgetExceededError) as err:
        d.priv.sanitize_traces(**TRACES, budget_store=store, person="trajectory_id")
    assert "1 person(s) would exceed their lifetime budget in 'epsilon/m': 4 " in str(err.value)
    assert store.releases().empty
    assert (store.balances()["spent"] == 0).all()
    changing = trips.assign(owner=np.where(np.arange(len(trips)) % 2 == 0, 1, 2))  # every trip has two owners
    with pytest.raises(GeoprivError, match="changes within 22 trace"):
        lazy(changing, 4).priv.sanitize_traces(**TRACES, budget_store=store, person="owner")
    with pytest.raises(GeoprivError, match="needs person="):
        lazy(trips, 2).priv.sanitize_traces(**{**TRACES, "traj_id": None}, budget_store=store)
    missing = trips.assign(trip=trips["trip"].astype("Int64"))
    missing.loc[missing.index[5], "trip"] = pd.NA
    with pytest.raises(GeoprivError, match="no trace id|missing trace id"):  # whichever check of the pass fails first
        lazy(missing, 2).priv.sanitize_traces(**TRACES, budget_store=store)
    assert store.releases().empty and (store.balances()["spent"] == 0).all()


def test_one_trace_without_ids_charges_its_person(trips, tmp_path):
    one = trips[trips["trip"] == trips["trip"].iloc[0]].sort_values("t")
    mem_store, dask_store = store_at(tmp_path, "mem"), store_at(tmp_path, "dask")
    kw = {**TRACES, "traj_id": None}
    one.priv.sanitize_traces(**kw, budget_store=mem_store, person="trajectory_id")
    lazy(one, 2).priv.sanitize_traces(**kw, budget_store=dask_store, person="trajectory_id")
    worst = mem_store.charges()["reserved"].to_numpy()
    np.testing.assert_array_equal(spent(dask_store, PER_METRE).to_numpy(), worst)


# ---------------------------------------------------------------------------- PostgreSQL
def test_a_lazy_release_charges_a_postgresql_store_once(people, pg_url, tmp_path):
    pg = geopriv.BudgetStore(pg_url, create=True)
    pg.grant(1.0, unit=PER_METRE)
    mem_store = store_at(tmp_path, "mem")
    people.priv.perturb(**EPS, budget_store=mem_store, person="pid")
    out = lazy(people, 4).priv.perturb(**EPS, budget_store=pg, person="pid")
    pd.testing.assert_series_equal(spent(pg, PER_METRE), spent(mem_store, PER_METRE))
    out.compute()
    out.compute()
    pd.testing.assert_series_equal(spent(pg, PER_METRE), spent(mem_store, PER_METRE))
    assert len(pg.releases()) == 1 and out.compute().attrs["geopriv"]["budget_store"] == "postgresql"
    pg.close()
