"""The public metric frame and the public output lattice of a release.

A release may depend on the data only through the noise.  So the frame the noise is drawn
in, the scale that converts epsilon per ground metre into CRS units, the lattice outputs are
snapped to and the radius ``r_max`` of the finite-precision bound are computed here from
*public* information only: the CRS (its ellipsoid, its area of use), the user's declared
``bounds=`` or ``region=``, epsilon and the grid.  Nothing here ever sees a point.

Frames
------
``planar``
    A projected CRS is used as is when its local linear scale (CRS units per ground metre,
    every direction, measured with 1 m geodesic offsets on its ellipsoid) varies by at most
    ``max_distortion`` over its public area: the declared bounds / region, or else the CRS's
    public domain (:func:`default_area`): for a Transverse Mercator CRS (UTM, Gauss-Krüger,
    most national grids) its *scale band* (:func:`scale_band_bounds`: the latitudes of its area
    of use, and eastings as far either side of the central meridian as the scale stays within
    ``max_distortion``, so data stored in a zone beyond its EPSG area of use, as is routine,
    release without ``bounds=``), for any other projection its area of use
    (``pyproj.CRS.area_of_use``, transformed to CRS coordinates).  Both are functions of the
    CRS and ``max_distortion`` alone.  epsilon is
    converted with the *largest* scale over that area (plus a 1e-5 safety margin for the
    sampling of the scale), so for two inputs in the area, CRS distance <= scale_max * ground
    distance and the planar guarantee per CRS unit implies the stated one per ground metre.
    With declared bounds and a geographic CRS, :func:`public_frame` can also return a local
    azimuthal equidistant (AEQD) frame centred on the *declared* area (used by trace
    releases, whose prediction needs a plane).

``spherical``
    Otherwise (longitude/latitude, Web Mercator, a projected CRS without an area of use or
    distorting too much over it) noise is drawn per point on a sphere of radius
    ``R = b^2 / a`` (the ellipsoid's smallest radius of curvature, the meridional radius at
    the equator), identified with the ellipsoid by geodetic longitude and latitude.  The
    map ellipsoid -> sphere scales north distances by R / M(lat) <= 1 and east distances by
    R / N(lat) <= 1, so it is 1-Lipschitz: sphere distance <= ellipsoid geodesic distance,
    and an epsilon-per-sphere-metre mechanism is epsilon-per-ground-metre private.  It adds
    at most (1 - e^2)^(-3/2) - 1 (1.01 % on WGS 84) more noise than needed; that constant,
    not the data, is what ``distortion`` reports.

The sampler on the sphere is exact (see :func:`geopriv.mechanisms.planar_laplace.spherical_noise`).

Lattice
-------
Every default release is snapped to a lattice fixed by public parameters only
(:class:`Lattice`): in a planar CRS the nodes are integer multiples of a step in CRS units
from the CRS's own origin; in longitude/latitude the rows are multiples of a latitude step
and each row's longitude step is a public function of its latitude.  The step is converted
from ground metres with the public scale, never with anything measured at the data.

Checks owned here
-----------------
The frame's and the lattice's: the declared area (:func:`declared_bounds`), the region inside
the public area (:func:`check_region_in_area`), the grid step against the noise
(:func:`check_grid`) and against the declared area, the lattice's float precision
(:func:`public_lattice`, :func:`check_noise_above_precision`), and the rows inside the public
area (:meth:`PublicFrame.check_inside`, :func:`check_area_not_from_data`).  A per-row release
fixes its frame and lattice in one call, :func:`public_grid`; epsilon itself is checked by
:mod:`geopriv.precision`, the data by :mod:`geopriv.release.common`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pyproj
from pyproj import CRS, Transformer

from .crs import as_crs, central_meridian, ground_scale, local_aeqd
from .defaults import DEFAULT_MAX_DISTORTION  # re-exported: the frame's own default
from .exceptions import (
    CRSError,
    DistortionWarning,
    Fix,
    GeometryError,
    GeoprivError,
    ParameterError,
    ParameterTypeError,
)
from .precision import ANGLE_RESOLUTION, check_epsilon, discretisation_epsilon

__all__ = [
    "PublicFrame",
    "touched_edges",
    "check_area_not_from_data",
    "public_frame",
    "Lattice",
    "public_lattice",
    "DEFAULT_MAX_DISTORTION",
    "DEFAULT_GRID_M",
    "default_grid",
    "finite_precision_epsilon",
    "declared_bounds",
    "area_of_use_bounds",
    "scale_band_bounds",
    "default_area",
    "sphere_radius",
    "check_grid",
    "auto_grid_too_fine",
    "area_diameter_metres",
    "check_noise_above_precision",
    "area_side_metres",
    "clamp_to_area",
    "proj_errors",
    "declare_area_fix",
    "REGION_CRS_FIX",
    "STUDY_AREA_FIX",
    "PublicGrid",
    "public_grid",
    "check_region_in_area",
]

#: Default lattice step in ground metres (smaller when epsilon asks for it, see default_grid).
DEFAULT_GRID_M = 1.0
_SAMPLES = 33
_SCALE_MARGIN = 1e-5
#: the smallest lattice step, in units of the coordinates' float spacing (ulp) over the public area
_MIN_STEP_ULPS = 2.0**12


def _crs_name(crs) -> str:
    name = getattr(crs, "name", None)
    if not name or name == "unknown":
        try:
            name = crs.to_string()
        except Exception:  # pragma: no cover - any CRS pyproj made has a string form
            name = str(crs)
    return name


#: the study area is public: said with each way to declare it
_PUBLIC = "(public: chosen without looking at individual points)"
#: what to do about coordinates PROJ cannot handle in the data's CRS
_CHECK_CRS = Fix(
    "check_crs",
    python="Check that the data's CRS is the one the coordinates are really in (gdf.set_crs(..., allow_override=True) "
    "if not), or reproject the data to EPSG:4326 or a projected CRS in metres, e.g. "
    "gdf.to_crs(gdf.estimate_utm_crs()).",
    cli="Check that the input's CRS is the one its coordinates are really in (give it with --crs if not), or "
    "reproject the file to EPSG:4326 or a projected CRS in metres first.",
    qgis="Check that the layer's CRS is the one its coordinates are really in ('Assign projection' if not), "
    "or reproject the layer to EPSG:4326 or a projected CRS in metres ('Reproject layer').",
)
#: a region in another CRS than the data
REGION_CRS_FIX = Fix(
    "reproject_region",
    python="Reproject the region to the data's CRS first: region.to_crs(gdf.crs).",
    cli="Reproject the --region file to the input's CRS first.",
    qgis="Reproject the region layer to the input layer's CRS first ('Reproject layer').",
)

#: a release that needs a declared study area (a count release's cells, a synthetic set's points: spread over all
#: of it, so a CRS's area of use is no study area); the one fix of every refusal of a missing one
STUDY_AREA_FIX = Fix(
    "declare_bounds",
    python="Declare bounds=(xmin, ymin, xmax, ymax) of your study area in the data's "
    "CRS, chosen without looking at the points (a city's extent), or region=.",
    cli="Declare --bounds XMIN YMIN XMAX YMAX of your study area, chosen without looking at the points "
    "(a city's extent), or --region.",
    qgis="Set the 'Public study area' parameter (a city's extent), chosen without looking at the points.",
)


def declare_area_fix(alternative: str = "") -> Fix:
    """Declare a public study area, per front end (``alternative``: "reproject" adds that way out)."""
    fix = Fix(
        "declare_bounds",
        python=f"Declare your study area with bounds=(xmin, ymin, xmax, ymax) in the data's CRS {_PUBLIC}.",
        cli=f"Declare your study area with --bounds XMIN YMIN XMAX YMAX in the input's CRS {_PUBLIC}.",
        qgis=f"Set the 'Public study area' parameter {_PUBLIC}.",
    )
    if alternative == "reproject":
        fix = Fix.join(
            fix,
            Fix(
                "reproject",
                python="Or reproject the data to a local projected CRS (its UTM zone, a "
                "national grid): gdf.to_crs(gdf.estimate_utm_crs()).",
                cli="Or reproject the file to a local projected CRS (its UTM zone, a national grid).",
                qgis="Or reproject the layer to a local projected CRS ('Reproject layer').",
            ),
        )
    return fix


@contextlib.contextmanager
def proj_errors(crs, doing: str, *, detail: bool = False, fix: str | Fix | None = None):
    """Turn PROJ's errors (pyproj ``ProjError`` / ``CRSError``) raised inside into a geopriv :class:`CRSError`.

    The message names the CRS and what was being done, and says how to fix it.  PROJ's own text
    is added only with ``detail=True``, for operations on CRS definitions (creating a
    transformation), never for transformations of coordinates: an error message must not
    carry a location.
    """
    try:
        yield
    except (pyproj.exceptions.ProjError, pyproj.exceptions.CRSError) as exc:
        why = f" PROJ says: {exc}" if detail else ""
        doing = doing() if callable(doing) else doing  # messages can be costly to build: only on the error path
        fix = Fix.same("check_crs", fix) if isinstance(fix, str) else fix or _CHECK_CRS
        raise CRSError(f"PROJ cannot {doing} for {_crs_name(crs)!r} ({type(exc).__name__}).{why}", fix=fix) from None


def _geodetic(crs: CRS) -> CRS:
    geodetic = crs.geodetic_crs
    if geodetic is None:
        raise CRSError(
            f"The CRS {crs.name!r} has no geodetic datum, so its units cannot be related to ground metres. "
            "Reproject the data to a CRS with a datum (e.g. its UTM zone) before releasing it."
        )
    return geodetic


def sphere_radius(crs: CRS) -> float:
    """R = b^2 / a of the CRS's ellipsoid: a sphere onto which the ellipsoid maps 1-Lipschitz."""
    e = _geodetic(crs).ellipsoid
    a, b = e.semi_major_metre, e.semi_minor_metre
    return float(b * b / a)


