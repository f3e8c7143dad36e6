"""Eikonal mechanisms with kernels on demand (geopriv.mechanisms.eikonal.ondemand).

The on-demand mechanism must be the held one (same weights, normaliser, verification and
rows, bit for bit where they are the same computation), its verification must be a real
check (negative control: perturbed weights fail it), and the rows it computes for sampling
must be exactly those it verified.
"""

from __future__ import annotations

import numpy as np
import pytest
import rasterio

from geopriv import EikonalMechanism, PrivacyMap
from geopriv.crs import local_aeqd
from geopriv.exceptions import MechanismFileError
from geopriv.mechanisms.eikonal import kernels as kernels_mod
from geopriv.mechanisms.eikonal import ondemand, verification


def _map(n=24, seed=3):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:n, 0:n]
    pop = 50 * np.exp(-((yy - n / 3) ** 2 + (xx - n / 2) ** 2) / (2 * (n / 5) ** 2)) + rng.uniform(0, 3, (n, n))
    h = 100.0 / n
    return PrivacyMap.from_population(
        pop, epsilon_range=(0.4, 2.0), transform=rasterio.Affine(h, 0, -50, 0, -h, 50), crs=local_aeqd(0.0, 0.0)
    )


@pytest.fixture(scope="module")
def pair():
    pm = _map()
    held = EikonalMechanism.build(pm)
    lazy = EikonalMechanism.build(pm, kernels="on_demand")
    return pm, held, lazy


def test_on_demand_build_is_the_held_mechanism(pair):
    pm, held, lazy = pair
    assert held.kernels_held and not lazy.kernels_held
    assert lazy.indptr is None and lazy.kernel is None
    # the truncated weight solve sufficed here, so the weights are the same computation
    assert np.array_equal(held.weights, lazy.weights)
    # the normaliser's sums are added in the same order in both modes: equal bit for bit, same id
    assert np.array_equal(lazy.normaliser, held.normaliser)
    assert lazy.mechanism_id == held.mechanism_id
    assert lazy.params["nnz"] == held.params["nnz"]
    assert lazy.report.ok and held.report.ok
    assert lazy.report.max_ratio == pytest.approx(held.report.max_ratio, rel=1e-12)
    for k in ("node_a", "node_b", "output", "output_xy"):
        assert lazy.report.worst[k] == held.report.worst[k]
    assert np.allclose(lazy.report.node_ratio, held.report.node_ratio, rtol=1e-12, atol=1e-14)
    assert lazy.expected_mse() == pytest.approx(held.expected_mse(), rel=1e-12)
    assert np.allclose(lazy.with_remap().remap_xy, held.with_remap().remap_xy, rtol=1e-12, atol=1e-9)


def test_rows_on_demand_are_the_verified_rows(pair):
    pm, held, lazy = pair
    n = pm.shape[0] * pm.shape[1]
    rng = np.random.default_rng(0)
    nodes = np.unique(rng.choice(n, 40, replace=False))
    ip, idx, ker = ondemand.rows(lazy, nodes)
    others = np.setdiff1d(np.arange(n), nodes)
    assert np.all(np.diff(ip)[others] == 0)  # only the rows asked for
    for u in nodes:
        a, b = slice(held.indptr[u], held.indptr[u + 1]), slice(ip[u], ip[u + 1])
        assert np.array_equal(held.indices[a], idx[b])
        assert np.array_equal(held.kernel[a], ker[b])  # bit for bit: the build's own function
        ca, pa, fa = held.row(u)
        cb, pb, fb = lazy.row(u)
        assert np.array_equal(ca, cb)
        assert np.allclose(pa, pb, rtol=1e-12, atol=0) and fa == pytest.approx(fb, rel=1e-12)


