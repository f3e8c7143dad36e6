"""Benchmark: eikonal vs the optimal (LP) mechanism vs planar Laplace, Table I of the paper.

Koufogiannis & Pappas (2016), section IV and Table I: Laplace at eps_min 37.5, eikonal 5.78,
optimal 1.37 (a 35 x 35 LP).  We coarsen the paper-scaled Tokyo map of bench/eikonal_build.py
(200 x 200 over [0, 100]^2, epsilon 0.4 .. 2.0 per unit, prior = population) to size x size
equal blocks with geopriv.mechanisms.optimal.coarsen_to (epsilon = minimum over the fine cells a
block touches, population area-weighted; no trimming, also for sizes not dividing 200) and
solve the LP of geopriv.mechanisms.optimal under the same discrete guarantee the eikonal
mechanism is verified against.  The eikonal mechanism is EikonalMechanism.build on the same
coarse map (default options).  Errors are at the coarse nodes (a discrete problem: coarse cells
favour small errors), in square units (= m^2).

Every optimal row reports the certified lower bound on the exact LP optimum from the solver's
multipliers (params["dual_bound"]) and the gap of the repaired (exactly private) solution to
it, so "eikonal / optimal" is bracketed: eikonal / MSE(optimal) <= true ratio <= eikonal / bound.
With --window w the LP keeps only P(y|a) with |a - y| <= w cells (a restriction: an upper bound,
still exactly private after the repair) and the bound is for the full problem.

Run:  python bench/eikonal_optimal.py --size 20 [--solver ipm] [--window 5] [--margin 1e-3]
          [--time-limit 600] [--n-jobs 2] [--no-eikonal] [--md bench/results/optimal.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from eikonal_build import local_laplace_proxy, paper_scaled_map  # noqa: E402

from geopriv import EikonalMechanism, PrivacyMap  # noqa: E402
from geopriv.exceptions import InfeasibleMechanismError  # noqa: E402
from geopriv.mechanisms.optimal import SOLVERS, coarsen_to, lp_size, optimal_mechanism  # noqa: E402

MD_HEADER = (
    "| grid | LP variables (solved) | LP rows | solver | window | solve s | total s | verify | optimal / Laplace "
    "| bound / Laplace | gap | eikonal / Laplace (node) | eikonal / Laplace (jitter) | eikonal / optimal | eikonal build s |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
)


def coarse_map(size: int) -> PrivacyMap:
    """The paper-scaled Tokyo map on size x size equal blocks (any size, nothing trimmed)."""
    return coarsen_to(paper_scaled_map(), (size, size))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=20, help="coarse grid size (default 20; the paper used 35)")
    ap.add_argument("--time-limit", type=float, default=600.0, help="HiGHS time limit in seconds (default 600)")
    ap.add_argument("--solver", default=None, choices=list(SOLVERS), help="default: the library's (optimal_mechanism)")
    ap.add_argument(
        "--method", default=None, choices=["highs", "highs-ds", "highs-ipm"], help="scipy method for --solver highs"
    )
    ap.add_argument("--window", type=int, default=None, help="LP variables only within this many cells of their output")
    ap.add_argument("--margin", type=float, default=1e-4)
    ap.add_argument("--max-variables", type=int, default=2_000_000)
    ap.add_argument("--n-jobs", type=int, default=1, help="worker processes for --solver colgen's pricing LPs")
    ap.add_argument("--no-eikonal", action="store_true", help="skip EikonalMechanism.build on the same coarse map")
    ap.add_argument("--md", default=None, help="append a markdown table row to this file")
    args = ap.parse_args(argv)

    pm = coarse_map(args.size)
    hx, _ = pm.cell_size
    size = lp_size(pm.shape)
    print(f"coarse map: {pm}")
    print(f"  cell {hx:g} units; full LP: {size['variables']:,} variables, {size['constraints']:,} constraints")
    lap = 6.0 / pm.epsilon_min**2
    local = local_laplace_proxy(pm) / lap
    mech = None
    t0 = time.perf_counter()
    try:
        chosen = {k: v for k, v in (("solver", args.solver), ("method", args.method)) if v is not None}
        mech = optimal_mechanism(
            pm,
            time_limit=args.time_limit,
            max_variables=args.max_variables,
            margin=args.margin,
            window=args.window,
            n_jobs=args.n_jobs,
            **chosen,
        )
        total = time.perf_counter() - t0
        pr = mech.params
        o_mse, v = mech.expected_mse(), mech.verify()
        print(
            f"  {pr['solver']}: {mech.message} in {mech.seconds:.1f} s (total {total:.1f} s incl. build/repair/bound); "
            f"raw verify {pr['raw_verify_ratio']:.3g}, repair added mass {pr['repair_added_mass']:.2g} "
            f"({pr['repair_rounds']} round(s)); verify {v:.9f}"
        )
        print(
            f"  optimal MSE {o_mse:.4g} (LP objective {mech.objective:.4g}), lower bound {pr['dual_bound']:.4g}, "
            f"gap {pr['gap']:.2%}"
        )
        if pr.get("colgen_relaxed_rounds"):
            print(
                f"  column generation: {pr['colgen_rounds']} rounds, of which {pr['colgen_relaxed_rounds']} on the relaxed "
                f"rows ({pr['colgen_relaxed_seconds']:.0f} s, bound {pr['colgen_relaxed_bound'] / lap:.4f} x Laplace)"
            )
    except InfeasibleMechanismError as exc:
        total = time.perf_counter() - t0
        print(f"  optimal: not solved after {total:.0f} s: {exc}")
    e_nj = e_j = esecs = everify = float("nan")
    if not args.no_eikonal:
        t1 = time.perf_counter()
        em = EikonalMechanism.build(pm)
        esecs = time.perf_counter() - t1
        everify = em.verify().max_ratio
        e_nj, e_j = em.expected_mse(jitter=False), em.expected_mse()
        print(f"  eikonal: built in {esecs:.1f} s, verify {everify:.9f}, MSE node {e_nj:.4g}, with jitter {e_j:.4g}")
    print(f"  planar Laplace at eps_min: {lap:.4g}; Laplace at own eps (not private): {local:.4f} x Laplace")
    print()
    if mech is not None:
        pr = mech.params
        lp_vars = f"{size['variables']:,}" + (f" ({pr['lp_variables']:,})" if pr.get("lp_variables") else "")
        row = (
            f"| {args.size} x {args.size} | {lp_vars} | {pr['lp_constraints']:,} | {pr['solver']} | {args.window or '-'} "
            f"| {mech.seconds:.1f} | {total:.1f} | {v:.6f} | {o_mse / lap:.4f} | {pr['dual_bound'] / lap:.4f} | {pr['gap']:.2%} "
            f"| {e_nj / lap:.4f} | {e_j / lap:.4f} | {e_nj / o_mse:.2f} (<= {e_nj / pr['dual_bound']:.2f}) | {esecs:.1f} |"
        )
    else:
        row = (
            f"| {args.size} x {args.size} | {size['variables']:,} | {size['constraints']:,} | {args.solver or 'auto'} | "
            f"{args.window or '-'} | not solved ({total:.0f} s) | | | | | | {e_nj / lap:.4f} | {e_j / lap:.4f} | | {esecs:.1f} |"
        )
    print(MD_HEADER + row)
    if args.md:
        path = Path(args.md)
        new = not path.exists()
        with path.open("a") as fh:
            if new:
                fh.write(MD_HEADER)
            fh.write(row + "\n")
        print(f"appended to {path} ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
