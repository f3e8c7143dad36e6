"""Attribute columns and indexes that hold the true locations (geopriv.attributes)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from geopriv.attributes import (
    INDEX,
    ROW_ORDER,
    check_location_attributes,
    find_location_columns,
    order_leaks,
)
from geopriv.exceptions import GeoprivError, LocationAttributeError

DATA = Path(__file__).resolve().parents[1] / "geopriv" / "data" / "soho_cholera.gpkg"


@pytest.fixture(scope="module")
def deaths():
    """The shipped Soho cholera deaths: 324 points in EPSG:3857, columns Id and Count."""
    return gpd.read_file(DATA, layer="deaths", engine="pyogrio")


@pytest.fixture(scope="module")
def shuffled(deaths):
    """The deaths in a random row order, renumbered: the shipped file is in spatial order."""
    return deaths.sample(frac=1, random_state=0).reset_index(drop=True)


@pytest.fixture(scope="module")
def lonlat(deaths):
    pts = deaths.geometry.to_crs(4326)
    return pts.x.to_numpy(), pts.y.to_numpy()


def utm(n=1_000, seed=7):
    """``n`` random points near Beijing in UTM 50N metres (not sorted in any way)."""
    rng = np.random.default_rng(seed)
    x = 448_000 + rng.uniform(0, 5_000, n)
    y = 4_416_000 + rng.uniform(0, 5_000, n)
    return gpd.GeoDataFrame({"value": np.arange(n)}, geometry=gpd.points_from_xy(x, y), crs=32650)


def wgs84(n=500, seed=3, lon=116.4, lat=39.9, spread=0.05):
    rng = np.random.default_rng(seed)
    x = lon + rng.uniform(0, spread, n)
    y = lat + rng.uniform(0, spread, n)
    return gpd.GeoDataFrame({"k": np.zeros(n, dtype=int)}, geometry=gpd.points_from_xy(x, y), crs=4326)


# ---------------------------------------------------------------------------------------------
# negative controls: ordinary attributes pass


def test_shipped_data_has_no_location_columns(deaths, shuffled):
    assert find_location_columns(deaths) == {}
    check_location_attributes(shuffled)
    # the shipped file is stored in random order; in a spatial order (as the original file listed the
    # deaths, street by street) the row order is refused
    check_location_attributes(deaths)
    street = deaths.iloc[np.argsort(deaths.hilbert_distance().to_numpy())].reset_index(drop=True)
    assert set(order_leaks(street)) == {ROW_ORDER}
    with pytest.raises(LocationAttributeError, match="sample\\(frac=1\\).reset_index\\(drop=True\\)"):
        check_location_attributes(street)
    check_location_attributes(street, keep=[ROW_ORDER])
    check_location_attributes(street, check_order=False)


def test_ordinary_attributes_pass(shuffled):
    deaths = shuffled
    n = len(deaths)
    rng = np.random.default_rng(0)
    gdf = deaths.copy()
    gdf["count"] = rng.integers(0, 20, n)
    gdf["id"] = np.arange(n)
    gdf["t"] = pd.Timestamp("1854-08-31") + pd.to_timedelta(rng.integers(0, 86_400 * 10, n), unit="s")
    gdf["epoch"] = gdf["t"].astype("int64") // 10**9
    gdf["income"] = rng.lognormal(10, 1, n)
    gdf["name"] = [f"Resident {i}" for i in range(n)]
    gdf["street"] = rng.choice(["Broad Street", "Point Pleasant", "Polygon Road", "Poland Street"], n)
    gdf["kind"] = pd.Categorical(rng.choice(["a", "b", "c"], n))
    gdf["flag"] = rng.random(n) > 0.5
    gdf["lat_like"] = rng.uniform(30, 50, n)  # a latitude range, but Soho is at 51.5 N
    gdf["lon_like"] = rng.uniform(-1, 1, n)  # straddles Soho's -0.14 E, unrelated to the rows
    gdf["digest"] = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]
    gdf["house"] = [str(i % 50 + 1) for i in range(n)]
    gdf["age_income"] = [f"{a}, {b}" for a, b in zip(rng.integers(18, 90, n), rng.integers(0, 99, n))]
    gdf["tags"] = [{"type": "note", "text": "x"} for _ in range(n)]
    gdf["blob"] = [bytes(rng.integers(0, 256, 32, dtype=np.uint8)) for _ in range(n)]
    assert find_location_columns(gdf) == {}
    check_location_attributes(gdf)


def test_ordinary_attributes_pass_in_utm():
    gdf = utm(2_000)
    rng = np.random.default_rng(1)
    gdf["id"] = np.arange(len(gdf))
    gdf["income"] = rng.normal(50_000, 15_000, len(gdf))
    gdf["lat_like"] = rng.uniform(30, 50, len(gdf))  # Beijing is at 39.9 N: in range, unrelated
    gdf["big"] = rng.uniform(400_000, 500_000, len(gdf))  # the x range, unrelated to the rows
    assert find_location_columns(gdf) == {}


def test_id_in_row_order_passes_when_rows_are_sorted_by_x():
    # ids 0..n-1 follow x exactly when the rows are sorted by x, but tell no more than the order
    gdf = utm(5_000)
    gdf = gdf.iloc[np.argsort(gdf.geometry.x.to_numpy())].reset_index(drop=True)
    gdf["id"] = np.arange(len(gdf))
    gdf["id1000"] = np.arange(len(gdf)) + 1000
    assert find_location_columns(gdf) == {}


def test_column_equal_to_coordinates_for_fewer_than_half_the_rows(lonlat, deaths):
    _, lat = lonlat
    rng = np.random.default_rng(2)
    half = np.arange(len(deaths)) < len(deaths) * 0.45
    gdf = deaths.copy()
    gdf["partly_lat"] = np.where(half, lat, rng.uniform(30, 50, len(deaths)))
    gdf["partly_wkt"] = np.where(half, deaths.geometry.to_wkt(), "none")
    assert find_location_columns(gdf) == {}


def test_constant_column_near_the_crs_origin_passes():
    # points within 0.01 degree of (0, 0): a column of zeros is "within 0.01 degree" of every
    # longitude, but it is the same for every row and says nothing about any of them
    gdf = wgs84(300, lon=0.001, lat=0.001, spread=0.008)
    gdf["zeros"] = 0.0
    gdf["small_counts"] = np.random.default_rng(0).integers(0, 3, len(gdf)) * 0.001
    assert find_location_columns(gdf) == {}


def test_geoseries_with_range_index_passes(deaths):
    assert find_location_columns(deaths.geometry) == {}


def test_empty_frame():
    gdf = utm(10).iloc[:0]
    gdf["lon"] = []
    assert find_location_columns(gdf) == {}


# ---------------------------------------------------------------------------------------------
# numeric columns


def test_lonlat_columns_from_to_crs(deaths, lonlat):
    gdf = deaths.copy()
    gdf["lon"], gdf["lat"] = lonlat
    found = find_location_columns(gdf)
    assert set(found) == {"lon", "lat"}
    assert "longitude" in found["lon"] and "EPSG:4326" in found["lon"]
    assert "latitude" in found["lat"]


def test_xy_columns_in_the_data_crs():
    gdf = utm()
    gdf["x"], gdf["y"] = gdf.geometry.x, gdf.geometry.y
    gdf["x_int"] = gdf.geometry.x.round().astype(int)
    found = find_location_columns(gdf)
    assert set(found) == {"x", "y", "x_int"}
    assert "EPSG:32650" in found["x"] and "metres" in found["x"]


def test_soho_xy_columns_in_web_mercator(deaths):
    gdf = deaths.copy()
    gdf["X"], gdf["Y"] = deaths.geometry.x, deaths.geometry.y
    assert set(find_location_columns(gdf)) == {"X", "Y"}


def test_web_mercator_columns_of_utm_data():
    gdf = utm()
    merc = gdf.geometry.to_crs(3857)
    gdf["mx"], gdf["my"] = merc.x, merc.y
    found = find_location_columns(gdf)
    assert set(found) == {"mx", "my"}
    assert "EPSG:3857" in found["my"]


def test_rounded_coordinates(deaths, lonlat):
    gdf = deaths.copy()
    gdf["lat3"] = np.round(lonlat[1], 3)  # about 100 m
    gdf["lon3"] = np.round(lonlat[0], 3)  # about 70 m at Soho
    # Soho spans 0.0075 degree of longitude: rounded to 0.01 degree, the longitude takes two
    # values and says little more than which half of Soho; a match that is no better than
    # against other rows' coordinates is not flagged
    gdf["lon2"] = np.round(lonlat[0], 2)
    assert set(find_location_columns(gdf)) == {"lat3", "lon3"}


def test_coarse_coordinates_over_a_larger_area():
    gdf = wgs84(2_000, spread=0.2)  # 20 km around Beijing
    gdf["lat_km"] = np.round(gdf.geometry.y.to_numpy(), 2) + 0.004  # 1.1 km grid, off by 400 m
    gdf["lon_km"] = np.round(gdf.geometry.x.to_numpy(), 2)
    assert set(find_location_columns(gdf)) == {"lat_km", "lon_km"}


def test_affine_functions_of_the_coordinates():
    gdf = utm()
    gdf["x_feet"] = gdf.geometry.x * 3.28084
    gdf["y_local_km"] = (gdf.geometry.y - 4_416_000) / 1000
    gdf["rotated"] = 0.6 * gdf.geometry.x + 0.8 * gdf.geometry.y - 3_800_000
    found = find_location_columns(gdf)
    assert set(found) == {"x_feet", "y_local_km", "rotated"}
    assert "affine" in found["x_feet"]


def test_state_plane_feet_in_another_crs(deaths):
    # Soho in the British National Grid, then in feet: not close to any frame, affine in x/y
    bng = deaths.geometry.to_crs(27700)
    gdf = deaths.copy()
    gdf["e_ft"] = bng.x / 0.3048
    gdf["n_ft"] = bng.y / 0.3048
    assert set(find_location_columns(gdf)) == {"e_ft", "n_ft"}


def test_nullable_and_float32_columns(deaths, lonlat):
    lon, lat = lonlat
    gdf = deaths.copy()
    gdf["lat_na"] = pd.array(np.where(np.arange(len(gdf)) % 7 == 0, np.nan, lat), dtype="Float64")
    gdf["lon32"] = lon.astype(np.float32)
    gdf["yint"] = pd.array(np.round(deaths.geometry.y).astype(int), dtype="Int64")
    assert set(find_location_columns(gdf)) == {"lat_na", "lon32", "yint"}


def test_sparse_column_is_resampled():
    gdf = utm(100_000)
    lat = np.full(len(gdf), np.nan)
    rows = np.arange(3, len(gdf), 2_500)  # 40 rows: the 20,000-row sample catches only ~8 of them
    lat[rows] = gdf.geometry.iloc[rows].to_crs(4326).y
    gdf["lat_sparse"] = lat
    assert set(find_location_columns(gdf)) == {"lat_sparse"}


def test_bad_geometries_are_ignored(deaths, lonlat):
    gdf = deaths.copy()
    gdf["lat"] = lonlat[1]
    gdf.loc[:9, "geometry"] = None
    gdf.loc[10:14, "geometry"] = shapely.Point()
    gdf.loc[15:19, "geometry"] = shapely.box(0, 0, 1, 1)
    assert set(find_location_columns(gdf)) == {"lat"}


def test_other_geometry_columns_are_left_to_check_no_other_geometries(deaths):
    gdf = deaths.copy()
    gdf["home"] = deaths.geometry
    assert find_location_columns(gdf) == {}


def test_single_row(lonlat, deaths):
    gdf = deaths.iloc[:1].copy()
    gdf["lat"] = lonlat[1][:1]
    assert set(find_location_columns(gdf)) == {"lat"}


def test_crs_argument_and_data_without_crs(deaths, lonlat):
    gdf = deaths.to_crs(4326)
    gdf["lon"], gdf["lat"] = lonlat
    bare = gdf.set_crs(None, allow_override=True)
    assert set(find_location_columns(bare)) == {"lon", "lat"}  # raw coordinates, read as degrees
    assert set(find_location_columns(bare, crs=4326)) == {"lon", "lat"}
    merc = deaths.set_crs(None, allow_override=True)
    merc["lat"] = lonlat[1]
    # without a CRS lon/lat cannot be computed, but over Soho latitude is an affine function of
    # the Web Mercator y
    assert "affine" in find_location_columns(merc)["lat"]
    assert "EPSG:4326" in find_location_columns(merc, crs=3857)["lat"]


# ---------------------------------------------------------------------------------------------
# text, bytes and objects


def test_geometry_encodings(deaths):
    gdf = deaths.copy()
    gdf["wkt"] = deaths.geometry.to_wkt()
    gdf["ewkt"] = ["srid=3857;" + w.lower() for w in deaths.geometry.to_wkt()]
    gdf["wkb"] = deaths.geometry.to_wkb()
    gdf["wkb_ba"] = [bytearray(b) for b in deaths.geometry.to_wkb()]
    gdf["hexwkb"] = deaths.geometry.to_wkb(hex=True)
    gdf["ewkb"] = shapely.to_wkb(shapely.set_srid(deaths.geometry.values._data, 3857), hex=True, include_srid=True)
    gdf["geojson"] = [shapely.to_geojson(g) for g in deaths.geometry]
    gdf["feature"] = [
        json.dumps({"type": "Feature", "properties": {}, "geometry": json.loads(shapely.to_geojson(g))})
        for g in deaths.geometry
    ]
    gdf["geojson_dict"] = [json.loads(shapely.to_geojson(g)) for g in deaths.geometry]
    gdf["shapely"] = pd.Series(list(deaths.geometry.values), index=deaths.index, dtype=object)
    gdf["buffers"] = pd.Series(list(deaths.geometry.buffer(5).values), index=deaths.index, dtype=object)
    found = find_location_columns(gdf)
    assert set(found) == set(gdf.columns) - {"Id", "Count", "geometry"}
    assert "WKT" in found["wkt"] and "WKT" in found["ewkt"]
    assert "hex WKB" in found["hexwkb"] and "hex WKB" in found["ewkb"]
    assert found["wkb"].startswith("holds WKB")
    assert "GeoJSON" in found["geojson"] and "GeoJSON" in found["feature"]
    assert "shapely" in found["shapely"]


def test_string_dtypes_and_categoricals(deaths):
    wkt = deaths.geometry.to_wkt()
    gdf = deaths.copy()
    gdf["wkt_string"] = wkt.astype("string")
    gdf["wkt_str"] = wkt.astype(str)
    gdf["wkt_cat"] = pd.Categorical(wkt)
    gdf["lat_cat"] = pd.Categorical(np.round(deaths.geometry.to_crs(4326).y, 5))
    gdf["lat_text_cat"] = pd.Categorical(np.round(deaths.geometry.to_crs(4326).y, 5).astype(str))
    assert set(find_location_columns(gdf)) == {"wkt_string", "wkt_str", "wkt_cat", "lat_cat", "lat_text_cat"}


def test_coordinate_pairs_as_text_and_tuples(deaths, lonlat):
    lon, lat = lonlat
    gdf = deaths.copy()
    gdf["latlon"] = [f"{b:.4f}, {a:.4f}" for a, b in zip(lon, lat)]
    gdf["lonlat_paren"] = [f"({a:.6f} {b:.6f})" for a, b in zip(lon, lat)]
    gdf["xy_text"] = [f"[{x:.1f}; {y:.1f}]" for x, y in zip(deaths.geometry.x, deaths.geometry.y)]
    gdf["xy_tuple"] = pd.Series(list(zip(deaths.geometry.x, deaths.geometry.y)), index=deaths.index, dtype=object)
    gdf["lat_text"] = [f"{b:.5f}" for b in lat]
    gdf["lat_obj"] = pd.Series(list(lat), index=deaths.index, dtype=object)
    found = find_location_columns(gdf)
    assert set(found) == {"latlon", "lonlat_paren", "xy_text", "xy_tuple", "lat_text", "lat_obj"}
    assert "(latitude, longitude)" in found["latlon"]


def test_text_with_some_missing_values(deaths):
    wkt = deaths.geometry.to_wkt().to_numpy(dtype=object)
    wkt[::3] = None
    wkt[1::3] = ""
    gdf = deaths.copy()
    gdf["wkt"] = wkt  # a third WKT, a third missing, a third empty: all the present values are WKT
    assert set(find_location_columns(gdf)) == {"wkt"}


def test_pairs_from_unrelated_rows_pass(deaths, lonlat):
    # real Soho coordinates, but each row has another row's: not this row's location.
    lon, lat = lonlat
    order = np.random.default_rng(5).permutation(len(lon))
    gdf = deaths.copy()
    gdf["other_latlon"] = [f"{lat[i]:.5f}, {lon[i]:.5f}" for i in order]
    gdf["other_lat"] = lat[order]
    found = find_location_columns(gdf)
    # the values are within 0.01 degree of Soho, but the match is not row-specific
    assert found == {}


def _dms(value, positive, negative):
    hemisphere = positive if value >= 0 else negative
    value = abs(value)
    degrees, minutes = int(value), int(abs(value) % 1 * 60)
    seconds = (value - degrees - minutes / 60) * 3600
    return f"{degrees}°{minutes}'{seconds:.0f}\"{hemisphere}"


def _ddm(value, positive, negative, width):
    hemisphere = positive if value >= 0 else negative
    value = abs(value)
    return f"{hemisphere}{int(value):0{width}d}°{value % 1 * 60:06.3f}'"


def _geohash(lon, lat, length):
    """Reference encoder (the decoder under test is geopriv's)."""
    alphabet = "0123456789bcdefghjkmnpqrstuvwxyz"
    spans, bits = [[-180.0, 180.0], [-90.0, 90.0]], []
    while len(bits) < 5 * length:
        axis = len(bits) % 2
        value, span = (lon, lat)[axis], spans[axis]
        mid = (span[0] + span[1]) / 2
        bits.append(int(value >= mid))
        span[0 if value >= mid else 1] = mid
    return "".join(alphabet[int("".join(map(str, bits[i : i + 5])), 2)] for i in range(0, 5 * length, 5))


def test_numbers_anywhere_in_text(shuffled):
    deaths = shuffled
    pts = deaths.geometry.to_crs(4326)
    lon, lat = pts.x.to_numpy(), pts.y.to_numpy()
    gdf = deaths.copy()
    gdf["url"] = [f"https://maps.google.com/?q={b:.5f},{a:.5f}" for a, b in zip(lon, lat)]
    gdf["osm"] = [f"https://www.openstreetmap.org/#map=19/{b:.5f}/{a:.5f}" for a, b in zip(lon, lat)]
    gdf["key_value"] = [f"lat={b:.5f} lon={a:.5f} acc=12m" for a, b in zip(lon, lat)]
    gdf["lon_lat"] = [f"lon/lat: {a:.5f}/{b:.5f}" for a, b in zip(lon, lat)]
    gdf["dms"] = [f"{_dms(b, 'N', 'S')} {_dms(a, 'E', 'W')}" for a, b in zip(lon, lat)]
    gdf["ddm"] = [f"{_ddm(b, 'N', 'S', 2)} {_ddm(a, 'E', 'W', 3)}" for a, b in zip(lon, lat)]
    gdf["hemisphere"] = [f"{b:.4f}N, {abs(a):.4f}W" for a, b in zip(lon, lat)]
    gdf["py_geojson"] = [str({"type": "Point", "coordinates": [a, b]}) for a, b in zip(lon, lat)]
    gdf["py_dict"] = [str({"lat": b, "lng": a}) for a, b in zip(lon, lat)]
    gdf["dict_obj"] = pd.Series([{"pos": {"lat": b, "lon": a}} for a, b in zip(lon, lat)], dtype=object)
    gdf["list4"] = pd.Series([[a, b, 20.0, 1854] for a, b in zip(lon, lat)], dtype=object)
    gdf["lat_only"] = [f"latitude {b:.5f} (GPS)" for b in lat]
    gdf["mercator_text"] = [f"x: {x:.0f} y: {y:.0f}" for x, y in zip(deaths.geometry.x, deaths.geometry.y)]
    found = find_location_columns(gdf)
    assert set(found) == set(gdf.columns) - {"Id", "Count", "geometry"}
    assert "GeoJSON" in found["py_geojson"]
    assert "(longitude, latitude) in EPSG:4326" in found["dms"] and "(longitude, latitude)" in found["ddm"]
    assert "latitude in EPSG:4326" in found["lat_only"]
    assert "EPSG:3857" in found["mercator_text"]


def test_dms_text_in_the_southern_and_western_hemispheres():
    gdf = wgs84(400, lon=-58.45, lat=-34.62, spread=0.2)  # Buenos Aires
    lon, lat = gdf.geometry.x.to_numpy(), gdf.geometry.y.to_numpy()
    gdf["dms"] = [f"{_dms(b, 'N', 'S')}, {_dms(a, 'E', 'W')}" for a, b in zip(lon, lat)]
    gdf["signed"] = [f"{b:.4f}° {a:.4f}°" for a, b in zip(lon, lat)]
    gdf["dms_words"] = [f"{_dms(b, 'N', 'S').replace('°', ' deg ')}" for b in lat]
    assert set(find_location_columns(gdf)) == {"dms", "signed", "dms_words"}


def test_geohashes(shuffled):
    deaths = shuffled
    pts = deaths.geometry.to_crs(4326)
    lon, lat = pts.x.to_numpy(), pts.y.to_numpy()
    gdf = deaths.copy()
    gdf["gh7"] = [_geohash(a, b, 7) for a, b in zip(lon, lat)]  # 150 m cells
    gdf["gh9"] = [_geohash(a, b, 9).upper() for a, b in zip(lon, lat)]
    gdf["gh12"] = [_geohash(a, b, 12) for a, b in zip(lon, lat)]
    # Soho fits in a few 5-character (5 km) cells: they tell no more than "Soho"
    gdf["gh5"] = [_geohash(a, b, 5) for a, b in zip(lon, lat)]
    order = np.random.default_rng(4).permutation(len(gdf))
    gdf["gh7_other_rows"] = [_geohash(lon[i], lat[i], 7) for i in order]
    found = find_location_columns(gdf)
    assert set(found) == {"gh7", "gh9", "gh12"}
    assert "geohash" in found["gh7"]
    assert _geohash(-5.603, 42.605, 5) == "ezs42"  # the reference encoder is right

    few = deaths.iloc[:1].copy()  # an exact cell: one row is enough
    few["gh12"] = [_geohash(lon[0], lat[0], 12)]
    assert set(find_location_columns(few)) == {"gh12"}


def test_geohashes_over_a_large_area():
    gdf = wgs84(1_000, lon=-0.5, lat=51.3, spread=0.6)  # greater London
    lon, lat = gdf.geometry.x.to_numpy(), gdf.geometry.y.to_numpy()
    gdf["gh5"] = [_geohash(a, b, 5) for a, b in zip(lon, lat)]  # 5 km cells over 60 km: row-specific
    assert set(find_location_columns(gdf)) == {"gh5"}


def test_ordinary_text_with_numbers_passes(shuffled):
    deaths = shuffled
    n = len(deaths)
    rng = np.random.default_rng(8)
    pts = deaths.geometry.to_crs(4326)
    lon, lat = pts.x.to_numpy(), pts.y.to_numpy()
    order = rng.permutation(n)
    gdf = deaths.copy()
    gdf["address"] = [f"Flat {i % 7 + 1}, {i % 60 + 1} Broad Street, London W1F {i % 9}AB" for i in range(n)]
    gdf["note"] = [
        f"died 1854-09-{i % 30 + 1:02d} at 14:{i % 60:02d}, aged {i % 80}, {i % 5} children" for i in range(n)
    ]
    gdf["phone"] = [f"+44 20 7{rng.integers(100, 999)} {rng.integers(1000, 9999)}" for _ in range(n)]
    gdf["words"] = rng.choice(["secret", "bridge", "tests", "mystery", "yes", "cherry", "brewer"], n)
    gdf["angle"] = [f"{rng.integers(0, 90)}° to the street, {rng.integers(0, 60)}' long" for _ in range(n)]
    gdf["url_other_rows"] = [f"https://maps.google.com/?q={lat[i]:.5f},{lon[i]:.5f}" for i in order]
    gdf["json_other_rows"] = [str({"lat": lat[i], "lon": lon[i]}) for i in order]
    gdf["lat_halfway"] = [f"lat={b:.5f}" if i < 0.45 * n else "n/a" for i, b in enumerate(lat)]
    assert find_location_columns(gdf) == {}


# ---------------------------------------------------------------------------------------------
# monotone (non-affine) functions of the coordinates and very few rows


def uk(n=3_000, seed=0):
    rng = np.random.default_rng(seed)
    lon, lat = rng.uniform(-6, 1.7, n), rng.uniform(50.2, 58.5, n)
    return gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs=4326)


