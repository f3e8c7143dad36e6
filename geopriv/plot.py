"""Pictures: maps of true vs released points and displacement curves.

matplotlib is imported lazily (``pip install 'geopriv[plot]'``); every function returns the
matplotlib Figure and, with ``path=``, also writes it (PNG by extension), atomically through
:func:`geopriv.io.write_new_file`: an existing file is replaced, and a symbolic link at ``path``
is replaced itself (never written through to its target).
"""

from __future__ import annotations

import numpy as np

from .exceptions import MissingDependencyError, ParameterError

__all__ = ["plot_release", "plot_privacy_map", "plot_mechanism"]


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


def _save(fig, path, **kwargs) -> None:
    """Write ``fig`` to ``path`` (format from the extension) with geopriv's one writer: links replaced, never followed."""
    import os

    from .io import write_new_file

    mask = os.umask(0)
    os.umask(mask)
    fmt = os.path.splitext(os.fspath(path))[1][1:].lower() or None  # None: matplotlib's default format
    write_new_file(path, lambda fh: fig.savefig(fh, format=fmt, **kwargs), overwrite=True, mode=0o666 & ~mask)


def plot_release(true, released, *, path=None, title=None, links: bool = True, max_links: int = 2000):
    """Map of true (grey) vs released (red) points with displacement lines, and the displacement CDF.

    Parameters
    ----------
    true, released : GeoDataFrame or GeoSeries
        Rows matched by index label (as produced by :func:`geopriv.perturb`).
    path : str or Path, optional
        Write the figure there (e.g. ``"map.png"``).
    """
    from .metrics import displacement

    plt = _plt()
    t = true.geometry if hasattr(true, "geometry") else true
    r = released.geometry if hasattr(released, "geometry") else released
    if r.crs != t.crs:
        r = r.to_crs(t.crs)
    r = r.loc[t.index]
    d = displacement(t, r).to_numpy()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 6), gridspec_kw={"width_ratios": [1.6, 1]})
    tx, ty = t.x.to_numpy(), t.y.to_numpy()
    rx, ry = r.x.to_numpy(), r.y.to_numpy()
    if links:
        from matplotlib.collections import LineCollection

        k = min(len(tx), max_links)
        segs = np.stack([np.column_stack([tx[:k], ty[:k]]), np.column_stack([rx[:k], ry[:k]])], axis=1)
        ax.add_collection(LineCollection(segs, colors="0.6", linewidths=0.5, alpha=0.6, zorder=1))
    ax.scatter(tx, ty, s=10, c="0.25", label="true", zorder=2)
    ax.scatter(rx, ry, s=10, c="tab:red", label="released", zorder=3)
    ax.set_aspect("equal")
    ax.set_xlabel(f"x ({t.crs.to_string() if t.crs else 'no CRS'} units)")
    ax.set_ylabel("y")
    ax.legend(loc="upper right")
    rec = getattr(released, "attrs", {}).get("geopriv", {})
    eps = rec.get("epsilon_per_m")
    ax.set_title(
        title or (f"{rec.get('mechanism', 'release')}: epsilon = {eps:.4g} per metre" if eps else "true vs released")
    )
    xs = np.sort(d)
    ax2.plot(xs, np.arange(1, len(xs) + 1) / len(xs), color="tab:red", label="empirical")
    if eps and rec.get("mechanism") == "planar_laplace":
        from .mechanisms.planar_laplace import radius_cdf

        grid = np.linspace(0, xs.max() * 1.05, 300)
        ax2.plot(grid, radius_cdf(grid, eps), "k--", lw=1, label="planar Laplace CDF")
    q90 = np.quantile(d, 0.9)
    ax2.axvline(q90, color="0.5", lw=0.8)
    ax2.text(q90, 0.5, f" alpha(0.9) = {q90:.0f} m", color="0.3")
    ax2.set_xlabel("displacement (ground metres)")
    ax2.set_ylabel("fraction of points")
    ax2.set_title(f"mean {d.mean():.0f} m, median {np.median(d):.0f} m")
    ax2.legend(loc="lower right")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
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


def _axis_labels(crs) -> tuple[str, str]:
    """'x (m, EPSG:32654)'-style labels from a pyproj CRS (unit first: what readers need)."""
    try:
        unit = crs.axis_info[0].unit_name
    except (AttributeError, IndexError):
        unit = "CRS units"
    unit = {"metre": "m", "US survey foot": "US ft", "foot": "ft"}.get(unit, unit)
    name = crs.to_string() if crs.to_epsg() is not None else None
    suffix = f", {name}" if name else ""
    return f"x ({unit}{suffix})", f"y ({unit})"


