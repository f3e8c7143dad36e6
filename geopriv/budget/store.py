"""A persistent, concurrent privacy-budget store: a person's lifetime budget across calls, processes and machines.

``BudgetStore("sqlite:///budgets.db")`` (the standard library's sqlite3: WAL, immediate
transactions, ``synchronous=FULL``) or ``BudgetStore("postgresql://...")`` (psycopg 3) keeps, per
person and per unit of the guarantee, a lifetime **total**, what settled releases have **spent**
and what unfinished ones have **reserved**, with ``spent + reserved <= total`` enforced by the
database itself (a ``CHECK`` constraint) as well as checked before every charge.

A release charges the store **before any noise is drawn** (:meth:`BudgetStore.reserve`):

* ``spend=True`` (a release whose cost is known in advance: perturb, synthesize, diffuse): the
  cost goes straight to ``spent``, in one transaction;
* ``spend=False`` (a release that may use less than its worst case: the predictive mechanism
  on traces): the worst case is ``reserved``, and :meth:`Reservation.commit` settles what the
  public outcome says was spent, giving back the rest.

A process that dies after the charge leaves the person charged (a ``reserved`` release stays
reserved: never undercounted).  A release that fails before its first draw gives everything
back (:meth:`Reservation.cancel`); once noise may have been drawn, nothing is given back.

Units are kept apart: epsilon per ground metre (``"epsilon/m"``: perturb, sanitize_traces,
diffuse_locations) and dimensionless epsilon (``"epsilon"``: synthesize, aggregates) are
separate budgets, and a charge in a unit a person has no budget in is refused.

Every release is audited (:meth:`BudgetStore.releases`, :meth:`BudgetStore.charges`): its id,
times, kind, mechanism, public parameters and the epsilon charged per person; never a location
or a seed.  Per-person charges are stored packed, one row per release (a million persons cost
one row), and read back as a table.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import math
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import numpy as np
import pandas as pd

from .._version import __version__
from ..exceptions import BudgetExceededError, BudgetStoreError, Fix, ParameterError, ParameterTypeError, format_labels
from .persons import PersonKeys, person_keys

__all__ = [
    "BudgetStore",
    "Reservation",
    "parse_store_url",
    "SCHEMA_VERSION",
    "UNITS",
    "PER_METRE",
    "PURE",
    "value_unit",
    "check_unit",
]

#: the store layout this geopriv reads and writes; a store from a newer one is refused
SCHEMA_VERSION = 2  # 2: persons known by text keyed by geopriv.identity (issue 41); 1 is migrated
#: epsilon per ground metre (geo-indistinguishability: perturb, sanitize_traces, diffuse_locations)
PER_METRE = "epsilon/m"
#: dimensionless epsilon (differential privacy of a count or a measure: synthesize, aggregates)
PURE = "epsilon"
#: the units a budget can be kept in, and what each measures
UNITS = {
    PER_METRE: "epsilon per ground metre (perturb, sanitize_traces, the location of diffuse_locations)",
    PURE: "dimensionless epsilon (synthesize; counts)",
}
_VALUE_PREFIX = "epsilon per unit of "

_STORE_FIX = Fix(
    "budget_store",
    python="Check the store's URL (sqlite:///path.db or postgresql://...), or create it with "
    "geopriv.BudgetStore(url, create=True) and grant budgets with store.grant(...).",
    cli="Check the --budget-store URL, or create the store with 'geopriv budget grant STORE ...'.",
    qgis="Check the 'Budget store' parameter, or create the store with 'geopriv budget grant' first.",
)


def value_unit(column) -> str:
    """The unit of a released attribute value's budget: epsilon per unit of that value (diffuse_locations)."""
    return f"{_VALUE_PREFIX}{column}"


def check_unit(unit) -> str:
    """``unit`` if it names a budget unit (see :data:`UNITS`, :func:`value_unit`); else a ParameterError."""
    if isinstance(unit, str) and (unit in UNITS or (unit.startswith(_VALUE_PREFIX) and len(unit) > len(_VALUE_PREFIX))):
        return unit
    raise ParameterError(
        f"unknown budget unit {unit!r}: use {PER_METRE!r} (epsilon per ground metre: perturb, sanitize_traces, "
        f"diffuse_locations), {PURE!r} (dimensionless: synthesize) or {_VALUE_PREFIX!r}<column> (a diffused value). "
        "Units are kept apart: a budget in one is never spent by a release in another."
    )


def _six_digits_up(value: float) -> str:
    """``value`` written with six significant digits, rounded up (a total that surely affords it)."""
    text = f"{value:.6g}"
    if float(text) < value:
        unit = 10.0 ** (math.floor(math.log10(value)) - 5)
        text = f"{math.ceil(value / unit) * unit:.6g}"
    return text


def _charge_note(unit: str, parameters, repeated: bool) -> str:
    """What a row of the refused release costs, and why (a sentence, or "" when its parameters do not say).

    ``repeated``: some person has several rows (and pays for each).
    """
    parameters = parameters or {}
    per_row = parameters.get("charged_per_row")
    if not isinstance(per_row, float) or not math.isfinite(per_row):
        return ""
    note = f"The release charges {per_row:.6g} {unit} per row"
    epsilon = parameters.get("epsilon_per_m", parameters.get("epsilon"))
    effective = parameters.get("effective_epsilon_per_m", parameters.get("effective_epsilon"))
    if (
        isinstance(epsilon, float)
        and isinstance(effective, float)
        and effective > epsilon
        and math.isclose(per_row, effective, rel_tol=1e-12)
    ):
        note += (
            f": its effective epsilon, epsilon {epsilon:.6g} plus {effective - epsilon:.3g} for the finite precision "
            "of the lattice the outputs are snapped to (Andres et al. 2013), so n such releases cost n times "
            f"{per_row:.6g}, not n times {epsilon:.6g}"
        )
    return note + (" (a person with k rows pays k times that). " if repeated else ". ")


def _grant_fix(unit: str, need: float, priced: bool) -> Fix:
    """How to afford a refused charge: fewer persons, a smaller epsilon, or a grant of (at least) ``need``."""
    if not (priced and need > 0 and math.isfinite(need)):
        return Fix(
            "budget_exhausted",
            python="Release without these persons, with a smaller epsilon, or grant more "
            "budget deliberately (store.grant(...), kept in the audit).",
            cli="Release without these persons (remove their rows from the input), with a smaller epsilon, "
            "or grant more budget deliberately (geopriv budget grant).",
            qgis="Release without these persons, with a smaller epsilon, or grant more budget deliberately "
            "(geopriv budget grant).",
        )
    total = _six_digits_up(need)
    return Fix(
        "budget_exhausted",
        python="Release without these persons, with a smaller epsilon, or grant more budget deliberately (kept in "
        f"the audit): a lifetime total of {total} {unit} affords this release for all of them, e.g. "
        f"store.grant({total}, unit={unit!r}, persons=[...]) with their ids.",
        cli="Release without these persons (remove their rows from the input), with a smaller epsilon, or grant "
        f"more budget deliberately: a lifetime total of {total} {unit} affords this release for all of them "
        f"(geopriv budget grant STORE --unit {unit} --total {total} --person ID ...).",
        qgis="Release without these persons, with a smaller epsilon, or grant more budget deliberately: a lifetime "
        f"total of {total} {unit} affords this release for all of them (geopriv budget grant STORE --unit {unit} "
        f"--total {total} --person ID ...).",
    )


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


# ------------------------------------------------------------------------------------------ SQL
_TABLES = {
    "meta": "CREATE TABLE geopriv_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "unit": "CREATE TABLE geopriv_unit (id INTEGER PRIMARY KEY, unit TEXT NOT NULL UNIQUE, default_total {REAL})",
    "person": "CREATE TABLE geopriv_person (person {INT} PRIMARY KEY, label TEXT NOT NULL)",
    "release": "CREATE TABLE geopriv_release (release_id TEXT PRIMARY KEY, kind TEXT NOT NULL, unit TEXT NOT NULL, "
    "mechanism TEXT, parameters TEXT NOT NULL, state TEXT NOT NULL, started_utc TEXT NOT NULL, "
    "finished_utc TEXT, persons {INT} NOT NULL, rows_released {INT}, largest_charge {REAL}, "
    "geopriv_version TEXT NOT NULL)",
    "charge": "CREATE TABLE geopriv_charge (release_id TEXT PRIMARY KEY REFERENCES geopriv_release(release_id), "
    "persons {BLOB} NOT NULL, reserved {BLOB}, spent {BLOB})",
    "grant": "CREATE TABLE geopriv_grant (time_utc TEXT NOT NULL, unit TEXT NOT NULL, person {INT}, "
    "total {REAL} NOT NULL, persons {INT} NOT NULL, note TEXT)",
    # diffusion paths already paid for: a path answering more recipients later costs only the increase of its
    # largest epsilon (Koufogiannis and Pappas); keyed by the path's SHA-256 fingerprint (never its noise)
    "path": "CREATE TABLE geopriv_path (fingerprint TEXT PRIMARY KEY, person {INT} NOT NULL, unit TEXT NOT NULL, "
    "largest {REAL} NOT NULL)",
}
#: one table of balances per unit (keyed by the person's 64-bit key alone: the fastest table SQLite has);
#: the database itself refuses a row with more spent and reserved than its total
_BUDGET_TABLE = (
    "CREATE TABLE {t} (person {INT} PRIMARY KEY, total {REAL} NOT NULL, spent {REAL} NOT NULL DEFAULT 0, "
    "reserved {REAL} NOT NULL DEFAULT 0, granted {REAL}, CONSTRAINT {t}_within_total CHECK (spent >= 0 AND reserved >= 0 "
    "AND total >= 0 AND spent + reserved <= total))"
)
#: rows of persons inserted by the current charge carry an infinite total until they get the default (a partial index
#: finds them without a scan)
_NEW = "1e308"
_NEW_INDEX = "CREATE INDEX {t}_new ON {t} (total) WHERE total > " + _NEW
_DIALECT = {
    "sqlite": {"REAL": "REAL", "INT": "INTEGER", "BLOB": "BLOB"},
    "postgresql": {"REAL": "DOUBLE PRECISION", "INT": "BIGINT", "BLOB": "BYTEA"},
}
_STATES = ("charged", "reserved", "settled", "cancelled")
#: up to this many distinct amounts, a bulk charge is one statement per amount (bound exactly as doubles)
_GROUPS = 32
#: SQLite binds a bulk charge's keys as JSON text this many at a time (the next chunk written while one runs)
_CHUNK = 100_000


