"""The public frame and lattice (geopriv.frame) and the spherical sampler behind them."""
import math

import geopandas as gpd
import numpy as np
import pyproj
import pytest
from scipy import integrate, stats

import geopriv
from geopriv.exceptions import CRSError, GeometryError
from geopriv.frame import default_grid, public_frame, public_lattice, sphere_radius
from geopriv.mechanisms.planar_laplace import spherical_noise, spherical_radius

EPS = math.log(4) / 200


def test_frames_from_public_information():
    utm = public_frame(32650)
    assert utm.kind == "planar" and utm.same and utm.area_source == "area_of_use"
    # UTM's scale over its zone: 0.9996 on the central meridian to about 1.001 at the edges
    assert 0.9995 < utm.scale_min < 0.9997 and 1.0005 < utm.scale_max < 1.0015
    feet = public_frame(2263)
    assert feet.kind == "planar" and feet.scale_max == pytest.approx(1 / 0.3048006096, rel=1e-3)
    for crs in (4326, 3857):
        f = public_frame(crs)
        assert f.kind == "spherical" and f.sphere_radius == pytest.approx(6_335_439.327, abs=1e-3)
    declared = public_frame(3857, bounds=(-20_000, 6_700_000, -10_000, 6_720_000))
    assert declared.kind == "planar" and declared.area_source == "bounds"  # Web Mercator over a city: 0.2 %


def test_sphere_is_a_one_lipschitz_image_of_the_ellipsoid():
    """Sphere distance <= ellipsoid geodesic distance for random pairs (what makes the guarantee hold)."""
    rng = np.random.default_rng(3)
    lon1, lat1 = rng.uniform(-180, 180, 5000), np.degrees(np.arcsin(rng.uniform(-1, 1, 5000)))
    lon2 = lon1 + rng.normal(0, 2, 5000)
    lat2 = np.clip(lat1 + rng.normal(0, 2, 5000), -89.9, 89.9)
    _, _, d_e = pyproj.Geod(ellps="WGS84").inv(lon1, lat1, lon2, lat2)
    R = sphere_radius(pyproj.CRS(4326))
    d_s = pyproj.Geod(a=R, b=R).inv(lon1, lat1, lon2, lat2)[2]
    assert np.all(d_s <= d_e * (1 + 1e-12))
    assert np.max(d_e / np.maximum(d_s, 1e-9)) < 1.0102  # the recorded distortion bound: 1.01 %


def test_spherical_radius_follows_the_exact_density_where_curvature_matters():
    """On a small sphere (R = 500 m, eps = 1/200 per m) the radius density is R sin(r/R) e^(-eps r).

    KS test at alpha = 1e-3 (false-failure rate 1e-3); negative control: the planar Gamma(2)
    radius, which ignores curvature, is rejected by the same test.
    """
    R, eps = 500.0, 1 / 200
    r = spherical_radius(20_000, eps, R, np.random.default_rng(5))
    assert r.max() <= math.pi * R
    norm = integrate.quad(lambda t: R * math.sin(t / R) * math.exp(-eps * t), 0, math.pi * R)[0]
    grid = np.linspace(0, math.pi * R, 4001)
    dens = R * np.sin(grid / R) * np.exp(-eps * grid) / norm
    cdf_vals = np.concatenate([[0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(grid))])

    def cdf(x):
        return np.interp(x, grid, cdf_vals)

    assert stats.kstest(r, cdf).pvalue > 1e-3
    planar = np.random.default_rng(5).gamma(2.0, 1 / eps, 20_000)
    assert stats.kstest(planar[planar < math.pi * R], cdf).pvalue < 1e-6


def test_spherical_noise_is_isotropic_and_stays_on_the_globe():
    rng = np.random.default_rng(2)
    lon = np.full(20_000, 179.999)
    lat = np.full(20_000, 60.0)
    lon2, lat2 = spherical_noise(lon, lat, EPS, 6_335_439.0, rng)
    assert np.all(np.abs(lon2) <= 180) and np.all(np.abs(lat2) <= 90)
    geod = pyproj.Geod(a=6_335_439.0, b=6_335_439.0)
    az, _, d = geod.inv(lon, lat, lon2, lat2)
    assert stats.kstest(d, stats.gamma(a=2, scale=1 / EPS).cdf).pvalue > 1e-3
    assert stats.kstest((az % 360) / 360, "uniform").pvalue > 1e-3


