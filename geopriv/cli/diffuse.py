"""geopriv diffuse: one person's location told over a network, graded by network distance."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from pathlib import Path

from ..parsing import parse_epsilon_pair
from .common import (
    CLIError,
    budget_options,
    charge_note,
    check_crs,
    check_person,
    given_options,
    grid_arg,
    input_options,
    library_option,
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


def _epsilon_pair(text: str):
    """``D:EPSILON``, a network distance and the epsilon there, e.g. ``2:ln4/200`` (geopriv.parsing)."""
    try:
        return parse_epsilon_pair(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _epsilon_policy(args):
    """The epsilon-of-distance schedule the options describe (checked before any data is read)."""
    from ..exceptions import GeoprivError
    from ..network import ExponentialEpsilon, epsilon_of_distance

    if (args.epsilon_table is None) == (args.epsilon_exp is None):
        raise CLIError(
            "say how epsilon falls with network distance d: --epsilon-table D:EPSILON ... (e.g. "
            "--epsilon-table 1:ln4/50 4:ln4/2000), or --epsilon-exp A B for exp(B - A d), not both"
        )
    if args.epsilon_exp is not None:
        if args.kind is not None:
            raise CLIError("--epsilon-kind applies to --epsilon-table only")
        a, b = args.epsilon_exp
        try:
            return epsilon_of_distance(ExponentialEpsilon(a, b))
        except GeoprivError as exc:
            raise CLIError(f"--epsilon-exp A B: {exc}") from None
    pairs = sorted(args.epsilon_table)
    return epsilon_of_distance(([d for d, _ in pairs], [e for _, e in pairs]), **given_options(args, ("kind",)))


def _as_ids(values, labels, what: str):
    """``values`` (text or numbers) as ids of the people layer's kind (geopriv.people.people_ids), or an error."""
    import numpy as np

    from ..people import people_ids

    values = list(values)
    ids, bad = people_ids(values, labels)
    if len(bad):
        empty = [
            i
            for i in bad
            if values[i] is None
            or (isinstance(values[i], float) and math.isnan(values[i]))
            or str(values[i]).strip() == ""
        ]
        if empty:
            raise CLIError(
                f"{what}: {len(empty)} id(s) are empty (first at row {int(empty[0]) + 1}); every "
                "entry must name a person"
            )
        raise CLIError(
            f"{what}: {len(bad)} id(s) are not whole numbers (first at row {int(np.min(bad)) + 1}), "
            "but the people's ids are (row numbers, or --id-field)"
        )
    return ids


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
    import pandas as pd

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
    if columns[0] == columns[1]:
        raise CLIError("--edge-columns: give two different columns (the two ends of each edge)")
    edges = pd.DataFrame(
        {
            "from": _as_ids(table[columns[0]], labels, f"the edges table's column {columns[0]!r}"),
            "to": _as_ids(table[columns[1]], labels, f"the edges table's column {columns[1]!r}"),
        }
    )
    unknown = pd.Index(pd.unique(edges.to_numpy().ravel())).difference(labels)
    if len(unknown):
        shown = ", ".join(str(u) for u in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise CLIError(
            f"the edges table refers to {len(unknown)} id(s) that are not people of the input ({shown}); "
            "its ids must be the people's ids (--id-field, default row numbers from 0)"
        )
    if weight is not None:
        w = pd.to_numeric(table[weight], errors="coerce")
        if w.isna().any():
            raise CLIError(f"--weight {weight!r}: {int(w.isna().sum())} value(s) of the edges table are not numbers")
        edges["weight"] = w.to_numpy(dtype=float)
    return edges


def _read_lines(args, crs):
    """The --network line layer in the people's CRS; single-part MultiLineStrings become LineStrings."""
    import shapely

    lines = read_points(args.network, args.network_layer, what="network", flag=None, layer_flag="--network-layer")
    if lines.crs != crs:
        lines = lines.to_crs(crs)
    g = lines.geometry.values
    single = (shapely.get_type_id(g) == 5) & (shapely.get_num_geometries(g) == 1)
    if single.any():
        lines = lines.copy()
        lines.loc[single, lines.geometry.name] = shapely.get_geometry(g[single], 0)
    return lines


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


def _cmd_diffuse(args) -> int:
    import geopriv

    from .. import io

    _check_diffuse_args(args)
    schedule = _epsilon_policy(args)
    crs = check_crs(args.crs)
    io.check_input(args.input)
    graph_file = args.network if args.network is not None else args.edges
    io.check_input(graph_file, "network" if args.network is not None else "edges")
    if args.path is not None:
        io.check_input(args.path, "path")
    inputs = [args.input, graph_file, args.path]
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
    open_budget_store(
        args,
        None
        if args.id_field is not None
        else "--budget-store charges the person --source is: name the column of stable person ids with "
        "--person COLUMN, or give the people's ids with --id-field COLUMN (the default row numbers are "
        "not people)",
    )

    people, id_kind = _people_ids(read_points(args.input, args.layer, crs, xy=args.xy), args.id_field)
    if args.person is not None and args.person == args.id_field:
        args.person = None  # the ids are the index now: the library's default (the source's id)
    check_person(people, args)
    try:
        source = _as_ids([args.source], people.index, "--source")[0]
    except CLIError:
        source = None
    if source is None or source not in people.index:
        raise CLIError(f"--source {args.source} is not a person of the input (the ids are {id_kind})")
    if args.network is not None:
        graph = _read_lines(args, people.crs)
    else:
        graph = _read_edges(args.edges, args.network_layer, args.edge_columns, args.weight, people.index)
    kwargs = given_options(args, _DIFFUSE_OPTIONS + ("budget_store", "person"))
    if old is not None:
        kwargs["path"] = old
    if args.weight is not None:
        kwargs["weight"] = args.weight if args.network is not None else "weight"
    with warnings.catch_warnings(record=True) as caught:  # shown after the release: bad input stays one line
        result, new_path = geopriv.diffuse_locations(people, schedule, source=source, graph=graph, **kwargs)
    rec = result.attrs["geopriv"]
    table = result.reset_index(drop=False)
    table = table.rename(columns={table.columns[0]: "recipient"})
    with io.Staging() as stage:  # the answers and the path, or neither
        if args.value is None:
            stage.vector(table, io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs), rec)
        else:
            stage.file(dest, lambda tmp: table.to_csv(tmp, index=False), overwrite=args.overwrite)
            stage.file(
                io.sidecar_path(dest),
                lambda tmp: tmp.write_text(json.dumps(rec, indent=2, default=str) + "\n"),
                overwrite=args.overwrite,
            )
        if save_dest is not None:
            stage.file(save_dest, lambda tmp: new_path.save(tmp), overwrite=args.overwrite)
        stage.commit()
    if save_dest is not None:
        os.chmod(save_dest, 0o600)  # owner-only even where it replaced a file with other permissions
    for w in caught:  # e.g. the people not connected to the source, named
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)

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
    if save_dest is not None:
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


