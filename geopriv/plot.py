"""Pictures: maps of true vs released points, displacement curves, privacy maps, traces, networks, counts.

matplotlib is imported lazily (``pip install 'geopriv[plot]'``); every function returns the
matplotlib Figure and, with ``path=``, also writes it (PNG by extension), atomically through
:func:`geopriv.io.write_new_file`: an existing file is replaced, and a symbolic link at ``path``
is replaced itself (never written through to its target).

Maps are drawn as a GIS user reads them: no raw CRS numbers on the axes (``ticks="none"``, the
default; ``"km"`` or ``"m"`` print the CRS coordinates without a scientific offset), a scale bar
in **ground** metres measured at the map's centre (EPSG:3857 units are not ground metres: at
latitude phi one ground metre is 1 / cos(phi) of them), a north arrow pointing to true north, and
context from geopriv's shipped public layers where the map shows their area (the pumps of Snow's
Soho map, Tokyo's municipality boundaries; ``context=``).  Integer data (hops, counts) get a
colour bar of whole numbers (:func:`integer_colormap`, :func:`integer_colorbar`).  The helpers
:func:`style_map`, :func:`add_scale_bar`, :func:`add_north_arrow` and :func:`add_context` dress a
map drawn by other means (``gdf.plot(ax=ax)``) the same way.
"""

from __future__ import annotations

import math

import numpy as np

from .exceptions import MissingDependencyError, ParameterError

__all__ = [
    "plot_release",
    "plot_privacy_map",
    "plot_mechanism",
    "plot_synthetic",
    "plot_traces",
    "plot_diffusion",
    "plot_counts",
    "style_map",
    "add_scale_bar",
    "add_north_arrow",
    "add_context",
    "integer_colormap",
    "integer_colorbar",
]

#: gid of the artists the map helpers add (find them with ``artist.get_gid()``)
SCALE_BAR_GID = "geopriv-scale-bar"
NORTH_ARROW_GID = "geopriv-north-arrow"
CONTEXT_GID = "geopriv-context"


def _plt():
    try:
        import matplotlib

        if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
            import os

            if not os.environ.get("DISPLAY") and os.name != "nt":
                matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # geopriv's own message (shown by the CLI and QGIS), not the import's
        missing = exc.name == "matplotlib"  # else installed, but a package it needs is missing or broken
        state = "is not installed" if missing else "cannot be imported (a package it needs is missing or broken)"
        raise MissingDependencyError(
            f"Plotting needs matplotlib, which {state}.", package="matplotlib", extra="plot"
        ) from (None if missing else exc)  # the broken import's traceback stays for GEOPRIV_TRACEBACK=1
    return plt


def require_matplotlib() -> None:
    """Raise :class:`~geopriv.exceptions.MissingDependencyError` (the install line) unless plotting can run.

    For a front end that draws only when it can (``geopriv demo``): it asks before it releases anything.
    """
    _plt()


def _settle(fig) -> None:
    """Run the figure's layout once now, so it is settled before it is shown or saved (constrained layout
    places titles, legends under maps and colour bars right only after a pass or two)."""
    if fig.get_layout_engine() is not None:
        for _ in range(2):
            fig.draw_without_rendering()


def _save(fig, path, **kwargs) -> None:
    """Write ``fig`` to ``path`` (format from the extension) with geopriv's one writer: links replaced, never followed."""
    import os

    from .io import write_new_file

    mask = os.umask(0)
    os.umask(mask)
    fmt = os.path.splitext(os.fspath(path))[1][1:].lower() or None  # None: matplotlib's default format
    write_new_file(path, lambda fh: fig.savefig(fh, format=fmt, **kwargs), overwrite=True, mode=0o666 & ~mask)


# --------------------------------------------------------------------------------------------
# words: the mechanism and its privacy in plain words
# --------------------------------------------------------------------------------------------
def _record(release) -> dict:
    rec = getattr(release, "attrs", {}).get("geopriv", {})
    return rec if isinstance(rec, dict) else {}


def _number(value: float) -> str:
    """``ln 4`` for the logarithm of a whole number, else 3 significant digits."""
    k = math.exp(value)
    if 1.5 < k < 1e6 and abs(k - round(k)) < 1e-6 * k:
        return f"ln {round(k)}"
    return f"{value:.3g}"


def _metres(value: float) -> str:
    return f"{value / 1000:g} km" if value >= 1000 and value % 100 == 0 else f"{value:g} m"


def _privacy_words(record: dict) -> str:
    """The privacy of a release record in plain words: ``"ε = ln 4 within 200 m"``, ``"ε = 2"``."""
    level, radius = record.get("level"), record.get("radius_m")
    if level is not None and radius:
        return f"ε = {_number(float(level))} within {_metres(float(radius))}"
    if record.get("epsilon_per_m") is not None:
        return f"ε = {float(record['epsilon_per_m']) * 1000:.3g} per km"
    lo, hi = record.get("epsilon_min_per_m"), record.get("epsilon_max_per_m")
    if lo is not None and hi is not None:
        return f"ε from {float(lo) * 1000:.3g} to {float(hi) * 1000:.3g} per km, by place"
    if record.get("epsilon") is not None:
        return f"ε = {float(record['epsilon']):g}"
    return "privacy as recorded"


def _mechanism(record: dict) -> str:
    from .provenance import mechanism_name

    name = mechanism_name(record)
    return name[:1].upper() + name[1:]


# --------------------------------------------------------------------------------------------
# map furniture: CRS, scale bar, north arrow, context, integer colour bars
# --------------------------------------------------------------------------------------------
def _as_crs(crs):
    if crs is None:
        return None
    from pyproj import CRS

    return crs if isinstance(crs, CRS) else CRS.from_user_input(crs)


def _geodetic(crs):
    """(to lon/lat, from lon/lat, Geod) of ``crs``, or None when it has no datum."""
    from pyproj import Transformer

    crs = _as_crs(crs)
    if crs is None or crs.geodetic_crs is None:
        return None
    geo = crs.geodetic_crs
    return (
        Transformer.from_crs(crs, geo, always_xy=True),
        Transformer.from_crs(geo, crs, always_xy=True),
        geo.get_geod(),
    )


def _ground_metres_per_unit(crs, x: float, y: float, span: float = 1.0) -> float:
    """Ground metres along a horizontal map segment of ``span`` CRS units centred on (x, y), per unit.

    The geodesic length of the segment (x - span/2, y) to (x + span/2, y) on the CRS's ellipsoid,
    divided by ``span``: on EPSG:3857 about cos(latitude); on a UTM zone about 0.9996-1.0004.
    """
    g = _geodetic(crs)
    if g is None:
        raise ParameterError("this CRS has no datum: its units cannot be related to ground metres")
    to_geo, _, geod = g
    (lon0, lon1), (lat0, lat1) = to_geo.transform([x - span / 2, x + span / 2], [y, y])
    _, _, dist = geod.inv(lon0, lat0, lon1, lat1)
    return float(dist) / span


def _nice_length(target: float) -> float:
    """The largest of 1, 2, 5 x 10^k not above ``target`` (``target`` > 0)."""
    k = math.floor(math.log10(target))
    for m in (5, 2, 1):
        if m * 10**k <= target * (1 + 1e-9):
            return float(m * 10**k)
    return float(10**k)


