"""Exact discrete Laplace sampler against numpy's geometric and OpenDP, side by side.

Usage::

    python bench/discrete_laplace.py            # a markdown table on stdout (about 20 s)
    python bench/discrete_laplace.py --synthesize   # and the whole mechanism (about 30 s more)
    PYTHONPATH=/path/to/opendp python bench/discrete_laplace.py   # with an OpenDP column

Columns: best of ``--repeat`` wall times for ``--n`` draws of
``geopriv.mechanisms.discrete.sample_discrete_laplace`` (exact: integer draws only) and of the
sampler synthesize used before (the difference of two ``Generator.geometric`` draws: a
floating-point inversion of 53-bit uniforms), both on one core; OpenDP's exact integer Laplace
(``opendp.measurements.make_laplace`` on a vector of int64 zeros) when ``opendp`` imports, timed
on ``--n-opendp`` draws and scaled to ``--n`` (its cost is linear in the number of draws).
The machine is shared: run it when it is idle, and read the ratios rather than the times.
"""

from __future__ import annotations

import argparse
import math
import time
from fractions import Fraction

import numpy as np

from geopriv.mechanisms.discrete import sample_discrete_laplace

#: (label, scale t as given to the exact sampler, scale as a float for numpy and OpenDP)
SCALES = [
    ("eps = 5 (t = 0.2)", 0.2, 0.2),
    ("t = 1", 1, 1.0),
    ("t = 5/2", Fraction(5, 2), 2.5),
    ("t = 10", 10, 10.0),
    ("t = 37.123 (float)", 37.123, 37.123),
    ("t = 1000.3 (float)", 1000.3, 1000.3),
    ("eps = 1e-6 (t = 1e6)", Fraction(10**6), 1e6),
    ("t = (10^30 + 1) / 10^29 (numerator beyond int64)", Fraction(10**30 + 1, 10**29), 10.0),
    ("eps = 1e-10 float (t = 2^86 / m ~ 1e10)", 1 / Fraction(1e-10), 1e10),
]


def numpy_geometric(scale: float, size: int, gen) -> np.ndarray:
    """The sampler geopriv used before: two numpy geometric draws (floating-point inversion)."""
    q = -math.expm1(-1.0 / scale)
    g = gen.geometric(q, size=(2, size))
    return (g[0] - g[1]).astype(np.int64)


def best_time(fn, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def opendp_sampler():
    """A function (scale, size) -> int64 draws from OpenDP's exact discrete Laplace, or None."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None, None
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)

    def run(scale: float, size: int) -> np.ndarray:
        meas = dp.m.make_laplace(*space, scale=scale)
        return np.asarray(meas([0] * size), dtype=np.int64)

    return run, getattr(dp, "__version__", "?")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**6)
    ap.add_argument("--n-opendp", type=int, default=10**5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--synthesize",
        action="store_true",
        help="also time PrivateMeasure.sample_unit (the whole mechanism) with either sampler",
    )
    args = ap.parse_args(argv)
    gen = np.random.default_rng(0)
    odp, odp_version = opendp_sampler()
    print(f"numpy {np.__version__}; OpenDP {odp_version if odp else 'not installed'}; n = {args.n:,}\n")
    head = "| scale | numpy geometric (ms) | exact, geopriv (ms) | exact / numpy |"
    line = "|---|---:|---:|---:|"
    if odp:
        head += f" OpenDP exact (ms, from {args.n_opendp:,}) | OpenDP / numpy |"
        line += "---:|---:|"
    print(head)
    print(line)
    for label, exact_t, float_t in SCALES:
        t_np = best_time(lambda: numpy_geometric(float_t, args.n, gen), args.repeat)
        t_ex = best_time(lambda: sample_discrete_laplace(exact_t, args.n, gen), args.repeat)
        row = f"| {label} | {t_np * 1e3:.1f} | {t_ex * 1e3:.1f} | {t_ex / t_np:.1f}x |"
        if odp:
            t_od = best_time(lambda: odp(float_t, args.n_opendp), 1) * args.n / args.n_opendp
            row += f" {t_od * 1e3:.0f} | {t_od / t_np:.0f}x |"
        print(row, flush=True)
    print("\nPer call, small sizes (t = 37.123; synthesize draws one call per tree level):\n")
    print("| draws per call | numpy geometric (us) | exact, geopriv (us) |")
    print("|---:|---:|---:|")
    for size in (1, 100, 10_000):
        reps = max(20, 20_000 // max(size, 1))
        t_np = best_time(lambda: [numpy_geometric(37.123, size, gen) for _ in range(reps)], 3) / reps
        t_ex = best_time(lambda: [sample_discrete_laplace(37.123, size, gen) for _ in range(reps)], 3) / reps
        print(f"| {size:,} | {t_np * 1e6:.0f} | {t_ex * 1e6:.0f} |", flush=True)
    if args.synthesize:
        whole_mechanism(gen)


def whole_mechanism(gen):
    """PrivateMeasure.sample_unit (epsilon = 1, 2-D, uniform points) with the old and the exact noise."""
    import geopriv.mechanisms.private_measure as pm

    exact = pm.discrete_laplace

    def old(scale, size, rng):
        size = int(size)
        return numpy_geometric(float(scale), size, rng) if size else np.zeros(0, dtype=np.int64)

    print("\nThe whole mechanism (PrivateMeasure.sample_unit, epsilon = 1, uniform points in the square):\n")
    print("| n | method | numpy geometric (ms) | exact (ms) | exact / numpy |")
    print("|---:|---|---:|---:|---:|")
    try:
        for n in (1000, 100_000, 1_000_000):
            unit = gen.random((n, 2))
            reps = {1000: 20, 100_000: 3}.get(n, 1)
            for method in ("srw", "pmm"):
                best = {}
                for name, fn in (("old", old), ("exact", exact)) * 2:
                    pm.discrete_laplace = fn
                    mech = pm.PrivateMeasure(1.0, method=method)
                    t = best_time(lambda: mech.sample_unit(unit, gen), reps)
                    best[name] = min(best.get(name, math.inf), t)
                print(
                    f"| {n:,} | {method} | {best['old'] * 1e3:.1f} | {best['exact'] * 1e3:.1f} | "
                    f"{best['exact'] / best['old']:.2f}x |",
                    flush=True,
                )
    finally:
        pm.discrete_laplace = exact


if __name__ == "__main__":
    main()
