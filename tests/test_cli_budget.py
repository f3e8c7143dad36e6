"""Lifetime budgets on the command line: ``--budget-store``/``--person`` on every release command and ``geopriv budget``.

Everything runs the real command line (:func:`geopriv.cli.main`, as a user would, or a fresh
interpreter where imports matter) on real files: the shipped Soho deaths (324 rows, a unique
integer ``Id`` per person), real SQLite stores in ``tmp_path`` and, once, a real PostgreSQL
server (``pg_url``).  No test depends on the noise drawn: the charges are functions of the public
parameters only (the effective epsilon on the lattice), read back from the release's own record.
"""

from __future__ import annotations

import inspect
import json
import math
import subprocess
import sys
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest

import geopriv

from .conftest import ROOT
from .test_cli import one_line_error, run

SOHO = Path(geopriv.__file__).parent / "data" / "soho_cholera.gpkg"
LN4_200 = ["--level", "ln4", "--radius", "200"]
#: Soho in EPSG:3857, declared without looking at the points (round numbers around the district)
BOUNDS = ["-16500", "6711000", "-14000", "6714000"]
RELEASE_COMMANDS = ["perturb", "synthesize", "sanitize-traces", "diffuse"]


def perturb(out, store, *extra):
    return ["perturb", SOHO, out, "--layer", "deaths", *LN4_200, "--budget-store", store, *extra]


def record(path) -> dict:
    return json.loads(pyogrio.read_info(path)["layer_metadata"]["geopriv"])


def balances(store, **kwargs) -> pd.DataFrame:
    with geopriv.BudgetStore(store) as s:
        return s.balances(**kwargs)


def releases(store) -> pd.DataFrame:
    with geopriv.BudgetStore(store) as s:
        return s.releases()


@pytest.fixture
def store(tmp_path, capsys):
    """A new SQLite store (a plain path) whose default is ln 4 within 150 m per person, in epsilon/m: one release at
    ln 4 within 200 m fits, two do not (deterministic: the charges are public functions of the parameters)."""
    path = tmp_path / "budgets.db"
    code, _, err = run(capsys, "budget", "grant", path, "--unit", "epsilon/m", "--total", "ln4/150", "--note", "test")
    assert code == 0, err
    assert f"created the budget store sqlite:///{path}" in err and "default lifetime budget" in err
    return path


# ---------------------------------------------------------------------------- perturb until refused
def test_grant_then_perturb_twice_until_the_store_refuses(capsys, tmp_path, store):
    first = tmp_path / "first.gpkg"
    code, _, err = run(capsys, *perturb(first, store, "--person", "Id"))
    assert code == 0, err
    assert "charged each row's person" in err and f"sqlite:///{store}" in err and "before any noise" in err
    charged = record(first)["charged_per_row"]
    assert record(first)["budget_unit"] == "epsilon/m" and record(first)["budget_store"] == "sqlite"
    assert math.log(4) / 200 <= charged < math.log(4) / 150  # the effective epsilon on the lattice
    table = balances(store)
    assert len(table) == 324 and set(table["person"]) == set(range(324))
    assert np.allclose(table["spent"], charged) and np.allclose(table["total"], math.log(4) / 150)

    second = tmp_path / "second.gpkg"
    code, _, err = run(capsys, *perturb(second, store, "--person", "Id"))
    assert code == 2
    line = one_line_error(
        err,
        "324 person(s) would exceed their lifetime budget in 'epsilon/m'",
        "0, 1, 2",
        "Nothing was drawn or charged",
        "geopriv budget grant",
    )
    assert "store.grant" not in line  # the command line's advice, not Python's
    assert not second.exists()
    assert np.allclose(balances(store)["spent"], charged)  # the refusal charged nothing
    assert list(releases(store)["state"]) == ["charged"]


