"""Numeric foundations of every release: epsilon checks, the noise scale and the finite-precision bound.

Below the mechanisms and the frame (both use them): :func:`check_epsilon` refuses a privacy
parameter that is not a finite positive number, :func:`check_noise_scale` warns when an epsilon
per ground metre gives almost no protection (or almost no utility), and
:func:`discretisation_epsilon` is the effective epsilon of a release snapped to a lattice
(Andres et al. 2013, Thm 4.1; Mironov 2012 for why the float output needs a lattice at all).

These checks are owned here, whoever calls them: a mechanism checks its epsilon when it is
built, a release's plan warns about the noise scale (:func:`check_noise_scale`) once it knows
its lattice and declared area; the frame and lattice checks are :mod:`geopriv.frame`'s.
"""

from __future__ import annotations

import math
import os
import sys
import warnings

import numpy as np

from .exceptions import Fix, LowUtilityWarning, ParameterError, ParameterTypeError, WeakProtectionWarning

__all__ = [
    "ANGLE_RESOLUTION",
    "PROTECTION_FLOOR_M",
    "check_epsilon",
    "check_noise_scale",
    "discretisation_epsilon",
    "expected_displacement",
    "resolve_epsilon",
]

#: a planar Laplace release whose expected displacement (2 / epsilon, ground metres) is below this protects
#: almost nothing: GPS fixes are this accurate, and two places this far apart are told apart easily
PROTECTION_FLOOR_M = 10.0

#: names :func:`check_epsilon` gives privacy parameters (others: grid steps, speeds, accuracies...)
_PRIVACY_NAMES = ("epsilon", "level", "radius", "radius (metres)", "level / radius")
#: how to say "ln 4 within 200 m" in each front end
_TYPICAL = Fix(
    "typical_epsilon",
    python="Typical: level=math.log(4), radius=200 (ln 4 within 200 m), i.e. epsilon = math.log(4) / 200 per ground "
    "metre.",
    cli="Typical: --level ln4 --radius 200 (ln 4 within 200 m), the same as --epsilon ln4/200 per ground metre.",
    qgis="Typical: privacy level 1.386 (ln 4) within a radius of 200 metres, i.e. epsilon 0.0069 per ground metre.",
)

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
            "infinity would release true locations.",
            fix=_TYPICAL if name in _PRIVACY_NAMES else None,
        )
    return value


