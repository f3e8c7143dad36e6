"""The count release's former home, kept for its import paths: everything is in :mod:`geopriv.release.counts`.

The count release kind (its plans, the pass over the data, the one orchestration of the charge,
the noise, the record and the output) lives in :mod:`geopriv.release.counts`, the cells of flows
in :mod:`geopriv.cells`; the names below are re-exported from there, unchanged.
"""

from __future__ import annotations

from .cells import FlowCells
from .release.counts import (
    OUTSIDE_FIX,
    TRIP_PERSON_FIX,
    CountPlan,
    bound_contributions,
    bounded_person,
    cells_frame,
    check_area_public,
    check_epsilon,
    check_flows_store,
    check_max_per_user,
    check_not_empty,
    count_rows,
    flows_frame,
    heatmap_layout,
    level_weights,
    locate_rows,
    person_codes,
    plan_counts,
    plan_flows,
    release_counts,
    trip_ends,
    warn_if_swamped,
)

__all__ = [
    "OUTSIDE_FIX",
    "TRIP_PERSON_FIX",
    "bounded_person",
    "check_flows_store",
    "heatmap_layout",
    "flows_frame",
    "CountPlan",
    "plan_counts",
    "bound_contributions",
    "count_rows",
    "release_counts",
    "check_max_per_user",
    "level_weights",
    "person_codes",
    # not in the former __all__, imported from here by name
    "FlowCells",
    "cells_frame",
    "check_area_public",
    "check_epsilon",
    "check_not_empty",
    "locate_rows",
    "plan_flows",
    "trip_ends",
    "warn_if_swamped",
]
