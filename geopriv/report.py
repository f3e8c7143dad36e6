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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ._version import __version__
from .exceptions import Fix, GeoprivError, OutputError, ParameterError, ParameterTypeError, user_message
from .metrics import is_synthetic
from .provenance import mechanism_name

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
        from .exceptions import MissingDependencyError

        raise MissingDependencyError(
            "The release report draws with matplotlib, which is not installed.", package="matplotlib", extra="plot"
        ) from None
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
        The report's heading (default: "Release report: " and the mechanism in plain words, from
        :data:`geopriv.provenance.MECHANISM_NAMES`).
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
    >>> deaths = gpd.read_file(geopriv.datasets.get_path("soho"), layer="deaths")
    >>> out = deaths.priv.perturb(level=math.log(4), radius=200, bounds=(-15800, 6711900, -14550, 6713250), rng=1)
    >>> path = geopriv.release_report(deaths, out, "deaths.private-report.html")
    >>> path.name, path.stat().st_size > 10_000
    ('deaths.private-report.html', True)
    """
    if front_end not in ("python", "cli", "qgis"):
        raise ParameterError("front_end must be 'python', 'cli' or 'qgis'.")
    min_count = int(min_count)
    if min_count < 1:
        raise ParameterError("min_count must be a whole number of at least 1.")
    dest = _destination(path, overwrite)
    record = _release_record(released)
    promise = guarantee(record, radius)
    true_g, rel_all = _report_points(true, released)
    bounds, area_source = _public_area(area, true_g.crs, record, mechanism)
    r = _Report(
        true=true,
        released=released,
        true_g=true_g,
        rel_all=rel_all,
        rel_g=_present(rel_all),
        record=record,
        promise=promise,
        synthetic=is_synthetic(record),
        prior=prior,
        population=population,
        area=area,
        bounds=bounds,
        area_source=area_source,
        cell=cell,
        mechanism=mechanism,
        radius=radius,
        map_cell=map_cell,
        min_count=min_count,
        quantile=quantile,
        person=person,
        time=time,
        tz=tz,
        front_end=front_end,
        plt=_plt(),
    )
    sections = [_guarantee_section(r), _parameters_section(r), _utility_section(r), _adversary_section(r)]
    attacks = _attacks_section(r)
    if attacks is not None:
        sections.append(attacks)
    grid = _Grid(true_g, bounds, map_cell)  # after the sections above: their errors come first, as they always have
    sections += [_maps_section(r, grid), _reveals_section(r, grid)]
    doc = _html(title or f"Release report: {mechanism_name(record)}", sections)
    if dest is None:
        return doc
    return _write_report(doc, dest, path, overwrite)


# ---------------------------------------------------------------------------- the report's inputs
@dataclass(frozen=True, eq=False)
class _Report:
    """What the sections of one report read: the inputs as checked, the release record and the report's options.

    Built once by :func:`release_report` after every check, so a section is a function of this and
    nothing else (it returns its HTML; the report is their concatenation).
    """

    true: object  #: the true data as given (its columns serve the trace attacks)
    released: object  #: the release as given (its record, its columns)
    true_g: object  #: the true points (GeoSeries)
    rel_all: object  #: every released row's geometry, withheld ones included
    rel_g: object  #: the released rows that have a point
    record: dict
    promise: dict  #: :func:`guarantee` of the record at ``radius``
    synthetic: bool
    prior: object
    population: object
    area: object
    bounds: tuple | None  #: the public area as bounds in the true data's CRS, or None
    area_source: str  #: where ``bounds`` come from, in words
    cell: object
    mechanism: object
    radius: float
    map_cell: object
    min_count: int
    quantile: float | None
    person: str | None
    time: str | None
    tz: str | None
    front_end: str
    plt: type

    @property
    def withheld(self) -> int:
        """Released rows without a location (a trace release's withheld queries)."""
        return len(self.rel_all) - len(self.rel_g)

    @property
    def unit(self) -> str:
        """What a row is in words: fixes of traces, or points."""
        return "fixes" if ("traj_id" in self.record or self.person is not None) else "points"


@dataclass(frozen=True)
class _Section:
    """One section of the report: its anchor, heading, HTML and how many figures it embeds."""

    sid: str
    head: str
    html: str
    figures: int = 0


def _destination(path, overwrite):
    """The checked output path (an ``.html`` file, new unless ``overwrite``), or None to return the text."""
    if path is None:
        return None
    from . import io

    return io.check_file_output(path, suffixes=(".html", ".htm"), what="report", overwrite=overwrite)


def _release_record(released) -> dict:
    """The release record the report rests on; a release without one is refused."""
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
    return record


def _report_points(true, released):
    """The true points and every released row's geometry (both with a CRS)."""
    from .points import as_geoseries

    true_g = as_geoseries(true, "true data")
    rel_all = as_geoseries(released, "released data")
    if true_g.crs is None:
        from .exceptions import MissingCRSError

        raise MissingCRSError("the true data")
    return true_g, rel_all


def _public_area(area, crs, record, mechanism):
    """The public area's bounds (area=, the record's, else an eikonal mechanism's map) and where they come from."""
    bounds = _area_bounds(area, crs, record)
    area_source = "given (area=)" if area is not None else "the record's declared bounds" if bounds else "none declared"
    if bounds is None and mechanism is not None and hasattr(mechanism, "privacy_map"):
        from pyproj import CRS

        if CRS.from_user_input(mechanism.crs).equals(CRS.from_user_input(crs)):
            bounds = tuple(float(v) for v in mechanism.privacy_map.bounds)  # the mechanism's public extent
            area_source = "the mechanism's privacy map"
    return bounds, area_source


def _write_report(doc: str, dest, path, overwrite: bool):
    """Write the report atomically, readable by its owner only; refuse an existing file unless ``overwrite``."""
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


# ---------------------------------------------------------------------------- the sections
def _guarantee_section(r: _Report) -> _Section:
    """The promise in plain words, the odds factor by distance and, for an eikonal mechanism, its privacy map."""
    promise, record = r.promise, r.record
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
    figures = 0
    if r.mechanism is not None and hasattr(r.mechanism, "privacy_map"):
        gparts.append(_privacy_map_figure(r.mechanism.privacy_map, r.radius, r.plt))
        figures += 1
    return _Section("guarantee", "The guarantee", "\n".join(gparts), figures)


def _parameters_section(r: _Report) -> _Section:
    """The release record (public) and this report's own parameters."""
    rows = []
    for key, value in r.record.items():
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
        ("distance in the guarantee sentence", "not used (any distance)" if r.synthetic else f"{r.radius:g} m"),
        ("adversary's prior", r.prior if isinstance(r.prior, str) else "array on the grid"),
        ("population", "given" if r.population is not None else "none"),
        (
            "adversary's grid step",
            "the mechanism's grid"
            if r.mechanism is not None
            else "adversary_error's default"
            if r.cell is None
            else f"{r.cell:g} m",
        ),
        ("public area", r.area_source),
    ]
    return _Section(
        "parameters",
        "Public parameters",
        "<p>The release record (published with the release: public):</p>"
        + _table(rows, head=("field", "value"))
        + "<p>This report's own parameters:</p>"
        + _table(own, head=("parameter", "value")),
    )


