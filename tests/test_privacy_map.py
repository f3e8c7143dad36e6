"""PrivacyMap: population and epsilon rasters in, epsilon per ground metre out."""

from __future__ import annotations

import math

import numpy as np
import pytest
import rasterio

import geopriv
from geopriv import PrivacyMap
from geopriv.exceptions import CRSError, MissingCRSError, RasterError
from geopriv.privacy_map import affine6, edge_weights, lipschitz_envelope

from .conftest import data_path

TOKYO = "tokyo_density_200.tif"


def from_origin(west, north, xsize, ysize):
    """North-up transform (rasterio.transform.from_origin multiplies Affines, broken with affine 3.0.1)."""
    return rasterio.Affine(xsize, 0.0, west, 0.0, -ysize, north)


def _write(path, values, *, crs="EPSG:30166", transform=None, nodata=None, dtype="float32"):
    values = np.asarray(values)
    transform = transform or from_origin(300_000.0, 0.0, 500.0, 400.0)
    profile = dict(
        driver="GTiff", height=values.shape[0], width=values.shape[1], count=1, dtype=dtype, transform=transform
    )
    if crs is not None:
        profile["crs"] = crs
    if nodata is not None:
        profile["nodata"] = nodata
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(values.astype(dtype), 1)
    return path


@pytest.fixture(scope="module")
def tokyo_map():
    return PrivacyMap.from_population(data_path(TOKYO), slope=1e-5, floor=2e-4)


def test_shipped_raster_reads_with_units_and_nodata(tokyo_map):
    pm = tokyo_map
    with rasterio.open(data_path(TOKYO)) as ds:
        raw = ds.read(1)
    valid = raw != -1
    assert pm.shape == (200, 200)
    assert pm.crs.to_epsg() == 30166
    assert int(pm.nodata_mask.sum()) == int((~valid).sum()) > 0  # Tokyo Bay and outside the area
    # no-data cells: zero population, the floor epsilon (strongest protection)
    assert np.all(pm.epsilon[pm.nodata_mask] == pytest.approx(2e-4))
    np.testing.assert_allclose(pm.epsilon[valid], 2e-4 + 1e-5 * raw[valid].astype(float), rtol=1e-12)
    assert pm.population[pm.nodata_mask].max() == 0
    # EPSG:30166 is metres, but Transverse Mercator stretches far from its meridian: per CRS unit
    # epsilon is divided by the measured scale (never weakened)
    smax, smin = pm.ground_scale
    assert 1.0 < smax.min() and smax.max() < 1.003
    assert np.all(pm.epsilon_crs <= pm.epsilon)
    assert "epsilon" in repr(pm) and "200 x 200" in repr(pm)


def test_the_tests_read_the_raster_the_package_ships():
    import geopriv as gp
    from pathlib import Path

    packaged = Path(gp.__file__).parent / "data" / TOKYO
    assert data_path(TOKYO).read_bytes() == packaged.read_bytes()  # no second copy in tests/data
    a = PrivacyMap.from_population(packaged, epsilon_range=(1e-4, 1e-3))
    assert a.shape == (200, 200) and a.epsilon_max == pytest.approx(1e-3)


def test_epsilon_range_is_the_papers_linear_map():
    dens = np.array([[0.0, 10.0], [20.0, 40.0]])
    pm = PrivacyMap.from_population(
        dens, epsilon_range=(0.4e-3, 2.0e-3), transform=from_origin(0, 0, 100, 100), crs=32654
    )
    np.testing.assert_allclose(pm.epsilon, 0.4e-3 + 1.6e-3 * dens / 40.0)
    assert pm.epsilon_min == pytest.approx(0.4e-3) and pm.epsilon_max == pytest.approx(2.0e-3)


def test_counts_per_cell_become_density_per_km2():
    t = from_origin(500_000, 4_000_000, 200, 200)  # UTM: 200 m cells = 0.04 km2 (scale ~0.9996)
    counts = np.full((3, 3), 8.0)
    a = PrivacyMap.from_population(counts, slope=1e-6, floor=1e-4, units="per_cell", transform=t, crs=32654)
    area = 0.04 / (a.ground_scale[0] * a.ground_scale[1])
    np.testing.assert_allclose(a.population, 8.0 / area, rtol=1e-9)
    b = PrivacyMap.from_population(8.0 / area, slope=1e-6, floor=1e-4, transform=t, crs=32654)
    np.testing.assert_allclose(a.epsilon, b.epsilon, rtol=1e-12)


