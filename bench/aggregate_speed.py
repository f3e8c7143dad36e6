"""Speed of geopriv.aggregate against the floor (numpy / h3 alone), with where geopriv's time goes.

Run (one benchmark at a time: the 10 M point GeoDataFrame takes about 3 GB)::

    nice .venv/latest/bin/python bench/aggregate_speed.py [--n-grid 10000000] [--n-h3 1000000] [--repeat 3]

Writes ``bench/results/aggregate_speed.md`` and prints it.

Cases
-----
* **Square grid, 100 m**: ``--n-grid`` synthetic points (half uniform, half in 5 Gaussian
  clusters, fixed seed) in EPSG:32650 over a declared 20 km x 20 km area ``GRID_BOUNDS``;
  ``geopriv.aggregate(gdf, 1.0, cells=100, bounds=GRID_BOUNDS, rng=seed)`` against the floor:
  the same cell indices by numpy floor division from the x, y arrays (the grid's origin, step and
  shape read from geopriv's own plan, so both count the very same cells: checked equal) and
  ``np.bincount(minlength=n_cells)``.  A second floor also extracts x, y from the GeoDataFrame
  (``shapely.get_coordinates``), which geopriv has to do too.  Building the GeoDataFrame of
  points from the arrays (``geopandas.points_from_xy``) is the user's cost and timed apart.
* **H3 resolution 9**: ``--n-h3`` points (same law) in EPSG:4326 over a declared
  ~20 km x 20 km box ``H3_BOUNDS``; ``geopriv.aggregate(gdf, 1.0, cells="h3:9",
  bounds=H3_BOUNDS, rng=seed)`` against h3's own indexing: ``h3.latlng_to_cell`` per point (h3-py
  4 has no vectorised point indexing; the int API ``h3.api.basic_int`` and the default str API
  are both timed), then ``np.unique(return_inverse=True)`` and ``np.bincount``.

Each timing is repeated ``--repeat`` times; the median is reported (and the ratio of medians).
Where geopriv's time goes: its functions are wrapped with timers for the timed runs (the
wrappers add microseconds): input checks, planning the cells, locating, bounding and counting,
noise and consistency, building the output GeoDataFrame.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import shapely

import geopriv

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "aggregate_speed.md"
SEED = 20261127
#: declared public area of the grid case: 20 km x 20 km in UTM 50N (Beijing), never from the data
GRID_CRS = "EPSG:32650"
GRID_BOUNDS = (440_000.0, 4_410_000.0, 460_000.0, 4_430_000.0)
#: declared public area of the H3 case, longitude/latitude: 0.24 x 0.18 degrees at 39.9 N, ~20.5 x 20 km
H3_BOUNDS = (116.28, 39.81, 116.52, 39.99)

TIMES: dict = collections.defaultdict(float)


# ----------------------------------------------------------------------------- data
def synthetic(n: int, bounds, rng, sigma_frac=(0.01, 0.02, 0.04, 0.06, 0.08)):
    """``n`` points strictly inside ``bounds``: half uniform, half in Gaussian clusters (rejection)."""
    xmin, ymin, xmax, ymax = bounds
    w, h = xmax - xmin, ymax - ymin
    n_uni = n // 2
    x = [rng.uniform(xmin, xmax, n_uni)]
    y = [rng.uniform(ymin, ymax, n_uni)]
    centres = np.column_stack(
        [xmin + w * rng.uniform(0.2, 0.8, len(sigma_frac)), ymin + h * rng.uniform(0.2, 0.8, len(sigma_frac))]
    )
    weights = np.array([0.3, 0.25, 0.2, 0.15, 0.1])
    need = n - n_uni
    while need > 0:
        k = rng.choice(len(sigma_frac), size=need, p=weights)
        s = np.asarray(sigma_frac)[k] * w
        cx = centres[k, 0] + rng.normal(0, 1, need) * s
        cy = centres[k, 1] + rng.normal(0, 1, need) * s
        ok = (cx > xmin) & (cx < xmax) & (cy > ymin) & (cy < ymax)
        x.append(cx[ok])
        y.append(cy[ok])
        need -= int(ok.sum())
    x, y = np.concatenate(x)[:n], np.concatenate(y)[:n]
    order = rng.permutation(n)  # no spatial order in the rows
    return np.ascontiguousarray(x[order]), np.ascontiguousarray(y[order])


# ----------------------------------------------------------------------------- timers
def _timed(f, label):
    @functools.wraps(f)
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            TIMES[label] += time.perf_counter() - t

    return w


def wrap(owner, name, label) -> bool:
    """Time every call of ``owner.name`` (a module function, a method or a classmethod) under ``label``."""
    raw = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
    if raw is None:
        return False
    if isinstance(raw, classmethod):
        setattr(owner, name, classmethod(_timed(raw.__func__, label)))
    elif isinstance(raw, staticmethod):
        setattr(owner, name, staticmethod(_timed(raw.__func__, label)))
    else:
        setattr(owner, name, _timed(raw, label))
    return True


#: (label, owner module or class path, attribute, level: 0 top-level step of _release, 1 inside one)
PIECES = [
    ("input checks (check_release_input)", "geopriv.aggregate", "check_release_input", 0),
    ("  extract x, y and check geometry types (point_xy)", "geopriv.release", "point_xy", 1),
    ("  coordinate range checks (check_coordinates)", "geopriv.release", "check_coordinates", 1),
    ("plan: cells, hierarchy, expected errors (plan_counts)", "geopriv.aggregate", "plan_counts", 0),
    ("  build the cells (GridCells/H3Cells.build)", "geopriv.cells:GridCells", "build", 1),
    ("  build the cells (GridCells/H3Cells.build) ", "geopriv.cells:H3Cells", "build", 1),
    ("  tree (CellTree.from_keys)", "geopriv.mechanisms.hierarchy:CellTree", "from_keys", 1),
    ("  expected errors (leaf_error)", "geopriv.mechanisms.hierarchy:HierarchicalCounts", "leaf_error", 1),
    ("area not from the data (check_area_public)", "geopriv.aggregate", "check_area_public", 0),
    ("locate rows in cells (locate_rows)", "geopriv.aggregate", "locate_rows", 0),
    ("person codes (person_codes)", "geopriv.aggregate", "person_codes", 0),
    ("bound contributions (bound_contributions)", "geopriv.aggregate", "bound_contributions", 0),
    ("exact counts (count_rows)", "geopriv.aggregate", "count_rows", 0),
    ("noise + consistency + integers (release_counts)", "geopriv.aggregate", "release_counts", 0),
    ("  noise (HierarchicalCounts.noisy)", "geopriv.mechanisms.hierarchy:HierarchicalCounts", "noisy", 1),
    ("  consistency + integers (postprocess)", "geopriv.mechanisms.hierarchy:HierarchicalCounts", "postprocess", 1),
    ("provenance record (make_record)", "geopriv.aggregate", "make_record", 0),
    ("swamp warning (warn_if_swamped)", "geopriv.aggregate", "warn_if_swamped", 0),
    ("output GeoDataFrame (cells_frame)", "geopriv.aggregate", "cells_frame", 0),
    ("  cell polygons (GridCells/H3Cells.geometry)", "geopriv.cells:GridCells", "geometry", 1),
    ("  cell polygons (GridCells/H3Cells.geometry) ", "geopriv.cells:H3Cells", "geometry", 1),
]


def install_timers() -> list:
    import importlib

    installed = []
    for label, where, attr, level in PIECES:
        mod, _, cls = where.partition(":")
        owner = sys.modules.get(mod) or importlib.import_module(mod)
        if cls:
            owner = getattr(owner, cls)
        if wrap(owner, attr, label.rstrip()):
            installed.append((label.rstrip(), level))
    seen, out = set(), []
    for label, level in installed:  # GridCells/H3Cells share a label
        if label not in seen:
            seen.add(label)
            out.append((label, level))
    return out


# ----------------------------------------------------------------------------- timing
def repeat(fn, n):
    """(median seconds, every run's seconds, last result, per-piece medians) of ``fn()`` run ``n`` times."""
    runs, pieces, out = [], collections.defaultdict(list), None
    for _ in range(n):
        out = None
        gc.collect()
        TIMES.clear()
        t = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t)
        for k, v in TIMES.items():
            pieces[k].append(v)
    return statistics.median(runs), runs, out, {k: statistics.median(v) for k, v in pieces.items()}


