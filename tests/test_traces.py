"""Trace sanitisation: the predictive mechanism, its test, budget managers, skip rules, the public API.

Statistical tests use fixed seeds; each states the chance that a *correct* implementation
would fail it under a fresh random seed (its false-failure rate), and the test of Theta has a
negative control that the same check must reject.
"""

from __future__ import annotations

import copy
import math

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

import geopriv
from geopriv.exceptions import GeoprivError
from geopriv.mechanisms.predictive import (
    EXHAUSTED,
    NOISE,
    PREDICTED,
    SKIPPED,
    ClusterMean,
    FixedRate,
    FixedUtility,
    IndependentMechanism,
    PredictiveMechanism,
    PrivateTest,
    TimeSkip,
    Traces,
    min_prediction_rate,
    noise_constant,
    per_trace_predictor,
    private_test,
    theta_constant,
)

EPS = math.log(10) / 100  # the paper's ln 10 within 100 m, per trace


# ---------------------------------------------------------------------------- helpers
#: the public study area of the tests' Beijing data (declared, not measured from the points)
BEIJING = {4326: (115.4, 39.4, 117.6, 41.1)}
BEIJING[3857] = tuple(
    __import__("pyproj").Transformer.from_crs(4326, 3857, always_xy=True).transform_bounds(*BEIJING[4326])
)


def walk_frame(n_traces=4, length=40, crs=32650, step_m=20.0, dt=60.0, seed=0):
    """Random walks in UTM 50N metres (Beijing), one trace per id, 1 query a minute."""
    rng = np.random.default_rng(seed)
    xy = np.cumsum(rng.normal(0, step_m, (n_traces, length, 2)), axis=1).reshape(-1, 2)
    xy += [448_000.0, 4_416_000.0]
    gdf = gpd.GeoDataFrame(
        {
            "user": np.repeat([f"u{i}" for i in range(n_traces)], length),
            "t": pd.Timestamp("2024-05-01 08:00", tz="UTC")
            + pd.to_timedelta(np.tile(np.arange(length) * dt, n_traces), unit="s"),
            "value": np.arange(n_traces * length),
        },
        geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]),
        crs=32650,
    )
    return gdf if crs == 32650 else gdf.to_crs(crs)


def same_geoms(a, b):
    """Row by row: both missing, or equal within a micrometre."""
    a, b = a.geometry, b.geometry
    both_missing = a.isna() & b.isna()
    return bool((both_missing | a.geom_equals_exact(b, tolerance=1e-6)).all())


def zscore(successes, n, p):
    return (successes - n * p) / math.sqrt(n * p * (1 - p))


# ---------------------------------------------------------------------------- Theta
def test_constants_reproduce_the_paper():
    assert noise_constant(0.9) == pytest.approx(3.8897, abs=1e-4)
    assert theta_constant(0.9) == pytest.approx(math.log(5))
    # "it is necessary to predict at least 46% of points" (eta 0.5, gamma 0.8, delta 0.9)
    assert min_prediction_rate(0.5, 0.8, 0.9) == pytest.approx(0.465, abs=1e-3)


def _pass_rates(test_fn, theta, distances, n, seed):
    rng = np.random.default_rng(seed)
    return [int(test_fn(np.full(n, d), theta.threshold, theta.epsilon, rng).sum()) for d in distances]


def test_theta_pass_rates_match_the_laplace_cdf_and_reject_a_wrong_scale():
    """Pass rate of Theta at 5 distances vs P(Lap(1/eps) >= d - l).

    Check: |z| < 5 at every distance.  False-failure rate of a correct implementation under a
    random seed: < 5 * 5.7e-7 = 3e-6.  Negative control: the same check on a test drawing
    Laplace noise of scale 1.3/eps (a 30 % budget error) must fail at some distance.
    """
    theta = PrivateTest(epsilon=0.01, threshold=300.0)
    distances = [0.0, 200.0, 300.0, 400.0, 700.0]
    n = 40_000
    expected = theta.pass_probability(distances)
    got = _pass_rates(private_test, theta, distances, n, seed=11)
    z = [zscore(s, n, p) for s, p in zip(got, expected)]
    assert max(abs(v) for v in z) < 5, z

    def wrong_scale(d, l, eps, rng):
        return d <= l + rng.laplace(0.0, 1.3 / eps, d.shape)

    bad = _pass_rates(wrong_scale, theta, distances, n, seed=11)
    zbad = [zscore(s, n, p) for s, p in zip(bad, expected)]
    assert max(abs(v) for v in zbad) > 5, zbad


