"""The count release kind: private counts per public cell, heatmaps and origin-destination flows.

One plan per release, fixed from public parameters before any row is looked at (the cells, their
hierarchy, the split of epsilon over its levels, the expected error of every cell, the provenance
fields): :class:`CountPlan` (:func:`plan_counts`, :func:`plan_heatmap`) and :class:`FlowPlan`
(:func:`plan_flows`).  Its run has two stages, so that memory and dask share the second:

1. **a pass over the data** checks it against the plan, locates every row (or trip) in its cell
   and returns a :class:`Counted`: the bounded true counts (a function: on dask a second pass
   reads the data again, once the budget is reserved), the persons to charge and the random
   source.  In memory: :func:`point_pass`, :func:`trip_pass`; on dask partitions:
   :mod:`geopriv.distributed.aggregate` (registered as the plans' lazy runners);
2. :func:`publish`, **the one orchestration of every count release**: the provenance fields, the
   charge (:func:`geopriv.release.charging.reserve`, every person once), the noise drawn once
   (:func:`release_counts`, exact discrete Laplace on the hierarchy, made consistent), the
   record, the low-utility warning and the output (a GeoDataFrame of cells, a :class:`Heatmap`,
   a GeoDataFrame of flows).

:func:`geopriv.aggregate`, :func:`geopriv.heatmap` and :func:`geopriv.flows` are a docstring and
``plan_<kind>(...).run(data)``.

Privacy model: user level.  Neighbouring datasets differ by one person with all of their rows;
each person keeps at most ``max_per_user`` rows, chosen uniformly at random with fresh
randomness (never by where they are); with ``user=None`` each row is a person.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from fractions import Fraction
from typing import Callable, ClassVar

import geopandas as gpd
import numpy as np
import pandas as pd

from ..budget import PURE, open_store
from ..cells import MAX_CELLS, FlowCells, PolygonCells, check_polygons_not_from_data, make_cells, parse_cells
from ..crs import as_crs
from ..daskhook import is_dask
from ..exceptions import (
    EmptyInputError,
    Fix,
    GeometryError,
    IdentityError,
    LowUtilityWarning,
    MissingCRSError,
    ParameterError,
    ParameterTypeError,
    caller_stacklevel,
)
from ..frame import STUDY_AREA_FIX, check_area_not_from_data, declared_bounds, touched_edges
from ..identity import identities
from ..mechanisms.hierarchy import CellTree, HierarchicalCounts, split_levels
from ..points import as_geoseries, check_coordinates, check_crs_kind, check_no_other_geometries, point_xy
from ..provenance import make_record
from ..rng import make_rng
from .base import Executes
from .charging import budget_fields, reserve
from .common import check_release_input, region_geometry

__all__ = [
    "OUTSIDE_FIX",
    "TRIP_PERSON_FIX",
    "INDEX_PERSONS",
    "CountPlan",
    "FlowPlan",
    "HeatmapLayout",
    "Heatmap",
    "Counted",
    "plan_counts",
    "plan_heatmap",
    "plan_flows",
    "input_crs",
    "flow_input_crs",
    "publish",
    "point_pass",
    "trip_pass",
    "bounded_person",
    "check_epsilon",
    "check_flows_store",
    "check_heatmap_options",
    "check_max_per_user",
    "level_weights",
    "person_codes",
    "bound_contributions",
    "bounded_counts",
    "count_rows",
    "locate_rows",
    "check_area_public",
    "release_counts",
    "warn_if_swamped",
    "cells_frame",
    "heatmap_layout",
    "flows_frame",
    "trip_ends",
]


OUTSIDE_FIX = Fix(
    "outside",
    python="Pass outside='drop' to leave those trips out, or use regions that cover them.",
    cli="Give --outside drop to leave those trips out, or use regions that cover them.",
    qgis="Set 'Trips outside every region' to 'drop', or use regions that cover them.",
)
TRIP_PERSON_FIX = Fix(
    "person_column",
    python="Give user= (the column of person ids; each person's trips are bounded by max_per_user).",
    cli="Give --user (the column of person ids).",
    qgis="Set 'Person id field'.",
)
#: the provenance's ``user`` when the index labels are the persons (charged in a budget store, and bounded)
INDEX_PERSONS = "index labels"


# ----------------------------------------------------------------------------- public parameters
def check_epsilon(epsilon) -> float:
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, (numbers.Real, np.floating, np.integer)):
        raise ParameterTypeError(f"epsilon must be a positive number, got {type(epsilon).__name__}.")
    e = float(epsilon)
    if not (math.isfinite(e) and e > 0):
        raise ParameterError(f"epsilon must be a finite number > 0, got {e!r} (a budget of 0 releases nothing).")
    return e


def check_not_empty(n: int) -> None:
    if n == 0:
        raise EmptyInputError("The data has no rows: there is nothing to count.")


def bounded_person(user, person):
    """The column whose persons are bounded and charged: ``user``, else ``person`` (they must agree).

    A person charged once must count for at most ``max_per_user`` rows, so ``person=`` alone bounds
    rows per person like ``user=`` does.
    """
    if person is not None and user is not None and person != user:
        raise ParameterError(
            "person= and user= name different columns: the person charged is the user whose rows are "
            "bounded. Give only user=."
        )
    return user if user is not None else person


def check_flows_store(store, user) -> None:
    """Flows charged to a budget store need the persons: trips are not persons."""
    if store is not None and user is None:
        raise ParameterError("A budget store charges persons: say whose each trip is.", fix=TRIP_PERSON_FIX)


def check_outside(outside) -> None:
    if outside not in ("refuse", "drop"):
        raise ParameterError(f"outside must be 'refuse' or 'drop', got {outside!r}.")


def check_heatmap_options(values, resolution, path, overwrite) -> None:
    """The heatmap's checks that read no row (values, resolution, output path): before anything else."""
    if values not in ("count", "density"):
        raise ParameterError(f"values must be 'count' or 'density', got {values!r}.")
    if (
        isinstance(resolution, (bool, np.bool_))
        or not isinstance(resolution, (int, float, np.integer, np.floating))
        or not np.isfinite(resolution)
        or resolution <= 0
    ):
        raise ParameterError(f"The heatmap's resolution must be a positive number of metres, got {resolution!r}.")
    if path is not None:
        from ..io import check_file_output

        check_file_output(path, suffixes=(".tif", ".tiff"), what="heatmap", overwrite=overwrite)