def declared_bounds(crs, bounds=None, region=None):
    """The user's public area as (xmin, ymin, xmax, ymax) in ``crs``, or None.

    ``bounds`` wins over ``region``; a region given as a GeoSeries/GeoDataFrame in another CRS
    is transformed (its bounding box, densified).
    """
    import geopandas as gpd
    import shapely

    if bounds is not None:
        if isinstance(bounds, (bool, np.bool_)) or len(bounds) != 4:
            raise ParameterError("bounds must be (xmin, ymin, xmax, ymax) in the data's CRS.")
        b = tuple(float(v) for v in bounds)
        if not all(math.isfinite(v) for v in b) or b[0] >= b[2] or b[1] >= b[3]:
            raise ParameterError("bounds must be finite with xmin < xmax and ymin < ymax, in the data's CRS.")
        return b
    if region is None:
        return None
    if isinstance(region, shapely.Geometry):
        b = region.bounds
    elif isinstance(region, (gpd.GeoSeries, gpd.GeoDataFrame)):
        if region.crs is None:
            from .exceptions import MissingCRSError

            raise MissingCRSError("The region")
        tb = region.total_bounds
        if not as_crs(region.crs).equals(crs):
            with proj_errors(
                crs,
                f"relate the region's CRS {_crs_name(as_crs(region.crs))!r} to the data's CRS",
                detail=True,
                fix=REGION_CRS_FIX,
            ):
                t = Transformer.from_crs(region.crs, crs, always_xy=True)
            with proj_errors(crs, "transform the region's bounding box into the data's CRS"):
                tb = t.transform_bounds(*tb, densify_pts=21)
        b = tuple(float(v) for v in tb)
    else:
        raise ParameterTypeError(
            "region must be a shapely (Multi)Polygon in the data's CRS, or a GeoSeries/GeoDataFrame with a CRS."
        )
    if not all(math.isfinite(v) for v in b) or b[0] >= b[2] or b[1] >= b[3]:
        raise ParameterError("region must be a polygon with positive area (it is the public area of the release).")
    return tuple(float(v) for v in b)


def area_of_use_bounds(crs: CRS):
    aou = crs.area_of_use
    if aou is None:
        return None
    w, s, e, n = aou.bounds
    if e < w:  # crosses the antimeridian
        return None
    try:
        t = Transformer.from_crs(CRS.from_epsg(4326), crs, always_xy=True)
        b = t.transform_bounds(w, s, e, n, densify_pts=51)
    except pyproj.exceptions.ProjError:
        return None
    if not all(math.isfinite(v) for v in b) or b[0] >= b[2] or b[1] >= b[3]:
        return None
    return tuple(float(v) for v in b)


def _grid(b, n=_SAMPLES):
    # a hair inside the edges: 1 m geodesic offsets at an edge on the antimeridian would wrap around
    dx, dy = 1e-6 * (b[2] - b[0]), 1e-6 * (b[3] - b[1])
    gx, gy = np.meshgrid(np.linspace(b[0] + dx, b[2] - dx, n), np.linspace(b[1] + dy, b[3] - dy, n))
    return gx.ravel(), gy.ravel()


def _chord_ratio(crs: CRS, b, n: int = 13) -> float:
    """Largest CRS distance / geodesic distance over pairs of points of the area (public).

    Local scales bound short distances; over a continent-sized area geodesics bow outside the
    area, so long chords can exceed the largest local scale slightly (UTM: +3e-4 at 9,000 km).
    """
    x, y = _grid(b, n)
    lon, lat = Transformer.from_crs(crs, _geodetic(crs), always_xy=True).transform(x, y)
    i, j = np.triu_indices(len(x), 1)
    _, _, d = (
        _geodetic(crs).get_geod().inv(np.asarray(lon)[i], np.asarray(lat)[i], np.asarray(lon)[j], np.asarray(lat)[j])
    )
    d = np.asarray(d)
    ok = d > 0
    ratio = np.hypot(x[i] - x[j], y[i] - y[j])[ok] / d[ok]
    return float(ratio.max()) if ratio.size and np.all(np.isfinite(ratio)) else 0.0


