"""aggregate, heatmap and flows on dask-geopandas: the in-memory count plan, run partition by partition.

Real dask-geopandas frames (the threaded scheduler), real SQLite budget stores; fixed seeds.  The
counts are compared with the in-memory release exactly: the true (pre-noise) counts through
:func:`geopriv.distributed.aggregate.dask_counts`, and whole releases, which are the in-memory ones
for the same seed when no person is over the cap (the same generator draws the same noise).  The
statistical test (which rows a capped person keeps) states its false-failure rate.
"""

from __future__ import annotations

import inspect
import warnings

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

import geopriv
from geopriv.budget import person_keys
from geopriv.counting import count_rows, locate_rows, plan_counts
from geopriv.exceptions import (
    BudgetExceededError,
    GeometryError,
    GeoprivError,
    IdentityError,
    LowUtilityWarning,
    OutputError,
    StaleReleaseError,
)

dask = pytest.importorskip("dask")
dask_geopandas = pytest.importorskip("dask_geopandas")

import dask.dataframe as dd  # noqa: E402

from geopriv.distributed.aggregate import aggregate_dask, dask_counts, flows_dask, heatmap_dask, person_digests  # noqa: E402

#: tiny test data: most releases here are mostly noise, which the release says (tested once, below)
pytestmark = pytest.mark.filterwarnings("ignore::geopriv.exceptions.LowUtilityWarning")

#: a very large epsilon: the discrete Laplace noise is 0 with probability ~1, so the counts are the true ones
EXACT = 1e6
BOX = (500_000.0, 4_000_000.0, 501_000.0, 4_001_000.0)
PARTITIONS = [1, 3, 7]


def lazy(gdf, k):
    return dask_geopandas.from_geopandas(gdf, npartitions=k)


def points(n=700, seed=0, persons=40):
    """``n`` points in BOX (UTM 50N) of ``persons`` persons; random labels scatter each person's rows over partitions."""
    gen = np.random.default_rng(seed)
    xy = np.column_stack([gen.uniform(500_010, 500_990, n), gen.uniform(4_000_010, 4_000_990, n)])
    gdf = gpd.GeoDataFrame(
        {"user": gen.integers(0, persons, n)}, geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=32650
    )
    gdf.index = pd.Index(gen.permutation(n) * 3 + 1, name="row")
    return gdf


def memory_counts(gdf, plan):
    xy = np.column_stack([gdf.geometry.x, gdf.geometry.y])
    return count_rows(plan, locate_rows(plan, xy, gdf.index))


def without_time(record):
    return {k: v for k, v in record.items() if k != "created_utc"}


def test_the_dask_functions_take_the_in_memory_parameters():
    for mem, dsk in ((geopriv.aggregate, aggregate_dask), (geopriv.heatmap, heatmap_dask), (geopriv.flows, flows_dask)):
        a = [(p.name, p.kind, p.default) for p in list(inspect.signature(mem).parameters.values())[1:]]
        b = [(p.name, p.kind, p.default) for p in list(inspect.signature(dsk).parameters.values())[1:]]
        assert a == b


# ----------------------------------------------------------------------------- counts as in memory
@pytest.mark.parametrize("k", PARTITIONS)
def test_true_counts_and_the_seeded_release_are_the_in_memory_ones(k):
    gdf = points()
    d = lazy(gdf, k)
    assert d.npartitions == k
    plan = plan_counts(gdf.crs, 1.0, cells=100, bounds=BOX)
    assert (dask_counts(d, plan, bounds=BOX, rng=3) == memory_counts(gdf, plan)).all()
    mem = geopriv.aggregate(gdf, 1.0, cells=100, bounds=BOX, rng=3)
    out = geopriv.aggregate(d, 1.0, cells=100, bounds=BOX, rng=3)
    assert isinstance(out, gpd.GeoDataFrame)  # computed: the cells are few
    pd.testing.assert_frame_equal(out, mem)  # the same true counts, the same noise for the same seed
    assert without_time(out.attrs["geopriv"]) == without_time(mem.attrs["geopriv"])


