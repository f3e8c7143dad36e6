"""The diffusion release kind: one person's location (or value) released to her whole network, graded by distance.

The plan of :func:`geopriv.diffuse_locations` (the contract is :mod:`geopriv.release.base`).
:func:`plan_diffusion` checks and holds the public parameters: the epsilon schedule, the
(public) network, the source's label, what is released, the frame's and the lattice's rules,
the ledger.  ``plan.run(data, store=, rng=, path=)`` then

1. checks the people against the plan (:meth:`DiffusionPlan.recipients`): the source is a
   row, one label is one person (:func:`geopriv.people.repeated_people`), the labels (published,
   in their order) do not give the locations away, and who is connected to the source, at which
   network distance and epsilon;
2. checks what is released (:func:`location_answer`: the points, the CRS, the public planar
   frame and lattice, the source inside the declared area; :func:`value_answer`: the column, the
   public value range and lattice), and that a given ``path`` is bound to this source, this
   quantity and this frame (:class:`~geopriv.exceptions.PathBindingError` otherwise);
3. charges, in one place (:meth:`DiffusionPlan.draw`), after every check and before any noise:
   the ledger, and the budget store through its path pricing (``charge_path``: a path costs its
   largest epsilon, an extended path that the store charged before only the increase);
4. draws ONE secret path from ``rng`` bound to the data and the plan, answers every recipient
   from it, settles the charge and keeps the new path's fingerprint (``record_path``);
5. publishes the answers in label order with the provenance record (never the path), then
   warns about the rows nobody could answer.

The path is a secret like the seed: it is given to the run, never held by the plan.  There is
no dask form (a graded release answers about one person, whose row the run reads):
:meth:`DiffusionPlan.run_lazy` refuses a dask frame as ``diffuse_locations`` always has.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from typing import Any, ClassVar

import geopandas as gpd
import numpy as np
import pandas as pd

from ..attributes import INDEX, ROW_ORDER, check_location_attributes
from ..budget import PER_METRE, PERSON_FIX, open_store, value_unit
from ..crs import as_crs
from ..daskhook import is_dask
from ..exceptions import (
    EmptyInputError,
    Fix,
    GeoprivError,
    IdentityError,
    LocationAttributeError,
    ParameterTypeError,
    format_labels,
)
from ..frame import (
    DEFAULT_MAX_DISTORTION,
    PublicFrame,
    check_grid,
    declared_bounds,
    public_frame,
    auto_grid_too_fine,
    public_lattice,
    truncate_and_snap,
)
from ..keys import LOCATION, value_column
from ..people import repeated_people
from ..precision import check_noise_scale
from ..provenance import attach, make_record
from ..rng import make_rng, unordered
from .base import Executes, opened_store
from .charging import budget_fields
from .common import check_release_input, declared_diameter

__all__ = [
    "DiffusionPlan",
    "plan_diffusion",
    "Recipients",
    "LocationAnswer",
    "ValueAnswer",
    "location_answer",
    "value_answer",
    "value_lattice",
    "check_people",
    "release_diffusion",
    "VALUE_RANGE_STEPS",
    "MECHANISM",
]

#: the mechanism, as the record and the budget store's audit name it
MECHANISM = "private Markov jump process (graded release over a network)"
#: Without ``value_range=``, value answers are clamped to +-(VALUE_RANGE_STEPS * step): a public
#: range from the lattice step alone (2^32 steps), over which the 1-D finite-precision term is
#: about 0.2 % of epsilon at the default step.
VALUE_RANGE_STEPS = 2.0**32

#: what a graded release is given: the people, in memory
_PEOPLE_TYPE = "diffuse_locations needs a GeoDataFrame of the people (one point per row)."
#: how a graded release's epsilons are given, per front end
_SCHEDULE_FIX = Fix(
    "epsilon_schedule",
    python="Epsilon is per ground metre: e.g. math.log(4) / 50 at 1 hop is ln 4 within 50 m.",
    cli="The --epsilon-table epsilons are per ground metre: e.g. 1:ln4/50 is ln 4 within 50 m at 1 hop.",
    qgis="The epsilon table's epsilons are per ground metre: e.g. 1:ln4/50 is ln 4 within 50 m at 1 hop.",
)
#: how to fix recipients' labels that give the locations away (they are published, in their order)
_LABELS_FIX = Fix(
    "relabel_people",
    python="Label the people with ids not assigned in spatial order (e.g. a random id column as the index, with the "
    f"graph's nodes named by it); if the labels are public anyway, keep them deliberately: keep=[{INDEX!r}].",
    cli="Name the people with --id-field COLUMN, a column of ids not assigned in spatial order (the default ids are "
    "row numbers), used by --source and the network too.",
    qgis="Choose an 'Id field of the people' whose values were not assigned in spatial order (the default "
    "ids are feature ids), used by the source and the network too.",
)
#: how to fix labels that name one person twice (recipients are named, and published, by label)
_UNIQUE_FIX = Fix(
    "unique_labels",
    python="Give every person a unique label (a unique id column as the "
    "index, or gdf.sample(frac=1).reset_index(drop=True)).",
    cli="Give every person a unique id (--id-field).",
    qgis="Give every person a unique id ('Id field of the people').",
)
#: how to fix rows nobody can answer, when they must be answered
_CONNECT_FIX = Fix(
    "connect",
    python="Connect them, or pass on_unreachable='warn' or 'ignore'.",
    cli="Connect them, or give --on-unreachable warn or ignore.",
    qgis="Connect them.",
)
#: how to fix a value outside its public range
_VALUE_RANGE_FIX = Fix(
    "value_range",
    python="Declare value_range=(lo, hi) covering every possible value, chosen without looking at the data.",
    cli="Declare --value-range LO HI covering every possible value, chosen without looking at the data.",
    qgis="Declare a public range covering every possible value, chosen without looking at the data.",
)


def check_people(data) -> None:
    """Refuse anything but an in-memory GeoDataFrame of the people (a dask frame included: no lazy graded release)."""
    if not isinstance(data, gpd.GeoDataFrame):
        raise ParameterTypeError(_PEOPLE_TYPE)


def check_path(path) -> None:
    """Refuse a ``path=`` that is not a :class:`~geopriv.mechanisms.diffusion.DiffusionPath` (``None``: a fresh path)."""
    from ..mechanisms.diffusion import DiffusionPath

    if path is not None and not isinstance(path, DiffusionPath):
        raise ParameterTypeError(
            f"path must be a DiffusionPath (the secret path of an earlier release), got {type(path).__name__}."
        )


# ---------------------------------------------------------------------------- the recipients


@dataclasses.dataclass(frozen=True)
class Recipients:
    """Who a graded release answers, in publication order (label order), and at which level.

    All of it is public: the network is, and so are the recipients' labels and their order.
    ``source`` is the source's label as the layer stores it (its type is part of a path's
    binding); ``warning`` is the message about the rows nobody can answer, given after the release.
    """

    source: Any
    labels: pd.Index
    distances: np.ndarray
    epsilons: np.ndarray
    distance: str
    unreachable: int
    warning: str | None

    @property
    def largest(self) -> float:
        """The largest epsilon (the closest recipients'): what any coalition of recipients learns."""
        return float(self.epsilons.max())

    def fields(self) -> dict:
        """The record's fields about the network."""
        return {"distance": self.distance, "recipients": int(len(self.labels)), "unreachable": self.unreachable}

    def levels_table(self) -> pd.DataFrame:
        """The recipients' levels, as a seed is bound to them (in any row order)."""
        return levels_table(self.labels, self.epsilons)


def levels_table(labels, epsilons) -> pd.DataFrame:
    """Each recipient's epsilon, indexed by its label: what a path's seed is bound to beside the data."""
    return pd.DataFrame({"epsilon": np.asarray(epsilons, dtype=float)}, index=pd.Index(labels))


def check_unique_people(labels: pd.Index) -> None:
    """Refuse labels that name one person twice: recipients are named, and published, by label."""
    repeated = repeated_people(labels)
    if repeated.any():
        raise IdentityError(
            "share their index label: recipients are named, and published, by label",
            list(dict.fromkeys(labels[repeated])),
            _UNIQUE_FIX,
        )


def check_labels_in_label_order(geometry: gpd.GeoSeries) -> None:
    """Refuse labels that give the locations away: ``geometry`` is the people's, sorted by label (as published)."""
    try:
        check_location_attributes(geometry)
    except LocationAttributeError as exc:  # the fix is the labels, not the rows' order
        raise LocationAttributeError(
            "The recipients' labels give the true locations away: they are published, in their order, and "
            + (
                "they hold locations"
                if set(exc.reasons) - {ROW_ORDER}
                else "sorted by them the people are in spatial order"
            )
            + " ("
            + "; ".join(r.split(" (")[0] for r in exc.reasons.values())
            + ").",
            exc.reasons,
            fix=_LABELS_FIX,
        ) from None


def reached(d: pd.Series, source, schedule, distance: str, on_unreachable: str) -> Recipients:
    """The recipients among the rows at network distances ``d`` (in label order): connected, and not the source.

    Unreachable rows get no answer: ``on_unreachable="raise"`` refuses them here, ``"warn"``
    keeps the message for after the release; nobody to answer is an error.
    """
    values = d.to_numpy()
    reach = np.isfinite(values)
    reach[d.index.get_loc(source)] = False
    unreachable = d.index[~np.isfinite(values)]
    warning = None
    if len(unreachable):
        msg = (
            f"{len(unreachable)} row(s) are not connected to the source in the graph and get no answer: "
            f"labels {format_labels(unreachable)}."
        )
        if on_unreachable == "raise":
            raise GeoprivError(msg, fix=_CONNECT_FIX)
        if on_unreachable == "warn":  # after the release: a call that fails says one thing only
            warning = msg
    if not reach.any():
        raise EmptyInputError(f"no row other than the source {source!r} is connected to it: there is nobody to answer.")
    dist = values[reach]
    return Recipients(source, d.index[reach], dist, schedule(dist), distance, int(len(unreachable)), warning)


# ---------------------------------------------------------------------------- what is released


@dataclasses.dataclass(frozen=True)
class LocationAnswer:
    """The source's location, checked and placed in the public frame: everything a path needs, nothing drawn.

    ``u`` (the source's point in the working plane) is SECRET, like the data; ``binding`` is the
    public frame a path is bound to (CRS, declared bounds, frame, working plane, scale, lattice
    rule); ``effective`` the recipients' finite-precision epsilons per metre.
    """

    geoms: gpd.GeoSeries
    frame: PublicFrame
    lattice: Any
    effective: np.ndarray
    u: np.ndarray
    binding: dict
    declared: list | None

    released: ClassVar[str] = LOCATION

    def largest(self, epsilon_max: float) -> float:
        """What the path costs: its largest epsilon, or the largest effective one (the lattice's) when above."""
        return max(float(self.effective.max()), float(epsilon_max))

    def bind(self, rng, data, source, levels: pd.DataFrame):
        """The path's stream: a seed replays only for the same data and parameters (any row order)."""
        return make_rng(rng).bind(
            unordered(self.geoms),
            unordered(levels),
            params=[f"{type(source).__name__}:{source!r}", self.binding],
            purpose="diffuse_locations",
        )

    def levels(self, epsilons) -> np.ndarray:
        """The path's levels in the working plane's units (conservative metres: per unit / scale_max)."""
        return np.asarray(epsilons, dtype=float) / self.frame.scale_max

    def points(self, responses) -> np.ndarray:
        """The answers in the input CRS: back from the working plane, truncated to the area, snapped (post-processing)."""
        out = self.frame.from_work(np.asarray(responses, dtype=float).reshape(-1, 2))
        return truncate_and_snap(np.array(out, dtype=float), self.frame.area, self.lattice)

    def fields(self, epsilons) -> dict:
        """The record's fields about the location release (public: the frame, the lattice, the levels)."""
        eps = np.asarray(epsilons, dtype=float)
        fields = {
            "mechanism": MECHANISM,
            "definition": "each recipient epsilon(d)-geo-indistinguishable per ground metre; any coalition of "
            "recipients learns no more than its closest member (the largest epsilon among them)",
            "epsilon_min_per_m": float(eps.min()),
            "epsilon_max_per_m": float(eps.max()),
            "coalition_epsilon_per_m": float(eps.max()),
            "effective_epsilon_per_m": float(self.effective.max()),
            "finite_precision": "Andres et al. 2013 Thm 4.1 per recipient (column effective_epsilon_per_m)",
        }
        fields.update(self.frame.describe())
        fields.update(self.lattice.describe())
        fields["declared_bounds"] = self.declared
        return fields

    def publish(self, responses, who: Recipients, data, seeded: bool, budget: dict):
        """One point per recipient (in label order) with its distance and epsilons, and the record."""
        out = self.points(responses)
        result = gpd.GeoDataFrame(
            {
                "network_distance": who.distances,
                "epsilon_per_m": who.epsilons,
                "effective_epsilon_per_m": self.effective,
            },
            geometry=gpd.points_from_xy(out[:, 0], out[:, 1]),
            crs=data.crs,
            index=who.labels,
        )
        fields = self.fields(who.epsilons)
        fields.update(who.fields())
        fields.update(budget)
        return attach(result, data, make_record(fields, seeded=seeded, n=len(who.labels)))


def location_answer(data, source, epsilons, *, bounds=None, grid="auto", max_distortion=DEFAULT_MAX_DISTORTION):
    """Check the points and fix the public frame and lattice of a location's graded release to levels ``epsilons``.

    1. validation of the points and the CRS (no attribute is released); ``bounds=`` that look
       computed from the data (points of ANY row, not only the source's, on two or more of its
       edges: ``bounds=gdf.total_bounds``) are refused, because they are published;
    2. the public planar frame (a path's noise vectors are shared by recipients, so it needs a
       plane: the CRS itself when its scale is bounded over its area of use or ``bounds=``,
       else an equidistant frame centred on the declared ``bounds=``); the source must lie in
       its public area;
    3. the public lattice, fixed by the largest epsilon (the most accurate answer), and each
       recipient's finite-precision bound, before any noise is drawn.
    """
    from ..frame import finite_precision_epsilon

    geoms, xy = check_release_input(data, (), bounds, None, attributes=False)
    crs = as_crs(geoms.crs)
    labels = geoms.index
    if not labels.is_unique:  # (a plan's run has refused repeated people already)
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
        area_m=declared_diameter(crs, bounds, None),
        what="the most accurate answer",
        fix=_SCHEDULE_FIX,
    )
    too_fine = auto_grid_too_fine(float(eps.max())) if isinstance(grid, str) and grid == "auto" else None
    lattice = public_lattice(frame, grid_m, too_fine=too_fine)
    unique = np.unique(eps)
    eff_unique = np.array([finite_precision_epsilon(e, frame, lattice) for e in unique])
    effective = eff_unique[np.searchsorted(unique, eps)]
    u = np.array(frame.to_work(xy[[pos]], labels[[pos]])[0], dtype=float)
    declared = None if bounds is None else [float(v) for v in declared_bounds(crs, bounds, None)]
    binding = {
        "kind": "location",
        "crs": crs.to_string(),
        "declared_bounds": declared,
        "frame": frame.kind,
        "working_crs": frame.work_crs.to_string(),
        "scale_max": float(frame.scale_max),
        "grid": "auto" if isinstance(grid, str) else float(grid_m),  # the rule: "auto" follows the largest epsilon
        "lattice": lattice.kind,
    }
    return LocationAnswer(geoms, frame, lattice, effective, u, binding, declared)