def test_british_national_grid_of_uk_wide_lonlat():
    gdf = uk()
    bng = gdf.geometry.to_crs(27700)
    gdf["easting"] = bng.x
    gdf["easting_m"] = bng.x.round().astype(int)
    gdf["utm30_easting"] = gdf.geometry.to_crs(32630).x
    gdf["northing_km"] = (bng.y / 1000).round(1)
    found = find_location_columns(gdf)
    assert set(found) == {"easting", "easting_m", "utm30_easting", "northing_km"}
    assert "monotone function of the points' longitude" in found["easting"]
    assert "rank correlation" in found["easting"]


def test_non_linear_scales_of_a_coordinate():
    gdf = utm(3_000)
    x, y = gdf.geometry.x, gdf.geometry.y
    gdf["exp_x"] = np.exp((x - 448_000) / 1_000)
    gdf["y_squared"] = ((y - 4_416_000) / 100) ** 2
    gdf["log_y"] = np.log(y - 4_415_000)
    assert set(find_location_columns(gdf)) == {"exp_x", "y_squared", "log_y"}


def test_monotone_test_negative_controls():
    gdf = uk()
    rng = np.random.default_rng(1)
    bng = gdf.geometry.to_crs(27700)
    gdf["noisy_easting"] = bng.x + rng.normal(0, 30_000, len(gdf))  # rank correlation about 0.98
    gdf["easting_10km"] = (bng.x // 10_000).astype(int)  # 70 distinct values: still a location?
    gdf["region"] = (bng.x // 100_000).astype(int)  # 7 distinct values: too coarse to test
    gdf["income"] = rng.lognormal(10, 1, len(gdf))
    found = find_location_columns(gdf)
    # a 10 km grid index is a monotone function of the easting (and it is a coarse location)
    assert set(found) == {"easting_10km"}
    # row numbers of rows sorted by longitude tell no more than the row order
    ordered = gdf.iloc[np.argsort(gdf.geometry.x.to_numpy())].reset_index(drop=True)
    ordered["row"] = np.arange(len(ordered))
    assert "row" not in find_location_columns(ordered)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 19])
