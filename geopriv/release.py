"""The one release path every point mechanism goes through.

``release_points(data, mechanism, ...)`` does, once and in this order:

1. validation of the input (points, CRS, no extra geometry columns, no location-bearing
   attributes unless kept deliberately: :mod:`geopriv.attributes`);
2. the public metric frame (:func:`geopriv.frame.public_frame`) and the check that every input
   lies in its public area;
3. the public lattice and the finite-precision bound (refused before any noise is drawn when it
   does not exist);
4. the mechanism's sampling, chunk by chunk with progress (noise for the next chunk is drawn
   in a worker thread while the current chunk's geometries are built);
5. truncation to the public area / region and snapping to the lattice (post-processing);
6. the provenance record, built from an allowlist of public fields (:mod:`geopriv.provenance`).

The mechanism contract
----------------------
A mechanism passed here is a small immutable object with

``frame_policy``
    ``"metric"``: noise is drawn in the public frame chosen here (planar or spherical);
    ``"own"``: the mechanism lives in its own public CRS (``mechanism.crs``), e.g. the
    location-dependent mechanism on its privacy map's grid; it then also provides
    ``public_bounds(crs)`` (its public extent in ``crs``) and checks its own domain.
``release(xy, frame, rng, labels=None)``
    Released coordinates for the (n, 2) array ``xy`` in ``frame.work_crs`` (degrees for a
    spherical frame).  Pure: no frames chosen, nothing written, no budget charged.
``describe(frame)``
    Its public parameters (a dict of allowlisted provenance fields).
``finite_precision(frame, lattice)``
    ``(effective_epsilon_per_m or None, text)``: the bound of the snapped release.
``grid_epsilon_per_m()``
    The largest epsilon per metre it uses: fixes the default lattice step and the checks
    that the noise is above the lattice and the coordinates' float precision.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from geopandas.array import GeometryArray
from pyproj import Transformer

from .budget import PER_METRE, PURE
from .crs import as_crs
from .exceptions import CRSError, Fix, GeometryError, GeoprivError, MissingCRSError, ParameterError, ParameterTypeError
from .frame import (
    DEFAULT_MAX_DISTORTION,
    REGION_CRS_FIX,
    PublicFrame,
    area_diameter_metres,
    area_of_use_bounds,
    area_side_metres,
    check_area_not_from_data,
    check_grid,
    check_noise_above_precision,
    declare_area_fix,
    declared_bounds,
    proj_errors,
    public_frame,
    public_lattice,
    touched_edges,
    truncate_and_snap,
)
from .points import as_geoseries, check_coordinates, check_no_other_geometries, point_xy
from .precision import check_noise_scale
from .progress import progress_callback
from .provenance import attach, make_record
from .rng import make_rng, unordered

__all__ = [
    "release_points",
    "plan_release",
    "ReleasePlan",
    "plan_synthetic",
    "SyntheticPlan",
    "synthetic_frame",
    "release_synthetic",
    "release_diffusion",
    "assemble",
    "CHUNK",
    "check_release_input",
    "public_area",
    "region_geometry",
    "TracePlan",
    "plan_traces",
]

CHUNK = 1_000_000
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3


def check_release_input(data, keep=(), bounds=None, region=None, allow_order=(), attributes=True):
    """Validate the points and what a release returns beside them; returns (GeoSeries, (n, 2) xy).

    Before anything is projected: a geographic or projected CRS, finite points within its valid
    range (longitude/latitude in range; no longitude/latitude degrees labelled as a projected CRS
    whose area of use is far from its origin, nor such ``bounds=``), see
    :func:`geopriv.points.check_coordinates`; a ``region=`` in another CRS must be
    transformable into the data's (PROJ errors become :class:`~geopriv.exceptions.CRSError`);
    no location-bearing attributes and no row order, index or column that puts the rows in
    spatial order (:mod:`geopriv.attributes`), except the public ordering columns ``allow_order``.
    """
    from .attributes import check_location_attributes

    geoms = as_geoseries(data)
    check_no_other_geometries(data)
    xy = point_xy(geoms)
    check_coordinates(xy, geoms.crs, geoms.index, bounds=bounds)
    if isinstance(region, (gpd.GeoSeries, gpd.GeoDataFrame)) and region.crs is not None:
        if not as_crs(region.crs).equals(geoms.crs):
            with proj_errors(
                geoms.crs,
                f"relate the region's CRS {as_crs(region.crs).name!r} to the data's CRS",
                detail=True,
                fix=REGION_CRS_FIX,
            ):
                Transformer.from_crs(region.crs, geoms.crs, always_xy=True)
    if attributes:
        check_location_attributes(data, keep=tuple(keep or ()), allow_order=tuple(allow_order))
    return geoms, xy


def region_geometry(region, crs):
    if region is None:
        return None
    if isinstance(region, shapely.Geometry):
        geom = region
    else:
        if region.crs is None:
            raise MissingCRSError("The region")
        geom = region.to_crs(crs).union_all()
    if geom.is_empty or geom.area <= 0:
        raise ParameterError("region must be a polygon with positive area (it is the area outputs are kept in).")
    shapely.prepare(geom)
    return geom


def _truncate(xy, region, lattice):
    """Remap outputs outside the region to the nearest lattice node inside it (post-processing)."""
    inside = shapely.contains_xy(region, xy[:, 0], xy[:, 1])
    if inside.all():
        return xy
    out = xy.copy()
    idx = np.flatnonzero(~inside)
    pts = shapely.points(xy[idx])
    nearest = shapely.get_coordinates(shapely.shortest_line(pts, region))[1::2]
    if lattice is None:
        out[idx] = nearest
        return out
    if lattice.kind != "planar":
        out[idx] = lattice.snap(nearest)
        return out
    step = lattice.step
    offs = np.array([(i, j) for i in range(-3, 4) for j in range(-3, 4)], dtype=float) * step
    base = lattice.snap(nearest)
    cand = base[:, None, :] + offs[None, :, :]
    ok = shapely.contains_xy(region, cand[..., 0], cand[..., 1])
    d = np.hypot(cand[..., 0] - xy[idx, None, 0], cand[..., 1] - xy[idx, None, 1])
    d[~ok] = np.inf
    best = d.argmin(axis=1)
    if not np.isfinite(d[np.arange(len(idx)), best]).all():
        raise ParameterError(
            "The region is too thin for the grid: no grid node inside it near its boundary. Use a finer grid."
        )
    out[idx] = cand[np.arange(len(idx)), best]
    return out


def _check_region_holds_lattice(region, lattice):
    """Public check, before any noise: every boundary point has a lattice node inside within 3 steps.

    Otherwise truncation could fail after noise was drawn (and a rerun would spend epsilon again).
    """
    if lattice.kind != "planar":
        return
    boundary = region.boundary
    n = int(min(max(boundary.length / lattice.step, 8), 20_000))
    pts = shapely.get_coordinates(shapely.line_interpolate_point(boundary, np.linspace(0, 1, n), normalized=True))
    offs = np.array([(i, j) for i in range(-3, 4) for j in range(-3, 4)], dtype=float) * lattice.step
    cand = lattice.snap(pts)[:, None, :] + offs[None, :, :]
    ok = shapely.contains_xy(region, cand[..., 0], cand[..., 1]).any(axis=1)
    if not ok.all():
        raise ParameterError(
            "The region is too thin for the grid: parts of it hold no lattice node. Use a finer grid or a wider region."
        )


def _own_frame(mechanism, crs) -> PublicFrame:
    return PublicFrame(crs, "planar", mechanism.crs, 1.0, 1.0, None, "mechanism")


@dataclasses.dataclass(frozen=True)
class ReleasePlan:
    """Everything public about a per-row release, fixed before any point is looked at.

    Built by :func:`plan_release` from the CRS, the mechanism and the public parameters only;
    :meth:`draw` and :meth:`finish` are the per-chunk steps (sampling in the frame, then
    truncation and snapping in the input CRS) and :meth:`fields` the provenance fields.  The
    in-memory path (:func:`release_points`) and the distributed one (:mod:`geopriv.distributed`)
    run the same plan.
    """

    mechanism: object
    crs: object
    frame: PublicFrame
    lattice_frame: PublicFrame
    lattice: object
    region_geom: object
    rect: object
    effective: object
    fp_text: str
    bounds: object
    region_given: bool
    keep: tuple
    to_work: object
    from_work: object

    def check_inside(self, xy, labels) -> None:
        """Refuse rows outside the public area (names rows); the mechanism checks its own domain.

        A ``region=`` whose bounding box the points touch on two or more edges is refused too (it
        was taken from the data: ``box(*total_bounds)``, the convex hull); outputs truncated into it
        would publish its edges.
        """
        if self.region_geom is not None and len(xy):
            check_area_not_from_data(touched_edges(xy, self.region_geom.bounds), "region")
        if self.mechanism.frame_policy != "own":
            self.frame.check_inside(xy, labels)
            return
        if self.bounds is not None:
            self.lattice_frame.check_inside(xy, labels)
        check_domain = getattr(self.mechanism, "check_domain", None)
        if check_domain is not None and len(xy):  # every row, before any is drawn (e.g. outside a privacy map)
            check_domain(self._work_xy(xy, labels), labels, self.crs)

    def _work_xy(self, xy, labels):
        """Rows ``xy`` (input CRS) in the frame's working CRS (refused where they cannot be expressed there)."""
        if self.to_work is None:
            return xy
        x, y = self.to_work.transform(xy[:, 0], xy[:, 1])
        chunk = np.column_stack([x, y])
        bad = ~np.isfinite(chunk).all(axis=1)
        if bad.any():
            raise GeometryError(
                f"cannot be expressed in the working frame ({self.frame.work_crs.name})",
                labels[bad],
                f"Check that the coordinates are really in {self.crs.name}: they must lie within its valid range.",
            )
        return chunk

    def draw(self, xy, labels, gen):
        """The mechanism's output for rows ``xy`` (input CRS) in the frame's coordinates."""
        return self.mechanism.release(self._work_xy(xy, labels), self.frame, gen, labels=labels)

    def finish(self, out):
        """Back in the input CRS, truncated to the public area / region and snapped (a fresh array)."""
        if self.from_work is not None:
            x, y = self.from_work.transform(out[:, 0], out[:, 1])
            out = np.column_stack([x, y])
        out = truncate_and_snap(out, self.rect if self.region_geom is None else None, self.lattice)
        if self.region_geom is not None:  # nearest lattice node inside the region
            out = _truncate(out, self.region_geom, self.lattice)
        if not np.isfinite(out).all():  # pragma: no cover - defensive: never release a non-finite point
            raise CRSError(
                f"Some releases cannot be expressed in {self.crs.name}; reproject the data to EPSG:4326 or a UTM zone."
            )
        return out

    def fields(self, extra_record: dict | None = None) -> dict:
        """The provenance fields (public only; the record adds n, seeded, version, time)."""
        crs = self.crs
        fields = dict(self.mechanism.describe(self.frame))
        fields.update(self.frame.describe() if self.mechanism.frame_policy != "own" else {"input_crs": crs.to_string()})
        if self.lattice is not None:
            fields.update(self.lattice.describe())
        fields["effective_epsilon_per_m"] = self.effective
        fields["finite_precision"] = self.fp_text
        fields["declared_bounds"] = (
            None if self.bounds is None else [float(v) for v in declared_bounds(crs, self.bounds, None)]
        )
        fields["region"] = self.region_given
        fields["kept_columns"] = sorted(str(k) for k in self.keep)
        if extra_record:
            fields.update(extra_record)
        return fields