def test_theta_is_eps_private_in_the_distance():
    """The outcome probabilities of inputs r apart differ by at most exp(eps r) (Fact 1)."""
    theta = PrivateTest(epsilon=0.004, threshold=500.0)
    d = np.linspace(0, 3000, 601)
    r = 37.0
    for p_of in (theta.pass_probability, lambda x: 1 - theta.pass_probability(x)):
        a, b = p_of(d), p_of(d + r)
        ratio = np.maximum(a / b, b / a)
        assert np.all(ratio <= math.exp(theta.epsilon * r) * (1 + 1e-12))
    assert theta.privacy_loss(r) == pytest.approx(theta.epsilon * r)
    assert theta.alpha(0.9) == pytest.approx(math.log(5) / 0.004)


def test_theta_object_and_validation():
    theta = PrivateTest(0.01, 100.0)
    easy = theta(np.array([[0.0, 0.0], [1e6, 0.0]]), np.array([0.0, 0.0]), np.random.default_rng(0))
    assert easy.tolist() == [True, False]
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            PrivateTest(bad, 100.0)
    with pytest.raises(ValueError):
        PrivateTest(0.01, math.inf)


# ---------------------------------------------------------------------------- budget managers
def test_fixed_utility_configuration_follows_fig3a():
    m = FixedUtility(accuracy=3000.0)
    eps_t, eps_n, l = m.configure()
    a_n = m.c_noise / eps_n
    a_t = m.c_test / eps_t
    assert a_n == pytest.approx(3000.0)  # alpha = alpha_N
    assert a_n == pytest.approx(m.eta * (l + a_t))  # alpha_N = eta (l + alpha_theta)
    assert a_t / l == pytest.approx(m.gamma)  # gamma = alpha_theta / l
    with pytest.raises(ValueError):
        FixedUtility(accuracy=0.0)
    with pytest.raises(TypeError):
        FixedUtility(3000.0)  # keyword only: FixedUtility(3000) must not mean eta=3000


def test_fixed_rate_configuration_follows_fig3b():
    from geopriv.mechanisms.predictive import StepState

    m = FixedRate(rate=0.033, horizon=None, prediction_rate=0.6, prior_weight=1.0)
    state = StepState(0, np.array([1.0]), np.array([1.0]), np.zeros(1), np.zeros(1), np.zeros(1), np.array([np.inf]))
    eps_t, eps_n, l = m.plan(state)
    rho = 1.0 / (1 / 0.033)
    assert eps_t[0] + (1 - 0.6) * eps_n[0] == pytest.approx(rho)  # rho = eps_theta + (1 - PR) eps_N
    assert eps_t[0] / eps_n[0] == pytest.approx(m.k)
    assert l[0] == pytest.approx(m.c_test / (m.gamma * eps_t[0]))
    # the running prediction-rate estimate uses the trace's own public run
    state2 = StepState(5, np.array([1.0]), np.array([0.8]), np.array([4.0]), np.array([4.0]), np.zeros(1), np.ones(1))
    assert m.estimated_prediction_rate(state2)[0] == pytest.approx((4 + 0.6) / 5)
    for bad in (
        dict(rate=0.0),
        dict(rate=1.5),
        dict(rate=0.1, eta=0.0),
        dict(rate=0.1, gamma=1.5),
        dict(rate=0.1, delta=0.3),
        dict(rate=0.1, prediction_rate=1.0),
        dict(rate=0.1, horizon=0.5),
    ):
        with pytest.raises(ValueError):
            FixedRate(**bad)


def test_independent_fixed_rate_pays_exactly_the_planned_queries():
    tr = Traces.from_lengths(np.zeros((100, 2)), np.arange(100.0), [100])
    run = IndependentMechanism(FixedRate(rate=1 / 30)).run(tr, EPS, np.random.default_rng(0))
    assert (run.status != EXHAUSTED).sum() == 30  # 30 * (1/30) is not refused by rounding
    assert run.spent[0] <= EPS
    assert run.spent[0] == pytest.approx(EPS)


