"""Utility metrics for any release: how far did the points move, in ground metres.

* :func:`displacement`: per-row geodesic distance (metres, on the CRS's ellipsoid) between a
  true point and its released version, matched by index label.
* :func:`utility_report`: mean, median, alpha(delta) (the delta-quantile of displacement, the
  accuracy measure of Andrés et al. and Chatzikokolakis et al.; default delta = 0.9), mean
  squared error (m^2) and RMSE.
* :func:`wasserstein`: Wasserstein-1 (earth mover's) distance in metres between two point
  sets, solved exactly by the POT optimal-transport library (``pip install geopriv[metrics]``).
"""
from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
from pyproj import CRS, Transformer

from ._points import as_geoseries, point_xy
from .exceptions import CRSError, GeoprivError

__all__ = ["displacement", "utility_report", "wasserstein", "ground_distance"]


def _lonlat(geoms: gpd.GeoSeries, xy: np.ndarray):
    crs = CRS.from_user_input(geoms.crs)
    geodetic = crs.geodetic_crs
    if geodetic is None:
        raise CRSError(f"The CRS {crs.name!r} has no datum; ground distances cannot be measured. Reproject first.")
    lonlat = Transformer.from_crs(crs, geodetic, always_xy=True).transform(xy[:, 0], xy[:, 1])
    return np.asarray(lonlat[0]), np.asarray(lonlat[1]), geodetic.get_geod()


def ground_distance(geoms_a: gpd.GeoSeries, xy_a: np.ndarray, xy_b: np.ndarray) -> np.ndarray:
    """Geodesic distance in metres between rows of two (n, 2) arrays in ``geoms_a``'s CRS."""
    lon_a, lat_a, geod = _lonlat(geoms_a, xy_a)
    lon_b, lat_b, _ = _lonlat(geoms_a, xy_b)
    _, _, dist = geod.inv(lon_a, lat_a, lon_b, lat_b)
    return np.asarray(dist, dtype=float)


def _aligned(true, released):
    a = as_geoseries(true, "true data")
    b = as_geoseries(released, "released data")
    if not CRS.from_user_input(a.crs).equals(CRS.from_user_input(b.crs)):
        b = b.to_crs(a.crs)
    if not a.index.equals(b.index):
        if not a.index.is_unique or not b.index.is_unique:
            raise GeoprivError("The true and released data have different, non-unique indexes; rows cannot be matched.")
        missing = a.index.difference(b.index)
        if len(missing):
            from .exceptions import format_labels

            raise GeoprivError(
                f"{len(missing)} true row(s) have no released counterpart: labels {format_labels(missing)}. "
                "Compare a release with the data it was made from (rows are matched by index label)."
            )
        b = b.loc[a.index]
    return a, b


def displacement(true, released) -> pd.Series:
    """Ground distance (metres) from each true point to its released version, by index label."""
    a, b = _aligned(true, released)
    xy_a = point_xy(a, "true data")
    xy_b = point_xy(b, "released data")
    return pd.Series(ground_distance(a, xy_a, xy_b), index=a.index, name="displacement_m")


def utility_report(true, released, delta: float = 0.9) -> pd.Series:
    """Displacement statistics in metres: n, mean, median, alpha(delta), max, MSE (m^2), RMSE."""
    if not 0 < delta < 1:
        raise ValueError("delta must be strictly between 0 and 1 (e.g. 0.9 for alpha(0.9)).")
    d = displacement(true, released).to_numpy()
    mse = float(np.mean(d**2))
    return pd.Series(
        {
            "n": int(d.size),
            "mean_m": float(d.mean()),
            "median_m": float(np.median(d)),
            f"alpha_{delta:g}_m": float(np.quantile(d, delta)),
            "max_m": float(d.max()),
            "mse_m2": mse,
            "rmse_m": float(np.sqrt(mse)),
        },
        name="utility",
    )


def wasserstein(a, b, *, max_points: int = 20_000) -> float:
    """Wasserstein-1 distance in metres between two point sets (uniform weights, any sizes).

    Both sets are put in one local azimuthal equidistant frame centred on them (an evaluation by
    the analyst, who holds the true points: nothing here is released), and the exact
    optimal transport problem is solved by POT's network simplex (``ot.emd2``).  The cost
    matrix is len(a) x len(b), so sets are limited to ``max_points`` each.
    """
    try:
        import ot
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("wasserstein() needs the POT library: pip install 'geopriv[metrics]' (or pip install pot).") from None
    from pyproj import Transformer

    from .crs import as_crs, local_aeqd

    ga = as_geoseries(a, "first point set")
    gb = as_geoseries(b, "second point set")
    if len(ga) > max_points or len(gb) > max_points:
        raise ValueError(
            f"wasserstein() builds a {len(ga)} x {len(gb)} cost matrix; that is over max_points={max_points}. "
            "Subsample both sets (gdf.sample(n)) or raise max_points if you have the memory."
        )
    gb = gb.to_crs(ga.crs) if not CRS.from_user_input(ga.crs).equals(CRS.from_user_input(gb.crs)) else gb
    xa = point_xy(ga, "first point set")
    xb = point_xy(gb, "second point set")
    crs = as_crs(ga.crs)
    to_geo = Transformer.from_crs(crs, crs.geodetic_crs, always_xy=True)
    lon, lat = to_geo.transform(*np.vstack([xa, xb]).T)
    lon0 = float(np.degrees(np.arctan2(np.sin(np.radians(lon)).mean(), np.cos(np.radians(lon)).mean())))
    work = local_aeqd(lon0, float((np.min(lat) + np.max(lat)) / 2), crs.geodetic_crs)
    wx, wy = Transformer.from_crs(crs.geodetic_crs, work, always_xy=True).transform(lon, lat)
    w = np.column_stack([wx, wy])
    wa, wb = w[: len(xa)], w[len(xa):]
    cost = ot.dist(wa, wb, metric="euclidean")
    return float(ot.emd2(np.full(len(wa), 1.0 / len(wa)), np.full(len(wb), 1.0 / len(wb)), cost, numItermax=10_000_000))
