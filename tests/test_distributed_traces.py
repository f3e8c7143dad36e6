"""sanitize_traces on dask-geopandas: one release per call, whatever the partitioning (issue 16).

Traces are grouped whole into public buckets (trace-id hash modulo BUCKETS), shuffled on the
bucket, and each bucket is released by the in-memory function with the stream keyed by
(root, bucket); the root is drawn once when the lazy release is built.  Most tests use the
shipped GeoLife sample in UTM 50N (a planar frame: the per-bucket calls are cheap), with its
trajectories cut into trips of 300 fixes so that there are 22 traces in as many buckets.
"""

from __future__ import annotations

import inspect
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import geopriv

dask = pytest.importorskip("dask")
dask_geopandas = pytest.importorskip("dask_geopandas")

from geopriv.distributed.traces import BUCKETS, sanitize_traces_dask, trace_ledger_dask  # noqa: E402
from geopriv.traces import ledger_from_columns  # noqa: E402
from geopriv.exceptions import GeoprivError, LocationAttributeError  # noqa: E402

EPS = math.log(10) / 100
BEIJING_4326 = (115.4, 39.4, 117.6, 41.1)
#: the same study area in UTM 50N metres, rounded outwards (declared, not measured from the points)
BEIJING_UTM = (362_000.0, 4_362_000.0, 550_000.0, 4_550_000.0)
KW = dict(traj_id="trip", time="t", epsilon=EPS, rate=0.1, bounds=BEIJING_UTM)
ADDED = ["predicted", "status", "epsilon_spent"]


@pytest.fixture
def trips(geolife_sample):
    """GeoLife in UTM 50N, trajectories cut into trips of 300 fixes, opaque index labels.

    ``id`` and ``sequence`` (row numbers of the whole file) are dropped: within one bucket they
    are not row numbers any more, and the in-memory check may then refuse them as affine
    functions of the locations (see sanitize_traces_dask's docstring).
    """
    g = geolife_sample.to_crs(32650).drop(columns=["id", "sequence"])
    g["trip"] = g["trajectory_id"] * 1000 + g.groupby("trajectory_id").cumcount() // 300
    g.index = np.random.default_rng(0).permutation(len(g)) * 3 + 11
    return g


def ddf(gdf, n):
    return dask_geopandas.from_geopandas(gdf, npartitions=n)


def run(lazy, scheduler="sync"):
    return lazy.compute(scheduler=scheduler)


def assert_same_release(a, b):
    """Same rows (by label), same columns, same released points and statuses."""
    a, b = a.sort_index(), b.sort_index()
    assert a.index.equals(b.index)
    pd.testing.assert_frame_equal(a.drop(columns=a.geometry.name), b.drop(columns=b.geometry.name))
    both_missing = a.geometry.isna() & b.geometry.isna()
    assert bool((both_missing | a.geometry.geom_equals_exact(b.geometry, tolerance=0)).all())


# ---------------------------------------------------------------------------- the API
def test_signature_and_dispatch(trips):
    mem = inspect.signature(geopriv.sanitize_traces).parameters
    lazy = inspect.signature(sanitize_traces_dask).parameters
    assert [(p.name, p.kind, p.default) for p in mem.values()] == [(p.name, p.kind, p.default) for p in lazy.values()]
    d = ddf(trips, 2)
    for out in (geopriv.sanitize_traces(d, rng=1, **KW), d.priv.sanitize_traces(rng=1, **KW)):
        assert geopriv.daskhook.is_dask(out)
        assert list(out.columns) == list(trips.columns) + ADDED
    assert isinstance(BUCKETS, int) and BUCKETS == 1024


