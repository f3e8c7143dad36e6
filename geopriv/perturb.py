"""``geopriv.perturb``: release point locations with geo-indistinguishability.

This is the public function behind ``gdf.priv.perturb``: it builds the mechanism from the
privacy parameters and the plan of the release kind ``"points"`` (:func:`geopriv.release.plan_release`,
which fixes the public frame and lattice), then runs it: the plan checks the data, charges a
budget store, draws the noise, snaps it and writes the provenance, in memory or, for a dask frame,
through the lazy runner of :mod:`geopriv.distributed.perturb`.
"""

from __future__ import annotations

from .budget import opens_budget_store
from .exceptions import ParameterError
from .frame import DEFAULT_MAX_DISTORTION
from .mechanisms.base import PointMechanism, check_mechanism
from .mechanisms.planar_laplace import GeoIndistinguishability
from .precision import resolve_epsilon
from .release import plan_release
from .release.common import check_release_input, data_errors_first, plan_crs

__all__ = ["perturb", "resolve_epsilon", "mechanism_for"]


def mechanism_for(epsilon=None, level=None, radius=None, mechanism=None, region=None):
    """The mechanism a :func:`perturb` call releases with: ``mechanism``, or planar Laplace at the resolved epsilon."""
    if mechanism is not None:
        if epsilon is not None or level is not None or radius is not None:
            raise ParameterError(
                "A prebuilt mechanism carries its own privacy level: do not also pass epsilon/level/radius."
            )
        if region is not None:
            raise ParameterError("region= applies to planar Laplace only; the mechanism defines its own outputs.")
        return check_mechanism(mechanism, PointMechanism)
    return GeoIndistinguishability(
        resolve_epsilon(epsilon, level, radius),
        level=None if level is None else float(level),
        radius_m=None if radius is None else float(radius),
    )


