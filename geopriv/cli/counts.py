"""geopriv aggregate, geopriv heatmap, geopriv flows: private counts, user level."""

from __future__ import annotations

import sys

from .common import (
    CLIError,
    budget_options,
    check_crs,
    depth_arg,
    given_options,
    input_options,
    library_option,
    number_arg,
    open_budget_store,
    read_points,
    rng_note,
)

# ---------------------------------------------------------------------------- counts: aggregate, heatmap, flows
_COUNT_PERSON_NEEDED = (
    "--budget-store charges every person once: name the column of stable person ids with --user "
    "COLUMN (or --person COLUMN; the rows' numbers are not people)"
)


def _count_options(p, func, rows: str = "rows") -> None:
    """The options aggregate, heatmap and flows share: epsilon, persons, the hierarchy, --seed, the budget store."""
    g = p.add_argument_group(f"privacy (user level: one person with all of their {rows} added or removed)")
    g.add_argument(
        "--epsilon",
        type=number_arg,
        required=True,
        metavar="TOTAL",
        help="differential privacy loss of the whole release, dimensionless (total; not per metre, unlike "
        "perturb's), e.g. 1 or ln3",
    )
    library_option(
        g,
        func,
        "user",
        metavar="COLUMN",
        help=f"column of person ids: each person's {rows} are bounded by --max-per-user (default: every "
        f"{rows[:-1]} is its own person)",
    )
    library_option(
        g,
        func,
        "max_per_user",
        type=int,
        metavar="K",
        help=f"most {rows} counted per person (needs --user), chosen at random, never by location; the noise grows "
        "in proportion",
    )
    g = p.add_argument_group("noise and post-processing")
    library_option(
        g,
        func,
        "levels",
        type=depth_arg,
        metavar="auto|K",
        help="how epsilon is split over the public hierarchy of cells: auto gives 7/8 to the cells and 1/8 to the "
        "whole area's total; K measures K levels with equal shares (best where most cells are empty); 1: the "
        "cells only",
    )
    g.add_argument(
        "--no-nonnegative",
        dest="nonnegative",
        action="store_false",
        default=None,
        help="release the raw noisy integer counts (some negative; unbiased) instead of counts >= 0 that still add up",
    )
    library_option(
        g,
        func,
        "rng",
        "--seed",
        type=int,
        metavar="SEED",
        show_default=False,
        help="seed (rng=) for reproducible tests and demos only; recorded as seeded (default: OS entropy)",
    )
    budget_options(
        p,
        func,
        "every person the release's epsilon once, however many of their "
        f"{rows} are counted (unit epsilon: dimensionless, the budget synthesize spends)",
        "column of stable person ids whose lifetime budgets --budget-store charges. It is the --user "
        f"column (a person is charged once for all of their {rows}, so their {rows} are bounded by "
        "--max-per-user): give either; needed with --budget-store unless --user is given",
    )


def _count_area(g, func) -> None:
    library_option(
        g,
        func,
        "bounds",
        type=float,
        nargs=4,
        metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
        help="public study area in the input's CRS, chosen without looking at the points (a city's extent): the "
        "grid is anchored on its lower-left corner and every cell in it is released, empty or not; points "
        "outside it are refused, by row",
    )
    g.add_argument(
        "--region",
        help="vector file of the public polygon: only the cells meeting it are released (its "
        "bounding box is the area when --bounds is not given)",
    )


def _check_columns(gdf, what: str, options) -> None:
    """Each (option, column) given names an attribute column of ``gdf`` (checked before anything is charged)."""
    names = [c for c in gdf.columns if c != gdf.geometry.name]
    for flag, column in options:
        if column is not None and column not in names:
            shown = ", ".join(repr(str(c)) for c in names) or "none"
            raise CLIError(f"{flag} {column!r}: the {what} has no such column; its columns are: {shown}")


def _count_start(args, side=(), raster: bool = False, columns=()):
    """A count release up to its library call: options, files and output checked, store opened, input read.

    ``side``: (path, what) of the other input files; ``columns``: (option, column) of the input the release
    reads.  Returns the input, the inputs (never written to) and the library's keyword arguments.
    """
    from .. import io

    if args.person is not None and args.user is not None and args.person != args.user:
        raise CLIError(
            "--person and --user name different columns: the person --budget-store charges is the --user "
            "whose rows are bounded; give only --user"
        )
    user = args.user if args.user is not None else args.person
    crs = check_crs(args.crs)
    inputs = [args.input] + [path for path, _ in side if path is not None]
    io.check_input(args.input)
    for path, what in side:
        if path is not None:
            io.check_input(path, what)
    if raster:
        io.check_file_output(
            args.output, suffixes=(".tif", ".tiff"), what="heatmap", overwrite=args.overwrite, protect=inputs
        )
    else:
        io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    open_budget_store(args, None if user is not None else _COUNT_PERSON_NEEDED)

    gdf = read_points(args.input, args.layer, crs, xy=args.xy)
    _check_columns(gdf, "input", (("--user" if args.user is not None else "--person", user),) + tuple(columns))
    kwargs = given_options(args, ("max_per_user", "levels", "rng", "budget_store"))
    if user is not None:
        kwargs["user"] = user
    if args.nonnegative is False:
        kwargs["nonnegative"] = False
    return gdf, inputs, kwargs