@pytest.mark.parametrize("k", PARTITIONS)
def test_with_persons_under_the_cap_nothing_is_dropped_and_the_release_is_the_in_memory_one(k):
    gdf = points()
    d = lazy(gdf, k)
    most = int(gdf["user"].value_counts().max())
    plan = plan_counts(gdf.crs, 1.0, cells=100, bounds=BOX, user="user", max_per_user=most)
    assert (dask_counts(d, plan, user="user", bounds=BOX, rng=3) == memory_counts(gdf, plan)).all()
    mem = geopriv.aggregate(gdf, 1.0, cells=100, bounds=BOX, user="user", max_per_user=most, rng=3)
    out = geopriv.aggregate(d, 1.0, cells=100, bounds=BOX, user="user", max_per_user=most, rng=3)
    pd.testing.assert_frame_equal(out, mem)


def test_polygon_and_h3_cells_count_as_in_memory():
    gdf = points()
    d = lazy(gdf, 3)
    left, right = (
        shapely.box(500_000, 4_000_000, 500_500, 4_001_000),
        shapely.box(500_500, 4_000_000, 501_000, 4_001_000),
    )
    cells = gpd.GeoDataFrame({"name": ["west", "east"]}, geometry=[left, right], crs=32650)
    mem = geopriv.aggregate(gdf, 1.0, cells=cells, rng=2)
    pd.testing.assert_frame_equal(geopriv.aggregate(d, 1.0, cells=cells, rng=2), mem)
    pytest.importorskip("h3")  # geopriv[all] installs it in both test environments
    mem = geopriv.aggregate(gdf, EXACT, cells="h3:9", bounds=BOX, rng=2)
    pd.testing.assert_frame_equal(geopriv.aggregate(d, EXACT, cells="h3:9", bounds=BOX, rng=2), mem)


def test_empty_partitions_a_geoseries_and_the_accessor():
    gdf = points()
    d = lazy(gdf, 7)
    west = d[d.geometry.x < 500_300]  # some partitions may end up empty; the counts do not change
    parts = [len(west.partitions[i].compute()) for i in range(west.npartitions)]
    mem = gdf[gdf.geometry.x < 500_300]
    plan = plan_counts(gdf.crs, 1.0, cells=100, bounds=BOX)
    assert (dask_counts(west, plan, bounds=BOX) == memory_counts(mem, plan)).all() and sum(parts) == len(mem)
    empty = d[d.geometry.x < 0]  # no rows: released like any other data (noise on zeros), as in memory
    pd.testing.assert_frame_equal(
        geopriv.aggregate(empty, 1.0, cells=100, bounds=BOX, rng=2),
        geopriv.aggregate(gdf.iloc[:0], 1.0, cells=100, bounds=BOX, rng=2),
    )
    out = d.geometry.priv.aggregate(EXACT, cells=100, bounds=BOX, rng=1)
    assert isinstance(out, gpd.GeoDataFrame) and out["count"].sum() == len(gdf)


def test_heatmap_is_the_in_memory_raster(tmp_path):
    gdf = points()
    d = lazy(gdf, 3)
    region = shapely.Polygon([(500_000, 4_000_000), (501_000, 4_000_000), (500_000, 4_001_000)])
    inside = gdf[gdf.within(region)]
    for values, area in (("count", {"bounds": BOX}), ("density", {"bounds": BOX}), ("count", {"region": region})):
        data = gdf if "bounds" in area else inside
        mem = geopriv.heatmap(data, 1.0, resolution=100, rng=4, values=values, **area)
        out = geopriv.heatmap(lazy(data, 3), 1.0, resolution=100, rng=4, values=values, **area)
        assert isinstance(out, geopriv.Heatmap) and out.unit == mem.unit and out.transform == mem.transform
        assert out.values.dtype == mem.values.dtype and out.nodata == mem.nodata or np.isnan(out.nodata)
        np.testing.assert_array_equal(out.values, mem.values)  # cells outside the region included
        np.testing.assert_array_equal(out.expected_error, mem.expected_error)
        assert without_time(out.record) == without_time(mem.record)
    path = tmp_path / "heat.tif"
    geopriv.heatmap(d, 1.0, resolution=100, bounds=BOX, rng=4, path=path)
    assert path.exists()
    with pytest.raises(OutputError, match="exists"):  # checked before any row is read
        geopriv.heatmap(d, 1.0, resolution=100, bounds=BOX, path=path)


