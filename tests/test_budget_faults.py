"""A budget store that cannot be used: a clear error, nothing charged, nothing released.

Each fault is made for real (no mocks) and must give a BudgetStoreError (or, for a refusal,
BudgetExceededError) whose message names the problem without echoing the driver's exception text
(sqlite3's or psycopg's, which may quote values), leaves every table of the store as it was, and,
through perturb, draws no noise (the Generator's state is unchanged):

* a missing SQLite store (no create=True) is not created; a missing PostgreSQL database, an empty one;
* a corrupt SQLite file (random bytes) and a store truncated in the middle;
* a read-only store: a 0444 file and a 0555 folder.  Under root (CI) permissions do not stop root, so
  the attempt runs in a subprocess that drops to the ``nobody`` user with os.setuid after its imports
  (the interpreter may live where nobody can read); on PostgreSQL, a role granted SELECT only;
* a locked store: another process holds BEGIN IMMEDIATE (SQLite), another connection holds a row
  lock or a table lock (PostgreSQL); BudgetStore(url, timeout=0.5) says 'locked', and a lock holder
  killed with SIGKILL leaves a usable store;
* a store written by a newer schema is refused with the advice to upgrade; a damaged schema version
  or a missing table is refused as damaged;
* a database (or GeoPackage) with other tables and no geopriv tables is refused and not modified.

Deterministic: no timing in any assertion (a lock is held until the test lets it go).
"""

from __future__ import annotations

import copy
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest

from geopriv.budget import PER_METRE, SCHEMA_VERSION, BudgetStore
from geopriv.exceptions import BudgetStoreError, user_message
from tests.budget_support import (  # noqa: F401
    assert_no_driver_text,
    driver_error_text,
    dump,
    execute,
    kind,
    sqlite_path,
    store_url_fixture,
    tables,
)

ROOT = Path(__file__).resolve().parents[1]
A = 1 / 64


@pytest.fixture
def points():
    rng = np.random.default_rng(3)
    return gpd.GeoDataFrame(
        {"pid": [101, 102, 102, 103]},
        geometry=gpd.points_from_xy(448_000 + rng.uniform(0, 900, 4), 4_416_000 + rng.uniform(0, 900, 4)),
        crs=32650,
    )


def make_store(url, persons=(101, 102, "ann")):
    """A store with a default grant and one charge (something to lose)."""
    with BudgetStore(url, create=True) as s:
        s.grant(1.0, unit=PER_METRE)
        s.reserve(list(persons), 2 * A, unit=PER_METRE, kind="test")


def refused_perturb(points, url, **kw):
    """perturb through the store must raise a BudgetStoreError and draw nothing: the exception."""
    rng = np.random.default_rng(9)
    state = copy.deepcopy(rng.bit_generator.state)
    with pytest.raises(BudgetStoreError) as refused:
        points.priv.perturb(epsilon=0.01, budget_store=url, person="pid", rng=rng, **kw)
    assert rng.bit_generator.state == state, "noise was drawn"
    return refused.value


def file_state(path) -> dict:
    """The bytes of a SQLite store's files (the database, its write-ahead log and shared memory index)."""
    return {
        suffix: Path(str(path) + suffix).read_bytes()
        for suffix in ("", "-wal", "-shm")
        if Path(str(path) + suffix).exists()
    }


# ------------------------------------------------------------------------------------------ missing
def test_a_missing_sqlite_store_is_refused_and_not_created(tmp_path, points):
    path = tmp_path / "typo.db"
    url = f"sqlite:///{path}"
    with pytest.raises(BudgetStoreError, match="no budget store") as refused:
        BudgetStore(url)
    assert "create=True" in str(refused.value)  # the Python advice
    assert "geopriv budget grant" in user_message(refused.value, front_end="cli")
    exc = refused_perturb(points, url)
    assert_no_driver_text(exc)
    assert not path.exists() and list(tmp_path.iterdir()) == []  # nothing created, not even a -wal
    with pytest.raises(BudgetStoreError, match="folder"):
        BudgetStore(f"sqlite:///{tmp_path}")


@pytest.mark.postgresql
def test_a_missing_or_empty_postgresql_database_is_refused(pg_url, points):
    missing = pg_url.replace("/test_", "/nothing_here_")
    import psycopg

    with pytest.raises(psycopg.Error) as driver:
        psycopg.connect(missing).close()
    with pytest.raises(BudgetStoreError, match="Cannot connect") as refused:
        BudgetStore(missing, create=True)
    assert_no_driver_text(refused.value, str(driver.value))
    with pytest.raises(BudgetStoreError, match="is empty"):
        BudgetStore(pg_url)
    refused_perturb(points, pg_url)
    assert tables(pg_url) == []  # nothing created