def check_max_per_user(max_per_user, user) -> int:
    if isinstance(max_per_user, (bool, np.bool_)) or not isinstance(max_per_user, (numbers.Integral, np.integer)):
        raise ParameterTypeError(f"max_per_user must be a positive integer, got {type(max_per_user).__name__}.")
    k = int(max_per_user)
    if k < 1:
        raise ParameterError(f"The most rows counted per person must be at least 1, got {k}.")
    if user is None and k != 1:
        raise ParameterError(
            "Counting more than one row per person needs a person id column: without one, every row is its own "
            "person, who contributes 1 row.",
            fix=Fix(
                "user_column",
                python="Give user='<column of person ids>', or leave max_per_user=1.",
                cli="Give --user <column of person ids>, or leave --max-per-user 1.",
                qgis="Set 'Person id field', or leave 'Most rows per person' at 1.",
            ),
        )
    return k


def check_nonnegative(nonnegative) -> bool:
    if not isinstance(nonnegative, (bool, np.bool_)):
        raise ParameterTypeError("nonnegative must be True or False.")
    return bool(nonnegative)


def check_suppress(suppress) -> int | None:
    if suppress is None:
        return None
    if (
        isinstance(suppress, (bool, np.bool_))
        or not isinstance(suppress, (numbers.Integral, np.integer))
        or suppress < 1
    ):
        raise ParameterError(
            f"suppress must be a positive integer (counts below it are released as 0), got {suppress!r}."
        )
    return int(suppress)


def level_weights(levels, depth: int) -> tuple:
    """How epsilon is split over the ``depth`` levels of the tree (leaves first), as rationals.

    ``"auto"``: 7/8 to the cells and 1/8 to the coarsest level (the whole public area), whose
    count makes the non-negative counts add up to an accurate total; measured on GeoLife
    (docs/aggregate.md) it is within 20 % of the cells-only split where counts are large, and
    about twice as accurate where the noise is larger than most counts.
    An int ``k``: ``k`` measured levels (the cells and ``k - 1`` coarser levels spread evenly up
    the tree, the coarsest included), equal shares; ``1`` or ``False``: the cells only.  A
    sequence: one weight per level.
    """
    if depth == 1 or levels is False:
        return (Fraction(1),) + (Fraction(0),) * (depth - 1)
    if isinstance(levels, str):
        if levels != "auto":
            raise ParameterError(f"levels must be 'auto', a number of levels or a list of weights, got {levels!r}.")
        return (Fraction(7),) + (Fraction(0),) * (depth - 2) + (Fraction(1),)
    if isinstance(levels, (numbers.Integral, np.integer)) and not isinstance(levels, (bool, np.bool_)):
        k = int(levels)
        if k < 1:
            raise ParameterError(f"levels must be at least 1, got {k}.")
        k = min(k, depth)
        picked = {0} | {round(i * (depth - 1) / (k - 1)) for i in range(1, k)} if k > 1 else {0}
        return tuple(Fraction(1 if i in picked else 0) for i in range(depth))
    try:
        w = [Fraction(x) for x in levels]
    except (TypeError, ValueError, OverflowError):
        raise ParameterTypeError("levels must be 'auto', a number of levels or a list of weights.") from None
    if len(w) != depth:
        raise ParameterError(f"levels has {len(w)} weights; the tree of these cells has {depth} levels.")
    return tuple(w)


def _hierarchy(cells, epsilon, levels, k):
    """(tree, mechanism) of a set of public cells: the split of ``epsilon`` over their hierarchy."""
    tree = CellTree.from_keys(cells.keys())
    return tree, HierarchicalCounts(split_levels(epsilon, level_weights(levels, tree.depth)), k)


# ----------------------------------------------------------------------------- the plans
@dataclasses.dataclass(frozen=True)
class HeatmapLayout:
    """A heatmap's raster: counts or densities per km², and the GeoTIFF it is written to (if any)."""

    values: str = "count"
    path: object = None
    overwrite: bool = False


