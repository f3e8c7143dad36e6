"""Privacy level maps: epsilon(u) per ground metre on a raster grid.

Koufogiannis and Pappas ("Location-dependent privacy", 2016) let the privacy level depend on
the location itself: where many people live, a small perturbation already hides a person, so
epsilon can be larger there.  Their example derives the map from population density,

    epsilon(u) = slope * density(u) + floor,

and :class:`PrivacyMap` builds exactly that from a population raster (a GeoTIFF path, an open
rasterio dataset, or an array with a transform and a CRS), or takes an epsilon raster as is.

Units
-----
* ``epsilon`` is privacy loss **per ground metre**, like everywhere in geopriv.
* ``density`` is people (or any count proportional to people) **per square kilometre** of
  ground area by default (``units="per_km2"``).  A raster of counts per cell is accepted with
  ``units="per_cell"``: counts are divided by each cell's ground area in km2.
* The raster's CRS must be projected.  Its units need not be metres: the local ground scale
  of the CRS (:func:`geopriv.crs.ground_scale`) is measured at every cell, and whenever
  epsilon is needed per CRS unit (:attr:`PrivacyMap.epsilon_crs`) it is divided by the
  largest scale in any direction, so the guarantee per ground metre is never weakened
  (feet, Web Mercator and Transverse Mercator far from its meridian are all handled).

No data
-------
Cells without data (the raster's nodata value, NaN, masked cells; e.g. the sea) are part of
the map but count as *zero population*: they get the floor epsilon, the strongest
protection.  ``nodata_mask`` says which they were.  A raster with no valid cell is an error,
and so is an infinite cell (it is not taken as no data: the error names the cell and says how
to declare it as no data if that is what it means).

Regularisation
--------------
:meth:`PrivacyMap.regularised` lowers epsilon (never raises it: a smaller epsilon is always a
stronger guarantee) exactly where the noise scale 1/epsilon would change faster than
``max_slope`` metres per metre, and nowhere else: it is the largest map below the original
whose 1/epsilon is ``max_slope``-Lipschitz on the 8-neighbour grid.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from pyproj import CRS

from .crs import ground_scale
from .exceptions import (
    CRSError,
    Fix,
    GeoprivError,
    GeoprivWarning,
    MissingCRSError,
    ParameterError,
    ParameterTypeError,
    RasterError,
)

__all__ = [
    "PrivacyMap",
    "read_raster",
    "lipschitz_envelope",
    "edge_weights",
    "affine6",
    "OUTLIER_QUANTILE",
    "OUTLIER_MIN_CELLS",
    "MAX_CELLS",
    "check_raster_size",
]

#: Largest raster (width x height cells) read from a file by default.  A compressed GeoTIFF can be far
#: smaller than its decoded size (20000 x 20000 cells of zeros compress to well under a megabyte and
#: decode to 3.2 GB of float64, and a privacy map holds several such arrays), so the size is checked
#: from the file's header before any cell is read.  Raise it with ``max_cells=`` (command line:
#: ``--max-cells``) when the memory is there.
MAX_CELLS = 10**8

#: ``epsilon_range``: densities above ``outlier_factor`` times this quantile of the populated cells are outliers
OUTLIER_QUANTILE = 0.99
#: ... detected only on rasters with at least this many populated cells (a quantile of fewer means little)
OUTLIER_MIN_CELLS = 100


class _RasterMissingCRS(MissingCRSError):
    def __init__(self, message: str, fix=None):  # noqa: D107 - same class, raster-specific advice
        GeoprivError.__init__(self, message, fix=fix)


# --------------------------------------------------------------------------------------------
# reading rasters
# --------------------------------------------------------------------------------------------
def check_raster_size(width, height, max_cells=MAX_CELLS, what: str = "The raster") -> None:
    """Refuse a raster of more than ``max_cells`` cells before it is read.

    Parameters
    ----------
    width, height : int
        The raster's size in cells (from its header: ``rasterio`` reads it without decoding).
    max_cells : int or None
        The limit (default :data:`MAX_CELLS`, 10^8 cells); None: no limit.
    what : str
        How the raster is named in the message.

    Raises
    ------
    RasterError
        The raster has more cells than ``max_cells``; the message gives its size and how to proceed.
    ParameterError
        ``max_cells`` is not None or a positive integer.
    """
    if max_cells is None:
        return
    if isinstance(max_cells, bool) or not isinstance(max_cells, (int, np.integer)) or max_cells < 1:
        raise ParameterError(
            f"max_cells must be a positive whole number of cells or None (no limit), got {max_cells!r}."
        )
    cells = int(width) * int(height)
    if cells > max_cells:
        raise RasterError(
            f"{what} has {int(width)} x {int(height)} = {cells:,} cells, more than the limit of {int(max_cells):,} "
            f"(about {cells * 8 / 1e9:.1f} GB per float64 array once decoded; a privacy map holds several): it was not "
            "read. Resample it to coarser cells or clip it to the study area first (e.g. gdalwarp -tr 100 100 or "
            "-te xmin ymin xmax ymax), or raise the limit where the memory is there (max_cells=..., on the command "
            "line --max-cells N)."
        )


def _read(raster, band, transform, crs, nodata, max_cells=MAX_CELLS):
    """(values float64 (ny, nx) with NaN where no data, Affine, pyproj CRS)."""
    from affine import Affine

    if isinstance(raster, (str, os.PathLike)):
        import rasterio

        try:
            with rasterio.open(raster) as ds:
                return _read(ds, band, transform, crs, nodata, max_cells)
        except rasterio.errors.RasterioIOError as exc:
            raise RasterError(f"Cannot open the raster {os.fspath(raster)!r}: {exc}. Pass a GeoTIFF path.") from None
    if hasattr(raster, "read") and hasattr(raster, "transform"):  # rasterio dataset
        if band < 1 or band > raster.count:
            raise RasterError(f"The raster has {raster.count} band(s); band={band} does not exist.")
        check_raster_size(raster.width, raster.height, max_cells)  # from the header, before any cell is decoded
        arr = raster.read(band, masked=True)
        values = np.ma.filled(arr.astype(float), np.nan)
        if nodata is not None:
            values[values == nodata] = np.nan
        transform = raster.transform if transform is None else transform
        crs = raster.crs if crs is None else crs
        if crs is not None and not isinstance(crs, CRS):
            crs = CRS.from_user_input(crs.to_wkt() if hasattr(crs, "to_wkt") else crs)
    else:
        if isinstance(raster, np.ma.MaskedArray):
            values = np.ma.filled(raster.astype(float), np.nan)
        else:
            try:
                values = np.array(raster, dtype=float)
            except (TypeError, ValueError):
                raise ParameterTypeError(
                    "raster must be a GeoTIFF path, an open rasterio dataset, or a 2-D array with transform= and crs=."
                ) from None
        if values.ndim == 3 and values.shape[0] >= band:
            values = values[band - 1]
        if nodata is not None:
            values[values == nodata] = np.nan
        if transform is None:
            raise RasterError(
                "An array needs its georeferencing: pass transform= (an affine.Affine, e.g. "
                "rasterio.transform.from_origin(west, north, cell_width, cell_height)) and crs=."
            )
    if values.ndim != 2 or min(values.shape) < 2:
        raise RasterError(f"The raster must be 2-D with at least 2 x 2 cells; got shape {values.shape}.")
    if crs is None:
        raise _RasterMissingCRS(
            "The raster has no CRS, so geopriv cannot tell how large its cells are on the ground.",
            fix=Fix(
                "set_crs",
                python="Pass crs= with the CRS it is really in (e.g. crs='EPSG:30166'), or fix the file "
                "with gdal_edit.py -a_srs EPSG:xxxx file.tif.",
                cli="Give the CRS it is really in with --crs (e.g. --crs EPSG:30166), or fix the file with "
                "gdal_edit.py -a_srs EPSG:xxxx file.tif.",
                qgis="Set the raster layer's CRS to the one it is really in (Layer Properties > Source, "
                "or 'Assign projection').",
            ),
        )
    crs = CRS.from_user_input(crs)
    if not crs.is_projected:
        raise CRSError(
            f"The raster's CRS {crs.name!r} is not projected (its cells are degrees, not a fixed ground size). "
            "Reproject it to a projected CRS first, e.g. `gdalwarp -t_srs EPSG:32654 in.tif out.tif` or "
            "rasterio.warp.reproject (Tokyo: EPSG:30166 or UTM 54N, EPSG:32654)."
        )
    transform = Affine(*affine6(transform))
    if transform.b != 0 or transform.d != 0:
        raise RasterError("The raster is rotated or sheared (transform b/d != 0); warp it to a north-up grid first.")
    if transform.a <= 0 or transform.e == 0:
        raise RasterError(f"The raster transform {affine6(transform)} has no positive cell width/height.")
    infinite = np.isinf(values)  # no-data cells are NaN by now: these are cells with data
    if infinite.any():
        raise RasterError(
            f"{int(infinite.sum())} cell(s) of the raster are infinite ({_first_cell(infinite)}, counted from the "
            "raster's first row and column). A population or epsilon must be a finite number.",
            fix=Fix(
                "nodata",
                python="If they mean 'no data', declare it: pass nodata=<that value> (np.inf works), set "
                "it in the file (gdal_edit.py -a_nodata), or fill the cells with NaN; otherwise "
                "fix them, e.g. with a raster calculator.",
                cli="If they mean 'no data', declare it: --nodata inf, or set it in the file (gdal_edit.py "
                "-a_nodata); otherwise fix them, e.g. with a raster calculator.",
                qgis="If they mean 'no data', save the raster with that no-data value ('Translate (convert "
                "format)', 'Assign a specified nodata value'); otherwise fix them with the 'Raster "
                "calculator'.",
            ),
        )
    if transform.e > 0:  # south-up: flip to north-up
        values = values[::-1].copy()
        transform = Affine(
            transform.a, 0.0, transform.c, 0.0, -transform.e, transform.f + transform.e * values.shape[0]
        )
    values[~np.isfinite(values)] = np.nan
    return values, transform, crs


def read_raster(raster, *, band: int = 1, transform=None, crs=None, nodata=None, max_cells=MAX_CELLS):
    """Read a projected, north-up raster the way privacy maps read theirs.

    Returns ``(values, transform, crs)``: float64 values (ny, nx) with NaN where there is no data,
    the north-up :class:`affine.Affine` and the :class:`pyproj.CRS`.  ``raster`` is a GeoTIFF
    path, an open rasterio dataset, or an array with ``transform=`` and ``crs=``.  The same checks
    and messages as :meth:`PrivacyMap.from_population` (a CRS, projected, not rotated, finite).
    """
    return _read(raster, band, transform, crs, nodata, max_cells)


def affine6(t) -> tuple:
    """(a, b, c, d, e, f) of an affine transform (or a 6+ sequence), without iterating an Affine.

    (Iterating ``affine.Affine`` fails on some affine/Python combinations.)
    """
    if all(hasattr(t, k) for k in "abcdef"):
        return tuple(float(getattr(t, k)) for k in "abcdef")
    return tuple(float(v) for v in list(t)[:6])


def _first_cell(mask) -> str:
    r, c = np.argwhere(mask)[0]
    return f"first at raster row {r}, column {c}"


# --------------------------------------------------------------------------------------------
# min-plus envelopes on the 8-neighbour grid (also used by the eikonal mechanism)
# --------------------------------------------------------------------------------------------
def _envelope_rows(f: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Exact min-plus envelope along axis 1: g[j] <= g[k] + (sum of w between k and j), both ways.

    ``w[:, j]`` joins columns j and j+1.  O(n) with cumulative sums and ``minimum.accumulate``.
    """
    c = np.zeros(f.shape)
    np.cumsum(w, axis=1, out=c[:, 1:])
    g = np.minimum.accumulate(f - c, axis=1)
    g += c
    d = c[:, -1:] - c
    g -= d
    g = np.minimum.accumulate(g[:, ::-1], axis=1)[:, ::-1]
    g += d
    return g