def test_exact_coordinates_in_very_few_rows(n):
    gdf = uk(n, seed=n)
    pts = gdf.geometry
    gdf["lat"] = pts.y
    gdf["lon_text"] = [f"{v:.6f}" for v in pts.x]
    gdf["x3857"] = pts.to_crs(3857).x
    gdf["url"] = [f"https://maps.google.com/?q={b:.5f},{a:.5f}" for a, b in zip(pts.x, pts.y)]
    assert set(find_location_columns(gdf)) == {"lat", "lon_text", "x3857", "url"}


# ---------------------------------------------------------------------------------------------
# the index


def test_index_from_x(deaths):
    gdf = deaths.set_index(deaths.geometry.x.rename("x"))
    found = find_location_columns(gdf)
    assert set(found) == {INDEX}
    assert "index" in found[INDEX]
    assert set(find_location_columns(gdf.geometry)) == {INDEX}  # a GeoSeries: only its index


def test_multiindex_of_xy():
    gdf = utm()
    gdf.index = pd.MultiIndex.from_arrays([gdf.geometry.x.round(1), gdf.geometry.y.round(1)], names=["x", "y"])
    found = find_location_columns(gdf)
    assert set(found) == {INDEX}
    assert "level 0 'x'" in found[INDEX] and "level 1 'y'" in found[INDEX]


