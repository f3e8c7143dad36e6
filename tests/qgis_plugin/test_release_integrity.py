"""Each run is one geopriv release: one library call, the library's own provenance, fresh entropy.

* A layer larger than the plugin's former chunk size (1,000 points per call, up to 50 calls)
  is released by exactly one library call, and PROVENANCE is that call's record unchanged:
  no ``chunks``/``calls`` fields, ``n`` the layer's feature count, the trace ledger as the
  library wrote it (not "see the ledger table").
* A batch run (QGIS's batch dialog calls ``run`` on one algorithm instance once per row) draws
  fresh operating-system entropy for every row unless a seed is given; nothing random is kept
  on the algorithm, the provider or a module between runs.
* Cancelling while the library is releasing writes nothing.
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

from qgis_helpers import CancelAt, data_path, points_xy, vector

pytestmark = pytest.mark.qgis

GEOLIFE = "geolife_sample.gpkg"  # 5,908 points in 5 traces: six calls of ~1,000 points under the old chunking
# (perturbed as points: the shuffled copy of conftest's geolife_fixes; the file lists the fixes in time order)
OLD_CHUNK = 1_000
MERGE_FIELDS = {"chunks", "calls"}  # what the plugin's old merge of several records added


class Spy:
    """Wraps a geopriv function: counts the calls and keeps each result's provenance record."""

    def __init__(self, monkeypatch, name, before=None):
        import geopriv

        self.original = getattr(geopriv, name)
        self.calls, self.records, self.raised = [], [], []
        self.before = before
        monkeypatch.setattr(geopriv, name, self)

    @property
    def __signature__(self):  # the plugin passes progress= only where the library takes it
        import inspect

        return inspect.signature(self.original)

    def __call__(self, data, **kwargs):
        self.calls.append((len(data), kwargs))
        if self.before is not None:
            self.before()
        try:
            result = self.original(data, **kwargs)
        except BaseException as exc:
            self.raised.append(exc)
            raise
        self.records.append(result.attrs["geopriv"])
        return result


def library_json(record):
    """The library's record as the plugin must output it (JSON), read back."""
    from geopriv_qgis.algorithms.base import GeoprivAlgorithm

    return json.loads(GeoprivAlgorithm.provenance_json(record))