@dataclasses.dataclass(frozen=True)
class CountPlan(Executes):
    """Everything public about a count release, fixed before any row is looked at.

    Built by :func:`plan_counts` (a GeoDataFrame of cells) or :func:`plan_heatmap` (the grid as a
    raster); ``run(data, store=, rng=)`` releases ``data`` under it, in memory or on dask.
    :meth:`fields` are the public fields the noise is bound to; :meth:`record_fields` the
    provenance record's.
    """

    kind: ClassVar[str] = "counts"

    cells: object
    tree: CellTree
    mechanism: HierarchicalCounts
    nonnegative: bool
    suppress: int | None
    expected_error: np.ndarray
    area: tuple | None
    area_source: str
    region_given: bool
    user: object
    region_geom: object = None
    epsilon: float | None = None
    #: the declared area as given: the data are checked against it (its units, a region's CRS)
    bounds: object = None
    region: object = None
    #: the persons are the index labels (charged in a budget store without ``user=``, and bounded)
    by_index: bool = False
    #: the release's kind in a budget store's audit
    release: str = "aggregate"
    layout: HeatmapLayout | None = None

    def fields(self) -> dict:
        f = dict(self.mechanism.describe())
        f.update(self.cells.describe())
        f["input_crs"] = self.cells.crs.to_string()
        f["tree_levels"] = self.tree.depth
        f["nonnegative"] = bool(self.nonnegative)
        f["suppress"] = self.suppress
        f["user"] = None if self.user is None else str(self.user)
        f["declared_bounds"] = (
            None if self.area is None or self.area_source != "bounds" else [float(v) for v in self.area]
        )
        f["region"] = self.region_given
        f["expected_error"] = _summary(self.expected_error)
        return f

    def release_fields(self) -> dict:
        """What this release adds to the plan's fields in its record."""
        return {} if self.layout is None else {"values": self.layout.values}

    def record_fields(self, store) -> dict:
        """The provenance record's fields: the plan's, the release's, the charge's (with a store)."""
        fields = self.fields()
        fields.update(self.release_fields())
        if store is not None:
            fields.update(budget_fields(store, PURE, self.epsilon))
        return fields

    def for_store(self, store) -> "CountPlan":
        """This plan charged to ``store``: without ``user=``, the index labels are the persons (charged and bounded)."""
        if store is None or self.user is not None:
            return self
        return dataclasses.replace(self, user=INDEX_PERSONS, by_index=True)

    def output(self, released: np.ndarray, record: dict):
        """The released cells (a GeoDataFrame), or the heatmap (written to its path, if any)."""
        if self.layout is None:
            return cells_frame(self, released, record)
        out, err, unit = heatmap_layout(self, released, self.layout.values)
        result = Heatmap(out, err, self.cells.transform(), self.cells.crs, record, unit)
        if self.layout.path is not None:
            result.to_raster(self.layout.path, overwrite=self.layout.overwrite)
        return result

    def run_memory(self, data, *, store=None, rng=None, progress=None):
        """Release in-memory points under this plan (``progress`` is not used: a count release is one pass)."""
        store = open_store(store)
        plan = self.for_store(store)
        return publish(plan, point_pass(plan, data, rng, charged=store is not None), store)


def _summary(err: np.ndarray) -> dict:
    return {"min": float(np.min(err)), "median": float(np.median(err)), "max": float(np.max(err))}


def plan_counts(
    crs,
    epsilon,
    *,
    cells,
    max_per_user=1,
    user=None,
    bounds=None,
    region=None,
    levels="auto",
    nonnegative=True,
    suppress=None,
    person=None,
    charged: bool = False,
) -> CountPlan:
    """The cells, hierarchy, budget split and expected errors of a count release (no data involved).

    ``crs``: a CRS, or a function returning the data's (:func:`input_crs`), called once the
    parameters that need no CRS are checked, so their errors come first.

    ``person``: the persons charged when ``user`` is not given (they are bounded too);
    ``charged``: the release is charged to a budget store, so without either the index labels
    are the persons (bounded to ``max_per_user`` rows each).
    """
    epsilon = check_epsilon(epsilon)
    user = bounded_person(user, person)
    by_index = charged and user is None
    if by_index:
        user = INDEX_PERSONS
    crs = as_crs(crs() if callable(crs) else crs)  # the data's, read after the row-free checks above
    k = check_max_per_user(max_per_user, user)
    nonnegative = check_nonnegative(nonnegative)
    suppress = check_suppress(suppress)
    kind, value = parse_cells(cells)
    region_geom = region_geometry(region, crs)
    rect = declared_bounds(crs, bounds, region)
    source = _area_source(kind, rect, bounds, region)
    cell_set = make_cells(kind, value, crs, rect, region_geom, source)
    tree, mech = _hierarchy(cell_set, epsilon, levels, k)
    return CountPlan(
        cell_set,
        tree,
        mech,
        nonnegative,
        suppress,
        mech.leaf_error(tree),
        rect,
        source,
        region is not None,
        user,
        region_geom,
        epsilon=epsilon,
        bounds=bounds,
        region=region,
        by_index=by_index,
    )


def _area_source(kind, rect, bounds, region) -> str:
    """Where the public area comes from: the cells (polygons), the declared bounds or the region."""
    if kind == "polygons":
        if bounds is not None or region is not None:
            raise ParameterError("With polygon cells the cells are the public area: do not give bounds or region.")
        return "cells"
    if rect is None:
        raise ParameterError(
            "A grid or H3 release needs a declared public area: every cell in it is released, empty or not.",
            fix=STUDY_AREA_FIX,
        )
    return "bounds" if bounds is not None else "region"


def plan_heatmap(crs, epsilon, *, resolution, values="count", path=None, overwrite=False, **options) -> CountPlan:
    """The plan of a heatmap: :func:`plan_counts` on a square grid of ``resolution`` metres, laid out as a raster.

    ``values``, ``resolution`` and ``path`` are checked first (no row is read); ``options`` are
    :func:`plan_counts`' other parameters.
    """
    check_heatmap_options(values, resolution, path, overwrite)
    plan = plan_counts(crs, epsilon, cells=resolution, **options)
    return dataclasses.replace(plan, release="heatmap", layout=HeatmapLayout(values, path, overwrite))


