"""The ``priv`` accessor: ``gdf.priv.<method>(...)`` is ``geopriv.<method>(gdf, ...)``.

Thin and stateless: every method is a docstring and one call of a public function, with that
function's signature (names, defaults and kinds; tests/test_accessor.py checks they never drift):
``epsilon`` is the one argument that may be given by position, everything else by keyword.

``import geopriv`` imports this module as soon as pandas is imported (``geopriv.importhook``), so
it imports nothing else heavy: each method imports its function when it is called, and the
defaults come from ``geopriv.defaults``.
"""

from __future__ import annotations

import importlib
import inspect
import types

import pandas as pd

from .defaults import DEFAULT_QUANTILE

__all__ = ["PrivAccessor"]


def forwarding(function, name: str):
    """A method ``name(self, <function's parameters after the data>)`` calling ``function(self._obj, ...)``.

    Written from the function's signature, so it has the same names, kinds and default objects
    (``__defaults__``, ``__kwdefaults__``): help(), tab completion and argument errors are the
    function's own.
    """
    params = list(inspect.signature(function).parameters.values())[1:]
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    head, call, star = ["self"], ["self._obj"], False
    for p in params:
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            head.append("*")
            star = True
        head.append(p.name + (f"=_defaults[{p.name!r}]" if p.name in defaults else ""))
        call.append(p.name if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else f"{p.name}={p.name}")
    namespace = {"_function": function, "_defaults": defaults}
    source = f"def {name}({', '.join(head)}):\n    return _function({', '.join(call)})\n"
    # compiled as this file's code: warnings' caller_stacklevel counts the method as geopriv's own frame
    exec(compile(source, __file__, "exec"), namespace)  # noqa: S102
    return namespace[name]


class Delegated:
    """A method that is ``geopriv.<module>.<name>(obj, ...)``, with that function's own signature.

    The signature is the public function's (the accessor never lists its parameters again), read
    when the method is first looked up, so ``import geopriv`` still imports nothing heavy.
    """

    def __init__(self, module: str, doc: str):
        self.module, self.doc, self.name, self._method = module, doc, None, None

    def __set_name__(self, owner, name):
        self.name, self.owner = name, owner.__name__

    def _unbound(self):
        if self._method is None:
            function = getattr(importlib.import_module(f"{__package__}.{self.module}"), self.name)
            method = forwarding(function, self.name)
            method.__qualname__ = f"{self.owner}.{self.name}"
            method.__doc__, method.__module__ = inspect.cleandoc(self.doc), __name__
            self._method = method
        return self._method

    def __get__(self, obj, owner=None):
        method = self._unbound()
        return method if obj is None else types.MethodType(method, obj)


class PrivBase:
    def __init__(self, obj):
        self._obj = obj

    perturb = Delegated(
        "perturb",
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
    """,
    )

    sanitize_traces = Delegated(
        "traces",
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
    """,
    )

    synthesize = Delegated(
        "synthesize",
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
    """,
    )

    diffuse_locations = Delegated(
        "diffuse",
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
    """,
    )

    aggregate = Delegated(
        "aggregate",
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
    """,
    )

    heatmap = Delegated(
        "aggregate",
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
    """,
    )

    flows = Delegated(
        "aggregate",
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
    """,
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
