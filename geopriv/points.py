"""Validation of point inputs shared by every mechanism.

Errors name row labels, never coordinates, and say how to fix the input.
"""
from __future__ import annotations

import math

import geopandas as gpd
import numpy as np
import shapely

from .crs import as_crs
from .exceptions import CRSError, EmptyInputError, GeometryError, GeoprivError, MissingCRSError, ParameterTypeError

__all__ = ["as_geoseries", "point_xy", "check_no_other_geometries", "check_crs_kind", "check_coordinates"]

#: longitude/latitude degrees (0..360 longitudes included) read as projected units lie in this box
_DEGREES_AS_UNITS = (-360.0, -90.0, 360.0, 90.0)

_REPROJECT = (
    "reproject the data to EPSG:4326 (longitude/latitude) or a projected CRS in metres, "
    "e.g. gdf.to_crs(gdf.estimate_utm_crs())"
)


def as_geoseries(data, what: str = "data") -> gpd.GeoSeries:
    """The active geometry of a GeoDataFrame, or the GeoSeries itself; checks the CRS."""
    if isinstance(data, gpd.GeoDataFrame):
        try:
            geoms = data.geometry
        except AttributeError:
            raise GeoprivError(
                f"{what} has no active geometry column. Call gdf.set_geometry('column') first."
            ) from None
    elif isinstance(data, gpd.GeoSeries):
        geoms = data
    else:
        raise ParameterTypeError(
            f"{what} must be a GeoDataFrame or GeoSeries, got {type(data).__name__}. "
            "Build one with geopandas.GeoDataFrame(df, geometry=geopandas.points_from_xy(x, y), crs=...)."
        )
    if geoms.crs is None:
        raise MissingCRSError(f"The {what}")
    return geoms


def check_no_other_geometries(data, what: str = "data") -> None:
    """Refuse GeoDataFrames that carry extra geometry columns: they would leak true locations."""
    if not isinstance(data, gpd.GeoDataFrame):
        return
    active = data.geometry.name
    others = [c for c in data.columns if c != active and isinstance(data[c].dtype, gpd.array.GeometryDtype)]
    if others:
        raise GeoprivError(
            f"{what} has other geometry column(s) {others} that would be released unperturbed next to the "
            f"perturbed '{active}'. Drop them (gdf.drop(columns={others!r})) or release each one separately."
        )


def point_xy(geoms: gpd.GeoSeries, what: str = "data") -> np.ndarray:
    """(n, 2) float array of the points' x, y; clear errors for anything that is not a finite point."""
    n = len(geoms)
    if n == 0:
        raise EmptyInputError(f"{what} has no rows: there is nothing to release.")
    arr = geoms.values._data if hasattr(geoms.values, "_data") else np.asarray(geoms.values)
    index = geoms.index
    tid = shapely.get_type_id(arr)
    if (tid != 0).any():
        missing = tid == -1
        if missing.any():
            raise GeometryError(
                "have no geometry (None)", index[missing],
                "Drop them (gdf[gdf.geometry.notna()]) or fill them before releasing.",
            )
        multi = tid == 4
        if multi.any():
            raise GeometryError(
                "are MultiPoints", index[multi],
                "Each part is a location of its own and spends its own budget: split them with "
                "gdf.explode(index_parts=True) and release the parts, or keep one representative point per row.",
            )
        other = tid != 0
        raise GeometryError(
            "are not points (lines, polygons, ...)", index[other],
            "geopriv releases point locations. Use gdf.representative_point() or the centroid if that is "
            "what you mean to protect, or drop those rows.",
        )
    coords = shapely.get_coordinates(arr)
    if len(coords) != n:
        empty = shapely.is_empty(arr)
        raise GeometryError(
            "are empty points", index[empty],
            "Drop them (gdf[~gdf.is_empty]) before releasing.",
        )
    bad = ~np.isfinite(coords).all(axis=1)
    if bad.any():
        raise GeometryError(
            "have NaN or infinite coordinates", index[bad],
            "Fix or drop them before releasing.",
        )
    return coords


