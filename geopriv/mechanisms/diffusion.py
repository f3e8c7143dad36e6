"""Graded release of one private value to many recipients: the private Markov jump process.

Koufogiannis and Pappas, "Diffusing private data over networks" (Section III, Algorithm 1,
Proposition 4, Table I and Appendix A; the Facebook example is Section IV-B).

Recipient ``j`` of a private value ``u`` in R^n gets ``y_j = u + V_{eps_j}``, where
``{V_eps : eps > 0}`` is ONE sample path of a Markov jump process whose marginal at every level
is the n-dimensional Laplace law ``p_eps(v) = eps^n exp(-eps |v|) / (S_{n-1} Gamma(n))``
(``|.|`` the Euclidean norm, ``S_{n-1}`` the area of the unit sphere; n = 2 is the planar
Laplace of geo-indistinguishability).  Each recipient alone is ``eps_j``-private (for
``|u - u'|`` in the units of ``u``: ``eps_j`` per unit, i.e. eps_j-geo-indistinguishable when
``u`` is a location in metres), and any coalition ``A`` of recipients, pooling its answers,
is only ``max_{j in A} eps_j``-private: it learns no more than its most trusted member.

Derivation note
---------------
*Marginal.*  The characteristic function of ``p_eps`` is ``M(s; eps) = (1 + |s|^2/eps^2)^(-(n+1)/2)``
(Lemma 6 of the paper), its radius ``|V|`` is Gamma(n, scale 1/eps) and
``E|V|^2 = n(n+1)/eps^2``.  Going DOWN in eps the process accumulates independent jumps: the
levels at which it jumps form a Poisson process in ``ln eps`` of rate ``n + 1``
(Proposition 4), and a jump at level ``eps`` is an independent vector ``J_eps`` with
characteristic function ``1 / (1 + |s|^2/eps^2)`` (the first-order term of eq. (27)).  The
increment ``Z = V_{eps1} - V_{eps2}`` (eps1 < eps2) is then compound Poisson, independent of
``V_{eps2}``, with

    ln E exp(i s.Z) = (n+1) * int_{ln eps1}^{ln eps2} (1/(1 + |s|^2 e^{-2t}) - 1) dt
                    = ((n+1)/2) ln((1 + |s|^2/eps2^2) / (1 + |s|^2/eps1^2)),

(substitute ``w = |s|^2 e^{-2t}``), i.e. ``E exp(i s.Z) = M(s; eps1) / M(s; eps2)``.  So if
``V_{eps2} ~ p_{eps2}`` then ``V_{eps1} = V_{eps2} + Z ~ p_{eps1}``: every marginal is Laplace,
exactly, for every pair of levels (this also removes the paper's ``eps2 < sqrt(2) eps1``
restriction: the increment is a genuine probability law because it is built from one).
Two levels get the same answer iff no jump falls between them: probability
``(eps1/eps2)^(n+1)``; the number of jumps in ``[eps1, eps2]`` is Poisson with mean
``(n+1) ln(eps2/eps1)``.

*Coalitions.*  For levels ``e_1 <= ... <= e_m`` the answers are
``y_i = (u + V_{e_m}) + (V_{e_i} - V_{e_m})`` and the brackets are sums of jumps that are
independent of ``V_{e_m}`` and of ``u`` (eq. (26)).  So the whole tuple is a post-processing of
the single ``e_m``-private release ``u + V_{e_m}``: for every set S of tuples
``P(y in S | u) <= exp(e_m |u - u'|) P(y in S | u')``.  In particular the best estimator of
``u`` from the coalition is the answer of its member with the largest epsilon (eq. (8)).

*The jump radius.*  ``J_eps`` is a Gaussian scale mixture:
``J_eps = sqrt(2 W) / eps * G`` with ``W ~ Exp(1)`` and ``G ~ N(0, I_n)`` independent, because
``E exp(i s.J) = E exp(-W |s|^2/eps^2) = 1/(1 + |s|^2/eps^2)``.  Integrating out ``W`` with
``int_0^inf w^(nu-1) exp(-w - b/w) dw = 2 b^(nu/2) K_nu(2 sqrt b)`` gives the density
``eps^n (2 pi)^(-n/2) (eps r)^(1-n/2) K_{n/2-1}(eps r)`` (eq. (28) divided by its rate n+1),
and the radius ``R = |J|`` has density (Table I with beta = 1/eps)

    f(r) = 4 / (Gamma(n/2) (2/eps)^(n/2+1)) * r^(n/2) K_{n/2-1}(eps r),    r > 0,

whose normalisation follows from ``int_0^inf x^mu K_nu(x/beta) dx =
beta^(mu+1) 2^(mu-1) Gamma((1+mu+nu)/2) Gamma((1+mu-nu)/2)`` with ``mu = n/2``,
``nu = n/2 - 1``: the integral is ``beta^(n/2+1) 2^(n/2-1) Gamma(n/2)``.  (The tests integrate
``f`` numerically to 1 and compare samples with its numerical CDF.)  We therefore sample the
radius EXACTLY as ``R = sqrt(2 W X) / eps`` with ``X ~ chi^2_n`` -- two standard draws, no
table, no rejection, any n, vectorised -- and the jump vector directly as
``sqrt(2 W)/eps * G`` (whose direction is uniform and independent of its norm).  For odd n the
law has a closed form: n = 1 gives Exp(eps) (|Laplace|), n = 3 gives Gamma(2, 1/eps), n = 5 a
mixture of Gamma(3, 1/eps) and Gamma(2, 1/eps).

*Sampling a path (Algorithm 1, vectorised).*  ``V_{eps_max}`` is drawn as a Gamma(n, 1/eps_max)
radius times a uniform direction (Algorithm 1's "Gamma(T, .)" is Gamma(n, .)).  Instead of
walking down with Exponential(n+1) gaps in ``ln eps`` we draw the number of jumps
``K ~ Poisson((n+1) ln(eps_max/eps_min))`` and, given K, the ``ln`` of the jump levels i.i.d.
uniform on ``[ln eps_min, ln eps_max]``: the same Poisson process in law.  Each jump is
``J_{level}`` as above and the values below each level are cumulative sums from the top.  A
path over ``[eps_min, eps_max]`` stores only its ~``(n+1) ln(eps_max/eps_min)`` jump levels and
values (about 7 pairs for the paper's n = 1, eps in [0.5, 15]); answering any number of
recipients is a ``searchsorted``.

*Extending down* from ``eps_min`` is exact: going down the process is Markov with independent
increments and the Poisson clock is memoryless, so we continue from ``V_{eps_min}``.

*Extending up* (levels above ``eps_max``) is also exact, by time reversal.  Given
``V_{eps_max}``, the process read upwards is Markov with jump rate (per unit of ``ln eps``)

    (n+1) (p_eps * J_eps)(v) / p_eps(v) = 1 + eps |v|,

because ``p_eps * J_eps`` has characteristic function ``(1 + |s|^2/eps^2)^(-(n+3)/2)``, whose
density is ``p_eps(v) (1 + eps|v|) / (n+1)`` (a Matern-3/2 profile).  So the next upward jump
is the first of two independent clocks: an Exponential(1) gap in ``ln eps`` and an
Exponential(|v|) gap in ``eps`` (the probability of no jump from ``e0`` to ``e1`` is
``(e0/e1) exp(-(e1 - e0)|v|)``, which matches ``P(V_{e0} = V_{e1} = v)`` computed from the
joint law).  The value after the jump has density ``∝ J_eps(v - x) p_eps(x)``, sampled exactly
with the scale mixtures ``p_eps = law of sqrt(2 S)/eps G1`` (``S ~ Gamma((n+1)/2)``) and
``J_eps = law of sqrt(2 W)/eps G2``: with ``T = S + W`` and ``B = S/T``,
``B ~ Beta((n+1)/2, 1)`` independent of ``(T, v)``, ``T | v`` is generalised inverse Gaussian
with density ``∝ t^(1/2) exp(-t - eps^2 |v|^2 / (4 t))`` and
``x | v, T, B ~ N(B v, 2 B (1 - B) T / eps^2 I)``.  The tests check the extended path against
a path built over the larger range from the start.  (The paper does not give this step; it
is derived here.)

Security
--------
A :class:`DiffusionPath` is a SECRET: anyone holding it subtracts the noise from any answer and
recovers ``u`` exactly (the paper's Figure 6 caption).  Keep it with the data owner; its
``repr`` and :meth:`DiffusionPath.describe` show only public parameters; the saved file says it
is secret and is created with owner-only permissions.  Reusing one path for the same value is
what makes coalitions harmless: a FRESH path for the same value is a new release whose
epsilon adds to the old one.  Reusing it for ANOTHER value publishes the exact difference of
the two values, so :meth:`DiffusionPath.bind` ties a path to its source (typed label), what it
releases, a keyed commitment to the value (HMAC-SHA256 under a random 32-byte key held in the
path), its dimension and its public frame; :func:`diffuse` refuses a bound path for another
value and :meth:`DiffusionPath.check_binding` any other use
(:class:`~geopriv.exceptions.PathBindingError`).  The binding is saved with the path (format
version 2, under the checksum).  Privacy accounting (recording the largest epsilon released per
path) is done by the caller, not here.

Value answers leave :func:`geopriv.diffuse_locations` through a public 1-D lattice
(:func:`snap_values`), with the finite-precision term of :func:`value_lattice_epsilon`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets

import numpy as np
from scipy import special, stats

from ..exceptions import GeoprivError, MechanismFileError, ParameterTypeError, PathBindingError
from ..io import write_new_file
from ..keys import LOCATION, typed_label, value_column
from ..rng import make_rng

__all__ = [
    "PAPER",
    "DiffusionPath",
    "LOCATION",
    "VALUE_RESOLUTION",
    "diffuse",
    "expected_jumps",
    "jump_radius_pdf",
    "project_discrete",
    "sample_jump_radius",
    "sample_jumps",
    "sample_laplace",
    "sample_noise_batch",
    "snap_values",
    "typed_label",
    "value_column",
    "value_lattice_epsilon",
]

PAPER = "Koufogiannis and Pappas, 'Diffusing private data over networks' (Algorithm 1)"

FORMAT = "geopriv.diffusion_path"
FORMAT_VERSION = 2
#: What a path releases when it answers a location (see :meth:`DiffusionPath.bind`).
#: Relative resolution of a computed value answer in the 1-D finite-precision bound
#: (:func:`value_lattice_epsilon`): 2^-48, i.e. 16 ulps of the largest magnitude involved.
VALUE_RESOLUTION = 2.0**-48
_COMMITMENT_TAG = b"geopriv.diffusion.value-commitment.v1"
_BINDING_FIELDS = ("source", "released", "dim", "frame")
SECRET_NOTICE = (
    "SECRET: this file is the noise path of a geopriv diffusion release. Anyone who holds it can "
    "subtract the noise from every answer released with it and recover the private value exactly. "
    "Keep it with the data owner only; never publish, share or commit it."
)


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------


def _check_dim(dim) -> int:
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise ParameterTypeError(
            f"dim must be a positive int (the dimension of the private value), got {type(dim).__name__}."
        )
    if dim < 1:
        raise GeoprivError(f"dim must be >= 1 (the dimension of the private value), got {dim}.")
    return int(dim)


def _check_level(eps, name: str) -> float:
    if isinstance(eps, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be a positive number, not a bool.")
    try:
        value = float(eps)
    except (TypeError, ValueError):
        raise GeoprivError(f"{name} must be a positive number, got {type(eps).__name__}.") from None
    if not math.isfinite(value) or value <= 0:
        raise GeoprivError(
            f"{name} must be finite and > 0 (got {value!r}): epsilon 0 would mean infinite noise and "
            "infinite or negative values are not privacy levels. Give every recipient a finite positive epsilon."
        )
    return value


def _check_levels(epsilons, name: str = "epsilons") -> np.ndarray:
    """1-D float array of finite, positive privacy levels (else GeoprivError saying how to fix)."""
    arr = np.asarray(epsilons)
    if arr.dtype == bool or arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise GeoprivError(f"{name} must be numbers (privacy levels), got an array of {arr.dtype}.")
    arr = np.atleast_1d(arr.astype(float, copy=False))
    if arr.ndim != 1:
        raise GeoprivError(f"{name} must be one privacy level per recipient (1-D), got shape {arr.shape}.")
    if arr.size == 0:
        raise GeoprivError(f"{name} is empty: give at least one recipient's privacy level.")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        where = np.flatnonzero(bad)
        shown = ", ".join(str(int(i)) for i in where[:10]) + (
            f", ... ({where.size - 10} more)" if where.size > 10 else ""
        )
        raise GeoprivError(
            f"{where.size} of {arr.size} {name} are not finite and > 0 (positions {shown}). Every recipient needs a "
            "finite positive epsilon: drop recipients that should get nothing (e.g. unreachable ones, whose "
            "distance is inf) instead of giving them epsilon 0, inf or NaN."
        )
    return arr


def _gen(rng) -> np.random.Generator:
    return make_rng(rng).generator


# --------------------------------------------------------------------------------------------
# binding: what a path answers
# --------------------------------------------------------------------------------------------


def _released_text(released: str) -> str:
    return "the location" if released == LOCATION else released


def _commit(key: bytes, value: np.ndarray) -> str:
    """HMAC-SHA256 under the path's secret key of the exact float64 bytes of ``value`` (never the value)."""
    u = np.ascontiguousarray(np.asarray(value, dtype=float).reshape(-1) + 0.0, dtype="<f8")  # -0.0 is 0.0
    msg = _COMMITMENT_TAG + str(u.size).encode() + b":" + u.tobytes()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def _canonical_frame(frame) -> dict:
    try:
        return json.loads(json.dumps(frame, sort_keys=True))
    except (TypeError, ValueError):
        raise ParameterTypeError(
            "frame must be a dict of public JSON values (CRS text, bounds, lattice rule, ...)."
        ) from None