def fmt_runs(runs):
    return " / ".join(f"{r:.2f}" for r in runs)


def git_state() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "geopriv"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return f"commit {head}" + (", with uncommitted changes in geopriv/" if dirty else "")


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def pieces_table(total, pieces, labels) -> list:
    rows = ["| piece of geopriv.aggregate | median s | share of the call |", "|---|---:|---:|"]
    top = 0.0
    for label, level in labels:
        v = pieces.get(label)
        if v is None:
            continue
        if level == 0:
            top += v
        rows.append(
            f"| {label if level == 0 else '&nbsp;&nbsp;' + label.strip()} | {v:.3f} | {100 * v / total:.0f} % |"
        )
    rows.append(
        f"| the rest (argument checks, RNG, glue) | {max(total - top, 0):.3f} | "
        f"{100 * max(total - top, 0) / total:.0f} % |"
    )
    rows.append(f"| **total** | **{total:.3f}** | 100 % |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-grid", type=int, default=10_000_000)
    ap.add_argument("--n-h3", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    t_start = time.time()
    load_start = os.getloadavg()[0]
    labels = install_timers()
    import h3
    from geopriv.counting import plan_counts

    warnings.simplefilter("ignore")  # LowUtilityWarning / DistortionWarning are not what is timed here
    lines_grid, lines_h3 = [], []

    # ---- square grid ------------------------------------------------------------------------------
    rng = np.random.default_rng(SEED)
    t = time.perf_counter()
    x, y = synthetic(a.n_grid, GRID_BOUNDS, rng)
    t_gen = time.perf_counter() - t
    print(f"grid: {a.n_grid:,} points generated in {t_gen:.1f} s", flush=True)

    t_build, runs_build, gdf, _ = repeat(
        lambda x=x, y=y: gpd.GeoDataFrame(geometry=gpd.points_from_xy(x, y), crs=GRID_CRS), a.repeat
    )
    print(
        f"grid: GeoDataFrame of points {t_build:.2f} s ({fmt_runs(runs_build)}); peak RSS {rss_gb():.1f} GB", flush=True
    )

    plan = plan_counts(gdf.crs, 1.0, cells=100, bounds=GRID_BOUNDS)
    g = plan.cells
    x0, y0, step, nx, ny, n_cells = g.x0, g.y0, g.step, g.nx, g.ny, g.n
    if n_cells != nx * ny:
        raise RuntimeError("the grid case expects every cell of the grid released")

    def floor_xy(xs, ys):
        col = ((xs - x0) // step).astype(np.int64)
        row_s = ((ys - y0) // step).astype(np.int64)
        return np.bincount((ny - 1 - row_s) * nx + col, minlength=n_cells)

    def floor_from_gdf():
        c = shapely.get_coordinates(gdf.geometry.values)
        return floor_xy(c[:, 0], c[:, 1])

    t_floor, runs_floor, counts_floor, _ = repeat(lambda x=x, y=y: floor_xy(x, y), a.repeat)
    t_floor2, runs_floor2, counts_floor2, _ = repeat(floor_from_gdf, a.repeat)
    print(f"grid: floor {t_floor:.3f} s, floor from the GeoDataFrame {t_floor2:.3f} s", flush=True)
    # the floor counts the very cells geopriv counts
    from geopriv.counting import count_rows, locate_rows

    cell = locate_rows(plan, np.column_stack([x, y]), gdf.index)
    if not np.array_equal(count_rows(plan, cell), counts_floor) or not np.array_equal(counts_floor, counts_floor2):
        raise RuntimeError("the floor's counts differ from geopriv's exact counts")
    del cell

    seeds = iter(range(1, 1000))
    t_geo, runs_geo, res, pieces = repeat(
        lambda: geopriv.aggregate(gdf, 1.0, cells=100, bounds=GRID_BOUNDS, rng=next(seeds)), a.repeat
    )
    print(f"grid: geopriv.aggregate {t_geo:.2f} s ({fmt_runs(runs_geo)}); peak RSS {rss_gb():.1f} GB", flush=True)
    if len(res) != n_cells:
        raise RuntimeError("geopriv released another number of cells")
    del res
    ratio, ratio2 = t_geo / t_floor, t_geo / t_floor2
    lines_grid += [
        f"## {a.n_grid:,} points, 100 m square grid",
        "",
        f"Points: {a.n_grid:,} in EPSG:32650 over the declared area {tuple(int(v) for v in GRID_BOUNDS)} "
        f"(20 km x 20 km), half uniform and half in 5 Gaussian clusters, seed {SEED} (generated in {t_gen:.1f} s). "
        f"geopriv's grid: 100 m cells of {step:.3f} UTM units (UTM's scale is within geopriv's 1 % tolerance, so "
        f"its unit is used as it is), {nx} x {ny} = {n_cells:,} "
        "cells, all released. The floor places every point by floor division on that very grid (checked: the same "
        "counts as geopriv's exact counts).",
        "",
        f"| what | median s ({a.repeat} runs) | runs (s) | geopriv / this |",
        "|---|---:|---|---:|",
        f"| user's cost: GeoDataFrame of points (`gpd.points_from_xy`, not geopriv's) | {t_build:.2f} | "
        f"{fmt_runs(runs_build)} | – |",
        f"| floor: numpy floor division + `np.bincount(minlength)` from x, y arrays | {t_floor:.3f} | "
        f"{fmt_runs(runs_floor)} | {ratio:.1f}x |",
        f"| floor incl. extracting x, y from the GeoDataFrame (`shapely.get_coordinates`) | {t_floor2:.3f} | "
        f"{fmt_runs(runs_floor2)} | {ratio2:.1f}x |",
        f"| `geopriv.aggregate(gdf, 1.0, cells=100, bounds=..., rng=seed)` | {t_geo:.2f} | {fmt_runs(runs_geo)} | 1x |",
        "",
        f"Target (within 2x of the floor): **{'met' if ratio <= 2 else 'not met'}** against the numpy floor "
        f"({ratio:.1f}x), **{'met' if ratio2 <= 2 else 'not met'}** against the floor that also reads the "
        f"GeoDataFrame ({ratio2:.1f}x).",
        "",
        *pieces_table(t_geo, pieces, labels),
        "",
        f"Reading: building the {a.n_grid:,} shapely points is the user's cost and takes {t_build / t_geo:.1f}x "
        f"as long as the whole of geopriv.aggregate. Inside geopriv, reading x, y back out of the GeoDataFrame "
        f"(`shapely.get_coordinates`, also in the second floor: {t_floor2 - t_floor:.2f} s there) is the largest "
        f"piece; that alone is {(t_floor2 - t_floor) / t_floor:.1f}x the numpy floor, so no release that takes a "
        "GeoDataFrame can come within 2x of a floor that starts from numpy arrays. Against the floor that reads "
        "the GeoDataFrame too, the rest of geopriv's checks, locating, noise and output cost "
        f"{t_geo - t_floor2:.2f} s.",
        "",
    ]
    grid_summary = (ratio, ratio2)
    del gdf, x, y
    gc.collect()

    # ---- H3 -------------------------------------------------------------------------------------------
    rng = np.random.default_rng(SEED + 1)
    lon, lat = synthetic(a.n_h3, H3_BOUNDS, rng)
    gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs="EPSG:4326")
    res_h3 = 9
    to_int = h3.api.basic_int.latlng_to_cell
    to_str = h3.latlng_to_cell

    def h3_int():
        ids = np.fromiter(
            (to_int(la, lo, res_h3) for la, lo in zip(lat.tolist(), lon.tolist())), dtype=np.uint64, count=len(lat)
        )
        uniq, inv = np.unique(ids, return_inverse=True)
        return uniq, np.bincount(inv, minlength=len(uniq))

    def h3_int_listcomp():
        ids = np.array([to_int(la, lo, res_h3) for la, lo in zip(lat.tolist(), lon.tolist())], dtype=np.uint64)
        uniq, inv = np.unique(ids, return_inverse=True)
        return uniq, np.bincount(inv, minlength=len(uniq))

    def h3_str():
        ids = np.array([to_str(la, lo, res_h3) for la, lo in zip(lat.tolist(), lon.tolist())])
        uniq, inv = np.unique(ids, return_inverse=True)
        return uniq, np.bincount(inv, minlength=len(uniq))

    t_int, runs_int, (u_int, c_int), _ = repeat(h3_int, a.repeat)
    t_lc, runs_lc, _, _ = repeat(h3_int_listcomp, a.repeat)
    t_str, runs_str, _, _ = repeat(h3_str, a.repeat)
    print(f"h3: int fromiter {t_int:.2f} s, int list {t_lc:.2f} s, str list {t_str:.2f} s", flush=True)
    seeds = iter(range(1, 1000))
    t_geo, runs_geo, res, pieces = repeat(
        lambda: geopriv.aggregate(gdf, 1.0, cells="h3:9", bounds=H3_BOUNDS, rng=next(seeds)), a.repeat
    )
    print(f"h3: geopriv.aggregate {t_geo:.2f} s ({fmt_runs(runs_geo)})", flush=True)
    # the same cells: every occupied cell is released
    pos = np.searchsorted(res["cell"].to_numpy(dtype=np.uint64), u_int)
    if not np.array_equal(res["cell"].to_numpy(dtype=np.uint64)[np.minimum(pos, len(res) - 1)], u_int):
        raise RuntimeError("an occupied H3 cell is missing from geopriv's release")
    floor_h3 = min(t_int, t_lc, t_str)
    ratio_h3 = t_geo / floor_h3
    vector = [n for n in dir(h3) if n.endswith("to_cells") and not n.startswith(("latlng", "directed_edge"))]
    lines_h3 += [
        f"## {a.n_h3:,} points, H3 resolution 9",
        "",
        f"Points: {a.n_h3:,} in EPSG:4326 over the declared box {H3_BOUNDS} (~20 x 20 km, Beijing), same law, seed "
        f"{SEED + 1}. {len(u_int):,} occupied res-9 cells; geopriv releases every res-9 cell meeting the area: "
        f"{len(res):,}. h3 {h3.__version__}: `latlng_to_cell` takes one point per call; h3-py 4 has no vectorised "
        f"point indexing (its array functions are for polygons: {', '.join(f'`{v}`' for v in vector)}), so the "
        "floor is a Python loop over the points.",
        "",
        f"| what | median s ({a.repeat} runs) | runs (s) | geopriv / this |",
        "|---|---:|---|---:|",
        f"| h3 int API (`h3.api.basic_int.latlng_to_cell`, `np.fromiter`) + `np.unique` + `np.bincount` | {t_int:.2f} | "
        f"{fmt_runs(runs_int)} | {t_geo / t_int:.1f}x |",
        f"| h3 int API, list comprehension + `np.unique` + `np.bincount` | {t_lc:.2f} | {fmt_runs(runs_lc)} | "
        f"{t_geo / t_lc:.1f}x |",
        f"| h3 default str API (`h3.latlng_to_cell`), list comprehension + `np.unique` + `np.bincount` | {t_str:.2f} | "
        f"{fmt_runs(runs_str)} | {t_geo / t_str:.1f}x |",
        f"| `geopriv.aggregate(gdf, 1.0, cells='h3:9', bounds=..., rng=seed)` | {t_geo:.2f} | {fmt_runs(runs_geo)} | 1x |",
        "",
        f"Target (within 2x of the fastest h3 floor, {floor_h3:.2f} s): **{'met' if ratio_h3 <= 2 else 'not met'}** "
        f"({ratio_h3:.1f}x).",
        "",
        *pieces_table(t_geo, pieces, labels),
        "",
    ]
    lines = [
        "# geopriv.aggregate speed against the floor",
        "",
        f"`nice .venv/latest/bin/python bench/aggregate_speed.py --n-grid {a.n_grid} --n-h3 {a.n_h3} --repeat "
        f"{a.repeat}` ({time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, numpy {np.__version__}, "
        f"shapely {shapely.__version__}, geopandas {gpd.__version__}, h3 {h3.__version__}, geopriv "
        f"{geopriv.__version__} ({git_state()}); 2 cores shared with other workers: load average "
        f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; peak RSS {rss_gb():.1f} GB; "
        f"{time.time() - t_start:.0f} s in all). Every figure is the median of {a.repeat} runs; ratios move between runs "
        "on this shared machine (by up to a quarter): read the first digit.",
        "",
        *lines_grid,
        *lines_h3,
    ]
    text = "\n".join(lines) + "\n"
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(text)
    print(f"grid ratio {grid_summary[0]:.2f} / {grid_summary[1]:.2f}; h3 ratio {ratio_h3:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