def test_a_refusal_names_the_persons_who_cannot_afford_it(capsys, tmp_path, store):
    code, _, err = run(
        capsys, "budget", "grant", store, "--unit", "epsilon/m", "--total", "ln4/1000", "--person", "7", "--person", "3"
    )
    assert code == 0, err
    assert "of 2 person(s)" in err
    out = tmp_path / "out.gpkg"
    code, _, err = run(capsys, *perturb(out, store, "--person", "Id"))
    assert code == 2
    one_line_error(err, "2 person(s) would exceed their lifetime budget", ": 3, 7 (")
    assert not out.exists() and (balances(store)["spent"] == 0).all() and releases(store).empty


def test_perturb_needs_a_person_column_and_an_existing_store(capsys, tmp_path, store):
    out = tmp_path / "out.gpkg"
    code, _, err = run(capsys, *perturb(out, store))  # the rows' numbers are not people
    one_line_error(err, "--person COLUMN", "numbers are not people")
    code, _, err = run(capsys, *perturb(out, store, "--person", "pid"))
    one_line_error(err, "--person 'pid'", "'Id', 'Count'")
    code, _, err = run(capsys, "perturb", SOHO, out, "--layer", "deaths", *LN4_200, "--person", "Id")
    one_line_error(err, "give --budget-store")
    code, _, err = run(capsys, *perturb(out, store, "--person", "Id", "--drop", "Id"))
    one_line_error(err, "--drop 'Id'", "--person column")
    missing = tmp_path / "nowhere" / "budgets.db"
    code, _, err = run(
        capsys, "perturb", SOHO, out, "--layer", "deaths", *LN4_200, "--budget-store", missing, "--person", "Id"
    )
    assert code == 2
    one_line_error(err, "no budget store", "geopriv budget grant")
    assert not missing.exists() and not missing.parent.exists()  # a mistyped path never starts a new store
    assert not out.exists() and releases(store).empty


