"""Measured privacy of a point release: the optimal Bayesian adversary's error, in ground metres.

Shokri, Theodorakopoulos, Le Boudec and Hubaux, "Quantifying Location Privacy" (IEEE S&P 2011):
the privacy a location-privacy mechanism gives is the expected error of the adversary who knows
the mechanism and a prior over where people are, and who makes the best guess from what is
released.  Here it is computed *exactly on a grid*:

* inputs ``u`` are the cells of a public grid over the public area, with a prior ``pi(u)``
  (uniform over the area, or a population raster);
* outputs ``z`` are the same cells: a release falls in one of them; a release beyond the area
  is shown in the nearest boundary cell (what a release clamped to its declared area shows:
  geopriv clamps releases with ``bounds=``);
* the channel ``K(z | u)`` is the mechanism's own law on that grid: for planar Laplace the mass
  of the noise density ``eps^2 / (2 pi) exp(-eps d)`` falling in each cell (integrated on a 5 x 5
  sub-grid per cell), for the eikonal mechanism its rows (kernels, weights and floor);
* for each output the adversary guesses the grid cell ``g`` minimising the posterior expected
  ground distance ``sum_u pi(u) K(z|u) d(g, u)`` (the optimal attack of Shokri et al., with the
  Euclidean distance: a discrete geometric median), and ``adversary_error`` is its expected
  distance to the truth.  Its guesses are the optimal remapping of the release for that prior
  (Chatzikokolakis, ElSalamouny, Palamidessi, "Efficient utility improvement for location privacy",
  PoPETs 2017): applying them to a release is post-processing and can only lower the expected
  error under that prior.

How: for every output, the costs of all guesses are one convolution of its posterior with the
distance kernel (FFT).  For planar Laplace the outputs away from the boundary share one
translation-invariant kernel, and the cost of "guess = output + delta" is a single convolution of
the prior with ``K(v) d(v + delta)`` for all outputs at once; offsets are taken in rings of
growing length until the triangle inequality certifies that no farther guess can be better
(``cost(g) >= |g - z| m(z) - cost(z)``), and only the outputs not certified then go the per-output
way.  The result is exact for the grid model, within floating point.

k-equivalent: for each output, the smallest set of cells holding ``confidence`` (90 %) of the
posterior; ``k`` is the expected number of people in it (population per cell), so an analyst used
to k-anonymity reads "after this release, a person hides among about k people".  It needs a
population raster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .exceptions import CRSError, Fix, ParameterError, ParameterTypeError

__all__ = [
    "AdversaryError",
    "adversary_error",
    "empirical_adversary_error",
    "Calibration",
    "calibrate",
    "DEFAULT_CELLS_PER_SIDE",
    "DEFAULT_CONFIDENCE",
    "CALIBRATION_TARGETS",
]

#: default grid: the public area's longest side in this many cells
DEFAULT_CELLS_PER_SIDE = 100
#: default posterior mass of the k-equivalent region
DEFAULT_CONFIDENCE = 0.9
#: what :func:`calibrate` can aim at
CALIBRATION_TARGETS = ("displacement", "adversary_error", "k_equivalent")
#: default grid step, as a share of the noise's scale 1 / epsilon (when coarser than DEFAULT_CELLS_PER_SIDE)
NOISE_SCALE_SHARE = 0.2
#: calibrate's default grid: the area's longest side in this many cells
CALIBRATION_CELLS = 60
#: the largest grid (cells) the exact computation accepts
MAX_GRID_CELLS = 250_000
#: the k-equivalent posterior regions are found on a grid of at most this many cells (coarsened by an integer factor)
K_GRID_CELLS = 4_096
#: sub-samples per cell side when integrating the Laplace density over a cell
_SUB = 5
#: tail mass of the Laplace noise left outside its kernel window (renormalised; recorded)
_TAIL = 1e-7
#: the name of the grid's CRS over an area in longitude and latitude
AEQD_NAME = "local azimuthal equidistant, centred on the public area"
#: outputs per block on the per-output way (memory: block x cells x 8 bytes, several times)
_BLOCK_BYTES = 64 * 2**20

_AREA_FIX = Fix(
    "declare_area",
    python="Pass area=(xmin, ymin, xmax, ymax) in the CRS of the data (public knowledge: a city's "
    "bounds, never the data's own extent), or a GeoDataFrame of public polygons.",
    cli="Give the public area with --bounds XMIN YMIN XMAX YMAX.",
    qgis="Set the 'Public study area' extent.",
)


# ------------------------------------------------------------------------------------------ the grid
@dataclass(frozen=True)
class _Grid:
    ny: int
    nx: int
    transform: object  # affine.Affine, north-up, CRS units
    crs: object  # pyproj.CRS
    hx: float  # cell width, ground metres
    hy: float  # cell height, ground metres

    @property
    def n(self) -> int:
        return self.ny * self.nx

    def centres(self) -> np.ndarray:
        """(n, 2) cell centres in CRS units, row-major from the north-west corner."""
        t = self.transform
        x = t.c + t.a * (np.arange(self.nx) + 0.5)
        y = t.f + t.e * (np.arange(self.ny) + 0.5)
        return np.column_stack([np.tile(x, self.ny), np.repeat(y, self.nx)])

    def locate(self, xy: np.ndarray) -> np.ndarray:
        """Flat index of the cell holding each point; points beyond the grid go to the nearest boundary cell."""
        t = self.transform
        col = np.floor((xy[:, 0] - t.c) / t.a).astype(np.int64)
        row = np.floor((xy[:, 1] - t.f) / t.e).astype(np.int64)
        return np.clip(row, 0, self.ny - 1) * self.nx + np.clip(col, 0, self.nx - 1)

    def distance_kernel(self, shape) -> np.ndarray:
        """Ground distance (m) of every cell offset, wrapped for a circular convolution of ``shape``.

        Offset (dy, dx) sits at index (dy mod L0, dx mod L1); with L >= 2 n - 1 no two offsets of the
        grid share an index, so the circular convolution of a grid with it is the linear one."""
        out = np.zeros(shape)
        dy = np.arange(-(self.ny - 1), self.ny)
        dx = np.arange(-(self.nx - 1), self.nx)
        out[np.ix_(dy % shape[0], dx % shape[1])] = np.hypot((dx * self.hx)[None, :], (dy * self.hy)[:, None])
        return out

    def coarsened(self, f: int) -> "_Grid":
        from affine import Affine

        t = self.transform
        return _Grid(
            -(-self.ny // f),
            -(-self.nx // f),
            Affine(t.a * f, 0.0, t.c, 0.0, t.e * f, t.f),
            self.crs,
            self.hx * f,
            self.hy * f,
        )


def _block_sum(a: np.ndarray, f: int) -> np.ndarray:
    """Sum ``a`` (ny, nx) over f x f blocks (the last ones partial)."""
    ny, nx = a.shape
    pad = np.zeros((-(-ny // f) * f, -(-nx // f) * f))
    pad[:ny, :nx] = a
    return pad.reshape(pad.shape[0] // f, f, pad.shape[1] // f, f).sum(axis=(1, 3))


# ------------------------------------------------------------------------------------------ channels
class _LaplaceChannel:
    """Planar Laplace (epsilon per ground metre) on a grid, releases clamped to the grid."""

    invariant = True

    def __init__(self, epsilon_per_m: float, grid: _Grid):
        self.epsilon = float(epsilon_per_m)
        self.grid = grid
        # kernel window: the radius beyond which the radial tail (1 + eps r) exp(-eps r) is below _TAIL,
        # never more than the grid's own extent (beyond it every release is clamped anyway: the rest is folded)
        r_tail = 1.0
        while (1 + r_tail) * math.exp(-r_tail) > _TAIL:
            r_tail += 0.5
        ry = min(int(math.ceil(r_tail / (self.epsilon * grid.hy))), 2 * grid.ny + 2)
        rx = min(int(math.ceil(r_tail / (self.epsilon * grid.hx))), 2 * grid.nx + 2)
        self.ry, self.rx = ry, rx
        s = (np.arange(_SUB) + 0.5) / _SUB - 0.5
        oy = (np.arange(-ry, ry + 1)[:, None] + s[None, :]) * grid.hy  # (2ry+1, SUB)
        ox = (np.arange(-rx, rx + 1)[:, None] + s[None, :]) * grid.hx
        d = np.hypot(oy[:, None, :, None], ox[None, :, None, :])  # (Y, X, SUB, SUB)
        dens = self.epsilon**2 / (2 * math.pi) * np.exp(-self.epsilon * d)
        k = dens.mean(axis=(2, 3)) * grid.hx * grid.hy
        self.window_mass = float(k.sum())
        self.kernel = k / k.sum()  # (2ry+1, 2rx+1), offset (0, 0) at [ry, rx]
        # prefix sums for the folded (clamped) columns: mass of offsets in [y0, y1] x [x0, x1]
        self._cum = np.zeros((2 * ry + 2, 2 * rx + 2))
        self._cum[1:, 1:] = self.kernel.cumsum(0).cumsum(1)

    def _range_mass(self, y0, y1, x0, x1):
        """Kernel mass of offsets dy in [y0, y1], dx in [x0, x1] (broadcast arrays, clipped to the window)."""
        ry, rx = self.ry, self.rx
        a0 = np.clip(y0 + ry, 0, 2 * ry + 1)
        a1 = np.clip(y1 + ry + 1, 0, 2 * ry + 1)
        b0 = np.clip(x0 + rx, 0, 2 * rx + 1)
        b1 = np.clip(x1 + rx + 1, 0, 2 * rx + 1)
        a1, b1 = np.maximum(a1, a0), np.maximum(b1, b0)
        c = self._cum
        return c[a1, b1] - c[a0, b1] - c[a1, b0] + c[a0, b0]

    def columns(self, z: np.ndarray) -> np.ndarray:
        """K(z | u) for outputs ``z`` (flat indices): (len(z), n)."""
        g = self.grid
        big = 10**9
        zr, zc = np.divmod(z, g.nx)
        y0 = np.where(zr == 0, -big, zr)[:, None]
        y1 = np.where(zr == g.ny - 1, big, zr)[:, None]
        x0 = np.where(zc == 0, -big, zc)[:, None]
        x1 = np.where(zc == g.nx - 1, big, zc)[:, None]
        ur = np.repeat(np.arange(g.ny), g.nx)[None, :]
        uc = np.tile(np.arange(g.nx), g.ny)[None, :]
        return self._range_mass(y0 - ur, y1 - ur, x0 - uc, x1 - uc)

    def describe(self) -> dict:
        return {
            "mechanism": "planar_laplace",
            "epsilon_per_m": self.epsilon,
            "kernel_window_mass": round(self.window_mass, 9),
        }


class _EikonalChannel:
    """An eikonal mechanism's law on its privacy map's grid (inputs: its nodes; outputs: its output nodes)."""

    invariant = False

    def __init__(self, mech, grid: _Grid):
        import scipy.sparse as sp

        if not mech.kernels_held:
            raise ParameterError(
                "The adversary error needs the mechanism's kernels in memory: build or load it with kernels='held'."
            )
        self.mech = mech
        self.grid = grid
        n, m = len(mech.normaliser), len(mech.weights)
        self._csc = sp.csr_matrix((mech.kernel.astype(np.float64), mech.indices, mech.indptr), shape=(n, m)).tocsc()
        self._inv_s = 1.0 / np.asarray(mech.normaliser, float)
        self._floor = math.exp(-mech.cap)
        self.n_outputs = m
        # the output nodes' cells on the input grid (where a guess "the output itself" sits)
        self.output_cells = grid.locate(np.asarray(mech.output_xy, float))

    def columns(self, z: np.ndarray) -> np.ndarray:
        w = np.asarray(self.mech.weights, float)[z]
        dense = self._csc[:, z].toarray().T  # (B, n)
        return w[:, None] * (dense + self._floor) * self._inv_s[None, :]

    def describe(self) -> dict:
        return {"mechanism": "eikonal", "mechanism_id": self.mech.mechanism_id}


# ------------------------------------------------------------------------------------------ the result
@dataclass(frozen=True, eq=False)
class AdversaryError:
    """The optimal Bayesian adversary against a point release, on a public grid (:func:`adversary_error`).

    Made by :func:`adversary_error`; every field is a function of the public parameters (mechanism,
    area, prior, population), none of any data.

    Parameters
    ----------
    expected_error_m : float
        Expected ground distance between the adversary's best guess and the truth, metres.
    displacement_m : float
        Expected distance between the release (its grid cell) and the truth, metres: what the
        adversary gets by taking the release at face value.
    error_map : ndarray (ny, nx)
        The adversary's expected error for a person in each cell, metres (NaN outside the area).
    k_equivalent : float or None
        Expected number of people in the adversary's ``confidence`` posterior region (needs a
        population).
    k_map : ndarray (ny, nx) or None
        The same for a person in each cell.
    confidence : float
        Posterior mass of the k-equivalent region.
    shape : tuple
        (ny, nx) of the grid.
    transform : affine.Affine
        North-up transform of the grid (CRS units).
    crs : pyproj.CRS
        The grid's CRS (projected).
    prior : str
        "uniform", "population" or "array".
    parameters : dict
        The public parameters: mechanism, epsilon, grid, prior, what the outputs and guesses are.
    guess_cells : ndarray of int
        For every output, the grid cell (row-major index) the adversary guesses.
    _locate : callable
        Maps released coordinates (n, 2) in ``crs`` to output indices (internal).

    See Also
    --------
    adversary_error : Computes it.
    empirical_adversary_error : The adversary's guesses against a concrete release.

    Examples
    --------
    >>> adv = geopriv.adversary_error(epsilon=0.01, area=(0, 0, 2000, 2000), crs="EPSG:32650", cell=100)
    >>> adv.shape
    (20, 20)
    >>> bool(adv.expected_error_m <= adv.displacement_m)   # the release itself is one possible guess
    True
    >>> sorted(adv.summary().index)[:2]
    ['adversary_error_m', 'cell_m']
    """

    expected_error_m: float
    displacement_m: float
    error_map: np.ndarray
    k_equivalent: float | None
    k_map: np.ndarray | None
    confidence: float
    shape: tuple
    transform: object
    crs: object
    prior: str
    parameters: dict = field(default_factory=dict)
    guess_cells: np.ndarray = field(default=None, repr=False)  # per output: the guessed input cell
    _locate: object = field(default=None, repr=False)  # released xy -> output index

    def __repr__(self) -> str:
        """One line: the mechanism, the measures and the grid (the maps and the CRS's definition are fields)."""
        from .provenance import mechanism_name

        p = self.parameters
        eps = p.get("epsilon_per_m")
        what = mechanism_name(p) + (f", epsilon {eps:.4g} per metre" if eps is not None else "")
        k = (
            ""
            if self.k_equivalent is None
            else f", k-equivalent {self.k_equivalent:,.1f} people at {100 * self.confidence:g} %"
        )
        ny, nx = self.shape
        cell = p.get("cell_m")
        cells = f"{ny} x {nx} cells" + (f" of {cell:.4g} m" if cell is not None else "")
        return (
            f"AdversaryError({what}: expected error {self.expected_error_m:,.1f} m, expected displacement "
            f"{self.displacement_m:,.1f} m{k}; {self.prior} prior, {cells}, {_crs_label(self.crs)})"
        )

    # ---------------------------------------------------------------- use
    def guess(self, released) -> "pd.Series":
        """The adversary's guess for every point of ``released``: a GeoSeries (same index and CRS).

        It is the optimal remapping of the release under this prior (post-processing: anyone can
        apply it, the guarantee is unchanged).  Points are located in the grid in the grid's CRS.
        """
        import geopandas as gpd

        gs = _points(released, "released")
        xy = _xy_in(gs, self.crs)
        out = self._locate(xy)
        g = self.guess_cells[out]
        grid_x = self.transform.c + self.transform.a * (g % self.shape[1] + 0.5)
        grid_y = self.transform.f + self.transform.e * (g // self.shape[1] + 0.5)
        res = gpd.GeoSeries(gpd.points_from_xy(grid_x, grid_y), index=gs.index, crs=self.crs)
        return res if _crs_equal(gs.crs, self.crs) else res.to_crs(gs.crs)

    def summary(self) -> pd.Series:
        """The scalars, named for tables and reports."""
        return pd.Series(
            {
                "adversary_error_m": self.expected_error_m,
                "expected_displacement_m": self.displacement_m,
                "k_equivalent": np.nan if self.k_equivalent is None else self.k_equivalent,
                "epsilon_per_m": self.parameters.get("epsilon_per_m", np.nan),
                "cell_m": self.parameters.get("cell_m", np.nan),
                "confidence": self.confidence,
            },
            name="adversary",
        )

    def to_raster(self, path, *, overwrite: bool = False):
        """Write the error map (band 1, metres) and the k-equivalent map (band 2, when computed) as a GeoTIFF.

        Both are functions of the public parameters only (mechanism, area, prior, population), not of
        any data.  Written atomically; an existing file is refused unless ``overwrite``.  Returns the path.
        """
        from .io import write_raster

        bands = [np.asarray(self.error_map, np.float32)]
        names = ["adversary error (m)"]
        if self.k_map is not None:
            bands.append(np.asarray(self.k_map, np.float32))
            names.append(f"people in the {self.confidence:.0%} posterior region")
        return write_raster(
            path,
            bands,
            transform=self.transform,
            crs=self.crs,
            nodata=float("nan"),
            band_names=names,
            overwrite=overwrite,
        )

    def plot(self, ax=None, what: str = "error", **kwargs):
        """Map ``what`` = "error" (the error map, metres) or "k" (the k-equivalent map); returns the Axes."""
        import matplotlib.pyplot as plt

        if what not in ("error", "k"):
            raise ParameterError('what must be "error" or "k".')
        data = self.error_map if what == "error" else self.k_map
        if data is None:
            raise ParameterError("No k-equivalent was computed: pass population= to adversary_error.")
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 5))
        t = self.transform
        ny, nx = self.shape
        extent = (t.c, t.c + t.a * nx, t.f + t.e * ny, t.f)
        im = ax.imshow(data, extent=extent, origin="upper", cmap=kwargs.pop("cmap", "viridis"), **kwargs)
        label = "adversary error (m)" if what == "error" else f"people in the {self.confidence:.0%} posterior region"
        ax.figure.colorbar(im, ax=ax, label=label, shrink=0.8)
        ax.set_title(f"Optimal adversary: {self.expected_error_m:,.0f} m expected error")
        return ax


