"""Utility report: ``geopriv.utility_report`` of an original and a released point layer."""
from __future__ import annotations

import pandas as pd
from qgis.core import (
    QgsProcessingOutputNumber,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterField,
    QgsProcessingParameterNumber,
)

from .base import TYPE_POINTS, GeoprivAlgorithm


class UtilityReport(GeoprivAlgorithm):
    NAME = "utilityreport"
    DISPLAY_NAME = "Utility report (displacement statistics)"
    GROUP = "Utility"
    GROUP_ID = "utility"
    GEOPRIV_API = ("utility_report",)
    HELP = """<p>How far did the released points move? Compares each original point with its released version
and writes one row of statistics of the ground distance (geodesic metres on the CRS's ellipsoid, whatever
the layers' CRS): <b>n</b>, <b>mean_m</b>, <b>median_m</b>, <b>alpha_&lt;delta&gt;_m</b> (the delta-quantile of
the displacement: 90 % of the points moved less than alpha(0.9); the accuracy measure of the
geo-indistinguishability papers), <b>max_m</b>, <b>mse_m2</b> (mean squared error, square metres) and
<b>rmse_m</b>.</p>
<p>Rows are matched by the <b>matching field</b> (a unique identifier present in both layers) or, when it is
empty, by feature order (as written by the perturbation algorithms). The layers may be in different CRSs.</p>
<p>The statistics are also returned as numbers, for use in the graphical modeler.</p>"""

    ORIGINAL = "ORIGINAL"
    RELEASED = "RELEASED"
    ID_FIELD = "ID_FIELD"
    DELTA = "DELTA"
    OUTPUT = "OUTPUT"
    NUMBERS = {"n": "N", "mean_m": "MEAN_M", "median_m": "MEDIAN_M", "alpha": "ALPHA_M", "max_m": "MAX_M",
               "mse_m2": "MSE_M2", "rmse_m": "RMSE_M"}

    def initAlgorithm(self, config=None):  # noqa: N802
        self.addParameter(QgsProcessingParameterFeatureSource(self.ORIGINAL, "Original points", [TYPE_POINTS]))
        self.addParameter(QgsProcessingParameterFeatureSource(self.RELEASED, "Released points", [TYPE_POINTS]))
        self.addParameter(QgsProcessingParameterField(
            self.ID_FIELD, "Matching field, in both layers (empty: match by feature order)",
            parentLayerParameterName=self.ORIGINAL, optional=True))
        self.addParameter(QgsProcessingParameterNumber(
            self.DELTA, "Delta of alpha(delta), the displacement quantile (0-1)", QgsProcessingParameterNumber.Double,
            defaultValue=0.9, minValue=0.0, maxValue=1.0))
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Utility report"))
        labels = {"N": "Number of points", "MEAN_M": "Mean displacement (metres)",
                  "MEDIAN_M": "Median displacement (metres)", "ALPHA_M": "alpha(delta): displacement quantile (metres)",
                  "MAX_M": "Largest displacement (metres)", "MSE_M2": "Mean squared error (square metres)",
                  "RMSE_M": "Root mean squared error (metres)"}
        for key, label in labels.items():
            self.addOutput(QgsProcessingOutputNumber(key, label))

    def compute(self, parameters, context, feedback):
        import geopriv

        keys = self.field_names(parameters, self.ID_FIELD, context)
        original = self.read_layer(parameters, self.ORIGINAL, context, feedback, columns=keys, progress=(0, 40))
        released = self.read_layer(parameters, self.RELEASED, context, feedback, columns=keys, progress=(40, 80))
        true, out = original.gdf, released.gdf
        if keys:
            true, out = true.set_index(keys[0]), out.set_index(keys[0])
        else:  # feature order
            true, out = true.reset_index(drop=True), out.reset_index(drop=True)
        delta = self.parameterAsDouble(parameters, self.DELTA, context)
        self.check_cancelled(feedback)

        report = geopriv.utility_report(true, out, delta=delta)

        table = pd.DataFrame([report.to_dict()])
        table["n"] = table["n"].astype("int64")
        dest = self.write_table(parameters, self.OUTPUT, context, table)
        feedback.pushInfo(", ".join(f"{k} = {v:.6g}" for k, v in report.items()))
        results = {self.OUTPUT: dest}
        for key, value in report.items():
            name = self.NUMBERS.get("alpha" if key.startswith("alpha_") else key)
            if name:
                results[name] = int(value) if name == "N" else float(value)
        return results
