"""Impossible coordinates and CRSs are refused before anything is projected (geopriv.points).

Every case uses the shipped real data (GeoLife sample in Beijing, Soho cholera deaths) with
the mistake users make: metres labelled EPSG:4326, a latitude of 95, degrees labelled as a
UTM zone, a geocentric CRS.  Each error must name rows (or the CRS), say how to fix it, and
never quote a coordinate; and each goes through both release paths (perturb and
sanitize_traces, which share release.check_release_input).
"""

from __future__ import annotations

import math
import re

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from pyproj import CRS

import geopriv
from geopriv.points import check_coordinates, check_crs_kind
from geopriv.exceptions import CRSError, GeometryError

EPS = math.log(4) / 200
BEIJING = (115.4, 39.4, 117.6, 41.1)  # the README's declared study area (lon/lat)


@pytest.fixture(scope="module")
def fixes(geolife_sample):
    """The first 400 GeoLife fixes, EPSG:4326, with a plain integer index and datetimes."""
    g = geolife_sample.iloc[:400].copy()
    g["t"] = pd.to_datetime(g["t"], utc=True, format="mixed")
    return g[["trajectory_id", "t", "geometry"]]


def _releases(gdf, **kw):
    """Both release paths on ``gdf`` (each must raise)."""
    return [
        lambda: gdf.priv.perturb(epsilon=EPS, rng=1, **kw),
        lambda: gdf.priv.sanitize_traces(traj_id="trajectory_id", time="t", epsilon=EPS, rate=0.05, rng=1, **kw),
    ]


def _assert_no_coordinates(message: str, gdf) -> None:
    """No coordinate of the data appears in the message, at any usual precision."""
    xy = shapely.get_coordinates(gdf.geometry.values)
    for v in np.unique(np.abs(xy).ravel())[:200]:
        for text in (repr(float(v)), f"{v:.6f}", f"{v:.2f}", f"{v:.0f}"):
            digits = re.sub(r"[^0-9]", "", text)
            if len(digits) >= 4:
                assert text not in message, f"coordinate {text} quoted in: {message}"


def _shuffled(gdf):
    """Geometry only, rows in random order: what a successful release needs (no ordered attributes)."""
    return gdf[[gdf.geometry.name]].sample(frac=1, random_state=0).reset_index(drop=True)


def _with_xy(gdf, x, y, crs):
    return gdf.set_geometry(gpd.points_from_xy(x, y), crs=crs)


# ---------------------------------------------------------------------------- geographic ranges
def test_metres_labelled_as_lonlat_are_refused_with_the_fix(fixes):
    utm = fixes.to_crs(32650)
    wrong = utm.set_crs(4326, allow_override=True)  # UTM metres, labelled EPSG:4326
    for release in _releases(wrong):
        with pytest.raises(GeometryError, match=r"400 row\(s\) are outside the valid range of WGS 84") as info:
            release()
        msg = str(info.value)
        assert "look like metres" in msg and "set_crs(" in msg and "allow_override=True" in msg
        _assert_no_coordinates(msg, wrong)
    # the fix the message gives: the right label, then the release works
    assert len(_shuffled(wrong.set_crs(32650, allow_override=True)).priv.perturb(epsilon=EPS, rng=1)) == 400


def test_a_latitude_of_95_names_its_row(fixes):
    bad = fixes.copy()
    bad.index = [f"fix{i}" for i in range(len(bad))]
    x, y = bad.geometry.x.to_numpy(), bad.geometry.y.to_numpy().copy()
    y[17] = 95.0
    bad = _with_xy(bad, x, y, 4326)
    for release in _releases(bad, bounds=BEIJING):
        with pytest.raises(GeometryError, match=r"1 row\(s\) are outside the valid range.*labels 'fix17'\.") as info:
            release()
        assert "latitude" in str(info.value)
        _assert_no_coordinates(str(info.value), bad)