def test_sqlite_urls_and_plain_paths_name_the_same_store(capsys, tmp_path, store, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.gpkg"
    code, _, err = run(capsys, *perturb(out, f"sqlite:///{store.name}", "--person", "Id"))  # relative URL
    assert code == 0, err
    code, text, err = run(capsys, "budget", "show", f"sqlite:////{store}")  # absolute URL
    assert code == 0, err
    assert "324 person(s)" in text and "1 charged" in text


# ---------------------------------------------------------------------------- show and export
def test_show_summarises_and_lists_at_most_20_rows(capsys, tmp_path, store):
    code, _, err = run(capsys, *perturb(tmp_path / "a.gpkg", store, "--person", "Id"))
    assert code == 0, err
    code, text, err = run(capsys, "budget", "show", store)
    assert code == 0, err
    lines = text.splitlines()
    assert (
        lines[0].startswith(f"budget store sqlite:///{store} (schema {geopriv.budget.SCHEMA_VERSION}")
        and "324 person(s)" in lines[0]
    )
    assert "releases: 1 charged, 0 reserved, 0 settled, 0 cancelled" in lines[0]
    assert "epsilon/m 0.00924196" in lines[1]  # the default, ln4/150
    header = next(
        i
        for i, line in enumerate(lines)
        if line.split()[:6] == ["person", "unit", "total", "spent", "reserved", "remaining"]
    )
    rows = [line.split() for line in lines[header + 1 :] if not line.strip().startswith("...")]
    assert len(rows) == 20 and [r[0] for r in rows[:3]] == ["0", "1", "2"]  # ids in numeric order
    assert "... and 304 more row(s)" in text and "--all" in text and "still charged" not in text
    code, text, _ = run(capsys, "budget", "show", store, "--all")
    assert "more row(s)" not in text and sum(1 for line in text.splitlines() if "epsilon/m" in line) == 325
    code, text, _ = run(capsys, "budget", "show", store, "--person", "5", "300", "--unit", "epsilon/m")
    assert code == 0 and "(2 row(s)" in text
    code, text, _ = run(capsys, "budget", "show", store, "--unit", "epsilon")
    assert code == 0 and "no balances match" in text


def test_show_flags_a_release_that_did_not_finish(capsys, store):
    with geopriv.BudgetStore(store) as s:  # a process that stopped mid-release leaves its reservation
        s.reserve([1, 2], 0.001, unit="epsilon/m", kind="sanitize_traces", spend=False)
    code, text, err = run(capsys, "budget", "show", store)
    assert code == 0, err
    assert "1 reserved" in text and "still charged: a release that did not finish" in " ".join(text.split())


@pytest.mark.parametrize(
    "what, rows, columns",
    [
        ("balances", 324, {"person", "unit", "total", "spent", "reserved", "remaining"}),
        ("releases", 1, {"release_id", "kind", "unit", "parameters", "state", "persons", "largest_charge"}),
        ("charges", 324, {"release_id", "person", "unit", "reserved", "spent"}),
        ("grants", 1, {"time_utc", "unit", "person", "total", "persons", "note"}),
    ],
)
def test_export_writes_each_table_and_refuses_an_existing_file(capsys, tmp_path, store, what, rows, columns):
    code, _, err = run(capsys, *perturb(tmp_path / "a.gpkg", store, "--person", "Id"))
    assert code == 0, err
    out = tmp_path / f"{what}.csv"
    code, _, err = run(capsys, "budget", "export", store, out, "--what", what)
    assert code == 0, err
    assert f"wrote {rows} row(s) of {what}" in err
    table = pd.read_csv(out)
    assert len(table) == rows and columns <= set(table.columns)
    assert not [p for p in tmp_path.iterdir() if "geopriv-tmp" in p.name]  # the temporary file was moved into place
    assert out.stat().st_mode & 0o777 == 0o600  # it lists who is in the data: its owner's only
    assert Path(store).stat().st_mode & 0o777 == 0o600  # so does the store, created by 'budget grant'
    if what == "releases":
        assert table["kind"].tolist() == ["perturb"] and table["state"].tolist() == ["charged"]
        assert "Id" not in table["parameters"][0]  # public parameters only
    before = out.read_bytes()
    code, _, err = run(capsys, "budget", "export", store, out, "--what", what)
    assert code == 2
    one_line_error(err, "exists", "--overwrite")
    assert out.read_bytes() == before
    code, _, err = run(capsys, "budget", "export", store, out, "--what", what, "--overwrite")
    assert code == 0, err


def test_export_default_is_balances_and_never_writes_over_the_store(capsys, tmp_path):
    path = tmp_path / "budgets.csv"  # a store whose name ends in .csv
    assert run(capsys, "budget", "grant", path, "--unit", "epsilon", "--total", "1")[0] == 0
    code, _, err = run(capsys, "budget", "export", path, path, "--overwrite")
    assert code == 2
    one_line_error(err, "budgets.csv")
    with geopriv.BudgetStore(path) as s:
        assert s.info()["schema_version"] == geopriv.budget.SCHEMA_VERSION
    code, _, err = run(capsys, "budget", "export", path, tmp_path / "b.csv")
    assert code == 0 and "of balances" in err


# ---------------------------------------------------------------------------- grant
def test_grant_reads_persons_from_a_file(capsys, tmp_path, store):
    ids = tmp_path / "register.csv"
    ids.write_text("pid,name\n5,a\n7,b\nx9,c\n")
    code, _, err = run(
        capsys,
        "budget",
        "grant",
        store,
        "--unit",
        "epsilon",
        "--total",
        "2",
        "--persons-from",
        ids,
        "--column",
        "pid",
        "--person",
        "11",
    )
    assert code == 0, err
    assert "of 4 person(s) to 2" in err and "created" not in err
    table = balances(store, unit="epsilon")
    assert sorted(map(str, table["person"])) == ["11", "5", "7", "x9"] and (table["total"] == 2).all()
    with geopriv.BudgetStore(store) as s:
        assert s.grants()["persons"].tolist() == [0, 4]

    gpkg = tmp_path / "register.gpkg"
    gpd.GeoDataFrame({"pid": [1.0, 2.0]}, geometry=gpd.points_from_xy([0, 1], [0, 1]), crs=3857).to_file(gpkg)
    code, _, err = run(
        capsys, "budget", "grant", store, "--unit", "epsilon", "--total", "3", "--persons-from", gpkg, "--column", "pid"
    )
    assert code == 0, err
    assert set(balances(store, unit="epsilon", persons=[1, 2])["total"]) == {3.0}  # whole floats read as integers


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--unit", "eps", "--total", "1"], ["--unit", "'eps' is not a budget unit", "epsilon/m"]),
        (["--unit", "epsilon", "--total", "-1"], ["--total", ">= 0"]),
        (["--unit", "epsilon", "--total", "lots"], ["--total", "not a number"]),
        (["--unit", "epsilon", "--total", "1", "--column", "pid"], ["--persons-from FILE and --column COLUMN"]),
        (
            ["--unit", "epsilon", "--total", "1", "--persons-from", "register.csv", "--column", "pid"],
            ["does not exist"],
        ),
        (["--total", "1"], ["--unit"]),
    ],
)
def test_grant_refuses_bad_options_and_creates_nothing(capsys, tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "budget", "grant", "budgets.db", *args)
    assert code == 2
    one_line_error(err, *needles)
    assert not (tmp_path / "budgets.db").exists()