# ---------------------------------------------------------------------------- Lemma 1, as a property
run_configs = st.fixed_dictionaries(
    {
        "n_traces": st.integers(1, 6),
        "max_len": st.integers(1, 30),
        "step_m": st.sampled_from([0.0, 50.0, 2000.0]),
        "dup_times": st.booleans(),
        "manager": st.one_of(
            st.builds(
                lambda r, h: FixedRate(rate=r, horizon=h), st.floats(0.02, 1.0), st.sampled_from([None, 1.0, 3.0])
            ),
            st.builds(
                lambda a, e: FixedUtility(accuracy=a, eta=e), st.floats(50.0, 5000.0), st.sampled_from([0.35, 0.5, 1.0])
            ),
        ),
        "skip": st.sampled_from([None, 0.139, 4.17]),
        "stale": st.sampled_from([None, 600.0]),
        "predictor": st.sampled_from(["parrot", "cluster_mean"]),
        "seed": st.integers(0, 2**32 - 1),
    }
)


@settings(max_examples=60, deadline=None)
@given(cfg=run_configs)
def test_property_ledger_is_the_lemma1_sum_and_never_over_budget(cfg):
    rng = np.random.default_rng(cfg["seed"])
    lengths = rng.integers(1, cfg["max_len"] + 1, cfg["n_traces"])
    n = int(lengths.sum())
    xy = np.cumsum(rng.normal(0, cfg["step_m"] + 1e-9, (n, 2)), axis=0)
    gaps = rng.choice([0.0, 60.0, 3600.0], n) if cfg["dup_times"] else rng.uniform(1, 4000, n)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    t = np.cumsum(gaps)
    t -= np.repeat(t[starts], lengths)  # each trace starts at 0, non-decreasing
    tr = Traces.from_lengths(xy, t, lengths)
    mech = PredictiveMechanism(
        cfg["manager"],
        predictor=cfg["predictor"],
        skip=None if cfg["skip"] is None else TimeSkip(cfg["skip"]),
        stale_after=cfg["stale"],
    )
    total = EPS * rng.uniform(0.5, 2.0)
    run = mech.run(tr, total, np.random.default_rng(cfg["seed"] + 1))
    tid = tr.trace_of_row()
    # Lemma 1: spent = sum of eps_theta over tested steps + eps_N over hard steps, per trace
    lemma1 = np.bincount(tid, weights=run.eps_test, minlength=tr.n_traces) + np.bincount(
        tid, weights=run.eps_noise, minlength=tr.n_traces
    )
    np.testing.assert_allclose(run.spent, lemma1, rtol=1e-12, atol=0)
    assert np.all(run.spent <= total)  # exactly, as stored: never over budget
    assert np.all((run.eps_test > 0) == run.tested)
    assert np.all((run.eps_noise > 0) == (run.status == NOISE))
    assert np.all(run.epsilon[run.status == SKIPPED] == 0)
    released = run.status != EXHAUSTED
    assert np.all(np.isfinite(run.reported[released])) and np.all(np.isnan(run.reported[~released]))
    for s, m in zip(starts, lengths):
        st_ = run.status[s : s + m]
        assert st_[0] in (NOISE, EXHAUSTED)  # first query: no prediction, no test
        ex = np.flatnonzero(st_ == EXHAUSTED)
        if len(ex):
            assert np.all(st_[ex[0] :] == EXHAUSTED)  # the budget manager STOPs for good
        if cfg["predictor"] == "parrot":
            rep = run.reported[s : s + m]
            pred = np.flatnonzero((st_ == PREDICTED) | (st_ == SKIPPED))
            np.testing.assert_array_equal(rep[pred], rep[pred - 1])  # the parrot repeats the last report


# ---------------------------------------------------------------------------- skip rules
def test_first_point_skips_the_test_and_time_rule_skips_for_free():
    # one trace, a query every 10 s; skip at 1 m/s below 3 km accuracy: 10 s * 1 m/s << 3000 m
    tr = Traces.from_lengths(np.zeros((20, 2)), np.arange(20) * 10.0, [20])
    run = PredictiveMechanism(FixedUtility(accuracy=3000.0), skip=TimeSkip(1.0)).run(tr, EPS, np.random.default_rng(1))
    assert run.status[0] == NOISE and not run.tested[0] and run.eps_test[0] == 0
    assert np.all(run.status[1:] == SKIPPED) and run.spent[0] == pytest.approx(noise_constant() / 3000.0)
    # once 3000 m / 1 m/s = 3000 s have passed since the last hard point, the test runs again
    tr2 = Traces.from_lengths(np.zeros((3, 2)), np.array([0.0, 2999.0, 3001.0]), [3])
    run2 = PredictiveMechanism(FixedUtility(accuracy=3000.0), skip=TimeSkip(1.0)).run(
        tr2, EPS, np.random.default_rng(1)
    )
    assert run2.status[1] == SKIPPED and run2.tested[2]


