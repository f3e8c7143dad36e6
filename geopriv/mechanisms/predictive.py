"""Predictive mechanism for mobility traces: private test, budget managers, skip rules.

Chatzikokolakis, Palamidessi, Stronati. "A Predictive Differentially-Private Mechanism for
Mobility Traces". PETS 2014 (LNCS 8555), arXiv:1311.4008.  Section numbers below are the
paper's.

Derivation note
---------------
*Run.*  A trace x_1..x_n is released as a run r = [(z_1, b_1), ..., (z_n, b_n)]: reported
points and easy/hard flags, both public (sec. 3).  A step uses the budget manager's
(eps_theta, eps_N, l) = beta(r) and the prediction z~ = Omega(r), both functions of the public
run (and public time stamps) only:

    Theta(eps_theta, l, z~)(x) = easy  iff  d(x, z~) <= l + Lap(1/eps_theta)            (eq. 2)
    easy -> report z~ ;  hard -> report N(eps_N)(x), planar Laplace (Andres et al. 2013).

Theta is eps_theta-private: x -> d(x, z~) is 1-Lipschitz, so shifting x by d(x, x') shifts the
threshold comparison by at most d(x, x') and Laplace noise of scale 1/eps_theta pays
eps_theta * d(x, x') for it (Fact 1).  *Lemma 1*: the run costs

    eps(r) = sum over tested steps of eps_theta + sum over hard steps of eps_N,

and the mechanism is eps * d_inf-private for eps = sup_r eps(r) (Theorem 3.1).  A skipped test
(eps_theta = 0, l = -inf: straight to noise; or l = +inf: report the prediction) costs nothing
(Fact 2).  Budget managers here are eps-bounded: before a step is run the worst case
(eps_theta + eps_N) is *reserved* with the accountant (:mod:`geopriv.accounting`), which
refuses before any noise is drawn; the public outcome then settles the Lemma 1 cost (the test
alone on an easy step) and frees the rest.  Hence every run costs <= eps, whatever happens.

*Accuracy constants (sec. 4).*  alpha_N(delta) = c_N / eps_N with c_N = icpl(1, delta), the
delta-quantile of the planar Laplace radius (Gamma(2) radius: c_N(0.9) = 3.8897); and
alpha_theta(delta) = c_theta / eps_theta with c_theta = icll(1, delta) = -ln(2 (1 - delta)),
the one-sided delta-quantile of the linear Laplace (c_theta(0.9) = ln 5 = 1.609: only noise
that *raises* the threshold lets a bad prediction through).  With eta = 0.5, gamma = 0.8 these
reproduce the paper's "at least 46 % of points must be predicted":
eta * c_theta / c_N * (1 + 1/gamma) = 0.465.

*Budget managers (Fig. 3).*  Utility: alpha = alpha_N = eta (l + alpha_theta); threshold
ratio gamma = alpha_theta / l.  Hence l = alpha_theta / gamma and

    fixed utility (eps, alpha):  eps_N = c_N / alpha,  eps_theta = eta c_theta (1 + 1/gamma) / alpha,
    fixed rate (eps, rho, PR):   eps_N = rho / ((1 - PR) + k),  eps_theta = k eps_N,
                                 k = eta (c_theta / c_N) (1 + 1/gamma),
    both:                        l = c_theta / (gamma eps_theta),

from rho = eps_theta + (1 - PR) eps_N (expected spend per step, Lemma 1 with hard steps
spread evenly).  The fixed-rate manager recomputes rho at every step from the budget actually
left ("re-done at each step with the actual remaining budget", sec. 4): the paper's literal
rho_i = remaining / max(1/rate - i, 1) (``horizon=None``), or by default
rho_i = rate * total + savings / 3 (savings = i * rate * total - spent), which reinvests what
easy steps saved within a few steps; it estimates PR from the trace's own public run, starting
from ``prediction_rate``.  Skips, the prediction and every manager input are public, so the
choices cost nothing beyond Lemma 1.

*Vectorisation.*  The recursion is only within a trace: step i of every trace is computed at
once (numpy over traces).  Traces are ranked by length and the rows laid out step-major, so
the entries of step i of the traces still running form one contiguous block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..accounting import BudgetAccountant
from ..exceptions import Fix, GeoprivError, ParameterError, ParameterTypeError
from ..keys import RowStreams, rows_of
from .planar_laplace import check_epsilon, polar_noise, radius_quantile

__all__ = [
    "budget_manager",
    "noise_constant",
    "theta_constant",
    "min_prediction_rate",
    "private_test",
    "PrivateTest",
    "FixedUtility",
    "FixedRate",
    "TimeSkip",
    "Parrot",
    "ClusterMean",
    "PublicRun",
    "per_trace_predictor",
    "Traces",
    "TraceRun",
    "PredictiveMechanism",
    "IndependentMechanism",
    "NOISE",
    "PREDICTED",
    "SKIPPED",
    "EXHAUSTED",
    "STATUS_NAMES",
]

# Status codes of a step (public): what was reported for that query.
NOISE = np.int8(0)  # hard: fresh planar Laplace noise (test failed, or no test: first point / skip to noise)
PREDICTED = np.int8(1)  # easy: the private test accepted the prediction, which was reported
SKIPPED = np.int8(2)  # the test was skipped (time rule) and the prediction reported, free
EXHAUSTED = np.int8(3)  # the budget could not pay for this step: nothing was released
STATUS_NAMES = ("noise", "predicted", "skipped", "exhausted")

_TEST, _NOISE, _PREDICT = 0, 1, 2  # step modes chosen before anything is drawn


# ---------------------------------------------------------------------------- constants
def noise_constant(delta: float = 0.9) -> float:
    """c_N(delta): planar Laplace noise with eps = 1 stays within c_N with probability delta."""
    return float(radius_quantile(delta, 1.0))


def theta_constant(delta: float = 0.9) -> float:
    """c_theta(delta) = -ln(2 (1 - delta)): P(Lap(1) <= c_theta) = delta (one-sided), delta >= 0.5."""
    if isinstance(delta, bool) or not 0.5 < delta < 1:
        raise ParameterError(
            "delta must be in (0.5, 1) (the paper uses 0.9): at 0.5 or below the test threshold vanishes."
        )
    return -math.log(2.0 * (1.0 - delta))


def min_prediction_rate(eta: float = 0.5, gamma: float = 0.8, delta: float = 0.9) -> float:
    """Prediction rate above which the predictive mechanism beats independent noise (sec. 4).

    ``eta * c_theta / c_N * (1 + 1/gamma)``: 0.465 for the paper's eta = 0.5, gamma = 0.8.
    """
    return eta * theta_constant(delta) / noise_constant(delta) * (1.0 + 1.0 / gamma)


def _check_unit(value, name, low=0.0, high=1.0, low_open=True):
    v = float(value)
    if not (low < v <= high if low_open else low <= v <= high) or not math.isfinite(v):
        raise ParameterError(f"{name} must be in {'(' if low_open else '['}{low}, {high}], got {value!r}.")
    return v


# ---------------------------------------------------------------------------- the test
def private_test(distance, threshold, epsilon, rng: np.random.Generator) -> np.ndarray:
    """Theta (eq. 2), vectorised: True ("easy") where ``distance <= threshold + Lap(1/epsilon)``.

    ``distance`` is d(x, prediction) for the secret x; ``threshold`` and ``epsilon`` are numbers
    or arrays of the same length.  Each element is ``epsilon``-private with respect to x
    (Fact 1): the distance is 1-Lipschitz in x.  Consumes one Laplace draw per element.
    """
    distance = np.asarray(distance, dtype=float)
    epsilon = np.asarray(epsilon, dtype=float)
    if np.any(~np.isfinite(epsilon)) or np.any(epsilon <= 0):
        raise ParameterError("The test's epsilon must be finite and > 0 (a skipped test is not drawn at all).")
    return distance <= rng.laplace(threshold, 1.0 / epsilon, distance.shape)


@dataclass(frozen=True)
class PrivateTest:
    """Theta(epsilon, threshold, z~): is the prediction within ``threshold`` of the secret?

    Parameters
    ----------
    epsilon : float
        Privacy loss of the test per unit of distance (per metre).
    threshold : float
        l, in the same unit as distances.
    """

    epsilon: float
    threshold: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "test epsilon"))
        t = float(self.threshold)
        if not math.isfinite(t):
            raise ParameterError("The threshold must be finite (a skipped test is not a PrivateTest).")
        object.__setattr__(self, "threshold", t)

    def __call__(self, x, prediction, rng: np.random.Generator) -> np.ndarray:
        """Run the test on secrets ``x`` (n, 2) against ``prediction`` ((2,) or (n, 2)): bool "easy"."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        d = np.hypot(*(x - np.asarray(prediction, dtype=float)).T)
        return private_test(d, self.threshold, self.epsilon, rng)

    def pass_probability(self, distance) -> np.ndarray:
        """P(easy | d(x, z~) = distance): the Laplace CDF at threshold - distance."""
        u = self.epsilon * (self.threshold - np.asarray(distance, dtype=float))
        return np.where(u >= 0, 1.0 - 0.5 * np.exp(-np.abs(u)), 0.5 * np.exp(-np.abs(u)))

    def privacy_loss(self, distance) -> np.ndarray:
        """Worst-case log-likelihood ratio of the outcome between secrets ``distance`` apart."""
        return self.epsilon * np.asarray(distance, dtype=float)

    def alpha(self, delta: float = 0.9) -> float:
        """alpha_theta(delta) = c_theta(delta) / epsilon: how far beyond l a passing prediction can be."""
        return theta_constant(delta) / self.epsilon


