"""The shared base of every geopriv algorithm.

A subclass sets its names and help, declares its parameters in ``initAlgorithm`` (with the
helpers here for the common ones) and implements ``compute(parameters, context, feedback)``:
read the inputs with :meth:`read_layer` / :meth:`raster_path`, make *one* geopriv call,
write the outputs with :meth:`write_points` / :meth:`write_table`.  The base turns geopriv's
errors into :class:`QgsProcessingException` with the library's message, its warnings into
feedback warnings, drives the progress bar and honours cancellation (see :meth:`in_chunks`).
"""
from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np
import pandas as pd
from qgis.core import (
    QgsFeatureSink,
    QgsProcessing,
    QgsProcessingAlgorithm,
    QgsProcessingException,
    QgsProcessingOutputString,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterNumber,
    QgsWkbTypes,
)
from qgis.PyQt.QtGui import QIcon

from .layers import Cancelled, PointData, feature_for, fields_for, read_features, to_qgis

ICON = os.path.join(os.path.dirname(os.path.dirname(__file__)), "icon.svg")

# Points per geopriv call when an algorithm works in chunks: at least this many, and at most
# MAX_CHUNKS calls per run, so progress moves and cancellation is checked between calls.
MIN_CHUNK = 1_000
MAX_CHUNKS = 50

LN4 = math.log(4.0)


# What to do in QGIS, appended to the library's message for these geopriv errors.
QGIS_HINTS = {
    "MissingCRSError": "In QGIS: set the layer's CRS (Layer Properties > Source, or the 'Assign projection' "
                       "algorithm) to the CRS its coordinates are in, then run again.",
    "GeometryError": "In QGIS, the labels are feature ids; 'Multipart to singleparts' splits MultiPoints, "
                     "'Centroids' or 'Point on surface' turn lines and polygons into points, and 'Remove null "
                     "geometries' drops features without geometry.",
}


def _geopriv_errors():
    import geopriv

    return (geopriv.GeoprivError, ValueError, TypeError, KeyError, OSError)


