import math

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from shapely.geometry import LineString, MultiPoint, Point, box

import geopriv
from geopriv.exceptions import EmptyInputError, GeometryError, GeoprivError

EPS = math.log(4) / 200


def test_output_is_a_new_frame_with_same_index_columns_crs(utm_points):
    gdf = utm_points.set_index("name")
    before = gdf.copy()
    out = geopriv.perturb(gdf, EPS, rng=1)
    assert out is not gdf
    assert out.index.equals(gdf.index)
    assert list(out.columns) == list(gdf.columns)
    assert out.crs == gdf.crs
    pd.testing.assert_series_equal(out["value"], gdf["value"])
    # input untouched, geometry objects included
    pd.testing.assert_frame_equal(gdf, before)
    assert gdf.geometry.geom_equals_exact(before.geometry, 0).all()
    # every point moved
    assert not out.geometry.geom_equals_exact(gdf.geometry, 1e-9).any()
    # changing the output does not reach the input
    out.loc[out.index[0], "value"] = -5
    assert gdf["value"].iloc[0] == 0


def test_accessor_is_the_function(utm_points):
    a = utm_points.priv.perturb(EPS, rng=5)
    b = geopriv.perturb(utm_points, EPS, rng=5)
    assert a.geometry.geom_equals_exact(b.geometry, 0).all()
    s = utm_points.geometry.priv.perturb(EPS, rng=5)
    assert isinstance(s, gpd.GeoSeries)
    assert s.geom_equals_exact(b.geometry, 0).all()


def test_level_radius_is_epsilon(utm_points):
    a = geopriv.perturb(utm_points, level=math.log(4), radius=200, rng=3)
    b = geopriv.perturb(utm_points, EPS, rng=3)
    # the same mechanism and guarantee; a seed is bound to the parameters as given (the record differs: level and
    # radius are recorded), so the two draw different noise (geopriv.rng.RandomSource.bind)
    assert a.attrs["geopriv"]["epsilon_per_m"] == pytest.approx(b.attrs["geopriv"]["epsilon_per_m"])
    assert a.attrs["geopriv"]["effective_epsilon_per_m"] == pytest.approx(b.attrs["geopriv"]["effective_epsilon_per_m"])
    rec = a.attrs["geopriv"]
    assert rec["level"] == pytest.approx(math.log(4)) and rec["radius_m"] == 200


def test_provenance(utm_points):
    out = geopriv.perturb(utm_points, EPS)
    rec = out.attrs["geopriv"]
    assert rec["mechanism"] == "planar_laplace"
    assert rec["epsilon_per_m"] == pytest.approx(EPS)
    assert EPS < rec["effective_epsilon_per_m"] < EPS * (1 + 1e-3)
    assert rec["grid_m"] == 1.0 and rec["lattice"] == "CRS origin"
    assert rec["seeded"] is False
    assert rec["geopriv_version"] == geopriv.__version__
    assert rec["n"] == len(utm_points)
    seeded = geopriv.perturb(utm_points, EPS, rng=12345).attrs["geopriv"]
    assert seeded["seeded"] is True
    assert "12345" not in repr(seeded)  # the seed would let anyone subtract the noise
    twice = geopriv.perturb(geopriv.perturb(utm_points, EPS, rng=1), EPS / 2, rng=2)
    assert len(twice.attrs["geopriv"]["previous"]) == 1


def test_seeded_is_reproducible_and_default_is_not(utm_points):
    a = geopriv.perturb(utm_points, EPS, rng=9)
    b = geopriv.perturb(utm_points, EPS, rng=9)
    c = geopriv.perturb(utm_points, EPS)
    d = geopriv.perturb(utm_points, EPS)
    assert a.geometry.geom_equals_exact(b.geometry, 0).all()
    assert not c.geometry.geom_equals_exact(d.geometry, 0).any()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(epsilon=0),
        dict(epsilon=-0.1),
        dict(epsilon=float("nan")),
        dict(epsilon=float("inf")),
        dict(level=1.0),
        dict(radius=100),
        dict(level=0, radius=100),
        dict(level=1, radius=0),
        dict(epsilon=0.1, level=1, radius=10),
        dict(),
    ],
)
def test_bad_privacy_parameters_are_value_errors(utm_points, kwargs):
    with pytest.raises(ValueError):
        geopriv.perturb(utm_points, **kwargs)