# ---------------------------------------------------------------------------- public state
@dataclass
class StepState:
    """What a budget manager may look at for the traces at one step: public values only.

    Arrays have one entry per trace still running.  ``step`` is the 0-based index of the
    current query in every one of them.
    """

    step: int
    total: np.ndarray
    remaining: np.ndarray
    n_tests: np.ndarray
    n_passed: np.ndarray
    n_hard: np.ndarray
    elapsed: np.ndarray  # seconds since the last hard step (inf before the first one)


# ---------------------------------------------------------------------------- budget managers
@dataclass(frozen=True, kw_only=True)
class _Manager:
    eta: float = 0.5
    gamma: float = 0.8
    delta: float = 0.9

    def __post_init__(self):
        object.__setattr__(self, "eta", _check_unit(self.eta, "eta"))
        object.__setattr__(self, "gamma", _check_unit(self.gamma, "gamma"))
        if isinstance(self.delta, bool) or not 0.5 < float(self.delta) < 1:
            raise ParameterError(
                "delta must be in (0.5, 1) (the paper uses 0.9): at 0.5 or below the private test's threshold vanishes."
            )
        object.__setattr__(self, "delta", float(self.delta))
        # derived constants, computed once (the managers are immutable)
        object.__setattr__(self, "_c_noise", noise_constant(self.delta))
        object.__setattr__(self, "_c_test", theta_constant(self.delta))

    @property
    def c_noise(self) -> float:
        """c_N(delta) = icpl(1, delta): 3.8897 for delta = 0.9."""
        return self._c_noise

    @property
    def c_test(self) -> float:
        """c_theta(delta) = icll(1, delta) = -ln(2 (1 - delta)): ln 5 for delta = 0.9."""
        return self._c_test

    @property
    def k(self) -> float:
        """eps_theta / eps_N = eta c_theta / c_N (1 + 1/gamma): also the break-even prediction rate."""
        return self.eta * self._c_test / self._c_noise * (1.0 + 1.0 / self.gamma)

    @property
    def min_prediction_rate(self) -> float:
        """The prediction rate the mechanism must reach to beat independent noise (sec. 4)."""
        return self.k

    def threshold(self, eps_theta):
        """l = c_theta / (gamma eps_theta) (infinite where eps_theta = 0: no test)."""
        with np.errstate(divide="ignore"):
            return self._c_test / (self.gamma * np.asarray(eps_theta, dtype=float))

    def accuracy_of(self, eps_noise):
        """alpha_N(delta) = c_N / eps_N in metres (infinite where eps_N = 0)."""
        with np.errstate(divide="ignore"):
            return self._c_noise / np.asarray(eps_noise, dtype=float)


@dataclass(frozen=True, kw_only=True)
class FixedUtility(_Manager):
    """Budget manager of Fig. 3(a): fixed accuracy ``accuracy`` (alpha(delta), metres), minimal rate.

    Every step gets eps_N = c_N / alpha and eps_theta = eta c_theta (1 + 1/gamma) / alpha, so a
    hard step is within ``accuracy`` of the secret with probability delta; the mechanism stops
    when the remaining budget cannot pay for a step at that accuracy.

    Parameters
    ----------
    eta : float
        Utility slack, in (0, 1] (the paper's 0.5 .. 1; default 0.5).
    gamma : float
        The ratio of the test's noise to its threshold, in (0, 1] (default 0.8).
    delta : float
        The accuracy level, in (0.5, 1): a hard step is within ``accuracy`` of the secret with this
        probability (default 0.9).
    accuracy : float
        The accuracy aimed at, alpha(delta) in ground metres (required).

    Raises
    ------
    ParameterError
        A value out of its range, or no ``accuracy``.

    See Also
    --------
    FixedRate : The other manager: a fixed share of the budget per query, the best accuracy.
    sanitize_traces : Takes a manager as ``budget=``.

    Examples
    --------
    >>> manager = geopriv.FixedUtility(accuracy=300)   # 300 m with probability 0.9
    >>> eps_test, eps_noise, threshold = manager.configure()   # per ground metre, and metres
    >>> round(eps_noise, 5), round(eps_test, 5), round(threshold, 1)
    (0.01297, 0.00604, 333.3)

    A trace's budget of "ln 10 within 100 m" (0.023 per ground metre) pays for a single step
    at that accuracy (0.019 per metre); then the trace stops:

    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))
    >>> queries = geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", rng=0)
    >>> out = geopriv.sanitize_traces(queries, traj_id="trajectory_id", time="t", level=math.log(10), radius=100,
    ...                               budget=manager, bounds=(116.0, 39.5, 117.0, 40.5), rng=0)
    >>> ledger = geopriv.trace_ledger(out)
    >>> ledger["released"].tolist(), bool((ledger["spent"] <= ledger["budget"]).all())
    ([1, 1, 1, 1, 1], True)
    """

    accuracy: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "accuracy", check_epsilon(self.accuracy, "accuracy (metres)"))

    def configure(self):
        """(eps_theta, eps_N, l) per metre, metres: constants for this manager."""
        eps_n = self.c_noise / self.accuracy
        eps_t = self.k * eps_n
        return eps_t, eps_n, float(self.threshold(eps_t))

    def plan(self, state: StepState):
        eps_t, eps_n, _ = self.configure()
        n = len(state.remaining)
        et = np.full(n, eps_t)
        return et, np.full(n, eps_n), self.threshold(et)

    def plan_noise(self, state: StepState):
        return np.full(len(state.remaining), self.c_noise / self.accuracy)

    def fit(self, eps_theta, eps_noise, remaining, tested, total=None):
        """Affordability under an eps-bounded manager: a test that cannot be paid together with
        its noise falls back to noise alone (same accuracy); otherwise the trace stops."""
        worst = np.where(tested, eps_theta + eps_noise, eps_noise)
        ok = worst <= remaining
        to_noise = tested & ~ok & (eps_noise <= remaining)
        tested = tested & ok
        run = ok | to_noise
        return eps_theta, eps_noise, tested, run

    def exhausted(self, state: StepState):
        """True where not even a noise step at the target accuracy can be paid: the trace stops."""
        return state.remaining < self.c_noise / self.accuracy

    def accuracy_reference(self, state: StepState):
        """The accuracy the skip rule compares travel with: ``accuracy``."""
        return np.full(len(state.remaining), self.accuracy)


