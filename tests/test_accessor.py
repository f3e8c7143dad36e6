"""The ``.priv`` accessor: real signatures, identical to the functions they call, and the same results."""

from __future__ import annotations

import inspect
import math

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

import geopriv
from geopriv.accessor import PrivAccessor, PrivSeriesAccessor

EPS = math.log(4) / 200

#: accessor method -> the public function it calls (its first parameter is the accessor's object)
FUNCTIONS = {
    "perturb": geopriv.perturb,
    "sanitize_traces": geopriv.sanitize_traces,
    "trace_ledger": geopriv.trace_ledger,
    "displacement": geopriv.displacement,
    "utility_report": geopriv.utility_report,
    "synthesize": geopriv.synthesize,
    "diffuse_locations": geopriv.diffuse_locations,
    "aggregate": geopriv.aggregate,
    "heatmap": geopriv.heatmap,
    "flows": geopriv.flows,
}


def public_methods(cls):
    return sorted(name for name, member in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_"))


#: old method names kept for one release: they warn and call the new one
RENAMED = {"diffuse": "diffuse_locations", "ledger": "trace_ledger"}


def test_every_accessor_method_is_mapped_to_its_function():
    # a new method must be added to FUNCTIONS, and so gets the signature check below
    assert public_methods(PrivAccessor) == sorted([*FUNCTIONS, *RENAMED])
    assert public_methods(PrivSeriesAccessor) == sorted([*FUNCTIONS, *RENAMED])


def test_one_name_per_concept_methods_are_named_as_their_functions():
    assert all(name == function.__name__ for name, function in FUNCTIONS.items())


def test_old_names_warn_and_give_the_same_result():
    people = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy([400_000.0, 400_500.0, 401_000.0], [4_400_000.0] * 3),
        crs="EPSG:32650",
        index=["a", "b", "c"],
    )
    policy = lambda hops: math.log(4) / (100 * (1 + hops))  # noqa: E731
    bounds = (399_000, 4_399_000, 402_000, 4_401_000)
    new, _ = people.priv.diffuse_locations(policy, source="a", graph=[("a", "b"), ("b", "c")], bounds=bounds, rng=1)
    with pytest.warns(FutureWarning, match=r"\.priv\.diffuse_locations\(\)"):
        old, _ = people.priv.diffuse(policy, source="a", graph=[("a", "b"), ("b", "c")], bounds=bounds, rng=1)
    assert new.geometry.equals(old.geometry)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_accessor_signature_is_the_functions(name):
    """Same names, order, kinds (positional or keyword-only) and defaults: they cannot drift."""
    method = inspect.signature(getattr(PrivAccessor, name))
    function = inspect.signature(FUNCTIONS[name])
    (self_param, *method_params) = method.parameters.values()
    (data_param, *function_params) = function.parameters.values()
    assert self_param.name == "self" and data_param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD

    def describe(params):
        return [(p.name, p.kind, p.default) for p in params]

    assert describe(method_params) == describe(function_params)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in method_params)  # no **kwargs


def test_epsilon_is_the_only_positional_argument_everywhere():
    """One vocabulary: after the data, only ``epsilon`` may be given by position, in every release."""
    for function in (
        geopriv.perturb,
        geopriv.sanitize_traces,
        geopriv.synthesize,
        PrivAccessor.perturb,
        PrivAccessor.sanitize_traces,
        PrivAccessor.synthesize,
    ):
        params = list(inspect.signature(function).parameters.values())[1:]
        positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert positional == ["epsilon"], function
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    # the defaults are the library's objects, not copies typed again (geopriv.perturb is wrapped by
    # opens_budget_store: its signature is the function's own)
    assert PrivAccessor.perturb.__defaults__ == inspect.unwrap(geopriv.perturb).__defaults__ == (None,)
    assert (
        inspect.signature(PrivAccessor.perturb).parameters["epsilon"].default
        is inspect.signature(geopriv.perturb).parameters["epsilon"].default
    )
    assert (
        inspect.signature(PrivAccessor.perturb).parameters["max_distortion"].default
        is geopriv.frame.DEFAULT_MAX_DISTORTION
    )


@pytest.mark.parametrize("name", ["perturb", "sanitize_traces", "trace_ledger"])
def test_docstrings_point_to_the_function(name):
    doc = inspect.getdoc(getattr(PrivAccessor, name))
    assert "Parameters" in doc or name == "trace_ledger"
    assert "See Also" in doc and f"geopriv.{FUNCTIONS[name].__name__}" in doc


def same_geoms(a, b):
    """Row by row: both missing, or equal."""
    a, b = a.geometry, b.geometry
    return bool(((a.isna() & b.isna()) | a.geom_equals(b)).all())


def walks(n_traces=3, length=30, seed=0):
    rng = np.random.default_rng(seed)
    xy = np.cumsum(rng.normal(0, 20, (n_traces, length, 2)), axis=1).reshape(-1, 2) + [448_000.0, 4_416_000.0]
    return gpd.GeoDataFrame(
        {
            "user": np.repeat([f"u{i}" for i in range(n_traces)], length),
            "t": np.tile(np.arange(length) * 60.0, n_traces),
        },
        geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]),
        crs=32650,
    )


def test_perturb_through_the_accessor_is_the_function(utm_points):
    a = utm_points.priv.perturb(EPS, rng=5, grid=2)
    b = geopriv.perturb(utm_points, epsilon=EPS, rng=5, grid=2)
    assert a.geometry.geom_equals(b.geometry).all()
    s = utm_points.geometry.priv.perturb(EPS, rng=5, grid=2)  # a seed is bound to the parameters as given
    assert s.geom_equals(b.geometry).all()
    with pytest.raises(TypeError):  # keyword-only after epsilon, as in the function
        utm_points.priv.perturb(EPS, None)


def test_sanitize_traces_through_the_accessor_is_the_function():
    gdf = walks()
    seen = []
    a = gdf.priv.sanitize_traces(
        math.log(10) / 100,
        traj_id="user",
        time="t",
        rate=0.05,
        rng=2,
        progress=lambda done, total: seen.append((done, total)),
    )
    b = geopriv.sanitize_traces(gdf, epsilon=math.log(10) / 100, traj_id="user", time="t", rate=0.05, rng=2)
    pd.testing.assert_frame_equal(pd.DataFrame(a.drop(columns="geometry")), pd.DataFrame(b.drop(columns="geometry")))
    assert same_geoms(a, b) and a["status"].eq("exhausted").any()
    pd.testing.assert_frame_equal(a.priv.trace_ledger(), geopriv.trace_ledger(b))
    assert seen and seen[-1] == (len(gdf), len(gdf))
    # a GeoSeries is one trace in row order: traj_id and time are then not needed
    one = gdf.geometry.iloc[:30].priv.sanitize_traces(epsilon=0.05, rate=0.05, rng=1)
    assert len(one.priv.trace_ledger()) == 1


def test_traj_id_and_time_are_still_required_for_a_geodataframe():
    gdf = walks()
    with pytest.raises(TypeError, match="needs traj_id="):
        gdf.priv.sanitize_traces(epsilon=0.05, time="t", rate=0.05)
    with pytest.raises(TypeError, match="needs time="):
        geopriv.sanitize_traces(gdf, 0.05, traj_id="user", rate=0.05)
    out = gdf.priv.sanitize_traces(0.05, traj_id=None, time=None, rate=0.05, rng=1)  # explicitly one trace
    assert len(out.priv.trace_ledger()) == 1
