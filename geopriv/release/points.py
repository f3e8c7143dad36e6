"""The one release path every point mechanism goes through.

The release kind ``"points"`` (:mod:`geopriv.release.base`): ``plan_release(crs, mechanism, ...)``
fixes everything public, before any row is read and in this order:

1. the parameters' checks against the CRS (:func:`geopriv.release.common.check_release_parameters`:
   its kind, ``bounds=`` in its units, a ``region=`` it relates to), ``continuous=``, the region;
2. the public frame and lattice in one call (:func:`geopriv.frame.public_grid`: the frame, the
   region inside its area, the grid step against the noise and the declared area, the lattice),
   then the mechanism's finite-precision bound (refused when it does not exist) and the noise
   scale's warnings (:func:`geopriv.precision.check_noise_scale`).

``plan.run(data, store=, rng=, progress=)`` then, once and in this order (``run_memory``; a dask
frame goes to the runner :mod:`geopriv.distributed.perturb` registered for the kind, which shares
the plan's :meth:`ReleasePlan.charged_fields`, :meth:`ReleasePlan.seed_params` and checks):

3. validation of the input (points, CRS, no extra geometry columns, no location-bearing
   attributes unless kept deliberately: :func:`geopriv.release.common.check_release_input`) and
   the check that every input lies in the public area (:meth:`ReleasePlan.check_inside`);
4. the charge of a budget store (:func:`geopriv.release.charging.charge_rows`), after every check
   and before any noise;
5. the mechanism's sampling, chunk by chunk with progress (noise for the next chunk is drawn
   in a worker thread while the current chunk's geometries are built);
6. truncation to the public area / region and snapping to the lattice (post-processing);
7. the provenance record, built from an allowlist of public fields (:mod:`geopriv.provenance`).

``release_points(data, mechanism, ...)`` is the same plan and run in one call (kept for its callers).

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
import copy
import dataclasses
import functools
import math
from typing import ClassVar

import numpy as np
import shapely
from pyproj import Transformer

from ..budget import PER_METRE
from ..exceptions import CRSError, Fix, GeometryError, ParameterError, ParameterTypeError
from ..frame import (
    DEFAULT_MAX_DISTORTION,
    PublicFrame,
    check_area_not_from_data,
    public_grid,
    touched_edges,
    truncate_and_snap,
)
from ..precision import check_noise_scale
from ..provenance import make_record
from ..rng import make_rng
from .base import Executes
from .charging import budget_fields, charge_rows
from .common import (
    answered,
    assemble,
    check_region_holds_lattice,
    check_release_input,
    check_release_parameters,
    check_unique_persons,
    pipelined,
    plan_crs,
    region_geometry,
    truncate_to_region,
)

#: the finite-precision text of a continuous release
CONTINUOUS = "none: continuous float64 output (explicitly requested), no finite-precision bound"


def _own_frame(mechanism, crs) -> PublicFrame:
    return PublicFrame(crs, "planar", mechanism.crs, 1.0, 1.0, None, "mechanism")


@dataclasses.dataclass(frozen=True)
class ReleasePlan(Executes):
    """Everything public about a per-row release, fixed before any point is looked at.

    Built by :func:`plan_release` from the CRS, the mechanism and the public parameters only;
    :meth:`run` releases data under it (in memory, or a dask frame through the lazy runner of
    :mod:`geopriv.distributed`).  :meth:`draw` and :meth:`finish` are the per-chunk steps
    (sampling in the frame, then truncation and snapping in the input CRS), :meth:`fields` the
    provenance fields, :meth:`charged_fields` and :meth:`seed_params` what both runs charge,
    record and bind a seed to: the in-memory run and the distributed one share them.
    """

    kind: ClassVar[str] = "points"

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
    #: the column of person ids (None: the index labels), charged and keyed
    person: object = None
    #: the release's name in a budget store's audit and in its seed's binding
    release_kind: str = "perturb"
    #: further public record fields, as (name, value) pairs
    extra_record: tuple = ()
    #: the region's box as declared (its bounding box in the CRS), or None: a lazy run checks it against all rows
    region_area: tuple | None = None

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
        """The provenance fields (public only; the record adds n, seeded, version, time): a fresh dict."""
        fields = copy.deepcopy(self._fields)  # no record shares a list with another
        if extra_record:
            fields.update(extra_record)
        return fields

    @functools.cached_property
    def _fields(self) -> dict:
        """The plan's provenance fields, computed once (the plan is immutable)."""
        fields = dict(self.mechanism.describe(self.frame))
        fields.update(
            self.frame.describe() if self.mechanism.frame_policy != "own" else {"input_crs": self.crs.to_string()}
        )
        if self.lattice is not None:
            fields.update(self.lattice.describe())
        fields["effective_epsilon_per_m"] = self.effective
        fields["finite_precision"] = self.fp_text
        fields["declared_bounds"] = None if self.bounds is None else [float(v) for v in self.bounds]
        fields["region"] = self.region_given
        fields["kept_columns"] = sorted(str(k) for k in self.keep)
        fields.update(self.extra_record)
        return fields

    def charged_fields(self, store) -> tuple[float | None, dict]:
        """(what one row costs in epsilon per metre, the record's fields): both runs charge and record these.

        Without a store: ``(None, fields())``; with one, the record also names the store's kind,
        the unit and the cost of a row (:func:`geopriv.release.charging.budget_fields`).
        """
        fields = self.fields()
        if store is None:
            return None, fields
        per_row = point_charge(self)
        return per_row, {**fields, **budget_fields(store, PER_METRE, per_row)}

    def declared_areas(self) -> tuple:
        """The declared areas the rows must not define, as ((rect, source), ...): ``bounds=`` and ``region=``'s box.

        A lazy run checks them over all partitions (:func:`geopriv.frame.check_area_not_from_data`).
        """
        area_frame = self.frame if self.mechanism.frame_policy != "own" else self.lattice_frame
        areas = []
        if area_frame.area_source == "bounds" and (self.mechanism.frame_policy != "own" or self.bounds is not None):
            areas.append((area_frame.area, "bounds"))
        if self.region_area is not None:
            areas.append((self.region_area, "region"))
        return tuple(areas)

    def seed_params(self) -> list:
        """The public parameters a seed is bound to with the data (:meth:`geopriv.rng.RandomSource.bind`)."""
        return [repr(self.person), self.fields()]

    def run_memory(self, data, *, store=None, rng=None, progress=None):
        """Release ``data`` (a GeoDataFrame or GeoSeries) under this plan: steps 3 to 7 of the module docstring.

        With ``store`` (a :class:`~geopriv.budget.BudgetStore`), every row's person (the plan's
        ``person`` column, else the index) is charged :func:`point_charge` per row after every
        check and before any noise is drawn.  Returns a new object like ``data`` whose geometry
        is the release and whose ``attrs["geopriv"]`` is the provenance record.
        """
        if self.person is not None and store is None:  # the same identity rules as a lazy release
            check_unique_persons(data, self.person)
        geoms, xy = check_release_input(data, self.keep, self.bounds)  # the region's CRS: checked by the plan
        source = make_rng(rng)
        labels = geoms.index
        self.check_inside(xy, labels)
        per_row, fields = self.charged_fields(store)
        reservation = contextlib.nullcontext()
        if store is not None:
            reservation = charge_rows(store, data, self.person, per_row, PER_METRE, self.release_kind, fields, len(xy))
        # a seed replays only for the same data and parameters (geopriv.rng.RandomSource.bind); bound after every
        # check and the charge, so a refused release leaves a caller's generator untouched
        gen = source.bind(
            *answered(data, geoms, *self.keep, self.person),
            params=[self.release_kind, *self.seed_params()],
            purpose="points",
        ).generator
        with reservation:
            if store is not None:
                reservation.start()
            geometries = self._pipelined(xy, labels, gen, progress)
        return assemble(data, geoms, geometries, make_record(fields, seeded=source.seeded, n=len(xy)))

    def _pipelined(self, xy, labels, gen, progress):
        """The released point geometries of rows ``xy``, chunk by chunk (:func:`geopriv.release.common.pipelined`)."""

        def draw(a, b):
            return self.draw(xy[a:b], labels[a:b], gen)

        def finish(out, geoms_out):
            shapely.points(self.finish(out), out=geoms_out)

        return pipelined(len(xy), draw, finish, progress)


