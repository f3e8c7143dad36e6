"""geopriv.adversary: the optimal Bayesian adversary, exactly on a grid.

* exactness: on small grids the result equals a brute-force computation (the full channel
  matrix, every guess for every output), for planar Laplace (uniform and random priors, kernels
  smaller and larger than the grid) and for an eikonal mechanism (its dense law);
* the paper check: planar Laplace with a uniform prior on a large area: the adversary error
  approaches the expected displacement 2 / epsilon (the posterior is the noise law, centred on
  the release); for an eikonal mechanism the adversary errs less where epsilon is high;
* k-equivalent against its closed form (uniform density: people in the disk of radius r_90,
  (1 + eps r) exp(-eps r) = 0.1);
* the empirical adversary against a real release (perturb, seeded): its mean error matches the
  exact expectation; a negative control (the adversary of a 4x larger epsilon) is rejected;
* calibrate hits its target; errors are refused with a fix.

Statistical tests: fixed seeds; tolerances of 5 standard errors (false failure below 1e-6 each).
"""

from __future__ import annotations

import math

import geopandas as gpd
import numpy as np
import pytest
from rasterio.transform import from_origin

import geopriv
from geopriv import adversary as A
from geopriv.exceptions import CRSError, ParameterError

CRS = "EPSG:32650"
LN4_200 = math.log(4) / 200


def _brute(channel, grid, prior):
    """(expected error, at-face cost, error map) from the full channel matrix and every guess."""
    n_out = grid.n if channel.invariant else channel.n_outputs
    K = channel.columns(np.arange(n_out))  # (z, u)
    c = grid.centres()
    unit = np.array([grid.transform.a / grid.hx, -grid.transform.e / grid.hy])
    D = np.hypot(*((c[:, None, :] - c[None, :, :]) / unit).transpose(2, 0, 1))  # (g, u), metres
    W = K * prior.ravel()[None]
    cost = W @ D.T
    guess = cost.argmin(1)
    err_map = (K * D[guess]).sum(0)
    return cost.min(1).sum(), guess, err_map


@pytest.mark.parametrize(
    "eps, area, cell",
    [
        (0.01, (0, 0, 1200, 900), 100),  # kernel ~ the grid
        (0.003, (0, 0, 1500, 1500), 100),  # kernel much larger
        (0.05, (0, 0, 600, 800), 40),
    ],
)  # kernel a few cells
@pytest.mark.parametrize("random_prior", [False, True])
def test_planar_laplace_equals_brute_force(eps, area, cell, random_prior):
    rect, _, crs = A._area(area, CRS)
    grid = A._grid_over(rect, crs, cell)
    prior = np.random.default_rng(3).gamma(0.5, size=(grid.ny, grid.nx)) if random_prior else "uniform"
    adv = geopriv.adversary_error(epsilon=eps, area=area, crs=CRS, cell=cell, prior=prior)
    p = np.ones((grid.ny, grid.nx)) if isinstance(prior, str) else prior
    expected, _, err_map = _brute(A._LaplaceChannel(eps, grid), grid, p / p.sum())
    assert adv.expected_error_m == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(adv.error_map, err_map.reshape(grid.ny, grid.nx), rtol=1e-7)
    assert adv.expected_error_m <= adv.displacement_m + 1e-9  # the release itself is one possible guess


def test_every_release_is_accounted_for():
    """The channel's columns sum to 1 for every input (releases beyond the area are clamped, none lost)."""
    rect, _, crs = A._area((0, 0, 900, 700), CRS)
    grid = A._grid_over(rect, crs, 100)
    K = A._LaplaceChannel(0.004, grid).columns(np.arange(grid.n))
    np.testing.assert_allclose(K.sum(axis=0), 1.0, atol=1e-12)


@pytest.fixture(scope="module")
def bump_mech():
    """12 x 12 cells; epsilon 2.5x higher in the centre (dense) than at the corners (empty)."""
    x = np.linspace(0, 1, 12)
    eps = 1e-3 * (1 + 1.5 * np.exp(-((x[None, :] - 0.5) ** 2 + (x[:, None] - 0.5) ** 2) / 0.05))
    pm = geopriv.PrivacyMap.from_epsilon(eps, transform=from_origin(500_000, 4_000_000, 400, 300), crs=32654)
    return geopriv.EikonalMechanism.build(pm, margin=0.1, max_step=1)