def test_stale_rule_goes_straight_to_noise():
    tr = Traces.from_lengths(np.zeros((3, 2)), np.array([0.0, 60.0, 7200.0]), [3])
    run = PredictiveMechanism(FixedUtility(accuracy=3000.0), stale_after=3600).run(tr, EPS, np.random.default_rng(2))
    assert run.tested[1] and not run.tested[2] and run.status[2] == NOISE


def test_fixed_utility_stops_when_a_step_cannot_be_paid():
    m = FixedUtility(accuracy=1000.0)
    eps_n = m.c_noise / 1000.0
    tr = Traces.from_lengths(np.zeros((50, 2)), np.arange(50) * 60.0, [50])
    run = IndependentMechanism(m).run(tr, EPS, np.random.default_rng(0))
    assert (run.status != EXHAUSTED).sum() == int(EPS // eps_n)
    prun = PredictiveMechanism(m).run(tr, EPS, np.random.default_rng(0))
    assert prun.spent[0] <= EPS and (prun.status == EXHAUSTED).any()
    # every step paid for stayed at the target accuracy: noise steps used eps_N = c_N / alpha
    np.testing.assert_allclose(prun.eps_noise[prun.status == NOISE], eps_n)


def test_fixed_utility_hard_points_meet_the_accuracy():
    """Noise steps are within `accuracy` with probability delta = 0.9.

    Binomial check |z| < 5 over all noise rows (false-failure rate < 6e-7).
    """
    rng = np.random.default_rng(5)
    n_tr, L = 400, 12
    xy = rng.uniform(0, 50_000, (n_tr * L, 2))  # uncorrelated: most tests fail, many noise rows
    tr = Traces.from_lengths(xy, np.tile(np.arange(L) * 60.0, n_tr), np.full(n_tr, L))
    run = PredictiveMechanism(FixedUtility(accuracy=500.0)).run(tr, 0.2, np.random.default_rng(6))
    noise = run.status == NOISE
    d = np.hypot(*(run.reported[noise] - xy[noise]).T)
    assert noise.sum() > 2000
    assert abs(zscore(int((d <= 500.0).sum()), int(noise.sum()), 0.9)) < 5


# ---------------------------------------------------------------------------- the public API
def test_accessor_on_geolife_sample(geolife_sample):
    gdf = geolife_sample
    before = gdf.copy(deep=True)
    out = gdf.priv.sanitize_traces(
        traj_id="trajectory_id", time="t", level=math.log(10), radius=100, rate=0.033, rng=3, bounds=BEIJING[4326]
    )
    pd.testing.assert_frame_equal(gdf, before)  # input untouched
    assert out.index.equals(gdf.index) and out.crs == gdf.crs
    assert list(out.columns) == list(gdf.columns) + ["predicted", "status", "epsilon_spent"]
    assert set(out["status"]) <= {"noise", "predicted", "skipped", "exhausted"}
    rec = out.attrs["geopriv"]
    assert rec["mechanism"] == "predictive_trace" and rec["seeded"] is True
    assert rec["epsilon_per_m"] == pytest.approx(EPS)
    led = out.priv.trace_ledger()
    assert len(led) == gdf["trajectory_id"].nunique()
    assert np.all(led["spent"] <= led["budget"])
    by = out.groupby("trajectory_id")["epsilon_spent"].sum()
    np.testing.assert_allclose(led.loc[by.index, "spent"], by, rtol=1e-12)  # ledger = Lemma 1 sum
    assert (led["released"] + led["exhausted"] == led["queries"]).all()
    exhausted = out["status"] == "exhausted"
    assert out.geometry[exhausted].isna().all()
    assert not out.geometry[~exhausted].isna().any()


def test_sample_then_sanitize_geolife_both_methods(geolife_sample):
    q = geopriv.sample_queries(geolife_sample, traj_id="trajectory_id", time="t", p=0.2, rng=0)
    assert 20 < len(q) < len(geolife_sample)
    for method, kw in (
        ("independent", dict(budget="fixed_utility", accuracy=3000)),
        ("predictive", dict(budget="fixed_utility", accuracy=3000, skip_speed=4.17)),
        ("predictive", dict(budget=FixedRate(rate=0.05, eta=0.35, gamma=1.0), predictor="cluster_mean")),
    ):
        out = geopriv.sanitize_traces(
            q, traj_id="trajectory_id", time="t", epsilon=EPS, method=method, rng=1, bounds=BEIJING[4326], **kw
        )
        led = geopriv.trace_ledger(out)
        assert np.all(led["spent"] <= led["budget"])
        ok = out["status"] != "exhausted"
        d = geopriv.displacement(q[ok], out[ok])
        assert np.isfinite(d).all() and (d > 0).all()  # never the true point


def test_unsorted_input_gives_the_same_release():
    gdf = walk_frame(n_traces=5, length=25)
    kw = dict(traj_id="user", time="t", epsilon=EPS, rate=0.05, rng=9)
    a = geopriv.sanitize_traces(gdf, **kw)
    shuffled = gdf.sample(frac=1.0, random_state=4)
    b = geopriv.sanitize_traces(shuffled, **kw)
    assert b.index.equals(shuffled.index)  # rows stay where the caller put them
    b = b.loc[a.index]
    assert (a["status"] == b["status"]).all()
    np.testing.assert_allclose(a["epsilon_spent"], b["epsilon_spent"])
    assert same_geoms(a, b)


def test_one_point_traces():
    gdf = walk_frame(n_traces=6, length=1)
    out = gdf.priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS, rate=0.1, rng=0)
    assert (out["status"] == "noise").all() and not out["predicted"].any()
    np.testing.assert_allclose(out["epsilon_spent"], 0.1 * EPS)
    led = out.priv.trace_ledger()
    assert (led["queries"] == 1).all() and (led["prediction_rate"] == 0).all()
    out_u = gdf.priv.sanitize_traces(
        traj_id="user", time="t", epsilon=EPS, budget="fixed_utility", accuracy=2000, rng=0
    )
    np.testing.assert_allclose(out_u["epsilon_spent"], noise_constant() / 2000)


