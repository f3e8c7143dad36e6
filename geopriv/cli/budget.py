"""geopriv budget grant|show|export: lifetime budgets per person."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from pathlib import Path

from .common import CLIError, number_arg
from .diffuse import read_table

# ---------------------------------------------------------------------------- lifetime budgets (geopriv budget)
#: rows 'geopriv budget show' prints unless --all
_SHOW_ROWS = 20
_BUDGET_TABLES = ("balances", "releases", "charges", "grants")


def _budget_unit(text: str) -> str:
    """A budget unit (geopriv.budget.UNITS, or epsilon per unit of a diffused value's column)."""
    from ..budget.store import PER_METRE, PURE, check_unit, value_unit
    from ..exceptions import ParameterError

    try:
        return check_unit(text)
    except ParameterError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a budget unit: give {PER_METRE} (epsilon per ground metre: perturb, sanitize-traces, "
            f"diffuse), {PURE} (dimensionless: synthesize) or '{value_unit('COLUMN')}' (a value released by diffuse "
            "--value)"
        ) from None


def _open_store(url):
    """The budget commands' STORE (a missing SQLite file: how to create it)."""
    from ..budget import BudgetStore
    from ..budget.store import parse_store_url

    kind, target = parse_store_url(url)
    if kind == "sqlite" and not Path(target).exists():
        raise CLIError(
            f"there is no budget store at {target}: create it with 'geopriv budget grant {target} --unit "
            "epsilon/m --total T' (a default for everyone), or check the path"
        )
    return BudgetStore(url)


def _read_person_ids(path, column, layer):
    """The ids in ``column`` of a table (CSV: read as text; GDAL tables, .parquet), as a list; none may be empty."""
    import pandas as pd

    from .. import io

    io.check_input(path, "--persons-from")
    table = read_table(path, layer, "--layer", "the one with the ids with --layer NAME")
    names = {str(c): c for c in table.columns}
    if column not in names:
        raise CLIError(
            f"--persons-from {path} has no column {column!r} (--column); its columns are: "
            + (", ".join(repr(n) for n in names) or "none")
        )
    ids = table[names[column]]
    empty = ids.isna().to_numpy() | (ids.astype(str).str.strip() == "").to_numpy()
    if empty.any():
        raise CLIError(
            f"--persons-from: {int(empty.sum())} id(s) of column {column!r} are empty (first at data row "
            f"{int(empty.argmax()) + 1}); every entry must name a person"
        )
    if pd.api.types.is_float_dtype(ids.dtype):
        if not bool((ids % 1 == 0).all()):  # not shown: decimals may be coordinates
            raise CLIError(
                f"--persons-from: column {column!r} holds decimal numbers, not person ids (integers or text)"
            )
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
    from ..budget import BudgetStore
    from ..budget.store import parse_store_url
    from ..exceptions import BudgetStoreError

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
        print(
            f"set the default lifetime budget in {args.unit} to {args.total:.6g} in {url}: persons first charged "
            "from now on start with it; persons the store has already seen keep theirs",
            file=sys.stderr,
        )
    else:
        print(
            f"set the lifetime budget in {args.unit} of {len(set(map(str, persons)))} person(s) to {args.total:.6g} "
            f"in {url} (what a person already used stays used: a total below it leaves them exhausted)",
            file=sys.stderr,
        )
    return 0


def _table_text(frame, numeric) -> list[str]:
    """Plain text rows of ``frame``: text columns left-aligned, ``numeric`` ones right-aligned in 6 digits."""
    cells = [
        [f"{v:.6g}" if c in numeric else str(v) for c, v in zip(frame.columns, row)]
        for row in frame.itertuples(index=False)
    ]
    widths = [max([len(str(c))] + [len(r[i]) for r in cells]) for i, c in enumerate(frame.columns)]

    def line(values):
        return "  ".join(
            v.rjust(w) if c in numeric else v.ljust(w) for v, w, c in zip(values, widths, frame.columns)
        ).rstrip()

    return [line([str(c) for c in frame.columns])] + [line(r) for r in cells]


def _cmd_budget_show(args) -> int:
    persons = list(args.persons) if args.persons else None
    with _open_store(args.store) as store:
        info = store.info()
        defaults = store.defaults()
        table = store.balances(unit=args.unit, persons=persons)
    releases = info["releases"]
    print(
        f"budget store {info['url']} (schema {info['schema_version']}, created with geopriv "
        f"{info['created_with']}): {info['persons']} person(s); releases: "
        + ", ".join(f"{n} {state}" for state, n in releases.items())
    )
    print(
        "default lifetime budget of persons not yet seen: "
        + ", ".join(
            f"{u} {'none (a grant per person)' if d is None or math.isnan(d) else format(d, '.6g')}"
            for u, d in zip(defaults["unit"], defaults["default_total"])
        )
    )
    if releases.get("reserved"):
        print(
            f"note: {releases['reserved']} release(s) in state 'reserved' are still charged: a release that did not "
            "finish (a process that stopped mid-release), or one running now; their worst case stays charged "
            "('geopriv budget export STORE releases.csv --what releases' lists them)"
        )
    if table.empty:
        print(
            "no balances"
            + (
                " match --unit/--person"
                if args.unit or persons
                else ": no person has been granted a budget or charged yet"
            )
        )
        return 0
    text = table["person"].map(lambda p: isinstance(p, str))
    keys = table.assign(
        _u=table["unit"].map({u: i for i, u in enumerate(dict.fromkeys(table["unit"]))}),
        _t=text,
        _n=table["person"].where(~text, 0).astype("int64"),
        _s=table["person"].where(text, ""),
    )
    table = table.loc[keys.sort_values(["_u", "remaining", "_t", "_n", "_s"], kind="stable").index]  # numbers, text
    shown = table if args.all else table.head(_SHOW_ROWS)
    print(f"balances ({len(table)} row(s), least remaining first):")
    for text in _table_text(shown, {"total", "spent", "reserved", "remaining"}):
        print("  " + text)
    if len(shown) < len(table):
        print(
            f"  ... and {len(table) - len(shown)} more row(s): --all shows every row; 'geopriv budget export' writes "
            "them to a CSV file"
        )
    return 0


def _cmd_budget_export(args) -> int:
    from .. import io

    with _open_store(args.store) as store:
        protect = [store.url[len("sqlite:///") :]] if store.kind == "sqlite" else []
        dest = io.check_file_output(
            args.output, suffixes=(".csv",), what="export", overwrite=args.overwrite, protect=protect
        )
        frame = getattr(store, args.what)()
        url = store.url
    with io.Staging() as stage:  # a temporary file beside OUT, moved into place (os.replace) when written
        stage.file(dest, lambda tmp: _write_private_csv(frame, tmp), overwrite=args.overwrite)
        stage.commit()
    print(f"wrote {len(frame)} row(s) of {args.what} from {url} to {args.output}", file=sys.stderr)
    return 0


def _write_private_csv(frame, path) -> None:
    """A CSV readable by its owner only: balances, charges and grants list who is in the data."""
    frame.to_csv(path, index=False)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)