def _scale_over(crs: CRS, b):
    try:
        with proj_errors(crs, "measure its scale in ground metres over the public area"):
            smax, smin = ground_scale(crs, *_grid(b))
    except CRSError:
        return None
    return float(smax.max()) * (1 + _SCALE_MARGIN), float(smin.min())


def _lipschitz_over(crs: CRS, b):
    """(scale_max, scale_min) over the rectangle ``b``: local scales and long chords (as a frame uses them), or None."""
    s = _scale_over(crs, b)
    if s is None:
        return None
    try:
        chord = _chord_ratio(crs, b)
    except pyproj.exceptions.ProjError:
        return None
    return max(s[0], chord * (1 + _SCALE_MARGIN)), s[1]


def scale_band_bounds(crs, max_distortion: float = DEFAULT_MAX_DISTORTION):
    """The scale band of a Transverse Mercator CRS: its public domain beyond the area of use.

    The scale of a Transverse Mercator projection (UTM, Gauss-Krüger, most national grids)
    grows with the distance from its central meridian, almost independently of latitude, so
    the set where it stays within a tolerance is a band of eastings around the meridian.  The
    band is the rectangle in CRS coordinates

        [x_cm - w, x_cm + w] x [ymin, ymax]

    where ``x_cm`` is the central meridian's easting, ``[ymin, ymax]`` the northings of the
    CRS's area of use, and ``w`` the widest half-width (found by bisection, then rounded down
    to three significant digits) for which the frame's own measure of the scale over the
    rectangle, local scales and long chords as in :func:`public_frame`, varies by at most
    ``max_distortion``.  It holds the area of use.  A function of the CRS and
    ``max_distortion`` only, never of data: anyone can recompute it.

    Parameters
    ----------
    crs : anything pyproj reads
        The data's CRS.
    max_distortion : float
        The largest relative scale variation allowed over the band (the frame's tolerance).

    Returns
    -------
    tuple or None
        ``(xmin, ymin, xmax, ymax)`` in ``crs``; None when the CRS is not a Transverse Mercator
        with an area of use, or when its area of use alone exceeds the tolerance.
    """
    crs = as_crs(crs)
    return _scale_band_cached(crs.to_wkt(), float(max_distortion))


@functools.lru_cache(maxsize=64)
def _scale_band_cached(wkt: str, max_distortion: float):
    crs = CRS.from_wkt(wkt)
    lon0 = central_meridian(crs)
    aou = area_of_use_bounds(crs)
    if lon0 is None or aou is None or crs.area_of_use is None:
        return None
    try:
        geodetic = _geodetic(crs)
        lats = np.linspace(crs.area_of_use.south, crs.area_of_use.north, 5)
        xs, _ = Transformer.from_crs(geodetic, crs, always_xy=True).transform(np.full(5, lon0), lats)
    except (pyproj.exceptions.ProjError, CRSError):
        return None
    xs = np.asarray(xs, dtype=float)
    # the central meridian must be a line of constant x (x is the easting, or westing): else no band
    if not np.isfinite(xs).all() or np.ptp(xs) > 1e-6 * (aou[2] - aou[0]):
        return None
    xc = float(np.mean(xs))
    ymin, ymax = aou[1], aou[3]

    def within(half):
        s = _lipschitz_over(crs, (xc - half, ymin, xc + half, ymax))
        return s is not None and s[0] / s[1] - 1 <= max_distortion

    inner = max(xc - aou[0], aou[2] - xc)  # the band must hold the area of use
    if not inner > 0 or not within(inner):
        return None
    lo = inner
    s_cm = _scale_over(crs, aou)
    # a first guess: k / k0 - 1 ~ x^2 / (2 R^2) on the sphere, with x in CRS units (s_cm[1] per metre)
    guess = s_cm[1] * sphere_radius(crs) * math.sqrt(2.0 * max_distortion) if s_cm else 2.0 * inner
    hi = max(2.0 * guess, 1.25 * inner)
    for _ in range(4):
        if not within(hi):
            break
        lo, hi = hi, 2.0 * hi
    else:  # pragma: no cover - the scale of a Transverse Mercator grows without bound
        hi = lo
    while hi - lo > 1e-3 * lo:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if within(mid) else (lo, mid)
    step = 10.0 ** (math.floor(math.log10(lo)) - 2)  # three significant digits: a readable, public number
    half = max(math.floor(lo / step) * step, inner)
    if not within(half):  # pragma: no cover - the measure is monotone in the half-width
        half = lo
    return (xc - half, ymin, xc + half, ymax)


def default_area(crs, max_distortion: float = DEFAULT_MAX_DISTORTION):
    """The public domain of a projected CRS when no ``bounds=`` are declared, and its source.

    Parameters
    ----------
    crs : anything pyproj reads
        The data's CRS.
    max_distortion : float
        The frame's tolerance for scale variation (it sets the width of a scale band).

    Returns
    -------
    tuple
        ``(rectangle, source)``: the scale band (:func:`scale_band_bounds`, source
        ``"crs_scale_band"``) for a Transverse Mercator CRS, else the area of use
        (:func:`area_of_use_bounds`, ``"area_of_use"``); ``(None, "none")`` without either.
        Synthetic releases (:func:`geopriv.synthesize`) do not use it: their domain is the area
        of use, whose cells a wider domain would only coarsen (see ``docs/privacy.md``).
    """
    crs = as_crs(crs)
    band = scale_band_bounds(crs, max_distortion)
    if band is not None:
        return band, "crs_scale_band"
    aou = area_of_use_bounds(crs)
    return (aou, "area_of_use") if aou is not None else (None, "none")


def touched_edges(xy: np.ndarray, area) -> np.ndarray:
    """Which of the 4 edges (xmin, xmax, ymin, ymax) of ``area`` some point lies on (to 1e-9 of its size)."""
    xmin, ymin, xmax, ymax = area
    tx, ty = 1e-9 * max(xmax - xmin, 1.0), 1e-9 * max(ymax - ymin, 1.0)
    if not len(xy):
        return np.zeros(4, bool)
    # per column: numpy reduces a column view far faster than an (n, 2) array along axis 0
    lo = (xy[:, 0].min(), xy[:, 1].min())
    hi = (xy[:, 0].max(), xy[:, 1].max())

    def near(v, e, t, axis):
        if lo[axis] > e + t or hi[axis] < e - t:  # no point within t of the edge: skip the full pass
            return False
        return bool(np.any(np.abs(v - e) <= t))

    return np.array(
        [
            near(xy[:, 0], xmin, tx, 0),
            near(xy[:, 0], xmax, tx, 0),
            near(xy[:, 1], ymin, ty, 1),
            near(xy[:, 1], ymax, ty, 1),
        ]
    )