class GeoprivAlgorithm(QgsProcessingAlgorithm):
    """Base class: names, help, error mapping, progress, cancellation, layer conversion."""

    NAME = ""
    DISPLAY_NAME = ""
    GROUP = ""
    GROUP_ID = ""
    HELP = ""
    #: geopriv names the algorithm calls: the plugin refuses to load if the library lacks one.
    GEOPRIV_API: tuple = ()

    SEED = "SEED"
    PROVENANCE = "PROVENANCE"
    LEVEL = "LEVEL"
    RADIUS = "RADIUS"
    EPSILON = "EPSILON"

    # --- identity -------------------------------------------------------------------------
    def name(self):
        return self.NAME

    def displayName(self):  # noqa: N802
        return self.DISPLAY_NAME

    def group(self):
        return self.GROUP

    def groupId(self):  # noqa: N802
        return self.GROUP_ID

    def shortHelpString(self):  # noqa: N802
        return self.HELP

    def icon(self):
        return QIcon(ICON)

    def createInstance(self):  # noqa: N802
        return type(self)()

    # --- running ----------------------------------------------------------------------------
    def compute(self, parameters, context, feedback) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                results = self.compute(parameters, context, feedback)
            except Cancelled:
                raise QgsProcessingException(
                    f"{self.displayName()}: cancelled by the user; no output was written."
                ) from None
            except QgsProcessingException:
                raise
            except _geopriv_errors() as exc:
                message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
                hint = next((QGIS_HINTS[k.__name__] for k in type(exc).__mro__ if k.__name__ in QGIS_HINTS), None)
                if hint:
                    message = f"{message} {hint}"
                raise QgsProcessingException(f"{self.displayName()}: {message}") from exc
        import geopriv

        seen = set()
        for warning in caught:
            text = f"{warning.category.__name__}: {warning.message}"
            if text in seen:
                continue
            seen.add(text)
            if issubclass(warning.category, geopriv.GeoprivWarning):
                feedback.pushWarning(text)  # geopriv's own warnings are meant for the user
            else:
                feedback.pushDebugInfo(f"{text} ({warning.filename}:{warning.lineno})")
        feedback.setProgress(100)
        return results

    # --- progress and cancellation -----------------------------------------------------------
    @staticmethod
    def progress_callback(feedback, start: float, end: float):
        """A geopriv ``progress=`` callable mapping (done, total) onto [start, end] % of the bar.

        It raises :class:`Cancelled` when the user has cancelled, which stops the geopriv call
        at its next progress report; nothing is written.
        """

        def callback(done, total):
            if feedback.isCanceled():
                raise Cancelled()
            if total:
                feedback.setProgress(start + (end - start) * min(done / total, 1.0))

        return callback

    @staticmethod
    def check_cancelled(feedback):
        if feedback.isCanceled():
            raise Cancelled()

    def in_chunks(self, gdf, call, feedback, start=10.0, end=90.0):
        """Run ``call(rows, progress)`` on consecutive row chunks of ``gdf`` and concatenate.

        For mechanisms that treat every point independently: the geopriv call is the same on
        every chunk (pass one random source to all of them), and cancellation is checked
        between chunks.  Returns (concatenated result, list of each call's provenance record).
        """
        n = len(gdf)
        size = max(MIN_CHUNK, math.ceil(n / MAX_CHUNKS))
        parts, records = [], []
        for begin in range(0, max(n, 1), size):
            self.check_cancelled(feedback)
            stop = min(n, begin + size)
            lo = start + (end - start) * begin / max(n, 1)
            hi = start + (end - start) * stop / max(n, 1)
            result = call(gdf.iloc[begin:stop], self.progress_callback(feedback, lo, hi))
            parts.append(result)
            records.append(dict(result.attrs.get("geopriv", {})))
            feedback.setProgress(hi)
        self.check_cancelled(feedback)  # the last chance: once writing starts, the release is written whole
        out = parts[0] if len(parts) == 1 else pd.concat(parts)
        return out, records

    def in_groups(self, gdf, key, call, feedback, start=10.0, end=90.0):
        """Like :meth:`in_chunks`, but never splits a group of rows sharing ``key`` (e.g. a trace).

        For mechanisms whose unit of privacy is a group with its own budget: whole groups are
        batched until a batch holds at least ``MIN_CHUNK`` rows (and at most ``MAX_CHUNKS``
        batches are made), so each group is released by one call exactly as in one big call.
        ``key`` None: one batch.  Returns (list of results, list of provenance records).
        """
        n = len(gdf)
        if key is None or n == 0:
            batches = [np.arange(n)]
        else:
            codes = pd.factorize(gdf[key], sort=False)[0]  # NULL ids keep code -1: the library names them
            order = np.argsort(codes, kind="stable")
            bounds = np.flatnonzero(np.diff(codes[order])) + 1
            groups = np.split(order, bounds)
            size = max(MIN_CHUNK, math.ceil(n / MAX_CHUNKS))
            batches, current, count = [], [], 0
            for group in groups:
                current.append(group)
                count += len(group)
                if count >= size:
                    batches.append(np.sort(np.concatenate(current)))
                    current, count = [], 0
            if current:
                batches.append(np.sort(np.concatenate(current)))
        results, records, done = [], [], 0
        for rows in batches:
            self.check_cancelled(feedback)
            lo = start + (end - start) * done / max(n, 1)
            done += len(rows)
            hi = start + (end - start) * done / max(n, 1)
            result = call(gdf.iloc[rows], self.progress_callback(feedback, lo, hi))
            results.append(result)
            records.append(dict(result.attrs.get("geopriv", {})))
            feedback.setProgress(hi)
        self.check_cancelled(feedback)
        return results, records

    # --- parameters --------------------------------------------------------------------------
    def add_seed_parameter(self):
        param = QgsProcessingParameterNumber(
            self.SEED,
            "Random seed (leave empty: fresh noise from the operating system's entropy)",
            QgsProcessingParameterNumber.Integer,
            defaultValue=None,
            optional=True,
            minValue=0,
        )
        param.setHelp("Only for tests and demonstrations: anyone who knows the seed can regenerate the noise "
                      "and recover the true locations. Leave empty for a real release.")
        param.setFlags(param.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        self.addParameter(param)

    def add_privacy_parameters(self, level: float, radius: float, level_label: str = None, epsilon_label: str = None):
        """LEVEL within RADIUS (metres), or EPSILON per metre (optional; replaces them when set)."""
        label = level_label or f"Privacy level within the radius ({level:.4g} = ln {math.exp(level):.4g}: " \
                               f"at most {math.exp(level):.4g} times more likely)"
        param = QgsProcessingParameterNumber(self.LEVEL, label, QgsProcessingParameterNumber.Double,
                                             defaultValue=level, minValue=0.0)
        param.setHelp("Privacy loss allowed between two locations that are 'radius' metres apart: "
                      "epsilon = level / radius per metre.")
        self.addParameter(param)
        self.addParameter(QgsProcessingParameterNumber(
            self.RADIUS, "Radius (metres)", QgsProcessingParameterNumber.Double, defaultValue=radius, minValue=0.0))
        self.addParameter(QgsProcessingParameterNumber(
            self.EPSILON, epsilon_label or "Epsilon (privacy loss per metre; if set, replaces level and radius)",
            QgsProcessingParameterNumber.Double, defaultValue=None, optional=True, minValue=0.0))

    def privacy(self, parameters, context, feedback) -> dict:
        """geopriv keyword arguments: ``epsilon=`` if EPSILON is set, else ``level=`` and ``radius=``."""
        epsilon = self.optional_number(parameters, self.EPSILON, context)
        if epsilon is not None:
            feedback.pushInfo(f"Using epsilon = {epsilon:g} per metre; level and radius are ignored.")
            return {"epsilon": epsilon}
        return {"level": self.parameterAsDouble(parameters, self.LEVEL, context),
                "radius": self.parameterAsDouble(parameters, self.RADIUS, context)}

    def add_provenance_output(self):
        self.addOutput(QgsProcessingOutputString(self.PROVENANCE, "Provenance of the release (JSON)"))

    @staticmethod
    def is_set(parameters, name) -> bool:
        value = parameters.get(name)
        return value is not None and not (isinstance(value, str) and value.strip() == "")

    def optional_number(self, parameters, name, context):
        if not self.is_set(parameters, name):
            return None
        return self.parameterAsDouble(parameters, name, context)

    def random_source(self, parameters, context, feedback):
        """geopriv's random source: OS entropy, or the seed (with a warning) when one is given."""
        import geopriv

        seed = None
        if self.is_set(parameters, self.SEED):
            seed = self.parameterAsInt(parameters, self.SEED, context)
            feedback.pushWarning(
                f"Random seed {seed} given: the noise is reproducible, so anyone who knows the seed can recover "
                "the true locations. Use a seed for tests and demonstrations only."
            )
        return geopriv.make_rng(seed)

    def field_names(self, parameters, name, context) -> list:
        """Names chosen in a field parameter ([] when optional and empty)."""
        return [f for f in self.parameterAsFields(parameters, name, context) if f]

    # --- inputs ------------------------------------------------------------------------------
    def read_layer(self, parameters, name, context, feedback, columns=(), progress=(0.0, 10.0)) -> PointData:
        source = self.parameterAsSource(parameters, name, context)
        if source is None:
            raise QgsProcessingException(self.invalidSourceError(parameters, name))
        label = self.parameterDefinition(name).description()
        return read_features(source, list(columns), name=f"layer '{label}'", feedback=feedback, progress=progress)

    def raster_path(self, parameters, name, context):
        """(file path, QgsCoordinateReferenceSystem) of a GDAL raster layer parameter."""
        layer = self.parameterAsRasterLayer(parameters, name, context)
        if layer is None:
            raise QgsProcessingException(self.invalidRasterError(parameters, name))
        if layer.providerType() != "gdal":
            raise QgsProcessingException(
                f"The raster '{layer.name()}' is served by the '{layer.providerType()}' provider; geopriv reads "
                "raster files through GDAL. Save it as a GeoTIFF first (Raster > Conversion > Translate)."
            )
        return layer.source().split("|")[0], layer.crs()

    # --- outputs -----------------------------------------------------------------------------
    def write_points(self, parameters, name, context, data: PointData, result, new_columns=(), feedback=None,
                     progress=(90.0, 100.0)):
        """Write geopriv's result as a point layer in the input's CRS.

        Each output row is matched to its input feature by index label (the QGIS feature id):
        the input's attributes are written back unchanged, followed by ``new_columns`` of the
        result.  Rows geopriv did not return are not written; rows it returned without a
        location (None) are written without geometry.
        """
        fields = fields_for(result, list(new_columns), base=data.fields)
        sink, dest_id = self.parameterAsSink(parameters, name, context, fields, QgsWkbTypes.Point, data.crs)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, name))
        geoms = result.geometry.values
        present = ~(geoms.isna() | geoms.is_empty)  # rows geopriv released without a location
        xs = np.where(present, geoms.x, np.nan) if len(geoms) else np.empty(0)
        ys = np.where(present, geoms.y, np.nan) if len(geoms) else np.empty(0)
        extra = [result[c].to_numpy(dtype=object) for c in new_columns]
        labels = result.index.to_numpy()
        from qgis.core import QgsGeometry, QgsPointXY

        total = max(len(result), 1)
        for i, label in enumerate(labels):
            if feedback is not None and i % 10_000 == 0:  # no cancelling here: a release is written whole
                feedback.setProgress(progress[0] + (progress[1] - progress[0]) * i / total)
            attrs = list(data.attributes[int(label)]) + [to_qgis(col[i]) for col in extra]
            geometry = QgsGeometry.fromPointXY(QgsPointXY(xs[i], ys[i])) if present[i] else None
            if not sink.addFeature(feature_for(fields, attrs, geometry), QgsFeatureSink.FastInsert):
                raise QgsProcessingException(self.writeFeatureError(sink, parameters, name))
        return dest_id

    def write_table(self, parameters, name, context, table: pd.DataFrame):
        """Write a DataFrame as a table without geometry (one field per column)."""
        table = table.reset_index(drop=True)
        fields = fields_for(table, list(table.columns))
        sink, dest_id = self.parameterAsSink(parameters, name, context, fields, QgsWkbTypes.NoGeometry)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, name))
        columns = [table[c].to_numpy(dtype=object) for c in table.columns]
        for i in range(len(table)):
            attrs = [to_qgis(col[i]) for col in columns]
            if not sink.addFeature(feature_for(fields, attrs), QgsFeatureSink.FastInsert):
                raise QgsProcessingException(self.writeFeatureError(sink, parameters, name))
        return dest_id

    @staticmethod
    def provenance_json(record: dict) -> str:
        return json.dumps(record, default=str, sort_keys=True)

    @staticmethod
    def report(feedback, record: dict, keys):
        """Log the main provenance fields of a release."""
        shown = ", ".join(f"{k} = {record[k]}" for k in keys if record.get(k) is not None)
        if shown:
            feedback.pushInfo(shown)


# For convenience of algorithm modules.
TYPE_POINTS = QgsProcessing.TypeVectorPoint
TYPE_POLYGONS = QgsProcessing.TypeVectorPolygon