def _same_frame_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_frame_value(x, y) for x, y in zip(a, b))
    return a == b


_FRAME_NAMES = {
    "kind": "what the frame measures (location or value)",
    "crs": "the CRS",
    "declared_bounds": "the declared bounds=",
    "frame": "the frame kind (planar/spherical)",
    "working_crs": "the working plane",
    "scale_max": "the frame's scale (CRS units per metre)",
    "grid": "the lattice (grid=)",
    "lattice": "the lattice anchor",
}


def value_lattice_epsilon(epsilon: float, step: float, r_max: float, resolution: float = VALUE_RESOLUTION) -> float:
    """Effective epsilon per unit of a 1-D answer snapped to multiples of ``step`` and clamped to a range.

    The one-dimensional analogue of Andres et al. 2013, Thm 4.1 (and of Mironov 2012's
    snapping mechanism).  Model: the computed answer differs from an exact draw ``u + V``
    (``V`` Laplace, density proportional to ``exp(-epsilon |v|)``) by at most
    ``delta = r_max * resolution``, where ``r_max`` bounds every magnitude involved (the value,
    the answer and the noise, for answers inside the clamped range).  The published answer is
    the lattice node of the cell ``C`` the computed answer falls in (end cells are half-lines:
    clamping).  ``P(out = k | u)`` lies between the exact probabilities of ``C`` shrunk and grown
    by ``delta`` on each side; on a window of width ``step + 2 delta`` the density varies by at
    most ``exp(epsilon (step + 2 delta))``, so the two slivers weigh at most
    ``kappa = 2 delta exp(epsilon (step + 2 delta)) / (step - 2 delta)`` times the shrunk cell.
    Hence ``P(out = k | u) <= exp(epsilon |u - u'|) (1 + kappa) P(out = k | u')`` and, for values
    at least one step apart,

        epsilon' = epsilon + ln(1 + kappa) / step.

    For ``|u - u'| < step`` the loss exceeds ``epsilon' |u - u'|`` by at most
    ``step (epsilon' - epsilon)``, as for locations (``docs/privacy.md``).

    Parameters
    ----------
    epsilon : float
        Privacy level per unit of the value.
    step : float
        The lattice step, in units of the value.
    r_max : float
        Bound on the magnitudes involved: ``max(|lo|, |hi|) + (hi - lo)`` for the range ``[lo, hi]``.
    resolution : float, optional
        Relative accuracy of the computed answer (default :data:`VALUE_RESOLUTION`).

    Returns
    -------
    float

    Raises
    ------
    GeoprivError
        When the bound does not exist (the step is not above ``2 delta``): use a coarser step or a
        smaller range.
    """
    epsilon = _check_level(epsilon, "epsilon")
    step = _check_level(step, "step")
    delta = float(r_max) * float(resolution)
    if not step > 4.0 * delta:
        raise GeoprivError(
            f"the value lattice step {step:g} is too fine for a range of magnitude {float(r_max):g}: float64 answers are "
            "only accurate to about a 2^-48 fraction of it, and no finite-precision bound exists. Use a coarser grid=, "
            "a narrower value_range=, or a smaller epsilon."
        )
    kappa = 2.0 * delta * math.exp(epsilon * (step + 2.0 * delta)) / (step - 2.0 * delta)
    return epsilon + math.log1p(kappa) / step


