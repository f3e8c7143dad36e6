"""The throwaway PostgreSQL server of the tests (tests/pg_cluster.py, fixtures pg_server and pg_url):
a real server that psycopg reaches through the URL, one fresh database per test, no TCP port."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgresql
try:
    import psycopg
except ImportError:  # the fixtures skip (or fail where PostgreSQL is required) and say why
    psycopg = None


def test_a_table_round_trips(pg_url):
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE spent (key text PRIMARY KEY, epsilon double precision NOT NULL)")
        conn.cursor().executemany("INSERT INTO spent VALUES (%s, %s)", [("a", 0.5), ("b", 1.25)])
        conn.commit()
    with psycopg.connect(pg_url) as conn:  # a second connection sees the committed rows
        assert conn.execute("SELECT key, epsilon FROM spent ORDER BY key").fetchall() == [("a", 0.5), ("b", 1.25)]
        assert conn.execute("SHOW server_encoding").fetchone() == ("UTF8",)


def test_each_test_has_its_own_database(pg_server, pg_url):
    with psycopg.connect(pg_url) as conn:
        mine = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute("CREATE TABLE only_here (x int)")
        conn.commit()
    with psycopg.connect(pg_server) as conn:
        assert conn.execute("SELECT current_database()").fetchone()[0] != mine
        assert conn.execute("SELECT to_regclass('only_here')").fetchone() == (None,)


def _listening_tcp_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if os.path.exists(table):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    inodes.add(fields[9])
    return inodes


def test_the_server_listens_on_no_tcp_port(pg_url):
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        assert conn.execute("SELECT inet_server_addr()").fetchone() == (None,)  # we came through the socket
        data_dir, port = (conn.execute(f"SHOW {name}").fetchone()[0] for name in ("data_directory", "port"))
    # the postmaster holds no listening TCP socket (read from /proc: nothing else on the machine interferes)
    postmaster = int(Path(data_dir, "postmaster.pid").read_text().split()[0])
    sockets = {
        os.readlink(fd.path)[len("socket:[") : -1]
        for fd in os.scandir(f"/proc/{postmaster}/fd")
        if os.readlink(fd.path).startswith("socket:[")
    }
    assert sockets, "the postmaster holds no socket at all: /proc gave the wrong process"
    assert not sockets & _listening_tcp_inodes()
    # and TCP on localhost at its port does not reach it (another server may listen there: not ours)
    try:
        other = psycopg.connect(host="localhost", port=port, user="geopriv", dbname="postgres", connect_timeout=3)
    except psycopg.OperationalError:
        return
    with other:
        assert other.execute("SHOW data_directory").fetchone()[0] != data_dir