def test_grant_refuses_empty_ids_and_decimals(capsys, tmp_path, store):
    ids = tmp_path / "ids.csv"
    ids.write_text("pid,x\n5,1\n,2\n")
    code, _, err = run(
        capsys, "budget", "grant", store, "--unit", "epsilon", "--total", "1", "--persons-from", ids, "--column", "pid"
    )
    assert code == 2
    one_line_error(err, "1 id(s)", "empty", "data row 2")
    code, _, err = run(
        capsys, "budget", "grant", store, "--unit", "epsilon", "--total", "1", "--persons-from", ids, "--column", "nope"
    )
    assert code == 2
    one_line_error(err, "no column 'nope'", "'pid', 'x'")
    pq = tmp_path / "ids.parquet"
    pd.DataFrame({"lat": [51.5123, 51.5130]}).to_parquet(pq)
    _, _, err = run(
        capsys, "budget", "grant", store, "--unit", "epsilon", "--total", "1", "--persons-from", pq, "--column", "lat"
    )
    line = one_line_error(err, "decimal numbers")
    assert "51.5" not in line  # never a value that may be a coordinate
    assert balances(store, unit="epsilon").empty


def test_grant_never_writes_into_a_sqlite_file_that_is_not_a_store(capsys, tmp_path):
    gpkg = tmp_path / "homes.gpkg"
    gpkg.write_bytes(SOHO.read_bytes())
    code, _, err = run(capsys, "budget", "grant", gpkg, "--unit", "epsilon", "--total", "1")
    assert code == 2
    one_line_error(err, "not a geopriv budget store", "other tables")
    assert "geopriv_meta" not in {n for n in pyogrio.list_layers(gpkg)[:, 0]}


def test_a_file_that_is_not_a_store_is_left_byte_for_byte(capsys, tmp_path):
    gpkg = tmp_path / "homes.gpkg"
    gpkg.write_bytes(SOHO.read_bytes())
    assert run(capsys, "budget", "show", gpkg)[0] == 2
    assert gpkg.read_bytes() == SOHO.read_bytes()


def test_persons_granted_more_than_the_default_can_spend_it(capsys, tmp_path):
    _spend_a_personal_grant(capsys, tmp_path, tmp_path / "budgets.db")


def test_persons_granted_more_than_the_default_can_spend_it_on_postgresql(capsys, tmp_path, pg_url):
    _spend_a_personal_grant(capsys, tmp_path, pg_url)


def _spend_a_personal_grant(capsys, tmp_path, path):
    ids = tmp_path / "ids.csv"
    ids.write_text("pid\n" + "\n".join(map(str, range(324))) + "\n")
    assert run(capsys, "budget", "grant", path, "--unit", "epsilon/m", "--total", "ln4/1000")[0] == 0
    assert (
        run(
            capsys,
            "budget",
            "grant",
            path,
            "--unit",
            "epsilon/m",
            "--total",
            "ln4/100",
            "--persons-from",
            ids,
            "--column",
            "pid",
        )[0]
        == 0
    )
    code, _, err = run(capsys, *perturb(tmp_path / "out.gpkg", path, "--person", "Id"))
    assert code == 0, err