def plan_release(
    crs,
    mechanism,
    *,
    grid="auto",
    continuous: bool = False,
    bounds=None,
    region=None,
    keep=(),
    max_distortion: float = DEFAULT_MAX_DISTORTION,
) -> ReleasePlan:
    """The public frame, lattice, finite-precision bound and transforms of a release (no data involved)."""
    crs = as_crs(crs)
    if isinstance(continuous, (bool, np.bool_)) is False:
        raise ParameterTypeError("continuous must be True or False.")
    if continuous and not (isinstance(grid, str) and grid == "auto"):
        raise ParameterError(
            "A continuous release (unrounded coordinates) has no lattice step.",
            fix=Fix(
                "continuous_or_grid",
                python="Do not pass grid= with continuous=True.",
                cli="Do not give --grid with --continuous.",
                qgis="Leave the 'Grid step of the released points' parameter empty with the 'Continuous output' "
                "parameter.",
            ),
        )

    # 1. the public frame
    if mechanism.frame_policy == "own":
        frame = _own_frame(mechanism, crs)
        # the mechanism checks its own domain (it names rows outside its map, or clamps them);
        # the map's extent (public) only fixes the lattice's scale, unless bounds= are declared
        lattice_frame = public_frame(
            crs, bounds=bounds if bounds is not None else mechanism.public_bounds(crs), max_distortion=max_distortion
        )
    else:
        frame = public_frame(
            crs, bounds=bounds, max_distortion=max_distortion, planar_only=mechanism.frame_policy == "planar"
        )
        lattice_frame = frame
    region_geom = region_geometry(region, crs)
    if region_geom is not None and lattice_frame.area is not None:
        rb, ab = region_geom.bounds, lattice_frame.area
        if rb[0] < ab[0] or rb[1] < ab[1] or rb[2] > ab[2] or rb[3] > ab[3]:
            raise ParameterError(
                "The region extends beyond the public area of the release (the declared study area, or the CRS's area "
                "of use).",
                fix=Fix(
                    "region_in_area",
                    python="Clip the region to it, or declare bounds= that hold it.",
                    cli="Clip the --region to it, or declare --bounds that hold it.",
                    qgis="Clip the region to it, or set a 'Public study area' that holds it.",
                ),
            )

    # 2. the public lattice and the finite-precision bound, before any noise is drawn
    lattice = None
    if not continuous:
        grid_m = check_grid(grid, mechanism.grid_epsilon_per_m())
        area = declared_bounds(crs, bounds, region)
        if area is not None:
            side = area_side_metres(crs, area)
            if grid_m > side:
                raise ParameterError(
                    f"The grid of {grid_m:g} m is coarser than the declared area (its shorter side is about {side:.3g} m): "
                    "every release would be the same few nodes. Use a finer grid or a larger area."
                )
        lattice = public_lattice(lattice_frame, grid_m)
        effective, fp_text = mechanism.finite_precision(lattice_frame, lattice)
    if continuous:
        check_noise_above_precision(mechanism.grid_epsilon_per_m(), lattice_frame)
        effective, fp_text = None, "none: continuous float64 output (explicitly requested), no finite-precision bound"
    if mechanism.frame_policy != "own" and isinstance(getattr(mechanism, "epsilon_per_m", None), float):
        # how much the noise protects and tells, from public parameters only (a warning)
        check_noise_scale(
            mechanism.epsilon_per_m,
            grid_m=None if lattice is None else lattice.grid_m,
            area_m=_declared_diameter(crs, bounds, region),
        )

    if hasattr(mechanism, "check_frame"):
        mechanism.check_frame(frame)
    if region_geom is not None and lattice is not None:
        _check_region_holds_lattice(region_geom, lattice)

    rect = lattice_frame.area if (mechanism.frame_policy != "own" or bounds is not None) else None
    if rect is None and frame.kind == "spherical" and crs.is_projected:
        rect = area_of_use_bounds(crs)  # e.g. Web Mercator: keep outputs where the CRS is defined
    to_work = None if frame.same else Transformer.from_crs(crs, frame.work_crs, always_xy=True)
    from_work = None if frame.same else Transformer.from_crs(frame.work_crs, crs, always_xy=True)
    return ReleasePlan(
        mechanism,
        crs,
        frame,
        lattice_frame,
        lattice,
        region_geom,
        rect,
        effective,
        fp_text,
        bounds,
        region is not None,
        tuple(keep or ()),
        to_work,
        from_work,
    )


