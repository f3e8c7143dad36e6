"""Ground metres from any CRS: the geodesy behind geopriv's frames.

epsilon in geopriv is privacy loss *per metre of true ground distance* (geodesic distance on
the CRS's ellipsoid).  Coordinates in a CRS are not ground metres in general:

* a CRS in US survey feet has 3.28 units per metre;
* Web Mercator (EPSG:3857) stretches distances by 1/cos(latitude): 1.61 at London;
* longitude/latitude are angles.

:func:`ground_scale` measures a CRS's local linear scale (CRS units per ground metre, every
direction) with 1 m geodesic offsets on its ellipsoid; :mod:`geopriv.frame` uses it over
*public* areas only (a CRS's area of use, the user's declared bounds) to fix the frame and
lattice of a release.  :func:`local_aeqd` builds an azimuthal equidistant CRS;
:func:`central_meridian` reads the central meridian of a Transverse Mercator CRS (UTM,
Gauss-Krüger, most national grids), whose scale grows with the distance from it.
"""

from __future__ import annotations


import numpy as np
import pyproj
from pyproj import CRS, Transformer

from .exceptions import CRSError, Fix, MissingCRSError

__all__ = ["local_aeqd", "ground_scale", "as_crs", "central_meridian"]

#: EPSG method names of the Transverse Mercator family (UTM, Gauss-Krüger, national grids)
TRANSVERSE_MERCATOR_METHODS = ("Transverse Mercator", "Transverse Mercator (South Orientated)")


def as_crs(crs) -> CRS:
    """A pyproj CRS from anything pyproj reads; MissingCRSError for None, CRSError with a fix otherwise."""
    if crs is None:
        raise MissingCRSError()
    try:
        return CRS.from_user_input(crs)
    except pyproj.exceptions.CRSError as exc:  # pragma: no cover - pyproj message is enough
        raise CRSError(f"Cannot read the CRS {crs!r}: {exc}. Pass an EPSG code or WKT.") from exc


def local_aeqd(lon: float, lat: float, geodetic: CRS | None = None) -> CRS:
    """Azimuthal equidistant CRS in metres centred at (lon, lat) on the given datum (WGS 84 by default)."""
    ellps = "+ellps=WGS84"
    if geodetic is not None:
        e = geodetic.ellipsoid
        ellps = (
            f"+a={e.semi_major_metre!r} +rf={e.inverse_flattening!r}"
            if e.inverse_flattening
            else f"+R={e.semi_major_metre!r}"
        )
    return CRS.from_proj4(f"+proj=aeqd +lat_0={lat!r} +lon_0={lon!r} +x_0=0 +y_0=0 {ellps} +units=m +no_defs +type=crs")


def central_meridian(crs):
    """The central meridian (degrees, on the CRS's own datum) of a Transverse Mercator CRS, or None.

    Parameters
    ----------
    crs : anything pyproj reads
        A CRS; only a projected CRS whose conversion is one of the Transverse Mercator methods
        (UTM, Gauss-Krüger, most national grids) has one.

    Returns
    -------
    float or None
        The "Longitude of natural origin" parameter in degrees; None for any other CRS (other
        projections, a derived or engineering CRS, a parameter in another angular unit).
    """
    crs = as_crs(crs)
    if crs.is_bound:
        crs = crs.source_crs
    if crs is None or not crs.is_projected:
        return None
    op = crs.coordinate_operation
    if op is None or op.method_name not in TRANSVERSE_MERCATOR_METHODS:
        return None
    for p in op.params:
        if p.name == "Longitude of natural origin":
            if (p.unit_name or "").lower() != "degree":
                return None
            lon0 = float(p.value)
            return lon0 if np.isfinite(lon0) and -180.0 <= lon0 <= 180.0 else None
    return None


def ground_scale(crs, x, y):
    """Local linear scale of ``crs`` at points (x, y) given in ``crs``.

    Returns ``(smax, smin)``: the largest and smallest number of CRS units per ground metre
    over all directions at each point (Tissot's semi-axes, including the unit conversion),
    measured with 1 m geodesic offsets on the CRS's ellipsoid.
    """
    crs = as_crs(crs)
    geodetic = crs.geodetic_crs
    if geodetic is None:
        raise CRSError(
            f"The CRS {crs.name!r} has no geodetic datum, so its units cannot be related to ground metres. "
            "Reproject the data to a CRS with a datum (e.g. its UTM zone) before releasing it."
        )
    x = np.atleast_1d(np.asarray(x, dtype=float))
    y = np.atleast_1d(np.asarray(y, dtype=float))
    to_geo = Transformer.from_crs(crs, geodetic, always_xy=True)
    from_geo = Transformer.from_crs(geodetic, crs, always_xy=True)
    lon, lat = to_geo.transform(x, y)
    geod = geodetic.get_geod()
    h = 1.0
    cols = []
    for az in (90.0, 0.0):  # east, north
        lon_p, lat_p, _ = geod.fwd(lon, lat, np.full_like(lon, az), np.full_like(lon, h))
        lon_m, lat_m, _ = geod.fwd(lon, lat, np.full_like(lon, az + 180.0), np.full_like(lon, h))
        xp, yp = from_geo.transform(lon_p, lat_p)
        xm, ym = from_geo.transform(lon_m, lat_m)
        cols.append(((np.asarray(xp) - xm) / (2 * h), (np.asarray(yp) - ym) / (2 * h)))
    (a, c), (b, d) = cols  # J = [[a, b], [c, d]]: d(x, y) / d(east, north)
    # singular values of a 2x2 matrix in closed form
    s1 = a * a + b * b + c * c + d * d
    det = np.abs(a * d - b * c)
    root = np.sqrt(np.maximum(s1 * s1 - 4 * det * det, 0.0))
    smax = np.sqrt((s1 + root) / 2)
    smin = np.sqrt(np.maximum((s1 - root) / 2, 0.0))
    if not (np.all(np.isfinite(smax)) and np.all(smin > 0)):
        raise CRSError(
            f"The CRS {crs.name!r} is degenerate or undefined over the data's extent (e.g. a pole or outside "
            "its area of use).",
            fix=Fix(
                "reproject",
                python="Reproject the data to a local projected CRS, e.g. gdf.to_crs(gdf.estimate_utm_crs()).",
                cli="Reproject the file to a local projected CRS (e.g. its UTM zone) first.",
                qgis="Reproject the layer to a local projected CRS (e.g. its UTM zone) with 'Reproject layer'.",
            ),
        )
    return smax, smin