def _count_done(args, rec, what: str, rows: str = "rows") -> None:
    """The lines on stderr after a count release: what was released and, with a store, what it charged."""
    who = "" if rec.get("user") is None else f" (column {rec['user']!r})"
    print(
        f"released {what} to {args.output}: epsilon {rec['epsilon']:.6g} for the whole release (dimensionless, user "
        f"level: one person with all of their {rows}), at most {rec['max_per_user']} {rows[:-1]}(s) per person{who}; "
        f"expected error of a cell's count {rec['expected_error']['median']:.3g} (median){rng_note(rec)}",
        file=sys.stderr,
    )
    store = getattr(args, "budget_store", None)
    if store is not None and rec.get("budget_store"):
        print(
            f"charged every person{who} {rec['charged_per_row']:.6g} {rec['budget_unit']} once in the budget store "
            f"{store.url}, before any noise was drawn ('geopriv budget show STORE' shows what is left)",
            file=sys.stderr,
        )


def _cells_file(args):
    """--cells: None for a grid step or 'h3:RES' (the library reads them as written), else the file of polygons."""
    text = args.cells.strip()
    try:
        float(text[:-1] if text.lower().endswith("m") else text)
        value = True
    except ValueError:
        value = text.lower().startswith("h3")
    if value:
        if args.cells_layer is not None:
            raise CLIError("--cells-layer chooses a layer of a --cells file of polygons, not of a grid or H3 cells")
        return None
    if args.bounds is not None or args.region is not None:
        raise CLIError("with a --cells file the public polygons are the area: do not also give --bounds or --region")
    return args.cells


