"""Command line: one subcommand per capability of the library.

::

    geopriv perturb homes.gpkg homes_private.gpkg --level ln4 --radius 200
    geopriv privacy-map density.tif privacy_map.tif --epsilon-range ln4/3000 ln4/600
    geopriv build-mechanism density.tif tokyo.npz --epsilon-range ln4/3000 ln4/600
    geopriv perturb homes.gpkg homes_private.gpkg --mechanism tokyo.npz
    geopriv synthesize homes.gpkg synthetic.gpkg --epsilon 1 --bounds 440000 4400000 470000 4430000
    geopriv diffuse people.gpkg answers.gpkg --source 17 --edges friends.csv --epsilon-table 1:ln4/50 4:ln4/2000
    geopriv sanitize-traces queries.gpkg released.gpkg --traj-id user --time t --level ln10 --radius 100 \\
        --rate 0.033 --ledger ledger.csv
    geopriv sample-queries fixes.gpkg queries.gpkg --traj-id trajectory_id --time t -p 0.3
    geopriv aggregate homes.gpkg counts.gpkg --epsilon 1 --cells 250 --bounds 440000 4400000 470000 4430000
    geopriv heatmap homes.gpkg heatmap.tif --epsilon 1 --resolution 250 --region city.gpkg
    geopriv flows tracks.gpkg od.gpkg --epsilon 1 --regions districts.gpkg --traj-id trip --time t --user person
    geopriv report homes.gpkg homes_private.gpkg
    geopriv demo

Options carry the library's names (``--max-distortion`` is ``max_distortion=``; ``--seed`` is
``rng=``) and, when not given, are not passed at all, so the library's own defaults apply; the
defaults shown by ``--help`` are read from the library's signatures.

Every command checks its arguments, its input files and its outputs (format from the
extension, existing files, outputs that are inputs: :mod:`geopriv.io`) before it reads any data
or draws any noise, and writes its outputs atomically: a failed run leaves every file as it
was.  Bad input gives one line ``geopriv: error: ...`` on stderr and exit code 2, never a
traceback.  The line is :func:`geopriv.exceptions.user_message`, shared with the QGIS plugin:
geopriv's own errors (:class:`geopriv.GeoprivError` subclasses) are shown, and they name rows,
never coordinates; errors from other libraries (pandas, pyproj, numpy, GDAL) and bare Python
errors, whose text may quote values from the data, are reported by type with a hint.
``GEOPRIV_TRACEBACK=1`` shows the full error instead (it may show data values).
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import os
import sys
import textwrap
import warnings
from pathlib import Path

from .exceptions import UsageError, user_message
from .parsing import parse_epsilon_pair, parse_number

__all__ = ["main", "build_parser"]

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
_PACKAGE_DIR = Path(__file__).resolve().parent


class CLIError(UsageError):
    """A user-facing error about the command line's options: printed as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``geopriv: error: ...``, exit 2) and examples kept as written.

    ``arguments``: a function that adds a command's options, called the first time this parser
    parses or shows its help (see :func:`build_parser`).
    """

    def __init__(self, *args, arguments=None, **kwargs):
        self._arguments = arguments
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        if kwargs.get("description"):  # wrapped here: the raw formatter keeps the examples' layout
            kwargs["description"] = textwrap.fill(kwargs["description"], 88)
        super().__init__(*args, **kwargs)

    def _add_arguments(self) -> None:
        add, self._arguments = self._arguments, None
        if add is not None:
            add(self)

    def parse_known_args(self, args=None, namespace=None):
        self._add_arguments()
        return super().parse_known_args(args, namespace)

    def format_usage(self):
        self._add_arguments()
        return super().format_usage()

    def format_help(self):
        self._add_arguments()
        return super().format_help()

    def error(self, message):  # noqa: D102 - argparse API
        self.exit(EXIT_BAD_INPUT, f"geopriv: error: {message} (see: {self.prog} --help)\n")


# ---------------------------------------------------------------------------- argument types
def _number(text: str) -> float:
    """A number, also written ``ln4``, ``ln(4)``, ``log(4)`` and divided: ``ln4/200`` (geopriv.parsing)."""
    try:
        return parse_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _grid(text: str):
    """``auto`` or a number (--grid, --margin)."""
    return "auto" if str(text).strip().lower() == "auto" else _number(text)


class _NoneGiven:
    """``none`` given on the command line: pass None to the library (not the same as not given)."""

    def __repr__(self):
        return "none"


NONE = _NoneGiven()


def _optional_number(text: str):
    return NONE if str(text).strip().lower() == "none" else _number(text)


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


def _depth(text: str):
    """``auto`` or a whole number of tree levels."""
    t = str(text).strip().lower()
    if t == "auto":
        return "auto"
    try:
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a depth: {text!r} (give 'auto' or a whole number of levels, e.g. 8)") from None


def _max_cells(text: str):
    """A positive whole number of cells (``1e9`` works), or ``none`` (--max-cells)."""
    if str(text).strip().lower() == "none":
        return NONE
    value = _number(text)
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise argparse.ArgumentTypeError(f"not a number of cells: {text!r} (give e.g. 200000000, 2e8 or none)")
    return int(value)


def _nodata_epsilon(text: str):
    return "nearest" if str(text).strip().lower() == "nearest" else _number(text)


def _column(text: str):
    """A column name; the empty string means None (no column)."""
    return None if text == "" else text


_UNSET = object()


def _default(func, name):
    """The library's default of ``name`` in ``func``'s signature (never a second copy here)."""
    param = inspect.signature(func).parameters[name]
    return _UNSET if param.default is inspect.Parameter.empty else param.default


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if value is None or (isinstance(value, (tuple, list)) and not value):
        return "none"
    return str(value)


def _lib(group, func, name, *flags, help, show_default=True, **kwargs):
    """An option for ``func``'s parameter ``name``: not passed unless given; help shows the library default."""
    default = _default(func, name)
    if show_default and default not in (_UNSET, None) and kwargs.get("action") not in ("store_true",):
        help = f"{help} (default: {_show(default)})"
    flags = flags or ("--" + name.replace("_", "-"),)
    kwargs.setdefault("default", None)
    group.add_argument(*flags, dest=name, help=help, **kwargs)


def _given(args, names) -> dict:
    """The options among ``names`` the user gave (None/False: not given, so the library default applies)."""
    out = {}
    for name in names:
        value = getattr(args, name, None)
        if value is None or value is False:
            continue
        out[name] = None if value is NONE else tuple(value) if isinstance(value, list) else value
    return out


# ---------------------------------------------------------------------------- shared checks
def _check_privacy(args) -> None:
    """--epsilon or --level with --radius: refused before any work when contradictory or incomplete."""
    if args.epsilon is not None and (args.level is not None or args.radius is not None):
        raise CLIError("give either --epsilon, or --level with --radius, not both")
    if args.epsilon is None:
        if args.level is not None and args.radius is None:
            raise CLIError("--level needs --radius (metres): e.g. --level ln4 --radius 200")
        if args.radius is not None and args.level is None:
            raise CLIError("--radius needs --level: e.g. --level ln4 --radius 200")
        if args.level is None:
            raise CLIError("say how much privacy: --epsilon E (per metre), or --level L with --radius R "
                           "(e.g. --level ln4 --radius 200)")
    from .mechanisms.planar_laplace import check_epsilon

    for flag, value in (("--epsilon", args.epsilon), ("--level", args.level), ("--radius", args.radius)):
        if value is not None:  # the library's check (its message names the option; main shows the cli advice)
            check_epsilon(value, flag[2:])


def _privacy_kwargs(args) -> dict:
    if args.epsilon is not None:
        return {"epsilon": args.epsilon}
    return {"level": args.level, "radius": args.radius}


def _check_crs(value):
    if value is None:
        return None
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        return CRS.from_user_input(value)
    except CRSError:
        raise CLIError(f"the CRS {value!r} is not one pyproj knows (give e.g. EPSG:4326, 32631 or a WKT file's text)") from None


def _check_raster(path: str, what: str) -> None:
    """The raster exists and GDAL can open it (before any work)."""
    from .io import check_input

    check_input(path, what)
    import rasterio

    try:
        with rasterio.open(path):
            pass
    except rasterio.errors.RasterioIOError:
        raise CLIError(f"cannot read the {what} {path}: not a raster GDAL can open (give a GeoTIFF)") from None


def _read(path, layer=None, crs=None, what="input", flag="--crs", xy=None, layer_flag="--layer"):
    """geopriv.io.read_vector, with the command line's hints for files without a CRS and for layers."""
    from .exceptions import InputError
    from .io import read_vector

    try:
        gdf = read_vector(path, layer, crs=crs, what=what, xy=xy)
    except InputError as exc:  # the layers (file structure, not data) and the option that chooses one
        if getattr(exc, "layers", None) is None or layer_flag == "--layer":
            raise
        raise CLIError(f"{exc.problem}; choose one with {layer_flag} NAME") from None
    if gdf.crs is None:
        fix = (f"give the CRS its coordinates are in with {flag}, e.g. {flag} EPSG:4326 for longitude/latitude"
               if flag else "give a file that has one (GeoPackage, GeoJSON, Shapefile with .prj, ...)")
        raise CLIError(f"the {what} file {path} has no CRS (CSV files never have one): {fix}")
    return gdf


def _rng_note(record) -> str:
    return " [seeded: reproducible, not for real releases]" if record.get("seeded") else ""


def _shuffle_generator():
    """What --shuffle draws from: fresh OS entropy on every run, never --seed (tests replace this function)."""
    import numpy as np

    return np.random.default_rng()


def _rows(gdf, args, needed=()):
    """The rows and columns to release: without the --drop columns, in a random order with --shuffle.

    ``needed``: (option, column) pairs the release reads, which cannot be dropped.  The shuffle
    renumbers the rows (the old positions are not kept anywhere: the index is replaced, and
    nothing records the permutation), so the released order tells nothing about the true one.
    """
    drop = list(dict.fromkeys(getattr(args, "drop", None) or ()))
    if drop:
        by_name = {str(c): c for c in gdf.columns if c != gdf.geometry.name}
        unknown = [c for c in drop if c not in by_name]
        if unknown:
            shown = ", ".join(repr(c) for c in by_name) or "none"
            raise CLIError(f"--drop {unknown[0]!r}: the input has no such attribute column; its columns are: {shown}")
        used = [(flag, c) for flag, c in needed if c is not None and str(c) in drop]
        if used:
            raise CLIError(f"--drop {used[0][1]!r}: it is the {used[0][0]} column the release needs")
        gdf = gdf.drop(columns=[by_name[c] for c in drop])
    if getattr(args, "shuffle", False):
        if any(str(k) == "<row order>" for k in (args.keep or ())):
            raise CLIError("--shuffle and --keep '<row order>' contradict each other: shuffle the rows, or keep their "
                           "order deliberately")
        order = _shuffle_generator().permutation(len(gdf))
        gdf = gdf.iloc[order].reset_index(drop=True)
    return gdf


def _shuffled(out, args):
    """Record in the release's provenance that its rows were shuffled (not how: the permutation is gone)."""
    if getattr(args, "shuffle", False):
        out.attrs["geopriv"] = dict(out.attrs["geopriv"], row_order="shuffled")
    return out


def _rows_note(args) -> str:
    parts = []
    if getattr(args, "drop", None):
        parts.append(f"without column(s) {', '.join(dict.fromkeys(args.drop))}")
    if getattr(args, "shuffle", False):
        parts.append("rows in a random order")
    return f" ({'; '.join(parts)})" if parts else ""


# ---------------------------------------------------------------------------- perturb
_PERSON_NEEDED = ("--budget-store charges each row's person: name the column of stable person ids with --person COLUMN "
                  "(the rows' numbers are not people: deleting a row would hand its budget to the next one)")


def _cmd_perturb(args) -> int:
    import geopriv
    from . import io

    if args.mechanism is not None:
        given = [f for f, v in (("--epsilon", args.epsilon), ("--level", args.level), ("--radius", args.radius)) if v is not None]
        if given:
            raise CLIError(f"--mechanism carries its own privacy map: do not also give {'/'.join(given)}")
        if args.region is not None:
            raise CLIError("--region applies to planar Laplace only; a --mechanism defines its own outputs")
    else:
        _check_privacy(args)
        for flag, value in (("--outside", args.outside), ("--remap", args.remap), ("--kernels", args.kernels),
                            ("--n-jobs", args.n_jobs)):
            if value:
                raise CLIError(f"{flag} applies to a location-dependent --mechanism only")
    crs = _check_crs(args.crs)
    inputs = [args.input, args.region, args.mechanism]
    io.check_input(args.input)
    for path, what in ((args.region, "region"), (args.mechanism, "mechanism")):
        if path is not None:
            io.check_input(path, what)
    io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    _open_budget_store(args, _PERSON_NEEDED)

    gdf = _rows(_read(args.input, args.layer, crs, xy=args.xy), args, needed=(("--person", args.person),))
    _check_person(gdf, args)
    kwargs = _given(args, ("rng", "grid", "continuous", "bounds", "keep", "max_distortion", "budget_store", "person"))
    if args.region is not None:
        kwargs["region"] = _read(args.region, what="region", flag=None)
    if args.mechanism is not None:
        if args.outside != "clamp":  # from the file's public map alone: before a load that may verify it in full
            try:
                geopriv.EikonalMechanism.check_points(args.mechanism, gdf)
            except geopriv.MechanismFileError:
                pass  # an unreadable file: the load below says precisely what is wrong with it
        mech = geopriv.EikonalMechanism.load(args.mechanism, progress=True if getattr(args, "progress", False) else None,
                                             **_given(args, ("kernels", "n_jobs")))
        if args.outside is not None and args.outside != mech.outside:
            mech = mech.with_outside(args.outside)
        if args.remap and mech.remap_xy is None:
            mech = mech.with_remap("population")
        kwargs["mechanism"] = mech
    else:
        kwargs.update(_privacy_kwargs(args))
    out = _shuffled(geopriv.perturb(gdf, progress=True if args.progress else None, **kwargs), args)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    if "epsilon_per_m" in rec:
        eff = rec.get("effective_epsilon_per_m")
        how = (f"epsilon {rec['epsilon_per_m']:.6g} per ground metre "
               + (f"(effective {eff:.6g})" if eff else "(continuous: no finite-precision bound)"))
    else:
        how = f"location-dependent epsilon {rec['epsilon_min_per_m']:.4g} .. {rec['epsilon_max_per_m']:.4g} per metre"
    print(f"released {rec['n']} points to {args.output}{_rows_note(args)}: {how}, CRS {rec['input_crs']}"
          f"{_rng_note(rec)}", file=sys.stderr)
    _charge_note(rec, args)
    return 0