# ---------------------------------------------------------------------------- CRS and coordinate range
def check_crs_kind(crs, what: str = "data"):
    """The CRS as a pyproj CRS if it maps points to a plane or to longitude/latitude; CRSError otherwise.

    geopriv releases 2-D horizontal positions: the CRS must be geographic (longitude/latitude,
    2-D or 3-D) or projected (easting/northing; a compound CRS with such a horizontal part is
    fine).  Geocentric CRSs (x, y, z from the Earth's centre, e.g. EPSG:4978), vertical,
    engineering and other CRSs are refused with a fix; nothing is projected before that.
    """
    crs = as_crs(crs)
    if crs.is_geocentric:
        raise CRSError(
            f"The {what}'s CRS {crs.name!r} is geocentric: x, y, z from the Earth's centre, not a position on a map, "
            "and geopriv releases 2-D points (x, y), so it cannot measure ground metres from them. Convert the x, y, z "
            "coordinates to longitude/latitude first (e.g. pyproj.Transformer.from_crs('EPSG:4978', 'EPSG:4979', "
            "always_xy=True).transform(x, y, z)) and set EPSG:4326, or " + _REPROJECT + "."
        )
    if not (crs.is_geographic or crs.is_projected):
        kind = crs.type_name or "unknown kind"
        raise CRSError(
            f"The {what}'s CRS {crs.name!r} ({kind}) is neither geographic (longitude/latitude) nor projected "
            "(easting/northing), so its x, y cannot be related to ground metres. If the points are really in another "
            "CRS, set it with gdf.set_crs(<that CRS>, allow_override=True); otherwise " + _REPROJECT + "."
        )
    return crs


def _axis_turn(crs) -> tuple[float, float]:
    """(largest |longitude|, largest |latitude|) of a geographic CRS in its own angular unit."""
    lon_unit = lat_unit = math.pi / 180.0
    for axis in crs.axis_info[:2]:
        factor = float(axis.unit_conversion_factor or 0.0)  # radians per unit
        if not (factor > 0 and math.isfinite(factor)):
            continue
        if axis.direction in ("east", "west"):
            lon_unit = factor
        elif axis.direction in ("north", "south"):
            lat_unit = factor
    return math.pi / lon_unit, (math.pi / 2) / lat_unit