# ---------------------------------------------------------------------------- the other release commands
def test_synthesize_charges_dimensionless_epsilon_kept_apart(capsys, tmp_path, store):
    args = [
        "synthesize",
        SOHO,
        tmp_path / "syn.gpkg",
        "--layer",
        "deaths",
        "--epsilon",
        "1",
        "--bounds",
        *BOUNDS,
        "--budget-store",
        store,
    ]
    code, _, err = run(capsys, *args)
    one_line_error(err, "--person COLUMN")
    code, _, err = run(capsys, *args, "--person", "Id")  # the store has no budget in 'epsilon'
    assert code == 2
    one_line_error(err, "324 person(s) have no budget in 'epsilon'", "geopriv budget grant")
    assert run(capsys, "budget", "grant", store, "--unit", "epsilon", "--total", "ln3")[0] == 0
    code, _, err = run(capsys, *args, "--person", "Id")
    assert code == 0, err
    assert "charged each row's person 1 epsilon per row" in err
    table = balances(store, unit="epsilon")
    assert len(table) == 324 and np.allclose(table["spent"], 1.0) and np.allclose(table["remaining"], math.log(3) - 1)
    assert balances(store, unit="epsilon/m")["spent"].eq(0).all()  # the per-metre budget untouched
    code, _, err = run(capsys, *args[:2], tmp_path / "syn2.gpkg", *args[3:], "--person", "Id")
    assert code == 2
    one_line_error(err, "324 person(s) would exceed their lifetime budget in 'epsilon'")


def _traces(path):
    """Three walkers (trace ids u0, u1, u2), 40 fixes each, 30 s apart, in UTM 50N; fixed seed."""
    rng = np.random.default_rng(3)
    rows = []
    for u in range(3):
        t0 = pd.Timestamp("2009-01-01 08:00", tz="UTC") + pd.Timedelta(hours=u)
        xy = np.array([448_000.0 + 1000 * u, 4_416_000.0]) + np.cumsum(rng.normal(0, 5, (40, 2)), axis=0)
        rows += [
            {"user": f"u{u}", "owner": f"p{u % 2}", "t": t0 + pd.Timedelta(seconds=30 * k), "x": x, "y": y}
            for k, (x, y) in enumerate(xy)
        ]
    df = pd.DataFrame(rows)
    gpd.GeoDataFrame(df[["user", "owner", "t"]], geometry=gpd.points_from_xy(df.x, df.y), crs=32650).to_file(path)
    return path


def test_sanitize_traces_charges_each_traces_person_and_settles(capsys, tmp_path, store):
    queries = _traces(tmp_path / "queries.gpkg")
    args = [
        "sanitize-traces",
        queries,
        tmp_path / "released.gpkg",
        "--traj-id",
        "user",
        "--time",
        "t",
        "--level",
        "ln10",
        "--radius",
        "300",
        "--rate",
        "0.1",
        "--budget-store",
        store,
    ]
    code, _, err = run(capsys, *args)  # default person: the trace id
    assert code == 0, err
    assert "each trace's person" in err and "settled" in err
    table = balances(store).set_index("person")
    assert sorted(table.index) == ["u0", "u1", "u2"]
    assert ((table["spent"] > 0) & (table["spent"] <= math.log(10) / 300 * 1.01)).all()
    assert (table["reserved"] == 0).all() and list(releases(store)["state"]) == ["settled"]

    # p0 owns traces u0 and u2: twice ln 10 within 300 m is more than the default, ln 4 within 150 m
    code, _, err = run(capsys, *args[:2], tmp_path / "by_owner.gpkg", *args[3:], "--person", "owner")
    assert code == 2
    one_line_error(err, "1 person(s) new to the store would exceed the default", ": 'p0'.")
    assert not (tmp_path / "by_owner.gpkg").exists() and len(releases(store)) == 1
    code, _, err = run(
        capsys,
        "sanitize-traces",
        queries,
        tmp_path / "one.gpkg",
        "--traj-id",
        "",
        "--time",
        "t",
        "--epsilon",
        "ln10/300",
        "--budget-store",
        store,
    )  # one trace: whose?
    one_line_error(err, "--traj-id ''", "--person COLUMN")


