"""geopriv on dask-geopandas: a lazy release is one release, whatever the partitioning or scheduler."""

from __future__ import annotations

import math
import subprocess
import sys

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

import geopriv
from geopriv.exceptions import GeometryError, GeoprivError, IdentityError
from geopriv.mechanisms.planar_laplace import GeoIndistinguishability
from tests.conftest import data_path

dask_geopandas = pytest.importorskip("dask_geopandas")  # part of the test environment: geopriv[all]

SOHO = (-15800, 6711900, -14600, 6713300)
EPS = dict(level=math.log(4), radius=200)


@pytest.fixture(scope="module")
def points():
    """20,000 points in UTM 50N with a named integer index of person ids (not in spatial order)."""
    rng = np.random.default_rng(3)
    n = 20_000
    gdf = gpd.GeoDataFrame(
        {"value": rng.integers(0, 5, n)},
        geometry=gpd.points_from_xy(448_000 + rng.uniform(0, 8_000, n), 4_416_000 + rng.uniform(0, 8_000, n)),
        crs=32650,
    )
    return gdf.rename_axis("pid")


@pytest.fixture(scope="module")
def deaths():
    return gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths").rename_axis("death")


def lazy(gdf, k):
    return dask_geopandas.from_geopandas(gdf, npartitions=k)


