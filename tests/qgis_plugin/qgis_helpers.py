"""Helpers for the QGIS plugin tests (layers, data paths, a cancelling feedback)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: where test data are looked up, in order (the same folders as tests/conftest.py)
DATA_DIRS = (ROOT / "tests" / "data", ROOT / "geopriv" / "data")


# --- helpers for the tests ------------------------------------------------------------------
def data_path(name: str, layer: str | None = None) -> str:
    """A data set shipped in the repository (tests/data, then geopriv/data) as a QGIS source string."""
    for folder in DATA_DIRS:
        path = folder / name
        if path.exists():
            break
    else:
        tried = ", ".join(str(folder / name) for folder in DATA_DIRS)
        pytest.fail(
            f"test data {name!r} is missing (tried {tried}); it is part of the repository: check out tests/data"
        )
    path = str(path)
    return f"{path}|layername={layer}" if layer else path


def vector(source, name="layer"):
    from qgis.core import QgsVectorLayer

    if not isinstance(source, str):
        return source
    layer = QgsVectorLayer(source, name, "ogr")
    assert layer.isValid(), source
    return layer


def attributes(layer):
    return [feature.attributes() for feature in vector(layer).getFeatures()]


def points_xy(layer):
    import numpy as np

    return np.array([[f.geometry().asPoint().x(), f.geometry().asPoint().y()] for f in vector(layer).getFeatures()])


def memory_layer(wkt_points, crs="EPSG:32650", geometry="Point", fields=(("name", "string"),), values=None):
    """A memory layer with the given WKT geometries (None: no geometry) and fields."""
    from qgis.core import QgsFeature, QgsGeometry, QgsVectorLayer

    uri = (
        geometry
        + (f"?crs={crs}" if crs else "")
        + "".join(("&" if crs or i else "?") + f"field={n}:{t}" for i, (n, t) in enumerate(fields))
    )
    layer = QgsVectorLayer(uri, "memory", "memory")
    assert layer.isValid(), uri
    if not crs:  # QGIS gives new layers its default CRS; make this one truly unknown
        from qgis.core import QgsCoordinateReferenceSystem

        layer.setCrs(QgsCoordinateReferenceSystem())
    feats = []
    for i, wkt in enumerate(wkt_points):
        f = QgsFeature(layer.fields())
        f.setAttributes(list(values[i]) if values else [f"p{i}"])
        if wkt is not None:
            f.setGeometry(QgsGeometry.fromWkt(wkt))
        feats.append(f)
    assert layer.dataProvider().addFeatures(feats)[0]
    return layer


def shuffled(source, seed=0, renumber=(), drop=(), name="shuffled"):
    """A memory copy of a layer with its features in random order: what a release should be given.

    Layers often list their features in spatial order (fixes in time order, municipalities by code,
    points sorted along a line), and geopriv refuses to release a spatial order.  The features are
    copied in a random order (their QGIS feature ids, the release's index, are numbered in that
    order), the ``renumber`` fields (ids numbered in the old order: a GeoPackage's ``fid``, ...)
    are renumbered 1, 2, ... in the new order and the ``drop`` fields are left out.
    """
    import numpy as np
    from qgis.core import QgsFeature, QgsFields, QgsMemoryProviderUtils

    layer = vector(source)
    fields = QgsFields()
    for field in layer.fields():
        if field.name() not in drop:
            fields.append(field)
    assert all(fields.indexFromName(n) >= 0 for n in renumber), (renumber, fields.names())
    copy = QgsMemoryProviderUtils.createMemoryLayer(name, fields, layer.wkbType(), layer.crs())
    features = list(layer.getFeatures())
    order = np.random.default_rng(seed).permutation(len(features))
    out = []
    for number, k in enumerate(order, start=1):
        feature = features[k]
        values = {f.name(): feature[f.name()] for f in fields}
        values.update({n: number for n in renumber})
        new = QgsFeature(fields)
        new.setAttributes([values[f.name()] for f in fields])
        new.setGeometry(feature.geometry())
        out.append(new)
    assert copy.dataProvider().addFeatures(out)[0]
    return copy


class CancelAt:
    """A QgsProcessingFeedback that cancels itself once progress passes ``percent``; records progress."""

    def __new__(cls, percent):
        from qgis.core import QgsProcessingFeedback

        feedback = QgsProcessingFeedback()
        feedback.seen = []

        def on_progress(value):
            feedback.seen.append(value)
            if value > percent and not feedback.isCanceled():
                feedback.cancel()

        feedback.progressChanged.connect(on_progress)
        return feedback


class Log:
    """A QgsProcessingFeedback that keeps what it is given: ``lines`` (every line), ``infos`` (pushInfo only),
    ``warnings`` (pushWarning only)."""

    def __new__(cls):
        from qgis.core import QgsProcessingFeedback

        class _Log(QgsProcessingFeedback):
            def __init__(self):
                super().__init__()
                self.lines, self.infos, self.warnings = [], [], []

            def pushInfo(self, text):  # noqa: N802
                self.lines.append(text)
                self.infos.append(text)

            def pushWarning(self, text):  # noqa: N802
                self.lines.append(text)
                self.warnings.append(text)

            def pushDebugInfo(self, text):  # noqa: N802
                self.lines.append(text)

            reportError = pushCommandInfo = pushConsoleInfo = pushDebugInfo  # noqa: N815

        return _Log()
