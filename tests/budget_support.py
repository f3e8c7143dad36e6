"""Shared by the budget store tests (test_budget_store, test_budget_faults, test_budget_concurrency).

* ``store_url``: a fixture parametrised over both backends: ``"sqlite"`` (a new file in the test's
  ``tmp_path``, not created yet) and ``"postgresql"`` (a fresh database on the session's throwaway
  server, the ``pg_url`` fixture of tests/conftest.py: marked ``postgresql``);
* raw access to a store's database through its own driver (sqlite3, psycopg), never through
  geopriv: :func:`execute` for setting up faults, :func:`dump` for "nothing changed" (every table's
  rows, exactly) and for searching the store for what it must never hold.

Real databases only, no mocks.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from urllib.parse import unquote

import pytest

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgresql),
]


@pytest.fixture(params=BACKENDS, name="store_url")
def store_url_fixture(request, tmp_path):
    """URL of a budget store not created yet: a SQLite file in tmp_path, or an empty PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'budgets.db'}"
    return request.getfixturevalue("pg_url")


def kind(url: str) -> str:
    return "sqlite" if url.startswith("sqlite:") else "postgresql"


def sqlite_path(url: str) -> str:
    assert url.startswith("sqlite:///"), url
    return unquote(url[len("sqlite:///") :])


@contextlib.contextmanager
def connect(url: str):
    """A raw autocommit connection to the store's database (sqlite3 or psycopg), closed on leaving."""
    if kind(url) == "sqlite":
        con = sqlite3.connect(sqlite_path(url), isolation_level=None, timeout=30)
    else:
        import psycopg

        con = psycopg.connect(url, autocommit=True)
    try:
        yield con
    finally:
        con.close()


def execute(url: str, *statements) -> list:
    """Run SQL statements (str, or (str, params)) on the store's database, each committed; the last one's rows."""
    rows = []
    with connect(url) as con:
        for statement in statements:
            sql, params = (statement, ()) if isinstance(statement, str) else statement
            if kind(url) == "postgresql":
                sql = sql.replace("?", "%s")
            cur = con.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
    return rows


def tables(url: str) -> list[str]:
    if kind(url) == "sqlite":
        return [r[0] for r in execute(url, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    return [
        r[0]
        for r in execute(
            url,
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() ORDER BY table_name",
        )
    ]


def _plain(value):
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def dump(url: str) -> dict:
    """Every table of the store's database and its rows (sorted, exact values; blobs as bytes)."""
    with connect(url) as con:
        if kind(url) == "sqlite":
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        else:
            names = [
                r[0]
                for r in con.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema() ORDER BY table_name"
                )
            ]
        out = {}
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            rows = [tuple(_plain(v) for v in row) for row in con.execute(f"SELECT * FROM {quoted}").fetchall()]
            out[name] = sorted(rows, key=repr)
    return out


def dump_text(url: str) -> str:
    """The dump as text (every value's repr; blobs as their bytes' repr), for searching."""
    return json.dumps({k: [[repr(v) for v in row] for row in rows] for k, rows in dump(url).items()})


def dump_bytes(url: str) -> bytes:
    """Every blob and text value of the dump, concatenated (to search for packed numbers)."""
    parts = []
    for rows in dump(url).values():
        for row in rows:
            for v in row:
                if isinstance(v, bytes):
                    parts.append(v)
                elif v is not None:
                    parts.append(str(v).encode())
    return b"\x00".join(parts)


def driver_error_text(url: str, sql: str) -> str:
    """The text the store's own driver gives for ``sql`` (what a BudgetStoreError must never echo)."""
    errors = (sqlite3.Error,)
    if kind(url) == "postgresql":
        import psycopg

        errors = (psycopg.Error,)
    try:
        execute(url, sql)
    except errors as exc:  # the driver's own exception
        return str(exc)
    raise AssertionError(f"{sql!r} did not fail")


def assert_no_driver_text(exc, *driver_texts):
    """A store error hides the driver's exception: not chained, not quoted."""
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__), (
        "the driver's exception is chained"
    )
    message = str(exc)
    for text in driver_texts:
        for line in filter(None, (part.strip() for part in str(text).splitlines())):
            assert line not in message, f"the message echoes the driver's text {line!r}: {message}"
    for word in ("sqlite3.", "psycopg", "DETAIL:", "HINT:", "Traceback"):
        assert word not in message, message
