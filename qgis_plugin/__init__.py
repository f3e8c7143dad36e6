"""geopriv for QGIS: every geopriv capability as a Processing algorithm (provider id ``geopriv``).

QGIS calls :func:`classFactory` when it loads the plugin.  Nothing else lives here, so that a
missing or too old geopriv produces one readable message (and, in QGIS Desktop, an offer to
install it) instead of an import traceback or a crash.
"""


def classFactory(iface):  # noqa: N802  (the name QGIS looks for)
    """Check that a compatible geopriv is importable in QGIS's Python, then build the plugin.

    The profile's dependency folder (where the plugin's installer puts geopriv and its
    requirements) goes first on ``sys.path``.  Without a compatible geopriv, QGIS Desktop gets a
    small plugin that offers to install it; headless QGIS (``qgis_process``, tests) gets the
    ImportError saying exactly what to install.
    """
    from .compat import check_geopriv, dependencies_dir
    from .installer import activate

    warnings = []  # the folder holds a package QGIS ships itself: it went last on sys.path, never first
    activate(dependencies_dir(), warn=warnings.append)
    for message in warnings:
        _warn(iface, message)
    try:
        check_geopriv()  # raises ImportError saying exactly what to install, and where
    except ImportError as exc:
        if iface is None:
            raise ImportError("\n".join([str(exc), *warnings])) from exc
        from .setup_dialog import SetupPlugin

        return SetupPlugin(iface, "\n".join([str(exc), *warnings]))
    from .plugin import GeoprivPlugin

    return GeoprivPlugin(iface)


def _warn(iface, message: str) -> None:
    """A warning in QGIS's log (and, in QGIS Desktop, in the message bar until the user closes it)."""
    from qgis.core import Qgis, QgsMessageLog

    QgsMessageLog.logMessage(message, "geopriv", Qgis.Warning)
    if iface is not None:
        iface.messageBar().pushMessage("geopriv", message.replace("\n", " "), Qgis.Warning, 0)
