"""The synthetic-locations release kind: a plan fixed from public parameters, then one run over the data."""

from __future__ import annotations

import contextlib
import dataclasses
import math

import geopandas as gpd
import numpy as np
import shapely

from ..budget import PURE
from ..crs import as_crs
from ..exceptions import ParameterError
from ..frame import (
    DEFAULT_MAX_DISTORTION,
    PublicFrame,
    area_side_metres,
    public_frame,
    public_lattice,
    truncate_and_snap,
)
from ..progress import progress_callback
from ..provenance import attach, make_record
from ..rng import make_rng
from .charging import budget_fields, charge_rows
from .common import check_region_holds_lattice, check_release_input, public_area, region_geometry, truncate_to_region


@dataclasses.dataclass(frozen=True)
class SyntheticPlan:
    """Everything public about a synthetic release: area, curve depth, lattice, output size.

    Built by :func:`plan_synthetic` from the CRS, the mechanism, the public parameters and the
    number of people (public in this privacy model); :meth:`unit` maps input points to the unit
    square (refusing rows outside the area), :meth:`points` turns the mechanism's noisy leaf
    counts into output coordinates (placement, truncation, snapping: post-processing), and
    :meth:`fields` is the provenance.  Used in memory and by :mod:`geopriv.distributed`.
    """

    mechanism: object
    crs: object
    rect: tuple
    area_source: str
    frame: PublicFrame
    region_geom: object
    lattice: object
    depth: int
    n_people: int
    n_out: int
    placement: str
    bounds: object
    region_given: bool

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


def plan_synthetic(
    crs,
    mechanism,
    n_people: int,
    *,
    n=None,
    bounds=None,
    region=None,
    grid="auto",
    placement: str = "uniform",
    max_distortion: float = DEFAULT_MAX_DISTORTION,
) -> SyntheticPlan:
    """The public part of a synthetic release (no data involved; ``n_people`` is public here)."""
    from ..frame import DEFAULT_GRID_M

    crs = as_crs(crs)
    if n is None:
        n_out = int(n_people)
    else:
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ParameterError(f"n (the number of synthetic points) must be a positive integer, got {n!r}.")
        n_out = int(n)
    if placement not in ("uniform", "centre"):
        raise ParameterError(f"placement must be 'uniform' (uniform inside each cell) or 'centre', got {placement!r}.")
    rect, area_source = public_area(crs, bounds, region)
    frame = public_frame(crs, bounds=rect, max_distortion=max_distortion)
    region_geom = region_geometry(region, crs)
    depth = mechanism.resolved_depth(int(n_people))
    order = (depth + 1) // 2
    leaf_side_m = area_side_metres(crs, rect) / float(1 << order)
    if isinstance(grid, str):
        if grid != "auto":
            raise ParameterError(f"grid must be a number of metres or 'auto', got {grid!r}.")
        grid_m = min(DEFAULT_GRID_M, leaf_side_m / 20.0)
    else:
        if (
            isinstance(grid, (bool, np.bool_))
            or not isinstance(grid, (int, float, np.integer, np.floating))
            or not math.isfinite(float(grid))
            or grid <= 0
        ):
            raise ParameterError("grid must be a positive number of metres (or 'auto').")
        grid_m = float(grid)
    lattice = public_lattice(frame, grid_m)
    if region_geom is not None:
        check_region_holds_lattice(region_geom, lattice)
    return SyntheticPlan(
        mechanism,
        crs,
        rect,
        area_source,
        frame,
        region_geom,
        lattice,
        depth,
        int(n_people),
        n_out,
        placement,
        bounds,
        region is not None,
    )


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
    """A synthetic point set from ``data`` through the public release path (set-valued mechanisms).

    The same steps as :func:`release_points`, for a mechanism that publishes a measure rather
    than one output per row (:class:`~geopriv.mechanisms.private_measure.PrivateMeasure`):

    1. validation of the points and the CRS (attributes are not released, so not checked);
    2. the public area (declared ``bounds=``, the bounding box of ``region=``, or the CRS's area of
       use: never the data) mapped affinely onto the unit square; inputs outside it are refused,
       naming their rows;
    3. the public lattice (before any noise is drawn): :func:`plan_synthetic`;
    4. the mechanism (its output is a discrete measure: integer noise, no floating-point
       surface), placement in the leaves, truncation to the area / region and snapping;
    5. the provenance record from the allowlist.

    Returns a new GeoDataFrame (or GeoSeries, like ``data``) of ``n`` synthetic points with a
    fresh RangeIndex, no attribute columns, in the input CRS.
    """
    from ..mechanisms.private_measure import leaf_keys

    geoms, xy = check_release_input(data, (), bounds, region, attributes=False)
    source = make_rng(rng)
    plan = plan_synthetic(
        geoms.crs,
        mechanism,
        len(xy),
        n=n,
        bounds=bounds,
        region=region,
        grid=grid,
        placement=placement,
        max_distortion=max_distortion,
    )
    unit = plan.unit(xy, geoms.index)
    fields = plan.fields()
    reservation = contextlib.nullcontext()
    if budget_store is not None:  # a person with k rows pays k epsilon (group privacy)
        fields.update(budget_fields(budget_store, PURE, float(fields["effective_epsilon"])))
        reservation = charge_rows(
            budget_store, data, person, float(fields["effective_epsilon"]), PURE, "synthesize", fields, plan.n_out
        )
    callback, bar = progress_callback(progress, len(xy), desc="synthesize")
    try:
        with reservation:
            if budget_store is not None:
                reservation.start()
            gen = source.bind(geoms, params=plan.fields(), purpose="synthesize").generator
            nodes, counts = mechanism.leaf_counts(leaf_keys(unit, plan.depth), gen, plan.depth)
        out = plan.points(nodes, counts, gen)
        if callback is not None:
            callback(len(xy), len(xy))
    finally:
        if bar is not None:
            bar.close()
    record = make_record(fields, seeded=source.seeded, n=plan.n_out)
    return synthetic_frame(data, out, plan.crs, record)


def synthetic_frame(data, out, crs, record):
    """The synthetic points as a new GeoDataFrame (a GeoSeries for a GeoSeries input) with ``record``."""
    points = gpd.GeoSeries(shapely.points(out), crs=crs, name="geometry")
    if isinstance(data, gpd.GeoSeries):
        return attach(points, data, record)
    result = gpd.GeoDataFrame(geometry=points, crs=crs)
    return attach(result, data, record)
