"""Utility metrics for any release: how far did the points move, in ground metres.

* :func:`displacement`: per-row geodesic distance (metres, on the CRS's ellipsoid) between a
  true point and its released version, matched by index label.
* :func:`utility_report`: mean, median, alpha (the radius containing a share ``quantile`` of the
  displacements, default 90 %: the accuracy measure of Andrés et al. and Chatzikokolakis et
  al., who write it alpha(delta)), mean squared error (m^2) and RMSE.  ``quantile`` is a share
  of the points, not a privacy parameter: it has nothing to do with the delta of
  (epsilon, delta)-differential privacy (the old keyword ``delta=`` is deprecated).
* :func:`wasserstein`: Wasserstein-1 (earth mover's) distance in metres between two point
  sets, solved exactly by the POT optimal-transport library (``pip install geopriv[metrics]``).
"""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
from pyproj import CRS, Transformer

from .defaults import DEFAULT_QUANTILE  # re-exported
from .exceptions import CRSError, Fix, GeoprivError, ParameterError, ParameterTypeError
from .points import as_geoseries, point_xy

__all__ = ["displacement", "utility_report", "wasserstein", "wasserstein_bound", "ground_distance", "is_synthetic"]


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
    """Ground distance in metres from each true point to its released version, matched by index label.

    Parameters
    ----------
    true, released : GeoDataFrame or GeoSeries of points
        The data and its release, in any CRSs with a datum (``released`` is reprojected to
        ``true``'s CRS).  Every label of ``true`` must be in ``released``.

    Returns
    -------
    Series
        ``displacement_m``: geodesic distance on ``true``'s ellipsoid, indexed like ``true``.

    Raises
    ------
    GeoprivError
        ``released`` is a synthetic point set (:func:`synthesize`: its rows are nobody's), or a label of
        ``true`` is not in ``released`` (the error names the labels).
    CRSError
        A CRS has no datum (ground distances cannot be measured).

    See Also
    --------
    utility_report : Statistics of these distances (mean, median, alpha, RMSE).
    wasserstein : A distance between point sets, without matching rows.

    Examples
    --------
    >>> true = gpd.GeoDataFrame(geometry=gpd.points_from_xy([440000, 440100, 440200], [4420000] * 3),
    ...                         crs="EPSG:32650")
    >>> geopriv.displacement(true, true.translate(30, 40)).round(1)   # 50 m on the map: 50 m on the ground
    0    50.0
    1    50.0
    2    50.0
    Name: displacement_m, dtype: float64
    """
    _refuse_synthetic(released)
    a, b = _aligned(true, released)
    xy_a = point_xy(a, "true data")
    xy_b = point_xy(b, "released data")
    return pd.Series(ground_distance(a, xy_a, xy_b), index=a.index, name="displacement_m")


def is_synthetic(record) -> bool:
    """Whether a release record (``attrs["geopriv"]``, or the one read from a file) is a synthetic point set.

    Synthetic points (:func:`geopriv.synthesize`) belong to nobody: the i-th synthetic point is
    not the i-th person's, so displacements between them mean nothing.
    """
    return isinstance(record, dict) and "n_people" in record


def _refuse_synthetic(released) -> None:
    if is_synthetic(getattr(released, "attrs", {}).get("geopriv")):
        raise GeoprivError(
            "The released points are a synthetic set (made by synthesize): they are nobody's, so no row of it is the "
            "release of a row of the true data, and displacements between them mean nothing.",
            fix=Fix(
                "compare_distributions",
                python="Compare the two point sets as distributions: geopriv.wasserstein(true, released) (metres; "
                "geopriv.wasserstein_bound for large sets).",
                cli="Compare the two point sets as distributions: add --wasserstein (metres).",
                qgis="Compare the two layers as distributions (e.g. counts per zone, or distances to a "
                "facility), not feature by feature.",
            ),
        )


def _check_quantile(quantile) -> float:
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float, np.integer, np.floating)):
        raise ParameterTypeError(f"quantile must be a number strictly between 0 and 1, got {type(quantile).__name__}.")
    quantile = float(quantile)
    if not 0 < quantile < 1:
        raise ParameterError(
            "quantile must be strictly between 0 and 1 (e.g. 0.9: alpha is the radius containing "
            "90 % of the displacements)."
        )
    return quantile


def _renamed_delta(quantile, delta, stacklevel: int):
    """``quantile``, or the deprecated ``delta=`` (its old name) with a FutureWarning."""
    if delta is None:
        return quantile
    import warnings

    warnings.warn(
        "utility_report(delta=...) is deprecated and will be removed in the next release: use quantile=... "
        "(the share of displacements alpha contains, e.g. 0.9; not the delta of (epsilon, delta)-privacy).",
        FutureWarning,
        stacklevel=stacklevel,
    )
    if quantile != DEFAULT_QUANTILE:
        raise ParameterTypeError("Give quantile= only (delta= is its deprecated name), not both.")
    return delta