def test_import_geopriv_does_not_import_dask_and_the_accessor_appears_with_dask():
    code = (
        "import sys, geopriv; assert 'dask' not in sys.modules; import dask_geopandas, geopandas as gpd; "
        "d = dask_geopandas.from_geopandas(gpd.GeoDataFrame(geometry=gpd.points_from_xy([0], [0]), crs=3857), 1); "
        "print(type(d.priv).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "DaskPrivAccessor"


def test_a_lazy_release_is_one_release_however_often_it_is_computed(points):
    released = lazy(points, 4).priv.perturb(**EPS)  # OS entropy, drawn once at build
    a, b = released.compute(), released.compute()
    assert a.geometry.equals(b.geometry)
    assert not a.geometry.equals(lazy(points, 4).priv.perturb(**EPS).compute().geometry)  # a new build: new noise
    assert a.attrs["geopriv"]["seeded"] is False and a.attrs["geopriv"]["n"] is None


@pytest.mark.parametrize("k", [1, 3, 8])
def test_seeded_release_does_not_depend_on_partitions_or_scheduler(points, k):
    ref = lazy(points, 1).priv.perturb(**EPS, rng=11).compute(scheduler="synchronous")
    out = lazy(points, k).priv.perturb(**EPS, rng=11).compute(scheduler="threads")
    assert out.geometry.equals(ref.geometry)
    # the same rows in another order, or split unevenly: each row keeps its noise
    shuffled = points.sample(frac=1, random_state=2)
    out2 = lazy(shuffled, k).priv.perturb(**EPS, rng=11).compute().loc[points.index]
    assert out2.geometry.equals(ref.geometry)


def test_spherical_frame_and_a_region_are_partition_independent(deaths):
    ll = deaths.to_crs(4326)
    a = lazy(ll, 1).priv.perturb(**EPS, rng=5).compute()
    b = lazy(ll, 5).priv.perturb(**EPS, rng=5).compute()
    assert a.geometry.equals(b.geometry) and a.attrs["geopriv"]["frame"] == "spherical"
    import shapely

    region = shapely.box(*SOHO)
    c = lazy(deaths, 1).priv.perturb(**EPS, region=region, rng=6).compute()
    d = lazy(deaths, 4).priv.perturb(**EPS, region=region, rng=6).compute()
    assert c.geometry.equals(d.geometry)


def test_no_two_rows_share_a_stream(points):
    """Every row at the same place: all released points differ (distinct keys, distinct variates)."""
    same = points.copy()
    same["geometry"] = gpd.points_from_xy(np.full(len(same), 450_000.0), np.full(len(same), 4_420_000.0))
    out = lazy(same, 6).priv.perturb(epsilon=0.01, grid=0.01, rng=1).compute()
    xy = np.column_stack([out.geometry.x, out.geometry.y])
    assert len(np.unique(xy, axis=0)) == len(xy)
    noise = xy - [450_000.0, 4_420_000.0]
    assert abs(np.corrcoef(noise[:-1, 0], noise[1:, 0])[0, 1]) < 0.05  # neighbours' noise is not correlated


def test_duplicate_row_labels_are_refused(points):
    dup = points.iloc[:100].copy()
    dup.index = pd.Index([0] * 50 + list(range(1, 51)), name="pid")
    with pytest.raises(IdentityError, match="repeat|share their person id"):
        lazy(dup, 2).priv.perturb(**EPS).compute()


def test_string_labels_get_their_own_streams(deaths):
    named = deaths.copy()
    named.index = [f"person-{i}" for i in range(len(named))]
    a = lazy(named, 1).priv.perturb(**EPS, rng=3).compute().loc[named.index]
    b = lazy(named.iloc[::-1], 7).priv.perturb(**EPS, rng=3).compute().loc[named.index]
    assert a.geometry.equals(b.geometry)


CALLS = []


class Counting(GeoIndistinguishability):
    """Planar Laplace that records its calls (module level: dask may pickle it by reference)."""

    def release(self, xy, frame, rng, labels=None):
        CALLS.append(len(xy))
        return super().release(xy, frame, rng, labels=labels)


def test_meta_is_given_and_nothing_is_drawn_at_build(points):
    calls = CALLS
    calls.clear()
    mech = Counting(math.log(4) / 200)
    released = lazy(points, 4).priv.perturb(mechanism=mech, rng=1)
    assert calls == []  # no fake partition, no noise before compute
    assert list(released._meta.columns) == list(points.columns)
    out = released.compute(scheduler="synchronous")
    assert calls and list(out.columns) == list(points.columns) and out.crs == points.crs


def test_errors_in_parameters_and_rows_come_at_build_and_name_rows(points):
    with pytest.raises(ValueError):
        lazy(points, 2).priv.perturb(epsilon=-1)  # before anything is computed
    with pytest.raises(ValueError, match="coarser than the noise"):
        lazy(points, 2).priv.perturb(**EPS, grid=5000)
    with pytest.raises(GeometryError, match="labels"):  # rows are checked when the release is built
        lazy(points, 2).priv.perturb(**EPS, bounds=(448_000, 4_416_000, 452_000, 4_424_100))


def test_same_provenance_as_in_memory(points):
    mem = points.priv.perturb(**EPS, rng=1).attrs["geopriv"]
    dist = lazy(points, 3).priv.perturb(**EPS, rng=1).compute().attrs["geopriv"]
    for key in set(mem) - {"n", "created_utc"}:
        assert dist[key] == mem[key], key


def test_on_a_local_cluster_of_processes(points):
    """Worker processes: the plan and the mechanism are pickled and shipped; still the same release."""
    distributed = pytest.importorskip("distributed")
    # the dashboard on any free port: the default 8787 may be another cluster's (a UserWarning then)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        out = lazy(points, 6).priv.perturb(**EPS, rng=9).compute()
        syn = lazy(points, 6).priv.synthesize(1.0, bounds=(447_000, 4_415_000, 457_000, 4_425_000), rng=9).compute()
    ref = points.priv.perturb(**EPS, rng=9)
    assert len(out) == len(ref)
    assert out.geometry.equals(lazy(points, 1).priv.perturb(**EPS, rng=9).compute(scheduler="synchronous").geometry)
    assert syn.geometry.equals(
        lazy(points, 1).priv.synthesize(1.0, bounds=(447_000, 4_415_000, 457_000, 4_425_000), rng=9).compute().geometry
    )
    del client


# ------------------------------------------------------------------ synthesize
@pytest.mark.parametrize("method", ["srw", "pmm"])
def test_synthesize_sums_counts_and_draws_noise_once(deaths, method):
    ref = lazy(deaths, 1).priv.synthesize(2.0, bounds=SOHO, method=method, rng=4)
    one = ref.compute()
    assert one.geometry.equals(ref.compute().geometry)  # recomputed: the same release
    for k in (3, 8):
        out = lazy(deaths, k).priv.synthesize(2.0, bounds=SOHO, method=method, rng=4).compute(scheduler="threads")
        assert out.geometry.equals(one.geometry)
    rec = one.attrs["geopriv"]
    assert rec["n_people"] == len(deaths) and rec["n"] == len(deaths) and rec["method"] == method
    # the histogram path is the in-memory mechanism: same depth, same noise scales
    mem = deaths.priv.synthesize(2.0, bounds=SOHO, method=method, rng=4).attrs["geopriv"]
    assert rec["depth"] == mem["depth"] and rec["level_scales"] == mem["level_scales"]


def test_synthesize_parameters_checked_at_build(deaths):
    with pytest.raises(ValueError, match="method"):
        lazy(deaths, 2).priv.synthesize(1.0, bounds=SOHO, method="nope")
    with pytest.raises(ValueError, match="epsilon"):
        lazy(deaths, 2).priv.synthesize(0.0, bounds=SOHO)
    with pytest.raises(GeometryError, match="outside"):  # rows are checked when the release is built
        lazy(deaths, 2).priv.synthesize(1.0, bounds=(-15800, 6711900, -15000, 6713300))


def test_location_dependent_mechanism_is_partition_independent():
    """The eikonal mechanism (its draws depend on the number of rows only) through the keyed streams."""
    from rasterio.transform import from_origin

    x = np.linspace(0, 1, 12)
    eps = 1e-3 * (1 + 1.5 * np.exp(-((x[None, :] - 0.5) ** 2 + (x[:, None] - 0.5) ** 2) / 0.05))
    pm = geopriv.PrivacyMap.from_epsilon(eps, transform=from_origin(500_000, 4_000_000, 400, 300), crs=32654)
    mech = geopriv.EikonalMechanism.build(pm, margin=0.1, max_step=1)
    rng = np.random.default_rng(8)
    xmin, ymin, xmax, ymax = pm.bounds
    pts = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(
            rng.uniform(xmin + 100, xmax - 100, 3000), rng.uniform(ymin + 100, ymax - 100, 3000)
        ),
        crs=32654,
    )
    pts = pts.rename_axis("pid")
    a = lazy(pts, 1).priv.perturb(mechanism=mech, rng=2).compute()
    b = lazy(pts, 7).priv.perturb(mechanism=mech, rng=2).compute(scheduler="threads")
    assert a.geometry.equals(b.geometry)
    # kernels on demand: partitions in threads share one row cache (snapshots under a lock)
    on_demand = geopriv.EikonalMechanism.build(pm, margin=0.1, max_step=1, kernels="on_demand")
    assert np.array_equal(on_demand.weights, mech.weights)
    c = lazy(pts, 7).priv.perturb(mechanism=on_demand, rng=2).compute(scheduler="threads")
    assert a.geometry.equals(c.geometry)
    assert a.attrs["geopriv"]["between_nodes"] == "bilinear randomised rounding"


