"""Benchmark: predictive vs independent mechanism on 10,000 synthetic traces of 100 points.

The predictive mechanism is recursive within a trace (each step depends on what was released
before) and vectorised across traces; the independent mechanism draws all noise at once.  Both
run side by side in one process (alternating, median of repeats) on the same traces and budget
(fixed rate 1 % of the budget per query, so every one of the 100 points is released by both).
Targets: predictive >= 1 million points/s, and predictive / independent <= 3.

    python bench/traces_speed.py [--traces 10000] [--length 100] [--repeats 5]

Also reported, for information: the same with fixed utility, with the time skip, with the
cluster-mean predictor, and the end-to-end ``gdf.priv.sanitize_traces`` (GeoDataFrame in and
out, CRS handling, ledger) on the same points.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import geopandas as gpd
import numpy as np
import pandas as pd

import geopriv  # noqa: F401  (registers gdf.priv)
from geopriv.mechanisms.predictive import (
    FixedRate,
    FixedUtility,
    IndependentMechanism,
    PredictiveMechanism,
    TimeSkip,
    Traces,
)

EPS = math.log(10) / 100  # ln 10 within 100 m, per trace


def synthetic_traces(n_traces: int, length: int, seed: int = 0) -> Traces:
    """Walks in metres: a query a minute, moving 0-80 m between queries, stopping now and then."""
    rng = np.random.default_rng(seed)
    moving = rng.random((n_traces, length)) < 0.6
    steps = rng.normal(0.0, 40.0, (n_traces, length, 2)) * moving[..., None]
    xy = np.cumsum(steps, axis=1).reshape(-1, 2) + rng.uniform(0, 20_000, (n_traces, 1, 2)).repeat(length, 1).reshape(
        -1, 2
    )
    t = np.tile(np.arange(length) * 60.0, n_traces) + rng.normal(0, 3, n_traces * length).clip(-20, 20)
    t = np.sort(t.reshape(n_traces, length), axis=1).ravel()
    return Traces.from_lengths(xy, t, np.full(n_traces, length))


def side_by_side(tr, predictive, independent, repeats):
    p_times, i_times = [], []
    released = None
    for r in range(repeats):
        t0 = time.perf_counter()
        ri = independent.run(tr, EPS, np.random.default_rng(r))
        t1 = time.perf_counter()
        rp = predictive.run(tr, EPS, np.random.default_rng(r))
        t2 = time.perf_counter()
        i_times.append(t1 - t0)
        p_times.append(t2 - t1)
        released = (int((rp.status != 3).sum()), int((ri.status != 3).sum()))
    return statistics.median(p_times), statistics.median(i_times), released


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=10_000)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    tr = synthetic_traces(args.traces, args.length)
    n = len(tr.xy)
    print(f"{args.traces:,} traces x {args.length} points = {n:,} points; median of {args.repeats} alternating runs")
    rate = 1.0 / args.length
    cases = [
        (
            "fixed rate 1/length, parrot (target case)",
            PredictiveMechanism(FixedRate(rate=rate)),
            IndependentMechanism(FixedRate(rate=rate)),
        ),
        (
            "fixed rate, parrot, time skip 15 km/h",
            PredictiveMechanism(FixedRate(rate=rate), skip=TimeSkip(15 / 3.6)),
            IndependentMechanism(FixedRate(rate=rate)),
        ),
        (
            "fixed rate, cluster_mean, eta .35 gamma 1",
            PredictiveMechanism(FixedRate(rate=rate, eta=0.35, gamma=1.0), predictor="cluster_mean"),
            IndependentMechanism(FixedRate(rate=rate)),
        ),
        (
            "fixed utility 3 km, parrot",
            PredictiveMechanism(FixedUtility(accuracy=3000.0)),
            IndependentMechanism(FixedUtility(accuracy=3000.0)),
        ),
    ]
    for k, (label, pm, im) in enumerate(cases):
        tp, ti, (rel_p, rel_i) = side_by_side(tr, pm, im, args.repeats)
        print(f"\n{label}")
        print(f"  predictive : {tp:6.3f} s  {n / tp / 1e6:6.2f} M points/s   ({rel_p:,} released)")
        print(f"  independent: {ti:6.3f} s  {n / ti / 1e6:6.2f} M points/s   ({rel_i:,} released)")
        target = "  (targets: >= 1 M points/s, ratio <= 3)" if k == 0 else ""
        print(f"  ratio predictive / independent = {tp / ti:.2f}{target}")

    # end to end through the accessor (GeoDataFrame, UTM 50N metres)
    gdf = gpd.GeoDataFrame(
        {"tid": np.repeat(np.arange(args.traces), args.length), "t": pd.to_datetime(tr.times, unit="s", utc=True)},
        geometry=gpd.points_from_xy(tr.xy[:, 0] + 440_000, tr.xy[:, 1] + 4_400_000),
        crs=32650,
    )
    ends = []
    for method in ("predictive", "independent"):
        t0 = time.perf_counter()
        gdf.priv.sanitize_traces(traj_id="tid", time="t", epsilon=EPS, method=method, rate=rate, rng=0)
        ends.append(time.perf_counter() - t0)
    print(
        f"\nend to end gdf.priv.sanitize_traces: predictive {ends[0]:.2f} s ({n / ends[0] / 1e6:.2f} M points/s), "
        f"independent {ends[1]:.2f} s"
    )


if __name__ == "__main__":
    main()
