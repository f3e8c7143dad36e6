"""epsilon is per ground metre, whatever the CRS.

For each CRS the ground displacement (geodesic metres) of perturbed points must follow
Gamma(2, 1/epsilon) (KS test, alpha = 1e-3, fixed seed), and a naive implementation that
adds noise in CRS units must be rejected by the same test (negative control).
"""

import math
import warnings

import geopandas as gpd
import numpy as np
import pytest
from pyproj import Transformer
from scipy import stats

import geopriv
from geopriv.crs import ground_scale
from geopriv.frame import public_frame
from geopriv.exceptions import CRSError, MissingCRSError
from geopriv.mechanisms.planar_laplace import polar_noise

EPS = math.log(4) / 200
N = 20_000
ALPHA = 1e-3

# (name, CRS, lon, lat of the centre)
CASES = [
    ("utm_metres", 32650, 116.4, 39.9),
    ("state_plane_us_feet", 2263, -73.98, 40.75),
    ("web_mercator_tromso", 3857, 18.96, 69.65),
    ("geographic_wgs84", 4326, 116.4, 39.9),
]


def _points(crs, lon, lat, n=N, spread_m=3000, seed=0):
    rng = np.random.default_rng(seed)
    aeqd = geopriv.crs.local_aeqd(lon, lat)
    x = rng.uniform(-spread_m, spread_m, 50)
    y = rng.uniform(-spread_m, spread_m, 50)
    lon_, lat_ = Transformer.from_crs(aeqd, 4326, always_xy=True).transform(x, y)
    base = gpd.GeoSeries(gpd.points_from_xy(lon_, lat_), crs=4326).to_crs(crs)
    reps = np.resize(np.arange(50), n)
    return gpd.GeoDataFrame({"k": reps}, geometry=base.iloc[reps].values, crs=crs)


def _ks_p(d, eps=EPS):
    return stats.kstest(d, stats.gamma(a=2, scale=1 / eps).cdf).pvalue


@pytest.mark.parametrize("name,crs,lon,lat", CASES, ids=[c[0] for c in CASES])
def test_ground_displacement_follows_gamma_in_every_crs(name, crs, lon, lat):
    gdf = _points(crs, lon, lat)
    out = geopriv.perturb(gdf, EPS, rng=11)
    assert out.crs == gdf.crs
    d = geopriv.displacement(gdf, out).to_numpy()
    assert _ks_p(d) > ALPHA
    # and the wrong epsilons are rejected by the same test
    assert _ks_p(d, EPS * 0.7) < 1e-6 and _ks_p(d, EPS * 1.3) < 1e-6


@pytest.mark.parametrize("name,crs,lon,lat", CASES[1:], ids=[c[0] for c in CASES[1:]])
def test_negative_control_noise_in_crs_units_is_rejected(name, crs, lon, lat):
    gdf = _points(crs, lon, lat)
    xy = np.column_stack([gdf.geometry.x, gdf.geometry.y])
    noise = polar_noise(len(xy), EPS, np.random.default_rng(11))
    if gdf.crs.is_geographic:  # the common mistake: metres to degrees with 111,320 m per degree on both axes
        noise = noise / 111_320.0
    naive = xy + noise
    out = gdf.set_geometry(gpd.points_from_xy(naive[:, 0], naive[:, 1], crs=crs))
    d = geopriv.displacement(gdf, out).to_numpy()
    assert _ks_p(d) < 1e-6


def test_scale_factors_are_what_geodesy_says():
    # feet: 1 / 0.3048006 units per metre; Web Mercator at 69.65 N about 1/cos(lat)
    smax, smin = ground_scale(2263, 988_000, 212_000)
    assert smax[0] == pytest.approx(1 / 0.3048006096, rel=2e-4)
    x, y = Transformer.from_crs(4326, 3857, always_xy=True).transform(18.96, 69.65)
    smax, smin = ground_scale(3857, x, y)
    assert smax[0] == pytest.approx(1 / math.cos(math.radians(69.65)), rel=5e-3)
    # Web Mercator is spherical Mercator on ellipsoidal coordinates: not quite conformal (0.08 % here)
    assert 1 + 1e-4 < smax[0] / smin[0] < 1 + 5e-3
    smax, smin = ground_scale(32650, 448_000, 4_416_000)  # UTM: conformal on the ellipsoid
    assert smax[0] / smin[0] == pytest.approx(1, abs=1e-7)


