"""``synthesize`` on dask-geopandas: counts aggregated across partitions, noise drawn once, centrally.

Each partition only validates its rows and counts them per leaf of the public tree (a
histogram: no noise, nothing released); the histograms are summed and the mechanism runs once
on the total, exactly as in memory (:meth:`PrivateMeasure.leaf_counts` with ``counts=``).  So
the privacy analysis does not depend on the number of partitions.  The tree depth depends on
the number of people (public here), which the graph counts first.  The plan is the in-memory
one (:func:`geopriv.release.plan_synthetic`, built by :func:`geopriv.synthesize`);
:func:`run_synthetic_lazy` is its lazy run, registered for the kind ``"synthetic"``.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from ..provenance import make_record
from ..rng import release_digest
from . import built, root_entropy
from .forms import lazy_form

__all__ = ["synthesize_dask", "run_synthetic_lazy", "partition_checks", "partition_histogram", "central_release"]

_HIST_META = pd.DataFrame({"key": pd.Series([], dtype=np.uint64), "count": pd.Series([], dtype=np.int64)})


PURPOSE = "synthesize-bind"  # the key the partitions' digests are bound to (geopriv.keys)


def _xy(part, plan):
    from ..release import check_release_input

    geoms, xy = check_release_input(part, (), plan.bounds, attributes=False)  # the region: checked by the plan
    return geoms, xy


def _digest(xy, root):
    """The partition's keyed multiset digest of its points (order-independent)."""
    from ..keys import float_words, row_streams

    n = len(xy)
    zeros = (np.zeros(n, np.uint64), np.zeros(n, np.uint64))
    return row_streams(root, PURPOSE, zeros, float_words(xy)).digest()


def partition_checks(part, plan, root):
    """Build time, one partition: its rows validated (inside the public area), its area edges and its digest."""
    from ..frame import touched_edges

    if len(part) == 0:
        return 0, np.zeros(4, bool), (0, 0, 0)
    geoms, xy = _xy(part, plan)
    plan.unit(xy, geoms.index)  # refuses rows outside the public area, naming them
    return len(xy), touched_edges(xy, plan.rect), _digest(xy, root)


def partition_histogram(part, plan, root=None, digests=None, partition_info=None):
    """Leaf counts of one partition's rows, after checking they are the rows the release was built on."""
    from ..mechanisms.private_measure import leaf_keys
    from .perturb import check_binding

    if len(part) == 0:
        check_binding(root, (0, 0, 0), digests, partition_info)
        return _HIST_META.copy()
    geoms, xy = _xy(part, plan)
    check_binding(root, _digest(xy, root), digests, partition_info)
    keys = leaf_keys(plan.unit(xy, geoms.index), plan.depth)
    uniq, counts = np.unique(keys, return_counts=True)
    return pd.DataFrame({"key": uniq.astype(np.uint64), "count": counts.astype(np.int64)})


def central_release(plan, histograms, root, seeded: bool, like, extra=None):
    """Sum the histograms, draw the noise once, place the points: the one release (``extra``: record fields)."""
    from ..release import synthetic_frame

    hist = pd.concat(histograms, ignore_index=True) if histograms else _HIST_META.copy()
    keys = hist["key"].to_numpy(dtype=np.uint64)
    uniq, inverse = np.unique(keys, return_inverse=True)
    totals = np.bincount(inverse, weights=hist["count"].to_numpy(), minlength=len(uniq)).astype(np.int64)
    if int(totals.sum()) != plan.n_people:  # pragma: no cover - defensive: the count and the histograms disagree
        raise RuntimeError("the partitions changed between counting and histogramming; recompute from stable data.")
    # the noise is bound to exactly the counts it answers (the release's sufficient statistic): the
    # same counts replay the same output, any other counts (a neighbouring dataset) draw anew
    # ... and to the public parameters (another epsilon or n on the same counts draws anew)
    digest = hashlib.sha256(
        np.ascontiguousarray(uniq, dtype="<u8").tobytes()
        + b"|"
        + np.ascontiguousarray(totals, dtype="<i8").tobytes()
        + b"|"
        + release_digest(params=[plan.fields(), dict(extra or {})])
    ).digest()
    gen = np.random.Generator(np.random.PCG64DXSM(root.seed_for("synthesize", digest)))
    nodes, counts = plan.mechanism.leaf_counts(uniq, gen, plan.depth, counts=totals)
    out = plan.points(nodes, counts, gen)
    fields = plan.fields()
    fields.update(extra or {})
    return synthetic_frame(like, out, plan.crs, make_record(fields, seeded=seeded, n=plan.n_out))