def _length_label(metres: float) -> str:
    if metres >= 1000:
        return f"{metres / 1000:g} km"
    return f"{metres:g} m"


def add_scale_bar(ax, crs, *, length_m=None, loc: str = "lower left", fraction: float = 0.22):
    """Add a scale bar in ground metres (measured at the map's centre) to a map in ``crs``.

    Parameters
    ----------
    ax : matplotlib Axes
        A map whose data coordinates are in ``crs``; set its limits first.
    crs : pyproj CRS, str or None
        The map's CRS.  None: the bar is in the coordinates' own units (``"units"``).
    length_m : float, optional
        The bar's length in ground metres (default: a round 1, 2 or 5 x 10^k near ``fraction``
        of the map's width).
    loc : str
        matplotlib location of the bar (``"lower left"``, ``"lower right"``, ...).
    fraction : float
        Target length of the default bar, as a share of the map's width.

    Returns
    -------
    AnchoredSizeBar
        With gid ``"geopriv-scale-bar"``, ``length_m`` (ground metres, None without a CRS) and
        ``map_units`` (its length in CRS units).
    """
    _plt()
    from matplotlib.font_manager import FontProperties
    from mpl_toolkits.axes_grid1.anchored_artists import AnchoredSizeBar

    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    width = abs(x1 - x0)
    crs = _as_crs(crs)
    ground = crs is not None and _geodetic(crs) is not None
    m_per_unit = _ground_metres_per_unit(crs, (x0 + x1) / 2, (y0 + y1) / 2, width / 100) if ground else 1.0
    length = float(length_m) if length_m is not None else _nice_length(fraction * width * m_per_unit)
    size = length / m_per_unit
    label = _length_label(length) if ground else f"{length:g} units"
    bar = AnchoredSizeBar(
        ax.transData,
        size,
        label,
        loc,
        pad=0.35,
        borderpad=0.7,
        sep=3,
        frameon=True,
        size_vertical=abs(y1 - y0) / 150,
        color="black",
        fontproperties=FontProperties(size=8),
    )
    bar.patch.set_facecolor("white")
    bar.patch.set_alpha(0.8)
    bar.patch.set_edgecolor("0.7")
    bar.set_gid(SCALE_BAR_GID)
    bar.set_zorder(20)
    bar.length_m = length if ground else None
    bar.map_units = size
    ax.add_artist(bar)
    return bar


def _north_angle(crs, x: float, y: float) -> float:
    """Degrees clockwise from the map's up direction to true north at (x, y) (0 on EPSG:3857)."""
    g = _geodetic(crs)
    if g is None:
        return 0.0
    to_geo, from_geo, _ = g
    lon, lat = to_geo.transform(x, y)
    xn, yn = from_geo.transform(lon, min(lat + 1e-3, 89.999))
    return math.degrees(math.atan2(xn - x, yn - y))


def _crowding(ax, corner, size: float = 0.16) -> int:
    """How many drawn points and line vertices lie near an axes corner (in axes fractions)."""
    to_axes = ax.transAxes.inverted()
    pts = [c.get_offsets() for c in ax.collections if hasattr(c, "get_offsets") and len(c.get_offsets())]
    pts += [line.get_xydata() for line in ax.lines]
    pts += [
        t.xy
        for t in ax.texts
        if hasattr(t, "xy") and t.get_gid() != NORTH_ARROW_GID and getattr(t, "xycoords", "data") == "data"
    ]
    if not pts:
        return 0
    xy = np.vstack([np.atleast_2d(np.asarray(p, float)) for p in pts])
    xy = xy[np.isfinite(xy).all(axis=1)]
    if not len(xy):
        return 0
    f = to_axes.transform(ax.transData.transform(xy))
    return int(((np.abs(f[:, 0] - corner[0]) < size) & (np.abs(f[:, 1] - corner[1]) < size * 1.4)).sum())


