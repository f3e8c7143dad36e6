"""geopriv.attacks: home inference, top-N places re-identification and per-query error on trace releases.

Real data: the 5 GeoLife trajectories of geopriv/data/geolife_sample.gpkg (3 trackers, Beijing,
2008-2009), their queries drawn by geopriv.sample_queries.  The rules themselves (night window,
ties, anonymity sets) are checked exactly on small hand-made layers in UTM 50N.

Randomness: every sampling and release is seeded, so each test is deterministic.  The
statistical statements are the two controls: the identity release and a release with little
noise (26 m on average, every query released) must give the homes (hit rate 1, and at least 4
of 5 within 500 m: measured 5 of 5 within 200 m); a release at ln 10 within 1000 km
must give none within 500 m.  What could make the last one fail with another seed or
another version of the mechanism: an inferred home is the cell of one released point, either
clipped to the border of the declared Beijing box (over 50 km from every home here) or a noise
draw; a draw at epsilon <= 2.3e-6 per metre lands within 642 m (500 m plus half a cell's
diagonal) of a given place with probability at most (epsilon r)^2 / 2 = 1.1e-6, so over the
fewer than 400 draws of the release the chance of any hit is below 1e-3.
"""

from __future__ import annotations

import math
import warnings

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

import geopriv
from geopriv.attacks import home_attack, home_inference, query_error, top_places_attack, top_places_uniqueness
from geopriv.exceptions import EmptyInputError, GeoprivError, ParameterError, ParameterTypeError
from tests.conftest import data_path

pytestmark = pytest.mark.filterwarnings("ignore::geopriv.exceptions.LowUtilityWarning")

BEIJING = (115.4, 39.4, 117.6, 41.1)  # public study area (declared, not measured from the points)
TZ = "Asia/Shanghai"


@pytest.fixture(scope="module")
def fixes():
    g = gpd.read_file(data_path("geolife_sample.gpkg"))
    return g.drop(columns=["id", "sequence"])  # fix counters: not needed


@pytest.fixture(scope="module")
def queries(fixes):
    return geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", rng=1)


