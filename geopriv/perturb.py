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
import pandas as pd
import shapely
from geopandas.array import GeometryArray

from .exceptions import MissingCRSError
from ._points import as_geoseries, check_no_other_geometries, point_xy
from .crs import DEFAULT_MAX_DISTORTION, metric_frame
from .mechanisms.planar_laplace import ANGLE_RESOLUTION, PlanarLaplace, check_epsilon, discretisation_epsilon, polar_noise
from .provenance import attach, make_record
from .rng import make_rng

__all__ = ["perturb", "resolve_epsilon"]

CHUNK = 1_000_000
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3


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
    gen = source.generator

    step = None
    if grid is not None:
        grid = check_epsilon(grid, "grid (metres)")
        step = frame.metres_to_work(grid)
    region_work = _region_in_work(region, frame) if region is not None else None

    work = frame.to_work(xy)
    n = len(work)

    # The finite-precision bound is checked before any noise is drawn.
    effective = eps
    finite_precision = None
    if step is not None and region_work is not None:
        # r_max: farthest any input can be from a point of the region (bounding-box corners: conservative)
        rxmin, rymin, rxmax, rymax = region_work.bounds
        far_x = np.maximum(np.abs(work[:, 0] - rxmin), np.abs(work[:, 0] - rxmax)).max()
        far_y = np.maximum(np.abs(work[:, 1] - rymin), np.abs(work[:, 1] - rymax)).max()
        eff_work = discretisation_epsilon(eps_work, step, math.hypot(far_x, far_y), ANGLE_RESOLUTION)
        effective = eff_work * frame.scale_max  # per working unit -> per ground metre
        finite_precision = True
    elif step is not None:
        finite_precision = False

    def release_chunk(chunk_xy, noise, out_geoms):
        out = chunk_xy + noise
        if step is not None:
            out = _snap(out, step)
        if region_work is not None:
            out = _truncate(out, region_work, step)
        out = frame.from_work(out)
        shapely.points(out, out=out_geoms)

    geometries = _pipelined(work, lambda m: polar_noise(m, mech.epsilon, gen), release_chunk, progress)
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
    return _assemble(data, geoms, geometries, record)


def _pipelined(work, draw_noise, release_chunk, progress):
    """Release ``work`` chunk by chunk, drawing the next chunk's noise in a worker thread.

    numpy's generators and ufuncs release the GIL, so drawing noise overlaps with building the
    point geometries (which holds it).  Chunks are drawn in order from the one generator, so
    seeded output does not depend on thread timing.
    """
    from concurrent.futures import ThreadPoolExecutor

    n = len(work)
    bounds = [(a, min(n, a + CHUNK)) for a in range(0, n, CHUNK)]
    callback, bar = _progress_callback(progress, n)
    geometries = np.empty(n, dtype=object)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(draw_noise, bounds[0][1] - bounds[0][0])
            for i, (a, b) in enumerate(bounds):
                noise = pending.result()
                if i + 1 < len(bounds):
                    pending = pool.submit(draw_noise, bounds[i + 1][1] - bounds[i + 1][0])
                release_chunk(work[a:b], noise, geometries[a:b])
                if callback is not None:
                    callback(b, n)
    finally:
        if bar is not None:
            bar.close()
    return geometries


def _assemble(data, geoms, released, record):
    """New object like ``data`` with geometry replaced by ``released`` and provenance attached.

    ``released`` is an (n, 2) array of coordinates or an array of shapely points.
    """
    if isinstance(released, np.ndarray) and released.dtype != object:
        released = shapely.points(released)
    new_geoms = gpd.GeoSeries(GeometryArray(released, crs=geoms.crs), index=geoms.index, name=geoms.name, copy=False)
    if isinstance(data, gpd.GeoSeries):
        return attach(new_geoms, data, record)
    name = geoms.name
    if _COPY_ON_WRITE:
        # pandas >= 3: a shallow copy is copy-on-write, so the input can never be modified through it
        out = data.copy(deep=False)
        out[name] = new_geoms
    else:
        # copy every column but the old geometry (deep-copying 10 M geometries costs seconds),
        # then put the new geometry where the old one was
        rest = data.drop(columns=[name]).copy()
        rest.insert(data.columns.get_loc(name), name, new_geoms)
        out = gpd.GeoDataFrame(rest, geometry=name, crs=geoms.crs)
    return attach(out, data, record)
