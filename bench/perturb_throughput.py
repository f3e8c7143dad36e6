"""Benchmark: geopriv.perturb on 10 million points vs geopandas.points_from_xy.

Building the point geometries is the floor of any release that returns geometries, so the
ratio perturb / points_from_xy on the same coordinates, measured side by side in one process
(alternating, median of repeats), says what privacy costs.  Target: <= 1.3.

    python bench/perturb_throughput.py [--n 10000000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import gc
import math
import statistics
import time

import geopandas as gpd
import numpy as np

import geopriv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = 440_000 + rng.uniform(0, 30_000, args.n)
    y = 4_400_000 + rng.uniform(0, 30_000, args.n)
    gdf = gpd.GeoDataFrame({"id": np.arange(args.n)}, geometry=gpd.points_from_xy(x, y), crs=32650)
    eps = math.log(4) / 200
    gpd.points_from_xy(x, y)  # warm-up at full size: allocator, page faults, imports
    geopriv.perturb(gdf.iloc[:1_000_000], eps)
    base, ours = [], []
    for _ in range(args.repeats):
        gc.collect()
        t = time.perf_counter()
        pts = gpd.points_from_xy(x, y, crs=32650)
        base.append(time.perf_counter() - t)
        del pts
        t = time.perf_counter()
        out = geopriv.perturb(gdf, eps)
        ours.append(time.perf_counter() - t)
        del out
    ratios = [o / b for b, o in zip(base, ours)]
    b, o = statistics.median(base), statistics.median(ours)
    print(f"n = {args.n:,} points (UTM 50N), repeats = {args.repeats}")
    print(f"points_from_xy   : {b:7.2f} s  ({args.n / b / 1e6:.2f} M points/s)   runs {', '.join(f'{v:.2f}' for v in base)}")
    print(f"geopriv.perturb  : {o:7.2f} s  ({args.n / o / 1e6:.2f} M points/s)   runs {', '.join(f'{v:.2f}' for v in ours)}")
    print(f"ratio of medians perturb / points_from_xy = {o / b:.3f}; per-pair ratios "
          f"{', '.join(f'{r:.3f}' for r in ratios)} (median {statistics.median(ratios):.3f}); target <= 1.3")


if __name__ == "__main__":
    main()