def check_coordinates(xy: np.ndarray, crs, labels, *, bounds=None, what: str = "data") -> None:
    """Refuse coordinates that cannot be in ``crs``, before anything is projected.

    * the CRS must be geographic or projected (:func:`check_crs_kind`);
    * geographic: longitude within -180..180 and latitude within -90..90 (in the CRS's angular
      unit), which catches metres labelled EPSG:4326, swapped axes and 0..360 longitudes;
    * projected, with an area of use (:func:`geopriv.frame.area_of_use_bounds`) far from the
      CRS's origin (UTM zones, most national grids): points within a few hundred units of the
      origin (|x| <= 360, |y| <= 90) are longitude/latitude degrees labelled with the wrong CRS,
      hundreds of kilometres outside the area of use, and are refused with that hint; so are
      declared ``bounds=`` in that box.  Other points outside the area of use are left to the
      release's public-area check (:meth:`geopriv.frame.PublicFrame.check_inside`), which a
      declared study area may extend beyond the area of use.

    Errors name row labels (``labels``) and the CRS, never coordinates, and say how to fix it.
    """
    crs = check_crs_kind(crs, what)
    labels = labels if labels is not None else np.arange(len(xy))
    x, y = xy[:, 0], xy[:, 1]
    if crs.is_geographic:
        lon_max, lat_max = _axis_turn(crs)
        # a hair of tolerance: coordinates computed by a reprojection may overshoot 180 by an ulp or so
        bad_lon = np.abs(x) > lon_max * (1 + 1e-12)
        bad_lat = np.abs(y) > lat_max * (1 + 1e-12)
        bad = bad_lon | bad_lat
        if not bad.any():
            return
        deg = abs(lon_max - 180.0) < 1e-9
        rng = ("longitude -180..180, latitude -90..90 degrees" if deg
               else f"longitude -{lon_max:g}..{lon_max:g}, latitude -{lat_max:g}..{lat_max:g} in its angular unit")
        bx, by = x[bad], y[bad]
        hints = []
        if (np.maximum(np.abs(bx), np.abs(by)) > 4 * lon_max).any():
            hints.append(
                "They look like metres (or feet) of a projected CRS labelled as longitude/latitude: the CRS label is "
                "wrong. Set the CRS they are really in with gdf.set_crs(<EPSG code, e.g. the UTM zone>, "
                "allow_override=True); do not use to_crs, which would convert them as if they were degrees."
            )
        swapped = (np.abs(by) <= lon_max) & (np.abs(bx) <= lat_max)
        if swapped.all():
            hints.append(
                "Swapping x and y would put them in range: if latitude was given as x, swap them with "
                "gdf.set_geometry(geopandas.points_from_xy(gdf.geometry.y, gdf.geometry.x, crs=gdf.crs))."
            )
        wrapped = (bx > lon_max) & (bx <= 2 * lon_max) & (np.abs(by) <= lat_max)
        if wrapped.all():
            hints.append(
                "If longitudes run 0..360, wrap them to -180..180: "
                "geopandas.points_from_xy((gdf.geometry.x + 180) % 360 - 180, gdf.geometry.y, crs=gdf.crs)."
            )
        if not hints:
            hints.append(
                "Check that the coordinates are longitude (x) and latitude (y) in degrees; if they are not, set the CRS "
                "they are really in with gdf.set_crs(..., allow_override=True), or fix or drop those rows."
            )
        raise GeometryError(f"are outside the valid range of {crs.name} ({rng})", labels[bad], " ".join(hints))
    if not crs.is_projected:  # pragma: no cover - check_crs_kind allows only these two
        return
    from .frame import area_of_use_bounds, declared_bounds

    area = area_of_use_bounds(crs)
    if area is None:  # no area of use (custom CRS) or one across the antimeridian: PROJ checks later
        return
    ax0, ay0, ax1, ay1 = area
    dx0, dy0, dx1, dy1 = _DEGREES_AS_UNITS
    if not (ax0 > dx1 or ax1 < dx0 or ay0 > dy1 or ay1 < dy0):
        return  # the CRS is defined near its origin: degrees there could be real coordinates
    # the area of use is far from the origin: longitude/latitude degrees read as CRS units land
    # within a few hundred units of it, hundreds of kilometres outside the area of use
    fix = (
        f"the CRS label is probably wrong. If they are longitude/latitude, set "
        "gdf.set_crs('EPSG:4326', allow_override=True) (not to_crs), then release (with bounds= in degrees); "
        f"if they are really {crs.name} coordinates, they lie far outside its area of use: reproject to a CRS made "
        "for the place or fix those rows."
    )
    if bounds is not None:
        b = declared_bounds(crs, bounds, None)
        if b[0] >= dx0 and b[2] <= dx1 and b[1] >= dy0 and b[3] <= dy1:
            raise CRSError(
                f"The declared bounds= are within a few hundred units of the origin of {crs.name}, like "
                "longitude/latitude degrees, far from the CRS's area of use: give bounds= in the data's CRS units, or, "
                "if the data are longitude/latitude too, " + fix
            )
    degrees = (x >= dx0) & (x <= dx1) & (y >= dy0) & (y <= dy1)
    if degrees.any():
        raise GeometryError(
            f"lie within a few hundred units of the origin of {crs.name}, like longitude/latitude degrees, far outside "
            "the CRS's area of use", labels[degrees], "They do not look like coordinates in this CRS: " + fix,
        )
