"""Benchmark: geopriv on dask-geopandas at scale (issue 16 item 5), against in-memory geopriv.

Everything runs side by side in one script (alternating, median of repeats), because the
machine is shared: ratios measured together are what to read, not absolute seconds.

* **perturb**: N points (default 50 million, and a smaller N to show that memory does not grow
  with N) are generated lazily on the workers of a ``LocalCluster(n_workers=2,
  threads_per_worker=1)`` with ``dask.dataframe.from_map`` (partition i holds index values
  i*P .. (i+1)*P-1, clustered random points in UTM 50N), released with
  ``ddf.priv.perturb(level=ln 4, radius=200)`` and reduced by ``map_partitions(len).sum()``.
  The same pipeline without the perturb step (generation + the same reduction) is timed beside
  it, and the release alone is the difference.  Baseline: ``gdf.priv.perturb`` of M points
  (default 5 million) of the same kind in this process, pinned to one CPU (strictly one core)
  and unpinned (one process: the in-memory path samples the next chunk in a thread).
  Also reported: worker CPU seconds (robust to other jobs on the machine), the peak resident
  memory of each worker (``VmHWM``, reset through ``/proc/<pid>/clear_refs`` before every run),
  and how many times each partition was generated (= how many times a real source is read).
* **synthesize**: ``ddf.priv.synthesize(1.0, bounds=...)`` on dask at M and at S points
  (default 10 million) vs ``gdf.priv.synthesize`` on the M in-memory points.
* **sanitize_traces** (only when ``geopriv.distributed.traces`` exists): T traces of L points
  (default 1 million traces of 5 points) generated lazily (trace ids in partition ranges),
  ``ddf.priv.sanitize_traces(level=ln 10, radius=100, rate=0.2)`` vs in memory on Tm traces
  (default 100,000).
* a profile of one partition's release (``release_partition``) next to the in-memory release of
  the same partition: where the time goes.

    python bench/dask_scale.py [--n 50000000] [--n-small 10000000] [--partition 1048576]
        [--inmem 5000000] [--synth 10000000] [--traces 1000000] [--traces-inmem 100000]
        [--trace-length 5] [--repeats 3] [--repeats-big 2] [--sections perturb,synthesize,traces,profile]
        [--out bench/results/dask.md]

Run it under ``timeout``: the default sizes took more than 25 minutes on the shared 2-core machine it was
written on (load average 4-6); ``--sections`` runs parts separately.
"""

from __future__ import annotations

import argparse
import builtins
import cProfile
import gc
import importlib.util
import io
import math
import os
import platform
import pstats
import statistics
import sys
import time

import numpy as np
import pandas as pd
import psutil

import geopandas as gpd

import geopriv

CRS = 32650  # UTM 50N
AREA = (380_000.0, 4_330_000.0, 520_000.0, 4_490_000.0)  # public study area (declared, not from the data)
PERTURB = dict(level=math.log(4), radius=200)
TRACES = dict(level=math.log(10), radius=100, rate=0.2)
SYNTH_EPS = 1.0


# ---------------------------------------------------------------------------------------------
# lazily generated data: one partition per call, on the worker that runs it


def _count_generation():
    """Count partition generations in this process (read back with client.run)."""
    counter = builtins.__dict__.setdefault("_geopriv_bench_generated", [0])
    counter[0] += 1


def _clustered_xy(rng, n, seed):
    """n points around 40 public cluster centres (spreads 300 m .. 6 km), 10 % background."""
    crng = np.random.default_rng([seed, 10**6])
    centres = crng.uniform([420_000, 4_370_000], [480_000, 4_450_000], (40, 2))
    spread = np.exp(crng.uniform(math.log(300), math.log(6000), 40))
    weight = crng.dirichlet(np.ones(40))
    c = rng.choice(40, size=n, p=weight)
    xy = centres[c] + rng.standard_normal((n, 2)) * spread[c, None]
    background = rng.random(n) < 0.1
    nb = int(background.sum())
    xy[background] = rng.uniform([AREA[0], AREA[1]], [AREA[2], AREA[3]], (nb, 2))
    np.clip(xy, [AREA[0] + 1, AREA[1] + 1], [AREA[2] - 1, AREA[3] - 1], out=xy)
    return xy