# ---------------------------------------------------------------------------- synthesize
_SYNTH_OPTIONS = ("n", "method", "depth", "placement", "grid", "bounds", "max_distortion", "rng")


def _cmd_synthesize(args) -> int:
    import geopriv
    from . import io

    crs = _check_crs(args.crs)
    inputs = [args.input, args.region]
    io.check_input(args.input)
    if args.region is not None:
        io.check_input(args.region, "region")
    io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    _open_budget_store(args, _PERSON_NEEDED)

    gdf = _rows(_read(args.input, args.layer, crs, xy=args.xy), args, needed=(("--person", args.person),))
    _check_person(gdf, args)
    kwargs = _given(args, _SYNTH_OPTIONS + ("budget_store", "person"))
    if args.region is not None:
        kwargs["region"] = _read(args.region, what="region", flag=None)
    out = geopriv.synthesize(gdf, args.epsilon, progress=True if args.progress else None, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    area = {"bounds": "--bounds", "region": "the bounding box of --region",
            "area_of_use": "the CRS's area of use"}.get(rec.get("frame_area"), rec.get("frame_area"))
    print(f"released {rec['n']} synthetic points (from {rec['n_people']} people; attributes not carried over) to "
          f"{args.output}: epsilon {rec['epsilon']:.6g} (differential privacy of the whole set, not per metre), "
          f"method {rec['method']}, depth {rec['depth']}, public area {area}, CRS {rec['input_crs']}{_rng_note(rec)}",
          file=sys.stderr)
    _charge_note(rec, args)
    if rec.get("frame_area") == "area_of_use":  # after the release: bad input stays one line on stderr
        print("geopriv: note: no --bounds or --region, so the public area was the CRS's area of use and the cells are "
              "coarse; declare your study area with --bounds XMIN YMIN XMAX YMAX (chosen without looking at the "
              "points) for finer cells", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------- diffuse
_DIFFUSE_OPTIONS = ("distance", "on_unreachable", "tolerance", "value", "support", "value_range", "continuous", "grid",
                    "bounds", "max_distortion", "rng")
_LOCATION_ONLY = (("--bounds", "bounds"), ("--max-distortion", "max_distortion"))


def _epsilon_pair(text: str):
    """``D:EPSILON``, a network distance and the epsilon there, e.g. ``2:ln4/200`` (geopriv.parsing)."""
    try:
        return parse_epsilon_pair(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _epsilon_policy(args):
    """The epsilon-of-distance schedule the options describe (checked before any data is read)."""
    from .exceptions import GeoprivError
    from .network import ExponentialEpsilon, epsilon_of_distance

    if (args.epsilon_table is None) == (args.epsilon_exp is None):
        raise CLIError("say how epsilon falls with network distance d: --epsilon-table D:EPSILON ... (e.g. "
                       "--epsilon-table 1:ln4/50 4:ln4/2000), or --epsilon-exp A B for exp(B - A d), not both")
    if args.epsilon_exp is not None:
        if args.kind is not None:
            raise CLIError("--epsilon-kind applies to --epsilon-table only")
        a, b = args.epsilon_exp
        try:
            return epsilon_of_distance(ExponentialEpsilon(a, b))
        except GeoprivError as exc:
            raise CLIError(f"--epsilon-exp A B: {exc}") from None
    pairs = sorted(args.epsilon_table)
    return epsilon_of_distance(([d for d, _ in pairs], [e for _, e in pairs]), **_given(args, ("kind",)))


def _as_ids(values, labels, what: str):
    """``values`` (text or numbers) as ids of the people layer's kind: whole numbers, or text."""
    import numpy as np
    import pandas as pd

    s = pd.Series(list(values), dtype=object)
    text = s.map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip())
    empty = (text == "").to_numpy()
    if empty.any():
        raise CLIError(f"{what}: {int(empty.sum())} id(s) are empty (first at row {int(np.argmax(empty)) + 1}); every "
                       "entry must name a person")
    if pd.api.types.is_integer_dtype(labels.dtype):
        num = pd.to_numeric(text, errors="coerce")
        bad = (num.isna() | (num % 1 != 0)).to_numpy()
        if bad.any():
            raise CLIError(f"{what}: {int(bad.sum())} id(s) are not whole numbers (first at row "
                           f"{int(np.argmax(bad)) + 1}), but the people's ids are (row numbers, or --id-field)")
        return num.astype("int64").to_numpy()
    return text.to_numpy(dtype=object)


def _people_ids(gdf, field):
    """The people layer indexed by its ids: ``field``'s values (whole numbers or text), or row numbers 0, 1, ..."""
    import pandas as pd

    if field is None:
        return gdf.reset_index(drop=True), "row numbers 0, 1, 2, ... in the input's order"
    if field not in gdf.columns or field == gdf.geometry.name:
        shown = ", ".join(repr(str(c)) for c in gdf.columns if c != gdf.geometry.name) or "none"
        raise CLIError(f"the input has no column {field!r} (--id-field); its columns are: {shown}")
    ids = gdf[field]
    if ids.isna().any():
        raise CLIError(f"--id-field {field!r} is empty at {int(ids.isna().sum())} row(s) (labels "
                       f"{', '.join(str(i) for i in gdf.index[ids.isna()][:5])}); every person needs an id")
    if pd.api.types.is_float_dtype(ids.dtype) and bool((ids % 1 == 0).all()):
        ids = ids.astype("int64")  # whole numbers stored as floats
    elif not pd.api.types.is_integer_dtype(ids.dtype):
        ids = ids.map(lambda v: str(v).strip())
    if ids.duplicated().any():
        raise CLIError(f"--id-field {field!r} has {int(ids.duplicated().sum())} duplicate id(s); every person needs "
                       "their own id")
    out = gdf.drop(columns=[field])
    out.index = pd.Index(ids.to_numpy(), name=field)
    return out, f"values of --id-field {field!r}"


def _read_table(path, layer, layer_flag: str, choose: str, *, skipinitialspace: bool = False):
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

    table = _read_table(path, layer, "--network-layer", "the edges table with --network-layer",
                        skipinitialspace=True)
    names = [str(c) for c in table.columns]
    table.columns = names
    if columns is None:
        if len(names) < 2:
            raise CLIError(f"the edges table {path} needs two columns of ids (one edge per row); it has {len(names)}")
        columns = names[:2]
    for c in list(columns) + ([weight] if weight is not None else []):
        if c not in names:
            raise CLIError(f"the edges table {path} has no column {c!r}; its columns are: "
                           + ", ".join(repr(n) for n in names))
    if columns[0] == columns[1]:
        raise CLIError("--edge-columns: give two different columns (the two ends of each edge)")
    edges = pd.DataFrame({"from": _as_ids(table[columns[0]], labels, f"the edges table's column {columns[0]!r}"),
                          "to": _as_ids(table[columns[1]], labels, f"the edges table's column {columns[1]!r}")})
    unknown = pd.Index(pd.unique(edges.to_numpy().ravel())).difference(labels)
    if len(unknown):
        shown = ", ".join(str(u) for u in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise CLIError(f"the edges table refers to {len(unknown)} id(s) that are not people of the input ({shown}); "
                       "its ids must be the people's ids (--id-field, default row numbers from 0)")
    if weight is not None:
        w = pd.to_numeric(table[weight], errors="coerce")
        if w.isna().any():
            raise CLIError(f"--weight {weight!r}: {int(w.isna().sum())} value(s) of the edges table are not numbers")
        edges["weight"] = w.to_numpy(dtype=float)
    return edges


def _read_lines(args, crs):
    """The --network line layer in the people's CRS; single-part MultiLineStrings become LineStrings."""
    import shapely

    lines = _read(args.network, args.network_layer, what="network", flag=None, layer_flag="--network-layer")
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
        raise CLIError("give the public network: --network LINES (a line layer joining the people's points) or "
                       "--edges TABLE (pairs of people ids), one of them")
    if args.edges is not None and args.tolerance is not None:
        raise CLIError("--tolerance applies to --network (line ends matched to points), not to --edges")
    if args.network is not None and args.edge_columns is not None:
        raise CLIError("--edge-columns applies to --edges, not to --network")
    if args.value is None:
        if args.support is not None:
            raise CLIError("--support rounds released values: give --value COLUMN too (locations are not rounded)")
        if args.value_range is not None or args.continuous:
            raise CLIError("--value-range and --continuous apply to --value releases (locations are always snapped to "
                           "the --grid lattice)")
    else:
        given = [flag for flag, name in _LOCATION_ONLY if getattr(args, name) is not None]
        if given:
            raise CLIError(f"{'/'.join(given)} apply to location releases; --value releases a number")
        if args.out_layer is not None:
            raise CLIError("--out-layer: with --value the output is a CSV table, which has no layers")


def _cmd_diffuse(args) -> int:
    import geopriv
    from . import io

    _check_diffuse_args(args)
    schedule = _epsilon_policy(args)
    crs = _check_crs(args.crs)
    io.check_input(args.input)
    graph_file = args.network if args.network is not None else args.edges
    io.check_input(graph_file, "network" if args.network is not None else "edges")
    if args.path is not None:
        io.check_input(args.path, "path")
    inputs = [args.input, graph_file, args.path]
    if args.value is None:
        io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    else:
        dest = io.check_file_output(args.output, suffixes=(".csv",), what="with --value, the", overwrite=args.overwrite,
                                    protect=inputs)
        if io.sidecar_path(dest).exists() and not args.overwrite:
            raise CLIError(f"{io.sidecar_path(args.output)} exists; pass --overwrite to replace it")
    save_dest = None
    if args.save_path is not None:  # the earlier path may be replaced by its extension (with --overwrite)
        save_dest = io.check_file_output(args.save_path, suffixes=(".npz",), what="path",
                                         overwrite=args.overwrite, protect=[args.input, graph_file, args.output])
    old = geopriv.DiffusionPath.load(args.path) if args.path is not None else None  # verified before any work
    _open_budget_store(args, None if args.id_field is not None else
                       "--budget-store charges the person --source is: name the column of stable person ids with "
                       "--person COLUMN, or give the people's ids with --id-field COLUMN (the default row numbers are "
                       "not people)")

    people, id_kind = _people_ids(_read(args.input, args.layer, crs, xy=args.xy), args.id_field)
    if args.person is not None and args.person == args.id_field:
        args.person = None  # the ids are the index now: the library's default (the source's id)
    _check_person(people, args)
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
    kwargs = _given(args, _DIFFUSE_OPTIONS + ("budget_store", "person"))
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
            stage.file(dest, lambda tmp: table.to_csv(tmp, index=False))
            stage.file(io.sidecar_path(dest), lambda tmp: tmp.write_text(json.dumps(rec, indent=2, default=str) + "\n"))
        if save_dest is not None:
            stage.file(save_dest, lambda tmp: new_path.save(tmp))
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
    spend = (f"answered from the earlier path {args.path}: consistent with its earlier answers, it spends only what "
             f"exceeds its earlier largest epsilon" if old is not None else
             f"a fresh path: a new release that spends {hi:.6g}{unit} for person {args.source}")
    print(f"released {what} to {rec['recipients']} recipient(s) in {args.output}"
          + (f" ({unreachable} not connected to it: no answer)" if unreachable else "")
          + f": epsilon {lo:.6g} .. {hi:.6g}{unit} by {rec['distance']} distance; coalition epsilon {hi:.6g}{unit} "
          f"(any group of recipients learns no more than its closest member); {spend}{_rng_note(rec)}",
          file=sys.stderr)
    _charge_note(rec, args, f"the person of --source {args.source} the path's largest epsilon (for a --path this "
                            "store charged before, only its increase)")
    if save_dest is not None:
        print(f"geopriv: warning: {args.save_path} holds the SECRET noise path: anyone who has it removes the noise "
              f"from every answer and recovers the true {'location' if args.value is None else 'value'}. Keep it "
              "private (it is readable by you only), never publish or share it; use it only with --path to answer "
              f"more recipients of person {args.source}", file=sys.stderr)
    elif old is not None and (new_path.eps_min < old.eps_min or new_path.eps_max > old.eps_max):
        print(f"geopriv: warning: the path of {args.path} was extended to answer these recipients, and the extension "
              "was not saved: later answers from that file will not agree with these. Save it with --save-path "
              "(e.g. the same file, with --overwrite)", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------- privacy maps
def _map_options(parser, with_from_epsilon: bool) -> None:
    from .privacy_map import PrivacyMap

    f = PrivacyMap.from_population
    g = parser.add_argument_group("how population density becomes epsilon per metre (PrivacyMap.from_population)")
    g.add_argument("--epsilon-range", nargs=2, type=_number, metavar=("LOW", "HIGH"), default=None,
                   help="epsilon per ground metre where nobody lives and at the raster's highest density, e.g. "
                        "ln4/3000 ln4/600 (ln 4 within 3 km and within 600 m)")
    _lib(g, f, "slope", type=_number, help="with --floor: extra epsilon per ground metre for each person per km2")
    _lib(g, f, "floor", type=_number, help="with --slope: epsilon per ground metre where nobody lives")
    _lib(g, f, "units", choices=("per_km2", "per_cell"), help="what a cell value is: people per km2 of ground, or per cell")
    _lib(g, f, "nodata_epsilon", type=_nodata_epsilon, metavar="nearest|EPSILON",
         help="epsilon of no-data cells: 'nearest' (the nearest cell with data: for sea and lakes) or a number; "
              "not given: the floor, the strongest protection")
    _lib(g, f, "band", type=int, help="raster band to read (1-based)")
    _lib(g, f, "nodata", type=float, help="cell value meaning no data (overrides the file's)")
    _lib(g, f, "crs", help="CRS of the raster when the file has none or a wrong one")
    _lib(g, f, "max_cells", type=_max_cells, metavar="N|none",
         help="largest raster read, in cells (width x height), checked before any cell is decoded: a compressed "
              "file can be tiny and decode to gigabytes; 'none' for no limit")
    g.add_argument("--regularise", type=_number, metavar="MAX_SLOPE", default=None,
                   help="PrivacyMap.regularised: lower epsilon where the noise scale changes faster than this many "
                        "metres per metre (default: not regularised)")
    if with_from_epsilon:
        g.add_argument("--from-epsilon", action="store_true",
                       help="RASTER already holds epsilon per metre (a map written by 'geopriv privacy-map'): "
                            "PrivacyMap.from_epsilon; no population options")


def _check_map_args(args) -> None:
    population = [f for f, v in (("--epsilon-range", args.epsilon_range), ("--slope", args.slope),
                                 ("--floor", args.floor), ("--units", args.units)) if v is not None]
    if getattr(args, "from_epsilon", False):
        if population:
            raise CLIError(f"--from-epsilon reads epsilon per metre from the raster: do not also give {'/'.join(population)}")
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
    from .privacy_map import PrivacyMap

    common = _given(args, ("band", "nodata", "nodata_epsilon", "max_cells"))
    if args.crs is not None:
        common["crs"] = _check_crs(args.crs)
    if getattr(args, "from_epsilon", False):
        pm = PrivacyMap.from_epsilon(args.raster, **common)
    else:
        rule = _given(args, ("epsilon_range", "slope", "floor", "units"))
        pm = PrivacyMap.from_population(args.raster, **rule, **common)
    if args.regularise is not None:
        pm = pm.regularised(args.regularise)
    return pm


def _cmd_privacy_map(args) -> int:
    from . import io

    _check_map_args(args)
    _check_crs(args.crs)
    _check_raster(args.raster, "population raster")
    dest = io.check_file_output(args.output, suffixes=(".tif", ".tiff"), what="GeoTIFF",
                                overwrite=args.overwrite, protect=[args.raster])
    pm = _privacy_map(args)
    with io.Staging() as stage:
        stage.file(dest, pm.to_geotiff)
        stage.commit()
    print(f"wrote {args.output}: {pm!r}", file=sys.stderr)
    return 0


def _cmd_build_mechanism(args) -> int:
    from . import io
    from .mechanisms.eikonal import EikonalMechanism

    _check_map_args(args)
    if args.no_smooth and args.smooth is not None:
        raise CLIError("give either --smooth or --no-smooth, not both")
    _check_crs(args.crs)
    _check_raster(args.raster, "raster")
    dest = io.check_file_output(args.output, suffixes=(".npz",), what="mechanism",
                                overwrite=args.overwrite, protect=[args.raster])
    pm = _privacy_map(args)
    print(f"privacy map: {pm!r}", file=sys.stderr)
    options = _given(args, ("margin", "smooth", "jump", "output_spacing", "max_step", "pad", "cap", "n_jobs", "kernels"))
    if args.no_smooth:
        options["smooth"] = None
    mech = EikonalMechanism.build(pm, progress=True if args.progress else None, **options)
    digests = []
    with io.Staging() as stage:
        stage.file(dest, lambda tmp: digests.append(mech.save(tmp)))
        stage.commit()
    print(f"wrote {args.output}: verified {mech.report}; SHA-256 {digests[0]}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------- traces
_TRACE_OPTIONS = ("method", "budget", "rate", "accuracy", "skip_speed", "stale_after", "predictor", "on_exhausted",
                  "eta", "gamma", "delta", "prediction_rate")


def _cmd_sanitize_traces(args) -> int:
    import geopriv
    from . import io

    _check_privacy(args)
    if args.rate is not None and args.accuracy is not None:
        raise CLIError("give either --rate (budget fixed_rate) or --accuracy (budget fixed_utility), not both")
    if args.shuffle and args.time is None:
        raise CLIError("--shuffle with --time '': without time stamps the rows' order is the query order, which a "
                       "shuffle would destroy; give the time stamp column with --time")
    crs = _check_crs(args.crs)
    inputs = [args.input]
    io.check_input(args.input)
    target = io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    ledger_dest = None
    if args.ledger is not None:
        ledger_dest = io.check_file_output(args.ledger, suffixes=(".csv",), what="ledger",
                                           overwrite=args.overwrite, protect=inputs + [args.output])
        if os.path.realpath(os.path.abspath(ledger_dest)) == os.path.realpath(os.path.abspath(target.path)):
            raise CLIError("--ledger must be another file than OUT")
    _open_budget_store(args, None if args.traj_id is not None else
                       "--budget-store charges each trace's person, and --traj-id '' makes all rows one trace: name "
                       "the column of its person id with --person COLUMN")

    gdf = _rows(_read(args.input, args.layer, crs, xy=args.xy), args,
                needed=(("--traj-id", args.traj_id), ("--time", args.time), ("--person", args.person)))
    _check_person(gdf, args)
    kwargs = _given(args, _TRACE_OPTIONS + ("rng", "grid", "continuous", "bounds", "keep", "max_distortion",
                                            "budget_store", "person"))
    out = _shuffled(geopriv.sanitize_traces(gdf, traj_id=args.traj_id, time=args.time,
                                            progress=True if args.progress else None, **_privacy_kwargs(args),
                                            **kwargs), args)
    ledger = geopriv.trace_ledger(out)
    with io.Staging() as stage:  # both outputs, or neither
        stage.vector(out, io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs))
        if ledger_dest is not None:
            stage.file(ledger_dest, lambda tmp: ledger.to_csv(tmp))
        stage.commit()
    rec = out.attrs["geopriv"]
    print(
        f"released {rec['n_released']} of {rec['n']} queries in {rec['traces']} trace(s) to {args.output}"
        + _rows_note(args) + (f" (ledger: {args.ledger})" if args.ledger else "")
        + f": {rec['method']}, {rec['budget']}, epsilon {rec['epsilon_per_m']:.6g} per metre per trace{_rng_note(rec)}",
        file=sys.stderr,
    )
    _charge_note(rec, args, "each trace's person its worst case, settled to what the ledger says it spent,")
    return 0


def _cmd_sample_queries(args) -> int:
    import geopriv
    from . import io

    crs = _check_crs(args.crs)
    inputs = [args.input]
    io.check_input(args.input)
    io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    gdf = _read(args.input, args.layer, crs, xy=args.xy)
    kwargs = _given(args, ("p", "short", "jump", "jitter", "max_speed", "speed_window", "max_gap", "time_unit", "rng"))
    out = geopriv.sample_queries(gdf, traj_id=args.traj_id, time=args.time, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    print(f"sampled {len(out)} queries from {len(gdf)} fixes to {args.output}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------- report, demo
def _cmd_report(args) -> int:
    import geopriv
    from . import io

    if args.delta is not None:
        if args.quantile is not None:
            raise CLIError("give --quantile only (--delta is its deprecated name)")
        print("geopriv: warning: --delta is deprecated and will be removed in the next release; use --quantile",
              file=sys.stderr)
        args.quantile = args.delta
    if args.quantile is not None and not 0 < args.quantile < 1:
        raise CLIError("--quantile: the quantile must be strictly between 0 and 1 (e.g. 0.9: alpha is the radius "
                       "containing 90 % of the displacements)")
    if args.wasserstein and (args.quantile is not None or args.id is not None):
        raise CLIError("--wasserstein compares the two point sets as wholes: no rows are matched (--id) and there are "
                       "no displacements (--quantile)")
    if args.html is None and (args.population or args.map_cell is not None or args.overwrite or args.bounds):
        raise CLIError("--bounds, --population, --map-cell and --overwrite are options of the release report: add "
                       "--html")
    crs = _check_crs(args.crs)
    released_crs = _check_crs(args.released_crs)
    io.check_input(args.true, "true")
    io.check_input(args.released, "released")
    true = _read(args.true, args.layer, crs, what="true", xy=args.xy)
    released = _read(args.released, args.released_layer, released_crs, what="released", flag="--released-crs",
                     layer_flag="--released-layer")
    record = io.read_provenance(args.released, args.released_layer)  # public: what the release published
    if args.wasserstein:
        if args.html is not None:
            _report_html(true, released, record, args)
        return _report_wasserstein(true, released, args)
    if record is not None and record.get("row_order") == "shuffled" and args.id is None:
        raise CLIError(f"the rows of {args.released} were shuffled by the release (--shuffle), so they cannot be "
                       "matched with the true rows by their order: match them by an id column kept through the "
                       "release with --id COLUMN, or compare the two point sets with --wasserstein")
    if args.id is not None:
        for what, gdf in (("true", true), ("released", released)):
            if args.id not in gdf.columns:
                raise CLIError(f"the {what} file has no column {args.id!r} (--id)")
        true, released = true.set_index(args.id), released.set_index(args.id)
    if record is not None:  # the library refuses what its record rules out (displacements of a synthetic set)
        released.attrs["geopriv"] = record
    if args.html is not None:
        from .metrics import is_synthetic

        _report_html(true, released, record, args)
        if is_synthetic(record):
            return 0  # a synthetic set has no displacements to print: the report compares the distributions
    report = geopriv.utility_report(true, released, **_given(args, ("quantile",)))
    values = {k: (int(v) if k == "n" else float(v)) for k, v in report.items()}
    if args.json:
        print(json.dumps(values))
    else:
        q = next(k for k in values if k.startswith("alpha_"))
        share = float(q[len("alpha_"):-len("_m")])
        for k, v in values.items():
            note = f"   radius containing {100 * share:g} % of the displacements" if k == q else ""
            print(f"{k:<12} {v:.6g}{note}")
    return 0


def _report_html(true, released, record, args) -> None:
    """--html: the release report (geopriv.report.release_report), private: for the data holder."""
    from .report import release_report, report_path

    if record is not None:
        released.attrs["geopriv"] = record
    path = args.html or report_path(args.released)
    kwargs = {"quantile": args.quantile} if args.quantile is not None else {}
    written = release_report(true, released, path, population=args.population, area=args.bounds,
                             prior="population" if args.population else "uniform", map_cell=args.map_cell,
                             overwrite=args.overwrite, front_end="cli", **kwargs)
    print(f"wrote the release report {written}: private, for the data holder (it shows counts of the true points "
          "per map cell); do not publish it", file=sys.stderr)


def _report_wasserstein(true, released, args) -> int:
    """--wasserstein: the earth mover's distance between the two point sets, in metres (no rows matched)."""
    import geopriv

    exact = max(len(true), len(released)) <= inspect.signature(geopriv.wasserstein).parameters["max_points"].default
    try:
        value = geopriv.wasserstein(true, released) if exact else geopriv.wasserstein_bound(true, released)
    except ImportError:
        raise CLIError("--wasserstein needs the POT library: pip install 'geopriv[metrics]' (or pip install "
                       "pot)") from None
    key = "wasserstein_m" if exact else "wasserstein_bound_m"
    values = {"n_true": len(true), "n_released": len(released), key: float(value)}
    if args.json:
        print(json.dumps(values))
    else:
        what = ("earth mover's distance between the two point sets" if exact
                else "an upper bound on the earth mover's distance (sets too large for the exact one)")
        for k, v in values.items():
            print(f"{k:<19} {v:.6g}" + (f"   {what}, ground metres" if k == key else ""))
    return 0


def _cmd_demo(args) -> int:
    import geopriv
    from . import io
    from .plot import plot_release

    data = _PACKAGE_DIR / "data" / "soho_cholera.gpkg"
    deaths = io.read_vector(data, "deaths")
    out = geopriv.perturb(deaths, level=math.log(4), radius=args.radius, rng=args.seed)
    outdir = Path(args.out)
    gpkg = outdir / "soho_perturbed.gpkg"
    png = outdir / "soho_map.png"
    target = io.check_output(gpkg, "deaths_perturbed", True)
    with io.Staging() as stage:  # both files or neither; a link at png is replaced, not written through
        stage.vector(out, target)
        stage.file(png, lambda tmp: plot_release(
            deaths, out, path=tmp.with_suffix(".png"),
            title=f"Soho cholera deaths (1854), EPSG:3857: ln 4 within {args.radius:g} m",
        ))
        stage.commit()
    rep = geopriv.utility_report(deaths, out)
    rec = out.attrs["geopriv"]
    print(f"Input : {data.name} layer 'deaths', {len(deaths)} points, {deaths.crs}")
    from .crs import ground_scale

    c = deaths.geometry.union_all().centroid
    smax, _ = ground_scale(deaths.crs, c.x, c.y)
    frame = "in the input CRS" if rec["frame"] == "planar" else "per point on the ellipsoid's sphere (returned in EPSG:3857)"
    print(
        f"Privacy: ln 4 within {args.radius:g} m = {rec['epsilon_per_m']:.5f} per ground metre; EPSG:3857 has "
        f"{float(smax[0]):.3f} units per ground metre here, so noise was drawn {frame}"
    )
    print(f"Utility: mean {rep['mean_m']:.1f} m, median {rep['median_m']:.1f} m; 90 % of the points moved less than "
          f"{rep['alpha_0.9_m']:.1f} m (alpha_0.9_m)")
    print(f"Wrote  : {gpkg}\n         {png}")
    return 0


# ---------------------------------------------------------------------------- lifetime budgets (geopriv budget)
#: rows 'geopriv budget show' prints unless --all
_SHOW_ROWS = 20
_BUDGET_TABLES = ("balances", "releases", "charges", "grants")


def _budget_options(p, func, charged: str, person: str) -> None:
    """--budget-store and --person: ``func``'s ``budget_store=`` and ``person=`` (the same names as in Python)."""
    g = p.add_argument_group("lifetime budget per person (a store kept with 'geopriv budget')")
    _lib(g, func, "budget_store", metavar="URL", show_default=False,
         help=f"charge {charged} to their lifetime budget in this store, after every check and BEFORE any noise is "
              "drawn: the store's URL (sqlite:///budgets.db, sqlite:////abs/budgets.db, postgresql://user@host/db) "
              "or a SQLite file's path. The store must exist (create it with 'geopriv budget grant'). A person who "
              "cannot afford the release is named, and nothing is drawn or charged (default: no store, nothing "
              "charged)")
    _lib(g, func, "person", metavar="COLUMN", show_default=False, help=person)


def _open_budget_store(args, person_needed: str | None = None) -> None:
    """Open --budget-store before any data is read (a missing store is an error saying how to create one).

    The open store replaces the URL in ``args`` (passed on as ``budget_store=``; :func:`main`
    closes it).  ``person_needed``: the error when --person is missing (the input's row numbers
    are not people).
    """
    if getattr(args, "budget_store", None) is None:
        if getattr(args, "person", None) is not None:
            raise CLIError("--person names whose lifetime budget a release charges: give --budget-store URL too")
        return
    if person_needed is not None and args.person is None:
        raise CLIError(person_needed)
    from .budget import BudgetStore

    args.budget_store = BudgetStore(args.budget_store)


def _check_person(gdf, args) -> None:
    """--person names an attribute column of the input (checked before anything is charged)."""
    person = getattr(args, "person", None)
    if person is not None and (person not in gdf.columns or person == gdf.geometry.name):
        shown = ", ".join(repr(str(c)) for c in gdf.columns if c != gdf.geometry.name) or "none"
        raise CLIError(f"--person {person!r}: the input has no such column; its columns are: {shown}")


def _charge_note(rec, args, who: str = "each row's person") -> None:
    """One line on stderr saying what a release charged, and to which store (its URL, never a password)."""
    store = getattr(args, "budget_store", None)
    if store is None or not rec.get("budget_store"):
        return
    per_row = rec.get("charged_per_row")
    how = f"{per_row:.6g} {rec['budget_unit']} per row" if per_row is not None else f"in {rec['budget_unit']}"
    print(f"charged {who} {how} in the budget store {store.url}, before any noise was drawn ('geopriv budget show "
          "STORE' shows what is left)", file=sys.stderr)


def _budget_unit(text: str) -> str:
    """A budget unit (geopriv.budget.UNITS, or epsilon per unit of a diffused value's column)."""
    from .budget.store import PER_METRE, PURE, check_unit, value_unit
    from .exceptions import ParameterError

    try:
        return check_unit(text)
    except ParameterError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a budget unit: give {PER_METRE} (epsilon per ground metre: perturb, sanitize-traces, "
            f"diffuse), {PURE} (dimensionless: synthesize) or '{value_unit('COLUMN')}' (a value released by diffuse "
            "--value)") from None


def _open_store(url):
    """The budget commands' STORE (a missing SQLite file: how to create it)."""
    from .budget import BudgetStore
    from .budget.store import parse_store_url

    kind, target = parse_store_url(url)
    if kind == "sqlite" and not Path(target).exists():
        raise CLIError(f"there is no budget store at {target}: create it with 'geopriv budget grant {target} --unit "
                       "epsilon/m --total T' (a default for everyone), or check the path")
    return BudgetStore(url)


def _read_person_ids(path, column, layer):
    """The ids in ``column`` of a table (CSV: read as text; GDAL tables, .parquet), as a list; none may be empty."""
    import pandas as pd

    from . import io

    io.check_input(path, "--persons-from")
    table = _read_table(path, layer, "--layer", "the one with the ids with --layer NAME")
    names = {str(c): c for c in table.columns}
    if column not in names:
        raise CLIError(f"--persons-from {path} has no column {column!r} (--column); its columns are: "
                       + (", ".join(repr(n) for n in names) or "none"))
    ids = table[names[column]]
    empty = ids.isna().to_numpy() | (ids.astype(str).str.strip() == "").to_numpy()
    if empty.any():
        raise CLIError(f"--persons-from: {int(empty.sum())} id(s) of column {column!r} are empty (first at data row "
                       f"{int(empty.argmax()) + 1}); every entry must name a person")
    if pd.api.types.is_float_dtype(ids.dtype):
        if not bool((ids % 1 == 0).all()):  # not shown: decimals may be coordinates
            raise CLIError(f"--persons-from: column {column!r} holds decimal numbers, not person ids (integers or "
                           "text)")
        ids = ids.astype("int64")
    return list(ids)


def _budget_persons(args):
    """The persons a grant or a view is about (--person IDs and --persons-from), or None for none given."""
    if (args.persons_from is None) != (args.column is None):
        raise CLIError("--persons-from FILE and --column COLUMN go together: the file, and its column of person ids")
    if args.persons_from is None and getattr(args, "layer", None) is not None:
        raise CLIError("--layer chooses the layer of --persons-from")
    persons = list(args.persons or [])
    if args.persons_from is not None:
        read = _read_person_ids(args.persons_from, args.column, args.layer)
        if not read:
            raise CLIError(f"--persons-from {args.persons_from} has no rows: no person to grant a budget to")
        persons += read
    return persons or None


def _cmd_budget_grant(args) -> int:
    from .budget import BudgetStore
    from .budget.store import parse_store_url
    from .exceptions import BudgetStoreError

    if not (math.isfinite(args.total) and args.total >= 0):
        raise CLIError("--total: a lifetime budget is a finite number >= 0, e.g. ln4/50 (ln 4 within 50 m)")
    persons = _budget_persons(args)  # read before the store is created: a bad file creates nothing
    kind, target = parse_store_url(args.store)
    created = False
    try:
        store = BudgetStore(args.store)
    except BudgetStoreError:
        if kind == "sqlite" and Path(target).exists():  # a file that is not a store (a GeoPackage?): never written to
            raise
        store = BudgetStore(args.store, create=True)  # a new file, or geopriv's tables in an existing database
        created = True
    with store:
        store.grant(args.total, unit=args.unit, persons=persons, note=args.note)
        url = store.url
    if created:
        print(f"created the budget store {url}", file=sys.stderr)
    if persons is None:
        print(f"set the default lifetime budget in {args.unit} to {args.total:.6g} in {url}: persons first charged "
              "from now on start with it; persons the store has already seen keep theirs", file=sys.stderr)
    else:
        print(f"set the lifetime budget in {args.unit} of {len(set(map(str, persons)))} person(s) to {args.total:.6g} "
              f"in {url} (what a person already used stays used: a total below it leaves them exhausted)",
              file=sys.stderr)
    return 0


def _table_text(frame, numeric) -> list[str]:
    """Plain text rows of ``frame``: text columns left-aligned, ``numeric`` ones right-aligned in 6 digits."""
    cells = [[f"{v:.6g}" if c in numeric else str(v) for c, v in zip(frame.columns, row)]
             for row in frame.itertuples(index=False)]
    widths = [max([len(str(c))] + [len(r[i]) for r in cells]) for i, c in enumerate(frame.columns)]

    def line(values):
        return "  ".join(v.rjust(w) if c in numeric else v.ljust(w)
                         for v, w, c in zip(values, widths, frame.columns)).rstrip()

    return [line([str(c) for c in frame.columns])] + [line(r) for r in cells]


def _cmd_budget_show(args) -> int:
    persons = list(args.persons) if args.persons else None
    with _open_store(args.store) as store:
        info = store.info()
        defaults = store.defaults()
        table = store.balances(unit=args.unit, persons=persons)
    releases = info["releases"]
    print(f"budget store {info['url']} (schema {info['schema_version']}, created with geopriv "
          f"{info['created_with']}): {info['persons']} person(s); releases: "
          + ", ".join(f"{n} {state}" for state, n in releases.items()))
    print("default lifetime budget of persons not yet seen: " + ", ".join(
        f"{u} {'none (a grant per person)' if d is None or math.isnan(d) else format(d, '.6g')}"
        for u, d in zip(defaults["unit"], defaults["default_total"])))
    if releases.get("reserved"):
        print(f"note: {releases['reserved']} release(s) in state 'reserved' are still charged: a release that did not "
              "finish (a process that stopped mid-release), or one running now; their worst case stays charged "
              "('geopriv budget export STORE releases.csv --what releases' lists them)")
    if table.empty:
        print("no balances" + (" match --unit/--person" if args.unit or persons else
                               ": no person has been granted a budget or charged yet"))
        return 0
    text = table["person"].map(lambda p: isinstance(p, str))
    keys = table.assign(_u=table["unit"].map({u: i for i, u in enumerate(dict.fromkeys(table["unit"]))}), _t=text,
                        _n=table["person"].where(~text, 0).astype("int64"), _s=table["person"].where(text, ""))
    table = table.loc[keys.sort_values(["_u", "remaining", "_t", "_n", "_s"], kind="stable").index]  # numbers, text
    shown = table if args.all else table.head(_SHOW_ROWS)
    print(f"balances ({len(table)} row(s), least remaining first):")
    for text in _table_text(shown, {"total", "spent", "reserved", "remaining"}):
        print("  " + text)
    if len(shown) < len(table):
        print(f"  ... and {len(table) - len(shown)} more row(s): --all shows every row; 'geopriv budget export' writes "
              "them to a CSV file")
    return 0


def _cmd_budget_export(args) -> int:
    from . import io

    with _open_store(args.store) as store:
        protect = [store.url[len("sqlite:///"):]] if store.kind == "sqlite" else []
        dest = io.check_file_output(args.output, suffixes=(".csv",), what="export", overwrite=args.overwrite,
                                    protect=protect)
        frame = getattr(store, args.what)()
        url = store.url
    with io.Staging() as stage:  # a temporary file beside OUT, moved into place (os.replace) when written
        stage.file(dest, lambda tmp: _write_private_csv(frame, tmp))
        stage.commit()
    print(f"wrote {len(frame)} row(s) of {args.what} from {url} to {args.output}", file=sys.stderr)
    return 0


def _write_private_csv(frame, path) -> None:
    """A CSV readable by its owner only: balances, charges and grants list who is in the data."""
    frame.to_csv(path, index=False)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)


def _budget_arguments(b) -> None:
    sub = b.add_subparsers(dest="budget_command", required=True, metavar="ACTION")
    sub.add_parser("grant", help="set lifetime budgets: the default for everyone, or some persons' (creates the store)",
                   description="Set lifetime budgets in a store: geopriv.BudgetStore(url, create=True).grant(...). "
                               "Without --person or --persons-from it sets the DEFAULT of the unit: every person not "
                               "yet seen in that unit starts with it. Creates the store if it does not exist (and "
                               "says so). Every grant is kept in the store's audit.",
                   epilog=EPILOG_BUDGET, arguments=_budget_grant_arguments)
    sub.add_parser("show", help="what each person has left, and the store's audit in one line",
                   description="Show a store's balances (person, unit, total, spent, reserved, remaining; least "
                               "remaining first) and a summary: geopriv.BudgetStore.balances() and info().",
                   epilog=EPILOG_BUDGET, arguments=_budget_show_arguments)
    sub.add_parser("export", help="write balances, releases, charges or grants to a CSV file",
                   description="Write one of a store's tables to a CSV file (written beside it, then moved into "
                               "place): geopriv.BudgetStore.balances(), releases(), charges() or grants().",
                   epilog=EPILOG_BUDGET, arguments=_budget_export_arguments)


def _store_argument(p, creates: bool = False) -> None:
    p.add_argument("store", metavar="STORE",
                   help="the store's URL (sqlite:///budgets.db, sqlite:////abs/budgets.db, postgresql://user@host/db) "
                        "or a SQLite file's path" + ("; created if it does not exist" if creates else
                                                     "; it must exist"))


def _budget_grant_arguments(g) -> None:
    _store_argument(g, creates=True)
    g.add_argument("--unit", required=True, type=_budget_unit, metavar="{epsilon/m,epsilon}",
                   help="the budget's unit: epsilon/m (epsilon per ground metre: perturb, sanitize-traces, diffuse) "
                        "or epsilon (dimensionless: synthesize); units are kept apart, a budget in one never pays "
                        "for a release in the other")
    g.add_argument("--total", required=True, type=_number, metavar="T",
                   help="the lifetime budget, in --unit, e.g. ln4/50 (epsilon/m: ln 4 within 50 m, for life) or 1")
    g.add_argument("--person", dest="persons", nargs="+", action="extend", metavar="ID",
                   help="person ids (as in the releases' --person column) whose total is set (repeatable); a total "
                        "below what a person already used leaves them exhausted")
    g.add_argument("--persons-from", metavar="FILE", help="also the ids in --column of this table (CSV, GeoPackage, "
                                                          ".parquet, ...)")
    g.add_argument("--column", metavar="COLUMN", help="the column of --persons-from holding the person ids")
    g.add_argument("--layer", help="layer of --persons-from, if it has several")
    g.add_argument("--note", metavar="TEXT", help="why (kept in the store's audit of grants)")
    g.set_defaults(func=_cmd_budget_grant)


def _budget_show_arguments(s) -> None:
    _store_argument(s)
    s.add_argument("--unit", type=_budget_unit, metavar="{epsilon/m,epsilon}", help="only this unit's balances")
    s.add_argument("--person", dest="persons", nargs="+", action="extend", metavar="ID",
                   help="only these persons' balances (repeatable)")
    s.add_argument("--all", action="store_true", help=f"every row (default: the first {_SHOW_ROWS})")
    s.set_defaults(func=_cmd_budget_show)


def _budget_export_arguments(e) -> None:
    _store_argument(e)
    e.add_argument("output", metavar="OUT.csv", help="the CSV file to write")
    e.add_argument("--what", choices=_BUDGET_TABLES, default="balances",
                   help="balances (per person and unit), releases (the audit: one row per release, public "
                        "parameters only), charges (epsilon per person and release) or grants (default: balances)")
    e.add_argument("--overwrite", action="store_true", help="replace OUT.csv if it exists")
    e.set_defaults(func=_cmd_budget_export)


EPILOG_BUDGET = """examples:
  # everyone: ln 4 within 50 m for life (epsilon per ground metre); creates budgets.db
  geopriv budget grant budgets.db --unit epsilon/m --total ln4/50 --note "ethics approval 2024-17"
  # two persons get more; synthesize spends a separate, dimensionless budget
  geopriv budget grant budgets.db --unit epsilon/m --total ln4/25 --person 17 42
  geopriv budget grant budgets.db --unit epsilon --total 2

  # releases charge the store before any noise is drawn
  geopriv perturb homes.gpkg out.gpkg --level ln4 --radius 200 --budget-store budgets.db --person pid

  geopriv budget show budgets.db --unit epsilon/m
  geopriv budget export budgets.db releases.csv --what releases
"""


# ---------------------------------------------------------------------------- the parser
def _input_options(p, out_layer: bool = True) -> None:
    g = p.add_argument_group("files")
    g.add_argument("--layer", help="input layer (files with several layers need it)")
    g.add_argument("--crs", help="CRS the input's coordinates are in, for files without one (CSV) or with a wrong one")
    g.add_argument("--xy", nargs=2, metavar=("X_COLUMN", "Y_COLUMN"),
                   help="build the input points from these two columns instead of the file's geometry, e.g. a CSV "
                        "of longitude/latitude: --xy lon lat --crs EPSG:4326 (the columns are not released)")
    if out_layer:
        g.add_argument("--out-layer", help="GeoPackage output layer (default: the file name); the file's other layers are kept")
    g.add_argument("--overwrite", action="store_true",
                   help="replace existing outputs (GeoPackage: only the layer written); a new layer may be added to "
                        "an existing GeoPackage without it")


def _privacy_options(p, func, title, whole: str = "") -> None:
    g = p.add_argument_group(title)
    g.add_argument("--level", type=_number, help=f"privacy level{whole} within --radius, e.g. ln4 or 1.386 "
                                                 "(dimensionless: the log of a probability ratio)")
    g.add_argument("--radius", type=_number, metavar="METRES", help="radius in ground metres for --level, e.g. 200")
    g.add_argument("--epsilon", type=_number, metavar="PER_METRE",
                   help=f"instead of --level/--radius: privacy loss{whole} per ground metre (= level / radius), e.g. "
                        "ln4/200 = 0.0069; ln4 alone would be ln 4 within 1 m, almost no protection")


def _rows_options(p, shuffle: bool = True) -> None:
    g = p.add_argument_group("rows and columns released" if shuffle else "columns read")
    g.add_argument("--drop", action="append", metavar="COLUMN",
                   help="leave this attribute column out of the release, e.g. one that holds the true locations "
                        "(repeatable)" if shuffle else "leave this column out of the input, e.g. a second geometry "
                                                        "column (repeatable)")
    if not shuffle:
        return
    g.add_argument("--shuffle", action="store_true",
                   help="release the rows in a random order (fresh OS entropy, not --seed; renumbered, the old order "
                        "is not kept anywhere), for inputs listed in a spatial order; 'geopriv report' then needs --id")


def _release_options(p, func) -> None:
    g = p.add_argument_group("public frame and output lattice")
    _lib(g, func, "grid", type=_grid, metavar="METRES|auto",
         help="step in ground metres of the public lattice outputs are snapped to ('auto': 1 m, finer for large epsilon)")
    _lib(g, func, "continuous", action="store_true",
         help="release unrounded coordinates (no finite-precision bound; not recommended)")
    _lib(g, func, "bounds", type=float, nargs=4, metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
         help="public study area in the input's CRS, chosen without looking at the points (default: the CRS's area of use)")
    _lib(g, func, "keep", action="append", metavar="COLUMN",
         help="keep a location-like attribute column deliberately (repeatable); such columns are refused otherwise")
    _lib(g, func, "max_distortion", type=float,
         help="largest scale variation of a projected CRS over the public area for which it is used as is")
    _lib(g, func, "rng", "--seed", type=int, metavar="SEED", show_default=False,
         help="seed (rng=) for reproducible tests and demos only; recorded as seeded (default: OS entropy)")


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

EPILOG_TRACES = """examples:
  # ln 10 within 100 m for each whole trace, about 3.3 % of it per query (~30 queries)
  geopriv sanitize-traces queries.gpkg released.gpkg --traj-id user --time t \\
      --level ln10 --radius 100 --rate 0.033 --ledger ledger.csv

  # longitude/latitude data need a public study area; fixed accuracy of 3 km per noisy release
  geopriv sanitize-traces queries.csv released.gpkg --crs EPSG:4326 --traj-id user --time t \\
      --bounds 115.4 39.4 117.6 41.1 --level ln10 --radius 100 --budget fixed_utility --accuracy 3000
"""

EPILOG_SAMPLE = """examples:
  # the evaluation protocol of Chatzikokolakis et al. 2014 on raw GPS fixes: jumps of 60 min with p = 0.3
  geopriv sample-queries fixes.gpkg queries.gpkg --traj-id trajectory_id --time t -p 0.3 --seed 1
  geopriv sanitize-traces queries.gpkg released.gpkg --traj-id trajectory_id --time t --level ln10 --radius 100 --rate 0.033
"""

EPILOG_REPORT = """examples:
  geopriv report homes.gpkg homes_private.gpkg
  # rows matched by an id column; alpha_0.5_m is then the median displacement
  geopriv report homes.gpkg homes_private.geojson --id home_id --quantile 0.5 --json

  # a synthetic set (geopriv synthesize) belongs to nobody: compare the distributions, not rows
  geopriv report homes.gpkg synthetic.gpkg --wasserstein

  # the release report for the data holder: writes homes_private.private-report.html (do not publish it)
  geopriv report homes.gpkg homes_private.gpkg --html
"""

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

EPILOG_DEMO = """examples:
  geopriv demo --out out --seed 1     # writes out/soho_perturbed.gpkg and out/soho_map.png
"""


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser; each command's options are added when that command is parsed or shown.

    The options read the library's defaults from its signatures, which imports the library (numpy,
    GeoPandas, ...): ``geopriv --help``, ``--version`` and a mistyped command import none of it.
    """
    import geopriv

    parser = _Parser(
        prog="geopriv", description="Location privacy with formal guarantees (geopriv's library, on files).",
        epilog="examples:\n  geopriv perturb homes.gpkg homes_private.gpkg --level ln4 --radius 200\n"
               "  geopriv demo --out out\n\nEach command's --help has worked examples.",
    )
    parser.add_argument("--version", action="version", version=f"geopriv {geopriv.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("perturb", help="release points with geo-indistinguishability, or a location-dependent mechanism",
                   description="Release point locations: geopriv.perturb (planar Laplace noise per ground metre, "
                               "or a saved location-dependent mechanism).", epilog=EPILOG_PERTURB,
                   arguments=_perturb_arguments)
    sub.add_parser("synthesize", help="release a synthetic point set with epsilon-differential privacy (private measure)",
                   description="Release synthetic points: geopriv.synthesize (a private measure of the whole point "
                               "set over a public area: super-regular random walk on a Hilbert curve, or the private "
                               "measure mechanism). The output is a new layer of synthetic points; attributes are "
                               "not carried over.", epilog=EPILOG_SYNTHESIZE, arguments=_synthesize_arguments)
    sub.add_parser("diffuse", help="release one person's location (or value) to everyone connected to her in a "
                                   "network, more accurately to closer people (private Markov jump process)",
                   description="Graded release over a public network: geopriv.diffuse_locations (Koufogiannis and "
                               "Pappas' private Markov jump process). The person --source's location is told to "
                               "every other person connected to her, each at epsilon(d) per metre for their "
                               "network distance d (never more accurate for a farther person), all from ONE secret "
                               "noise path: any group of recipients pooling their answers learns no more than its "
                               "closest member. People not connected to her get no answer.", epilog=EPILOG_DIFFUSE,
                   arguments=_diffuse_arguments)
    sub.add_parser("aggregate", help="private counts of points per public cell (grid, H3 or polygons), user level",
                   description="Release counts per public cell: geopriv.aggregate (exact discrete Laplace noise on a "
                               "consistent hierarchy of cells, every cell of the public area released, each person's "
                               "rows bounded). The output is a layer of cells with their counts.",
                   epilog=EPILOG_AGGREGATE, arguments=_aggregate_arguments)
    sub.add_parser("heatmap", help="a private heatmap GeoTIFF (counts or densities on a square grid), user level",
                   description="Release a heatmap: geopriv.heatmap (the counts of aggregate on a square grid, as a "
                               "north-up GeoTIFF: band 1 the values, band 2 their expected error).",
                   epilog=EPILOG_HEATMAP, arguments=_heatmap_arguments)
    sub.add_parser("flows", help="private origin-destination trip counts between public regions, user level",
                   description="Release origin-destination flows: geopriv.flows (every ordered pair of public "
                               "regions is a cell, released with its count of trips, empty or not, as a line layer).",
                   epilog=EPILOG_FLOWS, arguments=_flows_arguments)
    sub.add_parser("privacy-map", help="population raster -> privacy map GeoTIFF (epsilon per metre)",
                   description="Build a privacy map from a population raster: geopriv.PrivacyMap.from_population, "
                               "written with to_geotiff.", epilog=EPILOG_PRIVACY_MAP, arguments=_privacy_map_arguments)
    sub.add_parser("build-mechanism", help="population or privacy-map raster -> saved location-dependent mechanism",
                   description="Build and verify a location-dependent mechanism: geopriv.EikonalMechanism.build, "
                               "saved with save() for 'geopriv perturb --mechanism'.", epilog=EPILOG_BUILD,
                   arguments=_build_mechanism_arguments)
    sub.add_parser("sanitize-traces", help="release location traces within a budget per trace (predictive mechanism)",
                   description="Release location traces: geopriv.sanitize_traces (one budget per trace, spent by "
                               "the predictive mechanism or independent noise).", epilog=EPILOG_TRACES,
                   arguments=_sanitize_traces_arguments)
    sub.add_parser("sample-queries", help="raw GPS trajectories -> query traces (the paper's sampling protocol)",
                   description="Turn GPS fixes into query traces: geopriv.sample_queries (Chatzikokolakis et al. "
                               "2014, sec. 5). Not a release: the output holds true locations.", epilog=EPILOG_SAMPLE,
                   arguments=_sample_queries_arguments)
    sub.add_parser("report", help="displacement statistics (ground metres) between a true and a released file",
                   description="Displacement statistics: geopriv.utility_report (n, mean, median, alpha, max, "
                               "MSE, RMSE in ground metres).", epilog=EPILOG_REPORT, arguments=_report_arguments)
    sub.add_parser("adversary-error", help="measured privacy of planar Laplace in metres: the optimal adversary's "
                                           "error on a public area (and the k-equivalent)",
                   description="The optimal Bayesian adversary (Shokri et al. 2011): geopriv.adversary_error, exactly "
                               "on a grid over the public area. Reads no data.", epilog=EPILOG_ADVERSARY,
                   arguments=_adversary_arguments)
    sub.add_parser("calibrate", help="the epsilon meeting a target: adversary error, k-equivalent or displacement",
                   description="Choose epsilon: geopriv.calibrate (planar Laplace on a public area). Reads no data.",
                   epilog=EPILOG_CALIBRATE, arguments=_calibrate_arguments)
    sub.add_parser("budget", help="lifetime privacy budgets per person (grant, show, export a store)",
                   description="Lifetime privacy budgets per person, kept in a store (geopriv.BudgetStore: a SQLite "
                               "file or a PostgreSQL database) that every release command charges with "
                               "--budget-store URL --person COLUMN before any noise is drawn.", epilog=EPILOG_BUDGET,
                   arguments=_budget_arguments)
    sub.add_parser("demo", help="perturb the shipped Soho cholera points; write a GeoPackage and a PNG map",
                   description="The Quickstart demo on shipped data (John Snow's Soho cholera deaths, EPSG:3857).",
                   epilog=EPILOG_DEMO, arguments=_demo_arguments)
    return parser


def _perturb_arguments(p) -> None:
    import geopriv
    from .mechanisms.eikonal import EikonalMechanism
    from .mechanisms.eikonal.mechanism import LOAD_KERNELS

    p.add_argument("input", help="input points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)")
    p.add_argument("output", help="output file; format from the extension: .gpkg .geojson .json .fgb .shp .csv .parquet")
    _privacy_options(p, geopriv.perturb, "privacy (give --level and --radius, or --epsilon per ground metre, or "
                                         "--mechanism)")
    g = p.add_argument_group("location-dependent privacy")
    g.add_argument("--mechanism", metavar="FILE.npz", help="a mechanism saved by 'geopriv build-mechanism' (verified on load)")
    g.add_argument("--outside", choices=("error", "clamp"),
                   help="points outside the mechanism's raster: stop naming them (error), or release them as if at "
                        "the nearest point of the raster (clamp) (default: the mechanism's, error)")
    g.add_argument("--remap", action="store_true",
                   help="release each output's posterior mean under the population (same guarantee, lower error)")
    _lib(g, EikonalMechanism.load, "kernels", choices=LOAD_KERNELS,
         help="held: recompute and keep every kernel entry; on_demand: keep none, recompute only the rows the points "
              "need (large rasters; a few points cost a few shortest-path searches); auto: on_demand for a file you "
              "verified before (stamped: no kernel solve at load), held otherwise")
    _lib(g, EikonalMechanism.load, "n_jobs", type=int, help="worker processes for the mechanism's kernel solves")
    _release_options(p, geopriv.perturb)
    p.add_argument("--region", help="vector file of the public polygon outputs are kept in")
    _budget_options(p, geopriv.perturb, "each row's person the row's epsilon per ground metre (unit epsilon/m: the "
                    "effective epsilon on the lattice, or a --mechanism's largest)",
                    "column of stable person ids (integers or text) whose lifetime budgets --budget-store charges; "
                    "needed with it. A person with several rows pays for each")
    _rows_options(p)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    _input_options(p)
    p.set_defaults(func=_cmd_perturb)


def _synthesize_arguments(y) -> None:
    import geopriv
    from .mechanisms.private_measure import METHODS

    sy = geopriv.synthesize
    y.add_argument("input", help="input points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)")
    y.add_argument("output", help="output file; format from the extension: .gpkg .geojson .json .fgb .shp .csv .parquet")
    g = y.add_argument_group("privacy (one person's location replaced anywhere in the public area; the number of "
                             "people is public)")
    g.add_argument("--epsilon", type=_number, required=True, metavar="TOTAL",
                   help="differential privacy loss of the whole release, dimensionless (total; not per metre, unlike "
                        "perturb's), e.g. 1 or ln3")
    g = y.add_argument_group("public area and synthetic points")
    _lib(g, sy, "bounds", type=float, nargs=4, metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
         help="public area in the input's CRS, chosen without looking at the points (never derived from the data: "
              "a city's or map sheet's extent); inputs outside it are refused (default: the bounding box of --region, "
              "else the CRS's area of use: coarse cells)")
    g.add_argument("--region", help="vector file of the public polygon outputs are kept in; its bounding box is the "
                                    "public area when --bounds is not given")
    _lib(g, sy, "n", "-n", "--n", type=int, metavar="N",
         help="number of synthetic points, drawn from the private measure (default: as many as input points)")
    _lib(g, sy, "method", choices=METHODS,
         help="srw: super-regular random walk on a Hilbert curve; pmm: private measure mechanism")
    _lib(g, sy, "depth", type=_depth, metavar="LEVELS|auto",
         help="levels of the binary partition tree (2**depth cells along the curve); 'auto' from n and epsilon")
    _lib(g, sy, "placement", choices=("uniform", "centre"), help="synthetic points uniform in their cell, or at its centre")
    _lib(g, sy, "grid", type=_grid, metavar="METRES|auto",
         help="step in ground metres of the public lattice outputs are snapped to ('auto': 1 m, finer for small cells)")
    _lib(g, sy, "max_distortion", type=float,
         help="largest scale variation of a projected CRS over the public area for which it is used as is")
    _lib(g, sy, "rng", "--seed", type=int, metavar="SEED", show_default=False,
         help="seed (rng=) for reproducible tests and demos only; recorded as seeded (default: OS entropy)")
    _budget_options(y, sy, "each row's person the release's epsilon (unit epsilon: dimensionless, a budget kept "
                    "apart from the per-metre one of perturb)",
                    "column of stable person ids (integers or text) whose lifetime budgets --budget-store charges; "
                    "needed with it. A person with k rows pays k times the epsilon (group privacy)")
    _rows_options(y, shuffle=False)
    y.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    _input_options(y)
    y.set_defaults(func=_cmd_synthesize)


def _diffuse_arguments(f) -> None:
    import geopriv
    from .diffuse import DISTANCES
    from .network import epsilon_of_distance

    dl = geopriv.diffuse_locations
    f.add_argument("input", help="the people: one point per person (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv "
                                 "with WKT, .parquet)")
    f.add_argument("output", help="the answers, one point per recipient with its id (recipient), network_distance, "
                                  "epsilon_per_m and effective_epsilon_per_m; format from the extension: .gpkg .geojson "
                                  ".json .fgb .shp .csv .parquet (with --value: a .csv table)")
    f.add_argument("--source", required=True, metavar="ID",
                   help="the id of the person whose location (or --value) is released")
    f.add_argument("--id-field", metavar="COLUMN",
                   help="column of INPUT holding the people's ids (unique), used by --source and --edges and written "
                        "as 'recipient' (default: row numbers 0, 1, 2, ... in the input's order)")
    g = f.add_argument_group("the public network (give --network or --edges)")
    g.add_argument("--network", metavar="LINES",
                   help="line layer: each line joins the two people whose points are at its ends (reprojected to "
                        "INPUT's CRS; single-part MultiLineStrings are read as lines)")
    _lib(g, dl, "tolerance", type=float, metavar="DISTANCE",
         help="largest distance, in INPUT's CRS units, between a line end and its person's point (line networks "
              "only)")
    g.add_argument("--edges", metavar="TABLE",
                   help="table of pairs of people ids, one edge per row: a CSV with a header row, or any table GDAL "
                        "reads (GeoPackage attribute table, .dbf, ...)")
    g.add_argument("--edge-columns", nargs=2, metavar=("FROM", "TO"),
                   help="the two id columns of --edges (default: its first two columns)")
    g.add_argument("--network-layer", metavar="LAYER", help="layer of the --network or --edges file, if it has several")
    _lib(g, dl, "weight", metavar="COLUMN",
         help="column of --network or --edges with edge weights (conductances > 0; used by resistance distances "
              "only) (default: every edge 1)")
    _lib(g, dl, "distance", choices=DISTANCES,
         help="network distance d: hops (edges on a shortest path) or resistance (effective resistance, which "
              "counts every path between two people)")
    _lib(g, dl, "on_unreachable", choices=("warn", "raise", "ignore"),
         help="people not connected to the source get no answer: name them in a warning, stop, or stay quiet")
    g = f.add_argument_group("privacy as a function of the network distance d (give --epsilon-table or --epsilon-exp)")
    g.add_argument("--epsilon-table", nargs="+", type=_epsilon_pair, metavar="D:EPSILON",
                   help="epsilon at network distances, per ground metre (per unit of --value), e.g. 1:ln4/50 "
                        "4:ln4/2000 (ln 4 within 50 m at 1 hop): "
                        "between the distances as --epsilon-kind says, the first epsilon below the first distance, the "
                        "last beyond the last; epsilon must not increase with distance")
    _lib(g, epsilon_of_distance, "kind", "--epsilon-kind", choices=("linear", "step"),
         help="--epsilon-table between its distances: linear interpolation, or step (each epsilon from its distance "
              "up to the next)")
    g.add_argument("--epsilon-exp", nargs=2, type=_number, metavar=("A", "B"),
                   help="epsilon(d) = exp(B - A d) per ground metre (per unit of --value), Koufogiannis and Pappas' "
                        "form (their example: 3.3 4, for a bit); A >= 0; B takes ln: --epsilon-exp 0.5 ln0.03 is "
                        "0.03 * exp(-0.5 d) per ground metre")
    g = f.add_argument_group("release an attribute's value instead of the location")
    _lib(g, dl, "value", metavar="COLUMN",
         help="release this numeric column's value at the source (e.g. an infection bit 0/1): epsilon is then per "
              "unit of the value, and OUTPUT a .csv table (recipient, network_distance, epsilon, response)")
    _lib(g, dl, "support", nargs="+", type=_number, metavar="V",
         help="with --value: round each answer to the nearest of these values, e.g. --support 0 1 for a bit "
              "(post-processing: the same guarantee)")
    _lib(g, dl, "value_range", nargs=2, type=_number, metavar=("LO", "HI"),
         help="with --value: the public range of the value, chosen without looking at the data; answers are "
              "clamped to the lattice in it (default: a wide range around 0)")
    _lib(g, dl, "continuous", action="store_true",
         help="with --value and no --support: publish raw float answers instead of snapping them to the public "
              "lattice; their low-order bits can give the value away (Mironov 2012), recorded as unbounded")
    _budget_options(f, dl, "the person --source is the path's largest epsilon (unit epsilon/m for a location, "
                    "'epsilon per unit of COLUMN' with --value; a --path this store charged before costs only the "
                    "increase)",
                    "column of stable person ids whose lifetime budget --budget-store charges: the --source row's id "
                    "is charged (default: the --id-field id; needed without --id-field, as row numbers are not "
                    "people)")
    g = f.add_argument_group("the secret noise path")
    g.add_argument("--save-path", metavar="FILE.npz",
                   help="SAVES THE SECRET NOISE PATH: anyone holding this file removes the noise from every answer "
                        "and recovers the true location. Keep it private (written readable by you only), only to "
                        "answer more recipients of this source later with --path (default: not saved)")
    g.add_argument("--path", metavar="FILE.npz",
                   help="answer from a secret path saved earlier with --save-path: the answers agree with the earlier "
                        "ones and only an epsilon above the earlier largest is spent again (save the possibly extended "
                        "path back with --save-path). The path is bound to its source, to the location or --value "
                        "column, to the true value and to the CRS, --bounds and --grid: any other use is refused. "
                        "Without it every run draws a fresh path: a new release that spends its epsilon again")
    g = f.add_argument_group("public frame and output lattice (locations)")
    _lib(g, dl, "grid", type=_grid, metavar="METRES|auto",
         help="step of the public lattice answers are snapped to, in ground metres (in the value's units for a value "
              "release) ('auto': 1, "
              "finer for a large epsilon)")
    _lib(g, dl, "bounds", type=float, nargs=4, metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
         help="public study area in the input's CRS, chosen without looking at the points (needed for "
              "longitude/latitude and Web Mercator; default: the CRS's area of use)")
    _lib(g, dl, "max_distortion", type=float,
         help="largest scale variation of a projected CRS over the public area for which it is used as is")
    _lib(g, dl, "rng", "--seed", type=int, metavar="SEED", show_default=False,
         help="seed (rng=) for reproducible tests and demos only; recorded as seeded (default: OS entropy)")
    _input_options(f)
    f.set_defaults(func=_cmd_diffuse)


def _privacy_map_arguments(m) -> None:
    m.add_argument("raster", help="population density raster (GeoTIFF, projected CRS)")
    m.add_argument("output", help="privacy map GeoTIFF (.tif)")
    _map_options(m, with_from_epsilon=False)
    m.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    m.set_defaults(func=_cmd_privacy_map)


def _build_mechanism_arguments(b) -> None:
    from .mechanisms.eikonal import EikonalMechanism
    from .mechanisms.eikonal.mechanism import KERNELS

    b.add_argument("raster", help="population raster (with --epsilon-range or --slope/--floor) or a privacy map (--from-epsilon)")
    b.add_argument("output", help="mechanism file (.npz)")
    _map_options(b, with_from_epsilon=True)
    build = EikonalMechanism.build
    g = b.add_argument_group("mechanism (EikonalMechanism.build)")
    _lib(g, build, "margin", type=_grid, metavar="SHARE|auto",
         help="share of the privacy loss kept for normalisation, in (0, 1); auto: 0.1 per noise length")
    _lib(g, build, "smooth", type=_optional_number, metavar="METRES_PER_METRE|none",
         help="build the kernels from a map regularised to this slope")
    g.add_argument("--no-smooth", action="store_true", help="same as --smooth none")
    _lib(g, build, "jump", type=_optional_number, metavar="LOG_FACTOR|none",
         help="also lower the kernels' map so epsilon changes by at most exp(JUMP) between neighbouring cells "
              "(per noise length on cells longer than one); none: off")
    _lib(g, build, "output_spacing", type=float, help="largest output spacing times epsilon")
    _lib(g, build, "max_step", type=_step, metavar="CELLS|none",
         help="largest output step in cells, a power of two; none: no cap, the spacing follows 1/epsilon")
    _lib(g, build, "pad", type=float, help="outputs extend beyond the raster by this many noise lengths")
    _lib(g, build, "cap", type=float, help="kernel cap in travel-time units")
    _lib(g, build, "n_jobs", type=int, help="worker processes for the kernels")
    _lib(g, build, "kernels", choices=KERNELS,
         help="held: keep every kernel entry while building; on_demand: hold only the truncated kernels of the weight "
              "solve (large rasters; the saved file is the same compact file)")
    b.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    b.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    b.set_defaults(func=_cmd_build_mechanism)


def _sanitize_traces_arguments(t) -> None:
    import geopriv

    st = geopriv.sanitize_traces
    t.add_argument("input", help="points of the traces (any OGR format, .parquet)")
    t.add_argument("output", help="output file; format from the extension")
    t.add_argument("--traj-id", required=True, type=_column, metavar="COLUMN",
                   help="trace id column: one budget per trace ('' : all rows are one trace)")
    t.add_argument("--time", required=True, type=_column, metavar="COLUMN",
                   help="time stamp column (datetimes, ISO text or seconds; '' : rows are in query order)")
    _privacy_options(t, st, "budget of each whole trace (give --level and --radius, or --epsilon per ground metre)",
                     whole=" of each whole trace")
    g = t.add_argument_group("mechanism and budget manager")
    _lib(g, st, "method", choices=("predictive", "independent"), help="predictive mechanism or independent noise")
    _lib(g, st, "budget", choices=("fixed_rate", "fixed_utility"), help="budget manager")
    _lib(g, st, "rate", type=float, help="fixed_rate: fraction of the trace's budget per query on average, e.g. 0.033")
    _lib(g, st, "accuracy", type=float, help="fixed_utility: metres within which a noisy release falls with probability delta")
    _lib(g, st, "skip_speed", type=float, help="time skip rule: assumed top speed in metres per second (e.g. 0.139)")
    _lib(g, st, "stale_after", type=float, help="seconds after which a prediction is not tested (fresh noise)")
    _lib(g, st, "predictor", choices=("parrot", "cluster_mean"), help="prediction of the predictive mechanism")
    _lib(g, st, "on_exhausted", choices=("empty", "last"),
         help="rows a trace's budget cannot pay for: no geometry, or the trace's last released point")
    _lib(g, st, "eta", type=float, help="budget manager: utility slack (0.5 .. 1)")
    _lib(g, st, "gamma", type=float, help="budget manager: test-noise to threshold ratio")
    _lib(g, st, "delta", type=float, help="budget manager: accuracy level of alpha(delta), in (0.5, 1)")
    _lib(g, st, "prediction_rate", type=float, help="fixed_rate: prior prediction rate")
    _release_options(t, st)
    t.add_argument("--ledger", metavar="LEDGER.csv", help="also write the per-trace budget ledger (geopriv.trace_ledger) as CSV")
    _budget_options(t, st, "each trace's person the trace's worst case in epsilon per ground metre (unit epsilon/m: "
                    "the budget of the whole trace plus the lattice's increment per row), settled after the run to "
                    "what the ledger says was spent, the rest given back,",
                    "column of stable person ids whose lifetime budgets --budget-store charges, constant within a "
                    "trace; a person with several traces pays for each (default: the --traj-id column, each trace "
                    "its own person)")
    _rows_options(t)
    t.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    _input_options(t)
    t.set_defaults(func=_cmd_sanitize_traces)


def _sample_queries_arguments(s) -> None:
    import geopriv

    sq = geopriv.sample_queries
    s.add_argument("input", help="GPS fixes (any OGR format, .parquet)")
    s.add_argument("output", help="query points; format from the extension")
    s.add_argument("--traj-id", required=True, metavar="COLUMN", help="trajectory id column")
    s.add_argument("--time", required=True, metavar="COLUMN", help="time stamp column")
    g = s.add_argument_group("sampling")
    _lib(g, sq, "p", "-p", type=float, help="probability of a jump between queries, 0 .. 1")
    _lib(g, sq, "short", type=float, help="seconds between frequent queries")
    _lib(g, sq, "jump", type=float, help="seconds of a jump")
    _lib(g, sq, "jitter", type=float, help="relative standard deviation of the intervals")
    _lib(g, sq, "max_speed", type=float, help="queries only while slower than this (metres per second)")
    _lib(g, sq, "speed_window", type=float, help="seconds over which speed is measured")
    _lib(g, sq, "max_gap", type=float, help="largest age in seconds of the fix a query uses")
    _lib(g, sq, "time_unit", type=str, help="unit of numeric time stamps (s, ms, us, ns, min, h, D)")
    _lib(g, sq, "rng", "--seed", type=int, metavar="SEED", show_default=False,
         help="seed of the sampling, which is not a privacy mechanism (default: OS entropy)")
    _input_options(s)
    s.set_defaults(func=_cmd_sample_queries)


def _report_arguments(r) -> None:
    import geopriv

    r.add_argument("true", help="the original points")
    r.add_argument("released", help="their release (rows matched by --id, or by order)")
    r.add_argument("--layer", help="layer of the true file")
    r.add_argument("--released-layer", help="layer of the released file")
    r.add_argument("--crs", help="CRS of the true file's coordinates, when it has none (CSV) or a wrong one")
    r.add_argument("--xy", nargs=2, metavar=("X_COLUMN", "Y_COLUMN"),
                   help="build the true points from these two columns of the true file (e.g. --xy lon lat)")
    r.add_argument("--released-crs", help="CRS of the released file's coordinates, when it has none (CSV) or a wrong one")
    r.add_argument("--id", metavar="COLUMN", help="column matching rows of the two files (default: row order)")
    _lib(r, geopriv.utility_report, "quantile", type=float,
         help="alpha is the radius containing this share of the displacements (not a privacy parameter)")
    r.add_argument("--delta", type=float, default=None, help=argparse.SUPPRESS)  # deprecated name of --quantile
    r.add_argument("--wasserstein", action="store_true",
                   help="print the Wasserstein-1 (earth mover's) distance in ground metres between the two point sets "
                        "instead: no rows are matched, so it also compares a synthetic set (needs pip install "
                        "'geopriv[metrics]')")
    r.add_argument("--json", action="store_true", help="print the statistics as one JSON object")
    r.add_argument("--html", nargs="?", const="", metavar="PATH",
                   help="also write the release report, one self-contained HTML file (guarantee, parameters, utility, "
                        "adversary error, maps of counts per cell): private, for the data holder, not for publication "
                        "(default PATH: RELEASED's name ending in .private-report.html)")
    r.add_argument("--bounds", type=float, nargs=4, metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
                   help="public area for the report's adversary and maps, in the true file's CRS (with --html; "
                        "default: the release's declared bounds)")
    r.add_argument("--population", metavar="RASTER",
                   help="population raster for the report's adversary (prior and k-equivalent; with --html)")
    r.add_argument("--map-cell", type=float, metavar="METRES",
                   help="grid step of the report's maps in ground metres, at least 100 (with --html; default: a round "
                        "step giving about 60 cells across)")
    r.add_argument("--overwrite", action="store_true", help="replace an existing --html report")
    r.set_defaults(func=_cmd_report)


def _measured_area_options(p, func) -> None:
    g = p.add_argument_group("public area and prior (no data is read)")
    g.add_argument("--bounds", type=float, nargs=4, metavar=("XMIN", "YMIN", "XMAX", "YMAX"), required=True,
                   help="public study area, chosen without looking at any data")
    g.add_argument("--crs", required=True, help="CRS of --bounds: a projected CRS in metres, e.g. EPSG:32650")
    _lib(g, func, "prior", choices=("uniform", "population"), help="where the adversary believes people are")
    _lib(g, func, "population", metavar="RASTER", help="population raster (for --prior population and the "
                                                          "k-equivalent)")
    _lib(g, func, "units", choices=("per_km2", "per_cell"), help="what the population raster holds")
    _lib(g, func, "cell", type=float, metavar="METRES", help="grid step in ground metres (default: the library's)")


def _adversary_arguments(a) -> None:
    import geopriv

    _privacy_options(a, geopriv.adversary_error, "privacy (give --level and --radius, or --epsilon per ground metre)")
    _measured_area_options(a, geopriv.adversary_error)
    a.add_argument("--map", metavar="FILE.tif", help="write the error map (and the k-equivalent map) as a GeoTIFF")
    a.add_argument("--overwrite", action="store_true", help="replace an existing --map file")
    a.add_argument("--json", action="store_true", help="print the numbers as one JSON object")
    a.set_defaults(func=_cmd_adversary)


def _calibrate_arguments(c) -> None:
    import geopriv
    from .adversary import CALIBRATION_TARGETS

    c.add_argument("target", choices=CALIBRATION_TARGETS, help="what to meet")
    c.add_argument("value", type=_number, help="metres (adversary_error: at least; displacement: at most) or people "
                                               "(k_equivalent: at least)")
    _measured_area_options(c, geopriv.calibrate)
    c.add_argument("--radius", type=_number, metavar="METRES", default=200.0,
                   help="also say the epsilon as a level within this radius (default 200)")
    c.add_argument("--curve", metavar="FILE.csv", help="write the curve (epsilon and the measures) as CSV")
    c.add_argument("--json", action="store_true", help="print the result as one JSON object")
    c.set_defaults(func=_cmd_calibrate)


def _cmd_adversary(args) -> int:
    import geopriv

    options = _given(args, ("level", "radius", "epsilon", "prior", "population", "units", "cell"))
    adv = geopriv.adversary_error(area=tuple(args.bounds), crs=args.crs, **options)
    if args.map:
        adv.to_raster(args.map, overwrite=args.overwrite)
    out = {"adversary_error_m": round(adv.expected_error_m, 3), "expected_displacement_m": round(adv.displacement_m, 3),
           "k_equivalent": None if adv.k_equivalent is None else round(adv.k_equivalent, 3),
           "epsilon_per_m": adv.parameters["epsilon_per_m"], "cell_m": adv.parameters["cell_m"],
           "grid_shape": adv.parameters["grid_shape"], "prior": adv.prior}
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

    options = _given(args, ("prior", "population", "units", "cell"))
    cal = geopriv.calibrate(args.target, args.value, area=tuple(args.bounds), crs=args.crs, **options)
    if args.curve:
        from .io import write_new_file

        text = cal.curve.to_csv(index=False)
        write_new_file(args.curve, lambda fh: fh.write(text.encode()))
    out = {"epsilon_per_m": cal.epsilon_per_m, "level": cal.level(args.radius), "radius_m": args.radius,
           "target": cal.target, "value": cal.value, "met": cal.met}
    if args.json:
        print(json.dumps(out))
        return 0 if cal.met else 1
    print(f"epsilon {cal.epsilon_per_m:.6g} per metre = ln {math.exp(cal.level(args.radius)):.4g} within "
          f"{args.radius:g} m")
    if not cal.met:
        print("no epsilon tried meets the target: this is the closest; change the target or the area", file=sys.stderr)
        return 1
    return 0


def _demo_arguments(d) -> None:
    d.add_argument("--out", default="out", help="output folder (default: out); its files are replaced")
    d.add_argument("--radius", type=float, default=50.0, help="metres within which the level is ln 4 (default 50)")
    d.add_argument("--seed", type=int, default=None, help="seed for a reproducible picture (default: OS entropy)")
    d.set_defaults(func=_cmd_demo)


# ---------------------------------------------------------------------------- counts: aggregate, heatmap, flows
_COUNT_PERSON_NEEDED = ("--budget-store charges every person once: name the column of stable person ids with --user "
                        "COLUMN (or --person COLUMN; the rows' numbers are not people)")


def _count_options(p, func, rows: str = "rows") -> None:
    """The options aggregate, heatmap and flows share: epsilon, persons, the hierarchy, --seed, the budget store."""
    g = p.add_argument_group(f"privacy (user level: one person with all of their {rows} added or removed)")
    g.add_argument("--epsilon", type=_number, required=True, metavar="TOTAL",
                   help="differential privacy loss of the whole release, dimensionless (total; not per metre, unlike "
                        "perturb's), e.g. 1 or ln3")
    _lib(g, func, "user", metavar="COLUMN",
         help=f"column of person ids: each person's {rows} are bounded by --max-per-user (default: every "
              f"{rows[:-1]} is its own person)")
    _lib(g, func, "max_per_user", type=int, metavar="K",
         help=f"most {rows} counted per person (needs --user), chosen at random, never by location; the noise grows "
              "in proportion")
    g = p.add_argument_group("noise and post-processing")
    _lib(g, func, "levels", type=_depth, metavar="auto|K",
         help="how epsilon is split over the public hierarchy of cells: auto gives 7/8 to the cells and 1/8 to the "
              "whole area's total; K measures K levels with equal shares (best where most cells are empty); 1: the "
              "cells only")
    g.add_argument("--no-nonnegative", dest="nonnegative", action="store_false", default=None,
                   help="release the raw noisy integer counts (some negative; unbiased) instead of counts >= 0 that "
                        "still add up")
    _lib(g, func, "rng", "--seed", type=int, metavar="SEED", show_default=False,
         help="seed (rng=) for reproducible tests and demos only; recorded as seeded (default: OS entropy)")
    _budget_options(p, func, "every person the release's epsilon once, however many of their "
                    f"{rows} are counted (unit epsilon: dimensionless, the budget synthesize spends)",
                    "column of stable person ids whose lifetime budgets --budget-store charges. It is the --user "
                    f"column (a person is charged once for all of their {rows}, so their {rows} are bounded by "
                    "--max-per-user): give either; needed with --budget-store unless --user is given")


def _count_area(g, func) -> None:
    _lib(g, func, "bounds", type=float, nargs=4, metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
         help="public study area in the input's CRS, chosen without looking at the points (a city's extent): the "
              "grid is anchored on its lower-left corner and every cell in it is released, empty or not; points "
              "outside it are refused, by row")
    g.add_argument("--region", help="vector file of the public polygon: only the cells meeting it are released (its "
                                    "bounding box is the area when --bounds is not given)")


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
    from . import io

    if args.person is not None and args.user is not None and args.person != args.user:
        raise CLIError("--person and --user name different columns: the person --budget-store charges is the --user "
                       "whose rows are bounded; give only --user")
    user = args.user if args.user is not None else args.person
    crs = _check_crs(args.crs)
    inputs = [args.input] + [path for path, _ in side if path is not None]
    io.check_input(args.input)
    for path, what in side:
        if path is not None:
            io.check_input(path, what)
    if raster:
        io.check_file_output(args.output, suffixes=(".tif", ".tiff"), what="heatmap", overwrite=args.overwrite,
                             protect=inputs)
    else:
        io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    _open_budget_store(args, None if user is not None else _COUNT_PERSON_NEEDED)

    gdf = _read(args.input, args.layer, crs, xy=args.xy)
    _check_columns(gdf, "input", (("--user" if args.user is not None else "--person", user),) + tuple(columns))
    kwargs = _given(args, ("max_per_user", "levels", "rng", "budget_store"))
    if user is not None:
        kwargs["user"] = user
    if args.nonnegative is False:
        kwargs["nonnegative"] = False
    return gdf, inputs, kwargs


def _count_done(args, rec, what: str, rows: str = "rows") -> None:
    """The lines on stderr after a count release: what was released and, with a store, what it charged."""
    who = "" if rec.get("user") is None else f" (column {rec['user']!r})"
    print(f"released {what} to {args.output}: epsilon {rec['epsilon']:.6g} for the whole release (dimensionless, user "
          f"level: one person with all of their {rows}), at most {rec['max_per_user']} {rows[:-1]}(s) per person{who}; "
          f"expected error of a cell's count {rec['expected_error']['median']:.3g} (median){_rng_note(rec)}",
          file=sys.stderr)
    store = getattr(args, "budget_store", None)
    if store is not None and rec.get("budget_store"):
        print(f"charged every person{who} {rec['charged_per_row']:.6g} {rec['budget_unit']} once in the budget store "
              f"{store.url}, before any noise was drawn ('geopriv budget show STORE' shows what is left)",
              file=sys.stderr)


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
    from . import io

    cells = _cells_file(args)
    gdf, inputs, kwargs = _count_start(args, [(args.region, "region"), (cells, "cells")])
    kwargs["cells"] = args.cells if cells is None else _read(cells, args.cells_layer, what="cells", flag=None,
                                                             layer_flag="--cells-layer")
    kwargs.update(_given(args, ("bounds", "suppress")))
    if args.region is not None:
        kwargs["region"] = _read(args.region, what="region", flag=None)
    out = geopriv.aggregate(gdf, args.epsilon, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    _count_done(args, rec, f"the counts of {len(out)} cell(s) ({rec['cells']})")
    return 0


def _cmd_heatmap(args) -> int:
    import geopriv

    gdf, _, kwargs = _count_start(args, [(args.region, "region")], raster=True)
    kwargs.update(_given(args, ("bounds", "values")))
    if args.region is not None:
        kwargs["region"] = _read(args.region, what="region", flag=None)
    hm = geopriv.heatmap(gdf, args.epsilon, resolution=args.resolution, path=args.output, overwrite=args.overwrite,
                         **kwargs)
    rows, cols = hm.values.shape
    _count_done(args, hm.record, f"a {cols} x {rows} heatmap ({hm.record['cells']}; band 1: {hm.unit}, band 2: its "
                                 "expected error)")
    return 0


def _cmd_flows(args) -> int:
    import geopriv
    from . import io
    from .exceptions import format_labels

    if (args.traj_id is None) != (args.time is None):
        raise CLIError("--traj-id and --time go together: the trip id and time stamp columns of trajectory points (a "
                       "trip runs from its earliest row to its latest); give neither for one line per trip")
    gdf, inputs, kwargs = _count_start(args, [(args.regions, "regions")],
                                       columns=(("--traj-id", args.traj_id), ("--time", args.time)))
    if args.traj_id is None:
        bad = (gdf.geom_type != "LineString").to_numpy()
        if bad.any():
            raise CLIError(f"{int(bad.sum())} row(s) of the input are not lines (labels {format_labels(gdf.index[bad])}"
                           "): give one line per trip, or trajectory points with --traj-id COLUMN --time COLUMN")
    regions = _read(args.regions, args.regions_layer, what="regions", flag=None, layer_flag="--regions-layer")
    _check_columns(regions, "regions file", (("--region-id", args.region_id),))
    kwargs.update(_given(args, ("traj_id", "time", "region_id", "outside")))
    out = geopriv.flows(gdf, args.epsilon, regions=regions, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    rec = out.attrs["geopriv"]
    _count_done(args, rec, f"the trip counts of {len(out)} origin-destination pairs of {rec['regions']} regions",
                rows="trips")
    return 0


def _aggregate_arguments(a) -> None:
    import geopriv

    ag = geopriv.aggregate
    a.add_argument("input", help="points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)")
    a.add_argument("output", help="the cells: one polygon per cell with cell, count and expected_error (and the "
                                  "attributes of a --cells file); format from the extension: .gpkg .geojson .json "
                                  ".fgb .shp .csv .parquet")
    g = a.add_argument_group("public cells (laid out without looking at the points)")
    g.add_argument("--cells", required=True, metavar="METRES|h3:RES|FILE",
                   help="a square grid step in CRS metres (e.g. 250; needs --bounds or --region), an H3 resolution "
                        "(h3:9; needs the h3 package) or a vector file of public polygons (districts), which are "
                        "then the public area")
    g.add_argument("--cells-layer", metavar="LAYER", help="layer of the --cells file, if it has several")
    _count_area(g, ag)
    _lib(g, ag, "suppress", type=int, metavar="N",
         help="release counts below N as 0 (post-processing; their expected error no longer applies)")
    _count_options(a, ag)
    _input_options(a)
    a.set_defaults(func=_cmd_aggregate)


def _heatmap_arguments(h) -> None:
    import geopriv

    hm = geopriv.heatmap
    h.add_argument("input", help="points (any OGR format: .gpkg, .shp, .geojson, .fgb, .csv with WKT, .parquet)")
    h.add_argument("output", help="GeoTIFF (.tif): band 1 the counts (or densities), band 2 their expected error; "
                                  "the provenance in its metadata")
    g = h.add_argument_group("public grid (laid out without looking at the points)")
    g.add_argument("--resolution", type=float, required=True, metavar="METRES",
                   help="cell size in the input's projected CRS metres, e.g. 100")
    _count_area(g, hm)
    _lib(g, hm, "values", choices=("count", "density"),
         help="release counts (int32, -1 outside --region) or counts per km2 (float32)")
    _count_options(h, hm)
    _input_options(h, out_layer=False)
    h.set_defaults(func=_cmd_heatmap)


def _flows_arguments(f) -> None:
    import geopriv

    fl = geopriv.flows
    f.add_argument("input", help="trajectory points (with --traj-id and --time) or one line per trip (any OGR "
                                 "format, .parquet)")
    f.add_argument("output", help="the flows: one line per ordered pair of regions with origin, destination, count "
                                  "and expected_error; format from the extension: .gpkg .geojson .json .fgb .shp "
                                  ".csv .parquet")
    g = f.add_argument_group("trips and public regions")
    g.add_argument("--regions", required=True, metavar="FILE",
                   help="vector file of public polygons (districts, zones; reprojected to the input's CRS): a trip "
                        "end falls in the first region that holds it")
    g.add_argument("--regions-layer", metavar="LAYER", help="layer of the --regions file, if it has several")
    _lib(g, fl, "region_id", metavar="COLUMN", help="column of --regions naming the regions in the output (default: "
                                                    "their row numbers 0, 1, 2, ...)")
    _lib(g, fl, "traj_id", metavar="COLUMN", help="trip id column of trajectory points (with --time); not for lines")
    _lib(g, fl, "time", metavar="COLUMN", help="time stamp column: a trip runs from its earliest row to its latest")
    _lib(g, fl, "outside", choices=("refuse", "drop"),
         help="trips starting or ending outside every region: stop, naming the trips, or leave them out")
    _count_options(f, fl, rows="trips")
    _input_options(f)
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


# ---------------------------------------------------------------------------- errors and warnings
def _message(exc: BaseException) -> str:
    """The one line printed for ``exc``: :func:`geopriv.exceptions.user_message` (shared with QGIS)."""
    return user_message(exc, "cli", debug_hint="set GEOPRIV_TRACEBACK=1 to see it")


_SHOWN: set = set()
#: warning lines of this run, printed once the command has succeeded (a failed run says one thing: its error)
_PENDING: list = []


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """One line per warning on stderr once the command succeeded: geopriv's text (with the command line's advice);
    for other libraries' warnings, their type and origin once."""
    from .exceptions import GeoprivWarning

    try:
        ours = issubclass(category, GeoprivWarning) or Path(filename).resolve().is_relative_to(_PACKAGE_DIR)
    except (OSError, ValueError):  # pragma: no cover
        ours = False
    if ours:  # with the command line's advice when it carries a fix (a GeoprivWarning instance)
        text = " ".join((user_message(message, "cli") if isinstance(message, GeoprivWarning) else str(message)).split())
    else:
        parts = Path(filename).parts
        origin = parts[parts.index("site-packages") + 1] if "site-packages" in parts[:-1] else Path(filename).stem
        text = f"{category.__name__} from {origin} (details withheld: they may quote data values; GEOPRIV_TRACEBACK=1 shows them)"
    if text in _SHOWN:
        return
    _SHOWN.add(text)
    _PENDING.append(f"geopriv: warning: {text}")


def _sigterm_as_interrupt():
    """SIGTERM (timeout, systemd, CI) cleans up like Ctrl-C: staged files are removed, nothing replaced."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # pragma: no cover - signals need the main thread
        return

    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # pragma: no cover
        pass


def main(argv=None) -> int:
    """Run the command line; returns the exit code (0, or 2 for bad input)."""
    _sigterm_as_interrupt()
    try:  # parsing a command's options imports the library: Ctrl-C there is no traceback either
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:
        print("geopriv: interrupted; no output was written or replaced", file=sys.stderr)
        return EXIT_INTERRUPTED
    debug = os.environ.get("GEOPRIV_TRACEBACK", "") not in ("", "0")
    _SHOWN.clear()
    _PENDING.clear()
    try:
        with warnings.catch_warnings():
            from .exceptions import GeoprivWarning

            warnings.simplefilter("default", GeoprivWarning)  # shown once, as one line, never raised
            if not debug:
                warnings.showwarning = _show_warning
            code = args.func(args)
        for line in _PENDING:
            print(line, file=sys.stderr)
        return code
    except KeyboardInterrupt:
        charged = hasattr(getattr(args, "budget_store", None), "close")  # a release interrupted once noise was drawn
        print("geopriv: interrupted; no output was written or replaced" + (
            "; a budget the store charged before the noise was drawn stays charged ('geopriv budget show STORE')"
            if charged else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `geopriv budget show STORE | head`: the reader left, nothing is wrong
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except Exception as exc:  # one line, never a traceback: see _message for what is shown
        if debug:
            raise
        print(f"geopriv: error: {_message(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        store = getattr(args, "budget_store", None)  # opened by _open_budget_store
        if hasattr(store, "close"):
            store.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