def test_diffuse_charges_the_source_person(capsys, tmp_path, store):
    edges = tmp_path / "edges.csv"
    edges.write_text("a,b\n0,1\n1,2\n2,3\n")
    args = [
        "diffuse",
        SOHO,
        tmp_path / "answers.gpkg",
        "--layer",
        "deaths",
        "--source",
        "1",
        "--edges",
        edges,
        "--epsilon-table",
        "1:ln4/200",
        "3:ln4/2000",
        "--bounds",
        *BOUNDS,
        "--budget-store",
        store,
    ]
    code, _, err = run(capsys, *args)  # without --id-field the ids are row numbers: not people
    one_line_error(err, "--person COLUMN", "--id-field")
    code, _, err = run(capsys, *args, "--id-field", "Id", "--on-unreachable", "ignore")
    assert code == 0, err
    assert "charged the person of --source 1" in err
    table = balances(store)
    assert table["person"].tolist() == [1] and 0 < table["spent"][0] < math.log(4) / 150
    assert releases(store)["kind"].tolist() == ["diffuse_locations"]


# ---------------------------------------------------------------------------- help, names, start-up
@pytest.mark.parametrize("command", RELEASE_COMMANDS)
def test_release_help_says_the_unit_and_that_the_charge_comes_before_the_noise(capsys, command):
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "--budget-store URL" in flat and "--person COLUMN" in flat
    assert "BEFORE any noise is drawn" in flat and "geopriv budget grant" in flat
    assert ("unit epsilon:" if command == "synthesize" else "unit epsilon/m") in flat


@pytest.mark.parametrize("command", RELEASE_COMMANDS)
def test_option_names_are_the_library_parameters(command):
    from geopriv.cli import build_parser

    func = {
        "perturb": geopriv.perturb,
        "synthesize": geopriv.synthesize,
        "sanitize-traces": geopriv.sanitize_traces,
        "diffuse": geopriv.diffuse_locations,
    }[command]
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    sub.format_help()  # builds the options
    dests = {a.option_strings[0]: a.dest for a in sub._actions if a.option_strings}
    assert dests["--budget-store"] == "budget_store" and dests["--person"] == "person"
    assert {"budget_store", "person"} <= set(inspect.signature(func).parameters)