def test_duplicate_timestamps_keep_input_order_and_are_skippable():
    gdf = walk_frame(n_traces=2, length=6)
    gdf["t"] = gdf["t"].iloc[0]  # every query at the same instant
    out = gdf.priv.sanitize_traces(
        traj_id="user", time="t", epsilon=EPS, budget="fixed_utility", accuracy=3000, skip_speed=1.0, rng=0
    )
    for _, grp in out.groupby("user", sort=False):
        assert grp["status"].iloc[0] == "noise"  # the first row in input order is the first query
        assert (grp["status"].iloc[1:] == "skipped").all()  # 0 s elapsed: the time rule skips
        assert grp.geometry.iloc[1:].geom_equals(grp.geometry.iloc[0]).all()


def test_missing_columns_and_values_give_clear_errors():
    gdf = walk_frame(n_traces=2, length=3)
    with pytest.raises(GeoprivError, match=r"trace id column 'uid'.*traj_id=None"):
        gdf.priv.sanitize_traces(traj_id="uid", time="t", epsilon=EPS, rate=0.1)
    with pytest.raises(GeoprivError, match=r"time column 'when'.*time=None"):
        gdf.priv.sanitize_traces(traj_id="user", time="when", epsilon=EPS, rate=0.1)
    bad = gdf.copy()
    bad.loc[[1, 4], "t"] = pd.NaT
    with pytest.raises(GeoprivError, match=r"2 row\(s\) have no valid time.*labels 1, 4") as err:
        bad.priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS, rate=0.1)
    x0 = f"{gdf.geometry.x.iloc[0]:.0f}"
    assert x0 not in str(err.value)  # labels, never coordinates
    bad = gdf.copy()
    bad.loc[2, "user"] = None
    with pytest.raises(GeoprivError, match=r"no trace id.*labels 2"):
        bad.priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS, rate=0.1)
    with pytest.raises(ValueError, match="fixed rate budget manager needs a rate.*rate="):
        gdf.priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS)
    with pytest.raises(ValueError, match="fixed utility budget manager needs an accuracy.*accuracy="):
        gdf.priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS, budget="fixed_utility")
    with pytest.raises(ValueError, match="Say how much privacy"):
        gdf.priv.sanitize_traces(traj_id="user", time="t", rate=0.1)
    with pytest.raises(ValueError, match=r"\(skip_speed\) needs time"):
        gdf.priv.sanitize_traces(traj_id="user", time=None, epsilon=EPS, rate=0.1, skip_speed=1.0)
    with pytest.raises(GeoprivError, match="already has column"):
        gdf.assign(status=1).priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS, rate=0.1)
    with pytest.raises(ValueError, match="method must be"):
        gdf.priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS, rate=0.1, method="laplace")
    with pytest.raises(geopriv.MissingCRSError):
        gdf.set_crs(None, allow_override=True).priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS, rate=0.1)


