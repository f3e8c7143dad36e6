"""geopriv privacy-map and geopriv build-mechanism: location-dependent privacy from a population raster."""

from __future__ import annotations

import argparse
import math
import sys

from ..progress import on_terminal
from .common import NONE, CLIError, check_crs, given_options, grid_arg, library_option, number_arg


def _optional_number(text: str):
    return NONE if str(text).strip().lower() == "none" else number_arg(text)


def _step(text: str):
    """A power of two >= 1, or ``none`` (--max-step)."""
    t = str(text).strip().lower()
    if t == "none":
        return NONE
    try:
        k = int(t)
    except ValueError:
        k = 0
    if k < 1 or k & (k - 1):
        raise argparse.ArgumentTypeError(f"{text!r} is not a power of two (1, 2, 4, 8, ...) or none")
    return k


def _max_cells(text: str):
    """A positive whole number of cells (``1e9`` works), or ``none`` (--max-cells)."""
    if str(text).strip().lower() == "none":
        return NONE
    value = number_arg(text)
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise argparse.ArgumentTypeError(f"not a number of cells: {text!r} (give e.g. 200000000, 2e8 or none)")
    return int(value)


def _nodata_epsilon(text: str):
    return "nearest" if str(text).strip().lower() == "nearest" else number_arg(text)


def _check_raster(path: str, what: str) -> None:
    """The raster exists and GDAL can open it (before any work)."""
    from ..io import check_input

    check_input(path, what)
    import rasterio

    try:
        with rasterio.open(path):
            pass
    except rasterio.errors.RasterioIOError:
        raise CLIError(f"cannot read the {what} {path}: not a raster GDAL can open (give a GeoTIFF)") from None


# ---------------------------------------------------------------------------- privacy maps
def _map_options(parser, with_from_epsilon: bool) -> None:
    from ..privacy_map import PrivacyMap

    f = PrivacyMap.from_population
    g = parser.add_argument_group("how population density becomes epsilon per metre (PrivacyMap.from_population)")
    g.add_argument(
        "--epsilon-range",
        nargs=2,
        type=number_arg,
        metavar=("LOW", "HIGH"),
        default=None,
        help="epsilon per ground metre where nobody lives and at the raster's highest density, e.g. "
        "ln4/3000 ln4/600 (ln 4 within 3 km and within 600 m)",
    )
    library_option(
        g, f, "slope", type=number_arg, help="with --floor: extra epsilon per ground metre for each person per km2"
    )
    library_option(g, f, "floor", type=number_arg, help="with --slope: epsilon per ground metre where nobody lives")
    library_option(
        g,
        f,
        "units",
        choices=("per_km2", "per_cell"),
        help="what a cell value is: people per km2 of ground, or per cell",
    )
    library_option(
        g,
        f,
        "nodata_epsilon",
        type=_nodata_epsilon,
        metavar="nearest|EPSILON",
        help="epsilon of no-data cells: 'nearest' (the nearest cell with data: for sea and lakes) or a number; "
        "not given: the floor, the strongest protection",
    )
    library_option(g, f, "band", type=int, help="raster band to read (1-based)")
    library_option(g, f, "nodata", type=float, help="cell value meaning no data (overrides the file's)")
    library_option(g, f, "crs", help="CRS of the raster when the file has none or a wrong one")
    library_option(
        g,
        f,
        "max_cells",
        type=_max_cells,
        metavar="N|none",
        help="largest raster read, in cells (width x height), checked before any cell is decoded: a compressed "
        "file can be tiny and decode to gigabytes; 'none' for no limit",
    )
    g.add_argument(
        "--regularise",
        type=number_arg,
        metavar="MAX_SLOPE",
        default=None,
        help="PrivacyMap.regularised: lower epsilon where the noise scale changes faster than this many "
        "metres per metre (default: not regularised)",
    )
    if with_from_epsilon:
        g.add_argument(
            "--from-epsilon",
            action="store_true",
            help="RASTER already holds epsilon per metre (a map written by 'geopriv privacy-map'): "
            "PrivacyMap.from_epsilon; no population options",
        )


def _check_map_args(args) -> None:
    population = [
        f
        for f, v in (
            ("--epsilon-range", args.epsilon_range),
            ("--slope", args.slope),
            ("--floor", args.floor),
            ("--units", args.units),
        )
        if v is not None
    ]
    if getattr(args, "from_epsilon", False):
        if population:
            raise CLIError(
                f"--from-epsilon reads epsilon per metre from the raster: do not also give {'/'.join(population)}"
            )
        return
    if args.epsilon_range is not None and (args.slope is not None or args.floor is not None):
        raise CLIError("give either --epsilon-range LOW HIGH, or --slope with --floor, not both")
    if args.epsilon_range is None and (args.slope is None or args.floor is None):
        raise CLIError(
            "say how density becomes epsilon: --epsilon-range LOW HIGH (e.g. ln4/3000 ln4/600), or --slope S with --floor F"
            + ("; or --from-epsilon if the raster holds epsilon per metre" if hasattr(args, "from_epsilon") else "")
        )


def _privacy_map(args):
    """The PrivacyMap the options describe (one library call, plus regularisation)."""
    from ..privacy_map import PrivacyMap

    common = given_options(args, ("band", "nodata", "nodata_epsilon", "max_cells"))
    if args.crs is not None:
        common["crs"] = check_crs(args.crs)
    if getattr(args, "from_epsilon", False):
        pm = PrivacyMap.from_epsilon(args.raster, **common)
    else:
        rule = given_options(args, ("epsilon_range", "slope", "floor", "units"))
        pm = PrivacyMap.from_population(args.raster, **rule, **common)
    if args.regularise is not None:
        pm = pm.regularised(args.regularise)
    return pm


