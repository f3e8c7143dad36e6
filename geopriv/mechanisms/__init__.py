"""Mechanisms: one module per paper, pure functions and small immutable objects.

Each takes a :class:`numpy.random.Generator` and reports its privacy loss; budgets are
spent and refused elsewhere (:mod:`geopriv.accounting`).
"""

from .planar_laplace import PlanarLaplace, polar_noise, radius_cdf, radius_quantile
from .predictive import (
    ClusterMean,
    FixedRate,
    FixedUtility,
    IndependentMechanism,
    Parrot,
    PredictiveMechanism,
    PrivateTest,
    PublicRun,
    TimeSkip,
    per_trace_predictor,
)

__all__ = [
    "PlanarLaplace",
    "polar_noise",
    "radius_cdf",
    "radius_quantile",
    "PrivateTest",
    "FixedRate",
    "FixedUtility",
    "TimeSkip",
    "Parrot",
    "ClusterMean",
    "PublicRun",
    "per_trace_predictor",
    "PredictiveMechanism",
    "IndependentMechanism",
]
