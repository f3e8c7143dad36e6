"""``geopriv.perturb``: release point locations with geo-indistinguishability.

This is the public function behind ``gdf.priv.perturb``.  It validates, chooses the metric
frame (:mod:`geopriv.crs`), draws noise with a mechanism from :mod:`geopriv.mechanisms`,
optionally discretises/truncates (Andrés et al. section 4), and returns a *new* object with
provenance in ``.attrs["geopriv"]``.
"""
from __future__ import annotations

import math

import geopandas as gpd
import numpy as np
import shapely

from .exceptions import MissingCRSError
from ._points import as_geoseries, check_no_other_geometries, point_xy
from .crs import DEFAULT_MAX_DISTORTION, metric_frame
from .mechanisms.planar_laplace import ANGLE_RESOLUTION, PlanarLaplace, check_epsilon, discretisation_epsilon
from .provenance import attach, make_record
from .rng import make_rng

__all__ = ["perturb", "resolve_epsilon"]

CHUNK = 1_000_000


def resolve_epsilon(epsilon=None, level=None, radius=None) -> float:
    """Epsilon per ground metre from ``epsilon`` or from ``level`` within ``radius`` metres.

    ``level=math.log(4), radius=200`` means: two locations 200 m apart are at most 4 times
    more or less likely to produce any output, i.e. epsilon = ln(4) / 200 per metre.
    """
    if epsilon is not None:
        if level is not None or radius is not None:
            raise ValueError("Give either epsilon (per metre) or level and radius (metres), not both.")
        return check_epsilon(epsilon)
    if level is None or radius is None:
        raise ValueError(
            "Say how much privacy: epsilon=<loss per metre>, or level=<loss> and radius=<metres> "
            "(e.g. level=math.log(4), radius=200 for 'ln 4 within 200 m')."
        )
    level = check_epsilon(level, "level")
    radius = check_epsilon(radius, "radius (metres)")
    return check_epsilon(level / radius, "level / radius")


def _progress_callback(progress, total):
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return progress, None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="pt", unit_scale=True, desc="perturb", disable=None)

    def update(done, total_):
        bar.n = done
        bar.refresh()

    return update, bar


def _snap(xy, step):
    return np.round(xy / step) * step


def _truncate(xy, region_work, step):
    """Remap outputs outside the region to the nearest grid node inside it (post-processing)."""
    inside = shapely.contains_xy(region_work, xy[:, 0], xy[:, 1])
    if inside.all():
        return xy
    out = xy.copy()
    idx = np.flatnonzero(~inside)
    pts = shapely.points(xy[idx])
    nearest = shapely.get_coordinates(shapely.shortest_line(pts, region_work))[1::2]
    if step is None:
        out[idx] = nearest
        return out
    # nearest grid node inside the region around the boundary point
    offs = np.array([(i, j) for i in range(-3, 4) for j in range(-3, 4)], dtype=float) * step
    base = _snap(nearest, step)
    cand = base[:, None, :] + offs[None, :, :]  # (m, 49, 2)
    ok = shapely.contains_xy(region_work, cand[..., 0], cand[..., 1])
    d = np.hypot(cand[..., 0] - xy[idx, None, 0], cand[..., 1] - xy[idx, None, 1])
    d[~ok] = np.inf
    best = d.argmin(axis=1)
    if not np.isfinite(d[np.arange(len(idx)), best]).all():
        raise ValueError("The region is too thin for the grid: no grid node inside it near its boundary. Use a finer grid.")
    out[idx] = cand[np.arange(len(idx)), best]
    return out


def _region_in_work(region, frame):
    if isinstance(region, shapely.Geometry):
        region = gpd.GeoSeries([region], crs=frame.input_crs)
    if not isinstance(region, (gpd.GeoDataFrame, gpd.GeoSeries)):
        raise TypeError("region must be a shapely (Multi)Polygon in the data's CRS, or a GeoSeries/GeoDataFrame with a CRS.")
    if region.crs is None:
        raise MissingCRSError("The region")
    geom = region.to_crs(frame.work_crs).union_all()
    if geom.is_empty or geom.area <= 0:
        raise ValueError("region must be a polygon with positive area (it is the area outputs are kept in).")
    shapely.prepare(geom)
    return geom


