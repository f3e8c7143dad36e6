"""Exact discrete Laplace (two-sided geometric) noise from integer draws only.

Paper
-----
C. L. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020 (arXiv:2004.00010), Algorithm 1 (Bernoulli(exp(-gamma)) from Bernoulli trials
with rational parameters) and Algorithm 2 (the discrete Laplace law from uniform integers and
those trials).

Why not ``Generator.geometric``: numpy draws a geometric variable by inverting a 53-bit
uniform double through ``log``; its tails are truncated and its probabilities are rounded,
so the density-ratio argument of differential privacy (Mironov 2012) does not hold exactly.
The sampler here makes only calls ``gen.integers(low, high)`` with integer bounds and does
rational arithmetic on Python integers: its output law is exactly
``P(k) = (1 - r) / (1 + r) * r**abs(k)`` with ``r = exp(-1 / t)``.  The derivation is in the
docstring of :func:`sample_discrete_laplace`.
"""

from __future__ import annotations

import functools
import numbers
from fractions import Fraction

import numpy as np

from ..exceptions import ParameterError

__all__ = ["MAX_SCALE", "SMALL", "exact_scale", "sample_discrete_laplace"]

#: largest scale accepted: the output is int64, and below this scale a draw beyond the int64
#: range has probability under exp(-2**10) (one is refused, never wrapped, see below)
MAX_SCALE = Fraction(2**52)
_INT64_MAX = (1 << 63) - 1
_WORD = 1 << 64  # one uniform 64-bit word: the largest range one draw covers


def exact_scale(scale=None, epsilon=None) -> Fraction:
    """The scale ``t`` of the discrete Laplace law as an exact rational.

    Parameters
    ----------
    scale : Fraction, int, float or None
        ``t`` in ``P(k) ~ exp(-|k| / t)``.  A float is converted exactly
        (``Fraction(scale)``: the binary value of the double, no rounding).
    epsilon : Fraction, int, float or None
        Alternatively the privacy loss per unit of l1 sensitivity: ``t = 1 / Fraction(epsilon)``,
        exact.  Give exactly one of ``scale`` and ``epsilon``.

    Returns
    -------
    Fraction
        ``t > 0``.

    Raises
    ------
    ParameterError
        Neither or both given, not a finite positive real number, or ``t`` above
        :data:`MAX_SCALE`.
    """
    if (scale is None) == (epsilon is None):
        raise ParameterError("give exactly one of scale= and epsilon= for the discrete Laplace noise.")
    name, value = ("scale", scale) if scale is not None else ("epsilon", epsilon)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Rational, float, np.floating, np.integer)):
        raise ParameterError(f"{name} must be a positive number (int, float or Fraction), got {type(value).__name__}.")
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            raise ParameterError(f"{name} must be finite and > 0, got {float(value)!r}.")
        value = Fraction(float(value))  # exact: every finite double is a dyadic rational
    else:
        value = Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    if value <= 0:
        raise ParameterError(f"{name} must be > 0, got {float(value)!r}.")
    t = value if scale is not None else 1 / value
    if t > MAX_SCALE:
        raise ParameterError(
            f"the discrete Laplace scale must be at most 2**52 (int64 output), got about {float(t):.3g}."
        )
    return t


# ----------------------------------------------------------------------------- exact Bernoulli trials
def _bernoulli_rational(x: int, y: int, m: int, gen) -> np.ndarray:
    """``m`` i.i.d. Bernoulli(x / y) trials, ``0 <= x <= y`` Python integers, exactly."""
    if x == 0:
        return np.zeros(m, dtype=bool)
    if x >= y:
        return np.ones(m, dtype=bool)
    if y <= _WORD:  # one uniform integer in [0, y) per trial
        return gen.integers(0, y, size=m, dtype=np.uint64) < x
    # Lazy comparison of a uniform real V = 0.w1 w2 ... (base 2**64, one uniform word per digit)
    # with the base-2**64 expansion of x / y: P(V < x / y) = x / y.  A digit ties with
    # probability 2**-64, so almost every trial is decided by its first word.
    digit, rem = divmod(x << 64, y)
    w = gen.integers(0, _WORD, size=m, dtype=np.uint64)
    out = w < digit
    undecided = np.flatnonzero(w == digit)
    while undecided.size:
        digit, rem = divmod(rem << 64, y)
        w = gen.integers(0, _WORD, size=undecided.size, dtype=np.uint64)
        out[undecided[w < digit]] = True
        undecided = undecided[w == digit]
    return out


