"""The small contracts every mechanism satisfies, checked when one is passed in.

A mechanism is a pure, immutable object: it samples from a random source it is given (a numpy
``Generator``, or the per-row keyed streams of a lazy release, :class:`geopriv.keys.RowStreams`)
and reports its privacy loss and public parameters.  It never chooses frames, writes provenance
or charges budgets: the release path (:mod:`geopriv.release`) does.  Four kinds:

:class:`PointMechanism`
    one output per input row (planar Laplace, the eikonal mechanism, the optimal mechanism);
:class:`TraceMechanism`
    a whole trace at a time, with its budget accountant (the predictive mechanism);
:class:`MeasureMechanism`
    a synthetic point set from noisy counts on a public tree (the private measure);
:class:`DiffusionNoise`
    one secret path answering many levels (the private Markov jump process).

:func:`check_mechanism` turns a missing piece into a :class:`TypeError` that lists it, before
anything is computed, instead of an ``AttributeError`` in the middle of a release.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..exceptions import ParameterTypeError

__all__ = ["PointMechanism", "TraceMechanism", "MeasureMechanism", "DiffusionNoise", "check_mechanism"]


@runtime_checkable
class PointMechanism(Protocol):
    """Releases each row on its own: the contract of :func:`geopriv.release.release_points`."""

    frame_policy: str  # "metric" (noise in the public frame chosen by the release path) or "own"

    def release(self, xy, frame, rng, labels=None): ...

    def describe(self, frame) -> dict: ...

    def finite_precision(self, frame, lattice): ...

    def grid_epsilon_per_m(self) -> float: ...


@runtime_checkable
class TraceMechanism(Protocol):
    """Releases traces step by step against a per-trace accountant."""

    def run(self, traces, total=None, rng=None, accountant=None, **kwargs): ...


@runtime_checkable
class MeasureMechanism(Protocol):
    """Noisy counts on a public tree, then points placed in the noisy cells."""

    epsilon: float

    def resolved_depth(self, n: int) -> int: ...

    def leaf_counts(self, keys, rng, depth=None, counts=None): ...

    def place(self, nodes, counts, depth, rng, *, n_out=None, placement="uniform"): ...

    def describe(self, n: int) -> dict: ...


@runtime_checkable
class DiffusionNoise(Protocol):
    """A secret noise path: the same level always gets the same noise."""

    dim: int
    eps_min: float
    eps_max: float

    def noise(self, epsilons): ...

    def extend_down(self, eps_new_min, rng=None): ...

    def extend_up(self, eps_new_max, rng=None): ...


_FRAME_POLICIES = ("metric", "planar", "own")


def check_mechanism(obj, protocol, what: str = "mechanism"):
    """Return ``obj`` if it satisfies ``protocol``; else a TypeError naming every missing member."""
    names = [n for n in getattr(protocol, "__annotations__", {})] + [
        n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")
    ]
    missing = [n for n in dict.fromkeys(names) if not hasattr(obj, n)]
    if missing:
        raise ParameterTypeError(
            f"{what} {type(obj).__name__} is not a {protocol.__name__}: it lacks {', '.join(missing)}. "
            f"See geopriv.mechanisms.base.{protocol.__name__} for the contract."
        )
    if protocol is PointMechanism and getattr(obj, "frame_policy", None) not in _FRAME_POLICIES:
        raise ParameterTypeError(
            f"{what} {type(obj).__name__}.frame_policy must be one of {_FRAME_POLICIES}, "
            f"got {getattr(obj, 'frame_policy', None)!r}."
        )
    return obj
