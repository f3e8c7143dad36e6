"""Benchmark: what keyed noise (issue 30) costs, side by side in one script.

Three sections, each a ratio of two things run alternately in this one script (the machine is
shared: read the ratios, not the seconds):

* ``draws``: planar Laplace noise for 1 million rows from a numpy Generator (the in-memory
  path) against the keyed per-row streams of a lazy release (SipHash-2-4 row keys from
  (root, person id, coordinates) + counter-mode draws) (:mod:`geopriv.keys`).
* ``inmemory``: ``gdf.priv.perturb`` against its floors: projected data against
  ``geopandas.points_from_xy`` alone; longitude/latitude data against ``points_from_xy`` plus
  ``pyproj.Geod.fwd`` (the spherical sampler's unavoidable work) (target: within 1.3x).
* ``dask``: ``ddf.priv.perturb`` of N points read from GeoParquet files (written once, a person
  id index) on a ``LocalCluster`` of 2 single-threaded workers, reduced by
  ``map_partitions(len).sum()``, with this tree against a
  baseline tree (``--baseline``: a checkout of cd3bacf, e.g. ``git worktree add /tmp/base
  cd3bacf``), each run in a fresh subprocess, alternating; build (this tree reads the data once
  there: whole-data checks and the digests that bind the release) and compute timed apart.

    python bench/keyed_noise.py [--sections draws,inmemory,dask] [--n 8000000] [--baseline /tmp/base]
        [--repeats 3] [--out bench/results/keyed_noise.md]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _t(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def alternate(a, b, repeats):
    ta, tb = [], []
    for _ in range(repeats):
        ta.append(_t(a))
        tb.append(_t(b))
    return statistics.median(ta), statistics.median(tb)


def section_draws(repeats):
    import pandas as pd

    from geopriv.keys import SecretRoot, float_words, identity_digests, row_streams
    from geopriv.mechanisms.planar_laplace import polar_noise

    n = 1_000_000
    xy = np.random.default_rng(0).uniform(0, 1e5, (n, 2))
    ids = pd.Index(np.arange(n), name="pid")
    root = SecretRoot.draw()

    def numpy_draws():
        polar_noise(n, 0.01, np.random.default_rng())

    def keyed_draws():
        streams = row_streams(root, "perturb", identity_digests(ids), float_words(xy))
        polar_noise(n, 0.01, streams)

    a, b = alternate(numpy_draws, keyed_draws, repeats)
    return [f"| planar Laplace for 1 M rows | numpy Generator {a:.3f} s | keyed streams {b:.3f} s | {b / a:.2f}x |"]


def section_inmemory(repeats):
    import geopandas as gpd
    from pyproj import Geod

    import geopriv  # noqa: F401  (registers the .priv accessor)

    n = 2_000_000
    rng = np.random.default_rng(1)
    x, y = rng.uniform(448_000, 456_000, n), rng.uniform(4_416_000, 4_424_000, n)
    utm = gpd.GeoDataFrame(geometry=gpd.points_from_xy(x, y), crs=32650)
    lon, lat = rng.uniform(116.2, 116.5, n), rng.uniform(39.8, 40.0, n)
    ll = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs=4326)
    eps = math.log(4) / 200
    rows = []
    a, b = alternate(
        lambda: gpd.points_from_xy(x + 1.0, y + 1.0, crs=32650), lambda: utm.priv.perturb(eps, progress=None), repeats
    )
    rows.append(
        f"| in-memory perturb, UTM, 2 M points | floor points_from_xy {a:.3f} s | perturb {b:.3f} s | {b / a:.2f}x |"
    )
    geod = Geod(ellps="WGS84")
    az, dist = rng.uniform(0, 360, n), rng.gamma(2.0, 1 / eps, n)

    def floor_ll():
        lo, la, _ = geod.fwd(lon, lat, az, dist)
        gpd.points_from_xy(lo, la, crs=4326)

    a, b = alternate(floor_ll, lambda: ll.priv.perturb(eps, progress=None), repeats)
    rows.append(
        f"| in-memory perturb, lon/lat, 2 M points | floor points_from_xy + Geod.fwd {a:.3f} s | perturb {b:.3f} s "
        f"| {b / a:.2f}x |"
    )
    return rows


CHILD = r"""
import json, math, sys, time
import numpy as np, pandas as pd, geopandas as gpd
import dask, dask.dataframe as dd, dask_geopandas
from distributed import Client, LocalCluster
import geopriv
folder, with_check = sys.argv[1], sys.argv[2] == "1"
with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, Client(cl):
    ddf = dask_geopandas.read_parquet(folder, index="pid")
    t0 = time.perf_counter(); n = int(ddf.map_partitions(len).sum().compute()); t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    rel = ddf.priv.perturb(level=math.log(4), radius=200).map_partitions(len).sum()
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter(); assert int(rel.compute()) == n; t_rel = time.perf_counter() - t0
print(json.dumps({"read": t_read, "build": t_build, "release": t_rel, "n": n}))
"""


def write_points(folder, n, part=1 << 20):
    """N clustered points in UTM 50N as GeoParquet files of ``part`` rows, with a ``pid`` column (written once)."""
    import geopandas as gpd

    os.makedirs(folder, exist_ok=True)
    if len(os.listdir(folder)) == (n + part - 1) // part:
        return
    for i, a in enumerate(range(0, n, part)):
        b = min(n, a + part)
        r = np.random.default_rng([7, i])
        centres = r.uniform([380_000, 4_330_000], [520_000, 4_490_000], (50, 2))
        xy = centres[r.integers(0, 50, b - a)] + r.normal(0, 2_000, (b - a, 2))
        xy = np.clip(xy, [380_001, 4_330_001], [519_999, 4_489_999])
        g = gpd.GeoDataFrame(
            {"pid": np.arange(a, b, dtype=np.int64)}, geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=32650
        )
        g.iloc[r.permutation(len(g))].to_parquet(os.path.join(folder, f"part{i:04d}.parquet"), index=False)


def section_dask(n, baseline, repeats):
    folder = f"/tmp/geopriv_keyed_bench_{n}"
    write_points(folder, n)
    runs = {"this tree": [], "baseline": []}
    for _ in range(repeats):
        for name, path in (("this tree", ROOT), ("baseline", baseline)):
            if path is None:
                continue
            env = dict(os.environ, PYTHONPATH=path)
            out = subprocess.run(
                [sys.executable, "-c", CHILD, folder, "1" if name == "this tree" else "0"],
                env=env,
                capture_output=True,
                text=True,
                cwd="/tmp",
                timeout=3600,
            )
            if out.returncode != 0:
                raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    rows = []
    for name, rs in runs.items():
        if not rs:
            continue
        build = statistics.median(r["build"] for r in rs)
        rel = statistics.median(r["release"] for r in rs)
        rows.append(
            f"| dask perturb from GeoParquet, {n / 1e6:g} M points, 2 workers, {name} | build {build:.2f} s + "
            f"compute {rel:.2f} s (read + len alone {statistics.median(r['read'] for r in rs):.2f} s) "
            f"| {n / (build + rel) / 1e6:.2f} M points/s end to end | |"
        )
    if len(runs["baseline"]) and len(runs["this tree"]):
        a = statistics.median(r["release"] for r in runs["baseline"])
        b = statistics.median(r["release"] for r in runs["this tree"])
        ab = statistics.median(r["release"] + r["build"] for r in runs["baseline"])
        bb = statistics.median(r["release"] + r["build"] for r in runs["this tree"])
        rows.append(f"| ratio this tree / baseline, compute alone | | | {b / a:.2f}x |")
        rows.append(
            f"| ratio this tree / baseline, build + compute (this tree's build reads and checks the data) "
            f"| | | {bb / ab:.2f}x |"
        )
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="draws,inmemory,dask")
    ap.add_argument("--n", type=int, default=8_000_000)
    ap.add_argument("--baseline", default=None, help="a checkout of the baseline commit (its root folder)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = ["| what | A | B | B / A |", "|---|---|---|---|"]
    secs = args.sections.split(",")
    if "draws" in secs:
        rows += section_draws(args.repeats)
    if "inmemory" in secs:
        rows += section_inmemory(args.repeats)
    if "dask" in secs:
        rows += section_dask(args.n, args.baseline, args.repeats)
    text = "\n".join(rows)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(
                f"# keyed noise: costs (bench/keyed_noise.py, {time.strftime('%Y-%m-%d')}, "
                f"{os.cpu_count()} CPUs, medians of {args.repeats})\n\n{text}\n"
            )


if __name__ == "__main__":
    main()