def add_north_arrow(ax, crs=None, *, xy="auto", length: float = 26.0):
    """Add a small north arrow (pointing to true north at the map's centre) to a map.

    Parameters
    ----------
    ax : matplotlib Axes
    crs : pyproj CRS, str or None
        The map's CRS: the arrow turns by the grid convergence (about 2 degrees on Tokyo's
        EPSG:30166, none on EPSG:3857 or UTM's central meridian).  None: straight up.
    xy : (float, float) or "auto"
        Tip of the arrow, in axes fractions; ``"auto"``: the upper corner (right or left) with
        less drawn there.
    length : float
        Length of the arrow in points.

    Returns
    -------
    matplotlib Annotation
        With gid ``"geopriv-north-arrow"`` and ``angle_deg`` (clockwise from the map's up).
    """
    _plt()
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    if isinstance(xy, str) and xy == "auto":
        xy = min(((0.95, 0.95), (0.05, 0.95)), key=lambda c: _crowding(ax, c))  # ties: upper right
    angle = _north_angle(crs, (x0 + x1) / 2, (y0 + y1) / 2) if crs is not None else 0.0
    a = math.radians(angle)
    ann = ax.annotate(
        "N",
        xy=xy,
        xycoords="axes fraction",
        xytext=(-length * math.sin(a), -length * math.cos(a)),
        textcoords="offset points",
        ha="center",
        va="top",
        fontsize=9,
        fontweight="bold",
        arrowprops={
            "arrowstyle": "-|>,head_length=0.6,head_width=0.3",
            "color": "black",
            "lw": 1.4,
            "shrinkA": 0,
            "shrinkB": 0,
        },
        bbox={"boxstyle": "circle,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
        zorder=20,
    )
    ann.set_gid(NORTH_ARROW_GID)
    ann.angle_deg = angle
    return ann


#: shipped public layers usable as context: name -> (data set, layer, how it is drawn, legend label)
CONTEXT_LAYERS = {
    "soho_pumps": ("soho", "pumps", "points", "water pump (Snow's map, 1854)"),
    "tokyo_municipalities": ("tokyo_municipalities", None, "boundaries", "municipality boundary"),
}
_ALIASES = {
    "pumps": "soho_pumps",
    "soho": "soho_pumps",
    "municipalities": "tokyo_municipalities",
    "tokyo": "tokyo_municipalities",
}


_LAYER_CACHE: dict = {}


def _shipped_layer(name: str):
    if name not in _LAYER_CACHE:
        import geopandas as gpd

        from . import datasets

        dataset, layer = CONTEXT_LAYERS[name][:2]
        kw = {"layer": layer} if layer else {}
        _LAYER_CACHE[name] = gpd.read_file(datasets.get_path(dataset), **kw)
    return _LAYER_CACHE[name]


def _broad_street(pumps) -> int:
    """Row of the Broad Street pump: the pump nearest to the most deaths of Snow's (shipped, public) map."""
    if "broad" not in _LAYER_CACHE:
        import geopandas as gpd

        from . import datasets

        deaths = gpd.read_file(datasets.get_path("soho"), layer="deaths").to_crs(pumps.crs)
        d = np.hypot(
            deaths.geometry.x.to_numpy()[:, None] - pumps.geometry.x.to_numpy()[None, :],
            deaths.geometry.y.to_numpy()[:, None] - pumps.geometry.y.to_numpy()[None, :],
        )
        _LAYER_CACHE["broad"] = int(np.bincount(d.argmin(axis=1), minlength=len(pumps)).argmax())
    return _LAYER_CACHE["broad"]


def _auto_context(crs, bounds) -> list:
    """The shipped layers whose area the map (``bounds`` in ``crs``) overlaps."""
    from pyproj import Transformer

    crs = _as_crs(crs)
    if crs is None or crs.geodetic_crs is None:
        return []
    try:
        lon0, lat0, lon1, lat1 = Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform_bounds(*bounds)
    except Exception:  # noqa: BLE001 - an exotic CRS: no context rather than no map
        return []
    found = []
    for name in CONTEXT_LAYERS:
        layer = _shipped_layer(name)
        bx0, by0, bx1, by1 = layer.to_crs("EPSG:4326").total_bounds
        if lon0 <= bx1 and bx0 <= lon1 and lat0 <= by1 and by0 <= lat1:
            found.append(name)
    return found


def _resolve_context(context, crs, bounds) -> list:
    if context is None or context is False:
        return []
    if isinstance(context, str) and context == "auto":
        return _auto_context(crs, bounds)
    if context is True:
        return _auto_context(crs, bounds)
    if isinstance(context, (list, tuple)):
        return list(context)
    return [context]


def add_context(ax, context, crs, *, zorder: float = 1.5, color=None) -> list:
    """Draw context layers on a map in ``crs``, keeping its limits.

    Parameters
    ----------
    ax : matplotlib Axes
    context : str, GeoDataFrame, GeoSeries or list of them
        ``"soho_pumps"`` (the 13 pumps of Snow's map, the Broad Street pump in gold),
        ``"tokyo_municipalities"`` (the 262 boundaries behind the Tokyo rasters), or your own
        layer (points as grey crosses, lines and polygon outlines in grey).
    crs : pyproj CRS or str
        The map's CRS; layers are reprojected to it.
    zorder : float
        Drawing order (the map's points are drawn at 3 and above).
    color : optional
        Colour of boundaries (default grey).

    Returns
    -------
    list of str
        What was drawn: the names, or ``"layer"`` for your own (only layers with something in the map's view).
    """
    _plt()
    drawn = []
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    for item in context if isinstance(context, (list, tuple)) else [context]:
        if isinstance(item, str):
            name = _ALIASES.get(item, item)
            if name not in CONTEXT_LAYERS:
                known = ", ".join(repr(n) for n in CONTEXT_LAYERS)
                raise ParameterError(f"no shipped context layer is called {item!r}: the names are {known}")
            layer = _shipped_layer(name)
            layer = layer.to_crs(crs) if crs is not None else layer
            kind, label = CONTEXT_LAYERS[name][2:]
        else:
            name, layer = "layer", item
            if crs is not None and getattr(layer, "crs", None) is not None:
                layer = layer.to_crs(crs)
            geom = layer.geometry if hasattr(layer, "geometry") else layer
            kind = "points" if (geom.geom_type == "Point").all() else "boundaries"
            label = "context"
        geom = layer.geometry if hasattr(layer, "geometry") else layer
        inview = geom.intersects(_view_box(xlim, ylim)).to_numpy()
        if not inview.any():  # nothing of it in the view: no legend entry for what is not shown
            continue
        if kind == "points":
            xs, ys = geom.x.to_numpy(), geom.y.to_numpy()
            if name == "soho_pumps":
                broad = np.arange(len(xs)) == _broad_street(_shipped_layer(name))
                rest = ~broad & inview
                pc = None
                if rest.any():
                    pc = ax.scatter(
                        xs[rest],
                        ys[rest],
                        marker="^",
                        s=55,
                        c="tab:blue",
                        edgecolors="white",
                        linewidths=0.7,
                        label=label,
                        zorder=zorder + 3,
                    )
                if (broad & inview).any():
                    pb = ax.scatter(
                        xs[broad],
                        ys[broad],
                        marker="^",
                        s=110,
                        c="gold",
                        edgecolors="black",
                        linewidths=0.8,
                        label="Broad Street pump",
                        zorder=zorder + 3,
                    )
                    pb.set_gid(f"{CONTEXT_GID}-{name}")
                    pc = pc if pc is not None else pb
            else:
                pc = ax.scatter(
                    xs[inview], ys[inview], marker="x", s=30, c="0.35", linewidths=1.0, label=label, zorder=zorder + 3
                )
        else:
            part = geom[inview]
            polygons = part.geom_type.isin(["Polygon", "MultiPolygon"])
            bound = part.where(~polygons, part.boundary)  # polygons as outlines, lines as they are
            pc = bound.plot(ax=ax, color=color or "0.45", linewidth=0.5, zorder=zorder, label=label).collections[-1]
        pc.set_gid(f"{CONTEXT_GID}-{name}")
        drawn.append(name)
    ax.set_xlim(xlim)
    ax.set_ylim(ylim)
    return drawn


def _view_box(xlim, ylim):
    from shapely.geometry import box

    return box(min(xlim), min(ylim), max(xlim), max(ylim))


def _crs_note(crs) -> str:
    crs = _as_crs(crs)
    if crs is None:
        return "no CRS: scale bar in coordinate units"
    epsg = crs.to_epsg()
    name = f"EPSG:{epsg}" if epsg else (crs.name if crs.name and crs.name.lower() != "unknown" else "custom CRS")
    return f"{name}; scale bar in ground metres"


def style_map(
    ax, crs, *, ticks: str = "none", scale_bar: bool = True, north_arrow: bool = True, context=None, note: bool = True
):
    """Dress a map as a GIS user reads it: no raw CRS numbers, a scale bar, a north arrow, context.

    Parameters
    ----------
    ax : matplotlib Axes
        The map, drawn in ``crs``; its limits are kept.
    crs : pyproj CRS, str or None
    ticks : {"none", "km", "m"}
        ``"none"`` (default): no axis numbers (the scale bar gives distances);
        ``"km"``/``"m"``: the CRS coordinates in kilometres or metres, without a scientific
        offset (CRS units: ground metres only on a CRS with scale 1 there).
    scale_bar, north_arrow : bool
    context : optional
        As :func:`add_context` (``"auto"``: the shipped layers this map overlaps).
    note : bool
        Print the CRS in a corner.

    Returns
    -------
    matplotlib Axes
    """
    _plt()
    from matplotlib.ticker import FuncFormatter

    if ticks not in ("none", "km", "m"):
        raise ParameterError("ticks must be 'none', 'km' or 'm'.")
    crs = _as_crs(crs)
    x0, x1 = sorted(ax.get_xlim())
    y0, y1 = sorted(ax.get_ylim())
    layers = _resolve_context(context, crs, (x0, y0, x1, y1))
    if layers:
        add_context(ax, layers, crs)
    ax.set_aspect("equal")
    if ticks == "none":
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("")
        ax.set_ylabel("")
    else:
        f = 1000.0 if ticks == "km" else 1.0
        fmt = FuncFormatter(lambda v, _pos: f"{v / f:,.0f}" if abs(v / f) >= 10 else f"{v / f:,.1f}")
        ax.xaxis.set_major_formatter(fmt)
        ax.yaxis.set_major_formatter(fmt)
        xl, yl = _axis_labels(crs, ticks)
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
    if scale_bar:
        add_scale_bar(ax, crs)
    if north_arrow and crs is not None:
        add_north_arrow(ax, crs)
    if note:
        ax.text(
            0.99,
            0.01,
            _crs_note(crs),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=6.5,
            color="0.35",
            zorder=20,
            bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 1.0},
        )
    return ax