def _within_default(default, spent, reserved) -> bool:
    """Whether every increment fits the default total on its own: then a new person's row is valid as inserted, and
    an existing person's candidate row (which the database checks before it sees the conflict) is too."""
    if default is None:
        return False
    worst = float(np.max(np.asarray(spent, float) + np.asarray(reserved, float), initial=0.0))
    return worst <= default


def _total_after(spent: str, reserved: str, lo: str = "min", hi: str = "max") -> str:
    """SQL for a balance's total once ``spent`` and ``reserved`` (expressions) are its new values: a total raised above
    a person's grant only because more was in use than the grant (:meth:`BudgetStore.grant` lowered it) comes back
    down towards the grant as reservations are given back, so a lowered grant is honoured once nothing holds it up."""
    return f"CASE WHEN granted IS NULL THEN total ELSE {lo}(total, {hi}(granted, ({spent}) + ({reserved}))) END"


def _table(unit_id) -> str:
    return f"geopriv_budget_{int(unit_id)}"


def _groups(keys, spent, reserved):
    """(keys, spent, reserved) in groups of equal amounts (scalars), or None when there are too many."""
    if np.ndim(spent) == 0 and np.ndim(reserved) == 0:
        return [(keys, float(spent), float(reserved))]
    spent = np.broadcast_to(np.asarray(spent, float), keys.shape)
    reserved = np.broadcast_to(np.asarray(reserved, float), keys.shape)
    if not reserved.any() or not spent.any():  # one of them is zero (a charge spends or reserves)
        values, inverse = np.unique(
            spent if reserved.any() is False and spent.any() else reserved if not spent.any() else spent,
            return_inverse=True,
        )
        if len(values) > _GROUPS:
            return None
        inverse = inverse.reshape(-1)
        if not spent.any():
            return [(keys[inverse == g], 0.0, float(v)) for g, v in enumerate(values)]
        return [(keys[inverse == g], float(v), 0.0) for g, v in enumerate(values)]
    pairs, inverse = np.unique(np.column_stack([spent, reserved]), axis=0, return_inverse=True)
    if len(pairs) > _GROUPS:
        return None
    inverse = inverse.reshape(-1)
    return [(keys[inverse == g], float(pairs[g, 0]), float(pairs[g, 1])) for g in range(len(pairs))]


def parse_store_url(url) -> tuple[str, str]:
    """``("sqlite", path)`` or ``("postgresql", conninfo)`` for a budget store's URL (or a SQLite file path)."""
    if isinstance(url, os.PathLike):
        return "sqlite", os.fspath(url)
    if not isinstance(url, str) or not url.strip():
        raise ParameterError(
            "A budget store is a URL: sqlite:///path/to/budgets.db or postgresql://user@host/db.", fix=_STORE_FIX
        )
    low = url.lower()
    if low.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        return "postgresql", "postgresql://" + url.split("://", 1)[1]
    if low.startswith("sqlite:"):
        rest = url[len("sqlite:") :]
        if not rest.startswith("///"):
            raise ParameterError(
                "A SQLite store's URL is sqlite:///relative/path.db or sqlite:////absolute/path.db.", fix=_STORE_FIX
            )
        return "sqlite", unquote(rest[3:])
    if "://" in url:
        raise ParameterError(f"Budget stores are SQLite or PostgreSQL, not {url.split('://', 1)[0]!r}.", fix=_STORE_FIX)
    return "sqlite", url


def _shown_url(kind: str, target: str) -> str:
    """The store's URL without a password."""
    if kind == "sqlite":
        return f"sqlite:///{target}"
    parts = urlsplit(target)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class _Overspend(Exception):
    pass


class _NoBudget(Exception):
    pass


