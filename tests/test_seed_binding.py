"""A seed replays a release only for the same data and parameters (issue 41, item 3).

The same ``rng=`` seed on two different datasets must not share noise: with shared noise the
difference of two seeded outputs is the difference of the true data (a shift, a moved row, a
removed person's cell).  For every release kind, in memory and on dask: (a) the same seed, data
and parameters replay exactly; (b) the same seed on changed data draws independent noise.
"""

from __future__ import annotations

import math
import warnings

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from scipy.spatial import cKDTree

import geopriv
from geopriv.network import UnreachableRecipientsWarning
from geopriv import rng as seeds
from tests.conftest import data_path

pytestmark = pytest.mark.filterwarnings("ignore::geopriv.exceptions.LowUtilityWarning")

SOHO = (-15800, 6711900, -14600, 6713300)  # EPSG:3857, public round numbers around Soho
LEVEL = dict(level=math.log(4), radius=200)


@pytest.fixture(scope="module")
def deaths():
    """The 324 Soho deaths (EPSG:3857) with a named integer index (person ids, as dask releases need)."""
    return gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths").rename_axis("death")


def xy(frame) -> np.ndarray:
    """(n, 2) point coordinates, NaN for missing points (a stopped trace's rows)."""
    g = np.asarray(frame.geometry.values)
    return np.column_stack([shapely.get_x(g), shapely.get_y(g)])


def shifted(frame, dx=3.0, dy=-2.0):
    out = frame.copy()
    out[out.geometry.name] = out.geometry.translate(dx, dy)
    return out


def moved_one(frame, row=0, dx=40.0):
    out = frame.copy()
    geoms = out.geometry.copy()
    geoms.iloc[row] = shapely.Point(geoms.iloc[row].x + dx, geoms.iloc[row].y)
    out[out.geometry.name] = geoms
    return out


def assert_independent(noise_a, noise_b, tol=1.0):
    """Two (n, 2) noise vectors are not the same noise: almost none agree within ``tol``, no correlation."""
    close = np.hypot(*(noise_a - noise_b).T) < tol
    assert close.mean() < 0.02, f"{close.mean():.1%} of the rows share their noise"
    r = np.corrcoef(noise_a[:, 0], noise_b[:, 0])[0, 1]
    assert abs(r) < 0.3, r


def same_frame(a, b):
    assert a.index.equals(b.index)
    assert np.array_equal(xy(a), xy(b), equal_nan=True)


# ----------------------------------------------------------------------------- the digest
def test_bind_replays_for_the_same_data_and_parameters_only(deaths):
    a = seeds.make_rng(3).bind(deaths, params={"epsilon": 1.0}).generator.random(4)
    assert np.array_equal(a, seeds.make_rng(3).bind(deaths.copy(), params={"epsilon": 1.0}).generator.random(4))
    assert not np.array_equal(
        a, seeds.make_rng(3).bind(shifted(deaths, 1e-6, 0), params={"epsilon": 1.0}).generator.random(4)
    )
    assert not np.array_equal(a, seeds.make_rng(3).bind(deaths, params={"epsilon": 1.5}).generator.random(4))
    assert not np.array_equal(a, seeds.make_rng(4).bind(deaths, params={"epsilon": 1.0}).generator.random(4))
    other = deaths.copy()
    other.index = other.index + 1  # the same points, other people
    assert seeds.release_digest(other) != seeds.release_digest(deaths)
    assert not seeds.make_rng(None).bind(deaths).seeded  # OS entropy: not hashed, fresh anyway


def test_row_hashes_are_the_same_in_a_partition_and_an_order_free_digest_adds_up(deaths):
    whole = seeds.row_hashes(deaths)
    assert np.array_equal(seeds.row_hashes(deaths.iloc[100:200]), whole[100:200])
    a, b = seeds.rows_multiset(deaths.iloc[:150]), seeds.rows_multiset(deaths.iloc[150:])
    m = (1 << 64) - 1
    assert seeds.rows_multiset(deaths) == (a[0] + b[0], (a[1] + b[1]) & m, (a[2] + b[2]) & m)
    assert seeds.rows_multiset(deaths.iloc[::-1]) == seeds.rows_multiset(deaths)