def _utility_section(r: _Report) -> _Section:
    """Displacement statistics (none for a synthetic set), withheld rows and the Wasserstein-1 distance."""
    figures = 0
    if r.synthetic:
        parts = [
            "<p>A synthetic set belongs to nobody: no released point is the release of a true one, so there "
            "are no displacements; the two sets are compared as distributions.</p>"
        ]
    else:
        parts, figures = _displacement_html(r)
    if r.withheld:
        parts.append(
            f"<p>{r.withheld:,} released row(s) carry no location (withheld by the release) and are left out "
            "of the statistics.</p>"
        )
    parts.append(_wasserstein_html(r.true_g, r.rel_g, r.front_end))
    return _Section("utility", "Utility", "\n".join(parts), figures)


def _displacement_html(r: _Report) -> tuple[list[str], int]:
    """The displacement table and distribution figure, or a note; with the number of figures drawn."""
    from .metrics import displacement, utility_report

    parts = []
    try:
        matched = r.rel_g
        true_m = r.true_g.loc[r.true_g.index.intersection(matched.index)] if r.withheld else r.true_g
        rep = utility_report(true_m, matched, **({} if r.quantile is None else {"quantile": r.quantile}))
        disp = displacement(true_m, matched)
        parts.append(_utility_table(rep))
        parts.append(_displacement_figure(r, disp))
        return parts, 1
    except GeoprivError as exc:
        parts.append(_note(exc, r.front_end))
        return parts, 0


