"""geopriv on dask-geopandas: one release per call, whatever the partitioning.

``ddf.priv.perturb(...)``, ``ddf.priv.synthesize(...)`` and ``ddf.priv.sanitize_traces(...)``
on a :class:`dask_geopandas.GeoDataFrame` return lazy results with the same guarantees as the
in-memory calls (``pip install 'geopriv[dask]'``; ``import geopriv`` never imports dask: the
accessor is registered on dask's frames when ``dask_geopandas`` is already imported, or when
this module is).  ``ddf.priv.aggregate(...)``, ``.heatmap(...)`` and ``.flows(...)`` are eager: they
count per partition, draw the noise once on the driver and return in-memory results
(:mod:`geopriv.distributed.aggregate`).

What goes wrong in a naive scale-out, and what is done here instead:

* **A lazy release recomputed would draw fresh noise**: a second, independent release of the
  same people.  Here the root entropy (a :class:`geopriv.keys.SecretRoot`: 128 bits from the
  OS, or from the user's seed) is drawn once, when the lazy release is *built*, and embedded in
  the graph.  **The lazy result is therefore secret** (like the data): its root never shows in
  a ``repr``, a task name or a record, and it is pickled only by dask's own shipping of the graph
  to its workers: a plain ``pickle.dumps`` of a lazy release is refused
  (:class:`geopriv.keys.SecretPicklingError`; opt in with :func:`geopriv.keys.allow_secret_pickling`).
* **Noise keyed by position, partition or label only** is shared by rows that are not the
  same person, or reused on changed data (the difference of two outputs would be a difference
  of true values).  Here every row's noise is a pseudorandom function of (root, the row's
  declared identity, the row's own coordinates) (:mod:`geopriv.keys`, proof in
  ``docs/privacy.md``): an unchanged row replays its output, a changed or new row draws
  independent noise, whatever the partitioning or the scheduler.  Identities (``person=`` a
  column, or the index labels) must be integers or strings, unique over the *whole* frame: the
  check is a reduction over every partition, computed with the release.  A ``RangeIndex``
  (positions, as ``read_parquet`` gives for files written with ``index=False``) is refused:
  positions are not people.
* **``map_partitions`` without ``meta=``** runs the function on a fake partition: ``meta`` is
  always passed, and nothing is drawn when the graph is built.
* **A budget charged inside partitions** is charged per partition or per compute: here
  everything public (frame, lattice, finite-precision bound, provenance record) is fixed once at
  build time; ``synthesize`` aggregates counts across partitions and draws its noise once,
  centrally.  A persistent budget store (``budget_store=``) is charged by the driver, once, when
  the lazy release is built, from what the build's pass counted over all partitions; it never
  enters the graph (:mod:`geopriv.distributed.budget`).
"""

from __future__ import annotations

import copy

import numpy as np

from ..daskhook import is_dask

__all__ = ["is_dask", "root_entropy", "register_accessor"]


def root_entropy(rng=None, data=None, params=None, purpose: str = "lazy"):
    """(the :class:`~geopriv.keys.SecretRoot` of a lazy release, drawn ONCE when it is built; what it was drawn from).

    ``None``: OS entropy.  An int, SeedSequence or Generator: 128 bits drawn from it
    (reproducible, recorded as seeded), bound with ``data`` (the dask frame: one extra pass,
    :func:`data_digest`, only when seeded) and the public ``params``, so a seed replays only for
    the same data and parameters (:meth:`geopriv.rng.RandomSource.bind`).
    """
    from ..keys import SecretRoot
    from ..rng import make_rng

    if isinstance(rng, np.random.Generator):  # drawn from a copy: the caller's advances only when the build succeeds
        rng = np.random.Generator(copy.deepcopy(rng.bit_generator))
    source = None if rng is None or data is None else make_rng(rng)
    if source is None or (source.material is None and not source.from_generator):
        return SecretRoot.draw(rng), rng
    return SecretRoot.draw(source.bind(data_digest(data), params=params, purpose=purpose).generator), rng


def built(rng, drawn) -> None:
    """A lazy release was built (checked and charged): the caller's generator advances as its root's draw did.

    ``drawn``: the copy :func:`root_entropy` drew from.  A refused build leaves the caller's generator untouched.
    """
    if isinstance(rng, np.random.Generator) and drawn is not rng:
        rng.bit_generator.state = drawn.bit_generator.state


def data_digest(data) -> list:
    """An order-free digest of every row of a dask frame (schema, rows, sums of row hashes): partitions add up.

    The same rows give the same digest whatever the partitioning (:func:`geopriv.rng.rows_multiset`).
    """
    import dask

    from ..rng import frame_schema, rows_multiset

    parts = dask.compute(*[dask.delayed(rows_multiset, pure=True)(p) for p in data.to_delayed()])
    m64 = (1 << 64) - 1
    return [frame_schema(data._meta), sum(p[0] for p in parts), *(sum(p[j] for p in parts) & m64 for j in (1, 2))]


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


def _register_lazy() -> None:
    """Register the lazy release functions with the core's dispatcher (geopriv.daskhook.lazy)."""
    from ..daskhook import register_lazy
    from .aggregate import run_counts, run_flows
    from .perturb import run_points_lazy
    from .synthesize import run_synthetic_lazy
    from ..release.base import lazy_kind
    from .traces import run_traces_lazy, trace_ledger_dask

    register_lazy(lazy_kind("points"), run_points_lazy)  # a point plan's run on dask (perturb)
    register_lazy(lazy_kind("synthetic"), run_synthetic_lazy)  # a synthetic plan's run on dask (synthesize)
    register_lazy(lazy_kind("traces"), run_traces_lazy)  # a trace plan's run on dask
    register_lazy("trace_ledger", trace_ledger_dask)
    register_lazy(lazy_kind("counts"), run_counts)  # eager: counts per partition, one noise draw on the driver
    register_lazy(lazy_kind("flows"), run_flows)


_register_lazy()

try:  # importing this module asks for dask: register the accessor now
    register_accessor()
except ImportError:  # pragma: no cover - geopriv[dask] not installed
    pass
