"""Evaluation of geopriv.synthesize: Wasserstein-1 error against n, baselines, 1-D rates, Soho.

Privacy model for every method compared here: epsilon-DP (dimensionless) where neighbouring
datasets replace one person's location by any other location in the public area, and n is
public.  Methods, all at the same epsilon (default 1.0):

* ``srw``  -- ``gdf.priv.synthesize(eps, bounds=B)`` (super-regular random walk on a Hilbert curve,
  Boedihardjo, Strohmer, Vershynin, PTRF 2024), auto depth;
* ``pmm``  -- the same with ``method="pmm"`` (He, Vershynin, Zhu, COLT 2023), auto depth;
* ``laplace`` -- per-point planar Laplace, ``gdf.priv.perturb(eps / D, bounds=B)``, D the public
  area's diameter in ground metres (two locations in the area are at most D apart, so eps / D per
  metre gives the same replace-one guarantee); outputs truncated to the area by perturb;
* ``grid`` -- DP uniform k x k histogram over the public area: discrete Laplace noise of scale
  2 / eps on every count (replace-one l1 sensitivity 2), negative counts clipped, rescaled to n
  with randomised rounding, points uniform in their cells.  k is the best of a ladder of
  values (steps of sqrt 2) chosen per n on the *true* data by the W1 bound of mechanism seed 1:
  an oracle, non-private choice that favours the baseline;
* ``privtree`` -- PrivTree (Zhang, Xiao, Xie, SIGMOD 2016) quadtree with fanout 4, theta = 0,
  half the budget for the structure and half for the leaf counts.  PrivTree's guarantee is
  for adding/removing one person; replacing one is two such steps, so the structure uses
  lambda = (2 beta - 1) / (beta - 1) * 2 / eps_tree, delta = lambda ln beta; leaf counts get
  discrete Laplace of scale 2 / eps_count; clipped, rescaled, uniform in leaves.

Data: a city-sized public area, a 10 km x 10 km box in UTM 33N (EPSG:32633, around Berlin),
holding a mixture of four Gaussian clusters (sd 250-700 m) and a crescent (a 250-degree arc of a
ring of radius 1.8 km, width sd 120 m); data seed and mechanism seed vary together per run.

Metrics (metres):

* exact W1 with POT (``geopriv.wasserstein``) for n <= ``--exact-max`` (default 10k; at the
  largest exact size only ``--exact-seeds-top`` seeds, default 1, because one 10k x 10k transport
  problem takes 20-70 s here);
* ``LMB`` (local-matching bound, defined in this file): the cost of an explicit matching between
  the true and synthetic points, so an upper bound on W1: quadtree cells over the public area
  split until they hold <= 400 points; inside each cell the common mass is matched exactly
  (partial optimal transport), the leftover points are matched again in cells holding 4x as many, and
  so on until <= 5000 are left, which are matched exactly.  It is computed for every run (it
  takes 30-60 s at 1M points, matching cells in ``--threads`` threads) and is reported next to
  the exact value where both exist, so its looseness is visible (+9..23 % at 10k points; it is
  the exact W1 for n <= 5000);
* ``geopriv.wasserstein_bound`` (4000 cells) is also reported at large n: its resolution floor
  (each point moved to its cell centroid, ~100 m on this box) dominates once W1 < 100 m, which
  is why LMB is used for the comparison beyond the exact sizes.  ``laplace`` at large n is
  reported with wasserstein_bound only (its W1 is kilometres, far above the floor).

Also: the 1-D rate check (``geopriv.synthesize_xy`` on [0, 1] vs the classical random walk,
``classical_walk_counts``, at the srw's depth and at its own best depth; exact 1-D W1 by sorting;
fitted log-log slopes), W1 against the tree depth around the auto depth, and the Soho cholera
deaths (exact W1, share of points nearest each pump, the figure docs/img/soho_synthetic.png).

Writes its sections of bench/results/synthesize.md (other sections kept) and
docs/img/synthesize_w1_vs_n.png.

    python bench/synthesize_eval.py [--exact-sizes 300,1000,3000,10000] [--large-sizes 100000,1000000]
        [--seeds 3] [--large-seeds 1] [--epsilon 1.0] [--parts 2d,1d,depth,soho] [--depth-sizes 3000]
        [--no-write]

About 10 minutes with the defaults on 2 cores (the 1M step is about 4 of them: LMB runs for
srw, pmm, privtree and three grid sizes); ``--large-sizes 100000`` takes about 5.  A depth scan
at 1M (``--depth-sizes 3000,100000,1000000``) adds about 9 minutes.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import ot
import shapely
from pyproj import Geod, Transformer

import geopriv
from geopriv.mechanisms.private_measure import (
    PrivateMeasure,
    classical_walk_counts,
    discrete_laplace,
    leaf_boxes,
    leaf_keys,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "synthesize.md"
PLOT = ROOT / "docs" / "img" / "synthesize_w1_vs_n.png"
SOHO_PNG = ROOT / "docs" / "img" / "soho_synthetic.png"
SOHO_GPKG = ROOT / "geopriv" / "data" / "soho_cholera.gpkg"

CRS = 32633
X0, Y0, SIDE = 380_000.0, 5_810_000.0, 10_000.0
BOX = (X0, Y0, X0 + SIDE, Y0 + SIDE)
SOHO_BOUNDS = (-15800.0, 6711900.0, -14600.0, 6713300.0)


# --------------------------------------------------------------------------- data
def clustered(n: int, seed: int) -> np.ndarray:
    """n points (UTM 33N metres) in BOX: four Gaussian clusters and a crescent, by rejection."""
    r = np.random.default_rng(seed)
    out = np.empty((0, 2))
    cx = np.array([2500.0, 7000.0, 6500.0, 3000.0])
    cy = np.array([3000.0, 7500.0, 2500.0, 7500.0])
    sd = np.array([400.0, 700.0, 250.0, 500.0])
    p = np.array([0.30, 0.20, 0.15, 0.10, 0.25])
    while len(out) < n:
        m = int((n - len(out)) * 1.05) + 16
        comp = r.choice(5, size=m, p=p)
        xy = np.empty((m, 2))
        g = comp < 4
        xy[g, 0] = cx[comp[g]] + r.normal(size=g.sum()) * sd[comp[g]]
        xy[g, 1] = cy[comp[g]] + r.normal(size=g.sum()) * sd[comp[g]]
        k = ~g
        th = r.uniform(0.2 * np.pi, 1.6 * np.pi, k.sum())
        rad = 1800.0 + r.normal(size=k.sum()) * 120.0
        xy[k, 0] = 5000.0 + rad * np.cos(th)
        xy[k, 1] = 5000.0 + rad * np.sin(th)
        ok = np.all((xy > 0) & (xy < SIDE), axis=1)
        out = np.vstack([out, xy[ok]])
    return out[:n] + [X0, Y0]


def diameter_m(crs, bounds) -> float:
    """Ground diameter (metres) of a public rectangle: the longer geodesic diagonal."""
    x0, y0, x1, y1 = bounds
    t = Transformer.from_crs(crs, 4326, always_xy=True)
    lon, lat = t.transform([x0, x1, x0, x1], [y0, y1, y1, y0])
    geod = Geod(ellps="WGS84")
    d1 = geod.inv(lon[0], lat[0], lon[1], lat[1])[2]
    d2 = geod.inv(lon[2], lat[2], lon[3], lat[3])[2]
    return float(max(d1, d2))


def as_series(xy, crs=CRS) -> gpd.GeoSeries:
    return gpd.GeoSeries(gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=crs)


def coords(g) -> np.ndarray:
    return shapely.get_coordinates(np.asarray(g.geometry.values if hasattr(g, "geometry") else g.values))


# --------------------------------------------------------------------------- baselines
def _allocate(counts: np.ndarray, n: int, rng) -> np.ndarray:
    """Nonnegative float counts -> integers summing to n (proportional, randomised rounding)."""
    counts = np.maximum(counts.astype(float), 0.0)
    tot = counts.sum()
    if tot <= 0:
        counts = np.ones(len(counts))
        tot = counts.sum()
    target = counts * (n / tot)
    base = np.floor(target).astype(np.int64)
    rest = n - int(base.sum())
    if rest > 0:
        frac = target - base
        extra = rng.choice(len(frac), size=rest, replace=False, p=frac / frac.sum())
        base[extra] += 1
    return base


def grid_histogram(xy, eps, k, bounds, rng) -> np.ndarray:
    """DP uniform-grid histogram: discrete Laplace(2/eps) on k x k counts, clipped, rescaled, uniform in cells."""
    x0, y0, x1, y1 = bounds
    n = len(xy)
    ix = np.clip(((xy[:, 0] - x0) / (x1 - x0) * k).astype(np.int64), 0, k - 1)
    iy = np.clip(((xy[:, 1] - y0) / (y1 - y0) * k).astype(np.int64), 0, k - 1)
    counts = np.bincount(ix * k + iy, minlength=k * k)
    noisy = counts + discrete_laplace(2.0 / eps, k * k, rng)
    alloc = _allocate(np.maximum(noisy, 0), n, rng)
    cell = np.repeat(np.arange(k * k), alloc)
    u = (np.column_stack([cell // k, cell % k]) + rng.random((n, 2))) / k
    return np.column_stack([x0 + u[:, 0] * (x1 - x0), y0 + u[:, 1] * (y1 - y0)])


def privtree(xy, eps, bounds, rng, split=0.5, beta=4, theta=0.0, max_level=16) -> np.ndarray:
    """PrivTree (Zhang, Xiao, Xie 2016) quadtree under replace-one DP; returns n synthetic points."""
    x0, y0, x1, y1 = bounds
    n = len(xy)
    unit = np.column_stack([(xy[:, 0] - x0) / (x1 - x0), (xy[:, 1] - y0) / (y1 - y0)])
    P = max_level
    keys = np.sort(leaf_keys(unit, 2 * P))  # Hilbert keys: prefixes of 2l bits are quadtree squares
    eps_tree, eps_count = split * eps, (1.0 - split) * eps
    lam = (2 * beta - 1) / (beta - 1) * 2.0 / eps_tree  # x2: replace-one = remove + add
    delta = lam * math.log(beta)
    nodes = np.zeros(1, dtype=np.uint64)
    leaves_l, leaves_k = [], []
    for level in range(P + 1):
        sh = np.uint64(2 * (P - level))
        lo = np.searchsorted(keys, nodes << sh)
        hi = np.searchsorted(keys, (nodes + np.uint64(1)) << sh)
        c = (hi - lo).astype(float)
        b = np.maximum(c - level * delta, theta - delta)
        split_me = (b + rng.laplace(0.0, lam, len(nodes)) > theta) & (level < P)
        leaves_l.append(np.full((~split_me).sum(), level))
        leaves_k.append(nodes[~split_me])
        kids = nodes[split_me]
        if len(kids) == 0:
            break
        nodes = np.sort(((kids[:, None] << np.uint64(2)) | np.arange(4, dtype=np.uint64)[None, :]).ravel())
    lv = np.concatenate(leaves_l)
    lk = np.concatenate(leaves_k)
    sh = (2 * (P - lv)).astype(np.uint64)
    lo = np.searchsorted(keys, lk << sh)
    hi = np.searchsorted(keys, (lk + np.uint64(1)) << sh)
    noisy = (hi - lo) + discrete_laplace(2.0 / eps_count, len(lk), rng)
    alloc = _allocate(np.maximum(noisy, 0), n, rng)
    out = np.empty((n, 2))
    pos = 0
    for level in np.unique(lv):
        sel = lv == level
        reps = np.repeat(lk[sel], alloc[sel])
        if len(reps) == 0:
            continue
        u = leaf_boxes(reps, 2 * int(level), 2, rng) if level > 0 else rng.random((len(reps), 2))
        out[pos : pos + len(reps)] = u
        pos += len(reps)
    out = out[rng.permutation(n)]
    return np.column_stack([x0 + out[:, 0] * (x1 - x0), y0 + out[:, 1] * (y1 - y0)])


# --------------------------------------------------------------------------- W1 upper bound for large n
def _cell_ids(keys, P, cap):
    """Per point: id of its shallowest quadtree ancestor holding <= cap points (keys: Hilbert, depth 2P)."""
    n = len(keys)
    cell = np.full(n, -1, dtype=np.int64)
    lvl = np.zeros(n, dtype=np.int64)
    for level in range(P + 1):
        todo = np.flatnonzero(cell < 0)
        if len(todo) == 0:
            break
        node = (keys[todo] >> np.uint64(2 * (P - level))).astype(np.int64)
        _, inv, cnt = np.unique(node, return_inverse=True, return_counts=True)
        ok = (cnt[inv] <= cap) | (level == P)
        cell[todo[ok]] = node[ok]
        lvl[todo[ok]] = level
    return lvl * (1 << (2 * P + 1)) + cell


THREADS = 2  # POT's network simplex releases the GIL: cells are matched in this many threads


def _match_cell(pts, ia, ib):
    """Exact partial matching of the points ia against ib in one cell: (cost, indexes left over)."""
    na, nb = len(ia), len(ib)
    if na == 0 or nb == 0:
        return 0.0, (ia if na else ib)
    C = ot.dist(pts[ia], pts[ib], metric="euclidean")
    if na == nb:
        G = ot.emd(np.ones(na), np.ones(nb), C, numItermax=10_000_000)
        return float((G * C).sum()), ia[:0]
    if na > nb:  # partial transport: a dummy column takes the na - nb points left over
        G = ot.emd(np.ones(na), np.r_[np.ones(nb), na - nb], np.c_[C, np.zeros(na)], numItermax=10_000_000)
        return float((G[:, :-1] * C).sum()), ia[G[:, -1] > 0.5]
    G = ot.emd(np.r_[np.ones(na), nb - na], np.ones(nb), np.r_[C, np.zeros((1, nb))], numItermax=10_000_000)
    return float((G[:-1] * C).sum()), ib[G[-1] > 0.5]


def _local_pass(pts, who, bounds, cap, P=20):
    """Match the common mass inside quadtree cells of <= cap points; (cost, indexes left over)."""
    from concurrent.futures import ThreadPoolExecutor

    x0, y0, x1, y1 = bounds
    unit = np.clip((pts - [x0, y0]) / [x1 - x0, y1 - y0], 0.0, 1.0)
    cid = _cell_ids(leaf_keys(unit, 2 * P), P, cap)
    order = np.lexsort((who, cid))
    cs = cid[order]
    starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
    ends = np.r_[starts[1:], len(cs)]
    jobs = [(order[s:e][~who[order[s:e]]], order[s:e][who[order[s:e]]]) for s, e in zip(starts, ends)]
    if THREADS > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(THREADS) as pool:
            results = list(pool.map(lambda j: _match_cell(pts, *j), jobs, chunksize=16))
    else:
        results = [_match_cell(pts, *j) for j in jobs]
    cost = sum(r[0] for r in results)
    left = [r[1] for r in results if len(r[1])]
    return cost, (np.concatenate(left) if left else np.zeros(0, dtype=np.int64))


def _centroid_bound(a, b, bounds, cells=4000) -> float:
    """Total cost (not mean) of moving a and b to their own cell centroids plus the exact centroid transport."""
    x0, y0, x1, y1 = bounds
    ua = np.clip((a - [x0, y0]) / [x1 - x0, y1 - y0], 0.0, 1.0)
    ub = np.clip((b - [x0, y0]) / [x1 - x0, y1 - y0], 0.0, 1.0)
    depth = 2
    for d in range(2, 41, 2):
        if len(np.union1d(leaf_keys(ua, d), leaf_keys(ub, d))) > cells:
            break
        depth = d

    def centroids(u, w):
        _, inv, cnt = np.unique(leaf_keys(u, depth), return_inverse=True, return_counts=True)
        c = np.column_stack([np.bincount(inv, w[:, 0]) / cnt, np.bincount(inv, w[:, 1]) / cnt])
        return c, cnt.astype(float), float(np.hypot(*(w - c[inv]).T).sum())

    ca, ma, move_a = centroids(ua, a)
    cb, mb, move_b = centroids(ub, b)
    return move_a + move_b + float(ot.emd2(ma, mb, ot.dist(ca, cb, metric="euclidean"), numItermax=10_000_000))


LMB_STATS = {"runs": 0, "centroid_fallback": 0}


def local_matching_bound(a, b, bounds, cap=400, exact_left=5000, max_cap=6400) -> float:
    """Upper bound on W1 (same units as a, b) between two equal-size point sets.

    Local exact matching in quadtree cells of <= cap points, the leftovers re-matched in cells of
    <= 4 cap, 16 cap, ... points (up to max_cap), the last leftovers matched exactly when <= exact_left, else
    bounded through their cell centroids (the bound of geopriv.wasserstein_bound, applied to the
    leftovers only).  Every step is a feasible transport of the remaining mass, so the total is
    >= the exact W1 (and equal to it when n <= exact_left).
    """
    n = len(a)
    if len(b) != n:
        raise ValueError("local_matching_bound needs equal sizes")
    pts = np.vstack([a, b])
    who = np.r_[np.zeros(n, bool), np.ones(n, bool)]
    total, c = 0.0, cap
    LMB_STATS["runs"] += 1
    while len(pts) // 2 > exact_left and c <= max_cap:
        cost, left = _local_pass(pts, who, bounds, c)
        total += cost
        pts, who = pts[left], who[left]
        c *= 4
    m = len(pts) // 2
    if m > exact_left:
        LMB_STATS["centroid_fallback"] += 1
        total += _centroid_bound(pts[~who], pts[who], bounds)
    elif m:
        total += float(
            ot.emd2(np.ones(m), np.ones(m), ot.dist(pts[~who], pts[who], metric="euclidean"), numItermax=10_000_000)
        )
    return total / n


def exact_w1(true_xy, synth_xy, crs=CRS) -> float:
    return geopriv.wasserstein(as_series(true_xy, crs), as_series(synth_xy, crs))


# --------------------------------------------------------------------------- the 2-D comparison
METHODS = ("srw", "pmm", "grid", "privtree", "laplace")
LMB_EXACT = 5000  # LMB matches the last <= 5000 leftover points exactly (so for n <= 5000 it is the exact W1)
K_LADDER = [round(4 * 2 ** (i / 2)) for i in range(15)]  # 4 .. 512, steps of sqrt 2


def release(method, true_xy, gdf, eps, seed, D, k=None):
    if method in ("srw", "pmm"):
        s = gdf.priv.synthesize(eps, bounds=BOX, method=method, rng=seed)
        return coords(s), s.attrs["geopriv"]["depth"]
    if method == "laplace":
        return coords(gdf.priv.perturb(eps / D, bounds=BOX, rng=seed)), None
    rng = np.random.default_rng(seed)
    if method == "grid":
        return grid_histogram(true_xy, eps, k, BOX, rng), k
    if method == "privtree":
        return privtree(true_xy, eps, BOX, rng), None
    raise ValueError(method)


def choose_k(true_xy, eps, seed, k_hint=None, window=2, widen=True):
    """Best k (oracle, on the true data, by W1: exact up to LMB_EXACT points, else LMB) near k_hint.

    Returns (k, {k: (released points, W1)}): the runs are reused for mechanism seed ``seed``.
    """
    ladder = K_LADDER
    if k_hint is not None:
        i = min(range(len(ladder)), key=lambda j: abs(math.log(ladder[j] / k_hint)))
        ladder = ladder[max(0, i - window) : i + window + 1]
    tried = {}
    for k in ladder:
        out = grid_histogram(true_xy, eps, k, BOX, np.random.default_rng(seed))
        tried[k] = (out, local_matching_bound(true_xy, out, BOX, exact_left=LMB_EXACT))
    # widen the search if the best is at the edge of the window (not at the largest sizes: LMB takes ~1 min there)
    while True:
        best = min(tried, key=lambda k: tried[k][1])
        j = K_LADDER.index(best)
        nxt = [K_LADDER[i] for i in (j - 1, j + 1) if 0 <= i < len(K_LADDER) and K_LADDER[i] not in tried]
        if not nxt or not widen:
            return best, tried
        for k in nxt:
            out = grid_histogram(true_xy, eps, k, BOX, np.random.default_rng(seed))
            tried[k] = (out, local_matching_bound(true_xy, out, BOX, exact_left=LMB_EXACT))


def run_2d(args, log):
    eps = args.epsilon
    D = diameter_m(CRS, BOX)
    exact_sizes = [int(v) for v in args.exact_sizes.split(",") if v]
    large_sizes = [int(v) for v in args.large_sizes.split(",") if v]
    log(
        f"public area: 10 km x 10 km box in UTM 33N {BOX}, diameter D = {D:.0f} m; epsilon = {eps:g}; "
        f"laplace at eps/D = {eps / D:.3g} per metre (mean displacement 2D/eps = {2 * D / eps / 1000:.1f} km before truncation)"
    )
    rows = []  # dicts
    k_hint, n_prev = None, None
    for n in exact_sizes + large_sizes:
        exact_ok = n <= args.exact_max
        seeds = args.seeds if n in exact_sizes else args.large_seeds
        t0 = time.perf_counter()
        # k grows like (eps n)^(1/3) (cell size against the clipped noise of k^2 cells): search around that
        k, tried = choose_k(
            clustered(n, 1001),
            eps,
            1,
            None if k_hint is None else k_hint * (n / n_prev) ** (1 / 3),
            window=1 if n > 100_000 else 2,
            widen=n <= 100_000,
        )
        for s in range(1, seeds + 1):
            true_xy = clustered(n, 1000 + s)
            gdf = gpd.GeoDataFrame(geometry=as_series(true_xy))
            top = n == max(exact_sizes) and s > args.exact_seeds_top
            for m in METHODS:
                t = time.perf_counter()
                out, extra = release(m, true_xy, gdf, eps, s, D, k)
                t_rel = time.perf_counter() - t
                cached = None
                if m == "grid" and s == 1:  # the same run as in choose_k (data seed 1001, mechanism seed 1)
                    assert np.array_equal(out, tried[k][0])
                    cached = tried[k][1]
                row = {"n": n, "seed": s, "method": m, "param": extra, "t_release": t_rel}
                t = time.perf_counter()
                if exact_ok and not top and (m != "laplace" or n <= args.laplace_exact_max):
                    row["exact"] = exact_w1(true_xy, out)
                if m != "laplace" and n > LMB_EXACT:  # below LMB_EXACT points LMB is the exact W1 itself
                    row["lmb"] = (
                        cached if cached is not None else local_matching_bound(true_xy, out, BOX, exact_left=LMB_EXACT)
                    )
                if not exact_ok or (m == "laplace" and "exact" not in row):
                    row["wb"] = geopriv.wasserstein_bound(as_series(true_xy), as_series(out))
                row["t_metric"] = time.perf_counter() - t
                rows.append(row)
        k_hint, n_prev = k, n
        log(
            f"  n = {n:>9,}: {seeds} seed(s), grid k = {k} (tried {sorted(tried)}), {time.perf_counter() - t0:.0f} s; "
            + ", ".join(
                f"{m} "
                + "/".join(
                    f"{r.get('exact', r.get('lmb', r.get('wb', float('nan')))):.0f}"
                    for r in rows
                    if r["n"] == n and r["method"] == m
                )
                for m in METHODS
            )
        )
    return rows, D


def summarise_2d(rows, args):
    import collections

    cells = collections.defaultdict(list)
    for r in rows:
        cells[(r["n"], r["method"])].append(r)
    sizes = sorted({r["n"] for r in rows})
    lines = []
    lines.append("| n | metric | " + " | ".join(METHODS) + " | best baseline / srw |")
    lines.append("|---|---|" + "---|" * len(METHODS) + "---|")
    summary = {}
    for n in sizes:
        for metric, label in (("exact", "exact W1"), ("lmb", "LMB (upper bound)"), ("wb", "wasserstein_bound")):
            vals = {}
            for m in METHODS:
                v = [r[metric] for r in cells[(n, m)] if metric in r]
                if v:
                    vals[m] = (float(np.mean(v)), float(np.std(v)), len(v))
            if not vals:
                continue
            summary[(n, metric)] = vals
            txt = []
            for m in METHODS:
                if m in vals:
                    mu, sd, c = vals[m]
                    txt.append(f"{mu:,.1f} ± {sd:,.1f} ({c})" if c > 1 else f"{mu:,.1f} (1)")
                else:
                    txt.append("")
            ratio = ""
            if "srw" in vals:
                base = [vals[m][0] for m in ("grid", "privtree", "laplace") if m in vals]
                if base:
                    ratio = f"{min(base) / vals['srw'][0]:.2f}"
            lines.append(f"| {n:,} | {label} | " + " | ".join(txt) + f" | {ratio} |")
            if metric == "lmb":
                cal = []
                for m in METHODS:
                    both = [r["lmb"] / r["exact"] for r in cells[(n, m)] if "lmb" in r and "exact" in r]
                    cal.append(f"{np.mean(both):.3f} ({len(both)})" if both else "")
                if any(cal):
                    lines.append(f"| {n:,} | LMB / exact, same runs | " + " | ".join(cal) + " | |")
    # parameters
    params = []
    for n in sizes:
        d_srw = sorted({r["param"] for r in cells[(n, "srw")]})
        d_pmm = sorted({r["param"] for r in cells[(n, "pmm")]})
        k = sorted({r["param"] for r in cells[(n, "grid")]})
        t = {m: np.median([r["t_release"] for r in cells[(n, m)]]) for m in METHODS}
        params.append(f"| {n:,} | {d_srw} | {d_pmm} | {k} | " + " | ".join(f"{t[m]:.2f}" for m in METHODS) + " |")
    return lines, params, summary


def plot_2d(summary, slopes_1d, args, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.3))
    ax = axes[0]
    colors = {"srw": "C0", "pmm": "C1", "grid": "C2", "privtree": "C4", "laplace": "C3"}
    for m in METHODS:
        # exact where computed; beyond: LMB (laplace: wasserstein_bound, its W1 is kilometres)
        for metric, style, lab in (
            ("exact", "-o", "exact"),
            ("lmb", "--s", "LMB upper bound"),
            ("wb", ":^", "wasserstein_bound"),
        ):
            if (metric == "wb") != (m == "laplace") and metric != "exact":
                continue
            pts = sorted((n, v[m][0]) for (n, mt), v in summary.items() if mt == metric and m in v)
            if metric == "lmb":  # dashed LMB only beyond the exact sizes (plus the last exact one, to join)
                ex = [n for (n, mt), v in summary.items() if mt == "exact" and m in v]
                pts = [p for p in pts if not ex or p[0] >= max(ex)]
            if metric == "wb":
                ex = [n for (n, mt), v in summary.items() if mt == "exact" and m in v]
                pts = [p for p in pts if not ex or p[0] > max(ex)]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(
                    xs, ys, style, color=colors[m], ms=4, lw=1.3 if metric == "exact" else 1.0, label=f"{m} ({lab})"
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (people = synthetic points)")
    ax.set_ylabel("W1 to the true points (m)")
    ax.set_title(f"2-D clustered data, 10 km box, epsilon = {args.epsilon:g}", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=6.5, ncol=2, loc="lower left")
    ax = axes[1]
    if slopes_1d:
        for kind, ls in (("smooth", "-"), ("rough", "--")):
            if kind not in slopes_1d:
                continue
            ns, curves = slopes_1d[kind]
            for name, c in (
                ("srw (auto depth)", "C0"),
                ("classical walk (srw's depth)", "C3"),
                ("classical walk (best depth)", "C2"),
            ):
                ys, slope = curves[name]
                ax.plot(ns, ys, ls, marker="o", color=c, ms=3, lw=1.1, label=f"{kind}: {name}, slope {slope:.2f}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_ylabel("exact W1 on [0, 1]")
        ax.set_title(f"1-D: synthesize_xy vs classical random walk, epsilon = {args.epsilon:g}", fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=6.5)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --------------------------------------------------------------------------- 1-D
ATOMS_1D = np.sort(np.random.default_rng(12345).random(64))  # fixed centres of the "rough" 1-D data


def data_1d(n, seed, kind="smooth"):
    """1-D data on [0, 1]: "smooth" = 0.6 Beta(2, 6) + 0.4 Beta(30, 8); "rough" = 64 narrow clusters
    (sd 1e-4, fixed centres, Zipf-like weights): fine structure at every scale a tree can resolve."""
    r = np.random.default_rng(seed)
    if kind == "smooth":
        pick = r.random(n) < 0.6
        return np.where(pick, r.beta(2.0, 6.0, n), r.beta(30.0, 8.0, n))
    w = 1.0 / np.arange(1, len(ATOMS_1D) + 1)
    c = r.choice(len(ATOMS_1D), size=n, p=w / w.sum())
    return np.clip(ATOMS_1D[c] + r.normal(size=n) * 1e-4, 0.0, 1.0)


def w1_1d(a, b) -> float:
    return float(np.abs(np.sort(a) - np.sort(b)).mean())


def classical_points(x, depth, eps, rng):
    counts = classical_walk_counts(leaf_keys(x, depth), depth, eps, rng)
    alloc = _allocate(counts, len(x), rng)
    leaves = np.repeat(np.arange(1 << depth, dtype=np.uint64), alloc)
    return leaf_boxes(leaves, depth, 1, rng)[:, 0]


SERIES_1D = (
    "srw (auto depth)",
    "pmm (auto depth)",
    "srw (best depth)",
    "classical walk (srw's depth)",
    "classical walk (best depth)",
)


def run_1d(args, log):
    """W1 against n in 1-D for the two data kinds; returns (text lines, {kind: (ns, {series: (ys, slope)})})."""
    eps = args.epsilon
    ns = [int(v) for v in args.sizes_1d.split(",")]
    seeds = args.seeds_1d
    lines, curves_all = [], {}
    for kind in ("smooth", "rough"):
        res = {k: [] for k in SERIES_1D}
        lines += [
            "",
            (
                f"**{kind} data** (W1 on [0, 1], mean of {seeds} seeds; best depths are oracle choices on the "
                "true data, shown as srw / classical):"
            ),
            "",
            "| n | auto depth srw / pmm | " + " | ".join(SERIES_1D) + " | best depth srw / classical |",
            "|---|---|" + "---|" * len(SERIES_1D) + "---|",
        ]
        for n in ns:
            depth = PrivateMeasure(eps, "srw", dim=1).resolved_depth(n)
            d_pmm = PrivateMeasure(eps, "pmm", dim=1).resolved_depth(n)
            w = {k: [] for k in SERIES_1D}
            srw_d, cls_d = {}, {}
            for s in range(1, seeds + 1):
                x = data_1d(n, 2000 + s, kind)
                w["srw (auto depth)"].append(w1_1d(x, geopriv.synthesize_xy(x, eps, bounds=(0, 1), rng=s)))
                w["pmm (auto depth)"].append(
                    w1_1d(x, geopriv.synthesize_xy(x, eps, bounds=(0, 1), method="pmm", rng=s))
                )
                for L in range(max(2, depth - 7), depth + 3):
                    srw_d.setdefault(L, []).append(
                        w1_1d(x, geopriv.synthesize_xy(x, eps, bounds=(0, 1), depth=L, rng=100 + s))
                    )
                rng = np.random.default_rng(s)
                for L in range(max(2, depth - 7), depth + 5):
                    cls_d.setdefault(L, []).append(w1_1d(x, classical_points(x, L, eps, rng)))
            best_s = min(srw_d, key=lambda L: np.mean(srw_d[L]))
            best_c = min(cls_d, key=lambda L: np.mean(cls_d[L]))
            w["srw (best depth)"] = srw_d[best_s]
            w["classical walk (srw's depth)"] = cls_d[depth]
            w["classical walk (best depth)"] = cls_d[best_c]
            for k in SERIES_1D:
                res[k].append(float(np.mean(w[k])))
            lines.append(
                f"| {n:,} | {depth} / {d_pmm} | "
                + " | ".join(f"{res[k][-1]:.3g}" for k in SERIES_1D)
                + f" | {best_s} / {best_c} |"
            )
            log(f"  1-D {kind} n = {n:>9,}: " + ", ".join(f"{k} {res[k][-1]:.3g}" for k in SERIES_1D))
        logn = np.log(ns)
        curves = {k: (ys, float(np.polyfit(logn, np.log(ys), 1)[0])) for k, ys in res.items()}
        curves_all[kind] = (ns, curves)
        lines += ["", f"Fitted log-log slopes ({kind}): " + "; ".join(f"{k} {c[1]:.2f}" for k, c in curves.items())]
    return lines, curves_all


# --------------------------------------------------------------------------- W1 against depth
def _fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def run_depth(args, log):
    eps = args.epsilon
    lines = ["| data | n | method | auto depth | W1 by depth (metric) | best depth |", "|---|---|---|---|---|---|"]
    cases = [(int(v), "exact" if int(v) <= 3000 else "lmb") for v in args.depth_sizes.split(",") if v]
    for n, metric in cases:
        for m in ("srw", "pmm"):
            auto = PrivateMeasure(eps, m).resolved_depth(n)
            vals = {}
            span = 3 if n <= 100_000 else 2  # LMB at 1M takes ~30-60 s per run
            for L in range(max(2, auto - span), auto + span + 1):
                ws = []
                for s in range(1, (args.depth_seeds if n <= 100_000 else 1) + 1):
                    true_xy = clustered(n, 3000 + s)
                    gdf = gpd.GeoDataFrame(geometry=as_series(true_xy))
                    out = coords(gdf.priv.synthesize(eps, bounds=BOX, method=m, depth=L, rng=s))
                    ws.append(exact_w1(true_xy, out) if metric == "exact" else local_matching_bound(true_xy, out, BOX))
                vals[L] = float(np.mean(ws))
            best = min(vals, key=vals.get)
            txt = ", ".join(f"{L}: {_fmt(v)}" + ("*" if L == auto else "") for L, v in vals.items())
            lines.append(f"| clustered 2-D | {n:,} | {m} | {auto} | {txt} ({metric}) | {best} |")
            log(f"  depth scan n={n} {m}: auto {auto}, best {best}: {txt}")
    # Soho
    deaths, _, _ = soho_data()
    xy = coords(deaths)
    for m in ("srw", "pmm"):
        auto = PrivateMeasure(eps, m).resolved_depth(len(xy))
        vals = {}
        for L in range(max(2, auto - 3), auto + 4):
            ws = [
                geopriv.wasserstein(deaths, deaths.priv.synthesize(eps, bounds=SOHO_BOUNDS, method=m, depth=L, rng=s))
                for s in range(1, 11)
            ]
            vals[L] = float(np.mean(ws))
        best = min(vals, key=vals.get)
        txt = ", ".join(f"{L}: {_fmt(v)}" + ("*" if L == auto else "") for L, v in vals.items())
        lines.append(f"| Soho deaths | {len(xy)} | {m} | {auto} | {txt} (exact, 10 seeds) | {best} |")
        log(f"  depth scan Soho {m}: auto {auto}, best {best}: {txt}")
    return lines


# --------------------------------------------------------------------------- Soho
def soho_data():
    deaths = gpd.read_file(SOHO_GPKG, layer="deaths")[["geometry"]]
    pumps = gpd.read_file(SOHO_GPKG, layer="pumps")
    # no name column: the Broad Street pump is the pump nearest the most deaths
    near = nearest_pump(coords(deaths), coords(pumps))
    broad = int(np.bincount(near, minlength=len(pumps)).argmax())
    return deaths, pumps, broad


def nearest_pump(xy, pumps_xy):
    d = np.hypot(xy[:, None, 0] - pumps_xy[None, :, 0], xy[:, None, 1] - pumps_xy[None, :, 1])
    return d.argmin(axis=1)


def run_soho(args, log):
    deaths, pumps, broad = soho_data()
    pxy = coords(pumps)
    xy = coords(deaths)
    n = len(xy)
    true_share = np.bincount(nearest_pump(xy, pxy), minlength=len(pxy)) / n
    D = diameter_m(3857, SOHO_BOUNDS)
    epsilons = [float(v) for v in args.soho_eps.split(",")]
    seeds = args.soho_seeds
    order = [broad] + [i for i in np.argsort(-true_share) if i != broad][:3]
    lines = [
        (
            f"Public area {SOHO_BOUNDS} (EPSG:3857), ground diameter D = {D:.0f} m; n = {n}; "
            f"Broad Street pump = pump row {broad} (nearest to the most deaths; the layer has no name column); "
            f"{seeds} seeds per cell; share = fraction of points whose nearest pump is that pump (mean ± sd)."
        ),
        "",
        "| epsilon | method | depth | exact W1 (m) | Broad St share | pump "
        + " | pump ".join(str(i) for i in order[1:])
        + " | TV distance of shares |",
        "|---|---|---|---|---|" + "---|" * (len(order) - 1) + "---|",
        "| - | truth | - | 0 | " + " | ".join(f"{true_share[i]:.3f}" for i in order) + " | 0 |",
    ]
    keep = {}
    for eps in epsilons:
        for m in ("srw", "pmm", "laplace"):
            ws, shares, tvs, depth = [], [], [], None
            for s in range(1, seeds + 1):
                if m == "laplace":
                    out = deaths.priv.perturb(eps / D, bounds=SOHO_BOUNDS, rng=s)
                else:
                    out = deaths.priv.synthesize(eps, bounds=SOHO_BOUNDS, method=m, rng=s)
                    depth = out.attrs["geopriv"]["depth"]
                ws.append(geopriv.wasserstein(deaths, out))
                sh = np.bincount(nearest_pump(coords(out), pxy), minlength=len(pxy)) / n
                shares.append(sh)
                tvs.append(0.5 * np.abs(sh - true_share).sum())
                if s == 1:
                    keep[(eps, m)] = (out, ws[-1], sh[broad])
            shares = np.array(shares)
            lines.append(
                f"| {eps:g} | {m} | {depth if depth is not None else '-'} | {np.mean(ws):.0f} ± {np.std(ws):.0f} | "
                + " | ".join(f"{shares[:, i].mean():.3f} ± {shares[:, i].std():.3f}" for i in order)
                + f" | {np.mean(tvs):.3f} |"
            )
            log(
                f"  Soho eps={eps:g} {m}: W1 {np.mean(ws):.0f} m, Broad St share {shares[:, broad].mean():.3f} "
                f"(truth {true_share[broad]:.3f})"
            )
    return lines, (deaths, pumps, broad, true_share, keep)


def plot_soho(state, eps_plot, method, path=None):
    """The true deaths beside one synthetic release (seed 1), on one extent; returns the Figure.

    ``state`` is what :func:`run_soho` returns second: (deaths, pumps, broad, true_share, keep), keep
    mapping (epsilon, method) to (release, W1, Broad Street share).  Written to ``path`` unless None.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from geopriv.plot import style_map
    from geopriv.provenance import mechanism_name

    deaths, pumps, broad, true_share, keep = state
    out, w, share = keep[(eps_plot, method)]
    pxy = coords(pumps)
    x0, y0, x1, y1 = SOHO_BOUNDS
    name = mechanism_name(out.attrs.get("geopriv", {}).get("mechanism", method))
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 6.6), sharex=True, sharey=True, layout="constrained")
    for ax, pts, label, title in (
        (axes[0], coords(deaths), "death (true address)", f"True deaths (n = {len(deaths)})"),
        (axes[1], coords(out), "synthetic point", f"Synthetic points, seed 1 (n = {len(out)})"),
    ):
        ax.plot([x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0], color="0.4", lw=1.0, ls="--", label="public area")
        ax.scatter(pts[:, 0], pts[:, 1], s=8, c="k", alpha=0.7, lw=0, label=label, zorder=3)
        ax.annotate(
            "Broad Street pump",
            pxy[broad],
            xytext=(pxy[broad, 0] + 120, pxy[broad, 1] - 330),
            fontsize=8.5,
            color="0.15",
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.3", "lw": 0.6, "alpha": 0.9},
            arrowprops={"arrowstyle": "-", "color": "0.3", "lw": 0.9},
            zorder=6,
        )
        ax.set_title(title, fontsize=10)
        ax.set_xlim(x0 - 40, x1 + 40)
        ax.set_ylim(y0 - 40, y1 + 40)
        style_map(ax, 3857, context="soho_pumps", note=ax is axes[1])
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=2, fontsize=8, frameon=False)
    fig.suptitle(
        f"Snow's Soho cholera deaths and a synthetic copy: {name}, ε = {eps_plot:g}\n(one person's location "
        "replaced anywhere in the dashed public area; the number of people is public)\n"
        f"exact Wasserstein distance W1 = {w:.0f} m; share of points nearest the Broad Street pump: "
        f"true {true_share[broad]:.2f}, synthetic {share:.2f}",
        fontsize=10,
    )
    if path is not None:
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return fig