def _shear(h: int, w: int, anti: bool):
    """Index arrays mapping an (h, w) grid onto (h, w + h - 1) so that diagonals become columns."""
    i, j = np.mgrid[0:h, 0:w]
    col = (i + j) if anti else (j - i + h - 1)
    return i, col


def _envelope_diag(f: np.ndarray, w: np.ndarray, anti: bool) -> np.ndarray:
    """Exact min-plus envelope along the diagonals (i, j)-(i+1, j+1), or the anti-diagonals."""
    h, wd = f.shape
    i, col = _shear(h, wd, anti)
    s = np.full((h, wd + h - 1), np.inf)
    s[i, col] = f
    ws = np.zeros((h - 1, wd + h - 1))
    ii, jj = np.mgrid[0 : h - 1, 0 : wd - 1]
    if anti:  # w[i, j] joins (i, j+1)-(i+1, j): column i + j + 1
        ws[ii, ii + jj + 1] = w
    else:  # w[i, j] joins (i, j)-(i+1, j+1): column j - i + h - 1
        ws[ii, jj - ii + h - 1] = w
    g = _envelope_rows(s.T, ws.T).T
    return g[i, col]


def lipschitz_envelope(f: np.ndarray, weights, max_sweeps: int = 500, tol: float = 1e-12):
    """Largest function <= ``f`` with |g(a) - g(b)| <= w(a, b) on every 8-neighbour edge.

    Parameters
    ----------
    f : (ny, nx) array (may contain +inf)
    weights : tuple of 4 arrays
        Edge weights (wh, wv, wd, wa): horizontal (ny, nx-1), vertical (ny-1, nx), diagonal
        (i, j)-(i+1, j+1) and anti-diagonal (i, j+1)-(i+1, j), both (ny-1, nx-1).

    Returns
    -------
    (g, sweeps)
        ``g = min over v of f(v) + path length(v, u)`` (shortest paths on the 8-neighbour
        graph).  Each sweep applies exact 1-D envelopes along rows, columns and both
        diagonals, so a handful of sweeps suffice.
    """
    wh, wv, wd, wa = weights
    g = np.array(f, dtype=float)
    finite = np.isfinite(g)
    scale = float(np.abs(g[finite]).max()) if finite.any() else 1.0
    tol = tol * max(1.0, scale, max(float(np.max(x)) if x.size else 0.0 for x in weights))
    for sweep in range(max_sweeps):
        old = g
        g = _envelope_rows(g, wh)
        g = _envelope_rows(g.T, wv.T).T
        if g.shape[0] > 1 and g.shape[1] > 1:
            g = _envelope_diag(g, wd, anti=False)
            g = _envelope_diag(g, wa, anti=True)
        if not np.any(g < old - tol):
            return g, sweep + 1
    raise RuntimeError("Lipschitz envelope did not converge; this is a bug, please report it.")  # pragma: no cover