def make_points(spec, seed=0):
    """Partition ``i``: rows ``start .. stop-1`` (integer index), clustered points in UTM 50N."""
    i, start, stop = spec
    _count_generation()
    n = stop - start
    xy = _clustered_xy(np.random.default_rng([seed, i]), n, seed)
    # a named index of person ids (an unnamed integer index looks like positions and is refused)
    return gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=CRS, index=pd.RangeIndex(start, stop, name="pid")
    )


def make_traces(spec, length=5, seed=1):
    """Partition ``i``: traces ``t0 .. t1-1`` of ``length`` fixes a minute apart (walks of ~40 m steps)."""
    i, t0, t1 = spec
    _count_generation()
    n_tr = t1 - t0
    rng = np.random.default_rng([seed, i])
    start = _clustered_xy(rng, n_tr, seed)
    moving = rng.random((n_tr, length)) < 0.6
    steps = rng.normal(0.0, 40.0, (n_tr, length, 2)) * moving[..., None]
    steps[:, 0] = 0.0
    xy = (start[:, None, :] + np.cumsum(steps, axis=1)).reshape(-1, 2)
    np.clip(xy, [AREA[0] + 1, AREA[1] + 1], [AREA[2] - 1, AREA[3] - 1], out=xy)
    t = np.tile(np.arange(length) * 60.0, n_tr) + rng.uniform(0, 3600, n_tr).repeat(length)
    return gpd.GeoDataFrame(
        {"traj": np.arange(t0, t1, dtype=np.int64).repeat(length), "t": t},
        geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]),
        crs=CRS,
        # unique fix ids in the partition's range, in no particular order (a row-number index is refused by the
        # location-attribute check of small buckets: it looks like an affine function of the points there)
        index=pd.Index(t0 * length + rng.permutation(n_tr * length), dtype=np.int64),
    )


def specs(total, per_part):
    return [(i, a, min(total, a + per_part)) for i, a in enumerate(range(0, total, per_part))]


def lazy_points(n, per_part):
    import dask.dataframe as dd

    parts = specs(n, per_part)
    divisions = [a for _, a, _ in parts] + [n - 1]
    return dd.from_map(
        make_points, parts, meta=make_points((0, 0, 0)), divisions=divisions, enforce_metadata=False, label="points"
    )


def lazy_traces(n_traces, per_part, length):
    import dask.dataframe as dd

    parts = specs(n_traces, per_part)
    return dd.from_map(
        make_traces, parts, length=length, meta=make_traces((0, 0, 0), length), enforce_metadata=False, label="traces"
    )


def in_memory_points(n, per_part):
    return pd.concat([make_points(s) for s in specs(n, per_part)])


# ---------------------------------------------------------------------------------------------
# measurement


def install_gc_timer():
    """Accumulate the wall time of the cyclic garbage collector in this process (read by _worker_state)."""
    if "_geopriv_bench_gc" in builtins.__dict__:
        return
    acc = builtins.__dict__.setdefault("_geopriv_bench_gc", [0.0, 0.0])  # total seconds, start of the current pass

    def timer(phase, info):
        if phase == "start":
            acc[1] = time.perf_counter()
        else:
            acc[0] += time.perf_counter() - acc[1]

    gc.callbacks.append(timer)


def _worker_state(reset=False):
    """(CPU seconds, VmHWM bytes, VmRSS bytes, partitions generated) of this worker process."""
    status = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmHWM", "VmRSS")):
                key, value = line.split(":")
                status[key] = int(value.split()[0]) * 1024
    cpu = psutil.Process().cpu_times()
    counter = builtins.__dict__.get("_geopriv_bench_generated", [0])[0]
    gc_seconds = builtins.__dict__.get("_geopriv_bench_gc", [0.0])[0]
    if reset:
        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
        except OSError:
            pass
    return cpu.user + cpu.system, status.get("VmHWM", 0), status.get("VmRSS", 0), counter, gc_seconds