def test_import_geopriv_does_not_import_dask():
    code = (
        "import sys, geopriv, geopriv.traces; sys.exit(1 if any(m.split('.')[0] == 'dask' for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_bad_parameters_raise_before_any_data_is_read(trips):
    """A frame whose partitions raise when computed: every bad parameter raises its own error before any
    partition is read; a good build reads the data once (to bind the release to them: issue 30)."""

    def boom(part):
        raise RuntimeError("a partition was computed")

    d = ddf(trips, 3)
    poisoned = d.map_partitions(boom, meta=d._meta)
    with pytest.raises(RuntimeError, match="a partition was computed"):
        geopriv.sanitize_traces(poisoned, rng=1, **KW)  # the build reads the data (no noise is drawn)
    bad = [
        (dict(KW, rate=None), ValueError, "rate"),
        (dict(KW, rate=1.5), ValueError, "rate"),
        (dict(KW, epsilon=-1.0), ValueError, "epsilon"),
        (dict(KW, epsilon=None, level=math.log(10)), ValueError, "level"),
        (dict(KW, method="nope"), ValueError, "method"),
        (dict(KW, on_exhausted="nope"), ValueError, "on_exhausted"),
        (dict(KW, budget="nope"), ValueError, "budget"),
        (dict(KW, delta=0.3), ValueError, "delta"),
        (dict(KW, grid=-1.0), ValueError, "grid"),
        (dict(KW, traj_id="nope"), GeoprivError, "nope"),
        (dict(KW, time="nope"), GeoprivError, "nope"),
        (dict(KW, traj_id="geometry"), GeoprivError, "geometry"),
        (dict(KW, keep=["nope"]), ValueError, "keep"),
        (dict(KW, method="independent", skip_speed=1.0), ValueError, "predictive"),
        (dict(KW, time=None), ValueError, "time"),  # the shuffle does not keep the row order
        (dict(KW, bounds=BEIJING_4326), geopriv.exceptions.CRSError, "bounds"),  # degrees as UTM metres
    ]
    for kw, exc, match in bad:
        with pytest.raises(exc, match=match):
            geopriv.sanitize_traces(poisoned, rng=1, **kw)
    with pytest.raises(TypeError, match="traj_id"):
        geopriv.sanitize_traces(poisoned, epsilon=EPS, time="t", rate=0.1, bounds=BEIJING_UTM)
    with pytest.raises(TypeError, match="rng"):
        geopriv.sanitize_traces(poisoned, rng=np.random.RandomState(0), **KW)
    clash = poisoned.assign(status="x")
    with pytest.raises(GeoprivError, match="status"):
        geopriv.sanitize_traces(clash, rng=1, **KW)


def test_meta_is_the_computed_schema(trips):
    lazy = geopriv.sanitize_traces(ddf(trips, 4), rng=2, **KW)
    out = run(lazy)
    meta = lazy._meta
    assert list(meta.columns) == list(out.columns) == list(trips.columns) + ADDED
    pd.testing.assert_series_equal(meta.dtypes, out.dtypes)
    assert meta.crs == out.crs == trips.crs and meta.geometry.name == out.geometry.name
    assert meta.index.dtype == out.index.dtype
    assert meta.attrs == out.attrs  # the one record, on the meta and on every partition
    # and the in-memory output's dtypes on the same data (as dask holds it: dask may convert text columns)
    held = ddf(trips, 1).compute()
    mem = geopriv.sanitize_traces(held[held["trip"] == held["trip"].iloc[0]], rng=2, **KW)
    pd.testing.assert_series_equal(mem.dtypes, out.dtypes)


# ---------------------------------------------------------------------------- one release
def test_the_lazy_release_recomputed_is_identical_even_without_a_seed(trips):
    lazy = geopriv.sanitize_traces(ddf(trips, 3), **KW)  # rng=None: OS entropy, drawn once, at build time
    a, b = run(lazy), run(lazy)
    assert_same_release(a, b)
    assert a.attrs == b.attrs and a.attrs["geopriv"]["seeded"] is False


def test_two_builds_without_a_seed_differ(trips):
    d = ddf(trips, 2)
    a = run(geopriv.sanitize_traces(d, **KW))
    b = run(geopriv.sanitize_traces(d, **KW)).loc[a.index]
    released = (a["status"] == "noise") & (b["status"] == "noise")
    assert released.sum() > 20
    assert not a.geometry[released].geom_equals_exact(b.geometry[released], tolerance=0).any()


def test_a_seeded_release_does_not_depend_on_the_partitioning(trips):
    outs = [run(geopriv.sanitize_traces(ddf(trips, n), rng=7, **KW)) for n in (1, 4, 8)]
    for other in outs[1:]:
        assert_same_release(outs[0], other)
    assert outs[0]["status"].nunique() >= 2  # something was released and something predicted or exhausted
    # and not on the order of the input rows either
    shuffled = trips.sample(frac=1.0, random_state=3)
    assert_same_release(outs[0], run(geopriv.sanitize_traces(ddf(shuffled, 5), rng=7, **KW)))


def test_threads_and_synchronous_schedulers_agree(trips):
    lazy = geopriv.sanitize_traces(ddf(trips, 4), rng=11, **KW)
    assert_same_release(run(lazy, "sync"), run(lazy, "threads"))


def test_every_row_comes_back_once_and_every_trace_whole_within_its_budget(trips):
    lazy = geopriv.sanitize_traces(ddf(trips, 6), rng=3, **KW)
    # each trace sits in exactly one partition of the result
    per_part = lazy.map_partitions(lambda p: p[["trip"]].drop_duplicates(), meta=trips[["trip"]].iloc[:0])
    ids = run(per_part)["trip"]
    assert ids.is_unique and set(ids) == set(trips["trip"])
    out = run(lazy)
    assert out.index.is_unique and set(out.index) == set(trips.index) and len(out) == len(trips)
    held = ddf(trips, 1).compute()  # the input as dask holds it (dask may convert text columns)
    pd.testing.assert_frame_equal(out.drop(columns=ADDED + ["geometry"]).loc[held.index], held.drop(columns="geometry"))
    spent = out.groupby("trip")["epsilon_spent"].sum()
    assert (spent <= EPS * (1 + 1e-12)).all() and (spent > 0).all()
    exhausted = out["status"] == "exhausted"
    assert exhausted.any() and out.geometry[exhausted].isna().all() and not out.geometry[~exhausted].isna().any()
    assert (out.loc[exhausted, "epsilon_spent"] == 0).all()
    d = geopriv.displacement(trips.loc[out.index[~exhausted]], out[~exhausted])
    assert np.isfinite(d).all() and (d > 0).all()  # never the true point


def test_the_record_is_the_in_memory_record_without_the_per_bucket_fields(trips):
    lazy = geopriv.sanitize_traces(ddf(trips, 2), rng=4, **KW)
    rec = lazy._meta.attrs["geopriv"]
    one = trips[trips["trip"] == trips["trip"].iloc[0]]
    mem = geopriv.sanitize_traces(one, rng=4, **KW).attrs["geopriv"]
    varying = {"n", "traces", "n_released", "ledger", "created_utc"}
    assert {k: v for k, v in rec.items() if k not in varying} == {k: v for k, v in mem.items() if k not in varying}
    assert all(rec[k] is None for k in ("n", "traces", "n_released", "ledger"))
    out = run(lazy)
    assert out.attrs["geopriv"] == rec


# ---------------------------------------------------------------------------- the ledger
def test_the_ledger_of_the_whole_release(trips):
    lazy = geopriv.sanitize_traces(ddf(trips, 4), rng=5, **KW)
    ledger_lazy = geopriv.trace_ledger(lazy)
    assert geopriv.daskhook.is_dask(ledger_lazy)
    out, led = dask.compute(lazy, ledger_lazy, scheduler="sync")  # the mechanism runs once for both
    assert led.index.name == "trip" and led.index.is_unique and set(led.index) == set(trips["trip"])
    assert led.index.is_monotonic_increasing
    pd.testing.assert_frame_equal(led, geopriv.trace_ledger(out))  # the computed release gives the same table
    pd.testing.assert_frame_equal(led, out.priv.trace_ledger())
    pd.testing.assert_frame_equal(led, trace_ledger_dask(out))
    assert (led["queries"] == trips.groupby("trip").size().loc[led.index]).all()
    assert (led["released"] + led["exhausted"] == led["queries"]).all()
    assert (led["noise"] + led["predicted"] + led["skipped"] == led["released"]).all()
    assert (led["spent"] <= led["budget"]).all() and np.allclose(led["budget"], EPS)
    by = out.groupby("trip")["epsilon_spent"].sum()
    np.testing.assert_allclose(led.loc[by.index, "spent"], by, rtol=1e-12)
    assert led["tests"].isna().all() and led["spent_test"].isna().all()  # not in the output's columns


@pytest.mark.parametrize("method, extra", [("predictive", dict(skip_speed=4.17)), ("independent", dict())])
def test_the_ledger_from_the_columns_is_the_mechanisms_ledger(trips, method, extra):
    """In memory, the exact ledger (from the run) and the one from the output's columns agree."""
    kw = dict(KW, method=method, **extra)
    out = geopriv.sanitize_traces(trips, rng=6, **kw)
    exact = geopriv.trace_ledger(out)
    derived = ledger_from_columns(out)
    assert list(derived.columns) == list(exact.columns) and derived.index.equals(exact.index)
    always = [
        "queries",
        "released",
        "noise",
        "predicted",
        "skipped",
        "exhausted",
        "budget",
        "spent",
        "remaining",
        "prediction_rate",
        "budget_rate",
    ]
    pd.testing.assert_frame_equal(derived[always], exact[always], check_exact=False, rtol=1e-12, atol=1e-15)
    if method == "independent":  # no tests: the split is known
        assert (derived["tests"] == 0).all()
        pd.testing.assert_frame_equal(
            derived[["spent_test", "spent_noise"]],
            exact[["spent_test", "spent_noise"]],
            check_exact=False,
            rtol=1e-12,
            atol=1e-15,
        )
    else:
        assert derived["tests"].isna().all() and derived["spent_noise"].isna().all()


# ---------------------------------------------------------------------------- more inputs
def test_longitude_latitude_data(geolife_sample):
    """Lon/lat data (an equidistant frame on the declared bounds), traces = GeoLife trajectories (200 fixes each)."""
    g = geolife_sample.groupby("trajectory_id").head(200)
    kw = dict(traj_id="trajectory_id", time="t", level=math.log(10), radius=100, rate=0.1, bounds=BEIJING_4326)
    a = run(geopriv.sanitize_traces(ddf(g, 1), rng=3, **kw))
    b = run(geopriv.sanitize_traces(ddf(g, 3), rng=3, **kw), "threads")
    assert_same_release(a, b)
    assert a.crs == g.crs and set(a.index) == set(g.index)
    led = geopriv.trace_ledger(a)
    assert len(led) == g["trajectory_id"].nunique() and (led["spent"] <= led["budget"]).all()


def test_one_trace_without_ids_and_a_geoseries(trips):
    one = trips[trips["trip"] == trips["trip"].iloc[0]].sort_values("t")
    kw = dict(epsilon=EPS, rate=0.1, bounds=BEIJING_UTM, rng=8)
    a = run(geopriv.sanitize_traces(ddf(one, 3), traj_id=None, time="t", **kw))
    b = run(geopriv.sanitize_traces(ddf(one.sample(frac=1.0, random_state=1), 2), traj_id=None, time="t", **kw))
    assert_same_release(a, b)
    series = dask_geopandas.from_geopandas(one.geometry, npartitions=3, sort=False)  # rows in query order
    s = run(geopriv.sanitize_traces(series, **kw))
    assert list(s.columns) == ["geometry"] + ADDED and s.index.equals(one.index)  # the row order kept
    mem = geopriv.sanitize_traces(one.geometry, **kw)  # one trace, one bucket: the in-memory layout
    assert list(mem.columns) == list(s.columns)
    led = geopriv.trace_ledger(s)
    assert len(led) == 1 and led.index.name == "trace" and led["queries"].iloc[0] == len(one)


def test_a_location_column_is_refused_when_computed(trips):
    leaky = trips.assign(easting=trips.geometry.x)
    lazy = geopriv.sanitize_traces(ddf(leaky, 2), rng=1, **KW)  # the rows are checked per bucket, at compute time
    with pytest.raises(LocationAttributeError, match="easting"):
        run(lazy)
    out = run(geopriv.sanitize_traces(ddf(leaky, 2), rng=1, keep=["easting"], **KW))
    assert out.attrs["geopriv"]["kept_columns"] == ["easting"]


# ---------------------------------------------------------------------------- keyed per trace (issue 30)
def test_a_trace_added_to_a_bucket_leaves_the_other_traces_alone(trips, monkeypatch):
    """Appending another user's trace (whatever bucket it hashes to) re-draws nothing that did not change,
    and a changed trace is released anew (its noise is not the old noise moved by the change)."""
    # one root for every build (what keyed per-trace noise is about): a seed alone is bound to the whole data,
    # so seeded builds on different data share no noise at all (tests/test_seed_binding.py)
    import geopriv.distributed
    from geopriv.keys import SecretRoot

    monkeypatch.setattr(geopriv.distributed, "root_entropy", lambda rng=None, *a, **k: (SecretRoot.draw(rng), rng))
    trip_ids = trips["trip"].unique()
    base = trips[trips["trip"] != trip_ids[0]]
    before = run(geopriv.sanitize_traces(ddf(base, 3), rng=5, **KW))
    after = run(geopriv.sanitize_traces(ddf(trips, 4), rng=5, **KW)).loc[before.index]
    assert_same_release(before, after)
    # one trace moved by 30 m east: only its rows change, and never by exactly the move
    moved = trips.copy()
    sel = moved["trip"] == trip_ids[1]
    moved.loc[sel, "geometry"] = moved.loc[sel].geometry.translate(30.0, 0.0)
    ref = run(geopriv.sanitize_traces(ddf(trips, 4), rng=5, **KW))
    out = run(geopriv.sanitize_traces(ddf(moved, 4), rng=5, **KW)).loc[ref.index]
    assert_same_release(ref[~sel.loc[ref.index]], out[~sel.loc[ref.index]])
    both = sel.loc[ref.index] & ref.geometry.notna() & out.geometry.notna()
    dx = out.geometry[both].x.to_numpy() - ref.geometry[both].x.to_numpy()
    dy = out.geometry[both].y.to_numpy() - ref.geometry[both].y.to_numpy()
    assert both.sum() >= 5
    assert not np.any((np.abs(dx - 30.0) < 1e-6) & (np.abs(dy) < 1e-6))


def test_review_findings_on_the_lazy_trace_release(trips, tmp_path):
    """Issue 30 review: a vectorised custom predictor would make a trace's release depend on its bucket
    neighbours; bounds= from the data must be checked over all buckets; a build answers its data only."""
    from geopriv.exceptions import StaleReleaseError

    def crowd(run):
        return np.repeat(run.last_reported.mean(0, keepdims=True), len(run), 0)

    with pytest.raises(GeoprivError, match="custom vectorised predictor"):
        geopriv.sanitize_traces(ddf(trips, 2), rng=1, **dict(KW, predictor=crowd))
    per_trace = geopriv.mechanisms.predictive.per_trace_predictor(lambda rep, hard, times: rep[-1])
    run(geopriv.sanitize_traces(ddf(trips, 2), rng=1, **dict(KW, predictor=per_trace)))  # per trace: accepted
    with pytest.raises(GeoprivError, match="computed from the data"):
        geopriv.sanitize_traces(ddf(trips, 4), rng=1, **dict(KW, bounds=tuple(trips.total_bounds)))
    files = trips.reset_index(names="fix")
    files.iloc[:3000].to_parquet(tmp_path / "a.parquet", index=False)
    files.iloc[3000:].to_parquet(tmp_path / "b.parquet", index=False)
    lazy = geopriv.sanitize_traces(dask_geopandas.read_parquet(str(tmp_path / "*.parquet")), rng=1, **KW)
    run(lazy)
    changed = files.iloc[3000:].copy()
    changed["geometry"] = changed.geometry.translate(1.0, 0.0)  # every fix of the second file moved a metre
    changed.to_parquet(tmp_path / "b.parquet", index=False)
    with pytest.raises(StaleReleaseError):
        run(lazy)


def test_the_trace_binding_covers_what_the_noise_depends_on(tmp_path):
    """Second review: with no ids and no time stamps the row order is the query order, and a Z change or a
    reordering must be refused (the digest ignored both and the trace was re-released with fresh noise)."""
    import geopandas as gpd

    from geopriv.exceptions import StaleReleaseError

    rng = np.random.default_rng(4)
    xy = np.column_stack([rng.uniform(450_000, 452_000, 10), rng.uniform(4_420_000, 4_422_000, 10)])
    g = gpd.GeoDataFrame(geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1], np.ones(10)), crs=32650)
    g.iloc[:5].to_parquet(tmp_path / "a.parquet", index=False)
    g.iloc[5:].to_parquet(tmp_path / "b.parquet", index=False)
    kw = dict(traj_id=None, time=None, epsilon=EPS, rate=0.2, bounds=BEIJING_UTM, rng=1)
    lazy = geopriv.sanitize_traces(dask_geopandas.read_parquet(str(tmp_path / "*.parquet")), **kw)
    run(lazy)
    g.iloc[5:].iloc[::-1].to_parquet(tmp_path / "b.parquet", index=False)  # the same rows, reordered
    with pytest.raises(StaleReleaseError):
        run(lazy)
    g.iloc[5:].to_parquet(tmp_path / "b.parquet", index=False)
    run(lazy)  # restored: a replay
    moved = g.iloc[5:].copy()
    moved["geometry"] = gpd.points_from_xy(xy[5:, 0], xy[5:, 1], np.full(5, 7.0))  # only Z changed
    moved.to_parquet(tmp_path / "b.parquet", index=False)
    with pytest.raises(StaleReleaseError):
        run(lazy)