def test_time_none_and_traj_none_and_numeric_seconds():
    gdf = walk_frame(n_traces=1, length=10).drop(columns="t")
    out = geopriv.sanitize_traces(gdf, traj_id=None, time=None, epsilon=EPS, rate=0.2, rng=1)
    led = geopriv.trace_ledger(out)
    assert len(led) == 1 and led["queries"].iloc[0] == 10
    gdf["secs"] = np.arange(10) * 30.0
    out2 = geopriv.sanitize_traces(
        gdf, traj_id=None, time="secs", epsilon=EPS, budget="fixed_utility", accuracy=3000, skip_speed=1.0, rng=1
    )
    assert (out2["status"].iloc[1:] == "skipped").all()


def test_geoseries_is_one_trace_in_row_order():
    s = walk_frame(n_traces=1, length=8).geometry
    out = s.priv.sanitize_traces(traj_id=None, time=None, epsilon=EPS, rate=0.2, rng=0)
    assert isinstance(out, gpd.GeoDataFrame) and out.index.equals(s.index) and out.crs == s.crs
    assert out["status"].iloc[0] == "noise" and len(geopriv.trace_ledger(out)) == 1
    with pytest.raises(GeoprivError, match="GeoDataFrame"):
        s.priv.sanitize_traces(traj_id="user", time=None, epsilon=EPS, rate=0.2)


def test_on_exhausted_last_repeats_the_last_release_never_the_truth():
    gdf = walk_frame(n_traces=2, length=30)
    out = gdf.priv.sanitize_traces(
        traj_id="user", time="t", epsilon=EPS, method="independent", rate=0.1, on_exhausted="last", rng=2
    )
    for _, grp in out.groupby("user", sort=False):
        ex = grp["status"] == "exhausted"
        assert ex.sum() == 20
        last_released = grp.geometry[~ex].iloc[-1]
        assert grp.geometry[ex].geom_equals(last_released).all()
    assert (out.loc[out["status"] == "exhausted", "epsilon_spent"] == 0).all()


@pytest.mark.parametrize("crs", [32650, 4326, 3857])
def test_epsilon_is_per_ground_metre_in_any_crs(crs):
    """Mean displacement of independent releases is 2 / eps_N ground metres in UTM, lon/lat and Web Mercator.

    1,500 one-point traces; |mean - 2/eps_N| < 5 standard errors (false-failure rate < 6e-7).
    """
    gdf = walk_frame(n_traces=1500, length=1, step_m=0.0, crs=crs)
    out = gdf.priv.sanitize_traces(
        traj_id="user",
        time="t",
        epsilon=EPS,
        method="independent",
        budget="fixed_utility",
        accuracy=300.0,
        rng=7,
        bounds=BEIJING.get(crs),
    )
    d = gdf.priv.displacement(out).to_numpy()
    eps_n = noise_constant() / 300.0
    se = math.sqrt(2.0) / eps_n / math.sqrt(len(d))  # sd of the Gamma(2, 1/eps) radius is sqrt(2)/eps
    assert abs(d.mean() - 2.0 / eps_n) < 5 * se, (d.mean(), 2.0 / eps_n)