# ------------------------------------------------------------------ keyed noise (issue 30)
def test_a_person_who_moved_gets_new_noise_not_the_old_noise_moved(points):
    """Difference attack: recompute the same lazy release on data where everybody moved by d."""
    released = lazy(points, 4).priv.perturb(epsilon=0.01, grid=0.01, rng=9)
    before = released.compute()
    moved = points.copy()
    moved["geometry"] = points.geometry.translate(25.0, -10.0)
    after = lazy(moved, 4).priv.perturb(epsilon=0.01, grid=0.01, rng=9).compute()
    dx = after.geometry.x.to_numpy() - before.geometry.x.to_numpy()
    dy = after.geometry.y.to_numpy() - before.geometry.y.to_numpy()
    exact = (np.abs(dx - 25.0) < 0.02) & (np.abs(dy + 10.0) < 0.02)
    assert exact.sum() == 0  # on cd3bacf every row gave exactly the move
    # independent noise: var(dx) is twice the noise variance (3 / eps^2 per axis for planar Laplace)
    assert 0.9 < np.var(dx) / (2 * 3 / 0.01**2) < 1.1


def test_a_deleted_row_hands_nobody_its_noise(points, monkeypatch):
    """With person ids, deleting one person changes nobody else's output (a position would shift everybody)."""
    # one root for both builds (what keyed per-row noise is about): a seed alone is bound to the whole data,
    # so two seeded builds on different data share no noise at all (tests/test_seed_binding.py)
    from geopriv.distributed import perturb
    from geopriv.keys import SecretRoot

    monkeypatch.setattr(perturb, "root_entropy", lambda rng=None, *a, **k: (SecretRoot.draw(rng), rng))
    ref = lazy(points, 3).priv.perturb(**EPS, rng=4).compute()
    fewer = points.drop(index=points.index[10])
    out = lazy(fewer, 3).priv.perturb(**EPS, rng=4).compute()
    assert out.geometry.equals(ref.geometry.drop(index=points.index[10]))


