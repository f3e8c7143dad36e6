"""Lowering the kernel rate map and placing the outputs.

The kernels are computed on a lowered copy of the target map (lowering only: verification is
always against the target).  Real rasters have jumps that cannot be normalised with
nonnegative weights; :func:`lower_rate` smooths them away by lowering epsilon on the dense
side.  :func:`output_levels` thins the output lattice where the noise is wide.
"""

from __future__ import annotations

import math

import numpy as np

from ...exceptions import ParameterError
from ...privacy_map import PrivacyMap, lipschitz_envelope

#: ``margin="auto"``: share of the loss kept for normalisation per noise length ...
AUTO_MARGIN = 0.1
#: ... and never less than this share on a cell
AUTO_MARGIN_FLOOR = 0.01


def auto_margin(pm: PrivacyMap) -> np.ndarray:
    """The per-cell margin of ``margin="auto"``: 0.1 of the loss per noise length.

    ``AUTO_MARGIN / max(1, epsilon * cell)``, at least ``AUTO_MARGIN_FLOOR``.  Where a cell is
    shorter than the noise length 1/epsilon (fine rasters: every cell of the paper's 200 x 200
    Tokyo map) this is the uniform 0.1.  Where a cell is longer, its kernels decay within it,
    the normaliser is nearly flat across its edges and a share of the edge's (large) allowed
    loss is mostly wasted: the coarse Table I maps used at most 0.5-3 % of a uniform 0.1.  A
    function of the public map only.
    """
    eh = np.asarray(pm.epsilon_crs, dtype=float) * min(pm.cell_size)
    return np.clip(AUTO_MARGIN / np.maximum(1.0, eh), AUTO_MARGIN_FLOOR, AUTO_MARGIN)


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
            raise ParameterError("smooth must be a number > 0 (e.g. 0.3), or None.")
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


def output_levels(kp: np.ndarray, hy: float, hx: float, sigma: float, max_step: int | None):
    """Output spacing (1, 2, 4, ... cells) per padded node: spacing * h * eps_local <= sigma.

    The spacing follows the local decay length 1/epsilon, not the cell size: on a finer raster
    of the same map the outputs stay as far apart on the ground.  ``max_step`` caps it (None:
    no cap beyond the grid's size).
    """
    from scipy.ndimage import maximum_filter

    step = np.ones(kp.shape, np.int64)
    hmax = max(hx, hy)
    limit = max(kp.shape) if max_step is None else int(max_step)
    k = 2
    while k <= limit:
        local = maximum_filter(kp, size=2 * k + 1, mode="nearest")
        ok = local * k * hmax <= sigma
        if not ok.any():
            break
        step[ok] = k
        k *= 2
    return step
