"""geopriv report: displacement statistics, Wasserstein distance and the HTML release report."""

from __future__ import annotations

import argparse
import inspect
import json
import sys

from .common import CLIError, check_crs, given_options, library_option, read_points


# ---------------------------------------------------------------------------- report, demo
def _cmd_report(args) -> int:
    import geopriv

    from .. import io

    if args.delta is not None:
        if args.quantile is not None:
            raise CLIError("give --quantile only (--delta is its deprecated name)")
        print(
            "geopriv: warning: --delta is deprecated and will be removed in the next release; use --quantile",
            file=sys.stderr,
        )
        args.quantile = args.delta
    if args.quantile is not None and not 0 < args.quantile < 1:
        raise CLIError(
            "--quantile: the quantile must be strictly between 0 and 1 (e.g. 0.9: alpha is the radius "
            "containing 90 % of the displacements)"
        )
    if args.wasserstein and (args.quantile is not None or args.id is not None):
        raise CLIError(
            "--wasserstein compares the two point sets as wholes: no rows are matched (--id) and there are "
            "no displacements (--quantile)"
        )
    if args.html is None and (args.population or args.map_cell is not None or args.overwrite or args.bounds):
        raise CLIError(
            "--bounds, --population, --map-cell and --overwrite are options of the release report: add --html"
        )
    crs = check_crs(args.crs)
    released_crs = check_crs(args.released_crs)
    io.check_input(args.true, "true")
    io.check_input(args.released, "released")
    true = read_points(args.true, args.layer, crs, what="true", xy=args.xy)
    record = io.read_provenance(args.released, args.released_layer)  # public: what the release published
    released_xy = io.table_xy(args.released, args.xy, args.released_layer)
    if released_crs is None and released_xy is not None and record and record.get("input_crs"):
        released_crs = check_crs(record["input_crs"])  # a CSV release is in its input's CRS, as its record says
    released = read_points(
        args.released,
        args.released_layer,
        released_crs,
        what="released",
        flag="--released-crs",
        layer_flag="--released-layer",
        xy=released_xy,
    )
    if args.wasserstein:
        if args.html is not None:
            _report_html(true, released, record, args)
        return _report_wasserstein(true, released, args)
    if record is not None and record.get("row_order") == "shuffled" and args.id is None:
        raise CLIError(
            f"the rows of {args.released} were shuffled by the release (--shuffle), so they cannot be "
            "matched with the true rows by their order: match them by an id column kept through the "
            "release with --id COLUMN, or compare the two point sets with --wasserstein"
        )
    if args.id is not None:
        for what, gdf in (("true", true), ("released", released)):
            if args.id not in gdf.columns:
                raise CLIError(f"the {what} file has no column {args.id!r} (--id)")
        true, released = true.set_index(args.id), released.set_index(args.id)
    if record is not None:  # the library refuses what its record rules out (displacements of a synthetic set)
        released.attrs["geopriv"] = record
    if args.html is not None:
        from ..metrics import is_synthetic

        _report_html(true, released, record, args)
        if is_synthetic(record):
            return 0  # a synthetic set has no displacements to print: the report compares the distributions
    report = geopriv.utility_report(true, released, **given_options(args, ("quantile",)))
    values = {k: (int(v) if k == "n" else float(v)) for k, v in report.items()}
    if args.json:
        print(json.dumps(values))
    else:
        q = next(k for k in values if k.startswith("alpha_"))
        share = float(q[len("alpha_") : -len("_m")])
        for k, v in values.items():
            note = f"   radius containing {100 * share:g} % of the displacements" if k == q else ""
            print(f"{k:<12} {v:.6g}{note}")
    return 0


def _report_html(true, released, record, args) -> None:
    """--html: the release report (geopriv.report.release_report), private: for the data holder."""
    from ..report import release_report, report_path

    if record is not None:
        released.attrs["geopriv"] = record
    path = args.html or report_path(args.released)
    kwargs = {"quantile": args.quantile} if args.quantile is not None else {}
    written = release_report(
        true,
        released,
        path,
        population=args.population,
        area=args.bounds,
        prior="population" if args.population else "uniform",
        map_cell=args.map_cell,
        overwrite=args.overwrite,
        front_end="cli",
        **kwargs,
    )
    print(
        f"wrote the release report {written}: private, for the data holder (it shows counts of the true points "
        "per map cell); do not publish it",
        file=sys.stderr,
    )


