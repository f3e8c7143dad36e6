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

    activate(dependencies_dir())
    try:
        check_geopriv()  # raises ImportError saying exactly what to install, and where
    except ImportError as exc:
        if iface is None:
            raise
        from .setup_dialog import SetupPlugin

        return SetupPlugin(iface, str(exc))
    from .plugin import GeoprivPlugin

    return GeoprivPlugin(iface)