def test_positions_are_refused_and_a_person_column_is_the_fix(points, tmp_path):
    plain = points.reset_index(drop=True)
    with pytest.raises(IdentityError, match="person="):
        lazy(plain, 2).priv.perturb(**EPS).compute()
    # read_parquet over files written with index=False: every file restarts at 0
    plain.iloc[:100].to_parquet(tmp_path / "a.parquet", index=False)
    plain.iloc[100:200].to_parquet(tmp_path / "b.parquet", index=False)
    files = dask_geopandas.read_parquet(str(tmp_path / "*.parquet"))
    with pytest.raises(IdentityError):
        files.priv.perturb(**EPS).compute()
    with_ids = points.reset_index()  # pid as a column
    a = lazy(with_ids, 3).priv.perturb(**EPS, person="pid", rng=2).compute()
    b = lazy(with_ids.iloc[::-1], 5).priv.perturb(**EPS, person="pid", rng=2).compute().loc[a.index]
    assert a.geometry.equals(b.geometry)
    with pytest.raises(GeoprivError, match="not a column"):
        lazy(with_ids, 2).priv.perturb(**EPS, person="nope")


def test_ids_repeated_across_partitions_are_refused(points):
    import dask.dataframe as dd

    d = lazy(points.iloc[:1000], 2)
    with pytest.raises(IdentityError, match="share their person id|repeat"):
        dd.concat([d, d]).priv.perturb(**EPS).compute()


def test_mixed_and_missing_labels_are_refused_or_kept_apart(deaths):
    mixed = deaths.iloc[:6].copy()
    mixed.index = pd.Index([1, 2, 3, "1", "2", "3"], dtype=object, name="who")
    # (dask may convert an object index to strings, making 1 and "1" equal: then they are repeated ids)
    with pytest.raises(IdentityError, match="integer index labels among string|repeat"):
        dask_geopandas.from_geopandas(mixed, npartitions=1, sort=False).priv.perturb(**EPS).compute()
    missing = deaths.iloc[:4].copy()
    missing["who"] = pd.Series(["a", None, "c", float("nan")], dtype=object, index=missing.index)
    with pytest.raises(IdentityError, match="neither integers nor strings|missing"):
        lazy(missing, 2).priv.perturb(**EPS, person="who").compute()


def test_bounds_from_the_data_are_refused_over_all_partitions(points):
    """Each partition touches at most one edge of total_bounds; the whole data touch four."""
    # partitions are x-slices (pid ranges), rows within a slice in random order (no spatial row order)
    order = np.argsort(points.geometry.x.to_numpy())
    rng = np.random.default_rng(0)
    pid = np.empty(len(points), dtype=np.int64)
    for chunk in np.array_split(np.arange(len(points)), 8):
        pid[order[chunk]] = rng.permutation(chunk)
    srt = points.set_index(pd.Index(pid, name="pid")).sort_index()
    with pytest.raises(GeoprivError, match="computed from the data"):
        lazy(srt, 8).priv.perturb(**EPS, bounds=tuple(points.total_bounds)).compute()
    import shapely

    with pytest.raises(GeoprivError, match="computed from the data"):  # region= too (review finding)
        lazy(srt, 8).priv.perturb(**EPS, region=shapely.box(*points.total_bounds)).compute()
    with pytest.raises(GeoprivError, match="computed from the data"):
        lazy(srt.geometry, 8).priv.perturb(**EPS, bounds=tuple(points.total_bounds)).compute()  # a GeoSeries
    with pytest.raises(GeoprivError, match="computed from the data"):
        lazy(srt, 8).priv.synthesize(1.0, bounds=tuple(points.total_bounds)).compute()


def test_the_lazy_release_does_not_show_its_root(points):
    import contextlib
    import io

    from geopriv.keys import SecretRoot

    released = lazy(points.iloc[:100], 2).priv.perturb(**EPS)
    roots = [v for v in released.expr.operands if isinstance(v, SecretRoot)]
    assert len(roots) == 1
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        released.expr.pprint()
    text = buf.getvalue() + repr(dict(released.dask))
    assert str(roots[0]._value) not in text and format(roots[0]._value, "x") not in text


def test_synthesize_on_a_neighbouring_dataset_draws_new_noise(deaths):
    """Removing one person must not leave 1995 of 2000 points in place (the rest would localise them)."""
    full = lazy(deaths, 2).priv.synthesize(2.0, bounds=SOHO, rng=4, grid=0.01)
    a = full.compute()
    b = lazy(deaths.iloc[1:], 2).priv.synthesize(2.0, bounds=SOHO, rng=4, grid=0.01).compute()
    shared = set(map(tuple, np.column_stack([a.geometry.x, a.geometry.y]).round(3))) & set(
        map(tuple, np.column_stack([b.geometry.x, b.geometry.y]).round(3))
    )
    assert len(shared) < 0.05 * len(a)
    assert a.geometry.equals(full.compute().geometry)  # the same data: a replay