def check_area_not_from_data(touched, source: str = "bounds") -> None:
    """Refuse a declared area (``bounds=``, or ``region=``'s box) that points touch on 2 or more edges.

    ``touched`` are the 4 flags of :func:`touched_edges` over ALL the data (OR-ed over partitions):
    an area computed from the data (``gdf.total_bounds``, the points' convex hull) would be
    published with the release, and with it the data's extreme coordinates.
    """
    n = int(np.count_nonzero(touched))
    if n >= 2:
        what = "The declared study area" if source == "bounds" else "The region's bounding box"
        raise GeoprivError(
            f"{what} looks computed from the data: points lie exactly on {n} of its edges, and the area is "
            "published with the release. Declare a study area chosen without looking at the points (a "
            "municipality's or a map sheet's extent, or round numbers well outside the data)."
        )


@dataclass(frozen=True)
class PublicFrame:
    """Where noise is drawn, from public information only.

    Made by :func:`public_frame` (or by the release functions); its fields are also its attributes.

    Parameters
    ----------
    input_crs : pyproj.CRS
        The data's CRS.
    kind : {"planar", "spherical"}
        Noise drawn in a plane (``work_crs``) or on a sphere of radius ``sphere_radius``.
    work_crs : pyproj.CRS
        Planar: the CRS noise is drawn in (the input CRS, or an AEQD centred on the declared
        area); spherical: the input's geodetic CRS (longitude/latitude in degrees).
    scale_max, scale_min : float
        Planar: work units per ground metre over the public area (extremes, all directions);
        spherical: sphere metres per ground metre (<= 1).  Epsilon per ground metre is divided
        by ``scale_max`` to give epsilon per work unit (``epsilon_to_work``).
    area : tuple or None
        The public area (xmin, ymin, xmax, ymax) in input-CRS coordinates inputs must lie in;
        None: the whole CRS (spherical frame without declared bounds).
    area_source : str
        "bounds", "region", "crs_scale_band" (:func:`scale_band_bounds`), "area_of_use" or "none".
    sphere_radius : float or None
        Spherical: R in metres; None for a planar frame.

    See Also
    --------
    public_frame : Makes the frame of a CRS and a declared area.
    perturb : Draws noise in the frame its data's CRS and ``bounds`` fix.

    Examples
    --------
    >>> frame = geopriv.public_frame("EPSG:32650", bounds=(430000, 4410000, 460000, 4440000))
    >>> frame.kind, frame.same, frame.area_source   # UTM is used as is over 30 km
    ('planar', True, 'bounds')
    >>> round(frame.scale_min, 4), round(frame.scale_max, 4)   # UTM metres per ground metre
    (0.9996, 0.9997)
    """

    input_crs: CRS
    kind: str
    work_crs: CRS
    scale_max: float
    scale_min: float
    area: tuple | None
    area_source: str
    sphere_radius: float | None = None
    _transformers: dict = field(
        default_factory=dict, init=False, compare=False, repr=False
    )  # (src, dst) -> Transformer

    @property
    def same(self) -> bool:
        return self.kind == "planar" and self.work_crs.equals(self.input_crs)

    @property
    def distortion(self) -> float:
        return float(self.scale_max / self.scale_min - 1.0)

    def epsilon_to_work(self, epsilon_per_metre: float) -> float:
        """epsilon per work unit (or sphere metre) that guarantees ``epsilon_per_metre`` per ground metre."""
        return float(epsilon_per_metre) / self.scale_max

    def _transform(self, xy, src, dst, labels, what):
        key = (id(src), id(dst))  # src and dst are this frame's own CRS objects
        t = self._transformers.get(key)
        if t is None:
            with proj_errors(self.input_crs, lambda: f"relate {_crs_name(src)!r} to {_crs_name(dst)!r}", detail=True):
                t = Transformer.from_crs(src, dst, always_xy=True)
            self._transformers[key] = t
        with proj_errors(self.input_crs, f"transform {what}"):
            x, y = t.transform(xy[:, 0], xy[:, 1])
        out = np.column_stack([x, y])
        bad = ~np.isfinite(out).all(axis=1)
        if bad.any():
            if labels is not None:
                raise GeometryError(
                    f"cannot be expressed in {_crs_name(dst)!r} (PROJ returned infinity): they lie where "
                    f"{_crs_name(self.input_crs)!r} is not defined",
                    np.asarray(labels)[bad],
                    Fix.join(
                        _CHECK_CRS,
                        Fix(
                            "drop_rows",
                            python="Or drop those rows.",
                            cli="Or fix those rows.",
                            qgis="Or fix those features.",
                        ),
                    ),
                )
            raise CRSError(
                f"{int(bad.sum())} {what} cannot be expressed in {_crs_name(dst)!r} (PROJ returned infinity): they lie "
                f"where {_crs_name(src)!r} is not defined.",
                fix=_CHECK_CRS,
            )
        return out

    def to_work(self, xy: np.ndarray, labels=None) -> np.ndarray:
        """Input-CRS coordinates in the working frame; errors (naming ``labels`` when given) where PROJ fails."""
        if self.same:
            return xy
        return self._transform(xy, self.input_crs, self.work_crs, labels, "point(s) into the working frame")

    def from_work(self, xy: np.ndarray) -> np.ndarray:
        """Working-frame coordinates (released values) back in the input CRS."""
        if self.same:
            return xy
        return self._transform(xy, self.work_crs, self.input_crs, None, "released point(s) back into the data's CRS")

    def check_inside(self, xy: np.ndarray, labels) -> None:
        """Refuse inputs outside the public area (errors name row labels, never coordinates)."""
        if self.area is None:
            return
        xmin, ymin, xmax, ymax = self.area
        if self.area_source in ("bounds", "region") and len(xy):
            check_area_not_from_data(touched_edges(xy, self.area), self.area_source)
        out = (xy[:, 0] < xmin) | (xy[:, 0] > xmax) | (xy[:, 1] < ymin) | (xy[:, 1] > ymax)
        if out.any():
            where = {
                "bounds": "the declared study area",
                "region": "the bounding box of the region",
                "area_of_use": f"the area of use of {self.input_crs.name}",
                "crs_scale_band": f"the public domain of {self.input_crs.name} (the latitudes of its area of use, "
                "as far east and west of its central meridian as its scale stays within the "
                "allowed distortion)",
            }.get(self.area_source, "the public area")
            label = self.area_source in ("area_of_use", "crs_scale_band")
            band = self.area_source == "crs_scale_band"
            raise GeometryError(
                f"lie outside {where}, where the release's scale and lattice are fixed",
                labels[out],
                Fix(
                    "declare_bounds",
                    python=f"Declare bounds=(xmin, ymin, xmax, ymax) covering your study area {_PUBLIC}, reproject "
                    "to a CRS whose area of use holds the data, or drop those rows."
                    + (" (Or allow more scale distortion with max_distortion=.)" if band else "")
                    + (
                        f" If the coordinates are not really in {self.input_crs.name}, the CRS label is wrong: "
                        "set the one they are in with gdf.set_crs(..., allow_override=True) (not to_crs)."
                        if label
                        else ""
                    ),
                    cli=f"The labels are row numbers, from 0. Declare --bounds XMIN YMIN XMAX YMAX covering your study "
                    f"area {_PUBLIC}, reproject the file to a CRS whose area of use holds the data, or remove "
                    "those rows."
                    + (" (Or allow more scale distortion with --max-distortion.)" if band else "")
                    + (
                        f" If the coordinates are not really in {self.input_crs.name}, give the CRS they are in "
                        "with --crs."
                        if label
                        else ""
                    ),
                    qgis=f"In QGIS, the labels are feature ids. Set the 'Public study area' parameter to cover your "
                    f"study area {_PUBLIC}, reproject the layer to a CRS whose area of use holds the data, or "
                    "remove those features."
                    + (
                        f" If the coordinates are not really in {self.input_crs.name}, "
                        "assign the layer the CRS they are in ('Assign projection')."
                        if label
                        else ""
                    ),
                ),
            )

    def r_max_metres(self) -> float:
        """A public bound on the ground distance between an input and any output (for Thm 4.1)."""
        if self.kind == "spherical":  # no two points of the sphere are farther apart
            return math.pi * float(self.sphere_radius)
        xmin, ymin, xmax, ymax = self.area
        if not self.same:  # e.g. an equidistant frame for traces: measure in its plane (metres)
            xmin, ymin, xmax, ymax = Transformer.from_crs(
                self.input_crs, self.work_crs, always_xy=True
            ).transform_bounds(xmin, ymin, xmax, ymax, densify_pts=21)
        return math.hypot(xmax - xmin, ymax - ymin) / self.scale_min

    def describe(self) -> dict:
        """Public fields for the provenance record."""
        d = {
            "input_crs": self.input_crs.to_string(),
            "frame": self.kind,
            "frame_area": self.area_source,
            "distortion": round(self.distortion, 6),
        }
        if self.area_source == "crs_scale_band":  # computed by geopriv from the CRS: recorded so anyone can check it
            d["public_area"] = [float(v) for v in self.area]
        if self.kind == "planar" and not self.same:
            d["working_crs"] = self.work_crs.to_string()  # centred on the declared bounds: public
        if self.kind == "spherical":
            d["sphere_radius_m"] = self.sphere_radius
        return d


