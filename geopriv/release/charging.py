"""Charging a budget store: the one place a release reserves budget for the persons it answers about.

Every release kind, in memory and on dask, charges through :func:`reserve` (points, synthetic
points, traces, counts, heatmaps, flows; diffusion's path charges go through the store's
``charge_path``, which prices a path's increase): the persons are decided before (by
:func:`geopriv.identity.identities`, the one rule of who a person is), the amounts are
computed from public parameters only, and the call comes after every check on the data and
before any noise is drawn.
"""

from __future__ import annotations


def budget_fields(store, unit: str, per_row: float | None) -> dict:
    """The provenance fields of a charged release: the store's kind (never its URL), the unit, the cost of a row
    (None when a row's cost depends on the release's public outcome, as for traces: see their ledger)."""
    return {
        "budget_store": store.kind,
        "budget_unit": unit,
        "charged_per_row": None if per_row is None else float(per_row),
    }


def charge_rows(store, data, person, per_row, unit: str, kind: str, fields: dict, n: int, *, spend: bool = True):
    """Charge every row's person ``per_row`` (in ``unit``) in ``store``: a :class:`~geopriv.budget.Reservation`.

    The persons are the ``person`` column (or the index labels, refused when they look like
    positions: an unnamed integer index); a person with several rows pays for each.  Call it
    after every check on the data and before any noise is drawn; it raises
    :class:`~geopriv.exceptions.BudgetExceededError` (naming persons) and charges nothing when
    someone cannot afford it.
    """
    from ..budget import person_keys
    from ..keys import row_identities

    ids, labels = row_identities(data, person, refuse_positions=True)
    keys = person_keys(ids, labels)
    return reserve(store, keys, per_row, unit=unit, kind=kind, fields=fields, rows=n, spend=spend)


def reserve(store, persons, amounts, *, unit: str, kind: str, fields: dict, rows: int | None, spend: bool = True):
    """Reserve ``amounts`` (one per person, or one for all, in ``unit``) for ``persons`` in ``store``.

    Returns the store's :class:`~geopriv.budget.Reservation` (a context manager: ``start()`` once
    the noise is about to be drawn, ``commit(used)`` to settle; leaving it otherwise gives the
    charge back).  Raises :class:`~geopriv.exceptions.BudgetExceededError`, naming persons, with
    nothing charged when someone cannot afford it.  ``fields`` (public parameters only) is the
    audit's record of the release; ``rows`` the number of released rows or cells.
    """
    return store.reserve(persons, amounts, unit=unit, kind=kind, spend=spend, parameters=fields, rows_released=rows)