def test_eikonal_equals_brute_force_and_errs_less_where_epsilon_is_high(bump_mech):
    adv = geopriv.adversary_error(bump_mech)
    ch = A._EikonalChannel(
        bump_mech,
        A._Grid(
            12,
            12,
            bump_mech.privacy_map.transform,
            bump_mech.crs,
            adv.parameters["cell_m"],
            adv.parameters["cell_m"] * 0.75,
        ),
    )
    assert np.allclose(ch.columns(np.arange(ch.n_outputs)).sum(axis=0), 1.0)
    grid = A._Grid(
        12,
        12,
        bump_mech.privacy_map.transform,
        bump_mech.crs,
        400 / float(np.mean(bump_mech.privacy_map.ground_scale[0])),
        300 / float(np.mean(bump_mech.privacy_map.ground_scale[0])),
    )
    expected, _, err_map = _brute(A._EikonalChannel(bump_mech, grid), grid, np.full((12, 12), 1 / 144))
    assert adv.expected_error_m == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(adv.error_map, err_map.reshape(12, 12), rtol=1e-7)
    centre, corners = adv.error_map[5:7, 5:7].mean(), adv.error_map[[0, 0, -1, -1], [0, -1, 0, -1]].mean()
    assert centre < corners


def test_paper_check_large_area_approaches_the_expected_displacement():
    adv = geopriv.adversary_error(level=math.log(4), radius=200, area=(0, 0, 20_000, 20_000), crs=CRS, cell=200)
    open_plane = 2 / LN4_200  # 288.5 m
    assert adv.expected_error_m == pytest.approx(open_plane, rel=0.02)
    assert adv.error_map[50, 50] == pytest.approx(open_plane, rel=0.02)  # a cell far from the edges
    assert adv.expected_error_m <= adv.displacement_m


def test_k_equivalent_matches_the_disk_of_the_uniform_posterior():
    density = 1000.0  # people per km2
    grid_shape = (100, 100)
    adv = geopriv.adversary_error(
        epsilon=LN4_200, area=(0, 0, 10_000, 10_000), crs=CRS, cell=100, population=np.full(grid_shape, density)
    )
    x = 1.0
    while (1 + x) * math.exp(-x) > 0.1:
        x += 1e-4
    disk_km2 = math.pi * (x / LN4_200) ** 2 / 1e6  # the 90 % disk: 0.99 km2
    assert adv.k_map[50, 50] == pytest.approx(density * disk_km2, rel=0.06)
    assert 0 < adv.k_equivalent <= density * disk_km2 * 1.06  # less near the edges (clamped releases)
    assert adv.parameters["k_cell_m"] >= 100


@pytest.fixture(scope="module")
def release():
    """2,000 points uniform over 6 x 6 km, released at ln 4 within 200 m with the area declared."""
    rng = np.random.default_rng(11)
    xy = rng.uniform([0, 0], [6000, 6000], size=(2000, 2))
    true = gpd.GeoDataFrame(geometry=gpd.points_from_xy(xy[:, 0] + 400_000, xy[:, 1] + 4_400_000), crs=CRS)
    bounds = (400_000, 4_400_000, 406_000, 4_406_000)
    out = true.priv.perturb(level=math.log(4), radius=200, bounds=bounds, rng=5)
    return true, out, bounds


def test_empirical_adversary_matches_the_exact_expectation(release):
    true, out, bounds = release
    adv = geopriv.adversary_error(out, cell=50)  # epsilon, CRS and area from the release's record
    assert adv.parameters["epsilon_per_m"] == pytest.approx(LN4_200, rel=1e-3)
    err = geopriv.empirical_adversary_error(true, out, adv)
    s = err.attrs["summary"]
    se = err.std() / math.sqrt(len(err))
    assert abs(s["mean_m"] - adv.expected_error_m) < 5 * se, (s, adv.expected_error_m, se)
    # negative control: the adversary computed for a 4x larger epsilon (expects ~75 m) is rejected
    wrong = geopriv.adversary_error(epsilon=4 * LN4_200, area=bounds, crs=CRS, cell=50)
    assert abs(s["mean_m"] - wrong.expected_error_m) > 5 * se