def plot_privacy_map(privacy_map, *, ax=None, points=None, path=None, title=None, per: str = "km"):
    """Image of a :class:`geopriv.PrivacyMap`: epsilon (per km by default), no-data cells hatched.

    Parameters
    ----------
    privacy_map : PrivacyMap
    ax : matplotlib Axes, optional
        Draw into it (a new figure otherwise).
    points : (k, 2) array-like, optional
        Locations (map CRS) to mark with white circles, e.g. those of :func:`plot_mechanism`.
    per : {"km", "m"}
        Unit of the colour bar: epsilon per kilometre (default, readable numbers) or per metre.
    path : str or Path, optional
        Write the figure there.

    Returns
    -------
    matplotlib Figure
    """
    plt = _plt()
    if per not in ("km", "m"):
        raise ParameterError("per must be 'km' or 'm'.")
    factor = 1000.0 if per == "km" else 1.0
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.5, 5.5))
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
    fig.colorbar(im, ax=ax, shrink=0.85, label=f"epsilon per {per} (no data: shaded)")
    if points is not None:
        pts = np.atleast_2d(np.asarray(points, float))
        ax.scatter(pts[:, 0], pts[:, 1], s=60, facecolors="none", edgecolors="white", linewidths=2)
        for k, (x, y) in enumerate(pts):
            ax.annotate(
                str(k + 1), (x, y), xytext=(5, 5), textcoords="offset points", color="white", fontsize=10, weight="bold"
            )
    ax.set_title(title or "privacy level map")
    xl, yl = _axis_labels(pm.crs)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_aspect("equal")
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


def plot_mechanism(mechanism, points, *, path=None, log: bool = True, title=None, floor: float = 1e-9, per: str = "km"):
    """The privacy map and P(Q(u) = .) for chosen locations u (the paper's Figure 3).

    Parameters
    ----------
    mechanism : EikonalMechanism
    points : (k, 2) array-like
        Locations in the map's CRS (at most 6); each gets a panel with its output density
        (probability per square CRS unit, log10 scale by default) and a white circle at u.
    log : bool
        log10 colour scale (densities span many orders of magnitude).
    floor : float
        Densities below ``floor`` times the panel's maximum are drawn at that floor (outputs
        with zero weight, never released, stay blank).
    per : {"km", "m"}
        Unit of epsilon in the titles and the map's colour bar ("m": per CRS unit of a metric CRS).
    path : str or Path, optional
        Write the figure there.

    Returns
    -------
    matplotlib Figure
    """
    plt = _plt()
    pts = np.atleast_2d(np.asarray(points, float))
    if len(pts) > 6:
        raise ParameterError("plot_mechanism draws at most 6 locations; pass fewer points.")
    n = len(pts) + 1
    cols = min(n, 4)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.6 * rows), squeeze=False)
    axes = axes.ravel()
    pm = mechanism.privacy_map
    factor = 1000.0 if per == "km" else 1.0
    plot_privacy_map(pm, ax=axes[0], points=pts, title=f"privacy map (epsilon per {per})", per=per)
    xmin, xmax, ymin, ymax = _map_extent(pm)
    for k, (x, y) in enumerate(pts):
        ax = axes[k + 1]
        p = mechanism.distribution(x, y)
        img, extent = _output_density(mechanism, p)
        top = img.max()
        shown = np.ma.masked_where(img <= 0, np.maximum(img, top * floor))
        if log:
            shown = np.ma.log10(shown)
        cmap = plt.get_cmap("magma").copy()
        cmap.set_bad("black")  # outputs with weight 0: probability exactly 0
        im = ax.imshow(shown, extent=extent, origin="upper", cmap=cmap, interpolation="nearest")
        fig.colorbar(im, ax=ax, shrink=0.85, label=("log10 " if log else "") + "P(Q(u) = y) per square unit")
        ax.plot([xmin, xmax, xmax, xmin, xmin], [ymin, ymin, ymax, ymax, ymin], color="0.6", lw=0.8)
        ax.scatter([x], [y], s=60, facecolors="none", edgecolors="cyan", linewidths=2)
        eps = float(pm.epsilon_at(x, y))
        ax.set_title(f"u{k + 1}: epsilon {eps * factor:.3g} per {per}")
        ax.set_aspect("equal")
        ax.set_xlim(extent[0], extent[1])
        ax.set_ylim(extent[2], extent[3])
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title or "eikonal mechanism: privacy map and output distributions")
    fig.tight_layout()
    if path is not None:
        _save(fig, path, dpi=110, bbox_inches="tight")
    return fig
