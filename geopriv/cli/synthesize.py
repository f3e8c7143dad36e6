"""geopriv synthesize: a private synthetic point set."""

from __future__ import annotations

import sys

from .common import (
    MAX_DISTORTION,
    PERSON_NEEDED,
    SEED,
    Arg,
    ArgGroup,
    add_args,
    budget_options,
    charge_note,
    check_crs,
    check_person,
    depth_arg,
    given_options,
    grid_arg,
    input_options,
    number_arg,
    open_budget_store,
    read_points,
    release_rows,
    rng_note,
    rows_options,
)
from .perturb import warnings_before_writing

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
    with warnings_before_writing():  # said before the file exists
        out = geopriv.synthesize(gdf, args.epsilon, progress=True if args.progress else None, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    area = "--bounds" if rec.get("frame_area") == "bounds" else "the bounding box of --region"
    print(
        f"released {rec['n']} synthetic points (from {rec['n_people']} people; attributes not carried over) to "
        f"{args.output}: epsilon {rec['epsilon']:.6g} (differential privacy of the whole set, not per metre), "
        f"method {rec['method']}, depth {rec['depth']}, public area {area}, CRS {rec['input_crs']}{rng_note(rec)}",
        file=sys.stderr,
    )
    charge_note(rec, args)
    return 0


EPILOG_SYNTHESIZE = """examples:
  # as many synthetic points as people, epsilon 1 for the whole set (dimensionless, total: not per metre; one
  # person's location may be replaced anywhere in the public area); the study area is public, never computed
  # from the points
  geopriv synthesize homes.gpkg synthetic.gpkg --epsilon 1 --bounds 440000 4400000 470000 4430000

  # the private measure mechanism, 10,000 points drawn from the private measure (no extra privacy loss)
  geopriv synthesize homes.gpkg synthetic.gpkg --epsilon ln3 --method pmm -n 10000 --region city.gpkg

  # the synthetic points are spread over the whole public area: without --bounds or --region the release is
  # refused (a CRS's area of use, the whole world for Web Mercator, is no study area)
"""


def _methods():
    """The synthesis methods the library knows (read when the options are added: it imports the library)."""
    from ..mechanisms.private_measure import METHODS

    return METHODS


_SYNTHESIZE_OPTIONS = (
    ArgGroup(
        None,
        (
            Arg(("input",), "input points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)"),
            Arg(("output",), "output file; format from the extension: .gpkg .geojson .json .fgb .shp .csv .parquet"),
        ),
    ),
    ArgGroup(
        "privacy (one person's location replaced anywhere in the public area; the number of people is public)",
        (
            Arg(
                ("--epsilon",),
                "differential privacy loss of the whole release, dimensionless (total; not per metre, unlike "
                "perturb's), e.g. 1 or ln3",
                type=number_arg,
                required=True,
                metavar="TOTAL",
            ),
        ),
    ),
    ArgGroup(
        "public area and synthetic points",
        (
            Arg(
                ("--bounds",),
                "public area in the input's CRS, chosen without looking at the points (never derived from the "
                "data: a city's or map sheet's extent); the synthetic points are spread over it and inputs outside "
                "it are refused (default: the bounding box of --region; one of them is needed)",
                param="bounds",
                type=float,
                nargs=4,
                metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
            ),
            Arg(
                ("--region",),
                "vector file of the public polygon outputs are kept in; its bounding box is the "
                "public area when --bounds is not given",
            ),
            Arg(
                ("-n", "--n"),
                "number of synthetic points, drawn from the private measure (default: as many as input points)",
                param="n",
                type=int,
                metavar="N",
            ),
            Arg(
                ("--method",),
                "srw: super-regular random walk on a Hilbert curve; pmm: private measure mechanism",
                param="method",
                choices=_methods,
            ),
            Arg(
                ("--depth",),
                "levels of the binary partition tree (2**depth cells along the curve); 'auto' from n and epsilon",
                param="depth",
                type=depth_arg,
                metavar="LEVELS|auto",
            ),
            Arg(
                ("--placement",),
                "synthetic points uniform in their cell, or at its centre",
                param="placement",
                choices=("uniform", "centre"),
            ),
            Arg(
                ("--grid",),
                "step in ground metres of the public lattice outputs are snapped to ('auto': 1 m, finer for small "
                "cells)",
                param="grid",
                type=grid_arg,
                metavar="METRES|auto",
            ),
            MAX_DISTORTION,
            SEED,
        ),
    ),
)


def synthesize_arguments(y) -> None:
    """The options of ``geopriv synthesize``: the table above, then the budget, column and file options."""
    import geopriv

    sy = geopriv.synthesize
    add_args(y, _SYNTHESIZE_OPTIONS, sy)
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
