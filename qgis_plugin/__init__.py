"""geopriv for QGIS: every geopriv capability as a Processing algorithm (provider id ``geopriv``).

QGIS calls :func:`classFactory` when it loads the plugin.  Nothing else lives here, so that a
missing or too old geopriv produces one readable message instead of an import traceback.
"""


def classFactory(iface):  # noqa: N802  (the name QGIS looks for)
    """Check that a compatible geopriv is importable in QGIS's Python, then build the plugin."""
    from .compat import check_geopriv

    check_geopriv()  # raises ImportError saying exactly what to install, and where
    from .plugin import GeoprivPlugin

    return GeoprivPlugin(iface)
