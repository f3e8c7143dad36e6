"""Benchmark: geopriv.synthesize on 1 million points, against its floors, side by side.

Data: 1M clustered points (four Gaussian clusters and a crescent, as in
bench/synthesize_eval.py) in a 10 km x 10 km public box in UTM 33N (EPSG:32633), as a
GeoDataFrame.  Timed in one process, alternating, median of ``--repeats`` runs after a warm-up
(the machine is shared and noisy: compare the ratios, not the seconds):

* ``points_from_xy``: ``geopandas.points_from_xy`` of the 1M coordinates (building the output
  geometries at all);
* ``perturb``: ``gdf.priv.perturb(1 / D, bounds=B)`` on the same points (per-point planar
  Laplace through the release path, D the box's diameter in metres);
* ``synthesize srw`` / ``synthesize pmm``: ``gdf.priv.synthesize(1.0, bounds=B, method=...)``.
  Target: <= 5 s for srw.

Then a breakdown of one synthesize call: Hilbert keys, the noisy tree (``leaf_counts``), the
placement in leaves (``leaf_boxes``), the point geometries (``shapely.points``) and the rest of
the release path (validation, public frame and lattice, snapping, provenance).

    python bench/synthesize_speed.py [--n 1000000] [--repeats 3] [--no-write]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import geopandas as gpd
import numpy as np
import shapely

from geopriv.mechanisms.private_measure import PrivateMeasure, leaf_boxes, leaf_keys

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthesize_eval import BOX, CRS, clustered, diameter_m, write_section


def timed(f):
    gc.collect()
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    n, eps = args.n, args.epsilon
    xy = clustered(n, 7)
    gdf = gpd.GeoDataFrame({"id": np.arange(n)}, geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=CRS)
    D = diameter_m(CRS, BOX)

    cases = {
        "points_from_xy": lambda: gpd.points_from_xy(xy[:, 0], xy[:, 1], crs=CRS),
        "perturb (eps/D per m)": lambda: gdf.priv.perturb(eps / D, bounds=BOX),
        "synthesize srw": lambda: gdf.priv.synthesize(eps, bounds=BOX),
        "synthesize pmm": lambda: gdf.priv.synthesize(eps, bounds=BOX, method="pmm"),
    }
    for f in cases.values():  # warm-up
        f()
    times = {k: [] for k in cases}
    for _ in range(args.repeats):
        for k, f in cases.items():
            times[k].append(timed(f))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = times["points_from_xy"]
    lines = [
        (
            f"n = {n:,} clustered points in a 10 km box, UTM 33N; epsilon = {eps:g}; median of {args.repeats} "
            "alternating runs after a warm-up."
        ),
        "",
        "| case | median (s) | runs (s) | / points_from_xy (per-run ratios) | / perturb |",
        "|---|---|---|---|---|",
    ]
    for k, v in times.items():
        per = ", ".join(f"{a / b:.2f}" for a, b in zip(v, base))
        lines.append(
            f"| {k} | {med[k]:.2f} | {', '.join(f'{t:.2f}' for t in v)} | {med[k] / med['points_from_xy']:.2f} "
            f"({per}) | {med[k] / med['perturb (eps/D per m)']:.2f} |"
        )
    srw = gdf.priv.synthesize(eps, bounds=BOX, rng=1)
    depth = srw.attrs["geopriv"]["depth"]
    lines.append("")
    lines.append(
        f"srw auto depth at n = {n:,}: {depth} (Hilbert order {(depth + 1) // 2}); "
        f"target <= 5 s: {'met' if med['synthesize srw'] <= 5 else 'NOT met'} ({med['synthesize srw']:.2f} s)."
    )

    # breakdown of one srw call, stage by stage (same work as the release path does)
    mech = PrivateMeasure(eps)
    rng = np.random.default_rng(1)
    x0, y0, x1, y1 = BOX
    stages = {
        k: []
        for k in (
            "Hilbert keys (leaf_keys)",
            "noisy tree (leaf_counts)",
            "placement (leaf_boxes)",
            "geometries (shapely.points)",
            "whole synthesize call",
        )
    }
    for _ in range(args.repeats):
        t = time.perf_counter()
        unit = np.column_stack([(xy[:, 0] - x0) / (x1 - x0), (xy[:, 1] - y0) / (y1 - y0)])
        keys = leaf_keys(unit, depth)
        stages["Hilbert keys (leaf_keys)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        nodes, counts = mech.leaf_counts(keys, rng, depth)
        stages["noisy tree (leaf_counts)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        pts = leaf_boxes(np.repeat(nodes, counts), depth, 2, rng)
        stages["placement (leaf_boxes)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        shapely.points(pts)
        stages["geometries (shapely.points)"].append(time.perf_counter() - t)
        stages["whole synthesize call"].append(timed(lambda: gdf.priv.synthesize(eps, bounds=BOX)))
    smed = {k: statistics.median(v) for k, v in stages.items()}
    parts = sum(v for k, v in smed.items() if k != "whole synthesize call")
    smed["rest of the release path (validation, frame, lattice snap, provenance)"] = (
        smed["whole synthesize call"] - parts
    )
    lines += ["", "Breakdown of one srw call (medians, s):", "", "| stage | s | share of the call |", "|---|---|---|"]
    for k, v in smed.items():
        lines.append(f"| {k} | {v:.3f} | {v / smed['whole synthesize call']:.0%} |")
    command = "`" + " ".join(["python bench/synthesize_speed.py", *(sys.argv[1:] if argv is None else argv)]) + "`"
    text = f"### Speed: {n:,} points\n\n" + "\n".join(lines) + "\n\nCommand: " + command
    print(text)
    if not args.no_write:
        write_section("speed", text)


if __name__ == "__main__":
    sys.exit(main())
