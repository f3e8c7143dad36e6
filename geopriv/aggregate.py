"""Private counts, heatmaps and flows: ``geopriv.aggregate``, ``geopriv.heatmap``, ``geopriv.flows``.

User-level differential privacy: the released map changes in probability by at most
``exp(epsilon)`` when one person is added or removed with all of their rows.  Each person keeps
at most ``max_per_user`` rows (chosen at random, never by where they are), every cell of the
public area is released (empty or not), and counts are integers with exact discrete Laplace
noise on a public hierarchy of cells, made consistent (Hay et al. 2010).  See
``docs/aggregate.md``.  Each function is its plan run on the data (in memory or on dask): the
release kind is :mod:`geopriv.release.counts`.
"""

from __future__ import annotations

from .budget import opens_budget_store
from .release.common import DataCRS, data_errors_first
from .release.counts import (
    Heatmap,
    count_points,
    flow_input_crs,
    input_crs,
    plan_counts,
    plan_flows,
    plan_heatmap,
    trip_input,
)

__all__ = ["aggregate", "heatmap", "flows", "Heatmap"]


@opens_budget_store
def aggregate(
    data,
    epsilon,
    *,
    cells,
    user=None,
    max_per_user: int = 1,
    bounds=None,
    region=None,
    levels="auto",
    nonnegative: bool = True,
    suppress: int | None = None,
    rng=None,
    budget_store=None,
    person=None,
):
    """Private counts of points per public cell, with user-level differential privacy.

    Every cell of the public area is released, empty or not; counts are integers with exact
    discrete Laplace noise, on a public hierarchy of cells made consistent (a cell's parent
    equals the sum of its children), non-negative by default.

    Parameters
    ----------
    data : GeoDataFrame or GeoSeries of points
        Any CRS (a projected one in metres for a square grid).  Never modified.
    epsilon : float
        Privacy loss of the whole map (dimensionless): adding or removing one person with all of
        their rows changes the probability of any map by at most ``exp(epsilon)``.
    cells : float, str or GeoDataFrame
        The public cells: a square grid step in metres (``250``), an H3 resolution
        (``"h3:9"``, needs the ``h3`` package) over the public area, or a GeoDataFrame of
        public polygons (districts, a tessellation; their attributes are kept).
    user : column label, optional
        Person ids.  Default: every row is its own person.
    max_per_user : int
        Most rows counted per person (more are dropped at random, never by location).  The
        noise grows in proportion.
    bounds : (xmin, ymin, xmax, ymax), optional
        The public study area in the data's CRS, chosen without looking at the points (a city's
        extent).  Required for a grid or H3 cells unless ``region`` is given.  The grid is
        anchored on its lower-left corner.
    region : shapely Polygon or GeoSeries/GeoDataFrame, optional
        A public polygon: only cells meeting it are released.
    levels : "auto", int, False or list of weights
        How epsilon is split over the hierarchy of cells (see :func:`geopriv.release.counts.level_weights`):
        ``"auto"`` gives 7/8 to the cells and 1/8 to the whole area's total; ``k`` measures ``k``
        levels with equal shares (Hay et al.; best where most cells are empty); ``False`` the
        cells only.
    nonnegative : bool
        Release counts >= 0 that still add up (post-processing).
    suppress : int, optional
        Release counts below this as 0 (post-processing; the expected error no longer applies to
        those cells).
    rng : None, int, SeedSequence or Generator
        ``None`` (default): OS entropy.  A seed is for tests and demos (recorded as seeded).
    budget_store : geopriv.BudgetStore or str, optional
        Charge every person ``epsilon`` once (unit ``"epsilon"``), before any noise is drawn.
    person : column label, optional
        The person ids charged when ``user`` is not given (default: the index labels).

    Returns
    -------
    GeoDataFrame
        One row per cell: ``cell`` (grid: ``row * ncols + col`` from the north-west; H3: the
        64-bit index; polygons: their position), ``count`` (int64), ``expected_error`` (the root
        mean squared error of the consistent count before rounding and non-negativity, in counts:
        public, from the parameters alone; with ``nonnegative=True`` empty cells err less and busy
        ones up to a third more) and the cell's polygon.  ``attrs["geopriv"]`` is the provenance record.

    Raises
    ------
    GeometryError
        Rows outside the public area (named by label).
    IdentityError
        Rows without a person id.
    ParameterError
        No public area for a grid, too many cells, a bad epsilon.
    BudgetExceededError
        A person in ``budget_store`` cannot afford ``epsilon``; nothing was drawn.

    Warns
    -----
    LowUtilityWarning
        The noise swamps the counts (larger cells, a smaller area or a larger epsilon help).

    See Also
    --------
    heatmap : The same release on a square grid, as a raster.
    flows : Private origin-destination counts between public regions.
    perturb : A noisy location per point instead of counts.

    Examples
    --------
    The Soho cholera deaths (Web Mercator) in 100 m cells (ground metres) of a public study area,
    the whole map 1-differentially private:

    >>> deaths = gpd.read_file(geopriv.datasets.get_path("soho"), layer="deaths")
    >>> counts = geopriv.aggregate(deaths, 1.0, cells=100, bounds=(-15800, 6711900, -14600, 6713300), rng=1)
    >>> len(counts), counts.columns.tolist()
    (72, ['cell', 'count', 'expected_error', 'geometry'])
    >>> counts.nlargest(3, "count")[["cell", "count", "expected_error"]].round(2)
        cell  count  expected_error
    36    36     38            1.56
    34    34     37            1.56
    35    35     32            1.56

    The same in the cells of a public region (a polygon layer):

    >>> area = gpd.read_file(geopriv.datasets.get_path("soho_study_area"))
    >>> len(geopriv.aggregate(deaths, 1.0, cells=100, region=area, rng=1))
    72
    """
    crs = DataCRS(lambda: input_crs(data, bounds, region))
    with data_errors_first(data, lambda d: count_points(d, bounds, region), after=crs):
        plan = plan_counts(
            crs,
            epsilon,
            cells=cells,
            user=user,
            person=person,
            max_per_user=max_per_user,
            bounds=bounds,
            region=region,
            levels=levels,
            nonnegative=nonnegative,
            suppress=suppress,
            charged=budget_store is not None,
        )
    return plan.run(data, store=budget_store, rng=rng)