# ------------------------------------------------------------------------------------------ corrupt
def test_a_file_of_random_bytes_is_refused_and_left_alone(tmp_path, points):
    path = tmp_path / "budgets.db"
    path.write_bytes(np.random.default_rng(0).bytes(16_384))
    before = file_state(path)
    driver = driver_error_text(f"sqlite:///{path}", "SELECT name FROM sqlite_master")
    for create in (False, True):
        with pytest.raises(BudgetStoreError, match="damaged") as refused:
            BudgetStore(f"sqlite:///{path}", create=create)
        assert_no_driver_text(refused.value, driver)
        assert "Restore it from a backup" in str(refused.value)
    refused_perturb(points, f"sqlite:///{path}")
    assert file_state(path) == before


def test_a_store_truncated_in_the_middle_is_refused_and_left_alone(tmp_path, points):
    path = tmp_path / "budgets.db"
    url = f"sqlite:///{path}"
    with BudgetStore(url, create=True) as s:  # ~1 MB: persons and releases spread over many pages
        s.grant(1.0, unit=PER_METRE)
        for i in range(10):
            s.reserve(np.arange(i * 3000, (i + 1) * 3000), A, unit=PER_METRE, kind="test")
    assert not Path(f"{path}-wal").exists()  # checkpointed on close: everything is in the file
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 1234])  # in the middle of a page
    before = file_state(path)
    driver = driver_error_text(url, "SELECT COUNT(*) FROM geopriv_budget_1")
    with pytest.raises(BudgetStoreError, match="damaged") as refused, BudgetStore(url) as s:
        s.reserve(np.arange(0, 30_000, 7), A, unit=PER_METRE, kind="test")  # if opening succeeds, the charge cannot
    assert_no_driver_text(refused.value, driver)
    refused_perturb(points, url)
    after = file_state(path)
    assert after[""] == before[""] and not after.get("-wal")  # nothing written, nothing in a write-ahead log


# ------------------------------------------------------------------------------------------ read-only
_UNPRIVILEGED = textwrap.dedent("""
    import json, os, sys
    import sqlite3
    import numpy, pandas  # everything the attempt needs, imported while we may still read the interpreter's files
    from geopriv.budget import BudgetStore, PER_METRE
    from geopriv.exceptions import BudgetExceededError, BudgetStoreError
    url, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if uid >= 0:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    out = {"euid": os.geteuid(), "stage": "open"}
    try:
        with BudgetStore(url, timeout=2) as store:
            out["stage"] = "charge"
            store.reserve([101, 999], 1 / 64, unit=PER_METRE, kind="test")
            out["stage"] = "charged"
    except (BudgetStoreError, BudgetExceededError) as exc:
        out.update(error=type(exc).__name__, message=str(exc), cause=repr(exc.__cause__),
                   driver=str(exc.__context__) if exc.__context__ is not None else None)
    print(json.dumps(out))
""")


def _others_can_reach(folder: Path) -> bool:
    return all(os.stat(p).st_mode & 0o001 for p in (folder, *folder.parents))