def test_geotiff_round_trip_through_rasterio(tmp_path, tokyo_map):
    out = tmp_path / "eps.tif"
    tokyo_map.to_geotiff(out)
    with rasterio.open(out) as ds:
        assert ds.crs.to_epsg() == 30166
        assert ds.tags()["units"] == "epsilon per ground metre"
    back = PrivacyMap.from_epsilon(out)
    np.testing.assert_array_equal(back.epsilon, tokyo_map.epsilon)
    assert affine6(back.transform) == affine6(tokyo_map.transform)
    assert back.info["written_from"]["source"] == "population"
    # an open rasterio dataset works too
    with rasterio.open(out) as ds:
        np.testing.assert_array_equal(PrivacyMap.from_epsilon(ds).epsilon, tokyo_map.epsilon)


def test_epsilon_raster_nodata_gets_the_strongest_level(tmp_path):
    vals = np.array([[1e-3, 2e-3, -9], [3e-3, 4e-3, 5e-3]])
    pm = PrivacyMap.from_epsilon(_write(tmp_path / "e.tif", vals, nodata=-9))
    assert pm.epsilon[0, 2] == pytest.approx(1e-3)
    assert pm.nodata_mask.sum() == 1
    pm2 = PrivacyMap.from_epsilon(_write(tmp_path / "e2.tif", vals, nodata=-9), nodata_epsilon=5e-4)
    assert pm2.epsilon[0, 2] == pytest.approx(5e-4)


def test_nodata_epsilon_options(tokyo_map):
    near = PrivacyMap.from_population(data_path(TOKYO), slope=1e-5, floor=2e-4, nodata_epsilon="nearest")
    nd = near.nodata_mask
    # data cells unchanged; each no-data cell takes the epsilon of its nearest data cell
    np.testing.assert_array_equal(near.epsilon[~nd], tokyo_map.epsilon[~nd])
    from scipy.ndimage import distance_transform_edt

    idx = distance_transform_edt(nd, return_distances=False, return_indices=True)
    np.testing.assert_array_equal(near.epsilon, tokyo_map.epsilon[idx[0], idx[1]])
    assert near.epsilon[nd].max() > 2e-4  # the bay next to dense wards is no longer at the floor
    assert near.population[nd].max() == 0 and near.info["nodata_epsilon"] == "nearest"
    fixed = PrivacyMap.from_population(data_path(TOKYO), slope=1e-5, floor=2e-4, nodata_epsilon=1e-4)
    assert np.all(fixed.epsilon[nd] == 1e-4)
    with pytest.raises(ValueError, match="nearest"):
        PrivacyMap.from_population(data_path(TOKYO), slope=1e-5, floor=2e-4, nodata_epsilon="mean")
    with pytest.raises(ValueError, match="nodata_epsilon"):
        PrivacyMap.from_population(data_path(TOKYO), slope=1e-5, floor=2e-4, nodata_epsilon=-1.0)


def test_south_up_rasters_are_flipped_north_up():
    vals = np.array([[1.0, 2.0], [3.0, 4.0]])
    south_up = rasterio.Affine(100, 0, 0, 0, 100, 0)  # row 0 is the southern row
    pm = PrivacyMap.from_population(vals, slope=1e-5, floor=1e-4, transform=south_up, crs=32654)
    assert pm.transform.e < 0
    np.testing.assert_allclose(pm.population, vals[::-1])


# ------------------------------------------------------------------ units of other CRSs
def test_feet_raster_epsilon_per_unit_is_per_foot():
    t = from_origin(980_000, 200_000, 500, 500)  # NY state plane, US survey feet
    pm = PrivacyMap.from_epsilon(np.full((3, 3), 1e-3), transform=t, crs=2263)
    # 1 ground metre is ~3.28 feet: epsilon per foot is ~1e-3 / 3.28
    assert pm.epsilon_crs.max() == pytest.approx(1e-3 / 3.2808, rel=2e-3)


def test_web_mercator_raster_accounts_for_the_stretch():
    from pyproj import Transformer

    x, y = Transformer.from_crs(4326, 3857, always_xy=True).transform(139.7, 35.7)
    pm = PrivacyMap.from_epsilon(np.full((4, 4), 1e-3), transform=from_origin(x, y, 1000, 1000), crs=3857)
    stretch = 1 / math.cos(math.radians(35.7))
    assert pm.epsilon_crs.max() == pytest.approx(1e-3 / stretch, rel=0.01)


