"""Benchmark: rows of an on-demand eikonal mechanism searched from the nodes against solved as columns.

Kernels on demand (issue 17) recompute the rows of the input nodes a release draws from.  Two
ways give the same arrays bit for bit (checked here on every request):

* ``columns``: every output whose kernel reaches the nodes is solved (one shortest-path search
  per output, in the worker processes), the requested rows kept;
* ``nodes``: one search from each node (travel times on the quantised graph are exact sums, so
  the same floats in both directions).

Side by side in this one process, on the paper's scaling of the Tokyo raster resampled to
``--size`` (bench/eikonal_scaling.py's map), for requests of k nodes drawn from the population
prior: the time of each way, and of ``mech.sample`` on k points with the automatic choice (a fresh
cache each time).  The mechanism is built on demand, or loaded from ``--load`` (a compact file)
and saved to ``--save``.

Run:  python bench/eikonal_rows.py [--size 200] [--jobs 2] [--k 1 10 100 1000] [--md FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from eikonal_compact import points_from_prior  # noqa: E402
from eikonal_scaling import scaled_map  # noqa: E402

from geopriv import EikonalMechanism  # noqa: E402
from geopriv.mechanisms.eikonal import ondemand  # noqa: E402


def fresh(mech):
    """The same mechanism without its row cache (what a new process would hold)."""
    mech.__dict__.pop("_row_cache", None)
    return mech


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--k", type=int, nargs="+", default=[1, 10, 100, 1000])
    ap.add_argument("--load", default=None, help="a compact file of this map (skips the build)")
    ap.add_argument("--save", default=None, help="save the built mechanism there (compact)")
    ap.add_argument("--max-columns-k", type=int, default=1000, help="largest request also solved as columns")
    ap.add_argument("--md", default=None, help="append the table to this Markdown file")
    args = ap.parse_args(argv)

    pm = scaled_map(args.size)
    t0 = time.perf_counter()
    if args.load:
        mech = EikonalMechanism.load(args.load, privacy_map=pm, kernels="on_demand", n_jobs=args.jobs)
        how = f"loaded on demand (verified) in {time.perf_counter() - t0:.0f} s"
    else:
        mech = EikonalMechanism.build(pm, kernels="on_demand", n_jobs=args.jobs)
        how = f"built on demand in {time.perf_counter() - t0:.0f} s"
        if args.save:
            mech.save(args.save, compact=True, overwrite=True)
    print(how, flush=True)
    n_nodes = pm.shape[0] * pm.shape[1]
    epr = ondemand.entries_per_row(mech)
    rows_out = []
    rng = np.random.default_rng(0)
    prior = pm.prior("population").ravel()
    prior = prior / prior.sum()
    for k in args.k:
        xy = points_from_prior(pm, k, rng)
        nodes = np.unique(rng.choice(n_nodes, size=k, p=prior))
        rec = {"size": args.size, "k": k, "nodes": int(len(nodes))}
        t = time.perf_counter()
        by_nodes = ondemand.rows(fresh(mech), nodes, method="nodes")
        rec["nodes_s"] = time.perf_counter() - t
        jobs = mech._n_jobs
        object.__setattr__(mech, "_n_jobs", 1)  # the same searches in this process, side by side
        try:
            t = time.perf_counter()
            one = ondemand.rows(fresh(mech), nodes, method="nodes")
            rec["nodes_1_s"] = time.perf_counter() - t
        finally:
            object.__setattr__(mech, "_n_jobs", jobs)
        assert all(np.array_equal(a, b) for a, b in zip(by_nodes, one)), "worker processes changed the rows"
        if k <= args.max_columns_k:
            t = time.perf_counter()
            by_cols = ondemand.rows(fresh(mech), nodes, method="columns")
            rec["columns_s"] = time.perf_counter() - t
            rec["identical"] = all(np.array_equal(a, b) for a, b in zip(by_nodes, by_cols))
            assert rec["identical"], "rows searched from the nodes differ from the solved columns"
            rec["speedup"] = rec["columns_s"] / rec["nodes_s"]
        t = time.perf_counter()
        fresh(mech).sample(xy, np.random.default_rng(1))
        rec["sample_auto_s"] = time.perf_counter() - t
        print(json.dumps(rec), flush=True)
        rows_out.append(rec)
    lines = [
        f"\n## Rows on demand, searched from the nodes against solved as columns ({time.strftime('%Y-%m-%d')})\n",
        f"`python bench/eikonal_rows.py --size {args.size} --jobs {args.jobs}`: {args.size} x {args.size}, {how}; "
        f"{len(mech.weights):,} outputs, {epr:,.0f} kernel entries per row on average, {n_nodes:,} nodes.  "
        "Rows of k nodes drawn from the population prior, each way on a fresh cache (and `sample()` of k points from the prior, up to 4 nodes each); the two ways "
        "gave identical arrays on every request where both ran.\n",
        "| k | distinct nodes | from the nodes (n_jobs={0}) | from the nodes, in process | as columns (n_jobs={0}) | columns / nodes | sample(), automatic |".format(
            args.jobs
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows_out:
        cols = f"{r['columns_s']:.2f} s" if "columns_s" in r else "-"
        sp = f"{r['speedup']:.0f}x" if "speedup" in r else "-"
        lines.append(
            f"| {r['k']:,} | {r['nodes']:,} | {r['nodes_s']:.2f} s | {r['nodes_1_s']:.2f} s | {cols} | {sp} | {r['sample_auto_s']:.2f} s |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        with open(args.md, "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