def snap_values(responses, step: float, lo: float, hi: float) -> np.ndarray:
    """Answers rounded to the nearest multiple of ``step`` and clamped to the lattice nodes in ``[lo, hi]``.

    Parameters
    ----------
    responses : array_like
        Raw answers (any shape).
    step : float
        The public lattice step.
    lo, hi : float
        The public range; its end nodes are ``ceil(lo / step) * step`` and ``floor(hi / step) * step``.

    Returns
    -------
    numpy.ndarray
        A new array of lattice nodes, each an integer multiple of ``step`` (computed as
        ``k * step`` with integer ``k``, so equal nodes have equal bits).
    """
    y = np.asarray(responses, dtype=float)
    k_lo, k_hi = math.ceil(lo / step), math.floor(hi / step)
    if k_lo > k_hi:
        raise GeoprivError(
            f"the value range holds no multiple of the step {step:g}; widen value_range= or use a finer grid=."
        )
    k = np.clip(np.round(y / step), k_lo, k_hi)
    return k * step


# --------------------------------------------------------------------------------------------
# elementary distributions
# --------------------------------------------------------------------------------------------


def _unit_vectors(gen: np.random.Generator, size: int, dim: int) -> np.ndarray:
    """``size`` directions uniform on the unit sphere of R^dim (normalised Gaussians)."""
    if dim == 1:
        return np.where(gen.random((size, 1)) < 0.5, -1.0, 1.0)
    g = gen.standard_normal((size, dim))
    norm = np.linalg.norm(g, axis=1)
    while True:  # a zero Gaussian vector has probability ~0; redraw it rather than divide by 0
        zero = norm == 0
        if not zero.any():
            break
        g[zero] = gen.standard_normal((int(zero.sum()), dim))
        norm[zero] = np.linalg.norm(g[zero], axis=1)
    return g / norm[:, None]


def sample_laplace(dim: int, eps, size: int | None = None, rng=None) -> np.ndarray:
    """Draw n-dimensional Laplace noise, density proportional to ``exp(-eps |v|_2)``.

    Radius Gamma(dim, scale 1/eps), direction uniform; ``dim=2`` is planar Laplace.  Used for
    the top of a path and as the independent-noise baseline.

    Parameters
    ----------
    dim : int
    eps : float or array_like
        Privacy level(s), broadcast against ``size``.
    size : int, optional
        Number of draws (default: ``len(eps)`` if ``eps`` is an array, else 1).
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    numpy.ndarray of shape (size, dim)
    """
    dim = _check_dim(dim)
    eps = _check_levels(eps, "eps")
    if size is None:
        size = eps.size
    gen = _gen(rng)
    radius = gen.gamma(dim, 1.0, size) / np.broadcast_to(eps, (size,))
    return radius[:, None] * _unit_vectors(gen, size, dim)


def sample_jump_radius(dim: int, eps, size: int | None = None, rng=None) -> np.ndarray:
    """Draw the radius of a jump at level ``eps`` (the paper's "Bessel" law, Table I).

    Density ``4 / (Gamma(dim/2) (2/eps)^(dim/2+1)) r^(dim/2) K_{dim/2-1}(eps r)``, sampled
    exactly as ``sqrt(2 W X) / eps`` with ``W ~ Exp(1)`` and ``X ~ chi^2_dim`` (see the module
    note).  ``E R^2 = 2 dim / eps^2``.

    Returns
    -------
    numpy.ndarray of shape (size,)
    """
    dim = _check_dim(dim)
    eps = _check_levels(eps, "eps")
    if size is None:
        size = eps.size
    gen = _gen(rng)
    return np.sqrt(2.0 * gen.standard_exponential(size) * gen.chisquare(dim, size)) / np.broadcast_to(eps, (size,))