def test_lattice_is_fixed_by_public_parameters():
    lat = public_lattice(public_frame(32650), 1.0)
    a = lat.snap(np.array([[448_123.4, 4_416_987.6]]))
    assert np.allclose(a / lat.step, np.round(a / lat.step), atol=1e-9)
    assert lat.step == pytest.approx(public_frame(32650).scale_min)  # grid * the CRS's smallest scale
    # two datasets far apart share one lattice: the residues of every release are 0
    for x0 in (200_000.0, 700_000.0):
        xs = x0 + np.random.default_rng(0).permutation(50).astype(float)  # random row order (order is checked)
        pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(xs, np.full(50, 4_000_000.0)), crs=32650)
        out = geopriv.perturb(pts, EPS, rng=1)
        r = np.column_stack([out.geometry.x, out.geometry.y]) / lat.step
        assert np.allclose(r, np.round(r), atol=1e-6)
    geo = public_lattice(public_frame(4326), 1.0)
    snapped = geo.snap(np.array([[116.4001234, 39.9001234]]))
    assert abs(snapped[0, 1] / geo.step - round(snapped[0, 1] / geo.step)) < 1e-6


def test_default_grid_follows_epsilon():
    assert default_grid(EPS) == 1.0
    assert default_grid(1.0) == pytest.approx(0.05)


def test_points_outside_the_public_area_are_refused_by_label():
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy([448_000.0, 9_000_000.0], [4_416_000.0, 4_416_000.0]),
                           index=["home", "far"], crs=32650)
    with pytest.raises(GeometryError, match="'far'") as info:
        geopriv.perturb(pts, EPS, rng=1)
    assert "9000000" not in str(info.value) and "448000" not in str(info.value)
    with pytest.raises(GeometryError, match="declared bounds"):
        geopriv.perturb(pts.iloc[:1], EPS, rng=1, bounds=(0, 0, 100_000, 100_000))


def test_grid_coarser_than_area_or_noise_refused():
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy([448_000.0], [4_416_000.0]), crs=32650)
    with pytest.raises(ValueError, match="coarser than the declared area"):
        geopriv.perturb(pts, EPS / 100, rng=1, grid=2_500, bounds=(447_000, 4_415_000, 449_000, 4_417_000))
    with pytest.raises(ValueError, match="coarser than the noise"):
        geopriv.perturb(pts, EPS, rng=1, grid=500)
    with pytest.raises(TypeError):
        geopriv.perturb(pts, EPS, rng=1, grid=True)
    with pytest.raises(TypeError):
        geopriv.perturb(pts, True, rng=1)


def test_huge_epsilon_refused_not_released():
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy([448_000.0], [4_416_000.0]), crs=32650)
    for kw in ({}, {"continuous": True}):
        with pytest.raises(ValueError, match="precision"):
            geopriv.perturb(pts, 1e300, rng=1, **kw)


def test_traces_need_a_declared_area_in_lonlat():
    with pytest.raises(CRSError, match="bounds="):
        public_frame(4326, planar_only=True)


def test_area_side_of_a_rectangle_around_the_globe_is_not_zero():
    """One geodesic from -180 to 180 degrees is 0 m; the mid-line in pieces is the equator."""
    from geopriv.frame import area_side_metres

    assert area_side_metres(4326, (-180, -90, 180, 90)) == pytest.approx(20_003_931, rel=1e-3)  # meridian
    assert area_side_metres(4326, (-180, -1, 180, 1)) == pytest.approx(221_000, rel=0.01)
    assert area_side_metres(32630, (400_000, 4_400_000, 410_000, 4_420_000)) == pytest.approx(10_000, rel=1e-3)
