"""Ground metres from any CRS: the metric frame a mechanism draws its noise in.

epsilon in geopriv is privacy loss *per metre of true ground distance* (geodesic distance on
the CRS's ellipsoid).  Coordinates in a CRS are not ground metres in general:

* a CRS in US survey feet has 3.28 units per metre;
* Web Mercator (EPSG:3857) stretches distances by 1/cos(latitude): 1.61 at London;
* longitude/latitude are angles.

So every release goes through a :class:`MetricFrame`:

1. The *working CRS* is the input CRS when it is projected and its scale is nearly constant
   over the data (variation at most ``max_distortion``, default 0.1 %); otherwise (geographic
   CRS, Web Mercator over a city, a CRS used far from its centre) it is a local azimuthal
   equidistant projection (AEQD) centred on the data, whose scale is within 1e-6 of 1 over a
   city and within 0.4 % over 1,000 km.
2. Over the data's extent we measure the working CRS's local linear scale ``s`` (working units
   per ground metre) in every direction: the singular values of the Jacobian from local
   east/north ground metres (geodesic offsets on the ellipsoid) to working coordinates,
   sampled on a grid over the extent.  ``scale_max`` / ``scale_min`` are the extremes.
3. Noise is drawn in the working CRS with ``epsilon_work = epsilon / scale_max`` per working
   unit.  For two locations in the extent, working distance <= scale_max * ground distance,
   so the likelihood ratio is <= exp(epsilon * ground distance): the stated guarantee holds
   and is never weakened.  It is *strengthened* by at most the factor
   ``scale_max / scale_min`` (reported as ``distortion`` in the provenance; a
   :class:`~geopriv.exceptions.DistortionWarning` is issued when that exceeds
   ``max_distortion`` even in the local AEQD frame, i.e. data spanning thousands of km).
4. Released points are transformed back to the input CRS (post-processing: free).

Locations far outside the data's extent (beyond where the scale was measured) are covered
by the same bound in practice: two locations 100 km apart already differ by a factor
exp(epsilon * 1e5), far beyond any meaningful guarantee at the usual epsilon.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyproj
from pyproj import CRS, Transformer

from .exceptions import CRSError, MissingCRSError

__all__ = ["MetricFrame", "metric_frame", "local_aeqd", "ground_scale", "as_crs"]

DEFAULT_MAX_DISTORTION = 1e-3
_SAMPLES = 9  # scale is sampled on a _SAMPLES x _SAMPLES grid over the extent


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
        ellps = f"+a={e.semi_major_metre!r} +rf={e.inverse_flattening!r}" if e.inverse_flattening else f"+R={e.semi_major_metre!r}"
    return CRS.from_proj4(f"+proj=aeqd +lat_0={lat!r} +lon_0={lon!r} +x_0=0 +y_0=0 {ellps} +units=m +no_defs +type=crs")


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
            "its area of use). Reproject the data to a local projected CRS, e.g. gdf.to_crs(gdf.estimate_utm_crs())."
        )
    return smax, smin


def _extent_grid(xmin, ymin, xmax, ymax, n=_SAMPLES):
    gx, gy = np.meshgrid(np.linspace(xmin, xmax, n), np.linspace(ymin, ymax, n))
    return gx.ravel(), gy.ravel()


@dataclass(frozen=True)
class MetricFrame:
    """Where a mechanism works: a CRS and how its units relate to ground metres over the data.

    Attributes
    ----------
    input_crs, work_crs : pyproj.CRS
    scale_max, scale_min : float
        Working-CRS units per ground metre, extremes over the data's extent and all directions.
    """

    input_crs: CRS
    work_crs: CRS
    scale_max: float
    scale_min: float

    @property
    def same(self) -> bool:
        """True when the input CRS is used as is (no transformation)."""
        return self.work_crs == self.input_crs

    @property
    def distortion(self) -> float:
        """Relative scale variation over the extent: how much stronger than stated the guarantee may be."""
        return float(self.scale_max / self.scale_min - 1.0)

    def epsilon_to_work(self, epsilon_per_metre: float) -> float:
        """Epsilon per working-CRS unit that guarantees ``epsilon_per_metre`` per ground metre."""
        return float(epsilon_per_metre) / self.scale_max

    def metres_to_work(self, metres: float) -> float:
        """A length in ground metres as working units (nominal: mean of the scale extremes)."""
        return float(metres) * 0.5 * (self.scale_max + self.scale_min)

    def to_work(self, xy: np.ndarray) -> np.ndarray:
        if self.same:
            return xy
        t = Transformer.from_crs(self.input_crs, self.work_crs, always_xy=True)
        x, y = t.transform(xy[:, 0], xy[:, 1])
        return np.column_stack([x, y])

    def from_work(self, xy: np.ndarray) -> np.ndarray:
        if self.same:
            return xy
        t = Transformer.from_crs(self.work_crs, self.input_crs, always_xy=True)
        x, y = t.transform(xy[:, 0], xy[:, 1])
        return np.column_stack([x, y])

    def describe(self) -> dict:
        return {
            "input_crs": self.input_crs.to_string(),
            "working_crs": self.work_crs.to_string() if not self.same else "input",
            "scale_max_units_per_m": self.scale_max,
            "scale_min_units_per_m": self.scale_min,
            "distortion": self.distortion,
        }


def metric_frame(crs, bounds, *, max_distortion: float = DEFAULT_MAX_DISTORTION) -> MetricFrame:
    """Choose the working CRS for data with ``bounds`` (xmin, ymin, xmax, ymax) in ``crs``.

    See the module docstring for the rule.  Never fails silently: a CRS without a datum, or
    one undefined over the data, raises :class:`~geopriv.exceptions.CRSError`.
    """
    import warnings

    from .exceptions import DistortionWarning

    crs = as_crs(crs)
    xmin, ymin, xmax, ymax = (float(b) for b in bounds)
    if not np.all(np.isfinite([xmin, ymin, xmax, ymax])):
        raise CRSError("The data's bounds are not finite; check the geometries for NaN or infinite coordinates.")
    if crs.is_projected:
        smax, smin = ground_scale(crs, *_extent_grid(xmin, ymin, xmax, ymax))
        frame = MetricFrame(crs, crs, float(smax.max()), float(smin.min()))
        if frame.distortion <= max_distortion:
            return frame
    geodetic = crs.geodetic_crs
    if geodetic is None:
        raise CRSError(
            f"The CRS {crs.name!r} has no geodetic datum, so its units cannot be related to ground metres. "
            "Reproject the data to a CRS with a datum (e.g. its UTM zone) before releasing it."
        )
    gx, gy = _extent_grid(xmin, ymin, xmax, ymax)
    lon, lat = Transformer.from_crs(crs, geodetic, always_xy=True).transform(gx, gy)
    lon = np.asarray(lon)
    lat = np.asarray(lat)
    if np.ptp(lon) > 180:
        raise CRSError(
            "The data spans more than 180 degrees of longitude (or crosses the antimeridian); no single local "
            "frame can hold it. Split the data by region (e.g. by UTM zone) and release each part."
        )
    lon0 = float((lon.min() + lon.max()) / 2)
    lat0 = float((lat.min() + lat.max()) / 2)
    work = local_aeqd(lon0, lat0, geodetic)
    wx, wy = Transformer.from_crs(crs, work, always_xy=True).transform(gx, gy)
    smax, smin = ground_scale(work, *_extent_grid(np.min(wx), np.min(wy), np.max(wx), np.max(wy)))
    frame = MetricFrame(crs, work, float(smax.max()), float(smin.min()))
    if frame.distortion > max_distortion:
        warnings.warn(
            f"The data spans so large an area that even a local equidistant projection distorts distances by "
            f"{100 * frame.distortion:.2f} %. The guarantee holds (noise is scaled for the largest distortion), "
            "but some points get that much more noise than needed. Release regions separately for tighter noise.",
            DistortionWarning,
            stacklevel=3,
        )
    return frame
