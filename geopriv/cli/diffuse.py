"""geopriv diffuse: one person's location told over a network, graded by network distance.

What the command reads from its options (the epsilon policy, the edges table, the line network,
the source's id) is read by :mod:`geopriv.adapters`, as QGIS reads it; here are the command's
own checks, its words for the refusals, its files and its report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..adapters import Wording, edge_list, epsilon_policy, line_network, person_id
from ..parsing import parse_epsilon_pair
from .common import (
    MAX_DISTORTION,
    SEED,
    Arg,
    ArgGroup,
    CLIError,
    add_args,
    budget_options,
    charge_note,
    check_crs,
    check_person,
    given_options,
    grid_arg,
    input_options,
    number_arg,
    open_budget_store,
    read_points,
    rng_note,
)

# ---------------------------------------------------------------------------- diffuse
_DIFFUSE_OPTIONS = (
    "distance",
    "on_unreachable",
    "tolerance",
    "value",
    "support",
    "value_range",
    "continuous",
    "grid",
    "bounds",
    "max_distortion",
    "rng",
)
_LOCATION_ONLY = (("--bounds", "bounds"), ("--max-distortion", "max_distortion"))

#: the command line's words for what geopriv.adapters refuses (the options it names)
_WORDING = Wording(
    not_a_person="--source {value} is not a person of the input (the ids are {described})",
    bad_ids="{what}: {n} id(s) are not whole numbers (first at row {row}), but the people's ids are (row "
    "numbers, or --id-field)",
    empty_ids="{what}: {n} id(s) are empty (first at row {row}); every entry must name a person",
    unknown_ids="the edges table refers to {n} id(s) that are not people of the input ({shown}); its ids must be "
    "the people's ids (--id-field, default row numbers from 0)",
    same_columns="--edge-columns: give two different columns (the two ends of each edge)",
    bad_weights="--weight {weight!r}: {n} value(s) of the edges table are not numbers",
)


def _epsilon_pair(text: str):
    """``D:EPSILON``, a network distance and the epsilon there, e.g. ``2:ln4/200`` (geopriv.parsing)."""
    try:
        return parse_epsilon_pair(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _epsilon_policy(args):
    """The epsilon-of-distance schedule the options describe (geopriv.adapters; checked before any data is read)."""
    from ..exceptions import GeoprivError

    exponential_only = args.epsilon_table is None and args.epsilon_exp is not None
    if exponential_only and args.kind is not None:
        raise CLIError("--epsilon-kind applies to --epsilon-table only")
    try:
        return epsilon_policy(args.epsilon_table, args.epsilon_exp, kind=args.kind)
    except GeoprivError as exc:
        if not exponential_only:
            raise
        raise CLIError(f"--epsilon-exp A B: {exc}") from None


def _people_ids(gdf, field):
    """The people layer indexed by its ids (geopriv.people.index_people), and how the ids are described."""
    from ..people import index_people

    if field is None:
        return index_people(gdf, None), "row numbers 0, 1, 2, ... in the input's order"
    if field not in gdf.columns or field == gdf.geometry.name:
        shown = ", ".join(repr(str(c)) for c in gdf.columns if c != gdf.geometry.name) or "none"
        raise CLIError(f"the input has no column {field!r} (--id-field); its columns are: {shown}")
    return index_people(gdf, field, what=f"--id-field {field!r}"), f"values of --id-field {field!r}"


def read_table(path, layer, layer_flag: str, choose: str, *, skipinitialspace: bool = False):
    """A table without geometry: CSV (every value as text), parquet, or a GDAL table (one layer, ``layer_flag``)."""
    import pandas as pd

    p = Path(path)
    if p.suffix.lower() == ".csv":
        if layer is not None:
            raise CLIError(f"{layer_flag}: a CSV file has no layers")
        return pd.read_csv(p, dtype=str, keep_default_na=False, skipinitialspace=skipinitialspace)
    if p.suffix.lower() == ".parquet":
        return pd.read_parquet(p)
    import pyogrio

    if layer is None and len(pyogrio.list_layers(p)) > 1:
        raise CLIError(f"{path} has several layers; choose {choose}")
    return pyogrio.read_dataframe(p, layer=layer, read_geometry=False)


def _read_edges(path, layer, columns, weight, labels):
    """The --edges table as a two-column DataFrame of people ids (plus the weight column, as numbers)."""
    table = read_table(path, layer, "--network-layer", "the edges table with --network-layer", skipinitialspace=True)
    names = [str(c) for c in table.columns]
    table.columns = names
    if columns is None:
        if len(names) < 2:
            raise CLIError(f"the edges table {path} needs two columns of ids (one edge per row); it has {len(names)}")
        columns = names[:2]
    for c in list(columns) + ([weight] if weight is not None else []):
        if c not in names:
            raise CLIError(
                f"the edges table {path} has no column {c!r}; its columns are: " + ", ".join(repr(n) for n in names)
            )
    return edge_list(
        table, columns, labels, weight=weight, what=lambda c: f"the edges table's column {c!r}", wording=_WORDING
    )


def _read_lines(args, crs):
    """The --network line layer in the people's CRS; single-part MultiLineStrings become LineStrings."""
    lines = read_points(args.network, args.network_layer, what="network", flag=None, layer_flag="--network-layer")
    return line_network(lines, crs)