@dataclasses.dataclass(frozen=True)
class FlowPlan(CountPlan):
    """The plan of a flow release: every ordered pair of public regions is a cell (:class:`~geopriv.cells.FlowCells`).

    Built by :func:`plan_flows`; a trip runs from its earliest row to its latest (``traj_id`` and
    ``time``), or from a LineString's first vertex to its last.
    """

    kind: ClassVar[str] = "flows"

    release: str = "flows"
    traj_id: object = None
    time: object = None
    outside: str = "refuse"

    def release_fields(self) -> dict:
        return {
            "traj_id": None if self.traj_id is None else str(self.traj_id),
            "time": None if self.time is None else str(self.time),
            "trip_rule": "first and last row of each trip by time"
            if self.traj_id is not None
            else "first and last vertex of each line",
            "outside": self.outside,
        }

    def for_store(self, store) -> "FlowPlan":
        check_flows_store(store, self.user)
        return self

    def output(self, released: np.ndarray, record: dict):
        return flows_frame(self, released, record)

    def run_memory(self, data, *, store=None, rng=None, progress=None):
        """Release in-memory trips under this plan."""
        store = open_store(store)
        plan = self.for_store(store)
        return publish(plan, trip_pass(plan, data, rng, charged=store is not None), store)


def plan_flows(
    crs,
    epsilon,
    *,
    regions,
    region_id=None,
    max_per_user=1,
    user=None,
    levels="auto",
    nonnegative=True,
    traj_id=None,
    time=None,
    outside="refuse",
    person=None,
    charged: bool = False,
) -> FlowPlan:
    """The plan of a flow release: every ordered pair of public regions is a cell (no data involved)."""
    epsilon = check_epsilon(epsilon)
    user = bounded_person(user, person)
    check_flows_store(charged or None, user)  # charged to a store: trips are not persons
    check_outside(outside)
    crs = as_crs(crs() if callable(crs) else crs)  # the data's, read after the row-free checks above
    k = check_max_per_user(max_per_user, user)
    nonnegative = check_nonnegative(nonnegative)
    if not hasattr(regions, "geometry"):
        raise ParameterTypeError("regions must be a GeoDataFrame (or GeoSeries) of public polygons.")
    poly = PolygonCells.build(crs, regions)
    if poly.n**2 > MAX_CELLS:
        raise ParameterError(
            f"{poly.n} regions make {poly.n**2:,} origin-destination pairs (at most {MAX_CELLS:,}).",
            fix=Fix(
                "fewer_regions",
                python="Use fewer, larger regions.",
                cli="Use fewer, larger regions.",
                qgis="Use fewer, larger regions.",
            ),
        )
    cells = FlowCells(poly, _region_names(poly, region_id))
    tree, mech = _hierarchy(cells, epsilon, levels, k)
    return FlowPlan(
        cells,
        tree,
        mech,
        nonnegative,
        None,
        mech.leaf_error(tree),
        None,
        "cells",
        False,
        user,
        epsilon=epsilon,
        traj_id=traj_id,
        time=time,
        outside=outside,
    )


def _region_names(poly: PolygonCells, region_id) -> np.ndarray:
    if region_id is None:
        names = np.asarray(poly.frame.index)
    else:
        if region_id not in poly.frame.columns:
            raise ParameterError(f"region_id={region_id!r} is not a column of the regions.")
        names = poly.frame[region_id].to_numpy()
    if pd.Index(names).has_duplicates:
        raise ParameterError("The regions' ids repeat: give region_id= a column of distinct names.")
    return names


# ----------------------------------------------------------------------------- the input, before the plan
def meta_crs(meta):
    """The CRS of a dask frame (its meta's)."""
    crs = getattr(meta, "crs", None)
    if crs is None:
        raise MissingCRSError("The dask GeoDataFrame")
    return crs


def check_meta(meta, bounds, region) -> None:
    """The in-memory input checks on a dask frame's empty meta (geometry type, CRS, bounds in its units)."""
    try:
        check_release_input(meta, bounds=bounds, region=region, attributes=False)
    except EmptyInputError:
        pass
    check_coordinates(np.empty((0, 2)), meta_crs(meta), pd.Index([]), bounds=bounds)


def input_crs(data, bounds=None, region=None):
    """The CRS a count plan is built in: the data's, after the input checks that read no row.

    In memory: a GeoDataFrame or GeoSeries with a CRS and, when it has rows, a geographic or
    projected one, ``bounds`` in its units and a region's CRS that can be related to it; on dask
    the checks of its meta (:func:`check_meta`).  The rows are checked against the plan when it runs.
    """
    if is_dask(data):
        meta = data._meta
        crs = meta_crs(meta)
        check_meta(meta, bounds, region)
        return crs
    geoms = as_geoseries(data)
    if len(geoms):
        check_coordinates(np.empty((0, 2)), geoms.crs, geoms.index[:0], bounds=bounds)  # the CRS, bounds in its units
        if isinstance(region, (gpd.GeoSeries, gpd.GeoDataFrame)) and region.crs is not None:
            if not as_crs(region.crs).equals(geoms.crs):
                declared_bounds(geoms.crs, None, region)  # PROJ can relate the region's CRS to the data's
    return geoms.crs


def check_trip_columns(meta, traj_id, time) -> None:
    """Trajectory points need their trip id and time columns (checked on a dask frame's meta)."""
    if traj_id is None:
        return
    for col in (traj_id, time):
        if col is None or not hasattr(meta, "columns") or col not in meta.columns:
            raise ParameterError(f"{col!r} is not a column of the data (flows need traj_id= and time= columns).")


def _trip_geoms(data, traj_id):
    """The geometries of a flow release's input: trajectory points (``traj_id``) or one line per trip."""
    geoms = as_geoseries(data) if traj_id is not None else data.geometry
    check_no_other_geometries(data)
    if geoms.crs is None:
        raise MissingCRSError("The data")
    return geoms


