"""Benchmark: eikonal build options on the 20 x 20 coarse Tokyo map (issue 17, item 3).

The Tokyo raster at the paper's scaling, coarsened with ``coarsen_to(pm, (20, 20))`` as in
bench/eikonal_optimal.py; one eikonal build per option set, side by side in one process,
errors at the nodes (no jitter, the quantity the LP optimum is measured in), with and without
the posterior-mean release.  Compare with the optimum bracket in bench/results/optimal.md
(optimal / Laplace in [0.2533, 0.2677] at 20 x 20).

Run:  python bench/eikonal_coarse_options.py [--size 10 14 20 35]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from eikonal_build import paper_scaled_map  # noqa: E402

from geopriv import EikonalMechanism  # noqa: E402
from geopriv.mechanisms.optimal import coarsen_to  # noqa: E402

OPTIONS = [
    {},
    {"margin": 0.1},  # the default margin before 2026-11-23 (now "auto": 0.1 per noise length)
    {"margin": 0.1, "jump": 0.2},  # the defaults before 2026-11-23
    {"smooth": None},
    {"margin": 0.05},
    {"pad": 1.0},
    {"smooth": None, "margin": 0.03, "pad": 1.0},
]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, nargs="+", default=[20], help="one or more coarse sizes (Table I: 10 14 20 35)")
    args = ap.parse_args(argv)
    fine = paper_scaled_map()
    print("| size | options | eikonal / Laplace (node) | with posterior mean | verified ratio |")
    print("|---|---|---|---|---|")
    for size in args.size:
        pm = coarsen_to(fine, (size, size))
        for opts in OPTIONS:
            try:
                m = EikonalMechanism.build(pm, **opts)
            except Exception as exc:  # an infeasible option set is a result too
                print(f"| {size} | {opts or 'defaults'} | infeasible: {type(exc).__name__} | | |", flush=True)
                continue
            lap = m.laplace_mse()
            print(
                f"| {size} | {opts or 'defaults'} | {m.expected_mse(jitter=False) / lap:.4f} | "
                f"{m.with_remap().expected_mse(jitter=False) / lap:.4f} | {m.report.max_ratio:.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
