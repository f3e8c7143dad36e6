"""``geopriv.synthesize``: private synthetic locations (a private measure of the whole point set).

Instead of one perturbed point per person, publish a synthetic point set whose distribution
is close to the people's in the Wasserstein-1 distance (Boedihardjo, Strohmer and Vershynin,
PTRF 2024; He, Vershynin and Zhu, COLT 2023).  Small W1 means every 1-Lipschitz statistic
(mean distance to a facility, share within a walking distance, cluster shapes) is preserved
uniformly.  The mechanism is :class:`~geopriv.mechanisms.private_measure.PrivateMeasure`; this
module builds the plan of the release kind ``"synthetic"`` (:func:`geopriv.release.plan_synthetic`)
and runs it, in memory or, for a dask frame, through the lazy runner of
:mod:`geopriv.distributed.synthesize`.
"""

from __future__ import annotations

import numpy as np

from .budget import opens_budget_store
from .exceptions import GeometryError, ParameterError
from .frame import DEFAULT_MAX_DISTORTION
from .mechanisms.private_measure import PrivateMeasure
from .release import plan_synthetic
from .release.common import check_release_input, data_errors_first, plan_crs
from .rng import make_rng

__all__ = ["synthesize", "synthesize_xy"]


@opens_budget_store
def synthesize(
    data,
    epsilon,
    *,
    bounds=None,
    region=None,
    n=None,
    method: str = "srw",
    depth="auto",
    placement: str = "uniform",
    grid="auto",
    rng=None,
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    progress=None,
    budget_store=None,
    person=None,
):
    """Release a synthetic point set with epsilon-differential privacy.

    The privacy model differs from :func:`geopriv.perturb`'s: the number of people is public,
    and any one person's location may be replaced by *any* other location in the public area;
    the release (the whole synthetic set) changes in probability by at most exp(epsilon).
    Epsilon is dimensionless here (not per metre).

    Parameters
    ----------
    data : GeoDataFrame or GeoSeries of points
        One row per person, any CRS with a datum.  Never modified.  Attribute columns are not
        carried over (the synthetic points belong to nobody).
    epsilon : float
        Differential privacy loss of the whole release, e.g. ``1.0``.
    bounds : (xmin, ymin, xmax, ymax), optional
        The public area in the data's CRS: choose it without looking at individual points
        (a city's or a map sheet's extent).  The space-filling curve is laid over it and the
        synthetic points are spread over it, so it is needed: without it, the bounding box of
        ``region``; with neither the release is refused (a CRS's area of use, e.g. the whole
        world for Web Mercator, is not a study area).  Inputs outside it are refused, naming
        their rows.
    region : shapely Polygon or GeoSeries/GeoDataFrame, optional
        A public polygon outputs are kept in (outputs outside it go to the nearest lattice
        node inside); its bounding box is the public area when ``bounds`` is not given.
    n : int, optional
        Number of synthetic points (default: as many as people).  Drawn from the private
        measure (post-processing: no extra privacy loss).
    method : {"srw", "pmm"}
        ``"srw"``: super-regular random walk along a Hilbert curve (Boedihardjo, Strohmer,
        Vershynin).  ``"pmm"``: private measure mechanism, a noisy partition tree with a
        per-level budget split (He, Vershynin, Zhu).
    depth : "auto" or int
        Levels of the binary partition tree (``2**depth`` cells along the curve).  ``"auto"``
        chooses it from n and epsilon (public).
    placement : {"uniform", "centre"}
        Synthetic points are uniform inside their cell (default) or at its centre.
    grid : "auto" or float
        Public lattice step in ground metres the output is snapped to (``"auto"``: 1 m, or
        finer when cells are smaller than 20 m).
    rng : None, int, SeedSequence or Generator
        ``None`` (default): OS entropy.  A seed is for tests and demos (recorded as seeded).
    max_distortion : float
        CRS scale variation tolerated when fixing the lattice (see :func:`geopriv.perturb`).
    progress : None, True or callable(done, total)
        ``True`` shows a tqdm bar; a callable receives progress (used by the QGIS plugin) and
        may raise to cancel (nothing is returned).
    budget_store : geopriv.BudgetStore or str, optional
        A persistent store of lifetime budgets (or its URL).  Every row's person is charged
        ``epsilon`` (dimensionless: the unit ``"epsilon"``, kept apart from the per-metre
        budgets of perturb) before any noise is drawn; a person with several rows pays for
        each (group privacy).  See ``docs/budgets.md``.
    person : column label, optional
        The column of stable person ids charged in ``budget_store`` (default: the index labels,
        refused when they look like positions).

    Returns
    -------
    GeoDataFrame or GeoSeries
        ``n`` synthetic points in the input CRS with a new RangeIndex and only a geometry
        column; ``result.attrs["geopriv"]`` records epsilon, the method, the tree depth and
        per-level noise scales, the public area and the lattice (public fields only).

    Raises
    ------
    GeometryError
        Points lie outside the public area (the error names their rows).
    ParameterError
        ``epsilon``, ``n``, ``method``, ``depth``, ``placement`` or ``grid`` is not valid, or
        neither ``bounds`` nor ``region`` declares the public area.
    BudgetExceededError
        A person in ``budget_store`` cannot afford ``epsilon`` (nothing is drawn or charged).

    See Also
    --------
    synthesize_xy : The same for plain coordinates (a line or a box).
    PrivateMeasure : The mechanism behind it.
    wasserstein : How far the synthetic set is from the true one, in metres.
    perturb : One released point per person instead (epsilon per ground metre).

    Examples
    --------
    >>> deaths = gpd.read_file(geopriv.datasets.get_path("soho"), layer="deaths")   # EPSG:3857
    >>> soho = (-15800, 6711900, -14600, 6713300)   # the public study area, not the data's extent
    >>> synth = geopriv.synthesize(deaths, 1.0, bounds=soho, rng=0)
    >>> len(synth), list(synth.columns), synth.attrs["geopriv"]["epsilon"]
    (324, ['geometry'], 1.0)
    >>> len(geopriv.synthesize(deaths, 1.0, bounds=soho, n=50, rng=0))
    50
    >>> synth = deaths.priv.synthesize(1.0, bounds=soho)   # the accessor; OS entropy  # doctest: +SKIP
    """
    mechanism = PrivateMeasure(epsilon, method=method, depth=depth, dim=2)  # the privacy parameters first
    with data_errors_first(data, lambda d: check_release_input(d, (), bounds, attributes=False)):
        plan = plan_synthetic(
            plan_crs(data),
            mechanism,
            n=n,
            bounds=bounds,
            region=region,
            grid=grid,
            placement=placement,
            max_distortion=max_distortion,
            person=person,
        )
    return plan.run(data, store=budget_store, rng=rng, progress=progress)