# ----------------------------------------------------------------------------- bounding across partitions
def spread_person(rows_of_0=60, others=100, k=7):
    """Person 0 has ``rows_of_0`` rows spread over all ``k`` partitions; ``others`` persons have one row each."""
    gdf = points(n=rows_of_0 + others, seed=5)
    gdf["user"] = np.r_[np.zeros(rows_of_0, int), np.arange(1, others + 1)]
    d = lazy(gdf, k)
    holding = [int((d.partitions[i]["user"].compute() == 0).sum()) for i in range(k)]
    assert min(holding) > 0  # person 0 in every partition
    return gdf, d


@pytest.mark.parametrize("cap", [1, 3])
def test_a_person_spread_over_partitions_keeps_at_most_max_per_user_rows_in_total(cap):
    gdf, d = spread_person()
    plan = plan_counts(gdf.crs, 1.0, cells=100, bounds=BOX, user="user", max_per_user=cap)
    kept = [dask_counts(d, plan, user="user", bounds=BOX, rng=seed) for seed in range(5)]
    for counts in kept:
        assert counts.sum() == cap + 100  # person 0 keeps ``cap`` of 60 rows, the others their one
        assert (counts <= memory_counts(gdf, plan)).all()  # only rows of the data, each at most once
    assert len({c.tobytes() for c in kept}) > 1  # which rows are kept changes with the randomness
    out = geopriv.aggregate(d, EXACT, cells=100, bounds=BOX, user="user", max_per_user=cap, rng=1)
    assert out["count"].sum() == cap + 100


def test_the_kept_row_is_uniform_over_all_the_persons_rows_not_over_partitions():
    """Person 0 has 1 row in the west (partition 0) and 9 in the east (partition 1), max_per_user=1: the west row is
    kept with probability 1/10, not 1/2 (as a choice of partition first would give).  200 seeds: binomial(200, 0.1),
    mean 20, sd 4.24; the bound 4.5 sd fails by chance with probability < 1e-5."""
    xs = np.r_[500_250.0, np.full(9, 500_750.0)]
    gdf = gpd.GeoDataFrame(
        {"user": np.zeros(10, int)},
        geometry=gpd.points_from_xy(xs, np.full(10, 4_000_500.0)),
        crs=32650,
        index=pd.Index(np.arange(10), name="row"),
    )
    d = dd.concat([lazy(gdf.iloc[:1], 1), lazy(gdf.iloc[1:], 1)])
    assert d.npartitions == 2
    plan = plan_counts(gdf.crs, 1.0, cells=500, bounds=BOX, user="user", max_per_user=1)
    west_cell = int(locate_rows(plan, np.array([[500_250.0, 4_000_500.0]]), pd.Index([0]))[0])
    with dask.config.set(scheduler="sync"):
        west = sum(int(dask_counts(d, plan, user="user", bounds=BOX, rng=seed)[west_cell]) for seed in range(200))
    assert abs(west - 20) < 4.5 * 4.24


def test_fresh_randomness_without_a_seed():
    """10 rows of one person, 5 in each of two cells, max_per_user=1, 30 unseeded releases: both cells are kept
    at some point (fails by chance with probability 2 * 2^-30)."""
    xs = np.r_[np.full(5, 500_250.0), np.full(5, 500_750.0)]
    gdf = gpd.GeoDataFrame(
        {"user": np.zeros(10, int)},
        geometry=gpd.points_from_xy(xs, np.full(10, 4_000_500.0)),
        crs=32650,
        index=pd.Index(np.arange(10), name="row"),
    )
    d = lazy(gdf, 2)
    plan = plan_counts(gdf.crs, 1.0, cells=500, bounds=BOX, user="user", max_per_user=1)
    with dask.config.set(scheduler="sync"):
        seen = {dask_counts(d, plan, user="user", bounds=BOX).tobytes() for _ in range(30)}
    assert len(seen) == 2