def test_a_generator_is_read_once_per_source_and_advances():
    g = np.random.default_rng(1)
    src = seeds.make_rng(g)
    assert src.bind(1).generator.random() == src.bind(1).generator.random()  # pure once drawn
    assert seeds.make_rng(g).bind(1).generator.random() != src.bind(1).generator.random()  # the caller's g advanced


# ----------------------------------------------------------------------------- in memory
def test_perturb_seed_is_bound_to_the_data(deaths):
    a = geopriv.perturb(deaths, **LEVEL, rng=7)
    same_frame(a, geopriv.perturb(deaths.copy(), **LEVEL, rng=7))
    moved = shifted(deaths)
    b = geopriv.perturb(moved, **LEVEL, rng=7)
    assert_independent(xy(a) - xy(deaths), xy(b) - xy(moved))
    one = moved_one(deaths)
    c = geopriv.perturb(one, **LEVEL, rng=7)
    rest = np.arange(len(deaths)) != 0  # the unchanged rows draw new noise too
    assert_independent((xy(a) - xy(deaths))[rest], (xy(c) - xy(one))[rest])


def test_perturb_seed_is_bound_to_the_parameters(deaths):
    a = geopriv.perturb(deaths, **LEVEL, rng=7)
    b = geopriv.perturb(deaths, level=math.log(4), radius=100, rng=7)  # twice the epsilon, the same seed
    na, nb = xy(a) - xy(deaths), xy(b) - xy(deaths)
    close = np.hypot(*(na - 2 * nb).T) < 1.0  # shared noise would be exactly half as large
    assert close.mean() < 0.02


def test_aggregate_of_neighbouring_data_differs_beyond_the_removed_persons_cell(deaths):
    kw = dict(cells=100, bounds=SOHO, nonnegative=False, rng=5)
    a = geopriv.aggregate(deaths, 1.0, **kw)
    assert (geopriv.aggregate(deaths.copy(), 1.0, **kw)["count"] == a["count"]).all()
    b = geopriv.aggregate(deaths.drop(index=deaths.index[0]), 1.0, **kw)
    differ = (a["count"].to_numpy() != b["count"].to_numpy()).sum()
    assert differ > 10, differ


def test_heatmap_of_neighbouring_data_draws_new_noise(deaths):
    kw = dict(resolution=100, bounds=SOHO, nonnegative=False, rng=4)
    a = geopriv.heatmap(deaths, 1.0, **kw)
    assert np.array_equal(geopriv.heatmap(deaths, 1.0, **kw).values, a.values)
    b = geopriv.heatmap(deaths.drop(index=deaths.index[5]), 1.0, **kw)
    assert (a.values != b.values).sum() > 10


def test_synthesize_of_neighbouring_data_draws_new_noise(deaths):
    a = geopriv.synthesize(deaths, 2.0, bounds=SOHO, rng=3)
    same_frame(a, geopriv.synthesize(deaths.copy(), 2.0, bounds=SOHO, rng=3))
    for other in (deaths.drop(index=deaths.index[0]), shifted(deaths)):
        b = geopriv.synthesize(other, 2.0, bounds=SOHO, rng=3)
        shared = set(map(tuple, xy(a))) & set(map(tuple, xy(b)))
        assert len(shared) < 0.02 * len(a), len(shared)


def walks(n_traces=6, length=40, seed=0):
    import pandas as pd

    gen = np.random.default_rng(seed)
    pts = np.cumsum(gen.normal(0, 20.0, (n_traces, length, 2)), axis=1).reshape(-1, 2) + [448_000.0, 4_416_000.0]
    return gpd.GeoDataFrame(
        {
            "user": np.repeat([f"u{i}" for i in range(n_traces)], length),
            "t": pd.Timestamp("2024-05-01 08:00", tz="UTC")
            + pd.to_timedelta(np.tile(np.arange(length) * 60.0, n_traces), unit="s"),
        },
        geometry=gpd.points_from_xy(pts[:, 0], pts[:, 1]),
        crs=32650,
    )


