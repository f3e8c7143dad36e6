"""Kernels on demand: an eikonal mechanism that holds no kernel arrays.

A held mechanism keeps every kernel entry (about 2,900 per raster node at the paper's
scaling: 10^8 at 200 x 200, 3 x 10^9 at 1000 x 1000).  A mechanism built or loaded with
``kernels="on_demand"`` keeps only what a compact file stores (kernel rate map, outputs, apex
radii, weights, normaliser) and recomputes kernels when something needs them, with the very
function the build used (:func:`.kernels.kernel_pass`, column by column, so the values are
bit for bit those the build verified):

* sampling needs the rows of the input nodes it draws from: the outputs whose kernel reaches
  those nodes are found by one multi-source shortest-path search (:func:`.kernels.outputs_reaching`),
  only their columns are solved, and only the requested rows are kept (:class:`RowCache`,
  which grows as new nodes are sampled);
* verification, expected errors and the posterior-mean remap need every column once: one
  pass whose reductions run in the workers or per chunk as it arrives (memory: one chunk per
  worker plus a few arrays of the raster's size).
"""
from __future__ import annotations

import math

import numpy as np

from .kernels import kernel_pass, outputs_reaching


def problem(mech) -> dict:
    """The arguments of :func:`.kernels.kernel_pass` that define ``mech``'s kernels (public parameters only)."""
    if mech.kernel_rate is None or mech.output_apex is None:
        raise ValueError("This mechanism does not know its kernel rate map (a full file of an earlier version): "
                         "its kernels cannot be recomputed. Load it with kernels='held' or rebuild it.")
    pm = mech.privacy_map
    hx, hy = pm.cell_size
    P = int(mech.params["pad_cells"])
    return {
        "kp": np.asarray(mech.kernel_rate, np.float64),
        "shape": pm.shape,
        "cell": (hy, hx),
        "P": P,
        "oi": np.asarray(mech.output_ij[:, 0], np.int64) + P,
        "oj": np.asarray(mech.output_ij[:, 1], np.int64) + P,
        "apex_t": np.asarray(mech.output_apex, np.float64),
        "cap": float(mech.cap),
        "solver": mech.params.get("solver", "graph"),
    }


def n_jobs(mech) -> int:
    return int(getattr(mech, "_n_jobs", 1) or 1)


def full_pass(mech, *, extremes: bool = False, weights: bool = True, on_chunk=None, progress=None, mp_context=None):
    """One pass over every kernel column of ``mech`` (:class:`.kernels.KernelPass`, no entries held)."""
    pr = problem(mech)
    return kernel_pass(
        pr["kp"], pr["shape"], pr["cell"], pr["P"], pr["oi"], pr["oj"], pr["apex_t"], pr["cap"], pr["solver"],
        n_jobs(mech), progress, mp_context, extremes=extremes,
        weights=np.asarray(mech.weights, np.float64) if weights else None, hold=False, on_chunk=on_chunk,
    )


