"""The one place geopriv makes random number generators.

* ``rng=None`` (the default, and the only choice for real releases): a fresh
  :class:`numpy.random.Generator` on PCG64DXSM seeded with 128 bits from the operating
  system's entropy source (:class:`numpy.random.SeedSequence` reads ``os.urandom``).
* an ``int`` or a :class:`numpy.random.SeedSequence`: reproducible output for tests and demos.
* a :class:`numpy.random.Generator`: used as given (reproducible if the caller seeded it).

numpy's global state (``np.random.seed``) is never read or touched.  Whether output is
reproducible is recorded in the result's provenance as ``seeded``; the seed itself is *not*
recorded, because anyone holding it could regenerate the noise and subtract it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .exceptions import ParameterError, ParameterTypeError

__all__ = ["RandomSource", "make_rng"]


@dataclass(frozen=True)
class RandomSource:
    """A generator and whether it is reproducible (``seeded``)."""

    generator: np.random.Generator
    seeded: bool


def make_rng(rng=None) -> RandomSource:
    """Turn the user's ``rng=`` argument into a :class:`RandomSource`.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` draws a seed from OS entropy.  Anything else is treated as seeded.

    Returns
    -------
    RandomSource
        ``generator``, a :class:`numpy.random.Generator` (a new PCG64DXSM one, or ``rng`` itself), and
        ``seeded``, whether the output is reproducible (``False`` only for ``rng=None``).

    Raises
    ------
    ParameterTypeError
        ``rng`` is a bool, a legacy :class:`numpy.random.RandomState` or any other type.
    ParameterError
        ``rng`` is a negative int.

    See Also
    --------
    perturb : Its ``rng=`` goes through this function, as every release function's does.

    Examples
    --------
    >>> source = geopriv.make_rng(42)
    >>> source.seeded
    True
    >>> bool(geopriv.make_rng(42).generator.random() == source.generator.random())
    True
    >>> geopriv.make_rng().seeded   # OS entropy: the only choice for real releases
    False
    """
    if rng is None:
        return RandomSource(np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence())), False)
    if isinstance(rng, RandomSource):
        return rng
    if getattr(rng, "per_row_streams", False):  # geopriv.keys.RowStreams: the keyed streams of a lazy release
        return RandomSource(rng, bool(rng.seeded))
    if isinstance(rng, np.random.Generator):
        return RandomSource(rng, True)
    if isinstance(rng, np.random.SeedSequence):
        return RandomSource(np.random.Generator(np.random.PCG64DXSM(rng)), True)
    if isinstance(rng, (bool, np.bool_)):
        raise ParameterTypeError("rng must be None, an int seed, a SeedSequence or a numpy Generator, not a bool.")
    if isinstance(rng, (int, np.integer)):
        if rng < 0:
            raise ParameterError("An int seed for rng must be >= 0.")
        return RandomSource(np.random.Generator(np.random.PCG64DXSM(int(rng))), True)
    if isinstance(rng, np.random.RandomState):
        raise ParameterTypeError(
            "rng=RandomState is the legacy global-style API; pass np.random.default_rng(seed) or an int seed, "
            "or leave rng=None for OS entropy."
        )
    raise ParameterTypeError(
        f"rng must be None (OS entropy), an int seed, a SeedSequence or a numpy Generator; got {type(rng).__name__}."
    )
