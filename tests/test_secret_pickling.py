"""A lazy release's secret root is pickled only to ship the graph to dask's workers, never by a plain dumps."""

from __future__ import annotations

import copy
import math
import pickle

import geopandas as gpd
import numpy as np
import pytest

from geopriv.exceptions import GeoprivError
from geopriv.keys import SecretPicklingError, SecretRoot, allow_secret_pickling

dask_geopandas = pytest.importorskip("dask_geopandas")
cloudpickle = pytest.importorskip("cloudpickle")

EPS = dict(level=math.log(4), radius=200)


@pytest.fixture(scope="module")
def released():
    rng = np.random.default_rng(5)
    n = 600
    gdf = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(448_000 + rng.uniform(0, 4_000, n), 4_416_000 + rng.uniform(0, 4_000, n)),
        crs=32650,
    ).rename_axis("pid")
    return dask_geopandas.from_geopandas(gdf, npartitions=3).priv.perturb(**EPS, rng=9)


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps, pickle._dumps], ids=["pickle", "cloudpickle", "py"])
def test_a_plain_pickle_of_a_lazy_release_or_its_root_is_refused(released, dumps):
    for secret in (released, SecretRoot.draw(3)):
        with pytest.raises(SecretPicklingError, match="secret root") as info:
            dumps(secret)
        assert isinstance(info.value, GeoprivError) and "compute()" in str(info.value)  # how to persist instead
        assert info.value.fix.kind == "persist"


def test_the_opt_in_pickles_and_replays_the_same_release(released):
    with allow_secret_pickling():
        back = pickle.loads(pickle.dumps(released))
    assert back.compute(scheduler="sync").geometry.equals(released.compute(scheduler="sync").geometry)
    with pytest.raises(SecretPicklingError):  # the block is over
        pickle.dumps(released)
    root = SecretRoot.draw(4)
    assert copy.copy(root) is root and copy.deepcopy(root) is root  # immutable: copies never pickle it


def test_the_opt_in_is_per_thread(released):
    from concurrent.futures import ThreadPoolExecutor

    with allow_secret_pickling(), ThreadPoolExecutor(1) as pool:
        with pytest.raises(SecretPicklingError):
            pool.submit(pickle.dumps, released).result()


def test_dask_still_ships_the_graph_to_worker_processes(released):
    ref = released.compute(scheduler="sync")
    out = released.compute(scheduler="processes", num_workers=2)  # dask cloudpickles the tasks itself
    assert out.geometry.equals(ref.geometry)


def test_dask_distributed_still_ships_the_graph(released):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        distributed.Client(cluster),
    ):
        out = released.compute()
    assert out.geometry.equals(released.compute(scheduler="sync").geometry)