def sample_jumps(dim: int, levels, rng=None) -> np.ndarray:
    """Draw one jump vector per level: ``sqrt(2 W)/level * G`` (uniform direction, Bessel radius).

    Returns
    -------
    numpy.ndarray of shape (len(levels), dim)
    """
    dim = _check_dim(dim)
    levels = np.asarray(levels, dtype=float).reshape(-1)
    gen = _gen(rng)
    if levels.size == 0:
        return np.zeros((0, dim))
    scale = np.sqrt(2.0 * gen.standard_exponential(levels.size)) / levels
    return scale[:, None] * gen.standard_normal((levels.size, dim))


def jump_radius_pdf(r, dim: int, eps: float) -> np.ndarray:
    """Density of the jump radius at level ``eps`` (Table I of the paper, beta = 1/eps).

    ``f(r) = 4 / (Gamma(n/2) (2/eps)^(n/2+1)) r^(n/2) K_{n/2-1}(eps r)``, evaluated in logs with
    the exponentially scaled Bessel function (no overflow or underflow in the tail); the limit
    at ``r = 0`` is ``eps`` for n = 1 and 0 for n >= 2.
    """
    dim = _check_dim(dim)
    eps = _check_level(eps, "eps")
    r = np.asarray(r, dtype=float)
    nu = dim / 2.0 - 1.0
    out = np.zeros(r.shape)
    pos = r > 0
    rp = r[pos]
    log_c = math.log(4.0) - special.gammaln(dim / 2.0) - (dim / 2.0 + 1.0) * math.log(2.0 / eps)
    with np.errstate(divide="ignore"):
        out[pos] = np.exp(log_c + (dim / 2.0) * np.log(rp) + np.log(special.kve(nu, eps * rp)) - eps * rp)
    if dim == 1:
        out[r == 0] = eps
    return out


def expected_jumps(dim: int, eps_low: float, eps_high: float) -> float:
    """Mean number of jumps of the process in ``[eps_low, eps_high]``: ``(dim+1) ln(eps_high/eps_low)``."""
    dim = _check_dim(dim)
    lo, hi = _check_level(eps_low, "eps_low"), _check_level(eps_high, "eps_high")
    return (dim + 1) * math.log(max(hi, lo) / min(hi, lo))


def _reverse_jump(v: np.ndarray, eps: float, gen: np.random.Generator) -> np.ndarray:
    """Value just above an upward jump at level ``eps`` from value ``v`` (density ∝ J_eps(v-x) p_eps(x))."""
    dim = v.size
    r = float(np.linalg.norm(v))
    b = eps * r  # GIG(p = 3/2) with density ∝ t^(1/2) exp(-t - b^2/(4t)) = scipy geninvgauss(1.5, b, scale=b/2)
    if b < 1e-12:
        # b -> 0: the law tends to Gamma(3/2); exact rejection from it (accept w.p. exp(-b^2/(4t)) ~ 1)
        while True:
            t = gen.gamma(1.5)
            if gen.random() < math.exp(-b * b / (4.0 * t)):
                break
    else:
        t = float(stats.geninvgauss.rvs(1.5, b, scale=b / 2.0, random_state=gen))
    beta = gen.beta((dim + 1) / 2.0, 1.0)
    return beta * v + math.sqrt(2.0 * beta * (1.0 - beta) * t) / eps * gen.standard_normal(dim)


# --------------------------------------------------------------------------------------------
# the path
# --------------------------------------------------------------------------------------------


