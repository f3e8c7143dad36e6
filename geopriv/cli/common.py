"""What every command shares: the parser class, argument types, library defaults in --help, a
command's options as a table (:class:`Arg`, :class:`ArgGroup`), reading inputs, the privacy and
release options, budget-store options."""

from __future__ import annotations

import argparse
import inspect
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import UsageError
from ..parsing import parse_number

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the geopriv package (its data, its warnings)


class CLIError(UsageError):
    """A user-facing error about the command line's options: printed as one line."""


class Parser(argparse.ArgumentParser):
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
def number_arg(text: str) -> float:
    """A number, also written ``ln4``, ``ln(4)``, ``log(4)`` and divided: ``ln4/200`` (geopriv.parsing)."""
    try:
        return parse_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def grid_arg(text: str):
    """``auto`` or a number (--grid, --margin)."""
    return "auto" if str(text).strip().lower() == "auto" else number_arg(text)


class _NoneGiven:
    """``none`` given on the command line: pass None to the library (not the same as not given)."""

    def __repr__(self):
        return "none"


NONE = _NoneGiven()


def depth_arg(text: str):
    """``auto`` or a whole number of tree levels."""
    t = str(text).strip().lower()
    if t == "auto":
        return "auto"
    try:
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a depth: {text!r} (give 'auto' or a whole number of levels, e.g. 8)"
        ) from None


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


def library_option(group, func, name, *flags, help, show_default=True, **kwargs):
    """An option for ``func``'s parameter ``name``: not passed unless given; help shows the library default."""
    default = _default(func, name)
    if show_default and default not in (_UNSET, None) and kwargs.get("action") not in ("store_true",):
        help = f"{help} (default: {_show(default)})"
    flags = flags or ("--" + name.replace("_", "-"),)
    kwargs.setdefault("default", None)
    group.add_argument(*flags, dest=name, help=help, **kwargs)


@dataclass(frozen=True)
class Arg:
    """One option (or positional argument) of a command, as data: a row of the command's table.

    A command's options are a table of these rather than a run of ``add_argument`` calls, so each
    reads as what it is (its flags, its help, its type) and a long command stays one screen of
    code.  ``param`` makes it a :func:`library_option`: the library parameter it is passed as
    (its ``dest``), not passed unless given, its default in ``--help`` read from the signature of
    the command's library function (or of ``of``, a public name of geopriv such as
    ``"epsilon_of_distance"``).  ``choices`` may be a function returning them, for choices the
    library defines (read when the command's options are added, not when the parser is built).
    """

    flags: tuple[str, ...]
    help: str
    param: str | None = None
    of: str | None = None
    type: Callable | None = None
    nargs: int | str | None = None
    metavar: str | tuple[str, ...] | None = None
    choices: tuple | Callable | None = None
    action: str | None = None
    required: bool = False
    dest: str | None = None
    show_default: bool = True

    def add_to(self, group, func=None) -> None:
        """Add this option to ``group`` (a parser or an argument group); ``func``: the command's library function."""
        kwargs = {
            key: value
            for key, value in (
                ("type", self.type),
                ("nargs", self.nargs),
                ("metavar", self.metavar),
                ("action", self.action),
                ("dest", self.dest),
            )
            if value is not None
        }
        if self.choices is not None:
            kwargs["choices"] = self.choices() if callable(self.choices) else self.choices
        if self.required:
            kwargs["required"] = True
        if self.param is None:
            group.add_argument(*self.flags, help=self.help, **kwargs)
            return
        if self.of is not None:
            import operator

            import geopriv

            func = operator.attrgetter(self.of)(geopriv)
        library_option(group, func, self.param, *self.flags, help=self.help, show_default=self.show_default, **kwargs)


@dataclass(frozen=True)
class ArgGroup:
    """A titled group of a command's options (``title`` None: the options of the parser itself)."""

    title: str | None
    args: tuple[Arg, ...]


def add_args(parser, groups, func=None) -> None:
    """Add a table of options to ``parser``, group by group in order (``func``: as in :meth:`Arg.add_to`)."""
    for group in groups:
        target = parser if group.title is None else parser.add_argument_group(group.title)
        for arg in group.args:
            arg.add_to(target, func)


#: the --seed option of every release: the library's rng=
SEED = Arg(
    ("--seed",),
    "seed (rng=) for reproducible tests and demos only; recorded as seeded (default: OS entropy)",
    param="rng",
    type=int,
    metavar="SEED",
    show_default=False,
)
#: --max-distortion, as every release that fixes a planar frame takes it
MAX_DISTORTION = Arg(
    ("--max-distortion",),
    "largest scale variation of a projected CRS over the public area for which it is used as is",
    param="max_distortion",
    type=float,
)


