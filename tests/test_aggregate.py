"""geopriv.aggregate, heatmap and flows: public cells, user-level bounding, refusals, outputs, budgets."""

from __future__ import annotations

import warnings

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import rasterio
import shapely

import geopriv
from geopriv.exceptions import (
    BudgetExceededError,
    GeometryError,
    GeoprivError,
    IdentityError,
    LowUtilityWarning,
    MissingCRSError,
    OutputError,
    ParameterError,
    ParameterTypeError,
)
from tests.conftest import data_path

#: tiny test data: most releases here are mostly noise, which the release says (tested once, below)
pytestmark = pytest.mark.filterwarnings("ignore::geopriv.exceptions.LowUtilityWarning")

#: a very large epsilon: the discrete Laplace noise is 0 with probability ~1, so the counts are the true ones
EXACT = 1e6


@pytest.fixture(scope="module")
def deaths():
    return gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths")


@pytest.fixture(scope="module")
def area():
    return tuple(gpd.read_file(data_path("study_area.gpkg")).total_bounds)


def utm_points(n=200, seed=0, users=None):
    gen = np.random.default_rng(seed)
    xy = np.column_stack([gen.uniform(500_100, 500_900, n), gen.uniform(4_000_100, 4_000_900, n)])
    df = gpd.GeoDataFrame({"v": np.arange(n)}, geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=32650)
    if users is not None:
        df["user"] = users
    return df


BOX = (500_000.0, 4_000_000.0, 501_000.0, 4_001_000.0)


def true_grid_counts(gdf, step, bounds):
    x = gdf.geometry.x.to_numpy()
    y = gdf.geometry.y.to_numpy()
    nx = int(np.ceil((bounds[2] - bounds[0]) / step))
    ny = int(np.ceil((bounds[3] - bounds[1]) / step))
    col = np.floor((x - bounds[0]) / step).astype(int)
    row = ny - 1 - np.floor((y - bounds[1]) / step).astype(int)
    return np.bincount(row * nx + col, minlength=nx * ny)


# ----------------------------------------------------------------------------- grid
def test_every_cell_of_the_area_is_released_with_exact_counts_at_a_huge_epsilon(deaths, area):
    out = geopriv.aggregate(deaths, EXACT, cells=50, bounds=area, rng=1)
    assert list(out.columns) == ["cell", "count", "expected_error", "geometry"]
    rec = out.attrs["geopriv"]
    step = rec["cell_size_crs"]  # 50 ground metres in Web Mercator units at Soho's latitude (about 1.6 per metre)
    assert step == pytest.approx(50 / np.cos(np.radians(51.513)), rel=0.003)
    ny, nx = rec["grid_shape"]
    assert (nx, ny) == (int(np.ceil(1200 / step)), int(np.ceil(1400 / step)))
    assert len(out) == nx * ny and out["cell"].tolist() == list(range(nx * ny))
    assert out["count"].dtype == np.int64
    assert (out["count"].to_numpy() == true_grid_counts(deaths, step, area)).all()
    assert out.crs == deaths.crs
    # the cells start at the public area's lower-left corner and cover it
    assert np.allclose(out.total_bounds[[0, 1]], area[:2]) and (out.total_bounds[2:] >= np.array(area[2:])).all()
    # and they are 50 m on the ground
    side = out.iloc[[0]].to_crs(32630).geometry.iloc[0]
    assert np.sqrt(side.area) == pytest.approx(50, rel=0.01)


def test_utm_grid_cells_are_the_step_in_metres():
    out = geopriv.aggregate(utm_points(), EXACT, cells=100, bounds=BOX, rng=1)
    assert out.attrs["geopriv"]["cell_size_crs"] == 100  # UTM's scale is within 1 % of its metre: used as is
    assert out.attrs["geopriv"]["grid_shape"] == [10, 10]
    assert out["count"].sum() == 200


def test_a_crs_whose_scale_varies_over_the_area_warns():
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy([1_000_000.0], [5_000_000.0]), crs=3857)
    with pytest.warns(geopriv.DistortionWarning, match="varies by"):
        geopriv.aggregate(pts, 1.0, cells=100_000, bounds=(0.0, 3_000_000.0, 3_000_000.0, 7_000_000.0), rng=1)