@functools.lru_cache(maxsize=64)
def _public_frame_cached(wkt: str, area, area_source: str, max_distortion: float, planar_only: bool) -> PublicFrame:
    crs = CRS.from_wkt(wkt)
    geodetic = _geodetic(crs)
    if crs.is_projected:
        b, src = (area, area_source) if area is not None else default_area(crs, max_distortion)
        if b is not None:
            s = _scale_over(crs, b)
            if s is not None and s[0] / s[1] - 1 <= max_distortion:
                smax = max(s[0], _chord_ratio(crs, b) * (1 + _SCALE_MARGIN))
                return PublicFrame(crs, "planar", crs, smax, s[1], b, src)
            if planar_only and area is None and s is not None:
                raise CRSError(
                    f"{crs.name} distorts ground distances by {100 * (s[0] / s[1] - 1):.1f} % over its area of use, "
                    "and this release needs a plane: a frame fixed by a declared study area.",
                    fix=declare_area_fix("reproject"),
                )
    if planar_only:
        if area is None:
            raise CRSError(
                f"This release of data in {crs.name} needs a planar frame fixed by public information: a declared "
                "study area.",
                fix=declare_area_fix("reproject"),
            )
        lon, lat = Transformer.from_crs(crs, geodetic, always_xy=True).transform(*_grid(area, 9))
        lon, lat = np.asarray(lon), np.asarray(lat)
        if not (np.isfinite(lon).all() and np.isfinite(lat).all()) or np.ptp(lon) > 180:
            raise CRSError(
                "The declared area is not a valid area of the CRS (or crosses the antimeridian). Declare a smaller one."
            )
        lon0 = float((np.min(lon) + np.max(lon)) / 2)
        lat0 = float((np.min(lat) + np.max(lat)) / 2)
        work = local_aeqd(lon0, lat0, geodetic)
        wb = Transformer.from_crs(crs, work, always_xy=True).transform_bounds(*area, densify_pts=21)
        s = _scale_over(work, wb)
        smax = max(s[0], _chord_ratio(work, wb) * (1 + _SCALE_MARGIN))
        return PublicFrame(crs, "planar", work, smax, s[1], area, area_source)
    e = geodetic.ellipsoid
    e2 = 1.0 - (e.semi_minor_metre / e.semi_major_metre) ** 2
    R = sphere_radius(crs)
    # sphere metres per ground metre: R/M(lat) north, R/N(lat) east; max 1 (north at the equator),
    # min R / M(pole) = (1 - e^2)^(3/2)
    return PublicFrame(crs, "spherical", geodetic, 1.0, (1.0 - e2) ** 1.5, area, area_source if area else "none", R)


def public_frame(
    crs, *, bounds=None, region=None, max_distortion: float = DEFAULT_MAX_DISTORTION, planar_only: bool = False
) -> PublicFrame:
    """The frame a release draws noise in, from public information only (see the module docstring).

    Parameters
    ----------
    crs : anything pyproj reads
        The data's CRS.
    bounds : (xmin, ymin, xmax, ymax), optional
        The declared public study area in ``crs``.
    region : ignored here
        Kept for signature compatibility: a region constrains outputs, not inputs.
    max_distortion : float
        Largest scale variation over the public area for which a projected CRS is used as is.
    planar_only : bool
        Refuse the spherical frame (mechanisms that need a plane, e.g. trace prediction).

    Returns
    -------
    PublicFrame
        Planar (the CRS as is, when it distorts ground distances by at most ``max_distortion``
        over the public area; else a local equidistant projection of a declared area) or
        spherical (longitude/latitude, or a CRS too distorted, without a declared area).

    Raises
    ------
    MissingCRSError
        ``crs`` is None.
    CRSError
        ``crs`` cannot be read, or ``planar_only`` and no plane can be fixed from public information.
    ParameterError
        ``bounds`` or ``max_distortion`` is not valid.

    Warns
    -----
    DistortionWarning
        The declared area is so large that even a local equidistant projection distorts distances by more
        than ``max_distortion`` (the guarantee holds; some points get more noise than needed).

    See Also
    --------
    PublicFrame : The frame and its fields.
    perturb : Fixes the frame of its data the same way.

    Examples
    --------
    >>> geopriv.public_frame("EPSG:32650", bounds=(430000, 4410000, 460000, 4440000)).kind
    'planar'
    >>> frame = geopriv.public_frame("EPSG:4326")   # longitude/latitude, no declared area
    >>> frame.kind, round(frame.sphere_radius)   # metres
    ('spherical', 6335439)
    >>> frame = geopriv.public_frame("EPSG:4326", bounds=(116.2, 39.8, 116.5, 40.1), planar_only=True)
    >>> frame.kind, frame.work_crs.is_projected   # a local equidistant projection of the declared area
    ('planar', True)
    """
    crs = as_crs(crs)
    max_distortion = float(max_distortion)
    if not (max_distortion >= 0 and math.isfinite(max_distortion)):
        raise ParameterError("max_distortion must be a finite number >= 0.")
    area = declared_bounds(crs, bounds, None)
    source = "bounds" if bounds is not None else "none"
    with proj_errors(crs, "fix the public frame of the release (its scale over the public area)"):
        frame = _public_frame_cached(crs.to_wkt(), area, source, max_distortion, bool(planar_only))
    if frame.kind == "planar" and not frame.same and frame.distortion > max_distortion:
        warnings.warn(
            f"The declared area is so large that even a local equidistant projection distorts distances by "
            f"{100 * frame.distortion:.2f} %. The guarantee holds (noise is scaled for the largest distortion), but "
            "some points get that much more noise than needed. Declare smaller areas and release them separately.",
            DistortionWarning,
            stacklevel=3,
        )
    return frame


