"""The ``priv`` accessor: ``gdf.priv.<method>(...)`` is ``geopriv.<method>(gdf, ...)``.

Thin and stateless: every method is a docstring and one call of a public function, with that
function's signature (names, defaults and kinds; tests/test_accessor.py checks they never drift):
``epsilon`` is the one argument that may be given by position, everything else by keyword.

``import geopriv`` imports this module as soon as pandas is imported (``geopriv.importhook``), so
it imports nothing else heavy: each method imports its function when it is called, and the
defaults come from ``geopriv.defaults``.
"""

from __future__ import annotations

import pandas as pd
from pandas.api.extensions import no_default

from .defaults import DEFAULT_MAX_DISTORTION, DEFAULT_QUANTILE

__all__ = ["PrivAccessor"]


class PrivBase:
    def __init__(self, obj):
        self._obj = obj

    def perturb(
        self,
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
        """Release the points with geo-indistinguishability: ``geopriv.perturb(obj, ...)``.

        Parameters
        ----------
        epsilon : float, optional
            Privacy loss per ground metre; or ``level`` within ``radius`` metres.
        level, radius : float, optional
            ``level=math.log(4), radius=200``: "ln 4 within 200 m".
        mechanism : object, optional
            A prebuilt mechanism, e.g. :class:`~geopriv.EikonalMechanism` (location-dependent).
        rng : None, int or Generator
            ``None`` (default): OS entropy.  A seed is for tests and demos only.
        grid, continuous, bounds, region, keep, person, max_distortion, progress
            The public lattice, the public study area, deliberately kept columns, the column
            of stable person ids (lazy releases key each row's noise by it; a budget store charges
            them), CRS handling and a progress callback: see :func:`geopriv.perturb`.
        budget_store : geopriv.BudgetStore or str, optional
            Charge every row's person in this persistent store before any noise is drawn.

        Returns
        -------
        GeoDataFrame or GeoSeries
            A new object like this one (same index, columns, CRS); only the geometry is new.
            ``result.attrs["geopriv"]`` is the provenance.

        See Also
        --------
        geopriv.perturb : The function this calls, with every parameter described.
        geopriv.EikonalMechanism.build : A location-dependent mechanism for ``mechanism=``.
        PrivAccessor.utility_report : How far the released points moved.
        """
        from .perturb import perturb

        return perturb(
            self._obj,
            epsilon,
            level=level,
            radius=radius,
            mechanism=mechanism,
            rng=rng,
            grid=grid,
            continuous=continuous,
            bounds=bounds,
            region=region,
            keep=keep,
            person=person,
            max_distortion=max_distortion,
            progress=progress,
            budget_store=budget_store,
        )

    def sanitize_traces(
        self,
        epsilon=None,
        *,
        traj_id=no_default,
        time=no_default,
        level=None,
        radius=None,
        method: str = "predictive",
        budget: str = "fixed_rate",
        rate=None,
        accuracy=None,
        skip_speed=None,
        stale_after=None,
        predictor="parrot",
        on_exhausted: str = "empty",
        eta: float = 0.5,
        gamma: float = 0.8,
        delta: float = 0.9,
        prediction_rate: float = 0.5,
        rng=None,
        bounds=None,
        grid="auto",
        continuous: bool = False,
        keep=(),
        max_distortion: float = DEFAULT_MAX_DISTORTION,
        progress=None,
        budget_store=None,
        person=None,
    ):
        """Release location traces within a budget per trace: ``geopriv.sanitize_traces(obj, ...)``.

        Parameters
        ----------
        epsilon : float, optional
            Total budget of each trace per ground metre; or ``level`` within ``radius`` metres.
        traj_id, time : str or None
            The trace id and time stamp columns (required for a GeoDataFrame; ``None``: one
            trace, in row order).
        level, radius : float, optional
            ``level=math.log(10), radius=100``: "ln 10 within 100 m" for each whole trace.
        method, budget, rate, accuracy : optional
            ``"predictive"`` (default) or ``"independent"``; ``"fixed_rate"`` with ``rate``
            (fraction per query) or ``"fixed_utility"`` with ``accuracy`` (metres).
        skip_speed, stale_after, predictor, on_exhausted, eta, gamma, delta, prediction_rate
            Skip rules, the prediction, what exhausted rows get, the budget managers'
            configuration: see :func:`geopriv.sanitize_traces`.
        rng, bounds, grid, continuous, keep, max_distortion, progress
            As in :meth:`perturb`.
        budget_store, person
            Charge each trace's person (default: the trace id) in this persistent store before
            any noise is drawn; settled to the ledger's spending afterwards.

        Returns
        -------
        GeoDataFrame
            This frame with the released geometry and ``predicted``, ``status``,
            ``epsilon_spent`` columns; the per-trace ledger is ``result.priv.trace_ledger()``.

        See Also
        --------
        geopriv.sanitize_traces : The function this calls, with every parameter described
            (it also takes a movingpandas.TrajectoryCollection).
        geopriv.sample_queries : Query traces from raw GPS fixes, as in the paper.
        PrivAccessor.ledger : The per-trace budget ledger of the result.
        """
        from .traces import sanitize_traces

        return sanitize_traces(
            self._obj,
            epsilon,
            traj_id=traj_id,
            time=time,
            level=level,
            radius=radius,
            method=method,
            budget=budget,
            rate=rate,
            accuracy=accuracy,
            skip_speed=skip_speed,
            stale_after=stale_after,
            predictor=predictor,
            on_exhausted=on_exhausted,
            eta=eta,
            gamma=gamma,
            delta=delta,
            prediction_rate=prediction_rate,
            rng=rng,
            bounds=bounds,
            grid=grid,
            continuous=continuous,
            keep=keep,
            max_distortion=max_distortion,
            progress=progress,
            budget_store=budget_store,
            person=person,
        )

    def synthesize(
        self,
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
        """A synthetic point set with epsilon-differential privacy: ``geopriv.synthesize(obj, ...)``.

        Parameters
        ----------
        epsilon : float
            Differential privacy loss of the whole release (dimensionless; one person's location
            replaced anywhere in the public area, the number of people public).
        bounds : (xmin, ymin, xmax, ymax), optional
            The public area the Hilbert curve is laid over (choose it without looking at the
            points).  Default: ``region``'s bounding box, else the CRS's area of use.
        region, n, method, depth, placement, grid, rng, max_distortion, progress
            Output polygon, number of synthetic points, ``"srw"`` or ``"pmm"``, tree depth,
            placement in cells, lattice, randomness: see :func:`geopriv.synthesize`.
        budget_store, person
            Charge every row's person ``epsilon`` (unit ``"epsilon"``) in this persistent store
            before any noise is drawn.

        Returns
        -------
        GeoDataFrame or GeoSeries
            Synthetic points in this object's CRS, a new RangeIndex and no attribute columns;
            ``result.attrs["geopriv"]`` is the provenance.

        See Also
        --------
        geopriv.synthesize : The function this calls, with every parameter described.
        geopriv.synthesize_xy : The same for plain coordinate arrays.
        geopriv.wasserstein : How close the synthetic set is to the true one.
        """
        from .synthesize import synthesize

        return synthesize(
            self._obj,
            epsilon,
            bounds=bounds,
            region=region,
            n=n,
            method=method,
            depth=depth,
            placement=placement,
            grid=grid,
            rng=rng,
            max_distortion=max_distortion,
            progress=progress,
            budget_store=budget_store,
            person=person,
        )

    def diffuse_locations(
        self,
        epsilon,
        *,
        source,
        graph,
        distance: str = "hops",
        value=None,
        support=None,
        value_range=None,
        continuous: bool = False,
        path=None,
        rng=None,
        bounds=None,
        grid="auto",
        max_distortion: float = DEFAULT_MAX_DISTORTION,
        ledger=None,
        on_unreachable: str = "warn",
        tolerance: float = 0.0,
        weight=None,
        keep=(),
        budget_store=None,
        person=None,
    ):
        """Release one row's location to the rest of its network, graded by distance: ``geopriv.diffuse_locations(obj, ...)``.

        Parameters
        ----------
        epsilon : callable or (distances, epsilons) table
            Epsilon per ground metre as a non-increasing function of network distance.
        source : hashable
            Index label of the row whose location is released.
        graph : networkx graph, edge list, sparse matrix or GeoDataFrame of lines
            The network between the rows (nodes named by index labels).
        distance, value, support, value_range, continuous, path, rng, bounds, grid, max_distortion, ledger
            Hops or resistance; a column value instead of the location (its projection, its
            public range, unrounded output on request); the secret path of an earlier release
            of this same source and frame; randomness, public area and lattice; the budget
            ledger: see :func:`geopriv.diffuse_locations`.
        on_unreachable, tolerance, weight, keep
            Unconnected rows; graph matching; an index kept deliberately although it puts the
            rows in spatial order.
        budget_store, person
            Charge the source's person (default: its index label) the path's largest epsilon in
            this persistent store before any noise is drawn.

        Returns
        -------
        (GeoDataFrame, DiffusionPath)
            One row per recipient (``network_distance``, ``epsilon_per_m``, the released point), and
            the SECRET path (keep it only to answer later recipients of this same source).

        See Also
        --------
        geopriv.diffuse_locations : The function this calls, with every parameter described.
        geopriv.diffuse : The same for a plain value and a list of epsilons.
        geopriv.DiffusionLedger : A budget that charges each path its largest epsilon.
        """
        from .diffuse import diffuse_locations

        return diffuse_locations(
            self._obj,
            epsilon,
            source=source,
            graph=graph,
            distance=distance,
            value=value,
            support=support,
            value_range=value_range,
            continuous=continuous,
            path=path,
            rng=rng,
            bounds=bounds,
            grid=grid,
            max_distortion=max_distortion,
            ledger=ledger,
            on_unreachable=on_unreachable,
            tolerance=tolerance,
            weight=weight,
            keep=keep,
            budget_store=budget_store,
            person=person,
        )

    def aggregate(
        self,
        epsilon,
        *,
        cells,
        user=None,
        max_per_user: int = 1,
        bounds=None,
        region=None,
        levels="auto",
        nonnegative: bool = True,
        suppress=None,
        rng=None,
        budget_store=None,
        person=None,
    ):
        """Private counts per public cell (grid, H3 or polygons), user level: ``geopriv.aggregate(obj, ...)``.

        Parameters
        ----------
        epsilon : float
            Privacy loss of the whole map (dimensionless; one person with all of their rows).
        cells : float, str or GeoDataFrame
            A grid step in metres, ``"h3:<resolution>"`` or public polygons.
        user, max_per_user, bounds, region, levels, nonnegative, suppress, rng, budget_store, person
            See :func:`geopriv.aggregate`.

        Returns
        -------
        GeoDataFrame
            One row per cell: ``cell``, ``count``, ``expected_error`` and its polygon.

        See Also
        --------
        geopriv.aggregate : The function this calls, with every parameter described.
        geopriv.heatmap : The same counts as a raster.
        """
        from .aggregate import aggregate

        return aggregate(
            self._obj,
            epsilon,
            cells=cells,
            user=user,
            max_per_user=max_per_user,
            bounds=bounds,
            region=region,
            levels=levels,
            nonnegative=nonnegative,
            suppress=suppress,
            rng=rng,
            budget_store=budget_store,
            person=person,
        )

    def heatmap(
        self,
        epsilon,
        *,
        resolution: float,
        bounds=None,
        region=None,
        user=None,
        max_per_user: int = 1,
        values: str = "count",
        levels="auto",
        nonnegative: bool = True,
        rng=None,
        path=None,
        overwrite: bool = False,
        budget_store=None,
        person=None,
    ):
        """A private heatmap raster (counts or densities per km²): ``geopriv.heatmap(obj, ...)``.

        Parameters
        ----------
        epsilon : float
            Privacy loss of the whole map (dimensionless; one person with all of their rows).
        resolution : float
            Cell size in metres.
        bounds, region, user, max_per_user, values, levels, nonnegative, rng, path, overwrite, budget_store, person
            See :func:`geopriv.heatmap`.

        Returns
        -------
        geopriv.Heatmap

        See Also
        --------
        geopriv.heatmap : The function this calls, with every parameter described.
        """
        from .aggregate import heatmap

        return heatmap(
            self._obj,
            epsilon,
            resolution=resolution,
            bounds=bounds,
            region=region,
            user=user,
            max_per_user=max_per_user,
            values=values,
            levels=levels,
            nonnegative=nonnegative,
            rng=rng,
            path=path,
            overwrite=overwrite,
            budget_store=budget_store,
            person=person,
        )

    def flows(
        self,
        epsilon,
        *,
        regions,
        traj_id=None,
        time=None,
        user=None,
        max_per_user: int = 1,
        region_id=None,
        outside: str = "refuse",
        levels="auto",
        nonnegative: bool = True,
        rng=None,
        budget_store=None,
        person=None,
    ):
        """Private origin-destination flows between public regions: ``geopriv.flows(obj, ...)``.

        Parameters
        ----------
        epsilon : float
            Privacy loss of the whole release (dimensionless; one person with all of their trips).
        regions : GeoDataFrame
            Public polygons (districts, zones).
        traj_id, time, user, max_per_user, region_id, outside, levels, nonnegative, rng, budget_store, person
            See :func:`geopriv.flows`.

        Returns
        -------
        GeoDataFrame
            One line per ordered pair of regions with ``origin``, ``destination``, ``count`` and
            ``expected_error``.

        See Also
        --------
        geopriv.flows : The function this calls, with every parameter described.
        """
        from .aggregate import flows

        return flows(
            self._obj,
            epsilon,
            regions=regions,
            traj_id=traj_id,
            time=time,
            user=user,
            max_per_user=max_per_user,
            region_id=region_id,
            outside=outside,
            levels=levels,
            nonnegative=nonnegative,
            rng=rng,
            budget_store=budget_store,
            person=person,
        )

    def trace_ledger(self):
        """The per-trace budget ledger of a :func:`geopriv.sanitize_traces` result: ``geopriv.trace_ledger(obj)``.

        Returns
        -------
        DataFrame
            One row per trace: queries, released, noise, predicted, skipped, exhausted, tests,
            budget, spent (never more than budget), remaining, ...

        See Also
        --------
        geopriv.trace_ledger : The function this calls, with every column described.
        PrivAccessor.sanitize_traces : The release that writes the ledger.
        """
        from .traces import trace_ledger

        return trace_ledger(self._obj)

    def displacement(self, released):
        """Ground distance in metres from each point to its released version: :func:`geopriv.displacement`.

        Parameters
        ----------
        released : GeoDataFrame or GeoSeries of points
            The release of these points, rows matched by index label; any CRS with a datum.

        Returns
        -------
        Series
            ``displacement_m``: geodesic metres on this object's ellipsoid, indexed like it.

        See Also
        --------
        geopriv.displacement : the function this calls.
        utility_report : statistics of these distances.
        """
        from .metrics import displacement

        return displacement(self._obj, released)

    def utility_report(self, released, quantile: float = DEFAULT_QUANTILE, *, delta=None):
        """Displacement statistics against ``released``: :func:`geopriv.utility_report`.

        Parameters
        ----------
        released : GeoDataFrame or GeoSeries of points
            The release of these points, rows matched by index label; any CRS with a datum.
        quantile : float in (0, 1)
            alpha is the radius containing this share of the displacements (default 0.9:
            ``alpha_0.9_m``, the radius 90 % of the points moved less than).  A share of
            points, unrelated to the delta of (epsilon, delta)-differential privacy.
        delta : float, deprecated
            Old name of ``quantile`` (FutureWarning; removed in the next release).

        Returns
        -------
        Series
            ``n``, ``mean_m``, ``median_m``, ``alpha_<quantile>_m``, ``max_m``, ``mse_m2``, ``rmse_m``.

        See Also
        --------
        geopriv.utility_report : the function this calls.
        displacement : the per-row distances.
        geopriv.wasserstein : a distance between point sets, without matching rows.
        """
        from . import metrics

        quantile = metrics._renamed_delta(quantile, delta, stacklevel=3)
        return metrics.utility_report(self._obj, released, quantile)


def _renamed(old: str, new: str):
    """A method kept under its old name for one release: it warns and calls ``new`` (one name per concept: the
    accessor's methods are named as the functions they call)."""

    def method(self, *args, **kwargs):
        import warnings

        from .exceptions import caller_stacklevel

        warnings.warn(
            f".priv.{old}() is now .priv.{new}(), the name of the function it calls "
            f"(geopriv.{new}); the old name goes in the next release.",
            FutureWarning,
            stacklevel=caller_stacklevel(),
        )
        return getattr(self, new)(*args, **kwargs)

    method.__name__ = method.__qualname__ = f"_{old}"
    method.__doc__ = f"Deprecated name of :meth:`{new}`."
    return method


for _old, _new in (("diffuse", "diffuse_locations"), ("ledger", "trace_ledger")):
    setattr(PrivBase, _old, _renamed(_old, _new))


@pd.api.extensions.register_dataframe_accessor("priv")
class PrivAccessor(PrivBase):
    """geopriv on a GeoDataFrame: ``gdf.priv.perturb(...)``, ``gdf.priv.utility_report(...)``."""

    def __init__(self, obj):
        import geopandas as gpd

        if not isinstance(obj, gpd.GeoDataFrame):
            raise AttributeError(
                "The .priv accessor needs a GeoDataFrame; build one with geopandas.GeoDataFrame(df, geometry=..., crs=...)."
            )
        super().__init__(obj)


@pd.api.extensions.register_series_accessor("priv")
class PrivSeriesAccessor(PrivBase):
    """geopriv on a GeoSeries of points: ``s.priv.perturb(...)``."""

    def __init__(self, obj):
        import geopandas as gpd

        if not isinstance(obj, gpd.GeoSeries):
            raise AttributeError("The .priv accessor needs a GeoSeries of points.")
        super().__init__(obj)
