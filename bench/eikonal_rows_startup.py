"""Benchmark: rows from the nodes under each start method of the worker processes (issue 17).

A request of k nodes (drawn from the population prior) searched from the nodes
(``ondemand.rows(mech, nodes, "nodes")``), side by side in this one process: in process
(``n_jobs=1``), and with 2 workers started by fork, spawn (the default on Windows and macOS) and
forkserver.  Spawned workers import numpy and scipy (seconds): ``kernel_rows`` starts them only
when the rest of a request should pay for that (``geopriv.mechanisms.pool.startup_seconds``).

Run:  python bench/eikonal_rows_startup.py --load FILE [--k 256 512 1024 2048]
      (FILE: a compact 200 x 200 file of bench/eikonal_compact.py's map, built by this version)
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main(argv=None):
    from eikonal_build import paper_scaled_map

    from geopriv import EikonalMechanism
    from geopriv.mechanisms.eikonal import ondemand

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", required=True)
    ap.add_argument("--k", type=int, nargs="+", default=[256, 512, 1024, 2048])
    args = ap.parse_args(argv)
    pm = paper_scaled_map()
    mech = EikonalMechanism.load(args.load, privacy_map=pm, kernels="on_demand", n_jobs=2, verify=False)
    if not ondemand.can_solve_rows(mech):
        sys.exit("this file's kernels cannot be searched from the nodes (built by an earlier version): rebuild it")
    rng = np.random.default_rng(0)
    p = pm.prior("population").ravel()
    ways = [("in process", 1, None)] + [
        (m, 2, m) for m in ("fork", "spawn", "forkserver") if m in mp.get_all_start_methods()
    ]
    print("| nodes | " + " | ".join(w for w, _, _ in ways) + " |")
    print("|---|" + "---|" * len(ways))
    for k in args.k:
        nodes = np.unique(rng.choice(p.size, size=3 * k, p=p / p.sum()))[:k]
        times = []
        for _, jobs, ctx in ways:
            object.__setattr__(mech, "_n_jobs", jobs)
            object.__setattr__(mech, "_mp_context", ctx)
            t = time.perf_counter()
            ondemand.rows(mech, nodes, "nodes")
            times.append(time.perf_counter() - t)
        print(f"| {len(nodes):,} | " + " | ".join(f"{t:.2f} s" for t in times) + " |", flush=True)


if __name__ == "__main__":
    main()