def integer_colormap(values, cmap="viridis", *, max_levels: int = 40):
    """A colour map and norm for whole numbers: one colour per value (at most ``max_levels``).

    Parameters
    ----------
    values : array-like
        The integers to colour (NaN ignored).
    cmap : str or Colormap
    max_levels : int
        Up to this many distinct values get one flat colour each (a BoundaryNorm with edges at
        the half-integers); a wider range gets a continuous norm, still with integer ticks.

    Returns
    -------
    (Colormap, Normalize)
    """
    plt = _plt()
    from matplotlib.colors import BoundaryNorm, Normalize

    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    lo, hi = (int(math.floor(v.min())), int(math.ceil(v.max()))) if v.size else (0, 1)
    base = plt.get_cmap(cmap) if isinstance(cmap, str) else cmap
    if hi - lo + 1 <= max_levels:
        edges = np.arange(lo - 0.5, hi + 1.0, 1.0)
        cm = base.resampled(len(edges) - 1)
        return cm, BoundaryNorm(edges, cm.N)
    return base, Normalize(lo, hi)


def integer_colorbar(mappable, *, ax=None, label=None, **kwargs):
    """A colour bar with whole-number ticks for a mappable drawn with :func:`integer_colormap`.

    Parameters
    ----------
    mappable : matplotlib ScalarMappable
    ax : Axes, optional
        Where to steal space from (default: the mappable's axes).
    label : str, optional
    **kwargs
        Passed to ``Figure.colorbar`` (e.g. ``shrink``).

    Returns
    -------
    matplotlib Colorbar
    """
    _plt()
    from matplotlib.colors import BoundaryNorm
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax = ax if ax is not None else mappable.axes
    fig = mappable.axes.figure if mappable.axes is not None else ax.figure
    cb = fig.colorbar(mappable, ax=ax, label=label, **kwargs)
    norm = mappable.norm
    if isinstance(norm, BoundaryNorm):
        values = [round(v) for v in (norm.boundaries[:-1] + norm.boundaries[1:]) / 2]
        step = max(1, math.ceil(len(values) / 12))
        cb.set_ticks(values[::step], labels=[str(v) for v in values[::step]])
    else:
        cb.locator = MaxNLocator(nbins=8, integer=True)
        cb.formatter = FuncFormatter(lambda v, _pos: f"{v:.0f}")
        cb.update_ticks()
    cb.minorticks_off()
    return cb


def _axis_labels(crs, ticks: str = "m") -> tuple[str, str]:
    """'easting (km, EPSG:32654)'-style labels from a pyproj CRS (unit first: what readers need)."""
    crs = _as_crs(crs)
    try:
        unit = crs.axis_info[0].unit_name
    except (AttributeError, IndexError):
        unit = "CRS units"
    unit = {"metre": "m", "US survey foot": "US ft", "foot": "ft"}.get(unit, unit)
    if ticks == "km" and unit == "m":
        unit = "km"
    name = crs.to_string() if crs is not None and crs.to_epsg() is not None else None
    suffix = f", {name}" if name else ""
    return f"easting ({unit}{suffix})", f"northing ({unit})"


def _geoseries(data):
    return data.geometry if hasattr(data, "geometry") else data


def _projected(*frames):
    """The frames in one CRS fit for a map: the first's, or its UTM zone when it is geographic."""
    first = _geoseries(frames[0])
    crs = _as_crs(first.crs)
    if crs is not None and crs.is_geographic:
        crs = first.estimate_utm_crs()
    out = []
    for f in frames:
        if f is None:
            out.append(None)
            continue
        if crs is not None and f.crs is not None and _as_crs(f.crs) != crs:
            f = f.to_crs(crs)
        out.append(f)
    return crs, out


def _pad_limits(ax, xs, ys, *, pad: float = 0.06, min_span: float = 100.0):
    xs = np.asarray(xs, float)
    ys = np.asarray(ys, float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    if xs.size == 0:
        return
    x0, x1, y0, y1 = xs.min(), xs.max(), ys.min(), ys.max()
    span = max(x1 - x0, y1 - y0, min_span)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    hx = max(x1 - x0, min_span) / 2 + pad * span
    hy = max(y1 - y0, min_span) / 2 + pad * span
    ax.set_xlim(cx - hx, cx + hx)
    ax.set_ylim(cy - hy, cy + hy)


def _titles(fig, ax, own: bool, head: str, sub: str) -> None:
    """The title (the figure's when it is ours, else the axes') and a smaller line under it, wrapped."""
    import textwrap

    width = max(40, int(fig.get_figwidth() * 9))
    sub = textwrap.fill(sub, width) if sub else ""
    if own:
        fig.suptitle(head)
        ax.set_title(sub, fontsize=9)
    else:
        ax.set_title(textwrap.fill(head, width) + ("\n" + sub if sub else ""), fontsize=10)


def _legend_below(ax, ncol: int = 3, **kwargs):
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.01),
        ncol=min(ncol, len(handles)),
        fontsize=8,
        frameon=False,
        **kwargs,
    )