def test_person_alone_bounds_rows_like_user():
    """A person charged once counts for at most max_per_user rows: person= is the bounded column."""
    pts = utm_points(users=np.r_[np.zeros(100, int), np.arange(1, 101)]).rename(columns={"user": "pid"})
    out = geopriv.aggregate(pts, EXACT, cells=100, bounds=BOX, person="pid", rng=1)
    assert out["count"].sum() == 1 + 100
    assert out.attrs["geopriv"]["user"] == "pid"
    with pytest.raises(ParameterError, match="different columns"):
        geopriv.aggregate(pts.assign(u=1), 1.0, cells=100, bounds=BOX, person="pid", user="u")


def test_the_input_is_not_modified(deaths, area):
    before = deaths.copy()
    geopriv.aggregate(deaths, 1.0, cells=50, bounds=area, rng=1)
    pd.testing.assert_frame_equal(deaths, before)


def test_seeded_release_is_reproducible_and_recorded_as_seeded_and_os_entropy_is_not(deaths, area):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowUtilityWarning)
        a = geopriv.aggregate(deaths, 1.0, cells=50, bounds=area, rng=7)
        b = geopriv.aggregate(deaths, 1.0, cells=50, bounds=area, rng=7)
        c = geopriv.aggregate(deaths, 1.0, cells=50, bounds=area)
    assert (a["count"] == b["count"]).all()
    assert a.attrs["geopriv"]["seeded"] is True and c.attrs["geopriv"]["seeded"] is False


def test_provenance_is_public_the_same_for_two_datasets(deaths, area):
    other = deaths.iloc[::2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowUtilityWarning)
        r1 = geopriv.aggregate(deaths, 1.0, cells=100, bounds=area, rng=1).attrs["geopriv"]
        r2 = geopriv.aggregate(other, 1.0, cells=100, bounds=area, rng=1).attrs["geopriv"]
    r1.pop("created_utc"), r2.pop("created_utc")
    assert r1 == r2
    assert r1["epsilon_per_level"][0] == pytest.approx(0.875) and sum(r1["epsilon_per_level"]) == pytest.approx(1.0)
    assert r1["definition"].startswith("pure epsilon-differential privacy, user level")


def test_expected_error_is_public_and_grows_with_the_contribution_bound():
    pts = utm_points(users=np.repeat(np.arange(20), 10))
    one = geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, rng=1, user="user", max_per_user=1)
    five = geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, rng=1, user="user", max_per_user=5)
    # discrete Laplace: the standard deviation tends to sqrt(2) t, slightly above it at small scales
    assert five["expected_error"].iloc[0] == pytest.approx(5 * one["expected_error"].iloc[0], rel=0.05)


def test_levels_false_is_the_cells_only_and_levels_k_measures_k_levels():
    pts = utm_points()
    flat = geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, levels=False, rng=1).attrs["geopriv"]
    assert flat["epsilon_per_level"][0] == 1.0 and not any(flat["epsilon_per_level"][1:])
    three = geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, levels=3, rng=1).attrs["geopriv"]
    assert sum(e > 0 for e in three["epsilon_per_level"]) == 3
    with pytest.raises(ParameterError):
        geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, levels="many")


def test_region_releases_only_the_cells_meeting_it():
    pts = utm_points()
    region = shapely.Polygon([(500_000, 4_000_000), (501_000, 4_000_000), (500_000, 4_001_000)])
    inside = pts[pts.within(region)]
    out = geopriv.aggregate(inside, EXACT, cells=100, region=region, rng=1)
    assert len(out) < 100 and out.geometry.intersects(region).all()
    assert out["count"].sum() == len(inside)


def test_suppress_and_nonnegative_are_post_processing():
    pts = utm_points()
    out = geopriv.aggregate(pts, 0.5, cells=100, bounds=BOX, suppress=3, rng=2)
    assert ((out["count"] == 0) | (out["count"] >= 3)).all()
    raw = geopriv.aggregate(pts, 0.05, cells=100, bounds=BOX, nonnegative=False, rng=2)
    assert (raw["count"] < 0).any()