def test_person_ids_are_one_person_across_dtypes_as_the_budget_store_has_them():
    a = person_digests(pd.Series([1, 2, 2**40], dtype=np.int64))
    b = person_digests(pd.Series(["1", " 2", str(2**40)], dtype=object))
    c = person_digests(pd.Series([np.int64(1), "02", 2**40], dtype=object))
    for x, y in ((a, b), (a, c)):
        assert (x[0] == y[0]).all() and (x[1] == y[1]).all()
    assert (a[0].view(np.int64) == person_keys([1, 2, 2**40]).keys).all()  # the store's keys, exactly
    for bad in ([1.0, 2.0], [True, 2], ["x", None]):  # floats (maybe coordinates), booleans, missing: refused
        with pytest.raises(IdentityError):
            person_digests(pd.Series(bad, dtype=object))
    # an object column of ints in one partition and text in another: one person, as in memory and in the store
    gdf = points(n=4).sort_index()
    gdf["user"] = pd.Series([7, 7, "7", "7"], index=gdf.index, dtype=object)
    with dask.config.set({"dataframe.convert-string": False}):  # else dask turns the objects into text
        d = dd.concat([lazy(gdf.iloc[:2], 1), lazy(gdf.iloc[2:], 1)])
        assert d.partitions[0]["user"].compute().map(type).tolist() == [int, int]
        assert d.partitions[1]["user"].compute().map(type).tolist() == [str, str]
        plan = plan_counts(gdf.crs, 1.0, cells=100, bounds=BOX, user="user", max_per_user=1)
        assert dask_counts(d, plan, user="user", bounds=BOX, rng=1).sum() == 1


def test_a_person_column_alone_bounds_rows_as_in_memory(tmp_path):
    _, d = spread_person()
    store = geopriv.BudgetStore(tmp_path / "p.db", create=True)
    store.grant(2 * EXACT, unit="epsilon")
    out = geopriv.aggregate(d, EXACT, cells=100, bounds=BOX, person="user", rng=1, budget_store=store)
    assert out["count"].sum() == 1 + 100 and out.attrs["geopriv"]["user"] == "user"
    hm = geopriv.heatmap(d, EXACT, resolution=100, bounds=BOX, person="user", rng=1)  # no store: bounded all the same
    assert hm.values.sum() == 1 + 100


def test_data_changed_between_the_two_passes_are_refused_and_nothing_is_charged(tmp_path):
    """A source that gives other rows when read again (a file rewritten during the call): the persons counted
    whole in the second pass are no longer those under the cap in the first, so the release is refused."""
    gdf, _ = spread_person(rows_of_0=6, others=10, k=1)
    changed = gdf.copy()
    changed.loc[changed["user"] == 3, "user"] = 0  # person 0 gets a row more
    reads = []

    def read():
        reads.append(1)
        return gdf if len(reads) == 1 else changed

    d = dd.from_delayed([dask.delayed(read, pure=False)()], meta=gdf.iloc[:0], verify_meta=False)
    store = geopriv.BudgetStore(tmp_path / "s.db", create=True)
    store.grant(5.0, unit="epsilon")
    with pytest.raises(StaleReleaseError, match="changed between the two passes"):
        geopriv.aggregate(d, 1.0, cells=100, bounds=BOX, user="user", max_per_user=2, budget_store=store)
    assert len(reads) == 2 and store.balances(unit="epsilon")["spent"].sum() == 0


# ----------------------------------------------------------------------------- refusals over all partitions
def test_rows_outside_the_area_are_refused_by_label_from_a_later_partition():
    gdf = points(n=60)
    last = gdf.sort_index().index[-2:]  # from_geopandas sorts by label: these are in the last partition
    gdf.loc[last, "geometry"] = gpd.points_from_xy([502_000.0, 503_000.0], [4_000_500.0, 4_000_500.0])
    with pytest.raises(GeometryError) as err:
        geopriv.aggregate(lazy(gdf, 3), 1.0, cells=100, bounds=BOX)
    assert f"labels {last[0]}, {last[1]}" in str(err.value) and "502000" not in str(err.value)


