"""Private counts, heatmaps and flows: ``geopriv.aggregate``, ``geopriv.heatmap``, ``geopriv.flows``.

User-level differential privacy: the released map changes in probability by at most
``exp(epsilon)`` when one person is added or removed with all of their rows.  Each person keeps
at most ``max_per_user`` rows (chosen at random, never by where they are), every cell of the
public area is released (empty or not), and counts are integers with exact discrete Laplace
noise on a public hierarchy of cells, made consistent (Hay et al. 2010).  See
``docs/aggregate.md``.  The release path is :mod:`geopriv.counting`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .budget import PURE, open_store, opens_budget_store
from .counting import (
    OUTSIDE_FIX,
    bounded_person,
    check_flows_store,
    flows_frame,
    heatmap_layout,
    budget_charge,
    bound_contributions,
    cells_frame,
    check_area_public,
    check_epsilon,
    count_rows,
    locate_rows,
    person_codes,
    plan_counts,
    release_counts,
    warn_if_swamped,
)
from .daskhook import dispatches_dask
from .identity import identities
from .exceptions import ParameterError
from .provenance import make_record
from .release import budget_fields, check_release_input
from .rng import make_rng

__all__ = ["aggregate", "heatmap", "flows", "Heatmap"]


def _release(
    data,
    epsilon,
    *,
    cells,
    user,
    max_per_user,
    bounds,
    region,
    levels,
    nonnegative,
    suppress,
    rng,
    budget_store,
    person,
    kind,
    extra=None,
):
    """(plan, released counts, record) of a count release of ``data`` (the one in-memory path)."""
    epsilon = check_epsilon(epsilon)
    user = bounded_person(user, person)
    store = open_store(budget_store)
    geoms, xy = _points(data, bounds, region)
    labels = geoms.index
    by_index = store is not None and user is None  # the index labels are the persons charged: bound them too
    plan = plan_counts(
        geoms.crs,
        epsilon,
        cells=cells,
        max_per_user=max_per_user,
        user=INDEX_PERSONS if by_index else user,
        bounds=bounds,
        region=region,
        levels=levels,
        nonnegative=nonnegative,
        suppress=suppress,
    )
    check_area_public(plan, xy)
    cell = locate_rows(plan, xy, labels)
    codes = _index_codes(data) if by_index else person_codes(data, user, labels)
    source = make_rng(rng)
    fields = plan.fields()
    fields.update(extra or {})
    reservation = None
    if store is not None:
        fields.update(budget_fields(store, PURE, epsilon))
        reservation = budget_charge(store, codes, data, user, labels, epsilon, fields, plan.cells.n, kind)
    if reservation is not None:
        with reservation:
            reservation.start()
            released = _noise(plan, cell, codes, source)
    else:
        released = _noise(plan, cell, codes, source)
    record = make_record(fields, seeded=source.seeded, n=plan.cells.n)
    warn_if_swamped(plan, released)
    return plan, released, record


#: the provenance's ``user`` when the index labels are the persons (charged in a budget store, and bounded)
INDEX_PERSONS = "index labels"


def _points(data, bounds, region):
    """(GeoSeries, (n, 2) xy) of the input points; an empty input is released like any other (all counts noise)."""
    from .points import as_geoseries, check_no_other_geometries

    geoms = as_geoseries(data)
    if len(geoms):
        return check_release_input(data, bounds=bounds, region=region, attributes=False)
    check_no_other_geometries(data)
    if geoms.crs is None:
        from .exceptions import MissingCRSError

        raise MissingCRSError("The data")
    return geoms, np.empty((0, 2))


def _index_codes(data):
    """Person codes of the rows from their index labels (refused when they look like positions)."""
    from .keys import row_identities

    from .identity import identities

    ids, labels = row_identities(data, None, refuse_positions=True)
    return identities(ids, labels, "index label").codes()


def _noise(plan, cell, codes, source):
    # a seed replays only for the same data and parameters: the bounding is bound to the rows' (cell, person),
    # the noise to the true counts it answers and the plan (as on dask: the same noise for the same counts)
    bound = source.bind(cell, codes, purpose="bound").generator
    counts = count_rows(plan, cell, bound_contributions(codes, plan.mechanism.sensitivity, bound))
    return release_counts(plan, counts, source.bind(counts, params=plan.fields(), purpose="counts").generator)


@opens_budget_store
@dispatches_dask("aggregate")
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
        How epsilon is split over the hierarchy of cells (see :func:`geopriv.counting.level_weights`):
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

    >>> deaths = gpd.read_file("soho_cholera.gpkg", layer="deaths")
    >>> counts = geopriv.aggregate(deaths, 1.0, cells=100, bounds=(-15800, 6711900, -14600, 6713300), rng=1)
    >>> len(counts), counts.columns.tolist()
    (72, ['cell', 'count', 'expected_error', 'geometry'])
    >>> counts.nlargest(3, "count")[["cell", "count", "expected_error"]].round(2)
        cell  count  expected_error
    36    36     38            1.56
    34    34     37            1.56
    35    35     32            1.56

    The same in the cells of a public region (a polygon layer):

    >>> area = gpd.read_file("study_area.gpkg")
    >>> len(geopriv.aggregate(deaths, 1.0, cells=100, region=area, rng=1))
    72
    """
    plan, released, record = _release(
        data,
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
        kind="aggregate",
    )
    return cells_frame(plan, released, record)


