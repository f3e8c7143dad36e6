"""The QGIS plugin object: registers the geopriv Processing provider, nothing more."""

from __future__ import annotations

from qgis.core import QgsApplication

from .provider import GeoprivProvider


class GeoprivPlugin:
    """Registers the ``geopriv`` provider in the Processing toolbox (with or without a GUI)."""

    def __init__(self, iface=None):
        self.iface = iface
        self.provider = None

    def initProcessing(self):  # noqa: N802  (QGIS API)
        """Called by QGIS (and qgis_process) to register the Processing provider."""
        if self.provider is None:
            self.provider = GeoprivProvider()
            QgsApplication.processingRegistry().addProvider(self.provider)

    def initGui(self):  # noqa: N802
        # The plugin adds no buttons or menus: its algorithms live in the Processing toolbox.
        self.initProcessing()

    def unload(self):
        if self.provider is not None:
            QgsApplication.processingRegistry().removeProvider(self.provider)
            self.provider = None