def test_missing_person_ids_are_refused_by_label_from_a_later_partition():
    gdf = points(n=60)
    gdf["user"] = gdf["user"].astype("Int64")
    last = gdf.sort_index().index[-1]
    gdf.loc[last, "user"] = pd.NA
    with pytest.raises(IdentityError, match=f"labels {last}"):
        geopriv.aggregate(lazy(gdf, 3), 1.0, cells=100, bounds=BOX, user="user")


def test_an_area_computed_from_the_data_is_refused_though_no_partition_alone_shows_it():
    gdf = points(n=30)
    order = gdf.sort_index().index
    gdf.loc[order[0], "geometry"] = shapely.Point(BOX[0], 4_000_500.0)  # on the west edge, first partition
    gdf.loc[order[-1], "geometry"] = shapely.Point(500_500.0, BOX[3])  # on the north edge, last partition
    d = lazy(gdf, 3)
    geopriv.aggregate(d.partitions[0], 1.0, cells=100, bounds=BOX, rng=1)  # one edge alone passes
    with pytest.raises(GeoprivError, match="computed from the data"):
        geopriv.aggregate(d, 1.0, cells=100, bounds=BOX, rng=1)


def test_polygon_cells_on_the_points_are_refused_though_each_partition_holds_one_corner():
    corners = [(500_100, 4_000_100), (500_900, 4_000_100), (500_900, 4_000_900), (500_100, 4_000_900)]
    inner = [(500_400, 4_000_400), (500_600, 4_000_600), (500_500, 4_000_300), (500_300, 4_000_500)]
    xy = np.array([corners[0], inner[0], corners[1], inner[1], corners[2], inner[2], corners[3], inner[3]], float)
    gdf = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=32650, index=pd.Index(np.arange(8), name="row")
    )
    hull = gpd.GeoDataFrame(geometry=[shapely.Polygon(corners)], crs=32650)
    d = lazy(gdf, 4)
    with pytest.raises(GeoprivError, match="4 points lie exactly on") as dsk:
        geopriv.aggregate(d, 1.0, cells=hull)
    with pytest.raises(GeoprivError) as mem:
        geopriv.aggregate(gdf, 1.0, cells=hull)
    assert str(dsk.value) == str(mem.value)  # the in-memory refusal, word for word


def test_the_refusals_copied_from_memory_say_the_same_words():
    pts = points(n=30)
    with pytest.raises(geopriv.exceptions.ParameterError) as mem:
        geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, user="user", person="other")
    with pytest.raises(geopriv.exceptions.ParameterError) as dsk:
        aggregate_dask(lazy(pts, 2), 1.0, cells=100, bounds=BOX, user="user", person="other")
    assert str(dsk.value) == str(mem.value)
    lines = gpd.GeoDataFrame(
        geometry=[shapely.LineString([(500_100, 4_000_500), (505_000, 4_000_500)])],
        crs=32650,
        index=pd.Index([4], name="line"),
    )
    with pytest.raises(GeometryError) as mem:
        geopriv.flows(lines, 1.0, regions=zones())
    with pytest.raises(GeometryError) as dsk:
        geopriv.flows(lazy(lines, 1), 1.0, regions=zones())
    assert str(dsk.value) == str(mem.value) and dsk.value.fix == mem.value.fix


def same_refusal(memory, on_dask, kind=GeoprivError):
    """Both calls are refused, with the same words."""
    with pytest.raises(kind) as mem:
        memory()
    with pytest.raises(kind) as dsk:
        on_dask()
    assert type(dsk.value) is type(mem.value) and str(dsk.value) == str(mem.value)
    return str(dsk.value)