@opens_budget_store
def perturb(
    data,
    epsilon=None,
    *,
    level=None,
    radius=None,
    mechanism=None,
    rng=None,
    grid="auto",
    continuous: bool = False,
    bounds=None,
    region=None,
    keep=(),
    person=None,
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    progress=None,
    budget_store=None,
):
    """Release point locations with geo-indistinguishability (planar Laplace noise).

    Each point gets independent noise with density proportional to exp(-epsilon * d), d the
    ground distance in metres, whatever the CRS (see :mod:`geopriv.crs`).

    Parameters
    ----------
    data : GeoDataFrame or GeoSeries of points
        Any CRS with a datum: projected (metres, feet, Web Mercator) or geographic.  Never
        modified.  Z coordinates are dropped (altitude is not protected by planar noise).
    epsilon : float, optional
        Privacy loss per ground metre.  Give this, or ``level`` and ``radius``.
    level, radius : float, optional
        Privacy ``level`` within ``radius`` metres: epsilon = level / radius.
    mechanism : object, optional
        A prebuilt mechanism with its own privacy definition (e.g. a location-dependent
        :class:`~geopriv.EikonalMechanism`); then epsilon/level/radius must not be given.
        Any object following the contract of :mod:`geopriv.release` works.
    rng : None, int, SeedSequence or numpy Generator
        ``None`` (default) uses OS entropy.  A seed is for tests and demos only; the record
        says ``seeded: True`` and never holds the seed.
    grid : "auto" or float
        Outputs are snapped to a public lattice of this step in ground metres, anchored at the
        CRS's origin (or, in longitude/latitude, at the equator), with the finite-precision
        effective epsilon reported (Andrés et al. 2013, Thm 4.1).  ``"auto"`` (default):
        1 m, or 1/(20 epsilon) when the noise is finer.
    continuous : bool
        ``True`` releases unrounded float64 coordinates: no finite-precision bound (recorded as
        such).  Only on explicit request.
    bounds : (xmin, ymin, xmax, ymax), optional
        Your public study area in the data's CRS (choose it without looking at individual
        points).  Inputs must lie inside; it fixes the scale, the lattice's extent and r_max.
        Default: the CRS's area of use.
    region : shapely Polygon (in the data's CRS) or GeoSeries/GeoDataFrame, optional
        Public region outputs are kept in: outputs outside are remapped to the nearest lattice
        node inside.  Its bounding box is the public area when ``bounds`` is not given.
    keep : sequence of column labels
        Attribute columns that look like locations (coordinates, WKT, ...) but that you keep
        deliberately; without it such columns are refused (:class:`~geopriv.LocationAttributeError`).
    person : column label, optional
        The column of stable person ids (integers or strings, unique).  A lazy release
        (dask-geopandas) keys each row's noise by (a secret root, the person id, the row's
        location): recomputing it on unchanged rows replays their output, and a changed row
        draws independent noise.  Default: the index labels, refused there when they look like
        positions (an unnamed integer index).  In memory every call draws fresh noise, and the
        ids are only checked (integers or strings, unique).
    max_distortion : float
        Largest scale variation (default 1 %) of a projected CRS over its public area for which
        it is used as is; otherwise noise is drawn on the ellipsoid's sphere.
    progress : None, True or callable(done, total)
        ``True`` shows a tqdm bar; a callable receives progress (used by the QGIS plugin) and
        may raise to cancel (nothing is returned).
    budget_store : geopriv.BudgetStore or str, optional
        A persistent store of lifetime budgets (or its URL: ``sqlite:///budgets.db``,
        ``postgresql://...``).  Every row's person (``person``, else the index labels) is
        charged the row's guarantee in epsilon per ground metre (the effective epsilon on the
        lattice) after every check and **before** any noise is drawn; a person who cannot
        afford it is named in a :class:`~geopriv.BudgetExceededError` and nothing is drawn or
        charged.  A person with several rows pays for each.  See ``docs/budgets.md``.

    Returns
    -------
    GeoDataFrame or GeoSeries
        Same type, index, columns and CRS as ``data``; only the geometry is new.
        ``result.attrs["geopriv"]`` records the mechanism, epsilon per metre, the effective
        epsilon, the CRS handling, whether the noise was seeded, and the library version.

    Raises
    ------
    ParameterError
        No privacy parameter, or both ``epsilon`` and ``level``/``radius``, or a prebuilt
        ``mechanism`` with either; or another argument out of range.
    MissingCRSError
        ``data`` has no CRS.
    GeometryError
        Geometries that are not points, or points outside the public area (the error names their rows).
    LocationAttributeError
        An attribute column looks like locations and is not in ``keep``.
    BudgetExceededError
        A person in ``budget_store`` cannot afford the release (nothing is drawn or charged).

    See Also
    --------
    resolve_epsilon : Epsilon per ground metre from a level within a radius.
    PlanarLaplace : The noise, in a plane.
    EikonalMechanism : Location-dependent privacy (a privacy map) instead of one epsilon.
    utility_report : How far the points moved, in metres.
    sanitize_traces : Traces within a budget per trace.
    synthesize : A synthetic point set instead of one point per person.

    Examples
    --------
    The Soho cholera deaths of 1854 (EPSG:3857), released with "ln 4 within 200 m" (a mean
    displacement of 2 / epsilon = 289 m, on the ground whatever the CRS's scale):

    >>> deaths = gpd.read_file(geopriv.datasets.get_path("soho"), layer="deaths")
    >>> out = geopriv.perturb(deaths, level=math.log(4), radius=200, rng=0)   # a seed: demos and tests only
    >>> out.index.equals(deaths.index), list(out.columns), out.crs == deaths.crs
    (True, ['Id', 'Count', 'geometry'], True)
    >>> record = out.attrs["geopriv"]
    >>> round(record["epsilon_per_m"], 5), record["grid_m"], record["seeded"]
    (0.00693, 1.0, True)
    >>> bool(200 < geopriv.utility_report(deaths, out)["mean_m"] < 400)
    True
    >>> out = geopriv.perturb(deaths, level=math.log(4), radius=200)   # OS entropy: a real release
    >>> out = deaths.priv.perturb(level=math.log(4), radius=200)       # the same, as the accessor
    """
    mech = mechanism_for(epsilon, level, radius, mechanism, region)  # the privacy parameters first
    with data_errors_first(data, lambda d: check_release_input(d, keep, bounds, region)):
        plan = plan_release(
            plan_crs(data),
            mech,
            grid=grid,
            continuous=continuous,
            bounds=bounds,
            region=region,
            keep=keep,
            max_distortion=max_distortion,
            person=person,
        )
    return plan.run(data, store=budget_store, rng=rng, progress=progress)