class Run:
    def __init__(self, wall, cpu, peak, idle, generated, value, gc_seconds=0.0):
        self.wall, self.cpu, self.peak, self.idle, self.generated, self.value = wall, cpu, peak, idle, generated, value
        self.gc = gc_seconds


def dask_run(client, build):
    """Time ``build().compute()`` on the cluster: wall, worker CPU, peak RSS per worker, generations."""
    client.run(gc.collect)
    before = client.run(_worker_state, True)
    t = time.perf_counter()
    value = build().compute()
    wall = time.perf_counter() - t
    after = client.run(_worker_state)
    cpu = sum(after[w][0] - before[w][0] for w in after)
    peak = max(after[w][1] for w in after)
    idle = max(before[w][2] for w in before)
    generated = sum(after[w][3] - before[w][3] for w in after)
    gc_seconds = sum(after[w][4] - before[w][4] for w in after)
    return Run(wall, cpu, peak, idle, generated, value, gc_seconds)


def local_run(fn, pinned):
    """Time ``fn()`` in this process; pinned: this thread (and threads it starts) on one CPU."""
    gc.collect()
    mask = os.sched_getaffinity(0)
    if pinned:
        os.sched_setaffinity(0, {min(mask)})
    _, _, rss0, _, gc0 = _worker_state(reset=True)
    c = time.process_time()
    t = time.perf_counter()
    try:
        value = fn()
    finally:
        wall = time.perf_counter() - t
        cpu = time.process_time() - c
        if pinned:
            os.sched_setaffinity(0, mask)
    _, hwm, _, _, gc1 = _worker_state()
    del value
    return Run(wall, cpu, hwm, rss0, 0, None, gc1 - gc0)


def med(runs, attr="wall"):
    return statistics.median(getattr(r, attr) for r in runs)


def med_diff(a, b, attr="wall"):
    """Median over repeats of the paired difference a - b (side by side runs)."""
    return statistics.median(getattr(x, attr) - getattr(y, attr) for x, y in zip(a, b))


def fmt_rate(v):
    return f"{v / 1e6:.2f} M/s" if v >= 1e5 else f"{v / 1e3:.1f} k/s"


def gib(v):
    return f"{v / 2**30:.2f} GiB"


class Report:
    """Prints, and rewrites the markdown file as it goes (a run cut short keeps its finished sections)."""

    def __init__(self, path=None):
        self.lines = []
        self.path = path
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def __call__(self, text=""):
        print(text, flush=True)
        self.lines.append(text)
        if self.path:
            with open(self.path, "w") as fh:
                fh.write("\n".join(self.lines) + "\n")

    def table(self, header, rows):
        self("| " + " | ".join(header) + " |")
        self("|" + "|".join("---" for _ in header) + "|")
        for row in rows:
            self("| " + " | ".join(str(c) for c in row) + " |")
        self()


def loadavg():
    return "/".join(f"{v:.2f}" for v in os.getloadavg())


# ---------------------------------------------------------------------------------------------
# sections


