"""Benchmark: eikonal vs the optimal (LP) mechanism on a coarse paper-scaled Tokyo map.

Koufogiannis & Pappas (2016), section IV and Table I: Laplace at eps_min 37.5, eikonal 5.78,
optimal 1.37 (a 35 x 35 LP).  We coarsen the paper-scaled Tokyo map of bench/eikonal_build.py
(200 x 200 over [0, 100]^2, epsilon 0.4 .. 2.0 per unit, prior = population) to size x size
blocks (epsilon = block minimum, population summed) and solve the LP of
geopriv.mechanisms.optimal with HiGHS under the same discrete guarantee the eikonal mechanism
is verified against.  Errors are at the coarse nodes (a discrete problem: coarse cells favour
small errors), in square units (= m^2).

Sizes that do not divide 200 use blocks of 200 // size cells and drop the ragged south/east
edge (reported as the covered extent).

Run:  python bench/eikonal_optimal.py [--size 20] [--time-limit 280] [--eikonal]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from eikonal_build import local_laplace_proxy, paper_scaled_map  # noqa: E402

from geopriv import EikonalMechanism, PrivacyMap  # noqa: E402
from geopriv.exceptions import InfeasibleMechanismError  # noqa: E402
from geopriv.mechanisms.optimal import coarsen, lp_size, optimal_mechanism  # noqa: E402


def coarse_map(size: int) -> PrivacyMap:
    pm = paper_scaled_map()
    n = pm.shape[0]
    factor = n // size
    if factor < 1:
        raise SystemExit(f"--size must be <= {n}")
    k = size * factor  # crop the fine map so that exactly size x size blocks remain
    if k < n:
        pm = PrivacyMap(pm.epsilon[:k, :k], pm.transform, pm.crs, pm.nodata_mask[:k, :k], pm.population[:k, :k], pm.info)
    return coarsen(pm, factor)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=20, help="coarse grid size (default 20; the paper used 35)")
    ap.add_argument("--time-limit", type=float, default=280.0, help="HiGHS time limit in seconds (default 280)")
    ap.add_argument("--method", default="highs", choices=["highs", "highs-ds", "highs-ipm"])
    ap.add_argument("--devex", action="store_true", help="HiGHS dual simplex with devex pricing (often faster here)")
    ap.add_argument("--margin", type=float, default=1e-4)
    ap.add_argument("--max-variables", type=int, default=400_000)
    ap.add_argument("--eikonal", action="store_true", help="also build EikonalMechanism on the same coarse map")
    args = ap.parse_args(argv)

    pm = coarse_map(args.size)
    hx, _ = pm.cell_size
    x0, y0, x1, y1 = pm.bounds
    size = lp_size(pm.shape)
    print(f"coarse map: {pm}")
    print(f"  cell {hx:g} units, extent [{x0 + 50:g}, {x1 + 50:g}] x [{y0 + 50:g}, {y1 + 50:g}] of [0, 100]^2")
    print(f"  LP: {size['variables']:,} variables, {size['constraints']:,} constraints, {size['nonzeros']:,} nonzeros")
    lap = 6.0 / pm.epsilon_min**2
    local = local_laplace_proxy(pm) / lap
    opts = {"simplex_dual_edge_weight_strategy": "devex"} if args.devex else None
    rows = []
    try:
        t0 = time.perf_counter()
        mech = optimal_mechanism(pm, time_limit=args.time_limit, max_variables=args.max_variables,
                                 margin=args.margin, method=args.method, options=opts)
        total = time.perf_counter() - t0
        cmp = mech.compare_laplace()
        v = mech.verify()
        print(f"  HiGHS: {mech.message} in {mech.seconds:.1f} s (total {total:.1f} s incl. build/repair); "
              f"raw LP verify {mech.params['raw_verify_ratio']:.3g}, repair added mass {mech.params['repair_added_mass']:.2g}, "
              f"objective {mech.objective:.4g}")
        rows.append(("optimal (LP)", f"{mech.seconds:.1f}", f"{v:.9f}", cmp["optimal_mse_m2"], cmp["ratio"]))
    except InfeasibleMechanismError as exc:
        print(f"  optimal: not solved: {exc}")
        rows.append(("optimal (LP)", "-", "-", float("nan"), float("nan")))
    if args.eikonal:
        try:
            t0 = time.perf_counter()
            em = EikonalMechanism.build(pm)
            secs = time.perf_counter() - t0
            r = em.verify().max_ratio
            e_nj = em.expected_mse(jitter=False)
            e_j = em.expected_mse()
            rows.append(("eikonal (node, no jitter)", f"{secs:.1f}", f"{r:.9f}", e_nj, e_nj / lap))
            rows.append(("eikonal (with jitter)", "", "", e_j, e_j / lap))
        except InfeasibleMechanismError as exc:
            print(f"  eikonal: not built: {exc}")
            rows.append(("eikonal", "-", "-", float("nan"), float("nan")))
    rows.append(("planar Laplace at eps_min", "", "", lap, 1.0))
    rows.append(("Laplace at own eps (not private)", "", "", local * lap, local))
    print()
    print(f"grid {pm.shape[0]} x {pm.shape[1]}, {size['variables']:,} variables, {size['constraints']:,} constraints")
    print(f"{'mechanism':34s} {'seconds':>8s} {'verify':>12s} {'MSE (m^2)':>10s} {'/ Laplace':>10s}")
    for name, sec, ver, mse, ratio in rows:
        print(f"{name:34s} {sec:>8s} {ver:>12s} {mse:10.4g} {ratio:10.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