@dataclass(frozen=True, kw_only=True)
class FixedRate(_Manager):
    """Budget manager of Fig. 3(b): fixed budget rate (fraction of the total per query), best accuracy.

    Parameters
    ----------
    eta : float
        Utility slack, in (0, 1] (the paper's 0.5 .. 1; default 0.5).
    gamma : float
        The ratio of the test's noise to its threshold, in (0, 1] (default 0.8).
    delta : float
        The accuracy level, in (0.5, 1) (default 0.9).
    rate : float
        Budget per query as a fraction of the trace's total, e.g. 0.033 for about 30 queries.
    prediction_rate : float
        Expected prediction rate PR used until the trace's own run says better (paper sec. 4).
    prior_weight : float
        How many tests the prior ``prediction_rate`` counts for in the running estimate.
    min_step : float
        The trace stops when less than ``min_step * rate * total`` is left (default 1: when a
        query at the nominal rate can no longer be paid, as for independent noise).
    horizon : float or None
        How fast budget saved by easy steps is reinvested: rho_i = rate * total + savings / horizon
        (savings = i * rate * total - spent).  Default 3: savings go to the next few hard
        points (the "alternance" of sec. 4), so short traces use their rate too.  ``None``:
        the paper's literal rule, rho_i = remaining / max(1/rate - i, 1), spreading what is
        left over the remaining planned queries.

    Raises
    ------
    ParameterError
        A value out of its range, or no ``rate``.

    See Also
    --------
    FixedUtility : The other manager: a fixed accuracy in metres, as many queries as it pays for.
    sanitize_traces : Takes a manager as ``budget=`` (or ``budget="fixed_rate", rate=...``).

    Notes
    -----
    The rate is an average: a hard step may spend more than ``rate * total`` (paid for by
    earlier or later easy steps), never more than the trace's remaining budget.

    Examples
    --------
    >>> manager = geopriv.FixedRate(rate=0.05, horizon=None)   # about 20 queries, the paper's literal rule
    >>> round(manager.min_prediction_rate, 3)   # predictions must pass this often to beat independent noise
    0.465
    >>> fixes = gpd.read_file(geopriv.datasets.get_path("geolife"))
    >>> queries = geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", rng=0)
    >>> out = geopriv.sanitize_traces(queries, traj_id="trajectory_id", time="t", level=math.log(10), radius=100,
    ...                               budget=manager, bounds=(116.0, 39.5, 117.0, 40.5), rng=0)
    >>> ledger = geopriv.trace_ledger(out)
    >>> bool((ledger["spent"] <= ledger["budget"]).all()), bool((ledger["released"] > 1).all())
    (True, True)
    """

    rate: float = 0.0
    prediction_rate: float = 0.5
    prior_weight: float = 2.0
    min_step: float = 1.0
    horizon: float | None = 3.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "rate", _check_unit(self.rate, "rate (fraction of the budget per query)"))
        pr = float(self.prediction_rate)
        if not 0 <= pr < 1:
            raise ParameterError("prediction_rate must be in [0, 1).")
        if not float(self.prior_weight) > 0:
            raise ParameterError("prior_weight must be > 0.")
        if not 0 < float(self.min_step) <= 1 / self.rate:
            raise ParameterError("min_step must be > 0 (a fraction of the per-query budget rate * total).")
        if self.horizon is not None and not (math.isfinite(float(self.horizon)) and float(self.horizon) >= 1):
            raise ParameterError("horizon must be None or a number of steps >= 1.")

    def step_budget(self, state: StepState):
        """rho_i = remaining / max(1/rate - i, 1): the rate that spends what is left over the planned queries.

        With ``horizon`` h: rho_i = rate * total + savings / h, savings = i * rate * total - spent,
        so budget saved by easy steps is spent within about h steps.
        """
        if self.horizon is None:
            return state.remaining / max(1.0 / self.rate - state.step, 1.0)
        nominal = self.rate * state.total
        savings = state.step * nominal - (state.total - state.remaining)
        return np.clip(nominal + savings / self.horizon, 0.0, state.remaining)

    def estimated_prediction_rate(self, state: StepState):
        w = float(self.prior_weight)
        return (state.n_passed + w * self.prediction_rate) / (state.n_tests + w)

    def plan(self, state: StepState):
        rho = self.step_budget(state)
        pr = self.estimated_prediction_rate(state)
        eps_n = rho / ((1.0 - pr) + self.k)
        eps_t = self.k * eps_n
        return eps_t, eps_n, self.threshold(eps_t)

    def plan_noise(self, state: StepState):
        return self.step_budget(state)

    def fit(self, eps_theta, eps_noise, remaining, tested, total):
        """Scale a step down to the budget left; stop when less than ``min_step`` queries' worth is left."""
        worst = np.where(tested, eps_theta + eps_noise, eps_noise)
        scale = np.minimum(1.0, remaining / np.where(worst > 0, worst, 1.0))
        run = np.ones(len(remaining), dtype=bool)  # exhaustion was checked before (exhausted())
        return eps_theta * scale, eps_noise * scale, tested, run

    def exhausted(self, state: StepState):
        """True where less than ``min_step`` queries' worth at the nominal rate is left: the trace stops."""
        return state.remaining < (self.min_step * self.rate * (1.0 - 1e-9)) * state.total

    def accuracy_reference(self, state: StepState):
        """The accuracy the skip rule compares travel with: c_N / (rate * total), independent noise's at this rate."""
        return self.c_noise / (self.rate * state.total)


