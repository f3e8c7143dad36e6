"""Benchmark: eikonal mechanism on the 200 x 200 Tokyo raster with the paper's scaling.

Koufogiannis & Pappas (2016), section IV: a 200 x 200 grid over [0, 100]^2, epsilon in
[0.4, 2.0] per unit from population density (epsilon = 0.4 + slope * density), prior =
population, planar Laplace at the minimum epsilon for comparison (6 / 0.4^2 = 37.5).

We reproduce that set-up with the shipped Tokyo raster (geopriv/data/tokyo_density_200.tif):
the 200 x 200 array is put on 0.5 x 0.5 cells of a local metric CRS (1 unit = 1 m), so
epsilon per unit is epsilon per metre.  No-data cells (Tokyo Bay, outside the area) have zero
population: epsilon = 0.4 there, as the paper's formula says (``--nodata nearest`` gives them
the nearest data cell's epsilon instead: no-data as "nobody can be here").

Reported: build time, peak memory (this process plus its worker processes, sampled every
0.2 s), realised/target Lipschitz ratio, expected MSE vs planar Laplace, sampling throughput.
Targets (issue 3): build <= 120 s, peak memory <= 8 GB, MSE <= 0.2 x Laplace, sampling
>= 1e6 points/s.  Writes docs/img/eikonal.png.

Run:  python bench/eikonal_build.py [--jobs 2] [--save path.npz] [--no-figure] [--refine]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import rasterio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geopriv import EikonalMechanism, PrivacyMap  # noqa: E402
from geopriv.crs import local_aeqd  # noqa: E402

RASTER = ROOT / "geopriv" / "data" / "tokyo_density_200.tif"


class PeakRSS:
    """Peak resident memory of this process plus all its descendants (Linux /proc).

    Counted as the proportional set size (Pss, /proc/PID/smaps_rollup) where the kernel has it:
    worker processes forked from a parent that holds gigabytes share those pages copy-on-write,
    and summing their RSS would count the parent's memory once per worker (at 1000 x 1000 with
    kernels on demand: 23 GB "RSS" for 10 GB really in use).  Falls back to RSS (statm).
    """

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree_rss(self) -> int:
        me = os.getpid()
        children = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(pid))
            except (OSError, ValueError, IndexError):
                continue
        total, todo = 0, [me]
        while todo:
            pid = todo.pop()
            total += _pss(pid)
            todo.extend(children.get(pid, []))
        return total

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._tree_rss())
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._tree_rss())


def _pss(pid: int) -> int:
    """Proportional set size of a process in bytes (RSS where smaps_rollup is unavailable; 0 if gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def paper_scaled_map(nodata_epsilon=None) -> PrivacyMap:
    with rasterio.open(RASTER) as ds:
        dens = ds.read(1).astype(float)
        nodata = ds.nodata
    dens[dens == nodata] = np.nan
    n = dens.shape[0]
    h = 100.0 / n
    transform = rasterio.Affine(h, 0.0, -50.0, 0.0, -h, 50.0)  # [0, 100]^2 centred on the AEQD origin
    return PrivacyMap.from_population(
        dens, epsilon_range=(0.4, 2.0), transform=transform, crs=local_aeqd(0.0, 0.0), nodata_epsilon=nodata_epsilon
    )


def local_laplace_proxy(pm: PrivacyMap) -> float:
    """Prior-weighted 6 / eps(u)^2: each user given planar Laplace at their own epsilon (not private)."""
    p = pm.prior()
    return float((p * 6.0 / pm.epsilon**2).sum())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the kernels (default 2)")
    ap.add_argument("--save", default=None, help="write the built mechanism there")
    ap.add_argument("--no-figure", action="store_true")
    ap.add_argument("--points", type=int, default=1_000_000, help="points for the sampling throughput")
    ap.add_argument("--refine", action="store_true", help="also rebuild with mech.suggest_margin() (a second build)")
    ap.add_argument(
        "--nodata",
        choices=["floor", "nearest"],
        default="floor",
        help="epsilon of no-data cells (Tokyo Bay, outside the area): floor = 0.4 (default) or nearest data cell's",
    )
    args = ap.parse_args(argv)

    pm = paper_scaled_map(None if args.nodata == "floor" else args.nodata)
    print(f"privacy map: {pm}")
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        mech = EikonalMechanism.build(pm, n_jobs=args.jobs)
        build_s = time.perf_counter() - t0
    rep = mech.report
    cmp = mech.compare_laplace()
    raw = mech.expected_mse(jitter=False)
    t0 = time.perf_counter()
    remapped = mech.with_remap("population")
    remap_s = time.perf_counter() - t0
    cmp_remap = remapped.compare_laplace()
    refined = None
    if args.refine:
        t0 = time.perf_counter()
        refined = EikonalMechanism.build(pm, n_jobs=args.jobs, margin=mech.suggest_margin())
        refine_s = time.perf_counter() - t0
        ref_cmp = refined.compare_laplace()
        ref_remap = refined.with_remap("population").compare_laplace()

    # sampling throughput (tables are built on first use; timed separately)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    mech.sampling_tables  # noqa: B018 - build the sampling tables once
    tables_s = time.perf_counter() - t0
    xmin, ymin, xmax, ymax = pm.bounds
    xy = np.column_stack([rng.uniform(xmin, xmax, args.points), rng.uniform(ymin, ymax, args.points)])
    t0 = time.perf_counter()
    mech.sample(xy, rng)
    sample_s = time.perf_counter() - t0
    rate = args.points / sample_s

    tim = mech.params["timings"]
    rows = [
        (
            "grid (inputs) / outputs / kernel entries",
            f"{pm.shape[0]} x {pm.shape[1]} / {len(mech.weights)} / {mech.params['nnz']:,}",
            "",
        ),
        ("build time", f"{build_s:.1f} s", "<= 120 s"),
        (
            "  kernels / weights / verify",
            f"{tim['kernels_s']:.1f} / {tim['weights_s']:.1f} / {tim.get('verify_s', 0):.1f} s",
            "",
        ),
        ("peak memory (process tree)", f"{mem.peak / 2**30:.2f} GiB", "<= 8 GB"),
        ("realised / target Lipschitz (max)", f"{rep.max_ratio:.6f}", "<= 1"),
        (
            "normaliser share of the loss",
            f"{rep.normaliser_ratio:.4f} (budget used {mech.params['normaliser_budget_used']:.2f})",
            f"< margin {mech.params['margin']}",
        ),
        (
            "expected MSE eikonal (prior = population)",
            f"{cmp['eikonal_mse_m2']:.2f} (on the lattice: {raw:.2f})",
            "paper: 5.78",
        ),
        ("expected MSE planar Laplace at eps_min", f"{cmp['laplace_mse_m2']:.2f}", "paper: 37.5"),
        ("MSE ratio eikonal / Laplace", f"{cmp['ratio']:.3f}", "<= 0.2 (paper 0.154)"),
        ("MSE ratio with posterior-mean remap", f"{cmp_remap['ratio']:.3f} ({remap_s:.1f} s)", "post-processing"),
        (
            "  reference: local Laplace proxy / Laplace",
            f"{local_laplace_proxy(pm) / cmp['laplace_mse_m2']:.3f}",
            "not private",
        ),
        ("sampling tables (once)", f"{tables_s:.1f} s", ""),
        ("sampling throughput", f"{rate / 1e6:.2f} M points/s", ">= 1 M/s"),
    ]
    if refined is not None:
        rows += [
            (
                "refined build (margin=suggest_margin())",
                f"{refine_s:.1f} s, ratio {refined.report.max_ratio:.4f}",
                "second build",
            ),
            ("  MSE ratio refined / + remap", f"{ref_cmp['ratio']:.3f} / {ref_remap['ratio']:.3f}", ""),
        ]
    w = max(len(r[0]) for r in rows)
    print()
    print(f"{'quantity':<{w}}  {'measured':<34}  target")
    print("-" * (w + 50))
    for name, val, target in rows:
        print(f"{name:<{w}}  {val:<34}  {target}")
    print()
    print(rep)
    if args.save:
        mech.save(args.save, overwrite=True)
        print(f"saved to {args.save} ({os.path.getsize(args.save) / 2**20:.0f} MiB)")
    if not args.no_figure and args.nodata == "floor" and not args.refine:
        from geopriv.plot import plot_mechanism

        dens = np.where(pm.nodata_mask, 0, pm.population)
        order = np.argsort(dens.ravel())
        picks = [order[-1], order[int(0.75 * len(order))], order[int(0.45 * len(order))]]  # dense, medium, sparse
        pts = [(pm.node_x[k % pm.shape[1]], pm.node_y[k // pm.shape[1]]) for k in picks]
        out = ROOT / "docs" / "img" / "eikonal.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        plot_mechanism(
            mech,
            pts,
            path=out,
            per="m",
            title="Tokyo raster, paper scaling (units of [0, 100]^2): privacy map and P(Q(u) = .) for a dense, a medium and a sparse location",
        )
        print(f"figure: {out.relative_to(ROOT)}")
        out2 = ROOT / "docs" / "img" / "eikonal_error.png"
        error_by_density(pm, {"eikonal": mech, "eikonal + posterior-mean release": remapped}, out2)
        print(f"figure: {out2.relative_to(ROOT)}")
    return 0


def error_by_density(pm: PrivacyMap, mechs: dict, path) -> None:
    """Root mean squared error against population density (population-weighted bins)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dens = np.where(pm.nodata_mask, 0.0, pm.population)
    has = dens > 0
    # 12 bins holding equal shares of the population
    order = np.argsort(dens[has])
    d = dens[has][order]
    cum = np.cumsum(d) / d.sum()
    edges = np.concatenate([[d[0]], d[np.searchsorted(cum, np.linspace(0, 1, 13)[1:-1])], [d[-1] * 1.0001]])
    centres, curves = [], {name: [] for name in mechs}
    proxy = []
    node_mse = {name: m.node_mse() for name, m in mechs.items()}
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = has & (dens >= lo) & (dens < hi)
        if not sel.any():
            continue
        wts = dens[sel] / dens[sel].sum()
        centres.append(float((wts * dens[sel]).sum()))
        proxy.append(math.sqrt(float((wts * 6.0 / pm.epsilon[sel] ** 2).sum())))
        for name in mechs:
            curves[name].append(math.sqrt(float((wts * node_mse[name][sel]).sum())))
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.axhline(math.sqrt(6.0) / pm.epsilon_min, color="0.4", ls="--", label="planar Laplace at the smallest epsilon")
    ax.plot(centres, proxy, "k:", marker=".", label="Laplace at each cell's own epsilon (not private; reference)")
    for (name, ys), style in zip(curves.items(), ["C0-o", "C3-s"]):
        ax.plot(centres, ys, style, label=name)
    ax.set_xlabel("population density of the true location (raster units; bins of equal population)")
    ax.set_ylabel("root mean squared error (units of [0, 100]^2)")
    ax.set_ylim(bottom=0)
    ax.set_title("Tokyo, paper scaling: error by density of the true location")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
