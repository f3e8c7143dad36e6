"""geopriv:sanitizetraces in a real QGIS, on the GeoLife sample (5 trajectories, 5,908 points)."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pytest

from qgis_helpers import CancelAt, attributes, data_path, memory_layer

pytestmark = pytest.mark.qgis

GEOLIFE_FIELDS = ["fid", "id", "sequence", "trajectory_id", "tracker", "t"]
NEW_FIELDS = ["predicted", "status", "epsilon_spent"]
BEIJING = "115.4,117.6,39.4,41.1 [EPSG:4326]"  # public study area of the GeoLife sample (xmin,xmax,ymin,ymax)


def rows(layer):
    names = [f.name() for f in layer.fields()]
    return [dict(zip(names, f.attributes()), _geom=f.geometry()) for f in layer.getFeatures()]


@pytest.fixture(scope="module")
def geolife_release(provider):
    import processing

    return processing.run(
        "geopriv:sanitizetraces",
        {
            "INPUT": data_path("geolife_sample.gpkg"),
            "TRAJ_ID_FIELD": "trajectory_id",
            "TIME_FIELD": "t",
            "LEVEL": math.log(10),
            "RADIUS": 100.0,
            "RATE": 0.033,
            "SEED": 4,
            "BOUNDS": BEIJING,
            "OUTPUT": "TEMPORARY_OUTPUT",
            "LEDGER": "TEMPORARY_OUTPUT",
        },
    )


def test_points_keep_attributes_and_get_budget_fields(geolife_release):
    out = geolife_release["OUTPUT"]
    assert out.featureCount() == 5908
    assert out.crs().authid() == "EPSG:4326"
    assert [f.name() for f in out.fields()] == GEOLIFE_FIELDS + NEW_FIELDS
    assert [a[:6] for a in attributes(out)] == attributes(data_path("geolife_sample.gpkg"))
    statuses = {r["status"] for r in rows(out)}
    assert statuses <= {"noise", "predicted", "skipped", "exhausted"} and "noise" in statuses
    for r in rows(out):
        if r["status"] == "exhausted":  # never the true point: no geometry, nothing spent
            assert r["_geom"].isNull() and r["epsilon_spent"] == 0 and r["predicted"] is False
        else:
            assert not r["_geom"].isNull() and r["epsilon_spent"] >= 0
            assert r["predicted"] == (r["status"] != "noise")


def test_ledger_accounts_for_every_point(geolife_release):
    ledger = rows(geolife_release["LEDGER"])
    assert [r["trajectory_id"] for r in ledger] == [1, 2, 3, 4, 5]
    points = rows(geolife_release["OUTPUT"])
    spent = defaultdict(float)
    count = defaultdict(int)
    for r in points:
        spent[r["trajectory_id"]] += r["epsilon_spent"]
        count[r["trajectory_id"]] += 1
    eps = math.log(10) / 100
    for r in ledger:
        assert r["budget"] == pytest.approx(eps)
        assert r["spent"] <= r["budget"]  # the guarantee: never more than the trace's budget
        assert r["queries"] == count[r["trajectory_id"]] == r["released"] + r["exhausted"]
        assert r["released"] == r["noise"] + r["predicted"] + r["skipped"]
        assert spent[r["trajectory_id"]] == pytest.approx(r["spent"], rel=1e-9)
    assert geolife_release["N_RELEASED"] == sum(r["released"] for r in ledger)
    assert geolife_release["N_EXHAUSTED"] == sum(r["exhausted"] for r in ledger)
    record = json.loads(geolife_release["PROVENANCE"])
    assert record["mechanism"] == "predictive_trace" and record["seeded"] is True
    assert record["traces"] == 5 and "n_traces" not in record
    # longitude/latitude: a plane centred on the declared public area, recorded as declared
    assert record["frame"] == "planar" and record["frame_area"] == "bounds"
    assert record["declared_bounds"] == [115.4, 39.4, 117.6, 41.1]
    assert record["grid_m"] == 1.0 and record["kept_columns"] == []


def test_fixed_utility_independent_and_last_point(run):
    result = run(
        "sanitizetraces",
        {
            "INPUT": data_path("geolife_sample.gpkg"),
            "TRAJ_ID_FIELD": "trajectory_id",
            "TIME_FIELD": "t",
            "METHOD": 1,
            "BUDGET": 1,
            "ACCURACY": 2000.0,
            "EPSILON": 0.05,
            "ON_EXHAUSTED": 1,
            "SEED": 2,
            "BOUNDS": BEIJING,
            "OUTPUT": "TEMPORARY_OUTPUT",
            "LEDGER": "TEMPORARY_OUTPUT",
        },
    )
    points = rows(result["OUTPUT"])
    assert {r["status"] for r in points} <= {"noise", "exhausted"}  # independent: no predictions
    assert not any(r["_geom"].isNull() for r in points)  # exhausted points repeat the last released one
    assert json.loads(result["PROVENANCE"])["budget"] == "fixed_utility"


def test_datetime_field_and_single_trace(run):
    from qgis.PyQt.QtCore import QDateTime, Qt

    start = QDateTime.fromSecsSinceEpoch(1_230_000_000, Qt.UTC)
    layer = memory_layer(
        [f"POINT({448000 + 5 * i} 4416000)" for i in range(40)],
        fields=(("when", "datetime"),),
        values=[[start.addSecs(60 * i)] for i in range(40)],
    )
    result = run(
        "sanitizetraces",
        {
            "INPUT": layer,
            "TIME_FIELD": "when",
            "EPSILON": 0.5,
            "RATE": 0.05,
            "SKIP_SPEED": 0.139,
            "OUTPUT": "TEMPORARY_OUTPUT",
            "LEDGER": "TEMPORARY_OUTPUT",
        },
    )
    ledger = rows(result["LEDGER"])
    assert len(ledger) == 1 and ledger[0]["queries"] == 40
    assert result["OUTPUT"].featureCount() == 40


def test_budget_exhausted_can_fail(run):
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException, match=r"ran out .* Nothing was written"):
        run(
            "sanitizetraces",
            {
                "INPUT": data_path("geolife_sample.gpkg"),
                "TRAJ_ID_FIELD": "trajectory_id",
                "TIME_FIELD": "t",
                "ON_EXHAUSTED": 2,
                "BOUNDS": BEIJING,
                "OUTPUT": "TEMPORARY_OUTPUT",
                "LEDGER": "TEMPORARY_OUTPUT",
            },
        )


@pytest.mark.parametrize(
    "params, message",
    [
        ({"TRAJ_ID_FIELD": "user"}, "has no field 'user'"),
        ({"TIME_FIELD": "label"}, "cannot be read as time stamps"),
        ({"RATE": 0.0}, "rate"),
        ({"LEVEL": 0.0}, "level must be finite and > 0"),
    ],
)
def test_bad_inputs(run, params, message):
    from qgis.core import QgsProcessingException

    layer = memory_layer(
        [f"POINT({448000 + i} 4416000)" for i in range(5)],
        fields=(("label", "string"), ("trace", "integer")),
        values=[["x", 1]] * 5,
    )
    params = {
        "INPUT": layer,
        "TRAJ_ID_FIELD": "trace",
        "OUTPUT": "TEMPORARY_OUTPUT",
        "LEDGER": "TEMPORARY_OUTPUT",
        **params,
    }
    with pytest.raises(QgsProcessingException, match=message):
        run("sanitizetraces", params)


def test_field_name_clash_is_explained(run):
    from qgis.core import QgsProcessingException

    layer = memory_layer(["POINT(448000 4416000)"], fields=(("status", "string"),), values=[["ok"]])
    with pytest.raises(QgsProcessingException, match="already has a field with that name"):
        run("sanitizetraces", {"INPUT": layer, "OUTPUT": "TEMPORARY_OUTPUT", "LEDGER": "TEMPORARY_OUTPUT"})


def test_cancellation_during_the_release_writes_nothing(run, tmp_path):
    """Cancelled during the one sanitize_traces call (10-90 %): neither the points nor the ledger are written."""
    from qgis.core import QgsProcessingException

    feedback = CancelAt(10.0)
    target = tmp_path / "never.gpkg"
    ledger = tmp_path / "never_ledger.gpkg"
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run(
            "sanitizetraces",
            {
                "INPUT": data_path("geolife_sample.gpkg"),
                "TRAJ_ID_FIELD": "trajectory_id",
                "TIME_FIELD": "t",
                "BOUNDS": BEIJING,
                "OUTPUT": str(target),
                "LEDGER": str(ledger),
            },
            feedback=feedback,
        )
    assert max(feedback.seen) <= 90.0  # writing (90-100 %) never started
    assert not target.exists() and not ledger.exists()


def test_library_warnings_reach_the_log(run):
    """A geopriv warning is a Processing warning, not an error: here the DistortionWarning of a trace release over a
    public study area so large that even a local equidistant projection distorts distances (Siberia to the tropics)."""
    from qgis.core import QgsProcessingFeedback

    class Log(QgsProcessingFeedback):
        def __init__(self):
            super().__init__()
            self.warnings = []

        def pushWarning(self, text):  # noqa: N802
            self.warnings.append(text)

    layer = memory_layer([f"POINT({100 + i * 0.001} {40 + i * 0.001})" for i in range(10)], crs="EPSG:4326")
    feedback = Log()
    # bounds used by no other test: the library computes a frame once per CRS and area
    result = run(
        "sanitizetraces",
        {
            "INPUT": layer,
            "BOUNDS": "61.25,138.75,1.25,78.75 [EPSG:4326]",
            "SEED": 1,
            "OUTPUT": "TEMPORARY_OUTPUT",
            "LEDGER": "TEMPORARY_OUTPUT",
        },
        feedback=feedback,
    )
    assert result["OUTPUT"].featureCount() == 10
    assert any(w.startswith("DistortionWarning: The declared area is so large") for w in feedback.warnings)


def test_defaults_are_the_librarys(provider):
    """Every option sanitize_traces has a default for takes that default (the plugin has none of its own)."""
    import inspect

    import geopriv
    from qgis.core import QgsApplication

    alg = QgsApplication.processingRegistry().createAlgorithmById("geopriv:sanitizetraces")
    library = {k: p.default for k, p in inspect.signature(geopriv.sanitize_traces).parameters.items()}
    for name, keyword in {
        "ETA": "eta",
        "GAMMA": "gamma",
        "DELTA": "delta",
        "PREDICTION_RATE": "prediction_rate",
    }.items():
        assert alg.parameterDefinition(name).defaultValue() == library[keyword], name
    for name, keyword, choices in (
        ("METHOD", "method", alg.METHODS),
        ("BUDGET", "budget", alg.BUDGETS),
        ("PREDICTOR", "predictor", alg.PREDICTORS),
        ("ON_EXHAUSTED", "on_exhausted", alg.EXHAUSTED),
    ):
        assert choices[alg.parameterDefinition(name).defaultValue()] == library[keyword], name
    assert alg.parameterDefinition("CONTINUOUS").defaultValue() == library["continuous"]


def walkers(traces=40, length=250):
    """Random walks in UTM 50N (Beijing), one point a minute: enough steps for many progress reports."""
    import numpy as np

    rng = np.random.default_rng(0)
    xy = np.cumsum(rng.normal(0, 20, (traces, length, 2)), axis=1).reshape(-1, 2) + [448_000.0, 4_416_000.0]
    ids = np.repeat(np.arange(traces), length)
    seconds = np.tile(np.arange(length) * 60, traces)
    return memory_layer(
        [f"POINT({x} {y})" for x, y in xy],
        fields=(("trace", "integer"), ("t", "integer")),
        values=[[int(i), int(t)] for i, t in zip(ids, seconds)],
    )


def test_progress_comes_from_inside_the_release_and_cancels_it(run, tmp_path):
    """The library reports per batch of steps while it releases (10-90 %), and a cancel stops it there."""
    from qgis.core import QgsProcessingException, QgsProcessingFeedback

    layer = walkers()
    params = {
        "INPUT": layer,
        "TRAJ_ID_FIELD": "trace",
        "TIME_FIELD": "t",
        "EPSILON": 1.0,
        "RATE": 0.004,
        "SEED": 1,
        "LEDGER": "TEMPORARY_OUTPUT",
    }
    feedback = QgsProcessingFeedback()
    seen = []
    feedback.progressChanged.connect(seen.append)
    result = run("sanitizetraces", dict(params, OUTPUT="TEMPORARY_OUTPUT"), feedback=feedback)
    assert result["N_RELEASED"] > 0 and seen == sorted(seen)
    inside = [p for p in seen if 10.0 < p < 90.0]
    assert len(inside) >= 20  # about 100 reports from the run loop, not one at the end of the call

    cancel = CancelAt(30.0)
    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run("sanitizetraces", dict(params, OUTPUT=str(target)), feedback=cancel)
    assert max(cancel.seen) < 40.0  # stopped at the next report of the run, long before its end (90 %)
    assert not target.exists()
