"""Evaluation on real GeoLife traces: predictive vs independent mechanism (paper sec. 5, Figs 4-5).

Chatzikokolakis, Palamidessi, Stronati, "A Predictive Differentially-Private Mechanism for
Mobility Traces" (PETS 2014).  Data: ../shared/data/geolife_users_000_009.parquet (1.85 M fixes,
1,385 trajectories of GeoLife users 000-009; needs pyarrow to read GeoParquet), too large to ship in
the repository: it is read from the folder named by the environment variable ``GEOPRIV_DATA``
(default ``../shared/data`` beside the checkout), or from ``--data PATH``.

Protocol (the paper's): each trajectory is a trace; queries are sampled with
:func:`geopriv.sample_queries` (only while slower than 15 km/h; next query after 1 min, or after
60 min with probability p; intervals jittered by 10 %), ``REPS`` samplings per p.  Privacy:
ln 10 within 100 m for the whole trace (epsilon = ln(10)/100 per metre).  Budget managers:
fixed rate 3.3 % of the budget per query (about 30 queries), fixed utility alpha(0.9) = 3 km.
Every release goes through the public ``gdf.priv.sanitize_traces``; errors are geodesic metres.

Configurations:

* ``independent``: planar Laplace at every query (Fig. 1).
* ``paper``: parrot prediction, eta 0.5, gamma 0.8, expected prediction rate 0.5, the fixed
  rate re-planned over the remaining planned queries (horizon=None), first-point skip;
  ``paper+skip`` adds the paper's time skip at 0.5 km/h.
* ``tuned``: what closes the gap: cluster-mean prediction, eta 0.35, gamma 1.0, fixed-rate
  savings reinvested within 3 steps (horizon=3), prior prediction rate 0.6 (weight 5);
  ``tuned+skip`` adds the time skip at 15 km/h (the speed filter of the query sampling).

Metrics per (manager, configuration, p), averaged over the samplings: average error (mean over
traces of the per-trace mean error of released queries, E[d_err]), alpha(0.9) (90th percentile
of per-query error), budget rate (mean over traces of spent / budget per released query),
queries covered (1 / budget rate: how many queries the budget pays for at that rate),
prediction rate (released queries that were predictions), test share (budget spent on tests).

    GEOPRIV_DATA=/path/to/data python bench/traces_eval.py [--reps 3] [--max-trajectories N] [--out docs/img/traces_eval.png]

Runs in about 4-6 minutes on 2 cores with all 1,385 trajectories and 3 samplings per p.
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
from geopriv.mechanisms.predictive import FixedRate, FixedUtility
from geopriv.metrics import ground_distance

ROOT = Path(__file__).resolve().parents[1]
PARQUET = "geolife_users_000_009.parquet"
#: folder of the large benchmark data: $GEOPRIV_DATA, default ../shared/data beside the checkout
DATA_DIR = Path(os.environ.get("GEOPRIV_DATA") or ROOT.parent / "shared" / "data")
DATA = DATA_DIR / PARQUET
#: public study area (lon/lat): Beijing municipality's bounding box, declared, not measured from the data
BOUNDS = (115.4, 39.4, 117.6, 41.1)
LEVEL, RADIUS = math.log(10), 100.0
RATE, ACCURACY = 0.033, 3000.0
PAPER_SKIP, TUNED_SKIP = 0.5 / 3.6, 15 / 3.6  # m/s

TUNED_RATE = dict(eta=0.35, gamma=1.0, horizon=3.0, prediction_rate=0.6, prior_weight=5.0)
CONFIGS = {
    "fixed_rate": {
        "independent": dict(method="independent", budget=FixedRate(rate=RATE)),
        "paper": dict(budget=FixedRate(rate=RATE, horizon=None)),
        "paper+skip": dict(budget=FixedRate(rate=RATE, horizon=None), skip_speed=PAPER_SKIP),
        "tuned": dict(budget=FixedRate(rate=RATE, **TUNED_RATE), predictor="cluster_mean"),
        "tuned+skip": dict(budget=FixedRate(rate=RATE, **TUNED_RATE), predictor="cluster_mean", skip_speed=TUNED_SKIP),
    },
    "fixed_utility": {
        "independent": dict(method="independent", budget=FixedUtility(accuracy=ACCURACY)),
        "paper": dict(budget=FixedUtility(accuracy=ACCURACY)),
        "paper+skip": dict(budget=FixedUtility(accuracy=ACCURACY), skip_speed=PAPER_SKIP),
        "tuned": dict(budget=FixedUtility(accuracy=ACCURACY, eta=0.35, gamma=1.0), predictor="cluster_mean"),
        "tuned+skip": dict(
            budget=FixedUtility(accuracy=ACCURACY, eta=0.35, gamma=1.0), predictor="cluster_mean", skip_speed=TUNED_SKIP
        ),
    },
}
# one change at a time, from the paper's configuration to the tuned one (fixed rate)
ABLATION = {
    "A paper": dict(budget=FixedRate(rate=RATE, horizon=None)),
    "B +horizon 3": dict(budget=FixedRate(rate=RATE, horizon=3.0)),
    "C +eta .35 gamma 1": dict(budget=FixedRate(rate=RATE, horizon=3.0, eta=0.35, gamma=1.0)),
    "D +PR prior .6 (w 5)": dict(budget=FixedRate(rate=RATE, **TUNED_RATE)),
    "E +cluster_mean (tuned)": dict(budget=FixedRate(rate=RATE, **TUNED_RATE), predictor="cluster_mean"),
}
ABLATION_P = (0.0, 0.3, 1.0)


def load(path: Path, max_trajectories: int | None, seed: int) -> gpd.GeoDataFrame:
    if not path.is_file():
        if path != DATA:
            how = "given with --data"
        elif os.environ.get("GEOPRIV_DATA"):
            how = f"from GEOPRIV_DATA={os.environ['GEOPRIV_DATA']!r}"
        else:
            how = "GEOPRIV_DATA is not set, so ../shared/data beside the checkout was tried"
        sys.exit(
            f"The GeoLife benchmark data {path} does not exist ({how}). Put {PARQUET} (Microsoft Research "
            "GeoLife 1.3, users 000-009, as GeoParquet) in a folder and run with GEOPRIV_DATA=/that/folder, "
            f"or pass --data /path/to/{PARQUET}."
        )
    try:
        g = gpd.read_parquet(path)
    except ImportError:
        sys.exit("Reading GeoParquet needs pyarrow: pip install pyarrow (or pip install 'geopriv[bench]').")
    if max_trajectories:
        ids = np.sort(g["trajectory_id"].unique())
        keep = np.random.default_rng(seed).choice(ids, size=min(max_trajectories, len(ids)), replace=False)
        g = g[g["trajectory_id"].isin(keep)]
    return g


def measure(q: gpd.GeoDataFrame, out: gpd.GeoDataFrame) -> dict:
    """Metrics of one release of the query traces ``q``."""
    led = geopriv.trace_ledger(out)
    ok = (out["status"] != "exhausted").to_numpy()
    xy_t = np.column_stack([q.geometry.x.to_numpy(), q.geometry.y.to_numpy()])[ok]
    xy_r = np.column_stack([out.geometry.x.to_numpy()[ok], out.geometry.y.to_numpy()[ok]])
    d = ground_distance(q.geometry, xy_t, xy_r)
    tid = q["trajectory_id"].to_numpy()[ok]
    per_trace = pd.Series(d).groupby(tid).mean()
    rel = led["released"].to_numpy()
    has = rel > 0
    rate = (led["spent"] / led["budget"]).to_numpy()[has] / rel[has]
    status = out["status"].to_numpy()[ok]
    users = pd.Index(per_trace.index).str[:3]
    return {
        "error": float(per_trace.mean()),
        "alpha90": float(np.quantile(d, 0.9)),
        "rate": float(rate.mean()),
        "covered": float(1.0 / rate.mean()),
        "released": float(rel[has].mean()),
        "pred_rate": float(np.mean(status != "noise")),
        "skipped": float(np.mean(status == "skipped")),
        "test_share": float(led["spent_test"].sum() / max(led["spent"].sum(), 1e-300)),
        "error_users_0_4": float(per_trace[users < "005"].mean()),
        "error_users_5_9": float(per_trace[users >= "005"].mean()),
    }


def run(g, ps, reps, seed, configs, log=print):
    rows = []
    for p in ps:
        t0 = time.perf_counter()
        for rep in range(reps):
            q = geopriv.sample_queries(
                g, traj_id="trajectory_id", time="t", p=p, rng=seed + 1000 * rep + round(100 * p)
            )
            q = q.cx[BOUNDS[0] : BOUNDS[2], BOUNDS[1] : BOUNDS[3]]  # the declared study area: Beijing municipality
            for manager, cfgs in configs.items():
                for name, kw in cfgs.items():
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", geopriv.DistortionWarning)
                        out = q.priv.sanitize_traces(
                            traj_id="trajectory_id",
                            time="t",
                            level=LEVEL,
                            radius=RADIUS,
                            bounds=BOUNDS,
                            rng=seed + 7 * rep + 1,
                            **kw,
                        )
                    rows.append(
                        dict(
                            manager=manager,
                            config=name,
                            p=p,
                            rep=rep,
                            queries=len(q),
                            traces=q["trajectory_id"].nunique(),
                            **measure(q, out),
                        )
                    )
        log(
            f"  p = {p:.1f}: {len(q):,} queries in {q['trajectory_id'].nunique():,} traces  ({time.perf_counter() - t0:.0f} s)"
        )
    return pd.DataFrame(rows).groupby(["manager", "config", "p"]).mean(numeric_only=True).drop(columns="rep")


def tables(res: pd.DataFrame) -> str:
    """Compact text tables: predictive configurations against independent noise, by p."""
    cfgs = ["paper", "tuned", "paper+skip", "tuned+skip"]
    out = []
    r = res.loc["fixed_rate"]
    ind = r.loc["independent"]
    out.append(
        "\n== fixed rate 3.3 %: average error in m (change vs independent), alpha(0.9) m, budget rate %, prediction rate =="
    )
    out.append(
        f"{'p':>4} {'q/trace':>7} {'independent':>11} "
        + " ".join(f"{c:>16}" for c in cfgs)
        + "   alpha90 ind/paper/tuned    rate% ind/paper/tuned/p+s/t+s   PR paper/tuned"
    )
    for p in ind.index:
        cells = " ".join(
            f"{r.loc[c]['error'][p]:7.0f} ({100 * (r.loc[c]['error'][p] / ind['error'][p] - 1):+5.1f}%)" for c in cfgs
        )
        a90 = "/".join(
            f"{v:.0f}" for v in (ind["alpha90"][p], r.loc["paper"]["alpha90"][p], r.loc["tuned"]["alpha90"][p])
        )
        rate = "/".join(f"{100 * v:.2f}" for v in [ind["rate"][p]] + [r.loc[c]["rate"][p] for c in cfgs])
        pr = "/".join(f"{r.loc[c]['pred_rate'][p]:.2f}" for c in ("paper", "tuned"))
        out.append(
            f"{p:4.1f} {ind['queries'][p] / ind['traces'][p]:7.1f} "
            f"{ind['error'][p]:11.0f} {cells}   {a90:>22}    {rate:>30}   {pr}"
        )
    r = res.loc["fixed_utility"]
    ind = r.loc["independent"]
    out.append(
        "\n== fixed utility 3 km: queries covered = 1 / budget rate (change vs independent), alpha(0.9) m, average error m =="
    )
    out.append(
        f"{'p':>4} {'independent':>11} "
        + " ".join(f"{c:>16}" for c in cfgs)
        + "   alpha90 ind/paper/tuned/p+s/t+s   avg err ind/paper/tuned/p+s/t+s"
    )
    for p in ind.index:
        cells = " ".join(
            f"{r.loc[c]['covered'][p]:7.1f} ({100 * (r.loc[c]['covered'][p] / ind['covered'][p] - 1):+5.0f}%)"
            for c in cfgs
        )
        a90 = "/".join(f"{v:.0f}" for v in [ind["alpha90"][p]] + [r.loc[c]["alpha90"][p] for c in cfgs])
        err = "/".join(f"{v:.0f}" for v in [ind["error"][p]] + [r.loc[c]["error"][p] for c in cfgs])
        out.append(f"{p:4.1f} {ind['covered'][p]:11.1f} {cells}   {a90:>30}   {err}")
    return "\n".join(out)


#: the configurations in plain words (legends)
PLAIN = {
    "independent": "independent noise at every query",
    "paper": "predictive, the paper's settings",
    "paper+skip": "predictive, the paper's settings + time skip",
    "tuned": "predictive, tuned settings",
    "tuned+skip": "predictive, tuned settings + time skip",
}
ROWS = {
    ("fixed_rate", ""): "Fixed rate: 3.3 % of the budget per query, no time skip",
    ("fixed_rate", "+skip"): "Fixed rate: 3.3 % of the budget per query, with the time skip",
    ("fixed_utility", ""): "Fixed utility: 90 % of answers within 3 km, no time skip",
    ("fixed_utility", "+skip"): "Fixed utility: 90 % of answers within 3 km, with the time skip",
}


def make_figure(res: pd.DataFrame):
    """The evaluation picture from the table of :func:`run` (index manager, config, p); returns the Figure.

    Line styles name the configuration (one key for the whole figure: grey = independent noise,
    dashed = the paper's settings, solid = the tuned ones); colours name the quantity (each
    panel's own key).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    def key(ax, items, **kw):
        ax.legend(
            [Line2D([], [], color=c, ls=ls) for c, ls, _ in items],
            [t for _, _, t in items],
            fontsize=7.5,
            framealpha=0.9,
            **kw,
        )

    fig = plt.figure(figsize=(15, 17.5), layout="constrained")
    head_fig, *rows = np.ravel(fig.subfigures(len(ROWS) + 1, 1, hspace=0.02, height_ratios=[0.35] + [4] * len(ROWS)))
    axes = np.array([sub.subplots(1, 3) for sub in rows])
    for row, ((manager, skip), head) in enumerate(ROWS.items()):
        rows[row].suptitle(head, fontsize=11, fontweight="bold", x=0.005, ha="left")
        r = res.loc[manager]
        ind = r.loc["independent"]
        ps = ind.index.to_numpy()
        ax = axes[row, 0]
        for cfg, ls in (("paper" + skip, "--"), ("tuned" + skip, "-")):
            c = r.loc[cfg]
            ax.plot(ps, c["pred_rate"], ls, color="C0")
            ax.plot(ps, c["test_share"], ls, color="C1")
            if skip:
                ax.plot(ps, c["skipped"], ls, color="C2")
        ax.set_ylim(0, 1.25)
        ax.set_yticks(np.linspace(0, 1, 6))
        ax.set_ylabel("share of released queries / of the budget")
        ax.set_title("what the predictive mechanism did", fontsize=10)
        items = [("C0", "-", "answered from the prediction"), ("C1", "-", "budget spent on tests")]
        if skip:
            items.append(("C2", "-", "skipped by the time rule"))
        key(ax, items, loc="upper center", ncol=len(items) if len(items) < 3 else 2)
        ax = axes[row, 1]
        ax.plot(ps, ind["error"] / 1000, color="0.45")
        ax.plot(ps, ind["alpha90"] / 1000, ":", color="0.45")
        highest = [ind["alpha90"].max()]
        for cfg, ls in (("paper" + skip, "--"), ("tuned" + skip, "-")):
            c = r.loc[cfg]
            ax.plot(ps, c["error"] / 1000, ls, color="C3")
            ax.plot(ps, c["alpha90"] / 1000, ls, color="C4")
            highest.append(c["alpha90"].max())
        ax.set_ylabel("error of a released query (km)")
        ax.set_ylim(0, 1.3 * max(highest) / 1000)
        ax.set_title("error: the average, and the distance 90 % of answers fall within", fontsize=10)
        key(
            ax,
            [("C3", "-", "average"), ("C4", "-", "90 % within"), ("0.45", ":", "independent noise: 90 % within")],
            loc="upper center",
            ncol=3,
        )
        ax = axes[row, 2]
        ax.plot(ps, 100 * ind["rate"], color="0.45")
        for cfg, ls in (("paper" + skip, "--"), ("tuned" + skip, "-")):
            ax.plot(ps, 100 * r.loc[cfg]["rate"], ls, color="C5")
        ax.set_ylabel("budget spent per released query (%)")
        ax.set_ylim(0, 1.3 * 100 * max(ind["rate"].max(), r.loc["paper" + skip]["rate"].max()))
        ax.set_title("budget per query (lower: the budget pays for more queries)", fontsize=10)
    for ax in axes[-1]:
        ax.set_xlabel("p: chance of a 60 min gap between two queries")
    fig.suptitle(
        "GeoLife users 000-009: the predictive mechanism against independent noise at every query "
        "(ε = ln 10 within 100 m for each whole trace)"
    )
    head_fig.legend(
        [Line2D([], [], color="0.45"), Line2D([], [], color="k", ls="--"), Line2D([], [], color="k")],
        [PLAIN["independent"], "predictive, the paper's settings", "predictive, tuned settings"],
        loc="center",
        ncol=3,
        fontsize=9,
        title="line style: which mechanism (the rows 'with the time skip' add it to both predictive settings)",
        title_fontsize=9,
        frameon=False,
    )
    return fig


def figure(res: pd.DataFrame, path: Path):
    """Write :func:`make_figure` to ``path``; returns the path."""
    import matplotlib.pyplot as plt

    fig = make_figure(res)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--reps", type=int, default=3, help="samplings of the query traces per p (the paper: 10)")
    ap.add_argument("--max-trajectories", type=int, default=None, help="random subset of trajectories (default all)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "traces_eval.png")
    ap.add_argument("--no-ablation", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    g = load(args.data, args.max_trajectories, args.seed)
    print(f"{len(g):,} fixes, {g['trajectory_id'].nunique():,} trajectories; {args.reps} samplings per p")
    ps = np.round(np.arange(11) / 10, 1)
    res = run(g, ps, args.reps, args.seed, CONFIGS)
    print(tables(res))
    if not args.no_ablation:
        abl = run(
            g,
            ABLATION_P,
            args.reps,
            args.seed,
            {"fixed_rate": dict(ABLATION, independent=CONFIGS["fixed_rate"]["independent"])},
            log=lambda *a: None,
        )
        r = abl.loc["fixed_rate"]
        ind = r.loc["independent"]["error"]
        tab = pd.DataFrame(
            {
                cfg: [
                    f"{100 * (r.loc[cfg]['error'][p] / ind[p] - 1):+.1f} % (rate {100 * r.loc[cfg]['rate'][p]:.2f} %)"
                    for p in ABLATION_P
                ]
                for cfg in ABLATION
            },
            index=[f"p={p}" for p in ABLATION_P],
        ).T
        print("\n== fixed rate: what closes the gap (average error vs independent; realised budget rate) ==")
        print(tab.to_string())
    split = res.loc["fixed_rate"]
    print("\n== fixed rate, average error vs independent by user group (same runs) ==")
    for cfg in ("paper", "tuned"):
        g1 = 100 * (split.loc[cfg]["error_users_0_4"] / split.loc["independent"]["error_users_0_4"] - 1)
        g2 = 100 * (split.loc[cfg]["error_users_5_9"] / split.loc["independent"]["error_users_5_9"] - 1)
        print(
            f"  {cfg:6s} users 000-004: "
            + " ".join(f"{v:+5.1f}" for v in g1)
            + "   users 005-009: "
            + " ".join(f"{v:+5.1f}" for v in g2)
        )
    path = figure(res, args.out)
    print(f"\nfigure: {path}   total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
