"""What every release kind shares: the input checks, the declared area, the pipelined draw and the assembly of the output.

Who checks what (one owner per check):

* a plan (``plan_<kind>``) checks every *parameter* before any row is read: the CRS's kind and
  declared ``bounds=`` in its units, and that a ``region=`` relates to the data's CRS
  (:func:`check_release_parameters`, here, called by the plans), then its own parameters; the
  public frame, lattice and grid-against-area checks are :func:`geopriv.frame.public_grid`'s,
  epsilon's and the noise scale's :mod:`geopriv.precision`'s;
* this module checks the *data* against a plan, in the plan's run: :func:`check_release_input`
  (points, coordinates, other geometries, location-bearing attributes) and
  :func:`check_unique_persons` (declared person ids; :mod:`geopriv.keys` only provides the
  digests and the uniqueness test over one array);
* the frame checks that the rows lie in its public area (:meth:`geopriv.frame.PublicFrame.check_inside`),
  a mechanism with its own domain checks it itself.
"""

from __future__ import annotations

import contextlib

from concurrent.futures import ThreadPoolExecutor

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from geopandas.array import GeometryArray
from pyproj import Transformer

from ..crs import as_crs
from ..daskhook import is_dask
from ..exceptions import CRSError, GeoprivError, MissingCRSError, ParameterError
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
from .base import input_crs

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
    check_region_crs(region, geoms.crs)
    if attributes:
        check_location_attributes(data, keep=tuple(keep or ()), allow_order=tuple(allow_order))
    return geoms, xy


def check_region_crs(region, crs) -> None:
    """Refuse a ``region=`` GeoSeries/GeoDataFrame whose CRS PROJ cannot relate to ``crs`` (a :class:`CRSError`)."""
    if isinstance(region, (gpd.GeoSeries, gpd.GeoDataFrame)) and region.crs is not None:
        if not as_crs(region.crs).equals(crs):
            with proj_errors(
                crs,
                f"relate the region's CRS {as_crs(region.crs).name!r} to the data's CRS",
                detail=True,
                fix=REGION_CRS_FIX,
            ):
                Transformer.from_crs(region.crs, crs, always_xy=True)


def check_release_parameters(crs, bounds=None, region=None):
    """The parameter checks every point plan makes first, before its own: returns ``crs`` as a pyproj CRS.

    The CRS must be geographic or projected, declared ``bounds=`` must be in its units (not
    longitude/latitude degrees labelled as a CRS far from its origin), and a ``region=`` must
    relate to it; the same checks as :func:`check_release_input` makes of the data's CRS, made
    here without a row (:func:`geopriv.points.check_coordinates` of no points).
    """
    crs = as_crs(crs)
    check_coordinates(np.empty((0, 2)), crs, pd.Index([]), bounds=bounds)
    check_region_crs(region, crs)
    return crs


def plan_crs(data):
    """The CRS a plan for ``data`` (a GeoDataFrame, a GeoSeries or their dask forms) is built in.

    :func:`geopriv.release.base.input_crs`; a dask frame without a CRS is named as such.
    """
    if is_dask(data) and getattr(data, "crs", None) is None:
        raise MissingCRSError("The dask GeoDataFrame")
    return input_crs(data)


def check_unique_persons(data, person) -> None:
    """Refuse repeated ids in the ``person`` column (named by row label): each row is one person.

    The identity rules of a lazy release (:mod:`geopriv.keys`), checked on the whole frame in
    memory when ``person=`` is given without a budget store (a store charges every row, so a
    person may then have several).
    """
    from ..keys import check_unique, fold_digests, identity_digests, row_identities

    ids, labels = row_identities(data, person)
    check_unique(fold_digests(*identity_digests(ids, "person id", labels)), labels)


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


class DataCRS:
    """The data's CRS for a plan that reads it only after its row-free checks (``called`` says whether it has)."""

    def __init__(self, read):
        self.read, self.called = read, False

    def __call__(self):
        self.called = True
        return self.read()


@contextlib.contextmanager
def data_errors_first(data, check, after: DataCRS | None = None):
    """Build a plan for in-memory ``data``: if a parameter is refused, the data's own error wins, if it has one.

    A plan checks its parameters before any row is read, and its run checks the data; when
    both are wrong, the user is told about the data first (as the release path always did: a
    wrong CRS label explains a "wrong" ``bounds=``).  ``check(data)`` is the run's own first
    check; it runs only when the plan refused, so a valid release checks its rows once.  With
    ``after``, a plan's refusals before it read the data's CRS (its row-free checks) come first.
    """
    try:
        yield
    except GeoprivError:
        if is_dask(data) or (after is not None and not after.called):  # a lazy release checks rows when computed
            raise
        try:
            check(data)
        except GeoprivError as data_error:
            raise data_error from None
        raise
