import math

import geopandas as gpd
import numpy as np
import pytest
from shapely.geometry import Point

import geopriv
from geopriv.exceptions import GeoprivError


def test_displacement_is_ground_metres_in_any_crs(soho):
    moved = soho.copy()
    moved.geometry = soho.geometry.translate(100, 0)  # 100 Web Mercator units east
    d = geopriv.displacement(soho, moved)
    lat = math.radians(51.513)
    assert d.mean() == pytest.approx(100 * math.cos(lat), rel=3e-3)  # about 62 ground metres
    d2 = geopriv.displacement(soho.to_crs(4326), moved.to_crs(27700))
    assert np.allclose(d.to_numpy(), d2.to_numpy(), rtol=1e-4)  # OSGB36 datum shift


def test_report_fields_and_values():
    a = gpd.GeoSeries([Point(500_000, 5_000_000)] * 10, crs=32631)
    b = gpd.GeoSeries([Point(500_000 + float(i), 5_000_000) for i in range(10)], crs=32631)
    rep = geopriv.utility_report(a, b, quantile=0.9)
    assert rep["n"] == 10
    assert rep["mean_m"] == pytest.approx(4.5, rel=1e-3)
    assert rep["median_m"] == pytest.approx(4.5, rel=1e-3)
    assert rep["alpha_0.9_m"] == pytest.approx(np.quantile(np.arange(10), 0.9), rel=1e-3)
    assert rep["mse_m2"] == pytest.approx(np.mean(np.arange(10) ** 2), rel=2e-3)
    for bad in (0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="quantile must be strictly between 0 and 1"):
            geopriv.utility_report(a, b, quantile=bad)
    with pytest.raises(TypeError):
        geopriv.utility_report(a, b, quantile=True)


def test_quantile_is_not_called_delta():
    """The displacement quantile must not read as the delta of (epsilon, delta)-differential privacy."""
    import inspect

    params = inspect.signature(geopriv.utility_report).parameters
    assert list(params)[:3] == ["true", "released", "quantile"] and params["quantile"].default == 0.9
    doc = inspect.getdoc(geopriv.utility_report)
    assert "radius containing this share of the displacements" in doc and "(epsilon, delta)" in doc
    for method in (geopriv.accessor.PrivAccessor.utility_report, geopriv.accessor.PrivAccessor.displacement):
        doc = inspect.getdoc(method)
        assert "Parameters" in doc and "See Also" in doc


def test_deprecated_delta_keyword_still_works_for_one_release():
    a = gpd.GeoSeries([Point(500_000, 5_000_000)] * 10, crs=32631)
    b = gpd.GeoSeries([Point(500_000 + float(i), 5_000_000) for i in range(10)], crs=32631)
    new = geopriv.utility_report(a, b, quantile=0.5)
    with pytest.warns(FutureWarning, match="quantile") as record:
        old = geopriv.utility_report(a, b, delta=0.5)
    assert record[0].filename == __file__  # points at the caller
    assert old.equals(new) and "alpha_0.5_m" in old
    with pytest.warns(FutureWarning) as record:
        via_accessor = a.priv.utility_report(b, delta=0.5)
    assert via_accessor.equals(new) and record[0].filename == __file__
    with pytest.warns(FutureWarning), pytest.raises(TypeError, match="not both"):
        geopriv.utility_report(a, b, quantile=0.5, delta=0.5)
    assert a.priv.utility_report(b, 0.5).equals(new)  # positional, as before


def test_rows_matched_by_label_and_missing_labels_named():
    a = gpd.GeoSeries([Point(500_000, 5_000_000), Point(500_010, 5_000_000)], index=["x", "y"], crs=32631)
    b = gpd.GeoSeries([Point(500_010, 5_000_000), Point(500_000, 5_000_000)], index=["y", "x"], crs=32631)
    assert geopriv.displacement(a, b).max() < 1e-6
    c = gpd.GeoSeries([Point(500_000, 5_000_000)], index=["x"], crs=32631)
    with pytest.raises(GeoprivError, match="'y'"):
        geopriv.displacement(a, c)


def test_planar_laplace_utility_matches_theory(utm_points):
    eps = 0.01
    big = gpd.GeoDataFrame(geometry=np.resize(utm_points.geometry.values, 50_000), crs=32650)
    rep = geopriv.utility_report(big, geopriv.perturb(big, eps, rng=4))
    assert rep["mean_m"] == pytest.approx(2 / eps, rel=0.02)
    assert rep["mse_m2"] == pytest.approx(6 / eps**2, rel=0.03)
    assert rep["alpha_0.9_m"] == pytest.approx(geopriv.PlanarLaplace(eps).alpha(0.9), rel=0.02)


def test_wasserstein():
    a = gpd.GeoSeries([Point(500_000, 5_000_000), Point(500_100, 5_000_000)], crs=32631)
    b = gpd.GeoSeries([Point(500_100, 5_000_010), Point(500_000, 5_000_010)], crs=32631)
    assert geopriv.wasserstein(a, b) == pytest.approx(10, rel=1e-3)  # optimal matching, not by row
    c = gpd.GeoSeries([Point(500_000, 5_000_000)] * 3, crs=32631)
    d = gpd.GeoSeries([Point(500_030, 5_000_040)], crs=32631).to_crs(4326)  # other size, other CRS
    assert geopriv.wasserstein(c, d) == pytest.approx(50, rel=1e-3)
    with pytest.raises(ValueError, match="max_points"):
        geopriv.wasserstein(c, d, max_points=2)