def test_a_lazy_release_refuses_data_changed_since_it_was_built(points, tmp_path):
    """Recomputed on changed data, content-keyed noise would show exactly which rows changed (review finding):
    the release is bound to the data it was built on."""
    from geopriv.exceptions import StaleReleaseError

    pts = points.iloc[:2000].reset_index()
    pts.iloc[:1000].to_parquet(tmp_path / "a.parquet")
    pts.iloc[1000:].to_parquet(tmp_path / "b.parquet")
    released = dask_geopandas.read_parquet(str(tmp_path / "*.parquet")).priv.perturb(**EPS, person="pid")
    first = released.compute()
    assert first.geometry.equals(released.compute().geometry)  # the same data: a replay
    moved = pts.iloc[1000:].copy()
    moved.loc[moved.index[0], "geometry"] = moved.geometry.iloc[0].buffer(0.001).centroid  # a millimetre
    moved.to_parquet(tmp_path / "b.parquet")
    with pytest.raises(StaleReleaseError, match="other rows than when this lazy release was built"):
        released.compute()


def test_a_lazy_synthesize_refuses_data_changed_since_it_was_built(deaths, tmp_path):
    from geopriv.exceptions import StaleReleaseError

    deaths.iloc[:150].to_parquet(tmp_path / "a.parquet", index=False)
    deaths.iloc[150:].to_parquet(tmp_path / "b.parquet", index=False)
    synth = dask_geopandas.read_parquet(str(tmp_path / "*.parquet")).priv.synthesize(2.0, bounds=SOHO)
    assert synth.compute().geometry.equals(synth.compute().geometry)
    deaths.iloc[:149].to_parquet(tmp_path / "a.parquet", index=False)  # one person fewer
    with pytest.raises(StaleReleaseError):
        synth.compute()


def test_the_binding_is_sealed_and_partition_selection_works(points, tmp_path):
    """Second review: the digests were printed by expr.pprint() (one row: its noise key), and selecting
    partitions (.partitions[i], tail) of an unchanged release was refused."""
    import contextlib
    import io

    pts = points.iloc[:3].reset_index()
    for i in range(3):
        pts.iloc[[i]].to_parquet(tmp_path / f"p{i}.parquet")
    released = dask_geopandas.read_parquet(str(tmp_path / "*.parquet")).priv.perturb(**EPS, person="pid", rng=3)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        released.expr.pprint()
    from geopriv.keys import Binding, RowStreams, SecretRoot

    assert "sealed partition digests" in buf.getvalue() or "Binding" not in buf.getvalue()
    binding = [v for v in released.expr.operands if isinstance(v, Binding)]
    assert binding and all(len(t) == 64 for t in binding[0]._tags)  # HMAC tags, not sums of keys
    whole = released.compute()
    assert released.partitions[2].compute().geometry.equals(whole.geometry.iloc[[2]])
    assert released.tail(1).geometry.equals(whole.geometry.iloc[[2]])
    assert isinstance(SecretRoot, type) and isinstance(RowStreams, type)


def test_one_dispatch_and_the_lazy_forms_take_the_public_signatures():
    """Issue 42: every public release function reaches its lazy form through daskhook.dispatches_dask (no
    hand-written dispatch), which passes the public signature's arguments: the lazy forms take the same
    names with the same defaults."""
    import inspect
    import pathlib

    from geopriv.distributed.aggregate import aggregate_dask, flows_dask, heatmap_dask
    from geopriv.distributed.perturb import perturb_dask
    from geopriv.distributed.synthesize import synthesize_dask
    from geopriv.distributed.traces import sanitize_traces_dask, trace_ledger_dask

    pairs = [
        (geopriv.perturb, perturb_dask),
        (geopriv.synthesize, synthesize_dask),
        (geopriv.sanitize_traces, sanitize_traces_dask),
        (geopriv.trace_ledger, trace_ledger_dask),
        (geopriv.aggregate, aggregate_dask),
        (geopriv.heatmap, heatmap_dask),
        (geopriv.flows, flows_dask),
    ]
    for public, lazy_form in pairs:
        ps, ls = inspect.signature(public).parameters, inspect.signature(lazy_form).parameters
        assert list(ps) == list(ls)[: len(ps)] or set(ps) <= set(ls), public.__name__
        for name, p in ps.items():
            assert ls[name].default == p.default or (ls[name].default is p.default), (public.__name__, name)
    core = pathlib.Path(geopriv.__file__).parent
    hand_written = [
        str(f.relative_to(core))
        for f in core.glob("*.py")
        if f.name != "daskhook.py" and "if is_dask(" in f.read_text(encoding="utf-8")
    ]
    assert hand_written == []
