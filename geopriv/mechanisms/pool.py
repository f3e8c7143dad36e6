"""Worker-process pools for the mechanisms' independent solves (eikonal kernels, LP pricing).

The work's data goes to each worker once, through the pool's ``initializer``, never through
module state inherited by ``fork``: so every start method works (``spawn`` on Windows and
macOS, ``forkserver``/``fork`` on Linux).  Inside a daemonic process (a multiprocessing or dask
worker), which may not start processes, no pool is made and the caller runs the work itself.
"""
from __future__ import annotations

import multiprocessing as mp

__all__ = ["process_pool"]


def process_pool(workers: int, initializer, initargs: tuple, mp_context=None):
    """A ``ProcessPoolExecutor`` of ``workers`` processes, each set up by ``initializer(*initargs)``,
    or None when ``workers <= 1`` or this process may not start processes (run in process then).

    ``mp_context``: a start method name, a multiprocessing context, or None (the platform's).
    """
    if workers <= 1 or mp.current_process().daemon:
        return None
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context(mp_context) if isinstance(mp_context, (str, type(None))) else mp_context
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=initializer, initargs=initargs)