def flow_input_crs(data, traj_id=None, time=None):
    """The CRS a flow plan is built in: the data's, after the input checks that read no row (as :func:`input_crs`)."""
    if is_dask(data):
        meta = data._meta
        crs = meta_crs(meta)
        check_trip_columns(meta, traj_id, time)
        return crs
    geoms = _trip_geoms(data, traj_id)
    if traj_id is not None and len(geoms):
        check_crs_kind(geoms.crs)
    return geoms.crs


def check_plan_crs(plan: CountPlan, crs) -> None:
    """The data must be in the CRS the plan was built in (its cells are there)."""
    if not as_crs(crs).equals(plan.cells.crs):
        raise ParameterError(
            f"The data's CRS {as_crs(crs).name!r} is not the plan's {plan.cells.crs.name!r}: the cells are in the plan's.",
            fix=Fix(
                "plan_crs",
                python="Build the plan with the data's CRS (plan_counts(data.crs, ...)), or reproject the data.",
                cli="Reproject the data to the CRS of the cells.",
                qgis="Reproject the layer to the CRS of the cells.",
            ),
        )


# ----------------------------------------------------------------------------- rows, persons, cells
def person_codes(data, user, labels) -> np.ndarray | None:
    """Every row's person as ``0..m-1`` (None: each row is a person), by :func:`geopriv.identity.identities`.

    The persons bounded are the persons charged (:func:`count_persons` keys the same identities):
    ``5`` and ``"5"`` are one person here as in the budget store.  Unusable ids are refused by row label.
    """
    if user is None:
        return None
    if not hasattr(data, "columns") or user not in data.columns:
        raise ParameterError(
            f"user={user!r} is not a column of the data.",
            fix=Fix(
                "user_column",
                python="Give the name of the column holding person ids.",
                cli="Give --user the name of the column holding person ids.",
                qgis="Pick the field holding person ids.",
            ),
        )
    col = data[user]
    missing = col.isna().to_numpy()
    if missing.any():
        raise IdentityError(
            "have no person id (missing values in the user column): their contribution cannot be bounded",
            labels[missing],
            Fix(
                "fill_ids",
                python="Fill in those ids, or drop those rows.",
                cli="Fill in those ids, or remove those rows.",
                qgis="Fill in those ids, or remove those features.",
            ),
        )
    return identities(col, labels).codes()


def index_codes(data) -> np.ndarray:
    """Person codes of the rows from their index labels (refused when they look like positions)."""
    from ..keys import row_identities

    ids, labels = row_identities(data, None, refuse_positions=True)
    return identities(ids, labels, "index label").codes()


def count_persons(data, user, labels):
    """The persons a count release charges, each once (user level, whatever their number of rows).

    The ``user`` column, else the index labels: the identities that bounding counted
    (:func:`person_codes`, :func:`index_codes`), as the budget store keys them.
    """
    from ..budget import persons_of
    from ..keys import row_identities

    ids = data[user] if user is not None else row_identities(data, None, refuse_positions=True)[0]
    return persons_of(identities(ids, labels), once=True)


def locate_rows(plan: CountPlan, xy: np.ndarray, labels) -> np.ndarray:
    """The cell of every row; rows outside every cell are refused (named by label, never located)."""
    cell = plan.cells.locate(xy)
    out = cell < 0
    if out.any():
        where = {"bounds": "the declared study area", "region": "the region", "cells": "every cell"}.get(
            plan.area_source, "the public area"
        )
        raise GeometryError(
            f"lie outside {where}, so they have no public cell",
            labels[out],
            Fix(
                "drop_rows",
                python="Declare a study area that holds them (chosen without looking at the points), or "
                "drop those rows (e.g. data.clip(area)).",
                cli="The labels are row numbers, from 0. Declare --bounds that hold them (chosen without looking at the "
                "points), or remove those rows.",
                qgis="In QGIS, the labels are feature ids. Set a 'Public study area' that holds them, or remove those "
                "features (Clip).",
            ),
        )
    return cell


def check_area_public(plan: CountPlan, xy: np.ndarray) -> None:
    """Refuse a public area, region or cells computed from the data (all rows are looked at).

    Bounds and a region's box that points touch on two or more edges, and polygons (cells, a
    region, flow regions) with data points on their corners or at their centres, are refused.
    Padded extents, a single data-derived edge, Voronoi cells of the points or buffers of them are
    not detected: docs/aggregate.md says so.
    """
    if not len(xy):
        return
    cells = plan.cells.regions if isinstance(plan.cells, FlowCells) else plan.cells
    if isinstance(cells, PolygonCells):
        cells.check_not_from_data(xy)
    elif plan.area is not None:
        check_area_not_from_data(touched_edges(xy, plan.area), plan.area_source)
    if plan.region_geom is not None:
        import shapely

        check_area_not_from_data(touched_edges(xy, plan.region_geom.bounds), "region")
        check_polygons_not_from_data(shapely.get_parts(plan.region_geom), xy, "The region")


def count_points(data, bounds, region):
    """(GeoSeries, (n, 2) xy) of the input points; an empty input is released like any other (all counts noise)."""
    geoms = as_geoseries(data)
    if len(geoms):
        return check_release_input(data, bounds=bounds, region=region, attributes=False)
    check_no_other_geometries(data)
    return geoms, np.empty((0, 2))


def trip_input(data, traj_id):
    """The trips' geometries checked (points with ``traj_id``, else one line per trip): (GeoSeries, xy or None)."""
    geoms = _trip_geoms(data, traj_id)
    xy = None
    if traj_id is not None:
        xy = point_xy(geoms)
        check_coordinates(xy, geoms.crs, geoms.index)
    else:
        check_lines(geoms)
    return geoms, xy


