"""Provenance records attached to every release as ``result.attrs["geopriv"]``.

The record is published with the release (GeoPackage metadata, sidecar files, QGIS outputs
and logs), so it may hold **public information only**: the mechanism's public parameters,
the public frame and lattice, the finite-precision bound, whether a seed was used, the
number of rows (the output shows it anyway), the library version and a time stamp.  It is
built from an allowlist: a field that is not listed here is refused with a TypeError, so a
new mechanism cannot leak a data-dependent number into provenance by accident.  Values must
be None, bool, int, float, str, or lists of those.

Two datasets released with the same public parameters give identical records apart from
``created_utc`` and ``n`` (tested).
"""

from __future__ import annotations

import datetime as _dt
import math

from ._version import __version__
from .exceptions import ParameterTypeError

__all__ = ["make_record", "attach", "ALLOWED_FIELDS", "MECHANISM_NAMES", "mechanism_name"]

#: field -> what it says (all public: functions of the public parameters and the released values)
ALLOWED_FIELDS = {
    # what and how much privacy
    "mechanism": "mechanism name",
    "definition": "the privacy definition the mechanism satisfies",
    "epsilon_per_m": "privacy loss per ground metre (user's parameter)",
    "level": "privacy level within radius_m (user's parameter)",
    "radius_m": "radius in metres for level (user's parameter)",
    "epsilon_per_work_unit": "epsilon converted with the public frame's scale",
    "effective_epsilon_per_m": "epsilon per ground metre including the finite-precision bound",
    "finite_precision": "how floating-point output is bounded",
    # public frame and lattice
    "input_crs": "the data's CRS",
    "frame": "planar or spherical",
    "frame_area": "where the frame's scale is bounded: bounds, region, area_of_use, none",
    "working_crs": "CRS noise was drawn in, when not the input CRS (centred on declared bounds only)",
    "distortion": "public bound on extra noise from CRS scale variation",
    "sphere_radius_m": "radius of the sphere noise was drawn on",
    "grid_m": "lattice step in ground metres",
    "lattice": "lattice anchor",
    "declared_bounds": "the user's declared public area",
    "region": "whether outputs were truncated to a user-given region",
    "kept_columns": "attribute columns the user deliberately kept",
    "row_order": "'shuffled' when the rows were released in a random order (the command line's --shuffle; the "
    "permutation is not kept)",
    "outside": "how inputs outside the mechanism's domain are handled",
    # location-dependent mechanism
    "epsilon_min_per_m": "privacy map minimum",
    "epsilon_max_per_m": "privacy map maximum",
    "verified_max_ratio": "realised local Lipschitz ratio of the mechanism (a function of the map)",
    "mechanism_id": "SHA-256 of the saved mechanism",
    "map_crs": "the privacy map's CRS",
    "between_nodes": "how inputs between grid nodes are handled",
    "remap": "post-processing with a public prior",
    # traces
    "method": "predictive or independent",
    "budget": "budget manager",
    "budget_config": "budget manager parameters",
    "rate": "fraction of the budget per query",
    "accuracy_m": "accuracy aimed at",
    "predictor": "prediction function",
    "skip_speed_mps": "time skip rule speed",
    "stale_after_s": "staleness rule",
    "on_exhausted": "what exhausted rows get",
    "traces": "number of traces (shown by the output's trace ids)",
    "n_released": "rows released (shown by the output's status column)",
    "traj_id": "name of the trace id column",
    "time": "name of the time stamp column",
    "ledger": "per-trace budget ledger (a function of the released epsilon_spent column and trace ids)",
    # synthetic locations (private measures)
    "epsilon": "differential privacy loss (dimensionless; one person's location replaced anywhere in the public area)",
    "effective_epsilon": "epsilon including any finite-precision term",
    "depth": "levels of the binary partition tree (a public function of n and epsilon)",
    "curve": "space-filling curve and its order",
    "level_scales": "noise scale per tree level (a public function of epsilon and depth)",
    "placement": "where synthetic points are put inside their cells",
    "n_people": "number of people in the data (public in this privacy model)",
    "public_area": "the public rectangle the release is defined on (declared bounds, region box or area of use)",
    # graded release over a network
    "coalition_epsilon_per_m": "what any coalition of recipients can learn: the largest epsilon released",
    "distance": "network distance used: hops or resistance",
    "epsilon_min": "smallest epsilon released (per unit of a released value)",
    "epsilon_max": "largest epsilon released (per unit of a released value)",
    "coalition_epsilon": "what any coalition of recipients can learn about a released value: the largest epsilon",
    "recipients": "number of recipients answered (shown by the output)",
    "unreachable": "number of nodes not connected to the source (they get no answer)",
    # private counts, heatmaps and flows (geopriv.aggregate, heatmap, flows)
    "max_per_user": "most rows (trips for flows) counted per person (user's parameter)",
    "user": "name of the person id column (user level; None: each row is a person)",
    "epsilon_per_level": "epsilon of each level of the hierarchy of cells, cells first (a public function of epsilon)",
    "tree_levels": "levels of the public hierarchy of cells",
    "cells": "what the public cells are (a grid step, an H3 resolution, a number of polygons)",
    "cell_size_m": "grid step in metres (user's parameter)",
    "cell_size_crs": "grid step in CRS units: the step in metres times the CRS's scale at the public area's centre",
    "grid_shape": "rows and columns of the grid over the public area",
    "grid_origin": "the grid's lower-left corner (the declared area's)",
    "h3_resolution": "H3 resolution (user's parameter)",
    "n_cells": "number of cells released (shown by the output)",
    "nonnegative": "whether counts were made non-negative (post-processing)",
    "suppress": "counts below this released as 0 (post-processing)",
    "expected_error": "root mean squared error of a cell's count: min, median, max over cells (public parameters only)",
    "values": "count or density per square kilometre",
    "regions": "number of public regions flows are counted between",
    "trip_rule": "how a trip's origin and destination are taken",
    # budget store (geopriv.BudgetStore): what each row cost, never the store's location or the persons
    "budget_store": "kind of budget store charged before the noise was drawn: sqlite or postgresql (never its URL)",
    "budget_unit": "unit of the charge: epsilon/m or epsilon",
    "charged_per_row": "budget charged per released row (a function of the public parameters)",
    # bookkeeping
    "n": "number of rows released (shown by the output)",
    "seeded": "whether the noise is reproducible (the seed is never stored)",
    "geopriv_version": "library version",
    "created_utc": "time stamp",
    "previous": "records of earlier releases this data went through",
}

