"""Benchmark: geopriv.perturb through the public release path vs its floors.

Two cases, each measured side by side with its baseline in one process (alternating runs,
median of repeats), on the same coordinates:

* a projected CRS used as is (UTM 50N, public frame from its area of use, default 1 m public
  lattice): perturb / ``geopandas.points_from_xy``.  Target <= 1.3.
* longitude/latitude (EPSG:4326, noise drawn per point on the ellipsoid's sphere, default
  lattice): perturb / (``points_from_xy`` + one vectorised ``pyproj.Geod.fwd`` on the same
  points, what a per-point geodesic release costs at least).  Target <= 1.3.

    python bench/perturb_throughput.py [--n 3000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import time

import geopandas as gpd
import numpy as np
import pyproj

import geopriv


def pair(label, baseline, ours, repeats):
    baseline()
    ours()  # warm-up: allocator, page faults, caches of the public frame
    base, mine = [], []
    for _ in range(repeats):
        gc.collect()
        t = time.perf_counter()
        baseline()
        base.append(time.perf_counter() - t)
        gc.collect()
        t = time.perf_counter()
        ours()
        mine.append(time.perf_counter() - t)
    b, o = statistics.median(base), statistics.median(mine)
    ratios = [m / x for x, m in zip(base, mine)]
    print(f"{label}")
    print(f"  baseline : {b:6.2f} s   runs {', '.join(f'{v:.2f}' for v in base)}")
    print(f"  perturb  : {o:6.2f} s   runs {', '.join(f'{v:.2f}' for v in mine)}")
    print(f"  ratio of medians {o / b:.3f}; per-pair {', '.join(f'{r:.3f}' for r in ratios)}; target <= 1.3")
    return o / b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    eps = math.log(4) / 200
    print(f"n = {n:,} points, repeats = {args.repeats}, epsilon = ln 4 / 200 m, default public lattice (1 m)")

    x = 440_000 + rng.uniform(0, 30_000, n)
    y = 4_400_000 + rng.uniform(0, 30_000, n)
    utm = gpd.GeoDataFrame({"id": np.arange(n)}, geometry=gpd.points_from_xy(x, y), crs=32650)
    pair(
        "UTM 50N used as is: perturb / points_from_xy",
        lambda: gpd.points_from_xy(x, y, crs=32650),
        lambda: geopriv.perturb(utm, eps),  # noqa: F821 (called before the del below)
        args.repeats,
    )
    del utm

    lon = 116.0 + rng.uniform(0, 0.5, n)
    lat = 39.7 + rng.uniform(0, 0.5, n)
    ll = gpd.GeoDataFrame({"id": np.arange(n)}, geometry=gpd.points_from_xy(lon, lat), crs=4326)
    geod = pyproj.Geod(ellps="WGS84")
    az = rng.uniform(0, 360, n)
    dist = rng.gamma(2.0, 1 / eps, n)

    def base_ll():
        lo, la, _ = geod.fwd(lon, lat, az, dist)
        return gpd.points_from_xy(lo, la, crs=4326)

    pair(
        "EPSG:4326 on the sphere: perturb / (points_from_xy + Geod.fwd)",
        base_ll,
        lambda: geopriv.perturb(ll, eps),
        args.repeats,
    )


if __name__ == "__main__":
    main()
