"""sanitize_traces on MovingPandas TrajectoryCollections (the optional ``mobility`` extra).

movingpandas is in the ``all`` extra, which both test environments install (it installs with
the dependency floors), so these tests run everywhere: a missing movingpandas is a failure.
"""

from __future__ import annotations

import math
import warnings

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

import geopriv
from geopriv.exceptions import GeoprivError, LocationAttributeError

with warnings.catch_warnings():  # its optional smoothing dependency (Stone Soup) is not installed: not used here
    warnings.simplefilter("ignore", UserWarning)
    import movingpandas as mpd

# MovingPandas' own deprecation warnings under the newest pandas are not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:movingpandas")

EPS = math.log(10) / 100  # ln 10 within 100 m per trace, the paper's
BEIJING = (115.4, 39.4, 117.6, 41.1)  # public study area (declared, not measured from the points)
M_PER_DEG_LAT = 111_000.0


def geolife_like(users=3, trips=2, fixes=120, seed=0):
    """GeoLife-like GPS traces in longitude/latitude (Beijing): walks with stops, one fix every 5 s.

    Each user makes ``trips`` trips a few hours apart; columns ``user`` (the person), ``trip``
    (one trajectory per trip) and ``t`` (naive datetimes, as MovingPandas keeps them).
    """
    rng = np.random.default_rng(seed)
    frames = []
    for u in range(users):
        home = np.array([116.30 + 0.05 * u, 39.95 + 0.02 * u])
        for k in range(trips):
            moving = rng.random(fixes) < 0.6  # stops and walks
            steps = rng.normal(0, 1, (fixes, 2)) * 1.4 * 5 * moving[:, None]  # metres per 5 s
            metres = np.cumsum(steps, axis=0)
            lon = home[0] + metres[:, 0] / (M_PER_DEG_LAT * math.cos(math.radians(home[1])))
            lat = home[1] + metres[:, 1] / M_PER_DEG_LAT
            t = (
                pd.Timestamp("2008-12-11 04:00")
                + pd.Timedelta(hours=4 * k + u)
                + pd.to_timedelta(np.arange(fixes) * 5, unit="s")
            )
            frames.append(
                gpd.GeoDataFrame(
                    {"user": f"user{u}", "trip": f"user{u}_trip{k}", "t": t},
                    geometry=gpd.points_from_xy(lon, lat),
                    crs=4326,
                )
            )
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def points():
    return geolife_like()


@pytest.fixture
def collection(points):
    return mpd.TrajectoryCollection(points, "trip", t="t")


def located(geoms):
    return ~(geoms.isna() | geoms.is_empty)


def test_collection_in_collection_out_and_identical_to_the_frame_release(points, collection):
    out = geopriv.sanitize_traces(collection, epsilon=EPS, rate=0.05, rng=3, bounds=BEIJING)
    frame = geopriv.sanitize_traces(points, epsilon=EPS, traj_id="trip", time="t", rate=0.05, rng=3, bounds=BEIJING)
    assert isinstance(out, mpd.TrajectoryCollection)
    released = frame[located(frame.geometry.values)]
    ids = [tr.id for tr in out.trajectories]
    assert ids == sorted(released["trip"].unique())
    for tr in out.trajectories:
        df = tr.df
        assert isinstance(df.index, pd.DatetimeIndex) and df.index.name == "t"
        assert df.crs == collection.trajectories[0].df.crs
        assert {"predicted", "status", "epsilon_spent"} <= set(df.columns)
        assert (df["status"] != "exhausted").all()  # rows without a location are left out
        mine = released[released["trip"] == tr.id].set_index("t")
        pd.testing.assert_index_equal(df.index, mine.index)
        assert df.geometry.values.geom_equals(mine.geometry.values).all()  # same seed: the very same release
        np.testing.assert_array_equal(df["epsilon_spent"].to_numpy(), mine["epsilon_spent"].to_numpy())
    # the ledger: of the collection (every trace), and of each trajectory (its own)
    ledger = geopriv.trace_ledger(out)
    pd.testing.assert_frame_equal(ledger, geopriv.trace_ledger(frame))
    assert ledger.index.name == "trip" and list(ledger.index) == sorted(points["trip"].unique())
    assert (ledger["spent"] <= ledger["budget"]).all()
    assert (ledger["exhausted"] > 0).any()  # 120 fixes at rate 0.05: budgets run out, rows are dropped
    one = out.trajectories[0]
    own = geopriv.trace_ledger(one.df)
    assert list(own.index) == [one.id] and own.loc[one.id, "released"] == len(one.df)
    record = one.df.attrs["geopriv"]
    assert record["mechanism"] == "predictive_trace" and record["traj_id"] == "trip" and record["time"] == "t"
    assert record["epsilon_per_m"] == pytest.approx(EPS) and record["declared_bounds"] == list(BEIJING)
    assert out.attrs["geopriv"]["traces"] == len(collection.trajectories)


