"""geopriv.people: the id rules the command line and QGIS share for network releases."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

from geopriv.exceptions import ParameterError
from geopriv.people import index_people, people_ids


def _people(ids):
    return gpd.GeoDataFrame(
        {"pid": ids},
        geometry=gpd.points_from_xy(range(len(ids)), range(len(ids))),
        crs="EPSG:32650",
        index=[10 + i for i in range(len(ids))],
    )


def test_ids_become_the_index_whole_numbers_as_integers_text_stripped():
    out = index_people(_people([3.0, 1.0, 2.0]), "pid")
    assert out.index.dtype == np.int64 and out.index.tolist() == [3, 1, 2] and out.index.name == "pid"
    assert "pid" not in out.columns
    assert index_people(_people([" a", "b ", "c"]), "pid").index.tolist() == ["a", "b", "c"]
    assert index_people(_people(["a", "b"]), None).index.tolist() == [0, 1]  # row numbers


def test_empty_and_shared_ids_are_refused_naming_labels():
    with pytest.raises(ParameterError, match=r"empty at 1 feature\(s\) \(feature ids 11\)"):
        index_people(_people(["a", None, "c"]), "pid", rows="feature(s)", labels="feature ids")
    with pytest.raises(ParameterError, match="1 duplicate"):
        index_people(_people(["a", "a ", "c"]), "pid")  # the same id once stripped


def test_ids_read_as_the_peoples_kind():
    ids, bad = people_ids(["1", 2, "3.0", "x", None, 2.5], pd.Index([1, 2, 3]))
    assert ids.tolist()[:3] == [1, 2, 3] and bad.tolist() == [3, 4, 5]
    ids, bad = people_ids([" a", "", None], pd.Index(["a", "b"]))
    assert ids.tolist()[0] == "a" and bad.tolist() == [1, 2]
