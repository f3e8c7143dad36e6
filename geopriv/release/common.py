"""What every release kind shares: the input checks, the declared area, the pipelined draw and the assembly of the output."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from geopandas.array import GeometryArray
from pyproj import Transformer

from ..crs import as_crs
from ..exceptions import CRSError, MissingCRSError, ParameterError
from ..frame import (
    REGION_CRS_FIX,
    area_diameter_metres,
    area_of_use_bounds,
    declare_area_fix,
    declared_bounds,
    proj_errors,
)
from ..points import as_geoseries, check_coordinates, check_no_other_geometries, point_xy
from ..progress import progress_callback
from ..provenance import attach

CHUNK = 1_000_000
COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3


def check_release_input(data, keep=(), bounds=None, region=None, allow_order=(), attributes=True):
    """Validate the points and what a release returns beside them; returns (GeoSeries, (n, 2) xy).

    Before anything is projected: a geographic or projected CRS, finite points within its valid
    range (longitude/latitude in range; no longitude/latitude degrees labelled as a projected CRS
    whose area of use is far from its origin, nor such ``bounds=``), see
    :func:`geopriv.points.check_coordinates`; a ``region=`` in another CRS must be
    transformable into the data's (PROJ errors become :class:`~geopriv.exceptions.CRSError`);
    no location-bearing attributes and no row order, index or column that puts the rows in
    spatial order (:mod:`geopriv.attributes`), except the public ordering columns ``allow_order``.
    """
    from ..attributes import check_location_attributes

    geoms = as_geoseries(data)
    check_no_other_geometries(data)
    xy = point_xy(geoms)
    check_coordinates(xy, geoms.crs, geoms.index, bounds=bounds)
    if isinstance(region, (gpd.GeoSeries, gpd.GeoDataFrame)) and region.crs is not None:
        if not as_crs(region.crs).equals(geoms.crs):
            with proj_errors(
                geoms.crs,
                f"relate the region's CRS {as_crs(region.crs).name!r} to the data's CRS",
                detail=True,
                fix=REGION_CRS_FIX,
            ):
                Transformer.from_crs(region.crs, geoms.crs, always_xy=True)
    if attributes:
        check_location_attributes(data, keep=tuple(keep or ()), allow_order=tuple(allow_order))
    return geoms, xy


def region_geometry(region, crs):
    if region is None:
        return None
    if isinstance(region, shapely.Geometry):
        geom = region
    else:
        if region.crs is None:
            raise MissingCRSError("The region")
        geom = region.to_crs(crs).union_all()
    if geom.is_empty or geom.area <= 0:
        raise ParameterError("region must be a polygon with positive area (it is the area outputs are kept in).")
    shapely.prepare(geom)
    return geom


def truncate_to_region(xy, region, lattice):
    """Remap outputs outside the region to the nearest lattice node inside it (post-processing)."""
    inside = shapely.contains_xy(region, xy[:, 0], xy[:, 1])
    if inside.all():
        return xy
    out = xy.copy()
    idx = np.flatnonzero(~inside)
    pts = shapely.points(xy[idx])
    nearest = shapely.get_coordinates(shapely.shortest_line(pts, region))[1::2]
    if lattice is None:
        out[idx] = nearest
        return out
    if lattice.kind != "planar":
        out[idx] = lattice.snap(nearest)
        return out
    step = lattice.step
    offs = np.array([(i, j) for i in range(-3, 4) for j in range(-3, 4)], dtype=float) * step
    base = lattice.snap(nearest)
    cand = base[:, None, :] + offs[None, :, :]
    ok = shapely.contains_xy(region, cand[..., 0], cand[..., 1])
    d = np.hypot(cand[..., 0] - xy[idx, None, 0], cand[..., 1] - xy[idx, None, 1])
    d[~ok] = np.inf
    best = d.argmin(axis=1)
    if not np.isfinite(d[np.arange(len(idx)), best]).all():
        raise ParameterError(
            "The region is too thin for the grid: no grid node inside it near its boundary. Use a finer grid."
        )
    out[idx] = cand[np.arange(len(idx)), best]
    return out


def declared_diameter(crs, bounds, region):
    """The declared study area's diameter in ground metres (bounds=, else region='s box), or None (public)."""
    area = declared_bounds(crs, bounds, region)
    return None if area is None else area_diameter_metres(crs, area)


def answered(data, geoms, *columns) -> tuple:
    """What a release reads, for binding a seed to it: the points (index, geometries, CRS) and the named columns.

    :meth:`geopriv.rng.RandomSource.bind` hashes them; ``None`` and names that are not columns are skipped.
    """
    names = [c for c in columns if c is not None and hasattr(data, "columns") and c in data.columns]
    return (geoms, *(data[c] for c in names))


def pipelined(n, draw, finish, progress):
    """Release rows chunk by chunk, sampling the next chunk in a worker thread.

    numpy's generators and ufuncs release the GIL, so sampling overlaps with building the point
    geometries.  Chunks are sampled in order from the one generator, so seeded output does not
    depend on thread timing.
    """
    # a small first chunk: nothing overlaps its sampling, so keep the wait for it short
    first = min(n, CHUNK, max(50_000, n // 32))
    bounds = [(0, first)] + [(a, min(n, a + CHUNK)) for a in range(first, n, CHUNK)]
    callback, bar = progress_callback(progress, n)
    geometries = np.empty(n, dtype=object)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(draw, *bounds[0])
            for i, (a, b) in enumerate(bounds):
                out = pending.result()
                if i + 1 < len(bounds):
                    pending = pool.submit(draw, *bounds[i + 1])
                try:
                    finish(out, geometries[a:b])
                    if callback is not None:
                        callback(b, n)
                except BaseException:
                    pending.cancel()
                    raise
    finally:
        if bar is not None:
            bar.close()
    return geometries


def assemble(data, geoms, released, record):
    """New object like ``data`` with geometry replaced by ``released`` and provenance attached.

    ``released`` is an (n, 2) array of coordinates or an array of shapely points (or None).
    """
    if isinstance(released, np.ndarray) and released.dtype != object:
        released = shapely.points(released)
    new_geoms = gpd.GeoSeries(GeometryArray(released, crs=geoms.crs), index=geoms.index, name=geoms.name, copy=False)
    if isinstance(data, gpd.GeoSeries):
        return attach(new_geoms, data, record)
    name = geoms.name
    if COPY_ON_WRITE:
        out = data.copy(deep=False)
        out[name] = new_geoms
    else:
        rest = data.drop(columns=[name]).copy()
        rest.insert(data.columns.get_loc(name), name, new_geoms)
        out = gpd.GeoDataFrame(rest, geometry=name, crs=geoms.crs)
    return attach(out, data, record)


def public_area(crs, bounds=None, region=None):
    """(rectangle, source) of a release's public area: declared ``bounds=``, the bounding box of
    ``region=``, or the CRS's area of use; never the data.  Refused when none exists."""
    crs = as_crs(crs)
    rect = declared_bounds(crs, bounds, region)
    if rect is not None:
        return rect, "bounds" if bounds is not None else "region"
    rect = area_of_use_bounds(crs)
    if rect is None:
        raise CRSError(
            f"{crs.name} has no area of use (or it crosses the antimeridian), so the release has no public area.",
            fix=declare_area_fix(),
        )
    return rect, "area_of_use"


def check_region_holds_lattice(region, lattice):
    """Public check, before any noise: every boundary point has a lattice node inside within 3 steps.

    Otherwise truncation could fail after noise was drawn (and a rerun would spend epsilon again).
    """
    if lattice.kind != "planar":
        return
    boundary = region.boundary
    n = int(min(max(boundary.length / lattice.step, 8), 20_000))
    pts = shapely.get_coordinates(shapely.line_interpolate_point(boundary, np.linspace(0, 1, n), normalized=True))
    offs = np.array([(i, j) for i in range(-3, 4) for j in range(-3, 4)], dtype=float) * lattice.step
    cand = lattice.snap(pts)[:, None, :] + offs[None, :, :]
    ok = shapely.contains_xy(region, cand[..., 0], cand[..., 1]).any(axis=1)
    if not ok.all():
        raise ParameterError(
            "The region is too thin for the grid: parts of it hold no lattice node. Use a finer grid or a wider region."
        )