def _check_continuous(grid, continuous) -> None:
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
    person=None,
    release_kind: str = "perturb",
    extra_record: dict | None = None,
) -> ReleasePlan:
    """The plan of a per-row release: frame, lattice, finite-precision bound and transforms (no data involved).

    Steps 1 and 2 of the module docstring.  ``person``: the column of person ids (default: the
    index labels) a run charges and keys; ``release_kind``: the release's name in a budget
    store's audit; ``extra_record``: further public fields of its record.
    """
    crs = check_release_parameters(crs, bounds, region)
    _check_continuous(grid, continuous)
    own = mechanism.frame_policy == "own"
    region_geom = region_geometry(region, crs)
    # how much the noise protects and tells, from public parameters only (a warning): planar Laplace
    noise_scale = not own and isinstance(getattr(mechanism, "epsilon_per_m", None), float)
    # the mechanism checks its own domain (it names rows outside its map, or clamps them); the map's
    # extent (public) only fixes the lattice's scale, unless bounds= are declared
    fixed = public_grid(
        crs,
        mechanism.grid_epsilon_per_m(),
        grid=grid,
        continuous=continuous,
        bounds=bounds,
        region=region,
        region_box=None if region_geom is None else region_geom.bounds,
        frame_bounds=mechanism.public_bounds(crs) if own and bounds is None else None,
        max_distortion=max_distortion,
        planar_only=mechanism.frame_policy == "planar",
        diameter=noise_scale,
    )
    lattice = fixed.lattice
    effective, fp_text = (None, CONTINUOUS) if lattice is None else mechanism.finite_precision(fixed.frame, lattice)
    if noise_scale:
        check_noise_scale(
            mechanism.epsilon_per_m, grid_m=None if lattice is None else lattice.grid_m, area_m=fixed.diameter_m
        )
    frame = _own_frame(mechanism, crs) if own else fixed.frame
    if hasattr(mechanism, "check_frame"):
        mechanism.check_frame(frame)
    if region_geom is not None and lattice is not None:
        check_region_holds_lattice(region_geom, lattice)
    to_work = None if frame.same else Transformer.from_crs(crs, frame.work_crs, always_xy=True)
    from_work = None if frame.same else Transformer.from_crs(frame.work_crs, crs, always_xy=True)
    return ReleasePlan(
        mechanism,
        crs,
        frame,
        fixed.frame,
        lattice,
        region_geom,
        fixed.rect,
        effective,
        fp_text,
        bounds,
        region is not None,
        tuple(keep or ()),
        to_work,
        from_work,
        person,
        release_kind,
        tuple((extra_record or {}).items()),
        fixed.region_area,
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
    """Release the points of ``data`` with ``mechanism``: :func:`plan_release`, then the plan's run.

    See the module docstring for the steps and :func:`geopriv.perturb` for the parameters
    (``kind``: the release's name in ``budget_store``'s audit).  Returns a new object like
    ``data`` whose geometry is the release and whose ``attrs["geopriv"]`` is the provenance
    record (public fields only).
    """
    plan = plan_release(
        plan_crs(data),
        mechanism,
        grid=grid,
        continuous=continuous,
        bounds=bounds,
        region=region,
        keep=keep,
        max_distortion=max_distortion,
        person=person,
        release_kind=kind,
        extra_record=extra_record,
    )
    return plan.run(data, store=budget_store, rng=rng, progress=progress)


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
