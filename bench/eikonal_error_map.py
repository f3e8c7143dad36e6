"""Where the eikonal mechanism's error goes: per-node error against the optimum and local Laplace.

Same set-up as Table I (bench/eikonal_optimal.py): the paper-scaled Tokyo map of
bench/eikonal_build.py (200 x 200 over [0, 100]^2, epsilon 0.4 .. 2.0 per unit, prior =
population) coarsened to size x size equal blocks with geopriv.mechanisms.optimal.coarsen_to.
For every coarse node a we compute, in square units (= m^2), at the nodes (no jitter):

* e(a): EikonalMechanism.build(pm) with the default options, ``node_mse(jitter=False)``;
* o(a): the optimal mechanism, ``optimal_mechanism(pm, solver=...)`` (the LP; repaired, verified),
  ``node_mse()``;
* l(a): planar Laplace at the node's own epsilon, 6 / epsilon(a)^2 (the "local Laplace"
  proxy of bench/eikonal_build.py: not private, a reference).

and map the ratios e / o and e / l.  Population-weighted sums of e, o and l are Table I's
node errors (eikonal, optimal) and the bench's "Laplace at own eps" proxy.  Writes one PNG and
a markdown summary (aggregate ratios, population-weighted quantiles of the per-node ratios,
and where the large ratios and the excess error e - o sit: no-data cells, raster edge, coast,
dense cells).  The LP weighs nodes by the prior, so its rows at zero-population nodes (sea,
outside the metropolis) are just *some* feasible row: ratios there are shown hatched and kept
out of every weighted figure.  Unless --no-variants, the eikonal mechanism is also rebuilt with
other public options (jump / smooth off, mech.suggest_margin(), margin 0.01; about a second each
on these maps) against the same optimum, per cell class: which option closes the gap where.

Run:  python bench/eikonal_error_map.py [--size 14] [--solver ipm] [--window W --margin 1e-3]
          [--out-png docs/img/eikonal_error_where.png] [--out-md bench/results/eikonal_error_where.md]
          [--append] [--cache bench/out/eikonal_error_where_14.npz] [--from-cache] [--no-variants]
The shipped results: the default command (14 x 14, exact LP, ~75 s), then
      python bench/eikonal_error_map.py --size 20 --window 5 --margin 1e-3 --out-png /tmp/w20.png --append
(20 x 20, windowed LP, ~2-2.5 min; its figure is not kept).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from eikonal_build import paper_scaled_map  # noqa: E402

from geopriv import EikonalMechanism  # noqa: E402
from geopriv.mechanisms.optimal import SOLVERS, coarsen_to, optimal_mechanism  # noqa: E402
from geopriv.mechanisms.eikonal.lowering import auto_margin  # noqa: E402


# ============================================================================================
# computation
# ============================================================================================
def build_margin(em) -> np.ndarray:
    """The per-cell margin a default (``margin="auto"``) build used, from its public params."""
    m = em.params["margin"]
    if not isinstance(m, dict):
        return np.full(em.shape, float(m))
    return auto_margin(em.privacy_map)  # the per-noise-length rule (params["margin_rule"])


def compute(size: int, solver: str, window: int | None, margin: float, time_limit: float) -> dict:
    """Per-node arrays (size, size) and run facts for the coarse map."""
    pm = coarsen_to(paper_scaled_map(), (size, size))
    print(f"coarse map: {pm}", flush=True)
    t0 = time.perf_counter()
    opt = optimal_mechanism(
        pm, solver=solver, window=window, margin=margin, time_limit=time_limit, max_variables=2_000_000
    )
    lp_s = time.perf_counter() - t0
    o_verify = opt.verify()
    print(
        f"  optimal ({opt.params['solver']}, window {window}): {lp_s:.1f} s, verify {o_verify:.6f}, "
        f"dual bound {opt.params['dual_bound']:.4g}, gap {opt.params['gap']:.2%}",
        flush=True,
    )
    t0 = time.perf_counter()
    em = EikonalMechanism.build(pm)
    ek_s = time.perf_counter() - t0
    e_verify = em.verify().max_ratio
    print(f"  eikonal: {ek_s:.1f} s, verify {e_verify:.6f}", flush=True)
    eps = np.asarray(pm.epsilon, float)
    # kernels' epsilon / (1 - margin) / target: 1 where the kernels were not lowered (jump, smooth)
    margin_cells = build_margin(em)
    lowering = np.asarray(em.kernel_epsilon, float) / (1.0 - margin_cells) / np.asarray(pm.epsilon_crs)
    return {
        "size": size,
        "eik": em.node_mse(jitter=False),
        "opt": opt.node_mse(),
        "loc": 6.0 / eps**2,
        "eps": eps,
        "prior": pm.prior(),
        "nodata": np.asarray(pm.nodata_mask, bool),
        "lowering": lowering,
        "lap": 6.0 / pm.epsilon_min**2,
        "bound": float(opt.params["dual_bound"]),
        "gap": float(opt.params["gap"]),
        "lp_s": lp_s,
        "eik_s": ek_s,
        "o_verify": float(o_verify),
        "e_verify": float(e_verify),
        "solver": str(opt.params["solver"]),
        "window": -1 if window is None else int(window),
        "margin": margin,
        "eik_margin": float(np.max(margin_cells)),
        "extent": np.array(pm.bounds, float),
    }


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for pkg in ("numpy", "scipy", "highspy"):
        try:
            out.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            out.append(f"no {pkg}")
    return ", ".join(out)


# ============================================================================================
# statistics
# ============================================================================================
def wquantile(x: np.ndarray, w: np.ndarray, qs) -> list[float]:
    """Weighted quantiles (the smallest x whose cumulative weight reaches q)."""
    order = np.argsort(x)
    xs, cw = x[order], np.cumsum(w[order]) / w.sum()
    return [float(xs[min(np.searchsorted(cw, q), len(xs) - 1)]) for q in qs]


def categories(r: dict) -> dict:
    """Boolean masks of the cell classes used in the summary (data cells only, except 'no data')."""
    nod, p, n = r["nodata"], r["prior"], r["size"]
    data = ~nod
    edge = np.zeros_like(nod)
    edge[0, :] = edge[-1, :] = edge[:, 0] = edge[:, -1] = True
    padded = np.pad(nod, 1, constant_values=False)
    near_nodata = np.zeros_like(nod)
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            near_nodata |= padded[1 + di : 1 + di + n, 1 + dj : 1 + dj + n]
    coast = data & near_nodata
    dense_cut = wquantile(p[data], p[data], [0.5])[0]  # cells holding the denser half of the population
    dense = data & (p >= dense_cut)
    return {
        "no data (sea, outside; prior 0)": nod,
        "data, raster edge": data & edge,
        "data, next to no data (coast)": coast,
        "data, interior (neither)": data & ~edge & ~coast,
        "dense (denser half of the population)": dense,
        "sparse (other data cells)": data & ~dense,
    }


def summarise(r: dict) -> dict:
    p, e, o, l = r["prior"], r["eik"], r["opt"], r["loc"]
    w = p > 0
    s = {
        "eik": float((p * e).sum()),
        "opt": float((p * o).sum()),
        "loc": float((p * l).sum()),
    }
    s["eik_opt"] = s["eik"] / s["opt"]
    s["eik_loc"] = s["eik"] / s["loc"]
    s["opt_loc"] = s["opt"] / s["loc"]
    for name, ratio in (("r_eo", e / o), ("r_el", e / l), ("r_ol", o / l)):
        s[name + "_wmean"] = float((p[w] * ratio[w]).sum() / p[w].sum())
        s[name + "_q"] = wquantile(ratio[w], p[w], [0.1, 0.5, 0.9])
    return s


# ============================================================================================
# figure
# ============================================================================================
def figure(r: dict, s: dict, path: Path, caption: str) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle
    from PIL import Image

    n, nod, p = r["size"], r["nodata"], r["prior"]
    ext = r["extent"]
    extent = (ext[0], ext[2], ext[1], ext[3])
    hx, hy = (ext[2] - ext[0]) / n, (ext[3] - ext[1]) / n
    node = ext[0] + (np.arange(n) + 0.5) * hx
    node_y = ext[3] - (np.arange(n) + 0.5) * hy
    X, Y = np.meshgrid(node, node_y)
    grey = np.ma.masked_where(~nod, np.ones(nod.shape))
    lowered = r["lowering"] < 0.99

    fig, axes = plt.subplots(1, 3, figsize=(17, 6.2), constrained_layout=True)

    def ratio_panel(ax, ratio, label, title, lim=10.0):
        im = ax.imshow(
            np.ma.masked_where(nod, np.clip(ratio, 1 / lim, lim)),
            extent=extent,
            cmap="RdBu_r",
            norm=LogNorm(1 / lim, lim),
            origin="upper",
        )
        ax.imshow(grey, extent=extent, cmap="Greys", vmin=0, vmax=4, origin="upper")
        for i, j in zip(*np.nonzero(lowered & ~nod)):
            ax.add_patch(Rectangle((node[j] - hx / 2, node_y[i] - hy / 2), hx, hy, fill=False, ec="k", lw=1.6))
        if n <= 20:
            for i, j in zip(*np.nonzero(~nod)):
                v = ratio[i, j]
                ax.text(
                    node[j],
                    node_y[i],
                    f"{v:.1f}" if v < 9.95 else f"{v:.0f}",
                    ha="center",
                    va="center",
                    fontsize=7 if n <= 14 else 5,
                    color="w" if (v > 4 or v < 0.25) else "k",
                )
        cb = fig.colorbar(im, ax=ax, shrink=0.8, label=label)
        cb.set_ticks([0.1, 0.2, 0.5, 1, 2, 5, 10], labels=["0.1", "0.2", "0.5", "1", "2", "5", "10"])
        ax.set_title(title, fontsize=10)

    # (1) orientation: epsilon (block minimum) and population
    ax = axes[0]
    im = ax.imshow(np.ma.masked_where(nod, r["eps"]), extent=extent, cmap="viridis", vmin=0.4, vmax=2.0, origin="upper")
    ax.imshow(grey, extent=extent, cmap="Greys", vmin=0, vmax=4, origin="upper")
    pm_ = np.where(nod, 0.0, p)
    has = pm_ > 0
    ax.scatter(
        X[has], Y[has], s=1500 * pm_[has] / pm_.max() * (14 / n) ** 2, facecolors="none", edgecolors="w", linewidths=0.8
    )
    fig.colorbar(im, ax=ax, shrink=0.8, label="ε per unit (block minimum; lower: more private)")
    ax.set_title(
        "(1) the privacy map, ε per unit; circles: population (the prior)\n"
        "grey: no data (Tokyo Bay, outside the area), prior 0",
        fontsize=10,
    )

    ratio_panel(
        axes[1],
        r["eik"] / r["opt"],
        "eikonal error / optimal error, per node (log scale; 1 = white)",
        f"(2) error of the eikonal mechanism over the optimal one's\n(all nodes {s['eik_opt']:.2f}; "
        f"population-weighted mean of the ratio {s['r_eo_wmean']:.2f})",
    )
    ratio_panel(
        axes[2],
        r["eik"] / r["loc"],
        "eikonal error / (6 / ε(a)²), per node (log scale; 1 = white)",
        f"(3) error of the eikonal mechanism over planar Laplace at the node's own ε\n(all nodes "
        f"{s['eik_loc']:.2f}, weighted mean {s['r_el_wmean']:.2f}; optimal over it {s['opt_loc']:.2f})",
    )
    for ax in axes:
        ax.set_xlabel("x (paper units: the map spans 100)")
        ax.set_ylabel("y (paper units)")
    fig.suptitle(
        f"Where the error of the location-dependent (eikonal) mechanism goes: Tokyo, paper scaling, {n} x {n} nodes "
        f"(Table I)\nmean squared error over planar Laplace at the smallest ε: eikonal (default options) "
        f"{s['eik'] / r['lap']:.3f}, optimal {s['opt'] / r['lap']:.3f}, Laplace at each node's own ε (not private; "
        f"a reference) {s['loc'] / r['lap']:.3f}; eikonal / optimal {s['eik_opt']:.2f}\n{caption}; boxed: cells "
        "where the eikonal kernels' ε was lowered (jump / smooth); grey cells (prior 0) left out",
        fontsize=11,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=80, format="png")
    plt.close(fig)
    buf.seek(0)
    # a 256-colour palette keeps the file small (~100 KB) with no visible loss on this figure
    Image.open(buf).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


# ============================================================================================
# markdown
# ============================================================================================
def markdown(r: dict, s: dict, cmd: str, when: str, png: str | None, caption: str) -> str:
    p, e, o, l, nod = r["prior"], r["eik"], r["opt"], r["loc"], r["nodata"]
    lap, n = r["lap"], r["size"]
    excess = p * (e - o)
    tot_excess = float(excess.sum())
    q = lambda v: " / ".join(f"{x:.2f}" for x in v)  # noqa: E731
    out = [
        f"## {n} x {n}{' (windowed LP, window ' + str(r['window']) + ')' if r['window'] > 0 else ''}",
        "",
        f"Measured {when} with `{cmd}` ({versions()}); {caption}.",
        f"LP ({r['solver']}, margin {r['margin']:g}) {r['lp_s']:.1f} s, verify {r['o_verify']:.6f}, certified bound "
        f"{r['bound'] / lap:.4f} x Laplace (gap {r['gap']:.2%}); eikonal build {r['eik_s']:.1f} s, verify {r['e_verify']:.6f}."
        + (f" Figure: `{png}`." if png and not Path(png).is_absolute() else " Figure not kept in the repository."),
        "",
        "| population-weighted (prior) | eikonal | optimal | local Laplace 6 / eps(a)^2 |",
        "|---|---|---|---|",
        f"| mean node error / Laplace at eps_min ({lap:.1f}) | {s['eik'] / lap:.4f} | {s['opt'] / lap:.4f} | {s['loc'] / lap:.4f} |",
        "",
        "| per-node ratio | aggregate (ratio of weighted means) | weighted mean of the ratio | weighted quantiles 10 / 50 / 90 % |",
        "|---|---|---|---|",
        f"| eikonal / optimal | {s['eik_opt']:.2f} | {s['r_eo_wmean']:.2f} | {q(s['r_eo_q'])} |",
        f"| eikonal / local Laplace | {s['eik_loc']:.2f} | {s['r_el_wmean']:.2f} | {q(s['r_el_q'])} |",
        f"| optimal / local Laplace | {s['opt_loc']:.2f} | {s['r_ol_wmean']:.2f} | {q(s['r_ol_q'])} |",
        "",
        "Where: cell classes (edge and coast overlap; dense = the cells holding the denser half of the population).  "
        '"share of excess" is the class\'s share of sum prior x (eikonal - optimal), the whole gap of Table I.',
        "",
        "| cells | n | population share | eikonal / optimal (aggregate) | weighted median e / o | e / o range | "
        "eikonal / local (aggregate) | share of excess | mean kernel lowering |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in categories(r).items():
        if not m.any():
            continue
        pw = p[m].sum()
        ro = e[m] / o[m]
        if pw > 0:
            agg_o = f"{(p[m] * e[m]).sum() / (p[m] * o[m]).sum():.2f}"
            med = f"{wquantile(ro[p[m] > 0], p[m][p[m] > 0], [0.5])[0]:.2f}"
            agg_l = f"{(p[m] * e[m]).sum() / (p[m] * l[m]).sum():.2f}"
            share = f"{excess[m].sum() / tot_excess:.0%}"
            low = f"{(p[m] * r['lowering'][m]).sum() / pw:.2f}"
        else:
            agg_o = med = agg_l = share = "-"
            low = f"{r['lowering'][m].mean():.2f} (unweighted)"
        out.append(
            f"| {name} | {int(m.sum())} | {pw:.1%} | {agg_o} | {med} | {ro.min():.2f} .. {ro.max():.2f} | {agg_l} "
            f"| {share} | {low} |"
        )
    # by epsilon band
    out += [
        "",
        "| epsilon band (block minimum) | n | population share | eikonal / optimal (aggregate) | "
        "eikonal / local (aggregate) | optimal / local (aggregate) | share of excess |",
        "|---|---|---|---|---|---|---|",
    ]
    eps = r["eps"]
    for lo_, hi_ in ((0.4, 0.6), (0.6, 1.0), (1.0, 1.4), (1.4, 2.01)):
        m = ~nod & (eps >= lo_) & (eps < hi_)
        if not m.any() or p[m].sum() == 0:
            continue
        out.append(
            f"| {lo_:.1f} .. {min(hi_, 2.0):.1f} | {int(m.sum())} | {p[m].sum():.1%} | "
            f"{(p[m] * e[m]).sum() / (p[m] * o[m]).sum():.2f} | {(p[m] * e[m]).sum() / (p[m] * l[m]).sum():.2f} | "
            f"{(p[m] * o[m]).sum() / (p[m] * l[m]).sum():.2f} | {excess[m].sum() / tot_excess:.0%} |"
        )
    # the cells carrying most of the excess
    cats = categories(r)
    order = np.argsort(-excess.ravel())[:8]
    out += [
        "",
        "Cells with the largest share of the excess error (row, col from the north-west corner):",
        "",
        "| cell | epsilon | population share | eikonal | optimal | local Laplace | e / o | share of excess | class |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in order:
        i, j = divmod(int(k), n)
        cls = ", ".join(
            c.split(" (")[0].replace("data, ", "") for c, m in cats.items() if m[i, j] and not c.startswith("sparse")
        )
        out.append(
            f"| ({i}, {j}) | {eps[i, j]:.2f} | {p[i, j]:.1%} | {e[i, j]:.2f} | {o[i, j]:.2f} | {l[i, j]:.2f} | "
            f"{e[i, j] / o[i, j]:.2f} | {excess[i, j] / tot_excess:.1%} | {cls or 'interior'} |"
        )
    # largest per-node ratios among populated cells
    w = (p > 0).ravel()
    ratio = (e / o).ravel()
    idx = np.flatnonzero(w)[np.argsort(-ratio[w])[:6]]
    out += [
        "",
        "Largest per-node eikonal / optimal among populated cells: "
        + "; ".join(
            f"({divmod(int(k), n)[0]}, {divmod(int(k), n)[1]}) {ratio[k]:.1f} (eps {eps.ravel()[k]:.2f}, pop {p.ravel()[k]:.2%})"
            for k in idx
        )
        + ".",
        "",
    ]
    return "\n".join(out) + "\n"


# ============================================================================================
# which eikonal options close the gap where (cheap on coarse maps: each build takes a second)
# ============================================================================================
def variants(r: dict) -> str:
    """Eikonal builds with other public options on the same map, against the same optimum, per cell class."""
    from geopriv.exceptions import InfeasibleMechanismError

    pm = coarsen_to(paper_scaled_map(), (r["size"], r["size"]))
    p, o, nod, eps = r["prior"], r["opt"], r["nodata"], r["eps"]
    edge = np.zeros_like(nod)
    edge[0, :] = edge[-1, :] = edge[:, 0] = edge[:, -1] = True
    classes = {
        "all": ~nod,
        "floor interior (eps < 0.6, not edge)": ~nod & (eps < 0.6) & ~edge,
        "denser (eps >= 0.6)": ~nod & (eps >= 0.6),
        "raster edge": ~nod & edge,
    }
    base = EikonalMechanism.build(pm)
    sm = base.suggest_margin()
    runs = [
        ("defaults (margin auto, smooth 0.5, jump None)", {}),
        ("margin=0.1 (the uniform margin, default before 2026-11-23)", dict(margin=0.1)),
        ("smooth=None", dict(smooth=None)),
        (f"margin=mech.suggest_margin() ({np.min(sm):.2g} .. {np.max(sm):.2g})", dict(margin=sm)),
        ("suggest_margin + smooth=None", dict(margin=sm, smooth=None)),
        ("margin=0.01, smooth=None (not feasible on every map)", dict(margin=0.01, smooth=None)),
    ]
    out = [
        "",
        f"Which eikonal options close the gap where (same {r['size']} x {r['size']} map and optimum; "
        f"aggregate eikonal / optimal per class; the default build's normaliser uses at most a share "
        f"{base.normaliser_share().max():.3f} of the loss, of up to {r['eik_margin']:g} reserved for it, "
        f"verify {base.verify().max_ratio:.3f}):",
        "",
        "| eikonal build | verify | " + " | ".join(classes) + " |",
        "|---|---|" + "---|" * len(classes),
    ]
    for name, kw in runs:
        try:
            em = EikonalMechanism.build(pm, **kw)
        except InfeasibleMechanismError as exc:
            out.append(f"| {name} | infeasible: {str(exc)[:60]} |" + " |" * len(classes))
            continue
        e = em.node_mse(jitter=False)
        out.append(
            f"| {name} | {em.verify().max_ratio:.3f} | "
            + " | ".join(f"{(p[m] * e[m]).sum() / (p[m] * o[m]).sum():.2f}" for m in classes.values())
            + " |"
        )
    return "\n".join(out) + "\n"


# ============================================================================================
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=14, help="coarse grid size (default 14, as in Table I)")
    ap.add_argument(
        "--solver", default="ipm", choices=list(SOLVERS), help="LP solver (default ipm: HiGHS interior point)"
    )
    ap.add_argument("--window", type=int, default=None, help="windowed LP (an upper bound on the optimum; say so)")
    ap.add_argument("--margin", type=float, default=1e-4, help="LP margin (1e-3 with small windows)")
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--out-png", default="docs/img/eikonal_error_where.png")
    ap.add_argument("--out-md", default="bench/results/eikonal_error_where.md")
    ap.add_argument("--append", action="store_true", help="append a section to --out-md instead of rewriting it")
    ap.add_argument(
        "--cache", default=None, help="per-node arrays (npz); default bench/out/eikonal_error_where_<size>.npz"
    )
    ap.add_argument("--from-cache", action="store_true", help="redraw from --cache without solving")
    ap.add_argument("--no-variants", action="store_true", help="skip the eikonal builds with other options")
    args = ap.parse_args(argv)

    cache = Path(
        args.cache
        or ROOT
        / "bench"
        / "out"
        / f"eikonal_error_where_{args.size}{'_w' + str(args.window) if args.window else ''}.npz"
    )
    t0 = time.perf_counter()
    if args.from_cache:
        with np.load(cache) as z:
            r = {k: (z[k].item() if z[k].ndim == 0 else z[k]) for k in z.files}
        r["size"], r["window"] = int(r["size"]), int(r["window"])
    else:
        r = compute(args.size, args.solver, args.window, args.margin, args.time_limit)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **r)
    total = time.perf_counter() - t0
    s = summarise(r)
    caption = (
        "exact LP (interior point, no window)"
        if r["window"] <= 0
        else f"windowed LP (window {r['window']} cells): 'optimal' is an upper bound on the optimum, "
        "so eikonal / optimal is a lower estimate"
    )
    lap = r["lap"]
    print(
        f"  node errors / Laplace: eikonal {s['eik'] / lap:.4f}, optimal {s['opt'] / lap:.4f}, local {s['loc'] / lap:.4f}"
    )
    print(
        f"  eikonal / optimal: aggregate {s['eik_opt']:.3f}, weighted mean {s['r_eo_wmean']:.3f}, q10/50/90 {s['r_eo_q']}"
    )
    print(
        f"  eikonal / local:   aggregate {s['eik_loc']:.3f}, weighted mean {s['r_el_wmean']:.3f}, q10/50/90 {s['r_el_q']}"
    )
    png = Path(args.out_png) if Path(args.out_png).is_absolute() else ROOT / args.out_png
    figure(r, s, png, caption)
    print(f"figure: {png} ({png.stat().st_size / 1024:.0f} KB)")
    when = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
    cmd = "python bench/eikonal_error_map.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    section = markdown(
        r,
        s,
        cmd.strip(),
        when + (f", {total:.0f} s in all" if not args.from_cache else " (from cache)"),
        args.out_png,
        caption,
    )
    if not args.no_variants:
        section += variants(r)
    md = Path(args.out_md) if Path(args.out_md).is_absolute() else ROOT / args.out_md
    md.parent.mkdir(parents=True, exist_ok=True)
    if args.append and md.exists():
        with md.open("a") as fh:
            fh.write("\n" + section)
    else:
        md.write_text(HEADER + section)
    print(f"markdown: {md}")
    print(section)
    return 0


HEADER = """# Where the eikonal mechanism's error goes (bench/eikonal_error_map.py)

Per-node expected squared error on the coarse Tokyo maps of Table I (paper scaling: [0, 100]^2,
epsilon 0.4 .. 2.0 per unit, prior = population; `coarsen_to(paper_scaled_map(), (n, n))`),
at the nodes (no jitter), in square units: eikonal = `EikonalMechanism.build(pm)` with the
default options, `node_mse(jitter=False)`; optimal = `optimal_mechanism(pm, solver="ipm")`
(repaired LP solution, verified <= 1), `node_mse()`; local Laplace = 6 / epsilon(a)^2 at the
node's own (coarse, block-minimum) epsilon, the non-private reference of bench/eikonal_build.py.
One process on 2 shared cores.  The LP minimises the *population-weighted* error, so its rows at
zero-population nodes (no data: Tokyo Bay, outside the metropolis) are arbitrary feasible rows:
they are excluded from every weighted figure below (their ratio range is still listed).
"Kernel lowering" is the eikonal kernels' epsilon / ((1 - margin) x the map's epsilon)
(`mech.kernel_epsilon`): 1 where the `jump` / `smooth` limits left the map alone.  "Excess" is
prior x (eikonal - optimal) summed over a class, as a share of the total: where Table I's gap is.

"""


if __name__ == "__main__":
    sys.exit(main())
