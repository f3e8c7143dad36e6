"""Benchmark: compact eikonal mechanism files (issue 17, item 1), side by side with full files.

The paper's scaling on the shipped Tokyo raster (200 x 200, epsilon 0.4..2.0 per unit; see
bench/eikonal_build.py).  One build, saved both ways; then, in this one process:
  * file sizes (target: compact <= 50 MB);
  * load + verify + release 100,000 points drawn from the population prior (target <= 30 s),
    compact (kernels recomputed at load) against full (kernels read from the file);
  * sampling throughput once the row tables are built (target >= 1 million points/s).
Peak memory of the process tree is reported for the build and for each load.

Each load runs in its own process (peak memory of the load alone).

Run:  python bench/eikonal_compact.py [--jobs 2] [--size 200] [--out bench/results/eikonal_compact.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from eikonal_build import PeakRSS, paper_scaled_map  # noqa: E402

from geopriv import EikonalMechanism  # noqa: E402


def points_from_prior(pm, n, rng):
    p = pm.prior("population").ravel()
    cells = rng.choice(p.size, size=n, p=p / p.sum())
    i, j = np.divmod(cells, pm.shape[1])
    hx, hy = pm.cell_size
    t = pm.transform
    x = t.c + t.a * (j + rng.random(n))
    y = t.f + t.e * (i + rng.random(n))
    return np.column_stack([x, y])


def child_load(path, pm, jobs, n):
    """Load + verify + release n points, then sampling throughput with cached rows (one process)."""
    rng = np.random.default_rng(0)
    xy = points_from_prior(pm, n, rng)
    with PeakRSS() as peak:
        t0 = time.perf_counter()
        m = EikonalMechanism.load(path, privacy_map=pm, n_jobs=jobs)
        t_load = time.perf_counter() - t0
        out = m.sample(xy, np.random.default_rng(1))
        t_all = time.perf_counter() - t0
    assert out.shape == xy.shape and m.report.ok
    big = points_from_prior(pm, 1_000_000, rng)
    m.sample(big[:1000], np.random.default_rng(2))  # tables cached
    t0 = time.perf_counter()
    m.sample(big, np.random.default_rng(2))
    dt = time.perf_counter() - t0
    return {
        "load_s": t_load,
        "all_s": t_all,
        "peak_gib": peak.peak / 2**30,
        "ratio": m.report.max_ratio,
        "throughput": 1e6 / dt,
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child-load", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    pm = paper_scaled_map()
    if args.child_load:
        print(json.dumps(child_load(args.child_load, pm, args.jobs, args.n)))
        return
    rows = []
    with PeakRSS() as peak:
        t0 = time.perf_counter()
        mech = EikonalMechanism.build(pm, n_jobs=args.jobs)
        build_s = time.perf_counter() - t0
    rows.append(("build (n_jobs=%d)" % args.jobs, f"{build_s:.1f} s", f"peak {peak.peak / 2**30:.2f} GiB"))
    with tempfile.TemporaryDirectory() as tmp:
        compact, full = os.path.join(tmp, "c.npz"), os.path.join(tmp, "f.npz")
        mech.save(compact)
        mech.save(full, compact=False)
        size_c, size_f = os.path.getsize(compact), os.path.getsize(full)
        rows.append(
            ("file size", f"compact {size_c / 1e6:.1f} MB", f"full {size_f / 1e6:.0f} MB ({size_f / size_c:.0f}x)")
        )
        del mech
        for label, path in (("full", full), ("compact", compact), ("full (again)", full), ("compact (again)", compact)):
            # each load in a fresh process: its peak is the load's, not what the build left in this heap
            out = subprocess.run(
                [sys.executable, __file__, "--child-load", path, "--jobs", str(args.jobs), "--n", str(args.n)],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(
                (
                    f"load + verify + release {args.n:,} points, {label}",
                    f"{r['all_s']:.1f} s (load+verify {r['load_s']:.1f} s)",
                    f"peak {r['peak_gib']:.2f} GiB, ratio {r['ratio']:.4f}",
                )
            )
            if label == "compact (again)":
                rows.append(("sampling with cached rows, 1 M points", f"{r['throughput'] / 1e6:.2f} M points/s", ""))
    lines = ["| measurement | value | notes |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(
            f"# Compact eikonal files ({time.strftime('%Y-%m-%d')}, `python bench/eikonal_compact.py --jobs {args.jobs}`)\n\n"
            f"Tokyo raster at the paper's scaling (200 x 200), default build options; 2-core machine shared with other work.\n\n{text}\n"
        )


if __name__ == "__main__":
    main()
