"""First run in QGIS Desktop without a usable geopriv: a message, a dialog, and the installer (installer.py).

Thin on purpose: what to install and how lives in :mod:`installer` (tested in real QGIS); this
module only shows it.  Nothing happens without the user's click, and nothing blocks QGIS's
start-up (a message bar entry and a Plugins menu action, no modal box at start).
"""

from __future__ import annotations

from qgis.core import Qgis
from qgis.PyQt.QtCore import QCoreApplication
from qgis.PyQt.QtWidgets import (
    QAction,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
)

from . import installer
from .compat import check_geopriv, dependencies_dir

MENU = "&geopriv"
TITLE = "geopriv: install requirements"


class SetupDialog(QDialog):
    """What is missing, an Install button, pip's progress and a readable outcome."""

    def __init__(self, reason: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle(TITLE)
        self.setMinimumWidth(640)
        self.plan = installer.plan()
        self.outcome = None
        layout = QVBoxLayout(self)
        intro = QLabel(
            "The geopriv algorithms need the geopriv Python library and a few packages in the Python "
            "that QGIS runs. The plugin can install them into this QGIS profile (nothing of QGIS or "
            "of the system is replaced; PROJ, GDAL and NumPy stay QGIS's own)."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        found = installer.shadowing_packages(dependencies_dir())  # QGIS's own packages in the folder
        self.details = QLabel(
            "\n".join(filter(None, [self.plan.describe(), installer.shadowing_message(dependencies_dir(), found)]))
        )
        self.details.setWordWrap(True)
        layout.addWidget(self.details)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setValue(0)
        layout.addWidget(self.progress)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(2000)
        self.log.setPlaceholderText(reason)
        layout.addWidget(self.log)
        self.result = QLabel("")
        self.result.setWordWrap(True)
        layout.addWidget(self.result)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        self.install_button = QPushButton("Install")
        self.install_button.setEnabled(self.plan.possible and (self.plan.needed or bool(found)))
        buttons.addButton(self.install_button, QDialogButtonBox.ActionRole)
        buttons.rejected.connect(self.reject)
        self.install_button.clicked.connect(self.run_install)
        layout.addWidget(buttons)

    def _progress(self, percent: int, text: str) -> None:
        self.progress.setValue(percent)
        self.log.appendPlainText(text)
        QCoreApplication.processEvents()

    def run_install(self) -> installer.Outcome:
        self.install_button.setEnabled(False)
        self.outcome = installer.install(self.plan, dependencies_dir(), progress=self._progress)
        if self.outcome.ok:
            self.progress.setValue(100)
        for line in self.outcome.log[-40:]:
            self.log.appendPlainText(line)
        self.result.setText(self.outcome.summary())
        return self.outcome


class SetupPlugin:
    """Stands in for the plugin until geopriv imports: offers the installer, then starts the real plugin."""

    def __init__(self, iface, reason: str):
        self.iface = iface
        self.reason = reason
        self.action = None
        self.dialog = None
        self.started = None  # the real plugin, once the installation made it importable

    def initGui(self):  # noqa: N802  (QGIS API)
        self.action = QAction(TITLE, self.iface.mainWindow())
        self.action.triggered.connect(self.open_dialog)
        self.iface.addPluginToMenu(MENU, self.action)
        bar = self.iface.messageBar()
        item = bar.createMessage("geopriv", "The geopriv algorithms need a few Python packages.")
        button = QPushButton("Install…")
        button.clicked.connect(self.open_dialog)
        item.layout().addWidget(button)
        bar.pushWidget(item, Qgis.Warning)

    def initProcessing(self):  # noqa: N802  (no provider until geopriv imports)
        pass

    def open_dialog(self) -> SetupDialog:
        self.dialog = SetupDialog(self.reason, self.iface.mainWindow())
        self.dialog.finished.connect(self._after)
        self.dialog.show()
        return self.dialog

    def _after(self, *args) -> None:
        if self.dialog is not None and self.dialog.outcome is not None and self.dialog.outcome.ok:
            self.start()

    def start(self):
        """Start the real plugin now if geopriv imports after the installation (else QGIS needs a restart)."""
        installer.activate(
            dependencies_dir(), warn=lambda message: self.iface.messageBar().pushWarning("geopriv", message)
        )
        try:
            check_geopriv()
        except ImportError as exc:
            self.iface.messageBar().pushMessage(
                "geopriv", f"Restart QGIS to finish the installation ({exc}).", Qgis.Info
            )
            return None
        from .plugin import GeoprivPlugin

        self.started = GeoprivPlugin(self.iface)
        self.started.initGui()
        self.iface.messageBar().clearWidgets()
        self.iface.messageBar().pushMessage(
            "geopriv", "Installed: the geopriv algorithms are in the Processing toolbox.", Qgis.Success, 10
        )
        return self.started

    def unload(self):
        if self.started is not None:
            self.started.unload()
        if self.action is not None:
            self.iface.removePluginMenu(MENU, self.action)
            self.action = None
