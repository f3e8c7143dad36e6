"""Validation of point inputs shared by every mechanism.

Errors name row labels, never coordinates, and say how to fix the input.
"""

from __future__ import annotations

import math

import geopandas as gpd
import numpy as np
import shapely

from .crs import as_crs
from .exceptions import CRSError, EmptyInputError, Fix, GeometryError, GeoprivError, MissingCRSError, ParameterTypeError

__all__ = [
    "as_geoseries",
    "point_xy",
    "check_no_other_geometries",
    "check_crs_kind",
    "check_coordinates",
    "relabel_crs_fix",
    "WIDE_AREA_M",
]

#: longitude/latitude degrees (0..360 longitudes included) read as projected units lie in this box
_DEGREES_AS_UNITS = (-360.0, -90.0, 360.0, 90.0)
#: a projected CRS whose area of use is at least this wide (ground metres) is not made for data that all lie in
#: the box above: such data are degrees under the wrong CRS label (Web Mercator, continental and world CRSs)
WIDE_AREA_M = 1_000_000.0

_REPROJECT = (
    "reproject the data to EPSG:4326 (longitude/latitude) or a projected CRS in metres, "
    "e.g. gdf.to_crs(gdf.estimate_utm_crs())"
)
#: the same, for the command line and QGIS (reprojecting is not a geopriv option there)
_REPROJECT_CLI = (
    "reproject the file to EPSG:4326 (longitude/latitude) or a projected CRS in metres first, e.g. "
    "ogr2ogr -t_srs EPSG:4326 OUT IN"
)
_REPROJECT_QGIS = (
    "reproject the layer to EPSG:4326 (longitude/latitude) or a projected CRS in metres first ('Reproject layer')"
)
#: what a row label is on the command line (files read by geopriv.io) and in QGIS
_CLI_LABELS = "The labels are row numbers, from 0."
_QGIS_LABELS = "In QGIS, the labels are feature ids."


def _rows_fix(kind: str, python: str, cli: str, qgis: str) -> Fix:
    """A fix for rows named by label: each front end is told what its labels are."""
    return Fix(kind, python=python, cli=f"{_CLI_LABELS} {cli}", qgis=f"{_QGIS_LABELS} {qgis}")


