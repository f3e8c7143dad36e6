"""Kernels on demand: an eikonal mechanism that holds no kernel arrays.

A held mechanism keeps every kernel entry (about 2,900 per raster node at the paper's
scaling: 10^8 at 200 x 200, 3 x 10^9 at 1000 x 1000).  A mechanism built or loaded with
``kernels="on_demand"`` keeps only what a compact file stores (kernel rate map, outputs, apex
radii, weights, normaliser) and recomputes kernels when something needs them, bit for bit the
values the build verified:

* sampling needs the rows of the input nodes it draws from (:func:`rows`, kept in a
  :class:`RowCache` that grows as new nodes are sampled).  Few nodes: one shortest-path search
  from each node (:func:`.kernels.kernel_rows`; on the quantised graph travel times are exact
  sums, the same floats in both directions).  Many nodes: the outputs whose kernel reaches them
  are found by one multi-source search (:func:`.kernels.outputs_reaching`), their columns solved
  by the build's function (:func:`.kernels.kernel_pass`), and only the requested rows kept;
* verification, expected errors and the posterior-mean remap need every column once: one
  pass whose reductions run in the workers or per chunk as it arrives (memory: one chunk per
  worker plus a few arrays of the raster's size).
"""

from __future__ import annotations

import math

import numpy as np

from ...exceptions import ParameterError
from .kernels import KernelProblem, kernel_pass, kernel_rows, outputs_reaching, searchable


def problem(mech) -> dict:
    """The fields of the :class:`.kernels.KernelProblem` that defines ``mech``'s kernels (public parameters only)."""
    if mech.kernel_rate is None or mech.output_apex is None:
        raise ParameterError(
            "This mechanism does not know its kernel rate map (a full file of an earlier version): "
            "its kernels cannot be recomputed. Load it with kernels='held' or rebuild it."
        )
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
        "graph_bits": mech.params.get("graph_bits"),
    }


def kernel_problem(mech) -> KernelProblem:
    """The :class:`.kernels.KernelProblem` that defines ``mech``'s kernels (:func:`problem`)."""
    return KernelProblem(**problem(mech))


def n_jobs(mech) -> int:
    return int(getattr(mech, "_n_jobs", 1) or 1)


def _mp_context(mech):
    return getattr(mech, "_mp_context", None)


def graph(mech):
    """The stencil graph of ``mech``'s kernel rate map (public data; built once per mechanism object)."""
    g = mech.__dict__.get("_graph")
    if g is None:
        from .kernels import stencil_graph

        pr = problem(mech)
        g = mech.__dict__["_graph"] = stencil_graph(pr["kp"], *pr["cell"], pr["graph_bits"])
    return g


def full_pass(mech, *, extremes=False, weights: bool = True, on_chunk=None, progress=None, mp_context=None):
    """One pass over every kernel column of ``mech`` (:class:`.kernels.KernelPass`, no entries held)."""
    pr = kernel_problem(mech)
    return kernel_pass(
        pr,
        n_jobs=n_jobs(mech),
        progress=progress,
        mp_context=mp_context if mp_context is not None else _mp_context(mech),
        extremes=extremes,
        weights=np.asarray(mech.weights, np.float64) if weights else None,
        hold=False,
        on_chunk=on_chunk,
        graph=graph(mech) if pr.solver == "graph" else None,
    )


#: how :func:`rows` computes a request: "auto" (the cheaper way), "nodes" or "columns"
ROW_METHODS = ("auto", "nodes", "columns")


def can_solve_rows(mech) -> bool:
    """True when rows can be searched from the input nodes (a quantised graph, exact up to the kernels' reach)."""
    ok = mech.__dict__.get("_rows_searchable")
    if ok is None:  # O(edges): once per mechanism object (public data only)
        pr = problem(mech)
        reach = pr["cap"] + float(np.max(pr["apex_t"], initial=0.0)) + 1e-9
        ok = pr["solver"] == "graph" and searchable(graph(mech), pr["graph_bits"], reach)
        mech.__dict__["_rows_searchable"] = ok
    return ok