def _declared_diameter(crs, bounds, region):
    """The declared study area's diameter in ground metres (bounds=, else region='s box), or None (public)."""
    area = declared_bounds(crs, bounds, region)
    return None if area is None else area_diameter_metres(crs, area)


def release_points(
    data,
    mechanism,
    *,
    rng=None,
    grid="auto",
    continuous: bool = False,
    bounds=None,
    region=None,
    keep=(),
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    progress=None,
    extra_record: dict | None = None,
    budget_store=None,
    person=None,
    kind: str = "perturb",
):
    """Release the points of ``data`` with ``mechanism`` through the one public release path.

    See the module docstring for the steps and :func:`geopriv.perturb` for the parameters.
    Returns a new object like ``data`` whose geometry is the release and whose
    ``attrs["geopriv"]`` is the provenance record (public fields only).  With ``budget_store``
    (a :class:`~geopriv.budget.BudgetStore`), every row's person (the ``person`` column, else
    the index) is charged :func:`point_charge` per row after every check and before any noise
    is drawn.
    """
    geoms, xy = check_release_input(data, keep, bounds, region)
    source = make_rng(rng)
    labels = geoms.index
    plan = plan_release(
        geoms.crs,
        mechanism,
        grid=grid,
        continuous=continuous,
        bounds=bounds,
        region=region,
        keep=keep,
        max_distortion=max_distortion,
    )
    plan.check_inside(xy, labels)
    extra = dict(extra_record or {})
    reservation = contextlib.nullcontext()
    if budget_store is not None:
        per_row = point_charge(plan)
        extra.update(budget_fields(budget_store, PER_METRE, per_row))
        reservation = charge_rows(budget_store, data, person, per_row, PER_METRE, kind, plan.fields(extra), len(xy))
    # a seed replays only for the same data and parameters (geopriv.rng.RandomSource.bind); bound after every
    # check and the charge, so a refused release leaves a caller's generator untouched
    gen = source.bind(
        *answered(data, geoms, *plan.keep, person),
        params=[kind, repr(person), plan.fields(extra_record)],
        purpose="points",
    ).generator

    def draw(a, b):
        return plan.draw(xy[a:b], labels[a:b], gen)

    def finish(out, geoms_out):
        shapely.points(plan.finish(out), out=geoms_out)

    with reservation:
        if budget_store is not None:
            reservation.start()
        geometries = _pipelined(len(xy), draw, finish, progress)
    record = make_record(plan.fields(extra), seeded=source.seeded, n=len(xy))
    return assemble(data, geoms, geometries, record)


