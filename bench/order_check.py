"""Benchmark: the row-order check (geopriv.attributes.order_leaks) on 3 million rows against one sort.

Side by side in one script, alternating, best of 5 (the shared machine: read the ratio).  Moved here
from tests/test_order.py, where a timed assertion failed on busy machines (issue 31).

    python bench/order_check.py [--n 3000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import geopandas as gpd
import numpy as np
import pandas as pd

from geopriv.attributes import order_leaks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=3_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    n = args.n
    x, y = 448_000 + rng.uniform(0, 5_000, n), 4_416_000 + rng.uniform(0, 5_000, n)
    gdf = gpd.GeoDataFrame(
        {
            "count": rng.integers(0, 50, n),
            "income": rng.normal(5e4, 1e4, n),
            "score": rng.uniform(30, 50, n),
            "id": rng.permutation(n),
            "t": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 10**8, n), unit="s"),
        },
        geometry=gpd.points_from_xy(x, y),
        crs=32650,
    )
    ordered = gdf.iloc[np.argsort(y)].reset_index(drop=True)
    for name, frame in (("shuffled rows", gdf), ("rows sorted by northing", ordered)):
        check, sort = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            order_leaks(frame)
            check.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            np.argsort(y)
            sort.append(time.perf_counter() - t0)
        print(
            f"{name}: order check {min(check):.3f} s, one argsort {min(sort):.3f} s, ratio {min(check) / min(sort):.2f}"
        )


if __name__ == "__main__":
    main()