def test_multiindex_with_one_location_level(deaths, lonlat):
    gdf = deaths.copy()
    gdf.index = pd.MultiIndex.from_arrays([np.arange(len(gdf)) % 10, lonlat[1]], names=["day", "lat"])
    found = find_location_columns(gdf)
    assert "level 1 'lat'" in found[INDEX] and "level 0" not in found[INDEX]


def test_index_of_wkt_and_of_tuples(deaths):
    assert set(find_location_columns(deaths.set_index(deaths.geometry.to_wkt()))) == {INDEX}
    tuples = pd.Index(list(zip(deaths.geometry.x, deaths.geometry.y)), tupleize_cols=False)
    assert set(find_location_columns(deaths.set_index(tuples))) == {INDEX}


def test_ordinary_indexes_pass(deaths):
    rng = np.random.default_rng(3)
    assert find_location_columns(deaths.set_index(pd.Index(rng.permutation(len(deaths)) + 1000))) == {}
    assert find_location_columns(deaths.set_index(pd.Index([f"case-{i}" for i in range(len(deaths))]))) == {}
    times = pd.date_range("1854-08-31", periods=len(deaths), freq="min")
    assert find_location_columns(deaths.set_index(times)) == {}


# ---------------------------------------------------------------------------------------------
# check_location_attributes