@lazy_form("synthesize.synthesize")
def synthesize_dask(data, *args, **kwargs):
    """Lazy :func:`geopriv.synthesize` of a dask-geopandas GeoDataFrame (same parameters).

    Parameters are checked now, and the secret root is drawn now.  Building reads the data once
    (no noise is drawn): rows validated, people counted, a declared area checked against all the
    data, each partition's digest recorded.  Computing the result twice on the same data gives
    the same synthetic set; partitions whose rows changed are refused
    (:class:`~geopriv.exceptions.StaleReleaseError`).  The noise is keyed by the root and a digest
    of the counts.  The lazy result holds the root: keep it like the data.  The result is a one-partition dask GeoDataFrame.

    ``budget_store`` (a :class:`~geopriv.BudgetStore` or its URL) and ``person`` (the column of
    person ids; default: the index labels, refused when they look like positions): the driver
    charges every row's person ``epsilon`` per row (unit ``"epsilon"``, as in memory) **once,
    here**, counting each person's rows over all partitions in the build's pass over the data,
    and before the lazy object is returned.  A refusal (:class:`~geopriv.BudgetExceededError`,
    naming persons) is raised here: nothing charged, no graph.  Computing the result again
    replays the same synthetic set and charges nothing more; the store never enters the graph.
    """


def _build_pass(plan, data, root, charged: bool):
    """Build time: every row validated, the people counted, a declared area checked against ALL the data.

    Returns (each partition's (rows, touched edges, digest), each partition's persons when ``charged``).
    """
    import dask

    from ..frame import check_area_not_from_data

    parts = data.to_delayed()
    tasks = [dask.delayed(partition_checks, pure=True)(p, plan, root) for p in parts]
    if charged:  # the charge's persons and rows, in the same pass over ALL partitions
        from .budget import partition_persons

        tasks += [dask.delayed(partition_persons, pure=True)(p, plan.person) for p in parts]
    computed = dask.compute(*tasks)
    checks, persons = computed[: len(parts)], computed[len(parts) :]
    if plan.area_source in ("bounds", "region") and checks:
        check_area_not_from_data(np.logical_or.reduce([c[1] for c in checks]), plan.area_source)
    return checks, persons


def _output_meta(meta, crs):
    import geopandas as gpd

    if isinstance(meta, gpd.GeoSeries):
        return gpd.GeoSeries([], crs=crs, name="geometry")
    return gpd.GeoDataFrame(geometry=gpd.GeoSeries([], crs=crs), crs=crs)


def run_synthetic_lazy(plan, data, *, store=None, rng=None, progress=None):
    """The lazy run of a synthetic plan (:class:`geopriv.release.SyntheticPlan`) on a dask frame: see :func:`synthesize_dask`.

    The plan's public checks at one person first (before any row is read), then the build's
    pass, the plan for the people counted, the one central release (lazy) and the driver's one
    charge (:func:`geopriv.distributed.budget.charge_at_build`).  ``progress`` is ignored.
    """
    import dask
    import dask.dataframe as dd
    import dask_geopandas  # noqa: F401  (registers the geopandas backend of dask.dataframe)

    meta = data._meta
    if (
        store is not None
        and plan.person is not None
        and (not hasattr(meta, "columns") or plan.person not in meta.columns)
    ):
        from ..budget import PERSON_FIX
        from ..exceptions import GeoprivError

        raise GeoprivError(f"person={plan.person!r} is not a column of the data.", fix=PERSON_FIX)
    probe = plan.for_people(1)  # public checks first, before any data is read
    root, drawn = root_entropy(rng)
    checks, persons = _build_pass(probe, data, root, charged=store is not None)
    plan = plan.for_people(sum(c[0] for c in checks))
    per_row, extra = plan.charge(store)  # as in memory (geopriv.release.SyntheticPlan.charge)
    from ..keys import Binding

    digests = Binding(root, PURPOSE, [c[2] for c in checks])  # sealed: one-way tags, never shown
    hists = data.map_partitions(partition_histogram, plan, root, digests, meta=_HIST_META).to_delayed()
    result = dask.delayed(central_release, pure=True)(plan, hists, root, root.seeded, meta.iloc[:0], extra)
    lazy = dd.from_delayed([result], meta=_output_meta(meta, plan.crs), verify_meta=False)
    if store is not None:  # the driver's one charge, before the lazy release exists for anyone to compute
        from ..budget import PURE
        from .budget import charge_at_build, merge_persons

        fields = {**plan.fields(), **extra}
        charge_at_build(
            store, merge_persons(persons), per_row, unit=PURE, kind="synthesize", fields=fields, rows=plan.n_out
        )
    built(rng, drawn)  # only now does a caller's generator advance
    return lazy