def given_options(args, names) -> dict:
    """The options among ``names`` the user gave (None/False: not given, so the library default applies)."""
    out = {}
    for name in names:
        value = getattr(args, name, None)
        if value is None or value is False:
            continue
        out[name] = None if value is NONE else tuple(value) if isinstance(value, list) else value
    return out


# ---------------------------------------------------------------------------- shared checks
def check_privacy(args) -> None:
    """--epsilon or --level with --radius: refused before any work when contradictory or incomplete."""
    if args.epsilon is not None and (args.level is not None or args.radius is not None):
        raise CLIError("give either --epsilon, or --level with --radius, not both")
    if args.epsilon is None:
        if args.level is not None and args.radius is None:
            raise CLIError("--level needs --radius (metres): e.g. --level ln4 --radius 200")
        if args.radius is not None and args.level is None:
            raise CLIError("--radius needs --level: e.g. --level ln4 --radius 200")
        if args.level is None:
            raise CLIError(
                "say how much privacy: --epsilon E (per metre), or --level L with --radius R "
                "(e.g. --level ln4 --radius 200)"
            )
    from ..mechanisms.planar_laplace import check_epsilon

    for flag, value in (("--epsilon", args.epsilon), ("--level", args.level), ("--radius", args.radius)):
        if value is not None:  # the library's check (its message names the option; main shows the cli advice)
            check_epsilon(value, flag[2:])


def privacy_kwargs(args) -> dict:
    if args.epsilon is not None:
        return {"epsilon": args.epsilon}
    return {"level": args.level, "radius": args.radius}


def check_crs(value):
    if value is None:
        return None
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        return CRS.from_user_input(value)
    except CRSError:
        raise CLIError(
            f"the CRS {value!r} is not one pyproj knows (give e.g. EPSG:4326, 32631 or a WKT file's text)"
        ) from None


def read_points(path, layer=None, crs=None, what="input", flag="--crs", xy=None, layer_flag="--layer"):
    """geopriv.io.read_vector, with the command line's hints for files without a CRS and for layers."""
    from ..exceptions import InputError
    from ..io import read_vector

    try:
        gdf = read_vector(path, layer, crs=crs, what=what, xy=xy)
    except InputError as exc:  # the layers (file structure, not data) and the option that chooses one
        if getattr(exc, "layers", None) is None or layer_flag == "--layer":
            raise
        raise CLIError(f"{exc.problem}; choose one with {layer_flag} NAME") from None
    if gdf.crs is None:
        fix = (
            f"give the CRS its coordinates are in with {flag}, e.g. {flag} EPSG:4326 for longitude/latitude"
            if flag
            else "give a file that has one (GeoPackage, GeoJSON, Shapefile with .prj, ...)"
        )
        raise CLIError(f"the {what} file {path} has no CRS (CSV files never have one): {fix}")
    return gdf


def rng_note(record) -> str:
    return " [seeded: reproducible, not for real releases]" if record.get("seeded") else ""


def _shuffle_generator():
    """What --shuffle draws from: fresh OS entropy on every run, never --seed (tests replace this function)."""
    import numpy as np

    return np.random.default_rng()


def release_rows(gdf, args, needed=()):
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
            raise CLIError(
                "--shuffle and --keep '<row order>' contradict each other: shuffle the rows, or keep their "
                "order deliberately"
            )
        order = _shuffle_generator().permutation(len(gdf))
        gdf = gdf.iloc[order].reset_index(drop=True)
    return gdf


def mark_shuffled(out, args):
    """Record in the release's provenance that its rows were shuffled (not how: the permutation is gone)."""
    if getattr(args, "shuffle", False):
        out.attrs["geopriv"] = dict(out.attrs["geopriv"], row_order="shuffled")
    return out


def rows_note(args) -> str:
    parts = []
    if getattr(args, "drop", None):
        parts.append(f"without column(s) {', '.join(dict.fromkeys(args.drop))}")
    if getattr(args, "shuffle", False):
        parts.append("rows in a random order")
    return f" ({'; '.join(parts)})" if parts else ""


# ---------------------------------------------------------------------------- perturb
PERSON_NEEDED = (
    "--budget-store charges each row's person: name the column of stable person ids with --person COLUMN "
    "(the rows' numbers are not people: deleting a row would hand its budget to the next one)"
)


def budget_options(p, func, charged: str, person: str) -> None:
    """--budget-store and --person: ``func``'s ``budget_store=`` and ``person=`` (the same names as in Python)."""
    g = p.add_argument_group("lifetime budget per person (a store kept with 'geopriv budget')")
    library_option(
        g,
        func,
        "budget_store",
        metavar="URL",
        show_default=False,
        help=f"charge {charged} to their lifetime budget in this store, after every check and BEFORE any noise is "
        "drawn: the store's URL (sqlite:///budgets.db, sqlite:////abs/budgets.db, postgresql://user@host/db) "
        "or a SQLite file's path. The store must exist (create it with 'geopriv budget grant'). A person who "
        "cannot afford the release is named, and nothing is drawn or charged (default: no store, nothing "
        "charged)",
    )
    library_option(g, func, "person", metavar="COLUMN", show_default=False, help=person)