def bench_perturb(client, rep, args, gdf):
    sizes = sorted({args.n_small, args.n}) if args.n_small else [args.n]
    P = args.partition
    rep("## perturb: `ddf.priv.perturb(level=ln 4, radius=200)`")
    rep()
    rep(
        f"Partitions of {P:,} rows (multiple of geopriv's 16,384-row key block), reduced by "
        f"`map_partitions(len).sum()`; generation alone timed beside it in every repeat. "
        f"In memory: `gdf.priv.perturb` of {len(gdf):,} points. Median of {args.repeats} repeats "
        + (f"({min(args.repeats, args.repeats_big)} for the largest N) " if len(sizes) > 1 else "")
        + f"(load average at start {loadavg()})."
    )
    rep()
    runs = {("gen", n): [] for n in sizes}
    runs.update({("perturb", n): [] for n in sizes})
    pinned, unpinned = [], []
    for r in range(args.repeats):
        pinned.append(local_run(lambda: gdf.priv.perturb(**PERTURB), pinned=True))
        unpinned.append(local_run(lambda: gdf.priv.perturb(**PERTURB), pinned=False))
        for n in sizes:
            if n == max(sizes) and len(sizes) > 1 and r >= args.repeats_big:
                continue
            ddf = lazy_points(n, P)
            runs["gen", n].append(dask_run(client, lambda: ddf.map_partitions(len).sum()))
            runs["perturb", n].append(dask_run(client, lambda: ddf.priv.perturb(**PERTURB).map_partitions(len).sum()))
            assert runs["perturb", n][-1].value == n == runs["gen", n][-1].value
        print(
            f"  repeat {r + 1}: in memory {pinned[-1].wall:.2f} s pinned, {unpinned[-1].wall:.2f} s; "
            + "; ".join(
                f"N={n:,}: gen {runs['gen', n][-1].wall:.1f} s, gen+perturb {runs['perturb', n][-1].wall:.1f} s"
                for n in sizes
                if len(runs["gen", n]) == r + 1
            ),
            flush=True,
        )

    m = len(gdf)
    mem_pin, mem_free = m / med(pinned), m / med(unpinned)
    mem_cpu = m / med(pinned, "cpu")
    workers = len(client.scheduler_info()["workers"])
    rows = []
    results = {}
    for n in sizes:
        g, p = runs["gen", n], runs["perturb", n]
        release = med_diff(p, g)
        release_cpu = med_diff(p, g, "cpu")
        rate = n / release
        results[n] = dict(
            rate=rate,
            per_core=rate / workers,
            per_cpu=n / release_cpu,
            end=n / med(p),
            peak=max(x.peak for x in p),
            peak_gen=max(x.peak for x in g),
            idle=max(x.idle for x in p),
            gen=med(g),
            total=med(p),
            generated=p[-1].generated / max(1, len(specs(n, P))),
        )
        rows.append(
            [
                f"dask, N = {n:,} ({len(specs(n, P))} partitions, {len(p)} runs)",
                f"{med(g):.1f}",
                f"{med(p):.1f}",
                f"{release:.1f}",
                fmt_rate(rate),
                fmt_rate(rate / workers),
                fmt_rate(n / release_cpu),
                f"{results[n]['generated']:.0f}",
                f"{med(g, 'gc'):.1f} / {med(p, 'gc'):.1f}",
            ]
        )
    rows.append(
        [
            f"in memory, M = {m:,}, pinned to 1 CPU",
            "",
            "",
            f"{med(pinned):.2f}",
            fmt_rate(mem_pin),
            fmt_rate(mem_pin),
            fmt_rate(mem_cpu),
            "",
            f"{med(pinned, 'gc'):.1f}",
        ]
    )
    rows.append(
        [
            f"in memory, M = {m:,}, 1 process unpinned",
            "",
            "",
            f"{med(unpinned):.2f}",
            fmt_rate(mem_free),
            "",
            fmt_rate(m / med(unpinned, "cpu")),
            "",
            f"{med(unpinned, 'gc'):.1f}",
        ]
    )
    rep.table(
        [
            "run",
            "generation only (s)",
            "generation + perturb (s)",
            "release (s)",
            "release throughput",
            "per core (wall / workers)",
            "per CPU-second",
            "reads per partition",
            "cyclic GC (s, summed over workers): gen / gen+perturb",
        ],
        rows,
    )

    big = max(sizes)
    b = results[big]
    rep(
        "* dask release throughput per core / in-memory (pinned, 1 core): "
        + ", ".join(f"N={n:,}: {results[n]['per_core'] / mem_pin:.2f}" for n in sizes)
        + f"  (in memory is {mem_pin / b['per_core']:.2f}x dask per core at N={big:,}; target <= 1.2)"
    )
    rep(
        "* same per CPU-second (worker CPU seconds: less sensitive to other jobs than wall time): "
        + ", ".join(f"N={n:,}: in memory / dask {mem_cpu / results[n]['per_cpu']:.2f}x" for n in sizes)
    )
    rep(
        f"* speed-up of {workers} workers over 1 in-memory process (release only): "
        f"{b['rate'] / mem_free:.2f}x vs unpinned, {b['rate'] / mem_pin:.2f}x vs 1 pinned core"
    )
    rep(
        f"* end to end on dask (generation + perturb + reduction): {fmt_rate(b['end'])} at N={big:,}"
        f" ({b['total']:.1f} s)"
    )
    if big < 50_000_000:
        rep(
            f"* extrapolated to 50 M points (linear in N): generation + perturb {b['total'] * 5e7 / big:.0f} s, "
            f"release alone {5e7 / b['rate']:.0f} s on {workers} workers"
        )
    rep()
    rep("Peak resident memory per worker (VmHWM, max over workers and repeats; reset before each run):")
    rep()
    rep.table(
        ["N", "idle RSS", "peak, generation only", "peak, generation + perturb"],
        [[f"{n:,}", gib(results[n]["idle"]), gib(results[n]["peak_gen"]), gib(results[n]["peak"])] for n in sizes],
    )
    rep(
        f"In memory ({m:,} points held by the process): peak {gib(max(x.peak for x in pinned + unpinned))} "
        f"with the input frame at {gib(min(x.idle for x in pinned + unpinned))} before the call."
    )
    rep()
    return results, mem_pin