# ---------------------------------------------------------------------------- lattice
def default_grid(epsilon_per_m: float) -> float:
    """The default lattice step in ground metres: 1 m, or 1/(20 epsilon) when the noise is finer.

    A public function of epsilon: about 40 times below the mean noise radius 2/epsilon.
    """
    return min(DEFAULT_GRID_M, 1.0 / (20.0 * float(epsilon_per_m)))


@dataclass(frozen=True)
class Lattice:
    """A public lattice in the output (input-CRS) coordinates.

    ``kind="planar"``: nodes (i * step, j * step) from the CRS origin.  ``kind="geographic"``:
    rows at latitudes k * step_y (degrees); in row k the longitude step is
    ``grid_m / (N(lat_k) cos lat_k)`` in degrees (a public function of k), so cells are
    about ``grid_m`` ground metres wide everywhere.
    """

    kind: str
    grid_m: float
    step: float  # planar: CRS units; geographic: latitude step in degrees
    min_cell_m: float  # smallest ground side of a cell over the public area (for the bound)
    semi_major: float = 0.0
    e2: float = 0.0

    def snap(self, xy: np.ndarray, *, inplace: bool = False) -> np.ndarray:
        """Nearest lattice node of each row of ``xy`` (a new array unless ``inplace``)."""
        if self.kind == "planar":
            out = xy if inplace else np.array(xy, dtype=float)
            out /= self.step
            np.round(out, out=out)
            out *= self.step
            return out
        lat = np.clip(np.round(xy[:, 1] / self.step) * self.step, -90.0, 90.0)
        phi = np.radians(lat)
        n_rad = self.semi_major / np.sqrt(1.0 - self.e2 * np.sin(phi) ** 2)
        circumference = 2.0 * math.pi * n_rad * np.cos(phi)  # ground length of this row, metres
        # a whole number of cells per row, so cells tile it exactly (no sliver at the antimeridian);
        # rows within about grid_m / (2 pi) of a pole are one cell (a polar cap)
        cells = np.maximum(np.ceil(circumference / self.grid_m), 1.0)
        lon_step = 360.0 / cells
        k = np.round((xy[:, 0] + 180.0) / lon_step)
        k = np.where(k >= cells, 0.0, k)  # -180 and +180 are one node
        lon = k * lon_step - 180.0
        return np.column_stack([lon, lat])

    def describe(self) -> dict:
        return {
            "grid_m": self.grid_m,
            "lattice": "CRS origin" if self.kind == "planar" else "latitude rows from the equator",
        }


def _round_up(value: float, down: bool = False) -> float:
    """``value`` rounded up (or ``down``) to two significant digits: a bound that surely holds, said briefly."""
    unit = 10.0 ** (math.floor(math.log10(value)) - 1)
    return (math.floor(value / unit * (1 + 1e-12)) if down else math.ceil(value / unit * (1 - 1e-12))) * unit


def _grid_too_fine(crs, grid_m: float, min_grid_m: float, *, given: bool = False) -> GeoprivError:
    """The refusal of a lattice step finer than the coordinates hold (``given``: the user gave that grid)."""
    return ParameterError(
        f"The grid of {grid_m:g} m is finer than the precision of coordinates in {_crs_name(crs)} allows over the "
        f"public area (a step of at least {min_grid_m:.2g} m). Use a coarser grid"
        + ("." if given else " or a smaller epsilon.")
    )


def auto_grid_too_fine(epsilon_per_m: float):
    """The refusal of an automatic lattice (grid="auto": :func:`default_grid`) finer than float coordinates can hold.

    No grid was given: epsilon is so large that the step it implies, 1/(20 epsilon), is below
    the coordinates' precision.  For :func:`public_lattice`'s ``too_fine``; the fix names the
    largest epsilon the automatic step allows here and, when one exists, the explicit grids
    that are fine enough for the coordinates yet finer than the noise (:func:`check_grid`).
    """
    eps = float(epsilon_per_m)

    def refusal(crs, grid_m: float, min_grid_m: float) -> GeoprivError:
        finest = min_grid_m
        largest = _round_up(1.0 / (20.0 * finest), down=True)
        noise = _round_up(2.0 / eps, down=True)
        grid_ok = finest < noise
        window = f"{finest:.2g} and {noise:.2g}"
        return ParameterError(
            f"Epsilon {eps:g} per ground metre is so large that the lattice it implies is finer than the float "
            f"precision of coordinates in {_crs_name(crs)}: no grid was given, and the automatic one, 1/(20 epsilon) "
            f"= {grid_m:.2g} m, is below the {finest:.2g} m the coordinates can hold over the public "
            "area, so the release would be the true location up to rounding.",
            fix=Fix(
                "smaller_epsilon",
                python=f"Use a smaller epsilon (at most {largest:.2g} per ground metre here; e.g. "
                "level=math.log(4), radius=200 is ln 4 within 200 m)"
                + (f", or give an explicit grid= between {window} metres." if grid_ok else "."),
                cli=f"Use a smaller epsilon (at most {largest:.2g} per ground metre here; e.g. --level ln4 "
                "--radius 200 is ln 4 within 200 m)"
                + (f", or give --grid between {window} metres." if grid_ok else "."),
                qgis=f"Use a smaller epsilon (at most {largest:.2g} per ground metre here; e.g. a privacy level of "
                "1.386 (ln 4) within 200 metres)"
                + (f", or set the grid step between {window} metres." if grid_ok else "."),
            ),
        )

    return refusal