#: a record's "mechanism" -> the mechanism in plain words, for titles (reports, figures, front ends); a value that
#: is not listed is already in plain words (counts, flows, synthetic points, diffusion write sentences)
MECHANISM_NAMES = {
    "planar_laplace": "Planar Laplace (geo-indistinguishability)",
    "spherical_laplace": "Laplace on the sphere (geo-indistinguishability in longitude and latitude)",
    "eikonal": "Location-dependent Laplace (eikonal mechanism: privacy by place)",
    "predictive_trace": "Predictive mechanism for traces (geo-indistinguishability per trace)",
    "independent_trace": "Planar Laplace on every point of a trace (geo-indistinguishability per trace)",
}


def mechanism_name(record) -> str:
    """The mechanism of a release record (``attrs["geopriv"]``, or its "mechanism" value) in plain words."""
    value = record.get("mechanism") if isinstance(record, dict) else record
    if not value:
        return "a release"
    return MECHANISM_NAMES.get(str(value), str(value))


_SCALARS = (type(None), bool, int, float, str)


def _check_value(key, value):
    if isinstance(value, _SCALARS):
        if isinstance(value, float) and not math.isfinite(value):
            return
        return
    if isinstance(value, (list, tuple)) and all(isinstance(v, _SCALARS) for v in value):
        return
    if isinstance(value, dict) and all(
        isinstance(k, str)
        and (isinstance(v, _SCALARS) or (isinstance(v, list) and all(isinstance(x, _SCALARS) for x in v)))
        for k, v in value.items()
    ):
        return
    raise ParameterTypeError(
        f"provenance field {key!r} must be a plain scalar or a list of scalars, got {type(value).__name__}"
    )


def make_record(fields: dict, *, seeded: bool, n: int | None) -> dict:
    """A provenance record from public ``fields`` (allowlisted; see :data:`ALLOWED_FIELDS`).

    ``seeded`` says whether the noise is reproducible; the seed itself is never stored,
    because anyone holding it could regenerate the noise and recover the true locations.
    """
    record = {}
    for key, value in fields.items():
        if key not in ALLOWED_FIELDS:
            raise ParameterTypeError(
                f"provenance field {key!r} is not in geopriv.provenance.ALLOWED_FIELDS; only public fields may be "
                "published with a release"
            )
        if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
            value = value.item()  # numpy scalars
        _check_value(key, value)
        record[key] = value
    record["n"] = None if n is None else int(n)  # None: a lazy (dask) release, whose length the output shows
    record["seeded"] = bool(seeded)
    record["geopriv_version"] = __version__
    record["created_utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return record


def attach(result, source, record: dict):
    """Set ``result.attrs["geopriv"]`` to ``record``, keeping earlier releases of ``source`` in ``previous``.

    Only allowlisted fields of earlier records are carried over.
    """
    prior = getattr(source, "attrs", {}).get("geopriv")
    if prior:
        previous = list(prior.get("previous", []))
        previous.append({k: v for k, v in prior.items() if k != "previous" and k in ALLOWED_FIELDS})
        record = dict(record, previous=previous)
    result.attrs = {k: v for k, v in getattr(source, "attrs", {}).items() if k != "geopriv"}
    result.attrs["geopriv"] = record
    return result