def test_regions_and_cells_built_on_the_points_are_refused_over_all_partitions_as_in_memory():
    gdf = points(n=40).sort_index()
    # a region= whose corners are data points, spread over the partitions (beside declared bounds)
    corners = [gdf.geometry.iloc[i] for i in (0, 12, 25, 38)]
    region = shapely.Polygon([(p.x, p.y) for p in corners]).convex_hull
    assert len(shapely.get_coordinates(region)) >= 4
    inside = gdf[gdf.intersects(region.buffer(1e-3))]
    msg = same_refusal(
        lambda: geopriv.aggregate(inside, 1.0, cells=100, bounds=BOX, region=region),
        lambda: geopriv.aggregate(lazy(inside, 4), 1.0, cells=100, bounds=BOX, region=region),
    )
    assert "computed from the data" in msg
    # polygon cells centred on data points (buffers), the points in different partitions
    buffers = gpd.GeoDataFrame(geometry=[gdf.geometry.iloc[i].buffer(30) for i in (1, 14, 27, 39)], crs=32650)
    near = gdf[gdf.intersects(buffers.union_all())]
    assert len(near) >= 3
    same_refusal(
        lambda: geopriv.aggregate(near, 1.0, cells=buffers),
        lambda: geopriv.aggregate(lazy(near, 3), 1.0, cells=buffers),
    )
    # flow regions whose corners are trip ends in different partitions (the frame in dask's order: tied times)
    t = tracks().sort_index()
    ends = t.sort_values(["trip", "t"]).groupby("trip").head(1).geometry.iloc[:4]
    hull = gpd.GeoDataFrame(geometry=[shapely.MultiPoint(list(ends)).convex_hull], crs=32650)
    assert len(shapely.get_coordinates(hull.geometry.iloc[0])) >= 4  # 3 trip ends or more on its corners
    msg = same_refusal(
        lambda: geopriv.flows(t, 1.0, regions=hull, traj_id="trip", time="t", outside="drop"),
        lambda: geopriv.flows(lazy(t, 3), 1.0, regions=hull, traj_id="trip", time="t", outside="drop"),
    )
    assert "on its corners" in msg


def test_area_witnesses_keep_only_points_on_the_public_lines_and_corners():
    from geopriv.distributed.aggregate import area_witnesses

    plan = plan_counts(gpd.GeoSeries(crs=32650).crs, 1.0, cells=100, bounds=BOX)
    xy = np.array([[BOX[0], 4_000_500.0], [500_500.0, 4_000_500.0], [500_500.0, BOX[3]]])
    assert area_witnesses(plan, xy).tolist() == [xy[0].tolist(), xy[2].tolist()]


def test_the_swamp_warning_names_the_callers_line():
    with pytest.warns(LowUtilityWarning, match="expected error of a cell is about") as record:
        geopriv.aggregate(lazy(points(n=20), 2), 0.1, cells=50, bounds=BOX, rng=1)
    assert record[0].filename == __file__


# ----------------------------------------------------------------------------- budgets
def test_a_budget_store_charges_every_person_once_on_the_driver_before_the_noise(tmp_path):
    _, d = spread_person()
    store = geopriv.BudgetStore(tmp_path / "b.db", create=True)
    store.grant(1.5, unit="epsilon")
    out = geopriv.aggregate(d, 1.0, cells=100, bounds=BOX, user="user", max_per_user=3, budget_store=store, rng=1)
    bal = store.balances(unit="epsilon")
    assert len(bal) == 101 and np.allclose(bal["spent"], 1.0)  # person 0's 60 rows in 7 partitions: charged once
    releases = store.releases()
    assert len(releases) == 1 and releases["kind"].iloc[0] == "aggregate"
    assert out.attrs["geopriv"]["budget_store"] == "sqlite" and out.attrs["geopriv"]["charged_per_row"] == 1.0
    gen = np.random.default_rng(2)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        geopriv.aggregate(d, 1.0, cells=100, bounds=BOX, user="user", max_per_user=3, budget_store=store, rng=gen)
    assert gen.bit_generator.state == state  # refused before any noise
    assert np.allclose(store.balances(unit="epsilon")["spent"], 1.0) and len(store.releases()) == 1
    hm = geopriv.heatmap(d, 0.25, resolution=100, bounds=BOX, user="user", budget_store=store, rng=1)
    assert hm.record["charged_per_row"] == 0.25
    assert np.allclose(store.balances(unit="epsilon")["spent"], 1.25)
    assert store.releases()["kind"].tolist().count("heatmap") == 1