@dataclasses.dataclass(frozen=True)
class Heatmap:
    """A released heatmap: a north-up raster of counts (or densities per km²) over the public area.

    Made by :func:`heatmap` (immutable); its fields are public, like the release.

    Parameters
    ----------
    values : numpy.ndarray
        ``(rows, cols)``: int32 counts (int64 when larger; the type's smallest value outside the
        region) or float32 densities per km² (NaN outside the region).
    expected_error : numpy.ndarray
        ``(rows, cols)`` float32, in the same unit as ``values`` (NaN outside the region).
    transform : affine.Affine
        The raster's georeferencing: the north-west corner and the cell size, in CRS units.
    crs : pyproj.CRS
        The CRS of the data and of the grid.
    record : dict
        The provenance record (public fields only).
    unit : str
        What ``values`` count: ``"count"`` or ``"count per km²"``.

    Attributes
    ----------
    nodata : int or float
        The value of cells outside the region: the integer type's smallest value, or NaN.

    See Also
    --------
    heatmap : Releases a heatmap.
    aggregate : The same counts as a GeoDataFrame of cells.

    Examples
    --------
    >>> deaths = gpd.read_file("soho_cholera.gpkg", layer="deaths")
    >>> hm = geopriv.heatmap(deaths, 1.0, resolution=100, bounds=(-15800, 6711900, -14600, 6713300), rng=1)
    >>> type(hm).__name__, hm.values.shape, hm.unit, hm.values.dtype.name
    ('Heatmap', (9, 8), 'count', 'int32')
    >>> print(hm.to_raster("deaths_counts.tif"))  # band 1: the counts, band 2: their expected error
    deaths_counts.tif
    """

    values: np.ndarray
    expected_error: np.ndarray
    transform: object
    crs: object
    record: dict
    unit: str

    @property
    def nodata(self):
        return int(np.iinfo(self.values.dtype).min) if self.values.dtype.kind == "i" else float("nan")

    def to_raster(self, path, *, overwrite: bool = False):
        """Write a GeoTIFF (band 1: the values, band 2: their expected error, rounded to whole counts in a count
        heatmap), atomically; returns the path."""
        from .io import write_raster

        return write_raster(
            path,
            [
                self.values,
                self.expected_error.astype(self.values.dtype)
                if self.values.dtype.kind == "f"
                else np.where(
                    np.isnan(self.expected_error), self.nodata, np.rint(np.nan_to_num(self.expected_error))
                ).astype(self.values.dtype),
            ],
            transform=self.transform,
            crs=self.crs,
            nodata=self.nodata,
            record=self.record,
            band_names=[self.unit, f"expected error ({self.unit})"],
            overwrite=overwrite,
        )

    def plot(self, ax=None, **kwargs):
        """Show the heatmap with matplotlib (``geopriv[plot]``); returns the axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        t = self.transform
        rows, cols = self.values.shape
        extent = (t.c, t.c + t.a * cols, t.f + t.e * rows, t.f)
        vals = (
            np.ma.masked_invalid(self.values.astype(float))
            if self.values.dtype.kind == "f"
            else np.ma.masked_equal(self.values, self.nodata)
        )
        im = ax.imshow(vals, extent=extent, origin="upper", **{"cmap": "magma", **kwargs})
        ax.figure.colorbar(im, ax=ax, label=self.unit)
        return ax


def _heatmap_options(arguments: dict) -> None:
    """The heatmap's checks that read no row (values, resolution, output path): before either path runs."""
    values, resolution, path = arguments["values"], arguments["resolution"], arguments["path"]
    if values not in ("count", "density"):
        raise ParameterError(f"values must be 'count' or 'density', got {values!r}.")
    if (
        isinstance(resolution, (bool, np.bool_))
        or not isinstance(resolution, (int, float, np.integer, np.floating))
        or not np.isfinite(resolution)
        or resolution <= 0
    ):
        raise ParameterError(f"The heatmap's resolution must be a positive number of metres, got {resolution!r}.")
    if path is not None:
        from .io import check_file_output

        check_file_output(path, suffixes=(".tif", ".tiff"), what="heatmap", overwrite=arguments["overwrite"])