def _crs_label(crs) -> str:
    """A CRS in a few words: its EPSG code, else its name, else its projection's method."""
    from pyproj import CRS

    if crs is None:
        return "no CRS"
    crs = CRS.from_user_input(crs)
    code = crs.to_epsg(min_confidence=90)
    if code is not None:
        return f"EPSG:{code}"
    if crs.name and crs.name.lower() != "unknown":
        return repr(crs.name)
    op = crs.coordinate_operation
    return f"a local {op.method_name} CRS" if op is not None else "a custom CRS"


def _crs_equal(a, b) -> bool:
    from pyproj import CRS

    return a is not None and b is not None and CRS.from_user_input(a).equals(CRS.from_user_input(b))


def _points(data, what: str):
    """The points of ``data`` (geopriv.points' checks: a GeoDataFrame or GeoSeries with a CRS, finite points)."""
    from .points import as_geoseries, point_xy

    gs = as_geoseries(data, what)
    point_xy(gs, what)
    return gs


def _xy_in(gs, crs) -> np.ndarray:
    if not _crs_equal(gs.crs, crs):
        gs = gs.to_crs(crs)
    return np.column_stack([gs.x.to_numpy(float), gs.y.to_numpy(float)])


# ------------------------------------------------------------------------------------------ solving
def _fft_shape(a: int, b: int) -> tuple:
    from scipy.fft import next_fast_len

    return next_fast_len(a, real=True), next_fast_len(b, real=True)


