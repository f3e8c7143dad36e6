"""A lazy release's budget: charged ONCE, by the driver, when the release is built (before the graph exists).

A lazy release's noise is keyed (secret root, the row's identity, its content: :mod:`geopriv.keys`),
so computing the graph again, or a retried task, replays the same output: it is the same release,
not a new one.  Its cost is therefore charged once, at the call, by the process that builds it:

1. the build's pass over the data (one dask computation over ALL partitions, together with the
   release's other whole-data checks) also returns what the charge needs: each partition's persons
   and their rows (:func:`partition_persons`), or its traces, their persons and lengths;
2. the driver merges them (:func:`merge_persons`), charges the store in one transaction
   (:func:`charge_at_build`, ``spend=True``) and only then returns the lazy object.  A refusal
   (:class:`~geopriv.exceptions.BudgetExceededError`, naming persons) is raised at the call:
   nothing is charged and no graph is returned.

Nothing store-related enters the graph: no :class:`~geopriv.budget.BudgetStore` (it refuses to be
pickled), no URL.  Workers never see the store and need no access to it; only the driver writes it.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["charge_at_build", "driver_store", "merge_persons", "partition_persons"]


@contextlib.contextmanager
def driver_store(budget_store):
    """The :class:`~geopriv.budget.BudgetStore` of a lazy release's call (None without one).

    A URL is opened here, on the driver, and closed when the call returns; a store object the
    caller gave stays open (it is the caller's).
    """
    from ..budget import open_store

    store = open_store(budget_store)
    try:
        yield store
    finally:
        if store is not None and store is not budget_store:
            store.close()


def partition_persons(part, person):
    """Build time, one partition: its persons as the store keys them, their rows, and labels of string ids.

    The persons are the ``person`` column, else the index labels (refused when they look like
    positions: an unnamed integer index), exactly as the in-memory release charges them
    (:func:`geopriv.release.charge_rows`).  Unusable ids are named by row label.

    Returns
    -------
    (keys, counts, labels) : (ndarray of int64, ndarray of int64, dict)
        ``labels``: ``key -> text`` of its non-decimal string ids (once each).
    """
    from ..budget import person_keys
    from ..keys import row_identities

    if len(part) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), {}
    ids, labels = row_identities(part, person, refuse_positions=True)
    pk = person_keys(ids, labels)
    return pk.keys, pk.counts, pk.labels


def merge_persons(parts, once: bool = False):
    """The persons of the whole release from :func:`partition_persons` of every partition.

    A person whose rows are in several partitions is one person with all their rows.  The
    returned :class:`~geopriv.budget.PersonKeys` keeps no row order (the driver never holds the
    rows): its ``inverse`` maps each person to itself, so it is charged with one amount per row
    (a scalar, multiplied by ``counts``), as the in-memory release charges it.  ``once``: one row
    each, so every person is charged the amount once (user level, as
    :func:`geopriv.budget.persons_of` with ``once=True``).
    """
    from ..budget import PersonKeys

    parts = list(parts)
    keys = np.concatenate([np.asarray(p[0], np.int64) for p in parts]) if parts else np.zeros(0, np.int64)
    counts = np.concatenate([np.asarray(p[1], np.int64) for p in parts]) if parts else np.zeros(0, np.int64)
    uniq, inverse = np.unique(keys, return_inverse=True)
    total = np.zeros(len(uniq), np.int64)
    np.add.at(total, inverse.reshape(-1), counts)
    labels: dict = {}
    for p in parts:
        labels.update(p[2])
    return PersonKeys(
        uniq.astype(np.int64, copy=False),
        np.ones(len(uniq), np.int64) if once else total,
        np.arange(len(uniq)),
        label_keys=np.fromiter(labels.keys(), np.int64, len(labels)),
        label_text=list(labels.values()),
    )


def charge_at_build(store, persons, amounts, *, unit: str, kind: str, fields: dict, rows: int | None) -> str:
    """Charge a lazy release's cost in full, now: the lazy object is returned only if this succeeds.

    ``spend=True`` whatever the release: once the graph is returned it may be computed at any
    time, any number of times (each a replay), and the driver learns nothing of what it spent.
    Raises :class:`~geopriv.exceptions.BudgetExceededError` (naming persons) with nothing charged.
    Returns the release's id in the store's audit.
    """
    from ..release.charging import reserve

    reservation = reserve(store, persons, amounts, unit=unit, kind=kind, fields=fields, rows=rows)
    reservation.start()  # the graph may be computed as soon as it is returned: nothing can be given back
    reservation.commit()
    return reservation.release_id
