"""Private visits per 1 km tile on GeoLife: geopriv.aggregate against dp_mobility_report 0.2.11.

Runs in its own environment (dp_mobility_report needs pandas < 3 and scikit-learn < 1.9)::

    bash bench/setup_dpmr.sh                      # once: creates bench/.venv-dpmr
    nice bench/.venv-dpmr/bin/python bench/aggregate_vs_dpmr.py [--reps 20] [--max-trips 5]

Data: ``geolife_users_000_009.parquet`` (GeoLife users 000-009: 1.85 M fixes, 1,385 trajectories,
10 persons) from ``$GEOPRIV_DATA`` (default ``../shared/data`` beside the checkout) or ``--data``.
Writes ``bench/results/aggregate_vs_dpmr.md`` and prints it.  How dp_mobility_report computes
visits per tile is in ``bench/results/dpmr_model.md``.

Protocol
--------
* Public area: a 1 km square grid in EPSG:32650 (UTM 50N) over the declared bounds ``BOUNDS``,
  Beijing's 5th/6th ring road area (116.0-116.8 E, 39.6-40.2 N) projected and rounded outward to
  whole km (hard-coded, not computed from the data): 69 x 68 = 4,692 tiles.  Fixes outside it are
  dropped for both tools before anything else (a trajectory that leaves the area gets its first and
  last fix inside it as its start and end).
* dp_mobility_report: ``DpMobilityReport(df, tessellation, privacy_budget=eps,
  max_trips_per_user=M, analysis_selection=[VISITS_PER_TILE], seed_sampling=seed)``: all of
  epsilon goes to visits per tile (budget sum 1).  It counts trip start and end points only, keeps
  M random trips per user, and adds Laplace noise of scale 2 M / eps to every tile (then rounds and
  clips at 0).  Its noise comes from ``secrets.SystemRandom`` (diffprivlib): only its trip sampling
  is seeded, so its figures move by Monte-Carlo error between runs.
* geopriv: ``geopriv.aggregate(gdf, eps, cells=1000.0, user="user", max_per_user=K,
  bounds=BOUNDS, rng=seed)`` (checked to be dp_mobility_report's very tiles; should geopriv's
  grid of ground metres stop lining up with them, the tiles are passed as public polygons) with K = 2 M, the same bound on counted points per user as
  dp_mobility_report's (each trip gives at most 2 counted points): the same user-level eps-DP
  guarantee (neighbours differ by all rows of one person).  Run on two inputs:

  - ``trip ends``: the very rows dp_mobility_report counts (each trajectory's first and last fix,
    taken from dp_mobility_report's own preprocessing), so both estimate the same true counts;
  - ``all fixes``: every GPS fix (geopriv's own notion of a visit: a row), true counts = fixes per
    tile.

* Metrics over ``--reps`` repetitions (seeds 1..R), per tool, input and epsilon, each against the
  true counts of that input, unbounded (what the data holds): mean absolute error over all tiles,
  relative error |released - true| / true of the 20 busiest true tiles (median and mean over the
  20 x R values), mean absolute error over the empty tiles (true 0) and over the others.  For
  dp_mobility_report also against its bounded sample (the trips it kept): the noise alone.

Second regime, item level (one trip protected; the counts carry signal)
------------------------------------------------------------------------
* dp_mobility_report with ``user_privacy=False, max_trips_per_user=None``: nothing sampled,
  sensitivity 2 (a trip's two ends), Laplace of scale 2 / eps on every tile.
* geopriv on the trip ends with ``user="trip", max_per_user=2`` (``trip``: dp_mobility_report's
  own trip id, unique per user and trajectory): neighbours differ by one trip, the same guarantee.
* geopriv in both regimes (trip ends) with three splits of epsilon over its hierarchy:
  ``levels="auto"`` (default: 7/8 to the tiles, 1/8 to the area's total), ``levels=False`` (the
  tiles only) and ``levels=4`` (4 levels with equal shares, Hay et al.).
* The report opens with the target "at least 30 % lower MAE than dp_mobility_report at the same
  guarantee" per regime and epsilon, next to releasing zeros (the no-signal reference).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

ROOT = Path(__file__).resolve().parents[1]
PARQUET = "geolife_users_000_009.parquet"
DATA_DIR = Path(os.environ.get("GEOPRIV_DATA") or ROOT.parent / "shared" / "data")
OUT = ROOT / "bench" / "results" / "aggregate_vs_dpmr.md"

#: Declared public area, EPSG:32650 metres: 116.0-116.8 E x 39.6-40.2 N (Beijing inside the
#: 5th/6th ring road) projected (edges densified) and rounded outward to whole km.
#: Projected extent: x 414,143.5-482,978.0, y 4,383,381.8-4,450,435.1.  Never computed from the data.
CRS_UTM = "EPSG:32650"
BOUNDS = (414000.0, 4383000.0, 483000.0, 4451000.0)
TILE = 1000.0
NX = int(round((BOUNDS[2] - BOUNDS[0]) / TILE))  # 69
NY = int(round((BOUNDS[3] - BOUNDS[1]) / TILE))  # 68
EPSILONS = (0.5, 1.0, 2.0)
TOP = 20


def load(path: Path):
    """GeoLife fixes inside BOUNDS: (dp_mobility_report's frame, geopriv's frame in UTM, tile of each row, dropped)."""
    g = gpd.read_parquet(path)
    utm = g.geometry.to_crs(CRS_UTM)
    x, y = utm.x.to_numpy(), utm.y.to_numpy()
    inside = (x >= BOUNDS[0]) & (x < BOUNDS[2]) & (y >= BOUNDS[1]) & (y < BOUNDS[3])
    dropped = int((~inside).sum())
    g, x, y = g[inside].reset_index(drop=True), x[inside], y[inside]
    df = pd.DataFrame(
        {
            "uid": g["user"].astype(str).to_numpy(),
            "tid": g["trajectory_id"].astype(str).to_numpy(),
            "datetime": g["t"].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy(),
            "lat": g.geometry.y.to_numpy(),
            "lng": g.geometry.x.to_numpy(),
        }
    )
    gp = gpd.GeoDataFrame({"user": df["uid"].to_numpy()}, geometry=gpd.points_from_xy(x, y), crs=CRS_UTM)
    tile = tile_of(x, y)
    return df, gp, tile, dropped, len(inside)


def tile_of(x, y):
    """tile_id (row from the south * NX + column) of UTM coordinates inside BOUNDS."""
    col = np.floor((np.asarray(x) - BOUNDS[0]) / TILE).astype(np.int64)
    row = np.floor((np.asarray(y) - BOUNDS[1]) / TILE).astype(np.int64)
    return row * NX + col


def tiles_utm() -> gpd.GeoDataFrame:
    """The public 1 km tiles (squares of 1,000 UTM units), with tile_id, in EPSG:32650."""
    col, row = np.meshgrid(np.arange(NX), np.arange(NY))
    col, row = col.ravel(), row.ravel()
    x0, y0 = BOUNDS[0] + col * TILE, BOUNDS[1] + row * TILE
    return gpd.GeoDataFrame(
        {"tile_id": (row * NX + col).astype(str)}, geometry=shapely.box(x0, y0, x0 + TILE, y0 + TILE), crs=CRS_UTM
    )


def tessellation() -> gpd.GeoDataFrame:
    """The public 1 km tiles, with tile_id, in EPSG:4326 (dp_mobility_report's CRS; it reprojects others)."""
    return tiles_utm().to_crs("EPSG:4326")


def dpmr_report(df, tess, eps, max_trips, seed, user_privacy=True):
    from dp_mobility_report import DpMobilityReport
    from dp_mobility_report import constants as const

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = DpMobilityReport(
            df,
            tess.copy(),
            privacy_budget=eps,
            max_trips_per_user=max_trips,
            analysis_selection=[const.VISITS_PER_TILE],
            disable_progress_bar=True,
            seed_sampling=seed,
            user_privacy=user_privacy,
        )
        sec = rep.report[const.VISITS_PER_TILE]
    return rep, sec


def dpmr_vector(sec) -> np.ndarray:
    """dp_mobility_report's visits per tile as a vector indexed by tile_id."""
    d = sec.data
    out = np.full(NX * NY, -1, dtype=np.int64)
    out[d["tile_id"].astype(np.int64).to_numpy()] = d["visits"].astype(np.int64).to_numpy()
    if (out < 0).any():
        raise RuntimeError("dp_mobility_report left tiles out of visits_per_tile")
    return out


def counts_of(tile_ids) -> np.ndarray:
    return np.bincount(np.asarray(tile_ids, dtype=np.int64), minlength=NX * NY)


def geopriv_vector(res) -> np.ndarray:
    """geopriv.aggregate's released counts as a vector indexed by tile_id (joined by cell centroid)."""
    c = res.geometry.centroid
    tid = tile_of(c.x.to_numpy(), c.y.to_numpy())
    if len(res) != NX * NY or len(np.unique(tid)) != NX * NY:
        raise RuntimeError(f"geopriv.aggregate returned {len(res)} cells, expected the {NX * NY} tiles")
    out = np.empty(NX * NY, dtype=np.int64)
    out[tid] = res["count"].astype(np.int64).to_numpy()
    return out


class Errors:
    """Per-repetition error figures of one (tool, input, epsilon) against fixed true counts."""

    def __init__(self):
        self.mae, self.mae_empty, self.mae_busy, self.rel_top, self.total = [], [], [], [], []

    def add(self, released: np.ndarray, true: np.ndarray) -> None:
        err = np.abs(released.astype(float) - true)
        self.mae.append(err.mean())
        empty = true == 0
        self.mae_empty.append(err[empty].mean())
        self.mae_busy.append(err[~empty].mean())
        top = np.argsort(-true, kind="stable")[:TOP]
        top = top[true[top] > 0]  # a bounded sample may fill fewer than 20 tiles
        self.rel_top.extend(err[top] / true[top])
        self.total.append(float(released.sum()))

    def row(self) -> list:
        m = np.array(self.mae)
        return [
            f"{m.mean():.2f} ± {m.std(ddof=1) if len(m) > 1 else 0:.2f}",
            f"{np.median(self.rel_top):.3f}",
            f"{np.mean(self.rel_top):.3f}",
            f"{np.mean(self.mae_empty):.2f}",
            f"{np.mean(self.mae_busy):.2f}",
            f"{np.mean(self.total):,.0f}",
        ]


def geopriv_tree() -> str:
    """The commit geopriv ran from, and whether geopriv/ had uncommitted changes (figures of work in progress)."""
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA_DIR / PARQUET)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--max-trips", type=int, default=5, help="dp_mobility_report's max_trips_per_user (README's 5)")
    ap.add_argument("--eps", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    t_start = time.time()
    k = 2 * a.max_trips
    seeds = list(range(1, a.reps + 1))

    import dp_mobility_report
    import diffprivlib

    import geopriv

    df, gp, tile_all, dropped, n_all = load(a.data)
    tess = tessellation()
    print(
        f"{n_all:,} fixes; {dropped:,} outside the declared bounds dropped; {len(df):,} kept; "
        f"{df['uid'].nunique()} users, {df['tid'].nunique():,} trajectories; {len(tess):,} tiles",
        flush=True,
    )

    # True counts as dp_mobility_report defines them: its own output with no noise and no bounding
    # (privacy_budget=None, max_trips_per_user=None keeps every trip).  Its preprocessed frame gives
    # the trip ends it counts (column "id" = row of df).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, ref_sec = dpmr_report(df, tess, None, None, 1)
    true_ends = dpmr_vector(ref_sec)
    ends_rows = np.sort(ref.df["id"].to_numpy())
    ends_utm = counts_of(tile_all[ends_rows])
    n_ends = len(ref.df)
    mismatch = int(np.abs(ends_utm - true_ends).sum())
    true_fixes = counts_of(tile_all)
    ends_gdf = gp.iloc[ends_rows].reset_index(drop=True)
    print(
        f"trip ends counted by dp_mobility_report: {n_ends:,} ({int(true_ends.sum()):,} in tiles); "
        f"its own tile assignment (sjoin in EPSG:4326) vs the UTM grid: L1 difference {mismatch}",
        flush=True,
    )

    # Item level: one trip is the protected unit.  geopriv's person is the trip (a unique trip id per
    # (user, trajectory), dp_mobility_report's own renumbered tid), at most 2 rows per trip.
    trip_of_row = pd.Series(ref.df["tid"].to_numpy(), index=ref.df["id"].to_numpy())
    ends_trip_gdf = ends_gdf.assign(trip=trip_of_row.loc[ends_rows].to_numpy())
    rows_per_trip = int(ends_trip_gdf.groupby("trip").size().max())
    if rows_per_trip > 2:
        raise RuntimeError(f"a trip has {rows_per_trip} trip-end rows, expected at most 2")

    results: dict = {}  # (regime, tool, input, eps) -> Errors
    timings: dict = {}
    USER, ITEM = "user", "item"
    # References with no privacy: releasing zeros everywhere (uses no data), and dp_mobility_report's
    # bounded sample itself (its trip sampling, no noise: the error of the bounding alone).
    for label, true in (("trip ends", true_ends), ("all fixes", true_fixes)):
        e = Errors()
        e.add(np.zeros_like(true), true)
        results[(USER, "zeros everywhere (reference)", label, None)] = e
        if label == "trip ends":
            results[(ITEM, "zeros everywhere (reference)", label, None)] = e
    e_sample = Errors()
    for eps in a.eps:
        t0 = time.time()
        e_true, e_bounded = Errors(), Errors()
        for s in seeds:
            rep, sec = dpmr_report(df, tess, eps, a.max_trips, s)
            if sec.sensitivity != 2 * a.max_trips or sec.privacy_budget != eps:
                raise RuntimeError(
                    f"dp_mobility_report used sensitivity {sec.sensitivity}, epsilon "
                    f"{sec.privacy_budget}; expected {2 * a.max_trips}, {eps}"
                )
            released = dpmr_vector(sec)
            e_true.add(released, true_ends)
            bounded = counts_of(rep.df["tile_id"].dropna().astype(np.int64))
            e_bounded.add(released, bounded)
            if eps == a.eps[0]:  # the sample depends on the seed only
                e_sample.add(bounded, true_ends)
        if eps == a.eps[0]:
            results[(USER, "dp_mobility_report's bounded sample, no noise (reference)", "trip ends", None)] = e_sample
        results[(USER, "dp_mobility_report", "trip ends", eps)] = e_true
        results[(USER, "dp_mobility_report", "trip ends, vs its bounded sample (noise only)", eps)] = e_bounded
        timings[("dp_mobility_report user level", eps)] = time.time() - t0
        print(f"dp_mobility_report user level eps={eps:g}: {time.time() - t0:.1f} s", flush=True)
    for eps in a.eps:  # item level: nothing sampled, sensitivity 2 (one trip's two ends)
        t0 = time.time()
        e_true = Errors()
        for s in seeds:
            rep, sec = dpmr_report(df, tess, eps, None, s, user_privacy=False)
            if sec.sensitivity != 2 or sec.privacy_budget != eps:
                raise RuntimeError(
                    f"dp_mobility_report (item level) used sensitivity {sec.sensitivity}, epsilon "
                    f"{sec.privacy_budget}; expected 2, {eps}"
                )
            e_true.add(dpmr_vector(sec), true_ends)
        results[(ITEM, "dp_mobility_report", "trip ends", eps)] = e_true
        timings[("dp_mobility_report item level", eps)] = time.time() - t0
        print(f"dp_mobility_report item level eps={eps:g}: {time.time() - t0:.1f} s", flush=True)

    #: geopriv's split of epsilon over its hierarchy: the default (7/8 cells, 1/8 the area's total),
    #: the cells only, and 4 equally weighted levels (Hay et al.)
    splits = (("geopriv", "auto"), ("geopriv levels=False", False), ("geopriv levels=4", 4))
    # geopriv's grid steps are ground metres: where its 1,000 m grid is dp_mobility_report's tiles
    # (the same origin, step and shape: UTM's scale is within geopriv's 1 % tolerance), it is used as
    # a user would (cells=1000); otherwise geopriv gets the very tiles as public polygons.
    cells_geopriv, cells_note = tiles_utm()[["geometry"]], "polygons"
    try:
        from geopriv.counting import plan_counts

        g = plan_counts(CRS_UTM, 1.0, cells=TILE, bounds=BOUNDS).cells
        if (g.nx, g.ny, g.x0, g.y0, g.step) == (NX, NY, BOUNDS[0], BOUNDS[1], TILE):
            cells_geopriv, cells_note = TILE, "grid"
        else:
            cells_note = f"polygons: geopriv's 1000 m grid is {g.nx} x {g.ny} cells of {g.step:.2f} UTM units here"
    except Exception as exc:  # noqa: BLE001 - the plan's internals may move; polygons are the same tiles
        cells_note = f"polygons (geopriv's grid not inspected: {type(exc).__name__})"
    print(f"geopriv cells: {cells_note}", flush=True)
    runs = [(USER, tool, lv, "trip ends", ends_gdf, "user", k, true_ends) for tool, lv in splits]
    runs.append((USER, "geopriv", "auto", "all fixes", gp, "user", k, true_fixes))
    runs += [(ITEM, tool, lv, "trip ends", ends_trip_gdf, "trip", 2, true_ends) for tool, lv in splits]
    geopriv_note = ""
    aggregate = getattr(geopriv, "aggregate", None)
    if aggregate is None:
        geopriv_note = (
            f"geopriv {geopriv.__version__} at {Path(geopriv.__file__).parent} has no "
            "geopriv.aggregate yet: geopriv was skipped."
        )
        print("SKIPPED geopriv: " + geopriv_note, file=sys.stderr, flush=True)
    else:
        try:
            for regime, tool, lv, label, data, user_col, bound, true in runs:
                for eps in a.eps:
                    t0 = time.time()
                    e = Errors()
                    for s in seeds:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")  # LowUtilityWarning where the noise swamps
                            res = aggregate(
                                data,
                                eps,
                                cells=cells_geopriv,
                                user=user_col,
                                max_per_user=bound,
                                bounds=BOUNDS if cells_note == "grid" else None,
                                levels=lv,
                                rng=s,
                            )
                        e.add(geopriv_vector(res), true)
                    results[(regime, tool, label, eps)] = e
                    timings[(f"{tool} {regime} level {label}", eps)] = time.time() - t0
                    print(f"{tool} {regime} level {label} eps={eps:g}: {time.time() - t0:.1f} s", flush=True)
        except Exception as exc:  # the API is being written: keep the baseline's figures
            traceback.print_exc()
            geopriv_note = f"geopriv.aggregate failed ({type(exc).__name__}); its rows are missing."
            print("FAILED geopriv: " + geopriv_note, file=sys.stderr, flush=True)

    # ---- report -------------------------------------------------------------------------------
    b = {eps: 2 * a.max_trips / eps for eps in a.eps}
    header = [
        "| tool | input (true counts) | eps | per-person bound | MAE all tiles | top-20 rel. err. median | "
        "top-20 rel. err. mean | MAE empty tiles | MAE non-empty tiles | released total |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]

    def order(key):
        regime, tool, label, eps = key
        return ("reference" not in tool, tool != "dp_mobility_report", tool != "geopriv", tool, label, eps or 0.0)

    def table(regime) -> list:
        rows = list(header)
        for key in sorted((r for r in results if r[0] == regime), key=order):
            _, tool, label, eps = key
            if regime == USER:
                bound = (
                    f"{a.max_trips} trips (≤ {k} points)"
                    if tool.startswith("dp_mobility_report")
                    else f"{k} points"
                    if tool.startswith("geopriv")
                    else "–"
                )
            else:
                bound = (
                    "1 trip (≤ 2 points)"
                    if tool.startswith("dp_mobility_report")
                    else "2 points per trip"
                    if tool.startswith("geopriv")
                    else "–"
                )
            eps_s = "–" if eps is None else f"{eps:g}"
            rows.append(f"| {tool} | {label} | {eps_s} | {bound} | " + " | ".join(results[key].row()) + " |")
        return rows

    def mae(regime, tool, eps):
        e = results.get((regime, tool, "trip ends", eps))
        return None if e is None else float(np.mean(e.mae))

    def busy_mae(regime, tool, eps):
        e = results.get((regime, tool, "trip ends", eps))
        return None if e is None else float(np.mean(e.mae_busy))

    def empty_mae(regime, tool, eps):
        e = results.get((regime, tool, "trip ends", eps))
        return None if e is None else float(np.mean(e.mae_empty))

    verdict = [
        "| regime | eps | dp_mobility_report MAE | geopriv default MAE | reduction | ≥ 30 % lower? | "
        "geopriv levels=False | geopriv levels=4 | zeros everywhere | best geopriv split beats zeros? |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    zeros_mae = float(np.mean(results[(USER, "zeros everywhere (reference)", "trip ends", None)].mae))
    met = {USER: [], ITEM: []}
    signal = {USER: False, ITEM: False}  # does any private release beat releasing zeros?
    for regime in (USER, ITEM):
        for eps in a.eps:
            d, g = mae(regime, "dp_mobility_report", eps), mae(regime, "geopriv", eps)
            if d is None or g is None:
                continue
            red = 1 - g / d
            met[regime].append(red >= 0.30)
            others = [mae(regime, t, eps) for t, _ in splits]
            best = min(x for x in others if x is not None)
            signal[regime] |= min(best, d) < zeros_mae
            fmt = lambda x: "–" if x is None else f"{x:.3f}"  # noqa: E731
            verdict.append(
                f"| {regime} level | {eps:g} | {d:.3f} | {g:.3f} | {100 * red:.0f} % | "
                f"{'yes' if red >= 0.30 else 'no'} | {fmt(others[1])} | {fmt(others[2])} | {zeros_mae:.3f} | "
                f"{'yes' if best < zeros_mae else 'no'} ({fmt(best)}) |"
            )

    lines = [
        "# Private visits per 1 km tile: geopriv.aggregate vs dp_mobility_report 0.2.11",
        "",
        f"`nice bench/.venv-dpmr/bin/python bench/aggregate_vs_dpmr.py --reps {a.reps} --max-trips {a.max_trips}` "
        f"({time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, dp_mobility_report "
        f"{getattr(dp_mobility_report, '__version__', '0.2.11')}, diffprivlib {diffprivlib.__version__}, "
        f"pandas {pd.__version__}, numpy {np.__version__}, geopriv {geopriv.__version__} ({geopriv_tree()}); environment: "
        "`bench/setup_dpmr.sh`). How dp_mobility_report computes visits per tile: `bench/results/dpmr_model.md`.",
        "",
        "Two regimes, each at one guarantee shared by both tools: **user level** (one person with all of their "
        f"trips; {a.max_trips} trips = {k} trip ends per person; 10 persons, so no tool has signal) and **item "
        "level** (one trip, i.e. its two ends: dp_mobility_report's `user_privacy=False`; the counts carry signal).",
        "",
        "## Parameters",
        "",
        f"* Data: GeoLife users 000-009 ({n_all:,} fixes, {df['uid'].nunique()} persons). Declared public area "
        f"EPSG:32650 {tuple(int(v) for v in BOUNDS)} (116.0-116.8 E, 39.6-40.2 N rounded outward to whole km; "
        f"hard-coded): {NX} x {NY} = {NX * NY:,} tiles of 1 km. **{dropped:,} fixes outside it dropped** for both "
        f"tools before anything; {len(df):,} fixes and {df['tid'].nunique():,} trajectories kept.",
        f"* dp_mobility_report, user level: `privacy_budget=eps, max_trips_per_user={a.max_trips}, "
        "analysis_selection=[VISITS_PER_TILE], seed_sampling=seed` (all of eps to visits per tile). "
        f"It counts {n_ends:,} trip ends (each trajectory's first and last fix). Sensitivity "
        f"2 x {a.max_trips} = {2 * a.max_trips}; continuous Laplace of scale {2 * a.max_trips}/eps, rounded, "
        f"clipped at 0, on every tile. Tessellation passed in EPSG:4326; its own point-in-tile join agrees "
        f"with the UTM grid (L1 difference of the true counts: {mismatch}).",
        "* dp_mobility_report, item level: the same with `user_privacy=False, max_trips_per_user=None` (no trip "
        "sampling: every trip end counted); sensitivity 2 (checked in its output); Laplace of scale 2/eps, "
        "rounded, clipped at 0, on every tile.",
        (
            f"* geopriv, user level: `geopriv.aggregate(gdf, eps, cells=1000.0, user='user', max_per_user={k}, "
            f"bounds={BOUNDS}, levels=..., rng=seed)` (its grid is dp_mobility_report's tiles: same origin, step and "
            f"{NX} x {NY} shape, checked)"
            if cells_note == "grid"
            else f"* geopriv, user level: `geopriv.aggregate(gdf, eps, cells=tiles, user='user', max_per_user={k}, "
            f"levels=..., rng=seed)`, `tiles` = dp_mobility_report's 1 km UTM tiles as public polygons ({cells_note})"
        )
        + f", gdf in EPSG:32650. K = {k} = 2 x max_trips_per_user: "
        "the same bound on counted points per person, hence the same user-level eps-DP guarantee. Inputs: "
        f"`trip ends` (the {n_ends:,} rows dp_mobility_report counts) and `all fixes` ({len(df):,} rows).",
        "* geopriv, item level: the same on the trip ends with `user='trip', max_per_user=2`, where `trip` is "
        f"dp_mobility_report's own trip id (unique per user and trajectory; at most {rows_per_trip} rows per "
        "trip, so nothing is dropped): neighbours differ by one trip with its two ends, the guarantee of "
        "`user_privacy=False`.",
        "* geopriv's split of epsilon over its hierarchy (a quadtree over the tiles, up to the whole area): "
        "`levels='auto'` (the default: 7/8 to the tiles, 1/8 to the whole area's total), `levels=False` (the tiles "
        "only) and `levels=4` (4 levels with equal shares, Hay et al.). Non-negative (default).",
        f"* {a.reps} repetitions, seeds 1..{a.reps} (dp_mobility_report: trip sampling only; its noise is "
        "`secrets.SystemRandom`, unseeded, so its figures vary between runs by Monte-Carlo error).",
        f"* True counts (unbounded): trip ends {int(true_ends.sum()):,} in {int((true_ends > 0).sum())} "
        f"non-empty tiles ({int((true_ends == 0).sum()):,} empty); all fixes {int(true_fixes.sum()):,} in "
        f"{int((true_fixes > 0).sum())} non-empty tiles ({int((true_fixes == 0).sum()):,} empty). "
        f"Busiest trip-end tile {int(true_ends.max()):,}, 20th busiest {int(np.sort(true_ends)[-TOP]):,}; "
        f"busiest fixes tile {int(true_fixes.max()):,}, 20th {int(np.sort(true_fixes)[-TOP]):,}.",
        "",
        "MAE: mean absolute error per tile over all tiles (mean ± sd over repetitions). Top-20: "
        "|released - true| / true over the 20 busiest true tiles (pooled over repetitions). "
        "Empty: mean absolute error over tiles with true count 0; non-empty: over the others. Released total: mean "
        "over repetitions.",
        "",
        "## Target: at least 30 % lower MAE than dp_mobility_report at the same guarantee (trip ends)",
        "",
        *verdict,
        "",
        "User level: "
        + ("met at every eps" if met[USER] and all(met[USER]) else "not met at every eps")
        + (
            ", but vacuously: with 10 persons no private release beats releasing zeros, so the lower MAE says only "
            "that geopriv's consistent, non-negative release puts almost nothing on the empty tiles while "
            "dp_mobility_report puts about half its Laplace scale on each."
            if not signal[USER]
            else "."
        )
        + " Item level: "
        + (
            "met at every eps."
            if met[ITEM] and all(met[ITEM])
            else "met at eps "
            + ", ".join(f"{e:g}" for e, m in zip(a.eps, met[ITEM]) if m)
            + "; not met at eps "
            + ", ".join(f"{e:g}" for e, m in zip(a.eps, met[ITEM]) if not m)
            + "."
            if any(met[ITEM])
            else "not met at any eps."
        ),
        "",
        "Where the MAE comes from (item level): "
        + "; ".join(
            f"eps {eps:g}: on the {int((true_ends > 0).sum())} non-empty tiles dp_mobility_report "
            f"{busy_mae(ITEM, 'dp_mobility_report', eps):.2f}, geopriv {busy_mae(ITEM, 'geopriv', eps):.2f}; on the "
            f"{int((true_ends == 0).sum()):,} empty tiles {empty_mae(ITEM, 'dp_mobility_report', eps):.2f} vs "
            f"{empty_mae(ITEM, 'geopriv', eps):.2f}"
            for eps in a.eps
            if busy_mae(ITEM, "geopriv", eps) is not None
        )
        + ". MAE per tile averages over all tiles, 98 % of them empty: geopriv wins it on the empty tiles, where "
        "its non-negative release that adds up to an accurate total puts almost nothing, while dp_mobility_report "
        "puts about half its Laplace scale on each. On the tiles with trips the order is reversed "
        + (
            "at every eps"
            if all((busy_mae(ITEM, "geopriv", e) or 0) > (busy_mae(ITEM, "dp_mobility_report", e) or 0) for e in a.eps)
            else "at some eps"
        )
        + ": geopriv's tiles get 7/8 of eps (noise scale 2 / (0.875 eps), 14 % above dp_mobility_report's 2 / eps) "
        "and its projection onto counts >= 0 that add up to their parent (level by level down its quadtree) "
        "shifts the positive tiles under each parent down by a common amount (the positive noise of the empty "
        "tiles has to go somewhere). So the 30 % target is met on the "
        "metric it names, not on the busy tiles (see also the top-20 columns).",
        "",
        "## Item level (one trip protected): counts with signal",
        "",
        *table(ITEM),
        "",
        "## User level (one person protected, 5 trips each): no signal",
        "",
        *table(USER),
    ]
    if geopriv_note:
        lines += ["", f"**{geopriv_note}**"]
    lines += [
        "",
        "Reading: `zeros everywhere` releases 0 in every tile without looking at the data; its MAE is the mean "
        "true count per tile, the figure a release must beat to say anything. "
        "With 10 persons and a bound of "
        f"{a.max_trips} trips each, dp_mobility_report keeps at most {10 * 2 * a.max_trips} of the "
        f"{n_ends:,} trip ends, so against the unbounded truth its error on busy tiles is mostly the bounding, "
        "not the noise: its `bounded sample, no noise` row is the bounding alone, its `vs its bounded sample` rows the noise alone. Its Laplace scale is "
        + ", ".join(f"{b[eps]:g} at eps={eps:g}" for eps in a.eps)
        + " at user level and "
        + ", ".join(f"{2 / eps:g}" for eps in a.eps)
        + " at item level; on an empty tile, rounding and clipping at 0 give an expected error of about half the scale.",
        "",
        "Wall time: "
        + ", ".join(f"{t} eps={eps:g} {v:.0f} s" for (t, eps), v in timings.items())
        + f"; total {time.time() - t_start:.0f} s (2 shared cores, nice).",
    ]
    text = "\n".join(lines) + "\n"
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(text)
    return 1 if geopriv_note.startswith("geopriv.aggregate failed") else 0


if __name__ == "__main__":
    sys.exit(main())
