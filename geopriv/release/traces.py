"""The trace release kind: everything public about a trace release, fixed before any trace is looked at."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..exceptions import Fix, ParameterError
from ..frame import (
    DEFAULT_MAX_DISTORTION,
    PublicFrame,
    check_grid,
    check_noise_above_precision,
    public_frame,
    public_lattice,
    truncate_and_snap,
)
from ..precision import check_noise_scale
from .common import declared_diameter


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
        from ..precision import ANGLE_RESOLUTION, discretisation_epsilon

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
        from ..precision import ANGLE_RESOLUTION, discretisation_epsilon

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
        from ..mechanisms.predictive import FixedRate, FixedUtility

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
    from ..mechanisms.predictive import IndependentMechanism, PredictiveMechanism, TimeSkip, budget_manager
    from ..precision import resolve_epsilon

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
        area_m=declared_diameter(crs, bounds, None),
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