def test_error_names_columns_and_fixes_without_coordinates(shuffled):
    deaths = shuffled
    pts = deaths.geometry.to_crs(4326)
    lon, lat = pts.x.to_numpy(), pts.y.to_numpy()
    gdf = deaths.copy()
    gdf["lon"], gdf["lat"] = lon, lat
    gdf["wkt"] = deaths.geometry.to_wkt()
    gdf = gdf.set_index(deaths.geometry.y.rename("northing"))
    with pytest.raises(LocationAttributeError) as info:
        check_location_attributes(gdf)
    err = info.value
    assert isinstance(err, GeoprivError) and isinstance(err, ValueError)
    assert set(err.reasons) == {"lon", "lat", "wkt", INDEX}
    msg = str(err)  # the library's text: the problem and the Python fix
    for expected in (
        "'lon'",
        "'lat'",
        "'wkt'",
        "longitude",
        "WKT",
        "gdf.drop(columns=['lon', 'lat', 'wkt'])",
        "keep=['lon', 'lat', 'wkt']",
        "gdf.reset_index(drop=True)",
        "keep=['<index>']",
    ):
        assert expected in msg, expected
    assert "--keep" not in msg and "QGIS" not in msg
    # each front end reads its own fix only (geopriv.exceptions.user_message)
    from geopriv.exceptions import user_message

    cli, qgis = user_message(err, "cli"), user_message(err, "qgis")
    for expected in ("--drop lon --drop lat --drop wkt", "--keep lon --keep lat --keep wkt", "--keep '<index>'"):
        assert expected in cli, expected
    assert "'Drop field(s)'" in qgis and "'Keep these attribute columns'" in qgis
    assert "gdf." not in cli + qgis and "keep=" not in cli + qgis and "--" not in qgis
    assert err.fix.kind == "drop_columns+replace_index"
    # no coordinate value leaks into the message (nor into the reasons)
    text = msg + " ".join(err.reasons.values())
    for i in range(0, len(gdf), 7):
        for value in (lon[i], lat[i]):
            assert f"{value:.3f}" not in text
        for value in (deaths.geometry.x.iloc[i], deaths.geometry.y.iloc[i]):
            assert str(int(value)) not in text
    assert not re.search(r"\d{4,}\.\d", text)