def test_swapped_axes_and_0_360_longitudes_get_their_own_fix(fixes):
    x, y = fixes.geometry.x.to_numpy(), fixes.geometry.y.to_numpy()
    # Beijing's latitude as x, longitude as y: y beyond 90
    swapped = _with_xy(fixes, y, x, 4326)
    with pytest.raises(GeometryError, match="Swapping x and y"):
        swapped.priv.perturb(epsilon=EPS, rng=1)
    # western longitudes written 0..360 (the Beijing fixes moved to 243.6 E = 116.4 W)
    west = _with_xy(fixes, 360.0 - x, y, 4326)
    with pytest.raises(GeometryError, match=r"wrap them to -180\.\.180"):
        west.priv.perturb(epsilon=EPS, rng=1)
    fixed = _with_xy(fixes, (west.geometry.x + 180) % 360 - 180, y, 4326)  # the fix in the message
    assert len(_shuffled(fixed).priv.perturb(epsilon=EPS, rng=1)) == 400


def test_check_coordinates_uses_the_crs_angular_unit():
    grads = CRS.from_epsg(4807)  # NTF (Paris): longitude -200..200, latitude -100..100 grads
    xy = np.array([[2.5, 95.0], [2.5, 101.0]])
    with pytest.raises(GeometryError, match=r"labels 'b'"):
        check_coordinates(xy, grads, pd.Index(["a", "b"]))


# ---------------------------------------------------------------------------- projected: area of use
def test_degrees_labelled_as_utm_are_refused_with_a_label_hint(fixes):
    wrong = fixes.set_crs(32650, allow_override=True)  # lon/lat degrees labelled UTM zone 50N
    for release in _releases(wrong):
        with pytest.raises(
            GeometryError,
            match=r"400 row\(s\) lie within a few hundred units of the origin of "
            r"WGS 84 / UTM zone 50N, like longitude/latitude degrees",
        ) as info:
            release()
        msg = str(info.value)
        assert "label is probably wrong" in msg and "set_crs('EPSG:4326', allow_override=True)" in msg
        _assert_no_coordinates(msg, wrong)
    # with the README's lon/lat study area copied as bounds= the mistake is caught too
    with pytest.raises(CRSError, match="declared study area is within a few hundred units of the origin"):
        wrong.priv.perturb(epsilon=EPS, rng=1, bounds=BEIJING)
    # one mislabelled row among real UTM coordinates is named
    utm = fixes.to_crs(32650)
    x, y = utm.geometry.x.to_numpy().copy(), utm.geometry.y.to_numpy().copy()
    x[9], y[9] = fixes.geometry.x.iloc[9], fixes.geometry.y.iloc[9]
    with pytest.raises(GeometryError, match=r"1 row\(s\) lie within .* labels 9\. "):
        _with_xy(utm, x, y, 32650).priv.perturb(epsilon=EPS, rng=1)


def test_a_declared_study_area_may_extend_beyond_the_zone(fixes):
    # Beijing (116.4 E) in UTM zone 51N (120-126 E): outside the zone's area of use, inside its 1 % scale band
    # (6.6 degrees from its meridian); with a 0.2 % tolerance outside the band too
    zone51 = _shuffled(fixes.to_crs(32651))
    with pytest.raises(
        GeometryError, match="outside the public domain of WGS 84 / UTM zone 51N.*Declare bounds="
    ) as info:
        zone51.priv.perturb(epsilon=EPS, rng=1, max_distortion=0.002)
    assert "the CRS label is wrong" in str(info.value)
    # a study area reaching from Beijing into the zone (x from -100 km to 300 km): declared, it is public
    declared = (-100_000.0, 4_400_000.0, 300_000.0, 4_480_000.0)
    out = zone51.priv.perturb(epsilon=EPS, rng=1, bounds=declared)
    assert len(out) == 400 and out.crs == zone51.crs


def test_shipped_tokyo_data_outside_its_crs_area_of_use_is_accepted():
    # the Tokyo layers are in EPSG:30166 (zone VI, around Kyoto and Osaka), Tokyo lies east of its area of use:
    # real coordinates, well defined there, not mislabelled degrees
    from .conftest import data_path

    wards = gpd.read_file(data_path("tokyo_municipalities.gpkg")).set_crs(30166, allow_override=True)
    points = _shuffled(gpd.GeoDataFrame(geometry=wards.representative_point()))
    xy = shapely.get_coordinates(points.geometry.values)
    check_coordinates(xy, points.crs, points.index)  # does not raise
    assert len(points.priv.perturb(epsilon=EPS, rng=1, bounds=(260_000, -100_000, 420_000, 40_000))) == len(points)