class DiffusionPath:
    """One sample path of the private jump process over ``[eps_min, eps_max]``.  SECRET.

    Anyone holding the path (or its file) can subtract the noise from every answer released
    with it and recover the private value exactly; keep it with the data owner.  The object is
    immutable: :meth:`extend_down` and :meth:`extend_up` return new paths that agree with this
    one wherever both are defined, so earlier answers stay valid.

    Build with :meth:`sample`; answer with :meth:`noise` (or :func:`diffuse`).  Stored as the
    sorted jump levels inside the range and the value on each piece: O(number of jumps), never
    O(recipients).

    Levels above ``eps_max`` are refused by :meth:`noise`: call :meth:`extend_up` (the exact
    conditional law given the path, see the module note) or build the path with a larger
    ``eps_max``.  Levels below ``eps_min`` likewise need :meth:`extend_down`.

    A path answers ONE private value: :meth:`bind` ties it to the source (typed label), what is
    released (the location, or the value of one column), a commitment to the private value
    (HMAC-SHA256 of its exact float64 bytes under a random 32-byte key kept inside the path,
    never the value and never an unkeyed hash, which a value with few possibilities would
    give away) and the public frame the noise lives in.  :meth:`check_binding` and
    :func:`diffuse` refuse any other use with :class:`~geopriv.exceptions.PathBindingError`:
    the same noise on two different values would publish their exact difference.  Extensions,
    pickles and saved files keep the binding.

    Parameters
    ----------
    dim : int
        Dimension n of the private value (1 for a number or a bit, 2 for a location).
    eps_min, eps_max : float
        The range of privacy levels the path answers (finite, > 0, ``eps_min <= eps_max``).
    levels : array_like
        The jump levels, strictly increasing inside ``(eps_min, eps_max]``.
    values : array_like
        The noise on each piece between jumps, shape ``(len(levels) + 1, dim)``.
    binding : dict, optional
        What the path answers (as :meth:`bind` makes it); given with ``key`` or not at all.
    key : bytes, optional
        The 32-byte commitment key of the binding.

    Raises
    ------
    geopriv.GeoprivError
        If the levels, values, range or binding are inconsistent.

    See Also
    --------
    diffuse : Answers for one private value at many privacy levels, from one path.
    diffuse_locations : A location released to a network, graded by distance.
    DiffusionLedger : What paths cost (each its largest epsilon).

    Notes
    -----
    The constructor checks a path given as arrays (as :meth:`load` reads one); build a path
    with :meth:`sample` (or let :func:`diffuse` draw one).

    Examples
    --------
    >>> path = geopriv.DiffusionPath.sample(1, eps_max=15.0, eps_min=0.5, rng=1)
    >>> path  # its repr never shows the noise
    DiffusionPath(dim=1, eps_min=0.5, eps_max=15, bound=False, <secret noise path: values not shown>)
    >>> path.noise([0.5, 15.0]).round(3).tolist()  # SECRET: the noise at two levels
    [[0.192], [-0.008]]

    Extending it keeps every earlier answer:

    >>> wider = path.extend_up(30.0, rng=2)
    >>> bool((wider.noise([0.5, 15.0]) == path.noise([0.5, 15.0])).all())
    True

    Saved (a SECRET file, owner-only) and loaded with its checksum verified:

    >>> path.save("path.npz")
    'path.npz'
    >>> geopriv.DiffusionPath.load("path.npz").fingerprint() == path.fingerprint()
    True
    """

    __slots__ = ("_binding", "_dim", "_eps_max", "_eps_min", "_key", "_levels", "_values")

    def __init__(self, dim: int, eps_min: float, eps_max: float, levels, values, *, binding=None, key=None):
        dim = _check_dim(dim)
        eps_min = _check_level(eps_min, "eps_min")
        eps_max = _check_level(eps_max, "eps_max")
        if eps_min > eps_max:
            raise GeoprivError(f"eps_min ({eps_min}) must be <= eps_max ({eps_max}).")
        levels = np.array(levels, dtype=float).reshape(-1)
        values = np.array(values, dtype=float)
        if values.ndim != 2 or values.shape != (levels.size + 1, dim):
            raise GeoprivError(
                f"a path with {levels.size} jump(s) in dimension {dim} needs values of shape "
                f"({levels.size + 1}, {dim}), got {values.shape}."
            )
        if not (np.all(np.isfinite(levels)) and np.all(np.isfinite(values))):
            raise GeoprivError("a path's jump levels and values must be finite.")
        if levels.size and (np.any(np.diff(levels) <= 0) or levels[0] <= eps_min or levels[-1] > eps_max):
            raise GeoprivError("a path's jump levels must be strictly increasing inside (eps_min, eps_max].")
        levels.setflags(write=False)
        values.setflags(write=False)
        if (binding is None) != (key is None):
            raise GeoprivError("a path's binding and its commitment key go together: give both or neither.")
        if binding is not None:
            binding = dict(binding)
            if set(binding) != set(_BINDING_FIELDS) | {"commitment"}:
                raise GeoprivError(f"a path binding has the fields {sorted(set(_BINDING_FIELDS) | {'commitment'})}.")
            if binding["dim"] != dim:
                raise GeoprivError("a path binding's dimension must be the path's.")
            if not (isinstance(key, bytes) and len(key) == 32):
                raise GeoprivError("a path's commitment key must be 32 bytes.")
            binding["frame"] = _canonical_frame(binding["frame"])
        object.__setattr__(self, "_binding", binding)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_dim", dim)
        object.__setattr__(self, "_eps_min", eps_min)
        object.__setattr__(self, "_eps_max", eps_max)
        object.__setattr__(self, "_levels", levels)
        object.__setattr__(self, "_values", values)

    def __setattr__(self, name, value):
        raise AttributeError("DiffusionPath is immutable; extend_down/extend_up return a new path.")

    def __reduce__(self):  # pickling (e.g. to a worker process) rebuilds through __init__'s checks
        return (
            _rebuild,
            (self._dim, self._eps_min, self._eps_max, self._levels, self._values, self._binding, self._key),
        )

    # ---- construction ----------------------------------------------------------------------
    @classmethod
    def sample(cls, dim: int, eps_max: float, eps_min: float | None = None, rng=None) -> DiffusionPath:
        """Sample a path over ``[eps_min, eps_max]`` (Algorithm 1, exact, vectorised).

        Parameters
        ----------
        dim : int
            Dimension n of the private value (1 for a number or a bit, 2 for a location).
        eps_max : float
            Largest privacy level that will be asked for (the most trusted recipient).
        eps_min : float, optional
            Smallest level (default ``eps_max``: a single level).
        rng : None, int, SeedSequence or Generator
            ``None`` (real releases) draws from OS entropy.
        """
        dim = _check_dim(dim)
        eps_max = _check_level(eps_max, "eps_max")
        eps_min = eps_max if eps_min is None else _check_level(eps_min, "eps_min")
        if eps_min > eps_max:
            raise GeoprivError(
                f"eps_min ({eps_min}) is larger than eps_max ({eps_max}); pass the largest level as eps_max "
                "and the smallest as eps_min."
            )
        gen = _gen(rng)
        top = sample_laplace(dim, eps_max, 1, gen)
        levels, values = _walk_down(dim, top[0], eps_min, eps_max, gen)
        return cls(dim, eps_min, eps_max, levels, values)

    def extend_down(self, eps_new_min: float, rng=None) -> DiffusionPath:
        """A new path that agrees with this one and also covers ``[eps_new_min, eps_min]``.

        Exact: below ``eps_min`` the process depends on the past only through
        ``V_{eps_min}`` and the Poisson clock is memoryless.  ``eps_new_min >= eps_min``
        returns ``self``.
        """
        eps_new_min = _check_level(eps_new_min, "eps_new_min")
        if eps_new_min >= self._eps_min:
            return self
        gen = _gen(rng)
        levels, values = _walk_down(self._dim, self._values[0], eps_new_min, self._eps_min, gen)
        return DiffusionPath(
            self._dim,
            eps_new_min,
            self._eps_max,
            np.concatenate([levels, self._levels]),
            np.concatenate([values[:-1], self._values]),
            binding=self._binding,
            key=self._key,
        )

    def extend_up(self, eps_new_max: float, rng=None) -> DiffusionPath:
        """A new path that agrees with this one and also covers ``[eps_max, eps_new_max]``.

        Samples the exact conditional law of the process above ``eps_max`` given the path
        (time reversal; derivation in the module note): the result has the same law as a path
        built over the larger range from the start.  ``eps_new_max <= eps_max`` returns ``self``.
        """
        eps_new_max = _check_level(eps_new_max, "eps_new_max")
        if eps_new_max <= self._eps_max:
            return self
        gen = _gen(rng)
        v = np.array(self._values[-1], dtype=float)
        level = self._eps_max
        new_levels, new_values = [], []
        while True:
            r = float(np.linalg.norm(v))
            nxt = level * math.exp(gen.standard_exponential())  # rate-1 clock in ln(eps)
            if r > 0:
                nxt = min(nxt, level + gen.standard_exponential() / r)  # rate-|v| clock in eps
            if nxt > eps_new_max:
                break
            v = _reverse_jump(v, nxt, gen)
            level = nxt
            new_levels.append(level)
            new_values.append(v)
        levels = np.concatenate([self._levels, np.asarray(new_levels, dtype=float)])
        values = np.concatenate([self._values, np.asarray(new_values, dtype=float).reshape(-1, self._dim)])
        return DiffusionPath(
            self._dim, self._eps_min, eps_new_max, levels, values, binding=self._binding, key=self._key
        )

    # ---- binding -----------------------------------------------------------------------------
    def bind(self, *, source, released: str, frame: dict, value) -> DiffusionPath:
        """This path bound to what it answers (a new path; this one must be unbound).

        Parameters
        ----------
        source : hashable
            The label of the row whose value is released (kept typed: ``1`` and ``"1"`` differ).
        released : str
            :data:`LOCATION`, or :func:`value_column` of the released column.
        frame : dict
            Public description of the frame the noise lives in: for a location the CRS, the
            declared bounds, the frame kind, the working plane, its scale and the lattice rule;
            for a value its kind and lattice rule.
        value : float or 1-D array_like
            The private value, exactly as it is answered (in the working frame): only a keyed
            commitment to its float64 bytes is kept.

        Returns
        -------
        DiffusionPath
            The same noise with the binding and a fresh random 32-byte commitment key (OS entropy).
        """
        if self._binding is not None:
            raise PathBindingError(
                "this path is already bound to a release; a path answers one value only. Draw a "
                "fresh path for another one (a new release, charged again)."
            )
        if not isinstance(released, str):
            raise ParameterTypeError("released must be geopriv.mechanisms.diffusion.LOCATION or value_column(column).")
        u = np.atleast_1d(np.asarray(value, dtype=float))
        if u.shape != (self._dim,) or not np.all(np.isfinite(u)):
            raise GeoprivError(f"the value to bind must be {self._dim} finite number(s), as the path's dimension.")
        key = secrets.token_bytes(32)
        binding = {
            "source": typed_label(source),
            "released": released,
            "dim": self._dim,
            "frame": _canonical_frame(frame),
            "commitment": _commit(key, u),
        }
        return DiffusionPath(
            self._dim, self._eps_min, self._eps_max, self._levels, self._values, binding=binding, key=key
        )

    @property
    def is_bound(self) -> bool:
        """Whether the path is bound to a source, a released quantity, a value and a frame."""
        return self._binding is not None

    @property
    def binding(self) -> dict | None:
        """The public part of the binding: source (typed text), released, dim, frame.  Never the commitment or key."""
        if self._binding is None:
            return None
        return json.loads(json.dumps({k: self._binding[k] for k in _BINDING_FIELDS}))

    def check_value(self, value) -> None:
        """Refuse (PathBindingError) a value other than the one this bound path was made for.

        Unbound paths accept any value (the caller answers for them).  The check compares keyed
        commitments in constant time; the message never shows either value.
        """
        if self._binding is None:
            return
        u = np.atleast_1d(np.asarray(value, dtype=float))
        if u.shape != (self._dim,):
            raise PathBindingError(
                self._binding_message(
                    [f"dimension: the path is {self._dim}-dimensional but the value has {u.size} component(s)"]
                )
            )
        if not hmac.compare_digest(_commit(self._key, u), self._binding["commitment"]):
            raise PathBindingError(
                self._binding_message(
                    [
                        "value: the private value differs from the one the path was made for (the person moved, or the value "
                        "changed); the same noise on both would publish their exact difference"
                    ]
                )
            )

    def binding_differences(self, *, source, released: str, frame: dict, value) -> list:
        """What differs between this path's binding and a proposed use: a list of texts (empty: the same).

        Never names values or coordinates; names the source labels (public: they are row labels).
        An unbound path differs from every use ("not bound").
        """
        if self._binding is None:
            return [
                "binding: the path is not bound to any release (made by DiffusionPath.sample or the low-level "
                "diffuse()), so it cannot be checked against this source, value and frame"
            ]
        b = self._binding
        out = []
        if typed_label(source) != b["source"]:
            out.append(f"source: the path answers row {b['source']}, not row {typed_label(source)}")
        if released != b["released"]:
            out.append(f"released: the path answers {_released_text(b['released'])}, not {_released_text(released)}")
        u = np.atleast_1d(np.asarray(value, dtype=float))
        if u.shape != (self._dim,):
            out.append(f"dimension: the path is {self._dim}-dimensional but the value has {u.size} component(s)")
        frame = _canonical_frame(frame)
        old = b["frame"]
        changed = [k for k in sorted(set(frame) | set(old)) if not _same_frame_value(frame.get(k), old.get(k))]
        if changed:
            out.append(
                "frame: " + ", ".join(_FRAME_NAMES.get(k, k) for k in changed) + " differ(s) from the path's "
                "(the same noise in two frames can be solved for)"
            )
        if not out and not hmac.compare_digest(_commit(self._key, u), b["commitment"]):
            out.append(
                "value: the private value differs from the one the path was made for (the person moved, or the "
                "value changed); the same noise on both would publish their exact difference"
            )
        return out

    def check_binding(self, *, source, released: str, frame: dict, value) -> None:
        """Refuse (PathBindingError) any use other than the one this path is bound to; see :meth:`binding_differences`."""
        diffs = self.binding_differences(source=source, released=released, frame=frame, value=value)
        if diffs:
            raise PathBindingError(self._binding_message(diffs))

    @staticmethod
    def _binding_message(diffs) -> str:
        return (
            "this diffusion path cannot answer this release: " + "; ".join(diffs) + ". A path answers only the "
            "value, source, column and frame it was made for. Omit path= (or --path) to draw a fresh path: a new "
            "release, charged again."
        )

    def fingerprint(self) -> str:
        """SHA-256 of the path's noise, binding and key: identifies this exact path (for ledgers).  Not secret-revealing."""
        h = hashlib.sha256(b"geopriv.diffusion.path")
        for key, arr in sorted(self.secret_arrays().items()):
            h.update(key.encode() + np.ascontiguousarray(arr, dtype="<f8").tobytes())
        if self._binding is not None:
            h.update(json.dumps(self._binding, sort_keys=True).encode() + self._key)
        return h.hexdigest()

    # ---- answers -----------------------------------------------------------------------------
    def noise(self, epsilons) -> np.ndarray:
        """``V_eps`` for each requested level: array of shape (len(epsilons), dim).

        The same level always gets the same answer.  Levels must lie in
        ``[eps_min, eps_max]``; see :meth:`extend_down` and :meth:`extend_up` otherwise.
        """
        eps = _check_levels(epsilons)
        low = eps < self._eps_min
        high = eps > self._eps_max
        if high.any():
            raise GeoprivError(
                f"{int(high.sum())} level(s) are above this path's eps_max={self._eps_max:g} (largest asked "
                f"{eps.max():g}). Extend the path exactly with path = path.extend_up({eps.max():g}, rng) and keep the "
                "returned path, or build it with DiffusionPath.sample(dim, eps_max=<largest level ever needed>, ...)."
            )
        if low.any():
            raise GeoprivError(
                f"{int(low.sum())} level(s) are below this path's eps_min={self._eps_min:g} (smallest asked "
                f"{eps.min():g}). Extend the path with path = path.extend_down({eps.min():g}, rng) and keep the "
                "returned path."
            )
        idx = np.searchsorted(self._levels, eps, side="right")
        return self._values[idx].copy()

    # ---- public facts ------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    @property
    def eps_min(self) -> float:
        return self._eps_min

    @property
    def eps_max(self) -> float:
        return self._eps_max

    def describe(self) -> dict:
        """Public facts about the path: mechanism, dimension, epsilon range.  No jump levels, no values."""
        return {
            "mechanism": "diffusion",
            "reference": PAPER,
            "dimension": self._dim,
            "eps_min": self._eps_min,
            "eps_max": self._eps_max,
        }

    def __repr__(self) -> str:
        return (
            f"DiffusionPath(dim={self._dim}, eps_min={self._eps_min:g}, eps_max={self._eps_max:g}, "
            f"bound={self._binding is not None}, <secret noise path: values not shown>)"
        )

    def secret_arrays(self) -> dict:
        """SECRET: copies of the jump levels (ascending) and the value on each piece.

        ``values[i]`` is the noise for levels in ``[levels[i-1], levels[i])`` (with
        ``levels[-1] = eps_min`` and the last piece closed at ``eps_max``).  For tests,
        diagnostics and figures only; with these anyone recovers the private value.
        """
        return {"levels": self._levels.copy(), "values": self._values.copy()}

    # ---- files -------------------------------------------------------------------------------
    def save(self, path, *, overwrite: bool = False) -> str:
        """Write the path to ``path`` (.npz).  THE FILE IS SECRET: with it anyone removes the noise.

        The file is written to a temporary file in the same directory (created owner-only,
        mode 0600) and moved into place atomically, so a crash never leaves a half-written
        path.  An existing file is never replaced unless ``overwrite=True``.  The file carries
        a notice saying it is secret and a SHA-256 checksum of its content.

        Returns the path written.
        """
        path = os.fspath(path)
        if os.path.isdir(path):
            raise GeoprivError(f"{path!r} is a directory; give a file name such as {os.path.join(path, 'path.npz')!r}.")
        if os.path.exists(path) and not overwrite:
            raise FileExistsError(f"{path!r} exists; pass overwrite=True to replace it (the old path is lost).")
        arrays = {"levels": np.asarray(self._levels), "values": np.asarray(self._values)}
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "secret": SECRET_NOTICE,
            "dim": self._dim,
            "eps_min": self._eps_min,
            "eps_max": self._eps_max,
            "binding": self._binding,
            "commitment_key": None if self._key is None else self._key.hex(),
        }
        meta["sha256"] = _digest(meta, arrays)
        # owner-only (the temporary file's mode): the path is secret
        write_new_file(
            path,
            lambda fh: np.savez(fh, meta=np.array(json.dumps(meta)), SECRET=np.array(SECRET_NOTICE), **arrays),
            overwrite=overwrite,
            prefix=".geopriv-diffusion-",
        )
        return path

    @classmethod
    def load(cls, path) -> DiffusionPath:
        """Read a path written by :meth:`save` (checksum and structure are verified).

        Raises
        ------
        MechanismFileError
            Missing, truncated, corrupt or foreign file, or another format version.
        """
        path = os.fspath(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise MechanismFileError(f"No diffusion path file at {path!r}.") from None
        except Exception as exc:  # BadZipFile, ValueError, OSError, EOFError ...
            raise MechanismFileError(
                f"{path!r} is not a readable diffusion path file ({type(exc).__name__}); it may be truncated or corrupt."
            ) from None
        try:
            meta = json.loads(str(data["meta"]))
        except (KeyError, ValueError):
            raise MechanismFileError(
                f"{path!r} is an .npz file but not a geopriv diffusion path (no metadata)."
            ) from None
        if meta.get("format") != FORMAT:
            raise MechanismFileError(f"{path!r} is not a diffusion path file (format {meta.get('format')!r}).")
        if meta.get("format_version") == 1:
            raise MechanismFileError(
                f"{path!r} is a diffusion path of format version 1, which did not record what it answers (source, value, "
                "column, frame), so it cannot be checked and is refused. Draw a fresh path (omit path= / --path): a new "
                "release, charged again; save that one."
            )
        if meta.get("format_version") != FORMAT_VERSION:
            raise MechanismFileError(
                f"{path!r} has format version {meta.get('format_version')}; this geopriv reads version {FORMAT_VERSION}."
            )
        if "levels" not in data or "values" not in data:
            raise MechanismFileError(f"{path!r} lacks its arrays; the file is truncated or corrupt.")
        arrays = {"levels": data["levels"], "values": data["values"]}
        stored = meta.pop("sha256", None)
        if stored != _digest(meta, arrays):
            raise MechanismFileError(f"{path!r} fails its checksum; the file was changed or is corrupt.")
        try:
            key = meta.get("commitment_key")
            return cls(
                int(meta["dim"]),
                float(meta["eps_min"]),
                float(meta["eps_max"]),
                arrays["levels"],
                arrays["values"],
                binding=meta.get("binding"),
                key=None if key is None else bytes.fromhex(key),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MechanismFileError(f"{path!r} holds an invalid path ({type(exc).__name__}).") from None


def _rebuild(dim, eps_min, eps_max, levels, values, binding, key):
    """Unpickle a path through __init__'s checks (binding and key included)."""
    return DiffusionPath(dim, eps_min, eps_max, levels, values, binding=binding, key=key)


def _digest(meta: dict, arrays: dict) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({k: v for k, v in meta.items() if k != "sha256"}, sort_keys=True).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name], dtype="<f8")
        h.update(name.encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


def _walk_down(dim: int, top: np.ndarray, eps_low: float, eps_high: float, gen: np.random.Generator):
    """Jump levels in (eps_low, eps_high) and the values below them, starting from ``top`` at eps_high.

    Returns ``levels`` (ascending, k) and ``values`` (k + 1, dim) with ``values[-1] = top``.
    """
    span = math.log(eps_high / eps_low)
    k = int(gen.poisson((dim + 1) * span)) if span > 0 else 0
    levels = np.sort(np.exp(gen.uniform(math.log(eps_low), math.log(eps_high), k)))
    levels = levels[(levels > eps_low) & (levels <= eps_high)]  # rounding at the ends (probability ~0)
    jumps = sample_jumps(dim, levels, gen)
    # value below level i = top + sum of the jumps at levels >= i
    below = top[None, :] + np.cumsum(jumps[::-1], axis=0)[::-1]
    return levels, np.concatenate([below, np.asarray(top, dtype=float).reshape(1, dim)])


# --------------------------------------------------------------------------------------------
# release
# --------------------------------------------------------------------------------------------


def diffuse(value, epsilons, rng=None, *, path: DiffusionPath | None = None):
    """Answer recipients at privacy levels ``epsilons`` about one private value, from one path.

    Recipient i gets ``value + V_{epsilons[i]}``: alone it is ``epsilons[i]``-private; any
    group of recipients together is ``max(epsilons of the group)``-private (module note).

    Parameters
    ----------
    value : float or 1-D array_like
        The private value (a number, a bit as 0/1, a location in metres...).  Never printed.
    epsilons : array_like
        One finite positive privacy level per recipient.
    rng : None, int, SeedSequence or Generator
        Randomness for a new path or for extending ``path`` (``None``: OS entropy).
    path : DiffusionPath, optional
        The secret path already used for THIS value.  Pass it to answer further recipients
        consistently (and within the same guarantee); it is extended exactly (down or up)
        if the new levels lie outside its range.  A bound path (:meth:`DiffusionPath.bind`)
        refuses any other value (:class:`~geopriv.exceptions.PathBindingError`, compared by
        its keyed commitment); an unbound one cannot tell, and using it with another value
        publishes the exact difference.  A fresh path for a value already released is a new
        release whose epsilon adds up.

    Returns
    -------
    responses : numpy.ndarray
        Shape ``(len(epsilons),)`` for a scalar value, ``(len(epsilons), dim)`` for a vector.
    path : DiffusionPath
        The (possibly extended) SECRET path; keep it to answer later recipients.

    Raises
    ------
    geopriv.GeoprivError
        If ``value`` is not finite numbers, or a level is not finite and > 0.
    geopriv.exceptions.PathBindingError
        If ``path`` was made for another value (or dimension).

    See Also
    --------
    diffuse_locations : The same release for a row of a GeoDataFrame, graded by network distance.
    DiffusionPath : The secret path of the answers.
    project_discrete : Answers projected to a finite set of values.
    DiffusionLedger : What paths cost (each its largest epsilon).

    Examples
    --------
    A private number told to three recipients at 0.5, 2 and 15 per unit of the value:

    >>> answers, path = geopriv.diffuse(1.0, [0.5, 2.0, 15.0], rng=1)
    >>> answers.round(3).tolist()
    [1.192, 1.098, 0.992]

    A later recipient at 30 is answered from the same path (the path is extended exactly), and
    a level asked again gets the same answer: together they are only 30-private.

    >>> more, path = geopriv.diffuse(1.0, [2.0, 30.0], rng=2, path=path)
    >>> more.round(3).tolist()
    [1.098, 1.011]
    >>> path.eps_max
    30.0
    """
    scalar = np.ndim(value) == 0
    try:
        u = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise GeoprivError("value must be a number or a 1-D vector of numbers.") from None
    if u.ndim != 1 or u.size == 0:
        raise GeoprivError(
            f"value must be a number or a non-empty 1-D vector (one private value), got shape {u.shape}."
        )
    if not np.all(np.isfinite(u)):
        raise GeoprivError("value is not finite (NaN or inf); nothing can be released for it. Fix the private value.")
    eps = _check_levels(epsilons)
    dim = u.size
    if path is None:
        path = DiffusionPath.sample(dim, float(eps.max()), float(eps.min()), rng)
    else:
        if not isinstance(path, DiffusionPath):
            raise ParameterTypeError(f"path must be a DiffusionPath, got {type(path).__name__}.")
        if path.dim != dim:
            raise PathBindingError(
                f"the path is {path.dim}-dimensional but the value has {dim} component(s); a path answers only the "
                "value it was made for. Draw a fresh path (omit path=): a new release, charged again."
            )
        path.check_value(u)
        gen = None
        if eps.min() < path.eps_min or eps.max() > path.eps_max:
            gen = _gen(rng)
        if eps.min() < path.eps_min:
            path = path.extend_down(float(eps.min()), gen)
        if eps.max() > path.eps_max:
            path = path.extend_up(float(eps.max()), gen)
    responses = u[None, :] + path.noise(eps)
    return (responses[:, 0] if scalar else responses), path


def project_discrete(responses, support) -> np.ndarray:
    """Post-process answers to the nearest element of a finite ``support`` (e.g. ``[0, 1]`` for a bit).

    Post-processing keeps every guarantee.  Ties go to the element listed first.

    Parameters
    ----------
    responses : array_like
        Shape (m,) for scalar answers or (m, dim).
    support : array_like
        Shape (k,) for scalar answers or (k, dim).

    Returns
    -------
    numpy.ndarray
        Same shape as ``responses``, each row (or number) an element of ``support``.

    Raises
    ------
    geopriv.GeoprivError
        If the shapes of ``responses`` and ``support`` do not match, ``support`` is empty, or
        either is not finite.

    See Also
    --------
    diffuse : Answers to project.
    diffuse_locations : Projects value answers with ``support=``.

    Examples
    --------
    Noisy answers about a bit, projected to 0 or 1:

    >>> geopriv.project_discrete([0.2, 0.7, -1.3, 2.4], [0, 1]).tolist()
    [0.0, 1.0, 0.0, 1.0]

    Vectors, projected to the nearest corner of the unit square:

    >>> geopriv.project_discrete([[0.2, 0.9], [1.4, -0.3]], [[0, 0], [0, 1], [1, 0], [1, 1]]).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    y = np.asarray(responses, dtype=float)
    s = np.asarray(support, dtype=float)
    scalar = y.ndim == 1
    if scalar:
        if s.ndim != 1:
            raise GeoprivError(f"scalar responses need a 1-D support (e.g. [0, 1]), got shape {s.shape}.")
        y2, s2 = y[:, None], s[:, None]
    else:
        if y.ndim != 2 or s.ndim != 2 or s.shape[1] != y.shape[1]:
            raise GeoprivError(
                f"responses of shape {y.shape} need a support of shape (k, {y.shape[-1] if y.ndim else '?'})."
            )
        y2, s2 = y, s
    if s2.shape[0] == 0:
        raise GeoprivError("support is empty: give at least one value to project onto.")
    if not (np.all(np.isfinite(y2)) and np.all(np.isfinite(s2))):
        raise GeoprivError("responses and support must be finite.")
    d2 = ((y2[:, None, :] - s2[None, :, :]) ** 2).sum(axis=2)
    nearest = s2[np.argmin(d2, axis=1)]
    return nearest[:, 0] if scalar else nearest


def sample_noise_batch(dim: int, epsilons, size: int, rng=None) -> np.ndarray:
    """Noise of ``size`` INDEPENDENT paths at the same levels, for simulations (not for releases).

    Same law as ``[DiffusionPath.sample(dim, max, min).noise(epsilons) for _ in range(size)]``
    but vectorised: between consecutive requested levels the number of jumps is Poisson, and
    the sum of the jumps ``sqrt(2 W_k)/l_k G_k`` is ``sqrt(sum_k 2 W_k / l_k^2) G`` (Gaussian
    given the W_k and levels l_k).  Two requested levels with no jump between them get the
    same value exactly, as on a path.

    Returns
    -------
    numpy.ndarray of shape (size, len(epsilons), dim)
    """
    dim = _check_dim(dim)
    eps = _check_levels(epsilons)
    size = int(size)
    gen = _gen(rng)
    order = np.argsort(eps)[::-1]  # descending: walk down from the largest level
    levels = eps[order]
    out = np.empty((size, levels.size, dim))
    current = sample_laplace(dim, levels[0], size, gen)
    out[:, 0] = current
    for i in range(1, levels.size):
        hi, lo = levels[i - 1], levels[i]
        if lo < hi:
            k = gen.poisson((dim + 1) * math.log(hi / lo), size)
            total = int(k.sum())
            if total:
                where = np.repeat(np.arange(size), k)
                jl = np.exp(gen.uniform(math.log(lo), math.log(hi), total))
                var = np.bincount(where, weights=2.0 * gen.standard_exponential(total) / jl**2, minlength=size)
                moved = k > 0
                current = current.copy()
                current[moved] += np.sqrt(var[moved])[:, None] * gen.standard_normal((int(moved.sum()), dim))
        out[:, i] = current
    result = np.empty_like(out)
    result[:, order] = out
    return result