def release(q, epsilon, seed=3, rate=0.033, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", geopriv.WeakProtectionWarning)
        return q.priv.sanitize_traces(
            epsilon, traj_id="trajectory_id", time="t", bounds=BEIJING, rate=rate, rng=seed, **kw
        )


def utm(xy, **cols):
    """Points in UTM 50N (metres) with the given columns."""
    xy = np.asarray(xy, dtype=float)
    return gpd.GeoDataFrame(cols, geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=32650)


# ---------------------------------------------------------------------------- home inference: the rule
def test_home_is_the_centre_of_the_cell_with_most_night_points():
    night = pd.Timestamp("2009-01-01 23:00")
    day = pd.Timestamp("2009-01-01 12:00")
    pts = utm(
        [
            (450_010, 4_400_010),
            (450_150, 4_400_150),
            (450_190, 4_400_020),  # 3 in cell 2250:22000
            (452_010, 4_402_010),
            (452_020, 4_402_020),  # 2 in 2260:22010
            (460_000, 4_410_000),
            (460_001, 4_410_001),
            (460_002, 4_410_002),
            (460_003, 4_410_003),
        ],
        person=["a"] * 9,
        t=[night] * 5 + [day] * 4,
    )  # the most points, but by day
    out = home_inference(pts, person="person", time="t")
    assert out.loc["a", "cell"] == "2250:22000"
    assert (out.loc["a", "night_points"], out.loc["a", "home_points"]) == (5, 3)
    assert out.geometry["a"].equals(gpd.points_from_xy([450_100], [4_400_100])[0])
    assert out.crs.to_epsg() == 32650 and out.attrs["geopriv_attack"]["cell_m"] == 200
    # night=None: all hours, the day-time cell wins
    assert home_inference(pts, person="person", night=None).loc["a", "cell"] == "2300:22050"


def test_home_ties_and_row_order_and_window():
    t = [
        pd.Timestamp("2009-01-01 05:59"),
        pd.Timestamp("2009-01-01 22:00"),
        pd.Timestamp("2009-01-01 06:00"),
        pd.Timestamp("2009-01-01 21:59"),
    ]
    pts = utm(
        [(450_500, 4_400_100), (450_100, 4_400_900), (450_100, 4_400_100), (450_100, 4_400_100)], person=["a"] * 4, t=t
    )
    out = home_inference(pts, person="person", time="t")
    # 05:59 and 22:00 are night, 06:00 and 21:59 are not: one point in each of two cells, a tie;
    # the smaller column wins (2250 < 2252), whatever the order of the rows
    assert out.loc["a", "night_points"] == 2
    assert out.loc["a", "cell"] == "2250:22004"
    assert home_inference(pts.iloc[::-1], person="person", time="t").loc["a", "cell"] == "2250:22004"
    # a window that does not wrap
    assert home_inference(pts, person="person", time="t", night=(5, 7)).loc["a", "night_points"] == 2


def test_persons_without_enough_night_points_have_no_home():
    pts = utm([(450_100, 4_400_100)] * 3, person=["a", "b", "b"], t=pd.to_datetime(["2009-01-01 23:00"] * 3))
    out = home_inference(pts, person="person", time="t", min_points=2)
    assert out.loc["a", "geometry"] is None and out.loc["a", "cell"] is None
    assert out.loc["b", "cell"] == "2250:22000"


def test_time_zones(fixes):
    # GeoLife's time stamps are UTC: 14:00-22:00 UTC is 22:00-06:00 in Beijing
    local = home_inference(fixes, person="tracker", time="t", tz=TZ)
    shifted = fixes.assign(t=pd.to_datetime(fixes["t"], utc=True).dt.tz_convert(TZ).dt.tz_localize(None))
    naive = home_inference(shifted, person="tracker", time="t")  # naive: taken as local time
    pd.testing.assert_frame_equal(
        pd.DataFrame(local.drop(columns="geometry")), pd.DataFrame(naive.drop(columns="geometry"))
    )
    assert local["night_points"].to_dict() == {0: 0, 2: 371, 19: 0}
    # local mean solar time in Beijing (116.4 E) is UTC + 7.76 h: 8 to 14 minutes earlier than Beijing time
    solar = home_inference(fixes, person="tracker", time="t", tz="solar")
    assert solar.loc[2, "night_points"] <= 371
    with pytest.raises(GeoprivError, match="time zone") as err:
        home_inference(fixes, person="tracker", time="t")  # aware time stamps without tz=
    assert err.value.fix.kind == "time_zone" and "tz=" in str(err.value)
    with pytest.raises(ParameterError, match="not a time zone"):
        home_inference(fixes, person="tracker", time="t", tz="Mars/Olympus")


# ---------------------------------------------------------------------------- home attack: controls
def test_home_attack_identity_release_finds_every_home(queries):
    out = home_attack(queries, queries, person="trajectory_id", night=None)
    s = out.attrs["summary"]
    assert s["persons"] == 5 and s["hit_rate_200m"] == 1.0 and s["hit_rate_500m"] == 1.0
    assert (out["distance_m"] == 0).all() and out["same_cell"].all()


def test_home_attack_negative_control(queries):
    """A weak release (noise of 26 m on average) leaks the homes; ln 10 within 1000 km does not."""
    weak_release = release(queries, 20.0, rate=0.005)  # 0.1 per metre per query; every query paid for
    assert (weak_release["status"] != "exhausted").all()
    weak = home_attack(queries, weak_release, person="trajectory_id", night=None)
    assert weak.attrs["summary"]["hit_rate_500m"] >= 0.8, weak[["distance_m"]]  # measured: 5 of 5 within 200 m
    strong_release = release(queries, math.log(10) / 1e6)
    strong = home_attack(queries, strong_release, person="trajectory_id", night=None)
    s = strong.attrs["summary"]
    assert s["persons"] == 5 and s["inferred"] == 5  # every trace released something
    assert s["hit_rate_500m"] == 0.0 and s["hit_rate_200m"] == 0.0, strong[["distance_m"]]
    assert (strong["distance_m"] > 500).all()


def test_home_attack_night_homes_of_real_trackers(fixes, queries):
    out = home_attack(fixes, queries, person="tracker", time="t", tz=TZ, night=(18, 6))
    # tracker 19 logged only by day: no true home, NA hits, not counted
    assert out.loc[19, "true_cell"] is None and pd.isna(out.loc[19, "hit_200m"])
    assert out.attrs["summary"]["persons"] == 2
    assert list(out.columns) == [
        "true_cell",
        "inferred_cell",
        "night_points_true",
        "night_points_released",
        "distance_m",
        "same_cell",
        "hit_200m",
        "hit_500m",
        "true_home",
        "inferred_home",
    ]
    assert out.geometry.name == "inferred_home" and out["true_home"].crs == out.crs


def test_released_persons_with_no_release_count_as_misses(queries):
    rel = release(queries, math.log(10) / 100)
    rel.loc[rel["trajectory_id"] == 5, "geometry"] = None  # as if trace 5's budget paid for nothing
    out = home_attack(queries, rel, person="trajectory_id", night=None, radii=(1e7, 2.5))
    assert out.loc[5, "inferred_cell"] is None and not out.loc[5, "hit_10000000m"]  # False, not NA
    assert out.attrs["summary"]["hit_rate_10000000m"] == pytest.approx(0.8)
    assert "hit_2.5m" in out.columns and out.attrs["summary"]["inferred"] == 4


def test_trajectory_collections(fixes):
    mpd = pytest.importorskip("movingpandas")
    g = fixes.assign(t=pd.to_datetime(fixes["t"], utc=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tc = mpd.TrajectoryCollection(g, "trajectory_id", t="t", obj_id_col="tracker")
    by_traj = home_inference(tc, tz=TZ, night=(18, 6))  # one person per trajectory by default
    frame = home_inference(fixes, person="trajectory_id", time="t", tz=TZ, night=(18, 6))
    assert by_traj["cell"].tolist() == frame["cell"].tolist()
    by_tracker = home_inference(tc, person="tracker", tz=TZ, night=(18, 6))
    assert (
        by_tracker["cell"].tolist()
        == home_inference(fixes, person="tracker", time="t", tz=TZ, night=(18, 6))["cell"].tolist()
    )
    with pytest.raises(ParameterError, match="time="):
        home_inference(tc, time="t")
    q = geopriv.sample_queries(g, traj_id="trajectory_id", time="t", rng=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qtc = mpd.TrajectoryCollection(q.assign(t=q["t"].dt.tz_localize(None)), "trajectory_id", t="t")
        rel = geopriv.sanitize_traces(qtc, 20.0, bounds=BEIJING, rate=0.005, rng=3)  # weak, as in the control
    out = home_attack(qtc, rel, night=None)
    assert out.attrs["summary"]["persons"] == 5 and out.attrs["summary"]["hit_rate_500m"] >= 0.8
    err = query_error(qtc, rel)
    assert err.attrs["summary"]["n"] == sum(len(t.df) for t in rel.trajectories)
    assert err.index.names == ["trajectory", "t"]


# ---------------------------------------------------------------------------- top places
def test_top_places_sets_and_anonymity_sets():
    c = {"A": (450_100, 4_400_100), "B": (451_100, 4_400_100), "C": (452_100, 4_400_100)}
    rows = (
        [("p", "A")] * 3
        + [("p", "B")] * 2
        + [("q", "B")] * 3
        + [("q", "A")] * 2
        + [("r", "A")] * 2
        + [("r", "C")] * 1
        + [("s", "C")]
    )
    pts = utm([c[k] for _, k in rows], person=[p for p, _ in rows])
    out = top_places_uniqueness(pts, person="person")
    # p and q share the set {A, B} (in different orders); r has {A, C}; s has one place only
    assert out.loc["p", "places"] == out.loc["q", "places"] == ("2250:22000", "2255:22000")
    assert out["anonymity_set"].to_dict() == {"p": 2, "q": 2, "r": 1, "s": 1}
    assert out.loc["s", "places"] == ("2260:22000",) and out.loc["s", "n_places"] == 1
    assert out.attrs["summary"]["unique_share"] == 0.5
    ranked = top_places_uniqueness(pts, person="person", ordered=True)
    assert ranked.loc["q", "places"] == ("2255:22000", "2250:22000")
    assert ranked["unique"].all()
    top1 = top_places_uniqueness(pts, person="person", n=1)
    assert top1["anonymity_set"].to_dict() == {"p": 2, "q": 1, "r": 2, "s": 1}  # A, B, A, C


def test_top_places_on_real_trajectories(fixes, queries):
    u = top_places_uniqueness(fixes, person="trajectory_id")
    assert u.attrs["summary"]["unique_share"] == 1.0 and (u["n_places"] == 2).all()
    ident = top_places_attack(queries, queries, person="trajectory_id")
    assert ident.attrs["summary"]["reidentification_rate"] == 1.0
    assert (ident["matched"] == ident.index).all()
    strong = top_places_attack(queries, release(queries, math.log(10) / 1e6), person="trajectory_id")
    assert strong.attrs["summary"]["reidentification_rate"] == 0.0
    assert strong.attrs["summary"]["persons"] == 5


def test_a_unique_wrong_match_is_not_a_reidentification():
    a, b = (450_100, 4_400_100), (452_100, 4_400_100)
    true = utm([a, a, b, b], person=["x", "x", "y", "y"])
    swapped = utm([b, a], person=["x", "y"])  # x released at y's place, y at x's
    out = top_places_attack(true, swapped, person="person", n=1)
    assert out["candidates"].tolist() == [1, 1] and out["matched"].tolist() == ["y", "x"]
    assert not out["reidentified"].any()
    assert out.attrs["summary"]["unique_match_rate"] == 1.0 and out.attrs["summary"]["reidentification_rate"] == 0


# ---------------------------------------------------------------------------- per-query error
def test_query_error_is_the_displacement_of_released_rows(queries):
    rel = release(queries, math.log(10) / 100)
    out = query_error(queries, rel)
    shown = rel.geometry.notna()
    assert out.index.equals(rel.index[shown.to_numpy()])
    expected = geopriv.displacement(queries[shown], rel[shown])
    np.testing.assert_allclose(out["displacement_m"], expected.to_numpy())
    s = out.attrs["summary"]
    assert s["n"] == int(shown.sum()) and s["not_released"] == int((~shown).sum()) > 0
    assert s["displacement_median_m"] == pytest.approx(float(np.median(expected)))


def test_query_error_refusals(queries):
    rel = release(queries, math.log(10) / 100)
    with pytest.raises(GeoprivError, match="no true counterpart") as err:
        query_error(queries.iloc[5:], rel)
    assert "labels 0, 1, 2, 3, 4" in str(err.value)
    with pytest.raises(ParameterTypeError, match="AdversaryError"):
        query_error(queries, rel, adversary=object())


# ---------------------------------------------------------------------------- errors
def test_errors_name_columns_ids_and_labels_never_coordinates(fixes, queries):
    with pytest.raises(GeoprivError, match="person column 'user' is not in") as err:
        home_attack(fixes, queries, person="user", night=None)
    assert err.value.fix.kind == "person_column"
    with pytest.raises(GeoprivError, match="person="):
        top_places_uniqueness(fixes)
    with pytest.raises(GeoprivError, match="time= is missing"):
        home_inference(fixes, person="tracker")
    other = queries.assign(trajectory_id=queries["trajectory_id"] + 100)
    with pytest.raises(GeoprivError, match="not in the true data: person ids 101, 102") as err:
        top_places_attack(queries, other, person="trajectory_id")
    assert err.value.fix.kind == "same_persons"
    holes = fixes.copy()
    holes.loc[[3, 7], "tracker"] = None
    with pytest.raises(GeoprivError, match="no person id in 'tracker': labels 3, 7") as err:
        top_places_uniqueness(holes, person="tracker")
    bad_time = fixes.copy()
    bad_time.loc[[4], "t"] = "116.39 39.90"  # a location typed into a time column
    with pytest.raises(GeoprivError, match="labels 4") as err:
        home_inference(bad_time, person="tracker", time="t", tz=TZ)
    assert "116" not in str(err.value) and "39.9" not in str(err.value)
    with pytest.raises(GeoprivError, match="numbers or durations"):
        home_inference(fixes.assign(t=np.arange(len(fixes)) * 1.0), person="tracker", time="t", tz=TZ)
    with pytest.raises(ParameterError, match="projected CRS in metres"):
        top_places_uniqueness(fixes, person="tracker", crs=4326)
    with pytest.raises(ParameterError, match="night"):
        home_inference(fixes, person="tracker", time="t", tz=TZ, night=(6, 6))
    with pytest.raises(ParameterError, match="cell"):
        top_places_uniqueness(fixes, person="tracker", cell=0)
    with pytest.raises(ParameterError, match="n must be"):
        top_places_uniqueness(fixes, person="tracker", n=0)
    with pytest.raises(ParameterTypeError, match="GeoDataFrame"):
        home_inference(pd.DataFrame({"a": [1]}), person="a", night=None)
    with pytest.raises(EmptyInputError):
        top_places_uniqueness(fixes.iloc[:0], person="tracker")


def test_grid_crs_choice(fixes):
    # longitude/latitude: the UTM zone; a metric CRS within 1 % of ground metres: itself; Web Mercator: UTM
    assert top_places_uniqueness(fixes, person="tracker").attrs["summary"]["grid_crs"] == "EPSG:32650"
    utm50 = fixes.to_crs(32650)
    assert top_places_uniqueness(utm50, person="tracker").attrs["summary"]["grid_crs"] == "EPSG:32650"
    merc = top_places_uniqueness(fixes.to_crs(3857), person="tracker")
    assert merc.attrs["summary"]["grid_crs"] == "EPSG:32650"
    assert merc["places"].tolist() == top_places_uniqueness(fixes, person="tracker")["places"].tolist()
    # the true data's grid serves both sides, whatever the release's CRS
    out = home_attack(fixes, fixes.to_crs(3857), person="tracker", night=None)
    assert out.attrs["summary"]["hit_rate_200m"] == 1.0 and (out["distance_m"] == 0).all()


def test_releases_are_recognised_by_their_record(queries):
    rel = release(queries, math.log(10) / 100)
    assert rel.geometry.isna().any()  # exhausted rows
    homes = home_inference(rel, person="trajectory_id", night=None)  # rows without a point left out
    assert homes["cell"].notna().all()
    tops = top_places_uniqueness(rel, person="trajectory_id")
    assert tops["points"].sum() == int(rel.geometry.notna().sum())
    with pytest.raises(GeoprivError, match="no geometry"):
        home_inference(rel, person="trajectory_id", night=None, released=False)
    nothing = rel.assign(geometry=None)
    with pytest.raises(EmptyInputError, match="no point"):
        home_inference(nothing, person="trajectory_id", night=None)
    # on the true data's grid, an empty release is a release in which every home is missed
    out = home_attack(queries, nothing, person="trajectory_id", night=None)
    assert out.attrs["summary"]["inferred"] == 0 and out.attrs["summary"]["hit_rate_500m"] == 0.0
    assert top_places_attack(queries, nothing, person="trajectory_id").attrs["summary"]["persons"] == 0


def test_collection_persons_are_named_trajectory(fixes):
    mpd = pytest.importorskip("movingpandas")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tc = mpd.TrajectoryCollection(fixes.assign(t=pd.to_datetime(fixes["t"], utc=True)), "trajectory_id", t="t")
    out = top_places_uniqueness(tc)
    assert out.index.name == "trajectory" and out.index.tolist() == [1, 2, 3, 4, 5]


def test_query_error_with_an_adversary(queries):
    from geopriv.adversary import adversary_error, empirical_adversary_error

    q = queries.to_crs(32650)
    box = (430_000.0, 4_400_000.0, 470_000.0, 4_440_000.0)  # public: round numbers around the sample
    eps = math.log(10) / 100
    rel = q.priv.sanitize_traces(
        eps, traj_id="trajectory_id", time="t", bounds=box, rate=0.033, rng=3, method="independent"
    )
    adv = adversary_error(epsilon=eps * 0.033, area=box, crs=32650)  # one query's noise (fixed rate 3.3 %)
    out = query_error(q, rel, adversary=adv)
    shown = rel.geometry.notna().to_numpy()
    np.testing.assert_allclose(out["adversary_error_m"], empirical_adversary_error(q[shown], rel[shown], adv))
    np.testing.assert_allclose(out["displacement_m"], geopriv.displacement(q[shown], rel[shown]))
    s = out.attrs["summary"]
    assert s["expected_error_m"] == pytest.approx(adv.expected_error_m)
    assert s["expected_displacement_m"] == pytest.approx(adv.displacement_m)
    assert s["n"] == int(shown.sum()) and np.isfinite(s["adversary_error_median_m"])
    # the guesses of a release in another CRS are measured against the truth all the same
    out84 = query_error(q, rel.to_crs(4326), adversary=adv)
    np.testing.assert_allclose(out84["adversary_error_m"], out["adversary_error_m"], atol=1e-3)
