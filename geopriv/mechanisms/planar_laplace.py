"""Planar Laplace mechanism: geo-indistinguishability.

Andrés, Bordenabe, Chatzikokolakis, Palamidessi. "Geo-Indistinguishability: Differential
Privacy for Location-Based Systems". ACM CCS 2013.

Derivation note
---------------
The mechanism reports z = x + N with density D_eps(z | x) = eps^2 / (2 pi) * exp(-eps |z - x|).
For any z, D(z|x) / D(z|x') = exp(eps (|z-x'| - |z-x|)) <= exp(eps |x - x'|) by the triangle
inequality: eps * d-privacy (geo-indistinguishability), eps per unit of distance.

In polar coordinates around x the density factorises: theta is uniform on [0, 2 pi) and the
radius has density eps^2 r exp(-eps r), i.e. r ~ Gamma(shape=2, scale=1/eps).  So sampling is
exact with two independent draws, no rejection and no Lambert W:
    E[r] = 2/eps,  E[r^2] = 6/eps^2,  P(r <= t) = 1 - (1 + eps t) exp(-eps t).
The delta-quantile (the "alpha(delta)" accuracy of the paper) is
    r_delta = -(W_{-1}((delta - 1)/e) + 1) / eps
with W_{-1} the lower branch of Lambert's W.

Discretisation and truncation (section 4 of the paper)
------------------------------------------------------
Real arithmetic is finite: angles drawn as 2 pi U with U a double have resolution
d_theta = 2 pi 2^-53 (we take 2 pi 2^-52 to also cover cos/sin rounding), so far from x the
rays are sparse and the exact guarantee fails.  Andrés et al. fix this by snapping the output
to a grid of step u and remapping outputs outside a region A of interest to the nearest grid
point in A; their Theorem 4.1 then gives eps'-geo-indistinguishability within A with

    eps' = eps + (1/u) ln((q + 2 e^{eps u}) / (q - 2 e^{eps u})),   q = u / (r_max d_theta),

where r_max bounds the distance between an input location and a point of A.  We compute and
report eps' (``effective_epsilon``) and refuse parameters with q <= 2 e^{eps u}.

On the sphere (longitude/latitude data, see :mod:`geopriv.frame`)
--------------------------------------------------------------
For data without a planar public frame the noise is drawn on a sphere of radius R with
density proportional to exp(-eps d_S(x, z)) with respect to surface area, d_S the great-circle
distance.  In geodesic polar coordinates (r, theta) around x the area element is
R sin(r/R) dr dtheta, so r has density proportional to R sin(r/R) exp(-eps r) on [0, pi R]
and theta is uniform.  We sample it exactly by rejection from the planar radius
(Gamma(2, 1/eps), density proportional to r exp(-eps r)): accept r with probability
R sin(r/R) / r (<= 1; 0 beyond pi R).  The accepted density is c(eps) exp(-eps d_S(x, z)) with
a normaliser that does not depend on x (the sphere is homogeneous), so for any z
D(z|x) / D(z|x') = exp(eps (d_S(x', z) - d_S(x, z))) <= exp(eps d_S(x, x')): the same
triangle-inequality argument as in the plane, exactly, with no curvature correction.  The
acceptance rate is 1 - O((eps R)^-2): about 1 - 1e-9 at eps = ln 4 / 200 m on the Earth.  The
number of draws depends only on the radii drawn, never on x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..exceptions import ParameterError
from ..keys import rows_of
from ..precision import ANGLE_RESOLUTION, check_epsilon, discretisation_epsilon

__all__ = [
    "PlanarLaplace",
    "polar_noise",
    "radius_cdf",
    "radius_quantile",
    "discretisation_epsilon",
    "ANGLE_RESOLUTION",
    "spherical_noise",
    "check_epsilon",
    "GeoIndistinguishability",
]


def polar_noise(n: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of planar Laplace noise with ``epsilon`` per unit, as an (n, 2) array."""
    epsilon = check_epsilon(epsilon)
    r = rng.standard_gamma(2.0, n)
    r /= epsilon
    theta = rng.random(n)
    theta *= 2.0 * math.pi
    out = np.empty((n, 2))
    np.cos(theta, out=out[:, 0])
    np.sin(theta, out=out[:, 1])
    out *= r[:, None]
    return out


