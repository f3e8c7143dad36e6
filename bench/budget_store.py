"""Benchmark: what the persistent budget store (geopriv.BudgetStore) costs a release, side by side in one script.

Three sections; every figure is a ratio of two things run alternately in this one script, or a rate
measured over the same seconds (the machine is shared: read the ratios, not the seconds):

* ``sqlite`` (a): ``geopriv.perturb`` of N points (EPSG:32650, N distinct persons in the ``pid``
  column, level ln 4 within 200 m, declared bounds) charging a SQLite store, against the same
  release without a store, run alternately: the first release (every person new to the store)
  and a later one (every person already there).  Target: within 2x.
* ``postgresql`` (b): the same against a throwaway PostgreSQL server on a local Unix socket
  (tests/pg_cluster.py; a fresh database per repetition).  Target: within 3x.
* ``writers`` (c): W writer processes (default 8) each charging single-person releases in a loop
  for some seconds (``store.reserve(person, amount, spend=True)`` then ``reservation.commit()``),
  persons drawn at random from a pool already in the store; the rate of releases per second of all
  writers together.  Target on SQLite: at least 1,000/s.  Also, for information: full one-row
  ``geopriv.perturb`` releases charging the store, and both on PostgreSQL.

Each store is granted a default lifetime budget of 1 epsilon per metre (a release costs about
0.0069: enough for over a hundred releases).  Run from the repository root (``tests.pg_cluster``
must import):

    python bench/budget_store.py [--sections sqlite,postgresql,writers] [--n 1000000] [--repeats 3]
        [--writers 8] [--seconds 5] [--out bench/results/budget_store.md]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import geopandas as gpd  # noqa: E402

import geopriv  # noqa: E402
from geopriv.budget import BudgetStore  # noqa: E402

UNIT = "epsilon/m"
GRANT = 1.0  # epsilon per metre: over a hundred releases at ln 4 within 200 m
BOUNDS = (430_000, 4_410_000, 460_000, 4_440_000)
PERTURB = {"level": math.log(4), "radius": 200, "bounds": BOUNDS}


def points(n, seed=0):
    """n points around x 440-450 km, y 4420-4430 km (UTM 50N), each of its own person (pid)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(440_000, 450_000, n)
    y = rng.uniform(4_420_000, 4_430_000, n)
    pid = rng.permutation(np.arange(10**9, 10**9 + n))
    return gpd.GeoDataFrame({"pid": pid}, geometry=gpd.points_from_xy(x, y), crs=32650)


def timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    took = time.perf_counter() - t0
    del out  # freeing a million shapely points is not part of either release
    return took


def spread(values):
    return f"{min(values):.2f}-{max(values):.2f}"


# ------------------------------------------------------------------------------ (a), (b): 1 M persons
def releases_vs_plain(gdf, new_store, repeats, label):
    """Alternate: plain perturb, first release (new store), plain perturb, later release (same store)."""
    plain_kw = dict(PERTURB)
    timed(lambda: geopriv.perturb(gdf, **plain_kw))  # warm-up: frames, allocator, imports
    first, later, base1, base2 = [], [], [], []
    for r in range(repeats):
        store = new_store()
        try:
            store.grant(GRANT, unit=UNIT)
            kw = dict(PERTURB, budget_store=store, person="pid")
            base1.append(timed(lambda: geopriv.perturb(gdf, **plain_kw)))
            first.append(timed(lambda: geopriv.perturb(gdf, **kw)))
            timed(lambda: geopriv.perturb(gdf, **kw))  # a second charge: the rows have history
            base2.append(timed(lambda: geopriv.perturb(gdf, **plain_kw)))
            later.append(timed(lambda: geopriv.perturb(gdf, **kw)))
            spent = store.balances(unit=UNIT, persons=gdf["pid"].iloc[:3])["spent"].tolist()
            assert len(spent) == 3 and spent[0] > 0 and spent.count(spent[0]) == 3, spent  # three charges each
        finally:
            store.close()
        print(
            f"  {label} rep {r + 1}: plain {base1[-1]:.2f} s, first {first[-1]:.2f} s "
            f"({first[-1] / base1[-1]:.2f}x); plain {base2[-1]:.2f} s, later {later[-1]:.2f} s "
            f"({later[-1] / base2[-1]:.2f}x)",
            flush=True,
        )
    rows = []
    for what, mine, base in (
        ("first release (persons new to the store)", first, base1),
        ("later release (persons already there)", later, base2),
    ):
        ratios = [m / b for m, b in zip(mine, base)]
        rows.append(
            f"| {label}: {what} | plain perturb {statistics.median(base):.2f} s | with the store "
            f"{statistics.median(mine):.2f} s | {statistics.median(ratios):.2f}x ({spread(ratios)}) |"
        )
    return rows


