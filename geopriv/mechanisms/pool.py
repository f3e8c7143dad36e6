"""Worker-process pools for the mechanisms' independent solves (eikonal kernels, LP pricing).

The work's data goes to each worker once, through the pool's initializer, into that worker's
:data:`worker_state` (the calling process never writes it, so ``fork`` passes nothing on): every
start method works (``spawn`` on Windows and macOS, ``forkserver``/``fork`` on Linux).  Inside a daemonic process (a multiprocessing or dask
worker), which may not start processes, no pool is made and the caller runs the work itself.
"""
from __future__ import annotations

import multiprocessing as mp

__all__ = ["process_pool", "worker_state"]

#: in a worker process of :func:`process_pool`: the work's data, received once (empty elsewhere)
worker_state: dict = {}


def _init_worker_state(state: dict) -> None:
    worker_state.clear()
    worker_state.update(state)


def process_pool(workers: int, state: dict, mp_context=None):
    """A ``ProcessPoolExecutor`` of ``workers`` processes, each holding ``state`` as
    :data:`worker_state` (sent once, through the pool's initializer), or None when
    ``workers <= 1`` or this process may not start processes (run in process then).

    ``mp_context``: a start method name, a multiprocessing context, or None (the platform's).
    """
    if workers <= 1 or mp.current_process().daemon:
        return None
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context(mp_context) if isinstance(mp_context, (str, type(None))) else mp_context
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker_state, initargs=(state,))