def public_lattice(frame: PublicFrame, grid_m: float, *, too_fine=None) -> Lattice:
    """The lattice of step ``grid_m`` ground metres in the frame's input CRS, from public scale only.

    A step finer than the coordinates' float precision over the public area is refused:
    ``too_fine(crs, grid_m, min_grid_m)`` (the smallest step allowed, rounded up to two digits)
    makes the error when the step was not given but derived
    (:func:`auto_grid_too_fine` for grid="auto"), so the message says where it came from.
    """
    crs = frame.input_crs
    grid_m = float(grid_m)
    too_fine = too_fine or _grid_too_fine
    if crs.is_geographic:
        unit = (crs.axis_info[0].unit_name or "").lower() if crs.axis_info else ""
        if "degree" not in unit:
            raise CRSError(f"{crs.name} measures angles in {unit!r}; geopriv handles degrees. Reproject to EPSG:4326.")
        e = _geodetic(crs).ellipsoid
        a = e.semi_major_metre
        e2 = 1.0 - (e.semi_minor_metre / a) ** 2
        m_pole = a / math.sqrt(1.0 - e2)  # the largest meridional radius of curvature
        step = math.degrees(grid_m / m_pole)
        step_min = _MIN_STEP_ULPS * np.spacing(180.0)
        if step < step_min:
            raise too_fine(crs, grid_m, _round_up(math.radians(step_min) * m_pole))
        # rows are at most grid_m tall; widths are grid_m except near the poles (capped at 360 degrees)
        return Lattice("geographic", grid_m, step, grid_m * (1.0 - e2) ** 1.5 / 2.0, a, e2)
    if frame.kind == "planar" and frame.same:
        smin, smax = frame.scale_min, frame.scale_max
        area = frame.area
    else:
        # projected CRS used through the sphere (e.g. Web Mercator): scale over its public area
        area = frame.area if frame.area is not None else area_of_use_bounds(crs)
        s = _scale_over(crs, area) if area is not None else None
        if s is None:
            raise CRSError(
                f"{crs.name} has no area of use over which its scale can be bounded, so no public lattice can be "
                "fixed.",
                fix=declare_area_fix("reproject"),
            )
        smax, smin = s
    step = grid_m * smin
    mag = max(abs(v) for v in area) if area is not None else 1e7
    if step < _MIN_STEP_ULPS * np.spacing(max(mag, 1.0)):
        raise too_fine(crs, grid_m, _round_up(_MIN_STEP_ULPS * float(np.spacing(max(mag, 1.0))) / smin))
    return Lattice("planar", grid_m, step, step / smax)


def finite_precision_epsilon(epsilon_per_m: float, frame: PublicFrame, lattice: Lattice) -> float:
    """Effective epsilon per ground metre of the snapped release (Andres et al. 2013, Thm 4.1).

    Uses the smallest ground side of a lattice cell and the public ``r_max`` of the frame;
    raises ValueError (with a fix) when the bound does not exist.
    """
    return discretisation_epsilon(float(epsilon_per_m), lattice.min_cell_m, frame.r_max_metres(), ANGLE_RESOLUTION)


def check_grid(grid, epsilon_per_m: float):
    """Validate a grid argument: "auto" -> default_grid(epsilon); a positive number of metres."""
    if isinstance(grid, str):
        if grid != "auto":
            raise ParameterError(f"grid must be a number of metres or 'auto', got {grid!r}.")
        return default_grid(epsilon_per_m)
    if isinstance(grid, (bool, np.bool_)):
        raise ParameterTypeError("grid must be a number of metres (or 'auto'), not a bool.")
    grid = check_epsilon(grid, "grid (metres)")
    if 2.0 / epsilon_per_m < grid:
        raise ParameterError(
            f"The grid of {grid:g} m is coarser than the noise (mean radius {2.0 / epsilon_per_m:.3g} m): most releases "
            "would snap back to the true point's own cell. Use a grid well below 2/epsilon, or a smaller epsilon."
        )
    return grid


def _area_sides_metres(crs, area) -> np.ndarray:
    """The ground lengths of a rectangle's two mid-lines (horizontal, vertical), in metres."""
    crs = as_crs(crs)
    geodetic = _geodetic(crs)
    xmin, ymin, xmax, ymax = area
    xm, ym = (xmin + xmax) / 2, (ymin + ymax) / 2
    t_ = np.linspace(0.0, 1.0, 17)
    with proj_errors(crs, "measure the declared area in ground metres"):
        t = Transformer.from_crs(crs, geodetic, always_xy=True)
        hx, hy = t.transform(xmin + t_ * (xmax - xmin), np.full(17, ym))  # the horizontal mid-line, in pieces
        vx, vy = t.transform(np.full(17, xm), ymin + t_ * (ymax - ymin))  # (one inv across 360 degrees would be 0 m)
    geod = geodetic.get_geod()
    d = np.array([geod.line_length(np.asarray(hx), np.asarray(hy)), geod.line_length(np.asarray(vx), np.asarray(vy))])
    if not np.all(np.isfinite(d)):
        raise CRSError(f"The declared area is not valid in {crs.name}; check that the study area is in the data's CRS.")
    return d


def area_side_metres(crs, area) -> float:
    """The shorter side of a rectangle (xmin, ymin, xmax, ymax) in ``crs``, in ground metres.

    Measured geodesically along the rectangle's two mid-lines (public: the rectangle is).
    """
    return float(_area_sides_metres(crs, area).min())


def area_diameter_metres(crs, area) -> float:
    """About the diameter of a rectangle (xmin, ymin, xmax, ymax) in ``crs``, in ground metres (public).

    The hypotenuse of its two mid-lines' geodesic lengths.
    """
    return float(np.hypot(*_area_sides_metres(crs, area)))


def precision_metres(frame: PublicFrame) -> float:
    """Ground size of one float64 ulp of coordinates in the frame's input CRS over its public area."""
    crs = frame.input_crs
    if crs.is_geographic:
        e = _geodetic(crs).ellipsoid
        a = e.semi_major_metre
        e2 = 1.0 - (e.semi_minor_metre / a) ** 2
        mag = 180.0 if frame.area is None else max(abs(v) for v in frame.area)
        return float(np.spacing(max(mag, 1.0))) * math.radians(1.0) * a / math.sqrt(1.0 - e2)
    if frame.kind == "planar" and frame.same:
        area, smin = frame.area, frame.scale_min
    else:
        area = frame.area if frame.area is not None else area_of_use_bounds(crs)
        s = _scale_over(crs, area) if area is not None else None
        smin = s[1] if s is not None else 1.0
        area = area if area is not None else (-1e7, -1e7, 1e7, 1e7)
    mag = max(abs(v) for v in area)
    return float(np.spacing(max(mag, 1.0))) / smin