def _edge_lengths(hy: float, hx: float):
    return hx, hy, math.hypot(hx, hy), math.hypot(hx, hy)


def edge_weights(rate: np.ndarray, hy: float, hx: float):
    """Per-edge ``length * (rate(a) + rate(b)) / 2`` for the 4 edge families (see :func:`lipschitz_envelope`).

    With ``rate`` = epsilon per unit this is the integral of epsilon along the segment joining
    two neighbouring nodes when epsilon is piecewise constant on cells (or linear between nodes).
    """
    lh, lv, ld, _ = _edge_lengths(hy, hx)
    return (
        (rate[:, 1:] + rate[:, :-1]) * (0.5 * lh),
        (rate[1:, :] + rate[:-1, :]) * (0.5 * lv),
        (rate[1:, 1:] + rate[:-1, :-1]) * (0.5 * ld),
        (rate[1:, :-1] + rate[:-1, 1:]) * (0.5 * ld),
    )


# --------------------------------------------------------------------------------------------
# PrivacyMap
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False, repr=False)
class PrivacyMap:
    """A privacy level map: epsilon per ground metre at the cells of a projected raster grid.

    Build one with :meth:`from_population` or :meth:`from_epsilon`; objects are immutable
    (methods return new maps).  Cell centres are the grid *nodes* of the eikonal mechanism.
    The constructor's parameters are also the map's attributes.

    Parameters
    ----------
    epsilon : ndarray (ny, nx)
        Privacy loss per ground metre, finite and > 0 in every cell (no-data cells filled).
    transform : affine.Affine
        North-up raster transform (CRS units); cell (r, c) has its centre at
        ``transform * (c + 0.5, r + 0.5)``.
    crs : pyproj.CRS
        A projected CRS.
    nodata_mask : ndarray of bool (ny, nx)
        Cells that had no data in the source raster.
    population : ndarray (ny, nx) or None
        Density per km2 (no data -> 0) when built from population; the default prior of
        :meth:`geopriv.EikonalMechanism.expected_mse`.
    info : dict
        How the map was made (JSON-serialisable).

    Raises
    ------
    RasterError
        ``epsilon`` is not a 2-D grid of at least 2 x 2 cells, a cell is not finite and > 0, or
        ``nodata_mask`` or ``population`` has another shape.

    See Also
    --------
    EikonalMechanism : Releases points with the guarantee this map sets, place by place.
    optimal_mechanism : A mechanism for a privacy map that minimises the expected loss.

    Examples
    --------
    Central Tokyo (40 x 40 cells of about 700 m): "ln 4 within 2 km" where nobody lives, up to
    "ln 4 within 400 m" at the densest cell:

    >>> pm = geopriv.PrivacyMap.from_population(geopriv.datasets.get_path("tokyo_density_40"),
    ...                                         epsilon_range=(math.log(4) / 2000, math.log(4) / 400))
    >>> pm.shape, pm.crs.to_epsg()
    ((40, 40), 30166)
    >>> round(pm.epsilon_min, 6), round(pm.epsilon_max, 6)   # per ground metre
    (0.000693, 0.003466)
    >>> x0, y0, x1, y1 = pm.bounds
    >>> bool(pm.epsilon_min <= pm.epsilon_at((x0 + x1) / 2, (y0 + y1) / 2) <= pm.epsilon_max)
    True
    """

    epsilon: np.ndarray
    transform: object
    crs: CRS
    nodata_mask: np.ndarray
    population: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        eps = np.array(self.epsilon, dtype=float)
        if eps.ndim != 2 or min(eps.shape) < 2:
            raise RasterError(f"epsilon must be a 2-D grid of at least 2 x 2 cells; got shape {eps.shape}.")
        bad = ~np.isfinite(eps) | (eps <= 0)
        if bad.any():
            raise RasterError(
                f"{int(bad.sum())} cell(s) of the privacy map are not finite and > 0 ({_first_cell(bad)}). "
                "Every location needs a positive privacy level; fill or mask those cells."
            )
        mask = np.zeros(eps.shape, bool) if self.nodata_mask is None else np.array(self.nodata_mask, dtype=bool)
        if mask.shape != eps.shape:
            raise RasterError("nodata_mask must have the shape of epsilon.")
        pop = None
        if self.population is not None:
            pop = np.array(self.population, dtype=float)
            if pop.shape != eps.shape:
                raise RasterError("population must have the shape of epsilon.")
        for arr in (eps, mask, pop):
            if arr is not None:
                arr.flags.writeable = False
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "nodata_mask", mask)
        object.__setattr__(self, "population", pop)
        object.__setattr__(self, "crs", CRS.from_user_input(self.crs))
        object.__setattr__(self, "info", dict(self.info))

    # ---------------------------------------------------------------- constructors
    @classmethod
    def from_population(
        cls,
        raster,
        *,
        slope: float | None = None,
        floor: float | None = None,
        epsilon_range: tuple[float, float] | None = None,
        units: str = "per_km2",
        band: int = 1,
        transform=None,
        crs=None,
        nodata=None,
        nodata_epsilon=None,
        outlier_factor: float | None = 10.0,
        max_cells: int | None = MAX_CELLS,
    ) -> "PrivacyMap":
        """Privacy map ``epsilon = floor + slope * density`` from a population raster.

        Parameters
        ----------
        raster : str, PathLike, rasterio dataset, or 2-D array
            Population density (or counts with ``units="per_cell"``).  Arrays need
            ``transform=`` and ``crs=``.
        slope : float
            Extra epsilon per ground metre for each person per km2 (with ``floor``).
        floor : float
            Epsilon per ground metre where nobody lives: the strongest protection, also given
            to no-data cells.
        epsilon_range : (low, high), optional
            Instead of ``slope``/``floor``: a linear map with epsilon = ``low`` at zero density
            and ``high`` at the raster's largest density (the paper's "epsilon in [0.4, 2.0]"),
            robust to outliers (see ``outlier_factor``).
        units : {"per_km2", "per_cell"}
            What a cell value is: density per km2 of ground, or a count per cell.
        band : int
            Band to read (1-based).
        transform, crs, nodata : optional
            Override or supply the georeferencing and the no-data value.
        nodata_epsilon : None, "nearest" or float
            Epsilon of no-data cells.  None (default): they count as nobody living there, so
            they get ``floor``, the strongest protection; a dense district next to them must
            then blend down to it, which costs accuracy on that edge.  ``"nearest"``: the
            epsilon of the nearest cell with data, for no-data that means "nobody can be
            here" (sea, lakes): it no longer pulls the coast's epsilon down, and the
            guarantee between two points joined across it follows the coast's level.  Do not
            use it where no data means "unknown population".  A number: that epsilon per
            metre.  No-data cells always have zero population in the prior.
        outlier_factor : float or None
            With ``epsilon_range`` only.  A cell denser than ``outlier_factor`` (default 10)
            times the 99th percentile of the populated cells' densities (:data:`OUTLIER_QUANTILE`,
            the nearest actual cell value below it) is an *outlier*: one such cell (a
            mis-coded value, an undeclared no-data value such as 3.4e38, a single tower
            block) would otherwise set the top of the linear scale and flatten the whole map
            to about ``low``.  Outliers get ``high``, the range is scaled to the largest
            density among the other cells, and a :class:`~geopriv.GeoprivWarning` says how
            many there were and where the first is (``info["outlier_cells"]``,
            ``info["density_reference"]``).  Detected on rasters with at least
            :data:`OUTLIER_MIN_CELLS` (100) populated cells; real density rasters stay well
            inside the fence (the shipped Tokyo raster's maximum is 1.3 times its 99th
            percentile), so they keep the paper's linear map exactly.  None: the plain
            linear map to the largest density, outliers included.  Lower epsilon is always
            the stronger guarantee, so either choice is private; this one keeps the map
            informative.
        max_cells : int or None
            Largest raster read from a file or dataset, in cells (default :data:`MAX_CELLS`,
            10^8), checked from its header before any cell is decoded: a compressed file can
            be tiny and decode to gigabytes.  None: no limit.

        Raises
        ------
        RasterError
            The raster cannot be used (no valid cell, negative population, more than
            ``max_cells`` cells, rotated, ...); the message says how to fix it.
        ParameterError
            Options that cannot be used together or out of range.

        Examples
        --------
        >>> import math, geopriv
        >>> pm = geopriv.PrivacyMap.from_population(
        ...     geopriv.datasets.get_path("tokyo_density_200"),
        ...     epsilon_range=(math.log(4) / 2000, math.log(4) / 400))
        >>> pm.shape
        (200, 200)
        """
        values, transform, crs = _read(raster, band, transform, crs, nodata, max_cells)
        if units not in ("per_km2", "per_cell"):
            raise ParameterError(
                "units must be 'per_km2' (density per square km of ground) or 'per_cell' (count per cell)."
            )
        valid = np.isfinite(values)
        if not valid.any():
            raise RasterError(
                "The population raster has no valid cell (all no data). Check the band and nodata value, "
                "or that the file is the one you meant."
            )
        neg = valid & (values < 0)
        if neg.any():
            raise RasterError(
                f"{int(neg.sum())} cell(s) have negative population ({_first_cell(neg)}). Population must be >= 0: "
                "set the no-data value (nodata=...) if negative numbers mean 'no data', or fix the raster."
            )
        scale_max, scale_min = _node_scales(values.shape, transform, crs)
        density = np.where(valid, values, 0.0)
        if units == "per_cell":
            cell_km2 = transform.a * abs(transform.e) / (scale_max * scale_min) / 1e6
            density = density / cell_km2
        if epsilon_range is not None:
            if slope is not None or floor is not None:
                raise ParameterError("Give either epsilon_range=(low, high) or slope= and floor=, not both.")
            low, high = (_positive(v, "epsilon_range") for v in epsilon_range)
            if high < low:
                raise ParameterError("epsilon_range must be (low, high) with low <= high.")
            dmax = float(density.max())
            if dmax <= 0:
                raise RasterError(
                    "The raster's population is zero everywhere, so epsilon_range cannot be scaled to it."
                )
            outliers = _density_outliers(density, valid, outlier_factor)
            dref = float(density[~outliers].max()) if outliers.any() else dmax
            floor = low
            slope = (high - low) / dref
        else:
            if slope is None or floor is None:
                raise ParameterError(
                    "Say how density becomes epsilon: slope= and floor= (epsilon = floor + slope * density, per metre), "
                    "or epsilon_range=(low, high). Paper-style example: epsilon_range=(math.log(4)/2000, math.log(4)/400)."
                )
            floor = _positive(floor, "floor")
            slope = float(slope)
            if not math.isfinite(slope) or slope < 0:
                raise ParameterError("slope must be finite and >= 0: denser areas get at least the floor epsilon.")
        eps = floor + slope * density
        if epsilon_range is not None:
            eps = np.minimum(eps, high)  # outliers (above the reference density) get high
        eps = _fill_nodata(eps, valid, floor if nodata_epsilon is None else nodata_epsilon)
        info = {
            "nodata_epsilon": "floor" if nodata_epsilon is None else nodata_epsilon,
            "source": "population",
            "units": units,
            "floor_per_m": floor,
            "slope_per_m_per_density": slope,
            "density_max": float(density.max()),
            "nodata_cells": int((~valid).sum()),
        }
        if epsilon_range is not None:
            info.update(
                epsilon_range_per_m=[low, high],
                density_reference=dref,
                outlier_cells=int(outliers.sum()),
                outlier_factor=None if outlier_factor is None else float(outlier_factor),
            )
        return cls(eps, transform, crs, ~valid, density, info)

    @classmethod
    def from_epsilon(
        cls,
        raster,
        *,
        band: int = 1,
        transform=None,
        crs=None,
        nodata=None,
        nodata_epsilon=None,
        max_cells: int | None = MAX_CELLS,
    ) -> "PrivacyMap":
        """Privacy map from a raster of epsilon per ground metre.

        No-data cells get ``nodata_epsilon`` (default: the smallest epsilon on the map, i.e.
        the strongest protection).  A GeoTIFF written by :meth:`to_geotiff` reads back as the
        same map.  ``max_cells`` limits the size of a raster read from a file, as in
        :meth:`from_population`.
        """
        values, transform, crs = _read(raster, band, transform, crs, nodata, max_cells)
        valid = np.isfinite(values)
        if not valid.any():
            raise RasterError("The epsilon raster has no valid cell (all no data).")
        bad = valid & (values <= 0)
        if bad.any():
            raise RasterError(
                f"{int(bad.sum())} cell(s) have epsilon <= 0 ({_first_cell(bad)}); epsilon must be > 0 everywhere "
                "(use a small value for strong protection, or mark them as no data)."
            )
        fill = float(values[valid].min()) if nodata_epsilon is None else nodata_epsilon
        eps = _fill_nodata(np.where(valid, values, 1.0), valid, fill)
        info = {"source": "epsilon", "nodata_cells": int((~valid).sum()), "nodata_epsilon_per_m": fill}
        tags = {}
        if isinstance(raster, (str, os.PathLike)):
            import rasterio

            with rasterio.open(raster) as ds:
                tags = ds.tags()
        if "GEOPRIV_INFO" in tags:
            try:
                info["written_from"] = json.loads(tags["GEOPRIV_INFO"])
            except ValueError:  # pragma: no cover - foreign tag
                pass
        return cls(eps, transform, crs, ~valid, None, info)

    # ---------------------------------------------------------------- geometry
    @property
    def shape(self) -> tuple[int, int]:
        return self.epsilon.shape

    @property
    def cell_size(self) -> tuple[float, float]:
        """(width, height) of a cell in CRS units."""
        return float(self.transform.a), float(-self.transform.e)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax) of the raster in CRS units."""
        ny, nx = self.shape
        t = self.transform
        return (t.c, t.f + t.e * ny, t.c + t.a * nx, t.f)

    @property
    def node_x(self) -> np.ndarray:
        """x of the cell centres (columns)."""
        return self.transform.c + self.transform.a * (np.arange(self.shape[1]) + 0.5)

    @property
    def node_y(self) -> np.ndarray:
        """y of the cell centres (rows, north to south)."""
        return self.transform.f + self.transform.e * (np.arange(self.shape[0]) + 0.5)

    @cached_property
    def ground_scale(self) -> tuple[np.ndarray, np.ndarray]:
        """(largest, smallest) CRS units per ground metre at each cell centre, any direction."""
        return _node_scales(self.shape, self.transform, self.crs)

    @cached_property
    def epsilon_crs(self) -> np.ndarray:
        """Epsilon per CRS unit, conservative: epsilon / (largest local scale)."""
        out = self.epsilon / self.ground_scale[0]
        out.flags.writeable = False
        return out

    @property
    def epsilon_min(self) -> float:
        return float(self.epsilon.min())

    @property
    def epsilon_max(self) -> float:
        return float(self.epsilon.max())

    def epsilon_at(self, x, y) -> np.ndarray:
        """Epsilon per metre of the cell containing each (x, y) in the map's CRS (NaN outside)."""
        x = np.asarray(x, float)
        y = np.asarray(y, float)
        t = self.transform
        col = np.floor((x - t.c) / t.a).astype(int)
        row = np.floor((y - t.f) / t.e).astype(int)
        ok = (row >= 0) & (row < self.shape[0]) & (col >= 0) & (col < self.shape[1])
        out = np.full(x.shape, np.nan)
        out[ok] = self.epsilon[row[ok], col[ok]]
        return out

    # ---------------------------------------------------------------- transformations
    def regularised(self, max_slope: float) -> "PrivacyMap":
        """The largest map <= this one whose noise scale 1/epsilon changes by at most ``max_slope`` m per m.

        Only lowers epsilon (a stronger guarantee), and only where the original map changes
        faster than allowed: next to sharp jumps from sparse to dense areas.  ``max_slope``
        is dimensionless; 0.5 means the typical noise radius may grow by at most 0.5 m per
        metre walked away from a dense core.
        """
        max_slope = _positive(max_slope, "max_slope")
        hx, hy = self.cell_size
        smax = self.ground_scale[0]
        # lengths in ground metres (conservative: CRS length / largest scale of the two ends)
        s = 1.0 / smax
        lh, lv, ld, _ = _edge_lengths(hy, hx)
        w = (
            max_slope * lh * np.maximum(s[:, 1:], s[:, :-1]),
            max_slope * lv * np.maximum(s[1:, :], s[:-1, :]),
            max_slope * ld * np.maximum(s[1:, 1:], s[:-1, :-1]),
            max_slope * ld * np.maximum(s[1:, :-1], s[:-1, 1:]),
        )
        # largest-epsilon map = smallest noise scale L with L >= 1/eps and L max_slope-Lipschitz:
        # L = max_v (1/eps(v) - k d(u, v)) = -min_v (-1/eps(v) + k d(u, v))
        neg, _ = lipschitz_envelope(-1.0 / self.epsilon, w)
        cand = 1.0 / (-neg)
        eps = np.where(cand < self.epsilon * (1 - 1e-12), cand, self.epsilon)  # ignore rounding-level changes
        info = dict(self.info)
        info["regularised"] = {
            "max_slope": max_slope,
            "cells_lowered": int((eps < self.epsilon * (1 - 1e-12)).sum()),
            "max_lowering_factor": float((eps / self.epsilon).min()),
        }
        return PrivacyMap(eps, self.transform, self.crs, self.nodata_mask, self.population, info)

    def prior(self, prior=None) -> np.ndarray:
        """A probability vector over the cells: ``prior`` as given (array), the population, or uniform."""
        if prior is None or (isinstance(prior, str) and prior == "population"):
            if self.population is None:
                if isinstance(prior, str):
                    raise ParameterError("This map was not built from population; pass prior= as an array.")
                p = (~self.nodata_mask).astype(float)
            else:
                p = self.population.astype(float)
        elif isinstance(prior, str) and prior == "uniform":
            p = np.ones(self.shape)
        else:
            p = np.array(prior, dtype=float)
            if p.shape != self.shape:
                raise ParameterError(f"prior must have the map's shape {self.shape}; got {p.shape}.")
        if not np.all(np.isfinite(p)) or (p < 0).any() or p.sum() <= 0:
            raise ParameterError("prior must be finite, >= 0 and not all zero.")
        return p / p.sum()

    def to_geotiff(self, path) -> None:
        """Write epsilon per ground metre as a float64 GeoTIFF (no-data cells written filled).

        Atomically, through :func:`geopriv.io.write_new_file`: an existing file is replaced, and a
        symbolic link at ``path`` is replaced itself, never written through to its target.
        """
        import os

        from rasterio.io import MemoryFile

        from .io import write_new_file

        profile = {
            "driver": "GTiff",
            "height": self.shape[0],
            "width": self.shape[1],
            "count": 1,
            "dtype": "float64",
            "crs": self.crs.to_wkt(),
            "transform": self.transform,
            "compress": "deflate",
        }
        with MemoryFile() as mem:
            with mem.open(**profile) as ds:
                ds.write(self.epsilon, 1)
                ds.update_tags(
                    units="epsilon per ground metre",
                    GEOPRIV_INFO=json.dumps(self.info, default=str),
                )
                ds.set_band_description(1, "epsilon per ground metre (geopriv PrivacyMap)")
            data = mem.read()
        mask = os.umask(0)
        os.umask(mask)
        write_new_file(path, lambda fh: fh.write(data), overwrite=True, mode=0o666 & ~mask)

    def __repr__(self) -> str:
        ny, nx = self.shape
        hx, hy = self.cell_size
        return (
            f"PrivacyMap({ny} x {nx} cells of {hx:.4g} x {hy:.4g} CRS units, {self.crs.name!r}, "
            f"epsilon {self.epsilon_min:.4g} .. {self.epsilon_max:.4g} per metre, "
            f"{int(self.nodata_mask.sum())} no-data cells)"
        )