# ------------------------------------------------------------------ bad rasters
def test_no_crs_is_a_clear_error(tmp_path):
    path = _write(tmp_path / "nocrs.tif", np.ones((3, 3)), crs=None)
    with pytest.raises(MissingCRSError, match="crs="):
        PrivacyMap.from_population(path, slope=1e-5, floor=1e-4)


def test_geographic_raster_is_refused_with_the_fix(tmp_path):
    path = _write(tmp_path / "geo.tif", np.ones((3, 3)), crs="EPSG:4326", transform=from_origin(139, 36, 0.01, 0.01))
    with pytest.raises(CRSError, match="gdalwarp"):
        PrivacyMap.from_population(path, slope=1e-5, floor=1e-4)


def test_all_nodata_is_refused(tmp_path):
    path = _write(tmp_path / "empty.tif", np.full((3, 3), -1.0), nodata=-1)
    with pytest.raises(RasterError, match="no valid cell"):
        PrivacyMap.from_population(path, slope=1e-5, floor=1e-4)


def test_negative_population_is_refused_and_located(tmp_path):
    vals = np.ones((4, 4))
    vals[2, 3] = -5
    path = _write(tmp_path / "neg.tif", vals)
    with pytest.raises(RasterError, match=r"negative population \(first at raster row 2, column 3\)"):
        PrivacyMap.from_population(path, slope=1e-5, floor=1e-4)


def test_array_needs_georeferencing():
    with pytest.raises(RasterError, match="transform="):
        PrivacyMap.from_population(np.ones((3, 3)), slope=1e-5, floor=1e-4, crs=32654)


def test_parameters_are_checked():
    t = from_origin(0, 0, 10, 10)
    with pytest.raises(ValueError, match="not both"):
        PrivacyMap.from_population(
            np.ones((3, 3)), slope=1e-5, floor=1e-4, epsilon_range=(1e-4, 1e-3), transform=t, crs=32654
        )
    with pytest.raises(ValueError, match="slope= and floor="):
        PrivacyMap.from_population(np.ones((3, 3)), transform=t, crs=32654)
    with pytest.raises(ValueError, match="floor"):
        PrivacyMap.from_population(np.ones((3, 3)), slope=1e-5, floor=0, transform=t, crs=32654)
    with pytest.raises(RasterError, match="epsilon <= 0"):
        PrivacyMap.from_epsilon(np.array([[1e-3, 0.0], [1e-3, 1e-3]]), transform=t, crs=32654)
    with pytest.raises(ValueError, match="units"):
        PrivacyMap.from_population(np.ones((3, 3)), slope=1e-5, floor=1e-4, units="per_m2", transform=t, crs=32654)


def test_maps_are_immutable(tokyo_map):
    with pytest.raises(ValueError):
        tokyo_map.epsilon[0, 0] = 1.0
    with pytest.raises(AttributeError):
        tokyo_map.crs = None


# ------------------------------------------------------------------ regularisation
def test_regularised_only_lowers_and_bounds_the_noise_scale_slope(tokyo_map):
    k = 0.5
    reg = tokyo_map.regularised(k)
    assert np.all(reg.epsilon <= tokyo_map.epsilon)
    assert reg.info["regularised"]["cells_lowered"] > 0
    # 1/epsilon is k-Lipschitz on every 8-neighbour edge (ground lengths, conservative)
    ell = 1.0 / reg.epsilon
    hx, hy = reg.cell_size
    s = 1.0 / reg.ground_scale[0]
    assert np.all(np.abs(np.diff(ell, axis=1)) <= k * hx * np.maximum(s[:, 1:], s[:, :-1]) * (1 + 1e-9))
    assert np.all(np.abs(np.diff(ell, axis=0)) <= k * hy * np.maximum(s[1:], s[:-1]) * (1 + 1e-9))
    # where the map is already smooth nothing changes
    flat = PrivacyMap.from_epsilon(np.full((5, 5), 1e-3), transform=from_origin(0, 0, 100, 100), crs=32654)
    np.testing.assert_array_equal(flat.regularised(0.1).epsilon, flat.epsilon)
    # and it is idempotent
    np.testing.assert_allclose(reg.regularised(k).epsilon, reg.epsilon, rtol=1e-12)


