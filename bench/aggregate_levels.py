"""How epsilon's split over the hierarchy of cells trades accuracy in busy and in empty cells.

Run: .venv/latest/bin/python bench/aggregate_levels.py [--data DIR] [--reps 10]

GeoLife Beijing (users 000-009, fixes inside a declared 80 km x 70 km area) on a 1 km grid at
epsilon = 1, in three regimes of signal to noise: each fix its own person (counts >> noise),
user level with 2,000 fixes per person and with 50 fixes per person (noise >> most counts).
For each split of epsilon (``levels=``): mean absolute error per cell, on the empty cells, and
the median relative error of the 20 busiest cells.  Writes bench/results/aggregate_levels.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd

from geopriv.counting import bound_contributions, count_rows, locate_rows, person_codes, plan_counts, release_counts

BOUNDS = (410_000.0, 4_380_000.0, 490_000.0, 4_450_000.0)
SPLITS = [
    ("auto (7/8 cells, 1/8 total)", "auto"),
    ("cells only (levels=False)", False),
    ("Hay et al., 3 levels (levels=3)", 3),
    ("Hay et al., every level (levels=8)", 8),
]
REGIMES = [
    ("each fix a person", None, 1),
    ("user level, 2,000 fixes each", "user", 2000),
    ("user level, 50 fixes each", "user", 50),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--data", default=os.environ.get("GEOPRIV_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    )
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    df = pd.read_parquet(Path(args.data) / "geolife_users_000_009.parquet")
    g = gpd.GeoDataFrame(df[["user"]], geometry=gpd.GeoSeries.from_wkb(df.geometry, crs=4326)).to_crs(32650)
    x, y = g.geometry.x.to_numpy(), g.geometry.y.to_numpy()
    g = g[(x > BOUNDS[0]) & (x < BOUNDS[2]) & (y > BOUNDS[1]) & (y < BOUNDS[3])]
    xy = np.column_stack([g.geometry.x.to_numpy(), g.geometry.y.to_numpy()])
    rows = []
    for regime, user, k in REGIMES:
        for name, levels in SPLITS:
            plan = plan_counts(g.crs, 1.0, cells=1000.0, max_per_user=k, user=user, bounds=BOUNDS, levels=levels)
            cell = locate_rows(plan, xy, g.index)
            codes = person_codes(g, user, g.index)
            gen = np.random.default_rng(0)
            mae, empty, busy = [], [], []
            for _ in range(args.reps):
                keep = bound_contributions(codes, k, gen) if codes is not None else None
                true = count_rows(plan, cell, keep)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rel = release_counts(plan, true, gen)
                err = np.abs(rel - true)
                mae.append(err.mean())
                empty.append(err[true == 0].mean())
                top = np.argsort(true)[-20:]
                busy.append(np.median(err[top] / true[top]))
            rows.append(
                (regime, name, np.mean(mae), np.mean(empty), np.mean(busy), float(np.median(plan.expected_error)))
            )
            print(rows[-1], flush=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    lines = [
        "# How epsilon's split over the hierarchy trades busy and empty cells",
        "",
        f"GeoLife users 000-009, {len(g):,} fixes inside {BOUNDS} (EPSG:32650), 1 km grid (5,600 cells), "
        f"epsilon = 1, {args.reps} releases each, non-negative counts (the default). geopriv {commit}. "
        "Run: `.venv/latest/bin/python bench/aggregate_levels.py`.",
        "",
        "| regime | split | MAE per cell | MAE, empty cells | median rel. error, 20 busiest | reported error (median) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:,.2f} |")
    out = Path(__file__).parent / "results" / "aggregate_levels.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