# --------------------------------------------------------------------------------------------
# point releases: true vs released, synthetic points
# --------------------------------------------------------------------------------------------
def plot_release(
    true,
    released,
    *,
    path=None,
    title=None,
    links: bool = True,
    max_links: int = 2000,
    context="auto",
    ticks: str = "none",
    scale_bar: bool = True,
    north_arrow: bool = True,
):
    """Map of true (grey) vs released (red) points with displacement lines, and the displacement CDF.

    Parameters
    ----------
    true, released : GeoDataFrame or GeoSeries
        Rows matched by index label (as produced by :func:`geopriv.perturb`).
    path : str or Path, optional
        Write the figure there (e.g. ``"map.png"``).
    title : str, optional
        The figure's title (default: the release's privacy in plain words, from its record).
    links : bool
        Draw a line from each true point to its release (the first ``max_links``).
    context : "auto", str, GeoDataFrame, list or None
        Context layers (:func:`add_context`); ``"auto"`` draws the shipped ones the map overlaps
        (Snow's pumps on Soho data, municipality boundaries on Tokyo data); None: none.
    ticks : {"none", "km", "m"}
        Axis numbers (:func:`style_map`); the default shows none, with a scale bar.
    scale_bar, north_arrow : bool
        Draw a scale bar in ground metres and a north arrow on the map.

    Returns
    -------
    matplotlib Figure
    """
    from .metrics import displacement

    plt = _plt()
    t = _geoseries(true)
    r = _geoseries(released)
    if r.crs != t.crs:
        r = r.to_crs(t.crs)
    r = r.loc[t.index]
    d = displacement(t, r).to_numpy()
    crs, (tm, rm) = _projected(t, r)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 6.6), gridspec_kw={"width_ratios": [1.3, 1]}, layout="constrained")
    tx, ty = tm.x.to_numpy(), tm.y.to_numpy()
    rx, ry = rm.x.to_numpy(), rm.y.to_numpy()
    if links:
        from matplotlib.collections import LineCollection

        k = min(len(tx), max_links)
        segs = np.stack([np.column_stack([tx[:k], ty[:k]]), np.column_stack([rx[:k], ry[:k]])], axis=1)
        ax.add_collection(
            LineCollection(segs, colors="0.6", linewidths=0.5, alpha=0.6, zorder=2, label="how each point moved")
        )
    ax.scatter(tx, ty, s=10, c="0.25", label="true location", zorder=3)
    ax.scatter(rx, ry, s=10, c="tab:red", label="released location", zorder=4)
    _pad_limits(ax, np.concatenate([tx, rx]), np.concatenate([ty, ry]))
    style_map(ax, crs, ticks=ticks, scale_bar=scale_bar, north_arrow=north_arrow, context=context)
    _legend_below(ax, ncol=3)
    rec = _record(released)
    ax.set_title(_mechanism(rec) if rec else "True and released locations", fontsize=10)
    if title is None:
        geo_ind = rec.get("mechanism") in ("planar_laplace", "spherical_laplace", "eikonal")
        what = "a geo-indistinguishable release" if geo_ind else "their release"
        title = f"True locations and {what} ({_privacy_words(rec)})" if rec else "True and released locations"
    fig.suptitle(title)

    xs = np.sort(d)
    ax2.plot(xs, np.arange(1, len(xs) + 1) / max(len(xs), 1), color="tab:red", label="released points (measured)")
    eps = rec.get("epsilon_per_m")
    if eps and rec.get("mechanism") in ("planar_laplace", "spherical_laplace"):
        from .mechanisms.planar_laplace import radius_cdf

        grid = np.linspace(0, max(xs.max(), 1.0) * 1.05, 300)
        law = "planar Laplace law at this ε" + (" (before truncation to the region)" if rec.get("region") else "")
        ax2.plot(grid, radius_cdf(grid, eps), "k--", lw=1, label=law)
    q90 = float(np.quantile(d, 0.9)) if len(d) else 0.0
    ax2.axvline(q90, color="0.5", lw=0.8)
    left = len(xs) and q90 > 0.55 * xs.max()  # the words on the roomier side of the line
    ax2.text(
        q90,
        0.06,
        f"90 % moved less than {q90:.0f} m",
        color="0.3",
        fontsize=9,
        ha="right" if left else "left",
        bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 2},
        transform=ax2.get_xaxis_transform(),  # x in metres, y in axes fractions
    )
    ax2.set_ylim(-0.03, 1.05)
    ax2.set_xlim(left=min(0.0, ax2.get_xlim()[0]))
    ax2.set_xlabel("distance from the true location (ground metres)")
    ax2.set_ylabel("share of points that moved less")
    mean, median = (float(d.mean()), float(np.median(d))) if len(d) else (0.0, 0.0)
    ax2.set_title(f"How far the points moved: mean {mean:.0f} m, median {median:.0f} m", fontsize=10)
    ax2.legend(loc="best", fontsize=8)
    ax2.grid(alpha=0.3)
    _settle(fig)
    if path is not None:
        _save(fig, path, dpi=120)
    return fig


def _public_area(rec, crs_in, crs_map):
    """The record's public rectangle as a GeoSeries in the map's CRS, or None."""
    import geopandas as gpd
    from shapely.geometry import box

    b = rec.get("public_area") or rec.get("declared_bounds")
    if not b or len(b) != 4:
        return None
    area = gpd.GeoSeries([box(*b)], crs=rec.get("input_crs") or crs_in)
    area = area.segmentize(max((b[2] - b[0]), (b[3] - b[1])) / 50)
    return area.to_crs(crs_map) if crs_map is not None and area.crs is not None else area


def plot_synthetic(
    true,
    synthetic,
    *,
    path=None,
    title=None,
    context="auto",
    ticks: str = "none",
    scale_bar: bool = True,
    north_arrow: bool = True,
):
    """True locations beside a synthetic point set (:func:`geopriv.synthesize`), on one extent.

    Parameters
    ----------
    true, synthetic : GeoDataFrame or GeoSeries
        The data and its synthetic release (rows are not matched: the synthetic points are nobody's).
    path : str or Path, optional
        Write the figure there.
    title : str, optional
        The figure's title (default: the mechanism and epsilon in plain words).
    context, ticks, scale_bar, north_arrow
        As :func:`plot_release`; the release's public area is drawn dashed.

    Returns
    -------
    matplotlib Figure
    """
    plt = _plt()
    t = _geoseries(true)
    s = _geoseries(synthetic)
    crs, (tm, sm) = _projected(t, s)
    rec = _record(synthetic)
    area = _public_area(rec, t.crs, crs)
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.4), sharex=True, sharey=True, layout="constrained")
    xs = [tm.x.to_numpy(), sm.x.to_numpy()]
    ys = [tm.y.to_numpy(), sm.y.to_numpy()]
    if area is not None:
        ax0, ay0, ax1, ay1 = area.total_bounds
        xs.append(np.array([ax0, ax1]))
        ys.append(np.array([ay0, ay1]))
    for ax, g, colour, label, head in (
        (axes[0], tm, "0.25", "true location", f"True locations (n = {len(tm)})"),
        (axes[1], sm, "tab:red", "synthetic point", f"Synthetic points (n = {len(sm)})"),
    ):
        ax.scatter(g.x.to_numpy(), g.y.to_numpy(), s=8, c=colour, label=label, zorder=3)
        if area is not None:
            area.boundary.plot(ax=ax, color="0.4", lw=1.0, ls="--", label="public area (declared)", zorder=2)
        ax.set_title(head, fontsize=10)
    _pad_limits(axes[0], np.concatenate(xs), np.concatenate(ys), pad=0.03)
    for k, ax in enumerate(axes):
        style_map(ax, crs, ticks=ticks, scale_bar=scale_bar, north_arrow=north_arrow, context=context, note=k == 1)
        _legend_below(ax, ncol=2)
    if title is None:
        title = (
            f"True locations and synthetic points: {_mechanism(rec)}, {_privacy_words(rec)}"
            if rec
            else ("True locations and synthetic points")
        )
    fig.suptitle(title)
    _settle(fig)
    if path is not None:
        _save(fig, path, dpi=120)
    return fig


# --------------------------------------------------------------------------------------------
# traces
# --------------------------------------------------------------------------------------------
_STATUS_STYLE = {
    "noise": ("tab:red", "o", "released with fresh noise (spends budget)"),
    "predicted": ("tab:blue", "o", "answered from the prediction (no budget)"),
    "skipped": ("tab:green", "s", "skipped by the time rule (no budget)"),
}