def synthesize_xy(
    xy, epsilon, *, bounds, n=None, method: str = "srw", depth="auto", placement: str = "uniform", rng=None
):
    """Synthetic points for plain coordinates: (n,) values on a line or (n, 2) points in a box.

    Parameters
    ----------
    xy : array_like, shape (n,), (n, 1) or (n, 2)
        The values (one per person), all inside ``bounds``.
    epsilon : float
        Differential privacy loss (one value replaced anywhere in ``bounds``; n public).
    bounds : (lo, hi) for 1-D or (xmin, ymin, xmax, ymax) for 2-D
        The public box (required: never taken from the data).
    n, method, depth, placement, rng
        As in :func:`synthesize`.

    Returns
    -------
    numpy.ndarray
        Synthetic values, shape (n,) for 1-D input, else (n, 2).  Outputs are placed in the
        noisy cells with independent randomness (post-processing of a discrete release).

    Raises
    ------
    ParameterError
        ``xy`` or ``bounds`` has the wrong shape, ``bounds`` is empty, or ``n`` or ``placement`` is not valid.
    EmptyInputError
        ``xy`` has no rows.
    GeometryError
        Values lie outside ``bounds`` or are not finite (the error names their rows).

    See Also
    --------
    synthesize : The same for a GeoDataFrame's points, in ground metres.
    PrivateMeasure : The mechanism behind it.

    Examples
    --------
    >>> ages = geopriv.make_rng(1).generator.uniform(0, 100, 500)
    >>> out = geopriv.synthesize_xy(ages, 1.0, bounds=(0, 100), rng=0)
    >>> out.shape, bool(((out >= 0) & (out <= 100)).all())
    ((500,), True)
    >>> geopriv.synthesize_xy(np.column_stack([ages, ages[::-1]]), 1.0, bounds=(0, 0, 100, 100), n=10, rng=0).shape
    (10, 2)
    """
    arr = np.asarray(xy, dtype=float)
    flat = arr.ndim == 1
    dim = 1 if flat or arr.shape[1] == 1 else 2
    if arr.ndim > 2 or (arr.ndim == 2 and arr.shape[1] not in (1, 2)):
        raise ParameterError("xy must have shape (n,), (n, 1) or (n, 2).")
    arr = arr.reshape(-1, dim)
    if len(arr) == 0:
        from .exceptions import EmptyInputError

        raise EmptyInputError("xy has no rows: there is nothing to synthesise.")
    b = np.asarray(bounds, dtype=float).reshape(-1)
    if b.shape != (2 * dim,) or not np.all(np.isfinite(b)):
        raise ParameterError(
            f"bounds must be {'(lo, hi)' if dim == 1 else '(xmin, ymin, xmax, ymax)'} for {dim}-D values."
        )
    lo, hi = b[:dim], b[dim:]
    if np.any(lo >= hi):
        raise ParameterError("bounds must have lo < hi on every axis.")
    bad = ~np.isfinite(arr).all(axis=1) | np.any(arr < lo, axis=1) | np.any(arr > hi, axis=1)
    if bad.any():
        raise GeometryError(
            "lie outside bounds= (or are not finite)",
            np.flatnonzero(bad).tolist(),
            "Declare bounds that hold the whole public domain (chosen without looking at the data), "
            "or drop those rows.",
        )
    mech = PrivateMeasure(epsilon, method=method, depth=depth, dim=dim)
    if n is not None and (isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1):
        raise ParameterError(f"n (the number of synthetic points) must be a positive integer, got {n!r}.")
    if placement not in ("uniform", "centre"):
        raise ParameterError(f"placement must be 'uniform' or 'centre', got {placement!r}.")
    # a seed replays only for the same values and parameters (geopriv.rng.RandomSource.bind)
    params = [repr(epsilon), method, repr(depth), None if n is None else int(n), placement, lo.tolist(), hi.tolist()]
    gen = make_rng(rng).bind(arr, params=params, purpose="synthesize_xy").generator
    unit_out, _ = mech.sample_unit(
        (arr - lo) / (hi - lo), gen, n_out=None if n is None else int(n), placement=placement
    )
    out = lo + unit_out * (hi - lo)
    return out[:, 0] if flat else out
