"""The picture of docs/aggregate.md: GeoLife Beijing (users 000-009) true and released at user level.

Run: .venv/latest/bin/python bench/aggregate_geolife_figure.py [--data DIR] [--out docs/img/aggregate_geolife.png]

Three panels on one colour scale (log counts per 2 km cell over a declared 60 km x 60 km area of
Beijing): the true fixes per cell; a user-level release (epsilon = 2, each of the 10 people
counted for at most 20,000 fixes: all that 10 people can give at that guarantee); and, for
contrast, the same release if every fix were its own person (item level, epsilon = 2), which is
what a heatmap of many people looks like.  The seed is fixed (a demo).
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

import geopandas as gpd
import matplotlib
import numpy as np
import pandas as pd

import geopriv

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402

#: Beijing, declared (round numbers in UTM 50N, chosen from the city's extent, not from the data)
BOUNDS = (420_000.0, 4_390_000.0, 480_000.0, 4_450_000.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--data", default=os.environ.get("GEOPRIV_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    )
    ap.add_argument(
        "--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "img" / "aggregate_geolife.png")
    )
    args = ap.parse_args()
    df = pd.read_parquet(Path(args.data) / "geolife_users_000_009.parquet")
    g = gpd.GeoDataFrame(df[["user"]], geometry=gpd.GeoSeries.from_wkb(df.geometry, crs=4326)).to_crs(32650)
    g = g.clip(BOUNDS).reset_index(drop=True)
    g["fix"] = np.arange(len(g))
    panels = []
    true = geopriv.heatmap(g, 1e9, resolution=2000, bounds=BOUNDS, levels=False, rng=0)  # noise ~ 0: the truth
    panels.append(("True GPS fixes per 2 km cell\n(not private)", true.values))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", geopriv.LowUtilityWarning)
        user = geopriv.heatmap(g, 2.0, resolution=2000, bounds=BOUNDS, user="user", max_per_user=20_000, rng=1)
        item = geopriv.heatmap(g, 2.0, resolution=2000, bounds=BOUNDS, rng=1)
    e_user = float(np.nanmedian(user.expected_error))
    e_item = float(np.nanmedian(item.expected_error))
    panels.append(
        (
            "Private, protecting each person:\n\u03b5 = 2 for all of a person's fixes (10 people, at most\n"
            f"20,000 fixes counted each; typical error {e_user:,.0f} per cell)",
            user.values,
        )
    )
    panels.append(
        (
            "Private, protecting each fix:\n\u03b5 = 2 as if every fix were a person\n"
            f"(typical error {e_item:.1f} per cell)",
            item.values,
        )
    )
    figure(panels, true.transform, args.out)
    print(
        f"wrote {args.out}; user level: total released {int(user.values.sum()):,} (true {int(true.values.sum()):,}), "
        f"non-zero cells {(user.values > 0).sum()} (true {(true.values > 0).sum()}); item level non-zero "
        f"{(item.values > 0).sum()}"
    )


def figure(panels, transform, path=None):
    """Three heatmaps on one log colour scale; ``panels``: (title, counts array) in UTM 50N cells. Returns the Figure."""
    vmax = max(float(v.max()) for _, v in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 5.8), layout="constrained")
    t = transform
    shape = panels[0][1].shape
    extent = np.array([t.c, t.c + t.a * shape[1], t.f + t.e * shape[0], t.f]) / 1000
    for ax, (title, vals) in zip(np.atleast_1d(axes), panels):
        im = ax.imshow(np.ma.masked_less_equal(vals, 0), extent=extent, norm=LogNorm(1, max(vmax, 10)), cmap="magma")
        ax.set_title(title, fontsize=9.5)
        ax.set_xlabel("easting (km, UTM zone 50N, EPSG:32650)")
        ax.set_facecolor("#d0d0d0")
        ax.set_aspect("equal")
    np.atleast_1d(axes)[0].set_ylabel("northing (km, UTM zone 50N)")
    fig.colorbar(im, ax=axes, shrink=0.8, label="GPS fixes per cell (log scale; empty cells grey)")
    fig.suptitle(
        "GeoLife Beijing, users 000-009 (1.6 M fixes): a private heatmap protecting each person, and one "
        "protecting each fix"
    )
    if path is not None:
        fig.savefig(path, dpi=100)
    return fig


if __name__ == "__main__":
    main()