def test_sanitize_traces_seed_is_bound_to_the_data():
    kw = dict(traj_id="user", time="t", rate=0.1, rng=0)
    eps = math.log(10) / 100
    gdf = walks()
    a = geopriv.sanitize_traces(gdf, eps, **kw)
    same_frame(a, geopriv.sanitize_traces(gdf.copy(), eps, **kw))
    moved = shifted(gdf, 5.0, 0.0)
    b = geopriv.sanitize_traces(moved, eps, **kw)
    na, nb = xy(a) - xy(gdf), xy(b) - xy(moved)
    ok = np.isfinite(na).all(axis=1) & np.isfinite(nb).all(axis=1)
    assert ok.sum() > 50
    close = np.hypot(*(na[ok] - nb[ok]).T) < 1.0
    assert close.mean() < 0.05, close.mean()


@pytest.fixture(scope="module")
def people():
    d = gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths").to_crs(27700)
    d = d[~d.geometry.duplicated()].reset_index(drop=True)
    d.index = [f"p{i}" for i in range(len(d))]
    return d


def edges_of(people):
    pts = np.column_stack([people.geometry.x, people.geometry.y])
    _, nn = cKDTree(pts).query(pts, 5)
    return [(people.index[i], people.index[j]) for i in range(len(people)) for j in nn[i, 1:] if i != j]


def diffuse(people, edges):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        res, _ = people.priv.diffuse_locations(
            lambda h: math.log(4) / (50.0 * (1.0 + h)), source="p0", graph=edges, rng=1
        )
    return res


def test_diffuse_locations_seed_is_bound_to_the_data(people):
    edges = edges_of(people)
    a = diffuse(people, edges)
    same_frame(a, diffuse(people.copy(), edges))
    moved = shifted(people, 3.0, 2.0)
    b = diffuse(moved, edges)
    src = xy(people.loc[["p0"]])[0]
    na, nb = xy(a) - src, xy(b) - (src + [3.0, 2.0])
    assert np.median(np.hypot(*(na - nb).T)) > 2.0


# ----------------------------------------------------------------------------- dask
def lazy(gdf, k=2):
    dask_geopandas = pytest.importorskip("dask_geopandas")
    return dask_geopandas.from_geopandas(gdf, npartitions=k)


def test_dask_perturb_seed_is_bound_to_the_data(deaths):
    a = lazy(deaths).priv.perturb(**LEVEL, rng=7).compute()
    same_frame(a, lazy(deaths).priv.perturb(**LEVEL, rng=7).compute())
    assert a.attrs["geopriv"]["seeded"] is True
    moved = shifted(deaths)
    b = lazy(moved).priv.perturb(**LEVEL, rng=7).compute()
    assert_independent(xy(a) - xy(deaths), xy(b) - xy(moved))
    one = moved_one(deaths)
    c = lazy(one).priv.perturb(**LEVEL, rng=7).compute()
    rest = np.arange(len(deaths)) != 0  # rows keyed by their own content: the unchanged ones must not replay
    assert_independent((xy(a) - xy(deaths))[rest], (xy(c) - xy(one))[rest])


def test_dask_aggregate_of_neighbouring_data_differs_beyond_the_removed_persons_cell(deaths):
    kw = dict(cells=100, bounds=SOHO, nonnegative=False, rng=5)
    a = geopriv.aggregate(lazy(deaths), 1.0, **kw)
    assert (geopriv.aggregate(lazy(deaths), 1.0, **kw)["count"] == a["count"]).all()
    assert (geopriv.aggregate(deaths, 1.0, **kw)["count"] == a["count"]).all()  # the in-memory release
    b = geopriv.aggregate(lazy(deaths.drop(index=deaths.index[0])), 1.0, **kw)
    assert (a["count"].to_numpy() != b["count"].to_numpy()).sum() > 10


