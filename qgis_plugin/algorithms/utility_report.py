"""Utility report: ``geopriv.utility_report`` of an original and a released point layer."""

from __future__ import annotations

import os

import pandas as pd
from qgis.core import (
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterExtent,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterField,
    QgsProcessingParameterFileDestination,
    QgsProcessingParameterNumber,
    QgsProcessingParameterString,
)

from .base import BOUNDS_LABEL, TYPE_POINTS, GeoprivAlgorithm


class UtilityReport(GeoprivAlgorithm):
    NAME = "utilityreport"
    DISPLAY_NAME = "Utility report (displacement statistics)"
    GROUP = "Utility"
    GROUP_ID = "utility"
    GEOPRIV_API = ("utility_report",)
    HELP = """<p>How far did the released points move? Compares each original point with its released version
and writes one row of statistics of the ground distance (geodesic metres on the CRS's ellipsoid, whatever
the layers' CRS): <b>n</b>, <b>mean_m</b>, <b>median_m</b>, <b>alpha_&lt;quantile&gt;_m</b> (the radius
containing that share of the displacements: with the default <b>quantile</b> 0.9, 90 % of the points moved less
than alpha_0.9_m; the accuracy measure the geo-indistinguishability papers write alpha(delta). The quantile is a
share of points, not a privacy parameter: it is unrelated to the delta of (epsilon, delta)-differential privacy),
<b>max_m</b>, <b>mse_m2</b> (mean squared error, square metres) and <b>rmse_m</b>.</p>
<p>Rows are matched by the <b>matching field</b> (a unique identifier present in both layers) or, when it is
empty, by feature order (as written by the perturbation algorithms). The layers may be in different CRSs.</p>
<p>The statistics are also returned as numbers, for use in the graphical modeler.</p>
<p><b>Release report</b> (optional): one self-contained HTML file, shown in the Processing results viewer: the
guarantee in plain words, every public parameter, the utility, the adversary's error and k-equivalent, and maps
where the original points appear only as counts per cell of at least 100 m. It is <b>private</b>: it is computed
from the original points and is for the data holder, not for publication. It needs the release's record: the
<b>PROVENANCE</b> output of the release (paste it into <b>Release record</b>, or connect it in a model), or a
released file written by the geopriv command line, which carries its record. The <b>Public study area</b> (or
the area the release declared) gives the adversary its grid; it is never taken from the data.</p>"""

    ORIGINAL = "ORIGINAL"
    RELEASED = "RELEASED"
    ID_FIELD = "ID_FIELD"
    QUANTILE = "QUANTILE"
    DELTA = "DELTA"  # the former id of QUANTILE: still accepted, with a warning, for one release
    OUTPUT = "OUTPUT"
    REPORT = "REPORT"
    RECORD = "RELEASE_RECORD"
    NUMBERS = {
        "n": "N",
        "mean_m": "MEAN_M",
        "median_m": "MEDIAN_M",
        "alpha": "ALPHA_M",
        "max_m": "MAX_M",
        "mse_m2": "MSE_M2",
        "rmse_m": "RMSE_M",
    }

    def checkParameterValues(self, parameters, context):  # noqa: N802
        """The dialog proposes the active layer for both inputs: comparing a layer with itself is refused at once."""
        original = self.parameterAsVectorLayer(parameters, self.ORIGINAL, context)
        released = self.parameterAsVectorLayer(parameters, self.RELEASED, context)
        if (
            original is not None
            and released is not None
            and (original.id() == released.id() or original.source() == released.source())
        ):
            return False, (
                "'Original points' and 'Released points' are the same layer: choose the released layer "
                "(the output of a geopriv algorithm) as 'Released points'."
            )
        return super().checkParameterValues(parameters, context)

    def initAlgorithm(self, config=None):  # noqa: N802
        import inspect

        import geopriv

        default = inspect.signature(geopriv.utility_report).parameters["quantile"].default
        self.addParameter(QgsProcessingParameterFeatureSource(self.ORIGINAL, "Original points", [TYPE_POINTS]))
        self.addParameter(QgsProcessingParameterFeatureSource(self.RELEASED, "Released points", [TYPE_POINTS]))
        self.addParameter(
            QgsProcessingParameterField(
                self.ID_FIELD,
                "Matching field, in both layers (empty: match by feature order)",
                parentLayerParameterName=self.ORIGINAL,
                optional=True,
            )
        )
        self.addParameter(
            QgsProcessingParameterNumber(
                self.QUANTILE,
                "Quantile of the displacements reported as alpha (0-1; 0.9: 90 % of the points moved less)",
                QgsProcessingParameterNumber.Double,
                defaultValue=default,
                minValue=0.0,
                maxValue=1.0,
            )
        )
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Utility report"))
        self.addParameter(
            QgsProcessingParameterString(
                self.RECORD,
                "Release record (the release's PROVENANCE output, JSON; empty: read from the released file)",
                multiLine=True,
                optional=True,
            )
        )
        self.addParameter(
            QgsProcessingParameterExtent(
                self.BOUNDS,
                f"{BOUNDS_LABEL} (for the release report's adversary and maps; empty: the release's declared area)",
                defaultValue=None,
                optional=True,
            )
        )
        # an .html file destination: Processing lists it as an HTML output and shows it in the results viewer
        self.addParameter(
            QgsProcessingParameterFileDestination(
                self.REPORT,
                "Release report (HTML; private: for the data holder, not for publication)",
                fileFilter="HTML files (*.html)",
                optional=True,
                createByDefault=False,
            )
        )
        labels = {
            "N": "Number of points",
            "MEAN_M": "Mean displacement (metres)",
            "MEDIAN_M": "Median displacement (metres)",
            "ALPHA_M": "alpha: radius containing the quantile's share of the displacements (metres)",
            "MAX_M": "Largest displacement (metres)",
            "MSE_M2": "Mean squared error (square metres)",
            "RMSE_M": "Root mean squared error (metres)",
        }
        for key, label in labels.items():
            self.addOutput(QgsProcessingOutputNumber(key, label))

    def quantile(self, parameters, context, feedback):
        """QUANTILE, or the value given under its former id DELTA (with a warning)."""
        if not self.is_set(parameters, self.DELTA):
            return self.parameterAsDouble(parameters, self.QUANTILE, context)
        if self.is_set(parameters, self.QUANTILE):
            raise QgsProcessingException("Give QUANTILE only: DELTA is its former name.")
        feedback.pushWarning(
            "The DELTA parameter is now called QUANTILE (the share of displacements alpha contains); "
            "DELTA will be removed in the next release."
        )
        try:
            return float(parameters[self.DELTA])
        except (TypeError, ValueError):
            raise QgsProcessingException("DELTA (now QUANTILE) must be a number between 0 and 1.") from None

    def compute(self, parameters, context, feedback):
        import geopriv

        html = self.parameterAsFileOutput(parameters, self.REPORT, context)
        record = self.release_record(parameters, context) if html else None  # before any work
        keys = self.field_names(parameters, self.ID_FIELD, context)
        original = self.read_layer(parameters, self.ORIGINAL, context, feedback, columns=keys, progress=(0, 40))
        released = self.read_layer(parameters, self.RELEASED, context, feedback, columns=keys, progress=(40, 80))
        true, out = original.gdf, released.gdf
        if keys:
            true, out = true.set_index(keys[0]), out.set_index(keys[0])
        else:  # feature order
            true, out = true.reset_index(drop=True), out.reset_index(drop=True)
        quantile = self.quantile(parameters, context, feedback)
        self.check_cancelled(feedback)

        report = geopriv.utility_report(true, out, quantile=quantile)

        table = pd.DataFrame([report.to_dict()])
        table["n"] = table["n"].astype("int64")
        dest = self.write_table(parameters, self.OUTPUT, context, table)
        feedback.pushInfo(", ".join(f"{k} = {v:.6g}" for k, v in report.items()))
        results = {self.OUTPUT: dest}
        if html:
            area = self.public_study_area(parameters, context, original)
            results[self.REPORT] = self.release_report(feedback, true, out, record, html, quantile, area)
        for key, value in report.items():
            name = self.NUMBERS.get("alpha" if key.startswith("alpha_") else key)
            if name:
                results[name] = int(value) if name == "N" else float(value)
        return results

    def release_record(self, parameters, context) -> dict:
        """The release record: RELEASE_RECORD (JSON), else the one the released file carries; refused without one."""
        import json

        from geopriv.io import read_provenance

        if self.is_set(parameters, self.RECORD):
            try:
                record = json.loads(self.parameterAsString(parameters, self.RECORD, context))
            except ValueError:
                record = None
            if not isinstance(record, dict):
                raise QgsProcessingException(
                    "'Release record' is not a release's PROVENANCE output (a JSON object): "
                    "copy the PROVENANCE output of the release, or leave it empty."
                )
            return record
        layer = self.parameterAsVectorLayer(parameters, self.RELEASED, context)
        parts = (layer.source() if layer is not None else "").split("|")
        layer_name = next((p.split("=", 1)[1] for p in parts[1:] if p.startswith("layername=")), None)
        record = read_provenance(parts[0], layer_name) if parts[0] and os.path.isfile(parts[0]) else None
        if record is None:
            raise QgsProcessingException(
                "The release report needs the release's record, and 'Released points' carries none (a layer written "
                "by QGIS keeps no record): paste the PROVENANCE output of the release into 'Release record' (in a "
                "model, connect it), or choose a file written by the geopriv command line."
            )
        return record

    def release_report(self, feedback, true, out, record, path, quantile, area) -> str:
        """Write the release report (geopriv.report.release_report) to ``path``; QGIS's dialog asked before replacing."""
        from geopriv.report import release_report

        out = out.copy()
        out.attrs["geopriv"] = record
        written = release_report(true, out, path, quantile=quantile, area=area, overwrite=True, front_end="qgis")
        feedback.pushInfo(
            f"Wrote the release report {written}: private, for the data holder (it shows counts of the "
            "original points per map cell); do not publish it."
        )
        return str(written)