@pytest.mark.parametrize("action", ["grant", "show", "export"])
def test_budget_help_has_examples_and_loads_no_numeric_library(action):
    code = (
        "import contextlib, io, sys, json\n"
        "from geopriv import cli\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):\n"
        f"    cli.main(['budget', '{action}', '--help'])\n"
        "print(json.dumps([buf.getvalue(), sorted({m.split('.')[0] for m in sys.modules})]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    text, loaded = json.loads(out.stdout.splitlines()[-1])
    assert f"geopriv budget {action} " in text[text.index("examples:") :]
    assert not {"numpy", "pandas", "geopandas", "pyproj", "shapely", "psycopg"} & set(loaded)


def test_a_postgresql_password_is_never_shown(capsys, tmp_path):
    url = "postgresql://alice:s3cret-pw@/geopriv?host=" + str(tmp_path / "no-server-here")
    for args in (
        ["budget", "show", url],
        ["budget", "grant", url, "--unit", "epsilon", "--total", "1"],
        perturb(tmp_path / "o.gpkg", url, "--person", "Id"),
    ):
        code, out, err = run(capsys, *args)
        assert code == 2
        line = one_line_error(err, "postgresql://alice@/geopriv")
        assert "s3cret" not in line + out


# ---------------------------------------------------------------------------- PostgreSQL
def test_grant_show_and_perturb_on_postgresql(capsys, tmp_path, pg_url):
    code, _, err = run(capsys, "budget", "grant", pg_url, "--unit", "epsilon/m", "--total", "ln4/150")
    assert code == 0, err
    assert "created the budget store postgresql://" in err
    code, _, err = run(capsys, "budget", "grant", pg_url, "--unit", "epsilon/m", "--total", "ln4/1000", "--person", "3")
    assert code == 0 and "created" not in err
    code, _, err = run(capsys, *perturb(tmp_path / "a.gpkg", pg_url, "--person", "Id"))
    assert code == 2
    one_line_error(err, "1 person(s) would exceed", ": 3 (")
    assert not (tmp_path / "a.gpkg").exists()
    code, text, err = run(capsys, "budget", "show", pg_url, "--person", "3", "4")
    assert code == 0, err
    assert "postgresql://" in text and "releases: 0 charged" in text and "(1 row(s)" in text


# ---------------------------------------------------------------------------- the documented session
def test_the_command_line_session_of_docs_budgets_md(capsys, tmp_path, monkeypatch):
    """docs/budgets.md's command-line block (marked 'not run' there: checked here), command by command."""
    import shlex

    text = (ROOT / "docs" / "budgets.md").read_text()
    marker = text.index("checked in tests/test_cli_budget.py")
    block = text[text.index("```bash\n", marker) + len("```bash\n") :]
    block = block[: block.index("```")].replace("\\\n", " ")
    commands = [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [
        ["geopriv", "budget"],
        ["geopriv", "perturb"],
        ["geopriv", "budget"],
        ["geopriv", "budget"],
    ]
    monkeypatch.chdir(tmp_path)  # at a clone's root: geopriv/ beside the files the session writes
    (tmp_path / "geopriv").symlink_to(ROOT / "geopriv", target_is_directory=True)
    shown = {}
    for argv in commands:
        code, out, err = run(capsys, *argv[1:])
        assert code == 0, (argv, err)
        shown[argv[2]] = out
    assert "324 person(s)" in shown["show"] and "releases: 1 charged" in shown["show"]
    audit = pd.read_csv(tmp_path / "releases.csv")
    assert audit["kind"].tolist() == ["perturb"] and audit["unit"].tolist() == ["epsilon/m"]


def test_sigterm_while_writing_leaves_no_output_and_the_charge_in_place(tmp_path, capsys):
    """Interrupted after the noise was drawn (while the output is written): no output, and the persons stay charged
    (never undercounted), which the interrupt message says.  The signal is sent once the staging directory exists,
    so the test does not depend on timing; it could only fail if writing 300,000 points took less than the 5 ms
    polling interval."""
    import signal
    import time

    rng = np.random.default_rng(0)
    n = 300_000
    big = gpd.GeoDataFrame(
        {"pid": np.arange(n)},
        geometry=gpd.points_from_xy(440_000 + rng.uniform(0, 30_000, n), 4_400_000 + rng.uniform(0, 30_000, n)),
        crs=32650,
    )
    src = tmp_path / "big.fgb"
    big.to_file(src, engine="pyogrio", layer_options={"SPATIAL_INDEX": "NO"})
    store = tmp_path / "budgets.db"
    assert run(capsys, "budget", "grant", store, "--unit", "epsilon/m", "--total", "1")[0] == 0
    out = tmp_path / "out.gpkg"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "geopriv.cli",
            "perturb",
            str(src),
            str(out),
            *LN4_200,
            "--no-progress",
            "--budget-store",
            str(store),
            "--person",
            "pid",
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 300
    while not [p for p in tmp_path.iterdir() if p.name.endswith(".geopriv-tmp")]:  # signal while writing
        assert proc.poll() is None, "the run ended before it started writing its output"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "stays charged" in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".geopriv-tmp")]
    audit = releases(store)
    assert audit["state"].tolist() == ["charged"] and audit["persons"].tolist() == [n]
    assert (balances(store)["spent"] > 0).all()