def perturb(
    data,
    epsilon=None,
    *,
    level=None,
    radius=None,
    mechanism=None,
    rng=None,
    grid=None,
    region=None,
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    progress=None,
):
    """Release point locations with geo-indistinguishability (planar Laplace noise).

    Each point gets independent noise with density proportional to exp(-epsilon * d), d the
    ground distance in metres, whatever the CRS (see :mod:`geopriv.crs`).

    Parameters
    ----------
    data : GeoDataFrame or GeoSeries of points
        Any CRS with a datum: projected (metres, feet, Web Mercator) or geographic.  Never
        modified.  Z coordinates are dropped (altitude is not protected by planar noise).
    epsilon : float, optional
        Privacy loss per ground metre.  Give this, or ``level`` and ``radius``.
    level, radius : float, optional
        Privacy ``level`` within ``radius`` metres: epsilon = level / radius.
    mechanism : object, optional
        A prebuilt mechanism with its own privacy definition (e.g. a location-dependent
        mechanism); then epsilon/level/radius must not be given.  It must provide
        ``perturb_points(geoseries, rng, progress)`` returning (released xy in the data's CRS,
        provenance dict).
    rng : None, int, SeedSequence or numpy Generator
        ``None`` (default) uses OS entropy.  A seed is for tests and demos only.
    grid : float, optional
        Release to a grid of this step (ground metres) and report the finite-precision
        effective epsilon (Andrés et al. section 4).  Best combined with ``region``.
    region : shapely Polygon (in the data's CRS) or GeoSeries/GeoDataFrame, optional
        Outputs falling outside are remapped to the nearest point (grid node) inside.
    max_distortion : float
        Largest relative CRS scale variation over the data accepted before working in a local
        equidistant frame instead of the input CRS.
    progress : None, True or callable(done, total)
        ``True`` shows a tqdm bar; a callable receives progress (used by the QGIS plugin).

    Returns
    -------
    GeoDataFrame or GeoSeries
        Same type, index, columns and CRS as ``data``; only the geometry is new.
        ``result.attrs["geopriv"]`` records the mechanism, epsilon per metre, the effective
        epsilon, the CRS handling, whether the noise was seeded, and the library version.

    Examples
    --------
    >>> import math, geopriv
    >>> out = geopriv.perturb(gdf, level=math.log(4), radius=200)   # doctest: +SKIP
    >>> out = gdf.priv.perturb(level=math.log(4), radius=200)       # the same  # doctest: +SKIP
    """
    geoms = as_geoseries(data)
    check_no_other_geometries(data)
    source = make_rng(rng)
    if mechanism is not None:
        if epsilon is not None or level is not None or radius is not None:
            raise ValueError("A prebuilt mechanism carries its own privacy level: do not also pass epsilon/level/radius.")
        if grid is not None or region is not None:
            raise ValueError("grid= and region= apply to planar Laplace only; the mechanism defines its own outputs.")
        xy = point_xy(geoms)
        released, record_fields = mechanism.perturb_points(geoms, xy, source.generator, progress)
        record = make_record(record_fields.pop("mechanism"), seeded=source.seeded, n=len(xy), **record_fields)
        return _assemble(data, geoms, released, record)

    eps = resolve_epsilon(epsilon, level, radius)
    xy = point_xy(geoms)
    frame = metric_frame(geoms.crs, (xy[:, 0].min(), xy[:, 1].min(), xy[:, 0].max(), xy[:, 1].max()), max_distortion=max_distortion)
    eps_work = frame.epsilon_to_work(eps)
    mech = PlanarLaplace(eps_work)

    step = None
    if grid is not None:
        grid = check_epsilon(grid, "grid (metres)")
        step = frame.metres_to_work(grid)
    region_work = _region_in_work(region, frame) if region is not None else None

    work = frame.to_work(xy)
    n = len(work)
    released = np.empty_like(work)
    callback, bar = _progress_callback(progress, n)
    gen = source.generator
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        released[start:stop] = mech.sample(work[start:stop], gen)
        if callback is not None:
            callback(stop, n)
    if bar is not None:
        bar.close()
    if step is not None:
        released = _snap(released, step)
    if region_work is not None:
        released = _truncate(released, region_work, step)

    effective = eps
    finite_precision = None
    if step is not None and region_work is not None:
        # r_max: farthest any input can be from a point of the region, in ground metres (conservative)
        rxmin, rymin, rxmax, rymax = region_work.bounds
        far_x = np.maximum(np.abs(work[:, 0] - rxmin), np.abs(work[:, 0] - rxmax)).max()
        far_y = np.maximum(np.abs(work[:, 1] - rymin), np.abs(work[:, 1] - rymax)).max()
        r_max_work = math.hypot(far_x, far_y)
        # in working units, then per ground metre (scale_max units per metre)
        eff_work = discretisation_epsilon(eps_work, step, r_max_work, ANGLE_RESOLUTION)
        effective = eff_work * frame.scale_max
        finite_precision = True
    elif step is not None:
        finite_precision = False

    released = frame.from_work(released)
    record = make_record(
        "planar_laplace",
        seeded=source.seeded,
        epsilon_per_m=eps,
        level=None if level is None else float(level),
        radius_m=None if radius is None else float(radius),
        effective_epsilon_per_m=float(effective),
        epsilon_per_work_unit=eps_work,
        grid_m=grid,
        region=region_work is not None,
        finite_precision_bound=finite_precision,
        n=n,
        **frame.describe(),
    )
    return _assemble(data, geoms, released, record)


def _assemble(data, geoms, released_xy, record):
    """New object like ``data`` with geometry replaced by ``released_xy`` and provenance attached."""
    new_geoms = gpd.GeoSeries(gpd.points_from_xy(released_xy[:, 0], released_xy[:, 1]), index=geoms.index, crs=geoms.crs, name=geoms.name)
    if isinstance(data, gpd.GeoSeries):
        out = new_geoms
    else:
        out = data.copy()
        out[geoms.name] = new_geoms
    return attach(out, data, record)