def _check_diffuse_args(args) -> None:
    if (args.network is None) == (args.edges is None):
        raise CLIError(
            "give the public network: --network LINES (a line layer joining the people's points) or "
            "--edges TABLE (pairs of people ids), one of them"
        )
    if args.edges is not None and args.tolerance is not None:
        raise CLIError("--tolerance applies to --network (line ends matched to points), not to --edges")
    if args.network is not None and args.edge_columns is not None:
        raise CLIError("--edge-columns applies to --edges, not to --network")
    if args.value is None:
        if args.support is not None:
            raise CLIError("--support rounds released values: give --value COLUMN too (locations are not rounded)")
        if args.value_range is not None or args.continuous:
            raise CLIError(
                "--value-range and --continuous apply to --value releases (locations are always snapped to "
                "the --grid lattice)"
            )
    else:
        given = [flag for flag, name in _LOCATION_ONLY if getattr(args, name) is not None]
        if given:
            raise CLIError(f"{'/'.join(given)} apply to location releases; --value releases a number")
        if args.out_layer is not None:
            raise CLIError("--out-layer: with --value the output is a CSV table, which has no layers")


@dataclass(frozen=True)
class _Files:
    """The files of one run, checked before any data is read: the inputs, and where the outputs go."""

    inputs: list
    dest: Path | None  # the --value release's CSV table (None: a vector output)
    save_dest: Path | None  # --save-path
    old: object  # the --path loaded (None: a fresh path)


def _check_files(args) -> _Files:
    """Every input exists, no output replaces an input or (without --overwrite) a file; --path is verified."""
    import geopriv

    from .. import io

    io.check_input(args.input)
    graph_file = args.network if args.network is not None else args.edges
    io.check_input(graph_file, "network" if args.network is not None else "edges")
    if args.path is not None:
        io.check_input(args.path, "path")
    inputs = [args.input, graph_file, args.path]
    dest = None
    if args.value is None:
        io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    else:
        dest = io.check_file_output(
            args.output, suffixes=(".csv",), what="with --value, the", overwrite=args.overwrite, protect=inputs
        )
        io.refuse_existing([dest, io.sidecar_path(dest)], args.output, args.overwrite)  # names the one that exists
    save_dest = None
    if args.save_path is not None:  # the earlier path may be replaced by its extension (with --overwrite)
        save_dest = io.check_file_output(
            args.save_path,
            suffixes=(".npz",),
            what="path",
            overwrite=args.overwrite,
            protect=[args.input, graph_file, args.output],
        )
    old = geopriv.DiffusionPath.load(args.path) if args.path is not None else None  # verified before any work
    return _Files(inputs, dest, save_dest, old)


def _read_inputs(args, crs):
    """The people indexed by id, the source's id and the network (``graph=``), as the options say."""
    people, id_kind = _people_ids(read_points(args.input, args.layer, crs, xy=args.xy), args.id_field)
    if args.person is not None and args.person == args.id_field:
        args.person = None  # the ids are the index now: the library's default (the source's id)
    check_person(people, args)
    source = person_id(args.source, people.index, described=id_kind, wording=_WORDING)
    if args.network is not None:
        graph = _read_lines(args, people.crs)
    else:
        graph = _read_edges(args.edges, args.network_layer, args.edge_columns, args.weight, people.index)
    return people, source, graph