# ---------------------------------------------------------------------------- skip rules
@dataclass(frozen=True)
class TimeSkip:
    """Skip the test and report the prediction, for free, when time stamps say it is close (sec. 4).

    The user cannot have moved more than ``speed * elapsed`` since the last hard point; when
    that is below the accuracy the manager aims at, the prediction is reported untested.
    Time stamps are public, so the decision costs no budget (Fact 2).  ``speed`` is an assumed
    maximum speed in metres per second (the paper uses 0.5 km/h = 0.139 m/s); a user moving
    faster gets less accurate points, never less privacy.
    """

    speed: float

    def __post_init__(self):
        object.__setattr__(self, "speed", check_epsilon(self.speed, "skip_speed (m/s)"))

    def skip(self, elapsed, accuracy):
        return self.speed * elapsed < accuracy


# ---------------------------------------------------------------------------- predictors
@dataclass
class PublicRun:
    """The public run of the traces that need a prediction at this step, for custom predictors.

    Only public values: reported points, easy/hard flags, time stamps.  Coordinates are
    metres in the local metric frame the mechanism works in.

    Attributes
    ----------
    step : int
        Index of the current query in each trace (0-based); the history has ``step`` entries.
    last_reported : (m, 2) ndarray
        The last reported point of each trace (the parrot prediction).
    """

    step: int
    last_reported: np.ndarray
    _slots: np.ndarray  # (m,) rank of each trace: its entry of step j is at _offsets[j] + rank
    _offsets: np.ndarray
    _reported: np.ndarray  # (n, 2) step-major, filled up to the current step
    _hard: np.ndarray
    _times: np.ndarray

    def __len__(self):
        return len(self._slots)

    def _index(self, steps):
        return self._offsets[:steps][None, :] + self._slots[:, None]

    @property
    def reported(self) -> np.ndarray:
        """(m, step, 2) points reported so far, oldest first."""
        return self._reported[self._index(self.step)]

    @property
    def hard(self) -> np.ndarray:
        """(m, step) whether each reported point was fresh noise (hard) or a prediction (easy)."""
        return self._hard[self._index(self.step)]

    @property
    def times(self) -> np.ndarray:
        """(m, step + 1) time stamps in seconds, the current query's last."""
        return self._times[self._index(self.step + 1)]


def per_trace_predictor(fn: Callable) -> Callable:
    """Wrap ``fn(reported (i, 2), hard (i,), times (i + 1,)) -> (x, y)`` as a predictor.

    One Python call per trace and step: flexible, slower than a vectorised predictor
    (a callable taking a :class:`PublicRun` and returning an (m, 2) array).
    """

    def predictor(run: PublicRun) -> np.ndarray:
        rep, hard, times = run.reported, run.hard, run.times
        return np.array([np.asarray(fn(rep[j], hard[j], times[j]), dtype=float).reshape(2) for j in range(len(run))])

    predictor.__name__ = getattr(fn, "__name__", "per_trace")
    predictor.per_trace = True  # each trace's prediction depends on its own public run only
    return predictor


@dataclass(frozen=True)
class Parrot:
    """The paper's prediction (eq. 7): the last reported point."""

    name = "parrot"

    def initial(self, n):
        return {}

    def predict(self, last_reported, stats, sl):
        return last_reported

    def update(self, stats, idx, z, eps_noise):
        return None


@dataclass(frozen=True)
class ClusterMean:
    """The last place, estimated from every hard report made there (public run only).

    Hard reports are noisy (planar Laplace of the step's eps_N); a user who is still at the
    same place keeps producing hard reports around it (a test that failed only because of its
    own noise, or noise without a test).  This predictor keeps the precision-weighted mean of
    the hard reports since the user was last seen to move (weights eps_N^2: Var = 6 / eps_N^2)
    and predicts it.  A new hard report farther from that mean than ``merge`` standard
    deviations of their difference starts a new place.  With a single hard report per place
    it is the parrot prediction.
    """

    merge: float = 1.5
    name = "cluster_mean"

    def __post_init__(self):
        if not (math.isfinite(float(self.merge)) and float(self.merge) > 0):
            raise ParameterError("merge must be a positive number of standard deviations.")

    def initial(self, n):
        return {"mean": np.full((n, 2), np.nan), "w": np.zeros(n)}

    def predict(self, last_reported, stats, sl):
        # traces with a hard report have a mean; the others have no prediction yet (first step)
        return stats["mean"][sl]

    def update(self, stats, idx, z, eps_noise):
        """Fold the hard reports ``z`` (made with ``eps_noise``) of the running traces ``idx`` in."""
        w = stats["w"][idx]
        m = stats["mean"][idx]
        wn = eps_noise * eps_noise
        d2 = (z[:, 0] - m[:, 0]) ** 2 + (z[:, 1] - m[:, 1]) ** 2
        # per-axis variance of (mean - new report) is 3/w + 3/wn; a miss on both axes: twice that
        with np.errstate(divide="ignore", invalid="ignore"):
            same = (w > 0) & (d2 <= (self.merge**2) * 2.0 * (3.0 / w + 3.0 / wn))
        nw = np.where(same, w + wn, wn)
        frac = (wn / nw)[:, None]
        stats["mean"][idx] = np.where(same[:, None], m + frac * (z - m), z)
        stats["w"][idx] = nw


class _CustomPredictor:
    """Adapter: a callable on the :class:`PublicRun`."""

    def __init__(self, fn):
        self.fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)

    def initial(self, n):
        return {}

    def update(self, stats, idx, z, eps_noise):
        return None


def resolve_predictor(predictor):
    """'parrot', 'cluster_mean', a predictor object, or a callable on :class:`PublicRun`."""
    if predictor is None or (isinstance(predictor, str) and predictor == "parrot"):
        return Parrot()
    if isinstance(predictor, str):
        if predictor == "cluster_mean":
            return ClusterMean()
        raise ParameterError(
            f"Unknown predictor {predictor!r}: use 'parrot' (last reported point), 'cluster_mean', or a callable "
            "taking a geopriv.mechanisms.predictive.PublicRun and returning an (m, 2) array."
        )
    if isinstance(predictor, (Parrot, ClusterMean, _CustomPredictor)):
        return predictor
    if callable(predictor):
        return _CustomPredictor(predictor)
    raise ParameterTypeError("predictor must be 'parrot', 'cluster_mean' or a callable on the public run.")


