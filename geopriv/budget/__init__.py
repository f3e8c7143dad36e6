"""Budgets that outlive a call: a persistent, concurrent store of lifetime privacy budgets per person.

:class:`BudgetStore` keeps them in SQLite (the default, embedded) or PostgreSQL (several processes
or machines); every release function takes ``budget_store=`` and ``person=`` and charges the store
before any noise is drawn.  See ``docs/budgets.md``.
"""

from .persons import PERSON_FIX, PersonKeys, person_keys, persons_of
from .store import (
    PER_METRE,
    PURE,
    SCHEMA_VERSION,
    UNITS,
    BudgetStore,
    Reservation,
    check_unit,
    open_store,
    opens_budget_store,
    value_unit,
)

__all__ = [
    "BudgetStore",
    "Reservation",
    "PersonKeys",
    "person_keys",
    "persons_of",
    "PERSON_FIX",
    "open_store",
    "opens_budget_store",
    "check_unit",
    "value_unit",
    "UNITS",
    "PER_METRE",
    "PURE",
    "SCHEMA_VERSION",
]
