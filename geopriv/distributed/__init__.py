"""geopriv on dask-geopandas: one release per call, whatever the partitioning.

``ddf.priv.perturb(...)``, ``ddf.priv.synthesize(...)`` and ``ddf.priv.sanitize_traces(...)``
on a :class:`dask_geopandas.GeoDataFrame` return lazy results with the same guarantees as the
in-memory calls (``pip install 'geopriv[dask]'``; ``import geopriv`` never imports dask: the
accessor is registered on dask's frames when ``dask_geopandas`` is already imported, or when
this module is).

What goes wrong in a naive scale-out, and what is done here instead:

* **A lazy release recomputed would draw fresh noise**: a second, independent release of the
  same people.  Here the root entropy (128 bits from the OS, or the user's seed) is drawn once,
  when the lazy release is *built*, and embedded in the graph: computing it twice gives the
  identical points.
* **Seeds per partition** make results depend on the partitioning and the scheduler.  Here each
  row's noise comes from a stream keyed by (root, its public row key): rows are grouped in
  blocks of ``BLOCK`` consecutive integer index values, block ``b`` draws from
  ``SeedSequence(root, spawn_key=(b,))`` for all of its ``BLOCK`` slots (absent rows are filled
  with a public dummy point and their draws discarded), and every mechanism draws a number of
  variates that depends only on the number of rows.  So a row's noise depends on the root, its
  key and its own location only: identical for 1 or 8 partitions and any scheduler, and no two
  rows (distinct keys) share variates.  A non-integer index is hashed to 64-bit keys
  (``pandas.util.hash_pandas_object``) and each row then gets its own stream (slower).
* **``map_partitions`` without ``meta=``** runs the function on a fake partition: ``meta`` is
  always passed, and nothing is drawn when the graph is built.
* **A budget charged inside partitions** is charged per partition or per compute: here
  everything public (frame, lattice, finite-precision bound, provenance record) is fixed once at
  build time; ``synthesize`` aggregates counts across partitions and draws its noise once,
  centrally.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..daskhook import is_dask

__all__ = ["is_dask", "root_entropy", "row_keys", "register_accessor", "BLOCK"]

#: rows per keyed random stream (consecutive integer index values)
BLOCK = 1 << 14


def root_entropy(rng=None):
    """(128-bit root entropy, seeded) drawn ONCE when a lazy release is built.

    ``None``: OS entropy.  An int or SeedSequence: its entropy (reproducible).  A Generator:
    128 bits drawn from it (reproducible if it was seeded).
    """
    from ..rng import make_rng

    if rng is None:
        return int(np.random.SeedSequence().entropy), False
    source = make_rng(rng)  # validates ints, refuses bools and RandomState
    words = source.generator.integers(0, 2 ** 63, size=2, dtype=np.int64)
    return (int(words[0]) << 64) | int(words[1]), True


def row_keys(index: pd.Index):
    """(uint64 keys, integer?) for the rows: integer labels as they are, anything else hashed."""
    if pd.api.types.is_integer_dtype(index.dtype):
        return np.asarray(index, dtype=np.int64).view(np.uint64), True
    return pd.util.hash_pandas_object(index, index=False).to_numpy(dtype=np.uint64), False


_REGISTERED = []


def register_accessor() -> None:
    """Register ``.priv`` on dask-geopandas frames (idempotent)."""
    if _REGISTERED:
        return
    from dask.dataframe.extensions import register_dataframe_accessor, register_series_accessor

    from .accessor import DaskPrivAccessor

    register_dataframe_accessor("priv")(DaskPrivAccessor)
    register_series_accessor("priv")(DaskPrivAccessor)
    _REGISTERED.append(True)


try:  # importing this module asks for dask: register the accessor now
    register_accessor()
except ImportError:  # pragma: no cover - geopriv[dask] not installed
    pass