# ---------------------------------------------------------------------------- traces
@dataclass(frozen=True)
class Traces:
    """Traces laid out contiguously: rows ``starts[j] .. starts[j] + lengths[j]`` are trace j, in time order.

    ``xy`` in metres (a local metric frame), ``times`` in seconds (public).
    """

    xy: np.ndarray
    times: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    def __post_init__(self):
        xy = np.ascontiguousarray(self.xy, dtype=float)
        times = np.ascontiguousarray(self.times, dtype=float)
        starts = np.asarray(self.starts, dtype=np.int64)
        lengths = np.asarray(self.lengths, dtype=np.int64)
        if xy.ndim != 2 or xy.shape[1] != 2 or times.shape != (len(xy),):
            raise ParameterError("xy must be (n, 2) and times (n,).")
        if starts.shape != lengths.shape or np.any(lengths < 1) or lengths.sum() != len(xy):
            raise ParameterError("starts/lengths must describe non-empty traces covering every row.")
        if len(starts) and (starts[0] != 0 or np.any(starts[1:] != np.cumsum(lengths)[:-1])):
            raise ParameterError("traces must be contiguous and in order: starts = cumsum of lengths.")
        if not np.all(np.isfinite(xy)) or not np.all(np.isfinite(times)):
            raise ParameterError("coordinates and times must be finite.")
        if len(xy) > 1:
            same = np.repeat(np.arange(len(starts)), lengths)
            back = (np.diff(times) < 0) & (same[1:] == same[:-1])
            if back.any():
                raise ParameterError("times must be non-decreasing within each trace (sort each trace by time).")
        for name, v in (("xy", xy), ("times", times), ("starts", starts), ("lengths", lengths)):
            object.__setattr__(self, name, v)

    @classmethod
    def from_lengths(cls, xy, times, lengths):
        lengths = np.asarray(lengths, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else lengths
        return cls(xy, times, starts, lengths)

    @property
    def n_traces(self) -> int:
        return len(self.starts)

    def trace_of_row(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_traces), self.lengths)


@dataclass(frozen=True)
class TraceRun:
    """The public outcome of sanitising traces (no true point is stored here).

    Row arrays follow :class:`Traces`' rows; trace arrays follow its traces.

    Attributes
    ----------
    reported : (n, 2) float
        The reported points (metres, metric frame); NaN where the budget was exhausted.
    status : (n,) int8
        NOISE, PREDICTED, SKIPPED or EXHAUSTED (see ``STATUS_NAMES``).
    tested : (n,) bool
        Whether the private test was run at that step.
    eps_test, eps_noise : (n,) float
        Budget spent on the test and on noise at that step (Lemma 1 terms); the step's cost
        is their sum.
    total, spent : (n_traces,) float
        Each trace's budget and the budget its run spent (the accountant's ledger).
    """

    reported: np.ndarray
    status: np.ndarray
    tested: np.ndarray
    eps_test: np.ndarray
    eps_noise: np.ndarray
    total: np.ndarray
    spent: np.ndarray
    lengths: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def epsilon(self) -> np.ndarray:
        """Budget spent at each step (test + noise)."""
        return self.eps_test + self.eps_noise

    def per_trace(self) -> dict:
        """Per-trace counts and budgets as a dict of arrays."""
        tid = np.repeat(np.arange(len(self.lengths)), self.lengths)
        n = len(self.lengths)

        def count(mask):
            return np.bincount(tid[mask], minlength=n)

        released = self.status != EXHAUSTED
        n_tests = count(self.tested)
        n_pred = count(self.status == PREDICTED)
        return {
            "queries": self.lengths.copy(),
            "released": count(released),
            "noise": count(self.status == NOISE),
            "predicted": count(self.status == PREDICTED),
            "skipped": count(self.status == SKIPPED),
            "exhausted": count(~released),
            "tests": n_tests,
            "budget": self.total.copy(),
            "spent": self.spent.copy(),
            "remaining": np.maximum(self.total - self.spent, 0.0),
            "spent_test": np.bincount(tid, weights=self.eps_test, minlength=n),
            "spent_noise": np.bincount(tid, weights=self.eps_noise, minlength=n),
            "prediction_rate": np.divide(
                count(released & (self.status != NOISE)), count(released), out=np.zeros(n), where=count(released) > 0
            ),
            "test_pass_rate": np.divide(n_pred, n_tests, out=np.full(n, np.nan), where=n_tests > 0),
        }


def _budgets(total, accountant, n):
    """Each trace's total budget and the accountant holding it (made from ``total`` if not given)."""
    if accountant is not None:
        if len(accountant) != n:
            raise ParameterError(f"The accountant must hold one budget per trace ({n}), it holds {len(accountant)}.")
        totals = np.array(accountant.total)
        if total is not None and not np.allclose(
            np.broadcast_to(np.asarray(total, dtype=float), (n,)), totals, rtol=1e-12
        ):
            raise ParameterError("total disagrees with the accountant's totals: pass one or the other.")
        return totals, accountant
    if total is None:
        raise ParameterError("Give each trace's total budget (epsilon per metre) as total=, or an accountant=.")
    totals = np.broadcast_to(np.asarray(total, dtype=float), (n,)).copy()
    if not np.all(np.isfinite(totals)) or np.any(totals <= 0):
        raise ParameterError("Every trace's total budget must be finite and > 0 (epsilon per metre).")
    return totals, BudgetAccountant(totals)


def _generator(rng) -> np.random.Generator:
    from ..rng import make_rng

    return make_rng(rng).generator


