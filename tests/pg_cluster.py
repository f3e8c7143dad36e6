"""Throwaway PostgreSQL clusters for the tests and benchmarks: a real server, no mocks.

:func:`cluster` runs ``initdb`` in a new temporary directory (trust authentication, C locale, UTF-8),
starts the server with ``pg_ctl`` listening on a Unix socket in that directory only (no TCP port:
``listen_addresses = ''``), creates a database and yields its URL, e.g.
``postgresql://geopriv@/geopriv?host=/tmp/geopriv-pg-1a2b3c``, which psycopg 3 (libpq) accepts as it
is.  On leaving, even on an error, the server is stopped (``pg_ctl stop -m immediate``) and the
directory deleted.  :func:`fresh_database` adds an empty database to a running cluster and returns its
URL (one per test, for isolation).

initdb and postgres refuse to run as root: under root (CI), the server is run as the ``postgres``
system user (Debian's postgresql package creates it) and the directory is handed to that user.

``python -m tests.pg_cluster`` starts one, prints its URL and waits until Ctrl-C (or SIGTERM), for
benchmarks.  The server binaries come from ``scripts/_env.sh``'s ``ensure_postgresql`` (Debian's
``postgresql``); :func:`missing` says what is missing, if anything.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

#: the cluster's superuser (a database role; with trust authentication over the socket, no password)
SUPERUSER = "geopriv"
#: the system user that runs the server when we are root
SERVICE_USER = "postgres"
#: seconds pg_ctl waits for the server to start or stop
TIMEOUT = 60
#: a Unix socket path is at most 107 bytes: the socket is <dir>/.s.PGSQL.5432 (and its .lock)
_SOCKET_MAX = 107 - len("/.s.PGSQL.5432.lock")


class PostgresUnavailable(RuntimeError):
    """PostgreSQL's server binaries (or, under root, the user to run them as) are missing."""


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl: initdb's on PATH, else the highest
    /usr/lib/postgresql/<version>/bin (Debian keeps them off PATH); None when there is none."""
    exe = shutil.which("initdb")
    if exe:
        bindir = Path(os.path.realpath(exe)).parent  # a symlink on PATH: its pg_ctl and postgres sit beside it
        if (bindir / "pg_ctl").exists():
            return bindir
    found = []
    for bindir in Path("/usr/lib/postgresql").glob("*/bin"):
        try:
            version = tuple(int(part) for part in bindir.parent.name.split("."))
        except ValueError:
            continue
        if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists():
            found.append((version, bindir))
    return max(found)[1] if found else None


def _service_user() -> pwd.struct_passwd | None:
    """The user to run initdb and the server as: None for ourselves, ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root, and there is no {SERVICE_USER!r} system user to run PostgreSQL as "
            "(initdb and postgres refuse root): install Debian's postgresql package "
            "(scripts/_env.sh ensure_postgresql), or run as a non-root user"
        ) from None


def missing() -> str | None:
    """Why no cluster can be started here (binaries, the user to run them as, psycopg), or None."""
    if find_bindir() is None:
        return (
            "PostgreSQL's server binaries (initdb, pg_ctl) are not on PATH nor in /usr/lib/postgresql/*/bin: "
            "'apt-get install postgresql' (Debian; scripts/test.sh does it as root)"
        )
    try:
        _service_user()
    except PostgresUnavailable as exc:
        return str(exc)
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        return f"psycopg cannot be imported ({exc}): pip install 'geopriv[postgresql]'"
    return None


def _base_dir(user: pwd.struct_passwd | None) -> str:
    """Where to make the cluster's directory: the usual temporary directory, unless its path is too long
    for a Unix socket or (under root) the postgres user could not reach into it; /tmp then."""
    base = tempfile.gettempdir()
    if len(os.path.join(base, "geopriv-pg-xxxxxxxx")) > _SOCKET_MAX:
        return "/tmp"
    if user is not None:
        path = Path(base).resolve()
        for folder in (path, *path.parents):
            if not os.stat(folder).st_mode & 0o001:  # others cannot traverse it
                return "/tmp"
    return base


class _Server:
    """One cluster's directory and binaries; commands run as the service user when we are root."""

    def __init__(self, bindir: Path, root: Path, user: pwd.struct_passwd | None):
        self.bindir, self.root, self.user = bindir, root, user
        self.data, self.log = root / "data", root / "server.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        self.env.update(LC_ALL="C", LANG="C")
        if user is not None:
            self.env.update(HOME=str(root), USER=user.pw_name, LOGNAME=user.pw_name)

    def run(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        as_user = {} if self.user is None else dict(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        result = subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            cwd=self.root,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            **as_user,
            **kwargs,
        )
        if result.returncode:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{args[0]} failed (exit {result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
                + (f"\n--- {self.log} (end) ---\n{log}" if log else "")
            )
        return result

    def start(self) -> None:
        self.run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--no-locale",
            "--encoding=UTF8",
            "--no-sync",
        )
        socket_dir = str(self.root).replace("'", "''")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# tests/pg_cluster.py: a throwaway test server, Unix socket only\n"
                "listen_addresses = ''\n"
                f"unix_socket_directories = '{socket_dir}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            )
        # its own session: a Ctrl-C at the terminal reaches us, and we stop the server ourselves
        self.run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(TIMEOUT),
            "-s",
            "start",
            start_new_session=True,
        )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", str(TIMEOUT), "-s", "stop")


def _url(socket_dir: str | os.PathLike, dbname: str) -> str:
    return f"postgresql://{SUPERUSER}@/{quote(dbname)}?host={quote(str(socket_dir), safe='/')}"


@contextlib.contextmanager
def cluster(dbname: str = "geopriv") -> Iterator[str]:
    """Start a throwaway PostgreSQL server and yield the URL of a new database ``dbname`` on it;
    stop it and delete its directory afterwards (also on errors).  Raises
    :class:`PostgresUnavailable` when :func:`missing` has a reason."""
    reason = missing()
    if reason:
        raise PostgresUnavailable(reason)
    bindir, user = find_bindir(), _service_user()
    root = Path(tempfile.mkdtemp(prefix="geopriv-pg-", dir=_base_dir(user)))
    server = _Server(bindir, root, user)
    try:
        if user is not None:
            os.chown(root, user.pw_uid, user.pw_gid)
        server.start()
        yield fresh_database(_url(root, "postgres"), dbname)
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


def fresh_database(url: str, name: str | None = None) -> str:
    """Create an empty database on the server of ``url`` (a new unique name unless ``name``) and
    return ``url`` pointing at it."""
    import psycopg
    from psycopg import sql

    name = name or f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, dbname="postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(name)))


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the server on kill too, not only Ctrl-C
    started = time.perf_counter()
    try:
        with cluster() as url:
            print(url, flush=True)
            print(f"(started in {time.perf_counter() - started:.2f} s; Ctrl-C stops it)", file=sys.stderr, flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
            stopping = time.perf_counter()
        print(f"(stopped in {time.perf_counter() - stopping:.2f} s)", file=sys.stderr)
    except PostgresUnavailable as exc:
        print(f"tests.pg_cluster: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
