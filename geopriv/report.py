"""The release report: one self-contained HTML file for the data holder (issue 34).

:func:`release_report` compares a dataset with its release and writes what the release
promises and what it costs, in one HTML file that opens offline (no network, no fonts, no
scripts from elsewhere: figures are embedded PNGs and a Content-Security-Policy forbids any
other source):

* the guarantee in plain words ("anyone's odds of being at A rather than B change by at most
  4x when A and B are within 200 m"), derived from the release record's epsilon;
* every public parameter (the release record ``attrs["geopriv"]``) and the report's own;
* utility: displacement statistics (:func:`geopriv.utility_report`) and the Wasserstein-1
  distance between the two point sets;
* the adversary's error (:mod:`geopriv.adversary`): the optimal Bayesian adversary's expected
  error, the k-equivalent, and the error of that adversary on these very points;
* trace attacks (:mod:`geopriv.attacks`) for a trace release, when that module is installed;
* maps: true locations only as counts per cell of a public grid of at least 100 m, stated in
  the report; released points may be drawn one by one (they are public).

**The report is private.**  It never prints or draws a true location, but it shows counts per
cell of the true data, the grid's extent (the data's bounding box to within one cell),
statistics of the displacements and the adversary's error on the true points: it is for the
data holder, not for publication.  Its default name ends in ``.private-report.html`` and the
file is created readable by its owner only.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io as _io
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ._version import __version__
from .exceptions import Fix, GeoprivError, OutputError, ParameterError, ParameterTypeError, user_message
from .metrics import is_synthetic

__all__ = ["release_report", "report_path", "guarantee", "REPORT_SUFFIX", "MIN_MAP_CELL_M"]

#: the default ending of a report's file name: says who the file is for
REPORT_SUFFIX = ".private-report.html"
#: the finest grid the maps of true locations may use (ground metres)
MIN_MAP_CELL_M = 100.0
#: the distance the guarantee sentence uses by default (metres)
DEFAULT_RADIUS_M = 200.0
#: most released points drawn one by one on the last map (a random sample beyond)
MAX_DRAWN = 50_000
_NICE_CELLS = (100, 200, 250, 500, 1000, 2000, 2500, 5000, 10_000, 20_000, 25_000, 50_000, 100_000)
_OVERWRITE = Fix(
    "overwrite",
    python="Pass overwrite=True to replace it.",
    cli="Pass --overwrite to replace it.",
    qgis="Choose another file name.",
)
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


# ---------------------------------------------------------------------------- the guarantee
def report_path(released) -> Path:
    """The default report path beside a released file: ``homes_private.gpkg`` -> ``homes_private.private-report.html``.

    Parameters
    ----------
    released : str or os.PathLike
        The released file's path.

    Returns
    -------
    pathlib.Path
        The same folder and name, ending in ``.private-report.html`` (for the data holder).

    See Also
    --------
    release_report : Writes the report.

    Examples
    --------
    >>> geopriv.report_path("out/homes_private.gpkg").as_posix()
    'out/homes_private.private-report.html'
    """
    p = Path(os.fspath(released))
    return p.with_name(p.stem + REPORT_SUFFIX)


def _factor(x: float) -> str:
    f = math.exp(x)
    if f >= 1e6:
        return f"{f:.2e}"
    return f"{f:.3g}" if f < 100 else f"{f:,.0f}"


def guarantee(record: dict, radius: float = DEFAULT_RADIUS_M) -> dict:
    """The guarantee of a release in plain words, from its public record.

    Parameters
    ----------
    record : dict
        The release record (``released.attrs["geopriv"]``).
    radius : float
        The distance in metres the sentence speaks of (A and B within ``radius``).

    Returns
    -------
    dict
        ``sentence`` (plain words), ``factor`` (the odds factor at ``radius``, a float),
        ``epsilon_per_m`` (the epsilon used, or None for a dimensionless epsilon),
        ``basis`` (which recorded value the sentence rests on) and ``table`` (a DataFrame of
        distances in metres and the odds factor at each).
    """
    if not isinstance(record, dict):
        raise ParameterTypeError("record must be a release record (a dict: released.attrs['geopriv']).")
    radius = _positive(radius, "radius")
    distances = sorted({50.0, 100.0, 200.0, 500.0, 1000.0, float(radius)})
    if "epsilon_per_m" in record or "epsilon_max_per_m" in record:
        eff = record.get("effective_epsilon_per_m")
        if "epsilon_per_m" in record:
            eps = float(eff if eff is not None else record["epsilon_per_m"])
            basis = "effective_epsilon_per_m" if eff is not None else "epsilon_per_m"
        else:
            eps = float(max(record["epsilon_max_per_m"], eff or 0.0))
            basis = "epsilon_max_per_m" if not eff or eff <= record["epsilon_max_per_m"] else "effective_epsilon_per_m"
        factor = math.exp(eps * radius)
        trace = "traj_id" in record or str(record.get("mechanism", "")).endswith("_trace")
        r = f"{radius:g} m"
        if trace:
            sentence = (
                f"Anyone's odds of having followed trace A rather than trace B change by at most "
                f"{_factor(eps * radius)}x when each point of A is within {r} of the matching point of B "
                f"(the whole trace, whatever its length: epsilon = {eps:.4g} per metre per trace, and "
                f"{_factor(eps * radius)} = e^(epsilon x {r}))."
            )
        elif "epsilon_min_per_m" in record and "epsilon_max_per_m" in record:
            lo = float(record["epsilon_min_per_m"])
            sentence = (
                f"Anyone's odds of being at A rather than B change by at most {_factor(eps * radius)}x when A "
                f"and B are within {r} of each other, wherever they are; where the privacy map protects most "
                f"(epsilon = {lo:.4g} per metre) by at most {_factor(lo * radius)}x.  The protection depends "
                f"on the place: epsilon runs from {lo:.4g} to {eps:.4g} per metre over the privacy map."
            )
        else:
            sentence = (
                f"Anyone's odds of being at A rather than B change by at most {_factor(eps * radius)}x when A "
                f"and B are within {r} of each other (epsilon = {eps:.4g} per metre, and "
                f"{_factor(eps * radius)} = e^(epsilon x {r})); farther apart, the bound grows with the "
                "distance."
            )
        table = pd.DataFrame({"distance_m": distances, "odds_factor": [math.exp(eps * d) for d in distances]})
        return {"sentence": sentence, "factor": factor, "epsilon_per_m": eps, "basis": basis, "table": table}
    if "epsilon" in record and is_synthetic(record):
        eps = float(record.get("effective_epsilon") or record["epsilon"])
        sentence = (
            f"Anyone's odds of being at A rather than B change by at most {_factor(eps)}x, for any A and B "
            f"in the public area however far apart (epsilon = {eps:.4g}, differential privacy: the "
            "synthetic points belong to nobody)."
        )
        table = pd.DataFrame({"distance_m": ["any"], "odds_factor": [math.exp(eps)]})
        return {
            "sentence": sentence,
            "factor": math.exp(eps),
            "epsilon_per_m": None,
            "basis": "effective_epsilon" if record.get("effective_epsilon") else "epsilon",
            "table": table,
        }
    raise GeoprivError(
        "The release record states no epsilon per metre (or dimensionless epsilon for a synthetic set): the "
        "guarantee of this release cannot be stated.",
        fix=Fix(
            "point_release",
            python="Report on a point release made by geopriv (perturb, sanitize_traces, "
            "synthesize), whose record is released.attrs['geopriv'].",
            cli="Report on a point file written by geopriv (perturb, sanitize-traces, synthesize).",
            qgis="Choose a point layer written by a geopriv algorithm as 'Released points'.",
        ),
    )


# ---------------------------------------------------------------------------- helpers
def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterTypeError(f"{name} must be a number of metres, got {type(value).__name__}.")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(f"{name} must be a positive number of metres.")
    return value


def _png(fig) -> str:
    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


class _Figures:
    """matplotlib figures without pyplot: no backend chosen, no global state (safe in Jupyter, QGIS and threads)."""

    @staticmethod
    def subplots(*args, figsize=None, **kwargs):
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize)
        return fig, fig.subplots(*args, **kwargs)


def _plt() -> type[_Figures]:
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("The release report draws with matplotlib: pip install 'geopriv[plot]'.") from None
    return _Figures


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _num(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return "—" if not math.isfinite(float(v)) else f"{float(v):.4g}"
    return str(v)


def _table(rows, head=None, cls="kv") -> str:
    out = [f'<table class="{cls}">']
    if head:
        out.append("<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(_num(c)) if not isinstance(c, _Raw) else c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


class _Raw(str):
    """HTML already escaped."""


def _note(exc: BaseException, front_end: str) -> str:
    """A section that could not be computed: the user message (labels, never coordinates; foreign text withheld)."""
    return f'<p class="note">Not computed: {_e(user_message(exc, front_end=front_end))}</p>'


def _figure(b64: str, caption: str, alt: str) -> str:
    return (
        f'<figure><img src="data:image/png;base64,{b64}" alt="{_e(alt)}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _geoseries(data, what):
    from .points import as_geoseries

    return as_geoseries(data, what)


def _present(geoms):
    """Rows with a point (a trace release withholds some rows: no geometry)."""
    keep = geoms.notna().to_numpy() & ~geoms.is_empty.to_numpy()
    return geoms[keep]


# ---------------------------------------------------------------------------- maps
class _Grid:
    """A public grid of square cells in a local azimuthal equidistant frame (ground metres)."""

    def __init__(self, true_geoms, area, cell):
        from pyproj import CRS, Transformer

        from .crs import local_aeqd

        crs = CRS.from_user_input(true_geoms.crs)
        self.geodetic = crs.geodetic_crs
        to_geo = Transformer.from_crs(crs, self.geodetic, always_xy=True)
        if area is not None:
            x0, y0, x1, y1 = area
            xs = np.linspace(x0, x1, 21)
            ys = np.linspace(y0, y1, 21)
            gx, gy = np.meshgrid(xs, ys)
            lon, lat = to_geo.transform(gx.ravel(), gy.ravel())
        else:
            b = true_geoms.total_bounds
            lon, lat = to_geo.transform(np.array([b[0], b[2], b[0], b[2]]), np.array([b[1], b[1], b[3], b[3]]))
        lon, lat = np.asarray(lon), np.asarray(lat)
        # the frame's centre rounded to 0.01 degree: it says no more than the grid's extent does
        self.lon0 = round(
            float(np.degrees(np.arctan2(np.sin(np.radians(lon)).mean(), np.cos(np.radians(lon)).mean()))), 2
        )
        self.lat0 = round(float((lat.min() + lat.max()) / 2), 2)
        self.work = local_aeqd(self.lon0, self.lat0, self.geodetic)
        self.crs = crs
        self._fwd = Transformer.from_crs(crs, self.work, always_xy=True)
        if area is not None:
            wx, wy = Transformer.from_crs(self.geodetic, self.work, always_xy=True).transform(lon, lat)
            lo, hi = np.array([np.min(wx), np.min(wy)]), np.array([np.max(wx), np.max(wy)])
        else:
            w = self.xy(true_geoms)
            lo, hi = w.min(axis=0), w.max(axis=0)
        if cell is None:
            side = float(np.max(hi - lo))
            cell = next((c for c in _NICE_CELLS if side / c <= 60), _NICE_CELLS[-1])
        cell = _positive(cell, "map_cell")
        if cell < MIN_MAP_CELL_M:
            raise ParameterError(
                f"map_cell {cell:g} m is finer than {MIN_MAP_CELL_M:g} m: the report draws true locations only as "
                f"counts on cells of at least {MIN_MAP_CELL_M:g} m.",
                fix=Fix(
                    "coarser_cells",
                    python=f"Pass map_cell={MIN_MAP_CELL_M:g} or more (metres).",
                    cli=f"Pass --map-cell {MIN_MAP_CELL_M:g} or more (metres).",
                    qgis=f"Set the map cell to {MIN_MAP_CELL_M:g} m or more.",
                ),
            )
        self.cell = cell
        self.x0 = math.floor(lo[0] / cell) * cell
        self.y0 = math.floor(lo[1] / cell) * cell
        self.nx = max(1, math.ceil((hi[0] - self.x0) / cell))
        self.ny = max(1, math.ceil((hi[1] - self.y0) / cell))
        if hi[0] >= self.x0 + self.nx * cell:
            self.nx += 1
        if hi[1] >= self.y0 + self.ny * cell:
            self.ny += 1
        if self.nx * self.ny > 4_000_000:
            raise ParameterError(
                f"The map grid would have {self.nx} x {self.ny} cells of {cell:g} m.",
                fix=Fix(
                    "coarser_cells",
                    python="Pass a larger map_cell= (metres), or area= a smaller public area.",
                    cli="Pass a larger --map-cell (metres).",
                    qgis="Set a larger map cell.",
                ),
            )

    def xy(self, geoms) -> np.ndarray:
        from .points import point_xy

        if geoms.crs is not None and not self.crs.equals(geoms.crs):
            geoms = geoms.to_crs(self.crs)
        xy = point_xy(geoms, "points")
        wx, wy = self._fwd.transform(xy[:, 0], xy[:, 1])
        return np.column_stack([wx, wy])

    @property
    def extent(self):
        return (self.x0, self.x0 + self.nx * self.cell, self.y0, self.y0 + self.ny * self.cell)

    def counts(self, geoms) -> tuple[np.ndarray, int]:
        """Counts per cell (ny, nx) and the number of points outside the grid."""
        if len(geoms) == 0:
            return np.zeros((self.ny, self.nx), dtype=np.int64), 0
        w = self.xy(geoms)
        i = np.floor((w[:, 0] - self.x0) / self.cell).astype(np.int64)
        j = np.floor((w[:, 1] - self.y0) / self.cell).astype(np.int64)
        inside = (i >= 0) & (i < self.nx) & (j >= 0) & (j < self.ny)
        flat = np.bincount(j[inside] * self.nx + i[inside], minlength=self.nx * self.ny)
        return flat.reshape(self.ny, self.nx), int((~inside).sum())

    def describe(self) -> str:
        return (
            f"square cells of {self.cell:g} m (ground metres) in an azimuthal equidistant frame centred at "
            f"longitude {self.lon0:.2f}, latitude {self.lat0:.2f} ({self.geodetic.name}); axes in km from that "
            f"centre; {self.nx} x {self.ny} cells"
        )


def _count_map(ax, grid, counts, min_count, title, plt):
    from matplotlib.colors import LogNorm

    shown = np.ma.masked_less(counts.astype(float), max(min_count, 1))
    x0, x1, y0, y1 = (v / 1000 for v in grid.extent)
    vmax = max(float(shown.max()) if shown.count() else 1.0, 1.0)
    ax.set_facecolor("white")
    im = ax.imshow(
        shown,
        origin="lower",
        extent=(x0, x1, y0, y1),
        cmap="viridis",
        norm=LogNorm(vmin=max(min_count, 1), vmax=max(vmax, max(min_count, 1) + 1)),
        interpolation="nearest",
    )
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("km east")
    ax.set_ylabel("km north")
    ax.set_aspect("equal")
    ax.figure.colorbar(im, ax=ax, shrink=0.8, label="count per cell")


# ---------------------------------------------------------------------------- the report
def release_report(
    true,
    released,
    path=None,
    *,
    prior="uniform",
    population=None,
    area=None,
    cell=None,
    mechanism=None,
    radius: float = DEFAULT_RADIUS_M,
    map_cell=None,
    min_count: int = 1,
    quantile: float | None = None,
    person=None,
    time=None,
    tz=None,
    title: str | None = None,
    overwrite: bool = False,
    front_end: str = "python",
):
    """Write the release report: one self-contained, offline HTML file for the data holder.

    Parameters
    ----------
    true, released : GeoDataFrame or GeoSeries of points
        The data and its release, rows matched by index label (as :func:`geopriv.utility_report`).
        ``released.attrs["geopriv"]`` (the release record) states the guarantee and the public
        parameters; a release without it is refused.  Released rows without a geometry (a trace
        release's withheld queries) are left out of the statistics and counted.
    path : str or Path, optional
        Where to write the report (must end in ``.html``; :func:`report_path` gives the default
        name, ``<released>.private-report.html``).  None: return the HTML text instead.
    prior, population, area, cell :
        The adversary's prior and grid, as in :func:`geopriv.adversary_error`: ``prior``
        ``"uniform"`` or ``"population"`` (with ``population=`` a raster path, PrivacyMap or
        array), ``area`` the public area (bounds in ``true``'s CRS, or public polygons; default:
        the record's declared bounds, else an eikonal mechanism's map) and ``cell`` the
        adversary's grid step in metres (default: :func:`geopriv.adversary_error`'s).  ``area``
        also fixes the maps' extent.  Without a public area the adversary section says how to
        give one: it is never taken from the data.
    mechanism : EikonalMechanism, optional
        The location-dependent mechanism of an eikonal release (its adversary and privacy map).
    radius : float
        Distance in metres the guarantee sentence speaks of (default 200 m).
    map_cell : float, optional
        The maps' grid step in ground metres, at least ``MIN_MAP_CELL_M`` (100 m); default: a
        round step giving at most about 60 cells across.
    min_count : int
        Cells of the true-location map with fewer points are left blank (default 1: all
        non-empty cells are drawn).
    quantile : float, optional
        The share of the displacements within alpha (as :func:`geopriv.utility_report`; default 0.9).
    person, time : str, optional
        Person (or trace id) and time columns of ``true`` and ``released`` for the trace attacks
        (:mod:`geopriv.attacks`; default: the record's ``traj_id`` and ``time`` of a trace
        release).  Without a person column the trace attacks are left out.
    tz : str, optional
        The people's time zone for the home attack's night hours (e.g. ``"Asia/Shanghai"``);
        default: the time stamps as they are when they carry no zone, else local mean solar time
        (``"solar"``), as the report states.
    title : str, optional
        The report's heading.
    overwrite : bool
        Replace an existing file at ``path`` (refused by default).
    front_end : {"python", "cli", "qgis"}
        Whose advice the notes of sections that could not be computed give.

    Returns
    -------
    Path or str
        The path written, or the HTML text when ``path`` is None.

    Raises
    ------
    ParameterError
        A release without a geopriv record, a map cell under 100 m, an unknown front end.
    OutputError
        ``path`` exists (without ``overwrite``) or is not an ``.html`` file.

    See Also
    --------
    adversary_error : The adversary section.
    utility_report : The displacement statistics.
    home_attack : The home attack on traces.

    Notes
    -----
    The report never prints or draws a true location; what it reveals about the true data is
    listed in the report itself (counts per map cell, the map's extent, displacement and
    adversary statistics over all rows).  It is for the data holder: do not publish it.
    The file is written atomically and created readable by its owner only.

    Examples
    --------
    >>> deaths = gpd.read_file("soho_cholera.gpkg", layer="deaths")
    >>> out = deaths.priv.perturb(level=math.log(4), radius=200, bounds=(-15800, 6711900, -14550, 6713250), rng=1)
    >>> path = geopriv.release_report(deaths, out, "deaths.private-report.html")
    >>> path.name, path.stat().st_size > 10_000
    ('deaths.private-report.html', True)
    """
    from .points import as_geoseries

    if front_end not in ("python", "cli", "qgis"):
        raise ParameterError("front_end must be 'python', 'cli' or 'qgis'.")
    min_count = int(min_count)
    if min_count < 1:
        raise ParameterError("min_count must be a whole number of at least 1.")
    dest = None
    if path is not None:
        from . import io

        dest = io.check_file_output(path, suffixes=(".html", ".htm"), what="report", overwrite=overwrite)
    record = getattr(released, "attrs", {}).get("geopriv")
    if not record:
        raise GeoprivError(
            "The released data carries no release record (attrs['geopriv']): the report cannot state its guarantee.",
            fix=Fix(
                "record",
                python="Pass the GeoDataFrame a geopriv release returned, or read the released file with "
                "geopriv.io.read_vector (which restores its record).",
                cli="Give a file written by a geopriv release (its record is in the file).",
                qgis="Choose a layer written by a geopriv algorithm as 'Released points'.",
            ),
        )
    promise = guarantee(record, radius)
    true_g = as_geoseries(true, "true data")
    rel_all = as_geoseries(released, "released data")
    if true_g.crs is None:
        from .exceptions import MissingCRSError

        raise MissingCRSError("the true data")
    rel_g = _present(rel_all)
    withheld = len(rel_all) - len(rel_g)
    synthetic = is_synthetic(record)
    bounds = _area_bounds(area, true_g.crs, record)
    area_source = "given (area=)" if area is not None else "the record's declared bounds" if bounds else "none declared"
    if bounds is None and mechanism is not None and hasattr(mechanism, "privacy_map"):
        from pyproj import CRS

        if CRS.from_user_input(mechanism.crs).equals(CRS.from_user_input(true_g.crs)):
            bounds = tuple(float(v) for v in mechanism.privacy_map.bounds)  # the mechanism's public extent
            area_source = "the mechanism's privacy map"
    plt = _plt()
    sections = []
    figures = 0

    # --- the guarantee
    gtable = _table(
        [
            (d if isinstance(d, str) else f"{d:g} m", f"{_factor(math.log(f))}x")
            for d, f in zip(promise["table"]["distance_m"], promise["table"]["odds_factor"])
        ],
        head=("A and B within", "odds change by at most"),
        cls="grid",
    )
    verified = record.get("verified_max_ratio")
    checked = (
        f" The mechanism was verified on its grid: the largest realised privacy loss is {verified:.3g} of the "
        "allowed one."
        if isinstance(verified, (int, float))
        else ""
    )
    gparts = [
        f'<p class="promise">{_e(promise["sentence"])}</p>'
        f"<p>Based on the record's <code>{_e(promise['basis'])}</code>; it holds whatever the adversary "
        f"knows beforehand, and adds up over releases of the same person.{_e(checked)}</p>{gtable}"
    ]
    if mechanism is not None and hasattr(mechanism, "privacy_map"):
        gparts.append(_privacy_map_figure(mechanism.privacy_map, radius, plt))
        figures += 1
    sections.append(("guarantee", "The guarantee", "\n".join(gparts)))

    # --- public parameters
    rows = []
    for key, value in record.items():
        if key == "previous":
            value = f"{len(value)} earlier release(s)"
        elif key == "ledger":
            value = "per-trace budget ledger (kept in the release)"
        elif isinstance(value, (list, tuple)):
            value = ", ".join(_num(v) for v in value) or "—"
        elif isinstance(value, dict):
            value = "; ".join(f"{k}={_num(v)}" for k, v in value.items())
        rows.append((key, value))
    own = [
        ("distance in the guarantee sentence", "not used (any distance)" if synthetic else f"{radius:g} m"),
        ("adversary's prior", prior if isinstance(prior, str) else "array on the grid"),
        ("population", "given" if population is not None else "none"),
        (
            "adversary's grid step",
            "the mechanism's grid"
            if mechanism is not None
            else "adversary_error's default"
            if cell is None
            else f"{cell:g} m",
        ),
        ("public area", area_source),
    ]
    sections.append(
        (
            "parameters",
            "Public parameters",
            "<p>The release record (published with the release: public):</p>"
            + _table(rows, head=("field", "value"))
            + "<p>This report's own parameters:</p>"
            + _table(own, head=("parameter", "value")),
        )
    )

    # --- utility
    parts = []
    disp = None
    if synthetic:
        parts.append(
            "<p>A synthetic set belongs to nobody: no released point is the release of a true one, so there "
            "are no displacements; the two sets are compared as distributions.</p>"
        )
    else:
        from .metrics import displacement, utility_report

        try:
            matched = rel_g
            rep = utility_report(
                true_g.loc[true_g.index.intersection(matched.index)] if withheld else true_g,
                matched,
                **({} if quantile is None else {"quantile": quantile}),
            )
            disp = displacement(true_g.loc[true_g.index.intersection(matched.index)] if withheld else true_g, matched)
            alpha = next(k for k in rep.index if k.startswith("alpha_"))
            names = {
                "n": "points compared",
                "mean_m": "mean displacement (m)",
                "median_m": "median displacement (m)",
                alpha: f"alpha: radius holding {100 * float(alpha[6:-2]):g} % of the displacements (m)",
                "max_m": "largest displacement (m)",
                "mse_m2": "mean squared displacement (m²)",
                "rmse_m": "root mean squared displacement (m)",
            }
            parts.append(_table([(names.get(k, k), v) for k, v in rep.items()], head=("statistic", "value")))
            fig, ax = plt.subplots(figsize=(6.4, 3.6))
            xs = np.sort(disp.to_numpy())
            ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), color="tab:red", label="these points")
            eps = promise["epsilon_per_m"]
            if eps and record.get("mechanism") in ("planar_laplace", "spherical_laplace"):
                from .mechanisms.planar_laplace import radius_cdf

                grid = np.linspace(0, float(xs.max()) * 1.05 + 1e-9, 300)
                ax.plot(
                    grid,
                    radius_cdf(grid, float(record["epsilon_per_m"])),
                    "k--",
                    lw=1,
                    label="planar Laplace on an open plane (expected)",
                )
            ax.set_xlabel("displacement (ground metres)")
            ax.set_ylabel("share of points")
            ax.set_ylim(0, 1.02)
            ax.legend(loc="lower right")
            ax.grid(alpha=0.3)
            parts.append(
                _figure(
                    _png(fig),
                    "How far the points moved: the share of points displaced by at most "
                    "each distance (aggregate over all points).",
                    "displacement distribution",
                )
            )
            figures += 1
        except GeoprivError as exc:
            parts.append(_note(exc, front_end))
    if withheld:
        parts.append(
            f"<p>{withheld:,} released row(s) carry no location (withheld by the release) and are left out "
            "of the statistics.</p>"
        )
    parts.append(_wasserstein_html(true_g, rel_g, front_end))
    sections.append(("utility", "Utility", "\n".join(parts)))

    # --- adversary
    counter = [0]
    sections.append(
        (
            "adversary",
            "Adversary error and k-equivalent",
            _adversary_html(
                true_g,
                released,
                rel_g,
                record,
                synthetic,
                mechanism,
                prior,
                population,
                area,
                bounds,
                cell,
                front_end,
                plt,
                counter,
            ),
        )
    )
    figures += counter[0]

    # --- trace attacks
    counter = [0]
    attacks = _attacks_html(true, released, record, person, time, tz, front_end, plt, counter)
    if attacks is not None:
        sections.append(("attacks", "Trace attacks", attacks))
        figures += counter[0]

    # --- maps
    grid = _Grid(true_g, bounds, map_cell)
    t_counts, _ = grid.counts(true_g)
    r_counts, r_out = grid.counts(rel_g)
    unit = "fixes" if ("traj_id" in record or person is not None) else "points"
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 5.2))
    _count_map(a1, grid, t_counts, min_count, f"True {unit} per {grid.cell:g} m cell", plt)
    _count_map(a2, grid, r_counts, 1, f"Released {unit} per {grid.cell:g} m cell", plt)
    fig.tight_layout()
    maps = [
        f"<p>Grid: {_e(grid.describe())}. True locations are shown only as counts per cell"
        + (f" (cells with fewer than {min_count} are blank)" if min_count > 1 else "")
        + f"; {r_out:,} released point(s) fall outside the grid.</p>",
        _figure(
            _png(fig),
            f"Counts per {grid.cell:g} m cell: true data (left), release (right), same grid.",
            "counts per cell, true and released",
        ),
    ]
    fig, ax = plt.subplots(figsize=(7, 6))
    x0, x1, y0, y1 = (v / 1000 for v in grid.extent)
    ax.imshow(
        np.ma.masked_less(t_counts.astype(float), max(min_count, 1)),
        origin="lower",
        extent=(x0, x1, y0, y1),
        cmap="Greys",
        alpha=0.5,
        interpolation="nearest",
    )
    drawn = rel_g
    if len(rel_g) > MAX_DRAWN:  # a fixed sample of the (public) released points: the picture, not the data
        drawn = rel_g.iloc[np.sort(np.random.default_rng(0).choice(len(rel_g), MAX_DRAWN, replace=False))]
        maps[0] = maps[0].replace(
            "</p>", f" The last map draws {MAX_DRAWN:,} of the {len(rel_g):,} released points, chosen at random.</p>", 1
        )
    if len(drawn):
        w = grid.xy(drawn) / 1000
        ax.scatter(
            w[:, 0],
            w[:, 1],
            s=4 if len(drawn) < 5000 else 1,
            c="tab:red",
            alpha=0.6,
            linewidths=0,
            label="released points",
        )
        ax.legend(loc="upper right")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.set_xlabel("km east")
    ax.set_ylabel("km north")
    ax.set_title(f"Released points over the true counts (grey, {grid.cell:g} m cells)", fontsize=10)
    maps.append(
        _figure(
            _png(fig), "Released points (public) drawn one by one; the true data only as grey cells.", "released points"
        )
    )
    figures += 2
    sections.append(("maps", "Maps", "\n".join(maps)))

    reveals = (
        f"<ul><li>the number of true rows ({len(true_g):,}) and of released rows ({len(rel_all):,});</li>"
        f"<li>counts of true {unit} per {grid.cell:g} m cell, and so the true data's extent to within one cell;</li>"
        "<li>statistics over all points of the displacements and of the adversary's error on the true points "
        "(means, quantiles, the largest displacement);</li>"
        "<li>the public parameters, which the release publishes anyway.</li></ul>"
        "<p>It never prints or draws a true location, but these aggregates are computed from the true data "
        "without noise: keep the report with the data, do not publish it.</p>"
    )
    sections.append(("reveals", "What this report reveals", reveals))

    doc = _html(title or f"Release report: {record.get('mechanism', 'release')}", sections, figures)
    if dest is None:
        return doc
    from . import io

    data = doc.encode("utf-8")
    io.write_new_file(
        dest,
        lambda fh: fh.write(data),
        overwrite=overwrite,
        prefix=".geopriv-report-",
        exists=lambda p: OutputError(f"{os.fspath(path)} exists", fix=_OVERWRITE),
    )
    return dest


def _privacy_map_figure(pm, radius, plt) -> str:
    """The eikonal mechanism's guarantee by place: the odds factor within ``radius`` metres, from its (public) map."""
    factor = np.exp(np.asarray(pm.epsilon, dtype=float) * radius)
    x0, y0, x1, y1 = pm.bounds
    fig, ax = plt.subplots(figsize=(6.4, 5))
    im = ax.imshow(factor, extent=(x0, x1, y0, y1), origin="upper", cmap="magma_r")
    ax.ticklabel_format(useOffset=False, style="plain")
    fig.colorbar(im, ax=ax, shrink=0.8, label=f"odds factor within {radius:g} m")
    ax.set_title(f"Guarantee by place: odds change by at most this within {radius:g} m", fontsize=10)
    ax.set_xlabel(f"x ({pm.crs.to_string()})")
    ax.set_ylabel("y")
    return _figure(
        _png(fig),
        f"The privacy map (public): e^(epsilon x {radius:g} m) at each place; lower is more private.",
        "guarantee by place",
    )