def rows(mech, nodes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR (indptr over all raster nodes, indices, kernel) holding the rows of ``nodes`` only (others empty).

    The same arrays, entry for entry, as the rows of the held mechanism: only the outputs whose
    kernel reaches one of ``nodes`` are solved, by the build's function, and their columns are
    placed as :meth:`.kernels.KernelColumns.to_csr` places them (columns sorted in each row).
    """
    pm = mech.privacy_map
    n = pm.shape[0] * pm.shape[1]
    nodes = np.unique(np.asarray(nodes, np.int64))
    if len(nodes) and (nodes[0] < 0 or nodes[-1] >= n):
        raise IndexError(f"node indices must be in 0 .. {n - 1}")
    pr = problem(mech)
    outs = outputs_reaching(pr["kp"], pr["shape"], pr["cell"], pr["P"], pr["oi"], pr["oj"], pr["apex_t"], pr["cap"],
                            pr["solver"], nodes)
    if len(outs) == 0:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    keep = np.zeros(n, bool)
    keep[nodes] = True
    r = kernel_pass(pr["kp"], pr["shape"], pr["cell"], pr["P"], pr["oi"], pr["oj"], pr["apex_t"], pr["cap"], pr["solver"],
                    n_jobs(mech), None, None, outputs=outs, keep_rows=keep)
    indptr, indices, kernel = r.columns.to_csr(release=True)
    return indptr, outs[indices].astype(np.int32), kernel


def merge_rows(a, b):
    """Union of two CSR arrays (indptr, indices, kernel) over the same rows whose non-empty rows are disjoint."""
    ip1, ix1, k1 = a
    ip2, ix2, k2 = b
    c1, c2 = np.diff(ip1), np.diff(ip2)
    if np.any((c1 > 0) & (c2 > 0)):
        raise ValueError("merge_rows: both arrays hold entries for the same row")
    ip = np.zeros(len(ip1), np.int64)
    np.cumsum(c1 + c2, out=ip[1:])
    ix = np.empty(int(ip[-1]), np.int32)
    k = np.empty(int(ip[-1]), np.float32)
    for ipx, cx, ixx, kx in ((ip1, c1, ix1, k1), (ip2, c2, ix2, k2)):
        pos = np.repeat(ip[:-1] - ipx[:-1], cx) + np.arange(len(ixx), dtype=np.int64)
        ix[pos] = ixx
        k[pos] = kx
    return ip, ix, k


#: kernel entries a :class:`RowCache` keeps (about 4 GB); beyond, it keeps only the rows just computed
ROW_CACHE_ENTRIES = 500_000_000


def _select_rows(csr, keep: np.ndarray):
    """The CSR arrays with only the rows where ``keep`` is True (others emptied)."""
    ip, ix, k = csr
    counts = np.where(keep, np.diff(ip), 0)
    mask = np.repeat(keep, np.diff(ip))
    out = np.zeros(len(ip), np.int64)
    np.cumsum(counts, out=out[1:])
    return out, ix[mask], k[mask]


class RowCache:
    """The rows of an on-demand mechanism computed so far, in the layout sampling reads.

    Has the attributes :mod:`.sampling` uses (``indptr``, ``indices``, ``kernel``, ``weights``,
    ``normaliser``, ``cap``, ``sampling_tables``); rows not yet computed are empty, so callers
    :meth:`ensure` the nodes they read first.  Internal to the process: never saved or published.
    At most ``ROW_CACHE_ENTRIES`` entries are kept beyond the rows of the current request.
    """

    def __init__(self, mech):
        n = mech.privacy_map.shape[0] * mech.privacy_map.shape[1]
        self.weights = mech.weights
        self.normaliser = mech.normaliser
        self.cap = mech.cap
        self.indptr = np.zeros(n + 1, np.int64)
        self.indices = np.zeros(0, np.int32)
        self.kernel = np.zeros(0, np.float32)
        self.have = np.zeros(n, bool)
        self._tables = None

    def ensure(self, mech, nodes) -> "RowCache":
        """Compute the rows of the ``nodes`` not cached yet; returns self."""
        nodes = np.unique(np.asarray(nodes, np.int64))
        missing = nodes[~self.have[nodes]]
        if len(missing):
            new = rows(mech, missing)
            if len(self.indices) + len(new[1]) > ROW_CACHE_ENTRIES:  # forget the old rows: keep this request's
                keep = np.zeros_like(self.have)
                keep[nodes] = True
                old = _select_rows((self.indptr, self.indices, self.kernel), keep & self.have)
                self.indptr, self.indices, self.kernel = old
                self.have &= keep
            self.indptr, self.indices, self.kernel = merge_rows((self.indptr, self.indices, self.kernel), new)
            self.have[missing] = True
            self._tables = None
        return self

    @property
    def sampling_tables(self):
        from .sampling import tables

        if self._tables is None:
            self._tables = tables(self)
        return self._tables

    @property
    def nnz(self) -> int:
        return int(len(self.indices))


def node_mse_pass(mech, sel: np.ndarray, ux, uy, ox, oy, jit) -> np.ndarray:
    """sum_y w_y kernel_y(u) |u - release_y|^2 (+ jitter) per raster node u with ``sel`` (one pass; float64)."""
    n = len(sel)
    w = np.asarray(mech.weights, np.float64)
    acc = np.zeros(n)

    def fold(outs, counts, r, v):
        c = np.repeat(outs, counts)
        keep = sel[r]
        r, c, v = r[keep], c[keep], v[keep].astype(np.float64)
        d2 = (ux[r] - ox[c]) ** 2 + (uy[r] - oy[c]) ** 2 + jit[c]
        acc[:] += np.bincount(r, w[c] * v * d2, minlength=n)

    full_pass(mech, weights=False, on_chunk=fold)
    return acc


def column_sums_pass(mech, vectors) -> list:
    """sum_u v[u] kernel_y(u) per output y, for each v in ``vectors`` (one pass; float64)."""
    M = len(mech.weights)
    out = [np.zeros(M) for _ in vectors]

    def fold(outs, counts, r, v):
        pos = np.repeat(np.arange(len(outs)), counts)
        v = v.astype(np.float64)
        for acc, vec in zip(out, vectors):
            acc[outs] += np.bincount(pos, vec[r] * v, minlength=len(outs))

    full_pass(mech, weights=False, on_chunk=fold)
    return out


def normaliser_from(rowsum: np.ndarray, mech) -> np.ndarray:
    """s(u) from a pass's row sums: sum_y w_y (kernel_y(u) + exp(-cap))."""
    return rowsum + math.exp(-mech.cap) * float(np.asarray(mech.weights, np.float64).sum())