def test_input_collection_is_not_modified(collection):
    before = {tr.id: tr.df.copy(deep=True) for tr in collection.trajectories}
    geopriv.sanitize_traces(collection, epsilon=EPS, rate=0.05, rng=1, bounds=BEIJING)
    for tr in collection.trajectories:
        pd.testing.assert_frame_equal(tr.df, before[tr.id])
        assert "geopriv" not in tr.df.attrs
    assert not hasattr(collection, "attrs")


def test_on_exhausted_last_keeps_every_row_never_the_truth(collection):
    out = geopriv.sanitize_traces(collection, epsilon=EPS, rate=0.05, rng=2, bounds=BEIJING, on_exhausted="last")
    assert [len(tr.df) for tr in out.trajectories] == [len(tr.df) for tr in collection.trajectories]
    for tr, true in zip(out.trajectories, collection.trajectories):
        exhausted = tr.df["status"] == "exhausted"
        assert exhausted.any() and (tr.df.loc[exhausted, "epsilon_spent"] == 0).all()
        last = tr.df.geometry[~exhausted].iloc[-1]
        assert tr.df.geometry[exhausted].geom_equals(last).all()
        assert not tr.df.geometry.values.geom_equals(true.df.geometry.values).any()


def test_one_budget_per_person_across_trips(collection):
    per_trip = geopriv.trace_ledger(geopriv.sanitize_traces(collection, epsilon=EPS, rate=0.05, rng=4, bounds=BEIJING))
    out = geopriv.sanitize_traces(collection, epsilon=EPS, traj_id="user", rate=0.05, rng=4, bounds=BEIJING)
    ledger = geopriv.trace_ledger(out)
    assert list(ledger.index) == ["user0", "user1", "user2"] and ledger.index.name == "user"
    assert (ledger["spent"] <= ledger["budget"]).all()
    assert ledger["queries"].sum() == per_trip["queries"].sum()
    assert ledger["released"].sum() < per_trip["released"].sum()  # half the budgets
    # a person's second trip gets what the first left: here nothing, so it is not in the output
    assert len(out.trajectories) < len(collection.trajectories)
    for tr in out.trajectories:
        assert list(geopriv.trace_ledger(tr.df).index) == [tr.df["user"].iloc[0]]
    # everything as one trace
    assert (
        len(
            geopriv.trace_ledger(
                geopriv.sanitize_traces(collection, epsilon=EPS, traj_id=None, rate=0.05, rng=4, bounds=BEIJING)
            )
        )
        == 1
    )


def test_trajectories_of_one_moving_object_need_a_decision(points):
    tc = mpd.TrajectoryCollection(points, "trip", obj_id_col="user", t="t")
    with pytest.raises(GeoprivError, match=r"traj_id='<column of object ids>' for one budget per object"):
        geopriv.sanitize_traces(tc, epsilon=EPS, rate=0.05, bounds=BEIJING)
    by_object = geopriv.sanitize_traces(tc, epsilon=EPS, traj_id="user", rate=0.05, rng=1, bounds=BEIJING)
    assert len(geopriv.trace_ledger(by_object)) == 3
    assert {tr.obj_id for tr in by_object.trajectories} <= {"user0", "user1", "user2"}
    deliberate = geopriv.sanitize_traces(tc, epsilon=EPS, traj_id="trip", rate=0.05, rng=1, bounds=BEIJING)
    assert len(geopriv.trace_ledger(deliberate)) == 6


def test_columns_derived_from_the_true_positions_are_refused(points):
    tc = mpd.TrajectoryCollection(points, "trip", t="t")
    tc.add_speed(units=("m", "s"))
    with pytest.raises(LocationAttributeError, match=r"\['speed'\].*retrace the true trajectories") as info:
        geopriv.sanitize_traces(tc, epsilon=EPS, rate=0.05, bounds=BEIJING)
    assert list(info.value.reasons) == ["speed"]
    out = geopriv.sanitize_traces(tc, epsilon=EPS, rate=0.05, rng=1, bounds=BEIJING, keep=["speed"])
    assert "speed" in out.trajectories[0].df.columns
    assert out.attrs["geopriv"]["kept_columns"] == ["speed"]


