"""Attacks on released GeoLife query traces: home inference and top-2 places re-identification (issue 34).

Data: ../shared/data/geolife_users_000_009.parquet (1.85 M fixes of GeoLife users 000-009; needs
pyarrow), read from the folder named by ``GEOPRIV_DATA`` (default ``../shared/data`` beside the
checkout) or ``--data PATH``; fixes outside the declared Beijing box are left out (1.68 M stay).

Protocol.  The *truth* is every GPS fix of a user (ten users).  Queries are sampled from each
trajectory with :func:`geopriv.sample_queries` (paper protocol, p = probability of a 60 min jump;
``REPS`` samplings per p), and each trajectory is a trace with its own budget, as in
``bench/traces_eval.py`` and docs/traces.md: ln 10 within 100 m per trace (epsilon = ln(10)/100
per metre), fixed rate 3.3 % per query (about 30 queries), the paper's configuration (parrot,
eta 0.5, gamma 0.8; ``geopriv.sanitize_traces``'s defaults).  Releases compared:

* ``raw``: the sampled queries themselves (what an unprotected service sees);
* ``predictive``: ``gdf.priv.sanitize_traces(..., method="predictive")``;
* ``independent``: planar Laplace on every query, same total budget and rate per trace
  (``method="independent"``);

and, to show where the leak starts, the same two mechanisms with 10 and 100 times the budget
(ln 10 within 10 m and within 1 m per trace).

Attacks (:mod:`geopriv.attacks`), with the user as the person (a user's traces pooled; users
have 28 to 395 trajectories, each released with its own budget):

* home: the centre of the 200 m grid cell (UTM 50N) holding most of a user's night-time points
  (22:00-06:00 Beijing time); hit if within 200 m / 500 m of the home the user's fixes give;
* top-2: a user's two most visited 200 m cells (unordered); re-identified if exactly one user's
  fixes give the same pair, and it is them (also with 1 km cells);
* per query: median displacement of the released queries (m), share of queries released, and
  at ln 10 within 100 m the median error of the optimal Bayesian adversary's guesses
  (:func:`geopriv.adversary_error`, Shokri et al. 2011) modelling one query's noise of the
  independent release (planar Laplace at 3.3 % of the trace's budget) on a 1 km grid over the
  Beijing box in UTM 50N, with a uniform prior and with the density of all ten users' fixes as
  prior (an adversary who knows where this population goes); for the predictive release the
  same remapping is applied although its noise differs from query to query.

    GEOPRIV_DATA=/path/to/data timeout 900 python bench/attacks_geolife.py [--reps 3] [--out bench/results/attacks_geolife.md]

About 5 minutes on 2 cores with 3 samplings for each of p = 0, 0.3, 1 (295 s measured).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd

import geopriv
from geopriv.adversary import adversary_error
from geopriv.attacks import home_attack, home_inference, query_error, top_places_attack, top_places_uniqueness
from geopriv.metrics import ground_distance

ROOT = Path(__file__).resolve().parents[1]
PARQUET = "geolife_users_000_009.parquet"
DATA_DIR = Path(os.environ.get("GEOPRIV_DATA") or ROOT.parent / "shared" / "data")
DATA = DATA_DIR / PARQUET
#: public study area (lon/lat): Beijing municipality's bounding box, declared, not measured from the data
BOUNDS = (115.4, 39.4, 117.6, 41.1)
TZ = "Asia/Shanghai"
RATE = 0.033
#: (label, epsilon per metre per trace)
BUDGETS = (("ln 10 / 100 m", math.log(10) / 100), ("ln 10 / 10 m", math.log(10) / 10), ("ln 10 / 1 m", math.log(10)))
PS = (0.0, 0.3, 1.0)


def load(path: Path) -> gpd.GeoDataFrame:
    if not path.is_file():
        sys.exit(
            f"The GeoLife benchmark data {path} does not exist. Put {PARQUET} in a folder and run with "
            f"GEOPRIV_DATA=/that/folder, or pass --data /path/to/{PARQUET}."
        )
    try:
        g = gpd.read_parquet(path)
    except ImportError:
        sys.exit("Reading GeoParquet needs pyarrow: pip install pyarrow (or pip install 'geopriv[bench]').")
    return g.cx[BOUNDS[0] : BOUNDS[2], BOUNDS[1] : BOUNDS[3]]


def adversaries(fixes) -> dict:
    """One query's adversary at the paper's budget: uniform prior, and the density of all fixes as prior."""
    from pyproj import Transformer

    tr = Transformer.from_crs(4326, 32650, always_xy=True)
    xs, ys = tr.transform([BOUNDS[0], BOUNDS[2], BOUNDS[0], BOUNDS[2]], [BOUNDS[1], BOUNDS[1], BOUNDS[3], BOUNDS[3]])
    rect = (
        math.floor(min(xs) / 1e4) * 1e4,
        math.floor(min(ys) / 1e4) * 1e4,
        math.ceil(max(xs) / 1e4) * 1e4,
        math.ceil(max(ys) / 1e4) * 1e4,
    )  # the box in UTM 50N, 10 km round
    eps = BUDGETS[0][1] * RATE
    uniform = adversary_error(epsilon=eps, area=rect, crs=32650, cell=1000)
    t, (ny, nx) = uniform.transform, uniform.shape
    xy = fixes.to_crs(32650).get_coordinates().to_numpy()
    col = np.floor((xy[:, 0] - t.c) / t.a).astype(np.int64)
    row = np.floor((xy[:, 1] - t.f) / t.e).astype(np.int64)
    ok = (col >= 0) & (col < nx) & (row >= 0) & (row < ny)
    density = np.bincount(row[ok] * nx + col[ok], minlength=nx * ny).reshape(ny, nx).astype(float)
    known = adversary_error(epsilon=eps, area=rect, crs=32650, cell=1000, prior=density)
    return {"uniform": uniform, "fixes": known}


def attack(fixes, q, released, advs=None) -> dict:
    """Every attack on one release (``released`` rows without a point were not released)."""
    home = home_attack(fixes, released, person="user", time="t", tz=TZ).attrs["summary"]
    top = top_places_attack(fixes, released, person="user", n=2).attrs["summary"]
    top1k = top_places_attack(fixes, released, person="user", n=2, cell=1000).attrs["summary"]
    row = {
        "home_200m": home["hit_rate_200m"],
        "home_500m": home["hit_rate_500m"],
        "home_median_m": home["median_distance_m"],
        "homes_inferred": home["inferred"] / max(home["persons"], 1),
        "top2_reid": top["reidentification_rate"],
        "top2_reid_1km": top1k["reidentification_rate"],
        "top2_unique_match": top["unique_match_rate"],
    }
    if released is q:
        row.update(query_median_m=0.0, released_share=1.0)
    else:
        err = query_error(q, released).attrs["summary"]
        row.update(query_median_m=err["displacement_median_m"], released_share=err["n"] / len(q))
        for name, adv in (advs or {}).items():
            row[f"adv_{name}_median_m"] = query_error(q, released, adversary=adv).attrs["summary"][
                "adversary_error_median_m"
            ]
    return row


def baseline(fixes) -> dict:
    """Hit rates of a guess made without any release: everyone's home is the pooled night-time home of all users."""
    true = home_inference(fixes, person="user", time="t", tz=TZ)
    pooled = home_inference(fixes.assign(everyone="all"), person="everyone", time="t", tz=TZ)
    guess = pooled.geometry.iloc[0]
    xy = true.get_coordinates().to_numpy()
    d = ground_distance(true.geometry, xy, np.repeat([[guess.x, guess.y]], len(xy), axis=0))
    return {"base_200m": float((d <= 200).mean()), "base_500m": float((d <= 500).mean())}


