"""Numeric foundations of every release: epsilon checks and the finite-precision bound.

Below the mechanisms and the frame (both use them): :func:`check_epsilon` refuses a privacy
parameter that is not a finite positive number, and :func:`discretisation_epsilon` is the
effective epsilon of a release snapped to a lattice (Andres et al. 2013, Thm 4.1; Mironov 2012
for why the float output needs a lattice at all).
"""
from __future__ import annotations

import math

import numpy as np

from .exceptions import ParameterError, ParameterTypeError

__all__ = ["ANGLE_RESOLUTION", "check_epsilon", "discretisation_epsilon", "resolve_epsilon"]

#: the angular resolution of a float64 angle on [0, 2 pi): the theta step of Thm 4.1
ANGLE_RESOLUTION = 2.0 * math.pi * 2.0**-52


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    """Validate a privacy parameter: a finite number > 0 (no code path may release a true location)."""
    if isinstance(epsilon, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be a positive number, not a bool ({epsilon!r}).")
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a positive number, got {epsilon!r}.") from None
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(
            f"{name} must be finite and > 0 (got {epsilon!r}); 0 or negative would mean no or undefined noise and "
            "infinity would release true locations. Typical values: level ln(4) within radius 200 m, "
            "i.e. epsilon = math.log(4) / 200 per metre."
        )
    return value


def discretisation_epsilon(epsilon: float, step: float, r_max: float, angle_resolution: float = ANGLE_RESOLUTION) -> float:
    """Effective epsilon of the discretised, truncated mechanism (Andrés et al. 2013, Thm 4.1).

    All lengths in the same unit as ``1/epsilon``.  Raises ValueError when the bound does not
    exist (grid too fine for the region: q <= 2 e^{eps u}).
    """
    q = step / (r_max * angle_resolution)
    k = 2.0 * math.exp(epsilon * step)
    if q <= k:
        raise ParameterError(
            f"Grid step too small for the region: the finite-precision bound needs step / (r_max * {angle_resolution:.2e}) "
            f"> 2 exp(epsilon * step). Use a coarser grid or a smaller region."
        )
    return epsilon + math.log((q + k) / (q - k)) / step


def resolve_epsilon(epsilon=None, level=None, radius=None) -> float:
    """Epsilon per ground metre from ``epsilon`` or from ``level`` within ``radius`` metres.

    ``level=math.log(4), radius=200`` means: two locations 200 m apart are at most 4 times
    more or less likely to produce any output, i.e. epsilon = ln(4) / 200 per metre.
    """
    if epsilon is not None:
        if level is not None or radius is not None:
            raise ParameterError("Give either epsilon (per metre) or level and radius (metres), not both.")
        return check_epsilon(epsilon)
    if level is None or radius is None:
        raise ParameterError(
            "Say how much privacy: epsilon=<loss per metre>, or level=<loss> and radius=<metres> "
            "(e.g. level=math.log(4), radius=200 for 'ln 4 within 200 m')."
        )
    level = check_epsilon(level, "level")
    radius = check_epsilon(radius, "radius (metres)")
    return check_epsilon(level / radius, "level / radius")