def check_lines(geoms) -> None:
    """One LineString per trip: anything else is refused, by row label."""
    import shapely

    kinds = shapely.get_type_id(geoms.values)
    bad = (kinds != 1) | shapely.is_empty(geoms.values)
    if bad.any():
        raise GeometryError(
            "are not LineStrings (give one line per trip, or points with traj_id= and time=)",
            geoms.index[bad],
            "Give one LineString per trip, or trajectory points with traj_id= and time=.",
        )


def trip_ends(data, geoms, xy, traj_id, time, labels):
    """(origin xy, destination xy, row label of each trip's first row, trip ids) of every trip.

    Points with ``traj_id`` and ``time``: a trip runs from its earliest to its latest row.
    LineStrings without ``traj_id``: each row is a trip from its first to its last vertex.
    """
    import shapely

    if traj_id is None:
        if xy is not None:
            raise ParameterError(
                "Points need traj_id= (and time=) to be grouped into trips; or give one LineString per trip."
            )
        coords_o = shapely.get_coordinates(shapely.get_point(geoms.values, 0))
        coords_d = shapely.get_coordinates(shapely.get_point(geoms.values, -1))
        return coords_o, coords_d, np.arange(len(geoms)), np.asarray(labels)
    for col in (traj_id, time):
        if col is None or col not in data.columns:
            raise ParameterError(f"{col!r} is not a column of the data (flows need traj_id= and time= columns).")
    t = data[time]
    bad = t.isna().to_numpy() | data[traj_id].isna().to_numpy()
    if bad.any():
        raise GeometryError("have no trajectory id or time stamp", labels[bad], "Fill them in or drop those rows.")
    # trips by geopriv's one rule for ids (5 and "5" are one trip), numbered in order of first appearance
    ident = identities(data[traj_id], labels, "trip id")
    tid, keys = pd.factorize(ident.keys, sort=False)
    uniq = np.array(ident.shown(keys), dtype=object)
    tv = t.to_numpy()
    try:
        order = np.lexsort((np.arange(len(tv)), tv, tid))
    except TypeError:
        raise ParameterError(
            f"The time column {time!r} mixes types that cannot be ordered (e.g. numbers and text).",
            fix=Fix(
                "time_column",
                python="Convert it to one type, e.g. pd.to_datetime(...).",
                cli="Give a time column of one type (ISO 8601 text or numbers).",
                qgis="Give a time field of one type (a date-time field).",
            ),
        ) from None
    ts = tid[order]
    first = order[np.r_[True, ts[1:] != ts[:-1]]]
    last = order[np.r_[ts[1:] != ts[:-1], True]]
    return xy[first], xy[last], first, np.asarray(uniq)


def trip_cells(plan: FlowPlan, o_xy, d_xy, trip_ids) -> np.ndarray:
    """Every trip's (origin, destination) pair, ``-1`` for a trip left out (``outside="drop"``).

    Trips starting or ending outside every region are refused, naming the trips, with ``outside="refuse"``.
    """
    regions = plan.cells.regions
    o, d = regions.locate(o_xy), regions.locate(d_xy)
    out = (o < 0) | (d < 0)
    if out.any() and plan.outside == "refuse":
        raise GeometryError("start or end outside every region", pd.Index(trip_ids[out]), OUTSIDE_FIX, what="trip(s)")
    return np.where(~out, o * regions.n + d, -1)


def refuse_mixed_trips(trip_ids, mixed: np.ndarray) -> None:
    """A trip belongs to one person: trips with rows of several users are refused, named."""
    if mixed.any():
        raise GeometryError(
            "have rows of several users (a trip belongs to one person)",
            pd.Index(trip_ids[mixed]),
            "Give each trip one user id.",
            what="trip(s)",
        )


def bound_contributions(codes: np.ndarray | None, k: int, gen) -> np.ndarray:
    """Rows kept: at most ``k`` per person, chosen uniformly at random (fresh randomness, not location)."""
    if codes is None:
        return np.ones(0, dtype=bool)
    n = len(codes)
    counts = np.bincount(codes)
    if counts.size == 0 or counts.max() <= k:
        return np.ones(n, dtype=bool)
    order = np.lexsort((gen.random(n), codes))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(n) - starts[codes[order]]
    keep = np.empty(n, dtype=bool)
    keep[order] = rank < k
    return keep