@dataclasses.dataclass(frozen=True)
class ValueAnswer:
    """The source's value of a column, checked against its public range and lattice: nothing drawn.

    ``u`` is SECRET, like the data; ``binding`` the public lattice rule a path is bound to.
    ``effective`` (the 1-D finite-precision epsilons) is None unless the answers are snapped to
    the lattice (no ``support=`` and not ``continuous``).
    """

    column: Any
    u: float
    step: float
    lo: float
    hi: float
    declared: bool
    effective: np.ndarray | None
    binding: dict
    support: Any
    value_range: Any
    continuous: bool

    @property
    def released(self) -> str:
        """What the path releases (a path answers only the quantity it was made for)."""
        return value_column(self.column)

    def largest(self, epsilon_max: float) -> float:
        """What the path costs: its largest epsilon, or the largest effective one (the lattice's) when above."""
        if self.effective is None:
            return float(epsilon_max)
        return max(float(self.effective.max()), float(epsilon_max))

    def bind(self, rng, data, source, levels: pd.DataFrame):
        """The path's stream: a seed replays only for the same data and parameters (any row order)."""
        return make_rng(rng).bind(
            unordered(data[self.column]),  # any row order: recipients are answered in label order
            unordered(levels),
            params=[repr(source), repr(self.column), self.binding, repr(self.value_range), bool(self.continuous)],
            purpose="diffuse_values",
        )

    def levels(self, epsilons) -> np.ndarray:
        """The path's levels: per unit of the value."""
        return epsilons

    def answers(self, responses) -> tuple[np.ndarray, str]:
        """The published answers (projected, raw or snapped: post-processing) and the record's finite-precision text."""
        from ..mechanisms.diffusion import project_discrete, snap_values

        if self.support is not None:
            support = np.asarray(self.support, dtype=float)
            return project_discrete(responses, support), (
                "projected to a finite public support of "
                f"{len(np.unique(support))} value(s): the answers take only those values"
            )
        if self.continuous:
            return responses, "none: continuous float64 output (explicitly requested)"
        lo, hi = self.lo, self.hi
        return snap_values(responses, self.step, lo, hi), (
            f"1-D lattice: answers are integer multiples of {self.step:g} clamped to "
            + (f"value_range [{lo:g}, {hi:g}]" if self.declared else f"the default public range +-{hi:g}")
            + "; effective epsilon per unit from the 1-D analogue of Andres et al. 2013 Thm 4.1 (Mironov "
            "2012), for values at least one step apart"
        )

    def publish(self, responses, who: Recipients, data, seeded: bool, budget: dict):
        """One answer per recipient (in label order) with its distance and epsilon, and the record."""
        responses, precision = self.answers(responses)
        eps = who.epsilons
        result = pd.DataFrame(
            {"network_distance": who.distances, "epsilon": eps, "response": responses}, index=who.labels
        )
        fields = {
            "mechanism": MECHANISM,
            "definition": "each recipient epsilon(d)-private per unit of the value; any coalition of recipients learns "
            "no more than its closest member (the largest epsilon among them)",
            "epsilon_min": float(eps.min()),
            "epsilon_max": who.largest,
            "coalition_epsilon": who.largest,
            "finite_precision": precision,
            **who.fields(),
        }
        if self.effective is not None:
            fields["effective_epsilon"] = float(self.effective.max())
        result.attrs["geopriv"] = make_record(fields, seeded=seeded, n=len(who.labels))
        result.attrs["geopriv"].update(budget)
        return result