# ----------------------------------------------------------------------------- bounding
def test_a_person_counts_at_most_max_per_user_rows():
    users = np.zeros(200, dtype=int)
    users[100:] = np.arange(1, 101)  # person 0 has 100 rows, others 1
    pts = utm_points(users=users)
    out = geopriv.aggregate(pts, EXACT, cells=100, bounds=BOX, user="user", max_per_user=3, rng=4)
    assert out["count"].sum() == 3 + 100


def test_the_rows_kept_are_chosen_at_random_not_by_location():
    """Person 0 has 50 rows in the west half and 50 in the east: over 400 releases the kept row is in the
    west about half the time (binomial, 4.5 SE bound: false failure < 1e-5)."""
    pts = utm_points(n=100, users=np.zeros(100, dtype=int))
    xs = np.r_[np.full(50, 500_250.0), np.full(50, 500_750.0)]
    pts = pts.set_geometry(gpd.points_from_xy(xs, np.full(100, 4_000_500.0), crs=32650))
    west = 0
    for seed in range(400):
        out = geopriv.aggregate(pts, EXACT, cells=500, bounds=BOX, user="user", max_per_user=1, rng=seed)
        west += int(out.loc[out.geometry.centroid.x < 500_500, "count"].sum())
    assert abs(west - 200) < 4.5 * 10


def test_missing_user_ids_are_refused_by_row_label():
    pts = utm_points(users=[None if i in (3, 7) else i for i in range(200)])
    with pytest.raises(IdentityError, match="labels 3, 7"):
        geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, user="user")


def test_max_per_user_needs_a_user_column():
    with pytest.raises(ParameterError, match="person id column"):
        geopriv.aggregate(utm_points(), 1.0, cells=100, bounds=BOX, max_per_user=3)
    with pytest.raises(ParameterTypeError):
        geopriv.aggregate(utm_points(), 1.0, cells=100, bounds=BOX, max_per_user=2.5)


# ----------------------------------------------------------------------------- refusals
def test_points_outside_the_area_are_refused_naming_rows_never_coordinates():
    pts = utm_points()
    shifted = pts.copy()
    shifted.loc[[5, 9], "geometry"] = gpd.points_from_xy([502_000, 503_000], [4_000_500, 4_000_500])
    with pytest.raises(GeometryError) as err:
        geopriv.aggregate(shifted, 1.0, cells=100, bounds=BOX)
    assert "labels 5, 9" in str(err.value) and "502000" not in str(err.value)


def test_a_grid_anchored_on_the_data_is_refused():
    pts = utm_points()
    with pytest.raises(GeoprivError, match="computed from the data"):
        geopriv.aggregate(pts, 1.0, cells=50, bounds=tuple(pts.total_bounds))


def test_a_grid_needs_a_declared_area():
    with pytest.raises(ParameterError, match="declared public area"):
        geopriv.aggregate(utm_points(), 1.0, cells=100)


@pytest.mark.parametrize("eps", [0, -1.0, float("nan"), float("inf")])
def test_a_budget_of_zero_or_not_a_number_is_refused(eps):
    with pytest.raises(ParameterError):
        geopriv.aggregate(utm_points(), eps, cells=100, bounds=BOX)


def test_too_many_cells_is_refused_before_anything_else():
    with pytest.raises(ParameterError, match="cells"):
        geopriv.aggregate(utm_points(), 1.0, cells=0.1, bounds=BOX)


def test_a_geographic_crs_needs_h3_or_a_projection():
    pts = utm_points().to_crs(4326)
    with pytest.raises(geopriv.CRSError, match="projected CRS"):
        geopriv.aggregate(pts, 1.0, cells=100, bounds=tuple(np.round(pts.total_bounds, 2) + [-0.01, -0.01, 0.01, 0.01]))


