"""geopriv adversary-error and geopriv calibrate: measured privacy (reads no data)."""

from __future__ import annotations

import json
import math
import sys

from .common import given_options, library_option, number_arg, privacy_options

EPILOG_ADVERSARY = """examples:
  # ln 4 within 200 m over a public 4 x 3 km study area (UTM 50N): the optimal adversary's error in metres
  geopriv adversary-error --level ln4 --radius 200 --bounds 400000 4400000 404000 4403000 --crs EPSG:32650

  # with a population raster: its prior, the k-equivalent, and both maps as a GeoTIFF
  geopriv adversary-error --epsilon 0.0023 --bounds 400000 4400000 404000 4403000 --crs EPSG:32650 \\
      --population pop.tif --prior population --map adversary.tif --json
"""

EPILOG_CALIBRATE = """examples:
  # the largest epsilon whose optimal adversary still errs by 300 m or more
  geopriv calibrate adversary_error 300 --bounds 400000 4400000 404000 4403000 --crs EPSG:32650

  # the smallest epsilon whose releases are within 100 m on average, and the curve as CSV
  geopriv calibrate displacement 100 --bounds 400000 4400000 404000 4403000 --crs EPSG:32650 --curve curve.csv
"""


def _measured_area_options(p, func) -> None:
    g = p.add_argument_group("public area and prior (no data is read)")
    g.add_argument(
        "--bounds",
        type=float,
        nargs=4,
        metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
        required=True,
        help="public study area, chosen without looking at any data",
    )
    g.add_argument(
        "--crs",
        required=True,
        help="CRS of --bounds: a projected CRS (e.g. EPSG:32650), or longitude and latitude (EPSG:4326)",
    )
    library_option(g, func, "prior", choices=("uniform", "population"), help="where the adversary believes people are")
    library_option(
        g, func, "population", metavar="RASTER", help="population raster (for --prior population and the k-equivalent)"
    )
    library_option(g, func, "units", choices=("per_km2", "per_cell"), help="what the population raster holds")
    library_option(
        g, func, "cell", type=float, metavar="METRES", help="grid step in ground metres (default: the library's)"
    )


def adversary_arguments(a) -> None:
    import geopriv

    privacy_options(a, geopriv.adversary_error, "privacy (give --level and --radius, or --epsilon per ground metre)")
    _measured_area_options(a, geopriv.adversary_error)
    a.add_argument("--map", metavar="FILE.tif", help="write the error map (and the k-equivalent map) as a GeoTIFF")
    a.add_argument("--overwrite", action="store_true", help="replace an existing --map file")
    a.add_argument("--json", action="store_true", help="print the numbers as one JSON object")
    a.set_defaults(func=_cmd_adversary)


def calibrate_arguments(c) -> None:
    import geopriv

    from ..adversary import CALIBRATION_TARGETS

    c.add_argument("target", choices=CALIBRATION_TARGETS, help="what to meet")
    c.add_argument(
        "value",
        type=number_arg,
        help="metres (adversary_error: at least; displacement: at most) or people (k_equivalent: at least)",
    )
    _measured_area_options(c, geopriv.calibrate)
    c.add_argument(
        "--radius",
        type=number_arg,
        metavar="METRES",
        default=200.0,
        help="also say the epsilon as a level within this radius (default 200)",
    )
    c.add_argument("--curve", metavar="FILE.csv", help="write the curve (epsilon and the measures) as CSV")
    c.add_argument("--overwrite", action="store_true", help="replace an existing --curve file")
    c.add_argument("--json", action="store_true", help="print the result as one JSON object")
    c.set_defaults(func=_cmd_calibrate)


def _cmd_adversary(args) -> int:
    import geopriv

    options = given_options(args, ("level", "radius", "epsilon", "prior", "population", "units", "cell"))
    adv = geopriv.adversary_error(area=tuple(args.bounds), crs=args.crs, **options)
    if args.map:
        adv.to_raster(args.map, overwrite=args.overwrite)
    out = {
        "adversary_error_m": round(adv.expected_error_m, 3),
        "expected_displacement_m": round(adv.displacement_m, 3),
        "k_equivalent": None if adv.k_equivalent is None else round(adv.k_equivalent, 3),
        "epsilon_per_m": adv.parameters["epsilon_per_m"],
        "cell_m": adv.parameters["cell_m"],
        "grid_shape": adv.parameters["grid_shape"],
        "prior": adv.prior,
    }
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"optimal adversary's expected error: {out['adversary_error_m']:,.1f} m")
    print(f"expected displacement of the releases: {out['expected_displacement_m']:,.1f} m")
    if adv.k_equivalent is not None:
        print(f"k-equivalent: {adv.k_equivalent:,.1f} people in the adversary's {adv.confidence:.0%} region")
    print(f"grid: {adv.shape[1]} x {adv.shape[0]} cells of {adv.parameters['cell_m']:,.1f} m; prior: {adv.prior}")
    if args.map:
        print(f"wrote {args.map}")
    return 0


def _cmd_calibrate(args) -> int:
    import geopriv

    options = given_options(args, ("prior", "population", "units", "cell"))
    if args.curve:  # before any work: an existing file (or a symbolic link) there is refused
        from .. import io

        io.refuse_existing([args.curve], args.curve, args.overwrite)
    cal = geopriv.calibrate(args.target, args.value, area=tuple(args.bounds), crs=args.crs, **options)
    if args.curve:
        from ..io import exists_error, write_new_file

        text = cal.curve.to_csv(index=False)
        write_new_file(
            args.curve, lambda fh: fh.write(text.encode()), overwrite=args.overwrite, exists=lambda p: exists_error(p)
        )
    out = {
        "epsilon_per_m": cal.epsilon_per_m,
        "level": cal.level(args.radius),
        "radius_m": args.radius,
        "target": cal.target,
        "value": cal.value,
        "met": cal.met,
    }
    if args.json:
        print(json.dumps(out))
        return 0 if cal.met else 1
    print(
        f"epsilon {cal.epsilon_per_m:.6g} per metre = ln {math.exp(cal.level(args.radius)):.4g} within "
        f"{args.radius:g} m"
    )
    if not cal.met:
        print("no epsilon tried meets the target: this is the closest; change the target or the area", file=sys.stderr)
        return 1
    return 0