def _write(args, files: _Files, result, rec, new_path) -> None:
    """The answers and the saved path, or neither (staged, then committed together)."""
    from .. import io

    table = result.reset_index(drop=False)
    table = table.rename(columns={table.columns[0]: "recipient"})
    with io.Staging() as stage:
        if args.value is None:
            dest = io.check_output(args.output, args.out_layer, args.overwrite, protect=files.inputs)
            stage.vector(table, dest, rec)
        else:
            stage.file(files.dest, lambda tmp: table.to_csv(tmp, index=False), overwrite=args.overwrite)
            stage.file(
                io.sidecar_path(files.dest),
                lambda tmp: tmp.write_text(json.dumps(rec, indent=2, default=str) + "\n"),
                overwrite=args.overwrite,
            )
        if files.save_dest is not None:
            stage.file(files.save_dest, lambda tmp: new_path.save(tmp), overwrite=args.overwrite)
        stage.commit()
    if files.save_dest is not None:
        os.chmod(files.save_dest, 0o600)  # owner-only even where it replaced a file with other permissions


def _report(args, files: _Files, rec, new_path) -> None:
    """What was released, to whom, at what epsilon and cost; and the warnings about the secret path."""
    old = files.old
    unit = " per metre" if args.value is None else " per unit of the value"
    suffix = "_per_m" if args.value is None else ""
    what = f"person {args.source}'s " + ("location" if args.value is None else repr(args.value))
    lo, hi = rec[f"epsilon_min{suffix}"], rec[f"coalition_epsilon{suffix}"]
    unreachable = rec.get("unreachable", 0)
    spend = (
        f"answered from the earlier path {args.path}: consistent with its earlier answers, it spends only what "
        f"exceeds its earlier largest epsilon"
        if old is not None
        else f"a fresh path: a new release that spends {hi:.6g}{unit} for person {args.source}"
    )
    print(
        f"released {what} to {rec['recipients']} recipient(s) in {args.output}"
        + (f" ({unreachable} not connected to it: no answer)" if unreachable else "")
        + f": epsilon {lo:.6g} .. {hi:.6g}{unit} by {rec['distance']} distance; coalition epsilon {hi:.6g}{unit} "
        f"(any group of recipients learns no more than its closest member); {spend}{rng_note(rec)}",
        file=sys.stderr,
    )
    charge_note(
        rec,
        args,
        f"the person of --source {args.source} the path's largest epsilon (for a --path this "
        "store charged before, only its increase)",
    )
    if files.save_dest is not None:
        print(
            f"geopriv: warning: {args.save_path} holds the SECRET noise path: anyone who has it removes the noise "
            f"from every answer and recovers the true {'location' if args.value is None else 'value'}. Keep it "
            "private (it is readable by you only), never publish or share it; use it only with --path to answer "
            f"more recipients of person {args.source}",
            file=sys.stderr,
        )
    elif old is not None and (new_path.eps_min < old.eps_min or new_path.eps_max > old.eps_max):
        print(
            f"geopriv: warning: the path of {args.path} was extended to answer these recipients, and the extension "
            "was not saved: later answers from that file will not agree with these. Save it with --save-path "
            "(e.g. the same file, with --overwrite)",
            file=sys.stderr,
        )


def _cmd_diffuse(args) -> int:
    import geopriv

    _check_diffuse_args(args)
    schedule = _epsilon_policy(args)
    crs = check_crs(args.crs)
    files = _check_files(args)
    open_budget_store(
        args,
        None
        if args.id_field is not None
        else "--budget-store charges the person --source is: name the column of stable person ids with "
        "--person COLUMN, or give the people's ids with --id-field COLUMN (the default row numbers are "
        "not people)",
    )

    people, source, graph = _read_inputs(args, crs)
    kwargs = given_options(args, _DIFFUSE_OPTIONS + ("budget_store", "person"))
    if files.old is not None:
        kwargs["path"] = files.old
    if args.weight is not None:
        kwargs["weight"] = args.weight if args.network is not None else "weight"
    with warnings.catch_warnings(record=True) as caught:  # shown after the release: bad input stays one line
        result, new_path = geopriv.diffuse_locations(people, schedule, source=source, graph=graph, **kwargs)
    rec = result.attrs["geopriv"]
    _write(args, files, result, rec, new_path)
    for w in caught:  # e.g. the people not connected to the source, named
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    _report(args, files, rec, new_path)
    return 0