# ------------------------------------------------------------------------------------------ backends
class _SQLite:
    kind = "sqlite"
    ph = "?"

    def __init__(self, path: str, create: bool, timeout: float):
        import sqlite3

        self.sqlite3 = sqlite3
        self.path = path
        p = Path(path)
        if not create and not p.exists():
            raise BudgetStoreError(f"There is no budget store at {path!r}.", fix=_STORE_FIX)
        if p.exists() and p.is_dir():
            raise BudgetStoreError(f"{path!r} is a folder, not a budget store file.", fix=_STORE_FIX)
        existed = p.exists()
        try:
            self.con = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
            if not existed and p.exists():  # a store lists who is in the data: its owner's only (SQLite gives its
                with contextlib.suppress(OSError):  # -wal and -shm files the same permissions)
                    os.chmod(path, 0o600)
            # never modify a file that is not a store (a GeoPackage, another application's database): look first
            tables = self.tables()
            if tables and "geopriv_meta" not in tables:
                self.con.close()
                raise BudgetStoreError(
                    f"{path!r} is not a geopriv budget store (it holds other tables); it was not modified.",
                    fix=_STORE_FIX,
                )
            self.con.execute("PRAGMA foreign_keys=ON")
            deadline = time.monotonic() + timeout
            while True:  # switching to WAL does not wait on the busy timeout (another process creating the store)
                try:
                    mode = self.con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                        raise
                    time.sleep(0.005)
            self.con.execute("PRAGMA synchronous=FULL")  # a charge that returned survives a power cut
            self.con.execute("PRAGMA cache_size=-131072")
        except sqlite3.Error as exc:
            if getattr(self, "con", None) is not None:  # closed now: it would hold the -wal and -shm files open
                self.con.close()
            raise _sqlite_error(exc, path) from None
        self.wal = str(mode).lower() == "wal"

    def begin(self, write=True):
        self.con.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def commit(self):
        self.con.execute("COMMIT")

    def rollback(self):
        if self.con.in_transaction:
            self.con.execute("ROLLBACK")

    def execute(self, sql, params=()):
        return self.con.execute(sql, params)

    def fetchall(self, sql, params=()):
        return self.con.execute(sql, params).fetchall()

    def tables(self) -> set:
        return {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def tune_tables(self):
        pass

    def create_budget(self, unit_id):
        t = _table(unit_id)
        self.con.execute(_BUDGET_TABLE.format(t=t, **_DIALECT["sqlite"]))
        self.con.execute(_NEW_INDEX.format(t=t))

    def add(self, unit_id, keys, spent, reserved, default):
        """Add ``spent``/``reserved`` to ``keys``' balances (persons not seen yet get ``default``: None refuses).

        One upsert: a person not seen yet is inserted with an infinite total (so that the candidate
        row of a person who *is* there never trips the constraints), then every such row gets the
        default (NULL when there is none: refused), and the CHECK constraint judges it.
        """
        t = _table(unit_id)
        sql = (
            f"INSERT INTO {t} (person, total, spent, reserved) {{}} ON CONFLICT (person) DO UPDATE SET "
            "spent = spent + excluded.spent, reserved = reserved + excluded.reserved"
        )
        at_once = _within_default(default, spent, reserved)  # new rows valid as inserted: no second pass
        total = default if at_once else math.inf
        groups = _groups(keys, spent, reserved)
        if groups is None:  # many different amounts: bound one by one (exact doubles)
            n = len(keys)
            self.con.executemany(
                sql.format("VALUES (?, ?, ?, ?)"),
                zip(
                    keys.tolist(),
                    [total] * n,
                    np.broadcast_to(spent, keys.shape).tolist(),
                    np.broadcast_to(reserved, keys.shape).tolist(),
                ),
            )
        else:
            self._each_chunk(
                sql.format("SELECT value, ?, ?, ? FROM json_each(?) WHERE true"),
                [((total, s, r), k) for k, s, r in groups],
            )
        if not at_once:
            self.con.execute(f"UPDATE {t} SET total = ? WHERE total > {_NEW}", (default,))

    def _each_chunk(self, sql, jobs):
        """Execute ``sql`` for every (parameters, keys) job, the keys (last parameter) as a JSON array, in chunks of
        _CHUNK keys: a helper thread runs each chunk in SQLite (which releases the GIL) while the next one's text is
        written (``str`` of a list of ints is JSON, in a third less time than json.dumps)."""
        chunks = [(head, k[i : i + _CHUNK]) for head, k in jobs for i in range(0, len(k), _CHUNK)]
        if len(chunks) < 2:
            for head, k in chunks:
                self.con.execute(sql, (*head, str(k.tolist())))
            return
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = None
            for head, k in chunks:
                params = (*head, str(k.tolist()))
                if pending is not None:
                    pending.result()
                pending = pool.submit(self.con.execute, sql, params)
            pending.result()

    def settle(self, unit_id, keys, reserved, spent):
        """Take ``reserved`` out of reservation and add ``spent`` (<= it) to spending."""
        r = "max(0.0, reserved - :r)"
        s = f"min(spent + :s, total - {r})"
        self.con.executemany(
            f"UPDATE {_table(unit_id)} SET reserved = {r}, spent = {s}, total = {_total_after(s, r)} WHERE person = :k",
            (
                {"r": a, "s": b, "k": k}
                for a, b, k in zip(
                    np.asarray(reserved, float).tolist(), np.asarray(spent, float).tolist(), keys.tolist()
                )
            ),
        )

    def give_back(self, unit_id, keys, spent, reserved):
        s, r = "max(0.0, spent - :s)", "max(0.0, reserved - :r)"
        self.con.executemany(
            f"UPDATE {_table(unit_id)} SET spent = {s}, reserved = {r}, total = {_total_after(s, r)} WHERE person = :k",
            (
                {"s": a, "r": b, "k": k}
                for a, b, k in zip(
                    np.asarray(spent, float).tolist(), np.asarray(reserved, float).tolist(), keys.tolist()
                )
            ),
        )

    def set_total(self, unit_id, keys, total):
        self.con.execute(
            f"UPDATE {_table(unit_id)} SET total = max(?, spent + reserved), granted = ? WHERE person IN "
            "(SELECT value FROM json_each(?))",
            (total, total, json.dumps(keys.tolist())),
        )

    def balances_of(self, unit_id, keys):
        """(person, total, spent, reserved) rows of ``keys`` that have a balance."""
        return self.con.execute(
            f"SELECT person, total, spent, reserved FROM {_table(unit_id)} WHERE person IN "
            "(SELECT value FROM json_each(?))",
            (json.dumps(keys.tolist()),),
        ).fetchall()

    def add_labels(self, pk):
        if len(pk.label_keys):
            self.con.execute(
                "INSERT OR IGNORE INTO geopriv_person (person, label) SELECT json_extract(value, '$[0]'), "
                "json_extract(value, '$[1]') FROM json_each(?)",
                (json.dumps(list(zip(pk.label_keys.tolist(), pk.label_text))),),
            )

    def is_overspend(self, exc) -> bool:
        return isinstance(exc, self.sqlite3.IntegrityError) and "CHECK" in str(exc).upper()

    def is_missing(self, exc) -> bool:
        return isinstance(exc, self.sqlite3.IntegrityError) and "NOT NULL" in str(exc).upper()

    def wrap(self, exc):
        return _sqlite_error(exc, self.path)

    def errors(self):
        return (self.sqlite3.Error,)

    def close(self):
        self.con.close()


def _sqlite_error(exc, path) -> BudgetStoreError:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return BudgetStoreError(
            f"The budget store {path!r} is locked by another process (it did not become free "
            "within the timeout). Nothing was charged or released.",
            fix=Fix(
                "store_locked",
                python="Retry, or give BudgetStore(url, timeout=...) more time.",
                cli="Retry when the other release has finished.",
                qgis="Retry when the other release has finished.",
            ),
        )
    if "readonly" in text or "read-only" in text or "unable to open" in text or "permission" in text:
        return BudgetStoreError(
            f"The budget store {path!r} cannot be written (a read-only file or folder). A store "
            "must be writable to charge a release; nothing was charged or released.",
            fix=Fix(
                "store_read_only",
                python="Give the process write access to the file and its "
                "folder (SQLite writes a -wal file beside it).",
                cli="Give write access to the file and its folder.",
                qgis="Give write access to the file and its folder.",
            ),
        )
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return BudgetStoreError(
            f"{path!r} is not a geopriv budget store, or it is damaged. Nothing was charged or released.",
            fix=Fix(
                "store_damaged",
                python="Restore it from a backup; never "
                "replace a damaged store by an empty one (every budget would "
                "start again).",
                cli="Restore it from a backup.",
                qgis="Restore it from a backup.",
            ),
        )
    return BudgetStoreError(
        f"The budget store {path!r} could not be used (SQLite error {type(exc).__name__}). "
        "Nothing was charged or released.",
        fix=_STORE_FIX,
    )


#: from this many persons, a PostgreSQL charge is planned for its size (never from a prepared, generic plan) and given
#: the memory to sort its keys, inside a savepoint it can be redone from
_PG_BULK = 5_000
#: the PostgreSQL budget tables leave half of each page free: a charge's new row versions then fit beside the old ones
#: (heap-only tuples: no index entry per update, no bloat), the previous charge's versions being pruned as it reads
_PG_FILLFACTOR = 50
#: how many times a bulk charge is redone when other releases add some of its persons meanwhile
_PG_REDO = 20
#: a balance row in PostgreSQL's binary COPY format: the number of fields, then each field's size and value
_PG_COPY_ROW = np.dtype(
    [
        ("fields", ">i2"),
        ("person_size", ">i4"),
        ("person", ">i8"),
        ("total_size", ">i4"),
        ("total", ">f8"),
        ("spent_size", ">i4"),
        ("spent", ">f8"),
        ("reserved_size", ">i4"),
        ("reserved", ">f8"),
    ]
)


class _Int8s(bytes):
    """A ``bigint[]`` parameter already in PostgreSQL's binary array format (:func:`_pg_array`)."""


class _Float8s(bytes):
    """A ``float8[]`` parameter already in PostgreSQL's binary array format (:func:`_pg_array`)."""


def _pg_array(values, cls):
    """``values`` as one binary array parameter, built by numpy (no Python object, no adaptation per value).

    The format of PostgreSQL's ``array_send``: dimensions 1, no NULLs, the element type's oid, the
    length and lower bound 1; then each element as its length (8) and its big-endian value.
    """
    elem, oid = (">i8", 20) if cls is _Int8s else (">f8", 701)
    values = np.asarray(values)
    out = np.empty(len(values), dtype=[("size", ">i4"), ("value", elem)])
    out["size"] = 8
    out["value"] = values
    return cls(np.array([1, 0, oid, len(values), 1], ">i4").tobytes() + out.tobytes())


@functools.cache
def _pg_dumpers(psycopg):
    """psycopg dumpers sending :class:`_Int8s` and :class:`_Float8s` as they are (binary ``bigint[]``, ``float8[]``)."""
    from psycopg.adapt import Dumper

    class Int8sDumper(Dumper):
        format = psycopg.pq.Format.BINARY
        oid = 1016  # bigint[]

        def dump(self, obj):
            return obj

    class Float8sDumper(Dumper):
        format = psycopg.pq.Format.BINARY
        oid = 1022  # float8[]

        def dump(self, obj):
            return obj

    return ((_Int8s, Int8sDumper), (_Float8s, Float8sDumper))


class _Postgres:
    kind = "postgresql"
    ph = "%s"

    def __init__(self, conninfo: str, create: bool, timeout: float):
        try:
            import psycopg
        except ImportError:
            raise BudgetStoreError(
                "A PostgreSQL budget store needs psycopg 3.",
                fix=Fix(
                    "install_psycopg",
                    python="pip install 'geopriv[postgresql]'",
                    cli="pip install 'geopriv[postgresql]'",
                    qgis="Install psycopg into QGIS's Python (pip install 'psycopg[binary]').",
                ),
            ) from None
        self.psycopg = psycopg
        self.shown = _shown_url("postgresql", conninfo)
        try:
            self.con = psycopg.connect(conninfo, autocommit=True, connect_timeout=max(1, int(math.ceil(timeout))))
            self.con.execute(f"SET lock_timeout = {int(timeout * 1000)}")
            # the store's joins (a charge's keys to the balances) merge or loop over the keys in key order, never hash:
            # every charge then locks its persons' rows in the same order, and two charges never deadlock; and its
            # statements are too short for compiling them (jit) to pay
            self.con.execute("SET enable_hashjoin = off")
            self.con.execute("SET jit = off")
            # a charge that returned must survive a crash of the server, whatever its default
            self.con.execute("SET synchronous_commit = on")
            for cls, dumper in _pg_dumpers(psycopg):
                self.con.adapters.register_dumper(cls, dumper)
        except psycopg.Error:
            raise BudgetStoreError(
                f"Cannot connect to the PostgreSQL budget store {self.shown}: check the URL, that "
                "the server runs and accepts this user. Nothing was charged or released.",
                fix=_STORE_FIX,
            ) from None
        self._tx = None

    def begin(self, write=True):
        self.con.execute("BEGIN ISOLATION LEVEL READ COMMITTED")

    def commit(self):
        self.con.execute("COMMIT")

    def rollback(self):
        if self.con.info.transaction_status != self.psycopg.pq.TransactionStatus.IDLE:
            self.con.execute("ROLLBACK")

    def execute(self, sql, params=()):
        return self.con.execute(sql.replace("?", "%s"), params)

    def fetchall(self, sql, params=()):
        return self.execute(sql, params).fetchall()

    def tables(self) -> set:
        return {
            r[0]
            for r in self.con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            ).fetchall()
        }

    def tune_tables(self):
        """Store the audit's packed per-person columns uncompressed, like SQLite (compressing the 8 MB of keys of a
        million persons costs ten times their write: 0.6 s)."""
        self.con.execute(
            "ALTER TABLE geopriv_charge ALTER COLUMN persons SET STORAGE EXTERNAL, "
            "ALTER COLUMN reserved SET STORAGE EXTERNAL, ALTER COLUMN spent SET STORAGE EXTERNAL"
        )

    def create_budget(self, unit_id):
        # half of each page left free for the new versions of its rows (_PG_FILLFACTOR); no index of new rows: a charge
        # inserts only the persons its update did not find (add)
        self.con.execute(
            _BUDGET_TABLE.format(t=_table(unit_id), **_DIALECT["postgresql"]) + f" WITH (fillfactor = {_PG_FILLFACTOR})"
        )

    @staticmethod
    def _rows(keys, *columns):
        """The FROM item ``c(k, <names>)`` over ``keys`` and per-person ``columns`` ((name, values) pairs), and its
        parameters: keys and unequal values travel as binary arrays (:func:`_pg_array`), equal values bound once."""
        names, scalars, arrays = [], [], [_pg_array(keys, _Int8s)]
        for name, values in columns:
            values = np.broadcast_to(np.asarray(values, float), keys.shape)
            if len(values) and values.min() == values.max():
                names.append(f"%s::float8 AS {name}")
                scalars.append(float(values[0]))
            else:
                names.append(f"c.{name}")
                arrays.append(_pg_array(values, _Float8s))
        unnest = ", ".join(["%s::bigint[]"] + ["%s::float8[]"] * (len(arrays) - 1))
        inner = ["k"] + [sql[2:] for sql in names if sql.startswith("c.")]
        return (
            f"(SELECT {', '.join(['c.k', *names])} FROM unnest({unnest}) AS c({', '.join(inner)})) AS c",
            (*scalars, *arrays),
        )

    def _execute(self, sql, params, n):
        """One statement over ``n`` persons: a large one planned for its actual size (never a generic plan) and given
        the memory to sort the keys for a merge join."""
        if n < _PG_BULK:
            return self.con.execute(sql, params)
        self.con.execute("SELECT set_config('work_mem', %s, true)", (f"{min(2048, 64 + n * 96 // 2**20)}MB",))
        return self.con.execute(sql, params, prepare=False)

    def add(self, unit_id, keys, spent, reserved, default):
        """Add ``spent``/``reserved`` to ``keys``' balances; persons not seen yet get ``default`` (None refuses them).

        The persons already there are updated by one UPDATE joined to the keys (in key order: see
        ``enable_hashjoin`` in ``__init__``); the persons it did not find are inserted with the default
        total (NULL: the NOT NULL constraint refuses them; a charge above it: the CHECK constraint).  No
        statement proposes a row for a person who is there already (an upsert's proposed row is checked
        before its conflict is seen).  A person another transaction adds meanwhile makes the insert
        conflict, or the counts disagree: that part is redone, never counted twice nor missed.
        """
        n = len(keys)
        if not n:
            return
        t = _table(unit_id)
        errors = self.psycopg.errors
        spent = np.broadcast_to(np.asarray(spent, float), keys.shape)
        reserved = np.broadcast_to(np.asarray(reserved, float), keys.shape)

        def statements(k, s, r):
            rows, params = self._rows(k, ("s", s), ("r", r))
            update = (
                f"UPDATE {t} AS b SET spent = b.spent + c.s, reserved = b.reserved + c.r FROM {rows} "
                "WHERE b.person = c.k"
            )
            insert = f"INSERT INTO {t} (person, total, spent, reserved) SELECT c.k, %s::float8, c.s, c.r FROM {rows}"
            absent = f" WHERE NOT EXISTS (SELECT FROM {t} AS b WHERE b.person = c.k)"
            return update, insert, absent, params

        if n < _PG_BULK:  # the update names the persons it found; the others are inserted (updated if added since)
            todo = np.ones(n, bool)
            update, insert, _, params = statements(keys, spent, reserved)
            found = [r[0] for r in self.con.execute(update + " RETURNING b.person", params).fetchall()]
            while True:
                todo[np.searchsorted(keys, np.asarray(found, np.int64))] = False
                if not todo.any():
                    return
                update, insert, _, params = statements(keys[todo], spent[todo], reserved[todo])
                self.con.execute("SAVEPOINT geopriv_add")
                try:
                    self.con.execute(insert, (default, *params))
                    self.con.execute("RELEASE SAVEPOINT geopriv_add")
                    return
                except errors.UniqueViolation:  # added by another release since the update: update them now
                    self.con.execute("ROLLBACK TO SAVEPOINT geopriv_add")
                    self.con.execute("RELEASE SAVEPOINT geopriv_add")
                found = [r[0] for r in self.con.execute(update + " RETURNING b.person", params).fetchall()]
        # many persons: counted, not named (the whole charge is redone when another release added some meanwhile)
        update, insert, absent, params = statements(keys, spent, reserved)
        for _ in range(_PG_REDO):
            self.con.execute("SAVEPOINT geopriv_add")
            try:
                found = self._execute(update, params, n).rowcount
                added = 0
                if not found and default is not None:  # all new: copied in
                    added = self._copy_new(t, keys, default, spent, reserved)
                elif found < n:  # some new (or no default: refused by the first row): inserted if not there
                    added = self._execute(insert + (absent if found else ""), (default, *params), n).rowcount
                if found + added == n:
                    self.con.execute("RELEASE SAVEPOINT geopriv_add")
                    return
            except (errors.UniqueViolation, errors.DeadlockDetected):
                pass
            self.con.execute("ROLLBACK TO SAVEPOINT geopriv_add")
            self.con.execute("RELEASE SAVEPOINT geopriv_add")
        raise BudgetStoreError(
            f"The budget store {self.shown} kept changing under this charge (other releases adding "
            "the same persons). Nothing was charged or released.",
            fix=Fix("store_busy", python="Retry the release.", cli="Retry the release.", qgis="Retry the release."),
        )

    def _copy_new(self, t, keys, total, spent, reserved) -> int:
        """Insert balances for ``keys`` (none of them in ``t``) by one binary COPY of rows built by numpy: a third
        faster than INSERT ... SELECT, and judged by the same constraints.  Returns how many rows it copied."""
        rows = np.full(len(keys), np.array((4, 8, 0, 8, total, 8, 0.0, 8, 0.0), _PG_COPY_ROW))
        rows["person"] = keys
        rows["spent"] = spent
        rows["reserved"] = reserved
        with self.con.cursor().copy(f"COPY {t} (person, total, spent, reserved) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(b"PGCOPY\n\xff\r\n\x00" + bytes(8))  # signature, flags, no header extension
            copy.write(memoryview(rows).cast("B"))
            copy.write(b"\xff\xff")  # end of data
        return len(keys)

    def settle(self, unit_id, keys, reserved, spent):
        rows, params = self._rows(keys, ("r", reserved), ("s", spent))
        r = "GREATEST(0.0, b.reserved - c.r)"
        s = f"LEAST(b.spent + c.s, b.total - {r})"
        total = _total_after(s, r, "LEAST", "GREATEST")
        self._execute(
            f"UPDATE {_table(unit_id)} AS b SET reserved = {r}, spent = {s}, total = {total} "
            f"FROM {rows} WHERE b.person = c.k",
            params,
            len(keys),
        )

    def give_back(self, unit_id, keys, spent, reserved):
        rows, params = self._rows(keys, ("s", spent), ("r", reserved))
        s, r = "GREATEST(0.0, b.spent - c.s)", "GREATEST(0.0, b.reserved - c.r)"
        total = _total_after(s, r, "LEAST", "GREATEST")
        self._execute(
            f"UPDATE {_table(unit_id)} AS b SET spent = {s}, reserved = {r}, total = {total} "
            f"FROM {rows} WHERE b.person = c.k",
            params,
            len(keys),
        )

    def set_total(self, unit_id, keys, total):
        rows, params = self._rows(keys)
        self._execute(
            f"UPDATE {_table(unit_id)} AS b SET total = GREATEST(%s, b.spent + b.reserved), granted = %s "
            f"FROM {rows} WHERE b.person = c.k",
            (total, total, *params),
            len(keys),
        )

    def balances_of(self, unit_id, keys):
        rows, params = self._rows(keys)
        return self._execute(
            f"SELECT b.person, b.total, b.spent, b.reserved FROM {_table(unit_id)} AS b JOIN {rows} ON b.person = c.k",
            params,
            len(keys),
        ).fetchall()

    def add_labels(self, pk):
        """Name the persons known by a text id.  Inserted in key order, once each: two releases adding the same
        new labels in different orders would otherwise wait for each other on the key's index (a deadlock)."""
        if len(pk.label_keys):
            keys, first = np.unique(pk.label_keys, return_index=True)
            self.con.execute(
                "INSERT INTO geopriv_person (person, label) SELECT * FROM unnest(%s::bigint[], %s::text[]) "
                "ON CONFLICT DO NOTHING",
                (keys.tolist(), [pk.label_text[i] for i in first]),
            )

    def is_overspend(self, exc) -> bool:
        return isinstance(exc, self.psycopg.errors.CheckViolation)

    def is_missing(self, exc) -> bool:
        return isinstance(exc, self.psycopg.errors.NotNullViolation)

    def wrap(self, exc):
        if isinstance(exc, self.psycopg.errors.LockNotAvailable):
            return BudgetStoreError(
                f"The budget store {self.shown} is locked by another release (it did not become "
                "free within the timeout). Nothing was charged or released.",
                fix=_STORE_FIX,
            )
        if isinstance(exc, (self.psycopg.errors.InsufficientPrivilege, self.psycopg.errors.ReadOnlySqlTransaction)):
            return BudgetStoreError(
                f"The budget store {self.shown} cannot be written by this user. Nothing was charged or released.",
                fix=_STORE_FIX,
            )
        if isinstance(exc, (self.psycopg.errors.DeadlockDetected, self.psycopg.errors.SerializationFailure)):
            return BudgetStoreError(
                f"The budget store {self.shown} was busy with other releases for the same persons "
                "(PostgreSQL chose this one to give way). Nothing was charged or released.",
                fix=Fix("store_busy", python="Retry the release.", cli="Retry the release.", qgis="Retry the release."),
            )
        if isinstance(exc, self.psycopg.OperationalError):
            return BudgetStoreError(
                f"The connection to the budget store {self.shown} failed. Nothing was charged or "
                "released, unless the store's audit shows this release as charged.",
                fix=_STORE_FIX,
            )
        return BudgetStoreError(
            f"The budget store {self.shown} could not be used (PostgreSQL error "
            f"{type(exc).__name__}). Nothing was charged or released.",
            fix=_STORE_FIX,
        )

    def errors(self):
        return (self.psycopg.Error,)

    def close(self):
        self.con.close()


# ------------------------------------------------------------------------------------------ the store
class BudgetStore:
    """Lifetime privacy budgets per person, kept in SQLite or PostgreSQL.

    Parameters
    ----------
    url : str or os.PathLike
        ``"sqlite:///relative/path.db"``, ``"sqlite:////absolute/path.db"`` or a plain file path
        (SQLite); ``"postgresql://user@host/db"`` (psycopg 3, ``pip install 'geopriv[postgresql]'``).
    create : bool
        Create the store if it does not exist.  Default False: a missing store is refused
        (:class:`~geopriv.exceptions.BudgetStoreError`), so that a mistyped path never starts
        everybody's budget again.
    timeout : float
        Seconds to wait for another process's transaction before giving up (default 30).

    Raises
    ------
    geopriv.BudgetStoreError
        If the store is missing (and ``create`` is False), not a geopriv budget store, damaged,
        written by a newer geopriv, locked past ``timeout`` or read-only.  Nothing is modified.
    geopriv.exceptions.ParameterError
        If ``timeout`` is not a positive number of seconds.

    See Also
    --------
    BudgetAccountant : Budgets in memory, for one session.
    BudgetExceededError : Raised when a release would exceed a person's lifetime budget.
    BudgetStoreError : Raised when the store cannot be used.
    perturb : Charges a store with ``budget_store=`` and ``person=``.

    Examples
    --------
    A store in a SQLite file, everyone granted ln 4 within 100 m for life (epsilon per ground
    metre); a release at ln 4 within 200 m spends half of it:

    >>> store = geopriv.BudgetStore("sqlite:///budgets.db", create=True)
    >>> store.grant(math.log(4) / 100, unit="epsilon/m")
    >>> gdf = gpd.GeoDataFrame({"pid": ["ann", "bob"]}, crs="EPSG:32650",
    ...                        geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]))
    >>> out = geopriv.perturb(gdf, level=math.log(4), radius=200, budget_store=store, person="pid", rng=1)
    >>> store.balances()[["person", "unit", "spent", "remaining"]].round(4)
      person       unit   spent  remaining
    0    ann  epsilon/m  0.0069     0.0069
    1    bob  epsilon/m  0.0069     0.0069

    A release that would overspend is refused before any noise is drawn, and charges nothing:

    >>> try:
    ...     geopriv.perturb(gdf, level=math.log(4), radius=100, budget_store=store, person="pid", rng=2)
    ... except geopriv.BudgetExceededError as exc:
    ...     print(type(exc).__name__, exc.fix.kind)
    BudgetExceededError budget_exhausted
    >>> store.close()

    The budgets outlive the session: the file is opened again (without ``create``) later.

    >>> with geopriv.BudgetStore("budgets.db") as store:
    ...     print(store.balances()["spent"].round(4).tolist())
    [0.0069, 0.0069]
    """

    def __init__(self, url, *, create: bool = False, timeout: float = 30.0):
        kind, target = parse_store_url(url)
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ParameterError("timeout must be a positive number of seconds.")
        self._lock = threading.RLock()
        self._db = _SQLite(target, create, timeout) if kind == "sqlite" else _Postgres(target, create, timeout)
        self.url = _shown_url(kind, target)
        self.kind = kind
        try:
            self._open(create)
        except BaseException:
            self._db.close()
            raise

    # ------------------------------------------------------------------ schema
    def _open(self, create: bool) -> None:
        db = self._db
        with self._transaction(what="open"):
            tables = db.tables()
        if "geopriv_meta" not in tables:
            if not create or tables:
                raise BudgetStoreError(
                    f"{self.url} is not a geopriv budget store"
                    + (" (it holds other tables); it was not modified." if tables else " (it is empty)."),
                    fix=_STORE_FIX,
                )
            with self._transaction(what="create"):
                if db.kind == "postgresql":  # creators queue here (SQLite's BEGIN IMMEDIATE already serialises them)
                    db.execute("SELECT pg_advisory_xact_lock(7405112961)")
                tables = db.tables()
                meanwhile = "geopriv_meta" in tables  # created meanwhile by another process: open it (below)
                if not meanwhile:
                    for name, sql in _TABLES.items():
                        if f"geopriv_{name}" not in tables:
                            db.execute(sql.format(**_DIALECT[db.kind]))
                    db.tune_tables()
                    db.execute(
                        "INSERT INTO geopriv_meta (key, value) VALUES (?, ?)", ("schema_version", str(SCHEMA_VERSION))
                    )
                    db.execute("INSERT INTO geopriv_meta (key, value) VALUES (?, ?)", ("created_with", __version__))
                    db.execute("INSERT INTO geopriv_meta (key, value) VALUES (?, ?)", ("created_utc", _now()))
                    for i, unit in enumerate(UNITS, start=1):
                        db.execute("INSERT INTO geopriv_unit (id, unit, default_total) VALUES (?, ?, NULL)", (i, unit))
                        db.create_budget(i)
            if not meanwhile:
                return None
            # else opened below like any store (outside the creating transaction: a transaction cannot nest)
        with self._transaction(what="open"):
            row = db.fetchall("SELECT value FROM geopriv_meta WHERE key = 'schema_version'")
            try:
                version = int(row[0][0])
                if version < 1:  # no store was ever written with it: damaged (no migration starts there)
                    raise ValueError
            except (IndexError, TypeError, ValueError):
                raise BudgetStoreError(
                    f"{self.url} is a damaged geopriv budget store (no schema version).", fix=_STORE_FIX
                ) from None
            if version > SCHEMA_VERSION:
                raise BudgetStoreError(
                    f"The budget store {self.url} was written by a newer geopriv (store schema {version}; this geopriv "
                    f"{__version__} reads schema {SCHEMA_VERSION} and older). Nothing was read or charged.",
                    fix=Fix(
                        "store_newer",
                        python="Upgrade geopriv (pip install -U geopriv) to use this store.",
                        cli="Upgrade geopriv (pip install -U geopriv) to use this store.",
                        qgis="Upgrade the geopriv plugin to use this store.",
                    ),
                )
        if version < SCHEMA_VERSION:
            with self._transaction(what="migrate"):
                for step in range(version, SCHEMA_VERSION):  # migrations, one schema version at a time
                    _MIGRATIONS[step](db)
                    db.execute("UPDATE geopriv_meta SET value = ? WHERE key = 'schema_version'", (str(step + 1),))
        with self._transaction(what="open"):
            missing = {f"geopriv_{n}" for n in _TABLES} - db.tables()
            if missing:
                raise BudgetStoreError(
                    f"{self.url} is a damaged geopriv budget store (missing {sorted(missing)}).", fix=_STORE_FIX
                )

    @contextlib.contextmanager
    def _transaction(self, what: str = "charge"):
        """One transaction (SQLite: BEGIN IMMEDIATE for writes; PostgreSQL: READ COMMITTED with row locks taken in
        key order).  Database errors become BudgetStoreError: never the driver's text, which may quote values."""
        db = self._db
        write = what not in ("read", "open")
        with self._lock:
            try:
                db.begin(write)
            except db.errors() as exc:
                raise db.wrap(exc) from None
            try:
                yield db
            except db.errors() as exc:
                with contextlib.suppress(Exception):
                    db.rollback()
                raise db.wrap(exc) from None
            except BaseException:
                with contextlib.suppress(Exception):
                    db.rollback()
                raise
            try:
                db.commit()
            except db.errors() as exc:
                with contextlib.suppress(Exception):
                    db.rollback()
                raise db.wrap(exc) from None

    def _writing(self, body):
        """``body(db)`` in one write transaction, tried again when PostgreSQL chose it to give way.

        A deadlock or serialization failure rolls the whole transaction back (nothing was charged or
        settled), so running it again is exact; after a few tries the store's "busy" error is raised.
        The pause before each new try is short, random and grows, so the releases that collided do not
        collide again.
        """
        tries = 6
        for attempt in range(tries):
            try:
                with self._transaction() as db:
                    return body(db)
            except BudgetStoreError as exc:
                busy = exc.fix is not None and exc.fix.kind == "store_busy"
                if not busy or attempt == tries - 1:
                    raise
            time.sleep(0.02 * 2**attempt * (1.0 + float(np.random.default_rng().random())))
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the connection (a closed store cannot charge)."""
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"BudgetStore({self.url!r})"

    def __reduce__(self):
        raise ParameterTypeError(
            "A BudgetStore holds a database connection and cannot be pickled: pass its URL to "
            "workers (on dask, the driver charges the store; workers never need it)."
        )

    # ------------------------------------------------------------------ units and grants
    def _unit_id(self, db, unit: str, create: bool = False):
        row = db.fetchall("SELECT id, default_total FROM geopriv_unit WHERE unit = ?", (unit,))
        if row:
            return int(row[0][0]), (None if row[0][1] is None else float(row[0][1]))
        if not create:
            return None, None
        new_id = int(db.fetchall("SELECT COALESCE(MAX(id), 0) + 1 FROM geopriv_unit")[0][0])
        db.execute("INSERT INTO geopriv_unit (id, unit, default_total) VALUES (?, ?, NULL)", (new_id, unit))
        db.create_budget(new_id)
        return new_id, None

    def grant(self, total: float, *, unit: str, persons=None, note: str | None = None) -> None:
        """Set lifetime budgets: the default for everyone (``persons=None``) or the total of ``persons``.

        The default applies to every person the store has not seen yet in ``unit`` (a person is
        seen at their first charge, and keeps the default of that moment).  A total given to
        persons replaces theirs; a total below what a person has already used leaves them
        exhausted (their total becomes what they used: the store never shows more spent than
        granted).  Every grant is kept in the store's audit (:meth:`grants`).

        Parameters
        ----------
        total : float
            The lifetime budget, in ``unit`` (finite, >= 0).
        unit : str
            ``"epsilon/m"`` or ``"epsilon"`` (see :data:`UNITS`), or ``value_unit(column)``.
        persons : array-like, optional
            Person ids (integers or strings).
        note : str, optional
            Why (kept in the audit).
        """
        unit = check_unit(unit)
        total = float(total)
        if not math.isfinite(total) or total < 0:
            raise ParameterError("A lifetime budget must be a finite number >= 0.")
        with self._transaction("grant") as db:
            unit_id, _ = self._unit_id(db, unit, create=True)
            if persons is None:
                db.execute("UPDATE geopriv_unit SET default_total = ? WHERE id = ?", (total, unit_id))
                db.execute(
                    "INSERT INTO geopriv_grant (time_utc, unit, person, total, persons, note) "
                    "VALUES (?, ?, NULL, ?, 0, ?)",
                    (_now(), unit, total, note),
                )
                return
            pk = person_keys(persons)
            db.add_labels(pk)
            db.add(unit_id, pk.keys, 0.0, 0.0, total)  # new persons get the total
            db.set_total(unit_id, pk.keys, total)
            single = pk.keys[0] if len(pk) == 1 else None
            db.execute(
                "INSERT INTO geopriv_grant (time_utc, unit, person, total, persons, note) VALUES (?, ?, ?, ?, ?, ?)",
                (_now(), unit, None if single is None else int(single), total, len(pk), note),
            )

    # ------------------------------------------------------------------ charging
    def reserve(
        self,
        persons,
        amounts,
        *,
        unit: str,
        kind: str,
        spend: bool = True,
        parameters: dict | None = None,
        row_labels=None,
        rows_released: int | None = None,
    ) -> Reservation:
        """Charge a release to its persons before any noise is drawn, or refuse it and charge nothing.

        Parameters
        ----------
        persons : array-like
            The person id of every row (a person may have several rows: their amounts add up).
        amounts : float or array-like
            The cost of each row (one number for all), in ``unit``.
        unit : str
            The unit of the guarantee (:data:`UNITS`).
        kind : str
            What releases: ``"perturb"``, ``"sanitize_traces"``, ... (kept in the audit).
        spend : bool
            True: the cost is final and goes to ``spent`` now.  False: it is the worst case, held
            in ``reserved`` until :meth:`Reservation.commit` settles what was used.
        parameters : dict, optional
            The release's public parameters (its provenance fields), kept in the audit.
        row_labels : array-like, optional
            Row labels to name rows with unusable ids.

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetExceededError
            Some persons cannot afford it (named by their ids), or have no budget in ``unit``.
        BudgetStoreError
            The store cannot be used.
        """
        unit = check_unit(unit)
        pk = persons if isinstance(persons, PersonKeys) else person_keys(persons, row_labels)
        per_row = np.asarray(amounts, dtype=float)
        if not np.all(np.isfinite(per_row)) or np.any(per_row < 0):
            raise ParameterError("The cost of a release must be finite and >= 0 (a bug in the caller).")
        if per_row.ndim == 0:
            per_person = per_row * pk.counts  # exact for one row each
            uniform = float(per_row) if np.all(pk.counts == 1) else None
        else:
            per_person = np.bincount(pk.inverse, weights=per_row, minlength=len(pk))
            uniform = None
        parameters = dict(parameters or {})
        text = json.dumps(parameters, sort_keys=True, default=str)
        release_id = uuid.uuid4().hex
        mechanism = parameters.get("mechanism")
        largest = float(per_person.max()) if len(pk) else 0.0
        state = "charged" if spend else "reserved"
        spent_now = per_person if spend else np.zeros_like(per_person)
        held = np.zeros_like(per_person) if spend else per_person

        def body(db):
            unit_id, default = self._unit_id(db, unit, create=False)
            if unit_id is None:
                raise self._refuse_unit(unit, pk)
            db.add_labels(pk)
            for attempt in range(8):
                try:
                    with self._savepoint(db):
                        if uniform is not None:
                            db.add(unit_id, pk.keys, uniform if spend else 0.0, 0.0 if spend else uniform, default)
                        else:
                            db.add(unit_id, pk.keys, spent_now, held, default)
                    break
                except db.errors() as exc:
                    if not (db.is_overspend(exc) or db.is_missing(exc)):
                        raise
                    # PostgreSQL (READ COMMITTED): the balances re-read for the message may already show budget
                    # another release gave back since; then nobody is over, and the charge is tried again
                    refusal = self._refusal(
                        db,
                        unit,
                        unit_id,
                        default,
                        pk,
                        spent_now,
                        held,
                        final=db.kind == "sqlite" or attempt == 7,
                        parameters=parameters,
                    )
                    if refusal is not None:
                        raise refusal from None
            db.execute(
                "INSERT INTO geopriv_release (release_id, kind, unit, mechanism, parameters, state, started_utc, "
                "finished_utc, persons, rows_released, largest_charge, geopriv_version) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
                (
                    release_id,
                    kind,
                    unit,
                    None if mechanism is None else str(mechanism),
                    text,
                    state,
                    _now(),
                    len(pk),
                    rows_released,
                    largest,
                    __version__,
                ),
            )
            # packed: reserved NULL when every person has largest_charge; spent NULL while reserved, or when it is
            # what was reserved (state charged)
            same = len(pk) == 0 or bool(np.all(per_person == largest))
            db.execute(
                "INSERT INTO geopriv_charge (release_id, persons, reserved, spent) VALUES (?, ?, ?, ?)",
                (
                    release_id,
                    pk.keys.astype("<i8").tobytes(),
                    None if same else per_person.astype("<f8").tobytes(),
                    None,
                ),
            )
            return unit_id

        unit_id = self._writing(body)
        return Reservation(self, release_id, unit, unit_id, pk, per_person, spend)

    def charge_path(
        self,
        person,
        largest: float,
        *,
        unit: str,
        path=None,
        kind: str = "diffuse_locations",
        parameters: dict | None = None,
    ) -> Reservation:
        """Charge a graded release over a network (one secret path) to the source's person, before its noise.

        A fresh path costs its ``largest`` epsilon.  An earlier path (``path``, extended by this
        release) that this store has charged to the same person and unit costs only the increase
        of its largest epsilon; a path the store has not charged (made without a store, or in
        another) is charged in full.  After the release, :meth:`record_path` keeps the new path's
        fingerprint so that a later extension is charged the same way.
        """
        unit = check_unit(unit)
        pk = person_keys([person])
        paid = 0.0
        if path is not None:
            with self._transaction("read") as db:
                row = db.fetchall(
                    "SELECT largest FROM geopriv_path WHERE fingerprint = ? AND person = ? AND unit = ?",
                    (path.fingerprint(), int(pk.keys[0]), unit),
                )
            paid = float(row[0][0]) if row else 0.0
        cost = max(0.0, float(largest) - paid)
        params = dict(parameters or {})
        params["path"] = "extended (charged the increase of its largest epsilon)" if paid else "fresh"
        return self.reserve(pk, cost, unit=unit, kind=kind, spend=True, parameters=params, rows_released=None)

    def record_path(self, new_path, person, largest: float, *, unit: str, old_path=None) -> None:
        """Keep ``new_path``'s fingerprint as paid up to ``largest`` (replacing ``old_path``'s, which it extends)."""
        unit = check_unit(unit)
        key = int(person_keys([person]).keys[0])
        with self._transaction() as db:
            if old_path is not None:
                db.execute(
                    "DELETE FROM geopriv_path WHERE fingerprint = ? AND person = ? AND unit = ?",
                    (old_path.fingerprint(), key, unit),
                )
            fp = new_path.fingerprint()
            db.execute("DELETE FROM geopriv_path WHERE fingerprint = ?", (fp,))
            db.execute(
                "INSERT INTO geopriv_path (fingerprint, person, unit, largest) VALUES (?, ?, ?, ?)",
                (fp, key, unit, float(largest)),
            )

    @contextlib.contextmanager
    def _savepoint(self, db):
        db.execute("SAVEPOINT geopriv_charge")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK TO SAVEPOINT geopriv_charge")
            raise
        db.execute("RELEASE SAVEPOINT geopriv_charge")

    def _refuse_unit(self, unit, pk):
        return BudgetExceededError(
            f"{len(pk)} person(s) have no lifetime budget in {unit!r} ({UNITS.get(unit, 'a diffused value')}): the store "
            "has never granted one in this unit, and budgets in other units cannot pay for it. Nothing was drawn or "
            "charged.",
            fix=Fix(
                "grant_unit",
                python=f"Grant one: store.grant(total, unit={unit!r}).",
                cli=f"Grant one: geopriv budget grant STORE --unit '{unit}' --total T.",
                qgis=f"Grant one with geopriv budget grant STORE --unit '{unit}' --total T.",
            ),
        )

    def _refusal(self, db, unit, unit_id, default, pk, spent, held, final=True, parameters=None):
        """The BudgetExceededError naming who cannot afford the charge; None if nobody is over now (not ``final``).

        ``parameters`` (the release's public fields) say what a row costs, for the message: the
        effective epsilon a snapped release charges, and the total that would afford it.
        """
        need = 0.0  # the smallest total that lets every person named afford this release
        rows = db.balances_of(unit_id, pk.keys)
        spent = np.broadcast_to(np.asarray(spent, float), pk.keys.shape)
        held = np.broadcast_to(np.asarray(held, float), pk.keys.shape)
        have = np.array([r[0] for r in rows], np.int64)
        missing = np.setdiff1d(pk.keys, have)
        parts = []
        if len(have):
            bal = np.array([[r[1], r[2], r[3]] for r in rows], float)
            at = np.searchsorted(pk.keys, have)
            after = (bal[:, 1] + spent[at]) + (bal[:, 2] + held[at])
            over = after > bal[:, 0]
            if over.any():
                worst = float(np.max(after[over] - bal[over, 0]))
                need = max(need, float(np.max(after[over])))
                parts.append(
                    f"{int(over.sum())} person(s) would exceed their lifetime budget in {unit!r}: "
                    f"{format_labels(pk.shown(np.sort(have[over])))} (over by up to {worst:.3g})"
                )
        if len(missing) and default is not None:  # new persons start with the default
            at = np.searchsorted(pk.keys, missing)
            new_over = spent[at] + held[at] > default
            if new_over.any():
                need = max(need, float(np.max((spent[at] + held[at])[new_over])))
                parts.append(
                    f"{int(new_over.sum())} person(s) new to the store would exceed the default lifetime budget "
                    f"in {unit!r} ({default:.6g}) at once: {format_labels(pk.shown(missing[new_over]))}"
                )
        elif len(missing):
            parts.append(
                f"{len(missing)} person(s) have no budget in {unit!r} and the store has no default for it: "
                f"{format_labels(pk.shown(missing))}"
            )
            if len(parts) == 1:  # nobody is over: the store lacks a grant
                return BudgetExceededError(
                    parts[0] + ". Nothing was drawn or charged.", fix=self._refuse_unit(unit, pk).fix
                )
        if not parts and not final:
            return None
        if not parts:  # the constraint fired but no row is over: rounding at the boundary
            parts.append(f"the release would take some person(s) to their lifetime budget in {unit!r} within rounding")
        charge = _charge_note(unit, parameters, bool(np.any(np.asarray(pk.counts) > 1)))
        return BudgetExceededError(
            "; ".join(parts) + ". " + charge + "Nothing was drawn or charged.",
            fix=_grant_fix(unit, need, bool(charge)),
        )

    # ------------------------------------------------------------------ views
    def balances(self, *, unit: str | None = None, persons=None) -> pd.DataFrame:
        """One row per (person, unit): total, spent, reserved, remaining (persons the store has seen)."""
        params = [] if unit is None else [check_unit(unit)]
        keys = None
        if persons is not None:
            keys = person_keys(persons).keys
        with self._transaction("read") as db:
            units = db.fetchall(
                "SELECT id, unit FROM geopriv_unit" + (" WHERE unit = ?" if unit is not None else "") + " ORDER BY id",
                tuple(params),
            )
            rows = []
            for unit_id, name in units:
                rows += [
                    (r[0], r[1], name, r[2], r[3], r[4])
                    for r in db.fetchall(
                        f"SELECT b.person, p.label, b.total, b.spent, b.reserved FROM {_table(unit_id)} AS b "
                        "LEFT JOIN geopriv_person AS p ON p.person = b.person ORDER BY b.person"
                    )
                ]
        frame = pd.DataFrame(rows, columns=["key", "label", "unit", "total", "spent", "reserved"])
        if keys is not None:
            frame = frame[frame["key"].isin(keys)]
        person = [label if isinstance(label, str) else int(k) for k, label in zip(frame["key"], frame["label"])]
        out = pd.DataFrame(
            {
                "person": pd.Series(person, dtype=object),
                "unit": frame["unit"].to_numpy(),
                "total": frame["total"].to_numpy(float),
                "spent": frame["spent"].to_numpy(float),
                "reserved": frame["reserved"].to_numpy(float),
            }
        )
        out["remaining"] = np.maximum(out["total"] - out["spent"] - out["reserved"], 0.0)
        return out

    def defaults(self) -> pd.DataFrame:
        """The default lifetime budget of each unit (None: persons need their own grant)."""
        with self._transaction("read") as db:
            rows = db.fetchall("SELECT unit, default_total FROM geopriv_unit ORDER BY id")
        return pd.DataFrame(
            {
                "unit": pd.Series([r[0] for r in rows], dtype=object),
                "default_total": pd.Series([None if r[1] is None else float(r[1]) for r in rows], dtype=object),
            }
        )

    def releases(self) -> pd.DataFrame:
        """The audit: one row per release (id, kind, unit, mechanism, public parameters, state, times, persons)."""
        with self._transaction("read") as db:
            rows = db.fetchall(
                "SELECT release_id, kind, unit, mechanism, parameters, state, started_utc, finished_utc, persons, "
                "rows_released, largest_charge, geopriv_version FROM geopriv_release ORDER BY started_utc, release_id"
            )
        return pd.DataFrame(
            rows,
            columns=[
                "release_id",
                "kind",
                "unit",
                "mechanism",
                "parameters",
                "state",
                "started_utc",
                "finished_utc",
                "persons",
                "rows_released",
                "largest_charge",
                "geopriv_version",
            ],
        )

    def charges(self, release_id: str | None = None) -> pd.DataFrame:
        """Epsilon charged per person and release: release_id, person, unit, reserved, spent (None while reserved)."""
        sql = (
            "SELECT c.release_id, r.unit, c.persons, c.reserved, c.spent, r.state, r.largest_charge "
            "FROM geopriv_charge AS c "
            "JOIN geopriv_release AS r ON r.release_id = c.release_id"
        )
        params = ()
        if release_id is not None:
            sql += " WHERE c.release_id = ?"
            params = (release_id,)
        with self._transaction("read") as db:
            rows = db.fetchall(sql + " ORDER BY r.started_utc, c.release_id", params)
            labels = dict(db.fetchall("SELECT person, label FROM geopriv_person"))
        parts = []
        for rid, unit, persons, reserved, spent, state, largest in rows:
            keys = np.frombuffer(bytes(persons), "<i8")
            res = (
                np.full(len(keys), float(largest or 0.0)) if reserved is None else np.frombuffer(bytes(reserved), "<f8")
            )
            if spent is not None:
                sp = np.frombuffer(bytes(spent), "<f8")
            else:
                sp = (
                    res
                    if state == "charged"
                    else np.zeros(len(keys))
                    if state == "cancelled"
                    else np.full(len(keys), np.nan)
                )
            parts.append(
                pd.DataFrame(
                    {
                        "release_id": rid,
                        "person": pd.Series([labels.get(int(k), int(k)) for k in keys], dtype=object),
                        "unit": unit,
                        "reserved": res,
                        "spent": sp,
                    }
                )
            )
        if not parts:
            return pd.DataFrame(columns=["release_id", "person", "unit", "reserved", "spent"])
        return pd.concat(parts, ignore_index=True)

    def grants(self) -> pd.DataFrame:
        """The audit of grants: time, unit, person (None: the default), total, number of persons, note."""
        with self._transaction("read") as db:
            rows = db.fetchall(
                "SELECT time_utc, unit, person, total, persons, note FROM geopriv_grant ORDER BY time_utc"
            )
            labels = dict(db.fetchall("SELECT person, label FROM geopriv_person"))
        frame = pd.DataFrame(rows, columns=["time_utc", "unit", "person", "total", "persons", "note"])
        # from the rows, not the frame's column: pandas reads [None, key] as floats, which lose 64-bit keys
        frame["person"] = pd.Series(
            [None if r[2] is None else labels.get(int(r[2]), int(r[2])) for r in rows], index=frame.index, dtype=object
        )
        return frame

    def info(self) -> dict:
        """Schema version, the geopriv that created the store, and counts (persons, releases, unfinished)."""
        with self._transaction("read") as db:
            meta = dict(db.fetchall("SELECT key, value FROM geopriv_meta"))
            ids = [r[0] for r in db.fetchall("SELECT id FROM geopriv_unit")]
            persons = db.fetchall(
                "SELECT COUNT(*) FROM (" + " UNION ".join(f"SELECT person FROM {_table(i)}" for i in ids) + ") AS p"
            )[0][0]
            states = dict(db.fetchall("SELECT state, COUNT(*) FROM geopriv_release GROUP BY state"))
        return {
            "url": self.url,
            "schema_version": int(meta.get("schema_version", 0)),
            "created_with": meta.get("created_with"),
            "created_utc": meta.get("created_utc"),
            "persons": int(persons),
            "releases": {s: int(states.get(s, 0)) for s in _STATES},
        }


class Reservation:
    """A release's charge in a :class:`BudgetStore`: made before any noise is drawn.

    Use it as a context manager around the release: call :meth:`start` just before the first
    draw.  On a normal exit it is committed; on an exception it is cancelled (everything given
    back) if :meth:`start` was not called, and committed in full otherwise.
    """

    def __init__(self, store, release_id, unit, unit_id, pk, reserved, spent_at_once):
        self.store = store
        self.release_id = release_id
        self.unit = unit
        self._unit_id = unit_id
        self.persons = pk
        self.amounts = reserved  # per person (pk.keys order)
        self._spent_at_once = spent_at_once
        self.started = False
        self.done = False

    def start(self) -> None:
        """Mark that noise is about to be drawn: from now on nothing can be given back."""
        self.started = True

    def commit(self, spent=None) -> None:
        """Finish the release: ``spent`` per person (<= the reservation; default: all of it), the rest given back."""
        if self.done:
            return
        if spent is None:
            spent = self.amounts
        spent = np.broadcast_to(np.asarray(spent, dtype=float), self.amounts.shape)
        if np.any(spent > self.amounts) or np.any(spent < 0) or not np.all(np.isfinite(spent)):
            raise ParameterError("A release cannot spend more than it reserved (a bug in the caller).")

        def body(db):
            if not self._spent_at_once:
                db.settle(self._unit_id, self.persons.keys, self.amounts, spent)
                db.execute(
                    "UPDATE geopriv_charge SET spent = ? WHERE release_id = ?",
                    (np.asarray(spent, "<f8").tobytes(), self.release_id),
                )
            db.execute(
                "UPDATE geopriv_release SET state = ?, finished_utc = ? WHERE release_id = ?",
                ("settled" if not self._spent_at_once else "charged", _now(), self.release_id),
            )

        self.store._writing(body)
        self.done = True

    def cancel(self) -> None:
        """Give everything back: allowed only before :meth:`start` (no noise drawn)."""
        if self.done:
            return
        if self.started:
            raise ParameterError("A release that may have drawn noise cannot give its budget back.")
        zero = np.zeros_like(self.amounts)

        def body(db):
            if self._spent_at_once:
                db.give_back(self._unit_id, self.persons.keys, self.amounts, zero)
            else:
                db.give_back(self._unit_id, self.persons.keys, zero, self.amounts)
            db.execute(
                "UPDATE geopriv_release SET state = 'cancelled', finished_utc = ? WHERE release_id = ?",
                (_now(), self.release_id),
            )

        self.store._writing(body)
        self.done = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        elif not self.started:
            self.cancel()
        else:
            self.commit()  # noise may have been drawn: charged in full
        return False


def _rekey_persons(db) -> None:
    """Schema 1 -> 2: the persons known by text, re-keyed by geopriv's one rule for who is who.

    Schema 1 keyed text ids by their raw text (``"05"``, ``" 5"``, NFD ``"Renée"`` were persons of their
    own); :func:`geopriv.identity.identities` reads them as ``5`` and ``"Renée"``.  Every person whose
    stored label now has another key moves to it, in every unit's balances, grants and paths; two
    persons that become one are merged: their spent and reserved amounts add up, their total is the
    smaller one (never raised; a merged person already over it is left with nothing more to spend).
    Labels the rule refuses keep their old key.  The audit of charges keeps the keys it was written with.
    """
    from ..exceptions import IdentityError
    from ..identity import identities

    moves = []
    for old, label in db.fetchall("SELECT person, label FROM geopriv_person"):
        try:
            ident = identities(pd.Index([label], dtype=object))
        except IdentityError:
            continue
        new = int(ident.keys[0])
        if new != int(old):
            moves.append((int(old), new, ident.text.get(new)))
    units = [int(r[0]) for r in db.fetchall("SELECT id FROM geopriv_unit")]
    for old, new, text in moves:
        for unit in units:
            t = _table(unit)
            src = db.fetchall(f"SELECT total, spent, reserved, granted FROM {t} WHERE person = ?", (old,))
            if not src:
                continue
            dst = db.fetchall(f"SELECT total, spent, reserved, granted FROM {t} WHERE person = ?", (new,))
            if not dst:
                db.execute(f"UPDATE {t} SET person = ? WHERE person = ?", (new, old))
                continue
            (t0, s0, r0, g0), (t1, s1, r1, g1) = src[0], dst[0]
            spent, reserved = float(s0) + float(s1), float(r0) + float(r1)
            total = max(min(float(t0), float(t1)), spent + reserved)  # never raised beyond what was spent
            grants = [float(g) for g in (g0, g1) if g is not None]
            db.execute(f"DELETE FROM {t} WHERE person = ?", (old,))
            db.execute(
                f"UPDATE {t} SET total = ?, spent = ?, reserved = ?, granted = ? WHERE person = ?",
                (total, spent, reserved, min(grants) if grants else None, new),
            )
        db.execute("UPDATE geopriv_grant SET person = ? WHERE person = ?", (new, old))
        db.execute("UPDATE geopriv_path SET person = ? WHERE person = ?", (new, old))
        db.execute("DELETE FROM geopriv_person WHERE person = ?", (old,))
        if text is not None and not db.fetchall("SELECT 1 FROM geopriv_person WHERE person = ?", (new,)):
            db.execute("INSERT INTO geopriv_person (person, label) VALUES (?, ?)", (new, text))


#: schema migrations: _MIGRATIONS[v](db) takes a store from schema v to v + 1
_MIGRATIONS: dict = {1: _rekey_persons}


def opens_budget_store(func):
    """Decorate a release function: a ``budget_store=`` given as a URL or path is opened for the call and closed after.

    A :class:`BudgetStore` passed in stays open (it is the caller's).
    """

    @functools.wraps(func)
    def release(*args, **kwargs):
        given = kwargs.get("budget_store")
        if given is None or isinstance(given, BudgetStore):
            return func(*args, **kwargs)
        with open_store(given) as store:
            kwargs["budget_store"] = store
            return func(*args, **kwargs)

    return release


def open_store(store) -> BudgetStore | None:
    """A :class:`BudgetStore` from what a release function was given (a store, a URL or a path, or None)."""
    if store is None or isinstance(store, BudgetStore):
        return store
    if isinstance(store, (str, os.PathLike)):
        return BudgetStore(store)
    raise ParameterError(
        "budget_store must be a geopriv.BudgetStore, its URL (sqlite:///path.db, postgresql://...) or None."
    )