def budget_arguments(b) -> None:
    sub = b.add_subparsers(dest="budget_command", required=True, metavar="ACTION")
    sub.add_parser(
        "grant",
        help="set lifetime budgets: the default for everyone, or some persons' (creates the store)",
        description="Set lifetime budgets in a store: geopriv.BudgetStore(url, create=True).grant(...). "
        "Without --person or --persons-from it sets the DEFAULT of the unit: every person not "
        "yet seen in that unit starts with it. Creates the store if it does not exist (and "
        "says so). Every grant is kept in the store's audit.",
        epilog=EPILOG_BUDGET,
        arguments=_budget_grant_arguments,
    )
    sub.add_parser(
        "show",
        help="what each person has left, and the store's audit in one line",
        description="Show a store's balances (person, unit, total, spent, reserved, remaining; least "
        "remaining first) and a summary: geopriv.BudgetStore.balances() and info().",
        epilog=EPILOG_BUDGET,
        arguments=_budget_show_arguments,
    )
    sub.add_parser(
        "export",
        help="write balances, releases, charges or grants to a CSV file",
        description="Write one of a store's tables to a CSV file (written beside it, then moved into "
        "place): geopriv.BudgetStore.balances(), releases(), charges() or grants().",
        epilog=EPILOG_BUDGET,
        arguments=_budget_export_arguments,
    )


def _store_argument(p, creates: bool = False) -> None:
    p.add_argument(
        "store",
        metavar="STORE",
        help="the store's URL (sqlite:///budgets.db, sqlite:////abs/budgets.db, postgresql://user@host/db) "
        "or a SQLite file's path" + ("; created if it does not exist" if creates else "; it must exist"),
    )


def _budget_grant_arguments(g) -> None:
    _store_argument(g, creates=True)
    g.add_argument(
        "--unit",
        required=True,
        type=_budget_unit,
        metavar="{epsilon/m,epsilon}",
        help="the budget's unit: epsilon/m (epsilon per ground metre: perturb, sanitize-traces, diffuse) "
        "or epsilon (dimensionless: synthesize); units are kept apart, a budget in one never pays "
        "for a release in the other",
    )
    g.add_argument(
        "--total",
        required=True,
        type=number_arg,
        metavar="T",
        help="the lifetime budget, in --unit, e.g. ln4/50 (epsilon/m: ln 4 within 50 m, for life) or 1",
    )
    g.add_argument(
        "--person",
        dest="persons",
        nargs="+",
        action="extend",
        metavar="ID",
        help="person ids (as in the releases' --person column) whose total is set (repeatable); a total "
        "below what a person already used leaves them exhausted",
    )
    g.add_argument(
        "--persons-from", metavar="FILE", help="also the ids in --column of this table (CSV, GeoPackage, .parquet, ...)"
    )
    g.add_argument("--column", metavar="COLUMN", help="the column of --persons-from holding the person ids")
    g.add_argument("--layer", help="layer of --persons-from, if it has several")
    g.add_argument("--note", metavar="TEXT", help="why (kept in the store's audit of grants)")
    g.set_defaults(func=_cmd_budget_grant)


def _budget_show_arguments(s) -> None:
    _store_argument(s)
    s.add_argument("--unit", type=_budget_unit, metavar="{epsilon/m,epsilon}", help="only this unit's balances")
    s.add_argument(
        "--person",
        dest="persons",
        nargs="+",
        action="extend",
        metavar="ID",
        help="only these persons' balances (repeatable)",
    )
    s.add_argument("--all", action="store_true", help=f"every row (default: the first {_SHOW_ROWS})")
    s.set_defaults(func=_cmd_budget_show)


def _budget_export_arguments(e) -> None:
    _store_argument(e)
    e.add_argument("output", metavar="OUT.csv", help="the CSV file to write")
    e.add_argument(
        "--what",
        choices=_BUDGET_TABLES,
        default="balances",
        help="balances (per person and unit), releases (the audit: one row per release, public "
        "parameters only), charges (epsilon per person and release) or grants (default: balances)",
    )
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