@pytest.fixture
def writable_folder(tmp_path):
    """A folder for the store that the unprivileged user (``nobody`` under root, else ourselves) owns and reaches."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    base = Path(tempfile.gettempdir()).resolve()
    base = base if _others_can_reach(base) else Path("/tmp")
    folder = Path(tempfile.mkdtemp(prefix="geopriv-ro-", dir=base))
    try:
        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        folder.chmod(0o755)
        yield folder
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


def _attempt_unprivileged(url: str) -> dict:
    """Open the store and charge it in a subprocess: as ``nobody`` when we are root (root ignores permissions)."""
    uid = gid = -1
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        uid, gid = nobody.pw_uid, nobody.pw_gid
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": "/nonexistent"}
    done = subprocess.run(
        [sys.executable, "-c", _UNPRIVILEGED, url, str(uid), str(gid)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd="/",
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["euid"] == (uid if uid >= 0 else os.geteuid())
    return out


@pytest.mark.parametrize("read_only", ["file", "folder"])
def test_a_read_only_store_is_refused_and_left_alone(writable_folder, read_only):
    path = writable_folder / "budgets.db"
    url = f"sqlite:///{path}"
    make_store(url)
    if os.geteuid() == 0:  # the unprivileged user owns it, as a user owns their own store
        nobody = pwd.getpwnam("nobody")
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    before, files = dump(url), file_state(path)
    target = path if read_only == "file" else writable_folder
    mode = target.stat().st_mode
    target.chmod(0o444 if read_only == "file" else 0o555)
    try:
        out = _attempt_unprivileged(url)
    finally:
        target.chmod(mode)
    assert out.get("error") == "BudgetStoreError", out
    assert "cannot be written" in out["message"] and "nothing was charged" in out["message"].lower()
    assert out["cause"] == "None"
    if out["driver"]:
        assert out["driver"] not in out["message"], out
    assert dump(url) == before
    assert file_state(path)[""] == files[""]


@pytest.mark.postgresql
def test_a_postgresql_store_this_user_cannot_write_is_refused(pg_url):
    make_store(pg_url)
    before = dump(pg_url)
    role = f"reader_{uuid.uuid4().hex[:8]}"
    database = pg_url.split("?")[0].rsplit("/", 1)[1]
    execute(
        pg_url,
        f"CREATE ROLE {role} LOGIN",
        f'GRANT CONNECT ON DATABASE "{database}" TO {role}',
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}",
    )
    reader = pg_url.replace("postgresql://geopriv@", f"postgresql://{role}@")
    with BudgetStore(reader, timeout=2) as s:  # it may read ...
        assert len(s.balances()) == 3
        driver = driver_error_text(reader, "INSERT INTO geopriv_meta VALUES ('x', 'y')")
        with pytest.raises(BudgetStoreError, match="cannot be written") as refused:  # ... not charge
            s.reserve([101], A, unit=PER_METRE, kind="test")
        assert_no_driver_text(refused.value, driver)
        with pytest.raises(BudgetStoreError, match="cannot be written"):
            s.grant(2.0, unit=PER_METRE)
    assert dump(pg_url) == before


# ------------------------------------------------------------------------------------------ locked
_HOLD_SQLITE_LOCK = textwrap.dedent("""
    import sqlite3, sys
    con = sqlite3.connect(sys.argv[1], isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    con.execute("UPDATE geopriv_meta SET value = value WHERE key = 'schema_version'")
    print("locked", flush=True)
    sys.stdin.readline()
    con.execute("ROLLBACK")
""")


def test_a_sqlite_store_locked_by_another_process(tmp_path, points):
    path = tmp_path / "budgets.db"
    url = f"sqlite:///{path}"
    make_store(url)
    before = dump(url)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_SQLITE_LOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with BudgetStore(url, timeout=0.5) as s:  # readers are never blocked (write-ahead log) ...
            assert len(s.balances()) == 3
            for charge in (
                lambda: s.reserve([101], A, unit=PER_METRE, kind="test"),  # ... writers wait, then stop
                lambda: s.grant(2.0, unit=PER_METRE),
            ):
                with pytest.raises(BudgetStoreError, match="locked") as refused:
                    charge()
                assert_no_driver_text(refused.value, "database is locked")
                assert "Retry" in str(refused.value)
        with BudgetStore(url, timeout=0.5) as s:
            assert "locked" in str(refused_perturb(points, s))
        assert dump(url) == before
    finally:
        holder.kill()  # SIGKILL while it holds the lock: the operating system releases it
        holder.wait()
    assert holder.returncode == -signal.SIGKILL
    with BudgetStore(url, timeout=0.5) as s:
        s.reserve([101], A, unit=PER_METRE, kind="test")
        assert s.balances(persons=[101])["spent"].item() == 3 * A
    assert execute(url, "PRAGMA integrity_check") == [("ok",)]


@pytest.mark.postgresql
def test_a_postgresql_store_locked_by_another_connection(pg_url, points):
    import psycopg

    make_store(pg_url)
    before = dump(pg_url)
    with psycopg.connect(pg_url) as other:  # a transaction: its locks are held until it ends
        table = "geopriv_budget_" + str(
            other.execute("SELECT id FROM geopriv_unit WHERE unit = %s", (PER_METRE,)).fetchone()[0]
        )
        other.execute(f"SELECT * FROM {table} WHERE person = 101 FOR UPDATE")  # a row lock on person 101
        with BudgetStore(pg_url, timeout=0.5) as s:
            with pytest.raises(BudgetStoreError, match="locked") as refused:
                s.reserve([102, 101], A, unit=PER_METRE, kind="test")
            assert_no_driver_text(refused.value, "canceling statement due to lock timeout", "lock timeout")
            assert dump(pg_url) == before  # (read from a third connection)
            s.reserve([102], A, unit=PER_METRE, kind="test")  # other persons are not blocked
            s.grant(0.5, unit=PER_METRE)  # nor is a default grant
        other.rollback()
    with psycopg.connect(pg_url) as other:  # a table lock: the store cannot even be opened
        other.execute("LOCK TABLE geopriv_meta IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(BudgetStoreError, match="locked") as refused:
            BudgetStore(pg_url, timeout=0.5)
        assert_no_driver_text(refused.value, "lock timeout")
        other.rollback()
    with psycopg.connect(pg_url) as other:  # the audit locked: a release cannot be recorded, so not charged
        other.execute("LOCK TABLE geopriv_release IN EXCLUSIVE MODE")
        with BudgetStore(pg_url, timeout=0.5) as s:
            after_102 = dump(pg_url)
            with pytest.raises(BudgetStoreError, match="locked"):
                s.reserve([103], A, unit=PER_METRE, kind="test")
            exc = refused_perturb(points, s)
            assert "locked" in str(exc)
            assert dump(pg_url) == after_102
        other.rollback()
    with BudgetStore(pg_url, timeout=0.5) as s:
        assert s.balances(persons=[101, 102, 103])["spent"].tolist() == [2 * A, 3 * A]


# ------------------------------------------------------------------------------------------ schema
def test_a_store_from_a_newer_geopriv_is_refused_with_the_advice_to_upgrade(store_url, points):
    make_store(store_url)
    execute(store_url, ("UPDATE geopriv_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)))
    before = dump(store_url)
    with pytest.raises(BudgetStoreError, match="newer") as refused:
        BudgetStore(store_url)
    assert "Upgrade geopriv" in str(refused.value) and f"schema {SCHEMA_VERSION + 1}" in str(refused.value)
    assert "Upgrade geopriv" in user_message(refused.value, front_end="cli")
    assert "Upgrade the geopriv plugin" in user_message(refused.value, front_end="qgis")
    with pytest.raises(BudgetStoreError, match="newer"):
        BudgetStore(store_url, create=True)
    exc = refused_perturb(points, store_url)
    assert "newer" in str(exc)
    assert dump(store_url) == before  # not migrated, not touched


@pytest.mark.parametrize("version", ["0", "-3", "two", ""])
def test_a_damaged_schema_version_is_refused(tmp_path, version):
    url = f"sqlite:///{tmp_path / 'budgets.db'}"
    make_store(url)
    execute(url, ("UPDATE geopriv_meta SET value = ? WHERE key = 'schema_version'", (version,)))
    before = dump(url)
    with pytest.raises(BudgetStoreError, match="damaged"):
        BudgetStore(url)
    assert dump(url) == before


def test_a_store_missing_a_table_is_refused(store_url):
    make_store(store_url)
    execute(store_url, "DROP TABLE geopriv_charge")
    before = dump(store_url)
    with pytest.raises(BudgetStoreError, match="damaged") as refused:
        BudgetStore(store_url)
    assert "geopriv_charge" in str(refused.value)
    assert dump(store_url) == before


def test_a_database_with_other_tables_is_refused_and_not_modified(store_url, points):
    if kind(store_url) == "sqlite":
        execute(store_url, "CREATE TABLE visits (person INTEGER, place TEXT)", "INSERT INTO visits VALUES (1, 'home')")
        files = file_state(sqlite_path(store_url))
    else:
        execute(store_url, "CREATE TABLE visits (person INTEGER, place TEXT)", "INSERT INTO visits VALUES (1, 'home')")
    before = dump(store_url)
    for create in (False, True):
        with pytest.raises(BudgetStoreError, match="other tables") as refused:
            BudgetStore(store_url, create=create)
        assert_no_driver_text(refused.value)
    refused_perturb(points, store_url)
    assert dump(store_url) == before and tables(store_url) == ["visits"]
    if kind(store_url) == "sqlite":
        assert file_state(sqlite_path(store_url)) == files  # not even switched to the write-ahead log


def test_a_geopackage_given_as_the_store_is_refused_and_not_modified(tmp_path, points):
    gpkg = tmp_path / "people.gpkg"
    points.to_file(gpkg, driver="GPKG")
    before = gpkg.read_bytes()
    with pytest.raises(BudgetStoreError, match="not a geopriv budget store"):
        BudgetStore(f"sqlite:///{gpkg}", create=True)
    refused_perturb(points, str(gpkg))
    assert gpkg.read_bytes() == before and not Path(f"{gpkg}-wal").exists()
