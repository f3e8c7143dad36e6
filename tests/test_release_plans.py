"""The plan contract (geopriv/release/base.py): every release kind is a frozen plan that executes.

Issue 42: ``plan_<kind>(crs, ...)`` fixes everything public, ``plan.run(data, store=, rng=)`` is
the release (the same one the public function makes), a dask frame goes to the lazy runner
registered under the plan's kind, the accessor and the dask forms take the public functions'
own signatures, and a plan builder's defaults are the public function's.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings

import geopandas as gpd
import pytest

import geopriv
from geopriv.exceptions import CRSError, GeometryError, ParameterError, ParameterTypeError
from geopriv.perturb import mechanism_for
from geopriv.release import plan_diffusion, plan_release, plan_synthetic, plan_traces
from geopriv.release.base import Executes, Plan
from geopriv.release.counts import plan_counts, plan_flows, plan_heatmap

from .test_release_golden import BEIJING_4326, SOHO_BOUNDS, deaths, network, queries

TRACES = dict(traj_id="trajectory_id", time="t", level=math.log(10), radius=100, rate=0.033, bounds=BEIJING_4326)


def _plans():
    d = deaths()
    people, edges = network()
    return {
        "points": plan_release(d.crs, mechanism_for(epsilon=0.01)),
        "traces": plan_traces(queries().crs, **TRACES),
        "synthetic": plan_synthetic(d.crs, geopriv.PrivateMeasure(1.0, dim=2), bounds=SOHO_BOUNDS),
        "counts": plan_counts(d.crs, 1.0, cells=100, bounds=SOHO_BOUNDS),
        "heatmap": plan_heatmap(d.crs, 1.0, resolution=100, bounds=SOHO_BOUNDS),
        "diffusion": plan_diffusion(people.crs, lambda h: 0.01, source="p0", graph=edges),
    }


def test_every_kind_is_a_frozen_plan_that_executes():
    for name, plan in _plans().items():
        assert isinstance(plan, Plan) and isinstance(plan, Executes), name
        assert dataclasses.is_dataclass(plan) and plan.__dataclass_params__.frozen, name
        with pytest.raises(dataclasses.FrozenInstanceError):
            plan.kind = "other"  # type: ignore[misc]
    kinds = {plan.kind for plan in _plans().values()}
    assert kinds == {"points", "traces", "synthetic", "counts", "diffusion"}


def test_a_plan_run_is_the_public_release():
    q = queries()
    by_plan = plan_traces(q.crs, **TRACES).run(q, rng=0)
    by_function = geopriv.sanitize_traces(q, **TRACES, rng=0)
    assert by_plan.geometry.equals(by_function.geometry)
    assert by_plan.attrs["geopriv"]["ledger"] == by_function.attrs["geopriv"]["ledger"]
    d = deaths()
    a = plan_counts(d.crs, 1.0, cells=100, bounds=SOHO_BOUNDS).run(d, rng=3)
    b = geopriv.aggregate(d, 1.0, cells=100, bounds=SOHO_BOUNDS, rng=3)
    assert a["count"].tolist() == b["count"].tolist()
    # negative control: another seed is another release
    c = geopriv.aggregate(d, 1.0, cells=100, bounds=SOHO_BOUNDS, rng=4)
    assert a["count"].tolist() != c["count"].tolist()


def test_plan_builders_take_the_public_functions_defaults():
    """A default typed twice drifts (plan_traces once had eta=None where sanitize_traces has 0.5)."""
    pairs = [
        (geopriv.sanitize_traces, plan_traces),
        (geopriv.aggregate, plan_counts),
        (geopriv.flows, plan_flows),
        (geopriv.diffuse_locations, plan_diffusion),
        (geopriv.synthesize, plan_synthetic),
        (geopriv.perturb, plan_release),
    ]
    for public, builder in pairs:
        ps, bs = inspect.signature(public).parameters, inspect.signature(builder).parameters
        # traj_id and time: the public function's "not given" (no_default) is resolved from the data's type
        # before the plan is built (a GeoDataFrame must name them; a GeoSeries is one trace in row order)
        skip = ("data", "crs", "epsilon", "mechanism", "traj_id", "time")
        shared = [n for n in ps if n in bs and n not in skip]
        assert shared, builder.__name__
        for name in shared:
            assert bs[name].default == ps[name].default, (builder.__name__, name)


def test_a_store_url_is_opened_for_the_run_and_closed(tmp_path):
    url = f"sqlite:///{tmp_path / 'budget.db'}"
    with geopriv.BudgetStore(url, create=True) as store:
        store.grant(10.0, unit="epsilon")
    d = deaths().rename_axis("death")
    plan = plan_counts(d.crs, 1.0, cells=100, bounds=SOHO_BOUNDS, charged=True)
    out = plan.run(d, store=url, rng=1)
    assert out.attrs["geopriv"]["budget_store"] == "sqlite"
    with geopriv.BudgetStore(url) as store:
        assert float(store.balances()["spent"].max()) == pytest.approx(1.0)


def test_the_data_speaks_first_when_a_point_plan_refuses_a_parameter():
    """Two faults: degrees labelled as UTM and bounds in degrees; the data's CRS label is the cause."""
    wrong = deaths().to_crs(4326).set_crs(32630, allow_override=True)
    with pytest.raises((GeometryError, CRSError)) as info:
        geopriv.perturb(wrong, epsilon=0.01, bounds=(-0.2, 51.5, -0.1, 51.6), rng=1)
    assert "set_crs" in str(info.value)


def test_a_count_plan_checks_its_row_free_parameters_before_the_data():
    no_crs = deaths().set_crs(None, allow_override=True)
    with pytest.raises(ParameterError, match="epsilon"):
        geopriv.aggregate(no_crs, 0, cells=100, bounds=SOHO_BOUNDS)
    # and the data before the checks that need its CRS: lines are refused before max_per_user=0
    lines = gpd.GeoDataFrame(geometry=gpd.GeoSeries.from_wkt(["LINESTRING (0 0, 1 1)"]), crs=32630)
    with pytest.raises(GeometryError):
        geopriv.aggregate(lines, 1.0, cells=100, bounds=(0, 0, 1000, 1000), max_per_user=0)


def test_accessor_warnings_point_at_the_callers_line():
    d = deaths()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d.priv.perturb(epsilon=10.0, rng=1)  # far more than any protection: a WeakProtectionWarning
    ours = [w for w in caught if w.category.__module__.startswith("geopriv")]
    assert ours and all(w.filename == __file__ for w in ours), [(w.category, w.filename) for w in ours]


def test_dask_forms_take_the_public_signature_and_refuse_memory_frames():
    pytest.importorskip("dask_geopandas")
    from geopriv.distributed.aggregate import aggregate_dask
    from geopriv.distributed.perturb import perturb_dask
    from geopriv.distributed.traces import sanitize_traces_dask

    for public, form in (
        (geopriv.perturb, perturb_dask),
        (geopriv.sanitize_traces, sanitize_traces_dask),
        (geopriv.aggregate, aggregate_dask),
    ):
        assert inspect.signature(form) == inspect.signature(public)
        assert "Lazy" in (form.__doc__ or "") or "dask" in (form.__doc__ or "")
    with pytest.raises(ParameterTypeError, match="geopriv.perturb"):
        perturb_dask(deaths(), epsilon=0.01)