def test_what_a_collection_does_not_take(collection):
    with pytest.raises(ValueError, match="DatetimeIndex: do not pass time="):
        geopriv.sanitize_traces(collection, epsilon=EPS, time="t", rate=0.05, bounds=BEIJING)
    with pytest.raises(GeoprivError, match=r"TrajectoryCollection\(\[trajectory\]\)"):
        geopriv.sanitize_traces(collection.trajectories[0], epsilon=EPS, rate=0.05, bounds=BEIJING)
    with pytest.raises(GeoprivError, match="no trajectories"):
        geopriv.sanitize_traces(mpd.TrajectoryCollection([]), epsilon=EPS, rate=0.05, bounds=BEIJING)
    with pytest.raises(GeoprivError, match="longitude/latitude|bounds"):  # lon/lat needs a public area, as ever
        geopriv.sanitize_traces(collection, epsilon=EPS, rate=0.05)


def test_short_trajectories_leave_the_collection_but_stay_in_the_ledger(collection):
    # fixed utility at 20 m: each noisy point costs c_N / 20 per metre, so a trace pays for one or two
    out = geopriv.sanitize_traces(collection, epsilon=EPS, budget="fixed_utility", accuracy=20.0, rng=1, bounds=BEIJING)
    ledger = geopriv.trace_ledger(out)
    assert len(ledger) == len(collection.trajectories)
    kept = {tr.id for tr in out.trajectories}
    assert kept == set(ledger.index[ledger["released"] >= 2])
    assert len(kept) < len(ledger)


def test_progress_and_cancellation(collection):
    seen = []
    geopriv.sanitize_traces(
        collection,
        epsilon=EPS,
        rate=0.05,
        rng=1,
        bounds=BEIJING,
        progress=lambda done, total: seen.append((done, total)),
    )
    n = sum(len(tr.df) for tr in collection.trajectories)
    assert len(seen) > 10 and seen[-1] == (n, n) and [d for d, _ in seen] == sorted(d for d, _ in seen)

    class Stop(Exception):
        pass

    def cancel(done, total):
        if done > total // 3:
            raise Stop

    with pytest.raises(Stop):
        geopriv.sanitize_traces(collection, epsilon=EPS, rate=0.05, bounds=BEIJING, progress=cancel)


def test_released_again_records_the_previous_release(collection):
    first = geopriv.sanitize_traces(collection, epsilon=EPS, rate=0.05, rng=1, bounds=BEIJING, on_exhausted="last")
    stripped = mpd.TrajectoryCollection(
        [
            mpd.Trajectory(tr.df.drop(columns=["predicted", "status", "epsilon_spent"]), tr.id)
            for tr in first.trajectories
        ]
    )
    stripped.attrs = first.attrs
    again = geopriv.sanitize_traces(stripped, epsilon=EPS, rate=0.05, rng=2, bounds=BEIJING)
    assert again.attrs["geopriv"]["previous"][0]["mechanism"] == "predictive_trace"


def test_geolife_sample_as_a_trajectory_collection(geolife_sample):
    """The real GeoLife sample (MovingPandas' tutorial data): trackers with several trajectories."""
    utc = geolife_sample.assign(t=pd.to_datetime(geolife_sample["t"], utc=True, format="mixed").dt.tz_localize(None))
    tc = mpd.TrajectoryCollection(utc, "trajectory_id", obj_id_col="tracker", t="t")  # MovingPandas keeps naive times
    with pytest.raises(GeoprivError, match="moving object"):  # tracker 2 has three trajectories
        geopriv.sanitize_traces(tc, level=math.log(10), radius=100, rate=0.033, bounds=BEIJING)
    out = geopriv.sanitize_traces(
        tc, level=math.log(10), radius=100, rate=0.033, traj_id="tracker", rng=5, bounds=BEIJING, on_exhausted="last"
    )
    ledger = geopriv.trace_ledger(out)
    assert list(ledger.index) == [0, 2, 19] and (ledger["spent"] <= ledger["budget"]).all()
    assert ledger["queries"].sum() == sum(len(tr.df) for tr in tc.trajectories)
    for tr, true in zip(out.trajectories, tc.trajectories):
        assert tr.id == true.id and tr.obj_id == true.obj_id
        d = shapely.distance(tr.df.geometry.values, true.df.geometry.values)
        assert (d > 0).all()  # never the true point