def test_keep(shuffled):
    deaths = shuffled
    pts = deaths.geometry.to_crs(4326)
    gdf = deaths.copy()
    gdf["lon"], gdf["lat"] = pts.x.to_numpy(), pts.y.to_numpy()
    gdf = gdf.set_index(deaths.geometry.x.rename("x"))
    with pytest.raises(LocationAttributeError) as info:
        check_location_attributes(gdf, keep=["lon"])
    assert set(info.value.reasons) == {"lat", INDEX}
    assert "'lon'" not in str(info.value)
    check_location_attributes(gdf, keep=["lon", "lat", INDEX])
    check_location_attributes(gdf.reset_index(drop=True), keep=("lon", "lat"))
    check_location_attributes(gdf.reset_index(drop=True).drop(columns=["lat"]), keep="lon")


def test_keep_unknown_column(shuffled):
    deaths = shuffled
    with pytest.raises(
        ValueError, match=r"kept column\(s\) \['Lon'\] name no column.*'Id', 'Count', 'geometry'.*keep="
    ):
        check_location_attributes(deaths, keep=["Lon"])
    with pytest.raises(ValueError, match="GeoSeries"):
        check_location_attributes(deaths.geometry, keep=["Id"])
    check_location_attributes(deaths.geometry, keep=[INDEX])
    check_location_attributes(deaths.geometry, keep=[INDEX, ROW_ORDER])
    with pytest.raises(ValueError, match=r"allow_order=\['time'\] names no column"):
        check_location_attributes(deaths, allow_order=["time"])


