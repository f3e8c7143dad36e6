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
    assert utm.kind == "planar" and utm.same and utm.area_source == "crs_scale_band"
    # UTM's scale over its scale band: 0.9996 on the central meridian to 1 % more at its edges
    assert 0.9995 < utm.scale_min < 0.9997 and 1.009 < utm.scale_max <= utm.scale_min * 1.01
    # a smaller tolerance narrows the band; over the zone's area of use alone: 0.9996 to about 1.001
    narrow = public_frame(32650, max_distortion=0.002)
    assert narrow.area_source == "crs_scale_band" and 1.0005 < narrow.scale_max < 1.0016
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
    pts = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy([448_000.0, 9_000_000.0], [4_416_000.0, 4_416_000.0]),
        index=["home", "far"],
        crs=32650,
    )
    with pytest.raises(GeometryError, match="'far'") as info:
        geopriv.perturb(pts, EPS, rng=1)
    assert "9000000" not in str(info.value) and "448000" not in str(info.value)
    with pytest.raises(GeometryError, match="declared study area"):
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


# ---------------------------------------------------------------------------- the scale band of a zone CRS
def _geodesic_ratio(crs, frame, rng, n=20_000):
    """Largest CRS distance / geodesic distance over random pairs of the frame's area, corners and edges included."""
    xmin, ymin, xmax, ymax = frame.area
    edge = np.linspace(0.0, 1.0, 41)
    ex = np.concatenate(
        [xmin + edge * (xmax - xmin), xmin + edge * (xmax - xmin), np.full(41, xmin), np.full(41, xmax)]
    )
    ey = np.concatenate(
        [np.full(41, ymin), np.full(41, ymax), ymin + edge * (ymax - ymin), ymin + edge * (ymax - ymin)]
    )
    i, j = np.triu_indices(len(ex), 1)
    x1 = np.concatenate([ex[i], rng.uniform(xmin, xmax, n)])
    y1 = np.concatenate([ey[i], rng.uniform(ymin, ymax, n)])
    x2 = np.concatenate([ex[j], rng.uniform(xmin, xmax, n)])
    y2 = np.concatenate([ey[j], rng.uniform(ymin, ymax, n)])
    to_geo = pyproj.Transformer.from_crs(crs, crs.geodetic_crs, always_xy=True)
    lon1, lat1 = to_geo.transform(x1, y1)
    lon2, lat2 = to_geo.transform(x2, y2)
    d = crs.geodetic_crs.get_geod().inv(lon1, lat1, lon2, lat2)[2]
    ok = d > 1.0
    return float(np.max(np.hypot(x2 - x1, y2 - y1)[ok] / d[ok]))


@pytest.mark.parametrize("epsg", [32650, 25832, 31468])
def test_scale_bound_holds_over_the_whole_scale_band(epsg):
    """UTM 50N, ETRS89 / UTM 32N, Gauss-Krüger zone 4: the frame's domain is the scale band around the central
    meridian, and scale_max (epsilon's conversion) bounds the scale everywhere in it: PROJ's own point scale factors
    (``Proj.get_factors``) on a dense grid, and CRS distance / geodesic distance for long chords."""
    from geopriv.frame import DEFAULT_MAX_DISTORTION, area_of_use_bounds

    crs = pyproj.CRS.from_epsg(epsg)
    f = public_frame(epsg)
    assert f.kind == "planar" and f.same and f.area_source == "crs_scale_band"
    xmin, ymin, xmax, ymax = f.area
    aou = area_of_use_bounds(crs)
    assert xmin < aou[0] and aou[2] < xmax and (ymin, ymax) == (aou[1], aou[3])  # wider than the area of use
    gx, gy = np.meshgrid(np.linspace(xmin, xmax, 401), np.linspace(ymin, ymax, 301))
    lon, lat = pyproj.Transformer.from_crs(crs, crs.geodetic_crs, always_xy=True).transform(gx.ravel(), gy.ravel())
    factors = pyproj.Proj(crs).get_factors(lon, lat)
    k_max, k_min = float(np.max(factors.tissot_semimajor)), float(np.min(factors.tissot_semiminor))
    assert (
        np.isfinite(k_max) and k_max <= f.scale_max and k_min >= f.scale_min * (1 - 1e-7)
    )  # get_factors: numerical derivatives
    assert _geodesic_ratio(crs, f, np.random.default_rng(epsg)) <= f.scale_max
    # within the tolerance, and the widest band within it: 1 % wider, the frame's measure leaves the tolerance
    assert f.distortion <= DEFAULT_MAX_DISTORTION and k_max / k_min - 1 > 0.8 * DEFAULT_MAX_DISTORTION
    xc, w = (xmin + xmax) / 2, (xmax - xmin) / 2
    assert public_frame(epsg, bounds=(xc - 1.01 * w, ymin, xc + 1.01 * w, ymax)).distortion > DEFAULT_MAX_DISTORTION


def test_scale_band_is_public_and_recorded():
    """The band is a function of the CRS and the tolerance alone, recorded with its source; other projections
    keep their area of use."""
    from geopriv.frame import area_of_use_bounds, scale_band_bounds

    f = public_frame(32650)
    d = f.describe()
    assert d["frame_area"] == "crs_scale_band" and d["public_area"] == list(f.area)
    assert scale_band_bounds(32650) == f.area and scale_band_bounds("EPSG:32650", 0.01) == f.area
    # eastings round to three significant digits either side of the false easting: readable, recomputable
    assert f.area[0] == 500_000 - (f.area[2] - 500_000) and f.area[2] % 1_000 == 0
    # Beijing's data range (110.7-122.7 E at 40 N) lies inside; 30 degrees from the meridian does not
    x, _ = pyproj.Transformer.from_crs(4326, 32650, always_xy=True).transform([110.7, 122.7, 147.0], [40.0, 40.0, 40.0])
    assert f.area[0] < x[0] and x[1] < f.area[2] < x[2]
    # trace releases (a plane needed) use it too
    assert public_frame(32650, planar_only=True).area_source == "crs_scale_band"
    # a smaller tolerance: a narrower band, still holding the area of use; one the area of use exceeds: no band
    narrow = scale_band_bounds(32650, 0.002)
    assert f.area[0] < narrow[0] <= area_of_use_bounds(pyproj.CRS(32650))[0]
    assert scale_band_bounds(32650, 0.001) is None and public_frame(32650, max_distortion=0.001).kind == "spherical"
    # other projections: today's area of use (Lambert-93, a state plane in feet), or the sphere (Web Mercator)
    for epsg in (2154, 2263):
        assert scale_band_bounds(epsg) is None and public_frame(epsg).area_source == "area_of_use"
    assert scale_band_bounds(3857) is None and public_frame(3857).kind == "spherical"
    # a southern zone and a south-orientated Transverse Mercator (x grows westwards) have bands too
    assert public_frame(32733).area_source == "crs_scale_band"
    assert public_frame(2046).area_source == "crs_scale_band"