def utility_report(true, released, quantile: float = DEFAULT_QUANTILE, *, delta: float | None = None) -> pd.Series:
    """Displacement statistics in ground metres: n, mean, median, alpha, max, MSE (m^2), RMSE.

    Parameters
    ----------
    true, released : GeoDataFrame or GeoSeries of points
        The data and its release, rows matched by index label (as :func:`displacement`).
    quantile : float in (0, 1)
        The share of the displacements within alpha, the radius containing this share of the displacements:
        with 0.9 (default), 90 % of the points moved less than ``alpha_0.9_m`` metres.  The accuracy measure
        "alpha(delta)" of the geo-indistinguishability papers; a share of points, unrelated
        to the delta of (epsilon, delta)-differential privacy.
    delta : float, deprecated
        The old name of ``quantile``: still accepted for one release, with a FutureWarning.

    Returns
    -------
    Series
        ``n``, ``mean_m``, ``median_m``, ``alpha_<quantile>_m`` (e.g. ``alpha_0.9_m``: the radius
        containing 90 % of the displacements), ``max_m``, ``mse_m2`` (mean squared
        displacement, square metres) and ``rmse_m``.

    Raises
    ------
    ParameterError
        ``quantile`` is not strictly between 0 and 1.
    ParameterTypeError
        ``quantile`` is not a number, or both ``quantile`` and ``delta`` are given.
    GeoprivError
        As :func:`displacement`: a synthetic release, or labels of ``true`` missing from ``released``.

    See Also
    --------
    displacement : The per-row distances behind the statistics.
    wasserstein : A distance between point sets, without matching rows.

    Examples
    --------
    >>> homes = gpd.GeoDataFrame(geometry=gpd.points_from_xy([440000, 440100, 440200], [4420000] * 3),
    ...                          crs="EPSG:32650")
    >>> released = geopriv.perturb(homes, level=math.log(4), radius=200, rng=1)
    >>> report = geopriv.utility_report(homes, released)
    >>> list(report.index)
    ['n', 'mean_m', 'median_m', 'alpha_0.9_m', 'max_m', 'mse_m2', 'rmse_m']
    >>> int(report["n"]), bool(report["median_m"] <= report["alpha_0.9_m"] <= report["max_m"])
    (3, True)
    >>> float(geopriv.utility_report(homes, homes.translate(30, 40), quantile=0.5)["alpha_0.5_m"].round(1))   # median
    50.0
    """
    quantile = _renamed_delta(quantile, delta, stacklevel=3)
    quantile = _check_quantile(quantile)
    d = displacement(true, released).to_numpy()
    mse = float(np.mean(d**2))
    return pd.Series(
        {
            "n": int(d.size),
            "mean_m": float(d.mean()),
            "median_m": float(np.median(d)),
            f"alpha_{quantile:g}_m": float(np.quantile(d, quantile)),
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

    Parameters
    ----------
    a : GeoDataFrame or GeoSeries of points
        The first point set (e.g. the true points), in any CRS with a datum.
    b : GeoDataFrame or GeoSeries of points
        The second point set (e.g. a release or a synthetic set), any size; reprojected to ``a``'s CRS.
    max_points : int, default 20000
        The largest set size accepted (the cost matrix takes len(a) x len(b) x 8 bytes).

    Returns
    -------
    float
        The mean distance in metres each point must travel, in the cheapest plan, to turn one set
        into the other.

    Raises
    ------
    ParameterError
        A set has more than ``max_points`` points.
    ImportError
        POT is not installed (``pip install 'geopriv[metrics]'``).

    See Also
    --------
    wasserstein_bound : An upper bound for sets of any size.
    displacement : Row by row distances, when rows are matched.

    Examples
    --------
    >>> a = gpd.GeoDataFrame(geometry=gpd.points_from_xy([440000, 440100, 440200], [4420000] * 3),
    ...                      crs="EPSG:32650")
    >>> round(geopriv.wasserstein(a, a.translate(30, 40)), 1)   # every point 50 m away
    50.0
    >>> round(geopriv.wasserstein(a, a.iloc[[0, 0, 2]]), 1)   # a third of the mass moves 100 m
    33.3
    """
    try:
        import ot
    except ImportError:  # pragma: no cover - exercised only without the extra
        from .exceptions import MissingDependencyError

        raise MissingDependencyError(
            "wasserstein() needs the POT library, which is not installed.",
            package="ot",
            extra="metrics",
            pip_name="pot",
        ) from None
    ga = as_geoseries(a, "first point set")
    gb = as_geoseries(b, "second point set")
    if len(ga) > max_points or len(gb) > max_points:
        raise ParameterError(
            f"wasserstein() builds a {len(ga)} x {len(gb)} cost matrix; that is over max_points={max_points}.",
            fix=Fix(
                "subsample",
                python="Subsample both sets (gdf.sample(n)) or use geopriv.wasserstein_bound, or raise "
                "max_points if you have the memory.",
                cli="The command line then reports wasserstein_bound_m, an upper bound.",
                qgis="",
            ),
        )
    wa, wb = _local_metric(ga, gb)
    cost = ot.dist(wa, wb, metric="euclidean")
    return float(ot.emd2(np.full(len(wa), 1.0 / len(wa)), np.full(len(wb), 1.0 / len(wb)), cost, numItermax=10_000_000))


def _local_metric(ga, gb):
    """Both point sets in one local azimuthal equidistant frame centred on them (metres)."""
    from .crs import as_crs, local_aeqd

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
    return w[: len(xa)], w[len(xa) :]


def wasserstein_bound(a, b, *, cells: int = 4000) -> float:
    """An upper bound (metres) on the Wasserstein-1 distance between two point sets of any size.

    Both sets are put in one local equidistant frame (as in :func:`wasserstein`); the square
    holding both is cut into cells along a Hilbert curve, as finely as keeps at most ``cells``
    non-empty cells.  Each point moves to its own set's centroid in its cell (the mean distance
    of that move is exact), and the two centroid measures are matched exactly by POT.  By the
    triangle inequality the sum bounds W1 from above; it is close when cells are small against
    W1 (exact when both sets have fewer distinct cells than ``cells``).  O((len(a) + len(b)) log) plus one ``cells`` x
    ``cells`` transport problem: millions of points in seconds.

    Parameters
    ----------
    a : GeoDataFrame or GeoSeries of points
        The first point set, in any CRS with a datum.
    b : GeoDataFrame or GeoSeries of points
        The second point set, any size; reprojected to ``a``'s CRS.
    cells : int, default 4000
        The most non-empty cells: more is a tighter bound and a larger transport problem.

    Returns
    -------
    float
        An upper bound, in metres, on :func:`wasserstein` of ``a`` and ``b``.

    Raises
    ------
    ImportError
        POT is not installed (``pip install 'geopriv[metrics]'``).

    See Also
    --------
    wasserstein : The exact distance, for sets up to 20,000 points.

    Examples
    --------
    >>> a = gpd.GeoDataFrame(geometry=gpd.points_from_xy([440000, 440100, 440200], [4420000] * 3),
    ...                      crs="EPSG:32650")
    >>> b = a.iloc[[0, 0, 2]]
    >>> bound = geopriv.wasserstein_bound(a, b)
    >>> bool(bound >= geopriv.wasserstein(a, b) - 1e-9), round(bound, 1)   # few cells: exact
    (True, 33.3)
    """
    try:
        import ot
    except ImportError:  # pragma: no cover - exercised only without the extra
        from .exceptions import MissingDependencyError

        raise MissingDependencyError(
            "wasserstein_bound() needs the POT library, which is not installed.",
            package="ot",
            extra="metrics",
            pip_name="pot",
        ) from None
    from .mechanisms.private_measure import leaf_keys

    ga = as_geoseries(a, "first point set")
    gb = as_geoseries(b, "second point set")
    wa, wb = _local_metric(ga, gb)
    both = np.vstack([wa, wb])
    lo = both.min(axis=0)
    side = float(np.max(both.max(axis=0) - lo)) or 1.0
    ua, ub = (wa - lo) / side, (wb - lo) / side
    depth = 2
    for d in range(2, 49, 2):
        if len(np.union1d(leaf_keys(ua, d), leaf_keys(ub, d))) > cells:
            break
        depth = d
    ka, kb = leaf_keys(ua, depth), leaf_keys(ub, depth)

    def centroids(keys, w):
        nodes, inv, count = np.unique(keys, return_inverse=True, return_counts=True)
        cx = np.bincount(inv, weights=w[:, 0]) / count
        cy = np.bincount(inv, weights=w[:, 1]) / count
        move = float(np.hypot(w[:, 0] - cx[inv], w[:, 1] - cy[inv]).mean())
        return np.column_stack([cx, cy]), count / len(keys), move

    ca, ma, move_a = centroids(ka, wa)
    cb, mb, move_b = centroids(kb, wb)
    cost = ot.dist(ca, cb, metric="euclidean")
    return move_a + move_b + float(ot.emd2(ma, mb, cost, numItermax=10_000_000))