def _bad_frame():
    geoms = [
        Point(448_100.123, 4_416_200.456),
        None,
        Point(),
        Point(np.nan, 1.0),
        Point(np.inf, 1.0),
        LineString([(0, 0), (1, 1)]),
        MultiPoint([(448_000.5, 4_416_000.5), (448_001.5, 4_416_001.5)]),
    ]
    return gpd.GeoDataFrame(
        {"v": range(len(geoms))},
        geometry=geoms,
        crs=32650,
        index=["ok", "none", "empty", "nan", "inf", "line", "multi"],
    )


@pytest.mark.parametrize(
    "keep,label,match",
    [
        (["ok", "none"], "none", "no geometry"),
        (["ok", "empty"], "empty", "empty"),
        (["ok", "nan"], "nan", "NaN or infinite"),
        (["ok", "inf"], "inf", "NaN or infinite"),
        (["ok", "line"], "line", "not points"),
        (["ok", "multi"], "multi", "explode"),
    ],
)
def test_bad_geometries_name_labels_not_coordinates(keep, label, match):
    gdf = _bad_frame().loc[keep]
    with pytest.raises(GeometryError, match=match) as info:
        geopriv.perturb(gdf, EPS)
    msg = str(info.value)
    assert repr(label) in msg and "'ok'" not in msg
    for coord in ("448100", "4416200", "448000", "448001"):
        assert coord not in msg
    assert info.value.labels == [label]


def test_empty_input():
    with pytest.raises(EmptyInputError):
        geopriv.perturb(gpd.GeoDataFrame(geometry=[], crs=32650), EPS)


def test_extra_geometry_columns_refused(utm_points):
    gdf = utm_points.copy()
    gdf["home"] = gdf.geometry
    with pytest.raises(GeoprivError, match="home"):
        geopriv.perturb(gdf, EPS)


def test_not_a_geodataframe():
    with pytest.raises(TypeError, match="GeoDataFrame"):
        geopriv.perturb(pd.DataFrame({"x": [1]}), EPS)


def test_z_is_dropped(utm_points):
    gdf = utm_points.copy()
    gdf.geometry = gpd.points_from_xy(gdf.geometry.x, gdf.geometry.y, np.full(len(gdf), 50.0), crs=32650)
    out = geopriv.perturb(gdf, EPS, rng=1)
    assert not out.geometry.has_z.any()


