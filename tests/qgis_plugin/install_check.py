"""Run in a fresh process by test_packaging.py: install the plugin zip into a new QGIS profile
folder as QGIS's 'Install from ZIP' does, then load and start it with the plugin manager API,
headless.  Prints one JSON line with what it found.

    python install_check.py PLUGIN_ZIP PROFILE_FOLDER
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main(zip_path: str, profile: str) -> dict:
    from qgis.core import QgsApplication

    app = QgsApplication([], False, profile)  # a fresh profile folder, as a new user has
    app.initQgis()
    python = os.path.join(QgsApplication.pkgDataPath(), "python")  # pyplugin_installer, core plugins
    sys.path += [python, os.path.join(python, "plugins")]
    import qgis.utils
    from processing.core.Processing import Processing
    from pyplugin_installer.installer_data import plugins as installed
    from pyplugin_installer.unzip import unzip

    Processing.initialize()
    home_plugins = os.path.join(QgsApplication.qgisSettingsDirPath(), "python", "plugins")
    os.makedirs(home_plugins, exist_ok=True)
    unzip(zip_path, home_plugins)  # what Plugins > Install from ZIP does

    # what QGIS does at start-up with the profile's plugin folder
    qgis.utils.home_plugin_path = home_plugins
    qgis.utils.plugin_paths = [home_plugins]
    sys.path.insert(0, home_plugins)
    qgis.utils.updateAvailablePlugins()
    report = {"settings_dir": QgsApplication.qgisSettingsDirPath(), "available": list(qgis.utils.available_plugins)}
    meta = installed.getInstalledPlugin("geopriv_qgis", os.path.join(home_plugins, "geopriv_qgis"), False)
    report["installer_error"] = meta["error"]
    report["installer_name"] = meta["name"]
    report["processing_provider"] = qgis.utils.pluginMetadata("geopriv_qgis", "hasProcessingProvider")
    report["loaded"] = qgis.utils.loadPlugin("geopriv_qgis")
    report["started"] = qgis.utils.startPlugin("geopriv_qgis")
    import geopriv_qgis

    report["module_file"] = geopriv_qgis.__file__
    registry = QgsApplication.processingRegistry()
    provider = registry.providerById("geopriv")
    report["algorithms"] = sorted(a.id() for a in provider.algorithms()) if provider else []
    if provider:
        import processing

        result = processing.run("geopriv:perturbpoints", {"INPUT": sys.argv[3], "OUTPUT": "TEMPORARY_OUTPUT"})
        report["perturbed"] = result["OUTPUT"].featureCount()
    report["unloaded"] = qgis.utils.unloadPlugin("geopriv_qgis")
    report["provider_after_unload"] = registry.providerById("geopriv") is not None
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
    sys.stdout.flush()
    os._exit(0)  # skip QGIS's teardown: the report is out