def plot_traces(
    true,
    released,
    *,
    path=None,
    title=None,
    ax=None,
    context="auto",
    ticks: str = "none",
    scale_bar: bool = True,
    north_arrow: bool = True,
):
    """Map of query traces and their private release (:func:`geopriv.sanitize_traces`), by what each point cost.

    Parameters
    ----------
    true : GeoDataFrame
        The queries released (one row per query; the trace id and time columns the record names).
    released : GeoDataFrame
        The release, with its ``status`` column: fresh noise (red), answered from the prediction
        (blue, no budget), skipped (green); rows whose trace's budget was spent are not drawn
        (the legend counts them).
    path : str or Path, optional
        Write the figure there.
    title : str, optional
        The title (default: how many points were answered from the prediction, in plain words).
    ax : matplotlib Axes, optional
        Draw into it (a new figure otherwise).
    context, ticks, scale_bar, north_arrow
        As :func:`plot_release`.  Longitude/latitude data are drawn in their UTM zone.

    Returns
    -------
    matplotlib Figure
    """
    plt = _plt()
    from matplotlib.lines import Line2D

    rec = _record(released)
    crs, (tm, rm) = _projected(true, released)
    own = ax is None
    fig, ax = plt.subplots(figsize=(8, 7.4), layout="constrained") if own else (ax.figure, ax)
    traj, when = rec.get("traj_id"), rec.get("time")
    tg = _geoseries(tm)
    if traj and hasattr(tm, "columns") and traj in tm.columns:
        order = [traj] + ([when] if when and when in tm.columns else [])
        for k, (_tid, part) in enumerate(tm.sort_values(order).groupby(traj, sort=False)):
            g = part.geometry
            ax.plot(
                g.x.to_numpy(),
                g.y.to_numpy(),
                "-",
                color="0.55",
                lw=0.8,
                zorder=2,
                label="true trace (queries in time order)" if k == 0 else None,
            )
    ax.scatter(tg.x.to_numpy(), tg.y.to_numpy(), s=5, c="0.3", zorder=3, label="true query location")
    status = (
        rm["status"].astype(str).to_numpy() if "status" in getattr(rm, "columns", []) else np.full(len(rm), "noise")
    )
    geom = _geoseries(rm)
    shown = ~(geom.is_empty | geom.isna()).to_numpy() & (status != "exhausted")
    for st, (colour, marker, label) in _STATUS_STYLE.items():
        sel = shown & (status == st)
        if sel.any():
            ax.scatter(
                geom.x.to_numpy()[sel],
                geom.y.to_numpy()[sel],
                s=16,
                c=colour,
                marker=marker,
                edgecolors="white",
                linewidths=0.4,
                zorder=4,
                label=f"{label}: {int(sel.sum())}",
            )
    xs = np.concatenate([tg.x.to_numpy(), geom.x.to_numpy()[shown]])
    ys = np.concatenate([tg.y.to_numpy(), geom.y.to_numpy()[shown]])
    _pad_limits(ax, xs, ys, min_span=500.0)
    style_map(ax, crs, ticks=ticks, scale_bar=scale_bar, north_arrow=north_arrow, context=context)
    handles, labels = ax.get_legend_handles_labels()
    spent = int((status == "exhausted").sum())
    if spent:
        handles.append(Line2D([], [], ls="none"))
        labels.append(f"not released, the trace's budget was spent: {spent}")
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=2, fontsize=8, frameon=False)
    n = len(rm)
    predicted = int((status == "predicted").sum())
    head = title or f"Private traces: {predicted} of {n} points answered from the prediction, spending no budget"
    sub = f"{_mechanism(rec)}; {_privacy_words(rec)} for each whole trace" if rec else ""
    _titles(fig, ax, own, head, sub)
    _settle(fig)
    if path is not None:
        _save(fig, path, dpi=120)
    return fig


# --------------------------------------------------------------------------------------------
# a location told over a network
# --------------------------------------------------------------------------------------------
def plot_diffusion(
    told,
    source=None,
    *,
    source_name=None,
    path=None,
    title=None,
    ax=None,
    column="network_distance",
    context="auto",
    ticks: str = "none",
    scale_bar: bool = True,
    north_arrow: bool = True,
):
    """Map of what each recipient is told of one person's location (:func:`geopriv.diffuse_locations`).

    Parameters
    ----------
    told : GeoDataFrame
        One row per recipient (index: the recipient), with the network distance in ``column``.
        Hop counts get a colour bar of whole numbers; resistance distances a continuous one.
    source : GeoDataFrame, GeoSeries or shapely Point, optional
        The source's true location (in ``told``'s CRS for a bare Point), drawn as a black star.
    source_name : str, optional
        Who the source is (default: the label of ``source``'s one row, else "the source").
    path : str or Path, optional
        Write the figure there.
    title : str, optional
        The title (default: "What each recipient is told of <source>'s location").
    ax : matplotlib Axes, optional
        Draw into it (a new figure otherwise).
    column : str
        The distance column.
    context, ticks, scale_bar, north_arrow
        As :func:`plot_release`.

    Returns
    -------
    matplotlib Figure
    """
    plt = _plt()
    import geopandas as gpd
    from matplotlib.lines import Line2D

    rec = _record(told)
    src = None
    if source is not None:
        if hasattr(source, "geom_type") and not hasattr(source, "crs"):  # a shapely geometry
            src = gpd.GeoSeries([source], crs=told.crs)
        else:
            src = _geoseries(source)
            if source_name is None and len(src) == 1 and isinstance(src.index[0], str):
                source_name = src.index[0]
    name = source_name or "the source"
    crs, (tm, sm) = _projected(told, src)
    own = ax is None
    fig, ax = plt.subplots(figsize=(8, 7), layout="constrained") if own else (ax.figure, ax)
    values = tm[column].to_numpy(dtype=float)
    hops = rec.get("distance") == "hops" or bool(np.all(np.isfinite(values) & (values == np.round(values))))
    g = _geoseries(tm)
    x, y = g.x.to_numpy(), g.y.to_numpy()
    kind = "hops" if hops else "resistance distance"
    if hops:
        cmap, norm = integer_colormap(values, "viridis")
    else:
        from matplotlib.colors import Normalize

        cmap, norm = plt.get_cmap("viridis"), Normalize(np.nanmin(values), np.nanmax(values))
    order = np.argsort(-values)  # closest drawn last, on top
    sc = ax.scatter(
        x[order], y[order], c=values[order], cmap=cmap, norm=norm, s=70, edgecolors="black", linewidths=0.6, zorder=5
    )
    sc.set_gid("geopriv-recipients")
    xs, ys = [x], [y]
    handles = [
        Line2D(
            [],
            [],
            ls="none",
            marker="o",
            mfc="0.7",
            mec="black",
            ms=8,
            label=f"what a recipient is told (colour: {kind} from {name})",
        )
    ]
    if sm is not None:
        sg = _geoseries(sm)
        ax.scatter(sg.x, sg.y, marker="*", s=260, c="black", edgecolors="white", linewidths=0.8, zorder=7)
        handles.insert(
            0,
            Line2D(
                [],
                [],
                ls="none",
                marker="*",
                mfc="black",
                mec="white",
                ms=15,
                label=f"{name}'s true location (the source)",
            ),
        )
        xs.append(sg.x.to_numpy())
        ys.append(sg.y.to_numpy())
    _pad_limits(ax, np.concatenate(xs), np.concatenate(ys), pad=0.12, min_span=300.0)
    xlim = ax.get_xlim()
    # recipients told the same point share one label
    groups: dict = {}
    for label, xi, yi, v in zip(tm.index, x, y, values):
        groups.setdefault((round(xi, 3), round(yi, 3)), []).append((v, str(label)))
    unit = "hop" if hops else ""
    for (xi, yi), members in groups.items():
        members.sort()
        by: dict = {}
        for v, who in members:
            by.setdefault(v, []).append(who)
        text = "; ".join(
            f"{', '.join(who)}: {v:.0f} {unit}{'s' if v != 1 else ''}" if hops else f"{', '.join(who)}: {v:.3g}"
            for v, who in by.items()
        )
        right = (xi - xlim[0]) > 0.5 * (xlim[1] - xlim[0])  # labels point inwards, never off the map
        ax.annotate(
            text,
            (xi, yi),
            xytext=(-7 if right else 7, 6),
            textcoords="offset points",
            ha="right" if right else "left",
            fontsize=8,
            zorder=6,
            bbox={"fc": "white", "ec": "none", "alpha": 0.75, "pad": 0.8},
        )
    style_map(ax, crs, ticks=ticks, scale_bar=scale_bar, north_arrow=north_arrow, context=context)
    ctx_h, ctx_l = ax.get_legend_handles_labels()
    ax.legend(
        handles + ctx_h,
        [h.get_label() for h in handles] + ctx_l,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.01),
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    label = f"{'hops' if hops else 'resistance distance'} from {name} (network distance)"
    if hops:
        integer_colorbar(sc, ax=ax, label=label, shrink=0.6)
    else:
        fig.colorbar(sc, ax=ax, label=label, shrink=0.6)
    head = title or f"What each recipient is told of {name}'s location"
    lo, hi = rec.get("epsilon_min_per_m"), rec.get("epsilon_max_per_m")
    sub = _mechanism(rec) if rec else ""
    if lo is not None and hi is not None:
        sub += f"; ε from {lo * 1000:.3g} (farthest) to {hi * 1000:.3g} per km (closest)"
    _titles(fig, ax, own, head, sub)
    _settle(fig)
    if path is not None:
        _save(fig, path, dpi=120)
    return fig