def answered(data, geoms, *columns) -> tuple:
    """What a release reads, for binding a seed to it: the points (index, geometries, CRS) and the named columns.

    :meth:`geopriv.rng.RandomSource.bind` hashes them; ``None`` and names that are not columns are skipped.
    """
    names = [c for c in columns if c is not None and hasattr(data, "columns") and c in data.columns]
    return (geoms, *(data[c] for c in names))


def point_charge(plan: ReleasePlan) -> float:
    """What one row of a point release costs, in epsilon per ground metre: the guarantee actually given.

    The finite-precision effective epsilon when the release has one (planar Laplace on a lattice),
    else the mechanism's own bound (``loss_per_m()``: the eikonal mechanism's largest epsilon times
    its verified ratio), else its largest epsilon per metre.
    """
    if isinstance(plan.effective, float) and math.isfinite(plan.effective):
        return max(float(plan.effective), float(plan.mechanism.grid_epsilon_per_m()))
    loss = getattr(plan.mechanism, "loss_per_m", None)
    return float(loss()) if callable(loss) else float(plan.mechanism.grid_epsilon_per_m())


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
    from .budget import person_keys
    from .keys import row_identities

    ids, labels = row_identities(data, person, refuse_positions=True)
    keys = person_keys(ids, labels)
    return store.reserve(keys, per_row, unit=unit, kind=kind, spend=spend, parameters=fields, rows_released=n)