def test_clean_data_passes_and_wrong_type(shuffled):
    deaths = shuffled
    assert check_location_attributes(deaths) is None
    with pytest.raises(TypeError, match="GeoDataFrame or GeoSeries"):
        check_location_attributes(pd.DataFrame(deaths.drop(columns="geometry")))


# ---------------------------------------------------------------------------------------------
# cost


def test_three_million_rows_cost_less_than_sorting_them_once():
    n = 3_000_000
    rng = np.random.default_rng(11)
    x = 448_000 + rng.uniform(0, 5_000, n)
    gdf = gpd.GeoDataFrame(
        {"count": rng.integers(0, 50, n), "income": rng.normal(5e4, 1e4, n), "score": rng.uniform(30, 50, n)},
        geometry=gpd.points_from_xy(x, 4_416_000 + rng.uniform(0, 5_000, n)),
        crs=32650,
    )
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        check_location_attributes(gdf)
        best = min(best, time.perf_counter() - start)
    baseline = np.inf  # one sort of the coordinates, timed beside it (the machine is shared: compare, don't clock)
    for _ in range(3):
        start = time.perf_counter()
        np.sort(x)
        baseline = min(baseline, time.perf_counter() - start)
    assert best < 2 * baseline, f"{best:.3f} s against a {baseline:.3f} s sort"
    gdf["easting"] = x
    assert set(find_location_columns(gdf)) == {"easting"}