class _Timed:
    """A store's database connection whose statements are timed (this benchmark's breakdown only)."""

    def __init__(self, con, log):
        self._con, self._log = con, log

    def execute(self, sql, *args, **kwargs):
        t0 = time.perf_counter()
        out = self._con.execute(sql, *args, **kwargs)
        self._log.append((time.perf_counter() - t0, str(sql)))
        return out

    def cursor(self, *args, **kwargs):  # PostgreSQL's COPY of new balances goes through a cursor
        return _TimedCursor(self._con.cursor(*args, **kwargs), self._log)

    def __getattr__(self, name):
        return getattr(self._con, name)


class _TimedCursor:
    def __init__(self, cur, log):
        self._cur, self._log = cur, log

    @contextlib.contextmanager
    def copy(self, sql, *args, **kwargs):
        t0 = time.perf_counter()
        with self._cur.copy(sql, *args, **kwargs) as copy:
            yield copy
        self._log.append((time.perf_counter() - t0, str(sql)))

    def __getattr__(self, name):
        return getattr(self._cur, name)


def _part(sql):
    if "geopriv_budget_" in sql:
        return "balances"
    if sql.startswith("COMMIT"):
        return "commit"
    if "geopriv_charge" in sql:
        return "audit"
    return "other"


def breakdown(gdf, new_store, label):
    """Where a charge of every person of ``gdf`` goes: keying the persons, then reserve's statements (the balance
    upsert or update and insert, the commit, the packed audit row, the rest) and the rest of reserve in Python."""
    from geopriv.budget import person_keys
    from geopriv.keys import row_identities

    store = new_store()
    store.grant(GRANT, unit=UNIT)
    log = []
    store._db.con = _Timed(store._db.con, log)  # a private attribute: for this breakdown only
    rows = []
    try:
        for release in ("first", "later", "later"):
            log.clear()
            t0 = time.perf_counter()
            ids, labels = row_identities(gdf, "pid", refuse_positions=True)
            keys = person_keys(ids, labels)
            t1 = time.perf_counter()
            store.reserve(keys, 0.00693, unit=UNIT, kind="perturb").commit()
            t2 = time.perf_counter()
            part = dict.fromkeys(("balances", "commit", "audit", "other"), 0.0)
            for took, sql in log:
                part[_part(sql.lstrip())] += took
            python = (t2 - t1) - sum(part.values())
            rows.append(
                f"| {label}: where a {release} charge of {len(keys):,} persons goes | | keying the persons "
                f"{t1 - t0:.2f} s; balance statements (and COPY) {part['balances']:.2f} s; commits "
                f"{part['commit']:.2f} s; "
                f"audit row {part['audit']:.2f} s; other statements {part['other']:.2f} s; the rest (Python) "
                f"{python:.2f} s | |"
            )
            print(rows[-1], flush=True)
    finally:
        store.close()
    return [rows[0], rows[2]]


def section_sqlite(gdf, repeats):
    folder = tempfile.mkdtemp(prefix="geopriv-bench-")
    count = iter(range(10**6))
    try:

        def new_store():
            return BudgetStore(f"sqlite:///{folder}/b{next(count)}.db", create=True)

        return releases_vs_plain(gdf, new_store, repeats, "SQLite") + breakdown(gdf, new_store, "SQLite")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def section_postgresql(gdf, repeats, url):
    from tests.pg_cluster import fresh_database

    def new_store():
        return BudgetStore(fresh_database(url), create=True)

    return releases_vs_plain(gdf, new_store, repeats, "PostgreSQL") + breakdown(gdf, new_store, "PostgreSQL")


# ------------------------------------------------------------------------------ (c): concurrent writers
def _writer(url, what, pool, seed, barrier, seconds, out):
    """One writer process: wait for the others, then release for ``seconds``; put the count."""
    store = BudgetStore(url)
    rng = np.random.default_rng(seed)
    persons = rng.choice(pool, 100_000)
    one = None
    if what in ("perturb", "plain"):
        one = points(1, seed)
        kw = dict(PERTURB, budget_store=store, person="pid") if what == "perturb" else dict(PERTURB)
        geopriv.perturb(one, **dict(PERTURB))  # warm-up outside the window
    barrier.wait()
    start = time.perf_counter()
    done = 0
    while time.perf_counter() - start < seconds:
        person = int(persons[done % len(persons)])
        if what == "reserve":
            store.reserve([person], 0.0001, unit=UNIT, kind="bench", spend=True).commit()
        else:
            one["pid"] = [person]
            geopriv.perturb(one, **kw)  # kw: without the store for "plain"
        done += 1
    out.put((done, time.perf_counter() - start))
    store.close()


