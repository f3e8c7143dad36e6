"""Worker-process pools for the mechanisms' independent solves (eikonal kernels, LP pricing).

The work's data goes to each worker once, through the pool's initializer, into that worker's
:data:`worker_state` (the calling process never writes it, so ``fork`` passes nothing on): every
start method works (``spawn`` on Windows and macOS, ``forkserver``/``fork`` on Linux).  Inside a daemonic process (a multiprocessing or dask
worker), which may not start processes, no pool is made and the caller runs the work itself.
"""

from __future__ import annotations

import multiprocessing as mp

__all__ = ["can_start_workers", "process_pool", "startup_seconds", "worker_state"]

#: in a worker process of :func:`process_pool`: the work's data, received once (empty elsewhere)
worker_state: dict = {}

#: estimated seconds to start a pool's workers, by start method: a forked worker inherits the
#: parent's modules and data; a spawned one (the default on Windows and macOS) or a forkserver one
#: starts an interpreter and imports numpy and scipy (two workers on Linux: 2.3-2.8 s,
#: bench/eikonal_rows_startup.py, figures in bench/results/eikonal_rows.md)
STARTUP_SECONDS = {"fork": 0.1, "spawn": 3.0, "forkserver": 3.0}

#: bytes per second assumed for sending the state to a worker that does not inherit it
STATE_BYTES_PER_SECOND = 1e8


def can_start_workers() -> bool:
    """False inside a daemonic process (a multiprocessing or dask worker), which may not start processes."""
    return not mp.current_process().daemon


def startup_seconds(mp_context=None, state_bytes: int = 0) -> float:
    """Estimated cost of starting a :func:`process_pool` with ``mp_context`` (as there) and a state of
    ``state_bytes``: what a short piece of work must save before workers pay for themselves."""
    ctx = mp.get_context(mp_context) if isinstance(mp_context, (str, type(None))) else mp_context
    method = ctx.get_start_method()
    if method == "fork":
        return STARTUP_SECONDS["fork"]
    return STARTUP_SECONDS.get(method, STARTUP_SECONDS["spawn"]) + state_bytes / STATE_BYTES_PER_SECOND


def _init_worker_state(state: dict) -> None:
    worker_state.clear()
    worker_state.update(state)


def process_pool(workers: int, state: dict, mp_context=None):
    """A ``ProcessPoolExecutor`` of ``workers`` processes, each holding ``state`` as
    :data:`worker_state` (sent once, through the pool's initializer), or None when
    ``workers <= 1`` or this process may not start processes (run in process then).

    ``mp_context``: a start method name, a multiprocessing context, or None (the platform's).
    """
    if workers <= 1 or not can_start_workers():
        return None
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context(mp_context) if isinstance(mp_context, (str, type(None))) else mp_context
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker_state, initargs=(state,))