@opens_budget_store
def heatmap(
    data,
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
) -> Heatmap:
    """A private heatmap: counts (or densities per km²) on a square grid, as a raster.

    The same release as :func:`aggregate` with ``cells=resolution``, laid out as a north-up
    raster over the public area (ready for QGIS styling) and written as a GeoTIFF when ``path``
    is given (band 1: the values; band 2: their expected error; the provenance in the file's
    metadata).

    Parameters
    ----------
    data : GeoDataFrame or GeoSeries of points
        As in :func:`aggregate` (a projected CRS).  Never modified.
    epsilon : float
        Privacy loss of the whole heatmap (dimensionless), as in :func:`aggregate`.
    resolution : float
        Cell size in ground metres (a projected CRS).
    bounds : (xmin, ymin, xmax, ymax), optional
        The public study area in the data's CRS, chosen without looking at the points.
    region : shapely Polygon or GeoSeries/GeoDataFrame, optional
        A public polygon: cells outside it are no data.
    user : column label, optional
        Person ids.  Default: every row is its own person.
    max_per_user : int
        Most rows counted per person (more are dropped at random, never by location).
    values : {"count", "density"}
        Released counts, or counts per km² (the same release divided by the cell area).
    levels : "auto", int, False or list of weights
        How epsilon is split over the hierarchy of cells, as in :func:`aggregate`.
    nonnegative : bool
        Release counts >= 0 that still add up (post-processing).
    rng : None, int, SeedSequence or Generator
        ``None`` (default): OS entropy.  A seed is for tests and demos (recorded as seeded).
    path : str or Path, optional
        Write a GeoTIFF there (atomically; an existing file is refused unless ``overwrite``).
    overwrite : bool, default False
        Replace an existing file at ``path``.
    budget_store : geopriv.BudgetStore or str, optional
        Charge every person ``epsilon`` once (unit ``"epsilon"``), before any noise is drawn.
    person : column label, optional
        The person ids charged when ``user`` is not given (default: the index labels).

    Returns
    -------
    Heatmap
        The values and their expected error as ``(rows, cols)`` arrays, with the grid's
        transform and CRS and the provenance record.

    Raises
    ------
    ParameterError
        A bad ``values``, ``resolution`` or epsilon, no public area, or ``path`` not a GeoTIFF
        name.
    GeometryError
        Rows outside the public area (named by label).

    See Also
    --------
    aggregate : The same counts as a GeoDataFrame of cells (also H3 cells, or polygons).
    Heatmap : The released raster.

    Examples
    --------
    The Soho cholera deaths on a 100 m grid (ground metres), written as a GeoTIFF:

    >>> deaths = gpd.read_file(geopriv.datasets.get_path("soho"), layer="deaths")
    >>> hm = geopriv.heatmap(deaths, 1.0, resolution=100, bounds=(-15800, 6711900, -14600, 6713300), rng=1,
    ...                      path="deaths_heatmap.tif")
    >>> hm.values.shape, hm.unit, int(hm.values.sum())
    ((9, 8), 'count', 330)
    >>> os.path.exists("deaths_heatmap.tif")
    True
    >>> geopriv.heatmap(deaths, 1.0, resolution=100, bounds=(-15800, 6711900, -14600, 6713300), rng=1,
    ...                 values="density").unit
    'count per km²'
    """
    crs = DataCRS(lambda: input_crs(data, bounds, region))
    with data_errors_first(data, lambda d: count_points(d, bounds, region), after=crs):
        plan = plan_heatmap(
            crs,
            epsilon,
            resolution=resolution,
            values=values,
            path=path,
            overwrite=overwrite,
            user=user,
            person=person,
            max_per_user=max_per_user,
            bounds=bounds,
            region=region,
            levels=levels,
            nonnegative=nonnegative,
            charged=budget_store is not None,
        )
    return plan.run(data, store=budget_store, rng=rng)