def value_lattice(grid, eps_max: float, value_range):
    """(step, lo, hi, declared) of the public value lattice: step from grid= or the largest epsilon; the public range."""
    from ..frame import default_grid

    if isinstance(grid, str):
        if grid != "auto":
            raise GeoprivError(
                f"grid must be a step in units of the value or 'auto' for a value release, got {grid!r}."
            )
        step = default_grid(eps_max)
    else:
        if isinstance(grid, (bool, np.bool_)):
            raise ParameterTypeError("grid must be a number (the value lattice step) or 'auto', not a bool.")
        try:
            step = float(grid)
        except (TypeError, ValueError):
            raise GeoprivError("grid must be a number (the value lattice step) or 'auto'.") from None
        if not (np.isfinite(step) and step > 0):
            raise GeoprivError("grid (the value lattice step) must be finite and > 0.")
        if step > 2.0 / eps_max:
            raise GeoprivError(
                f"the value lattice step {step:g} is coarser than the noise (mean size {2.0 / eps_max:.3g} at the largest "
                "epsilon): most answers would snap back to the true value. Use a step well below 2/epsilon, or 'auto'."
            )
    if value_range is None:
        half = VALUE_RANGE_STEPS * step
        return step, -half, half, False
    try:
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError):
        raise GeoprivError("value_range must be two numbers (lo, hi): the public range of the value.") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise GeoprivError("value_range must be two finite numbers lo < hi: the public range of the value.")
    return step, lo, hi, True