def test_guesses_are_inside_the_area_and_keep_the_index(release):
    true, out, bounds = release
    adv = geopriv.adversary_error(out, cell=100)
    far = gpd.GeoSeries(
        gpd.points_from_xy([bounds[0] - 5000, bounds[2] + 10], [bounds[1] + 3000, bounds[3] + 10]),
        index=["a", "b"],
        crs=CRS,
    )
    g = adv.guess(far)
    assert list(g.index) == ["a", "b"]
    assert ((g.x > bounds[0]) & (g.x < bounds[2]) & (g.y > bounds[1]) & (g.y < bounds[3])).all()
    assert g.crs == far.crs
    assert adv.guess(far.to_crs(4326)).crs.to_epsg() == 4326


def test_calibrate_meets_its_targets():
    area = (0, 0, 8000, 8000)
    cal = geopriv.calibrate("adversary_error", 300, area=area, crs=CRS, cell=250)
    assert cal.met
    at = geopriv.adversary_error(epsilon=cal.epsilon_per_m, area=area, crs=CRS, cell=250).expected_error_m
    above = geopriv.adversary_error(epsilon=cal.epsilon_per_m * 1.2, area=area, crs=CRS, cell=250).expected_error_m
    assert at >= 300 > above
    assert {"epsilon_per_m", "displacement_m", "adversary_error_m"} <= set(cal.curve.columns)
    util = geopriv.calibrate("displacement", 500, area=area, crs=CRS, cell=250)
    d = geopriv.adversary_error(epsilon=util.epsilon_per_m, area=area, crs=CRS, cell=250).displacement_m
    assert d <= 500
    assert util.level(200) == pytest.approx(util.epsilon_per_m * 200)
    never = geopriv.calibrate("adversary_error", 1e6, area=area, crs=CRS, cell=250)
    assert not never.met


def test_refusals_say_how_to_fix():
    with pytest.raises(ParameterError, match="public area"):
        geopriv.adversary_error(epsilon=0.01)
    with pytest.raises(ParameterError, match="level and radius"):
        geopriv.adversary_error(area=(0, 0, 1, 1), crs=CRS)
    with pytest.raises(CRSError, match="not longitudes"):  # a geographic CRS takes degrees (issue 44)
        geopriv.adversary_error(epsilon=0.01, area=(400_000, 4_400_000, 404_000, 4_403_000), crs=4326)
    with pytest.raises(ParameterError, match="limited to"):
        geopriv.adversary_error(epsilon=0.01, area=(0, 0, 100_000, 100_000), crs=CRS, cell=10)
    with pytest.raises(ParameterError, match="population"):
        geopriv.adversary_error(epsilon=0.01, area=(0, 0, 1000, 1000), crs=CRS, prior="population")
    unbounded = gpd.GeoDataFrame(geometry=gpd.points_from_xy([400_000.0], [4_400_000.0]), crs=CRS).priv.perturb(
        epsilon=0.01, rng=1
    )
    with pytest.raises(ParameterError, match="declared no public area"):
        geopriv.adversary_error(unbounded)
    with pytest.raises(ParameterError, match="calibrate|target"):
        geopriv.calibrate("speed", 1, area=(0, 0, 1000, 1000), crs=CRS)


def test_maps_written_as_a_geotiff(tmp_path):
    import rasterio

    adv = geopriv.adversary_error(
        epsilon=LN4_200,
        area=(400_000, 4_400_000, 404_000, 4_403_000),
        crs=CRS,
        cell=200,
        population=np.full((15, 20), 500.0),
    )
    path = adv.to_raster(tmp_path / "adversary.tif")
    with rasterio.open(path) as ds:
        assert ds.count == 2 and ds.crs.to_epsg() == 32650 and ds.res == (200.0, 200.0)
        np.testing.assert_allclose(ds.read(1), adv.error_map.astype(np.float32))
        assert ds.descriptions[0] == "adversary error (m)"
    with pytest.raises(geopriv.exceptions.OutputError):
        adv.to_raster(path)  # never overwritten unless asked


def test_the_grids_overhang_is_not_part_of_the_area():
    """Whole cells may overhang a rectangular area: cells whose centres lie outside it carry no prior and are
    never guessed (found by the privkit comparison: a uniform prior over the grid put people there)."""
    adv = geopriv.adversary_error(epsilon=0.01, area=(0, 0, 1040, 1000), crs=CRS, cell=100)
    assert adv.shape == (10, 11)
    assert np.isnan(adv.error_map[:, -1]).all() and np.isfinite(adv.error_map[:, :-1]).all()
    assert not np.isin(adv.guess_cells % 11, [10]).any()
