"""The lifetime budget store in QGIS: BUDGET_STORE and PERSON, the library's budget_store= and person=.

Real headless QGIS, real SQLite files and a real PostgreSQL server (the ``pg_url`` fixture of
tests/conftest.py), no mocks:

* a store granted enough for exactly one release: the first run charges every person what a row
  costs (the provenance's ``charged_per_row``) and logs it; the second run stops naming the persons,
  writes no output and charges nobody;
* a missing store is refused in QGIS terms (how to create it), and no store is created by the
  attempt; a store with persons left to the feature ids is refused; a password in a PostgreSQL
  URL is refused before the run (QGIS logs parameters) and never echoed;
* an empty BUDGET_STORE changes nothing (no budget field in the provenance).

Deterministic: seeded noise, and the refusals do not depend on the noise (the charge of a row is a
function of public parameters only: epsilon, the lattice, the CRS).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from qgis.core import QgsProcessingException  # collected only where QGIS imports (conftest.py)

from qgis_helpers import Log, memory_layer, vector

pytestmark = pytest.mark.qgis

UTM = "EPSG:32650"
EPSILON = 0.01  # per ground metre
N = 8  # persons, one point each: every one of them is named in a refusal (format_labels shows 10)


def people_layer(seed=0):
    """N points around Beijing (UTM 50N) at random positions, with a text person id field 'pid'."""
    rng = np.random.default_rng(seed)
    xs = 448_000 + rng.uniform(0, 2_000, N)
    ys = 4_416_000 + rng.uniform(0, 2_000, N)
    layer = memory_layer(
        [f"POINT({x} {y})" for x, y in zip(xs, ys)],
        crs=UTM,
        fields=(("pid", "string"),),
        values=[[f"person-{i}"] for i in range(N)],
    )
    return layer, xs, ys


def coordinate_texts(xs, ys):
    texts = set()
    for v in np.concatenate([xs, ys]):
        texts |= {str(int(v)), f"{v:.1f}", f"{v:.2f}"}
    return texts


def row_cost(run, layer):
    """What one row of this release costs in epsilon per metre: its guarantee, from a run without a store."""
    record = json.loads(
        run("perturbpoints", {"INPUT": layer, "EPSILON": EPSILON, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT"})[
            "PROVENANCE"
        ]
    )
    assert "budget_store" not in record and "charged_per_row" not in record  # no store: nothing changes
    return max(record["effective_epsilon_per_m"], EPSILON)


def granted_store(url, total, persons=None):
    """A new store granting ``total`` epsilon per metre for life: to everyone (the default), or to ``persons``."""
    import geopriv

    with geopriv.BudgetStore(url, create=True) as store:
        store.grant(total, unit="epsilon/m", persons=persons, note="test: one release")


def balances(url):
    import geopriv

    with geopriv.BudgetStore(url) as store:
        table = store.balances(unit="epsilon/m")
        return table.set_index("person").sort_index(), len(store.releases())


def params(layer, store, output, **extra):
    return {
        "INPUT": layer,
        "EPSILON": EPSILON,
        "SEED": 1,
        "BUDGET_STORE": store,
        "PERSON": "pid",
        "OUTPUT": output,
        **extra,
    }


def test_a_store_pays_for_exactly_one_release(run, tmp_path):
    layer, xs, ys = people_layer()
    cost = row_cost(run, layer)
    path = str(tmp_path / "budgets.db")
    granted_store(f"sqlite:///{path}", 1.5 * cost)  # one release, not two

    first = tmp_path / "first.gpkg"
    log = Log()
    result = run("perturbpoints", params(layer, path, str(first)), feedback=log)
    record = json.loads(result["PROVENANCE"])
    assert record["budget_store"] == "sqlite" and record["budget_unit"] == "epsilon/m"
    assert record["charged_per_row"] == pytest.approx(cost, rel=1e-12)
    assert vector(str(first)).featureCount() == N
    table, releases = balances(path)
    assert releases == 1 and list(table.index) == sorted(f"person-{i}" for i in range(N))
    assert np.allclose(table["spent"], record["charged_per_row"], rtol=1e-12, atol=0)  # every person, once
    assert np.allclose(table["remaining"], 0.5 * cost, rtol=1e-9)
    charged = [line for line in log.infos if "charged to the budget store before the noise was drawn" in line]
    assert len(charged) == 1
    assert f"{record['charged_per_row']:.6g} epsilon/m" in charged[0] and "each row cost" in charged[0]
    assert path not in charged[0]
    for text in coordinate_texts(xs, ys):
        assert not any(text in line for line in log.lines)

    second = tmp_path / "second.gpkg"
    with pytest.raises(QgsProcessingException) as refused:
        run("perturbpoints", params(layer, path, str(second)))
    message = str(refused.value)
    assert f"{N} person(s) would exceed their lifetime budget in 'epsilon/m'" in message
    assert all(f"'person-{i}'" in message for i in range(N))  # the persons named, by their ids
    assert "Nothing was drawn or charged" in message and "geopriv budget grant" in message
    assert "store.grant" not in message and "--drop" not in message  # the QGIS advice only
    for text in coordinate_texts(xs, ys):
        assert text not in message
    assert not second.exists()  # no output written
    after, releases = balances(path)
    assert releases == 1 and after["spent"].equals(table["spent"])  # nobody charged


def test_a_person_with_several_rows_pays_for_each(run, tmp_path):
    layer, _, _ = people_layer()
    cost = row_cost(run, layer)
    layer.startEditing()
    first_two = [f.id() for f in layer.getFeatures()][:2]
    for fid in first_two:
        layer.changeAttributeValue(fid, 0, "person-0")  # person-0 has two points
    assert layer.commitChanges()
    path = str(tmp_path / "budgets.db")
    granted_store(path, 1.5 * cost)
    with pytest.raises(QgsProcessingException) as refused:
        run("perturbpoints", params(layer, path, "TEMPORARY_OUTPUT"))
    assert "1 person(s) new to the store would exceed the default lifetime budget" in str(refused.value)
    assert "'person-0'" in str(refused.value) and "'person-2'" not in str(refused.value)
    assert balances(path)[1] == 0


def test_persons_granted_their_own_budget(run, tmp_path):
    layer, _, _ = people_layer()
    cost = row_cost(run, layer)
    path = str(tmp_path / "budgets.db")
    granted_store(path, 1.5 * cost, persons=[f"person-{i}" for i in range(N)])  # no default: only these persons
    run("perturbpoints", params(layer, path, "TEMPORARY_OUTPUT"))
    table, releases = balances(path)
    assert releases == 1 and np.allclose(table["spent"], cost, rtol=1e-12, atol=0)


def test_a_missing_store_is_refused_and_not_created(run, tmp_path):
    layer, _, _ = people_layer()
    missing = tmp_path / "no_such_store.db"
    output = tmp_path / "out.gpkg"
    for typed in (str(missing), f"sqlite:///{missing}"):
        with pytest.raises(QgsProcessingException) as refused:
            run("perturbpoints", params(layer, typed, str(output)))
        message = str(refused.value)
        assert f"There is no budget store at {str(missing)!r}" in message
        assert "'Budget store' parameter" in message and "geopriv budget grant" in message
        assert not missing.exists() and not output.exists()  # a mistyped path never starts a new store


def test_a_store_needs_person_ids_not_feature_ids(run, tmp_path):
    layer, _, _ = people_layer()
    path = str(tmp_path / "budgets.db")
    granted_store(path, 1.0)
    with pytest.raises(QgsProcessingException, match="choose the 'Person id field'") as refused:
        run("perturbpoints", params(layer, path, "TEMPORARY_OUTPUT", PERSON=None))
    assert "Feature ids are not persons" in str(refused.value)
    assert balances(path)[1] == 0


def test_an_empty_store_changes_nothing(run):
    layer, _, _ = people_layer()
    log = Log()
    record = json.loads(
        run("perturbpoints", params(layer, "", "TEMPORARY_OUTPUT", PERSON=None), feedback=log)["PROVENANCE"]
    )
    assert not {"budget_store", "budget_unit", "charged_per_row"} & set(record)
    assert not any("budget store" in line.lower() for line in log.lines)


def test_a_password_in_the_url_is_refused_before_the_run(run):
    layer, _, _ = people_layer()
    for url in (
        "postgresql://alice:s3cret-pw@db.example/budgets",
        "postgresql://alice@db.example/budgets?password=s3cret-pw",
    ):
        with pytest.raises(QgsProcessingException) as refused:
            run("perturbpoints", params(layer, url, "TEMPORARY_OUTPUT"))
        message = str(refused.value)
        assert "holds a password" in message and "~/.pgpass" in message
        assert "s3cret-pw" not in message and "alice" not in message


@pytest.mark.postgresql
def test_a_postgresql_store(run, pg_url, tmp_path):
    layer, _, _ = people_layer(seed=1)
    cost = row_cost(run, layer)
    granted_store(pg_url, 1.5 * cost)
    log = Log()
    record = json.loads(run("perturbpoints", params(layer, pg_url, "TEMPORARY_OUTPUT"), feedback=log)["PROVENANCE"])
    assert record["budget_store"] == "postgresql" and record["charged_per_row"] == pytest.approx(cost, rel=1e-12)
    table, releases = balances(pg_url)
    assert releases == 1 and np.allclose(table["spent"], record["charged_per_row"], rtol=1e-12, atol=0)
    assert len(table) == N
    assert any("Budget store (postgresql)" in line and "before the noise was drawn" in line for line in log.infos)
    assert not any(pg_url in line for line in log.lines)  # never the store's URL
    output = tmp_path / "second.gpkg"
    with pytest.raises(QgsProcessingException, match="would exceed their lifetime budget"):
        run("perturbpoints", params(layer, pg_url, str(output)))
    assert not output.exists() and balances(pg_url)[1] == 1
    assert os.environ.get("PGPASSWORD") is None or os.environ["PGPASSWORD"] not in str(record)


# --- the other releases: sanitize traces, synthesize, diffuse --------------------------------------------------
def store_with_default(path, unit, total):
    import geopriv

    with geopriv.BudgetStore(path, create=True) as store:
        store.grant(total, unit=unit)


def test_traces_charge_the_trace_ids_by_default(run, tmp_path):
    """PERSON empty: the library's default person, the trace id; each trace's worst case charged, then settled."""
    rng = np.random.default_rng(3)
    xs, ys = 448_000 + rng.uniform(0, 2_000, 20), 4_416_000 + rng.uniform(0, 2_000, 20)
    layer = memory_layer(
        [f"POINT({x} {y})" for x, y in zip(xs, ys)],
        crs=UTM,
        fields=(("trace", "integer"), ("t", "double")),
        values=[[1 + i // 10, float(i % 10)] for i in range(20)],
    )
    path = str(tmp_path / "budgets.db")
    store_with_default(path, "epsilon/m", 1.0)
    base = {
        "INPUT": layer,
        "TIME_FIELD": "t",
        "EPSILON": 0.05,
        "RATE": 0.2,
        "SEED": 1,
        "BUDGET_STORE": path,
        "OUTPUT": "TEMPORARY_OUTPUT",
        "LEDGER": "TEMPORARY_OUTPUT",
    }
    with pytest.raises(QgsProcessingException, match="choose the 'Person id field' or the 'Trace id field"):
        run("sanitizetraces", base)  # no trace id either: the persons would be feature ids
    assert balances(path)[1] == 0
    log = Log()
    result = run("sanitizetraces", dict(base, TRAJ_ID_FIELD="trace"), feedback=log)
    record = json.loads(result["PROVENANCE"])
    assert record["budget_unit"] == "epsilon/m" and record["charged_per_row"] is None
    table, releases = balances(path)
    assert releases == 1 and sorted(table.index) == [1, 2]  # the trace ids are the persons
    ledger = {f["trace"]: f["spent"] for f in result["LEDGER"].getFeatures()}
    assert np.all(table["spent"] >= np.array([ledger[1], ledger[2]]) - 1e-12)  # at least what the ledger spent
    assert np.all((table["spent"] > 0) & (table["spent"] <= 0.05 * 1.01)) and np.all(table["reserved"] == 0)
    assert any(
        "each trace's person was charged the trace's worst case" in line
        and "charged to the budget store before the noise was drawn" in line
        for line in log.infos
    )


def test_synthesize_charges_dimensionless_epsilon(run, tmp_path):
    layer, _, _ = people_layer()
    params_ = {
        "INPUT": layer,
        "EPSILON": 1.0,
        "BOUNDS": "447000,451000,4415000,4419000 [EPSG:32650]",
        "SEED": 1,
        "BUDGET_STORE": str(tmp_path / "budgets.db"),
        "PERSON": "pid",
        "OUTPUT": "TEMPORARY_OUTPUT",
    }
    store_with_default(params_["BUDGET_STORE"], "epsilon/m", 1.0)  # a per-metre budget never pays for synthesize
    with pytest.raises(QgsProcessingException, match=f"{N} person\\(s\\) have no budget in 'epsilon'"):
        run("synthesize", params_)
    store_with_default(params_["BUDGET_STORE"], "epsilon", 10.0)
    log = Log()
    record = json.loads(run("synthesize", params_, feedback=log)["PROVENANCE"])
    assert record["budget_unit"] == "epsilon" and record["charged_per_row"] >= 1.0
    table = balances(params_["BUDGET_STORE"])[0]
    import geopriv

    with geopriv.BudgetStore(params_["BUDGET_STORE"]) as store:
        spent = store.balances(unit="epsilon").set_index("person")["spent"]
    assert len(spent) == N and np.allclose(spent, record["charged_per_row"], rtol=1e-12, atol=0)
    assert np.all(table["spent"] == 0)  # the per-metre budgets are untouched
    assert any(f"each row cost {record['charged_per_row']:.6g} epsilon (" in line for line in log.infos)


def test_diffuse_charges_the_source(run, tmp_path):
    """PERSON empty: the library's default person, the source's id (the id field); only the source pays."""
    rng = np.random.default_rng(5)
    xs, ys = 448_000 + rng.uniform(0, 2_000, N), 4_416_000 + rng.uniform(0, 2_000, N)
    people = memory_layer(
        [f"POINT({x} {y})" for x, y in zip(xs, ys)],
        crs=UTM,
        fields=(("person", "string"),),
        values=[[f"person-{i}"] for i in range(N)],
    )
    edges = memory_layer(
        [None] * (N - 1),
        crs=None,
        geometry="None",
        fields=(("a", "string"), ("b", "string")),
        values=[[f"person-{i}", f"person-{i + 1}"] for i in range(N - 1)],
    )
    path = str(tmp_path / "budgets.db")
    store_with_default(path, "epsilon/m", 1.0)
    base = {
        "INPUT": people,
        "SOURCE": "person-0",
        "ID_FIELD": "person",
        "EDGES": edges,
        "EDGE_FROM": "a",
        "EDGE_TO": "b",
        "EPSILON_TABLE": "1:0.01 3:0.001",
        "BOUNDS": "447000,451000,4415000,4419000 [EPSG:32650]",
        "SEED": 1,
        "BUDGET_STORE": path,
        "OUTPUT": "TEMPORARY_OUTPUT",
    }
    log = Log()
    record = json.loads(run("diffuse", base, feedback=log)["PROVENANCE"])
    assert record["budget_unit"] == "epsilon/m" and record["charged_per_row"] is None
    table, releases = balances(path)
    assert releases == 1 and list(table.index) == ["person-0"]  # the source alone
    assert table.loc["person-0", "spent"] >= record["coalition_epsilon_per_m"]
    assert any("the source's person was charged" in line for line in log.infos)
    # the same field as PERSON: the same person
    run("diffuse", dict(base, PERSON="person"))
    assert list(balances(path)[0].index) == ["person-0"] and balances(path)[1] == 2
    # no id field and no person field: the source would be charged under its feature id
    with pytest.raises(QgsProcessingException, match="choose the 'Person id field' or the 'Id field"):
        run("diffuse", dict(base, ID_FIELD=None, SOURCE=str(next(people.getFeatures()).id())))


def test_location_dependent_charges_the_mechanisms_bound(run, tmp_path):
    """A mechanism built from a 20 x 20 population raster: each row costs its verified bound, in epsilon/m."""
    from osgeo import gdal

    from qgis_helpers import data_path

    raster = str(tmp_path / "tokyo_20.tif")
    gdal.Translate(raster, data_path("tokyo_density_200.tif"), width=20, height=20, resampleAlg="average")
    x0, dx, _, y0, _, dy = gdal.Open(raster).GetGeoTransform()
    rng = np.random.default_rng(2)
    xs, ys = x0 + dx * 20 * rng.uniform(0.3, 0.7, N), y0 + dy * 20 * rng.uniform(0.3, 0.7, N)
    layer = memory_layer(
        [f"POINT({x} {y})" for x, y in zip(xs, ys)],
        crs="EPSG:30166",
        fields=(("pid", "string"),),
        values=[[f"person-{i}"] for i in range(N)],
    )
    path = str(tmp_path / "budgets.db")
    store_with_default(path, "epsilon/m", 1.0)
    log = Log()
    record = json.loads(
        run(
            "perturblocationdependent",
            {
                "INPUT": layer,
                "POPULATION": raster,
                "SEED": 1,
                "BUDGET_STORE": path,
                "PERSON": "pid",
                "OUTPUT": "TEMPORARY_OUTPUT",
            },
            feedback=log,
        )["PROVENANCE"]
    )
    assert record["budget_unit"] == "epsilon/m"
    assert record["charged_per_row"] >= record["epsilon_max_per_m"] * record["verified_max_ratio"]  # the verified loss
    table, releases = balances(path)
    assert releases == 1 and len(table) == N
    assert np.allclose(table["spent"], record["charged_per_row"], rtol=1e-12, atol=0)
    assert any("each row cost" in line and "before the noise was drawn" in line for line in log.infos)