def _utility_table(rep) -> str:
    """:func:`geopriv.utility_report`'s statistics under plain names."""
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
    return _table([(names.get(k, k), v) for k, v in rep.items()], head=("statistic", "value"))


def _displacement_figure(r: _Report, disp) -> str:
    """The displacements' distribution, beside planar Laplace's on an open plane for a Laplace release."""
    fig, ax = r.plt.subplots(figsize=(6.4, 3.6))
    xs = np.sort(disp.to_numpy())
    ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), color="tab:red", label="these points")
    eps = r.promise["epsilon_per_m"]
    if eps and r.record.get("mechanism") in ("planar_laplace", "spherical_laplace"):
        from .mechanisms.planar_laplace import radius_cdf

        grid = np.linspace(0, float(xs.max()) * 1.05 + 1e-9, 300)
        ax.plot(
            grid,
            radius_cdf(grid, float(r.record["epsilon_per_m"])),
            "k--",
            lw=1,
            label="planar Laplace on an open plane (expected)",
        )
    ax.set_xlabel("displacement (ground metres)")
    ax.set_ylabel("share of points")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return _figure(
        _png(fig),
        "How far the points moved: the share of points displaced by at most each distance (aggregate over all points).",
        "displacement distribution",
    )


def _maps_section(r: _Report, grid: _Grid) -> _Section:
    """Counts per cell of the true and released points on one public grid, and the released points one by one."""
    t_counts, _ = grid.counts(r.true_g)
    r_counts, r_out = grid.counts(r.rel_g)
    lead = (
        f"<p>Grid: {_e(grid.describe())}. True locations are shown only as counts per cell"
        + (f" (cells with fewer than {r.min_count} are blank)" if r.min_count > 1 else "")
        + f"; {r_out:,} released point(s) fall outside the grid.</p>"
    )
    counts = _count_maps_figure(r, grid, t_counts, r_counts)
    drawn = r.rel_g
    if len(r.rel_g) > MAX_DRAWN:  # a fixed sample of the (public) released points: the picture, not the data
        drawn = r.rel_g.iloc[np.sort(np.random.default_rng(0).choice(len(r.rel_g), MAX_DRAWN, replace=False))]
        lead = lead.replace(
            "</p>",
            f" The last map draws {MAX_DRAWN:,} of the {len(r.rel_g):,} released points, chosen at random.</p>",
            1,
        )
    points = _released_points_figure(r, grid, t_counts, drawn)
    return _Section("maps", "Maps", "\n".join([lead, counts, points]), 2)


def _count_maps_figure(r: _Report, grid: _Grid, t_counts, r_counts) -> str:
    """True and released counts per cell, side by side on the same grid."""
    fig, (a1, a2) = r.plt.subplots(1, 2, figsize=(12, 5.2))
    _count_map(a1, grid, t_counts, r.min_count, f"True {r.unit} per {grid.cell:g} m cell", r.plt)
    _count_map(a2, grid, r_counts, 1, f"Released {r.unit} per {grid.cell:g} m cell", r.plt)
    fig.tight_layout()
    return _figure(
        _png(fig),
        f"Counts per {grid.cell:g} m cell: true data (left), release (right), same grid.",
        "counts per cell, true and released",
    )