def check_noise_above_precision(epsilon_per_m: float, frame: PublicFrame) -> None:
    """Refuse an epsilon whose noise (mean radius 2/epsilon) is below 2^12 ulps of the coordinates."""
    ulp_m = precision_metres(frame)
    if 2.0 / float(epsilon_per_m) < _MIN_STEP_ULPS * ulp_m:
        raise ParameterError(
            f"epsilon {epsilon_per_m:g} per metre asks for noise ({2.0 / epsilon_per_m:.3g} m) below the precision of "
            f"coordinates in {frame.input_crs.name}: the release would be the true location up to rounding. "
            "Use a smaller epsilon."
        )


# ---------------------------------------------------------------------------- a release's frame and lattice, together
@dataclass(frozen=True)
class PublicGrid:
    """The frame and the lattice of a release, fixed together by :func:`public_grid` (public information only).

    ``frame``: where the noise is drawn (or, for a mechanism with its own CRS, the frame that
    fixes the lattice's scale); ``lattice``: the output lattice (None for a continuous
    release); ``declared``: the declared study area (``bounds=``, else the region's box), or
    None; ``diameter_m``: its diameter in ground metres when asked for, else None; ``rect``: the
    rectangle outputs are truncated to (None: none); ``region_area``: the region's box
    (:func:`declared_bounds` of the region alone), or None.
    """

    frame: PublicFrame
    lattice: Lattice | None
    declared: tuple | None
    diameter_m: float | None
    rect: tuple | None
    region_area: tuple | None = None


def check_region_in_area(region_box, area) -> None:
    """Refuse a region (its bounding box ``region_box`` in the CRS) that extends beyond the public ``area``."""
    if region_box is None or area is None:
        return
    rb, ab = region_box, area
    if rb[0] < ab[0] or rb[1] < ab[1] or rb[2] > ab[2] or rb[3] > ab[3]:
        raise ParameterError(
            "The region extends beyond the public area of the release (the declared study area, or the CRS's area "
            "of use).",
            fix=Fix(
                "region_in_area",
                python="Clip the region to it, or declare bounds= that hold it.",
                cli="Clip the --region to it, or declare --bounds that hold it.",
                qgis="Clip the region to it, or set a 'Public study area' that holds it.",
            ),
        )


def public_grid(
    crs,
    epsilon_per_m: float,
    *,
    grid="auto",
    continuous: bool = False,
    bounds=None,
    region=None,
    region_box=None,
    frame_bounds=None,
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    planar_only: bool = False,
    diameter: bool = False,
) -> PublicGrid:
    """The public frame and lattice of a per-row release in one call, checked in this order (no data involved).

    1. the frame (:func:`public_frame`) over ``frame_bounds`` (default: ``bounds``), and the
       region (its box ``region_box`` in ``crs``) inside its public area;
    2. without ``continuous``: the grid step (:func:`check_grid` for ``epsilon_per_m``, the
       largest epsilon per metre the release uses), not coarser than the declared area (``bounds``,
       else ``region``'s box), and the lattice (:func:`public_lattice`); with ``continuous``: the
       noise above the coordinates' float precision (:func:`check_noise_above_precision`);
    3. the declared area's diameter (``diameter=True``: for the caller's noise-scale warning)
       and the rectangle outputs are truncated to: the frame's area, or for a projected CRS drawn
       on the sphere its area of use; none when ``frame_bounds`` were given (a mechanism's own
       extent only fixes the lattice's scale).

    The finite-precision bound is the mechanism's (it knows its own noise); the caller asks it
    with the frame and lattice returned here.
    """
    crs = as_crs(crs)
    frame = public_frame(
        crs,
        bounds=bounds if frame_bounds is None else frame_bounds,
        max_distortion=max_distortion,
        planar_only=planar_only,
    )
    check_region_in_area(region_box, frame.area)
    region_area = declared = sides = lattice = None
    if region is not None and bounds is None:
        region_area = declared_bounds(crs, None, region)
    if not continuous:
        grid_m = check_grid(grid, epsilon_per_m)
        declared = declared_bounds(crs, bounds, None) if bounds is not None else region_area
        if declared is not None:
            sides = _area_sides_metres(crs, declared)
            side = float(sides.min())
            if grid_m > side:
                raise ParameterError(
                    f"The grid of {grid_m:g} m is coarser than the declared area (its shorter side is about {side:.3g} m): "
                    "every release would be the same few nodes. Use a finer grid or a larger area."
                )
        auto = isinstance(grid, str)  # grid="auto": the step follows epsilon, and the message says so
        too_fine = auto_grid_too_fine(epsilon_per_m) if auto else functools.partial(_grid_too_fine, given=True)
        lattice = public_lattice(frame, grid_m, too_fine=too_fine)
    else:
        check_noise_above_precision(epsilon_per_m, frame)
        declared = declared_bounds(crs, bounds, None) if bounds is not None else region_area
    diameter_m = None
    if diameter and declared is not None:
        sides = _area_sides_metres(crs, declared) if sides is None else sides
        diameter_m = float(np.hypot(*sides))
    if region is not None and region_area is None:
        region_area = declared_bounds(crs, None, region)
    rect = None
    if frame_bounds is None:
        rect = frame.area
        if rect is None and frame.kind == "spherical" and crs.is_projected:
            rect = area_of_use_bounds(crs)  # e.g. Web Mercator: keep outputs where the CRS is defined
    return PublicGrid(frame, lattice, declared, diameter_m, rect, region_area)


def clamp_to_area(xy: np.ndarray, rect, lattice: Lattice | None = None) -> np.ndarray:
    """Clamp outputs (in place) into the public rectangle, onto lattice nodes inside it.

    The truncation of Andres et al.'s Theorem 4.1: post-processing with public parameters.
    """
    xmin, ymin, xmax, ymax = rect
    if lattice is not None and lattice.kind == "planar":
        s = lattice.step
        xmin, ymin = math.ceil(xmin / s) * s, math.ceil(ymin / s) * s
        xmax, ymax = math.floor(xmax / s) * s, math.floor(ymax / s) * s
    np.clip(xy[:, 0], xmin, xmax, out=xy[:, 0])
    np.clip(xy[:, 1], ymin, ymax, out=xy[:, 1])
    return xy


def truncate_and_snap(xy: np.ndarray, rect, lattice: Lattice | None) -> np.ndarray:
    """The public post-processing of every release: truncate to the public area, snap to the lattice.

    ``xy`` (input-CRS coordinates, a fresh array: changed in place) is clamped into ``rect`` (if
    any) and snapped; in a planar lattice the clamp is onto the nodes inside ``rect``, so every
    output is a lattice node in the area (the truncation of Andres et al.'s Theorem 4.1).
    """
    if rect is not None and (lattice is None or lattice.kind != "planar"):
        xy = clamp_to_area(xy, rect)
    if lattice is not None:
        xy = lattice.snap(xy, inplace=True)
        if rect is not None and lattice.kind == "planar":
            xy = clamp_to_area(xy, rect, lattice)
    return xy