def _area_bounds(area, crs, record):
    """The public area as bounds in ``crs`` (area=, else the record's declared bounds), or None."""
    if area is None:
        b = record.get("declared_bounds") or record.get("public_area")
        if b and len(b) == 4:
            rec_crs = record.get("input_crs")
            if rec_crs is not None and crs is not None:
                from pyproj import CRS

                if not CRS.from_user_input(rec_crs).equals(CRS.from_user_input(crs)):
                    return None
            return tuple(float(v) for v in b)
        return None
    if hasattr(area, "total_bounds"):
        g = area.to_crs(crs) if area.crs is not None and crs is not None else area
        return tuple(float(v) for v in g.total_bounds)
    try:
        b = tuple(float(v) for v in area)
    except (TypeError, ValueError):
        raise ParameterTypeError(
            "area must be (xmin, ymin, xmax, ymax) or a GeoDataFrame/GeoSeries of public polygons."
        ) from None
    if len(b) != 4 or not (b[0] < b[2] and b[1] < b[3]):
        raise ParameterError("area must be (xmin, ymin, xmax, ymax) with xmin < xmax and ymin < ymax.")
    return b


def _wasserstein_html(true_g, rel_g, front_end) -> str:
    from . import metrics

    if len(rel_g) == 0:
        return "<p>Wasserstein-1: no released point has a location.</p>"
    try:
        exact = max(len(true_g), len(rel_g)) <= 20_000
        value = metrics.wasserstein(true_g, rel_g) if exact else metrics.wasserstein_bound(true_g, rel_g)
    except ImportError:
        return (
            '<p class="note">Wasserstein-1 distance: not computed (it needs the POT library: '
            "pip install 'geopriv[metrics]').</p>"
        )
    except GeoprivError as exc:
        return _note(exc, front_end)
    what = "" if exact else " (an upper bound: the sets are too large for the exact one)"
    return _table(
        [(f"Wasserstein-1 distance between the two point sets (m){what}", value)], head=("distribution", "value")
    )