def bench_synthesize(client, rep, args, gdf):
    P = args.partition
    m = len(gdf)
    sizes = sorted({m, args.synth})
    rep(f"## synthesize: `synthesize({SYNTH_EPS}, bounds=<public area>)`")
    rep()
    rep(f"Reduced by `map_partitions(len).sum()` (the one output partition); load average {loadavg()}.")
    rep()
    mem, runs = [], {(k, n): [] for k in ("gen", "synth") for n in sizes}
    for r in range(args.repeats):
        mem.append(local_run(lambda: gdf.priv.synthesize(SYNTH_EPS, bounds=AREA), pinned=True))
        for n in sizes:
            ddf = lazy_points(n, P)
            runs["gen", n].append(dask_run(client, lambda: ddf.map_partitions(len).sum()))
            runs["synth", n].append(
                dask_run(client, lambda: ddf.priv.synthesize(SYNTH_EPS, bounds=AREA).map_partitions(len).sum())
            )
        print(
            f"  repeat {r + 1}: in memory {mem[-1].wall:.2f} s; "
            + "; ".join(
                f"N={n:,}: gen {runs['gen', n][-1].wall:.1f} s, gen+synth {runs['synth', n][-1].wall:.1f} s"
                for n in sizes
            ),
            flush=True,
        )
    rows = []
    for n in sizes:
        g, s = runs["gen", n], runs["synth", n]
        reads = s[-1].generated / len(specs(n, P))
        rows.append(
            [
                f"dask, N = {n:,}",
                f"{med(g):.1f}",
                f"{med(s):.1f}",
                f"{med_diff(s, g):.1f}",
                fmt_rate(n / med_diff(s, g)),
                fmt_rate(n / med(s)),
                f"{reads:.0f}",
                f"{med(s, 'gc'):.1f}",
                gib(max(x.peak for x in s)),
            ]
        )
    rows.append(
        [
            f"in memory, M = {m:,}, pinned",
            "",
            "",
            f"{med(mem):.2f}",
            fmt_rate(m / med(mem)),
            "",
            "",
            f"{med(mem, 'gc'):.1f}",
            gib(max(x.peak for x in mem)),
        ]
    )
    rep.table(
        [
            "run",
            "generation only (s)",
            "generation + synthesize (s)",
            "synthesize - generation (s)",
            "throughput (minus one generation)",
            "end to end",
            "reads per partition",
            "cyclic GC (s)",
            "peak RSS (max worker / process)",
        ],
        rows,
    )
    s_m = med_diff(runs["synth", m], runs["gen", m])
    rep(
        f"* at the same N = {m:,}: dask (2 workers) {s_m:.2f} s vs in memory {med(mem):.2f} s "
        f"({med(mem) / s_m:.2f}x speed-up; per core {med(mem) / (2 * s_m):.2f})"
    )
    rep()


