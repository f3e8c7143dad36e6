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

import numpy as np
import shapely
from pyproj import Transformer

from ..budget import PER_METRE
from ..crs import as_crs
from ..exceptions import CRSError, Fix, GeometryError, ParameterError, ParameterTypeError
from ..frame import (
    DEFAULT_MAX_DISTORTION,
    PublicFrame,
    area_of_use_bounds,
    area_side_metres,
    check_area_not_from_data,
    check_grid,
    check_noise_above_precision,
    declared_bounds,
    public_frame,
    public_lattice,
    touched_edges,
    truncate_and_snap,
)
from ..precision import check_noise_scale
from ..provenance import make_record
from ..rng import make_rng
from .charging import budget_fields, charge_rows
from .common import (
    answered,
    assemble,
    check_region_holds_lattice,
    check_release_input,
    declared_diameter,
    pipelined,
    region_geometry,
    truncate_to_region,
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
            out = truncate_to_region(out, self.region_geom, self.lattice)
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
            area_m=declared_diameter(crs, bounds, region),
        )

    if hasattr(mechanism, "check_frame"):
        mechanism.check_frame(frame)
    if region_geom is not None and lattice is not None:
        check_region_holds_lattice(region_geom, lattice)

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
        geometries = pipelined(len(xy), draw, finish, progress)
    record = make_record(plan.fields(extra), seeded=source.seeded, n=len(xy))
    return assemble(data, geoms, geometries, record)


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