def test_custom_predictors_see_only_the_public_run(monkeypatch):
    # one random stream for the three releases: a seed is bound to the parameters (the predictor among them),
    # so without this the built-in and the custom parrot would draw different noise (geopriv.rng.RandomSource.bind)
    from geopriv.rng import RandomSource

    monkeypatch.setattr(RandomSource, "bind", lambda self, *data, **kw: self)
    gdf = walk_frame(n_traces=3, length=15)
    kw = dict(traj_id="user", time="t", epsilon=EPS, rate=0.1)
    seen = {}

    def last(run):
        seen["fields"] = sorted(k for k in vars(run) if not k.startswith("_"))
        assert run.reported.shape == (len(run), run.step, 2) and run.times.shape == (len(run), run.step + 1)
        return run.last_reported

    a = geopriv.sanitize_traces(gdf, predictor=last, rng=4, **kw)
    b = geopriv.sanitize_traces(gdf, predictor="parrot", rng=4, **kw)
    assert seen["fields"] == ["last_reported", "step"]
    assert same_geoms(a, b)
    c = geopriv.sanitize_traces(gdf, predictor=per_trace_predictor(lambda rep, hard, t: rep[-1]), rng=4, **kw)
    assert same_geoms(c, b)
    with pytest.raises(GeoprivError, match="predictor returned shape"):
        geopriv.sanitize_traces(gdf, predictor=lambda run: np.zeros((1, 3)), rng=4, **kw)
    with pytest.raises(ValueError, match="Unknown predictor"):
        geopriv.sanitize_traces(gdf, predictor="oracle", rng=4, **kw)


def test_cluster_mean_pools_hard_reports_of_one_place():
    # a user who never moves, with a test tuned to fail often: the pooled prediction gets closer
    tr = Traces.from_lengths(np.zeros((4000, 2)), np.tile(np.arange(40) * 60.0, 100), np.full(100, 40))
    m = FixedRate(rate=0.025, eta=1.0, gamma=1.0)
    errs = {}
    for name in ("parrot", "cluster_mean"):
        run = PredictiveMechanism(m, predictor=name).run(tr, EPS, np.random.default_rng(3))
        ok = run.status == PREDICTED
        errs[name] = np.hypot(*run.reported[ok].T).mean()
    assert errs["cluster_mean"] < errs["parrot"]
    with pytest.raises(ValueError):
        ClusterMean(merge=0.0)


@pytest.mark.parametrize("method", ["predictive", "independent"])
def test_progress_is_reported_from_inside_the_run(method):
    gdf = walk_frame(n_traces=6, length=300)
    n = len(gdf)
    seen = []
    geopriv.sanitize_traces(
        gdf,
        EPS,
        traj_id="user",
        time="t",
        method=method,
        rate=0.005,
        rng=1,
        progress=lambda done, total: seen.append((done, total)),
    )
    done = [d for d, _ in seen]
    assert seen[-1] == (n, n) and all(t == n for _, t in seen) and done == sorted(set(done))
    if method == "predictive":  # step by step: about 100 reports while the traces are released
        assert 50 <= len(seen) <= 101
    else:  # one vectorised step
        assert seen == [(n, n)]


def test_a_cancelled_run_stops_at_a_report_with_its_ledger_settled():
    """The progress callable may raise to cancel: nothing is returned, and an accountant passed in holds exactly
    what the steps run before the cancel spent (nothing left reserved, never over budget)."""
    from geopriv.accounting import BudgetAccountant

    rng = np.random.default_rng(3)
    lengths = [400, 300, 200]
    xy = np.cumsum(rng.normal(0, 20, (sum(lengths), 2)), axis=0)
    traces = Traces.from_lengths(xy, np.arange(sum(lengths)) * 60.0, lengths)

    class Stop(Exception):
        pass

    calls = []

    def cancel(done, total):
        calls.append(done)
        if done >= total // 2:
            raise Stop

    acc = BudgetAccountant(np.full(3, EPS))
    with pytest.raises(Stop):
        PredictiveMechanism(FixedRate(rate=0.004)).run(
            traces, rng=np.random.default_rng(1), accountant=acc, progress=cancel
        )
    assert calls[-1] < sum(lengths)  # stopped mid-run
    assert np.all(acc.reserved == 0) and np.all(acc.spent > 0) and np.all(acc.spent <= EPS)
    full = BudgetAccountant(np.full(3, EPS))
    PredictiveMechanism(FixedRate(rate=0.004)).run(traces, rng=np.random.default_rng(1), accountant=full)
    assert np.all(acc.spent <= full.spent) and np.any(acc.spent < full.spent)  # the same draws, fewer of them
    with pytest.raises(Stop):  # sanitize_traces propagates it: no result
        geopriv.sanitize_traces(walk_frame(), EPS, traj_id="user", time="t", rate=0.05, progress=cancel)