# --------------------------------------------------------------------------- results file
def write_section(name: str, text: str, path: Path = RESULTS):
    """Replace (or append) the section ``name`` of the results file, keeping the others."""
    path.parent.mkdir(parents=True, exist_ok=True)
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    old = path.read_text() if path.exists() else "# geopriv.synthesize: benchmark results\n\n"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    if begin in old and end in old:
        new = old[: old.index(begin)] + block + old[old.index(end) + len(end) + 1 :]
    else:
        new = old.rstrip() + "\n\n" + block
    path.write_text(new)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--exact-sizes", default="300,1000,3000,10000")
    ap.add_argument("--large-sizes", default="100000,1000000")
    ap.add_argument("--exact-max", type=int, default=10_000, help="largest n with exact W1")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per cell at the exact sizes")
    ap.add_argument("--exact-seeds-top", type=int, default=1, help="seeds with exact W1 at the largest exact size")
    ap.add_argument("--large-seeds", type=int, default=1)
    ap.add_argument(
        "--laplace-exact-max",
        type=int,
        default=3000,
        help="largest n with exact W1 for laplace (beyond: wasserstein_bound; its W1 is kilometres)",
    )
    ap.add_argument("--sizes-1d", default="1000,3000,10000,30000,100000,300000,1000000")
    ap.add_argument("--seeds-1d", type=int, default=3)
    ap.add_argument("--depth-sizes", default="3000", help="sizes of the depth scan (> 3000: LMB, slow)")
    ap.add_argument("--depth-seeds", type=int, default=2)
    ap.add_argument("--soho-eps", default="1,2,5")
    ap.add_argument("--soho-seeds", type=int, default=10)
    ap.add_argument("--soho-plot-eps", type=float, default=2.0)
    ap.add_argument("--parts", default="2d,1d,depth,soho")
    ap.add_argument("--threads", type=int, default=2, help="threads matching LMB cells (POT releases the GIL)")
    ap.add_argument("--no-write", action="store_true", help="print only: do not write the results file or figures")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    global THREADS
    THREADS = args.threads
    warnings.simplefilter("ignore", category=UserWarning)
    t_start = time.perf_counter()

    def log(msg):
        print(msg, flush=True)

    command = "`" + " ".join(["python bench/synthesize_eval.py", *(sys.argv[1:] if argv is None else argv)]) + "`"

    slopes = None
    if "1d" in parts:
        log("== 1-D rate check")
        t = time.perf_counter()
        lines_1d, slopes = run_1d(args, log)
        text = (
            f"### 1-D rate check (synthesize_xy on [0, 1], epsilon = {args.epsilon:g})\n\n"
            "Exact 1-D W1 by sorting; data and mechanism seeds vary together.  The classical random walk is "
            "discrete Laplace noise on every leaf count (`classical_walk_counts`), clipped, rescaled to n, points "
            "uniform in leaves; at the srw's auto depth and at its own best depth.  Theory (worst case over data): "
            "about n^-1 (up to log factors) for srw; n^-1/2 for a classical walk with ~n leaves (about n^-2/3 with "
            "the best leaf count).\n" + "\n".join(lines_1d) + f"\n\n({time.perf_counter() - t:.0f} s)"
        )
        print(text)
        if not args.no_write:
            write_section("eval-1d", text + "\n\nCommand: " + command)
    if "2d" in parts:
        log("== 2-D W1 against n")
        t = time.perf_counter()
        rows, D = run_2d(args, log)
        table, params, summary = summarise_2d(rows, args)
        text = (
            f"### 2-D W1 (metres) against n: clustered data in a 10 km box, epsilon = {args.epsilon:g}\n\n"
            f"Mean ± sd (number of seeds).  `exact` = `geopriv.wasserstein` (POT); `LMB` = the local-matching "
            f"upper bound of bench/synthesize_eval.py (a real matching's cost; compare it with `exact` where both "
            f"exist); `wasserstein_bound` = the library's bound with 4000 cells (resolution floor ~100 m here).  "
            f"laplace = planar Laplace at eps / D per metre, D = {D:.0f} m.  grid k: best of a ladder on the "
            f"true data (oracle).  Last column: the best of grid / privtree / laplace divided by srw "
            f"(> 1: srw wins).\n\n"
            + "\n".join(table)
            + "\n\nAuto depths, grid k and median release time (s) per method ("
            + ", ".join(METHODS)
            + "):\n\n"
            "| n | srw depth | pmm depth | grid k | "
            + " | ".join(f"t {m}" for m in METHODS)
            + " |\n|---|---|---|---|"
            + "---|" * len(METHODS)
            + "\n"
            + "\n".join(params)
            + f"\n\nLMB runs: {LMB_STATS['runs']}, of which {LMB_STATS['centroid_fallback']} bounded their last leftovers "
            "through cell centroids (more than 5000 left after the local passes)."
            + f"\n\n({time.perf_counter() - t:.0f} s)"
        )
        print(text)
        if not args.no_write:
            write_section("eval-2d", text + "\n\nCommand: " + command)
            PLOT.parent.mkdir(parents=True, exist_ok=True)
            plot_2d(summary, slopes, args, PLOT)
    if "depth" in parts:
        log("== W1 against the tree depth")
        t = time.perf_counter()
        lines = run_depth(args, log)
        text = (
            f"### W1 (metres) against the tree depth, epsilon = {args.epsilon:g}\n\n"
            f"Mean over {args.depth_seeds} seeds (1 above 100k; Soho: 10); * = the auto depth; data seeds 3001.. "
            "(not those of the main table).\n\n" + "\n".join(lines) + f"\n\n({time.perf_counter() - t:.0f} s)"
        )
        print(text)
        if not args.no_write:
            write_section("eval-depth", text + "\n\nCommand: " + command)
    if "soho" in parts:
        log("== Soho")
        t = time.perf_counter()
        lines, state = run_soho(args, log)
        text = "### Soho cholera deaths (324 points)\n\n" + "\n".join(lines) + f"\n\n({time.perf_counter() - t:.0f} s)"
        print(text)
        if not args.no_write:
            write_section("eval-soho", text + "\n\nCommand: " + command)
            plot_soho(state, args.soho_plot_eps, "srw", SOHO_PNG)
            log(f"wrote {SOHO_PNG} ({SOHO_PNG.stat().st_size / 1024:.0f} KB)")
    log(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