def value_answer(plan: DiffusionPlan, data, who: Recipients) -> ValueAnswer:
    """Check the source's value of ``plan.value`` and fix its public lattice (step, range), before any noise."""
    from ..mechanisms.diffusion import value_lattice_epsilon

    column, source = plan.value, who.source
    if column not in data.columns or column == data.geometry.name:
        raise GeoprivError(f"value={column!r} is not an attribute column of the layer.")
    raw = data.loc[source, column]
    try:
        u = float(raw)
    except (TypeError, ValueError):
        raise GeoprivError(f"value column {column!r} must be numeric at the source row (e.g. 0/1 for a bit).") from None
    if not np.isfinite(u):
        raise GeoprivError(f"value column {column!r} is missing (NaN) at the source row; nothing can be released.")
    step, lo, hi, declared = value_lattice(plan.grid, who.largest, plan.value_range)
    lattice = plan.support is None and not plan.continuous
    effective = None
    if lattice:
        if not lo <= u <= hi:
            raise GeoprivError(
                f"the value of column {column!r} at the source row {source!r} lies outside the public range "
                + ("declared" if declared else f"+-{hi:g} (the default: {VALUE_RANGE_STEPS:g} lattice steps)")
                + ".",
                fix=_VALUE_RANGE_FIX,
            )
        r_max = max(abs(lo), abs(hi)) + (hi - lo)
        eps = who.epsilons
        unique = np.unique(eps)
        eff_unique = np.array([value_lattice_epsilon(e, step, r_max) for e in unique])
        effective = eff_unique[np.searchsorted(unique, eps)]
    binding = {"kind": "value", "grid": "auto" if isinstance(plan.grid, str) else float(step)}
    return ValueAnswer(
        column, u, step, lo, hi, declared, effective, binding, plan.support, plan.value_range, plan.continuous
    )


