"""geopriv perturb: planar Laplace or a saved location-dependent mechanism.

A saved mechanism is loaded with its options (--outside, --remap, --kernels, --n-jobs) by
:func:`geopriv.adapters.load_mechanism`, as QGIS loads it.
"""

from __future__ import annotations

import contextlib
import sys
import warnings

from ..adapters import load_mechanism
from .common import (
    PERSON_NEEDED,
    CLIError,
    budget_options,
    charge_note,
    check_crs,
    check_person,
    check_privacy,
    given_options,
    input_options,
    library_option,
    mark_shuffled,
    open_budget_store,
    privacy_kwargs,
    privacy_options,
    read_points,
    release_options,
    release_rows,
    rng_note,
    rows_note,
    rows_options,
)


@contextlib.contextmanager
def warnings_before_writing():
    """Print geopriv's warnings of the release inside, once it returned and before its output is written.

    They come from the plan's checks of public parameters, made before any noise (the noise far
    below 10 m or above the study area, :func:`geopriv.precision.check_noise_scale`): a user
    warned that a release protects almost nothing reads it before the file exists, not after.
    A refused input still prints its error alone (nothing is printed when the block raises);
    other libraries' warnings go to the command line's usual handler (shown once it succeeded).
    """
    from ..exceptions import GeoprivWarning, user_message

    with warnings.catch_warnings(record=True) as caught:
        yield
    shown = set()
    for w in caught:
        if isinstance(w.message, GeoprivWarning):
            text = " ".join(user_message(w.message, "cli").split())
            if text not in shown:
                shown.add(text)
                print(f"geopriv: warning: {text}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _cmd_perturb(args) -> int:
    import geopriv

    from .. import io

    if args.mechanism is not None:
        given = [
            f
            for f, v in (("--epsilon", args.epsilon), ("--level", args.level), ("--radius", args.radius))
            if v is not None
        ]
        if given:
            raise CLIError(f"--mechanism carries its own privacy map: do not also give {'/'.join(given)}")
        if args.region is not None:
            raise CLIError("--region applies to planar Laplace only; a --mechanism defines its own outputs")
    else:
        check_privacy(args)
        for flag, value in (
            ("--outside", args.outside),
            ("--remap", args.remap),
            ("--kernels", args.kernels),
            ("--n-jobs", args.n_jobs),
        ):
            if value:
                raise CLIError(f"{flag} applies to a location-dependent --mechanism only")
    crs = check_crs(args.crs)
    inputs = [args.input, args.region, args.mechanism]
    io.check_input(args.input)
    for path, what in ((args.region, "region"), (args.mechanism, "mechanism")):
        if path is not None:
            io.check_input(path, what)
    io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    open_budget_store(args, PERSON_NEEDED)

    gdf = release_rows(read_points(args.input, args.layer, crs, xy=args.xy), args, needed=(("--person", args.person),))
    check_person(gdf, args)
    kwargs = given_options(
        args, ("rng", "grid", "continuous", "bounds", "keep", "max_distortion", "budget_store", "person")
    )
    if args.region is not None:
        kwargs["region"] = read_points(args.region, what="region", flag=None)
    if args.mechanism is not None:  # the points are checked against the file's map before a full load
        kwargs["mechanism"] = load_mechanism(
            args.mechanism,
            points=gdf,
            outside=args.outside,
            remap=args.remap,
            progress=True if getattr(args, "progress", False) else None,
            **given_options(args, ("kernels", "n_jobs")),
        )
    else:
        kwargs.update(privacy_kwargs(args))
    with warnings_before_writing():  # e.g. noise far below 10 m: said before the file exists
        out = mark_shuffled(geopriv.perturb(gdf, progress=True if args.progress else None, **kwargs), args)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    if "epsilon_per_m" in rec:
        eff = rec.get("effective_epsilon_per_m")
        how = f"epsilon {rec['epsilon_per_m']:.6g} per ground metre " + (
            f"(effective {eff:.6g})" if eff else "(continuous: no finite-precision bound)"
        )
    else:
        how = f"location-dependent epsilon {rec['epsilon_min_per_m']:.4g} .. {rec['epsilon_max_per_m']:.4g} per metre"
    print(
        f"released {rec['n']} points to {args.output}{rows_note(args)}: {how}, CRS {rec['input_crs']}{rng_note(rec)}",
        file=sys.stderr,
    )
    charge_note(rec, args)
    return 0


EPILOG_PERTURB = """examples:
  # ln 4 within 200 m: two places 200 m apart are at most 4 times more or less likely to give any output
  geopriv perturb homes.gpkg homes_private.gpkg --level ln4 --radius 200

  # a 25 m public lattice, outputs kept inside a study area (--epsilon ln4/200 per ground metre is the same privacy)
  geopriv perturb homes.shp out.geojson --level ln4 --radius 200 --grid 25 --region area.gpkg

  # a CSV of longitude/latitude listed street by street: shuffle the rows, leave an address column out
  geopriv perturb homes.csv out.gpkg --xy lon lat --crs EPSG:4326 --level ln4 --radius 200 --shuffle --drop address

  # add a layer to an existing GeoPackage (its other layers are kept; --overwrite replaces only this one)
  geopriv perturb homes.gpkg project.gpkg --level ln4 --radius 200 --out-layer homes_private

  # location-dependent privacy with a mechanism saved by 'geopriv build-mechanism'
  geopriv perturb homes.gpkg homes_private.gpkg --mechanism tokyo.npz --outside clamp
"""


def perturb_arguments(p) -> None:
    import geopriv

    from ..mechanisms.eikonal import EikonalMechanism
    from ..mechanisms.eikonal.mechanism import LOAD_KERNELS

    p.add_argument("input", help="input points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)")
    p.add_argument(
        "output", help="output file; format from the extension: .gpkg .geojson .json .fgb .shp .csv .parquet"
    )
    privacy_options(
        p, geopriv.perturb, "privacy (give --level and --radius, or --epsilon per ground metre, or --mechanism)"
    )
    g = p.add_argument_group("location-dependent privacy")
    g.add_argument(
        "--mechanism", metavar="FILE.npz", help="a mechanism saved by 'geopriv build-mechanism' (verified on load)"
    )
    g.add_argument(
        "--outside",
        choices=("error", "clamp"),
        help="points outside the mechanism's raster: stop naming them (error), or release them as if at "
        "the nearest point of the raster (clamp) (default: the mechanism's, error)",
    )
    g.add_argument(
        "--remap",
        action="store_true",
        help="release each output's posterior mean under the population (same guarantee, lower error)",
    )
    library_option(
        g,
        EikonalMechanism.load,
        "kernels",
        choices=LOAD_KERNELS,
        help="held: recompute and keep every kernel entry; on_demand: keep none, recompute only the rows the points "
        "need (large rasters; a few points cost a few shortest-path searches); auto: on_demand for a file you "
        "verified before (stamped: no kernel solve at load), held otherwise",
    )
    library_option(
        g, EikonalMechanism.load, "n_jobs", type=int, help="worker processes for the mechanism's kernel solves"
    )
    release_options(p, geopriv.perturb)
    p.add_argument("--region", help="vector file of the public polygon outputs are kept in")
    budget_options(
        p,
        geopriv.perturb,
        "each row's person the row's epsilon per ground metre (unit epsilon/m: the "
        "effective epsilon on the lattice, or a --mechanism's largest)",
        "column of stable person ids (integers or text) whose lifetime budgets --budget-store charges; "
        "needed with it. A person with several rows pays for each",
    )
    rows_options(p)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    input_options(p)
    p.set_defaults(func=_cmd_perturb)