def _adversary_html(
    true_g,
    released,
    rel_g,
    record,
    synthetic,
    mechanism,
    prior,
    population,
    area,
    bounds,
    cell,
    front_end,
    plt,
    counter,
) -> str:
    if synthetic:
        return (
            "<p>A synthetic set belongs to nobody: there is no released point whose owner an adversary could "
            "locate, so the adversary error does not apply.</p>"
        )
    kind = str(record.get("mechanism", ""))
    if mechanism is None and kind not in ("planar_laplace", "spherical_laplace"):
        if kind == "eikonal":
            return '<p class="note">Not computed: pass the eikonal mechanism itself (mechanism=) for its adversary.</p>'
        return (
            f"<p>The optimal adversary's error is computed for point releases (perturb) and eikonal mechanisms; "
            f"this is a {_e(kind or 'other')} release"
            + (
                ": the trace attacks below measure what an adversary learns from it.</p>"
                if "traj_id" in record
                else ".</p>"
            )
        )
    from . import adversary as _adv

    kwargs = {"prior": prior, "population": population}
    if mechanism is None:
        kwargs["cell"] = cell
    if area is not None:
        kwargs.update(area=area, crs=true_g.crs)
    elif bounds is not None:
        kwargs.update(area=bounds, crs=true_g.crs)
    try:
        adv = _adv.adversary_error(mechanism if mechanism is not None else released, **kwargs)
    except GeoprivError as exc:
        return _note(exc, front_end)
    parts = []
    names = {
        "adversary_error_m": "optimal adversary's expected error (m)",
        "expected_displacement_m": "expected displacement under the prior (m)",
        "k_equivalent": f"k-equivalent: people expected in the adversary's {100 * adv.confidence:g} % region",
        "epsilon_per_m": "epsilon per metre",
        "cell_m": "adversary's grid step (m)",
        "confidence": "confidence of the k-equivalent region",
    }
    rows = [
        (
            names.get(k, k),
            v if k != "k_equivalent" or adv.k_equivalent is not None else "needs a population raster (population=)",
        )
        for k, v in adv.summary().items()
        if not (k == "epsilon_per_m" and not (isinstance(v, float) and math.isfinite(v)))
    ]
    try:
        sub = rel_g.index.intersection(true_g.index)
        emp = _adv.empirical_adversary_error(true_g.loc[sub], rel_g.loc[sub], adv).attrs.get("summary", {})
        rows += [
            ("adversary's error on these points: mean (m)", emp.get("mean_m")),
            ("... median (m)", emp.get("median_m")),
            ("... 90th percentile (m)", emp.get("p90_m")),
            ("... points", emp.get("n")),
        ]
    except GeoprivError as exc:
        parts.append(_note(exc, front_end))
    intro = (
        "<p>The adversary knows the mechanism and a prior (" + _e(adv.prior) + ") over where people are, sees a "
        "released point and guesses the true location minimising its expected error (the optimal Bayesian "
        "adversary of Shokri et al. 2011). Its expected error and the maps below come from public parameters and "
        "the prior only; its error on these points uses the true locations.</p>"
    )
    parts[:0] = [intro, _table(rows, head=("measure", "value"))]
    for what, caption in (
        (
            "error",
            "The optimal adversary's expected error for a person in each cell (metres): "
            "public parameters and the prior only.",
        ),
        ("k", "k-equivalent for a person in each cell: people expected in the adversary's region."),
    ):
        if what == "k" and adv.k_map is None:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 5))
        adv.plot(ax=ax, what=what)
        parts.append(_figure(_png(fig), caption, f"adversary {what} map"))
        counter[0] += 1
    return "\n".join(parts)


