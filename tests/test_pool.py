"""geopriv.mechanisms.pool: worker pools that work under every start method."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from geopriv.mechanisms import pool


def _state_value(key):
    return pool.worker_state.get(key)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_receive_the_state_through_the_initializer(method):
    if method not in mp.get_all_start_methods():
        pytest.skip(f"{method} is not available on this platform")
    with pool.process_pool(2, {"a": 41}, method) as ex:
        assert list(ex.map(_state_value, ["a", "b"])) == [41, None]
    assert pool.worker_state == {}  # the calling process never holds it


def test_no_pool_for_one_worker():
    assert pool.process_pool(1, {"a": 1}) is None
    assert pool.can_start_workers()  # (the test process is not daemonic)


def test_startup_estimate_by_start_method():
    """Forked workers inherit everything; spawned ones pay an interpreter and the state's transfer."""
    methods = mp.get_all_start_methods()  # Windows: spawn only
    spawn = pool.startup_seconds("spawn", 0)
    assert spawn > 1.0
    assert pool.startup_seconds("spawn", 10**8) == pytest.approx(spawn + 10**8 / pool.STATE_BYTES_PER_SECOND)
    if "fork" in methods:
        assert pool.startup_seconds("fork", 10**9) < 1.0
    if "forkserver" in methods:
        assert pool.startup_seconds(mp.get_context("forkserver"), 0) == pool.STARTUP_SECONDS["forkserver"]


def _in_daemon(queue):
    queue.put((pool.can_start_workers(), pool.process_pool(2, {"a": 1}) is None))


def test_no_pool_inside_a_daemonic_process():
    """A multiprocessing or dask worker may not start processes: the work then runs in it."""
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_in_daemon, args=(queue,), daemon=True)
    proc.start()
    assert queue.get(timeout=60) == (False, True)
    proc.join(60)
