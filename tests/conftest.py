"""Shared fixtures: the real data in ../shared/data and small synthetic layers."""
from __future__ import annotations

import os
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest

import geopriv  # noqa: F401  (registers the accessor)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def shared(name: str) -> Path:
    """Path of a file in ../shared/data; a missing file fails the test (it is not optional)."""
    path = SHARED / name
    if not path.exists():
        pytest.fail(f"test data {path} is missing: the repository expects ../shared/data beside the checkout")
    return path


def pytest_collection_modifyitems(config, items):
    # QGIS tests must run (not skip) where GEOPRIV_REQUIRE_QGIS=1 (the QGIS environment of scripts/test.sh).
    if os.environ.get("GEOPRIV_REQUIRE_QGIS") == "1":
        try:
            import qgis.core  # noqa: F401
        except ImportError as exc:  # pragma: no cover
            raise pytest.UsageError(f"GEOPRIV_REQUIRE_QGIS=1 but QGIS cannot be imported: {exc}")


@pytest.fixture(scope="session")
def soho():
    """324 Soho cholera deaths, EPSG:3857 (Web Mercator at 51.5 N: 1.61 CRS units per metre)."""
    return gpd.read_file(shared("soho_cholera.gpkg"), layer="deaths")


@pytest.fixture(scope="session")
def geolife_sample():
    return gpd.read_file(shared("geolife_sample.gpkg"))


@pytest.fixture
def utm_points():
    """1,000 points around Beijing in UTM 50N metres."""
    rng = np.random.default_rng(7)
    x = 448_000 + rng.uniform(0, 5_000, 1000)
    y = 4_416_000 + rng.uniform(0, 5_000, 1000)
    return gpd.GeoDataFrame({"name": [f"p{i}" for i in range(1000)], "value": np.arange(1000)},
                            geometry=gpd.points_from_xy(x, y), crs=32650)