def diffuse_arguments(f) -> None:
    import geopriv

    from ..diffuse import DISTANCES
    from ..network import epsilon_of_distance

    dl = geopriv.diffuse_locations
    f.add_argument(
        "input",
        help="the people: one point per person (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)",
    )
    f.add_argument(
        "output",
        help="the answers, one point per recipient with its id (recipient), network_distance, "
        "epsilon_per_m and effective_epsilon_per_m; format from the extension: .gpkg .geojson "
        ".json .fgb .shp .csv .parquet (with --value: a .csv table)",
    )
    f.add_argument(
        "--source", required=True, metavar="ID", help="the id of the person whose location (or --value) is released"
    )
    f.add_argument(
        "--id-field",
        metavar="COLUMN",
        help="column of INPUT holding the people's ids (unique), used by --source and --edges and written "
        "as 'recipient' (default: row numbers 0, 1, 2, ... in the input's order)",
    )
    g = f.add_argument_group("the public network (give --network or --edges)")
    g.add_argument(
        "--network",
        metavar="LINES",
        help="line layer: each line joins the two people whose points are at its ends (reprojected to "
        "INPUT's CRS; single-part MultiLineStrings are read as lines)",
    )
    library_option(
        g,
        dl,
        "tolerance",
        type=float,
        metavar="DISTANCE",
        help="largest distance, in INPUT's CRS units, between a line end and its person's point (line networks only)",
    )
    g.add_argument(
        "--edges",
        metavar="TABLE",
        help="table of pairs of people ids, one edge per row: a CSV with a header row, or any table GDAL "
        "reads (GeoPackage attribute table, .dbf, ...)",
    )
    g.add_argument(
        "--edge-columns",
        nargs=2,
        metavar=("FROM", "TO"),
        help="the two id columns of --edges (default: its first two columns)",
    )
    g.add_argument("--network-layer", metavar="LAYER", help="layer of the --network or --edges file, if it has several")
    library_option(
        g,
        dl,
        "weight",
        metavar="COLUMN",
        help="column of --network or --edges with edge weights (conductances > 0; used by resistance distances "
        "only) (default: every edge 1)",
    )
    library_option(
        g,
        dl,
        "distance",
        choices=DISTANCES,
        help="network distance d: hops (edges on a shortest path) or resistance (effective resistance, which "
        "counts every path between two people)",
    )
    library_option(
        g,
        dl,
        "on_unreachable",
        choices=("warn", "raise", "ignore"),
        help="people not connected to the source get no answer: name them in a warning, stop, or stay quiet",
    )
    g = f.add_argument_group("privacy as a function of the network distance d (give --epsilon-table or --epsilon-exp)")
    g.add_argument(
        "--epsilon-table",
        nargs="+",
        type=_epsilon_pair,
        metavar="D:EPSILON",
        help="epsilon at network distances, per ground metre (per unit of --value), e.g. 1:ln4/50 "
        "4:ln4/2000 (ln 4 within 50 m at 1 hop): "
        "between the distances as --epsilon-kind says, the first epsilon below the first distance, the "
        "last beyond the last; epsilon must not increase with distance",
    )
    library_option(
        g,
        epsilon_of_distance,
        "kind",
        "--epsilon-kind",
        choices=("linear", "step"),
        help="--epsilon-table between its distances: linear interpolation, or step (each epsilon from its distance "
        "up to the next)",
    )
    g.add_argument(
        "--epsilon-exp",
        nargs=2,
        type=number_arg,
        metavar=("A", "B"),
        help="epsilon(d) = exp(B - A d) per ground metre (per unit of --value), Koufogiannis and Pappas' "
        "form (their example: 3.3 4, for a bit); A >= 0; B takes ln: --epsilon-exp 0.5 ln0.03 is "
        "0.03 * exp(-0.5 d) per ground metre",
    )
    g = f.add_argument_group("release an attribute's value instead of the location")
    library_option(
        g,
        dl,
        "value",
        metavar="COLUMN",
        help="release this numeric column's value at the source (e.g. an infection bit 0/1): epsilon is then per "
        "unit of the value, and OUTPUT a .csv table (recipient, network_distance, epsilon, response)",
    )
    library_option(
        g,
        dl,
        "support",
        nargs="+",
        type=number_arg,
        metavar="V",
        help="with --value: round each answer to the nearest of these values, e.g. --support 0 1 for a bit "
        "(post-processing: the same guarantee)",
    )
    library_option(
        g,
        dl,
        "value_range",
        nargs=2,
        type=number_arg,
        metavar=("LO", "HI"),
        help="with --value: the public range of the value, chosen without looking at the data; answers are "
        "clamped to the lattice in it (default: a wide range around 0)",
    )
    library_option(
        g,
        dl,
        "continuous",
        action="store_true",
        help="with --value and no --support: publish raw float answers instead of snapping them to the public "
        "lattice; their low-order bits can give the value away (Mironov 2012), recorded as unbounded",
    )
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
    g = f.add_argument_group("the secret noise path")
    g.add_argument(
        "--save-path",
        metavar="FILE.npz",
        help="SAVES THE SECRET NOISE PATH: anyone holding this file removes the noise from every answer "
        "and recovers the true location. Keep it private (written readable by you only), only to "
        "answer more recipients of this source later with --path (default: not saved)",
    )
    g.add_argument(
        "--path",
        metavar="FILE.npz",
        help="answer from a secret path saved earlier with --save-path: the answers agree with the earlier "
        "ones and only an epsilon above the earlier largest is spent again (save the possibly extended "
        "path back with --save-path). The path is bound to its source, to the location or --value "
        "column, to the true value and to the CRS, --bounds and --grid: any other use is refused. "
        "Without it every run draws a fresh path: a new release that spends its epsilon again",
    )
    g = f.add_argument_group("public frame and output lattice (locations)")
    library_option(
        g,
        dl,
        "grid",
        type=grid_arg,
        metavar="METRES|auto",
        help="step of the public lattice answers are snapped to, in ground metres (in the value's units for a value "
        "release) ('auto': 1, "
        "finer for a large epsilon)",
    )
    library_option(
        g,
        dl,
        "bounds",
        type=float,
        nargs=4,
        metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
        help="public study area in the input's CRS, chosen without looking at the points (needed for "
        "longitude/latitude and Web Mercator; default: the CRS's area of use)",
    )
    library_option(
        g,
        dl,
        "max_distortion",
        type=float,
        help="largest scale variation of a projected CRS over the public area for which it is used as is",
    )
    library_option(
        g,
        dl,
        "rng",
        "--seed",
        type=int,
        metavar="SEED",
        show_default=False,
        help="seed (rng=) for reproducible tests and demos only; recorded as seeded (default: OS entropy)",
    )
    input_options(f)
    f.set_defaults(func=_cmd_diffuse)
