"""One real, headless QGIS per test session, with Processing and the geopriv provider.

The plugin is imported from ../../qgis_plugin under the name it has when installed from the
zip (``geopriv_qgis``), through its own ``classFactory``.  Where QGIS cannot be imported (the
newest-dependencies environment of scripts/test.sh, which deselects ``-m qgis`` anyway) these
tests are not collected; with GEOPRIV_REQUIRE_QGIS=1 a missing QGIS is an error (tests/conftest.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = ROOT / "qgis_plugin"
PACKAGE = "geopriv_qgis"

try:
    import qgis.core  # noqa: F401
except ImportError:
    if os.environ.get("GEOPRIV_REQUIRE_QGIS") == "1":
        raise
    collect_ignore_glob = ["test_*.py"]


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.qgis)


def import_plugin():
    """The plugin package from the source tree, named as when installed (geopriv_qgis)."""
    if PACKAGE in sys.modules:
        return sys.modules[PACKAGE]
    spec = importlib.util.spec_from_file_location(
        PACKAGE, PLUGIN_DIR / "__init__.py", submodule_search_locations=[str(PLUGIN_DIR)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def qgis_app():
    from qgis.core import QgsApplication

    app = QgsApplication([], False)
    app.initQgis()
    plugins = os.path.join(QgsApplication.pkgDataPath(), "python", "plugins")
    if plugins not in sys.path:
        sys.path.append(plugins)
    from processing.core.Processing import Processing

    Processing.initialize()
    yield app


@pytest.fixture(scope="session")
def plugin(qgis_app):
    """The geopriv plugin, started as QGIS starts it (classFactory, then initProcessing)."""
    package = import_plugin()
    instance = package.classFactory(None)
    instance.initProcessing()
    yield instance
    instance.unload()


@pytest.fixture(scope="session")
def provider(plugin):
    return plugin.provider


@pytest.fixture
def run(provider):
    """processing.run on a geopriv algorithm, returning its results dict."""
    import processing

    def _run(alg_id, params, feedback=None, context=None):
        return processing.run(f"geopriv:{alg_id}", params, feedback=feedback, context=context)

    return _run


@pytest.fixture(scope="session")
def geolife_fixes(qgis_app):
    """The GeoLife sample's 5,908 fixes as points to perturb one by one: shuffled, ids renumbered.

    The file lists each trace's fixes in time order, i.e. in spatial order, which a release of the
    points would publish (geopriv refuses it): the fixes are shuffled, ``fid`` and ``id`` (numbered in
    time order) are renumbered in the new order, and the time stamps ``t`` and the per-trace
    ``sequence``, which put the fixes of a trace back in order, are dropped (releasing traces with
    their times is what geopriv:sanitizetraces does).
    """
    from qgis_helpers import data_path, shuffled

    return shuffled(
        data_path("geolife_sample.gpkg"), seed=0, renumber=("fid", "id"), drop=("sequence", "t"), name="geolife fixes"
    )
