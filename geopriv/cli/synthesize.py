"""geopriv synthesize: a private synthetic point set."""

from __future__ import annotations

import sys

from .common import (
    PERSON_NEEDED,
    budget_options,
    charge_note,
    check_crs,
    check_person,
    depth_arg,
    given_options,
    grid_arg,
    input_options,
    library_option,
    number_arg,
    open_budget_store,
    read_points,
    release_rows,
    rng_note,
    rows_options,
)

# ---------------------------------------------------------------------------- synthesize
_SYNTH_OPTIONS = ("n", "method", "depth", "placement", "grid", "bounds", "max_distortion", "rng")


def _cmd_synthesize(args) -> int:
    import geopriv

    from .. import io

    crs = check_crs(args.crs)
    inputs = [args.input, args.region]
    io.check_input(args.input)
    if args.region is not None:
        io.check_input(args.region, "region")
    io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    open_budget_store(args, PERSON_NEEDED)

    gdf = release_rows(read_points(args.input, args.layer, crs, xy=args.xy), args, needed=(("--person", args.person),))
    check_person(gdf, args)
    kwargs = given_options(args, _SYNTH_OPTIONS + ("budget_store", "person"))
    if args.region is not None:
        kwargs["region"] = read_points(args.region, what="region", flag=None)
    out = geopriv.synthesize(gdf, args.epsilon, progress=True if args.progress else None, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    area = {"bounds": "--bounds", "region": "the bounding box of --region", "area_of_use": "the CRS's area of use"}.get(
        rec.get("frame_area"), rec.get("frame_area")
    )
    print(
        f"released {rec['n']} synthetic points (from {rec['n_people']} people; attributes not carried over) to "
        f"{args.output}: epsilon {rec['epsilon']:.6g} (differential privacy of the whole set, not per metre), "
        f"method {rec['method']}, depth {rec['depth']}, public area {area}, CRS {rec['input_crs']}{rng_note(rec)}",
        file=sys.stderr,
    )
    charge_note(rec, args)
    if rec.get("frame_area") == "area_of_use":  # after the release: bad input stays one line on stderr
        print(
            "geopriv: note: no --bounds or --region, so the public area was the CRS's area of use and the cells are "
            "coarse; declare your study area with --bounds XMIN YMIN XMAX YMAX (chosen without looking at the "
            "points) for finer cells",
            file=sys.stderr,
        )
    return 0


EPILOG_SYNTHESIZE = """examples:
  # as many synthetic points as people, epsilon 1 for the whole set (dimensionless, total: not per metre; one
  # person's location may be replaced anywhere in the public area); the study area is public, never computed
  # from the points
  geopriv synthesize homes.gpkg synthetic.gpkg --epsilon 1 --bounds 440000 4400000 470000 4430000

  # the private measure mechanism, 10,000 points drawn from the private measure (no extra privacy loss)
  geopriv synthesize homes.gpkg synthetic.gpkg --epsilon ln3 --method pmm -n 10000 --region city.gpkg

  # without --bounds or --region the CRS's area of use is the public area: coarse cells
  geopriv synthesize homes_utm.gpkg synthetic.geojson --epsilon 1
"""


def synthesize_arguments(y) -> None:
    import geopriv

    from ..mechanisms.private_measure import METHODS

    sy = geopriv.synthesize
    y.add_argument("input", help="input points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)")
    y.add_argument(
        "output", help="output file; format from the extension: .gpkg .geojson .json .fgb .shp .csv .parquet"
    )
    g = y.add_argument_group(
        "privacy (one person's location replaced anywhere in the public area; the number of people is public)"
    )
    g.add_argument(
        "--epsilon",
        type=number_arg,
        required=True,
        metavar="TOTAL",
        help="differential privacy loss of the whole release, dimensionless (total; not per metre, unlike "
        "perturb's), e.g. 1 or ln3",
    )
    g = y.add_argument_group("public area and synthetic points")
    library_option(
        g,
        sy,
        "bounds",
        type=float,
        nargs=4,
        metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
        help="public area in the input's CRS, chosen without looking at the points (never derived from the data: "
        "a city's or map sheet's extent); inputs outside it are refused (default: the bounding box of --region, "
        "else the CRS's area of use: coarse cells)",
    )
    g.add_argument(
        "--region",
        help="vector file of the public polygon outputs are kept in; its bounding box is the "
        "public area when --bounds is not given",
    )
    library_option(
        g,
        sy,
        "n",
        "-n",
        "--n",
        type=int,
        metavar="N",
        help="number of synthetic points, drawn from the private measure (default: as many as input points)",
    )
    library_option(
        g,
        sy,
        "method",
        choices=METHODS,
        help="srw: super-regular random walk on a Hilbert curve; pmm: private measure mechanism",
    )
    library_option(
        g,
        sy,
        "depth",
        type=depth_arg,
        metavar="LEVELS|auto",
        help="levels of the binary partition tree (2**depth cells along the curve); 'auto' from n and epsilon",
    )
    library_option(
        g,
        sy,
        "placement",
        choices=("uniform", "centre"),
        help="synthetic points uniform in their cell, or at its centre",
    )
    library_option(
        g,
        sy,
        "grid",
        type=grid_arg,
        metavar="METRES|auto",
        help="step in ground metres of the public lattice outputs are snapped to ('auto': 1 m, finer for small cells)",
    )
    library_option(
        g,
        sy,
        "max_distortion",
        type=float,
        help="largest scale variation of a projected CRS over the public area for which it is used as is",
    )
    library_option(
        g,
        sy,
        "rng",
        "--seed",
        type=int,
        metavar="SEED",
        show_default=False,
        help="seed (rng=) for reproducible tests and demos only; recorded as seeded (default: OS entropy)",
    )
    budget_options(
        y,
        sy,
        "each row's person the release's epsilon (unit epsilon: dimensionless, a budget kept "
        "apart from the per-metre one of perturb)",
        "column of stable person ids (integers or text) whose lifetime budgets --budget-store charges; "
        "needed with it. A person with k rows pays k times the epsilon (group privacy)",
    )
    rows_options(y, shuffle=False)
    y.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    input_options(y)
    y.set_defaults(func=_cmd_synthesize)
