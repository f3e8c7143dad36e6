"""Benchmark: eikonal build time and peak memory against raster size (issue 17, item 2).

The Tokyo raster at the paper's scaling ([0, 100]^2, epsilon 0.4..2.0 per unit), resampled to
n x n cells over the same extent (block mean for n < 200, nearest-neighbour repetition for
n > 200), built with the default options, one size per child process (so the peak memory of
each size is its own).  Sizes run from small to large and stop at the first one predicted to
exceed the memory limit (the fitted exponent of the previous sizes).  Prints time, peak
memory, kernel entries and the fitted exponents (log-log least squares).

Run:  python bench/eikonal_scaling.py [--sizes 50 100 200 400] [--jobs 2] [--mem-limit-gib 12]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def scaled_map(n: int):
    """The paper's scaling on the shipped Tokyo raster resampled to n x n (block means below 200, each
    cell repeated above): same extent [0, 100]^2, epsilon 0.4 .. 2.0 per unit."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    import rasterio

    from eikonal_build import RASTER

    from geopriv import PrivacyMap
    from geopriv.crs import local_aeqd

    with rasterio.open(RASTER) as ds:
        dens = ds.read(1).astype(float)
        nodata = ds.nodata
    dens[dens == nodata] = np.nan
    m = dens.shape[0]
    if n < m:
        f = m // n
        dens = np.nanmean(dens[: n * f, : n * f].reshape(n, f, n, f), axis=(1, 3))
    elif n > m:
        f = n // m
        dens = np.repeat(np.repeat(dens, f, axis=0), f, axis=1)
    h = 100.0 / dens.shape[0]
    return PrivacyMap.from_population(
        dens, epsilon_range=(0.4, 2.0), transform=rasterio.Affine(h, 0, -50, 0, -h, 50), crs=local_aeqd(0.0, 0.0)
    )


def child(n: int, jobs: int, max_step=2, kernels: str = "held", mse: bool = True, sample_n: int = 0) -> dict:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from eikonal_build import PeakRSS

    from geopriv import EikonalMechanism
    from geopriv.exceptions import InfeasibleMechanismError

    pm = scaled_map(n)
    dens_n = pm.shape[0]

    with PeakRSS() as peak:
        t0 = time.perf_counter()
        try:
            mech = EikonalMechanism.build(pm, n_jobs=jobs, max_step=max_step, kernels=kernels)
        except InfeasibleMechanismError as e:  # the time and memory up to the refusal are still figures
            return {
                "n": dens_n,
                "seconds": time.perf_counter() - t0,
                "peak_gib": peak.peak / 2**30,
                "infeasible": str(e),
            }
        dt = time.perf_counter() - t0
    out = {
        "n": dens_n,
        "seconds": dt,
        "peak_gib": peak.peak / 2**30,
        "nnz": mech.params["nnz"],
        "outputs": mech.params["n_outputs"],
        "ratio": mech.report.max_ratio,
        "kernels": kernels,
        "timings": mech.params["timings"],
    }
    print(json.dumps(out), flush=True)  # the build's figures, whatever follows
    if sample_n:
        # release sample_n points drawn from the population prior (rows computed on demand)
        from eikonal_compact import points_from_prior

        xy = points_from_prior(pm, sample_n, np.random.default_rng(0))
        with PeakRSS() as peak2:
            t0 = time.perf_counter()
            mech.sample(xy, np.random.default_rng(1))
            out["sample_s"] = time.perf_counter() - t0
        out["sample_n"] = sample_n
        out["sample_peak_gib"] = peak2.peak / 2**30
        print(json.dumps(out), flush=True)
    if mse:
        t0 = time.perf_counter()
        out["mse_ratio"] = mech.compare_laplace()["ratio"]
        out["mse_s"] = time.perf_counter() - t0
    return out


def fit(xs, ys):
    b, _a = np.polyfit(np.log(xs), np.log(ys), 1)
    return float(b)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 400])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--mem-limit-gib", type=float, default=12.0)
    ap.add_argument("--child", type=int, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--max-step", default="2", help="EikonalMechanism.build's max_step: a power of two, or none (no cap)"
    )
    ap.add_argument("--kernels", default="held", choices=["held", "on_demand"], help="EikonalMechanism.build's kernels")
    ap.add_argument("--no-mse", action="store_true", help="child: skip the expected error (one more pass on demand)")
    ap.add_argument("--sample", type=int, default=0, help="child: also release this many points from the prior")
    args = ap.parse_args(argv)
    max_step = None if args.max_step.lower() == "none" else int(args.max_step)
    if args.child is not None:
        print(json.dumps(child(args.child, args.jobs, max_step, args.kernels, not args.no_mse, args.sample)))
        return
    rows = []
    for n in args.sizes:
        if len(rows) >= 2:
            e_mem = fit([r["n"] for r in rows], [r["peak_gib"] for r in rows])
            pred = rows[-1]["peak_gib"] * (n / rows[-1]["n"]) ** e_mem
            if pred > args.mem_limit_gib:
                print(
                    f"skip {n} x {n}: predicted peak {pred:.0f} GiB > {args.mem_limit_gib} GiB (exponent {e_mem:.2f})"
                )
                rows.append(
                    {
                        "n": n,
                        "skipped": True,
                        "predicted_peak_gib": pred,
                        "predicted_seconds": rows[-1]["seconds"]
                        * (n / rows[-1]["n"])
                        ** fit(
                            [r["n"] for r in rows if not r.get("skipped")],
                            [r["seconds"] for r in rows if not r.get("skipped")],
                        ),
                    }
                )
                break
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(n),
                "--jobs",
                str(args.jobs),
                "--max-step",
                args.max_step,
                "--kernels",
                args.kernels,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps({k: v for k, v in r.items() if k != "timings"}))
        rows.append(r)
    done = [r for r in rows if not r.get("skipped") and not r.get("infeasible")]
    e_t = fit([r["n"] for r in done], [r["seconds"] for r in done])
    e_m = fit([r["n"] for r in done], [r["peak_gib"] for r in done])
    e_z = fit([r["n"] for r in done], [r["nnz"] for r in done])
    lines = [
        "| n x n | build s | peak GiB | outputs | kernel entries | verified ratio | MSE / Laplace |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("infeasible"):
            lines.append(f"| {r['n']} | {r['seconds']:.1f} (refused) | {r['peak_gib']:.2f} | | | infeasible | |")
        elif r.get("skipped"):
            lines.append(
                f"| {r['n']} | (predicted {r['predicted_seconds']:.0f}) | (predicted {r['predicted_peak_gib']:.0f}) | | | not run | |"
            )
        else:
            lines.append(
                f"| {r['n']} | {r['seconds']:.1f} | {r['peak_gib']:.2f} | {r['outputs']:,} | {r['nnz']:,} | {r['ratio']:.4f} | {r['mse_ratio']:.3f} |"
            )
    lines.append(
        f"\nFitted exponents in n (cells per side): time {e_t:.2f}, peak memory {e_m:.2f}, kernel entries {e_z:.2f}."
    )
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(
            f"# Eikonal build scaling ({time.strftime('%Y-%m-%d')}, `python bench/eikonal_scaling.py --jobs {args.jobs}`)\n\n{text}\n"
        )


if __name__ == "__main__":
    main()