def _cmd_aggregate(args) -> int:
    import geopriv

    from .. import io

    cells = _cells_file(args)
    gdf, inputs, kwargs = _count_start(args, [(args.region, "region"), (cells, "cells")])
    kwargs["cells"] = (
        args.cells
        if cells is None
        else read_points(cells, args.cells_layer, what="cells", flag=None, layer_flag="--cells-layer")
    )
    kwargs.update(given_options(args, ("bounds", "suppress")))
    if args.region is not None:
        kwargs["region"] = read_points(args.region, what="region", flag=None)
    out = geopriv.aggregate(gdf, args.epsilon, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    _count_done(args, rec, f"the counts of {len(out)} cell(s) ({rec['cells']})")
    return 0


def _cmd_heatmap(args) -> int:
    import geopriv

    gdf, _, kwargs = _count_start(args, [(args.region, "region")], raster=True)
    kwargs.update(given_options(args, ("bounds", "values")))
    if args.region is not None:
        kwargs["region"] = read_points(args.region, what="region", flag=None)
    hm = geopriv.heatmap(
        gdf, args.epsilon, resolution=args.resolution, path=args.output, overwrite=args.overwrite, **kwargs
    )
    rows, cols = hm.values.shape
    _count_done(
        args,
        hm.record,
        f"a {cols} x {rows} heatmap ({hm.record['cells']}; band 1: {hm.unit}, band 2: its expected error)",
    )
    return 0


def _cmd_flows(args) -> int:
    import geopriv

    from .. import io
    from ..exceptions import format_labels

    if (args.traj_id is None) != (args.time is None):
        raise CLIError(
            "--traj-id and --time go together: the trip id and time stamp columns of trajectory points (a "
            "trip runs from its earliest row to its latest); give neither for one line per trip"
        )
    gdf, inputs, kwargs = _count_start(
        args, [(args.regions, "regions")], columns=(("--traj-id", args.traj_id), ("--time", args.time))
    )
    if args.traj_id is None:
        bad = (gdf.geom_type != "LineString").to_numpy()
        if bad.any():
            raise CLIError(
                f"{int(bad.sum())} row(s) of the input are not lines (labels {format_labels(gdf.index[bad])}"
                "): give one line per trip, or trajectory points with --traj-id COLUMN --time COLUMN"
            )
    regions = read_points(args.regions, args.regions_layer, what="regions", flag=None, layer_flag="--regions-layer")
    _check_columns(regions, "regions file", (("--region-id", args.region_id),))
    kwargs.update(given_options(args, ("traj_id", "time", "region_id", "outside")))
    out = geopriv.flows(gdf, args.epsilon, regions=regions, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    _count_done(
        args, rec, f"the trip counts of {len(out)} origin-destination pairs of {rec['regions']} regions", rows="trips"
    )
    return 0


def aggregate_arguments(a) -> None:
    import geopriv

    ag = geopriv.aggregate
    a.add_argument("input", help="points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)")
    a.add_argument(
        "output",
        help="the cells: one polygon per cell with cell, count and expected_error (and the "
        "attributes of a --cells file); format from the extension: .gpkg .geojson .json "
        ".fgb .shp .csv .parquet",
    )
    g = a.add_argument_group("public cells (laid out without looking at the points)")
    g.add_argument(
        "--cells",
        required=True,
        metavar="METRES|h3:RES|FILE",
        help="a square grid step in CRS metres (e.g. 250; needs --bounds or --region), an H3 resolution "
        "(h3:9; needs the h3 package) or a vector file of public polygons (districts), which are "
        "then the public area",
    )
    g.add_argument("--cells-layer", metavar="LAYER", help="layer of the --cells file, if it has several")
    _count_area(g, ag)
    library_option(
        g,
        ag,
        "suppress",
        type=int,
        metavar="N",
        help="release counts below N as 0 (post-processing; their expected error no longer applies)",
    )
    _count_options(a, ag)
    input_options(a)
    a.set_defaults(func=_cmd_aggregate)


def heatmap_arguments(h) -> None:
    import geopriv

    hm = geopriv.heatmap
    h.add_argument("input", help="points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)")
    h.add_argument(
        "output",
        help="GeoTIFF (.tif): band 1 the counts (or densities), band 2 their expected error; "
        "the provenance in its metadata",
    )
    g = h.add_argument_group("public grid (laid out without looking at the points)")
    g.add_argument(
        "--resolution",
        type=float,
        required=True,
        metavar="METRES",
        help="cell size in the input's projected CRS metres, e.g. 100",
    )
    _count_area(g, hm)
    library_option(
        g,
        hm,
        "values",
        choices=("count", "density"),
        help="release counts (int32, -1 outside --region) or counts per km2 (float32)",
    )
    _count_options(h, hm)
    input_options(h, out_layer=False)
    h.set_defaults(func=_cmd_heatmap)


def flows_arguments(f) -> None:
    import geopriv

    fl = geopriv.flows
    f.add_argument(
        "input", help="trajectory points (with --traj-id and --time) or one line per trip (any OGR format, .parquet)"
    )
    f.add_argument(
        "output",
        help="the flows: one line per ordered pair of regions with origin, destination, count "
        "and expected_error; format from the extension: .gpkg .geojson .json .fgb .shp "
        ".csv .parquet",
    )
    g = f.add_argument_group("trips and public regions")
    g.add_argument(
        "--regions",
        required=True,
        metavar="FILE",
        help="vector file of public polygons (districts, zones; reprojected to the input's CRS): a trip "
        "end falls in the first region that holds it",
    )
    g.add_argument("--regions-layer", metavar="LAYER", help="layer of the --regions file, if it has several")
    library_option(
        g,
        fl,
        "region_id",
        metavar="COLUMN",
        help="column of --regions naming the regions in the output (default: their row numbers 0, 1, 2, ...)",
    )
    library_option(
        g, fl, "traj_id", metavar="COLUMN", help="trip id column of trajectory points (with --time); not for lines"
    )
    library_option(
        g, fl, "time", metavar="COLUMN", help="time stamp column: a trip runs from its earliest row to its latest"
    )
    library_option(
        g,
        fl,
        "outside",
        choices=("refuse", "drop"),
        help="trips starting or ending outside every region: stop, naming the trips, or leave them out",
    )
    _count_options(f, fl, rows="trips")
    input_options(f)
    f.set_defaults(func=_cmd_flows)


EPILOG_AGGREGATE = """examples:
  # deaths per 100 m cell of a declared study area (every cell released, empty or not), epsilon 1 for the whole map
  geopriv aggregate deaths.gpkg counts.gpkg --epsilon 1 --cells 100 --bounds -15800 6711900 -14600 6713300

  # visits per H3 cell meeting a public city polygon, at most 5 visits per person
  geopriv aggregate visits.gpkg counts.gpkg --epsilon ln3 --cells h3:9 --region city.gpkg --user person \\
      --max-per-user 5

  # homes per district (public polygons, their attributes kept), counts below 5 released as 0
  geopriv aggregate homes.gpkg homes_per_district.gpkg --epsilon 1 --cells districts.gpkg --suppress 5
"""

EPILOG_HEATMAP = """examples:
  # a 50 m heatmap of the deaths over a declared study area, as a GeoTIFF for QGIS
  geopriv heatmap deaths.gpkg deaths_heatmap.tif --epsilon 1 --resolution 50 --bounds -15800 6711900 -14600 6713300

  # people per km2, cells meeting a public city polygon, one location per person
  geopriv heatmap homes.gpkg density.tif --epsilon ln3 --resolution 250 --region city.gpkg --values density \\
      --user person
"""

EPILOG_FLOWS = """examples:
  # trips between districts from GPS points, at most 5 trips per person, epsilon 1 for the whole table
  geopriv flows tracks.gpkg od.gpkg --epsilon 1 --regions districts.gpkg --region-id name \\
      --traj-id trip --time t --user person --max-per-user 5

  # one line per trip; trips starting or ending outside every district are left out
  geopriv flows trips.gpkg od.gpkg --epsilon 1 --regions districts.gpkg --outside drop
"""