def _cmd_privacy_map(args) -> int:
    from .. import io

    _check_map_args(args)
    check_crs(args.crs)
    _check_raster(args.raster, "population raster")
    dest = io.check_file_output(
        args.output, suffixes=(".tif", ".tiff"), what="GeoTIFF", overwrite=args.overwrite, protect=[args.raster]
    )
    pm = _privacy_map(args)
    with io.Staging() as stage:
        stage.file(dest, pm.to_geotiff, overwrite=args.overwrite)
        stage.commit()
    print(f"wrote {args.output}: {pm!r}", file=sys.stderr)
    return 0


def _cmd_build_mechanism(args) -> int:
    from .. import io
    from ..mechanisms.eikonal import EikonalMechanism

    _check_map_args(args)
    if args.no_smooth and args.smooth is not None:
        raise CLIError("give either --smooth or --no-smooth, not both")
    check_crs(args.crs)
    _check_raster(args.raster, "raster")
    dest = io.check_file_output(
        args.output, suffixes=(".npz",), what="mechanism", overwrite=args.overwrite, protect=[args.raster]
    )
    pm = _privacy_map(args)
    print(f"privacy map: {pm!r}", file=sys.stderr)
    options = given_options(
        args, ("margin", "smooth", "jump", "output_spacing", "max_step", "pad", "cap", "n_jobs", "kernels")
    )
    if args.no_smooth:
        options["smooth"] = None
    # bars on a terminal only (tqdm's disable=None): piped or redirected stderr gets the lines above and below,
    # never carriage-return updates piled up on one line
    bars = args.progress and on_terminal(sys.stderr)
    mech = EikonalMechanism.build(pm, progress=True if bars else None, **options)
    digests = []
    with io.Staging() as stage:
        stage.file(dest, lambda tmp: digests.append(mech.save(tmp)), overwrite=args.overwrite)
        stage.commit()
    print(f"wrote {args.output}: verified {mech.report}; SHA-256 {digests[0]}", file=sys.stderr)
    return 0


EPILOG_PRIVACY_MAP = """examples:
  # empty areas: ln 4 within 3 km; the densest cell: ln 4 within 600 m
  geopriv privacy-map tokyo_density_200.tif tokyo_map.tif --epsilon-range ln4/3000 ln4/600

  # epsilon = floor + slope * density, no-data cells (the sea) at the level of the nearest coast
  geopriv privacy-map density.tif map.tif --floor 2e-4 --slope 1e-5 --nodata-epsilon nearest
"""

EPILOG_BUILD = """examples:
  # build once (seconds to minutes), then perturb any number of point sets with it
  geopriv build-mechanism tokyo_density_200.tif tokyo.npz --epsilon-range ln4/3000 ln4/600 --n-jobs 4
  geopriv perturb homes.gpkg homes_private.gpkg --mechanism tokyo.npz

  # from a privacy map written by 'geopriv privacy-map'
  geopriv build-mechanism tokyo_map.tif tokyo.npz --from-epsilon --margin 0.2
"""


def privacy_map_arguments(m) -> None:
    m.add_argument("raster", help="population density raster (GeoTIFF, projected CRS)")
    m.add_argument("output", help="privacy map GeoTIFF (.tif)")
    _map_options(m, with_from_epsilon=False)
    m.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    m.set_defaults(func=_cmd_privacy_map)


def build_mechanism_arguments(b) -> None:
    from ..mechanisms.eikonal import EikonalMechanism
    from ..mechanisms.eikonal.mechanism import KERNELS

    b.add_argument(
        "raster", help="population raster (with --epsilon-range or --slope/--floor) or a privacy map (--from-epsilon)"
    )
    b.add_argument("output", help="mechanism file (.npz)")
    _map_options(b, with_from_epsilon=True)
    build = EikonalMechanism.build
    g = b.add_argument_group("mechanism (EikonalMechanism.build)")
    library_option(
        g,
        build,
        "margin",
        type=grid_arg,
        metavar="SHARE|auto",
        help="share of the privacy loss kept for normalisation, in (0, 1); auto: 0.1 per noise length",
    )
    library_option(
        g,
        build,
        "smooth",
        type=_optional_number,
        metavar="METRES_PER_METRE|none",
        help="build the kernels from a map regularised to this slope",
    )
    g.add_argument("--no-smooth", action="store_true", help="same as --smooth none")
    library_option(
        g,
        build,
        "jump",
        type=_optional_number,
        metavar="LOG_FACTOR|none",
        help="also lower the kernels' map so epsilon changes by at most exp(JUMP) between neighbouring cells "
        "(per noise length on cells longer than one); none: off",
    )
    library_option(g, build, "output_spacing", type=float, help="largest output spacing times epsilon")
    library_option(
        g,
        build,
        "max_step",
        type=_step,
        metavar="CELLS|none",
        help="largest output step in cells, a power of two; none: no cap, the spacing follows 1/epsilon",
    )
    library_option(g, build, "pad", type=float, help="outputs extend beyond the raster by this many noise lengths")
    library_option(g, build, "cap", type=float, help="kernel cap in travel-time units")
    library_option(g, build, "n_jobs", type=int, help="worker processes for the kernels")
    library_option(
        g,
        build,
        "kernels",
        choices=KERNELS,
        help="held: keep every kernel entry while building; on_demand: hold only the truncated kernels of the weight "
        "solve (large rasters; the saved file is the same compact file)",
    )
    b.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    b.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress bars (they are drawn only when stderr is a terminal)",
    )
    b.set_defaults(func=_cmd_build_mechanism)
