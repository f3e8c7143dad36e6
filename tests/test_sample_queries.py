"""sample_queries with numeric time stamps: units are checked, or given with time_unit=.

Real data: the shipped GeoLife sample (5 trajectories, 1-5 s fixes).  Epoch milliseconds read
as seconds used to sample about a hundred times too many queries silently.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import geopriv
from geopriv.exceptions import GeoprivError

EPOCH = pd.Timestamp(0, tz="UTC")


@pytest.fixture(scope="module")
def fixes(geolife_sample):
    g = geolife_sample.copy()
    g["t"] = pd.to_datetime(g["t"], utc=True, format="mixed")
    return g


@pytest.fixture(scope="module")
def reference(fixes):
    """The queries sampled from datetimes (the unit is in the type)."""
    return geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", p=0.3, rng=1)


def _numeric(fixes, unit):
    """The time column as numbers of ``unit`` since the Unix epoch (GeoLife 'D': days since 1899-12-30)."""
    if unit == "D":
        return fixes.assign(t=(fixes["t"] - pd.Timestamp("1899-12-30", tz="UTC")) / pd.Timedelta(days=1))
    if unit in ("ms", "us", "ns"):
        return fixes.assign(t=(fixes["t"] - EPOCH) // pd.Timedelta(1, unit=unit))
    return fixes.assign(t=(fixes["t"] - EPOCH) / pd.Timedelta(1, unit=unit))


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_epoch_milliseconds_are_refused_with_the_fix(fixes, reference, unit):
    data = _numeric(fixes, unit)
    with pytest.raises(GeoprivError, match=rf"time_unit='{unit}'.*pd\.to_datetime\(gdf\['t'\], unit='{unit}'") as info:
        geopriv.sample_queries(data, traj_id="trajectory_id", time="t", p=0.3, rng=1)
    assert str(int(data["t"].iloc[0])) not in str(info.value)
    if unit == "ms":  # negative control: read as seconds (explicitly), they sample far too many queries
        as_seconds = geopriv.sample_queries(data, traj_id="trajectory_id", time="t", p=0.3, rng=1, time_unit="s")
        assert len(as_seconds) > 50 * len(reference)
    else:  # finer units would need billions of query times: refused before any memory is spent
        with pytest.raises(GeoprivError, match="more than 50,000,000 query times"):
            geopriv.sample_queries(data, traj_id="trajectory_id", time="t", p=0.3, rng=1, time_unit="s")


@pytest.mark.parametrize("unit", ["ms", "us", "s", "min"])
def test_time_unit_gives_the_same_queries_as_datetimes(fixes, reference, unit):
    data = _numeric(fixes, unit)
    q = geopriv.sample_queries(
        data, traj_id="trajectory_id", time="t", p=0.3, rng=1, time_unit=None if unit == "s" else unit
    )
    assert len(q) == len(reference)
    np.testing.assert_array_equal(q["source_row"].to_numpy(), reference["source_row"].to_numpy())
    # the output's time column is in the input's unit
    back = EPOCH + pd.to_timedelta(q["t"].to_numpy() * pd.Timedelta(1, unit=unit).value, unit="ns")
    diff = np.abs((pd.DatetimeIndex(back) - pd.DatetimeIndex(reference["t"])) / pd.Timedelta(milliseconds=1))
    assert diff.max() < 1.0


def test_fractional_days_are_refused_or_read_with_time_unit(fixes, reference):
    data = _numeric(fixes, "D")  # GeoLife's own .plt files store these
    with pytest.raises(GeoprivError, match=r"days or hours.*time_unit='D'.*origin='1899-12-30'"):
        geopriv.sample_queries(data, traj_id="trajectory_id", time="t", p=0.3, rng=1)
    q = geopriv.sample_queries(data, traj_id="trajectory_id", time="t", p=0.3, rng=1, time_unit="D")
    np.testing.assert_array_equal(q["source_row"].to_numpy(), reference["source_row"].to_numpy())


def test_time_unit_is_checked(fixes):
    with pytest.raises(ValueError, match="time_unit must be None or one of"):
        geopriv.sample_queries(_numeric(fixes, "s"), traj_id="trajectory_id", time="t", time_unit="seconds")
    with pytest.raises(ValueError, match="numeric time columns only"):
        geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", time_unit="ms")