def test_outputs_reaching_covers_every_entry_and_is_smaller_than_all(pair):
    pm, held, lazy = pair
    pr = ondemand.problem(lazy)
    args = (pr["kp"], pr["shape"], pr["cell"], pr["P"], pr["oi"], pr["oj"], pr["apex_t"], pr["cap"])
    for nodes in ([0], [pm.shape[1] * 12 + 7], [5, 300, 555]):
        outs = kernels_mod.outputs_reaching(*args, "graph", nodes)
        need = np.unique(np.concatenate([held.indices[held.indptr[u] : held.indptr[u + 1]] for u in nodes]))
        assert np.isin(need, outs).all()
        assert len(outs) < len(held.weights)
    # fast marching has no shortest-path bound: every output
    assert len(kernels_mod.outputs_reaching(*args, "fmm", [0])) == len(held.weights)


def test_sampling_on_demand_equals_held_and_the_cache_grows(pair):
    pm, held, lazy = pair
    xmin, ymin, xmax, ymax = pm.bounds
    rng = np.random.default_rng(5)
    xy = np.column_stack([rng.uniform(xmin, xmax, 3000), rng.uniform(ymin, ymax, 3000)])
    lazy2 = lazy.with_outside("error")
    a = held.sample(xy[:1000], np.random.default_rng(1))
    b = lazy2.sample(xy[:1000], np.random.default_rng(1))
    assert np.array_equal(a, b)
    cache = lazy2.__dict__["_row_cache"]
    first = int(cache.view.have.sum())
    a = held.sample(xy[1000:], np.random.default_rng(2))
    b = lazy2.sample(xy[1000:], np.random.default_rng(2))
    assert np.array_equal(a, b)
    view = cache.view
    assert view.have.sum() > first  # rows added, earlier ones kept
    have = np.flatnonzero(view.have)
    for u in have[:: max(1, len(have) // 25)]:
        assert np.array_equal(
            view.kernel[view.indptr[u] : view.indptr[u + 1]], held.kernel[held.indptr[u] : held.indptr[u + 1]]
        )
    # the distribution at a point too
    x, y = 0.3 * xmin + 0.7 * xmax, 0.5 * (ymin + ymax)
    assert np.allclose(lazy2.distribution(x, y), held.distribution(x, y), rtol=1e-12, atol=1e-300)


def test_merge_rows_refuses_overlapping_rows():
    ip = np.array([0, 1, 1], np.int64)
    a = (ip, np.array([3], np.int32), np.array([0.5], np.float32))
    with pytest.raises(ValueError):
        ondemand.merge_rows(a, a)
    b = (np.array([0, 0, 2], np.int64), np.array([1, 4], np.int32), np.array([0.1, 0.2], np.float32))
    ipm, ixm, km = ondemand.merge_rows(a, b)  # noqa: F841
    assert list(ipm) == [0, 1, 3] and list(ixm) == [3, 1, 4] and np.allclose(km, [0.5, 0.1, 0.2])


def test_on_demand_verification_is_a_real_check(pair):
    """Negative control: weights perturbed by +-40 % (normaliser recomputed, so consistent) fail the check."""
    import dataclasses

    pm, held, lazy = pair
    rng = np.random.default_rng(11)
    w = lazy.weights * np.exp(rng.uniform(-0.4, 0.4, len(lazy.weights)))
    bad = dataclasses.replace(lazy, weights=w, normaliser=np.ones(1), report=None)
    done = ondemand.full_pass(bad)
    bad = dataclasses.replace(bad, normaliser=ondemand.normaliser_from(done.rowsum, bad))
    rep = verification.verify(bad)
    assert rep.normaliser_mismatch <= 1e-10
    assert rep.max_ratio > 1.0 and not rep.ok
    # and the held mechanism with the same weights gives the same verdict
    s = verification.exact_normaliser(dataclasses.replace(held, weights=w))
    rep_h = verification.verify(dataclasses.replace(held, weights=w, normaliser=s, report=None))
    assert rep_h.max_ratio == pytest.approx(rep.max_ratio, rel=1e-9)


def test_compact_file_loads_on_demand(pair, tmp_path):
    pm, held, lazy = pair
    path = tmp_path / "m.npz"
    lazy.save(path)
    with pytest.raises(ValueError, match="compact"):
        lazy.save(tmp_path / "full.npz", compact=False)
    m = EikonalMechanism.load(path, privacy_map=pm, kernels="on_demand", verify="full")  # verified, though stamped
    assert not m.kernels_held and m.report.ok and m.verification == "full"
    assert m.report.max_ratio == pytest.approx(lazy.report.max_ratio, rel=1e-12)
    m2 = EikonalMechanism.load(path, privacy_map=pm, kernels="on_demand", verify=False)
    assert not m2.kernels_held
    # the held load of the same file has the held build's kernels
    h = EikonalMechanism.load(path, privacy_map=pm, kernels="held")
    assert np.array_equal(h.kernel, held.kernel) and np.array_equal(h.indices, held.indices)
    # full files hold kernels: on demand needs a compact one
    full = tmp_path / "full.npz"
    held.save(full, compact=False)
    with pytest.raises(MechanismFileError, match="compact"):
        EikonalMechanism.load(full, kernels="on_demand")
    with pytest.raises(ValueError, match="kernels"):
        EikonalMechanism.load(path, kernels="lazy")


def test_edited_normaliser_is_refused_on_demand(pair, tmp_path):
    """A compact file whose normaliser was edited: refused by the on-demand load, with or without verify."""
    pm, held, lazy = pair
    path = tmp_path / "m.npz"
    lazy.save(path)
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    data["normaliser"] = data["normaliser"] * (1 + 1e-6)
    from geopriv.mechanisms.eikonal import persistence
    import json

    meta = json.loads(str(data.pop("meta")))
    check = {k: v for k, v in meta.items() if k not in ("sha256", "hmac_sha256", "report")}
    meta["sha256"] = persistence.digest(data, check)  # an edit that also fixes the checksum
    bad = tmp_path / "bad.npz"
    np.savez(bad, meta=np.array(json.dumps(meta, default=persistence.json_default)), **data)
    for verify in (True, False):
        with pytest.raises(MechanismFileError, match="normaliser"):
            EikonalMechanism.load(bad, kernels="on_demand", verify=verify)


def test_kernels_option_is_checked():
    with pytest.raises(ValueError, match="on_demand"):
        EikonalMechanism.build(_map(8), kernels="lazy")


def test_workers_bands_give_the_full_extremes(pair):
    """The workers' extremes cover a band of lines each; merged they equal the check of the arrays."""
    pm, held, lazy = pair
    ref = verification.extremes_from_arrays(held)
    done = ondemand.full_pass(lazy, extremes=True, weights=False)
    for f in range(4):
        assert np.allclose(done.extremes.hi[f], ref.hi[f], rtol=0, atol=1e-12)
        assert np.allclose(done.extremes.lo[f], ref.lo[f], rtol=0, atol=1e-12)
    assert done.rowsum is None


def test_row_cache_forgets_old_rows_beyond_its_bound(pair, monkeypatch):
    pm, held, lazy = pair
    monkeypatch.setattr(ondemand, "ROW_CACHE_ENTRIES", int(held.indptr[3] - held.indptr[0]) + 10)
    cache = ondemand.RowCache(lazy)
    first = cache.ensure(lazy, [0, 1, 2])
    view = cache.ensure(lazy, [2, 300, 301])  # over the bound: rows 0 and 1 are dropped, 2 (asked again) kept
    assert set(np.flatnonzero(view.have)) == {2, 300, 301}
    assert np.all(np.diff(view.indptr)[[0, 1]] == 0)
    assert set(np.flatnonzero(first.have)) == {0, 1, 2}  # an earlier snapshot never changes
    held_cdf = held.sampling_tables[0]
    for u in (2, 300, 301):
        a, b = slice(view.indptr[u], view.indptr[u + 1]), slice(held.indptr[u], held.indptr[u + 1])
        assert np.array_equal(view.kernel[a], held.kernel[b])
        assert np.array_equal(view.indices[a], held.indices[b])
        # the tables too (the normalisers differ by ~1e-15: built apart)
        assert np.allclose(view.sampling_tables[0][a], held_cdf[b], rtol=1e-12, atol=0)
    assert np.allclose(view.sampling_tables[2], held.sampling_tables[2], rtol=1e-12, atol=0)
    assert np.array_equal(view.sampling_tables[3], held.sampling_tables[3])


def test_tracked_extremes_name_the_outputs_that_attain_them(pair):
    """With kernels on demand the workers record which output attains each edge's extremes."""
    pm, held, lazy = pair
    done = ondemand.full_pass(lazy, extremes="track", weights=False)
    ext = done.extremes
    ny, nx = pm.shape
    cT = np.exp(-held.cap)
    rng = np.random.default_rng(4)
    checked = 0
    for f, (di, dj) in enumerate([(0, 1), (1, 0), (1, 1), (1, -1)]):
        h, w = ext.hi[f].shape
        for _ in range(30):
            r, c = int(rng.integers(h)), int(rng.integers(w))
            ra, ca = r, c + (1 if f == 3 else 0)
            a, b = ra * nx + ca, (ra + di) * nx + (ca + dj)
            M = len(held.weights)
            ka, kb = np.full(M, cT), np.full(M, cT)
            ka[held.indices[held.indptr[a] : held.indptr[a + 1]]] += held.kernel[held.indptr[a] : held.indptr[a + 1]]
            kb[held.indices[held.indptr[b] : held.indptr[b + 1]]] += held.kernel[held.indptr[b] : held.indptr[b + 1]]
            alpha = np.log(ka) - np.log(kb)
            assert ext.hi[f][r, c] == pytest.approx(max(alpha.max(), 0.0), abs=1e-12)
            assert ext.lo[f][r, c] == pytest.approx(min(alpha.min(), 0.0), abs=1e-12)
            for at, v in ((ext.hi_at[f][r, c], ext.hi[f][r, c]), (ext.lo_at[f][r, c], ext.lo[f][r, c])):
                if at >= 0:
                    assert alpha[at] == pytest.approx(v, abs=1e-12)
                    checked += 1
                else:
                    assert v == 0.0
    assert checked > 100


def test_sampling_in_groups_of_bounded_rows_equals_held(pair, monkeypatch):
    """A request larger than the cache bound is resolved in groups: same draws as held."""
    pm, held, lazy = pair
    monkeypatch.setattr(ondemand, "ROW_CACHE_ENTRIES", 20_000)
    n = pm.shape[0] * pm.shape[1]
    nodes = np.random.default_rng(8).integers(0, n, 5000)
    lazy2 = lazy.with_outside("clamp")
    a = held.sample_nodes(nodes, np.random.default_rng(3))
    b = lazy2.sample_nodes(nodes, np.random.default_rng(3))
    assert np.array_equal(a, b)
    assert lazy2.__dict__["_row_cache"].view.nnz <= 2 * 20_000 + 5000


def test_threads_sampling_one_on_demand_mechanism(pair):
    """Threads sharing one mechanism (dask's threaded scheduler does) draw what the held one draws."""
    from concurrent.futures import ThreadPoolExecutor

    pm, held, lazy = pair
    lazy2 = lazy.with_outside("clamp")
    lazy2.__dict__.pop("_row_cache", None)
    n = pm.shape[0] * pm.shape[1]
    parts = [np.random.default_rng(100 + k).integers(0, n, 400) for k in range(6)]

    def run(k):
        return lazy2.sample_nodes(parts[k], np.random.default_rng(k))

    with ThreadPoolExecutor(6) as ex:
        got = list(ex.map(run, range(6)))
    for k in range(6):
        assert np.array_equal(got[k], held.sample_nodes(parts[k], np.random.default_rng(k)))


def test_pickle_drops_the_rows_sampled(pair):
    """The row cache records which nodes were sampled: it never leaves the process."""
    import pickle

    pm, held, lazy = pair
    lazy2 = lazy.with_outside("clamp")
    lazy2.sample_nodes(np.array([33, 34]), np.random.default_rng(0))
    assert "_row_cache" in lazy2.__dict__
    back = pickle.loads(pickle.dumps(lazy2))
    assert "_row_cache" not in back.__dict__ and "_graph" not in back.__dict__
    assert np.array_equal(
        back.sample_nodes(np.array([33, 34]), np.random.default_rng(0)),
        held.sample_nodes(np.array([33, 34]), np.random.default_rng(0)),
    )


def test_parallel_on_demand_builds_are_reproducible():
    """Two workers: the row sums are folded in chunk order, so the normaliser (and id) never depends on timing."""
    pm = _map(30, seed=5)
    a = EikonalMechanism.build(pm, kernels="on_demand", n_jobs=2)
    b = EikonalMechanism.build(pm, kernels="on_demand", n_jobs=2)
    assert np.array_equal(a.normaliser, b.normaliser)
    assert a.mechanism_id == b.mechanism_id
    held = EikonalMechanism.build(pm, n_jobs=2)
    assert a.report.max_ratio == pytest.approx(held.report.max_ratio, rel=1e-12)
    assert a.report.worst["output"] == held.report.worst["output"]


def _thinned_map(n=40):
    """Low epsilon (0.03 .. 0.15 per metre on 2.5 m cells): outputs thinned up to 8 cells apart, apex radii > 0."""
    rng = np.random.default_rng(2)
    pop = rng.uniform(0, 5, (n, n))
    pop[5:15, 20:30] += 80
    h = 100.0 / n
    return PrivacyMap.from_population(
        pop, epsilon_range=(0.03, 0.15), transform=rasterio.Affine(h, 0, -50, 0, -h, 50), crs=local_aeqd(0.0, 0.0)
    )


def test_thinned_outputs_with_apex_rows_on_demand():
    """Outputs thinned (spacing up to 8 cells) with apex radii > 0: rows on demand still exact."""
    n = 40
    pm = _thinned_map(n)
    held = EikonalMechanism.build(pm, cap=8.0, solve_cap=5.0)
    assert held.output_step.max() >= 4 and held.output_apex.max() > 0
    lazy = EikonalMechanism.build(pm, cap=8.0, solve_cap=5.0, kernels="on_demand")
    assert lazy.report.max_ratio == pytest.approx(held.report.max_ratio, rel=1e-12)
    nodes = np.arange(n * n)  # every node
    for method in ("nodes", "columns"):
        ip, idx, ker = ondemand.rows(lazy, nodes, method=method)
        for u in nodes:
            a, b = slice(held.indptr[u], held.indptr[u + 1]), slice(ip[u], ip[u + 1])
            assert np.array_equal(held.indices[a], idx[b]) and np.array_equal(held.kernel[a], ker[b])


def test_on_demand_build_refines_where_held_would_polish(monkeypatch):
    """A rough map where the truncated weight solve is not enough (cap 10, solve_cap 4, margin 0.02):
    the held build polishes on the full kernels; the on-demand one refines with the tail frozen
    and builds too.  Control: without the refinement it is refused."""
    from geopriv.exceptions import InfeasibleMechanismError
    from geopriv.mechanisms.eikonal import mechanism as mech_mod

    rng = np.random.default_rng(0)
    n = 20
    pop = rng.lognormal(2, 1.5, (n, n))
    h = 100.0 / n
    pm = PrivacyMap.from_population(
        pop, epsilon_range=(0.4, 2.0), transform=rasterio.Affine(h, 0, -50, 0, -h, 50), crs=local_aeqd(0.0, 0.0)
    )
    opts = dict(cap=10.0, solve_cap=4.0, margin=0.02)
    held = EikonalMechanism.build(pm, **opts)
    lazy = EikonalMechanism.build(pm, kernels="on_demand", **opts)
    assert lazy.report.ok and held.report.ok
    assert lazy.params["timings"]["refine_s"] > 0
    assert lazy.params["normaliser_budget_used"] < 1.0
    monkeypatch.setattr(mech_mod, "ON_DEMAND_REFINES", 0)
    with pytest.raises(InfeasibleMechanismError, match="kernels='held'"):
        EikonalMechanism.build(pm, kernels="on_demand", **opts)


# ---------------------------------------------------------------- rows searched from the nodes
def test_quantised_graph_gives_the_same_travel_times_both_ways(pair):
    """On the quantised graph d(u, y) searched from u is the float d(y, u) searched from y; on the
    unquantised graph (negative control) most of them differ in the last bits."""
    from scipy.sparse.csgraph import dijkstra

    pm, held, lazy = pair
    pr = ondemand.problem(held)
    assert pr["graph_bits"] == kernels_mod.GRAPH_BITS
    differ = {}
    for bits in (None, pr["graph_bits"]):
        G = kernels_mod.stencil_graph(pr["kp"], *pr["cell"], bits)
        src = np.arange(0, G.shape[0], 11)
        forward = dijkstra(G, indices=src)
        backward = dijkstra(G, indices=np.arange(G.shape[0]))[:, src].T
        differ[bits] = int((forward != backward).sum()) / forward.size
    assert differ[pr["graph_bits"]] == 0
    assert differ[None] > 0.1  # the control: without quantisation the directions disagree
    # rounding down: no edge longer than before, none shorter by a quantum or more
    G0 = kernels_mod.stencil_graph(pr["kp"], *pr["cell"], None)
    Gq = ondemand.graph(held)
    q = kernels_mod.graph_quantum(G0.data.max(), pr["graph_bits"])
    assert np.all(Gq.data <= G0.data) and np.all(G0.data - Gq.data < q)


def test_rows_from_the_nodes_are_the_verified_rows_bit_for_bit(pair):
    pm, held, lazy = pair
    n = pm.shape[0] * pm.shape[1]
    assert ondemand.can_solve_rows(lazy)
    by_nodes = ondemand.rows(lazy, np.arange(n), method="nodes")
    for a, b in zip(by_nodes, (held.indptr, held.indices, held.kernel)):
        assert np.array_equal(a, b)
    ip, idx, ker = ondemand.rows(lazy, [0, 17, n - 1], method="nodes")
    assert np.count_nonzero(np.diff(ip)) == 3
    with pytest.raises(ValueError, match="method"):
        ondemand.rows(lazy, [0], method="fast")
    # a graph that is not quantised is refused (its sums depend on the direction of the search)
    pr = ondemand.problem(lazy)
    raw = kernels_mod.stencil_graph(pr["kp"], *pr["cell"], None)
    with pytest.raises(ValueError, match="multiples"):
        kernels_mod.kernel_rows(
            pr["kp"], pr["shape"], pr["P"], pr["oi"], pr["oj"], pr["apex_t"], pr["cap"], [0], raw, pr["graph_bits"]
        )


def test_rows_searched_in_worker_processes_are_the_same_arrays(pair, monkeypatch):
    """Runs of node searches in worker processes (spawned: the graph goes through the initializer)
    give the in-process arrays, joined in node order; the rows are the held rows."""
    pm, held, lazy = pair
    pr = ondemand.problem(lazy)
    G = ondemand.graph(lazy)
    n = pm.shape[0] * pm.shape[1]
    nodes = np.random.default_rng(5).choice(n, size=n // 2, replace=False)
    args = (pr["kp"], pr["shape"], pr["P"], pr["oi"], pr["oj"], pr["apex_t"], pr["cap"], nodes, G, pr["graph_bits"])
    one = kernels_mod.kernel_rows(*args)
    started = []
    real_pool = kernels_mod.process_pool
    monkeypatch.setattr(kernels_mod, "process_pool", lambda w, *a: started.append(w) or real_pool(w, *a))
    monkeypatch.setattr(kernels_mod, "ROWS_PER_WORKER_MIN", 50)
    monkeypatch.setattr(kernels_mod, "startup_seconds", lambda *a: 0.0)  # workers always pay (a tiny map)
    for jobs in (2, 3):
        many = kernels_mod.kernel_rows(*args, n_jobs=jobs, mp_context="spawn")
        for a, b in zip(one, many):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    assert started == [2, 3]  # worker processes did run
    # control: when the first batch shows that the rest would not pay for the pool's start-up
    # (spawned workers import numpy and scipy), the rest is searched here; the same arrays
    seen = []
    monkeypatch.setattr(kernels_mod, "startup_seconds", lambda ctx, nbytes: seen.append((ctx, nbytes)) or 1e9)
    here = kernels_mod.kernel_rows(*args, n_jobs=2, mp_context="spawn")
    assert started == [2, 3, 1] and seen == [("spawn", G.data.nbytes + G.indices.nbytes + G.indptr.nbytes)]
    for a, b in zip(one, here):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    ip, idx, ker = one
    for u in nodes[:50]:
        assert np.array_equal(ker[ip[u] : ip[u + 1]], held.kernel[held.indptr[u] : held.indptr[u + 1]])


def test_auto_rows_search_few_nodes_and_solve_columns_for_many(monkeypatch):
    """ "auto" searches from the nodes when there are no more nodes than outputs reaching them and
    solves the columns otherwise (outputs thinned: fewer outputs than nodes); same rows both ways."""
    n = 40
    pm = _thinned_map(n)
    two = EikonalMechanism.build(pm, cap=8.0, solve_cap=5.0, kernels="on_demand", n_jobs=2)
    calls = []
    real = ondemand.kernel_rows
    monkeypatch.setattr(
        ondemand, "kernel_rows", lambda *a, **k: calls.append((len(a[7]), k.get("n_jobs"))) or real(*a, **k)
    )
    few = ondemand.rows(two, [3, 400])
    assert calls == [(2, 2)]  # searched (n_jobs=2 allowed; two nodes stay in this process)
    everything = np.arange(n * n)
    assert len(two.weights) < len(everything)  # thinned: every node is more nodes than outputs
    many = ondemand.rows(two, everything)
    assert calls == [(2, 2)]  # columns
    for u in (3, 400):
        for k in (1, 2):
            assert np.array_equal(few[k][few[0][u] : few[0][u + 1]], many[k][many[0][u] : many[0][u + 1]])


def test_mechanisms_without_a_quantised_graph_solve_columns(tmp_path, monkeypatch):
    """Mechanisms of earlier versions (no graph_bits) and fast-marching ones cannot search rows from
    the nodes; their rows come from the columns and are still exact, and a saved file keeps the rule."""
    from geopriv.mechanisms.eikonal import mechanism as mechanism_mod

    pm = _map(16)
    monkeypatch.setattr(mechanism_mod, "GRAPH_BITS", None)
    old = EikonalMechanism.build(pm)
    assert old.params["graph_bits"] is None
    monkeypatch.undo()
    path = tmp_path / "old.npz"
    old.save(path, compact=True)
    lazy = EikonalMechanism.load(path, kernels="on_demand")
    assert lazy.report.ok and lazy.params["graph_bits"] is None and lazy.mechanism_id == old.mechanism_id
    assert not ondemand.can_solve_rows(lazy)
    with pytest.raises(ValueError, match="columns"):
        ondemand.rows(lazy, [0], method="nodes")
    ip, idx, ker = ondemand.rows(lazy, [0, 100])
    for u in (0, 100):
        assert np.array_equal(ker[ip[u] : ip[u + 1]], old.kernel[old.indptr[u] : old.indptr[u + 1]])
    fmm = EikonalMechanism.build(pm, solver="fmm", kernels="on_demand")
    assert fmm.params["graph_bits"] is None and not ondemand.can_solve_rows(fmm)


def test_on_demand_build_moves_one_progress_range_forward_only():
    """A build of several passes reports through one range (a QGIS bar never goes back)."""
    seen = []
    EikonalMechanism.build(_map(16), kernels="on_demand", progress=lambda done, total: seen.append(done / total))
    assert len(seen) >= 2 and seen[-1] == 1.0 and max(seen) <= 1.0
    assert all(b >= a for a, b in zip(seen, seen[1:]))
    # the control: the passes' own reports start again at 0
    from geopriv.mechanisms.eikonal import mechanism as mechanism_mod

    raw = []
    problem = (None,) * 10 + (lambda d, t: raw.append(d / t), None)
    mechanism_mod._staged(problem, 0.4, 0.8)[10](0, 10)
    assert raw == [pytest.approx(0.4)]