@functools.lru_cache(maxsize=256)
def _chain_thresholds(x: int, y: int):
    """Integer thresholds that run the first ``n`` rounds of Algorithm 1 with one uniform draw.

    With ``M = y**n n!`` and ``T_k = x**k y**(n-k) n! / k!`` (integers, decreasing in k as
    ``x <= y``), a uniform W on [0, M) has ``P(W < T_k) = (x/y)**k / k! = P(K > k)``: the
    events ``W < T_k`` are nested exactly as the events "Algorithm 1 passed round k" are, so
    ``K = 1 + #{k <= n : W < T_k}`` has the law of Algorithm 1's stopping round up to n, and
    given ``K > n`` the later rounds are fresh independent trials.  ``n`` is the largest
    integer (at most 4: the rest, probability at most 1/24, runs round by round) with
    ``M <= 2**64``, or 1.
    """
    n, fact = 1, 1
    while n < 4 and y ** (n + 1) * fact * (n + 1) <= _WORD:
        n += 1
        fact *= n
    big_m = y**n * fact
    if n == 1:
        return 1, big_m, None
    thresholds = []
    for k in range(1, n + 1):
        fact_k = 1
        for j in range(2, k + 1):
            fact_k *= j
        thresholds.append(x**k * y ** (n - k) * (fact // fact_k))
    return n, big_m, tuple(np.uint64(c) for c in thresholds)


def _bernoulli_exp_unit(x: int, y: int, m: int, gen) -> np.ndarray:
    """``m`` trials of Bernoulli(exp(-x/y)) for integers ``0 <= x <= y`` (CKS Algorithm 1)."""
    if x == 0 or m == 0:
        return np.ones(m, dtype=bool)
    n, big_m, thresholds = _chain_thresholds(x, y)
    if n == 1:  # round K = 1 over all trials
        passed = _bernoulli_rational(x, y, m, gen).astype(np.int64)
    else:  # rounds 1..n with one draw per trial
        w = gen.integers(0, big_m, size=m, dtype=np.uint64)
        passed = (w < thresholds[0]).astype(np.int8)
        for c in thresholds[1:]:
            passed += w < c
    out = passed % 2 == 0  # stopped at K = passed + 1: output 1 iff K is odd
    active = np.flatnonzero(passed == n)
    k = n + 1
    while active.size:
        hit = _bernoulli_rational(x, y * k, active.size, gen)
        out[active[~hit]] = k % 2 == 1
        active = active[hit]
        k += 1
    return out


def _bernoulli_exp(x: int, y: int, m: int, gen) -> np.ndarray:
    """``m`` trials of Bernoulli(exp(-gamma)) for any rational ``gamma = x / y >= 0``.

    exp(-gamma) = exp(-1)**floor(gamma) * exp(-(gamma - floor(gamma))): a trial succeeds when
    all of these independent trials succeed; a trial that failed needs no further draws.
    """
    whole, rest = divmod(x, y)
    if whole == 0:
        return _bernoulli_exp_unit(x, y, m, gen)
    out = _bernoulli_exp_unit(1, 1, m, gen)
    alive = np.flatnonzero(out)
    i = 1
    while i < whole and alive.size:
        ok = _bernoulli_exp_unit(1, 1, alive.size, gen)
        out[alive[~ok]] = False
        alive = alive[ok]
        i += 1
    if rest and alive.size:
        ok = _bernoulli_exp_unit(rest, y, alive.size, gen)
        out[alive[~ok]] = False
    return out


def _bernoulli_exp_ratio(u: np.ndarray, d: int, t: Fraction, gen) -> np.ndarray:
    """Per-trial Bernoulli(exp(-u_i / t)) for integers ``0 <= u_i < d <= t`` (CKS Algorithm 1, vectorised).

    Round ``k`` of Algorithm 1 draws Bernoulli(u_i / (t k)) = Bernoulli(u_i b / (a k)) for the
    trials still running (``t = a / b``): one uniform integer in [0, a k) compared with
    ``u_i b < a`` when ``a k`` fits in int64; otherwise the product of the independent trials
    Bernoulli(u_i / d) (a uniform integer in [0, d)) and Bernoulli(d / (t k)) (one rational
    parameter for the whole round, ``d / t <= 1``), whose parameters multiply to
    ``u_i / (t k)``.
    """
    a, b = t.numerator, t.denominator
    gamma = Fraction(d) / t
    out = np.ones(u.size, dtype=bool)  # a trial that stops at an odd K outputs 1
    active = None  # all trials
    ua = u
    k = 1
    while ua.size:
        if a * k <= _INT64_MAX:
            hit = gen.integers(0, a * k, size=ua.size, dtype=np.int64) < (ua * b if b != 1 else ua)
        else:
            hit = (gen.integers(0, d, size=ua.size, dtype=np.int64) < ua) & _bernoulli_rational(
                gamma.numerator, gamma.denominator * k, ua.size, gen
            )
        if k % 2 == 0:
            out[(~hit).nonzero()[0] if active is None else active[~hit]] = False
        active = hit.nonzero()[0] if active is None else active[hit]
        ua = ua[hit]
        k += 1
    return out


def _count_successes(x: int, y: int, m: int, gen) -> np.ndarray:
    """``m`` draws of V, the number of successes of Bernoulli(exp(-x/y)) before the first failure.

    P(V = v) = (1 - exp(-x/y)) exp(-v x/y) exactly.
    """
    ok = _bernoulli_exp(x, y, m, gen)
    v = ok.astype(np.int64)
    alive = np.flatnonzero(ok)
    while alive.size:
        alive = alive[_bernoulli_exp(x, y, alive.size, gen)]
        v[alive] += 1
    return v


def _geometric(t: Fraction, m: int, gen) -> np.ndarray:
    """``m`` draws of G >= 0 with P(G = g) = (1 - r) r**g, ``r = exp(-1 / t)``, exactly."""
    a, b = t.numerator, t.denominator
    k = 0 if a < b else (a // b).bit_length() - 1  # d = 2**k <= t < 2**(k + 1) when t >= 1
    d = 1 << k
    if k == 0:
        u = np.zeros(m, dtype=np.int64)
    else:
        # U uniform on [0, d), kept with probability exp(-U / t), redrawn otherwise.
        u = gen.integers(0, d, size=m, dtype=np.int64)
        todo = np.flatnonzero(~_bernoulli_exp_ratio(u, d, t, gen))
        while todo.size:
            prop = gen.integers(0, d, size=todo.size, dtype=np.int64)
            keep = _bernoulli_exp_ratio(prop, d, t, gen)
            u[todo[keep]] = prop[keep]
            todo = todo[~keep]
    gamma = Fraction(d) / t
    v = _count_successes(gamma.numerator, gamma.denominator, m, gen)
    if v.size and int(v.max()) > (_INT64_MAX - (d - 1)) // d:
        raise ParameterError(
            "a discrete Laplace draw left the int64 range (probability below exp(-1000)); refused rather than wrapped."
        )
    if d == 1:
        return u + v
    v *= d
    v += u
    return v


def _two_sided(t: Fraction, m: int, gen):
    """G with a fair sign S, and the positions where (S = -, G = 0) must be redrawn."""
    g = _geometric(t, m, gen)
    neg = gen.integers(0, 2, size=m, dtype=bool)
    np.negative(g, out=g, where=neg)
    return g, np.flatnonzero(neg & (g == 0))


class _Words:
    """Uniform integers below any bound from a buffer of uniform 64-bit words (the small-size path).

    ``below(y)`` joins ``L = ceil(bits(y) / 64)`` words into W uniform on ``[0, 2**(64 L))``
    and returns ``W mod y`` if ``W < y floor(2**(64 L) / y)``, else draws again: exactly
    uniform on ``[0, y)`` (each residue has ``floor(2**(64 L) / y)`` preimages), at most two
    tries on average.  The words come from ``gen.integers(0, 2**64, dtype=uint64)``.
    """

    def __init__(self, gen, n: int):
        self.gen = gen
        self.n = max(int(n), 16)
        self.buf: list = []

    def word(self) -> int:
        if not self.buf:
            self.buf = self.gen.integers(0, _WORD, size=self.n, dtype=np.uint64).tolist()
        return self.buf.pop()

    def below(self, y: int) -> int:
        if y <= _WORD:
            limit = _WORD - _WORD % y
            while True:
                w = self.buf.pop() if self.buf else self.word()
                if w < limit:
                    return w % y
        words = -(-(y - 1).bit_length() // 64)
        span = 1 << (64 * words)
        limit = span - span % y
        while True:
            w = self.word()
            for _ in range(words - 1):
                w = (w << 64) | self.word()
            if w < limit:
                return w % y


def _one_exp_unit(x: int, y: int, src: _Words) -> bool:
    """One Bernoulli(exp(-x/y)) trial, ``0 <= x <= y`` (CKS Algorithm 1)."""
    k = 1
    while src.below(y * k) < x:
        k += 1
    return k % 2 == 1


def _one_exp(x: int, y: int, src: _Words) -> bool:
    """One Bernoulli(exp(-x/y)) trial for any ``x / y >= 0``."""
    whole, rest = divmod(x, y)
    for _ in range(whole):
        if not _one_exp_unit(1, 1, src):
            return False
    return _one_exp_unit(rest, y, src) if rest else True


@functools.lru_cache(maxsize=256)
def _plan(a: int, b: int):
    """k, d = 2**k and gamma = d / t (as an integer pair) for t = a / b."""
    t = Fraction(a, b)
    k = 0 if a < b else (a // b).bit_length() - 1
    d = 1 << k
    gamma = Fraction(d) / t
    return k, d, gamma.numerator, gamma.denominator


def _sample_small(t: Fraction, m: int, gen) -> np.ndarray:
    """The same algorithm, one draw at a time (for a few draws: no per-round numpy overhead)."""
    a, b = t.numerator, t.denominator
    k, d, gx, gy = _plan(a, b)
    src = _Words(gen, 12 * m + 8)
    out = np.empty(m, dtype=np.int64)
    for j in range(m):
        while True:
            if k == 0:
                u = 0
            else:
                while True:  # uniform proposal kept with probability exp(-u / t) = exp(-u b / a)
                    u = src.below(d)
                    if _one_exp_unit(u * b, a, src):
                        break
            v = 0
            while _one_exp(gx, gy, src):
                v += 1
            g = u + d * v
            if g > _INT64_MAX:
                raise ParameterError(
                    "a discrete Laplace draw left the int64 range (probability below exp(-1000)); "
                    "refused rather than wrapped."
                )
            if src.below(2):  # the sign: (-, 0) is redrawn
                if g:
                    out[j] = -g
                    break
            else:
                out[j] = g
                break
    return out


#: below this many draws per call the one-at-a-time path is faster than the vectorised one
SMALL = 48


def sample_discrete_laplace(scale, size, gen, *, epsilon=None) -> np.ndarray:
    r"""Exact discrete Laplace noise, ``P(k) = (1 - r) / (1 + r) * r**|k|``, ``r = exp(-1/t)``.

    Parameters
    ----------
    scale : Fraction, int, float or None
        The scale ``t`` (an exact rational: a float is taken at its exact binary value).
        ``None`` when ``epsilon`` is given.
    size : int or tuple of int
        Shape of the output.
    gen : numpy.random.Generator
        Only its ``integers`` method is called, always with integer bounds.
    epsilon : Fraction, int, float, optional
        Instead of ``scale``: ``t = 1 / epsilon`` exactly (noise for l1 sensitivity 1).

    Returns
    -------
    numpy.ndarray
        int64 array of shape ``size``.

    Raises
    ------
    ParameterError
        Bad or missing scale (see :func:`exact_scale`), or a draw beyond the int64 range
        (probability below ``exp(-1000)`` for every accepted scale: refused, never wrapped).

    Notes
    -----
    **The exact draws.**  The only source of randomness is ``gen.integers(lo, hi, dtype=...)``
    with integer bounds.  numpy reduces uniform 64-bit words of the bit generator to the
    range ``[lo, hi)`` by rejection (Lemire's method, or masking), which is exactly uniform
    whenever the words are: the same assumption every sampler makes of its bit source.  All
    other arithmetic is on integers (int64 where it provably fits, Python integers otherwise)
    and on ``fractions.Fraction``: no floating point touches the law.

    **Rational Bernoulli trials.**  Bernoulli(x / y) for integers ``0 <= x <= y`` is
    ``[W < x]`` for W uniform on ``[0, y)``: one draw when ``y <= 2**64``.  For larger ``y``
    a uniform real ``V`` is drawn lazily, one 64-bit digit at a time, and compared with the
    base-``2**64`` expansion of ``x / y`` (computed exactly by long division); the first
    differing digit decides ``V < x / y``, which has probability exactly ``x / y``; the
    comparison ends with probability one (a tie has probability ``2**-64`` per digit).

    **Bernoulli(exp(-gamma)), 0 <= gamma <= 1** (CKS Algorithm 1): set K = 1 and draw
    Bernoulli(gamma / K) until one fails, increasing K after each success; output 1 iff the
    final K is odd.  P(K > k) = gamma**k / k!, hence
    ``P(K odd) = sum_j (-1)**j gamma**j / j! = exp(-gamma)`` exactly.  Every trial of a round
    has the same K, so a round is one vectorised draw (rational parameter ``gamma / K``).  With
    a per-trial ``gamma_i = u_i / t`` (below; ``t = a / b``) a round draws W uniform on
    ``[0, a K)`` and compares it with ``u_i b``; if ``a K`` leaves int64 it multiplies the
    independent trials Bernoulli(u_i / d) and Bernoulli(d / (t K)), whose parameters multiply
    to ``u_i / (t K)`` (``u_i < d <= t``).  For gamma > 1,
    ``exp(-gamma) = exp(-1)**floor(gamma) * exp(-frac(gamma))``: a product of independent
    trials, stopped at the first failure.

    **The one-sided geometric law** G with ``P(G = g) = (1 - r) r**g`` (CKS Algorithm 2, with
    a power of two in place of the scale's numerator).  Let ``d = 2**k`` with ``d <= t < 2d``
    (``d = 1`` when ``t < 1``).  Writing ``g = u + d v`` with ``0 <= u < d`` is a bijection
    and ``r**g = r**u * (r**d)**v``, so U and V are independent, U has law ``~ r**u`` on
    ``[0, d)`` and V is geometric with ratio ``exp(-d / t)``:

    * V counts the successes of Bernoulli(exp(-d / t)) before the first failure:
      ``P(V = v) = (1 - exp(-d/t)) exp(-d/t)**v`` exactly; ``d / t`` lies in ``(1/2, 1]``
      when ``t >= 1``, so V is small (mean below 1.6).
    * U: uniform on ``[0, d)``, accepted with probability ``exp(-U / t)`` (a Bernoulli of
      Algorithm 1 with the per-trial ``gamma = U / t < 1``), redrawn otherwise: the accepted U
      has law ``~ r**u``, and a round accepts ``(1/d) sum_u exp(-u/t) >= (t/d)(1 - exp(-d/t))
      >= 1 - exp(-1)``, about 0.63, of the trials.

    **The two-sided law** (CKS Algorithm 2's last step): draw G and a fair sign S; reject
    ``(S = -, G = 0)`` and redraw; output ``S G``.  Before rejection ``P(S G = z)`` is
    ``(1 - r) r**|z| / 2`` for ``z != 0`` and for ``z = 0`` (only the + sign kept), so the
    accepted output is ``~ r**|z| = exp(-|z| / t)``: the discrete Laplace law, exactly, with
    normaliser ``(1 - r) / (1 + r)``.  Its density ratio between ``z`` and ``z + delta`` is
    at most ``exp(|delta| / t)``, the bound the privacy proofs use, with no rounding anywhere.

    **Implementation.**  The loops run over rejection rounds and Bernoulli rounds, never over
    samples: each round is one numpy draw over the trials still running, and their number
    falls geometrically.  Two exact shortcuts: the first rounds of Algorithm 1 with a common
    rational gamma = x / y take one draw W uniform on ``[0, y**n n!)`` (n <= 4) compared with
    the nested thresholds ``x**k y**(n-k) n! / k!`` (``P(W < T_k) = gamma**k / k! = P(K > k)``);
    and calls of at most :data:`SMALL` draws run the same algorithm one draw at a time on a
    buffer of uniform 64-bit words, reduced to ``[0, y)`` by rejection (multi-word for
    ``y > 2**64``), which avoids numpy's per-call overhead.  Running time is random (timing is
    outside geopriv's threat model).

    Examples
    --------
    >>> import numpy as np
    >>> from fractions import Fraction
    >>> gen = np.random.default_rng(1)
    >>> z = sample_discrete_laplace(Fraction(5, 2), 1000, gen)
    >>> z.dtype, z.shape
    (dtype('int64'), (1000,))
    >>> sample_discrete_laplace(None, 3, gen, epsilon=0.5).dtype
    dtype('int64')
    """
    t = exact_scale(scale, epsilon)
    shape = (int(size),) if np.ndim(size) == 0 else tuple(int(s) for s in size)
    m = int(np.prod(shape, dtype=np.int64))
    if m <= SMALL:
        return _sample_small(t, m, gen).reshape(shape)
    out, todo = _two_sided(t, m, gen)
    while todo.size:
        z, again = _two_sided(t, todo.size, gen)
        keep = np.ones(todo.size, dtype=bool)
        keep[again] = False
        out[todo[keep]] = z[keep]
        todo = todo[again]
    return out.reshape(shape)
