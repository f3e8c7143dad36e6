"""Benchmark: geopriv.aggregate on dask-geopandas (GeoParquet files) against in memory: peak memory and time.

N points (default 3 million) of P persons (default 100,000: about 30 rows each) in UTM 50N are
written as F GeoParquet files (default 30, the index materialised) in a temporary directory.
Each configuration runs in a fresh interpreter (so its peak resident memory, ``ru_maxrss``, is its
own), reading the files and releasing 100 m cells over a 10 km square:

* ``memory``: ``geopandas.read_parquet`` of all files, then ``geopriv.aggregate``;
* ``dask``: ``dask_geopandas.read_parquet`` (one partition per file), then ``geopriv.aggregate`` of the dask
  frame (the threaded scheduler, 2 threads on this machine);

each with ``user=None``, with ``user="user", max_per_user=5`` (everyone over the cap: two passes) and
``max_per_user=1000`` (nobody over the cap: one pass).  The machine is shared: read the ratios.

    python bench/aggregate_dask.py [--n 3000000] [--files 30] [--persons 100000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = r"""
import resource, sys, time, warnings
import geopandas as gpd
warnings.simplefilter("ignore")
import geopriv
mode, cap, folder = sys.argv[1], sys.argv[2], sys.argv[3]
kw = dict(cells=100, bounds=(447_000.0, 4_415_000.0, 457_000.0, 4_425_000.0), rng=1)
if cap != "none":
    kw.update(user="user", max_per_user=int(cap))
t = time.perf_counter()
if mode == "memory":
    data = gpd.read_parquet(folder)
else:
    import dask_geopandas
    data = dask_geopandas.read_parquet(folder + "/*.parquet")
out = geopriv.aggregate(data, 1.0, **kw)
print(f"{time.perf_counter() - t:.1f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f}")
"""


def write(folder: Path, n: int, files: int, persons: int) -> None:
    import geopandas as gpd
    import numpy as np
    import pandas as pd

    gen = np.random.default_rng(0)
    per = n // files
    for f in range(files):
        g = gpd.GeoDataFrame(
            {"user": gen.integers(0, persons, per)},
            geometry=gpd.points_from_xy(gen.uniform(448_000, 456_000, per), gen.uniform(4_416_000, 4_424_000, per)),
            crs=32650,
        )
        g.index = pd.RangeIndex(f * per, (f + 1) * per, name="row")
        g.to_parquet(folder / f"part-{f:03d}.parquet", index=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3_000_000)
    ap.add_argument("--files", type=int, default=30)
    ap.add_argument("--persons", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), args.n, args.files, args.persons)
        print(f"{args.n:,} points, {args.files} files, {args.persons:,} persons\n")
        print("| configuration | in memory: s, peak GB | dask: s, peak GB |\n|---|---|---|")
        for cap in ("none", "1000", "5"):
            row = []
            for mode in ("memory", "dask"):
                out = subprocess.run(
                    [sys.executable, "-c", RUN, mode, cap, tmp], capture_output=True, text=True, check=True
                ).stdout.split()
                row.append(f"{out[0]} s, {out[1]} GB")
            name = "user=None" if cap == "none" else f"user=, max_per_user={cap}"
            print(f"| {name} | {row[0]} | {row[1]} |")


if __name__ == "__main__":
    main()
