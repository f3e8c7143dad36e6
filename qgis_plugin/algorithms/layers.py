"""QGIS layers <-> GeoDataFrames, with no privacy logic.

Reading builds a GeoDataFrame straight from the features (no temporary file): the index is
the QGIS feature id (what geopriv's error messages call row labels), the geometry is the feature's, and only the
fields an algorithm asks for become columns.  The original attribute values are kept aside
(:class:`PointData.attributes`) and written back unchanged, so outputs keep every input field
with its exact QGIS type (including a GeoPackage ``fid`` field), whatever pandas would make of
it.  Columns a geopriv function adds become new fields typed from their dtype.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from qgis.core import (
    QgsCoordinateReferenceSystem,
    QgsFeature,
    QgsField,
    QgsFields,
    QgsGeometry,
    QgsProcessingException,
    QgsWkbTypes,
)
from qgis.PyQt.QtCore import QByteArray, QDate, QDateTime, Qt, QTime, QVariant

__all__ = [
    "PointData",
    "Cancelled",
    "pyproj_crs",
    "read_features",
    "to_python",
    "to_qgis",
    "fields_for",
    "check_new_fields",
    "feature_for",
]


class Cancelled(Exception):
    """Raised inside a progress callback or between chunks when the user cancels."""


def pyproj_crs(crs: QgsCoordinateReferenceSystem):
    """The layer CRS as something pyproj reads (``EPSG:n`` or WKT2), or None when it has none."""
    if crs is None or not crs.isValid():
        return None
    authid = crs.authid()
    if authid.upper().startswith("EPSG:"):
        return authid
    return crs.toWkt(QgsCoordinateReferenceSystem.WKT_PREFERRED)


def to_python(value):
    """A QGIS attribute value as a plain Python value (NULL -> None, QDateTime -> datetime, ...)."""
    if value is None:
        return None
    if isinstance(value, QVariant):
        return None if value.isNull() else value.value()
    if isinstance(value, QDateTime):
        if not value.isValid():
            return None
        if value.timeSpec() == Qt.LocalTime:
            return value.toPyDateTime()
        return value.toUTC().toPyDateTime().replace(tzinfo=_dt.timezone.utc)
    if isinstance(value, QDate):
        return value.toPyDate() if value.isValid() else None
    if isinstance(value, QTime):
        return value.toPyTime() if value.isValid() else None
    if isinstance(value, QByteArray):  # binary fields (e.g. WKB): bytes, as geopriv's attribute checks expect
        return bytes(value)
    return value


def to_qgis(value):
    """A pandas/numpy value as a QGIS attribute value (NaN/NaT/NA -> NULL, Timestamp -> QDateTime)."""
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return None if math.isnan(value) else value
    if isinstance(value, (pd.Timestamp, _dt.datetime)):
        stamp = pd.Timestamp(value)
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC")
            qdt = QDateTime.fromMSecsSinceEpoch(int(stamp.value // 1_000_000), Qt.UTC)
            return qdt
        return QDateTime(stamp.to_pydatetime())
    if isinstance(value, _dt.date):
        return QDate(value)
    if isinstance(value, pd.Timedelta):
        return value.total_seconds()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _field_type(series: pd.Series):
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return QVariant.Bool, "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return QVariant.LongLong, "integer64"
    if pd.api.types.is_float_dtype(dtype):
        return QVariant.Double, "double"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return QVariant.DateTime, "datetime"
    if pd.api.types.is_timedelta64_dtype(dtype):
        return QVariant.Double, "double"  # seconds
    sample = series.dropna()
    first = sample.iloc[0] if len(sample) else ""
    if isinstance(first, (bool, np.bool_)):
        return QVariant.Bool, "boolean"
    if isinstance(first, (int, np.integer)):
        return QVariant.LongLong, "integer64"
    if isinstance(first, (float, np.floating)):
        return QVariant.Double, "double"
    if isinstance(first, _dt.datetime):
        return QVariant.DateTime, "datetime"
    if isinstance(first, _dt.date):
        return QVariant.Date, "date"
    return QVariant.String, "string"


def check_new_fields(base: QgsFields, columns) -> None:
    """Refuse new field names that an input field already has (QGIS field names ignore case)."""
    taken = {base.at(i).name().lower() for i in range(base.count())}
    for name in columns:
        if str(name).lower() in taken:
            raise QgsProcessingException(
                f"geopriv adds a field {name!r} but the input layer already has a field with that name. "
                "Rename that field (e.g. with 'Refactor fields') and run again."
            )


def fields_for(df: pd.DataFrame, columns, base: QgsFields | None = None) -> QgsFields:
    """``base`` (the input's fields, kept as they are) followed by one new field per column."""
    fields = QgsFields(base) if base is not None else QgsFields()
    for name in columns:
        check_new_fields(fields, [name])  # against the input's fields and the new ones before it
        qtype, type_name = _field_type(df[name])
        fields.append(QgsField(str(name), qtype, type_name))
    return fields


def feature_for(fields: QgsFields, attributes, geometry=None) -> QgsFeature:
    feature = QgsFeature(fields)
    feature.setAttributes(list(attributes))
    if geometry is not None:
        feature.setGeometry(geometry)
    return feature


@dataclass
class PointData:
    """A vector layer read for geopriv.

    gdf : GeoDataFrame indexed by QGIS feature id (so geopriv's messages name feature ids), with
        the requested columns and the geometry, in the source's feature order.
    attributes : the original attribute values of each feature (QGIS types), by feature id.
    fields, crs : the layer's QgsFields and QgsCoordinateReferenceSystem.
    """

    gdf: gpd.GeoDataFrame
    attributes: list
    fields: QgsFields
    crs: QgsCoordinateReferenceSystem
    name: str

    def __len__(self):
        return len(self.attributes)


def _single_part(geometry: QgsGeometry) -> QgsGeometry:
    """A one-part MultiPoint as a Point (QGIS often stores points as single-part multipoints).

    Multipoints with several parts are passed on unchanged: geopriv refuses them with advice.
    """
    if geometry.isMultipart() and QgsWkbTypes.geometryType(geometry.wkbType()) == QgsWkbTypes.PointGeometry:
        parts = geometry.constGet()
        if parts.numGeometries() == 1:
            return QgsGeometry(parts.geometryN(0).clone())
    return geometry


def read_features(source, columns=(), *, name="input layer", feedback=None, progress=(0.0, 10.0)) -> PointData:
    """Read a QgsFeatureSource (or layer) into a :class:`PointData`.

    ``columns``: field names to copy into the GeoDataFrame (converted to Python values); every
    attribute is kept aside in any case.  Checks cancellation every 10,000 features.
    """
    fields = source.fields()
    missing = [c for c in columns if fields.indexFromName(c) < 0]
    if missing:
        available = ", ".join(fields.at(i).name() for i in range(fields.count())) or "none"
        raise QgsProcessingException(
            f"The {name} has no field {', '.join(repr(m) for m in missing)}. Its fields are: {available}. "
            "Choose one of those."
        )
    index = [fields.indexFromName(c) for c in columns]
    total = max(source.featureCount(), 1)
    attributes, ids, wkbs, values = {}, [], [], {c: [] for c in columns}
    for i, feature in enumerate(source.getFeatures()):
        if feedback is not None and i % 10_000 == 0:
            if feedback.isCanceled():
                raise Cancelled()
            feedback.setProgress(progress[0] + (progress[1] - progress[0]) * min(i / total, 1.0))
        attrs = feature.attributes()
        attributes[feature.id()] = attrs
        ids.append(feature.id())
        for column, k in zip(columns, index):
            values[column].append(to_python(attrs[k]))
        geometry = feature.geometry()
        if geometry is None or geometry.isNull():
            wkbs.append(None)
        else:
            wkbs.append(bytes(_single_part(geometry).asWkb()))
    geoms = shapely.from_wkb(np.array(wkbs, dtype=object)) if wkbs else np.array([], dtype=object)
    crs = source.sourceCrs()
    frame = pd.DataFrame(
        {c: pd.Series(values[c], dtype=object).infer_objects() for c in columns}, index=pd.RangeIndex(len(ids))
    )
    frame.index = pd.Index(ids, dtype="int64", name="feature_id")
    geometry_name = "geometry"
    while geometry_name in frame.columns:  # a field called "geometry" stays an attribute column
        geometry_name = "_" + geometry_name
    frame[geometry_name] = gpd.GeoSeries(geoms, index=frame.index)
    gdf = gpd.GeoDataFrame(frame, geometry=geometry_name, crs=pyproj_crs(crs))
    return PointData(gdf=gdf, attributes=attributes, fields=fields, crs=crs, name=name)