def relabel_crs_fix(lead: str, really: str = "<EPSG code, e.g. of the UTM zone>") -> Fix:
    """Coordinates labelled with the wrong CRS: declare the CRS they are really in (``really``), without converting them.

    ``lead`` (what the coordinates look like) starts every front end's text.
    """
    return Fix(
        "set_crs",
        python=f"{lead} Set the CRS they are really in with gdf.set_crs({really if really.startswith('<') else repr(really)}, "
        "allow_override=True), not to_crs "
        "(which would convert them as if the wrong CRS were right).",
        cli=f"{lead} Give the CRS they are really in with --crs {really}, which replaces the file's CRS without "
        "converting the coordinates.",
        qgis=f"{lead} Assign the layer the CRS they are really in with 'Assign projection' (not 'Reproject "
        "layer', which would convert them).",
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
            f"perturbed '{active}'.",
            fix=Fix(
                "drop_columns",
                python=f"Drop them (gdf.drop(columns={others!r})) or release each one separately.",
                cli="Drop them with --drop " + " ".join(map(str, others)) + ", or release each one separately.",
                qgis="Remove them, or release each one separately.",
            ),
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
                "have no geometry (None)",
                index[missing],
                _rows_fix(
                    "drop_rows",
                    python="Drop them (gdf[gdf.geometry.notna()]) or fill them before releasing.",
                    cli="Remove those rows from the file or give them a location.",
                    qgis="The 'Remove null geometries' algorithm drops features without geometry.",
                ),
            )
        multi = tid == 4
        if multi.any():
            raise GeometryError(
                "are MultiPoints (each part is a location of its own and spends its own budget)",
                index[multi],
                _rows_fix(
                    "explode",
                    python="Split them with gdf.explode(index_parts=True) and release the parts, or keep "
                    "one representative point per row.",
                    cli="Split them into single points first (e.g. ogr2ogr -explodecollections OUT IN), or keep one "
                    "point per row.",
                    qgis="Split them with the 'Multipart to singleparts' algorithm, or keep one point per feature.",
                ),
            )
        other = tid != 0
        raise GeometryError(
            "are not points (lines, polygons, ...), and geopriv releases point locations",
            index[other],
            _rows_fix(
                "to_points",
                python="Use gdf.representative_point() or the centroid if that is what you mean to "
                "protect, or drop those rows.",
                cli="Turn them into points first (a point on each, or its centroid, e.g. with ogr2ogr or QGIS) if that "
                "is what you mean to protect, or remove those rows.",
                qgis="The 'Point on surface' or 'Centroids' algorithm turns them into points, if that is what you mean "
                "to protect.",
            ),
        )
    coords = shapely.get_coordinates(arr)
    if len(coords) != n:
        empty = shapely.is_empty(arr)
        raise GeometryError(
            "are empty points",
            index[empty],
            _rows_fix(
                "drop_rows",
                python="Drop them (gdf[~gdf.is_empty]) before releasing.",
                cli="Remove those rows from the file or give them a location.",
                qgis="Remove those features or give them a location.",
            ),
        )
    if not np.isfinite(coords).all():  # the per-row mask only when something is wrong
        bad = ~np.isfinite(coords).all(axis=1)
        raise GeometryError(
            "have NaN or infinite coordinates",
            index[bad],
            _rows_fix(
                "drop_rows",
                python="Fix or drop them before releasing.",
                cli="Fix or remove those rows.",
                qgis="Fix or remove those features.",
            ),
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
            "and geopriv releases 2-D points (x, y), so it cannot measure ground metres from them.",
            fix=Fix(
                "reproject",
                python="Convert the x, y, z coordinates to longitude/latitude first (e.g. pyproj.Transformer."
                "from_crs('EPSG:4978', 'EPSG:4979', always_xy=True).transform(x, y, z)) and set EPSG:4326, "
                "or " + _REPROJECT + ".",
                cli=_REPROJECT_CLI[:1].upper() + _REPROJECT_CLI[1:] + ".",
                qgis=_REPROJECT_QGIS[:1].upper() + _REPROJECT_QGIS[1:] + ".",
            ),
        )
    if not (crs.is_geographic or crs.is_projected):
        kind = crs.type_name or "unknown kind"
        raise CRSError(
            f"The {what}'s CRS {crs.name!r} ({kind}) is neither geographic (longitude/latitude) nor projected "
            "(easting/northing), so its x, y cannot be related to ground metres.",
            fix=Fix(
                "set_crs",
                python="If the points are really in another CRS, set it with gdf.set_crs(<that CRS>, "
                "allow_override=True); otherwise " + _REPROJECT + ".",
                cli="If the points are really in another CRS, give it with --crs; otherwise " + _REPROJECT_CLI + ".",
                qgis="If the points are really in another CRS, assign it ('Assign projection'); "
                "otherwise " + _REPROJECT_QGIS + ".",
            ),
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
        _check_geographic(x, y, crs, labels)
        return
    if not crs.is_projected:  # pragma: no cover - check_crs_kind allows only these two
        return
    _check_projected(x, y, crs, labels, bounds)


def _check_geographic(x: np.ndarray, y: np.ndarray, crs, labels) -> None:
    """Longitude and latitude within range (in the CRS's angular unit); the error says what the rows look like."""
    lon_max, lat_max = _axis_turn(crs)
    # a hair of tolerance: coordinates computed by a reprojection may overshoot 180 by an ulp or so
    bad_lon = np.abs(x) > lon_max * (1 + 1e-12)
    bad_lat = np.abs(y) > lat_max * (1 + 1e-12)
    bad = bad_lon | bad_lat
    if not bad.any():
        return
    deg = abs(lon_max - 180.0) < 1e-9
    rng = (
        "longitude -180..180, latitude -90..90 degrees"
        if deg
        else f"longitude -{lon_max:g}..{lon_max:g}, latitude -{lat_max:g}..{lat_max:g} in its angular unit"
    )
    fixes = _out_of_range_fixes(x[bad], y[bad], lon_max, lat_max)
    raise GeometryError(f"are outside the valid range of {crs.name} ({rng})", labels[bad], Fix.join(*fixes))


def _out_of_range_fixes(bx: np.ndarray, by: np.ndarray, lon_max: float, lat_max: float) -> list[Fix]:
    """The likely causes of out-of-range longitude/latitude: metres under a wrong label, swapped axes, 0..360."""
    fixes = []
    if (np.maximum(np.abs(bx), np.abs(by)) > 4 * lon_max).any():
        fixes.append(
            relabel_crs_fix(
                "They look like metres (or feet) of a projected CRS labelled as "
                "longitude/latitude: the CRS label is wrong."
            )
        )
    swapped = (np.abs(by) <= lon_max) & (np.abs(bx) <= lat_max)
    if swapped.all():
        fixes.append(
            Fix(
                "swap_xy",
                python="Swapping x and y would put them in range: if latitude was given as x, swap them with "
                "gdf.set_geometry(geopandas.points_from_xy(gdf.geometry.y, gdf.geometry.x, crs=gdf.crs)).",
                cli="Swapping x and y would put them in range: if latitude was given as x, swap them in the file (for "
                "a CSV: --xy with the latitude column second).",
                qgis="Swapping x and y would put them in range: if latitude was given as x, swap them (e.g. the "
                "'Swap X and Y coordinates' algorithm).",
            )
        )
    wrapped = (bx > lon_max) & (bx <= 2 * lon_max) & (np.abs(by) <= lat_max)
    if wrapped.all():
        fixes.append(
            Fix(
                "wrap_longitude",
                python="If longitudes run 0..360, wrap them to -180..180: "
                "geopandas.points_from_xy((gdf.geometry.x + 180) % 360 - 180, gdf.geometry.y, crs=gdf.crs).",
                cli="If longitudes run 0..360, wrap them to -180..180 in the file first.",
                qgis="If longitudes run 0..360, wrap them to -180..180 first (e.g. 'Geometry by expression').",
            )
        )
    if not fixes:
        fixes.append(
            relabel_crs_fix(
                "Check that the coordinates are longitude (x) and latitude (y) in degrees "
                "(else fix or remove those rows).",
                "<the CRS they are in>",
            )
        )
    return fixes


def _check_projected(x: np.ndarray, y: np.ndarray, crs, labels, bounds) -> None:
    """Longitude/latitude degrees under a projected CRS's label: near the origin of a CRS made for elsewhere.

    Two cases by where the CRS's area of use lies: near its origin (degrees could be real
    coordinates, unless every point is there and the area spans thousands of kilometres), or far
    from it (points, or declared bounds, within the degrees box are refused).
    """
    from .frame import area_of_use_bounds

    area = area_of_use_bounds(crs)
    if area is None:  # no area of use (custom CRS) or one across the antimeridian: PROJ checks later
        return
    ax0, ay0, ax1, ay1 = area
    dx0, dy0, dx1, dy1 = _DEGREES_AS_UNITS
    degrees = (x >= dx0) & (x <= dx1) & (y >= dy0) & (y <= dy1)
    as_degrees = relabel_crs_fix("If they are longitude/latitude degrees, the CRS label is wrong.", "EPSG:4326")
    if not (ax0 > dx1 or ax1 < dx0 or ay0 > dy1 or ay1 < dy0):
        # the CRS is defined near its origin, so degrees there could be real coordinates; but not
        # all of them within a kilometre of the origin of a CRS made for thousands of kilometres
        unit = float(crs.axis_info[0].unit_conversion_factor or 1.0) if crs.axis_info else 1.0
        if len(x) and degrees.all() and min(ax1 - ax0, ay1 - ay0) * unit >= WIDE_AREA_M:
            raise CRSError(
                f"The coordinates do not look like {crs.name} coordinates: every point lies within a few hundred "
                "units of the CRS's origin, like longitude/latitude degrees, where the CRS's area of use spans "
                "thousands of kilometres. Released under this CRS, noise in metres would be added to degrees and "
                "destroy the data.",
                fix=as_degrees,
            )
        return
    _check_far_origin(crs, labels, bounds, degrees, as_degrees)


def _check_far_origin(crs, labels, bounds, degrees: np.ndarray, as_degrees: Fix) -> None:
    """A CRS whose area of use is far from its origin: degrees read as its units land hundreds of km outside it."""
    from .frame import declared_bounds

    dx0, dy0, dx1, dy1 = _DEGREES_AS_UNITS
    elsewhere = Fix(
        "reproject",
        python=f"If they are really {crs.name} coordinates, they lie far outside its area of "
        "use: reproject to a CRS made for the place, or fix those rows.",
        cli=f"If they are really {crs.name} coordinates, they lie far outside its area of use: reproject "
        "the file to a CRS made for the place, or fix those rows.",
        qgis=f"If they are really {crs.name} coordinates, they lie far outside its area of use: reproject "
        "the layer to a CRS made for the place ('Reproject layer'), or fix those features.",
    )
    if bounds is not None:
        b = declared_bounds(crs, bounds, None)
        if b[0] >= dx0 and b[2] <= dx1 and b[1] >= dy0 and b[3] <= dy1:
            raise CRSError(
                f"The declared study area is within a few hundred units of the origin of {crs.name}, like "
                "longitude/latitude degrees, far from the CRS's area of use.",
                fix=Fix.join(
                    Fix(
                        "bounds_units",
                        python="Give bounds= in the data's CRS units.",
                        cli="Give --bounds in the data's CRS units.",
                        qgis="Give the 'Public study area' in the layer's CRS.",
                    ),
                    as_degrees if degrees.any() else None,
                ),
            )
    if degrees.any():
        raise GeometryError(
            f"lie within a few hundred units of the origin of {crs.name}, like longitude/latitude degrees, far outside "
            "the CRS's area of use: the CRS label is probably wrong",
            labels[degrees],
            Fix.join(as_degrees, elsewhere),
        )