class _RunProgress:
    """``progress(done, total)`` from a run's loop: rows whose step is decided, about 100 reports and a last one.

    ``progress`` is None, True (a tqdm bar) or a callable, as :func:`geopriv.progress.progress_callback`
    takes it; a callable may raise to cancel the run (it is called between steps, when the
    accountant's ledger is settled, so a cancelled run has spent exactly what it drew).
    """

    def __init__(self, progress, total, desc="sanitize_traces"):
        from ..progress import progress_callback

        self.callback, self.bar = progress_callback(progress, total, desc=desc)
        self.total = int(total)
        self.every = max(self.total // 100, 1)
        self.last = 0

    def __call__(self, done):
        if self.callback is not None and done - self.last >= self.every and done < self.total:
            self.last = int(done)
            self.callback(int(done), self.total)

    def finish(self):
        if self.callback is not None:
            self.callback(self.total, self.total)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _positions(cur) -> np.ndarray:
    """Row positions of a step's entries (a slice or an index array)."""
    return np.arange(cur.start, cur.stop) if isinstance(cur, slice) else np.asarray(cur)


def _unit_noise(n, rng):
    """Planar Laplace noise for eps = 1 (Gamma(2) radius, uniform angle): divide by eps_N."""
    return polar_noise(n, 1.0, rng)


# ---------------------------------------------------------------------------- mechanisms
@dataclass(frozen=True)
class PredictiveMechanism:
    """The predictive mechanism PM (Fig. 2) with a budget manager, predictor and skip rules.

    Parameters
    ----------
    manager : FixedUtility or FixedRate
        Chooses (eps_theta, eps_N, l) from the public run and stops the trace when the
        budget cannot pay for a step (eps-bounded).
    predictor : 'parrot', 'cluster_mean', or callable
        Prediction from the public run (see :class:`PublicRun`).
    skip : TimeSkip or None
        Report the prediction untested when time stamps say the user cannot be far.
    stale_after : float or None
        Seconds since the last hard point after which the test is skipped and fresh noise
        drawn directly (the prediction is presumed stale; saves the test's budget).  Public
        time stamps only, so free.  None: always test.

    The first query of a trace always skips the test (no prediction yet).
    """

    manager: FixedUtility | FixedRate
    predictor: object = "parrot"
    skip: TimeSkip | None = None
    stale_after: float | None = None

    def __post_init__(self):
        if not isinstance(self.manager, (FixedUtility, FixedRate)):
            raise ParameterTypeError("manager must be a FixedUtility or FixedRate budget manager.")
        object.__setattr__(self, "predictor", resolve_predictor(self.predictor))
        if self.skip is not None and not isinstance(self.skip, TimeSkip):
            raise ParameterTypeError("skip must be a TimeSkip or None.")
        if self.stale_after is not None:
            object.__setattr__(self, "stale_after", check_epsilon(self.stale_after, "stale_after (seconds)"))

    name = "predictive"

    def run(
        self,
        traces: Traces,
        total=None,
        rng=None,
        accountant: BudgetAccountant | None = None,
        progress=None,
        postprocess=None,
    ) -> TraceRun:
        """Sanitise every trace within its budget.

        Parameters
        ----------
        traces : Traces
            Coordinates in metres, times in seconds.
        total : float or array, optional
            Each trace's total budget (epsilon per metre).  Not needed with ``accountant``.
        rng : None, int, SeedSequence or Generator
            ``None`` uses OS entropy (see :func:`geopriv.make_rng`).
        accountant : BudgetAccountant, optional
            One label per trace, possibly already partly spent; created from ``total`` if not
            given.  A step it refuses raises :class:`~geopriv.exceptions.BudgetExceededError`
            before anything of that step is drawn.
        progress : None, True or callable(done, total)
            ``True`` shows a tqdm bar; a callable receives the number of rows whose step is
            decided, about 100 times per run and once at the end, between steps (the
            accountant settled), and may raise to cancel the run (nothing is returned; an
            ``accountant`` passed in keeps what the steps run so far spent).
        postprocess : callable((m, 2) array) -> (m, 2) array, optional
            Applied to every fresh noisy report before it is recorded, so that the predictor
            and the tests see exactly the released values (e.g. snapping to the public lattice:
            then no unrounded float bits reach a prediction).
        """
        n_tr = traces.n_traces
        n = len(traces.xy)
        totals, acc = _budgets(total, accountant, n_tr)
        rng = _generator(rng)
        report = _RunProgress(progress, n)
        try:
            return self._run(traces, totals, acc, rng, report, postprocess)
        finally:
            report.close()

    def _run(self, traces, totals, acc, rng, report, postprocess=None) -> TraceRun:
        """The steps of :meth:`run`, step-major (:class:`_StepMajor`), then the run back in the rows' order.

        At each step, for the traces still running (:class:`_Running`): the budgets from public
        values only (:func:`_step_budgets`), reserved before anything is drawn, the prediction
        (:func:`_predictions`), the private test and fresh noise for hard steps
        (:func:`_draw_step`), the cost settled, the public run recorded and the state updated
        (:meth:`_Running.advance`).
        """
        lay = _StepMajor.of(traces, rng)
        rec = _Record.empty(len(traces.xy))
        run = _Running.start(lay.order, self.predictor)
        for step in range(lay.max_len):
            if not self._step(step, lay, rec, run, totals, acc, rng, postprocess):
                break
            report(lay.offsets[step + 1])  # rows of steps 0..step: decided (stopped traces' rows stay EXHAUSTED)
        report.finish()
        # back to the rows' order
        slot = lay.slot
        return TraceRun(
            rec.reported[slot],
            rec.status[slot],
            rec.tested[slot],
            rec.eps_test[slot],
            rec.eps_noise[slot],
            totals,
            acc.spent.copy(),
            traces.lengths.copy(),
            {"mechanism": "predictive", "predictor": self.predictor.name},
        )

    def _step(self, step: int, lay, rec, run, totals, acc, rng, postprocess) -> bool:
        """Step ``step`` of every trace still running; False when none is left."""
        mgr = self.manager
        k_step = int(lay.per_step[step])
        k = k_step if run.contiguous else int(np.searchsorted(run.ranks, k_step))  # running ranks are sorted
        if not k:
            return False
        sl = slice(0, k)
        cur = slice(lay.offsets[step], lay.offsets[step] + k) if run.contiguous else lay.offsets[step] + run.ranks[sl]
        trace = run.ids[sl]
        t = lay.t[cur]
        remaining = acc.headroom(trace)
        state = StepState(
            step,
            totals[trace],
            remaining,
            run.n_tests[sl],
            run.n_pass[sl],
            run.n_hard[sl],
            np.where(run.has[sl], t - run.t_hard[sl], np.inf),
        )
        # 1.-2. the step's mode and budgets, from public information only
        first = ~run.has[sl]  # no prediction yet: straight to noise (skip the test, Fact 2)
        b = _step_budgets(self, state, first)
        # 3. reserve the worst case BEFORE drawing anything (raises if a manager overspends)
        acc.reserve(b.worst, trace, assume_unique=True)
        # 4.-5. prediction (public run only), the private test, fresh noise for hard steps only
        zt = _predictions(self.predictor, step, sl, b.go & ~first, lay, rec, run)
        easy, hard, z = _draw_step(mgr, b, lay.xy[cur], zt, lay.streams(rng, cur), postprocess)
        # 6. settle the Lemma 1 cost: the test where it ran, the noise on hard steps
        spent_n = np.where(hard, b.eps_n, 0.0)
        acc.settle(b.worst, b.eps_t + spent_n, trace, assume_unique=True)
        # 7. record the public run (rows of stopped traces stay EXHAUSTED, NaN)
        st = np.where(hard, NOISE, np.where(b.go & b.free, SKIPPED, PREDICTED)).astype(np.int8)
        if b.any_stop:
            z[b.stop] = np.nan
            st[b.stop] = EXHAUSTED
        rec.reported[cur] = z
        rec.status[cur] = st
        rec.tested[cur] = b.tested
        rec.hard[cur] = hard
        rec.eps_test[cur] = b.eps_t
        rec.eps_noise[cur] = spent_n
        # 8.-9. update the state (public); stopped traces leave for good
        run.advance(sl, b, easy, hard, z, t, self.predictor)
        return True


@dataclass(frozen=True, eq=False)
class _StepMajor:
    """The step-major layout of a run (:meth:`PredictiveMechanism._run`).

    Traces ranked by length (longest first); the entries of step i of the traces still running
    are contiguous, at ``offsets[i] + rank``, so every gather and scatter of a step stays within
    one small block of memory.  ``slot`` is the step-major position of each row; ``xy`` and
    ``t`` the rows' secrets and times step-major; ``keyed`` the per-row keyed streams (lazy
    releases) step-major, or None.
    """

    order: np.ndarray
    per_step: np.ndarray  # traces longer than i, per step i
    offsets: np.ndarray
    slot: np.ndarray
    xy: np.ndarray
    t: np.ndarray
    keyed: RowStreams | None

    @classmethod
    def of(cls, traces: Traces, rng) -> "_StepMajor":
        n_tr = traces.n_traces
        n = len(traces.xy)
        order = np.argsort(-traces.lengths, kind="stable")
        lengths = traces.lengths[order]
        max_len = int(lengths[0]) if n_tr else 0
        per_step = np.searchsorted(-lengths, -np.arange(max_len), side="left")  # traces longer than i
        offsets = np.concatenate([[0], np.cumsum(per_step)])
        rank_of_trace = np.empty(n_tr, dtype=np.int64)
        rank_of_trace[order] = np.arange(n_tr)
        tid = traces.trace_of_row()
        pos = np.arange(n) - traces.starts[tid]
        slot = offsets[pos] + rank_of_trace[tid]  # step-major position of each row
        xy_sm = np.empty((n, 2))
        xy_sm[slot] = traces.xy
        keyed = None
        if isinstance(rng, RowStreams):  # per-row keyed streams (lazy releases): draw for exactly these rows
            row_of_slot = np.empty(n, dtype=np.intp)
            row_of_slot[slot] = np.arange(n)
            keyed = rng.subset(row_of_slot)
        t_sm = np.empty(n)
        t_sm[slot] = traces.times
        return cls(order, per_step, offsets, slot, xy_sm, t_sm, keyed)

    @property
    def max_len(self) -> int:
        return len(self.per_step)

    def streams(self, rng, cur):
        """``draw(rows)``: the random source for the step's entries ``rows`` (positions in the step):
        their keyed streams, or the run's generator."""
        if self.keyed is None:
            return lambda rows: rng
        return lambda rows: rows_of(self.keyed, _positions(cur)[rows])


@dataclass(eq=False)
class _Record:
    """The public run as it is recorded, step-major: what :class:`TraceRun` returns in the rows' order."""

    reported: np.ndarray
    status: np.ndarray
    tested: np.ndarray
    hard: np.ndarray
    eps_test: np.ndarray
    eps_noise: np.ndarray

    @classmethod
    def empty(cls, n: int) -> "_Record":
        """Nothing released yet: every row EXHAUSTED, NaN."""
        return cls(
            np.full((n, 2), np.nan),
            np.full(n, EXHAUSTED, dtype=np.int8),
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=bool),
            np.zeros(n),
            np.zeros(n),
        )