# ----------------------------------------------------------------------------- flows
def zones():
    boxes = [shapely.box(500_000 + 500 * i, 4_000_000, 500_500 + 500 * i, 4_001_000) for i in range(2)]
    return gpd.GeoDataFrame({"zone": ["W", "E"]}, geometry=boxes, crs=32650)


def tracks(n_trips=40, rows=8, persons=7, seed=0):
    """Trips of ``rows`` fixes (times shuffled, some tied) of ``persons`` persons; random labels scatter every
    trip over the partitions."""
    gen = np.random.default_rng(seed)
    trip = np.repeat([f"trip-{i}" for i in range(n_trips)], rows)
    t = np.concatenate([gen.permutation(rows) // 2 for _ in range(n_trips)])  # pairs of tied time stamps
    df = pd.DataFrame({"trip": trip, "t": t, "person": np.repeat(np.arange(n_trips) % persons, rows)})
    gdf = gpd.GeoDataFrame(
        df,
        geometry=gpd.points_from_xy(gen.uniform(500_010, 500_990, len(df)), gen.uniform(4_000_010, 4_000_990, len(df))),
        crs=32650,
    )
    gdf.index = pd.Index(gen.permutation(len(gdf)) * 5 + 2, name="fix")
    return gdf


def trips_per_partition(d):
    return pd.Series(
        [p for i in range(d.npartitions) for p in d.partitions[i]["trip"].compute().unique()]
    ).value_counts()


@pytest.mark.parametrize("k", PARTITIONS)
def test_flows_of_trips_split_across_partitions_are_the_in_memory_release(k):
    d = lazy(tracks(), k)
    if k > 1:
        assert (trips_per_partition(d) > 1).all()  # every trip has rows in several partitions
    whole = d.compute()  # the concatenated frame: ties in time go to the earlier row, as in memory
    for kw in ({}, {"user": "person", "max_per_user": 2}):
        mem = geopriv.flows(whole, 1.0, regions=zones(), traj_id="trip", time="t", region_id="zone", rng=6, **kw)
        out = geopriv.flows(d, 1.0, regions=zones(), traj_id="trip", time="t", region_id="zone", rng=6, **kw)
        pd.testing.assert_frame_equal(out, mem)
        assert without_time(out.attrs["geopriv"]) == without_time(mem.attrs["geopriv"])
    exact = geopriv.flows(d, EXACT, regions=zones(), traj_id="trip", time="t", user="person", max_per_user=2, rng=1)
    assert exact["count"].sum() == 7 * 2  # 40 trips of 7 persons, 2 each


def test_a_trip_leaving_the_regions_in_a_later_partition_is_refused_by_trip_or_dropped():
    gdf = tracks()
    d = lazy(gdf, 3)
    where = pd.Series({i: p for p in range(3) for i in d.partitions[p].compute().index})
    gdf["part"] = where.loc[gdf.index].to_numpy()

    def ends_apart(rows):  # its latest rows lie only in partitions without its earliest rows
        first, last = rows["t"] == rows["t"].min(), rows["t"] == rows["t"].max()
        return not set(rows["part"][last]) & set(rows["part"][first])

    trip = next(t for t, rows in gdf.groupby("trip") if ends_apart(rows))
    rows = gdf[gdf["trip"] == trip]
    gdf.loc[rows.index[rows["t"] == rows["t"].max()], "geometry"] = shapely.Point(505_000, 4_000_500)
    d = lazy(gdf.drop(columns="part"), 3)
    with pytest.raises(GeometryError, match=f"'{trip}'"):
        geopriv.flows(d, 1.0, regions=zones(), traj_id="trip", time="t")
    out = geopriv.flows(d, EXACT, regions=zones(), traj_id="trip", time="t", outside="drop", rng=1)
    assert out["count"].sum() == 39


def test_a_trip_with_rows_of_two_persons_in_different_partitions_is_refused():
    gdf = tracks()
    rows = gdf.index[gdf["trip"] == "trip-5"].sort_values()
    gdf.loc[rows[-1], "person"] = 99  # the trip's last label: in another partition than its first
    d = lazy(gdf, 4)
    assert len({i for i in range(4) for r in (rows[0], rows[-1]) if r in d.partitions[i].compute().index}) == 2
    with pytest.raises(GeometryError, match="several users.*'trip-5'|'trip-5'.*several users"):
        geopriv.flows(d, 1.0, regions=zones(), traj_id="trip", time="t", user="person")


def test_flows_of_lines_count_per_partition_and_bound_across_partitions():
    gen = np.random.default_rng(8)
    n = 60
    x0, x1 = gen.uniform(500_010, 500_990, n), gen.uniform(500_010, 500_990, n)
    lines = gpd.GeoDataFrame(
        {"person": np.r_[np.zeros(30, int), np.arange(1, 31)]},
        geometry=shapely.linestrings(
            np.stack([np.c_[x0, np.full(n, 4_000_500.0)], np.c_[x1, np.full(n, 4_000_600.0)]], axis=1)
        ),
        crs=32650,
        index=pd.Index(gen.permutation(n), name="line"),
    )
    d = lazy(lines, 3)
    mem = geopriv.flows(lines, 1.0, regions=zones(), rng=2)
    pd.testing.assert_frame_equal(geopriv.flows(d, 1.0, regions=zones(), rng=2), mem)
    out = geopriv.flows(d, EXACT, regions=zones(), user="person", max_per_user=2, rng=2)
    assert out["count"].sum() == 2 + 30


def test_index_labels_are_the_bounded_persons_of_a_budget_store_without_user(tmp_path):
    gdf = points(n=60)
    gdf.index = pd.Index(np.r_[np.zeros(30, int), np.arange(1, 31)], name="pid")  # person 0: 30 rows
    d = dd.concat([lazy(gdf.iloc[:20], 2), lazy(gdf.iloc[20:], 2)])  # unsorted: person 0 in three partitions
    stores = [geopriv.BudgetStore(tmp_path / f"{k}.db", create=True) for k in ("mem", "dask")]
    for store in stores:
        store.grant(2 * EXACT, unit="epsilon")
    mem = geopriv.aggregate(gdf, EXACT, cells=100, bounds=BOX, budget_store=stores[0], rng=1)
    out = geopriv.aggregate(d, EXACT, cells=100, bounds=BOX, budget_store=stores[1], rng=1)
    assert out["count"].sum() == mem["count"].sum() == 1 + 30
    assert out.attrs["geopriv"]["user"] == mem.attrs["geopriv"]["user"]
    assert len(stores[1].balances(unit="epsilon")) == 31


def test_flows_with_a_budget_store_need_user_and_flows_of_no_points_are_refused_as_in_memory(tmp_path):
    store = geopriv.BudgetStore(tmp_path / "n.db", create=True)
    t = tracks()
    same_refusal(
        lambda: geopriv.flows(t, 1.0, regions=zones(), traj_id="trip", time="t", budget_store=store),
        lambda: geopriv.flows(lazy(t, 2), 1.0, regions=zones(), traj_id="trip", time="t", budget_store=store),
        geopriv.exceptions.ParameterError,
    )
    empty = lazy(t, 3)
    empty = empty[empty["t"] < -1]
    same_refusal(
        lambda: geopriv.flows(t.iloc[:0], 1.0, regions=zones(), traj_id="trip", time="t"),
        lambda: geopriv.flows(empty, 1.0, regions=zones(), traj_id="trip", time="t"),
    )


def test_flows_charge_every_person_once(tmp_path):
    store = geopriv.BudgetStore(tmp_path / "f.db", create=True)
    store.grant(1.0, unit="epsilon")
    d = lazy(tracks(), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowUtilityWarning)
        geopriv.flows(
            d, 0.5, regions=zones(), traj_id="trip", time="t", user="person", max_per_user=3, budget_store=store, rng=1
        )
    bal = store.balances(unit="epsilon")
    assert len(bal) == 7 and np.allclose(bal["spent"], 0.5)
    assert store.releases()["kind"].tolist() == ["flows"]
