"""Verification of an eikonal mechanism: the guarantee checked on exactly what is sampled.

:func:`verify` recomputes, from the arrays sampling uses (weights, kernel rows, cap), the
realised |delta ln P(Q(u) = y)| / allowed over every pair of neighbouring nodes and every
output, with the normaliser recomputed from the weights and kernels (a stored normaliser that
differs is reported).  :func:`check_arrays` refuses arrays that cannot describe a
distribution before anything is computed from them.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...exceptions import MechanismFileError, ParameterError
from ..grid import allowed as grid_allowed
from ..grid import edge_slices
from .kernels import LogRatioExtremes
from .report import VerifyReport
from .weights import row_blocks, row_sums


def verify(mech, extremes=None, rowsum=None, progress=None) -> VerifyReport:
    """Realised local Lipschitz constant of ln P(Q(u)=y) over all neighbouring node pairs and outputs.

    ``extremes`` (:class:`~geopriv.mechanisms.eikonal.kernels.LogRatioExtremes`) may carry
    the kernels' part of the check, computed by the kernel workers from the very column
    blocks that were then placed into ``mech``'s arrays (:func:`.kernels.compute_kernels`
    with ``extremes=True``; the build and the load of a compact file): the report is then the
    same as from the arrays (same ratios up to rounding, same worst edge and output), without
    a second pass over the kernels.  Without it, the kernels are read from ``mech``'s arrays.

    A mechanism whose kernels are computed on demand (no arrays) is checked from one pass of
    kernel solves (:func:`.ondemand.full_pass`) that yields both the extremes and the row sums
    sum_y w_y kernel_y(u) (``rowsum``: the build passes its own pass's extremes and row sums);
    ``progress`` reports that pass as ``build``'s does.

    Recomputed from the arrays sampling uses (weights, kernel, indptr, indices, cap), in
    float64.  The normaliser is not trusted: it is recomputed from the weights and kernels
    (sampling draws from w_y (kernel + exp(-cap)) relative to the row's total, i.e. divides
    by that row sum whatever is stored), the ratios are computed with the recomputed one,
    and a stored normaliser that differs from it by more than ``NORMALISER_RTOL`` makes the
    report not ``ok`` (``normaliser_mismatch``).  See the package notes
    (:mod:`geopriv.mechanisms.eikonal`) for the exact statement.

    Raises
    ------
    MechanismFileError
        Arrays that cannot describe a distribution (non-finite or negative weights or
        kernel values, indices out of range, indptr not monotone, ...): rebuild.
    """
    t0 = time.perf_counter()
    check_arrays(mech)
    pm = mech.privacy_map
    ny, nx = pm.shape
    allowed = grid_allowed(pm)
    inv = [1.0 / a for a in allowed]
    slices = edge_slices()
    cT = math.exp(-mech.cap)
    held = mech.kernel is not None
    if not held and (rowsum is None or extremes is None):
        from .ondemand import full_pass

        done = full_pass(mech, extremes="track", progress=progress)
        extremes, rowsum = done.extremes, done.rowsum
    s = exact_normaliser(mech) if held else rowsum + cT * float(np.asarray(mech.weights, np.float64).sum())
    mismatch = normaliser_mismatch(mech.normaliser, s)
    lns = np.log(s).reshape(ny, nx)
    node = np.zeros((ny, nx))
    best = (-1.0, None)

    def account(ratio, sa, m):
        nonlocal best
        k = int(np.argmax(ratio))
        val = float(ratio.flat[k])
        if val > best[0]:
            best = (val, (k, ratio.shape, sa, m))

    # normaliser only (every output outside its kernel's support)
    norm_share = 0.0
    for (sa, sb), iw in zip(slices, inv):
        ratio = np.abs(lns[sa] - lns[sb]) * iw
        norm_share = max(norm_share, float(ratio.max()))
        _node_max(node, ratio, sa, sb)
        account(ratio, sa, -1)
    if extremes is None:
        extremes = extremes_from_arrays(mech)
    elif tuple(extremes.shape) != (ny, nx):
        raise ParameterError(f"extremes are for a {extremes.shape} raster, the mechanism's is {(ny, nx)}")
    # max over outputs of |alpha_y - d| = max(hi - d, d - lo), with hi >= 0 >= lo
    for (sa, sb), iw, hi, lo in zip(slices, inv, extremes.hi, extremes.lo):
        d = lns[sa] - lns[sb]
        ratio = np.maximum(hi - d, d - lo) * iw
        _node_max(node, ratio, sa, sb)
        account(ratio, sa, None)  # the output: recorded by the workers, or from the worst edge's two rows, below
    val, where = best
    k, shp, sa, m = where
    a_r, a_c = np.unravel_index(k, shp)
    off_a = (0 if sa[0].start is None else sa[0].start, 0 if sa[1].start is None else sa[1].start)
    fam = [i for i, (x, _) in enumerate(slices) if x == sa][0]
    da = [(0, 1), (1, 0), (1, 1), (1, -1)][fam]
    ra, ca = a_r + off_a[0], a_c + off_a[1]
    rb, cb = ra + da[0], ca + da[1]
    if m is None and extremes.hi_at is not None:  # tracked by the workers
        e = np.unravel_index(k, shp)
        d = lns[ra, ca] - lns[rb, cb]
        hi_v, lo_v = extremes.hi[fam][e], extremes.lo[fam][e]
        m = int(extremes.hi_at[fam][e] if hi_v - d >= d - lo_v else extremes.lo_at[fam][e])
    if m is None:
        rows = mech if held else _rows_of(mech, [ra * nx + ca, rb * nx + cb])
        m = _worst_output(rows, ra * nx + ca, rb * nx + cb, lns[ra, ca] - lns[rb, cb], cT)
    allowed_ab = float(allowed[fam][min(ra, rb), min(ca, cb)])
    worst = {
        "node_a": (int(ra), int(ca)),
        "node_b": (int(rb), int(cb)),
        "output": None if m < 0 else int(m),
        "output_xy": None if m < 0 else tuple(float(v) for v in mech.output_xy[m]),
        "allowed_log_ratio": allowed_ab,
        "realised_log_ratio": val * allowed_ab,
    }
    n_edges = sum(int(a.size) for a in allowed)
    return VerifyReport(
        max_ratio=val,
        normaliser_ratio=norm_share,
        worst=worst,
        node_ratio=node,
        n_nodes=ny * nx,
        n_outputs=len(mech.weights),
        n_edges=n_edges,
        seconds=time.perf_counter() - t0,
        normaliser_mismatch=mismatch,
    )


def exact_normaliser(mech) -> np.ndarray:
    """s(u) = sum_y w_y (kernel + exp(-cap)) recomputed from the weights and kernels (float64),
    exactly as :meth:`build` computes the stored one."""
    w = np.asarray(mech.weights, np.float64)
    return row_sums(mech.indptr, mech.indices, mech.kernel, w) + math.exp(-mech.cap) * float(w.sum())


def check_arrays(mech, chunk: int = 10_000_000) -> None:
    """Raise :class:`MechanismFileError` unless every array sampling uses is well formed.

    Checks (O(nnz), in blocks of rows): shapes and dtypes; ``cap`` finite > 0; weights
    finite, >= 0, not all zero; kernel values finite and >= 0; indptr starting at 0,
    monotone and ending at len(indices); indices in range and strictly increasing within
    each row (no duplicates: verification and sampling must see the same entries);
    output_ij within the padded grid; output_step >= 1; remap_xy finite.
    """
    fix = "Rebuild the mechanism (EikonalMechanism.build(privacy_map).save(path)); do not release with it."

    def bad(what):
        raise MechanismFileError(f"The mechanism's arrays are invalid: {what}. {fix}")

    ny, nx = mech.privacy_map.shape
    n = ny * nx
    w, ker, ip, idx, s = mech.weights, mech.kernel, mech.indptr, mech.indices, mech.normaliser
    held = ker is not None or ip is not None or idx is not None
    arrays = {"weights": w, "normaliser": s, "output_ij": mech.output_ij, "output_step": mech.output_step}
    if held:  # (kernels on demand hold none: they are recomputed by the build's function)
        arrays.update(kernel=ker, indptr=ip, indices=idx)
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray):
            bad(f"{name} is not an array")
    for name in ("weights", "kernel", "normaliser"):
        if name in arrays and arrays[name].dtype.kind != "f":
            bad(f"{name} has dtype {arrays[name].dtype} (floating point expected)")
    for name in ("indptr", "indices", "output_ij", "output_step"):
        if name in arrays and arrays[name].dtype.kind not in "iu":
            bad(f"{name} has dtype {arrays[name].dtype} (integers expected)")
    M = len(w) if w.ndim == 1 else -1
    if M < 1:
        bad(f"weights must be a non-empty 1-D array (shape {w.shape})")
    if mech.output_ij.shape != (M, 2) or mech.output_step.shape != (M,):
        bad(f"output_ij {mech.output_ij.shape} / output_step {mech.output_step.shape} do not match {M} weights")
    if s.shape != (n,) or (held and (ip.shape != (n + 1,) or idx.ndim != 1 or ker.shape != idx.shape)):
        shp = {k: np.shape(v) for k, v in (("indptr", ip), ("normaliser", s), ("indices", idx), ("kernel", ker))}
        bad(f"inconsistent sizes ({', '.join(f'{k} {v}' for k, v in shp.items())} for {n} nodes)")
    if not (isinstance(mech.cap, (int, float)) and math.isfinite(mech.cap) and mech.cap > 0):
        bad(f"cap {mech.cap!r} is not a finite number > 0")
    if not np.all(np.isfinite(w)):
        bad(f"{int((~np.isfinite(w)).sum())} weight(s) are not finite (NaN or infinite)")
    if np.any(w < 0):
        bad(f"{int((w < 0).sum())} weight(s) are negative")
    total = float(w.sum())
    if not (math.isfinite(total) and total > 0):
        bad("the weights sum to zero or overflow")
    if not (np.all(np.isfinite(s)) and np.all(s > 0)):
        bad("the stored normaliser has values that are not finite and > 0")
    if held and (ip[0] != 0 or ip[-1] != len(idx) or np.any(ip[1:] < ip[:-1])):
        bad("indptr does not start at 0, end at the number of kernel entries and increase monotonically")
    for r0, r1, lo, hi in row_blocks(ip, chunk) if held else ():  # blocks of rows: bounded memory on 10^9 entries
        kb, ib = ker[lo:hi], idx[lo:hi]
        if not np.all(np.isfinite(kb)):
            bad("kernel values are not finite (NaN or infinite)")
        if np.any(kb < 0):
            bad("kernel values are negative")
        if hi > lo and (int(ib.min()) < 0 or int(ib.max()) >= M):
            bad(f"indices outside 0 .. {M - 1} (the outputs)")
        inc = np.diff(ib.astype(np.int64)) > 0
        starts = ip[r0 + 1 : r1] - lo  # positions where a new row begins
        starts = starts[(starts > 0) & (starts < hi - lo)]
        inc[starts - 1] = True
        if not inc.all():
            bad("indices are not strictly increasing within a row (duplicate or unsorted kernel entries)")
    P = mech.params.get("pad_cells") if isinstance(mech.params, dict) else None
    if not isinstance(P, int) or P < 0:
        bad("params['pad_cells'] (the output padding) is missing or invalid")
    oi, oj = mech.output_ij[:, 0], mech.output_ij[:, 1]
    if np.any(oi < -P) or np.any(oi >= ny + P) or np.any(oj < -P) or np.any(oj >= nx + P):
        bad(f"output_ij outside the padded grid ({P} cells beyond the {ny} x {nx} raster)")
    if np.any(mech.output_step < 1):
        bad("output_step has values < 1")
    if mech.remap_xy is not None:
        r = np.asarray(mech.remap_xy)
        if r.shape != (M, 2) or r.dtype.kind != "f" or not np.all(np.isfinite(r)):
            bad("remap_xy is not a finite (outputs x 2) array")
    check_derived(mech)


def check_derived(mech) -> None:
    """Raise :class:`MechanismFileError` unless the arrays derived from the kernel rate map agree with it.

    A build derives ``kernel_epsilon`` (the unpadded part of the kernel rate map), the output
    lattice ``output_ij`` with each output's ``output_step`` (:func:`.lowering.output_levels` of the
    kernel rate map with ``params['output_spacing']`` and ``params['max_step']``) and the apex radii
    ``output_apex`` from the kernel rate map and its options.  A file whose stored copies differ
    was edited after the build (the unkeyed checksum can be recomputed by anyone): the jitter of
    the released points (``output_step``) or the recorded map would then not be the verified
    ones.  Mechanisms without a kernel rate map (full files of earlier versions) are checked for
    what can be checked without it: ``kernel_epsilon`` has the map's shape, is finite, > 0 and no
    larger than the map's epsilon; steps are powers of two and every output lies on its step's
    lattice.
    """
    from .lowering import output_levels

    fix = "Rebuild the mechanism (EikonalMechanism.build(privacy_map).save(path)); do not release with it."

    def bad(what):
        raise MechanismFileError(f"The mechanism's arrays are inconsistent: {what}. {fix}")

    pm = mech.privacy_map
    ny, nx = pm.shape
    hx, hy = pm.cell_size
    params = mech.params if isinstance(mech.params, dict) else {}
    P = params.get("pad_cells")
    keps = np.asarray(mech.kernel_epsilon)
    step = np.asarray(mech.output_step)
    oij = np.asarray(mech.output_ij)
    if keps.shape != (ny, nx) or keps.dtype.kind != "f":
        bad(f"kernel_epsilon has shape {keps.shape} and dtype {keps.dtype}, expected floating point {(ny, nx)}")
    if step.ndim != 1 or step.dtype.kind not in "iu" or oij.shape != (len(step), 2) or oij.dtype.kind not in "iu":
        bad("output_step / output_ij are not one integer step and one (row, col) pair per output")
    if not isinstance(P, int) or P < 0:
        bad("params['pad_cells'] (the output padding) is missing or invalid")
    kp = mech.kernel_rate
    if kp is None:  # a full file of an earlier version: the invariants that need no kernel rate map
        eps = np.asarray(pm.epsilon_crs, dtype=float)
        if not (np.all(np.isfinite(keps)) and np.all(keps > 0) and np.all(keps <= eps * (1 + 1e-9))):
            bad("kernel_epsilon is not finite, > 0 and at most the privacy map's epsilon everywhere")
        if np.any(step < 1) or np.any(step & (step - 1)):
            bad("output_step has values that are not powers of two")
        if np.any((oij[:, 0] + P) % step) or np.any((oij[:, 1] + P) % step):
            bad("outputs lie off the lattice of their output_step")
        return
    kp = np.asarray(kp)
    if kp.shape != (ny + 2 * P, nx + 2 * P):
        bad(f"kernel_rate has shape {kp.shape}, expected {(ny + 2 * P, nx + 2 * P)}")
    if not np.array_equal(keps, kp[P : P + ny, P : P + nx]):
        bad("kernel_epsilon is not the kernel rate map on the raster (it was edited after the build)")
    spacing, max_step = params.get("output_spacing"), params.get("max_step")
    if (
        isinstance(spacing, bool)
        or not isinstance(spacing, (int, float))
        or not (math.isfinite(spacing) and spacing > 0)
    ):
        bad("params['output_spacing'] is missing or not a finite number > 0")
    if max_step is not None and (isinstance(max_step, bool) or not isinstance(max_step, int) or max_step < 1):
        bad("params['max_step'] is not None or an integer >= 1")
    if not (np.all(np.isfinite(kp)) and np.all(kp > 0)):
        bad("kernel_rate is not finite and > 0 everywhere")
    levels = output_levels(kp, hy, hx, spacing, max_step)
    on_lattice = (np.arange(kp.shape[0])[:, None] % levels == 0) & (np.arange(kp.shape[1])[None, :] % levels == 0)
    oi, oj = np.nonzero(on_lattice)
    if len(oi) != len(step) or not (np.array_equal(oij[:, 0], oi - P) and np.array_equal(oij[:, 1], oj - P)):
        bad("output_ij is not the output lattice of the kernel rate map and params['output_spacing'] / ['max_step']")
    if not np.array_equal(step, levels[oi, oj]):
        bad(
            "output_step is not the output spacing the kernel rate map and params['output_spacing'] / ['max_step'] "
            "give (it was edited after the build)"
        )
    apex = params.get("apex")
    if mech.output_apex is not None and isinstance(apex, (int, float)) and not isinstance(apex, bool):
        expected = np.where(step > 1, apex * step * math.sqrt(hx * hy) * kp[oi, oj], 0.0)
        if np.shape(mech.output_apex) != expected.shape or not np.allclose(
            mech.output_apex, expected, rtol=1e-12, atol=0
        ):
            bad("output_apex is not the apex radii params['apex'] and the output steps give")


def normaliser_mismatch(stored: np.ndarray, exact: np.ndarray) -> float:
    """Largest relative difference |stored - exact| / exact (inf when shapes differ, NaN propagates as inf)."""
    if np.shape(stored) != np.shape(exact):
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        d = float(np.max(np.abs(np.asarray(stored, np.float64) - exact) / exact))
    return d if math.isfinite(d) else math.inf


def extremes_from_arrays(mech, entries: int | None = None) -> LogRatioExtremes:
    """The kernels' per-edge extremes read from ``mech``'s arrays, in bands of raster lines.

    Bands overlap by one line, so every edge lies within one band; each band is turned into
    columns and accounted for by the same :meth:`LogRatioExtremes.add_columns` the kernel
    workers use.  Memory: one band of at most ``entries`` kernel entries (``BAND_ENTRIES``).
    """
    ny, nx = mech.privacy_map.shape
    cT = math.exp(-mech.cap)
    total = LogRatioExtremes((ny, nx))
    for i0, i1, S in _bands(mech, entries):
        part = LogRatioExtremes((i1 - i0, nx))
        part.add_columns(np.diff(S.indptr), S.indices, S.data, cT)
        total.merge(part, row=i0)
        del S, part
    return total


def _rows_of(mech, nodes):
    """The rows of ``nodes`` of a mechanism with kernels on demand (recomputed, as sampling does)."""
    from types import SimpleNamespace

    from .ondemand import rows

    ip, idx, ker = rows(mech, nodes)
    return SimpleNamespace(indptr=ip, indices=idx, kernel=ker)


def _worst_output(mech, a: int, b: int, d: float, cT: float) -> int:
    """The output with the largest |ln K_y(a) - ln K_y(b) - d| (-1: one outside both supports), ties to the smallest."""
    ip, idx, ker = mech.indptr, mech.indices, mech.kernel
    ya, yb = idx[ip[a] : ip[a + 1]], idx[ip[b] : ip[b + 1]]
    ys = np.union1d(ya, yb)
    ka, kb = np.full(len(ys), cT), np.full(len(ys), cT)
    ka[np.searchsorted(ys, ya)] += ker[ip[a] : ip[a + 1]]
    kb[np.searchsorted(ys, yb)] += ker[ip[b] : ip[b + 1]]
    dev = np.abs(np.log(ka) - np.log(kb) - d)
    if len(ys) == 0 or dev.max() <= abs(d):
        return -1
    return int(ys[int(np.argmax(dev))])


def _node_max(node, ratio, sa, sb):
    """Update per-node maxima with an edge-ratio array (both endpoints)."""
    for sl in (sa, sb):
        view = node[
            sl[0].start or 0 : (sl[0].start or 0) + ratio.shape[0],
            sl[1].start or 0 : (sl[1].start or 0) + ratio.shape[1],
        ]
        np.maximum(view, ratio, out=view)


#: kernel entries per verification band (about 1 GB of band columns at a time)
BAND_ENTRIES = 128_000_000


def _bands(mech, entries: int | None = None):
    """(first line, end line, CSC of the band's rows) over bands of raster lines overlapping by one line.

    A band holds at most about ``entries`` kernel entries (at least two lines), so memory stays
    one band whatever the raster; consecutive bands share a line, so every pair of neighbouring
    nodes (lines l and l + 1) lies within one band.
    """
    import scipy.sparse as sp

    entries = BAND_ENTRIES if entries is None else int(entries)
    ny, nx = mech.privacy_map.shape
    ip, idx, ker = mech.indptr, mech.indices, mech.kernel
    M = len(mech.weights)
    per_line = np.diff(np.asarray(ip, np.int64)[::nx])  # entries per raster line
    i0 = 0
    while True:
        i1 = i0 + 2
        total = int(per_line[i0:i1].sum())
        while i1 < ny and total + int(per_line[i1]) <= entries:
            total += int(per_line[i1])
            i1 += 1
        i1 = min(i1, ny)
        lo, hi = int(ip[i0 * nx]), int(ip[i1 * nx])
        band = sp.csr_matrix(
            (ker[lo:hi], idx[lo:hi], np.asarray(ip[i0 * nx : i1 * nx + 1], np.int64) - lo), shape=((i1 - i0) * nx, M)
        )
        yield i0, i1, band.tocsc()
        if i1 >= ny:
            return
        i0 = i1 - 1