@dataclass(eq=False)
class _Running:
    """The state of the traces still running, aligned with ``ranks`` (increasing): public values only."""

    ranks: np.ndarray
    ids: np.ndarray
    last: np.ndarray  # the last reported point
    has: np.ndarray  # a hard step was released (a prediction exists)
    t_hard: np.ndarray
    n_tests: np.ndarray
    n_pass: np.ndarray
    n_hard: np.ndarray
    stats: dict  # the predictor's state
    contiguous: bool = True  # no trace stopped yet: the running ones are ranks 0..k-1

    @classmethod
    def start(cls, order: np.ndarray, pred) -> "_Running":
        k = len(order)
        return cls(
            np.arange(k),
            order.astype(np.intp),
            np.full((k, 2), np.nan),
            np.zeros(k, dtype=bool),
            np.full(k, -np.inf),
            np.zeros(k),
            np.zeros(k),
            np.zeros(k),
            pred.initial(k),
        )

    def advance(self, sl: slice, b: "_StepBudget", easy, hard, z, t, pred) -> None:
        """Update the state after a step (the test and hard counts, the last report, the predictor's
        state); traces that stopped leave for good (their later rows stay EXHAUSTED), order kept."""
        self.n_tests[sl] += b.tested
        self.n_pass[sl] += easy
        self.n_hard[sl] += hard
        if b.any_stop:
            lsl = self.last[sl]
            lsl[b.go] = z[b.go]
        else:
            self.last[sl] = z
        hr = np.flatnonzero(hard)
        if len(hr):
            th = self.t_hard[sl]
            th[hr] = t[hr]
            self.has[sl] |= hard
            pred.update(self.stats, hr, z[hr], b.eps_n[hr])
        if b.any_stop:
            keep = np.ones(len(self.ids), dtype=bool)
            keep[np.flatnonzero(b.stop)] = False
            self.ranks, self.ids = self.ranks[keep], self.ids[keep]
            self.last, self.has, self.t_hard = self.last[keep], self.has[keep], self.t_hard[keep]
            self.n_tests, self.n_pass, self.n_hard = self.n_tests[keep], self.n_pass[keep], self.n_hard[keep]
            for key in self.stats:
                self.stats[key] = self.stats[key][keep]
            self.contiguous = False


@dataclass(frozen=True, eq=False)
class _StepBudget:
    """One step's modes and budgets (:func:`_step_budgets`), one entry per running trace."""

    eps_t: np.ndarray  # the test's epsilon (0 where not tested)
    eps_n: np.ndarray  # the noise's epsilon if the step is hard (0 for free steps)
    tested: np.ndarray
    go: np.ndarray  # the step is released (else the trace stops)
    free: np.ndarray  # the prediction is reported untested (skip rule)
    worst: np.ndarray  # the worst-case cost reserved
    stop: np.ndarray
    any_stop: bool


def _step_budgets(mech: PredictiveMechanism, state: StepState, first: np.ndarray) -> _StepBudget:
    """Steps 1-2 of a step: its mode per trace (test, noise or a free prediction) and budgets, from the
    public state only, fitted into what each trace has left (eps-bounded: a spent trace stops)."""
    mgr = mech.manager
    remaining = state.remaining
    eps_t, eps_n, _ = mgr.plan(state)
    mode = np.where(first, _NOISE, _TEST).astype(np.int8)
    if mech.stale_after is not None:
        mode[~first & (state.elapsed > mech.stale_after)] = _NOISE
    if mech.skip is not None:
        mode[~first & mech.skip.skip(state.elapsed, mgr.accuracy_reference(state))] = _PREDICT
    free = mode == _PREDICT
    to_noise = mode == _NOISE
    if to_noise.any():
        eps_n = np.where(to_noise, mgr.plan_noise(state), eps_n)
    tested = mode == _TEST
    eps_t = np.where(tested, eps_t, 0.0)
    eps_n = np.where(free, 0.0, eps_n)
    # 2. eps-bounded: fit the step into what is left; a spent trace stops, even for free steps
    eps_t, eps_n, tested, go = mgr.fit(eps_t, eps_n, remaining, tested, state.total)
    go = (go | free) & ~mgr.exhausted(state)
    eps_t = np.where(tested, eps_t, 0.0)
    worst = eps_t + eps_n
    for _ in range(4):  # rounding only: the fitted parts' sum may exceed what is left by an ulp or two
        over = go & (worst > remaining) & (worst <= remaining * (1.0 + 1e-9))
        if not over.any():
            break
        shrink = np.where(over, remaining / np.where(over, worst, 1.0) * (1.0 - 4 * np.finfo(float).eps), 1.0)
        eps_t, eps_n = eps_t * shrink, eps_n * shrink
        worst = eps_t + eps_n
    # (a manager asking for more than that is a bug: the accountant refuses it below, before any draw)
    go &= free | (eps_n > 0)
    stop = ~go
    any_stop = bool(stop.any())
    if any_stop:
        worst[stop] = 0.0
        tested &= go
        eps_t = np.where(tested, eps_t, 0.0)
    return _StepBudget(eps_t, eps_n, tested, go, free, worst, stop, any_stop)


def _predictions(pred, step: int, sl: slice, predicting: np.ndarray, lay: _StepMajor, rec: _Record, run: _Running):
    """Step 4: the prediction of each running trace, from the public run only ((k, 2); a custom predictor
    is asked for the ``predicting`` traces only, NaN elsewhere)."""
    if not isinstance(pred, _CustomPredictor):
        return np.array(pred.predict(run.last[sl], run.stats, sl))
    zt = np.full((sl.stop, 2), np.nan)
    pr_rows = np.flatnonzero(predicting)
    if len(pr_rows):
        view = PublicRun(
            step, run.last[sl][pr_rows], run.ranks[sl][pr_rows], lay.offsets, rec.reported, rec.hard, lay.t
        )
        out = np.asarray(pred.fn(view), dtype=float)
        if out.shape != (len(pr_rows), 2) or not np.all(np.isfinite(out)):
            raise GeoprivError(
                f"The predictor returned shape {out.shape} or non-finite values; it must return one finite "
                "(x, y) per trace, shape (m, 2), computed from the public run only."
            )
        zt[pr_rows] = out
    return zt


