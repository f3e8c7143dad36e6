"""The ``geopriv`` Processing provider.

Adding a capability: write ``algorithms/<name>.py`` with one :class:`GeoprivAlgorithm`
subclass (read parameters, one geopriv call, write outputs) and add its class to
:data:`ALGORITHMS` below.  That is all: the toolbox, ``processing.run("geopriv:<name>", ...)``,
the modeler and the plugin's compatibility check pick it up from this list.
"""

from __future__ import annotations

import os

from qgis.core import QgsProcessingProvider
from qgis.PyQt.QtGui import QIcon

from .algorithms.adversary import AdversaryErrorAlgorithm, CalibrateAlgorithm
from .algorithms.aggregate import Aggregate
from .algorithms.build_privacy_map import BuildPrivacyMap
from .algorithms.diffuse import Diffuse
from .algorithms.flows import Flows
from .algorithms.heatmap import Heatmap
from .algorithms.perturb_location_dependent import PerturbLocationDependent
from .algorithms.perturb_points import PerturbPoints
from .algorithms.sanitize_traces import SanitizeTraces
from .algorithms.synthesize import Synthesize
from .algorithms.utility_report import UtilityReport

ALGORITHMS = [
    PerturbPoints,
    BuildPrivacyMap,
    PerturbLocationDependent,
    Synthesize,
    Diffuse,
    SanitizeTraces,
    Aggregate,
    Heatmap,
    Flows,
    UtilityReport,
    AdversaryErrorAlgorithm,
    CalibrateAlgorithm,
]

ICON = os.path.join(os.path.dirname(__file__), "icon.svg")


class GeoprivProvider(QgsProcessingProvider):
    def id(self):
        return "geopriv"

    def name(self):
        return "geopriv"

    def longName(self):  # noqa: N802
        return f"geopriv {self.versionInfo()}: location privacy with formal guarantees"

    def versionInfo(self):  # noqa: N802
        import geopriv

        return geopriv.__version__

    def icon(self):
        return QIcon(ICON)

    def svgIconPath(self):  # noqa: N802
        return ICON

    def loadAlgorithms(self):  # noqa: N802
        for algorithm in ALGORITHMS:
            self.addAlgorithm(algorithm())