EPILOG_DIFFUSE = """examples:
  # person 17's home, told to everyone connected to her by a chain of friendships: ln 4 within 50 m for
  # her friends (1 hop), falling linearly to ln 4 within 2 km at 4 hops and beyond; one secret path, so
  # no group of recipients learns more than its closest member
  geopriv diffuse people.gpkg answers.gpkg --source 17 --edges friends.csv --epsilon-table 1:ln4/50 4:ln4/2000

  # ids from a column, a network of lines between the people's points (ends within 1 m), resistance distance,
  # and the paper's form exp(B - A d): here 0.03 * exp(-0.5 d) per metre
  geopriv diffuse people.gpkg answers.gpkg --id-field person --source p17 --network links.gpkg --tolerance 1 \\
      --distance resistance --epsilon-exp 0.5 ln0.03 --bounds 527000 179000 533000 184000

  # an infection bit (column 'infected', 0/1) with the paper's eps(d) = exp(4 - 3.3 d), answers rounded to 0/1
  geopriv diffuse people.gpkg answers.csv --source 17 --edges friends.csv --distance resistance \\
      --value infected --support 0 1 --epsilon-exp 3.3 4

  # keep the SECRET path, then answer people who joined later from it: their answers agree with the earlier
  # ones, and only an epsilon above the earlier largest one is spent again (save the extended path back)
  geopriv diffuse people.gpkg answers.gpkg --source 17 --edges friends.csv --epsilon-table 1:ln4/50 4:ln4/2000 \\
      --save-path private/path17.npz
  geopriv diffuse people2.gpkg answers2.gpkg --source 17 --edges friends2.csv --epsilon-table 1:ln4/50 4:ln4/2000 \\
      --path private/path17.npz --save-path private/path17.npz --overwrite
"""


def _distances():
    """The network distances the library knows (read when the options are added: it imports the library)."""
    from ..diffuse import DISTANCES

    return DISTANCES


_DIFFUSE_HEAD = (
    ArgGroup(
        None,
        (
            Arg(
                ("input",),
                "the people: one point per person (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, "
                ".parquet)",
            ),
            Arg(
                ("output",),
                "the answers, one point per recipient with its id (recipient), network_distance, "
                "epsilon_per_m and effective_epsilon_per_m; format from the extension: .gpkg .geojson "
                ".json .fgb .shp .csv .parquet (with --value: a .csv table)",
            ),
            Arg(
                ("--source",),
                "the id of the person whose location (or --value) is released",
                required=True,
                metavar="ID",
            ),
            Arg(
                ("--id-field",),
                "column of INPUT holding the people's ids (unique), used by --source and --edges and written "
                "as 'recipient' (default: row numbers 0, 1, 2, ... in the input's order)",
                metavar="COLUMN",
            ),
        ),
    ),
    ArgGroup(
        "the public network (give --network or --edges)",
        (
            Arg(
                ("--network",),
                "line layer: each line joins the two people whose points are at its ends (reprojected to "
                "INPUT's CRS; single-part MultiLineStrings are read as lines)",
                metavar="LINES",
            ),
            Arg(
                ("--tolerance",),
                "largest distance, in INPUT's CRS units, between a line end and its person's point (line networks "
                "only)",
                param="tolerance",
                type=float,
                metavar="DISTANCE",
            ),
            Arg(
                ("--edges",),
                "table of pairs of people ids, one edge per row: a CSV with a header row, or any table GDAL "
                "reads (GeoPackage attribute table, .dbf, ...)",
                metavar="TABLE",
            ),
            Arg(
                ("--edge-columns",),
                "the two id columns of --edges (default: its first two columns)",
                nargs=2,
                metavar=("FROM", "TO"),
            ),
            Arg(("--network-layer",), "layer of the --network or --edges file, if it has several", metavar="LAYER"),
            Arg(
                ("--weight",),
                "column of --network or --edges with edge weights (conductances > 0; used by resistance distances "
                "only) (default: every edge 1)",
                param="weight",
                metavar="COLUMN",
            ),
            Arg(
                ("--distance",),
                "network distance d: hops (edges on a shortest path) or resistance (effective resistance, which "
                "counts every path between two people)",
                param="distance",
                choices=_distances,
            ),
            Arg(
                ("--on-unreachable",),
                "people not connected to the source get no answer: name them in a warning, stop, or stay quiet",
                param="on_unreachable",
                choices=("warn", "raise", "ignore"),
            ),
        ),
    ),
    ArgGroup(
        "privacy as a function of the network distance d (give --epsilon-table or --epsilon-exp)",
        (
            Arg(
                ("--epsilon-table",),
                "epsilon at network distances, per ground metre (per unit of --value), e.g. 1:ln4/50 "
                "4:ln4/2000 (ln 4 within 50 m at 1 hop): "
                "between the distances as --epsilon-kind says, the first epsilon below the first distance, the "
                "last beyond the last; epsilon must not increase with distance",
                nargs="+",
                type=_epsilon_pair,
                metavar="D:EPSILON",
            ),
            Arg(
                ("--epsilon-kind",),
                "--epsilon-table between its distances: linear interpolation, or step (each epsilon from its "
                "distance up to the next)",
                param="kind",
                of="epsilon_of_distance",
                choices=("linear", "step"),
            ),
            Arg(
                ("--epsilon-exp",),
                "epsilon(d) = exp(B - A d) per ground metre (per unit of --value), Koufogiannis and Pappas' "
                "form (their example: 3.3 4, for a bit); A >= 0; B takes ln: --epsilon-exp 0.5 ln0.03 is "
                "0.03 * exp(-0.5 d) per ground metre",
                nargs=2,
                type=number_arg,
                metavar=("A", "B"),
            ),
        ),
    ),
    ArgGroup(
        "release an attribute's value instead of the location",
        (
            Arg(
                ("--value",),
                "release this numeric column's value at the source (e.g. an infection bit 0/1): epsilon is then "
                "per unit of the value, and OUTPUT a .csv table (recipient, network_distance, epsilon, response)",
                param="value",
                metavar="COLUMN",
            ),
            Arg(
                ("--support",),
                "with --value: round each answer to the nearest of these values, e.g. --support 0 1 for a bit "
                "(post-processing: the same guarantee)",
                param="support",
                nargs="+",
                type=number_arg,
                metavar="V",
            ),
            Arg(
                ("--value-range",),
                "with --value: the public range of the value, chosen without looking at the data; answers are "
                "clamped to the lattice in it (default: a wide range around 0)",
                param="value_range",
                nargs=2,
                type=number_arg,
                metavar=("LO", "HI"),
            ),
            Arg(
                ("--continuous",),
                "with --value and no --support: publish raw float answers instead of snapping them to the public "
                "lattice; their low-order bits can give the value away (Mironov 2012), recorded as unbounded",
                param="continuous",
                action="store_true",
            ),
        ),
    ),
)

