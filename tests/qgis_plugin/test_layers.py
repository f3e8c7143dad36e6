"""The conversions of the shared base: QGIS features <-> GeoDataFrame columns, values and types."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from qgis_helpers import memory_layer

pytestmark = pytest.mark.qgis


def test_read_features_aligns_columns_with_feature_ids(plugin):
    from qgis.PyQt.QtCore import QDate, QDateTime, Qt

    from geopriv_qgis.algorithms.layers import read_features

    when = QDateTime.fromSecsSinceEpoch(1_600_000_000, Qt.UTC)
    values = [[i, 10.5 * i, f"s{i}", QDate(2020, 1, 1 + i), when.addSecs(i)] for i in range(4)]
    values[2] = [None, None, None, None, None]  # NULLs
    layer = memory_layer(
        [f"POINT({i} {i})" for i in range(4)],
        fields=(("k", "integer"), ("x", "double"), ("s", "string"), ("d", "date"), ("t", "datetime")),
        values=values,
    )
    layer.dataProvider().deleteFeatures([1])  # feature ids are no longer positions
    data = read_features(layer, ["k", "x", "s", "d", "t"])
    gdf = data.gdf
    assert list(gdf.index) == [2, 3, 4]
    assert gdf.crs.to_epsg() == 32650
    assert gdf.loc[2, "k"] == 1 and gdf.loc[4, "k"] == 3 and pd.isna(gdf.loc[3, "k"])
    assert gdf.loc[4, "x"] == 31.5 and gdf.loc[4, "s"] == "s3" and gdf.loc[4, "d"] == dt.date(2020, 1, 4)
    assert gdf.loc[4, "t"] == pd.Timestamp(1_600_000_003, unit="s", tz="UTC")
    assert list(gdf.geometry.x) == [1.0, 2.0, 3.0]
    assert data.attributes[4][0] == 3  # original QGIS values kept aside, by feature id
    null = data.attributes[3][0]
    assert null is None or null.isNull()


def test_new_columns_get_qgis_types_and_nulls(plugin):
    from qgis.core import QgsFeature

    from geopriv_qgis.algorithms.layers import fields_for, to_qgis

    df = pd.DataFrame(
        {
            "flag": [True, False],
            "count": np.array([1, 2], dtype="int64"),
            "value": [0.5, np.nan],
            "label": ["a", None],
            "when": pd.to_datetime(["2020-01-01T00:00:00Z", None], utc=True),
        }
    )
    fields = fields_for(df, list(df.columns))
    assert [fields.at(i).typeName() for i in range(fields.count())] == [
        "boolean",
        "integer64",
        "double",
        "string",
        "datetime",
    ]
    feature = QgsFeature(fields)
    feature.setAttributes([to_qgis(v) for v in df.iloc[1]])
    flag, count, value, label, when = feature.attributes()
    assert flag is False and count == 2
    for null in (value, label, when):
        assert null is None or null.isNull()
    first = [to_qgis(v) for v in df.iloc[0]]
    assert first[4].toUTC().toString("yyyy-MM-ddThh:mm:ss") == "2020-01-01T00:00:00"