def test_noise_that_swamps_the_counts_warns_with_the_expected_error():
    pts = utm_points(n=20)
    with pytest.warns(LowUtilityWarning, match="expected error of a cell is about"):
        geopriv.aggregate(pts, 0.1, cells=50, bounds=BOX, rng=1)


@pytest.mark.parametrize("cells", ["hex", -5, "h3:16", True])
def test_bad_cells_are_refused_with_how_to_fix_it(cells):
    with pytest.raises((ParameterError, ParameterTypeError)):
        geopriv.aggregate(utm_points(), 1.0, cells=cells, bounds=BOX)


# ----------------------------------------------------------------------------- H3 and polygons
def test_h3_cells_cover_the_area_and_count_like_h3():
    h3 = pytest.importorskip("h3")  # installed by geopriv[all] in both test environments; required below
    pts = utm_points()
    out = geopriv.aggregate(pts, EXACT, cells="h3:9", bounds=BOX, rng=1)
    ll = pts.to_crs(4326)
    ids = [h3.api.basic_int.latlng_to_cell(p.y, p.x, 9) for p in ll.geometry]
    expect = pd.Series(ids).value_counts()
    got = out.set_index("cell")["count"]
    assert (got.loc[expect.index.astype(np.uint64)].to_numpy() == expect.to_numpy()).all()
    assert got.sum() == len(pts)
    assert out.geometry.union_all().covers(shapely.box(*BOX))
    assert out.attrs["geopriv"]["h3_resolution"] == 9


def test_polygon_cells_keep_their_attributes_and_a_point_falls_in_the_first_polygon():
    left = shapely.box(500_000, 4_000_000, 500_500, 4_001_000)
    right = shapely.box(500_500, 4_000_000, 501_000, 4_001_000)
    cells = gpd.GeoDataFrame({"name": ["west", "east"]}, geometry=[left, right], crs=32650)
    pts = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy([500_100, 500_500, 500_900, 500_800], [4_000_500] * 4), crs=32650
    )
    out = geopriv.aggregate(pts, EXACT, cells=cells, rng=1)
    assert out["name"].tolist() == ["west", "east"] and out["count"].tolist() == [2, 2]


def test_polygon_cells_built_on_the_data_are_refused():
    pts = utm_points()
    hull = gpd.GeoDataFrame(geometry=[pts.union_all().convex_hull], crs=32650)
    with pytest.raises(GeoprivError, match="computed from the data"):
        geopriv.aggregate(pts, 1.0, cells=hull)


def test_polygon_cells_without_crs_are_refused():
    cells = gpd.GeoDataFrame(geometry=[shapely.box(*BOX)])
    with pytest.raises(MissingCRSError):
        geopriv.aggregate(utm_points(), 1.0, cells=cells)


# ----------------------------------------------------------------------------- heatmap
def test_heatmap_is_the_grid_release_as_a_north_up_raster(tmp_path, deaths, area):
    path = tmp_path / "heat.tif"
    hm = geopriv.heatmap(deaths, EXACT, resolution=50, bounds=area, rng=1, path=path)
    agg = geopriv.aggregate(deaths, EXACT, cells=50, bounds=area, rng=1)
    assert hm.values.shape == tuple(agg.attrs["geopriv"]["grid_shape"])
    assert (hm.values.ravel() == agg["count"].to_numpy()).all()
    with rasterio.open(path) as ds:
        assert ds.count == 2 and ds.crs == deaths.crs and ds.transform == hm.transform
        assert (ds.read(1) == hm.values).all()
        assert '"epsilon"' in ds.tags()["GEOPRIV"]
        assert ds.bounds.left == area[0] and ds.bounds.bottom == area[1]
    with pytest.raises(OutputError, match="exists"):
        geopriv.heatmap(deaths, 1.0, resolution=50, bounds=area, path=path)
    dens = geopriv.heatmap(deaths, EXACT, resolution=50, bounds=area, rng=1, values="density")
    assert np.allclose(dens.values, hm.values / 0.0025)