def writers_rate(url, what, writers, seconds, pool):
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(writers + 1), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, what, pool, i, barrier, seconds, out)) for i in range(writers)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    results = [out.get(timeout=seconds + 300) for _ in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    return sum(d for d, _ in results) / wall


def section_writers(repeats, writers, seconds, pg_url):
    pool = np.arange(10**9, 10**9 + 10_000)
    rows = []
    folder = tempfile.mkdtemp(prefix="geopriv-bench-")
    count = iter(range(10**6))
    stores = [("SQLite", lambda: f"sqlite:///{folder}/w{next(count)}.db")]
    if pg_url:
        from tests.pg_cluster import fresh_database

        stores.append(("PostgreSQL", lambda: fresh_database(pg_url)))
    try:
        for label, new_url in stores:
            rates = {"reserve": [], "perturb": [], "plain": []}
            for r in range(repeats):  # alternately: the three kinds of release, a new store each
                for what in rates:
                    url = new_url()
                    with BudgetStore(url, create=True) as store:
                        store.grant(GRANT, unit=UNIT)
                        store.grant(GRANT, unit=UNIT, persons=pool)  # the pool is in the store already
                    rates[what].append(writers_rate(url, what, writers, seconds, pool))
                    print(
                        f"  {label}, {writers} writers, {what}: rep {r + 1}: {rates[what][-1]:.0f} releases/s",
                        flush=True,
                    )

            def rate(what):
                return f"{statistics.median(rates[what]):.0f}/s ({min(rates[what]):.0f}-{max(rates[what]):.0f})"

            target = " (target >= 1000/s)" if label == "SQLite" else ""
            rows.append(
                f"| {label}: {writers} writer processes, single-person releases (reserve + commit), "
                f"{seconds:g} s{target} | | {rate('reserve')} | |"
            )
            per = [p / b for p, b in zip(rates["perturb"], rates["plain"])]
            rows.append(
                f"| {label}: {writers} writer processes, one-row perturb, {seconds:g} s | without a store "
                f"{rate('plain')} | charging the store {rate('perturb')} | {statistics.median(per):.2f} of the "
                f"rate ({spread(per)}) |"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="sqlite,postgresql,writers")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    secs = args.sections.split(",")
    rows = ["| what | A | B | B / A (median, range) |", "|---|---|---|---|"]
    load = [os.getloadavg()[0]]
    cluster = None
    pg_url = None
    pg_settings = "no PostgreSQL"
    if "postgresql" in secs or "writers" in secs:
        from tests.pg_cluster import PostgresUnavailable, cluster as pg_cluster

        try:
            cluster = pg_cluster()
            pg_url = cluster.__enter__()
            import psycopg

            with psycopg.connect(pg_url) as con:
                server = con.execute("SELECT current_setting('server_version')").fetchone()[0]
                pg_settings = f"PostgreSQL {server}, " + ", ".join(
                    f"{name} {con.execute(f'SHOW {name}').fetchone()[0]}"
                    for name in ("fsync", "synchronous_commit", "full_page_writes", "shared_buffers")
                )
        except PostgresUnavailable as exc:
            print(f"no PostgreSQL ({exc}): its sections are skipped", file=sys.stderr)
            cluster = None
    try:
        if "sqlite" in secs or "postgresql" in secs:
            gdf = points(args.n)
            print(f"{args.n:,} points, {args.n:,} persons, repeats = {args.repeats}", flush=True)
            if "sqlite" in secs:
                rows += section_sqlite(gdf, args.repeats)
            if "postgresql" in secs and pg_url:
                rows += section_postgresql(gdf, args.repeats, pg_url)
            del gdf
        if "writers" in secs:
            rows += section_writers(args.repeats, args.writers, args.seconds, pg_url)
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)
    load.append(os.getloadavg()[0])
    text = "\n".join(rows)
    print(text)
    if args.out:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        with open(args.out, "w") as fh:
            fh.write(
                f"# budget store: costs (bench/budget_store.py, {time.strftime('%Y-%m-%d')}, on {commit} + the "
                f"working tree, {os.cpu_count()} CPUs shared, load average {load[0]:.1f} at the start and "
                f"{load[1]:.1f} at the end, medians of {args.repeats})\n\n"
                f"Sections: `{args.sections}`; {args.n:,} points and persons; {args.writers} writers for "
                f"{args.seconds:g} s; tests/pg_cluster.py's throwaway server over a Unix socket ({pg_settings})."
                f"\n\n{text}\n"
            )


if __name__ == "__main__":
    main()
