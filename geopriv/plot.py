"""Pictures: maps of true vs released points and displacement curves.

matplotlib is imported lazily (``pip install 'geopriv[plot]'``); every function returns the
matplotlib Figure and, with ``path=``, also writes it (PNG by extension).
"""
from __future__ import annotations

import numpy as np

__all__ = ["plot_release"]


def _plt():
    try:
        import matplotlib

        if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
            import os

            if not os.environ.get("DISPLAY") and os.name != "nt":
                matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        raise ImportError("Plotting needs matplotlib: pip install 'geopriv[plot]'.") from None
    return plt


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
    ax.set_title(title or (f"{rec.get('mechanism', 'release')}: epsilon = {eps:.4g} per metre" if eps else "true vs released"))
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
        fig.savefig(path, dpi=120)
    return fig