def test_ledger_survives_copies_and_concat():
    gdf = walk_frame(n_traces=2, length=5)
    out = gdf.priv.sanitize_traces(traj_id="user", time="t", epsilon=EPS, rate=0.2, rng=0)
    led = geopriv.trace_ledger(out.copy())
    assert list(led.index) == ["u0", "u1"] and led.index.name == "user"
    both = pd.concat([out, out])  # attrs holding the ledger compare cleanly (plain lists)
    assert len(both) == 20
    assert copy.deepcopy(out).attrs["geopriv"]["ledger"]["spent"] == out.attrs["geopriv"]["ledger"]["spent"]
    with pytest.raises(GeoprivError, match="no trace ledger"):
        geopriv.trace_ledger(gdf)


# ---------------------------------------------------------------------------- sample_queries
def test_sample_queries_protocol():
    # one trajectory: an hour walking at 1 m/s, then an hour driving at 15 m/s (54 km/h); a fix every 5 s
    t = np.arange(0, 7200, 5.0)
    speed = np.where(t < 3600, 1.0, 15.0)
    x = 448_000 + np.concatenate([[0], np.cumsum(speed[:-1] * 5.0)])
    gdf = gpd.GeoDataFrame({"tid": 1, "t": t}, geometry=gpd.points_from_xy(x, np.full_like(x, 4_416_000.0)), crs=32650)
    q0 = geopriv.sample_queries(gdf, traj_id="tid", time="t", p=0.0, jitter=0.1, rng=0)
    assert 50 <= len(q0) <= 62  # about one a minute, walking only
    assert q0["t"].max() < 3600 + 60
    gaps = np.diff(q0["t"].to_numpy())
    assert 55 < np.median(gaps) < 65
    assert list(q0.columns) == ["tid", "t", "geometry", "source_row"]
    q1 = geopriv.sample_queries(gdf, traj_id="tid", time="t", p=1.0, jitter=0.0, rng=0)
    assert q1["t"].tolist() == [0.0]  # the next query, an hour later, is in the car: dropped
    with pytest.raises(ValueError):
        geopriv.sample_queries(gdf, traj_id="tid", time="t", p=1.5)
    # datetimes in, datetimes out
    g2 = gdf.assign(t=pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(gdf["t"], unit="s"))
    q2 = geopriv.sample_queries(g2, traj_id="tid", time="t", p=0.0, rng=0)
    assert pd.api.types.is_datetime64_any_dtype(q2["t"]) and len(q2) == len(q0)


def test_sample_queries_on_geolife_sample(geolife_sample):
    for p in (0.0, 1.0):
        q = geopriv.sample_queries(geolife_sample, traj_id="trajectory_id", time="t", p=p, rng=1)
        assert set(q["trajectory_id"]) <= set(geolife_sample["trajectory_id"])
        assert q.crs == geolife_sample.crs
        src = geolife_sample.loc[q["source_row"]]
        assert shapely.equals(src.geometry.values, q.geometry.values).all()


def test_predictors_see_released_values_only_never_unrounded_noise():
    """The predictor's state is built from the released (snapped) reports, not the float noise.

    A custom predictor records every past report it is shown; mapped back to the input CRS, each
    must be a node of the public lattice (to 1e-6 of a step).  Negative control: with
    continuous=True the same reports are off the lattice (the check would catch a regression).
    """
    from geopriv.frame import public_frame, public_lattice

    gdf = walk_frame(n_traces=3, length=20)
    frame = public_frame(32650)
    lattice = public_lattice(frame, 1.0)

    def shown(continuous):
        seen = []

        def pred(run):
            seen.append(np.asarray(run.reported, dtype=float).reshape(-1, 2))
            return run.last_reported

        geopriv.sanitize_traces(
            gdf, traj_id="user", time="t", epsilon=EPS, rate=0.1, predictor=pred, rng=4, continuous=continuous
        )
        pts = np.vstack(seen)
        pts = pts[np.isfinite(pts).all(axis=1)] * frame.scale_max  # work metres -> CRS units (used as is)
        r = pts / lattice.step
        return np.abs(r - np.round(r)).max()

    assert shown(False) < 1e-6
    assert shown(True) > 1e-3