def test_frame_choice_and_provenance():
    utm = _points(32650, 116.4, 39.9, n=200)
    rec = geopriv.perturb(utm, EPS, rng=1).attrs["geopriv"]
    assert rec["frame"] == "planar" and rec["frame_area"] == "crs_scale_band" and "working_crs" not in rec
    merc = _points(3857, 18.96, 69.65, n=200)
    rec = geopriv.perturb(merc, EPS, rng=1).attrs["geopriv"]
    assert rec["frame"] == "spherical" and rec["mechanism"] == "spherical_laplace"
    # the public distortion bound of the sphere: (1 - e^2)^(-3/2) - 1 on WGS 84
    assert rec["distortion"] == pytest.approx(0.010126, abs=1e-6)
    feet = _points(2263, -73.98, 40.75, n=200)
    rec = geopriv.perturb(feet, EPS, rng=1).attrs["geopriv"]
    assert rec["frame"] == "planar"
    assert rec["epsilon_per_work_unit"] == pytest.approx(EPS * 0.3048006, rel=2e-4)


def test_frame_does_not_depend_on_the_data():
    """Two data sets in the same CRS get the same frame object (it never sees the points)."""
    a = _points(32650, 116.4, 39.9, n=50)
    b = _points(32650, 117.5, 30.0, n=50)
    ra = geopriv.perturb(a, EPS, rng=1).attrs["geopriv"]
    rb = geopriv.perturb(b, EPS, rng=2).attrs["geopriv"]
    drop = ("created_utc",)
    assert {k: v for k, v in ra.items() if k not in drop} == {k: v for k, v in rb.items() if k not in drop}
    assert public_frame(32650) is public_frame(32650)


def test_missing_crs_is_an_error_that_says_what_to_do():
    gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([0, 1], [0, 1]))
    with pytest.raises(MissingCRSError, match="set_crs"):
        geopriv.perturb(gdf, EPS)


def test_continental_extent_is_covered_by_the_sphere():
    gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([100, 120, 110], [20, 50, 35]), crs=4326)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = geopriv.perturb(gdf, EPS, rng=1)
    assert out.attrs["geopriv"]["frame"] == "spherical"


def test_antimeridian_and_poles_are_handled_on_the_sphere():
    gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([-179.9999, 179.9999, 0.0], [0, 0, 89.9999]), crs=4326)
    out = geopriv.perturb(gdf, EPS, rng=1)
    xy = np.column_stack([out.geometry.x, out.geometry.y])
    assert np.all(np.abs(xy[:, 0]) <= 180) and np.all(np.abs(xy[:, 1]) <= 90)
    d = geopriv.displacement(gdf, out).to_numpy()
    assert np.all(d < 5_000)  # across the antimeridian, not around the world


def test_traces_frame_needs_declared_bounds_for_lonlat():
    with pytest.raises(CRSError, match="bounds="):
        public_frame(4326, planar_only=True)
    frame = public_frame(4326, bounds=(116.3, 39.8, 116.5, 40.0), planar_only=True)
    xy = np.array([[116.4, 39.9], [116.35, 39.85]])
    back = frame.from_work(frame.to_work(xy))
    assert np.allclose(back, xy, atol=1e-10)
    # centred on the declared area, never the data (read from the CRS's parameters: a PROJ string loses
    # information, and pyproj says so with a UserWarning)
    origin = {p.name: p.value for p in frame.work_crs.coordinate_operation.params}
    assert origin["Latitude of natural origin"] == pytest.approx(39.9)
    assert origin["Longitude of natural origin"] == pytest.approx(116.4)


def test_central_meridian_of_transverse_mercator_crss_only():
    from geopriv.crs import central_meridian

    assert central_meridian(32650) == 117.0 and central_meridian("EPSG:25832") == 9.0  # UTM
    assert central_meridian(31468) == 12.0 and central_meridian(27700) == -2.0  # Gauss-Krüger, British National Grid
    assert central_meridian(2046) == 15.0  # Transverse Mercator (South Orientated)
    assert central_meridian("+proj=utm +zone=50 +datum=WGS84 +type=crs") == 117.0
    for other in (2154, 3857, 4326, 2056):  # Lambert conformal conic, Web Mercator, lon/lat, oblique Mercator
        assert central_meridian(other) is None