def test_lipschitz_envelope_is_the_exact_shortest_path_envelope():
    rng = np.random.default_rng(3)
    f = rng.random((9, 13)) * 10
    f[rng.random(f.shape) < 0.3] = np.inf
    w = edge_weights(rng.random((9, 13)) + 0.2, 0.9, 1.1)
    g, _ = lipschitz_envelope(f, w)
    # brute force Bellman-Ford on the 8-neighbour graph
    b = f.copy()
    for _ in range(1000):
        old = b.copy()
        for (sa, sb), wt in zip(
            [
                ((slice(None), slice(0, -1)), (slice(None), slice(1, None))),
                ((slice(0, -1), slice(None)), (slice(1, None), slice(None))),
                ((slice(0, -1), slice(0, -1)), (slice(1, None), slice(1, None))),
                ((slice(0, -1), slice(1, None)), (slice(1, None), slice(0, -1))),
            ],
            w,
        ):
            b[sa] = np.minimum(b[sa], b[sb] + wt)
            b[sb] = np.minimum(b[sb], b[sa] + wt)
        if np.array_equal(old, b):
            break
    np.testing.assert_allclose(g, b, rtol=0, atol=1e-12)


def test_exported_at_top_level():
    assert geopriv.PrivacyMap is PrivacyMap


# ------------------------------------------------------------------ infinite cells and outliers
README_RANGE = (math.log(4) / 2000, math.log(4) / 400)  # the README's and QGIS's default epsilon range


def _tokyo_copy(tmp_path, name, edit=None, **profile_changes):
    """A copy of the shipped Tokyo raster (float32, nodata -1), with ``edit(values)`` applied."""
    with rasterio.open(data_path(TOKYO)) as ds:
        values = ds.read(1)
        profile = ds.profile
    if edit is not None:
        edit(values)
    profile.update(profile_changes)
    path = tmp_path / name
    with rasterio.open(path, "w", **profile) as out:
        out.write(values, 1)
    return path


def test_an_infinite_cell_is_refused_and_located_not_taken_as_no_data(tmp_path):
    def plus_inf(v):
        v[120, 45] = np.inf

    path = _tokyo_copy(tmp_path, "inf.tif", plus_inf)
    for build in (
        lambda: PrivacyMap.from_population(path, epsilon_range=README_RANGE),
        lambda: PrivacyMap.from_population(path, slope=1e-5, floor=2e-4),
        lambda: PrivacyMap.from_epsilon(path),
    ):
        with pytest.raises(
            RasterError,
            match=r"1 cell\(s\) of the raster are infinite \(first at raster row 120, "
            r"column 45",
        ) as info:
            build()
        assert "nodata=" in str(info.value)  # how to fix it: declare it as no data, or fix the cell
    # -inf too, and in an array
    with rasterio.open(path) as ds:
        arr, t, crs = ds.read(1).astype(float), ds.transform, ds.crs
    arr[arr == -1] = np.nan
    arr[7, 3] = -np.inf
    with pytest.raises(RasterError, match=r"2 cell\(s\).*row 7, column 3"):
        PrivacyMap.from_population(arr, transform=t, crs=crs, slope=1e-5, floor=2e-4)
    # declared as no data, the same cells are no data (the documented fix)
    pm = PrivacyMap.from_population(np.abs(arr), transform=t, crs=crs, nodata=np.inf, slope=1e-5, floor=2e-4)
    assert pm.nodata_mask[120, 45] and pm.nodata_mask[7, 3]
    expected = PrivacyMap.from_population(data_path(TOKYO), slope=1e-5, floor=2e-4).nodata_mask.copy()
    expected[120, 45] = expected[7, 3] = True
    np.testing.assert_array_equal(pm.nodata_mask, expected)


def test_epsilon_range_is_robust_to_one_huge_cell(tmp_path, recwarn):
    clean = PrivacyMap.from_population(data_path(TOKYO), epsilon_range=README_RANGE)
    assert clean.info["outlier_cells"] == 0 and not [
        w for w in recwarn if issubclass(w.category, geopriv.GeoprivWarning)
    ]
    assert clean.epsilon_max == pytest.approx(README_RANGE[1])  # the real raster keeps the paper's linear map

    def one_huge_cell(v):
        v[100, 60] = 1e6  # a mis-coded cell, 30,000 times the densest ward

    path = _tokyo_copy(tmp_path, "huge.tif", one_huge_cell)
    with pytest.warns(geopriv.GeoprivWarning, match=r"1 cell\(s\).*row 100, column 60.*outlier_factor=None"):
        robust = PrivacyMap.from_population(path, epsilon_range=README_RANGE)
    others = np.ones(clean.shape, bool)
    others[100, 60] = False
    np.testing.assert_allclose(robust.epsilon[others], clean.epsilon[others], rtol=1e-12)  # the map is unchanged
    assert robust.epsilon[100, 60] == pytest.approx(README_RANGE[1])  # the outlier gets the high end
    assert robust.info["outlier_cells"] == 1 and robust.info["density_reference"] == pytest.approx(
        clean.info["density_max"]
    )
    # negative control: the plain linear map is flattened by that one cell
    flat = PrivacyMap.from_population(path, epsilon_range=README_RANGE, outlier_factor=None)
    low = README_RANGE[0]
    data = ~flat.nodata_mask & others
    assert np.mean(flat.epsilon[data] < 1.01 * low) > 0.999
    assert np.mean(robust.epsilon[data] < 1.01 * low) < 0.05


