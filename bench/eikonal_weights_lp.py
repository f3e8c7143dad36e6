"""Experiment: eikonal weights chosen for expected error under the prior (issue 17, item 3), by LP.

The build chooses the output weights w for flatness: the normaliser s(u) = sum_y w_y K_y(u)
must vary across each edge by no more than the share of the privacy loss the kernels leave to
it (``budget``).  Here the same kernels get the weights that minimise the expected squared
error under the public prior instead, subject to exactly those constraints:

    minimise   sum_u pi_u sum_y w_y K_y(u) c(u, y)          (c: squared distance + jitter)
    subject to s = K w + exp(-cap) sum(w),  s >= 1,
               s(a) <= exp(budget(a, b)) s(b) for every edge, both directions,  w >= 0.

Because s >= 1 the objective is an upper bound on the released mechanism's expected error
(P = w K / s); re-solving with pi_u / s_u as the prior tightens it (a few rounds).  Every
result is verified by the mechanism's own check before its error is reported.

Side by side in one process, default build options, Tokyo raster at the paper's scaling
coarsened to size x size (the Table I maps).

Run:  python bench/eikonal_weights_lp.py [--sizes 20 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from eikonal_build import paper_scaled_map  # noqa: E402

from geopriv import EikonalMechanism  # noqa: E402
from geopriv.mechanisms.eikonal import verification  # noqa: E402
from geopriv.mechanisms.grid import allowed as grid_allowed  # noqa: E402
from geopriv.mechanisms.grid import edge_list  # noqa: E402
from geopriv.mechanisms.optimal import coarsen_to  # noqa: E402
from geopriv.privacy_map import edge_weights  # noqa: E402


def weights_lp(mech, rounds: int = 3, slack: float = 1e-4, time_limit: float = 600.0):
    """(weights, seconds, rounds run) minimising the expected error of ``mech``'s kernels under its prior."""
    from scipy.optimize import linprog

    pm = mech.privacy_map
    ny, nx = pm.shape
    n, M = ny * nx, len(mech.weights)
    hx, hy = pm.cell_size
    cT = math.exp(-mech.cap)
    K = sp.csr_matrix((mech.kernel.astype(np.float64), mech.indices, mech.indptr), shape=(n, M))
    ux = np.tile(pm.node_x, ny)
    uy = np.repeat(pm.node_y, nx)
    ox, oy = mech.release_xy[:, 0], mech.release_xy[:, 1]
    jit = (mech.output_step.astype(float) ** 2) * (hx * hx + hy * hy) / 12.0
    C = (ux[:, None] - ox[None, :]) ** 2 + (uy[:, None] - oy[None, :]) ** 2 + jit[None, :]  # n x M, CRS units^2
    prior = pm.prior(None).ravel()
    prior = prior / prior.sum()
    # the normaliser's share of each edge, as the build computes it
    budget = [
        np.maximum(al - kw, 1e-300) for al, kw in zip(grid_allowed(pm), edge_weights(mech.kernel_epsilon, hy, hx))
    ]
    ia, ib, beta = edge_list(pm.shape, budget)
    e = np.exp(beta * (1.0 - slack))
    ne = len(ia)
    # variables: w (M), s (n), W (1)
    nv = M + n + 1
    eq = sp.vstack(
        [
            sp.hstack([-K, sp.eye(n), sp.csr_matrix(np.full((n, 1), -cT))]),
            sp.hstack([sp.csr_matrix(-np.ones((1, M))), sp.csr_matrix((1, n)), sp.csr_matrix(np.ones((1, 1)))]),
        ]
    ).tocsr()
    r = np.arange(ne)
    rows = np.concatenate([r, r, ne + r, ne + r])
    cols = M + np.concatenate([ia, ib, ib, ia])
    vals = np.concatenate([np.ones(ne), -e, np.ones(ne), -e])
    ub = sp.csr_matrix((vals, (rows, cols)), shape=(2 * ne, nv))
    bounds = [(0, None)] * M + [(1.0, None)] * n + [(0, None)]
    t0 = time.perf_counter()
    weight = prior.copy()
    w = None
    done = 0
    for _ in range(rounds):
        g = np.asarray(K.multiply(C).T @ weight).ravel() + cT * (C.T @ weight)
        c = np.concatenate([g, np.zeros(n + 1)])
        res = linprog(
            c,
            A_ub=ub,
            b_ub=np.zeros(2 * ne),
            A_eq=eq,
            b_eq=np.zeros(n + 1),
            bounds=bounds,
            method="highs",
            options={"time_limit": time_limit},
        )
        if res.status != 0:
            print("  LP:", res.message)
            break
        w = res.x[:M]
        s = np.asarray(K @ w).ravel() + cT * w.sum()
        weight = prior / s  # the released error divides by s: re-weight and solve again
        done += 1
    return w, time.perf_counter() - t0, done


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 50])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    full = paper_scaled_map()
    print(
        "| grid | outputs | flat weights MSE / Laplace | LP weights MSE / Laplace | LP / flat | LP rounds | LP s | verified (flat, LP) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        pm = full if size == full.shape[0] else coarsen_to(full, (size, size))
        mech = EikonalMechanism.build(pm, n_jobs=args.jobs)
        lap = mech.compare_laplace()
        w, secs, rounds = weights_lp(mech, args.rounds)
        if w is None:
            print(f"| {size} x {size} | {len(mech.weights)} | {lap['ratio']:.4f} | (LP failed) | | | {secs:.0f} | |")
            continue
        new = dataclasses.replace(mech, weights=w, report=None)
        new = dataclasses.replace(new, normaliser=verification.exact_normaliser(new))
        rep = new.verify()
        lap2 = new.compare_laplace()
        print(
            f"| {size} x {size} | {len(w):,} | {lap['ratio']:.4f} | {lap2['ratio']:.4f} | {lap2['ratio'] / lap['ratio']:.3f} | "
            f"{rounds} | {secs:.1f} | {mech.report.max_ratio:.4f}, {rep.max_ratio:.4f} ({'ok' if rep.ok else 'FAILS'}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