# --------------------------------------------------------------------------------------------
# counts per cell
# --------------------------------------------------------------------------------------------
def plot_counts(
    counts,
    *,
    true=None,
    path=None,
    title=None,
    column: str = "count",
    cmap="Reds",
    context="auto",
    ticks: str = "none",
    scale_bar: bool = True,
    north_arrow: bool = True,
):
    """Map of private counts per cell (:func:`geopriv.aggregate`), beside the true counts if given.

    Parameters
    ----------
    counts : GeoDataFrame
        Cells (polygons) with their released count in ``column``.
    true : GeoDataFrame, optional
        The same cells' true counts, drawn on the left on the same colour scale.
    path : str or Path, optional
        Write the figure there.
    title : str, optional
        The title (default: the mechanism and epsilon in plain words).
    column : str
        The count column; whole numbers get a colour bar of whole numbers.
    cmap : str or Colormap
    context, ticks, scale_bar, north_arrow
        As :func:`plot_release`.

    Returns
    -------
    matplotlib Figure
    """
    plt = _plt()
    crs, frames = _projected(counts, true)
    released, truth = frames
    panels = ([(truth, "True counts")] if truth is not None else []) + [
        (released, f"Released counts ({_privacy_words(_record(counts))})" if _record(counts) else "Released counts")
    ]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(6.2 * len(panels) + 1, 6.4),
        squeeze=False,
        sharex=True,
        sharey=True,
        layout="constrained",
    )
    axes = axes.ravel()
    allv = np.concatenate([p[column].to_numpy(dtype=float) for p, _ in panels])
    whole = bool(np.all(allv[np.isfinite(allv)] == np.round(allv[np.isfinite(allv)])))
    if whole:
        cm, norm = integer_colormap(allv, cmap, max_levels=40)
    else:
        from matplotlib.colors import Normalize

        cm, norm = plt.get_cmap(cmap), Normalize(np.nanmin(allv), np.nanmax(allv))
    mappable = None
    for ax, (frame, head) in zip(axes, panels):
        frame.plot(column=column, ax=ax, cmap=cm, norm=norm, edgecolor="0.85", linewidth=0.3, zorder=1)
        mappable = ax.collections[-1]
        mappable.set_gid("geopriv-cells")
        ax.set_title(head, fontsize=10)
    x0, y0, x1, y1 = released.total_bounds
    _pad_limits(axes[0], [x0, x1], [y0, y1], pad=0.02)
    for k, ax in enumerate(axes):
        style_map(
            ax, crs, ticks=ticks, scale_bar=scale_bar, north_arrow=north_arrow, context=context, note=k == len(axes) - 1
        )
        _legend_below(ax, ncol=2)
    label = "count per cell" if column == "count" else column
    if whole:
        integer_colorbar(mappable, ax=list(axes), label=label, shrink=0.8)
    else:
        fig.colorbar(mappable, ax=list(axes), label=label, shrink=0.8)
    rec = _record(counts)
    fig.suptitle(title or (f"Private counts per cell: {_mechanism(rec)}" if rec else "Counts per cell"))
    _settle(fig)
    if path is not None:
        _save(fig, path, dpi=120)
    return fig


# --------------------------------------------------------------------------------------------
# location-dependent privacy (geopriv.PrivacyMap, geopriv.EikonalMechanism)
# --------------------------------------------------------------------------------------------
def _map_extent(pm, pad_cells: int = 0):
    xmin, ymin, xmax, ymax = pm.bounds
    hx, hy = pm.cell_size
    return (xmin - pad_cells * hx, xmax + pad_cells * hx, ymin - pad_cells * hy, ymax + pad_cells * hy)