def test_heatmap_refuses_an_existing_file_before_charging_or_drawing(tmp_path, deaths, area):
    path = tmp_path / "heat.tif"
    path.write_bytes(b"not mine")
    gen = np.random.default_rng(3)
    state = gen.bit_generator.state
    with pytest.raises(OutputError):
        geopriv.heatmap(deaths, 1.0, resolution=50, bounds=area, rng=gen, path=path)
    assert gen.bit_generator.state == state and path.read_bytes() == b"not mine"


# ----------------------------------------------------------------------------- flows
def zones():
    boxes = [shapely.box(500_000 + 500 * i, 4_000_000, 500_500 + 500 * i, 4_001_000) for i in range(2)]
    return gpd.GeoDataFrame({"zone": ["W", "E"]}, geometry=boxes, crs=32650)


def tracks():
    # trip a: W -> E, trip b: E -> W, trip c: W -> W; rows out of time order on purpose
    rows = [
        ("a", 2, 500_800, "p1"),
        ("a", 0, 500_100, "p1"),
        ("a", 1, 500_400, "p1"),
        ("b", 0, 500_900, "p2"),
        ("b", 5, 500_200, "p2"),
        ("c", 0, 500_100, "p1"),
        ("c", 3, 500_300, "p1"),
    ]
    df = pd.DataFrame(rows, columns=["trip", "t", "x", "person"])
    return gpd.GeoDataFrame(df, geometry=gpd.points_from_xy(df.x, np.full(len(df), 4_000_500.0)), crs=32650)


def test_flows_count_trips_from_their_first_to_their_last_row():
    out = geopriv.flows(tracks(), EXACT, regions=zones(), traj_id="trip", time="t", region_id="zone", rng=1)
    got = {(o, d): c for o, d, c in zip(out.origin, out.destination, out["count"])}
    assert got == {("W", "W"): 1, ("W", "E"): 1, ("E", "W"): 1, ("E", "E"): 0}
    assert (out.geom_type == "LineString").all()


def test_flows_bound_trips_per_person_and_take_lines():
    out = geopriv.flows(
        tracks(), EXACT, regions=zones(), traj_id="trip", time="t", user="person", max_per_user=1, rng=1
    )
    assert out["count"].sum() == 2
    lines = gpd.GeoDataFrame(geometry=[shapely.LineString([(500_100, 4_000_500), (500_900, 4_000_500)])], crs=32650)
    out = geopriv.flows(lines, EXACT, regions=zones(), rng=1)
    assert out["count"].tolist() == [0, 1, 0, 0]


def test_flows_outside_every_region_are_refused_by_trip_or_dropped():
    t = tracks()
    t.loc[3, "geometry"] = shapely.Point(505_000, 4_000_500)  # trip b starts outside
    with pytest.raises(GeometryError, match="'b'"):
        geopriv.flows(t, 1.0, regions=zones(), traj_id="trip", time="t")
    out = geopriv.flows(t, EXACT, regions=zones(), traj_id="trip", time="t", outside="drop", rng=1)
    assert out["count"].sum() == 2


def test_a_trip_with_several_users_is_refused():
    t = tracks()
    t.loc[0, "person"] = "p9"
    with pytest.raises(GeometryError, match="several users"):
        geopriv.flows(t, 1.0, regions=zones(), traj_id="trip", time="t", user="person")


# ----------------------------------------------------------------------------- budgets
def test_a_budget_store_charges_every_person_once_and_refuses_before_any_noise(tmp_path):
    store = geopriv.BudgetStore(tmp_path / "b.db", create=True)
    store.grant(1.5, unit="epsilon")
    users = np.repeat(np.arange(20), 10)
    pts = utm_points(users=users)
    geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, user="user", max_per_user=5, budget_store=store, rng=1)
    bal = store.balances(unit="epsilon")
    assert len(bal) == 20 and np.allclose(bal["spent"], 1.0)
    gen = np.random.default_rng(2)
    state = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        geopriv.aggregate(pts, 1.0, cells=100, bounds=BOX, user="user", budget_store=store, rng=gen)
    assert gen.bit_generator.state == state
    assert np.allclose(store.balances(unit="epsilon")["spent"], 1.0)
    releases = store.releases()
    assert len(releases) == 1 and releases["kind"].iloc[0] == "aggregate"