# ---------------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True)
class DiffusionPlan(Executes):
    """Everything public about a graded release over a network, fixed before any row is looked at.

    Built by :func:`plan_diffusion` from the CRS and the public parameters of
    :func:`geopriv.diffuse_locations` (which documents them): the epsilon schedule (checked
    non-increasing), the network and its distance, the source's label, what is released
    (``value=None``: the location), the frame's and the lattice's rules, the ledger.  The
    network is public; the secrets (the path of an earlier release, the seed) are given to the
    run.  ``plan.run(data, store=, rng=, path=)`` releases ``data`` (see :mod:`geopriv.release.base`).
    """

    kind: ClassVar[str] = "diffusion"

    crs: Any = dataclasses.field(repr=False)
    schedule: Any  # an EpsilonSchedule (geopriv.network.epsilon_of_distance)
    source: Any
    graph: Any = dataclasses.field(repr=False)
    distance: str = "hops"
    value: Any = None
    support: Any = None
    value_range: Any = None
    continuous: bool = False
    bounds: Any = None
    grid: Any = "auto"
    max_distortion: float = DEFAULT_MAX_DISTORTION
    ledger: Any = None
    on_unreachable: str = "warn"
    tolerance: float = 0.0
    weight: Any = dataclasses.field(default=None, repr=False)
    keep: tuple = ()
    person: Any = None

    @property
    def unit(self) -> str:
        """The budget unit the source's person is charged in: per ground metre, or per unit of the value."""
        return PER_METRE if self.value is None else value_unit(self.value)

    def run(self, data, *, store=None, rng=None, progress=None, path=None):
        """Release ``data`` under this plan: ``(answers, new path)``; ``path`` the SECRET path of an earlier release."""
        with opened_store(store) as store:
            if is_dask(data):
                return self.run_lazy(data, store=store, rng=rng, progress=progress)
            return self.run_memory(data, store=store, rng=rng, progress=progress, path=path)

    def run_lazy(self, ddf, *, store=None, rng=None, progress=None):
        """There is no lazy graded release (it answers about one person): a dask frame is refused."""
        raise ParameterTypeError(_PEOPLE_TYPE)

    def run_memory(self, data, *, store=None, rng=None, progress=None, path=None):
        """Release the source's location (or value) in ``data`` to every connected row: ``(answers, new path)``.

        The checks against the plan, then the one charge (:meth:`draw`) just before the noise,
        the answers and their record, then the warning about unreachable rows.  ``progress`` is
        accepted for the contract; one path is drawn at once.
        """
        make_rng(rng)  # an unusable rng= is refused before any check that could charge
        self.check_input(data)
        who = self.recipients(data, path)
        store = open_store(store)
        person = self.payer(data, who.source, store)
        if self.value is None:
            answer = location_answer(
                data, who.source, who.epsilons, bounds=self.bounds, grid=self.grid, max_distortion=self.max_distortion
            )
        else:
            answer = value_answer(self, data, who)
        if path is not None:  # before any charge: a path made for anything else answers nothing
            path.check_binding(source=who.source, released=answer.released, frame=answer.binding, value=answer.u)
        result, new_path = self.draw(data, who, answer, store, person, rng, path)
        if who.warning is not None:
            from ..network import UnreachableRecipientsWarning

            # the frame that called diffuse_locations' budget-store wrapper, as it always has
            warnings.warn(who.warning, UnreachableRecipientsWarning, stacklevel=4)
        return result, new_path

    def check_input(self, data) -> None:
        """Refuse anything but a GeoDataFrame of the people in the plan's CRS."""
        check_people(data)
        given, planned = data.crs, self.crs
        if given is planned:
            return
        if given is None or planned is None or not as_crs(given).equals(as_crs(planned)):
            raise GeoprivError(
                "the people's CRS is not the one this plan was built for; build it with plan_diffusion(data.crs, ...)."
            )

    def recipients(self, data, path) -> Recipients:
        """Check the people against the plan and find who is answered (public: the network and the labels)."""
        from ..network import network_distances, recipient_order

        if self.source not in data.index:
            raise GeoprivError(
                f"source {self.source!r} is not a row label of the layer. Pass the index label of the person "
                "whose location is released."
            )
        check_unique_people(data.index)
        source = data.index[data.index.get_loc(self.source)]  # the label as stored (its type is part of a binding)
        check_path(path)
        d = network_distances(
            data, self.graph, source, distance=self.distance, tolerance=self.tolerance, weight=self.weight
        )
        order = recipient_order(data.index)
        if INDEX not in self.keep:  # the recipients' labels and their order are published
            check_labels_in_label_order(data.geometry.iloc[order])
        return reached(d.iloc[order], source, self.schedule, self.distance, self.on_unreachable)

    def payer(self, data, source, store):
        """The person the store charges: the source's ``person=`` id, or its label (None without a store)."""
        if store is None:
            return None
        if self.person is not None and self.person not in data.columns:
            raise GeoprivError(f"person={self.person!r} is not a column of the data.", fix=PERSON_FIX)
        return source if self.person is None else data.loc[source, self.person]

    def charged(self, who: Recipients) -> dict:
        """The store audit's record of the release (public parameters only)."""
        return {
            "mechanism": MECHANISM,
            "distance": self.distance,
            "recipients": int(len(who.labels)),
            "coalition_epsilon_per_m" if self.value is None else "coalition_epsilon": who.largest,
        }

    def draw(self, data, who: Recipients, answer, store, person, rng, path):
        """The release's one charge, its noise and its settling: ``(answers, new path)``.

        After every check and before any noise, the ledger is checked and the store charged the
        path's largest (effective) epsilon, or the increase of an extended path's; then ONE path
        is drawn (extending ``path``, or fresh and bound to this release) and every recipient
        answered from it; the ledger and the store keep the new path.
        """
        from ..mechanisms.diffusion import diffuse

        largest = answer.largest(who.largest)
        if self.ledger is not None:
            self.ledger.check(who.source, who.largest, path, value=self.value)
        reservation = contextlib.nullcontext()
        if store is not None:
            reservation = store.charge_path(
                person, largest, unit=self.unit, path=path, kind="diffuse_locations", parameters=self.charged(who)
            )
            reservation.start()
        with reservation:
            source_rng = answer.bind(rng, data, who.source, who.levels_table())
            responses, new_path = diffuse(answer.u, answer.levels(who.epsilons), source_rng.generator, path=path)
            if path is None:
                new_path = new_path.bind(
                    source=who.source, released=answer.released, frame=answer.binding, value=answer.u
                )
            if self.ledger is not None:
                self.ledger.record(who.source, who.largest, path, new_path, value=self.value)
        budget = {}
        if store is not None:
            store.record_path(new_path, person, largest, unit=self.unit, old_path=path)
            budget = budget_fields(store, self.unit, None)
        return answer.publish(responses, who, data, source_rng.seeded, budget), new_path