@opens_budget_store
@dispatches_dask("heatmap", check=_heatmap_options)
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

    >>> deaths = gpd.read_file("soho_cholera.gpkg", layer="deaths")
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
    plan, released, record = _release(
        data,
        epsilon,
        cells=resolution,
        user=user,
        max_per_user=max_per_user,
        bounds=bounds,
        region=region,
        levels=levels,
        nonnegative=nonnegative,
        suppress=None,
        rng=rng,
        budget_store=budget_store,
        person=person,
        kind="heatmap",
        extra={"values": values},
    )
    out, err, unit = heatmap_layout(plan, released, values)
    result = Heatmap(out, err, plan.cells.transform(), plan.cells.crs, record, unit)
    if path is not None:
        result.to_raster(path, overwrite=overwrite)
    return result


@opens_budget_store
@dispatches_dask("flows")
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
    >>> tracks = gpd.read_file("geolife_sample.gpkg")
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
    import shapely

    from .counting import plan_flows, trip_ends
    from .exceptions import GeometryError, MissingCRSError
    from .points import as_geoseries, check_coordinates, check_no_other_geometries, point_xy

    epsilon = check_epsilon(epsilon)
    user = bounded_person(user, person)
    store = open_store(budget_store)
    check_flows_store(store, user)
    if outside not in ("refuse", "drop"):
        raise ParameterError(f"outside must be 'refuse' or 'drop', got {outside!r}.")
    geoms = as_geoseries(data) if traj_id is not None else data.geometry
    check_no_other_geometries(data)
    labels = geoms.index
    if geoms.crs is None:
        raise MissingCRSError("The data")
    xy = None
    if traj_id is not None:
        xy = point_xy(geoms)
        check_coordinates(xy, geoms.crs, labels)
    else:
        kinds = shapely.get_type_id(geoms.values)
        bad = (kinds != 1) | shapely.is_empty(geoms.values)
        if bad.any():
            raise GeometryError(
                "are not LineStrings (give one line per trip, or points with traj_id= and time=)",
                labels[bad],
                "Give one LineString per trip, or trajectory points with traj_id= and time=.",
            )
    plan = plan_flows(
        geoms.crs,
        epsilon,
        regions=regions,
        region_id=region_id,
        max_per_user=max_per_user,
        user=user,
        levels=levels,
        nonnegative=nonnegative,
    )
    o_xy, d_xy, first, trip_ids = trip_ends(data, geoms, xy, traj_id, time, labels)
    check_area_public(plan, np.concatenate([o_xy, d_xy]))  # regions built on the trips would publish them
    regions_cells = plan.cells.regions
    o = regions_cells.locate(o_xy)
    d = regions_cells.locate(d_xy)
    out = (o < 0) | (d < 0)
    if out.any() and outside == "refuse":
        raise GeometryError("start or end outside every region", pd.Index(trip_ids[out]), OUTSIDE_FIX, what="trip(s)")
    codes = None
    if user is not None:
        codes = person_codes(data, user, labels)
        assert codes is not None  # user given: a code per row (for type checkers)
        per_trip = codes[first]
        if traj_id is not None:
            tid, _ = pd.factorize(identities(data[traj_id], labels, "trip id").keys, sort=False)
            mixed = pd.Series(codes).groupby(tid).nunique().to_numpy() > 1
            if mixed.any():
                raise GeometryError(
                    "have rows of several users (a trip belongs to one person)",
                    pd.Index(trip_ids[mixed]),
                    "Give each trip one user id.",
                    what="trip(s)",
                )
        codes = per_trip
    keep_trip = ~out
    source = make_rng(rng)
    fields = plan.fields()
    fields.update(
        {
            "traj_id": None if traj_id is None else str(traj_id),
            "time": None if time is None else str(time),
            "trip_rule": "first and last row of each trip by time"
            if traj_id is not None
            else "first and last vertex of each line",
            "outside": outside,
        }
    )
    reservation = None
    if store is not None:
        fields.update(budget_fields(store, PURE, epsilon))
        reservation = budget_charge(store, None, data, user, labels, epsilon, fields, plan.cells.n, "flows")
    m = regions_cells.n
    leaf = np.where(keep_trip, o * m + d, -1)

    def draw():  # a seed replays only for the same data and parameters (as in _noise)
        kept_codes, kept_leaf = None if codes is None else codes[keep_trip], leaf[keep_trip]
        bound = source.bind(kept_leaf, kept_codes, purpose="bound").generator
        counts = count_rows(plan, kept_leaf, bound_contributions(kept_codes, plan.mechanism.sensitivity, bound))
        return release_counts(plan, counts, source.bind(counts, params=plan.fields(), purpose="counts").generator)

    if reservation is not None:
        with reservation:
            reservation.start()
            released = draw()
    else:
        released = draw()
    record = make_record(fields, seeded=source.seeded, n=plan.cells.n)
    warn_if_swamped(plan, released)
    return flows_frame(plan, released, record)
