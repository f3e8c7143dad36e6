"""The release path of private counts: cells, contribution bounding, one noise draw, provenance.

``plan_counts`` fixes everything public before the data is looked at (the cells, their
hierarchy, the split of epsilon over its levels, the expected error of every cell);
``count_rows`` turns rows into per-cell counts after bounding each person's contribution;
``release_counts`` draws the noise once and post-processes it.  :func:`geopriv.aggregate`,
:func:`geopriv.heatmap`, :func:`geopriv.flows` and the dask front end run this one plan.

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

import geopandas as gpd
import numpy as np
import pandas as pd

from .budget import PURE
from .cells import PolygonCells, check_polygons_not_from_data, make_cells, parse_cells
from .exceptions import (
    EmptyInputError,
    caller_stacklevel,
    Fix,
    GeometryError,
    IdentityError,
    LowUtilityWarning,
    ParameterError,
    ParameterTypeError,
)
from .frame import check_area_not_from_data, declared_bounds, touched_edges
from .identity import identities
from .mechanisms.hierarchy import CellTree, HierarchicalCounts, split_levels
from .provenance import make_record

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


@dataclasses.dataclass(frozen=True)
class CountPlan:
    """Everything public about a count release, fixed before any row is looked at."""

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
) -> CountPlan:
    """The cells, hierarchy, budget split and expected errors of a count release (no data involved)."""
    from .crs import as_crs
    from .release import region_geometry

    crs = as_crs(crs)
    k = check_max_per_user(max_per_user, user)
    if not isinstance(nonnegative, (bool, np.bool_)):
        raise ParameterTypeError("nonnegative must be True or False.")
    if suppress is not None:
        if (
            isinstance(suppress, (bool, np.bool_))
            or not isinstance(suppress, (numbers.Integral, np.integer))
            or suppress < 1
        ):
            raise ParameterError(
                f"suppress must be a positive integer (counts below it are released as 0), got {suppress!r}."
            )
        suppress = int(suppress)
    kind, value = parse_cells(cells)
    region_geom = region_geometry(region, crs)
    rect = declared_bounds(crs, bounds, region)
    if kind == "polygons":
        if bounds is not None or region is not None:
            raise ParameterError("With polygon cells the cells are the public area: do not give bounds or region.")
        source = "cells"
    elif rect is None:
        raise ParameterError(
            "A grid or H3 release needs a declared public area: every cell in it is released, empty or not.",
            fix=Fix(
                "declare_bounds",
                python="Declare bounds=(xmin, ymin, xmax, ymax) of your study area in the data's "
                "CRS, chosen without looking at the points (a city's extent), or region=.",
                cli="Declare --bounds XMIN YMIN XMAX YMAX of your study area, chosen without looking at the points "
                "(a city's extent), or --region.",
                qgis="Set the 'Public study area' parameter (a city's extent), chosen without looking at the points.",
            ),
        )
    else:
        source = "bounds" if bounds is not None else "region"
    cell_set = make_cells(kind, value, crs, rect, region_geom, source)
    tree = CellTree.from_keys(cell_set.keys())
    mech = HierarchicalCounts(split_levels(epsilon, level_weights(levels, tree.depth)), k)
    err = mech.leaf_error(tree)
    return CountPlan(
        cell_set, tree, mech, bool(nonnegative), suppress, err, rect, source, region is not None, user, region_geom
    )


def person_codes(data, user, labels) -> np.ndarray | None:
    """Every row's person as ``0..m-1`` (None: each row is a person), by :func:`geopriv.identity.identities`.

    The persons bounded are the persons charged (:func:`budget_charge` keys the same identities):
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


def budget_charge(store, codes, data, user, labels, epsilon, fields: dict, n_cells: int, kind: str):
    """Charge every person once (``epsilon``, unit ``"epsilon"``): user-level, whatever their number of rows.

    The persons are the identities that bounding counted (:func:`person_codes`, the same function).
    """
    from .budget import persons_of
    from .release.charging import reserve
    from .keys import row_identities

    ids = data[user] if user is not None else row_identities(data, None, refuse_positions=True)[0]
    keys = persons_of(identities(ids, labels), once=True)
    return reserve(store, keys, float(epsilon), unit=PURE, kind=kind, fields=fields, rows=n_cells)


@dataclasses.dataclass(frozen=True)
class FlowCells:
    """Origin-destination pairs of public regions: leaf ``o * n + d``; the hierarchy is pair, origin, all."""

    regions: PolygonCells
    names: np.ndarray

    @property
    def n(self) -> int:
        return self.regions.n**2

    @property
    def crs(self):
        return self.regions.crs

    def keys(self) -> list:
        m = self.regions.n
        pair = np.arange(m * m, dtype=np.int64)
        return [pair, pair // m, np.zeros(m * m, dtype=np.int64)]

    def describe(self) -> dict:
        return {
            "cells": f"origin-destination pairs of {self.regions.n} public regions",
            "regions": self.regions.n,
            "n_cells": self.n,
        }


def plan_flows(crs, epsilon, *, regions, region_id=None, max_per_user=1, user=None, levels="auto", nonnegative=True):
    """The plan of a flow release: every ordered pair of public regions is a cell (no data involved)."""
    from .crs import as_crs

    crs = as_crs(crs)
    k = check_max_per_user(max_per_user, user)
    if not isinstance(nonnegative, (bool, np.bool_)):
        raise ParameterTypeError("nonnegative must be True or False.")
    if not hasattr(regions, "geometry"):
        raise ParameterTypeError("regions must be a GeoDataFrame (or GeoSeries) of public polygons.")
    poly = PolygonCells.build(crs, regions)
    from .cells import MAX_CELLS

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
    if region_id is None:
        names = np.asarray(poly.frame.index)
    else:
        if region_id not in poly.frame.columns:
            raise ParameterError(f"region_id={region_id!r} is not a column of the regions.")
        names = poly.frame[region_id].to_numpy()
    if pd.Index(names).has_duplicates:
        raise ParameterError("The regions' ids repeat: give region_id= a column of distinct names.")
    cells = FlowCells(poly, names)
    tree = CellTree.from_keys(cells.keys())
    mech = HierarchicalCounts(split_levels(epsilon, level_weights(levels, tree.depth)), k)
    return CountPlan(cells, tree, mech, bool(nonnegative), None, mech.leaf_error(tree), None, "cells", False, user)


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


def make_count_record(fields: dict, seeded: bool, n: int) -> dict:
    return make_record(fields, seeded=seeded, n=n)


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