def _report_wasserstein(true, released, args) -> int:
    """--wasserstein: the earth mover's distance between the two point sets, in metres (no rows matched)."""
    import geopriv

    exact = max(len(true), len(released)) <= inspect.signature(geopriv.wasserstein).parameters["max_points"].default
    try:
        value = geopriv.wasserstein(true, released) if exact else geopriv.wasserstein_bound(true, released)
    except ImportError:
        raise CLIError(
            "--wasserstein needs the POT library: pip install 'geopriv[metrics]' (or pip install pot)"
        ) from None
    key = "wasserstein_m" if exact else "wasserstein_bound_m"
    values = {"n_true": len(true), "n_released": len(released), key: float(value)}
    if args.json:
        print(json.dumps(values))
    else:
        what = (
            "earth mover's distance between the two point sets"
            if exact
            else "an upper bound on the earth mover's distance (sets too large for the exact one)"
        )
        for k, v in values.items():
            print(f"{k:<19} {v:.6g}" + (f"   {what}, ground metres" if k == key else ""))
    return 0


EPILOG_REPORT = """examples:
  geopriv report homes.gpkg homes_private.gpkg
  # rows matched by an id column; alpha_0.5_m is then the median displacement
  geopriv report homes.gpkg homes_private.geojson --id home_id --quantile 0.5 --json

  # a synthetic set (geopriv synthesize) belongs to nobody: compare the distributions, not rows
  geopriv report homes.gpkg synthetic.gpkg --wasserstein

  # the release report for the data holder: writes homes_private.private-report.html (do not publish it)
  geopriv report homes.gpkg homes_private.gpkg --html
"""


def report_arguments(r) -> None:
    import geopriv

    r.add_argument("true", help="the original points")
    r.add_argument("released", help="their release (rows matched by --id, or by order)")
    r.add_argument("--layer", help="layer of the true file")
    r.add_argument("--released-layer", help="layer of the released file")
    r.add_argument("--crs", help="CRS of the true file's coordinates, when it has none (CSV) or a wrong one")
    r.add_argument(
        "--xy",
        nargs=2,
        metavar=("X_COLUMN", "Y_COLUMN"),
        help="build the true points from these two columns of the true file (e.g. --xy lon lat); a released CSV "
        "with the same two columns (as perturb writes one) is read the same way",
    )
    r.add_argument(
        "--released-crs", help="CRS of the released file's coordinates, when it has none (CSV) or a wrong one"
    )
    r.add_argument("--id", metavar="COLUMN", help="column matching rows of the two files (default: row order)")
    library_option(
        r,
        geopriv.utility_report,
        "quantile",
        type=float,
        help="alpha is the radius containing this share of the displacements (not a privacy parameter)",
    )
    r.add_argument("--delta", type=float, default=None, help=argparse.SUPPRESS)  # deprecated name of --quantile
    r.add_argument(
        "--wasserstein",
        action="store_true",
        help="print the Wasserstein-1 (earth mover's) distance in ground metres between the two point sets "
        "instead: no rows are matched, so it also compares a synthetic set (needs pip install "
        "'geopriv[metrics]')",
    )
    r.add_argument("--json", action="store_true", help="print the statistics as one JSON object")
    r.add_argument(
        "--html",
        nargs="?",
        const="",
        metavar="PATH",
        help="also write the release report, one self-contained HTML file (guarantee, parameters, utility, "
        "adversary error, maps of counts per cell): private, for the data holder, not for publication "
        "(default PATH: RELEASED's name ending in .private-report.html)",
    )
    r.add_argument(
        "--bounds",
        type=float,
        nargs=4,
        metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
        help="public area for the report's adversary and maps, in the true file's CRS (with --html; "
        "default: the release's declared bounds)",
    )
    r.add_argument(
        "--population",
        metavar="RASTER",
        help="population raster for the report's adversary (prior and k-equivalent; with --html)",
    )
    r.add_argument(
        "--map-cell",
        type=float,
        metavar="METRES",
        help="grid step of the report's maps in ground metres, at least 100 (with --html; default: a round "
        "step giving about 60 cells across)",
    )
    r.add_argument("--overwrite", action="store_true", help="replace an existing --html report")
    r.set_defaults(func=_cmd_report)