@opens_budget_store
def flows(
    data,
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
    """Private origin-destination flows between public regions, with user-level differential privacy.

    Every ordered pair of regions (origin, destination) is a cell, released with its count of
    trips, empty or not, as a line layer for mapping.

    Parameters
    ----------
    data : GeoDataFrame
        Trajectory points (with ``traj_id`` and ``time``: a trip runs from its earliest row to
        its latest), or one LineString per trip (from its first vertex to its last).
    epsilon : float
        Privacy loss of the whole release (dimensionless): one person with all of their trips
        added or removed.
    regions : GeoDataFrame or GeoSeries of polygons
        Public regions (districts, zones), in any CRS.  A trip end falls in the first region
        that holds it.
    traj_id, time : column label, optional
        The trip id and time stamp columns of trajectory points.
    user : column label, optional
        Person ids (constant within a trip).  Default: every trip is its own person.
    max_per_user : int
        Most trips counted per person (more are dropped at random).
    region_id : column label, optional
        The regions' names in the output (default: their index labels).
    outside : {"refuse", "drop"}
        Trips starting or ending outside every region: refused, naming the trips (default), or
        left out (a rule on each trip alone: the guarantee is unchanged).
    levels : "auto", int, False or list of weights
        How epsilon is split over the hierarchy (pairs, origins, all trips), as in :func:`aggregate`.
    nonnegative : bool
        Release counts >= 0 that still add up (post-processing).
    rng : None, int, SeedSequence or Generator
        ``None`` (default): OS entropy.  A seed is for tests and demos (recorded as seeded).
    budget_store : geopriv.BudgetStore or str, optional
        Charge every person ``epsilon`` once (unit ``"epsilon"``), before any noise is drawn.
    person : column label, optional
        The person ids charged when ``user`` is not given.

    Returns
    -------
    GeoDataFrame
        One row per ordered pair: ``origin``, ``destination``, ``count`` (int64),
        ``expected_error`` and a LineString between the regions' representative points (zero
        length for trips within a region).  ``attrs["geopriv"]`` is the provenance record.

    Raises
    ------
    GeometryError
        Trips starting or ending outside every region (``outside="refuse"``), geometries that
        are neither trajectory points nor LineStrings, or trips of several users.
    MissingCRSError
        The data has no CRS.
    ParameterError
        A bad epsilon or ``outside``.

    See Also
    --------
    aggregate : Private counts of points per cell.
    sanitize_traces : The trajectories themselves, within a budget per trace.

    Examples
    --------
    Five GeoLife trips in Beijing between two public zones (a trip runs from its earliest fix
    to its latest):

    >>> from shapely.geometry import box
    >>> tracks = gpd.read_file(geopriv.datasets.get_path("geolife"))
    >>> zones = gpd.GeoDataFrame({"zone": ["west", "east"]}, crs="EPSG:4326",
    ...                          geometry=[box(116.2, 39.8, 116.45, 40.2), box(116.45, 39.8, 116.7, 40.2)])
    >>> od = geopriv.flows(tracks, 3.0, regions=zones, traj_id="trajectory_id", time="t", region_id="zone", rng=1)
    >>> od[["origin", "destination", "count"]]
      origin destination  count
    0   west        west      4
    1   west        east      0
    2   east        west      0
    3   east        east      0
    """
    crs = DataCRS(lambda: flow_input_crs(data, traj_id, time))
    with data_errors_first(data, lambda d: trip_input(d, traj_id), after=crs):
        plan = plan_flows(
            crs,
            epsilon,
            regions=regions,
            region_id=region_id,
            traj_id=traj_id,
            time=time,
            outside=outside,
            user=user,
            person=person,
            max_per_user=max_per_user,
            levels=levels,
            nonnegative=nonnegative,
            charged=budget_store is not None,
        )
    return plan.run(data, store=budget_store, rng=rng)