def run(fixes, reps: int, seed: int, advs: dict) -> pd.DataFrame:
    rows = []
    for p in PS:
        t0 = time.perf_counter()
        for rep in range(reps):
            q = geopriv.sample_queries(
                fixes, traj_id="trajectory_id", time="t", p=p, rng=seed + 1000 * rep + round(100 * p)
            )
            q = q.cx[BOUNDS[0] : BOUNDS[2], BOUNDS[1] : BOUNDS[3]]
            rows.append(dict(release="raw", budget="-", p=p, rep=rep, **attack(fixes, q, q)))
            for label, eps in BUDGETS:
                for method in ("predictive", "independent"):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", geopriv.DistortionWarning)
                        warnings.simplefilter("ignore", geopriv.WeakProtectionWarning)
                        out = q.priv.sanitize_traces(
                            eps,
                            traj_id="trajectory_id",
                            time="t",
                            method=method,
                            rate=RATE,
                            bounds=BOUNDS,
                            rng=seed + 7 * rep + 1,
                        )
                    at_paper = label == BUDGETS[0][0]
                    rows.append(
                        dict(
                            release=method,
                            budget=label,
                            p=p,
                            rep=rep,
                            **attack(fixes, q, out, advs if at_paper else None),
                        )
                    )
        print(
            f"  p = {p:.1f}: {len(q):,} queries in {q['trajectory_id'].nunique():,} traces of "
            f"{q['user'].nunique()} users ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    res = pd.DataFrame(rows)
    order = {"raw": 0, "predictive": 1, "independent": 2}
    res["_o"] = res["release"].map(order) + 10 * res["budget"].map(
        {"-": 0, **{b: i + 1 for i, (b, _) in enumerate(BUDGETS)}}
    )
    out = res.groupby(["p", "_o", "release", "budget"], sort=True).mean(numeric_only=True).drop(columns="rep")
    return out.reset_index(level="_o", drop=True)


def markdown(res: pd.DataFrame, header: dict, reps: int, elapsed: float) -> str:
    lines = [
        "# Attacks on released GeoLife query traces (bench/attacks_geolife.py)",
        "",
        f"GeoLife users 000-009, fixes inside the Beijing box: {header['fixes']:,} fixes, {header['trajectories']:,} "
        f"trajectories, {header['users']} users. Truth: every fix of a user. Queries: `geopriv.sample_queries` "
        f"(p = probability of a 60 min jump), {reps} samplings per p, mean over them. One trace per trajectory, "
        f"fixed rate {RATE:.1%} per query; `predictive` is `sanitize_traces`' default configuration (the paper's), "
        "`independent` planar Laplace on every query with the same budget and rate per trace.",
        "",
        f"Top-2 places of the truth (200 m cells): {header['unique_200']:.0%} of users unique; 1 km cells: "
        f"{header['unique_1k']:.0%}. Homes the truth gives (22:00-06:00 Beijing time): {header['homes']} of "
        f"{header['users']} users. A guess made without any release (everyone's home = the night-time home of all "
        f"users pooled) is within 200 m of {header['base_200m']:.0%} of the true homes and within 500 m of "
        f"{header['base_500m']:.0%}: the hit rates below are to be read against that.",
        "",
        "Columns: home hit rates within 200 m / 500 m of the true home and median distance; share of users the "
        "release gives a home at all; top-2 re-identification rate (200 m and 1 km cells) and the share of released "
        "users whose released top-2 matches exactly one user (right or wrong); median displacement of a released "
        "query; share of queries released (the rest: budget exhausted); at ln 10 / 100 m, median error of the "
        "optimal adversary's guess of a released query (one query's planar Laplace noise of the independent "
        f"release, 1 km grid over the Beijing box), with a uniform prior and with the density of all users' fixes "
        f"as prior (expected errors of the model: {header['adv_uniform']:,.0f} m and {header['adv_fixes']:,.0f} m; "
        f"expected displacement {header['adv_displacement']:,.0f} m).",
        "",
        "| p | release | budget per trace | home 200 m | home 500 m | home median m | homes inferred | top-2 re-id | "
        "top-2 re-id 1 km | top-2 unique match | query median m | released | adversary median m, uniform / fixes "
        "prior |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (p, rel, budget), r in res.iterrows():
        adv = (
            "-"
            if pd.isna(r.get("adv_uniform_median_m"))
            else f"{r['adv_uniform_median_m']:,.0f} / {r['adv_fixes_median_m']:,.0f}"
        )
        lines.append(
            f"| {p:.1f} | {rel} | {budget} | {r['home_200m']:.0%} | {r['home_500m']:.0%} | "
            f"{r['home_median_m']:,.0f} | {r['homes_inferred']:.0%} | {r['top2_reid']:.0%} | {r['top2_reid_1km']:.0%} | "
            f"{r['top2_unique_match']:.0%} | {r['query_median_m']:,.0f} | {r['released_share']:.0%} | {adv} |"
        )
    lines += [
        "",
        "Notes. Ten users: one user is 10 % of a rate in one sampling (3.3 % in the mean of three). Every "
        "trajectory is a trace with its own budget, so a user's releases together spend the budget times their "
        "number of trajectories (28 to 395): the attacks pool them. At p = 0 a trace's budget pays for about 30 of "
        "its 123 queries on average, the first ones. The 'fixes' prior is the density of the very users attacked "
        "(the strongest background knowledge); the 1 km grid quantises the guesses, which is why the uniform-prior "
        "adversary's median is a little above the displacement.",
        "",
        f"Run time {elapsed:.0f} s (2 cores).",
    ]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "attacks_geolife.md")
    args = ap.parse_args()
    t0 = time.perf_counter()
    fixes = load(args.data)
    u200 = top_places_uniqueness(fixes, person="user").attrs["summary"]
    u1k = top_places_uniqueness(fixes, person="user", cell=1000).attrs["summary"]
    homes = home_attack(fixes, fixes, person="user", time="t", tz=TZ).attrs["summary"]["persons"]
    header = dict(
        fixes=len(fixes),
        trajectories=fixes["trajectory_id"].nunique(),
        users=fixes["user"].nunique(),
        unique_200=u200["unique_share"],
        unique_1k=u1k["unique_share"],
        homes=homes,
        **baseline(fixes),
    )
    print(
        f"{header['fixes']:,} fixes, {header['trajectories']:,} trajectories, {header['users']} users; "
        f"{args.reps} samplings per p",
        flush=True,
    )
    t1 = time.perf_counter()
    advs = adversaries(fixes)
    header.update(
        adv_uniform=advs["uniform"].expected_error_m,
        adv_fixes=advs["fixes"].expected_error_m,
        adv_displacement=advs["uniform"].displacement_m,
    )
    print(f"adversaries built in {time.perf_counter() - t1:.0f} s", flush=True)
    res = run(fixes, args.reps, args.seed, advs)
    text = markdown(res, header, args.reps, time.perf_counter() - t0)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