def _density_outliers(density: np.ndarray, valid: np.ndarray, factor) -> np.ndarray:
    """Cells denser than ``factor`` x the 99th percentile of the populated cells (see ``from_population``).

    Warns (GeoprivWarning) when there are any; all False when ``factor`` is None or there are
    fewer than OUTLIER_MIN_CELLS populated cells.
    """
    import warnings

    none = np.zeros(density.shape, bool)
    if factor is None:
        return none
    factor = _positive(factor, "outlier_factor")
    if factor < 1:
        raise ParameterError(
            "outlier_factor must be >= 1 (a multiple of the 99th percentile of the densities), or None."
        )
    populated = density[valid & (density > 0)]
    if populated.size < OUTLIER_MIN_CELLS:
        return none
    reference = float(np.quantile(populated, OUTLIER_QUANTILE, method="lower"))
    outliers = valid & (density > factor * reference)
    if outliers.any():
        warnings.warn(
            GeoprivWarning(
                f"{int(outliers.sum())} cell(s) of the population raster are more than {factor:g} times denser than its "
                f"99th percentile ({_first_cell(outliers)}); scaled to them, the epsilon range would flatten the whole map "
                "to about its low end. They are treated as outliers: they get the high epsilon and the range is scaled to "
                "the densest other cell.",
                fix=Fix(
                    "outliers",
                    python="If they are an undeclared no-data value, pass nodata=<that value>; if they are "
                    "real, pass outlier_factor=None (plain linear map) or give slope= and floor= "
                    "instead.",
                    cli="If they are an undeclared no-data value, give --nodata <that value>; if they are real, give "
                    "--slope and --floor instead.",
                    qgis="If they are an undeclared no-data value, save the raster with that no-data value first; if "
                    "they are real, set the floor and the slope instead.",
                ),
            ),
            stacklevel=3,
        )
    return outliers


def _fill_nodata(eps: np.ndarray, valid: np.ndarray, how) -> np.ndarray:
    """Epsilon with no-data cells set to ``how``: a number, or "nearest" (nearest valid cell)."""
    if valid.all():
        return eps
    if isinstance(how, str):
        if how != "nearest":
            raise ParameterError('nodata_epsilon must be None, "nearest" or a number (epsilon per metre).')
        from scipy.ndimage import distance_transform_edt

        idx = distance_transform_edt(~valid, return_distances=False, return_indices=True)
        return eps[idx[0], idx[1]]
    return np.where(valid, eps, _positive(how, "nodata_epsilon"))


def _positive(value, name) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a positive number, got {value!r}.") from None
    if not math.isfinite(v) or v <= 0:
        raise ParameterError(f"{name} must be finite and > 0, got {value!r}.")
    return v


def _node_scales(shape, transform, crs):
    ny, nx = shape
    x = transform.c + transform.a * (np.arange(nx) + 0.5)
    y = transform.f + transform.e * (np.arange(ny) + 0.5)
    gx, gy = np.meshgrid(x, y)
    smax, smin = ground_scale(crs, gx.ravel(), gy.ravel())
    return smax.reshape(shape), smin.reshape(shape)