def open_budget_store(args, person_needed: str | None = None) -> None:
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
    from ..budget import BudgetStore

    args.budget_store = BudgetStore(args.budget_store)


def check_person(gdf, args) -> None:
    """--person names an attribute column of the input (checked before anything is charged)."""
    person = getattr(args, "person", None)
    if person is not None and (person not in gdf.columns or person == gdf.geometry.name):
        shown = ", ".join(repr(str(c)) for c in gdf.columns if c != gdf.geometry.name) or "none"
        raise CLIError(f"--person {person!r}: the input has no such column; its columns are: {shown}")


def charge_note(rec, args, who: str = "each row's person") -> None:
    """One line on stderr saying what a release charged, and to which store (its URL, never a password)."""
    store = getattr(args, "budget_store", None)
    if store is None or not rec.get("budget_store"):
        return
    per_row = rec.get("charged_per_row")
    how = f"{per_row:.6g} {rec['budget_unit']} per row" if per_row is not None else f"in {rec['budget_unit']}"
    print(
        f"charged {who} {how} in the budget store {store.url}, before any noise was drawn ('geopriv budget show "
        "STORE' shows what is left)",
        file=sys.stderr,
    )


# ---------------------------------------------------------------------------- the parser
def input_options(p, out_layer: bool = True) -> None:
    g = p.add_argument_group("files")
    g.add_argument("--layer", help="input layer (files with several layers need it)")
    g.add_argument("--crs", help="CRS the input's coordinates are in, for files without one (CSV) or with a wrong one")
    g.add_argument(
        "--xy",
        nargs=2,
        metavar=("X_COLUMN", "Y_COLUMN"),
        help="build the input points from these two columns instead of the file's geometry, e.g. a CSV "
        "of longitude/latitude: --xy lon lat --crs EPSG:4326 (the true values are not released; a CSV output "
        "holds the released coordinates in the same two columns)",
    )
    if out_layer:
        g.add_argument(
            "--out-layer", help="GeoPackage output layer (default: the file name); the file's other layers are kept"
        )
    g.add_argument(
        "--overwrite",
        action="store_true",
        help="replace existing outputs (GeoPackage: only the layer written); a new layer may be added to "
        "an existing GeoPackage without it",
    )


def privacy_options(p, func, title, whole: str = "") -> None:
    g = p.add_argument_group(title)
    g.add_argument(
        "--level",
        type=number_arg,
        help=f"privacy level{whole} within --radius, e.g. ln4 or 1.386 (dimensionless: the log of a probability ratio)",
    )
    g.add_argument("--radius", type=number_arg, metavar="METRES", help="radius in ground metres for --level, e.g. 200")
    g.add_argument(
        "--epsilon",
        type=number_arg,
        metavar="PER_METRE",
        help=f"instead of --level/--radius: privacy loss{whole} per ground metre (= level / radius), e.g. "
        "ln4/200 = 0.0069; ln4 alone would be ln 4 within 1 m, almost no protection",
    )


def rows_options(p, shuffle: bool = True) -> None:
    g = p.add_argument_group("rows and columns released" if shuffle else "columns read")
    g.add_argument(
        "--drop",
        action="append",
        metavar="COLUMN",
        help="leave this attribute column out of the release, e.g. one that holds the true locations (repeatable)"
        if shuffle
        else "leave this column out of the input, e.g. a second geometry column (repeatable)",
    )
    if not shuffle:
        return
    g.add_argument(
        "--shuffle",
        action="store_true",
        help="release the rows in a random order (fresh OS entropy, not --seed; renumbered, the old order "
        "is not kept anywhere), for inputs listed in a spatial order; 'geopriv report' then needs --id",
    )


def release_options(p, func) -> None:
    g = p.add_argument_group("public frame and output lattice")
    library_option(
        g,
        func,
        "grid",
        type=grid_arg,
        metavar="METRES|auto",
        help="step in ground metres of the public lattice outputs are snapped to ('auto': 1 m, finer for large epsilon)",
    )
    library_option(
        g,
        func,
        "continuous",
        action="store_true",
        help="release unrounded coordinates (no finite-precision bound; not recommended)",
    )
    library_option(
        g,
        func,
        "bounds",
        type=float,
        nargs=4,
        metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
        help="public study area in the input's CRS, chosen without looking at the points (default: the CRS's area of use)",
    )
    library_option(
        g,
        func,
        "keep",
        action="append",
        metavar="COLUMN",
        help="keep a location-like attribute column deliberately (repeatable); such columns are refused otherwise",
    )
    library_option(
        g,
        func,
        "max_distortion",
        type=float,
        help="largest scale variation of a projected CRS over the public area for which it is used as is",
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