def discretisation_epsilon(
    epsilon: float, step: float, r_max: float, angle_resolution: float = ANGLE_RESOLUTION
) -> float:
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

    Parameters
    ----------
    epsilon : float, optional
        Privacy loss per ground metre.  Give this, or ``level`` and ``radius``.
    level : float, optional
        The privacy level (a loss, e.g. ``math.log(4)``) within ``radius``.
    radius : float, optional
        The radius in ground metres within which two locations are protected at ``level``.

    Returns
    -------
    float
        Epsilon per ground metre: ``epsilon``, or ``level / radius``; finite and > 0.

    Raises
    ------
    ParameterError
        Both ``epsilon`` and ``level``/``radius`` are given, or neither, or a value is not a finite
        number > 0.
    ParameterTypeError
        A value is a bool.

    See Also
    --------
    perturb : Releases points at this epsilon.
    PlanarLaplace : The mechanism built from it.

    Examples
    --------
    >>> geopriv.resolve_epsilon(level=math.log(4), radius=200)   # ln 4 within 200 m
    0.00693...
    >>> geopriv.resolve_epsilon(0.01)
    0.01
    >>> 2 / geopriv.resolve_epsilon(level=math.log(4), radius=200)   # the mean displacement, in metres
    288.5...
    """
    if epsilon is not None:
        if level is not None or radius is not None:
            raise ParameterError(
                "Epsilon (per ground metre) and a level within a radius (metres) were both given.",
                fix=Fix(
                    "one_privacy_parameter",
                    python="Give either epsilon or level and radius, not both.",
                    cli="Give either --epsilon or --level with --radius, not both.",
                    qgis="Leave 'Epsilon' empty to use the level and the radius.",
                ),
            )
        return check_epsilon(epsilon)
    if level is None or radius is None:
        raise ParameterError(
            "Say how much privacy: a level within a radius (metres), or epsilon per ground metre.",
            fix=Fix(
                "typical_epsilon",
                python="Give level=<loss> and radius=<metres> (e.g. level=math.log(4), radius=200 "
                "for 'ln 4 within 200 m'), or epsilon=<loss per ground metre>.",
                cli=_TYPICAL.cli,
                qgis=_TYPICAL.qgis,
            ),
        )
    level = check_epsilon(level, "level")
    radius = check_epsilon(radius, "radius (metres)")
    return check_epsilon(level / radius, "level / radius")


def expected_displacement(epsilon_per_m) -> float:
    """The mean distance, in ground metres, between a point and its planar Laplace release: 2 / epsilon.

    (The planar Laplace radius is Gamma(2, 1/epsilon): mean 2/epsilon, median about 1.68/epsilon.)
    """
    return 2.0 / check_epsilon(epsilon_per_m)


#: how to ask for more protection (a level within a radius is hard to get wrong)
_MORE_NOISE = Fix(
    "level_radius",
    python="Epsilon is per ground metre (the level divided by the radius): for protection, give a level within a "
    "radius of tens or hundreds of metres, e.g. level=math.log(4), radius=200 (ln 4 within 200 m: a mean "
    "displacement of 289 m).",
    cli="--epsilon is per ground metre (the same as --level divided by --radius): for protection, give a level "
    "within a radius of tens or hundreds of metres, e.g. --level ln4 --radius 200 (ln 4 within 200 m: a mean "
    "displacement of 289 m).",
    qgis="Epsilon is per ground metre (the privacy level divided by the radius): leave 'Epsilon' empty and set a "
    "privacy level within a radius of tens or hundreds of metres, e.g. 1.386 (ln 4) within 200 metres (a mean "
    "displacement of 289 m).",
)
_LESS_NOISE = Fix(
    "level_radius",
    python="Check epsilon (per ground metre; e.g. level=math.log(4), radius=200 is ln 4 within 200 m) and the "
    "declared area.",
    cli="Check the privacy options (--epsilon is per ground metre; e.g. --level ln4 --radius 200 is ln 4 within "
    "200 m) and the declared area.",
    qgis="Check the privacy parameters (epsilon is per ground metre; e.g. level 1.386 within 200 metres is ln 4 "
    "within 200 m) and the declared area.",
)


def _metres(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _outside_geopriv() -> int:
    """The stack level of the first caller outside geopriv (where a warning is attributed)."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def check_noise_scale(
    epsilon_per_m, *, grid_m=None, area_m=None, what: str = "the release", fix: Fix | None = None
) -> float:
    """Warn when planar Laplace noise at ``epsilon_per_m`` protects almost nothing, or tells almost nothing.

    Computed from public parameters only, never from the data: the expected displacement
    2 / epsilon (ground metres) is compared with

    * :data:`PROTECTION_FLOOR_M` and the lattice step ``grid_m``: below either, the noise hides
      almost nothing (:class:`~geopriv.exceptions.WeakProtectionWarning`); epsilon is per ground
      metre, and ``ln 4`` given as epsilon is ln 4 within 1 m, a mean displacement of 1.4 m;
    * ``area_m``, the diameter of the declared study area in ground metres (if any): above it,
      the released points tell almost nothing about where anyone is
      (:class:`~geopriv.exceptions.LowUtilityWarning`).

    The warnings carry a :class:`~geopriv.exceptions.Fix` per front end (``fix`` for the weak
    protection: how the caller's options set epsilon; by default a level within a radius).
    Returns the expected displacement in metres.
    """
    eps = check_epsilon(epsilon_per_m)
    mean = 2.0 / eps
    floor = max(PROTECTION_FLOOR_M, float(grid_m or 0.0))
    if mean < floor:
        below = (
            f"the public lattice step of {grid_m:g} m"
            if grid_m and grid_m > PROTECTION_FLOOR_M
            else f"{PROTECTION_FLOOR_M:g} m"
        )
        warnings.warn(
            WeakProtectionWarning(
                f"{what[:1].upper() + what[1:]} gives almost no protection: epsilon {eps:.6g} per ground metre is planar "
                f"Laplace noise of {_metres(mean)} m on average (2 / epsilon), less than {below}; it is ln 4 within "
                f"{_metres(math.log(4) / eps)} m.",
                fix=fix or _MORE_NOISE,
            ),
            stacklevel=_outside_geopriv(),
        )
    elif area_m is not None and math.isfinite(area_m) and mean > area_m:
        warnings.warn(
            LowUtilityWarning(
                f"{what[:1].upper() + what[1:]} gives almost no utility: epsilon {eps:.6g} per ground metre is planar "
                f"Laplace noise of {_metres(mean)} m on average (2 / epsilon), more than the declared study area's diameter "
                f"of {_metres(area_m)} m.",
                fix=_LESS_NOISE,
            ),
            stacklevel=_outside_geopriv(),
        )
    return mean