# ---------------------------------------------------------------------------- CRS kinds
@pytest.mark.parametrize(
    "crs, match",
    [
        (4978, "geocentric"),  # WGS 84 x, y, z from the Earth's centre
        (5714, "Vertical CRS"),  # MSL height
        (
            CRS.from_wkt(
                'ENGCRS["site grid",EDATUM["site"],CS[Cartesian,2],AXIS["x",east,ORDER[1],LENGTHUNIT["metre",1]],'
                'AXIS["y",north,ORDER[2],LENGTHUNIT["metre",1]]]'
            ),
            "Engineering CRS",
        ),
    ],
)
def test_crs_that_is_not_a_map_is_refused_with_the_fix(fixes, crs, match):
    if crs == 4978:  # real geocentric x, y of the fixes (z dropped: 2-D points)
        ecef = fixes.to_crs(4978)
        data = _with_xy(fixes, ecef.geometry.x, ecef.geometry.y, 4978)
    else:
        data = fixes.set_crs(crs, allow_override=True)
    for release in _releases(data):
        with pytest.raises(CRSError, match=match) as info:
            release()
        msg = str(info.value)
        assert "EPSG:4326" in msg and "projected CRS" in msg  # the fix: reproject
        _assert_no_coordinates(msg, data)


def test_3d_geographic_and_compound_crs_are_accepted(fixes, soho):
    assert check_crs_kind(4979).is_geographic
    out = _shuffled(fixes.set_crs(4979, allow_override=True)).priv.perturb(epsilon=EPS, rng=1)
    assert len(out) == 400
    bng_odn = _shuffled(soho.to_crs(27700).set_crs(7405, allow_override=True))  # British National Grid + ODN height
    assert len(bng_odn.priv.perturb(epsilon=EPS, rng=1)) == len(soho)


# ---------------------------------------------------------------------------- PROJ errors
def test_proj_errors_become_geopriv_errors_naming_the_crs(fixes):
    mars = CRS.from_wkt(
        'GEOGCRS["Mars 2000",DATUM["D_Mars_2000",ELLIPSOID["Mars_2000_IAU_IAG",3396190,169.894447223612,'
        'LENGTHUNIT["metre",1]]],PRIMEM["Greenwich",0,ANGLEUNIT["Decimal_Degree",0.0174532925199433]],'
        'CS[ellipsoidal,2],AXIS["longitude",east,ORDER[1],ANGLEUNIT["Decimal_Degree",0.0174532925199433]],'
        'AXIS["latitude",north,ORDER[2],ANGLEUNIT["Decimal_Degree",0.0174532925199433]]]'
    )
    region = gpd.GeoDataFrame(geometry=[shapely.box(*BEIJING)], crs=mars)  # PROJ: different celestial body
    with pytest.raises(CRSError, match=r"PROJ cannot relate the region's CRS 'Mars 2000'.*region\.to_crs") as info:
        fixes.priv.perturb(epsilon=EPS, rng=1, region=region)
    import pyproj

    assert not isinstance(info.value, (pyproj.exceptions.ProjError, pyproj.exceptions.CRSError))


def test_points_where_a_projection_is_undefined_name_their_rows():
    # orthographic view centred on Beijing: the far side of the Earth is not on the map
    ortho = CRS.from_proj4("+proj=ortho +lat_0=40 +lon_0=116 +datum=WGS84 +units=m +type=crs")
    odd = geopriv.frame.PublicFrame(ortho, "planar", CRS.from_epsg(4326), 1.0, 1.0, None, "none")
    xy = np.array([[0.0, 0.0], [1.0e7, 0.0]])  # the second lies off the disc
    with pytest.raises(GeometryError, match=r"1 row\(s\) cannot be expressed in 'WGS 84'.*labels 'far'"):
        odd.to_work(xy, labels=pd.Index(["centre", "far"]))
    with pytest.raises(CRSError, match="cannot be expressed"):
        odd.to_work(xy)