def count_rows(plan: CountPlan, cell_of_row: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Exact counts of the released cells (int64) from every kept row's cell."""
    cells = cell_of_row if keep is None or keep.size == 0 else cell_of_row[keep]
    return np.bincount(cells, minlength=plan.cells.n).astype(np.int64)


def bounded_counts(plan: CountPlan, cell: np.ndarray, codes: np.ndarray | None, source) -> np.ndarray:
    """The true counts of every cell after bounding each person's rows (``cell`` ``-1``: a row left out).

    A seed replays only for the same data and parameters: the bounding is bound to the rows'
    (cell, person), as the noise is to the true counts it answers (:func:`publish`).
    """
    kept = cell >= 0
    if not kept.all():
        cell, codes = cell[kept], None if codes is None else codes[kept]
    gen = source.bind(cell, codes, purpose="bound").generator
    return count_rows(plan, cell, bound_contributions(codes, plan.mechanism.sensitivity, gen))


# ----------------------------------------------------------------------------- the run
@dataclasses.dataclass(frozen=True)
class Counted:
    """What a pass over the data gives :func:`publish`.

    ``counts()``: the bounded true counts of the plan's cells (called once the budget is reserved:
    on dask it may read the data a second time, and a failure gives the charge back);
    ``source``: the release's :class:`~geopriv.rng.RandomSource`; ``persons``: the
    :class:`~geopriv.budget.PersonKeys` charged, each once (None without a store).
    """

    counts: Callable[[], np.ndarray]
    source: object
    persons: object = None


def publish(plan: CountPlan, counted: Counted, store):
    """The one orchestration of a count release, in memory and on dask, once the data were read.

    The charge (every person ``epsilon`` once, before any noise), the noise drawn once and bound to
    the true counts and the plan, the record, the low-utility warning, the output.
    """
    fields = plan.record_fields(store)
    if store is None:
        released = _noisy(plan, counted, counted.counts())
    else:
        reservation = reserve(
            store, counted.persons, float(plan.epsilon), unit=PURE, kind=plan.release, fields=fields, rows=plan.cells.n
        )
        with reservation:
            true = counted.counts()  # no noise yet: a failure gives the charge back
            reservation.start()
            released = _noisy(plan, counted, true)
    record = make_record(fields, seeded=counted.source.seeded, n=plan.cells.n)
    warn_if_swamped(plan, released)  # points at the caller's line (geopriv.exceptions.caller_stacklevel)
    return plan.output(released, record)


def _noisy(plan: CountPlan, counted: Counted, true: np.ndarray) -> np.ndarray:
    # bound to the true counts it answers and the plan: the same noise for the same counts, in memory and on dask
    return release_counts(plan, true, counted.source.bind(true, params=plan.fields(), purpose="counts").generator)


def point_pass(plan: CountPlan, data, rng, *, charged: bool) -> Counted:
    """In memory: the points checked against the plan and located in its cells (aggregate, heatmap)."""
    geoms, xy = count_points(data, plan.bounds, plan.region)
    check_plan_crs(plan, geoms.crs)
    labels = geoms.index
    check_area_public(plan, xy)
    cell = locate_rows(plan, xy, labels)
    codes = index_codes(data) if plan.by_index else person_codes(data, plan.user, labels)
    source = make_rng(rng)
    persons = count_persons(data, None if plan.by_index else plan.user, labels) if charged else None
    return Counted(lambda: bounded_counts(plan, cell, codes, source), source, persons)


def trip_pass(plan: FlowPlan, data, rng, *, charged: bool) -> Counted:
    """In memory: the trips' ends checked against the plan and located in its pairs of regions (flows)."""
    geoms, xy = trip_input(data, plan.traj_id)
    labels = geoms.index
    check_plan_crs(plan, geoms.crs)
    o_xy, d_xy, first, trip_ids = trip_ends(data, geoms, xy, plan.traj_id, plan.time, labels)
    check_area_public(plan, np.concatenate([o_xy, d_xy]))  # regions built on the trips would publish them
    leaf = trip_cells(plan, o_xy, d_xy, trip_ids)
    codes = _trip_persons(plan, data, labels, first, trip_ids)
    source = make_rng(rng)
    persons = count_persons(data, plan.user, labels) if charged else None
    return Counted(lambda: bounded_counts(plan, leaf, codes, source), source, persons)


def _trip_persons(plan: FlowPlan, data, labels, first, trip_ids) -> np.ndarray | None:
    """Every trip's person code (None: each trip is a person); trips of several users are refused."""
    if plan.user is None:
        return None
    codes = person_codes(data, plan.user, labels)
    assert codes is not None  # user given: a code per row (for type checkers)
    if plan.traj_id is not None:
        tid, _ = pd.factorize(identities(data[plan.traj_id], labels, "trip id").keys, sort=False)
        refuse_mixed_trips(trip_ids, pd.Series(codes).groupby(tid).nunique().to_numpy() > 1)
    return codes[first]


def release_counts(plan: CountPlan, counts: np.ndarray, gen) -> np.ndarray:
    """The released integer counts of every cell: one noise draw, consistency, suppression."""
    out = plan.mechanism.release(plan.tree, counts, gen, nonnegative=plan.nonnegative)
    if plan.suppress is not None:
        out = np.where(out < plan.suppress, 0, out)
    return out


def warn_if_swamped(plan: CountPlan, released: np.ndarray) -> None:
    """Warn when the expected error of a cell is larger than the released mean count per cell.

    Computed from the released counts and public parameters only (the warning is published too).
    """
    mean = float(released.sum()) / max(len(released), 1)
    err = float(np.median(plan.expected_error))
    if err > max(mean, 1.0):
        warnings.warn(
            LowUtilityWarning(
                f"The noise swamps the counts: the expected error of a cell is about {err:.3g}, while the released counts "
                f"average {mean:.3g} per cell.",
                fix=Fix(
                    "swamped",
                    python="Use larger cells, a smaller area, a larger epsilon or a smaller max_per_user.",
                    cli="Use larger --cells (or --resolution), a smaller area, a larger --epsilon or a smaller "
                    "--max-per-user.",
                    qgis="Use larger cells, a smaller study area, a larger epsilon or a smaller 'Most rows per person'.",
                ),
            ),
            stacklevel=caller_stacklevel(),
        )


# ----------------------------------------------------------------------------- the outputs
def cells_frame(plan: CountPlan, released: np.ndarray, record: dict) -> gpd.GeoDataFrame:
    """The released cells: id, count, expected error, geometry (and a polygon layer's own public columns)."""
    cells = plan.cells
    data = {"cell": cells.ids(), "count": released.astype(np.int64), "expected_error": plan.expected_error}
    if isinstance(cells, PolygonCells):
        base = cells.frame.drop(columns=[cells.frame.geometry.name]).reset_index(drop=True)
        clash = [c for c in data if c in base.columns]
        base = base.drop(columns=clash)
        out = gpd.GeoDataFrame(pd.concat([base, pd.DataFrame(data)], axis=1), geometry=cells.geometry(), crs=cells.crs)
    else:
        out = gpd.GeoDataFrame(data, geometry=cells.geometry(), crs=cells.crs)
    out.attrs["geopriv"] = record
    return out


def heatmap_layout(plan, released: np.ndarray, values: str):
    """(values, expected error, unit) of a grid release as north-up rasters.

    Counts are int32 (int64 when larger) with the type's smallest value as no-data; densities per
    km² (counts over the public cell area) are float32 with NaN.
    """
    grid = plan.cells
    shape = (grid.ny, grid.nx)
    err = np.full(shape, np.nan, dtype=np.float32)
    err.flat[grid.kept] = plan.expected_error
    if values == "count":
        dtype = np.int32 if np.abs(released).max(initial=0) < np.iinfo(np.int32).max else np.int64
        out = np.full(shape, np.iinfo(dtype).min, dtype=dtype)  # nodata: no count can be this
        out.flat[grid.kept] = released
        return out, err, "count"
    area = float(grid.cell_area_km2()[0])
    out = np.full(shape, np.nan, dtype=np.float32)
    out.flat[grid.kept] = released / area
    return out, err / np.float32(area), "count per km²"


def flows_frame(plan, released: np.ndarray, record: dict) -> gpd.GeoDataFrame:
    """The released flows: one line per ordered pair of regions, between their representative points."""
    import shapely

    regions = plan.cells.regions
    m = regions.n
    rep = shapely.get_coordinates(shapely.point_on_surface(regions.geoms))
    oi, di = np.divmod(np.arange(m * m), m)
    lines = shapely.linestrings(np.stack([rep[oi], rep[di]], axis=1))
    names = plan.cells.names
    result = gpd.GeoDataFrame(
        {
            "origin": names[oi],
            "destination": names[di],
            "count": released.astype(np.int64),
            "expected_error": plan.expected_error,
        },
        geometry=lines,
        crs=regions.crs,
    )
    result.attrs["geopriv"] = record
    return result


@dataclasses.dataclass(frozen=True)
class Heatmap:
    """A released heatmap: a north-up raster of counts (or densities per km²) over the public area.

    Made by :func:`geopriv.heatmap` (immutable); its fields are public, like the release.

    Parameters
    ----------
    values : numpy.ndarray
        ``(rows, cols)``: int32 counts (int64 when larger; the type's smallest value outside the
        region) or float32 densities per km² (NaN outside the region).
    expected_error : numpy.ndarray
        ``(rows, cols)`` float32, in the same unit as ``values`` (NaN outside the region).
    transform : affine.Affine
        The raster's georeferencing: the north-west corner and the cell size, in CRS units.
    crs : pyproj.CRS
        The CRS of the data and of the grid.
    record : dict
        The provenance record (public fields only).
    unit : str
        What ``values`` count: ``"count"`` or ``"count per km²"``.

    Attributes
    ----------
    nodata : int or float
        The value of cells outside the region: the integer type's smallest value, or NaN.

    See Also
    --------
    geopriv.heatmap : Releases a heatmap.
    geopriv.aggregate : The same counts as a GeoDataFrame of cells.

    Examples
    --------
    >>> deaths = gpd.read_file(geopriv.datasets.get_path("soho"), layer="deaths")
    >>> hm = geopriv.heatmap(deaths, 1.0, resolution=100, bounds=(-15800, 6711900, -14600, 6713300), rng=1)
    >>> type(hm).__name__, hm.values.shape, hm.unit, hm.values.dtype.name
    ('Heatmap', (9, 8), 'count', 'int32')
    >>> print(hm.to_raster("deaths_counts.tif"))  # band 1: the counts, band 2: their expected error
    deaths_counts.tif
    """

    values: np.ndarray
    expected_error: np.ndarray
    transform: object
    crs: object
    record: dict
    unit: str

    @property
    def nodata(self):
        return int(np.iinfo(self.values.dtype).min) if self.values.dtype.kind == "i" else float("nan")

    def to_raster(self, path, *, overwrite: bool = False):
        """Write a GeoTIFF (band 1: the values, band 2: their expected error, rounded to whole counts in a count
        heatmap), atomically; returns the path."""
        from ..io import write_raster

        return write_raster(
            path,
            [
                self.values,
                self.expected_error.astype(self.values.dtype)
                if self.values.dtype.kind == "f"
                else np.where(
                    np.isnan(self.expected_error), self.nodata, np.rint(np.nan_to_num(self.expected_error))
                ).astype(self.values.dtype),
            ],
            transform=self.transform,
            crs=self.crs,
            nodata=self.nodata,
            record=self.record,
            band_names=[self.unit, f"expected error ({self.unit})"],
            overwrite=overwrite,
        )

    def plot(self, ax=None, **kwargs):
        """Show the heatmap with matplotlib (``geopriv[plot]``); returns the axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        t = self.transform
        rows, cols = self.values.shape
        extent = (t.c, t.c + t.a * cols, t.f + t.e * rows, t.f)
        vals = (
            np.ma.masked_invalid(self.values.astype(float))
            if self.values.dtype.kind == "f"
            else np.ma.masked_equal(self.values, self.nodata)
        )
        im = ax.imshow(vals, extent=extent, origin="upper", **{"cmap": "magma", **kwargs})
        ax.figure.colorbar(im, ax=ax, label=self.unit)
        return ax
