"""A write PostgreSQL chose to give way (deadlock, serialization failure) is tried again, not surfaced at once.

The database rolled the whole transaction back, so a new try is exact; the busy error reaches the caller only
after six.  Seen in CI: eight processes releasing for overlapping persons on a loaded machine, one got
"busy with other releases" (tests/test_budget_concurrency.py treats that as a bug).
"""

from __future__ import annotations

import pytest

from geopriv import BudgetStore
from geopriv.exceptions import BudgetStoreError, Fix

BUSY = Fix("store_busy", python="Retry the release.", cli="Retry the release.", qgis="Retry the release.")


def test_busy_writes_are_tried_again_then_reported(tmp_path):
    with BudgetStore(tmp_path / "store.sqlite", create=True) as store:
        tries = []

        def twice_busy(db):
            tries.append(1)
            if len(tries) <= 2:
                raise BudgetStoreError("busy", fix=BUSY)
            return "done"

        assert store._writing(twice_busy) == "done" and len(tries) == 3

        always = []

        def busy(db):
            always.append(1)
            raise BudgetStoreError("busy", fix=BUSY)

        with pytest.raises(BudgetStoreError, match="busy"):
            store._writing(busy)
        assert len(always) == 6

        other = []

        def broken(db):  # any other store error is reported at once
            other.append(1)
            raise BudgetStoreError("cannot be written")

        with pytest.raises(BudgetStoreError, match="cannot be written"):
            store._writing(broken)
        assert len(other) == 1