def bench_traces(client, rep, args):
    L, Tm, T = args.trace_length, args.traces_inmem, args.traces
    per_part = max(1, args.partition // L)
    from geopriv.distributed.traces import BUCKETS

    rep("## sanitize_traces: `sanitize_traces(traj_id='traj', time='t', level=ln 10, radius=100, rate=0.2)`")
    rep()
    rep(
        f"Traces of {L} fixes a minute apart, {per_part:,} traces per input partition; the release shuffles them into "
        f"{BUCKETS:,} public buckets and releases each bucket with the in-memory function. Dask at {Tm:,} and "
        f"{T:,} traces (generation alone timed beside), in memory at {Tm:,} traces pinned to one CPU; "
        f"load average {loadavg()}."
    )
    rep()
    local = pd.concat([make_traces(s, L) for s in specs(Tm, per_part)])
    kw = dict(traj_id="traj", time="t", bounds=AREA, **TRACES)
    sizes = sorted({Tm, T})
    mem = []
    runs = {(k, n): [] for k in ("gen", "san") for n in sizes}
    skipped = set()
    for r in range(args.repeats):
        mem.append(local_run(lambda: local.priv.sanitize_traces(**kw), pinned=True))
        for n in sizes:
            if n in skipped:
                continue
            ddf = lazy_traces(n, per_part, L)
            runs["gen", n].append(dask_run(client, lambda: ddf.map_partitions(len).sum()))
            runs["san", n].append(dask_run(client, lambda: ddf.priv.sanitize_traces(**kw).map_partitions(len).sum()))
            assert runs["san", n][-1].value == n * L
            if runs["san", n][-1].wall > args.traces_budget:
                skipped.add(n)  # too slow to repeat within the time budget
        print(
            f"  repeat {r + 1}: in memory {mem[-1].wall:.2f} s; "
            + "; ".join(
                f"{n:,} traces: gen {runs['gen', n][-1].wall:.1f} s, gen+sanitize {runs['san', n][-1].wall:.1f} s"
                for n in sizes
            ),
            flush=True,
        )
    rows = []
    release = {}
    for n in sizes:
        g, sn = runs["gen", n], runs["san", n]
        release[n] = med_diff(sn, g)
        cpu = med_diff(sn, g, "cpu")
        rows.append(
            [
                f"dask, {n:,} traces ({n * L:,} points; {len(specs(n, per_part))} partitions)",
                f"{med(g):.1f}",
                f"{med(sn):.1f}",
                f"{release[n]:.1f}",
                fmt_rate(n * L / release[n]),
                fmt_rate(n * L / release[n] / 2),
                f"{cpu:.1f}",
                f"{med(sn, 'gc'):.1f}",
                gib(max(x.peak for x in sn)),
                str(len(sn)),
            ]
        )
    rows.append(
        [
            f"in memory, {Tm:,} traces, pinned",
            "",
            "",
            f"{med(mem):.2f}",
            fmt_rate(Tm * L / med(mem)),
            fmt_rate(Tm * L / med(mem)),
            f"{med(mem, 'cpu'):.1f}",
            f"{med(mem, 'gc'):.1f}",
            gib(max(x.peak for x in mem)),
            str(len(mem)),
        ]
    )
    rep.table(
        [
            "run",
            "generation only (s)",
            "generation + sanitize (s)",
            "sanitize (s)",
            "points/s",
            "per core",
            "sanitize CPU (s)",
            "cyclic GC (s)",
            "peak RSS (max worker / process)",
            "runs",
        ],
        rows,
    )
    big = max(sizes)
    per_core = big * L / release[big] / 2
    rep(f"* in memory per core / dask per core at {big:,} traces: {(Tm * L / med(mem)) / per_core:.1f}x")
    if len(sizes) == 2:
        slope = (release[T] - release[Tm]) / (T - Tm)
        fixed = release[Tm] - slope * Tm
        rep(
            f"* linear fit of the dask release time: about {fixed:.1f} s fixed (independent of the number of traces: "
            f"{BUCKETS:,} per-bucket calls of the in-memory function, shuffle) + {slope * 1e6:.1f} s per million traces "
            f"on 2 workers; 1 M traces: {fixed + slope * 1e6:.0f} s"
        )
    rep()


def bench_profile(rep, args):
    """Where one partition's time goes: release_partition vs the in-memory release of the same rows."""
    from geopriv.distributed.perturb import release_partition
    from geopriv.perturb import mechanism_for
    from geopriv.provenance import make_record
    from geopriv.release import plan_release

    part = make_points((3, 3 * args.partition, 4 * args.partition))
    plan = plan_release(part.crs, mechanism_for(None, PERTURB["level"], PERTURB["radius"], None, None))
    record = make_record(plan.fields(), seeded=False, n=None)
    release_partition(part, plan, 1, record)  # warm-up
    part.priv.perturb(**PERTURB)
    rep(f"## profile of one partition ({len(part):,} rows), this process")
    rep()

    def cpu_of(fn, collect=True):
        gc.collect()
        was = gc.isenabled()
        if not collect:
            gc.disable()
        t = time.process_time()
        try:
            fn()
        finally:
            if was:
                gc.enable()
        return time.process_time() - t

    cases = {
        "generate the partition (`points_from_xy`)": lambda: make_points((3, 3 * args.partition, 4 * args.partition)),
        "`release_partition` (dask path, one partition)": lambda: release_partition(part, plan, 1, record),
        "in-memory `gdf.priv.perturb` of the same rows": lambda: part.priv.perturb(**PERTURB),
    }
    times = {(k, c): [] for k in cases for c in (True, False)}
    for _ in range(5):  # alternating, CPU seconds of this process
        for k, fn in cases.items():
            for collect in (True, False):
                times[k, collect].append(cpu_of(fn, collect))
    prof = cProfile.Profile()
    prof.enable()
    release_partition(part, plan, 1, record)
    prof.disable()
    rep(
        "CPU seconds of this process, median of 5 alternating runs, with the cyclic garbage collector on (default) "
        "and off (`gc.disable()` around the call):"
    )
    rep()
    rep.table(
        ["step", "GC on (s)", "GC off (s)"],
        [[k, f"{statistics.median(times[k, True]):.2f}", f"{statistics.median(times[k, False]):.2f}"] for k in cases],
    )
    k_rel, k_mem = list(cases)[1:]
    rep(
        f"* `release_partition` / in-memory perturb: {statistics.median(times[k_rel, True]) / statistics.median(times[k_mem, True]):.2f}x "
        f"(GC off: {statistics.median(times[k_rel, False]) / statistics.median(times[k_mem, False]):.2f}x)"
    )
    rep()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(8)
    rep("```")
    for line in out.getvalue().splitlines():
        if line.strip() and ("{" in line or ".py" in line or "tottime" in line):
            rep(line.replace(sys.prefix, "<venv>").replace(os.getcwd() + "/", ""))
    rep("```")
    rep()


def machine(rep, client):
    import dask
    import dask_geopandas
    import distributed
    import pyproj
    import shapely

    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    rep(
        f"* machine: {os.cpu_count()} cores ({cpu}), {psutil.virtual_memory().total / 2**30:.1f} GiB RAM, "
        f"Linux {platform.release()}; shared with other jobs (load average at start {loadavg()})"
    )
    rep(
        f"* Python {platform.python_version()}, geopriv {geopriv.__version__}, numpy {np.__version__}, "
        f"pandas {pd.__version__}, geopandas {gpd.__version__}, shapely {shapely.__version__}, pyproj {pyproj.__version__}, "
        f"dask {dask.__version__}, distributed {distributed.__version__}, dask-geopandas {dask_geopandas.__version__}"
    )
    info = client.scheduler_info()["workers"]
    w = next(iter(info.values()))
    rep(
        f"* cluster: `LocalCluster(n_workers={len(info)}, threads_per_worker={w['nthreads']})`, processes, "
        f"memory limit {gib(w['memory_limit'])} per worker"
    )
    rep()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=50_000_000, help="points for the dask perturb (default 50 M)")
    ap.add_argument("--n-small", type=int, default=10_000_000, help="a smaller N for the memory comparison (0: none)")
    ap.add_argument("--partition", type=int, default=1 << 20, help="rows per partition")
    ap.add_argument("--inmem", type=int, default=5_000_000, help="points for the in-memory baseline")
    ap.add_argument("--synth", type=int, default=10_000_000, help="points for the dask synthesize (0: skip)")
    ap.add_argument("--traces", type=int, default=1_000_000, help="traces for the dask sanitize_traces (0: skip)")
    ap.add_argument("--traces-inmem", type=int, default=100_000)
    ap.add_argument("--trace-length", type=int, default=5)
    ap.add_argument(
        "--traces-budget", type=float, default=150.0, help="seconds: a dask trace run longer than this is not repeated"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--repeats-big", type=int, default=2, help="repeats of the largest perturb N")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="8GiB")
    ap.add_argument(
        "--sections",
        default="perturb,synthesize,traces,profile",
        help="comma-separated subset of perturb,synthesize,traces,profile",
    )
    ap.add_argument("--out", default=None, help="markdown file for the results")
    args = ap.parse_args()
    sections = set(args.sections.split(","))

    import dask  # noqa: F401
    import dask_geopandas  # noqa: F401  (registers ddf.priv)
    from distributed import Client, LocalCluster

    rep = Report(args.out)
    t_start = time.perf_counter()
    rep("# geopriv on dask-geopandas: scale benchmark")
    rep()
    rep(f"`python bench/dask_scale.py {' '.join(sys.argv[1:])}`".replace("  ", " "))
    rep()
    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            memory_limit=args.memory_limit,
        ) as cluster,
        Client(cluster) as client,
    ):
        machine(rep, client)
        # Workaround (see bench/results/dask.md): dask's p2p shuffle converts GeoDataFrames to arrow with a dispatch
        # that dask_geopandas registers; a worker that never imported dask_geopandas fails the transfer
        # ("P2P ... failed during transfer phase"; cause: ArrowTypeError on the geometry column).
        client.run(importlib.import_module, "dask_geopandas")
        client.run(install_gc_timer)
        install_gc_timer()
        # warm-up: imports, PROJ database and the public frame on every worker
        warm = lazy_points(4 * 16_384, 16_384)
        warm.priv.perturb(**PERTURB).map_partitions(len).sum().compute()
        warm.priv.synthesize(SYNTH_EPS, bounds=AREA).map_partitions(len).sum().compute()
        gdf = in_memory_points(args.inmem, args.partition) if sections & {"perturb", "synthesize"} else None
        if gdf is not None:
            gdf.priv.perturb(**PERTURB)  # warm-up in this process
        check = lazy_points(2 * args.partition, args.partition)
        moved = check.priv.perturb(**PERTURB, rng=1).partitions[1].compute()
        d = moved.geometry.distance(check.partitions[1].compute().geometry)
        rep(
            f"Sanity: one released partition moved its points by {d.mean():.0f} m on average "
            f"(planar Laplace, expected 2 / epsilon = {2 * PERTURB['radius'] / PERTURB['level']:.0f} m)."
        )
        rep()
        if "perturb" in sections:
            bench_perturb(client, rep, args, gdf)
        if args.synth and "synthesize" in sections:
            bench_synthesize(client, rep, args, gdf)
        del gdf
        gc.collect()
        if args.traces and "traces" in sections:
            if importlib.util.find_spec("geopriv.distributed.traces") is None:
                rep("## sanitize_traces")
                rep()
                rep("Skipped: `geopriv.distributed.traces` does not exist yet in this working tree.")
                rep()
            else:
                try:
                    bench_traces(client, rep, args)
                except Exception as exc:  # report, keep the other results
                    rep(f"## sanitize_traces\n\nFailed: {type(exc).__name__}: {exc}\n")
                    for worker, logs in client.get_worker_logs(n=100).items():
                        for level, msg in logs:
                            if level in ("ERROR", "CRITICAL") or "Traceback" in msg:
                                print(f"[{worker} {level}] {msg[:4000]}", file=sys.stderr)
    if "profile" in sections:
        bench_profile(rep, args)
    rep(f"Total run time {time.perf_counter() - t_start:.0f} s; load average at the end {loadavg()}.")
    if args.out:
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