class _Solver:
    """Per-output optimal guesses, costs and maps for one channel, prior and population."""

    def __init__(self, channel, grid: _Grid, prior: np.ndarray, area_mask: np.ndarray):
        self.ch, self.g = channel, grid
        self.prior = prior.ravel()
        self.mask = area_mask.ravel()
        n_out = grid.n if channel.invariant else channel.n_outputs
        self.best = np.full(n_out, np.nan)  # prior-weighted cost of the best guess (sum over u)
        self.mass = np.zeros(n_out)  # P(z)
        self.at_face = np.zeros(n_out)  # prior-weighted cost of "guess = the release's own cell"
        self.guess = np.zeros(n_out, np.int64)
        self.err_map = np.zeros(grid.n)  # sum_z K(z|u) d(guess(z), u)
        self.done = np.zeros(n_out, bool)
        self._dk_fft = None

    # ----------------------------------------------------------- the per-output way (any channel)
    def _distance_fft(self):
        if self._dk_fft is None:
            from scipy import fft

            g = self.g
            self._shape = _fft_shape(2 * g.ny - 1, 2 * g.nx - 1)
            self._dk_fft = fft.rfft2(g.distance_kernel(self._shape), workers=-1)
        return self._dk_fft

    def per_output(self, z: np.ndarray, progress=None) -> None:
        """Exact costs of every guess for the outputs ``z``: their posteriors convolved with the distance kernel."""
        from scipy import fft

        g = self.g
        if len(z) == 0:
            return
        dk = self._distance_fft()
        centres = g.centres()
        bsz = max(1, int(_BLOCK_BYTES // (8 * (self._shape[0] * self._shape[1] + 4 * g.n))))
        out_cell = z if self.ch.invariant else None
        for i in range(0, len(z), bsz):
            zb = z[i : i + bsz]
            cols = self.ch.columns(zb)  # (B, n): K(z|u)
            w = cols * self.prior[None, :]
            m = w.sum(axis=1)
            spec = fft.rfft2(w.reshape(len(zb), g.ny, g.nx), self._shape, workers=-1)
            cost = fft.irfft2(spec * dk[None], self._shape, workers=-1)
            cost = cost[:, : g.ny, : g.nx].reshape(len(zb), g.n)
            # the release at face value is its own cell, read before guesses are limited to the area: a cell of the
            # grid's overhang (its centre beyond a rectangle whose sides are not whole cells) shows releases too
            self.at_face[zb] = (
                np.maximum(cost[np.arange(len(zb)), out_cell[i : i + bsz]], 0.0)
                if out_cell is not None
                else self._face_cost(zb, w)
            )
            cost[:, ~self.mask] = np.inf  # guesses are cells of the public area
            best = cost.argmin(axis=1)
            self.guess[zb] = best
            self.best[zb] = np.maximum(cost[np.arange(len(zb)), best], 0.0)
            self.mass[zb] = m
            d = np.hypot(*((centres[best][:, None, :] - centres[None, :, :]) / self._unit()).transpose(2, 0, 1))
            self.err_map += (cols * d).sum(axis=0)
            self.done[zb] = True
            if progress is not None:
                progress(min(i + bsz, len(z)), len(z))

    def _unit(self) -> np.ndarray:
        """CRS units per ground metre along x and y (cells are hx, hy metres)."""
        t = self.g.transform
        return np.array([t.a / self.g.hx, -t.e / self.g.hy])

    def _face_cost(self, zb, w) -> np.ndarray:
        """Prior-weighted distance from the released position (eikonal: the output's release position) to u."""
        pos = np.asarray(self.ch.mech.release_xy, float)[zb]
        centres = self.g.centres()
        d = np.hypot(*((pos[:, None, :] - centres[None, :, :]) / self._unit()).transpose(2, 0, 1))
        return (w * d).sum(axis=1)

    # ----------------------------------------------------------- planar Laplace: the interior at once
    def interior(self, progress=None) -> np.ndarray:
        """Outputs away from the boundary (one translation-invariant kernel), by rings of guess offsets.

        Returns the interior outputs whose best guess is not certified (left to :meth:`per_output`)."""
        from scipy import fft

        ch, g = self.ch, self.g
        if g.ny < 3 or g.nx < 3:
            return np.zeros(0, np.int64)
        k = ch.kernel
        ry, rx = ch.ry, ch.rx
        shape = _fft_shape(g.ny + 2 * ry, g.nx + 2 * rx)
        pi = self.prior.reshape(g.ny, g.nx)
        pi_f = fft.rfft2(pi, shape, workers=-1)

        def conv(h):  # sum_u pi(u) h(z - u) for every cell z of the grid
            full = fft.irfft2(pi_f * fft.rfft2(h, shape, workers=-1), shape, workers=-1)
            return full[ry : ry + g.ny, rx : rx + g.nx]

        vy = (np.arange(-ry, ry + 1) * g.hy)[:, None]
        vx = (np.arange(-rx, rx + 1) * g.hx)[None, :]
        inner = (slice(1, g.ny - 1), slice(1, g.nx - 1))
        mass = conv(k)[inner]
        zero = conv(k * np.hypot(vx, vy))[inner]  # cost of guessing the output's own cell
        best = zero.copy()
        best_off = np.zeros(best.shape + (2,), np.int64)
        zr, zc = np.mgrid[1 : g.ny - 1, 1 : g.nx - 1]
        inside_area = self.mask.reshape(g.ny, g.nx)
        best[~inside_area[inner]] = np.inf
        # offsets by ground length, in rings; the largest useful: twice the largest conditional error
        oy, ox = np.mgrid[-(g.ny - 1) : g.ny, -(g.nx - 1) : g.nx]
        length = np.hypot(oy * g.hy, ox * g.hx)
        order = np.argsort(length.ravel(), kind="stable")
        lengths = length.ravel()[order]
        oy, ox = oy.ravel()[order], ox.ravel()[order]
        pos = mass > 1e-300
        budget = max(64, g.n // 4)
        i = 1  # offset (0, 0) done
        step = max(g.hx, g.hy)
        total = len(order)
        while i < total:
            ring_end = np.searchsorted(lengths, lengths[i] + step, side="left")
            for j in range(i, ring_end):
                dy, dx = int(oy[j]), int(ox[j])
                gr, gc = zr + dy, zc + dx
                valid = (gr >= 0) & (gr < g.ny) & (gc >= 0) & (gc < g.nx)
                if not valid.any():
                    continue
                valid &= inside_area[np.clip(gr, 0, g.ny - 1), np.clip(gc, 0, g.nx - 1)]
                c = conv(k * np.hypot(vx + dx * g.hx, vy + dy * g.hy))[inner]
                better = valid & (c < best)
                best[better] = c[better]
                best_off[better] = (dy, dx)
            i = ring_end
            if progress is not None:
                progress(i, total)
            if i >= total or i > budget:  # more offsets than outputs: the per-output way is cheaper for the rest
                break
            # certified: no guess at least lengths[i] away can beat the best (triangle inequality)
            bound = lengths[i] * mass - zero
            if np.all(~pos | (bound >= best)):
                break
        certified = ~pos | (i >= total) | (lengths[min(i, total - 1)] * mass - zero >= best)
        idx = (zr * g.nx + zc).ravel()
        gidx = ((zr + best_off[..., 0]) * g.nx + zc + best_off[..., 1]).ravel()
        ok = certified.ravel() & np.isfinite(best.ravel())
        z_ok = idx[ok]
        self.best[z_ok] = np.maximum(best.ravel()[ok], 0.0)
        self.mass[z_ok] = mass.ravel()[ok]
        self.at_face[z_ok] = np.maximum(zero.ravel()[ok], 0.0)
        self.guess[z_ok] = gidx[ok]
        self.done[z_ok] = True
        # error map of the certified outputs: for each offset used, sum_z [off(z) = o] K(z - u) d(z + o - u)
        offs = best_off.reshape(-1, 2)[ok]
        uniq, inv = np.unique(offs, axis=0, return_inverse=True)
        sel = np.zeros((g.ny, g.nx))
        for q, (dy, dx) in enumerate(uniq):
            sel[:] = 0.0
            rows = z_ok[inv.ravel() == q]
            sel.flat[rows] = 1.0
            h = (k * np.hypot(vx + dx * g.hx, vy + dy * g.hy))[::-1, ::-1]  # correlation: sum_z sel(z) h(z - u)
            full = fft.irfft2(fft.rfft2(sel, shape, workers=-1) * fft.rfft2(h, shape, workers=-1), shape, workers=-1)
            self.err_map += full[ry : ry + g.ny, rx : rx + g.nx].ravel()
        return idx[~ok]


def _k_equivalent(channel, grid: _Grid, prior: np.ndarray, people: np.ndarray, confidence: float, outputs=None):
    """(expected k, k per input cell): people in the smallest posterior region holding ``confidence``."""
    n_out = grid.n if channel.invariant else channel.n_outputs
    z_all = np.arange(n_out) if outputs is None else outputs
    p = prior.ravel()
    pop = people.ravel()
    k_exp, k_map = 0.0, np.zeros(grid.n)
    bsz = max(1, int(_BLOCK_BYTES // (8 * 6 * grid.n)))
    for i in range(0, len(z_all), bsz):
        zb = z_all[i : i + bsz]
        cols = channel.columns(zb)
        w = cols * p[None, :]
        m = w.sum(axis=1)
        keep = m > 0
        post = np.zeros_like(w)
        post[keep] = w[keep] / m[keep, None]
        order = np.argsort(-post, axis=1, kind="stable")
        sp = np.take_along_axis(post, order, axis=1)
        cum = np.cumsum(sp, axis=1)
        last = np.minimum((cum < confidence - 1e-12).sum(axis=1), grid.n - 1)  # cells up to and including this one
        cpop = np.cumsum(pop[order], axis=1)
        kz = cpop[np.arange(len(zb)), last]
        kz[~keep] = 0.0
        k_exp += float((m * kz).sum())
        k_map += (cols * kz[:, None]).sum(axis=0)
    return k_exp, k_map


# ------------------------------------------------------------------------------------------ inputs
def _epsilon(epsilon, level, radius) -> float:
    if epsilon is not None and (level is not None or radius is not None):
        raise ParameterError("Give epsilon (per metre), or level and radius, not both.")
    if epsilon is None:
        if level is None or radius is None:
            raise ParameterError(
                "The adversary error needs the mechanism's privacy level (odds change by at most e^level "
                "within radius metres).",
                fix=Fix(
                    "privacy",
                    python="Pass level and radius (e.g. level=math.log(4), radius=200), epsilon per ground metre, "
                    "an EikonalMechanism or a GeoDataFrame released by perturb.",
                    cli="Give --level and --radius (e.g. --level ln4 --radius 200), or --epsilon per ground metre.",
                    qgis="Set the privacy level and radius, or epsilon per ground metre.",
                ),
            )
        epsilon = float(level) / float(radius)
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError("epsilon must be a finite number > 0 (per ground metre).")
    return epsilon


def _from_release(released, area):
    """(epsilon per metre, crs, area) from a released GeoDataFrame's provenance record."""
    rec = getattr(released, "attrs", {}).get("geopriv")
    if not isinstance(rec, dict):
        raise ParameterError(
            "This GeoDataFrame has no geopriv release record (attrs['geopriv']): pass the "
            "mechanism's epsilon (or level and radius) instead."
        )
    mech = str(rec.get("mechanism", ""))
    if mech not in ("planar_laplace", "spherical_laplace"):
        raise ParameterError(
            f"The release was made by {mech!r}: pass that mechanism object (an EikonalMechanism) "
            "to adversary_error, not its output."
        )
    eps = float(rec["epsilon_per_m"])
    if area is None:
        area = rec.get("declared_bounds")
        if area is None:
            raise ParameterError(
                "The release declared no public area (bounds=), so the adversary's grid would "
                "have to come from the data: pass area=.",
                fix=_AREA_FIX,
            )
    return eps, released.crs, area


def _area(area, crs):
    """(rect, region geometry or None, crs) of a public area."""
    import geopandas as gpd
    from pyproj import CRS

    if area is None:
        raise ParameterError(
            "The adversary error needs the public area (the adversary's grid and prior support).", fix=_AREA_FIX
        )
    region = None
    if isinstance(area, (gpd.GeoDataFrame, gpd.GeoSeries)):
        if area.crs is None:
            from .exceptions import MissingCRSError

            raise MissingCRSError("the area GeoDataFrame")
        gs = area.geometry if isinstance(area, gpd.GeoDataFrame) else area
        if crs is not None and not _crs_equal(gs.crs, crs):
            gs = gs.to_crs(crs)
        crs = gs.crs
        region = gs.union_all()
        rect = tuple(float(v) for v in gs.total_bounds)
    else:
        try:
            rect = tuple(float(v) for v in area)
        except (TypeError, ValueError):
            raise ParameterTypeError(
                "area must be (xmin, ymin, xmax, ymax) or a GeoDataFrame of public polygons."
            ) from None
        if len(rect) != 4 or not all(map(math.isfinite, rect)) or rect[0] >= rect[2] or rect[1] >= rect[3]:
            raise ParameterError("area must be (xmin, ymin, xmax, ymax) with xmin < xmax and ymin < ymax.")
    if crs is None:
        raise ParameterError("Give crs= (the CRS of area=), e.g. crs='EPSG:32650'.")
    crs = CRS.from_user_input(crs)
    if crs.is_geographic:
        return _geographic_area(rect, region, crs)
    if not crs.is_projected:
        raise CRSError(
            f"The CRS {crs.name!r} is neither projected nor geographic: the adversary's grid needs cells of a fixed "
            "ground size.",
            fix=Fix(
                "projected_crs",
                python="Give the area in a local projected CRS (a UTM zone): reproject the release or the area "
                "polygons with .to_crs(...), or pass bounds in that CRS with crs=.",
                cli="Give --bounds in a local projected CRS in metres (a UTM zone) and name it with --crs.",
                qgis="Choose a projected CRS in metres (a UTM zone) for the grid.",
            ),
        )
    return rect, region, crs


def _geographic_area(rect, region, crs):
    """A public area in longitude and latitude on the grid of a local azimuthal equidistant CRS.

    The CRS is centred on the area's rectangle (public, never the data's) on the CRS's own datum: its
    metres are ground metres from the centre, and within a few hundred kilometres in every direction
    (cells of one ground size: :func:`geopriv.cells.crs_units_per_metre` warns beyond 1 %).  The area is
    the rectangle's (or the polygons') image, so the grid's cells are those of the area in longitude and
    latitude; releases in the geographic CRS are located on it by reprojection.
    """
    import shapely
    from pyproj import CRS, Transformer

    from .crs import local_aeqd

    if not (-180.0 <= rect[0] and rect[2] <= 180.0 and -90.0 < rect[1] and rect[3] < 90.0):
        raise CRSError(
            f"The area is in the geographic CRS {crs.name!r} but its bounds are not longitudes within -180..180 "
            "and latitudes strictly within -90..90.",
            fix=Fix(
                "geographic_bounds",
                python="Pass area=(lon_min, lat_min, lon_max, lat_max) in degrees, or the bounds in their own "
                "projected CRS with crs= (e.g. crs='EPSG:32650').",
                cli="Give --bounds LON_MIN LAT_MIN LON_MAX LAT_MAX in degrees, or name the bounds' own projected "
                "CRS with --crs.",
                qgis="Choose the CRS the study area's extent is given in.",
            ),
        )
    lon0, lat0 = (rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2
    aeqd = local_aeqd(lon0, lat0, crs.geodetic_crs)
    aeqd = CRS.from_json_dict({**aeqd.to_json_dict(), "name": AEQD_NAME})
    to_local = Transformer.from_crs(crs, aeqd, always_xy=True)
    shape = shapely.box(*rect) if region is None else region
    # the rectangle's sides are curves in the local CRS: follow them at 1/64 of its span
    shape = shapely.segmentize(shape, max(rect[2] - rect[0], rect[3] - rect[1]) / 64)

    def project(xy):
        x, y = to_local.transform(xy[:, 0], xy[:, 1])
        return np.column_stack([x, y])

    local = shapely.transform(shape, project)
    return tuple(float(v) for v in local.bounds), local, aeqd


def _grid_over(rect, crs, cell, epsilon=None) -> _Grid:
    from affine import Affine

    from .cells import crs_units_per_metre

    upm = crs_units_per_metre(crs, rect)
    w_m, h_m = (rect[2] - rect[0]) / upm, (rect[3] - rect[1]) / upm
    if cell is None:
        cell = max(w_m, h_m) / DEFAULT_CELLS_PER_SIDE
        if epsilon is not None:  # finer than a fifth of the noise's scale changes the result by well under 1 %
            cell = max(cell, NOISE_SCALE_SHARE / epsilon)
    cell = float(cell)
    if not (math.isfinite(cell) and cell > 0):
        raise ParameterError("cell must be a positive number of ground metres.")
    nx, ny = max(2, int(math.ceil(w_m / cell - 1e-9))), max(2, int(math.ceil(h_m / cell - 1e-9)))
    if nx * ny > MAX_GRID_CELLS:
        raise ParameterError(
            f"A {cell:g} m grid over this area has {nx * ny:,} cells; the exact computation is "
            f"limited to {MAX_GRID_CELLS:,}.",
            fix=Fix(
                "grid_size",
                python="Use larger cells (cell=, ground metres) or a smaller area.",
                cli="Use larger cells (--cell METRES) or a smaller --bounds.",
                qgis="Set a larger 'Grid step' or a smaller 'Public study area'.",
            ),
        )
    step = cell * upm
    return _Grid(ny, nx, Affine(step, 0.0, rect[0], 0.0, -step, rect[3]), crs, cell, cell)


def _population_on(population, grid: _Grid, units: str) -> np.ndarray:
    """People per cell of ``grid`` from a raster, PrivacyMap or array (summed over the grid's cells)."""
    from .privacy_map import PrivacyMap, read_raster

    if units not in ("per_km2", "per_cell"):
        raise ParameterError('units must be "per_km2" (a density) or "per_cell" (people per raster cell).')
    if isinstance(population, np.ndarray) and population.ndim == 2 and population.shape == (grid.ny, grid.nx):
        vals = np.nan_to_num(np.asarray(population, float))
        return vals * (grid.hx * grid.hy / 1e6) if units == "per_km2" else vals
    if isinstance(population, PrivacyMap):
        if population.population is None:
            raise ParameterError("This privacy map was not built from population; pass the population raster.")
        vals, t, crs, units = population.population, population.transform, population.crs, "per_km2"
    else:
        vals, t, crs = read_raster(population)
    vals = np.nan_to_num(np.asarray(vals, float))
    if (vals < 0).any():
        raise ParameterError("The population raster has negative cells; a population is >= 0.")
    # people per source cell, then summed over the grid's cells by the source cells' centres
    from .cells import crs_units_per_metre

    src_h = abs(t.a * t.e)
    if units == "per_km2":
        upm = crs_units_per_metre(crs, (t.c, t.f + t.e * vals.shape[0], t.c + t.a * vals.shape[1], t.f))
        vals = vals * (src_h / upm**2 / 1e6)
    ys, xs = np.nonzero(vals > 0)
    x = t.c + t.a * (xs + 0.5)
    y = t.f + t.e * (ys + 0.5)
    if not _crs_equal(crs, grid.crs):
        from pyproj import Transformer

        x, y = Transformer.from_crs(crs, grid.crs, always_xy=True).transform(x, y)
    gt = grid.transform
    col = np.floor((np.asarray(x) - gt.c) / gt.a).astype(np.int64)
    row = np.floor((np.asarray(y) - gt.f) / gt.e).astype(np.int64)
    inside = (col >= 0) & (col < grid.nx) & (row >= 0) & (row < grid.ny)
    out = np.bincount(row[inside] * grid.nx + col[inside], vals[ys, xs][inside], minlength=grid.n)
    return out.reshape(grid.ny, grid.nx)


def _area_mask(grid: _Grid, region, rect) -> np.ndarray:
    """The cells of the public area: their centres inside the polygons, or inside the rectangle (the grid's
    whole rows and columns may overhang a rectangle by less than a cell: no one is assumed to live there)."""
    c = grid.centres()
    if region is None:
        inside = (c[:, 0] >= rect[0]) & (c[:, 0] <= rect[2]) & (c[:, 1] >= rect[1]) & (c[:, 1] <= rect[3])
        return inside.reshape(grid.ny, grid.nx)
    import shapely

    inside = shapely.contains_xy(region, c[:, 0], c[:, 1]).reshape(grid.ny, grid.nx)
    if not inside.any():
        raise ParameterError("No grid cell's centre lies in the area's polygons: use smaller cells (cell=).")
    return inside


def _prior(prior, grid: _Grid, mask: np.ndarray, people: np.ndarray | None) -> tuple[np.ndarray, str]:
    if isinstance(prior, str):
        if prior == "uniform":
            p, name = mask.astype(float), "uniform"
        elif prior == "population":
            if people is None:
                raise ParameterError(
                    "The population prior needs a population raster.",
                    fix=Fix(
                        "population",
                        python="Pass population= (a GeoTIFF path, a PrivacyMap built from population, or an array), "
                        'or prior="uniform".',
                        cli="Give --population RASTER, or --prior uniform.",
                        qgis="Choose the 'Population raster', or the uniform prior.",
                    ),
                )
            p, name = people * mask, "population"
        else:
            raise ParameterError('prior must be "uniform", "population" or an array on the grid.')
    else:
        p = np.array(prior, dtype=float)
        if p.shape != (grid.ny, grid.nx):
            raise ParameterError(f"A prior array must have the grid's shape {(grid.ny, grid.nx)}; got {p.shape}.")
        p, name = p * mask, "array"
    if not np.all(np.isfinite(p)) or (p < 0).any() or p.sum() <= 0:
        raise ParameterError("The prior must be finite, >= 0 and put some weight inside the area.")
    return p / p.sum(), name


# ------------------------------------------------------------------------------------------ the stages
@dataclass(frozen=True, eq=False)
class _Setting:
    """The adversary's world before its prior: the grid, the mechanism on it, the public area, the people.

    ``params`` are the public parameters known so far (the mechanism's description); the solver's
    own are added to them.
    """

    grid: _Grid
    channel: object  #: _LaplaceChannel or _EikonalChannel
    mask: np.ndarray  #: the grid cells inside the public area
    people: np.ndarray | None  #: people per grid cell, or None without a population
    params: dict


def _eikonal_setting(mechanism, prior, population, units: str) -> _Setting:
    """An eikonal mechanism's own grid (its privacy map's), CRS and area; the population from population= or the map."""
    from affine import Affine

    from .privacy_map import affine6

    pm = mechanism.privacy_map
    ny, nx = pm.shape
    t = pm.transform
    hx_m = float(t.a) / float(np.mean(pm.ground_scale[0]))
    hy_m = float(-t.e) / float(np.mean(pm.ground_scale[0]))
    grid = _Grid(ny, nx, Affine(*affine6(t)), pm.crs, hx_m, hy_m)
    channel = _EikonalChannel(mechanism, grid)
    mask = np.ones((ny, nx), bool)
    people = None
    if population is not None:
        people = _population_on(population, grid, units)
    elif pm.population is not None:
        people = pm.population * (hx_m * hy_m / 1e6)
    if isinstance(prior, str) and prior == "population" and people is None:
        raise ParameterError('prior="population" needs a map built from population, or population=.')
    return _Setting(grid, channel, mask, people, {**channel.describe(), "grid": "the privacy map's"})


def _laplace_setting(mechanism, epsilon, level, radius, area, crs, cell, population, units: str) -> _Setting:
    """Planar Laplace (epsilon=, or a perturb release's record) on a grid over the public area."""
    import geopandas as gpd

    if isinstance(mechanism, gpd.GeoDataFrame):
        eps, data_crs, area = _from_release(mechanism, area)
        crs = crs or data_crs
    elif mechanism is None:
        eps = _epsilon(epsilon, level, radius)
    else:
        raise ParameterTypeError(
            "mechanism must be None (planar Laplace with epsilon=), an EikonalMechanism or a "
            "GeoDataFrame released by perturb."
        )
    rect, region, crs = _area(area, crs)
    grid = _grid_over(rect, crs, cell, eps)
    channel = _LaplaceChannel(eps, grid)
    mask = _area_mask(grid, region, rect)
    people = None if population is None else _population_on(population, grid, units)
    return _Setting(grid, channel, mask, people, channel.describe())


def _solve(channel, grid: _Grid, pi: np.ndarray, mask: np.ndarray, progress) -> _Solver:
    """The optimal guesses for every output: the interior at once where that pays, the rest output by output."""
    solver = _Solver(channel, grid, pi, mask)
    # the interior at once pays while the certifying offsets (out to about twice the conditional error, 4 / epsilon
    # in the open) are fewer than a quarter of the outputs; else every output goes the per-output way
    if channel.invariant and math.pi * (4.0 / (channel.epsilon * min(grid.hx, grid.hy))) ** 2 < grid.n / 4:
        rest = solver.interior(progress)
        boundary = np.flatnonzero(~solver.done)
        solver.per_output(np.union1d(boundary, rest), progress)
    else:
        solver.per_output(np.arange(grid.n if channel.invariant else channel.n_outputs), progress)
    return solver


def _k_maps(channel, grid: _Grid, pi: np.ndarray, people, mask: np.ndarray, confidence: float):
    """The k-equivalent, its map on the grid and the step it was computed on (all None without people).

    A translation-invariant channel on a grid of more than ``K_GRID_CELLS`` cells is computed on a
    coarsened grid and the map repeated back onto the full one.
    """
    if people is None:
        return None, None, None
    if channel.invariant and grid.n > K_GRID_CELLS:
        f = int(math.ceil(math.sqrt(grid.n / K_GRID_CELLS)))
        cg = grid.coarsened(f)
        cpi = _block_sum(pi.reshape(grid.ny, grid.nx), f)
        k_exp, ck = _k_equivalent(
            _LaplaceChannel(channel.epsilon, cg), cg, cpi / cpi.sum(), _block_sum(people, f), confidence
        )
        k_map = np.repeat(np.repeat(ck.reshape(cg.ny, cg.nx), f, 0), f, 1)[: grid.ny, : grid.nx]
        k_cell = cg.hx
    else:
        k_exp, km = _k_equivalent(channel, grid, pi, people, confidence)
        k_map = km.reshape(grid.ny, grid.nx)
        k_cell = grid.hx
    k_map = k_map.astype(float)
    k_map[~mask] = np.nan
    return k_exp, k_map, k_cell


def _locator(channel, grid: _Grid):
    """``locate(xy)``: the output index of released points (a grid cell, or an eikonal mechanism's nearest release)."""
    if channel.invariant:

        def locate(xy, _g=grid):
            return _g.locate(xy)
    else:
        from scipy.spatial import cKDTree

        tree = cKDTree(np.asarray(channel.mech.release_xy, float))

        def locate(xy, _t=tree):
            return _t.query(xy)[1]

    return locate


# ------------------------------------------------------------------------------------------ the API
def adversary_error(
    mechanism=None,
    *,
    epsilon=None,
    level=None,
    radius=None,
    area=None,
    crs=None,
    prior="uniform",
    population=None,
    units: str = "per_km2",
    cell=None,
    confidence: float = DEFAULT_CONFIDENCE,
    progress=None,
) -> AdversaryError:
    """The optimal Bayesian adversary's expected error against a point release, exactly on a grid.

    Shokri et al. 2011: the adversary knows the mechanism and a prior over where people are, sees
    a release, and guesses the location minimising its expected ground distance to the truth.
    The result is in ground metres; the guesses it implies are the optimal remapping of the
    release (:meth:`AdversaryError.guess`).  See :mod:`geopriv.adversary` and docs/evaluate.md.

    Parameters
    ----------
    mechanism : None, EikonalMechanism or GeoDataFrame
        None: planar Laplace with ``epsilon`` (or ``level`` and ``radius``).  An
        :class:`~geopriv.EikonalMechanism` (its privacy map's grid, CRS and area; kernels held).
        A GeoDataFrame released by ``perturb``: its record's epsilon, CRS and declared bounds.
    epsilon : float, optional
        Privacy loss per ground metre.
    level, radius : float, optional
        ``epsilon = level / radius`` (e.g. ln 4 within 200 m).
    area : tuple or GeoDataFrame
        The public area: (xmin, ymin, xmax, ymax) in ``crs``, or public polygons.  Never the
        data's own extent.
    crs : CRS-like, optional
        The CRS of ``area`` (a tuple): a projected CRS, or longitude and latitude (e.g. EPSG:4326),
        then the grid is drawn in a local azimuthal equidistant CRS centred on the area.
    prior : "uniform", "population" or ndarray
        Where the adversary believes people are: uniform over the area (default), the
        population raster, or an array on the grid (``shape`` of the result).  Public
        knowledge only.
    population : str, PrivacyMap or ndarray, optional
        A population raster (GeoTIFF path, rasterio dataset or a map built from population);
        needed for the k-equivalent and ``prior="population"``.
    units : "per_km2" or "per_cell"
        What the population raster holds (as :meth:`PrivacyMap.from_population`).
    cell : float, optional
        Grid step in ground metres.  Default: the area's longest side / 100, or a fifth of the
        noise's scale (0.2 / epsilon) when that is coarser (finer cells change the result by well
        under 1 %).  Ignored for an eikonal mechanism (its map's grid).
    confidence : float
        Posterior mass of the k-equivalent region (default 0.9).
    progress : callable, optional
        ``progress(done, total)``.

    Returns
    -------
    AdversaryError
        The expected error, the displacement, the error map, the k-equivalent, the guesses.

    Raises
    ------
    ParameterError
        No mechanism, no public area, a grid too large, a bad prior.
    CRSError
        A CRS that is neither projected nor geographic, or bounds in a geographic CRS that are not
        longitudes and latitudes.

    See Also
    --------
    empirical_adversary_error : The adversary's guesses against a concrete release.
    calibrate : The epsilon that meets a target.

    Examples
    --------
    >>> import math, geopriv
    >>> adv = geopriv.adversary_error(level=math.log(4), radius=200, area=(0, 0, 4000, 4000),
    ...                               crs="EPSG:32650", cell=80)
    >>> 250 < adv.expected_error_m < 300   # planar Laplace: 2 / epsilon = 289 m in the open
    True
    """
    from .mechanisms.eikonal import EikonalMechanism

    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ParameterError("confidence must be between 0 and 1 (e.g. 0.9).")
    if isinstance(mechanism, EikonalMechanism):
        s = _eikonal_setting(mechanism, prior, population, units)
    else:
        s = _laplace_setting(mechanism, epsilon, level, radius, area, crs, cell, population, units)
    grid, channel, mask = s.grid, s.channel, s.mask
    pi, prior_name = _prior(prior, grid, mask, s.people)
    solver = _solve(channel, grid, pi, mask, progress)
    expected = float(solver.best.sum())
    face = float(solver.at_face.sum())
    err_map = solver.err_map.reshape(grid.ny, grid.nx).copy()
    err_map[~mask] = np.nan
    k_exp, k_map, k_cell = _k_maps(channel, grid, pi, s.people, mask, confidence)
    params = s.params
    params.update(
        {
            "cell_m": round(grid.hx, 6),
            "grid_shape": [grid.ny, grid.nx],
            "prior": prior_name,
            "outputs": "grid cells; releases beyond the area shown in the nearest boundary cell",
            "guesses": "grid cells of the area (exact optimum on the grid)",
            "confidence": confidence,
        }
    )
    if k_cell is not None:
        params["k_cell_m"] = round(k_cell, 6)
    return AdversaryError(
        expected_error_m=expected,
        displacement_m=face,
        error_map=err_map,
        k_equivalent=k_exp,
        k_map=k_map,
        confidence=float(confidence),
        shape=(grid.ny, grid.nx),
        transform=grid.transform,
        crs=grid.crs,
        prior=prior_name,
        parameters=params,
        guess_cells=solver.guess,
        _locate=_locator(channel, grid),
    )


def empirical_adversary_error(true, released, adversary: AdversaryError) -> pd.Series:
    """The adversary's guess for each released point against the truth: ground metres per row.

    Rows are matched by index (as :func:`geopriv.displacement` does).  This is for the data holder:
    it is computed from the true locations.

    Parameters
    ----------
    true : GeoDataFrame or GeoSeries of points
        The true locations.
    released : GeoDataFrame or GeoSeries of points
        Their release (same index).
    adversary : AdversaryError
        The adversary of that release (:func:`adversary_error`): its guesses are applied to the
        released points.

    Returns
    -------
    pandas.Series
        Ground metres between each row's guess and its truth, named ``adversary_error_m``;
        ``attrs["summary"]`` holds the mean, median, 90th percentile and count.

    Raises
    ------
    ParameterTypeError
        ``adversary`` is not an :class:`AdversaryError`.

    See Also
    --------
    adversary_error : The expected error over the prior, exactly.
    AdversaryError.guess : The guesses themselves (the optimal remapping).

    Examples
    --------
    >>> true = gpd.GeoDataFrame(geometry=gpd.points_from_xy([1000.0, 1500.0], [1000.0, 700.0]), crs="EPSG:32650")
    >>> out = true.priv.perturb(epsilon=0.01, bounds=(0, 0, 2000, 2000), rng=1)
    >>> adv = geopriv.adversary_error(out, cell=100)
    >>> err = geopriv.empirical_adversary_error(true, out, adv)
    >>> err.attrs["summary"]["n"]
    2
    """
    from .metrics import displacement

    if not isinstance(adversary, AdversaryError):
        raise ParameterTypeError("adversary must be the result of geopriv.adversary_error.")
    rel = _points(released, "released")
    guesses = adversary.guess(rel)
    import geopandas as gpd

    guessed = gpd.GeoDataFrame(geometry=guesses, crs=guesses.crs)
    out = displacement(true, guessed).rename("adversary_error_m")
    v = out.to_numpy(float)
    out.attrs["summary"] = {
        "mean_m": float(np.mean(v)) if len(v) else float("nan"),
        "median_m": float(np.median(v)) if len(v) else float("nan"),
        "p90_m": float(np.quantile(v, 0.9)) if len(v) else float("nan"),
        "n": int(len(v)),
    }
    return out


# ------------------------------------------------------------------------------------------ calibrate
@dataclass(frozen=True)
class Calibration:
    """The epsilon meeting a target (:func:`calibrate`), and the curve behind it.

    Parameters
    ----------
    epsilon_per_m : float
        The epsilon chosen, per ground metre.
    target : str
        "displacement", "adversary_error" or "k_equivalent".
    value : float
        The target (metres, or people).
    curve : pandas.DataFrame
        Every epsilon tried with its displacement, adversary error and k-equivalent.
    met : bool
        False when no epsilon tried meets the target (``epsilon_per_m`` is then the closest).

    See Also
    --------
    calibrate : Makes it.

    Examples
    --------
    >>> cal = geopriv.calibrate("displacement", 300, area=(0, 0, 3000, 3000), crs="EPSG:32650", cell=150)
    >>> cal.met, round(cal.level(200), 1) > 0
    (True, True)
    """

    epsilon_per_m: float
    target: str
    value: float
    curve: pd.DataFrame
    met: bool

    def level(self, radius: float) -> float:
        """The same epsilon as a level within ``radius`` metres (odds change by at most e^level)."""
        return self.epsilon_per_m * float(radius)

    def plot(self, ax=None):
        """The curve of the target against epsilon, with the chosen epsilon marked."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 4))
        col = {
            "displacement": "displacement_m",
            "adversary_error": "adversary_error_m",
            "k_equivalent": "k_equivalent",
        }[self.target]
        c = self.curve.sort_values("epsilon_per_m")
        ax.plot(c["epsilon_per_m"], c[col], "o-")
        ax.axhline(self.value, color="grey", ls="--")
        ax.axvline(self.epsilon_per_m, color="C3")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon per metre")
        ax.set_ylabel(col)
        return ax


def calibrate(
    target: str,
    value: float,
    *,
    area,
    crs=None,
    prior="uniform",
    population=None,
    units: str = "per_km2",
    cell=None,
    confidence: float = DEFAULT_CONFIDENCE,
    epsilons=None,
    steps: int = 8,
) -> Calibration:
    """The planar Laplace epsilon (per ground metre) that meets a target, with the curve behind it.

    ``target``:

    * ``"displacement"``: the smallest epsilon whose expected displacement is at most ``value`` m
      (utility: the most privacy for that accuracy);
    * ``"adversary_error"``: the largest epsilon whose optimal adversary errs by at least ``value`` m;
    * ``"k_equivalent"``: the largest epsilon leaving at least ``value`` people in the adversary's
      posterior region (needs ``population``).

    Every number comes from :func:`adversary_error` on the same public area, grid and prior.  The
    metrics fall as epsilon grows (less noise).

    Parameters
    ----------
    target : {"displacement", "adversary_error", "k_equivalent"}
        What to meet.
    value : float
        Metres (displacement: at most; adversary error: at least) or people (k-equivalent: at least).
    area : tuple or GeoDataFrame
        The public area, as for :func:`adversary_error`.
    crs : CRS-like, optional
        The CRS of ``area`` (a tuple).
    prior : "uniform", "population" or ndarray
        The adversary's prior, as for :func:`adversary_error`.
    population : str, PrivacyMap or ndarray, optional
        A population raster (``prior="population"``, the k-equivalent).
    units : "per_km2" or "per_cell"
        What the population raster holds.
    cell : float, optional
        One grid step in ground metres for every epsilon tried (default: the area's longest side / 60).
    confidence : float
        Posterior mass of the k-equivalent region (default 0.9).
    epsilons : array-like, optional
        Epsilons (per metre) to evaluate first; default 9 values from 1 / (the area's diagonal) to
        4 / (the cell size): expected displacements from about twice the diagonal to half a cell.
    steps : int
        Bisections in log epsilon between the two values that bracket the target (default 8).

    Returns
    -------
    Calibration
        The epsilon, whether it meets the target (``met``), and the curve of every epsilon tried.

    Raises
    ------
    ParameterError
        An unknown target, a value that is not positive, ``k_equivalent`` without a population.

    See Also
    --------
    adversary_error : The measures behind each point of the curve.

    Examples
    --------
    >>> cal = geopriv.calibrate("adversary_error", 300, area=(0, 0, 4000, 4000), crs="EPSG:32650", cell=200)
    >>> cal.met
    True
    >>> bool(geopriv.adversary_error(epsilon=cal.epsilon_per_m, area=(0, 0, 4000, 4000), crs="EPSG:32650",
    ...                              cell=200).expected_error_m >= 300)
    True
    """
    if target not in CALIBRATION_TARGETS:
        raise ParameterError(f"target must be one of {CALIBRATION_TARGETS}.")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ParameterError("value must be a positive number (metres, or people for k_equivalent).")
    if target == "k_equivalent" and population is None:
        raise ParameterError('target="k_equivalent" needs population= (a population raster).')
    rect, region, crs_ = _area(area, crs)
    if cell is None:  # one grid for every epsilon tried: the area's longest side in CALIBRATION_CELLS cells
        probe = _grid_over(rect, crs_, None)
        cell = max(probe.nx, probe.ny) * probe.hx / CALIBRATION_CELLS
    grid = _grid_over(rect, crs_, cell)
    col = {"displacement": "displacement_m", "adversary_error": "adversary_error_m", "k_equivalent": "k_equivalent"}[
        target
    ]
    rows = {}

    def at(eps):
        if eps not in rows:
            adv = adversary_error(
                epsilon=eps,
                area=area,
                crs=crs,
                prior=prior,
                population=population,
                units=units,
                cell=grid.hx,
                confidence=confidence,
            )
            rows[eps] = {
                "epsilon_per_m": eps,
                "displacement_m": adv.displacement_m,
                "adversary_error_m": adv.expected_error_m,
                "k_equivalent": np.nan if adv.k_equivalent is None else adv.k_equivalent,
            }
        return rows[eps][col]

    if epsilons is None:
        diag = math.hypot(grid.nx * grid.hx, grid.ny * grid.hy)
        epsilons = np.geomspace(1.0 / diag, 4.0 / max(grid.hx, grid.hy), 9)
    eps_list = sorted(float(e) for e in np.atleast_1d(epsilons))
    if not eps_list or eps_list[0] <= 0:
        raise ParameterError("epsilons must be positive numbers (per ground metre).")
    vals = [at(e) for e in eps_list]
    # feasible: displacement <= value (large eps); privacy targets: metric >= value (small eps)
    ok = [(v <= value) if target == "displacement" else (v >= value) for v in vals]
    met = any(ok)
    if not met:  # the closest: the least noise for a displacement, the most noise for a privacy target
        chosen = eps_list[-1] if target == "displacement" else eps_list[0]
    elif target == "displacement":
        j = ok.index(True)  # the smallest feasible
        lo, hi = (eps_list[j - 1], eps_list[j]) if j > 0 else (None, eps_list[j])
        if lo is not None:
            for _ in range(steps):
                mid = math.sqrt(lo * hi)
                lo, hi = (lo, mid) if at(mid) <= value else (mid, hi)
        chosen = hi
    else:
        j = len(ok) - 1 - ok[::-1].index(True)  # the largest feasible
        lo, hi = (eps_list[j], eps_list[j + 1]) if j + 1 < len(eps_list) else (eps_list[j], None)
        if hi is not None:
            for _ in range(steps):
                mid = math.sqrt(lo * hi)
                lo, hi = (mid, hi) if at(mid) >= value else (lo, mid)
        chosen = lo
    curve = pd.DataFrame(sorted(rows.values(), key=lambda r: r["epsilon_per_m"])).reset_index(drop=True)
    return Calibration(epsilon_per_m=float(chosen), target=target, value=value, curve=curve, met=met)