def test_synthesize_xy_seed_is_bound_to_the_values():
    ages = np.random.default_rng(1).uniform(0, 100, 500)
    a = geopriv.synthesize_xy(ages, 1.0, bounds=(0, 100), rng=0)
    assert np.array_equal(a, geopriv.synthesize_xy(ages.copy(), 1.0, bounds=(0, 100), rng=0))
    b = geopriv.synthesize_xy(np.delete(ages, 0), 1.0, bounds=(0, 100), rng=0)
    assert np.isin(a, b).mean() < 0.02


def test_sanitize_traces_rows_tied_in_time_swapped_draw_anew():
    """From an attack review: the release orders tied rows by input position, so its seed must be bound to
    the rows in that order: swapping two tied rows must not hand each the other's noise."""
    import shapely

    x, y = np.array([500100.0, 500900.0, 500400.0]), np.array([5000100.0, 5000700.0, 5000300.0])
    area = (495000, 4995000, 506000, 5006000)

    def frame(perm):
        return gpd.GeoDataFrame(
            {"tid": ["a"] * 3, "t": [7, 7, 7]},
            geometry=shapely.points(x[perm], y[perm]),
            crs=32632,
            index=pd.Index(["p", "q", "r"], name="lab")[perm],
        )

    kw = dict(traj_id="tid", time="t", method="independent", rate=0.3, bounds=area, rng=42)
    a = geopriv.sanitize_traces(frame([0, 1, 2]), 0.05, **kw)
    b = geopriv.sanitize_traces(frame([1, 0, 2]), 0.05, **kw)
    true = np.c_[x, y] - np.c_[x[[1, 0, 2]], y[[1, 0, 2]]]
    diff = shapely.get_coordinates(a.geometry) - shapely.get_coordinates(b.geometry)
    assert not np.allclose(diff, true, atol=5.0)  # the outputs' difference is not the true points' difference
    again = geopriv.sanitize_traces(frame([0, 1, 2]), 0.05, **kw)
    assert a.geometry.equals(again.geometry)  # the same rows in the same order replay


def test_a_refused_dask_release_leaves_the_generator_untouched(tmp_path):
    pytest.importorskip("dask_geopandas")
    import copy

    import dask_geopandas

    from geopriv.exceptions import BudgetExceededError

    gdf = gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths").set_index("Id")
    store = geopriv.BudgetStore(tmp_path / "b.db", create=True)
    store.grant(1e-6, unit="epsilon/m")
    gen = np.random.default_rng(3)
    state = copy.deepcopy(gen.bit_generator.state)
    with pytest.raises(BudgetExceededError):
        geopriv.perturb(dask_geopandas.from_geopandas(gdf, npartitions=2), epsilon=0.01, rng=gen, budget_store=store)
    assert gen.bit_generator.state == state
    geopriv.perturb(dask_geopandas.from_geopandas(gdf, npartitions=2), epsilon=0.01, rng=gen)
    assert gen.bit_generator.state != state  # a built release advances it, as in memory


def test_the_command_line_seed_is_bound_to_the_data(capsys, tmp_path):
    """Issue 41.3 through the CLI: `--seed 1` on two files whose points differ by a shift gives independent noise."""
    from tests.test_cli import LN4_200, run

    deaths = gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths")
    a, b = tmp_path / "a.gpkg", tmp_path / "b.gpkg"
    deaths.to_file(a, engine="pyogrio")
    deaths.set_geometry(deaths.geometry.translate(7.0, 0.0)).to_file(b, engine="pyogrio")
    noise = []
    for src, out in ((a, tmp_path / "ra.gpkg"), (b, tmp_path / "rb.gpkg"), (a, tmp_path / "ra2.gpkg")):
        code, _, err = run(capsys, "perturb", src, out, *LN4_200, "--seed", "1")
        assert code == 0, err
        released, true = gpd.read_file(out), gpd.read_file(src)
        noise.append(shapely.get_coordinates(released.geometry) - shapely.get_coordinates(true.geometry))
    assert np.array_equal(noise[0], noise[2])  # the same file and seed replay
    shared = np.all(np.abs(noise[0] - noise[1]) < 10.0, axis=1)  # lattice and the 7 m shift: within 10 m
    assert shared.mean() < 0.05, shared.mean()  # on main: every row shared its noise