def plot_privacy_map(
    privacy_map,
    *,
    ax=None,
    points=None,
    path=None,
    title=None,
    per: str = "km",
    context="auto",
    ticks: str = "none",
    scale_bar: bool = True,
    north_arrow: bool = True,
):
    """Image of a :class:`geopriv.PrivacyMap`: epsilon (per km by default), no-data cells hatched.

    Parameters
    ----------
    privacy_map : PrivacyMap
    ax : matplotlib Axes, optional
        Draw into it (a new figure otherwise).
    points : (k, 2) array-like, optional
        Locations (map CRS) to mark with white circles, e.g. those of :func:`plot_mechanism`.
    path : str or Path, optional
        Write the figure there.
    title : str, optional
        The title (default: "Privacy map (ε per km)").
    per : {"km", "m"}
        Unit of the colour bar: epsilon per kilometre (default, readable numbers) or per metre.
    context, ticks, scale_bar, north_arrow
        As :func:`plot_release` (``"auto"``: Tokyo's municipality boundaries on the shipped
        Tokyo rasters).

    Returns
    -------
    matplotlib Figure
    """
    plt = _plt()
    if per not in ("km", "m"):
        raise ParameterError("per must be 'km' or 'm'.")
    factor = 1000.0 if per == "km" else 1.0
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 5.8), layout="constrained")
    else:
        fig = ax.figure
    pm = privacy_map
    im = ax.imshow(pm.epsilon * factor, extent=_map_extent(pm), origin="upper", cmap="viridis", interpolation="nearest")
    if pm.nodata_mask.any():
        nd = np.ma.masked_where(~pm.nodata_mask, np.ones(pm.shape))
        ax.imshow(
            nd,
            extent=_map_extent(pm),
            origin="upper",
            cmap="Greys",
            vmin=0,
            vmax=3,
            alpha=0.35,
            interpolation="nearest",
        )
    fig.colorbar(im, ax=ax, shrink=0.85, label=f"ε per {per} (lower: more private; no data: shaded)")
    if points is not None:
        pts = np.atleast_2d(np.asarray(points, float))
        ax.scatter(
            pts[:, 0],
            pts[:, 1],
            s=60,
            facecolors="none",
            edgecolors="white",
            linewidths=2,
            label="the locations of the next panels",
            zorder=6,
        )
        for k, (x, y) in enumerate(pts):
            ax.annotate(
                f"u{k + 1}",
                (x, y),
                xytext=(5, 5),
                textcoords="offset points",
                color="white",
                fontsize=10,
                weight="bold",
                zorder=6,
            )
    ax.set_title(title or f"Privacy map (ε per {per})")
    xmin, xmax, ymin, ymax = _map_extent(pm)
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    style_map(ax, pm.crs, ticks=ticks, scale_bar=scale_bar, north_arrow=north_arrow, context=context)
    from matplotlib.lines import Line2D

    handles, labels = [], []
    if points is not None:
        handles.append(Line2D([], [], ls="none", marker="o", mfc="none", mec="0.25", mew=2, ms=8))
        labels.append("u1, u2, ...: the locations of the next panels")
    for coll in ax.collections:  # boundaries over the image: light, so the colours stay readable
        if str(coll.get_gid()).startswith(CONTEXT_GID + "-tokyo"):
            coll.set_color("white")
            coll.set_alpha(0.5)
            handles.append(Line2D([], [], color="0.45", lw=0.8))
            labels.append(CONTEXT_LAYERS["tokyo_municipalities"][3] + " (white lines)")
    if handles:  # white on the map, grey in the key (white on white would be invisible)
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=1, fontsize=8, frameon=False)
    _settle(fig)
    if path is not None:
        _save(fig, path, dpi=120, bbox_inches="tight")
    return fig


def _output_density(mech, p):
    """Paint P(Q(u) = y) / (area of y's lattice box) on the padded node grid (cosmetic boxes)."""
    ij = mech.output_ij
    step = mech.output_step
    r_lo, c_lo = int(ij[:, 0].min()) - 2, int(ij[:, 1].min()) - 2
    r_hi, c_hi = int(ij[:, 0].max()) + 3, int(ij[:, 1].max()) + 3
    img = np.zeros((r_hi - r_lo, c_hi - c_lo))
    hx, hy = mech.privacy_map.cell_size
    for k in np.unique(step):
        sel = np.flatnonzero(step == k)
        dens = p[sel] / (k * k * hx * hy)
        lo = (int(k) - 1) // 2
        for di in range(int(k)):
            for dj in range(int(k)):
                np.add.at(img, (ij[sel, 0] - r_lo - lo + di, ij[sel, 1] - c_lo - lo + dj), dens)
    t = mech.privacy_map.transform
    extent = (t.c + t.a * c_lo, t.c + t.a * c_hi, t.f + t.e * r_hi, t.f + t.e * r_lo)
    return img, extent


def plot_mechanism(
    mechanism, points, *, path=None, log: bool = True, title=None, floor: float = 1e-9, per: str = "km", context="auto"
):
    """The privacy map and P(Q(u) = .) for chosen locations u (the paper's Figure 3).

    Parameters
    ----------
    mechanism : EikonalMechanism
    points : (k, 2) array-like
        Locations in the map's CRS (at most 6); each gets a panel with its output density
        (probability per square CRS unit, log10 scale by default) and a cyan circle at u.
    path : str or Path, optional
        Write the figure there.
    log : bool
        log10 colour scale (densities span many orders of magnitude).
    title : str, optional
        The figure's title (default: the mechanism's plain name).
    floor : float
        Densities below ``floor`` times the panel's maximum are drawn at that floor (outputs
        with zero weight, never released, stay blank).
    per : {"km", "m"}
        Unit of epsilon in the titles and the map's colour bar ("m": per CRS unit of a metric CRS).
    context : "auto", str, GeoDataFrame, list or None
        Context on the privacy map panel (:func:`add_context`).

    Returns
    -------
    matplotlib Figure
    """
    plt = _plt()
    from matplotlib.lines import Line2D

    pts = np.atleast_2d(np.asarray(points, float))
    if len(pts) > 6:
        raise ParameterError("plot_mechanism draws at most 6 locations; pass fewer points.")
    n = len(pts) + 1
    cols = min(n, 4)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.4 * cols, 5.0 * rows), squeeze=False, layout="constrained")
    axes = axes.ravel()
    pm = mechanism.privacy_map
    factor = 1000.0 if per == "km" else 1.0
    plot_privacy_map(pm, ax=axes[0], points=pts, title=f"Privacy map (ε per {per})", per=per, context=context)
    xmin, xmax, ymin, ymax = _map_extent(pm)
    crs = _as_crs(pm.crs)
    try:
        unit = crs.axis_info[0].unit_name if crs is not None else None
    except (AttributeError, IndexError):
        unit = None
    area = "m²" if unit == "metre" else "square unit"
    for k, (x, y) in enumerate(pts):
        ax = axes[k + 1]
        p = mechanism.distribution(x, y)
        img, extent = _output_density(mechanism, p)
        top = img.max()
        shown = np.ma.masked_where(img <= 0, np.maximum(img, top * floor))
        if log:
            shown = np.ma.log10(shown)
        cmap = plt.get_cmap("magma").with_extremes(bad="black")  # outputs with weight 0: probability exactly 0
        im = ax.imshow(shown, extent=extent, origin="upper", cmap=cmap, interpolation="nearest")
        fig.colorbar(im, ax=ax, shrink=0.85, label=("log10 " if log else "") + f"probability of release, per {area}")
        ax.plot([xmin, xmax, xmax, xmin, xmin], [ymin, ymin, ymax, ymax, ymin], color="0.6", lw=0.8)
        ax.scatter([x], [y], s=60, facecolors="none", edgecolors="cyan", linewidths=2)
        eps = float(pm.epsilon_at(x, y))
        ax.set_title(f"Released from u{k + 1}: ε = {eps * factor:.3g} per {per} there")
        ax.set_xlim(extent[0], extent[1])
        ax.set_ylim(extent[2], extent[3])
        style_map(ax, crs, context=None, north_arrow=False, note=False)
        ax.legend(
            [
                Line2D([], [], ls="none", marker="o", mfc="none", mec="cyan", mew=2, ms=8),
                Line2D([], [], color="0.6", lw=0.8),
            ],
            [f"true location u{k + 1}", "edge of the privacy map"],
            loc="lower right",
            fontsize=7,
            framealpha=0.8,
        )
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title or f"{_mechanism({'mechanism': 'eikonal'})}: privacy map and where each location is released")
    _settle(fig)
    if path is not None:
        _save(fig, path, dpi=110, bbox_inches="tight")
    return fig