def _pipelined(n, draw, finish, progress):
    """Release rows chunk by chunk, sampling the next chunk in a worker thread.

    numpy's generators and ufuncs release the GIL, so sampling overlaps with building the point
    geometries.  Chunks are sampled in order from the one generator, so seeded output does not
    depend on thread timing.
    """
    # a small first chunk: nothing overlaps its sampling, so keep the wait for it short
    first = min(n, CHUNK, max(50_000, n // 32))
    bounds = [(0, first)] + [(a, min(n, a + CHUNK)) for a in range(first, n, CHUNK)]
    callback, bar = progress_callback(progress, n)
    geometries = np.empty(n, dtype=object)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(draw, *bounds[0])
            for i, (a, b) in enumerate(bounds):
                out = pending.result()
                if i + 1 < len(bounds):
                    pending = pool.submit(draw, *bounds[i + 1])
                try:
                    finish(out, geometries[a:b])
                    if callback is not None:
                        callback(b, n)
                except BaseException:
                    pending.cancel()
                    raise
    finally:
        if bar is not None:
            bar.close()
    return geometries


def assemble(data, geoms, released, record):
    """New object like ``data`` with geometry replaced by ``released`` and provenance attached.

    ``released`` is an (n, 2) array of coordinates or an array of shapely points (or None).
    """
    if isinstance(released, np.ndarray) and released.dtype != object:
        released = shapely.points(released)
    new_geoms = gpd.GeoSeries(GeometryArray(released, crs=geoms.crs), index=geoms.index, name=geoms.name, copy=False)
    if isinstance(data, gpd.GeoSeries):
        return attach(new_geoms, data, record)
    name = geoms.name
    if _COPY_ON_WRITE:
        out = data.copy(deep=False)
        out[name] = new_geoms
    else:
        rest = data.drop(columns=[name]).copy()
        rest.insert(data.columns.get_loc(name), name, new_geoms)
        out = gpd.GeoDataFrame(rest, geometry=name, crs=geoms.crs)
    return attach(out, data, record)


def public_area(crs, bounds=None, region=None):
    """(rectangle, source) of a release's public area: declared ``bounds=``, the bounding box of
    ``region=``, or the CRS's area of use; never the data.  Refused when none exists."""
    crs = as_crs(crs)
    rect = declared_bounds(crs, bounds, region)
    if rect is not None:
        return rect, "bounds" if bounds is not None else "region"
    rect = area_of_use_bounds(crs)
    if rect is None:
        raise CRSError(
            f"{crs.name} has no area of use (or it crosses the antimeridian), so the release has no public area.",
            fix=declare_area_fix(),
        )
    return rect, "area_of_use"


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
            out = _truncate(out, self.region_geom, self.lattice)
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
    from .frame import DEFAULT_GRID_M

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
        _check_region_holds_lattice(region_geom, lattice)
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
    from .mechanisms.private_measure import leaf_keys

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


#: how a graded release's epsilons are given, per front end
_SCHEDULE_FIX = Fix(
    "epsilon_schedule",
    python="Epsilon is per ground metre: e.g. math.log(4) / 50 at 1 hop is ln 4 within 50 m.",
    cli="The --epsilon-table epsilons are per ground metre: e.g. 1:ln4/50 is ln 4 within 50 m at 1 hop.",
    qgis="The epsilon table's epsilons are per ground metre: e.g. 1:ln4/50 is ln 4 within 50 m at 1 hop.",
)


def release_diffusion(
    data,
    source,
    epsilons,
    recipients,
    *,
    path=None,
    rng=None,
    bounds=None,
    grid="auto",
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    before_noise=None,
):
    """Release the location of row ``source`` to ``recipients`` at ``epsilons`` (per ground metre) from one path.

    The graded release of :mod:`geopriv.mechanisms.diffusion` through the public release path:

    1. validation of the points and the CRS (no attribute is released); ``bounds=`` that look
       computed from the data (points of ANY row, not only the source's, on two or more of its
       edges: ``bounds=gdf.total_bounds``) are refused, because they are published;
    2. the public planar frame (a path's noise vectors are shared by recipients, so it needs a
       plane: the CRS itself when its scale is bounded over its area of use or ``bounds=``,
       else an equidistant frame centred on the declared ``bounds=``); the source must lie in
       its public area;
    3. the public lattice, fixed by the largest epsilon (the most accurate answer), and each
       recipient's finite-precision bound, before any noise is drawn;
    4. a given ``path`` must be bound to this source, to the location, to this value (its keyed
       commitment) and to this frame (CRS, declared bounds, frame kind, working plane, scale,
       lattice rule), else :class:`~geopriv.exceptions.PathBindingError` before any noise and
       before ``before_noise()`` (the caller's budget check);
    5. one path over the recipients' levels in the frame's units (a new path is bound to this
       release), truncation and snapping;
    6. the provenance record from the allowlist (the path is never in it).

    Returns (responses (m, 2) in the input CRS, effective epsilons per metre, path, record fields).
    """
    from .frame import finite_precision_epsilon
    from .mechanisms.diffusion import LOCATION, DiffusionPath, diffuse

    geoms, xy = check_release_input(data, (), bounds, None, attributes=False)
    crs = as_crs(geoms.crs)
    labels = geoms.index
    if not labels.is_unique:
        raise GeoprivError(
            "The index has duplicate labels; the source and the recipients are named by index label. "
            "Make it unique first (gdf.reset_index(drop=True))."
        )
    pos = labels.get_loc(source)
    eps = np.asarray(epsilons, dtype=float)
    frame = public_frame(crs, bounds=bounds, max_distortion=max_distortion, planar_only=True)
    if frame.area is not None and frame.area_source == "bounds":
        # the "computed from the data" guard over every row: the other people's extreme
        # coordinates would be published with bounds= just as the source's would
        xmin, ymin, xmax, ymax = frame.area
        within = (xy[:, 0] >= xmin) & (xy[:, 0] <= xmax) & (xy[:, 1] >= ymin) & (xy[:, 1] <= ymax)
        frame.check_inside(xy[within], labels[within])
    frame.check_inside(xy[[pos]], labels[[pos]])
    grid_m = check_grid(grid, float(eps.max()))
    check_noise_scale(
        float(eps.max()),
        grid_m=grid_m,
        area_m=_declared_diameter(crs, bounds, None),
        what="the most accurate answer",
        fix=_SCHEDULE_FIX,
    )
    lattice = public_lattice(frame, grid_m)
    unique = np.unique(eps)
    eff_unique = np.array([finite_precision_epsilon(e, frame, lattice) for e in unique])
    effective = eff_unique[np.searchsorted(unique, eps)]
    if path is not None and not isinstance(path, DiffusionPath):
        raise ParameterTypeError(
            f"path must be a DiffusionPath (the secret path of an earlier release), got {type(path).__name__}."
        )
    u = np.array(frame.to_work(xy[[pos]], labels[[pos]])[0], dtype=float)
    binding = {
        "kind": "location",
        "crs": crs.to_string(),
        "declared_bounds": None if bounds is None else [float(v) for v in declared_bounds(crs, bounds, None)],
        "frame": frame.kind,
        "working_crs": frame.work_crs.to_string(),
        "scale_max": float(frame.scale_max),
        "grid": "auto" if isinstance(grid, str) else float(grid_m),  # the rule: "auto" follows the largest epsilon
        "lattice": lattice.kind,
    }
    if path is not None:
        path.check_binding(source=labels[pos], released=LOCATION, frame=binding, value=u)
    if before_noise is not None:  # the caller's budget check and charge, with the largest effective epsilon
        before_noise(float(effective.max()))
    source_rng = make_rng(rng).bind(  # a seed replays only for the same data and parameters (any row order)
        unordered(geoms),
        unordered(pd.DataFrame({"epsilon": eps}, index=pd.Index(recipients))),
        params=[f"{type(source).__name__}:{source!r}", binding],
        purpose="diffuse_locations",
    )
    responses, new_path = diffuse(u, eps / frame.scale_max, source_rng.generator, path=path)
    if path is None:
        new_path = new_path.bind(source=labels[pos], released=LOCATION, frame=binding, value=u)
    out = frame.from_work(np.asarray(responses, dtype=float).reshape(-1, 2))
    out = truncate_and_snap(np.array(out, dtype=float), frame.area, lattice)
    fields = {
        "mechanism": "private Markov jump process (graded release over a network)",
        "definition": "each recipient epsilon(d)-geo-indistinguishable per ground metre; any coalition of recipients "
        "learns no more than its closest member (the largest epsilon among them)",
        "epsilon_min_per_m": float(eps.min()),
        "epsilon_max_per_m": float(eps.max()),
        "coalition_epsilon_per_m": float(eps.max()),
        "effective_epsilon_per_m": float(effective.max()),
        "finite_precision": "Andres et al. 2013 Thm 4.1 per recipient (column effective_epsilon_per_m)",
    }
    fields.update(frame.describe())
    fields.update(lattice.describe())
    fields["declared_bounds"] = None if bounds is None else [float(v) for v in declared_bounds(crs, bounds, None)]
    return out, effective, new_path, fields, source_rng.seeded


@dataclasses.dataclass(frozen=True)
class TracePlan:
    """Everything public about a trace release, fixed before any trace is looked at.

    Built by :func:`plan_traces` from the CRS and the public parameters only: the mechanism
    and its budget manager, the planar frame (traces need a plane), the lattice and its
    finite-precision text, and the provenance fields.  The in-memory
    :func:`geopriv.sanitize_traces` and the lazy one (:mod:`geopriv.distributed.traces`, which
    runs the in-memory function per bucket) share it: one source for the record.
    """

    mechanism: Any  # a trace mechanism (run)
    manager: object
    method: str
    epsilon_per_m: float
    level: object
    radius: object
    frame: PublicFrame
    lattice: object
    bounds: object
    keep: tuple
    traj_id: object
    time: object
    on_exhausted: str
    skip_speed: object
    stale_after: object

    @property
    def unit(self) -> float:
        """Working units per 'conservative metre' (distances there are <= ground distances)."""
        return self.frame.scale_max

    def to_release(self, work_m):
        """Work metres -> released coordinates in the input CRS: truncated and snapped (a fresh array)."""
        return truncate_and_snap(self.frame.from_work(work_m * self.unit), self.frame.area, self.lattice)

    def draw_increment(self) -> float:
        """How much each noisy draw's epsilon per metre may grow by snapping to the lattice (0 when continuous)."""
        from .precision import ANGLE_RESOLUTION, discretisation_epsilon

        if self.lattice is None:
            return 0.0
        eps = self.epsilon_per_m
        return max(
            0.0,
            float(
                discretisation_epsilon(eps, self.lattice.min_cell_m, self.frame.r_max_metres(), ANGLE_RESOLUTION) - eps
            ),
        )

    def finite_precision_text(self) -> str:
        from .precision import ANGLE_RESOLUTION, discretisation_epsilon

        if self.lattice is None:
            return "none: continuous float64 output (explicitly requested), no finite-precision bound"
        r_max = self.frame.r_max_metres()
        eps = self.epsilon_per_m
        per_draw = discretisation_epsilon(eps, self.lattice.min_cell_m, r_max, ANGLE_RESOLUTION) - eps
        return (
            f"snapped to a public {self.lattice.grid_m:g} m lattice; each noisy draw's epsilon grows by at most "
            f"{per_draw:.3g} per metre (Andres et al. 2013 Thm 4.1, r_max {r_max:.4g} m)"
        )

    def fields(self, *, traces=None, n_released=None, ledger=None) -> dict:
        """The provenance fields; ``traces``, ``n_released`` and ``ledger`` are None for a lazy release."""
        from .mechanisms.predictive import FixedRate, FixedUtility

        mgr = self.manager
        fields = dict(
            mechanism=f"{self.method}_trace",
            definition="epsilon * d_inf per trace (Chatzikokolakis et al. 2014, Thm 3.1); epsilon is each trace's total",
            epsilon_per_m=self.epsilon_per_m,
            level=None if self.level is None else float(self.level),
            radius_m=None if self.radius is None else float(self.radius),
            method=self.method,
            budget="fixed_rate" if isinstance(mgr, FixedRate) else "fixed_utility",
            budget_config={"eta": float(mgr.eta), "gamma": float(mgr.gamma), "delta": float(mgr.delta)},
            rate=float(mgr.rate) if isinstance(mgr, FixedRate) else None,
            accuracy_m=float(mgr.accuracy) if isinstance(mgr, FixedUtility) else None,
            skip_speed_mps=None if self.skip_speed is None else float(self.skip_speed),
            stale_after_s=None if self.stale_after is None else float(self.stale_after),
            predictor=None if self.method == "independent" else self.mechanism.predictor.name,
            on_exhausted=self.on_exhausted,
            traces=traces,
            n_released=n_released,
            traj_id=self.traj_id,
            time=self.time,
            ledger=ledger,
            finite_precision=self.finite_precision_text(),
            declared_bounds=None if self.bounds is None else [float(v) for v in self.frame.area],
            kept_columns=sorted(str(k) for k in self.keep),
            **self.frame.describe(),
        )
        if self.lattice is not None:
            fields.update(self.lattice.describe())
        return fields


_TIME_FIX = Fix(
    "time_column",
    python="Pass time='<column>'.",
    cli="Give the time stamp column with --time COLUMN.",
    qgis="Choose the 'Time field'.",
)


def plan_traces(
    crs,
    epsilon=None,
    *,
    level=None,
    radius=None,
    method="predictive",
    budget="fixed_rate",
    rate=None,
    accuracy=None,
    skip_speed=None,
    stale_after=None,
    predictor="parrot",
    on_exhausted="empty",
    eta=None,
    gamma=None,
    delta=None,
    prediction_rate=None,
    bounds=None,
    grid="auto",
    continuous: bool = False,
    keep=(),
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    traj_id=None,
    time=None,
) -> TracePlan:
    """The public part of a trace release (no data involved): parameters checked, frame and lattice fixed."""
    from .mechanisms.predictive import IndependentMechanism, PredictiveMechanism, TimeSkip, budget_manager
    from .precision import resolve_epsilon

    if method not in ("predictive", "independent"):
        raise ParameterError(f"method must be 'predictive' or 'independent', got {method!r}.")
    if on_exhausted not in ("empty", "last"):
        raise ParameterError(
            f"on_exhausted must be 'empty' (no geometry) or 'last' (last released point), got {on_exhausted!r}."
        )
    eps = resolve_epsilon(epsilon, level, radius)
    manager = budget_manager(budget, rate, accuracy, eta, gamma, delta, prediction_rate)
    if method == "independent":
        if skip_speed is not None or stale_after is not None or predictor not in ("parrot", None):
            raise ParameterError(
                "The time skip rule, the staleness rule and the predictor apply to the predictive method only.",
                fix=Fix(
                    "predictive_only",
                    python="Leave skip_speed, stale_after and predictor out with method='independent'.",
                    cli="Leave --skip-speed, --stale-after and --predictor out with --method independent.",
                    qgis="Leave them empty with 'Independent planar Laplace noise'.",
                ),
            )
        mech = IndependentMechanism(manager)
    else:
        if skip_speed is not None and time is None:
            raise ParameterError("The time skip rule (skip_speed) needs time stamps.", fix=_TIME_FIX)
        if stale_after is not None and time is None:
            raise ParameterError("The staleness rule (stale_after) needs time stamps.", fix=_TIME_FIX)
        mech = PredictiveMechanism(
            manager,
            predictor=predictor,
            skip=None if skip_speed is None else TimeSkip(skip_speed),
            stale_after=stale_after,
        )
    frame = public_frame(crs, bounds=bounds, max_distortion=max_distortion, planar_only=True)
    lattice = None
    if continuous:
        check_noise_above_precision(eps, frame)  # no draw spends more than the trace's total
    else:
        lattice = public_lattice(frame, check_grid(grid, eps))
    check_noise_scale(
        eps,
        grid_m=None if lattice is None else lattice.grid_m,
        area_m=_declared_diameter(crs, bounds, None),
        what="each trace's whole budget",
    )
    return TracePlan(
        mech,
        manager,
        method,
        eps,
        level,
        radius,
        frame,
        lattice,
        bounds,
        tuple(keep or ()),
        traj_id,
        time,
        on_exhausted,
        skip_speed,
        stale_after,
    )
