"""Run inside QGIS Desktop by test_desktop.py (``qgis --code desktop_run.py``), under Xvfb.

Environment: GEOPRIV_DESKTOP_STAGE ("first-run": a fresh profile, the plugin installed from the
zip and enabled, nothing else; "restart": the same profile after the first run's installation),
GEOPRIV_DESKTOP_DIR (where the report, screenshots and outputs go), GEOPRIV_DESKTOP_INPUT (a point
layer source).  Writes report.json; exits QGIS normally (the test checks the exit code and
QGIS's crash marker for the plugin).
"""

import json
import os
import sys
import traceback

from qgis.core import QgsApplication, QgsProject, QgsVectorLayer
from qgis.PyQt.QtCore import QTimer
from qgis.PyQt.QtWidgets import QApplication, QDockWidget
from qgis.utils import iface, plugins

STAGE = os.environ["GEOPRIV_DESKTOP_STAGE"]
OUT = os.environ["GEOPRIV_DESKTOP_DIR"]
SOURCE = os.environ["GEOPRIV_DESKTOP_INPUT"]
report = {"stage": STAGE, "errors": [], "shots": []}


def shot(widget, name):
    for _ in range(5):
        QApplication.processEvents()
    path = os.path.join(OUT, f"{STAGE}-{name}.png")
    widget.grab().save(path)
    report["shots"].append(os.path.basename(path))


def run_location_dependent():
    """Location-dependent privacy: reads a raster (rasterio's wheel) and solves kernels (scikit-fmm) inside QGIS."""
    import processing
    from osgeo import gdal
    from qgis.core import QgsFeature, QgsGeometry, QgsPointXY

    raster = os.environ["GEOPRIV_DESKTOP_RASTER"]
    x0, dx, _, y0, _, dy = gdal.Open(raster).GetGeoTransform()
    layer = QgsVectorLayer("Point?crs=EPSG:30166", "one point", "memory")
    feature = QgsFeature()
    feature.setGeometry(QgsGeometry.fromPointXY(QgsPointXY(x0 + 20 * dx, y0 + 20 * dy)))
    layer.dataProvider().addFeatures([feature])
    result = processing.run(
        "geopriv:perturblocationdependent", {"INPUT": layer, "POPULATION": raster, "OUTPUT": "TEMPORARY_OUTPUT"}
    )
    report["location_dependent_features"] = result["OUTPUT"].featureCount()
    report["verified_max_ratio"] = result.get("VERIFIED_MAX_RATIO")
    report["rasterio"] = getattr(sys.modules.get("rasterio"), "__file__", None)
    report["skfmm"] = getattr(sys.modules.get("skfmm"), "__file__", None)


def run_algorithm():
    import processing

    target = os.path.join(OUT, f"{STAGE}-perturbed.gpkg")
    result = processing.run("geopriv:perturbpoints", {"INPUT": SOURCE, "RADIUS": 200.0, "OUTPUT": target})
    layer = QgsVectorLayer(result["OUTPUT"], "perturbed (geopriv)", "ogr")
    report["output_valid"] = layer.isValid()
    report["output_features"] = layer.featureCount()
    report["epsilon_per_m"] = result.get("EPSILON_PER_M")
    source = QgsVectorLayer(SOURCE, "true points", "ogr")
    QgsProject.instance().addMapLayers([source, layer])
    iface.setActiveLayer(layer)
    iface.mapCanvas().setExtent(layer.extent().buffered(200))
    iface.mapCanvas().refreshAllLayers()
    toolbox = iface.mainWindow().findChild(QDockWidget, "ProcessingToolbox")
    if toolbox is not None:
        toolbox.show()
        toolbox.raise_()
    dialog = processing.createAlgorithmDialog("geopriv:perturbpoints", {"INPUT": SOURCE})
    dialog.resize(1100, 720)
    dialog.show()
    shot(dialog, "algorithm-dialog")
    dialog.close()
    QTimer.singleShot(0, lambda: None)
    shot(iface.mainWindow(), "finished-run")


def run_budget_store():
    """Perturb points charged to a lifetime budget store (SQLite) that affords one release: the second is refused,
    naming persons, and writes nothing."""
    import math

    import processing
    from qgis.core import QgsProcessingException

    import geopriv

    path = os.path.join(OUT, f"{STAGE}-budgets.db")
    with geopriv.BudgetStore(path, create=True) as store:
        store.grant(math.log(4) / 150, unit="epsilon/m")
    params = {"INPUT": SOURCE, "RADIUS": 200.0, "BUDGET_STORE": path, "PERSON": "Id"}
    first = processing.run("geopriv:perturbpoints", dict(params, OUTPUT=os.path.join(OUT, f"{STAGE}-charged.gpkg")))
    report["budget_first_features"] = QgsVectorLayer(first["OUTPUT"], "charged", "ogr").featureCount()
    second = os.path.join(OUT, f"{STAGE}-refused.gpkg")
    try:
        processing.run("geopriv:perturbpoints", dict(params, OUTPUT=second))
        report["budget_refusal"] = None
    except QgsProcessingException as exc:
        report["budget_refusal"] = str(exc)
    report["budget_refused_output_written"] = os.path.exists(second)
    with geopriv.BudgetStore(path) as store:
        balances = store.balances()
        report["budget_persons_charged"] = int((balances["spent"] > 0).sum())
        report["budget_releases"] = len(store.releases())


def main():
    try:
        plugin = plugins.get("geopriv_qgis")
        report["plugin_class"] = type(plugin).__name__ if plugin is not None else None
        if STAGE == "first-run":
            shot(iface.mainWindow(), "message")
            dialog = plugin.open_dialog()
            dialog.resize(760, 560)
            shot(dialog, "install-dialog")
            outcome = dialog.run_install()
            report["install_ok"] = outcome.ok
            report["install_log_tail"] = outcome.log[-15:]
            shot(dialog, "installed")
            dialog.accept()  # finished -> the real plugin starts without a restart if it can
            report["started_in_place"] = plugin.started is not None
        registry = QgsApplication.processingRegistry()
        provider = registry.providerById("geopriv")
        report["algorithms"] = sorted(a.id() for a in provider.algorithms()) if provider else []
        if provider is not None:
            run_algorithm()
            run_location_dependent()
            run_budget_store()
        report["pyproj"] = getattr(sys.modules.get("pyproj"), "__file__", None)
        report["pyogrio_loaded"] = "pyogrio" in sys.modules
        import geopriv

        report["geopriv"] = geopriv.__file__
    except Exception:  # noqa: BLE001  (the report carries it to the test)
        report["errors"].append(traceback.format_exc())
    with open(os.path.join(OUT, f"{STAGE}-report.json"), "w") as f:
        json.dump(report, f, indent=1)
    QgsProject.instance().removeAllMapLayers()  # no "save the project? / temporary layers" question on exit
    QgsProject.instance().clear()
    QgsProject.instance().setDirty(False)
    QTimer.singleShot(60_000, lambda: os._exit(3))  # an exit blocked by a dialog fails the test, fast
    iface.actionExit().trigger()


QTimer.singleShot(1500, main)