def _clock(hour) -> str:
    minutes = int(round(float(hour) * 60)) % (24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _attacks_html(true, released, record, person, time, tz, front_end, plt, counter):
    """The trace attacks section, or None where it does not apply (no person or trace id column)."""
    if person is None:
        person = record.get("traj_id")
    if person is None or is_synthetic(record):
        return None
    try:
        from . import attacks
    except ImportError:  # pragma: no cover - geopriv.attacks ships with this module
        return None
    if time is None:
        time = record.get("time")
    for what, data in (("true", true), ("released", released)):
        if not hasattr(data, "columns") or person not in data.columns:
            return f'<p class="note">Not computed: the {what} data have no column {_e(person)!r} (person=).</p>'
    parts = [
        f"<p>Persons are the values of <code>{_e(person)}</code> (a trace id counts as a person). Only "
        "aggregates over persons are shown.</p>"
    ]
    rows = []
    home = None
    if time is not None and time in true.columns and time in released.columns:
        zone = tz
        try:
            try:
                home = attacks.home_attack(true, released, person=person, time=time, tz=zone)
            except GeoprivError as exc:
                if tz is not None or getattr(getattr(exc, "fix", None), "kind", None) != "time_zone":
                    raise
                zone = "solar"
                home = attacks.home_attack(true, released, person=person, time=time, tz=zone)
        except GeoprivError as exc:
            parts.append(_note(exc, front_end))
        if home is not None:
            h = home.attrs["summary"]
            night = home.attrs.get("geopriv_attack", {}).get("night")
            hours = f"{_clock(night[0])} to {_clock(night[1])}" if night else "all hours"
            zone_text = {None: "as the time stamps are", "solar": "local mean solar time"}.get(zone, zone)
            rows += [
                ("home attack: persons with a home in the true data", h.get("persons")),
                ("... of them, a home inferred from the release", h.get("inferred")),
            ]
            rows += [
                (f"... inferred home within {k[len('hit_rate_') : -1]} m of the true home (share)", v)
                for k, v in h.items()
                if k.startswith("hit_rate_")
            ]
            rows += [
                ("... in the same cell (share)", h.get("same_cell_rate")),
                ("... median distance, inferred to true home (m)", h.get("median_distance_m")),
            ]
            parts.append(
                f"<p>Home attack (geopriv.attacks.home_attack): a person's home is the "
                f"{_num(home.attrs.get('geopriv_attack', {}).get('cell_m', attacks.DEFAULT_CELL))} m cell "
                f"holding most of their points from {hours}, {_e(zone_text)}.</p>"
            )
    else:
        parts.append('<p class="note">Home attack not computed: it needs a time column in both data (time=).</p>')
    top = None
    try:
        top = attacks.top_places_attack(true, released, person=person)
    except GeoprivError as exc:
        parts.append(_note(exc, front_end))
    if top is not None:
        t = top.attrs["summary"]
        rows += [
            ("top-places attack: released persons", t.get("persons")),
            (f"... re-identified by their top {t.get('n')} places (share)", t.get("reidentification_rate")),
            ("... with exactly one candidate (share)", t.get("unique_match_rate")),
            (f"persons unique by their true top {t.get('n')} places (share)", t.get("true_unique_share")),
        ]
    if rows:
        parts.insert(1, _table(rows, head=("attack", "value")))
        bars = [
            (label, float(v))
            for label, v in rows
            if "(share)" in label and v is not None and isinstance(v, (int, float)) and math.isfinite(float(v))
        ]
        if bars:
            fig, ax = plt.subplots(figsize=(6.4, 0.5 + 0.45 * len(bars)))
            ax.barh(
                [b[0].replace("... ", "").replace(" (share)", "") for b in bars],
                [b[1] for b in bars],
                color="tab:purple",
            )
            ax.set_xlim(0, 1)
            ax.invert_yaxis()
            ax.set_xlabel("share of persons")
            ax.grid(axis="x", alpha=0.3)
            parts.append(
                _figure(
                    _png(fig),
                    "What the trace attacks achieve on this release (shares of persons).",
                    "trace attack success rates",
                )
            )
            counter[0] += 1
    return "\n".join(parts)


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:60rem;margin:1.5rem auto;
padding:0 1rem;color:#1b1b1b;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;border-bottom:1px solid #ccc;padding-bottom:.2rem;
margin-top:2rem}
.private{background:#fff3cd;border:1px solid #e0b400;padding:.6rem .9rem;border-radius:4px}
.promise{font-size:1.15rem;background:#eef6ee;border-left:4px solid #2e7d32;padding:.6rem .9rem}
table{border-collapse:collapse;margin:.6rem 0}td,th{border:1px solid #ddd;padding:.25rem .6rem;text-align:left;
vertical-align:top}th{background:#f4f4f4}td:nth-child(2){font-variant-numeric:tabular-nums}
figure{margin:1rem 0}img{max-width:100%;height:auto}figcaption{font-size:.9rem;color:#555}
.note{color:#8a4b00}code{background:#f4f4f4;padding:0 .2rem}nav a{margin-right:.8rem}footer{color:#666;
font-size:.85rem;margin-top:2rem}
"""

_SCRIPT = """
window.addEventListener("load", function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; } }
  document.body.setAttribute("data-figures-loaded", String(ok));
});
"""


def _html(title, sections, figures) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    nav = " ".join(f'<a href="#{sid}">{_e(head)}</a>' for sid, head, _ in sections)
    body = "\n".join(
        f'<section id="{sid}"><h2>{_e(head)}</h2>\n{content}\n</section>' for sid, head, content in sections
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="robots" content="noindex, nofollow">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>PRIVATE: {_e(title)}</title>
<style>{_STYLE}</style>
</head>
<body data-figures-expected="{figures}" data-figures-loaded="0">
<h1>{_e(title)}</h1>
<p class="private"><strong>Private: for the data holder, not for publication.</strong> This report is computed from the
true locations. It never prints or draws one, but it shows aggregates of them (see
<a href="#reveals">what this report reveals</a>). Publish the release and its record, not this file.</p>
<nav>{nav}</nav>
{body}
<footer>geopriv {_e(__version__)}, report made {_e(now)}. Self-contained: it loads nothing from anywhere.</footer>
<script>{_SCRIPT}</script>
</body></html>
"""