def test_a_single_fill_value_cell_is_an_outlier_and_declaring_it_is_the_fix(tmp_path):
    big = float(np.finfo(np.float32).max)  # a typical undeclared no-data value, here in one cell

    def fill(v):
        v[10, 190] = big

    path = _tokyo_copy(tmp_path, "fill.tif", fill)
    with pytest.warns(geopriv.GeoprivWarning, match="pass nodata=<that value>"):
        pm = PrivacyMap.from_population(path, epsilon_range=README_RANGE)
    clean = PrivacyMap.from_population(data_path(TOKYO), epsilon_range=README_RANGE)
    others = np.ones(clean.shape, bool)
    others[10, 190] = False
    np.testing.assert_allclose(pm.epsilon[others], clean.epsilon[others], rtol=1e-12)
    assert np.isfinite(pm.epsilon).all() and pm.epsilon_max == pytest.approx(README_RANGE[1])
    # declaring it is the fix: then it is no data (floor epsilon), without a warning
    pm2 = PrivacyMap.from_population(path, epsilon_range=README_RANGE, nodata=big)
    assert pm2.nodata_mask[10, 190] and pm2.info["outlier_cells"] == 0
    with pytest.raises(ValueError, match="outlier_factor"):
        PrivacyMap.from_population(path, epsilon_range=README_RANGE, nodata=big, outlier_factor=0.5)


# ---------------------------------------------------------------------------- decoded size limit
def _huge_sparse_geotiff(path, size=20_000):
    """A size x size population GeoTIFF of well under a megabyte: tiled, compressed, no block written (all zero)."""
    profile = dict(
        driver="GTiff",
        height=size,
        width=size,
        count=1,
        dtype="uint8",
        crs="EPSG:30166",
        transform=from_origin(300_000.0, 0.0, 10.0, 10.0),
        tiled=True,
        blockxsize=512,
        blockysize=512,
        compress="deflate",
        sparse_ok=True,
    )
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(np.ones((512, 512), np.uint8), 1, window=rasterio.windows.Window(0, 0, 512, 512))
    return path


def test_a_huge_raster_is_refused_from_its_header_before_any_cell_is_read(tmp_path, monkeypatch):
    path = _huge_sparse_geotiff(tmp_path / "huge.tif")
    assert path.stat().st_size < 1_000_000
    reads = []
    real_read = rasterio.io.DatasetReader.read
    monkeypatch.setattr(
        rasterio.io.DatasetReader, "read", lambda self, *a, **k: reads.append(1) or real_read(self, *a, **k)
    )
    for build in (
        lambda: PrivacyMap.from_population(path, epsilon_range=(1e-4, 1e-3)),
        lambda: PrivacyMap.from_epsilon(path),
    ):
        with pytest.raises(RasterError, match="20000 x 20000") as exc:
            build()
        assert "Resample" in str(exc.value) and "max_cells" in str(exc.value)
    assert reads == []  # refused before decoding


def test_max_cells_is_the_limit_and_can_be_raised(tmp_path):
    path = _write(tmp_path / "small.tif", np.ones((6, 8)))
    with pytest.raises(RasterError, match="6 = 48 cells|8 x 6"):
        PrivacyMap.from_population(path, epsilon_range=(1e-4, 1e-3), max_cells=47)
    assert PrivacyMap.from_population(path, epsilon_range=(1e-4, 1e-3), max_cells=48).shape == (6, 8)
    assert PrivacyMap.from_population(path, epsilon_range=(1e-4, 1e-3), max_cells=None).shape == (6, 8)
    with pytest.raises(ValueError, match="max_cells"):
        PrivacyMap.from_population(path, epsilon_range=(1e-4, 1e-3), max_cells=0)