def plan_diffusion(
    crs,
    epsilon,
    *,
    source,
    graph,
    distance: str = "hops",
    value=None,
    support=None,
    value_range=None,
    continuous: bool = False,
    bounds=None,
    grid="auto",
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    ledger=None,
    on_unreachable: str = "warn",
    tolerance: float = 0.0,
    weight=None,
    keep=(),
    person=None,
) -> DiffusionPlan:
    """The public part of a graded release over a network (no data involved): parameters checked, schedule fixed.

    The parameters are :func:`geopriv.diffuse_locations`' (which documents them).  What needs
    the rows is checked by the run, in the order the release always has: the source and the
    labels, the network and its ``distance``, then the points and the frame (or the value and
    its lattice), then the budget.
    """
    from ..network import epsilon_of_distance

    if on_unreachable not in ("warn", "raise", "ignore"):
        raise GeoprivError(f"on_unreachable must be 'warn', 'raise' or 'ignore', got {on_unreachable!r}.")
    if support is not None and value is None:
        raise GeoprivError("support= projects released values; give value=<column> too (locations are not projected).")
    if value is None and (value_range is not None or continuous):
        raise GeoprivError(
            "value_range= and continuous= apply to value releases; give value=<column> too (locations "
            "are always snapped to the public lattice)."
        )
    if isinstance(continuous, (np.bool_,)):
        continuous = bool(continuous)
    if not isinstance(continuous, bool):
        raise ParameterTypeError("continuous must be True or False.")
    keep = (keep,) if isinstance(keep, str) else tuple(keep or ())
    if any(k != INDEX for k in keep):
        raise GeoprivError(f"keep= can only hold {INDEX!r} here (the recipients' labels): no column is released.")
    return DiffusionPlan(
        crs,
        epsilon_of_distance(epsilon),
        source,
        graph,
        distance,
        value,
        support,
        value_range,
        continuous,
        bounds,
        grid,
        max_distortion,
        ledger,
        on_unreachable,
        tolerance,
        weight,
        keep,
        person,
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

    The location step of a graded release, kept for callers of the release path before
    :func:`plan_diffusion` (which geopriv itself runs, charging in its run): the checks, frame
    and lattice of :func:`location_answer`; a given ``path`` must be bound to this source, to
    the location, to this value and to this frame, else
    :class:`~geopriv.exceptions.PathBindingError` before any noise and before ``before_noise()``
    (the caller's budget check, given the largest effective epsilon); then one path over the
    recipients' levels (a new path is bound to this release), truncation and snapping, and the
    provenance fields from the allowlist (the path is never in them).

    Returns (responses (m, 2) in the input CRS, effective epsilons per metre, path, record fields, seeded).
    """
    from ..mechanisms.diffusion import diffuse

    eps = np.asarray(epsilons, dtype=float)
    answer = location_answer(data, source, eps, bounds=bounds, grid=grid, max_distortion=max_distortion)
    check_path(path)
    label = answer.geoms.index[answer.geoms.index.get_loc(source)]
    if path is not None:
        path.check_binding(source=label, released=LOCATION, frame=answer.binding, value=answer.u)
    if before_noise is not None:  # the caller's budget check and charge, with the largest effective epsilon
        before_noise(float(answer.effective.max()))
    source_rng = answer.bind(rng, data, source, levels_table(recipients, eps))
    responses, new_path = diffuse(answer.u, answer.levels(eps), source_rng.generator, path=path)
    if path is None:
        new_path = new_path.bind(source=label, released=LOCATION, frame=answer.binding, value=answer.u)
    return answer.points(responses), answer.effective, new_path, answer.fields(eps), source_rng.seeded