def _draw_step(mgr, b: _StepBudget, x: np.ndarray, zt: np.ndarray, draw, postprocess):
    """Steps 4-5: the private test of the tested traces' predictions against the secrets ``x``, then
    fresh planar Laplace noise for the hard steps only (``draw(rows)``: the random source of those
    entries, :meth:`_StepMajor.streams`).  Returns ``(easy, hard, z)``: ``z`` the reports (``zt``,
    the predictions, with the hard steps' noise written in)."""
    easy = np.zeros(len(x), dtype=bool)
    te = np.flatnonzero(b.tested)
    if len(te):
        d = np.hypot(x[te, 0] - zt[te, 0], x[te, 1] - zt[te, 1])
        easy[te] = private_test(d, mgr.threshold(b.eps_t[te]), b.eps_t[te], draw(te))
    hard = b.go & ~easy & ~b.free
    z = zt
    hr = np.flatnonzero(hard)
    if len(hr):
        noise = _unit_noise(len(hr), draw(hr))
        noise /= b.eps_n[hr, None]
        noise += x[hr]
        if postprocess is not None:
            noise = np.asarray(postprocess(noise), dtype=float)
        z[hr] = noise
    return easy, hard, z


@dataclass(frozen=True)
class IndependentMechanism:
    """The independent mechanism IM (Fig. 1): fresh planar Laplace noise at every query.

    With :class:`FixedRate` every query gets ``rate * total``; with :class:`FixedUtility`,
    eps_N = c_N / accuracy.  Queries beyond what the budget pays for are not released.
    Vectorised over all points at once: the budget of each trace is reserved in one call,
    before any noise is drawn.
    """

    manager: FixedUtility | FixedRate

    name = "independent"

    def __post_init__(self):
        if not isinstance(self.manager, (FixedUtility, FixedRate)):
            raise ParameterTypeError("manager must be a FixedUtility or FixedRate budget manager.")

    def per_query_epsilon(self, totals):
        if isinstance(self.manager, FixedRate):
            return self.manager.rate * totals
        return np.full(len(totals), self.manager.c_noise / self.manager.accuracy)

    def run(
        self, traces: Traces, total=None, rng=None, accountant: BudgetAccountant | None = None, progress=None
    ) -> TraceRun:
        """Release every trace; same arguments as :meth:`PredictiveMechanism.run`.

        One vectorised step: ``progress`` is called once, when every row is decided.
        """
        n_tr = traces.n_traces
        n = len(traces.xy)
        totals, acc = _budgets(total, accountant, n_tr)
        rng = _generator(rng)
        report = _RunProgress(progress, n)
        try:
            run = self._run(traces, totals, acc, rng, n_tr, n)
            report.finish()
        finally:
            report.close()
        return run

    def _run(self, traces, totals, acc, rng, n_tr, n) -> TraceRun:
        eps = self.per_query_epsilon(totals)
        avail = acc.headroom()
        # queries each trace can pay for; a relative 1e-9 slack so that rate = 1/30 pays for 30
        # (the last query then gets what is left, a hair less than the others)
        n_pay = np.minimum(np.floor(avail / eps * (1.0 + 1e-9)), traces.lengths).astype(np.int64)
        for _ in range(8):
            over = n_pay * eps > avail
            if not over.any():
                break
            eps = np.where(over, np.nextafter(np.minimum(eps, avail / np.maximum(n_pay, 1)), 0.0), eps)
        cost = n_pay * eps
        acc.spend(cost, np.arange(n_tr))  # refuses before any noise is drawn
        pos = np.arange(n) - np.repeat(traces.starts, traces.lengths)
        paid = pos < np.repeat(n_pay, traces.lengths)
        eps_rows = np.repeat(eps, traces.lengths)
        reported = np.full((n, 2), np.nan)
        m = int(paid.sum())
        noise = _unit_noise(m, rows_of(rng, np.flatnonzero(paid)))
        noise /= eps_rows[paid, None]
        noise += traces.xy[paid]
        reported[paid] = noise
        status = np.where(paid, NOISE, EXHAUSTED).astype(np.int8)
        eps_noise = np.where(paid, eps_rows, 0.0)
        return TraceRun(
            reported,
            status,
            np.zeros(n, dtype=bool),
            np.zeros(n),
            eps_noise,
            totals,
            acc.spent.copy(),
            traces.lengths.copy(),
            {"mechanism": "independent"},
        )


#: the two budget managers and what each takes
_BUDGET_FIX = Fix(
    "budget",
    python="budget='fixed_rate' takes rate= (e.g. rate=0.033); budget='fixed_utility' takes accuracy= "
    "(e.g. accuracy=3000).",
    cli="--budget fixed_rate takes --rate (e.g. --rate 0.033); --budget fixed_utility takes --accuracy (e.g. "
    "--accuracy 3000).",
    qgis="'Fixed rate' takes the budget rate; 'Fixed utility' takes the accuracy in metres.",
)


def budget_manager(budget, rate, accuracy, eta, gamma, delta, prediction_rate):
    """The budget manager of a trace release: ``budget`` as a name (with ``rate=`` or ``accuracy=``) or a manager."""
    if isinstance(budget, (FixedRate, FixedUtility)):
        if rate is not None or accuracy is not None:
            raise ParameterError(
                "A budget manager object carries its own rate or accuracy: do not also pass rate=/accuracy=."
            )
        return budget
    if budget == "fixed_rate":
        if accuracy is not None:
            raise ParameterError(
                "An accuracy goes with the fixed utility budget manager; fixed rate takes a rate (fraction per query).",
                fix=_BUDGET_FIX,
            )
        if rate is None:
            raise ParameterError(
                "The fixed rate budget manager needs a rate: the fraction of each trace's budget a query may spend on "
                "average, e.g. 0.033 for about 30 queries (the paper's setting).",
                fix=_BUDGET_FIX,
            )
        return FixedRate(rate=rate, eta=eta, gamma=gamma, delta=delta, prediction_rate=prediction_rate)
    if budget == "fixed_utility":
        if rate is not None:
            raise ParameterError(
                "A rate goes with the fixed rate budget manager; fixed utility takes an accuracy (metres).",
                fix=_BUDGET_FIX,
            )
        if accuracy is None:
            raise ParameterError(
                "The fixed utility budget manager needs an accuracy: the radius in metres within which a hard query's "
                "release falls with probability delta (0.9), e.g. 3000 (the paper's setting).",
                fix=_BUDGET_FIX,
            )
        return FixedUtility(accuracy=accuracy, eta=eta, gamma=gamma, delta=delta)
    raise ParameterError(
        f"budget must be 'fixed_rate', 'fixed_utility' or a FixedRate/FixedUtility manager, got {budget!r}."
    )