def rows(mech, nodes, method: str = "auto") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR (indptr over all raster nodes, indices, kernel) holding the rows of ``nodes`` only (others empty).

    The same arrays, entry for entry, as the rows of the held mechanism, computed one of two ways:

    * ``"columns"``: the outputs whose kernel reaches one of ``nodes`` are found by one
      multi-source search and their columns solved by the build's function
      (:func:`.kernels.kernel_pass`, in ``mech``'s worker processes), then placed as
      :meth:`.kernels.KernelColumns.to_csr` places them (columns sorted in each row);
    * ``"nodes"`` (mechanisms built on a quantised graph, :func:`can_solve_rows`): one search
      from each node (:func:`.kernels.kernel_rows`; travel times are exact sums, the same floats
      in both directions).  A request of a few nodes costs a few searches instead of the
      thousands of columns that reach them (at 1000 x 1000: a fraction of a second instead of minutes).

    ``"auto"`` takes "nodes" when it can and there are no more nodes than outputs reaching them
    (both ways run in ``mech``'s worker processes; the node searches from ``ROWS_PER_WORKER_MIN``
    nodes per worker on).
    """
    if method not in ROW_METHODS:
        raise ParameterError(f"method must be one of {ROW_METHODS}")
    pm = mech.privacy_map
    n = pm.shape[0] * pm.shape[1]
    nodes = np.unique(np.asarray(nodes, np.int64))
    if len(nodes) and (nodes[0] < 0 or nodes[-1] >= n):
        raise IndexError(f"node indices must be in 0 .. {n - 1}")
    pr = problem(mech)
    G = graph(mech) if pr["solver"] == "graph" else None
    by_nodes = method == "nodes" or (method == "auto" and can_solve_rows(mech))
    if method == "nodes" and not can_solve_rows(mech):
        raise ParameterError(
            "This mechanism's kernels cannot be searched from the input nodes (built by an earlier "
            "version, or with solver='fmm'): use method='columns'."
        )
    jobs = max(1, n_jobs(mech))
    outs = None
    if by_nodes and method == "auto" and len(nodes) > entries_per_row(mech):
        # more nodes than one row has outputs: compare with the columns that reach them
        outs = outputs_reaching(
            pr["kp"],
            pr["shape"],
            pr["cell"],
            pr["P"],
            pr["oi"],
            pr["oj"],
            pr["apex_t"],
            pr["cap"],
            pr["solver"],
            nodes,
            graph=G,
        )
        by_nodes = len(nodes) <= len(outs)
    if by_nodes:
        return kernel_rows(
            pr["kp"],
            pr["shape"],
            pr["P"],
            pr["oi"],
            pr["oj"],
            pr["apex_t"],
            pr["cap"],
            nodes,
            G,
            pr["graph_bits"],
            checked=True,
            n_jobs=jobs,
            mp_context=_mp_context(mech),
        )
    if outs is None:
        outs = outputs_reaching(
            pr["kp"],
            pr["shape"],
            pr["cell"],
            pr["P"],
            pr["oi"],
            pr["oj"],
            pr["apex_t"],
            pr["cap"],
            pr["solver"],
            nodes,
            graph=G,
        )
    if len(outs) == 0:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    keep = np.zeros(n, bool)
    keep[nodes] = True
    r = kernel_pass(
        KernelProblem(**pr),
        n_jobs=n_jobs(mech),
        mp_context=_mp_context(mech),
        outputs=outs,
        keep_rows=keep,
        graph=G,
    )
    indptr, indices, kernel = r.columns.to_csr(release=True)
    return indptr, outs[indices].astype(np.int32), kernel


def merge_rows(a, b):
    """Union of two CSR arrays (indptr, then arrays aligned with the entries) over the same rows
    whose non-empty rows are disjoint."""
    ip1, ip2 = a[0], b[0]
    c1, c2 = np.diff(ip1), np.diff(ip2)
    if np.any((c1 > 0) & (c2 > 0)):
        raise ParameterError("merge_rows: both arrays hold entries for the same row")
    ip = np.zeros(len(ip1), np.int64)
    np.cumsum(c1 + c2, out=ip[1:])
    out = [np.empty(int(ip[-1]), x.dtype) for x in a[1:]]
    for ipx, cx, arrays in ((ip1, c1, a[1:]), (ip2, c2, b[1:])):
        pos = np.repeat(ip[:-1] - ipx[:-1], cx) + np.arange(int(ipx[-1]), dtype=np.int64)
        for o, x in zip(out, arrays):
            o[pos] = x
    return (ip, *out)


def _select_rows(csr, keep: np.ndarray):
    """The CSR arrays with only the rows where ``keep`` is True (others emptied)."""
    ip = csr[0]
    counts = np.where(keep, np.diff(ip), 0)
    mask = np.repeat(keep, np.diff(ip))
    out = np.zeros(len(ip), np.int64)
    np.cumsum(counts, out=out[1:])
    return (out, *(x[mask] for x in csr[1:]))


#: kernel entries a :class:`RowCache` holds (16 bytes each with the sampling tables: about 3 GB),
#: and about the size of the groups of nodes :func:`sample_nodes` resolves at once
ROW_CACHE_ENTRIES = 200_000_000


def entries_per_row(mech) -> float:
    """Mean kernel entries per raster node (the build's count): sizes the groups of rows."""
    n_nodes = len(mech.normaliser)
    return max(1.0, float(mech.params.get("nnz", n_nodes)) / n_nodes)


class RowView:
    """An immutable snapshot of the rows computed so far, in the layout :mod:`.sampling` reads.

    ``indptr``, ``indices``, ``kernel`` (rows not computed are empty: see ``have``), the
    mechanism's ``weights``, ``normaliser`` and ``cap``, and its ``sampling_tables`` (per-row
    cumulative probabilities, computed when the rows were).
    """

    def __init__(self, mech, indptr, indices, kernel, cdf, have):
        from .sampling import floor_tables

        self.weights, self.normaliser, self.cap = mech.weights, mech.normaliser, mech.cap
        self.indptr, self.indices, self.kernel, self.have = indptr, indices, kernel, have
        sparse_mass = np.zeros(len(indptr) - 1)
        nonempty = indptr[1:] > indptr[:-1]
        sparse_mass[nonempty] = cdf[indptr[1:][nonempty] - 1]
        self.sampling_tables = (cdf, sparse_mass, *floor_tables(mech))
        for a in (indptr, indices, kernel, cdf, have, sparse_mass):
            a.flags.writeable = False

    @property
    def nnz(self) -> int:
        return int(len(self.indices))


class RowCache:
    """The rows of an on-demand mechanism computed so far (:class:`RowView` snapshots).

    :meth:`ensure` computes the missing rows of a request and returns a snapshot holding them;
    a snapshot never changes, so a sampler reading one is never disturbed by another thread
    adding rows (requests are serialised by a lock).  When the rows held plus those of a request
    would exceed ``ROW_CACHE_ENTRIES``, the rows the request does not need are forgotten first.
    Internal to the process: never saved, pickled or published (it records which nodes were
    sampled).
    """

    def __init__(self, mech):
        import threading

        n = mech.privacy_map.shape[0] * mech.privacy_map.shape[1]
        self._lock = threading.Lock()
        self.view = RowView(
            mech,
            np.zeros(n + 1, np.int64),
            np.zeros(0, np.int32),
            np.zeros(0, np.float32),
            np.zeros(0, np.float64),
            np.zeros(n, bool),
        )

    def ensure(self, mech, nodes) -> RowView:
        """A snapshot holding the rows of ``nodes`` (computing the missing ones)."""
        from .sampling import row_cdf

        nodes = np.unique(np.asarray(nodes, np.int64))
        with self._lock:
            view = self.view
            missing = nodes[~view.have[nodes]]
            if len(missing) == 0:
                return view
            have = view.have.copy()
            old = (view.indptr, view.indices, view.kernel, view.sampling_tables[0])
            if view.nnz + len(missing) * entries_per_row(mech) > ROW_CACHE_ENTRIES:
                # forget the rows this request does not need before computing its own
                keep = np.zeros_like(have)
                keep[nodes] = True
                have &= keep
                old = _select_rows(old, have)
                self.view = view = RowView(mech, *old, have.copy())
            ip, ix, ker = rows(mech, missing)
            cdf = row_cdf(ip, ix, ker, mech.weights, mech.normaliser)  # the new rows only (row-local)
            have[missing] = True
            merged = merge_rows(old, (ip, ix, ker, cdf)) if view.nnz else (ip, ix, ker, cdf)
            self.view = RowView(mech, *merged, have)
            return self.view


def sample_nodes(mech, nodes, rng: np.random.Generator) -> np.ndarray:
    """Output indices drawn from the rows of ``nodes``, computing the rows in groups of bounded size.

    The random numbers are drawn first, as :func:`.sampling.sample_nodes` draws them, so the
    result is the held mechanism's for the same generator; the nodes are then resolved in
    groups of consecutive nodes (bands of the raster) whose rows hold about
    ``ROW_CACHE_ENTRIES`` entries, so memory stays bounded whatever the request (each group
    costs a pass over the outputs that reach its band).
    """
    from .sampling import draw

    nodes = np.asarray(nodes, np.int64)
    n = len(nodes)
    raw, v = rng.random(n), rng.random(n)
    out = np.empty(n, np.int64)
    uniq = np.unique(nodes)
    group = max(1, int(ROW_CACHE_ENTRIES // entries_per_row(mech)))
    cache = row_cache(mech)
    for g0 in range(0, len(uniq), group):
        part = uniq[g0 : g0 + group]
        view = cache.ensure(mech, part)
        sel = np.flatnonzero((nodes >= part[0]) & (nodes <= part[-1]))
        out[sel] = draw(view, nodes[sel], raw[sel], v[sel])
    return out


def row_cache(mech) -> RowCache:
    cache = mech.__dict__.get("_row_cache")
    if cache is None:
        cache = mech.__dict__.setdefault("_row_cache", RowCache(mech))
    return cache


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