# --- one library call per release -------------------------------------------------------------------
def test_perturb_points_is_one_call_with_the_library_record(run, monkeypatch, geolife_fixes):
    spy = Spy(monkeypatch, "perturb")
    source = geolife_fixes
    count = vector(source).featureCount()
    assert count > OLD_CHUNK
    result = run("perturbpoints", {"INPUT": source, "EPSILON": 0.01, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert len(spy.calls) == 1 and spy.calls[0][0] == count
    assert callable(spy.calls[0][1]["progress"])
    record = json.loads(result["PROVENANCE"])
    assert record == library_json(spy.records[0])  # the library's record, unmodified
    assert record["n"] == count == result["OUTPUT"].featureCount()
    assert not MERGE_FIELDS & record.keys()
    assert not any(
        isinstance(v, list) and any(isinstance(r, dict) for r in v) for v in record.values()
    )  # no per-call records
    assert result["EPSILON_PER_M"] == record["epsilon_per_m"]
    assert result["EFFECTIVE_EPSILON_PER_M"] == record["effective_epsilon_per_m"]


def test_sanitize_traces_is_one_call_with_the_library_record(run, monkeypatch):
    spy = Spy(monkeypatch, "sanitize_traces")
    source = data_path(GEOLIFE)
    count = vector(source).featureCount()
    result = run(
        "sanitizetraces",
        {
            "INPUT": source,
            "TRAJ_ID_FIELD": "trajectory_id",
            "TIME_FIELD": "t",
            "BOUNDS": "115.4,117.6,39.4,41.1 [EPSG:4326]",
            "SEED": 4,
            "OUTPUT": "TEMPORARY_OUTPUT",
            "LEDGER": "TEMPORARY_OUTPUT",
        },
    )
    assert len(spy.calls) == 1 and spy.calls[0][0] == count
    record = json.loads(result["PROVENANCE"])
    assert record == library_json(spy.records[0])
    assert record["n"] == count and record["traces"] == 5 and "n_traces" not in record
    assert not MERGE_FIELDS & record.keys()
    assert record.get("ledger") != "see the ledger table"  # the old merge's placeholder is gone
    if "ledger" in record:  # the library's own ledger, when it keeps one in the record
        assert sorted(record["ledger"]["trace"]) == [1, 2, 3, 4, 5]
    if "n_released" in record:
        assert result["N_RELEASED"] == record["n_released"]
    assert result["LEDGER"].featureCount() == 5


def test_location_dependent_is_one_call_with_the_library_record(run, monkeypatch, tmp_path):
    """2,000 points in Tokyo, released with a small mechanism built from the shipped raster."""
    from osgeo import gdal

    from qgis_helpers import memory_layer

    raster = str(tmp_path / "tokyo_20.tif")
    gdal.Translate(raster, data_path("tokyo_density_200.tif"), width=20, height=20, resampleAlg="average")
    ds = gdal.Open(raster)
    x0, dx, _, y0, _, dy = ds.GetGeoTransform()
    rng = np.random.default_rng(0)
    xs = x0 + dx * 20 * rng.uniform(0.2, 0.8, 2_000)
    ys = y0 + dy * 20 * rng.uniform(0.2, 0.8, 2_000)
    layer = memory_layer([f"POINT({x} {y})" for x, y in zip(xs, ys)], crs="EPSG:30166")
    spy = Spy(monkeypatch, "perturb")
    result = run(
        "perturblocationdependent",
        {"INPUT": layer, "POPULATION": raster, "OUTSIDE": 1, "SEED": 3, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    assert len(spy.calls) == 1 and spy.calls[0][0] == 2_000
    record = json.loads(result["PROVENANCE"])
    assert record == library_json(spy.records[0])
    assert record["mechanism"] == "eikonal" and record["n"] == 2_000 and record["seeded"] is True
    assert not MERGE_FIELDS & record.keys()
    assert result["MECHANISM_ID"] == record["mechanism_id"]


def test_log_prints_only_fields_of_the_library_record(run, monkeypatch, geolife_fixes):
    from qgis.core import QgsProcessingFeedback

    class Log(QgsProcessingFeedback):
        def __init__(self):
            super().__init__()
            self.infos = []

        def pushInfo(self, text):  # noqa: N802
            self.infos.append(text)

    spy = Spy(monkeypatch, "perturb")
    feedback = Log()
    run("perturbpoints", {"INPUT": geolife_fixes, "EPSILON": 0.01, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    record = spy.records[0]
    line = next(t for t in feedback.infos if t.startswith("mechanism = "))
    keys = re.findall(r"(?:^|, )(\w+) = ", line)
    assert keys and "n" in keys
    for key in keys:
        assert key in record and f"{key} = {record[key]}" in line


def test_saved_mechanism_is_loaded_with_the_library_default_verification(run, monkeypatch, tmp_path):
    import geopriv
    from osgeo import gdal

    from qgis_helpers import memory_layer

    raster = str(tmp_path / "tokyo_20.tif")
    gdal.Translate(raster, data_path("tokyo_density_200.tif"), width=20, height=20, resampleAlg="average")
    saved = str(tmp_path / "mech.npz")
    x0, dx, _, y0, _, dy = gdal.Open(raster).GetGeoTransform()
    layer = memory_layer([f"POINT({x0 + 10 * dx} {y0 + 10 * dy})"], crs="EPSG:30166")
    run(
        "perturblocationdependent",
        {"INPUT": layer, "POPULATION": raster, "SAVE_MECHANISM": saved, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    original = geopriv.EikonalMechanism.load
    seen = []

    def load(path, *args, **kwargs):
        seen.append((args, kwargs))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(geopriv.EikonalMechanism, "load", staticmethod(load))
    out = run("perturblocationdependent", {"INPUT": layer, "MECHANISM_FILE": saved, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert out["OUTPUT"].featureCount() == 1
    # no verify=False (whatever the library verifies by default); only QGIS feedback and the
    # kernels option (at the library's default here) are passed
    assert len(seen) == 1 and seen[0][0] == () and set(seen[0][1]) == {"progress", "kernels"}
    assert callable(seen[0][1]["progress"])
    import inspect

    assert seen[0][1]["kernels"] == inspect.signature(original).parameters["kernels"].default


# --- fresh entropy for every run of a batch -----------------------------------------------------------
def batch(alg_id, rows, tmp_path):
    """Run rows of parameters through ONE algorithm instance, as QGIS's batch dialog does."""
    from qgis.core import QgsApplication, QgsProcessingContext, QgsProcessingFeedback

    alg = QgsApplication.processingRegistry().createAlgorithmById(f"geopriv:{alg_id}")
    results = []
    for i, params in enumerate(rows):
        target = str(tmp_path / f"{alg_id}_{i}.gpkg")
        context = QgsProcessingContext()
        out, ok = alg.run(dict(params, OUTPUT=target), context, QgsProcessingFeedback())
        assert ok, out
        results.append((points_xy(target), json.loads(out["PROVENANCE"])))
    return alg, results


def test_batch_without_seed_draws_fresh_entropy_per_layer(tmp_path):
    source = data_path("soho_cholera.gpkg", "deaths")
    alg, [(a, rec_a), (b, rec_b)] = batch("perturbpoints", [{"INPUT": source}, {"INPUT": source}], tmp_path)
    assert not np.allclose(a, b)  # same layer, two rows: independent noise
    assert not np.allclose(a, points_xy(source))
    assert rec_a["seeded"] is False and rec_b["seeded"] is False


def test_batch_with_the_same_seed_reproduces(tmp_path):
    source = data_path("soho_cholera.gpkg", "deaths")
    _, [(a, rec_a), (b, rec_b)] = batch(
        "perturbpoints", [{"INPUT": source, "SEED": 7}, {"INPUT": source, "SEED": 7}], tmp_path
    )
    assert np.array_equal(a, b)
    assert rec_a["seeded"] is True and rec_b["seeded"] is True


def test_processing_run_twice_without_seed_differs_and_with_seed_matches(run):
    source = data_path("soho_cholera.gpkg", "deaths")
    first = run("perturbpoints", {"INPUT": source, "OUTPUT": "TEMPORARY_OUTPUT"})
    second = run("perturbpoints", {"INPUT": source, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert not np.allclose(points_xy(first["OUTPUT"]), points_xy(second["OUTPUT"]))
    seeded = [run("perturbpoints", {"INPUT": source, "SEED": 9, "OUTPUT": "TEMPORARY_OUTPUT"}) for _ in range(2)]
    assert np.array_equal(points_xy(seeded[0]["OUTPUT"]), points_xy(seeded[1]["OUTPUT"]))
    assert all(json.loads(r["PROVENANCE"])["seeded"] is True for r in seeded)
    assert json.loads(first["PROVENANCE"])["seeded"] is False


def test_random_source_is_made_inside_every_run(run, monkeypatch):
    import geopriv

    made = []
    original = geopriv.make_rng

    def make_rng(rng=None):
        made.append(rng)
        return original(rng)

    monkeypatch.setattr(geopriv, "make_rng", make_rng)
    source = data_path("soho_cholera.gpkg", "deaths")
    for _ in range(3):
        run("perturbpoints", {"INPUT": source, "OUTPUT": "TEMPORARY_OUTPUT"})
    assert made == [None, None, None]  # one fresh OS-entropy source per run


def test_nothing_random_is_kept_between_runs(provider, tmp_path):
    """No generator, seed sequence or random source on the algorithms, the provider or a plugin module."""
    from numpy.random import BitGenerator, Generator, SeedSequence

    source = data_path("soho_cholera.gpkg", "deaths")
    alg, _ = batch("perturbpoints", [{"INPUT": source, "SEED": 5}, {"INPUT": source}], tmp_path)
    from geopriv import rng as geopriv_rng

    random_types = (
        Generator,
        BitGenerator,
        SeedSequence,
        np.random.RandomState,
        getattr(geopriv_rng, "RandomSource", Generator),
    )

    def holds_randomness(obj):
        values = list(vars(obj).values()) if hasattr(obj, "__dict__") else []
        return [v for v in values if isinstance(v, random_types)]

    assert not holds_randomness(alg)
    assert not holds_randomness(provider)
    for candidate in provider.algorithms():
        assert not holds_randomness(candidate)
    plugin_modules = [m for name, m in list(sys.modules.items()) if name.startswith("geopriv_qgis") and m]
    assert plugin_modules
    for module in plugin_modules:
        assert not holds_randomness(module), module.__name__


# --- cancellation while the library releases ------------------------------------------------------------
def test_cancel_while_the_library_releases_writes_nothing(run, monkeypatch, tmp_path, geolife_fixes):
    """The user cancels during the geopriv call: the progress callback raises inside the library, which
    propagates it; the run fails as cancelled and no output file is created."""
    from qgis.core import QgsProcessingException, QgsProcessingFeedback

    from geopriv_qgis.algorithms.layers import Cancelled

    feedback = QgsProcessingFeedback()
    spy = Spy(monkeypatch, "perturb", before=feedback.cancel)  # Cancel pressed once the release has started
    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run("perturbpoints", {"INPUT": geolife_fixes, "OUTPUT": str(target)}, feedback=feedback)
    assert len(spy.calls) == 1
    assert len(spy.raised) == 1 and isinstance(spy.raised[0], Cancelled)  # raised inside the library call
    assert not target.exists()


def test_cancel_at_the_library_progress_report_writes_nothing(run, monkeypatch, tmp_path, geolife_fixes):
    """Cancelled as the library reports progress (10-90 %): nothing reaches the writing stage."""
    from qgis.core import QgsProcessingException

    spy = Spy(monkeypatch, "perturb")
    feedback = CancelAt(10.0)
    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException, match="cancelled"):
        run("perturbpoints", {"INPUT": geolife_fixes, "OUTPUT": str(target)}, feedback=feedback)
    assert len(spy.calls) == 1
    assert max(feedback.seen) <= 90.0  # writing (90-100 %) never started
    assert not target.exists()
