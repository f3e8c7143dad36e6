"""The release path: one plan per release kind, between the public API and the mechanisms.

Each kind has a module: :mod:`~geopriv.release.points` (perturbation, and the mechanism
contract), :mod:`~geopriv.release.traces`, :mod:`~geopriv.release.synthetic`,
:mod:`~geopriv.release.diffusion`; what they share is in :mod:`~geopriv.release.common`
(input checks, the declared area, the pipelined draw, the output's assembly) and
:mod:`~geopriv.release.charging` (the one place a budget store is charged).  The names below
are the path's public names; ``from geopriv.release import X`` keeps working as before.
See ``docs/architecture.md``.
"""

from __future__ import annotations

from ..points import check_coordinates, point_xy
from .charging import budget_fields, charge_rows
from .common import CHUNK, answered, assemble, check_release_input, public_area, region_geometry
from .diffusion import DiffusionPlan, plan_diffusion, release_diffusion
from .points import ReleasePlan, plan_release, point_charge, release_points
from .synthetic import SyntheticPlan, plan_synthetic, release_synthetic, synthetic_frame
from .traces import TracePlan, plan_traces

__all__ = [
    "release_points",
    "plan_release",
    "ReleasePlan",
    "point_charge",
    "plan_synthetic",
    "SyntheticPlan",
    "synthetic_frame",
    "release_synthetic",
    "release_diffusion",
    "plan_diffusion",
    "DiffusionPlan",
    "assemble",
    "answered",
    "budget_fields",
    "charge_rows",
    "CHUNK",
    "check_release_input",
    "check_coordinates",
    "point_xy",
    "public_area",
    "region_geometry",
    "TracePlan",
    "plan_traces",
]