def test_progress_callback_reports_completion(utm_points):
    calls = []
    geopriv.perturb(utm_points, EPS, rng=1, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (len(utm_points), len(utm_points))


def test_grid_release_snaps_and_reports_effective_epsilon(utm_points):
    region = box(447_000, 4_415_000, 454_000, 4_422_000)
    out = geopriv.perturb(utm_points, EPS, rng=1, grid=10, region=region)
    xy = shapely.get_coordinates(out.geometry.values)
    step = geopriv.public_frame(32650).scale_min * 10  # public: the CRS's smallest scale over its area of use
    assert np.allclose(xy / step, np.round(xy / step), rtol=0, atol=1e-6)
    assert shapely.contains_xy(region, xy[:, 0], xy[:, 1]).all()
    rec = out.attrs["geopriv"]
    assert rec["grid_m"] == 10 and rec["region"] and "Thm 4.1" in rec["finite_precision"]
    assert EPS < rec["effective_epsilon_per_m"] < EPS * (1 + 1e-6)


def test_truncation_keeps_outputs_in_a_small_region(utm_points):
    # a region smaller than the noise: many outputs must be remapped into it
    region = gpd.GeoSeries([box(449_000, 4_417_000, 451_000, 4_419_000)], crs=32650).to_crs(4326)
    out = geopriv.perturb(utm_points, EPS / 5, rng=2, grid=25, region=region)
    xy = shapely.get_coordinates(out.geometry.values)
    assert shapely.contains_xy(region.to_crs(32650).union_all(), xy[:, 0], xy[:, 1]).all()


def test_region_must_have_area(utm_points):
    with pytest.raises(ValueError, match="positive area"):
        geopriv.perturb(utm_points, EPS, region=Point(448_000, 4_416_000))


def test_empirical_privacy_between_neighbouring_inputs():
    """Histogram ratios of outputs from two inputs d apart stay within exp(eps d).

    200,000 releases per input, 2-D bins of 40 m, bins with >= 400 counts in both.  Each bin's
    log ratio has standard error about sqrt(1/c1 + 1/c2) <= 0.071; the tolerance is 4.5 of those
    (false-failure rate < 1e-3 over the ~150 bins).  Negative control: releases made with 1.6 x
    epsilon (too little noise) must exceed the bound in some bin.
    """
    n = 200_000
    eps = 1 / 100  # per metre
    d = 100.0
    pts = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(
            np.r_[np.full(n, 450_000.0), np.full(n, 450_000.0 + d)], np.full(2 * n, 4_418_000.0)
        ),
        crs=32650,
    )

    def max_excess(out_eps, seed):
        out = geopriv.perturb(pts, out_eps, rng=seed)
        xy = shapely.get_coordinates(out.geometry.values)
        edges = (np.arange(449_700, 450_401, 40), np.arange(4_417_650, 4_418_351, 40))
        h1, _, _ = np.histogram2d(xy[:n, 0], xy[:n, 1], bins=edges)
        h2, _, _ = np.histogram2d(xy[n:, 0], xy[n:, 1], bins=edges)
        ok = (h1 >= 400) & (h2 >= 400)
        assert ok.sum() > 50
        lr = np.abs(np.log(h1[ok] / h2[ok]))
        se = np.sqrt(1 / h1[ok] + 1 / h2[ok])
        return np.max(lr - eps * d - 4.5 * se)

    assert max_excess(eps, 31) <= 0
    assert max_excess(eps * 1.6, 31) > 0


# ---------------------------------------------------------------------------- zone CRSs beyond their area of use
def _around(crs, lon, lat, n=200, spread=0.2, seed=11, prefix="p"):
    """``n`` points in random order around (lon, lat) degrees, in ``crs``, labelled prefix0, prefix1..."""
    rng = np.random.default_rng(seed)
    pts = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(lon + rng.uniform(-spread, spread, n), lat + rng.uniform(-spread, spread, n)),
        crs=4326,
    )
    return pts.set_axis([f"{prefix}{i}" for i in range(n)]).to_crs(crs)


def test_etrs89_utm32_points_in_eastern_germany_release_without_bounds():
    """ETRS89 / UTM 32N (EPSG:25832) holds all of Germany; its EPSG area of use stops at 12 E.  Around 14.5 E the
    scale is still within 1 %: released, epsilon converted with the largest scale over the whole scale band."""
    pts = _around(25832, 14.5, 51.0)
    out = pts.priv.perturb(epsilon=EPS, rng=1)
    rec = out.attrs["geopriv"]
    frame = geopriv.public_frame(25832)
    assert len(out) == len(pts) and out.index.equals(pts.index)
    assert rec["frame"] == "planar" and rec["frame_area"] == "crs_scale_band" and rec["declared_bounds"] is None
    assert rec["public_area"] == list(frame.area) and rec["epsilon_per_work_unit"] == pytest.approx(
        EPS / frame.scale_max
    )
    assert frame.scale_max > 1.009  # the band's edge, not the scale around 14.5 E (about 1.003)
    moved = out.distance(pts)
    assert 0 < moved.median() < 20 * 2 / EPS  # noise, not a copy and not a far-away point