_DIFFUSE_TAIL = (
    ArgGroup(
        "the secret noise path",
        (
            Arg(
                ("--save-path",),
                "SAVES THE SECRET NOISE PATH: anyone holding this file removes the noise from every answer "
                "and recovers the true location. Keep it private (written readable by you only), only to "
                "answer more recipients of this source later with --path (default: not saved)",
                metavar="FILE.npz",
            ),
            Arg(
                ("--path",),
                "answer from a secret path saved earlier with --save-path: the answers agree with the earlier "
                "ones and only an epsilon above the earlier largest is spent again (save the possibly extended "
                "path back with --save-path). The path is bound to its source, to the location or --value "
                "column, to the true value and to the CRS, --bounds and --grid: any other use is refused. "
                "Without it every run draws a fresh path: a new release that spends its epsilon again",
                metavar="FILE.npz",
            ),
        ),
    ),
    ArgGroup(
        "public frame and output lattice (locations)",
        (
            Arg(
                ("--grid",),
                "step of the public lattice answers are snapped to, in ground metres (in the value's units for a "
                "value release) ('auto': 1, finer for a large epsilon)",
                param="grid",
                type=grid_arg,
                metavar="METRES|auto",
            ),
            Arg(
                ("--bounds",),
                "public study area in the input's CRS, chosen without looking at the points (needed for "
                "longitude/latitude and Web Mercator; default: the CRS's area of use)",
                param="bounds",
                type=float,
                nargs=4,
                metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
            ),
            MAX_DISTORTION,
            SEED,
        ),
    ),
)


def diffuse_arguments(f) -> None:
    """The options of ``geopriv diffuse``: the tables above, the budget options between them, the files last."""
    import geopriv

    dl = geopriv.diffuse_locations
    add_args(f, _DIFFUSE_HEAD, dl)
    budget_options(
        f,
        dl,
        "the person --source is the path's largest epsilon (unit epsilon/m for a location, "
        "'epsilon per unit of COLUMN' with --value; a --path this store charged before costs only the "
        "increase)",
        "column of stable person ids whose lifetime budget --budget-store charges: the --source row's id "
        "is charged (default: the --id-field id; needed without --id-field, as row numbers are not "
        "people)",
    )
    add_args(f, _DIFFUSE_TAIL, dl)
    input_options(f)
    f.set_defaults(func=_cmd_diffuse)
