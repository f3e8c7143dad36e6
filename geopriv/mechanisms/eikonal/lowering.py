"""Lowering the kernel rate map and placing the outputs.

The kernels are computed on a lowered copy of the target map (lowering only: verification is
always against the target).  Real rasters have jumps that cannot be normalised with
nonnegative weights; :func:`lower_rate` smooths them away by lowering epsilon on the dense
side.  :func:`output_levels` thins the output lattice where the noise is wide.
"""
from __future__ import annotations

import math

import numpy as np

from ...privacy_map import lipschitz_envelope


def lower_rate(kp: np.ndarray, hy: float, hx: float, smooth, despeckle: int, jump=None) -> np.ndarray:
    """Regularise the (padded) kernel rate map; only ever lowers it.

    ``despeckle``: grey opening with a square of that many cells (removes peaks of epsilon
    narrower than the square, e.g. isolated dense cells; plateaus are kept).  ``smooth``:
    lower epsilon where 1/epsilon changes faster than ``smooth`` units per unit (the
    largest map below whose noise scale is ``smooth``-Lipschitz).
    """
    out = kp
    if despeckle and despeckle > 1:
        from scipy.ndimage import grey_opening

        out = np.minimum(out, grey_opening(out, size=(int(despeckle), int(despeckle)), mode="nearest"))
    if smooth:
        k = float(smooth)
        if not (math.isfinite(k) and k > 0):
            raise ValueError("smooth must be a number > 0 (e.g. 0.3), or None.")
        lh, lv, ld = hx, hy, math.hypot(hx, hy)
        shp = out.shape
        w = (
            np.full((shp[0], shp[1] - 1), k * lh),
            np.full((shp[0] - 1, shp[1]), k * lv),
            np.full((shp[0] - 1, shp[1] - 1), k * ld),
            np.full((shp[0] - 1, shp[1] - 1), k * ld),
        )
        neg, _ = lipschitz_envelope(-1.0 / out, w)
        out = np.minimum(out, -1.0 / neg)
    if jump:
        r = float(jump)
        hmin = min(hx, hy)
        # the limit is per noise length where a cell is longer than one (epsilon * length > 1 on an
        # edge, coarse rasters): there a cell-to-cell jump is already smoothed by the kernel's own
        # decay within the cell, and a per-cell limit would lower dense cells for nothing
        lh, lv, ld = hx, hy, math.hypot(hx, hy)
        e = out
        w = (
            r * lh / hmin * np.maximum(1.0, np.minimum(e[:, 1:], e[:, :-1]) * lh),
            r * lv / hmin * np.maximum(1.0, np.minimum(e[1:, :], e[:-1, :]) * lv),
            r * ld / hmin * np.maximum(1.0, np.minimum(e[1:, 1:], e[:-1, :-1]) * ld),
            r * ld / hmin * np.maximum(1.0, np.minimum(e[1:, :-1], e[:-1, 1:]) * ld),
        )
        low, _ = lipschitz_envelope(np.log(out), w)
        out = np.minimum(out, np.exp(low))
    return out


def output_levels(kp: np.ndarray, hy: float, hx: float, sigma: float, max_step: int):
    """Output spacing (1, 2, 4, ... cells) per padded node: spacing * h * eps_local <= sigma."""
    from scipy.ndimage import maximum_filter

    step = np.ones(kp.shape, np.int64)
    hmax = max(hx, hy)
    k = 2
    while k <= max_step:
        local = maximum_filter(kp, size=2 * k + 1, mode="nearest")
        step[local * k * hmax <= sigma] = k
        k *= 2
    return step