def _released_points_figure(r: _Report, grid: _Grid, t_counts, drawn) -> str:
    """The (public) released points ``drawn`` one by one over the true counts in grey."""
    fig, ax = r.plt.subplots(figsize=(7, 6))
    x0, x1, y0, y1 = (v / 1000 for v in grid.extent)
    ax.imshow(
        np.ma.masked_less(t_counts.astype(float), max(r.min_count, 1)),
        origin="lower",
        extent=(x0, x1, y0, y1),
        cmap="Greys",
        alpha=0.5,
        interpolation="nearest",
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
    return _figure(
        _png(fig), "Released points (public) drawn one by one; the true data only as grey cells.", "released points"
    )


def _reveals_section(r: _Report, grid: _Grid) -> _Section:
    """What the report reveals about the true data: why it is private."""
    reveals = (
        f"<ul><li>the number of true rows ({len(r.true_g):,}) and of released rows ({len(r.rel_all):,});</li>"
        f"<li>counts of true {r.unit} per {grid.cell:g} m cell, and so the true data's extent to within one cell;</li>"
        "<li>statistics over all points of the displacements and of the adversary's error on the true points "
        "(means, quantiles, the largest displacement);</li>"
        "<li>the public parameters, which the release publishes anyway.</li></ul>"
        "<p>It never prints or draws a true location, but these aggregates are computed from the true data "
        "without noise: keep the report with the data, do not publish it.</p>"
    )
    return _Section("reveals", "What this report reveals", reveals)


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


def _adversary_section(r: _Report) -> _Section:
    """The optimal Bayesian adversary's expected error, its k-equivalent, its error on these points and its maps."""
    head = "Adversary error and k-equivalent"
    skipped = _adversary_skipped(r)
    if skipped is not None:
        return _Section("adversary", head, skipped)
    from . import adversary as _adv

    try:
        adv = _adv.adversary_error(r.mechanism if r.mechanism is not None else r.released, **_adversary_kwargs(r))
    except GeoprivError as exc:
        return _Section("adversary", head, _note(exc, r.front_end))
    rows, notes = _adversary_rows(r, adv)
    intro = (
        "<p>The adversary knows the mechanism and a prior (" + _e(adv.prior) + ") over where people are, sees a "
        "released point and guesses the true location minimising its expected error (the optimal Bayesian "
        "adversary of Shokri et al. 2011). Its expected error and the maps below come from public parameters and "
        "the prior only; its error on these points uses the true locations.</p>"
    )
    maps = _adversary_maps(adv, r.plt)
    parts = [intro, _table(rows, head=("measure", "value")), *notes, *maps]
    return _Section("adversary", head, "\n".join(parts), len(maps))


def _adversary_skipped(r: _Report) -> str | None:
    """Why the adversary section does not apply to this release (in HTML), or None when it does."""
    if r.synthetic:
        return (
            "<p>A synthetic set belongs to nobody: there is no released point whose owner an adversary could "
            "locate, so the adversary error does not apply.</p>"
        )
    kind = str(r.record.get("mechanism", ""))
    if r.mechanism is None and kind not in ("planar_laplace", "spherical_laplace"):
        if kind == "eikonal":
            return '<p class="note">Not computed: pass the eikonal mechanism itself (mechanism=) for its adversary.</p>'
        return (
            f"<p>The optimal adversary's error is computed for point releases (perturb) and eikonal mechanisms; "
            f"this release's mechanism is {_e(mechanism_name(kind) if kind else 'another one')}"
            + (
                ": the trace attacks below measure what an adversary learns from it.</p>"
                if "traj_id" in r.record
                else ".</p>"
            )
        )
    return None


def _adversary_kwargs(r: _Report) -> dict:
    """The keyword arguments of :func:`geopriv.adversary_error`: the prior, and the grid and area when given."""
    kwargs = {"prior": r.prior, "population": r.population}
    if r.mechanism is None:
        kwargs["cell"] = r.cell
    if r.area is not None:
        kwargs.update(area=r.area, crs=r.true_g.crs)
    elif r.bounds is not None:
        kwargs.update(area=r.bounds, crs=r.true_g.crs)
    return kwargs


def _adversary_rows(r: _Report, adv) -> tuple[list, list[str]]:
    """The adversary's measures (public parameters and prior, then its error on these points) and any notes."""
    from . import adversary as _adv

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
    notes = []
    try:
        sub = r.rel_g.index.intersection(r.true_g.index)
        emp = _adv.empirical_adversary_error(r.true_g.loc[sub], r.rel_g.loc[sub], adv).attrs.get("summary", {})
        rows += [
            ("adversary's error on these points: mean (m)", emp.get("mean_m")),
            ("... median (m)", emp.get("median_m")),
            ("... 90th percentile (m)", emp.get("p90_m")),
            ("... points", emp.get("n")),
        ]
    except GeoprivError as exc:
        notes.append(_note(exc, r.front_end))
    return rows, notes


def _adversary_maps(adv, plt) -> list[str]:
    """The adversary's error map and, with a population, its k-equivalent map (public parameters and prior only)."""
    figures = []
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
        figures.append(_figure(_png(fig), caption, f"adversary {what} map"))
    return figures


def _clock(hour) -> str:
    minutes = int(round(float(hour) * 60)) % (24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _attacks_section(r: _Report) -> _Section | None:
    """The trace attacks section, or None where it does not apply (no person or trace id column)."""
    person = r.person if r.person is not None else r.record.get("traj_id")
    if person is None or is_synthetic(r.record):
        return None
    try:
        from . import attacks
    except ImportError:  # pragma: no cover - geopriv.attacks ships with this module
        return None
    head = "Trace attacks"
    time = r.time if r.time is not None else r.record.get("time")
    for what, data in (("true", r.true), ("released", r.released)):
        if not hasattr(data, "columns") or person not in data.columns:
            return _Section(
                "attacks",
                head,
                f'<p class="note">Not computed: the {what} data have no column {_e(person)!r} (person=).</p>',
            )
    parts = [
        f"<p>Persons are the values of <code>{_e(person)}</code> (a trace id counts as a person). Only "
        "aggregates over persons are shown.</p>"
    ]
    rows = []
    if time is not None and time in r.true.columns and time in r.released.columns:
        home_rows, home_parts = _home_attack(r, attacks, person, time)
        rows += home_rows
        parts += home_parts
    else:
        parts.append('<p class="note">Home attack not computed: it needs a time column in both data (time=).</p>')
    top_rows, top_parts = _top_places_attack(r, attacks, person)
    rows += top_rows
    parts += top_parts
    figures = 0
    if rows:
        parts.insert(1, _table(rows, head=("attack", "value")))
        bars = _attack_bars(rows, r.plt)
        if bars is not None:
            parts.append(bars)
            figures += 1
    return _Section("attacks", head, "\n".join(parts), figures)


def _home_attack(r: _Report, attacks, person: str, time: str) -> tuple[list, list[str]]:
    """The home attack's rows and its paragraph (or a note); without tz= a zoned time falls back to solar time."""
    rows, parts = [], []
    zone = r.tz
    home = None
    try:
        try:
            home = attacks.home_attack(r.true, r.released, person=person, time=time, tz=zone)
        except GeoprivError as exc:
            if r.tz is not None or getattr(getattr(exc, "fix", None), "kind", None) != "time_zone":
                raise
            zone = "solar"
            home = attacks.home_attack(r.true, r.released, person=person, time=time, tz=zone)
    except GeoprivError as exc:
        parts.append(_note(exc, r.front_end))
    if home is None:
        return rows, parts
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
    return rows, parts


def _top_places_attack(r: _Report, attacks, person: str) -> tuple[list, list[str]]:
    """The top-places attack's rows, or a note."""
    try:
        top = attacks.top_places_attack(r.true, r.released, person=person)
    except GeoprivError as exc:
        return [], [_note(exc, r.front_end)]
    t = top.attrs["summary"]
    rows = [
        ("top-places attack: released persons", t.get("persons")),
        (f"... re-identified by their top {t.get('n')} places (share)", t.get("reidentification_rate")),
        ("... with exactly one candidate (share)", t.get("unique_match_rate")),
        (f"persons unique by their true top {t.get('n')} places (share)", t.get("true_unique_share")),
    ]
    return rows, []


def _attack_bars(rows, plt) -> str | None:
    """A bar chart of the attacks' success shares, or None when no row is a share."""
    bars = [
        (label, float(v))
        for label, v in rows
        if "(share)" in label and v is not None and isinstance(v, (int, float)) and math.isfinite(float(v))
    ]
    if not bars:
        return None
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
    return _figure(
        _png(fig),
        "What the trace attacks achieve on this release (shares of persons).",
        "trace attack success rates",
    )


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


def _html(title, sections: list[_Section]) -> str:
    """The page: the sections in order, their navigation, and the figures the page must show once loaded."""
    figures = sum(s.figures for s in sections)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    nav = " ".join(f'<a href="#{s.sid}">{_e(s.head)}</a>' for s in sections)
    body = "\n".join(f'<section id="{s.sid}"><h2>{_e(s.head)}</h2>\n{s.html}\n</section>' for s in sections)
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
