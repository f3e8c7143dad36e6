"""Benchmark: diffusing one private value over SNAP's ego-Facebook graph (issue 14).

Koufogiannis and Pappas, "Diffusing private data over networks", Section IV-B: a user shares
her infection bit u in {0, 1}; friend j at resistance distance d_j gets
Pi_{0,1}(u + V_{eps(d_j)}) with eps(d) = exp(-3.3 d + 4) and ONE path {V_eps} (Algorithm 1).
We run it on the whole combined ego-Facebook graph (4,039 nodes, 88,234 edges; SNAP,
McAuley and Leskovec 2012) from one source node and report:

* resistance distances from the source to all nodes: time (target <= 5 s) and error against a
  dense reference (numpy.linalg.pinv of the Laplacian, the paper's eq. (10));
* the time to answer all recipients from one path once the distances are known (target
  <= 20 ms), side by side with independent Laplace noise per recipient;
* the coalition experiment: the k most distant recipients pool their answers (majority of the
  projected bits, or the projected mean of the raw answers) and guess u.  With one path they do
  no better than their best member; with independent noise they soon know u.  Also a 2-D
  location released with the same epsilons (MSE of the coalition mean vs its best member);
* a picture, docs/img/diffusion_facebook.png, as the paper's Figures 6-7: the path, and the
  recipients at their distance coloured by their error, with the path's jumps marked.

The graph is not in the repository: pass its path (default: $GEOPRIV_DATA/facebook_combined.txt,
GEOPRIV_DATA defaulting to ../shared/data beside the checkout).

    python bench/diffusion_facebook.py [graph.txt] [--source 0] [--reps 2000] [--no-dense] [--no-figure]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geopriv.mechanisms.diffusion import (
    DiffusionPath,
    diffuse,
    project_discrete,
    sample_laplace,
)
from geopriv.network import as_network, epsilon_of_distance, hop_distance, resistance_distance

DATA_DIR = Path(os.environ.get("GEOPRIV_DATA") or ROOT.parent / "shared" / "data")
FIGURE = ROOT / "docs" / "img" / "diffusion_facebook.png"
PAPER_EPS = epsilon_of_distance(lambda d: np.exp(-3.3 * d + 4))


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "graph",
        nargs="?",
        default=str(DATA_DIR / "facebook_combined.txt"),
        help="SNAP edge list (two node ids per line)",
    )
    ap.add_argument("--source", type=int, default=0, help="node that owns the data (default 0, an ego)")
    ap.add_argument("--reps", type=int, default=2000, help="releases per coalition experiment")
    ap.add_argument("--no-dense", action="store_true", help="skip the dense pinv reference (slow)")
    ap.add_argument("--no-figure", action="store_true")
    args = ap.parse_args(argv)
    if not Path(args.graph).is_file():
        print(
            f"no graph at {args.graph!r}: download facebook_combined.txt from SNAP (ego-Facebook) and pass its path",
            file=sys.stderr,
        )
        return 2

    edges = np.loadtxt(args.graph, dtype=np.int64)
    t0 = time.perf_counter()
    net = as_network(edges)
    t_net = time.perf_counter() - t0
    print(
        f"graph: {net.n_nodes} nodes, {net.n_edges} edges (normalised in {t_net * 1000:.0f} ms); source {args.source}"
    )

    # ---- distances -----------------------------------------------------------------------
    t0 = time.perf_counter()
    hops = hop_distance(net, args.source)
    t_hops = time.perf_counter() - t0
    res_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        res = resistance_distance(net, args.source)
        res_times.append(time.perf_counter() - t0)
    t_res = statistics.median(res_times)
    print(f"hop distances: {t_hops * 1000:.1f} ms (max {hops.max():.0f} hops)")
    print(
        f"resistance distances, sparse selected inversion: median {t_res:.2f} s of 3 "
        f"(min {min(res_times):.2f} s; target <= 5 s); range [{res.drop(args.source).min():.4f}, {res.max():.4f}]"
    )
    if not args.no_dense:
        t0 = time.perf_counter()
        dense = resistance_distance(net, args.source, method="dense")
        t_dense = time.perf_counter() - t0
        others = res.index != args.source
        abs_err = np.abs(res.to_numpy() - dense.to_numpy())[others]
        rel_err = abs_err / dense.to_numpy()[others]
        print(
            f"dense reference (pinv of the Laplacian, paper eq. 10): {t_dense:.1f} s; "
            f"max abs error {abs_err.max():.2e}, max rel error {rel_err.max():.2e}, median rel {np.median(rel_err):.2e}"
        )

    # ---- answering everybody -----------------------------------------------------------------
    recipients = res.index[res.index != args.source]
    d = res[recipients].to_numpy()
    eps = PAPER_EPS(d)
    print(f"eps(d) = exp(-3.3 d + 4): {len(eps)} recipients, eps in [{eps.min():.3f}, {eps.max():.3f}]")
    gen = np.random.default_rng(1)
    for dim, value in [(1, 1.0), (2, np.array([0.0, 0.0]))]:
        t_path = median_ms(lambda value=value: diffuse(value, eps, gen), 51)
        path = DiffusionPath.sample(dim, eps.max(), eps.min(), gen)
        t_noise = median_ms(lambda value=value, path=path: value + path.noise(eps), 51)
        t_indep = median_ms(lambda value=value, dim=dim: value + sample_laplace(dim, eps, None, gen), 51)
        print(
            f"n={dim}: all {len(eps)} answers from a new path (diffuse): {t_path:.2f} ms (target <= 20 ms); "
            f"from an existing path: {t_noise:.2f} ms; independent Laplace per recipient: {t_indep:.2f} ms"
        )
    jumps = [DiffusionPath.sample(1, eps.max(), eps.min(), gen).secret_arrays()["levels"].size for _ in range(2000)]
    print(
        f"jumps per path (n=1): mean {np.mean(jumps):.2f}, expected 2 ln({eps.max():.2f}/{eps.min():.3f}) = "
        f"{2 * math.log(eps.max() / eps.min()):.2f}"
    )

    # ---- coalitions -----------------------------------------------------------------------------
    order = np.argsort(-d)  # most distant first
    print(
        f"\ncoalitions of the k most distant recipients, infection bit u = 1, {args.reps} releases each "
        "(P(guess = u); a single recipient alone: 1 - exp(-eps/2)/2; 'wmean': the projected\n"
        "inverse-variance weighted mean of the raw answers, weights eps^2):"
    )
    print("      k  eps range         best member     diffusion: majority / wmean   independent: majority / wmean")
    table = []
    for k in (1, 10, 100, 1000, len(d)):
        members = order[:k]
        e = eps[members]
        best = int(np.argmax(e))
        diff_ans = np.empty((args.reps, k))
        ind_ans = np.empty((args.reps, k))
        for r in range(args.reps):
            diff_ans[r] = 1.0 + DiffusionPath.sample(1, e.max(), e.min(), gen).noise(e)[:, 0]
            ind_ans[r] = 1.0 + sample_laplace(1, e, None, gen)[:, 0]
        w = e**2 / (e**2).sum()
        row = {
            "k": k,
            "best": (project_discrete(diff_ans[:, best], [0, 1]) == 1).mean(),
            "diff_major": ((project_discrete(diff_ans.ravel(), [0, 1]).reshape(args.reps, k).mean(1)) > 0.5).mean(),
            "diff_mean": (project_discrete(diff_ans @ w, [0, 1]) == 1).mean(),
            "ind_major": ((project_discrete(ind_ans.ravel(), [0, 1]).reshape(args.reps, k).mean(1)) > 0.5).mean(),
            "ind_mean": (project_discrete(ind_ans @ w, [0, 1]) == 1).mean(),
            "theory": 1 - 0.5 * math.exp(-e.max() / 2),
        }
        table.append(row)
        print(
            f"  {k:5d}  [{e.min():.3f}, {e.max():.3f}]  {row['best']:.3f} ({row['theory']:.3f})   "
            f"{row['diff_major']:.3f} / {row['diff_mean']:.3f}                {row['ind_major']:.3f} / {row['ind_mean']:.3f}"
        )

    print(
        "\n2-D location, same epsilons (per unit): MSE of the coalition's weighted mean (weights eps^2) over the "
        "MSE of its best member (1 = no gain):"
    )
    for k in (10, 100, 1000):
        e = eps[order[:k]]
        best = int(np.argmax(e))
        w = e**2 / (e**2).sum()
        dv = np.stack([DiffusionPath.sample(2, e.max(), e.min(), gen).noise(e) for _ in range(args.reps)])
        iv = np.stack([sample_laplace(2, e, None, gen) for _ in range(args.reps)])
        mse = lambda v: float((v**2).sum(-1).mean())
        wmean = lambda v, w=w: np.einsum("i,nid->nd", w, v)
        print(
            f"  k={k:5d}: diffusion {mse(wmean(dv)) / mse(dv[:, best]):.3f}   independent "
            f"{mse(wmean(iv)) / mse(iv[:, best]):.3f}   (best member MSE {mse(dv[:, best]):.3g}, theory "
            f"6/eps_max^2 = {6 / e.max() ** 2:.3g})"
        )

    if not args.no_figure:
        figure(d, eps, gen, table, source=args.source)
    return 0


def figure(d, eps, gen, table, path=FIGURE, *, source=0):
    """The picture (the paper's Figures 6-7) from the distances, epsilons and coalition table.

    ``d``: resistance distances of the recipients, ``eps`` their epsilons, ``table`` the rows of
    the coalition experiment (k, best, diff_mean, ind_mean).  Returns the Figure; writes it to
    ``path`` unless None.  Small synthetic inputs draw it too (a check of the plotting alone).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.lines import Line2D
    from matplotlib.ticker import LogLocator, MaxNLocator

    u = 1.0
    answers, path_ = diffuse(u, eps, gen)
    arrays = path_.secret_arrays()  # SECRET: plotted for the demonstration only
    levels, values = arrays["levels"], arrays["values"][:, 0]
    bits = project_discrete(answers, [0, 1])
    jump_d = (4 - np.log(levels)) / 3.3  # distances at which the path jumps (eps(d) = exp(-3.3 d + 4))

    fig, axes = plt.subplots(1, 3, figsize=(17, 5.8), layout="constrained", gridspec_kw={"width_ratios": [1, 1.1, 1]})
    ax = axes[0]
    grid = np.geomspace(eps.min(), eps.max(), 2000)
    ax.step(
        grid,
        u + path_.noise(grid)[:, 0],
        where="post",
        color="tab:blue",
        lw=1.5,
        label="answer before rounding, u + noise (one path)",
    )
    ax.plot(levels, u + values[1:], "o", mfc="none", color="tab:red", label="a jump of the path")
    ax.axhline(0.5, color="grey", ls=":", lw=1, label="rounding threshold (0.5)")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.set_xlabel("privacy level ε of a recipient\n(log scale; closer recipients get larger ε)")
    ax.set_ylabel("answer before rounding to 0 or 1 (true bit u = 1)")
    ax.set_title(
        f"One secret noise path: {levels.size} jumps serve {len(eps):,} recipients\n(the path is secret; shown here "
        "only to explain)",
        fontsize=10,
    )
    ax.legend(loc="best", fontsize=8)

    ax = axes[1]
    angle = np.random.default_rng(0).uniform(0, np.pi / 2, d.size)  # the angle carries no meaning
    err = np.abs(answers - u)
    floor = max(float(err[err > 0].min()) if (err > 0).any() else 1e-3, 1e-3)
    sc = ax.scatter(
        d * np.cos(angle),
        d * np.sin(angle),
        c=np.maximum(err, floor),
        s=5,
        cmap="viridis",
        norm=LogNorm(floor, max(float(err.max()), floor * 10)),
        zorder=2,
    )
    theta = np.linspace(0, np.pi / 2, 200)
    shown = jump_d[(jump_d >= d.min()) & (jump_d <= d.max())]
    for r in shown:
        ax.plot(r * np.cos(theta), r * np.sin(theta), color="tab:red", lw=0.8, zorder=1)
    ax.plot(0, 0, "*", color="black", ms=14, zorder=3)
    ax.set_aspect("equal")
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.yaxis.set_major_locator(MaxNLocator(5))
    ax.set_xlabel("resistance distance from the source (the star)\nthe angle means nothing: it only spreads the points")
    ax.set_ylabel("resistance distance")
    ax.set_title(
        f"Every recipient at its distance from the source\n{int((bits != u).sum()):,} of {d.size:,} rounded answers "
        "are wrong",
        fontsize=10,
    )
    ax.legend(
        [
            Line2D([], [], ls="none", marker="*", color="black", ms=12),
            Line2D([], [], ls="none", marker="o", mfc="tab:green", mec="none", ms=4),
            Line2D([], [], color="tab:red", lw=0.8),
        ],
        [
            f"the source (node {source}), who shares her bit",
            "a recipient (colour: its error)",
            "distance of a jump: identical answers between two arcs",
        ],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=1,
        fontsize=8,
        frameon=False,
    )
    below = f"; below {floor:g} drawn at {floor:g}" if floor > float(err.min()) else ""
    fig.colorbar(sc, ax=ax, shrink=0.85, label=f"error of the answer, |answer - u| (log scale{below})")

    ax = axes[2]
    ks = [row["k"] for row in table]
    ax.plot(ks, [row["best"] for row in table], "k--", marker="o", label="its best-informed member alone")
    ax.plot(ks, [row["diff_mean"] for row in table], color="tab:blue", marker="o", label="the coalition, one path")
    ax.plot(
        ks,
        [row["ind_mean"] for row in table],
        color="tab:orange",
        marker="o",
        label="the coalition, independent noise per recipient",
    )
    ax.set_xscale("log")
    ax.set_ylim(0.45, 1.02)
    ax.set_xlabel("coalition size k\n(the k most distant recipients; log scale)")
    ax.set_ylabel("chance the coalition guesses the bit")
    ax.set_title("Pooling answers: a weighted mean of the coalition's raw answers", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(
        "Diffusing one private bit over ego-Facebook: closer friends learn more, coalitions no more "
        "than their best member"
    )
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        try:
            shown_path = path.relative_to(ROOT)
        except ValueError:
            shown_path = path
        print(f"\nfigure written to {shown_path}")
    return fig


if __name__ == "__main__":
    raise SystemExit(main())