def test_utm50_points_across_the_beijing_data_range_release():
    """GeoLife's Beijing fixes span 110.7-122.7 E; UTM 50N's area of use is 114-120 E.  Points at 110.9 E and
    122.5 E release without bounds=, their outputs inside the public band."""
    pts = pd.concat(
        [
            _around(32650, 110.9, 40.0, n=100, spread=0.05, prefix="w"),
            _around(32650, 122.5, 40.0, n=100, spread=0.05, seed=12, prefix="e"),
        ]
    )
    pts = pts.sample(frac=1.0, random_state=3).reset_index(drop=True)  # labels that do not sort west from east
    out = pts.priv.perturb(epsilon=EPS, rng=2)
    assert len(out) == 200 and out.attrs["geopriv"]["frame_area"] == "crs_scale_band"
    xmin, ymin, xmax, ymax = geopriv.public_frame(32650).area
    assert out.geometry.x.between(xmin, xmax).all() and out.geometry.y.between(ymin, ymax).all()
    assert out.distance(pts).median() < 20 * 2 / EPS


def test_points_far_from_the_central_meridian_are_refused_by_label_only():
    """30 degrees east of UTM 50N's meridian the scale is about 13 % off: that row alone is refused, by its label,
    without its coordinates; the rows at 110.9 E are not named."""
    pts = pd.concat(
        [
            _around(32650, 116.4, 40.0, n=50),
            _around(32650, 110.9, 40.0, n=5, spread=0.01, prefix="w"),
            _around(32650, 147.0, 40.0, n=1, spread=0.0, prefix="far"),
        ]
    )
    labels = [f"r{i}" for i in np.random.default_rng(4).permutation(len(pts))]  # labels in no spatial order
    far = labels[-1]
    pts = pts.set_axis(labels).sample(frac=1.0, random_state=4)
    with pytest.raises(
        GeometryError, match=r"^1 row\(s\) lie outside the public domain of WGS 84 / UTM zone 50N"
    ) as info:
        pts.priv.perturb(epsilon=EPS, rng=1)
    msg = str(info.value)
    assert info.value.labels == [far] and f"'{far}'" in msg and "max_distortion" in msg and "bounds=" in msg
    x, y = pts.geometry.loc[far].x, pts.geometry.loc[far].y
    for v in (x, y):
        assert f"{v:.0f}"[:4] not in msg and f"{v / 1000:.0f}"[:4] not in msg


def test_a_mechanism_missing_part_of_the_contract_is_refused_by_name(utm_points):
    """mechanisms.base.PointMechanism is checked when a mechanism is passed in (issue 30)."""
    import geopriv
    from geopriv.mechanisms.base import PointMechanism, check_mechanism

    class Half:
        frame_policy = "metric"

        def release(self, xy, frame, rng, labels=None):
            return xy

    with pytest.raises(TypeError, match="lacks describe, finite_precision, grid_epsilon_per_m"):
        geopriv.perturb(utm_points, mechanism=Half())
    mech = geopriv.PlanarLaplace  # a class of the wrong kind (no frame_policy)
    with pytest.raises(TypeError, match="PointMechanism"):
        check_mechanism(mech(1.0), PointMechanism)


def test_a_region_taken_from_the_data_is_refused(utm_points):
    """perturb(region=box(*total_bounds)) would publish the data's extent through truncation (review finding)."""
    import shapely

    import geopriv
    from geopriv.exceptions import GeoprivError

    for region in (shapely.box(*utm_points.total_bounds), utm_points.union_all().convex_hull):
        with pytest.raises(GeoprivError, match="computed from the data"):
            geopriv.perturb(utm_points, epsilon=0.01, region=region)
    x0, y0, x1, y1 = utm_points.total_bounds
    out = geopriv.perturb(utm_points, epsilon=0.01, region=shapely.box(x0 - 500, y0 - 500, x1 + 500, y1 + 500))
    assert len(out) == len(utm_points)  # negative control: a region from outside the data