def spherical_radius(n: int, epsilon: float, radius: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` geodesic distances (metres) with density proportional to R sin(r/R) exp(-eps r) on [0, pi R]."""
    epsilon = check_epsilon(epsilon)
    out = rng.standard_gamma(2.0, n) / epsilon
    todo = np.arange(n)
    while True:
        r = out[todo]
        with np.errstate(invalid="ignore", divide="ignore"):
            accept_p = np.where((r > 0) & (r < math.pi * radius), radius * np.sin(r / radius) / r, 0.0)
        u = rows_of(rng, todo).random(len(todo))
        reject = u >= accept_p
        if not reject.any():
            return out
        todo = todo[reject]
        out[todo] = rows_of(rng, todo).standard_gamma(2.0, len(todo)) / epsilon


def spherical_noise(lon, lat, epsilon: float, radius: float, rng: np.random.Generator):
    """Spherical Laplace release of points (degrees) on a sphere of ``radius`` metres.

    Density proportional to exp(-epsilon * great-circle distance) per unit area (exact; see the
    module docstring).  Returns new (lon, lat) arrays in degrees, lon in [-180, 180].
    """
    lon = np.asarray(lon, dtype=float)
    lat = np.asarray(lat, dtype=float)
    n = len(lon)
    delta = spherical_radius(n, epsilon, radius, rng) / radius
    theta = rng.random(n) * (2.0 * math.pi)
    # destination by unit vectors (n-vector form): well conditioned everywhere, poles included
    # (the arcsin form loses millimetres to centimetres within a metre of a pole)
    phi1, lam1 = np.radians(lat), np.radians(lon)
    sp1, cp1, sl1, cl1 = np.sin(phi1), np.cos(phi1), np.sin(lam1), np.cos(lam1)
    sd, cd = np.sin(delta), np.cos(delta)
    ct, st = np.cos(theta), np.sin(theta)
    # p1 = (cp1 cl1, cp1 sl1, sp1); north = (-sp1 cl1, -sp1 sl1, cp1); east = (-sl1, cl1, 0)
    a = sd * ct  # along north
    b = sd * st  # along east
    x = cd * cp1 * cl1 - a * sp1 * cl1 - b * sl1
    y = cd * cp1 * sl1 - a * sp1 * sl1 + b * cl1
    z = cd * sp1 + a * cp1
    lon2 = np.degrees(np.arctan2(y, x))
    lat2 = np.degrees(np.arctan2(z, np.hypot(x, y)))
    return lon2, lat2


def radius_cdf(r, epsilon: float):
    """P(|N| <= r) for planar Laplace noise with ``epsilon`` per unit."""
    er = epsilon * np.asarray(r, dtype=float)
    return np.where(er > 0, 1.0 - (1.0 + er) * np.exp(-er), 0.0)


def radius_quantile(delta, epsilon: float):
    """Radius within which planar Laplace noise falls with probability ``delta`` (0 <= delta < 1)."""
    from scipy.special import lambertw

    delta = np.asarray(delta, dtype=float)
    if np.any((delta < 0) | (delta >= 1)):
        raise ParameterError("delta must be in [0, 1).")
    arg = np.maximum((delta - 1.0) / math.e, -1.0 / math.e)
    w = np.where(delta > 0, lambertw(arg, k=-1).real, -1.0)
    return -(w + 1.0) / check_epsilon(epsilon)


@dataclass(frozen=True)
class PlanarLaplace:
    """Planar Laplace mechanism with ``epsilon`` privacy loss per unit of planar distance.

    Small and immutable; validated at construction.  Works in whatever planar unit the caller
    uses: :func:`geopriv.perturb` converts epsilon per ground metre to the working CRS's
    units first (see :mod:`geopriv.crs`).

    Parameters
    ----------
    epsilon : float
        Privacy loss per unit of planar distance (per metre in a metric CRS): two inputs ``d``
        apart give any output with likelihoods at most ``exp(epsilon * d)`` apart.

    Raises
    ------
    ParameterError
        ``epsilon`` is not a finite number > 0.

    See Also
    --------
    perturb : Releases a GeoDataFrame's points with this noise, epsilon per ground metre in any CRS.
    resolve_epsilon : Epsilon from a level within a radius.

    Examples
    --------
    >>> mech = geopriv.PlanarLaplace(math.log(4) / 200)   # ln 4 within 200 m
    >>> round(mech.expected_radius(), 1), round(mech.alpha(0.9), 1)   # mean and 90 % radius, metres
    (288.5, 561.2)
    >>> float(mech.privacy_loss(200))   # the loss between two points 200 m apart: ln 4
    1.386...
    >>> out = mech.sample(np.zeros((1000, 2)), geopriv.make_rng(0).generator)
    >>> out.shape
    (1000, 2)
    """

    epsilon: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    def sample(self, xy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Release the (n, 2) locations ``xy``: a new array, ``xy`` is not modified."""
        xy = np.asarray(xy, dtype=float)
        return xy + polar_noise(len(xy), self.epsilon, rng)

    def privacy_loss(self, distance) -> np.ndarray:
        """Worst-case log-likelihood ratio between two inputs ``distance`` apart."""
        return self.epsilon * np.asarray(distance, dtype=float)

    def expected_radius(self) -> float:
        return 2.0 / self.epsilon

    def mse(self) -> float:
        """Expected squared displacement E|N|^2 = 6 / eps^2."""
        return 6.0 / self.epsilon**2

    def alpha(self, delta: float = 0.9) -> float:
        """Accuracy radius: the noise stays within it with probability ``delta``."""
        return float(radius_quantile(delta, self.epsilon))

    def log_density(self, z: np.ndarray, x: np.ndarray) -> np.ndarray:
        d = np.hypot(*(np.asarray(z, float) - np.asarray(x, float)).T)
        return 2 * math.log(self.epsilon) - math.log(2 * math.pi) - self.epsilon * d


@dataclass(frozen=True)
class GeoIndistinguishability:
    """epsilon-geo-indistinguishability per ground metre, for the release path (:mod:`geopriv.release`).

    Planar Laplace in a public planar frame (epsilon converted with the frame's largest scale)
    or spherical Laplace on the frame's sphere; the frame is chosen by the release path from
    public information, never here.  ``level`` and ``radius`` are kept for the record only.
    """

    epsilon_per_m: float
    level: float | None = None
    radius_m: float | None = None
    frame_policy: str = "metric"

    def __post_init__(self):
        object.__setattr__(self, "epsilon_per_m", check_epsilon(self.epsilon_per_m))

    def grid_epsilon_per_m(self) -> float:
        return self.epsilon_per_m

    def check_frame(self, frame) -> None:
        """Refuse parameters this frame cannot honour (called before any noise is drawn)."""
        if frame.kind == "spherical" and self.epsilon_per_m * math.pi * frame.sphere_radius < 8.0:
            raise ParameterError(
                f"epsilon {self.epsilon_per_m:g} per metre asks for noise spread over the whole globe (mean radius "
                f"{2 / self.epsilon_per_m / 1000:.3g} km): no location information would be left. Use a larger epsilon."
            )

    def release(self, xy, frame, rng: np.random.Generator, labels=None) -> np.ndarray:
        eps_work = frame.epsilon_to_work(self.epsilon_per_m)
        if frame.kind == "spherical":
            lon, lat = spherical_noise(xy[:, 0], xy[:, 1], eps_work, frame.sphere_radius, rng)
            return np.column_stack([lon, lat])
        noise = polar_noise(len(xy), eps_work, rng)
        noise += xy
        return noise

    def finite_precision(self, frame, lattice):
        """Andrés et al. Thm 4.1 with the lattice's smallest ground cell and the frame's public r_max."""
        from ..frame import finite_precision_epsilon

        eff = finite_precision_epsilon(self.epsilon_per_m, frame, lattice)
        return eff, (
            f"snapped to a public {lattice.grid_m:g} m lattice; Andres et al. 2013 Thm 4.1 with r_max "
            f"{frame.r_max_metres():.4g} m"
        )

    def describe(self, frame) -> dict:
        return {
            "mechanism": "planar_laplace" if frame.kind == "planar" else "spherical_laplace",
            "definition": "epsilon-geo-indistinguishability per ground metre (Andres et al. 2013)",
            "epsilon_per_m": self.epsilon_per_m,
            "level": self.level,
            "radius_m": self.radius_m,
            "epsilon_per_work_unit": frame.epsilon_to_work(self.epsilon_per_m),
        }
