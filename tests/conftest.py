"""Shared fixtures: the real data shipped in the repository and small synthetic layers.

Test data live in ``tests/data/`` (see its README for sources and licences) or, for the data the
package itself ships, in ``geopriv/data/``.  Nothing outside the checkout is read, so the suite
runs from a fresh clone.
"""

from __future__ import annotations

import os
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest

import geopriv  # noqa: F401  (registers the accessor)

ROOT = Path(__file__).resolve().parents[1]
#: where test data are looked up, in order
DATA_DIRS = (ROOT / "tests" / "data", ROOT / "geopriv" / "data")


def data_path(name: str) -> Path:
    """Path of a data file shipped in the repository (tests/data, then geopriv/data).

    A missing file fails the test: the data are part of the repository, not optional.
    """
    for folder in DATA_DIRS:
        path = folder / name
        if path.exists():
            return path
    tried = ", ".join(str(folder / name) for folder in DATA_DIRS)
    pytest.fail(f"test data {name!r} is missing (tried {tried}); it is part of the repository: check out tests/data")


#: Former name of :func:`data_path` (it used to read the folder beside the checkout); same lookup now.
shared = data_path


def pytest_collection_modifyitems(config, items):
    # QGIS tests must run (not skip) where GEOPRIV_REQUIRE_QGIS=1 (the QGIS environment of scripts/test.sh).
    if os.environ.get("GEOPRIV_REQUIRE_QGIS") == "1":
        try:
            import qgis.core  # noqa: F401
        except ImportError as exc:  # pragma: no cover
            raise pytest.UsageError(f"GEOPRIV_REQUIRE_QGIS=1 but QGIS cannot be imported: {exc}")
    # a test on a PostgreSQL server is marked so, whether or not it says so itself (-m "not postgresql")
    for item in items:
        if {"pg_server", "pg_url"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgresql)


@pytest.fixture(autouse=True)
def geopriv_home(tmp_path_factory, monkeypatch):
    """Each test has its own, empty geopriv data directory (verification stamps and their key):
    nothing is written to the real one, and no test finds another test's stamps."""
    home = tmp_path_factory.mktemp("geopriv-home")
    monkeypatch.setenv("GEOPRIV_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def pg_server():
    """URL of a throwaway PostgreSQL server for the session (tests/pg_cluster.py: Unix socket only,
    stopped and deleted at the end).  Without PostgreSQL (or psycopg) the tests using it skip, and fail
    where GEOPRIV_REQUIRE_POSTGRESQL=1 (scripts/test.sh)."""
    from tests import pg_cluster

    reason = pg_cluster.missing()
    if reason:
        if os.environ.get("GEOPRIV_REQUIRE_POSTGRESQL") == "1":
            pytest.fail(f"GEOPRIV_REQUIRE_POSTGRESQL=1 but {reason}", pytrace=False)
        pytest.skip(f"no PostgreSQL: {reason}")
    with pg_cluster.cluster() as url:
        yield url


@pytest.fixture
def pg_url(pg_server):
    """URL of a new, empty database on the session's PostgreSQL server, for this test alone."""
    from tests import pg_cluster

    return pg_cluster.fresh_database(pg_server)


@pytest.fixture(scope="session")
def soho():
    """324 Soho cholera deaths, EPSG:3857 (Web Mercator at 51.5 N: 1.61 CRS units per metre)."""
    return gpd.read_file(data_path("soho_cholera.gpkg"), layer="deaths")


@pytest.fixture(scope="session")
def geolife_sample():
    return gpd.read_file(data_path("geolife_sample.gpkg"))


@pytest.fixture
def utm_points():
    """1,000 points around Beijing in UTM 50N metres."""
    rng = np.random.default_rng(7)
    x = 448_000 + rng.uniform(0, 5_000, 1000)
    y = 4_416_000 + rng.uniform(0, 5_000, 1000)
    return gpd.GeoDataFrame(
        {"name": [f"p{i}" for i in range(1000)], "value": np.arange(1000)}, geometry=gpd.points_from_xy(x, y), crs=32650
    )
