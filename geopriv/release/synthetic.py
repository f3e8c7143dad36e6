"""The synthetic-locations release kind ``"synthetic"``: a plan fixed from public parameters, then one run over the data.

``plan_synthetic(crs, mechanism, ...)`` checks every parameter and fixes the public area, its
frame and the region before any row is read; the tree depth and the lattice depend on the
number of people (public in this privacy model), so the run fixes them once it has counted
(:meth:`SyntheticPlan.for_people`).  ``plan.run(data, ...)`` then checks the rows, charges a
budget store, draws the noise once and attaches the record (:meth:`SyntheticPlan.run_memory`;
a dask frame goes to the runner :mod:`geopriv.distributed.synthesize` registered for the kind,
which shares :meth:`SyntheticPlan.for_people` and :meth:`SyntheticPlan.charge`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import ClassVar

import geopandas as gpd
import numpy as np
import shapely

from ..budget import PURE
from ..exceptions import Fix, ParameterError
from ..frame import (
    DEFAULT_MAX_DISTORTION,
    STUDY_AREA_FIX,
    PublicFrame,
    area_side_metres,
    declared_bounds,
    public_frame,
    public_lattice,
    truncate_and_snap,
)
from ..progress import progress_callback
from ..provenance import attach, make_record
from ..rng import make_rng
from .base import Executes
from .charging import budget_fields, charge_rows
from .common import (
    check_region_holds_lattice,
    check_release_input,
    check_release_parameters,
    plan_crs,
    region_geometry,
    truncate_to_region,
)

#: the release's name in a budget store's audit
SYNTHESIZE = "synthesize"


@dataclasses.dataclass(frozen=True)
class SyntheticPlan(Executes):
    """Everything public about a synthetic release: area, curve depth, lattice, output size.

    Built by :func:`plan_synthetic` from the CRS, the mechanism and the public parameters; the
    depth, the lattice and the output size follow from the number of people (public in this
    privacy model): :meth:`for_people` fixes them (``n_people`` None until then).
    :meth:`unit` maps input points to the unit square (refusing rows outside the area),
    :meth:`points` turns the mechanism's noisy leaf counts into output coordinates (placement,
    truncation, snapping: post-processing), :meth:`fields` is the provenance and :meth:`charge`
    what a row costs.  Used in memory and by :mod:`geopriv.distributed`.
    """

    kind: ClassVar[str] = "synthetic"

    mechanism: object
    crs: object
    rect: tuple
    area_source: str
    frame: PublicFrame
    region_geom: object
    lattice: object
    depth: int | None
    n_people: int | None
    n_out: int | None
    placement: str
    bounds: object
    region_given: bool
    #: the requested number of synthetic points (None: as many as people)
    n: int | None = None
    #: the lattice step in ground metres, or "auto" (fixed with the depth)
    grid: object = "auto"
    #: the column of person ids a budget store charges (None: the index labels)
    person: object = None

    def for_people(self, n_people: int) -> SyntheticPlan:
        """This plan for ``n_people`` people: the tree depth, the lattice (checked against the region) and the output size."""
        from ..frame import DEFAULT_GRID_M

        if self.n_people is not None and self.n_people == int(n_people):
            return self
        depth = self.mechanism.resolved_depth(int(n_people))
        too_fine = None
        if isinstance(self.grid, str):
            order = (depth + 1) // 2
            grid_m = min(DEFAULT_GRID_M, area_side_metres(self.crs, self.rect) / float(1 << order) / 20.0)
            too_fine = _auto_grid_too_fine(depth)  # no grid was given: the message says where the step came from
        else:
            grid_m = float(self.grid)
        lattice = public_lattice(self.frame, grid_m, too_fine=too_fine)
        if self.region_geom is not None:
            check_region_holds_lattice(self.region_geom, lattice)
        n_out = int(n_people) if self.n is None else self.n
        return dataclasses.replace(self, lattice=lattice, depth=depth, n_people=int(n_people), n_out=n_out)

    def unit(self, xy, labels):
        dataclasses.replace(self.frame, area_source=self.area_source).check_inside(xy, labels)
        xmin, ymin, xmax, ymax = self.rect
        return np.column_stack([(xy[:, 0] - xmin) / (xmax - xmin), (xy[:, 1] - ymin) / (ymax - ymin)])

    def points(self, nodes, counts, gen):
        unit_out = self.mechanism.place(nodes, counts, self.depth, gen, n_out=self.n_out, placement=self.placement)
        xmin, ymin, xmax, ymax = self.rect
        out = np.column_stack([xmin + unit_out[:, 0] * (xmax - xmin), ymin + unit_out[:, 1] * (ymax - ymin)])
        out = truncate_and_snap(out, self.rect if self.region_geom is None else None, self.lattice)
        if self.region_geom is not None:
            out = truncate_to_region(out, self.region_geom, self.lattice)
        return out

    def fields(self) -> dict:
        fields = dict(self.mechanism.describe(self.n_people))
        fields.update(
            {
                "input_crs": self.crs.to_string(),
                "frame_area": self.area_source,
                "public_area": [float(v) for v in self.rect],
            }
        )
        fields.update(self.lattice.describe())
        fields["effective_epsilon"] = self.mechanism.epsilon
        fields["finite_precision"] = (
            "exact: integer (two-sided geometric) noise on counts; coordinates are placed in "
            "the noisy cells with independent randomness and snapped (post-processing)"
        )
        fields["declared_bounds"] = None if self.bounds is None else [float(v) for v in self.rect]
        fields["region"] = self.region_given
        fields["placement"] = self.placement
        fields["n_people"] = self.n_people
        return fields

    def charge(self, store) -> tuple[float | None, dict]:
        """(what a row costs, the record's budget fields) with ``store``, else (None, {}): both runs charge these.

        A person with k rows pays k epsilon (group privacy), in the dimensionless unit ``"epsilon"``.
        """
        if store is None:
            return None, {}
        per_row = float(self.mechanism.epsilon)
        return per_row, budget_fields(store, PURE, per_row)

    def run_memory(self, data, *, store=None, rng=None, progress=None):
        """A synthetic point set from ``data`` (a GeoDataFrame or GeoSeries) under this plan.

        The same steps as a point release, for a mechanism that publishes a measure rather than
        one output per row (:class:`~geopriv.mechanisms.private_measure.PrivateMeasure`):

        1. validation of the points (attributes are not released, so not checked);
        2. the plan for this many people (:meth:`for_people`: depth and lattice, before any
           noise); inputs outside the public area are refused, naming their rows;
        3. the charge of a budget store, then the mechanism (its output is a discrete measure:
           integer noise, no floating-point surface), placement in the leaves, truncation to
           the area / region and snapping;
        4. the provenance record from the allowlist.

        Returns a new GeoDataFrame (or GeoSeries, like ``data``) of ``n`` synthetic points with a
        fresh RangeIndex, no attribute columns, in the input CRS.
        """
        from ..mechanisms.private_measure import leaf_keys

        geoms, xy = check_release_input(data, (), self.bounds, attributes=False)  # the region: checked by the plan
        source = make_rng(rng)
        plan = self.for_people(len(xy))
        unit = plan.unit(xy, geoms.index)
        per_row, extra = plan.charge(store)
        fields = {**plan.fields(), **extra}
        reservation = contextlib.nullcontext()
        if store is not None:
            reservation = charge_rows(store, data, self.person, per_row, PURE, SYNTHESIZE, fields, plan.n_out)
        callback, bar = progress_callback(progress, len(xy), desc="synthesize")
        try:
            with reservation:
                if store is not None:
                    reservation.start()
                gen = source.bind(geoms, params=plan.fields(), purpose="synthesize").generator
                nodes, counts = plan.mechanism.leaf_counts(leaf_keys(unit, plan.depth), gen, plan.depth)
            out = plan.points(nodes, counts, gen)
            if callback is not None:
                callback(len(xy), len(xy))
        finally:
            if bar is not None:
                bar.close()
        return synthetic_frame(data, out, plan.crs, make_record(fields, seeded=source.seeded, n=plan.n_out))


def _auto_grid_too_fine(depth: int):
    """The refusal of an automatic lattice (grid="auto": a twentieth of the cells) finer than the coordinates hold."""

    def refusal(crs, grid_m: float, min_grid_m: float):
        return ParameterError(
            f"The tree's cells are so small that the lattice they imply is finer than the float precision of "
            f"coordinates in {crs.name}: no grid was given, and the automatic one, a twentieth of the cells of a "
            f"depth-{depth} tree over the public area ({grid_m:.2g} m), is below the {min_grid_m:.2g} m the "
            "coordinates can hold there.",
            fix=Fix(
                "coarser_cells",
                python="Use a smaller depth= (or depth='auto'), a larger declared area, or an explicit grid= of at "
                f"least {min_grid_m:.2g} metres.",
                cli=f"Use a smaller --depth (or auto), larger --bounds, or an explicit --grid of at least "
                f"{min_grid_m:.2g} metres.",
                qgis="Use a smaller depth of the partition tree (or leave it empty), a larger public study area, or "
                f"set the grid step to at least {min_grid_m:.2g} metres.",
            ),
        )

    return refusal


def _check_grid(grid) -> None:
    """A synthetic release's grid: "auto" (finer than the leaves) or a positive number of metres."""
    if isinstance(grid, str):
        if grid != "auto":
            raise ParameterError(f"grid must be a number of metres or 'auto', got {grid!r}.")
        return
    if (
        isinstance(grid, (bool, np.bool_))
        or not isinstance(grid, (int, float, np.integer, np.floating))
        or not math.isfinite(float(grid))
        or grid <= 0
    ):
        raise ParameterError("grid must be a positive number of metres (or 'auto').")


def _declared_area(crs, bounds, region):
    """(rectangle, source) of a synthetic release's public area: ``bounds=``, else ``region=``'s box; refused without.

    The synthetic points are spread over the whole public area, so it must be the study area the
    user declares: a CRS's area of use (Web Mercator's is the whole world, a UTM zone hundreds of
    kilometres) would scatter them far from anyone.
    """
    rect = declared_bounds(crs, bounds, region)
    if rect is None:
        raise ParameterError(
            "A synthetic release needs a declared public area: its points are spread over all of it, and the area "
            f"of use of the data's CRS ({crs.name}) is not a study area.",
            fix=STUDY_AREA_FIX,
        )
    return rect, "bounds" if bounds is not None else "region"


def plan_synthetic(
    crs,
    mechanism,
    n_people: int | None = None,
    *,
    n=None,
    bounds=None,
    region=None,
    grid="auto",
    placement: str = "uniform",
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    person=None,
) -> SyntheticPlan:
    """The public part of a synthetic release (no data involved).

    ``n_people`` (public here) fixes the depth and the lattice now; without it the run fixes
    them once it has counted (:meth:`SyntheticPlan.for_people`).  ``person``: the column of
    person ids a budget store charges (default: the index labels).
    """
    crs = check_release_parameters(crs, bounds, region)
    if n is not None and (isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1):
        raise ParameterError(f"n (the number of synthetic points) must be a positive integer, got {n!r}.")
    if placement not in ("uniform", "centre"):
        raise ParameterError(f"placement must be 'uniform' (uniform inside each cell) or 'centre', got {placement!r}.")
    rect, area_source = _declared_area(crs, bounds, region)
    frame = public_frame(crs, bounds=rect, max_distortion=max_distortion)
    region_geom = region_geometry(region, crs)
    _check_grid(grid)
    plan = SyntheticPlan(
        mechanism,
        crs,
        rect,
        area_source,
        frame,
        region_geom,
        None,
        None,
        None,
        None,
        placement,
        bounds,
        region is not None,
        None if n is None else int(n),
        grid,
        person,
    )
    return plan if n_people is None else plan.for_people(int(n_people))


def release_synthetic(
    data,
    mechanism,
    *,
    rng=None,
    n=None,
    bounds=None,
    region=None,
    grid="auto",
    placement: str = "uniform",
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    progress=None,
    budget_store=None,
    person=None,
):
    """A synthetic point set from ``data``: :func:`plan_synthetic`, then the plan's run (kept for its callers).

    See :meth:`SyntheticPlan.run_memory` for the steps and :func:`geopriv.synthesize` for the parameters.
    """
    plan = plan_synthetic(
        plan_crs(data),
        mechanism,
        n=n,
        bounds=bounds,
        region=region,
        grid=grid,
        placement=placement,
        max_distortion=max_distortion,
        person=person,
    )
    return plan.run(data, store=budget_store, rng=rng, progress=progress)


def synthetic_frame(data, out, crs, record):
    """The synthetic points as a new GeoDataFrame (a GeoSeries for a GeoSeries input) with ``record``."""
    points = gpd.GeoSeries(shapely.points(out), crs=crs, name="geometry")
    if isinstance(data, gpd.GeoSeries):
        return attach(points, data, record)
    result = gpd.GeoDataFrame(geometry=points, crs=crs)
    return attach(result, data, record)
