"""``geopriv aggregate``, ``geopriv heatmap`` and ``geopriv flows``: the count releases on the command line.

Data: the shipped Soho deaths (``geopriv/data/soho_cholera.gpkg`` layer ``deaths``, 324 points in
EPSG:3857, a unique integer ``Id`` per row) with the shipped public study area
(``geopriv/data/study_area.gpkg``, the box -15800 6711900 -14600 6713300: a 100 m grid over it
has 8 x 9 cells of 100 ground metres); for flows, the GeoLife sample (``geopriv/data/geolife_sample.gpkg``: 5
trajectories of 3 trackers) reprojected to UTM 50N in ``tmp_path``, with four 14 km boxes as
public regions.  Runs go through the real command line (:func:`geopriv.cli.main`, as in
tests/test_cli.py, and once a real process) on real files and real SQLite budget stores.

Noise: every assertion on released values holds for any draw (integer counts >= 0, equal arrays
for equal seeds); only the reproducibility assertions depend on the seed, and they compare two
runs of the same seed, so they fail only if a seeded run stops being deterministic.
"""

from __future__ import annotations

import inspect
import json
import math
import subprocess
import sys
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
import rasterio
from shapely.geometry import LineString, box

import geopriv
from tests.conftest import data_path
from geopriv.io import sidecar_path

from .test_cli import SOHO, one_line_error, run

DATA = Path(geopriv.__file__).parent / "data"
AREA = DATA / "study_area.gpkg"
BOUNDS = ["-15800", "6711900", "-14600", "6713300"]  # the study area's box
GEOLIFE = data_path("geolife_sample.gpkg")
COUNT_COMMANDS = {"aggregate": geopriv.aggregate, "heatmap": geopriv.heatmap, "flows": geopriv.flows}


def agg(out, *extra):
    return ["aggregate", SOHO, out, "--layer", "deaths", "--epsilon", "1", *extra]


def heat(out, *extra):
    return ["heatmap", SOHO, out, "--layer", "deaths", "--epsilon", "1", "--resolution", "100", *extra]


def gpkg_record(path, layer=None) -> dict:
    return json.loads(pyogrio.read_info(path, layer=layer)["layer_metadata"]["geopriv"])


def tif_record(path) -> dict:
    with rasterio.open(path) as ds:
        return json.loads(ds.tags()["GEOPRIV"])


def balances(store, **kwargs) -> pd.DataFrame:
    with geopriv.BudgetStore(store) as s:
        return s.balances(**kwargs)


def releases(store) -> pd.DataFrame:
    with geopriv.BudgetStore(store) as s:
        return s.releases()


@pytest.fixture
def tracks(tmp_path):
    """The GeoLife sample (5 trips, 3 trackers) in UTM 50N, and four public 14 km boxes holding every trip end."""
    points = tmp_path / "tracks.gpkg"
    pyogrio.read_dataframe(GEOLIFE).to_crs(32650).to_file(points, engine="pyogrio")
    regions = tmp_path / "regions.gpkg"
    boxes = [box(x, y, x + 14_000, y + 14_000) for x in (438_000, 452_000) for y in (4_410_000, 4_424_000)]
    gpd.GeoDataFrame({"name": ["SW", "NW", "SE", "NE"]}, geometry=boxes, crs=32650).to_crs(4326).to_file(
        regions, engine="pyogrio"
    )  # another CRS than the tracks': reprojected by the library
    return points, regions


def flows_args(tracks, out, *extra):
    points, regions = tracks
    return [
        "flows",
        points,
        out,
        "--epsilon",
        "1",
        "--regions",
        regions,
        "--region-id",
        "name",
        "--traj-id",
        "trajectory_id",
        "--time",
        "t",
        *extra,
    ]


@pytest.fixture
def store(tmp_path, capsys):
    """A SQLite store granting everyone 1.5 (dimensionless epsilon): one release at epsilon 1 fits, two do not."""
    path = tmp_path / "budgets.db"
    code, _, err = run(capsys, "budget", "grant", path, "--unit", "epsilon", "--total", "1.5")
    assert code == 0, err
    return path


# ---------------------------------------------------------------------------- aggregate
def test_aggregate_grid_writes_every_cell_with_provenance_and_a_seed_reproduces_it(capsys, tmp_path):
    out = tmp_path / "counts.gpkg"
    code, _, err = run(capsys, *agg(out, "--cells", "100", "--bounds", *BOUNDS, "--seed", "1"))
    assert code == 0, err
    assert "released the counts of 72 cell(s) (square grid of 100 m)" in err and "epsilon 1 " in err
    assert "seeded" in err and "at most 1 row(s) per person" in err
    cells = pyogrio.read_dataframe(out)
    assert len(cells) == 72 and cells.crs.to_epsg() == 3857
    assert list(cells.columns) == ["cell", "count", "expected_error", "geometry"]
    assert sorted(cells["cell"]) == list(range(72)) and (cells["count"] >= 0).all()
    assert cells["count"].dtype.kind == "i" and set(cells.geom_type) == {"Polygon"}
    rec = gpkg_record(out)
    assert rec["epsilon"] == 1.0 and rec["seeded"] is True and rec["n_cells"] == 72 and rec["grid_shape"] == [9, 8]
    assert rec["declared_bounds"] == list(map(float, BOUNDS)) and rec["user"] is None and rec["nonnegative"] is True
    assert "user level" in rec["definition"] and "Id" not in json.dumps(rec)

    again = tmp_path / "again.gpkg"
    code, _, err = run(capsys, *agg(again, "--cells", "100", "--bounds", *BOUNDS, "--seed", "1"))
    assert code == 0, err
    assert pyogrio.read_dataframe(again)["count"].tolist() == cells["count"].tolist()


def test_aggregate_polygon_cells_keep_their_attributes(capsys, tmp_path):
    out = tmp_path / "per_area.geojson"
    code, _, err = run(capsys, *agg(out, "--cells", AREA, "--cells-layer", "study_area", "--suppress", "2"))
    assert code == 0, err
    back = geopriv.io.read_vector(out)
    assert len(back) == 1 and back["name"].notna().all() and {"cell", "count", "expected_error"} <= set(back.columns)
    rec = json.loads(sidecar_path(out).read_text())  # formats without metadata: the sidecar
    assert rec["cells"] == "1 public polygons" and rec["suppress"] == 2 and rec["seeded"] is False


def test_aggregate_h3_region_levels_and_raw_counts(capsys, tmp_path):
    pytest.importorskip("h3")
    out = tmp_path / "h3.gpkg"
    code, _, err = run(
        capsys, *agg(out, "--cells", "h3:10", "--region", AREA, "--levels", "3", "--no-nonnegative", "--seed", "4")
    )
    assert code == 0, err
    back = pyogrio.read_dataframe(out)
    rec = gpkg_record(out)
    assert rec["h3_resolution"] == 10 and rec["region"] is True and rec["nonnegative"] is False
    assert len(back) == rec["n_cells"] > 10 and sum(e > 0 for e in rec["epsilon_per_level"]) == 3


def test_aggregate_charges_every_person_once(capsys, tmp_path, store):
    first = tmp_path / "first.gpkg"
    code, _, err = run(capsys, *agg(first, "--cells", "100", "--bounds", *BOUNDS, "--budget-store", store))
    one_line_error(err, "--budget-store charges every person once", "--user COLUMN")  # row numbers are not people
    code, _, err = run(
        capsys, *agg(first, "--cells", "100", "--bounds", *BOUNDS, "--budget-store", store, "--person", "Id")
    )
    assert code == 0, err
    assert "charged every person (column 'Id') 1 epsilon once" in err and f"sqlite:///{store}" in err
    table = balances(store, unit="epsilon")
    assert len(table) == 324 and np.allclose(table["spent"], 1.0)
    rec = gpkg_record(first)
    assert rec["budget_unit"] == "epsilon" and rec["budget_store"] == "sqlite" and rec["user"] == "Id"

    second = tmp_path / "second.gpkg"
    code, _, err = run(
        capsys, *agg(second, "--cells", "100", "--bounds", *BOUNDS, "--budget-store", store, "--user", "Id")
    )
    assert code == 2
    one_line_error(err, "324 person(s) would exceed their lifetime budget in 'epsilon'", "Nothing was drawn or charged")
    assert not second.exists() and np.allclose(balances(store, unit="epsilon")["spent"], 1.0)
    assert releases(store)["kind"].tolist() == ["aggregate"]


def test_a_person_with_several_rows_is_charged_once_and_counted_at_most_max_per_user(capsys, tmp_path, store):
    """--person is the --user column: the rows of a person charged once are bounded (81 persons of 4 rows)."""
    deaths = pyogrio.read_dataframe(SOHO, layer="deaths").assign(pid=lambda d: d["Id"] // 4)
    homes = tmp_path / "homes.gpkg"
    deaths.to_file(homes, engine="pyogrio")
    out = tmp_path / "counts.gpkg"
    args = ["aggregate", homes, out, "--epsilon", "1", "--cells", "100", "--bounds", *BOUNDS]
    code, _, err = run(capsys, *args, "--budget-store", store, "--person", "pid", "--user", "Id")
    one_line_error(err, "--person and --user name different columns")
    code, _, err = run(capsys, *args, "--budget-store", store, "--person", "pid", "--max-per-user", "2")
    assert code == 0, err
    assert "at most 2 row(s) per person (column 'pid')" in err
    table = balances(store, unit="epsilon")
    assert len(table) == 81 and np.allclose(table["spent"], 1.0)
    rec = gpkg_record(out)
    assert rec["user"] == "pid" and rec["max_per_user"] == 2


def test_one_person_written_in_several_forms_is_bounded_and_charged_once(capsys, tmp_path, store):
    """Issue 41.1 on the command line: text ids in NFC and NFD forms, with spaces, and decimal text are one person
    each (geopriv.identity), bounded by --max-per-user and charged once, as in Python and on dask."""
    import unicodedata

    deaths = pyogrio.read_dataframe(SOHO, layer="deaths")
    names = ["Renée", "Zoë", "José"]
    forms = [
        (lambda n: n, lambda n: unicodedata.normalize("NFD", n), lambda n: f" {n} ")[k % 3](names[k % 3])
        if k % 2
        else [" 7", "07", "7"][k % 3]
        for k in range(len(deaths))
    ]
    homes = tmp_path / "homes.gpkg"
    deaths.assign(pid=forms).to_file(homes, engine="pyogrio")
    out = tmp_path / "counts.gpkg"
    args = ["aggregate", homes, out, "--epsilon", "1e6", "--cells", "100", "--bounds", *BOUNDS]
    assert run(capsys, "budget", "grant", store, "--unit", "epsilon", "--total", "2e6")[0] == 0  # exact counts
    code, _, err = run(capsys, *args, "--budget-store", store, "--user", "pid", "--max-per-user", "1")
    assert code == 0, err
    table = balances(store, unit="epsilon")
    assert sorted(map(str, table["person"])) == sorted(["7", *names])  # 4 people, each charged once
    assert np.allclose(table["spent"], 1e6)
    assert gpd.read_file(out)["count"].sum() == 4  # one row kept per person


def test_aggregate_refusals_write_nothing(capsys, tmp_path):
    out = tmp_path / "counts.gpkg"
    # points outside the declared area: named by row, never located
    code, _, err = run(capsys, *agg(out, "--cells", "100", "--bounds", "-15500", *BOUNDS[1:]))
    assert code == 2
    line = one_line_error(err, "15 row(s) lie outside the declared study area", "labels 13, 22, 41", "--bounds")
    assert "bounds=" not in line and "155" not in line.split("labels")[1].split("(")[0]
    # a grid needs a declared area
    code, _, err = run(capsys, *agg(out, "--cells", "100"))
    assert code == 2
    one_line_error(err, "needs a declared public area", "--bounds XMIN YMIN XMAX YMAX", "--region")
    # polygons are the area; a layer chooses polygons only; a mistyped file
    code, _, err = run(capsys, *agg(out, "--cells", AREA, "--bounds", *BOUNDS))
    one_line_error(err, "do not also give --bounds or --region")
    code, _, err = run(capsys, *agg(out, "--cells", "h3:9", "--cells-layer", "x", "--bounds", *BOUNDS))
    one_line_error(err, "--cells-layer")
    code, _, err = run(capsys, *agg(out, "--cells", tmp_path / "districts.gpkg"))
    one_line_error(err, "cells file", "does not exist")
    code, _, err = run(capsys, *agg(out, "--cells", "100", "--bounds", *BOUNDS, "--max-per-user", "3"))
    one_line_error(err, "--user <column of person ids>")
    code, _, err = run(capsys, *agg(out, "--cells", "100", "--bounds", *BOUNDS, "--user", "pid"))
    one_line_error(err, "--user 'pid'", "'Id', 'Count'")
    assert code == 2 and not out.exists() and list(tmp_path.iterdir()) == []


def test_an_existing_output_needs_overwrite(capsys, tmp_path):
    out = tmp_path / "counts.gpkg"
    assert run(capsys, *agg(out, "--cells", "100", "--bounds", *BOUNDS, "--seed", "1"))[0] == 0
    before = out.read_bytes()
    code, _, err = run(capsys, *agg(out, "--cells", "200", "--bounds", *BOUNDS))
    assert code == 2
    one_line_error(err, "already has a layer 'counts'", "--overwrite")
    assert out.read_bytes() == before
    code, _, err = run(capsys, *agg(out, "--cells", "200", "--bounds", *BOUNDS, "--overwrite"))
    assert code == 0, err
    assert len(pyogrio.read_dataframe(out)) == 20  # 4 x 5 cells of 200 ground metres (about 322 Web Mercator units)
    code, _, err = run(
        capsys, *agg(SOHO, "--cells", "200", "--bounds", *BOUNDS, "--out-layer", "deaths", "--overwrite")
    )
    assert code == 2
    one_line_error(err, "is the input file")  # never over the input, even with --overwrite


# ---------------------------------------------------------------------------- heatmap
def test_heatmap_writes_a_two_band_geotiff_with_provenance(capsys, tmp_path):
    out = tmp_path / "heat.tif"
    code, _, err = run(capsys, *heat(out, "--bounds", *BOUNDS, "--seed", "2"))
    assert code == 0, err
    assert "released a 8 x 9 heatmap" in err and "band 1: count" in err and "seeded" in err
    with rasterio.open(out) as ds:
        assert (ds.count, ds.height, ds.width) == (2, 9, 8) and ds.crs.to_epsg() == 3857
        # 100 ground metres are about 160.8 Web Mercator units at Soho's latitude
        assert ds.dtypes[0] == "int32" and ds.transform.a == pytest.approx(100 / np.cos(np.radians(51.513)), rel=0.003)
        assert ds.transform.c == -15800 and ds.bounds.bottom == pytest.approx(6711900)  # anchored on the area's corner
        counts = ds.read(1)
    assert (counts >= 0).all()
    rec = tif_record(out)
    assert rec["values"] == "count" and rec["seeded"] is True and rec["n_cells"] == 72 and rec["epsilon"] == 1.0

    again = tmp_path / "again.tif"
    assert run(capsys, *heat(again, "--bounds", *BOUNDS, "--seed", "2"))[0] == 0
    with rasterio.open(again) as ds:
        assert np.array_equal(ds.read(1), counts)

    code, _, err = run(capsys, *heat(out, "--bounds", *BOUNDS))  # exists
    assert code == 2
    one_line_error(err, "heat.tif exists", "--overwrite")
    assert tif_record(out)["seeded"] is True
    code, _, err = run(capsys, *heat(out, "--region", AREA, "--values", "density", "--overwrite"))
    assert code == 0, err
    with rasterio.open(out) as ds:
        assert ds.dtypes[0] == "float32" and "per km" in ds.descriptions[0]
    assert tif_record(out)["values"] == "density" and tif_record(out)["seeded"] is False


def test_heatmap_refusals(capsys, tmp_path):
    code, _, err = run(capsys, *heat(tmp_path / "heat.gpkg", "--bounds", *BOUNDS))
    one_line_error(err, "heatmap output", ".tif")
    code, _, err = run(capsys, *heat(tmp_path / "heat.tif"))
    one_line_error(err, "needs a declared public area", "--bounds")
    code, _, err = run(capsys, *heat(tmp_path / "heat.tif", "--bounds", "-15500", *BOUNDS[1:]))
    one_line_error(err, "lie outside the declared study area", "labels 13, 22")
    code, _, err = run(capsys, *heat(tmp_path / "heat.tif", "--bounds", *BOUNDS, "--values", "sum"))
    assert code == 2 and "invalid choice" in err
    assert list(tmp_path.iterdir()) == []


def test_heatmap_charges_once_in_a_real_process(tmp_path, store):
    def geopriv_heatmap(out):
        args = heat(out, "--bounds", *BOUNDS, "--budget-store", store, "--person", "Id")
        return subprocess.run(
            [sys.executable, "-m", "geopriv.cli", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    done = geopriv_heatmap(tmp_path / "heat.tif")
    assert done.returncode == 0, done.stderr
    assert "charged every person (column 'Id') 1 epsilon once" in done.stderr and (tmp_path / "heat.tif").exists()
    assert np.allclose(balances(store, unit="epsilon")["spent"], 1.0) and len(balances(store)) == 324
    again = geopriv_heatmap(tmp_path / "again.tif")
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "would exceed their lifetime budget" in again.stderr and not (tmp_path / "again.tif").exists()


# ---------------------------------------------------------------------------- flows
def test_flows_from_trajectory_points(capsys, tmp_path, tracks):
    out = tmp_path / "od.gpkg"
    code, _, err = run(capsys, *flows_args(tracks, out, "--user", "tracker", "--max-per-user", "2", "--seed", "3"))
    assert code == 0, err
    assert "released the trip counts of 16 origin-destination pairs of 4 regions" in err
    assert "at most 2 trip(s) per person (column 'tracker')" in err
    od = pyogrio.read_dataframe(out)
    assert len(od) == 16 and set(od.geom_type) == {"LineString"} and od.crs.to_epsg() == 32650
    assert list(od.columns) == ["origin", "destination", "count", "expected_error", "geometry"]
    names = ["SW", "NW", "SE", "NE"]
    assert set(zip(od["origin"], od["destination"])) == {(a, b) for a in names for b in names}
    assert (od["count"] >= 0).all()
    rec = gpkg_record(out)
    assert rec["traj_id"] == "trajectory_id" and rec["time"] == "t" and rec["user"] == "tracker"
    assert rec["regions"] == 4 and rec["max_per_user"] == 2 and rec["seeded"] is True and rec["outside"] == "refuse"
    again = tmp_path / "again.gpkg"
    assert run(capsys, *flows_args(tracks, again, "--user", "tracker", "--max-per-user", "2", "--seed", "3"))[0] == 0
    assert pyogrio.read_dataframe(again)["count"].tolist() == od["count"].tolist()


def test_flows_from_one_line_per_trip(capsys, tmp_path, tracks):
    points = pyogrio.read_dataframe(tracks[0]).sort_values("t", kind="stable")
    trips = points.groupby("trajectory_id").agg(
        tracker=("tracker", "first"), geometry=("geometry", lambda g: LineString(list(g)))
    )
    lines = tmp_path / "trips.fgb"
    gpd.GeoDataFrame(trips.reset_index(), geometry="geometry", crs=32650).to_file(lines, engine="pyogrio")
    out = tmp_path / "od.geojson"
    code, _, err = run(capsys, "flows", lines, out, "--epsilon", "ln3", "--regions", tracks[1])
    assert code == 0, err
    od = geopriv.io.read_vector(out)
    assert len(od) == 16 and sorted(set(od["origin"])) == [0, 1, 2, 3]  # the regions' row numbers
    rec = json.loads(sidecar_path(out).read_text())
    assert rec["epsilon"] == pytest.approx(math.log(3)) and rec["traj_id"] is None and "vertex" in rec["trip_rule"]


def test_flows_refusals_name_trips_and_write_nothing(capsys, tmp_path, tracks):
    small = tmp_path / "two.gpkg"  # trip 2 ends outside both
    gpd.GeoDataFrame(
        {"name": ["W", "E"]},
        geometry=[box(438_000, 4_410_000, 452_000, 4_438_000), box(452_000, 4_410_000, 463_000, 4_438_000)],
        crs=32650,
    ).to_file(small, engine="pyogrio")
    out = tmp_path / "od.gpkg"
    points = tracks[0]
    base = ["flows", points, out, "--epsilon", "1", "--regions", small]
    code, _, err = run(capsys, *base, "--traj-id", "trajectory_id", "--time", "t")
    assert code == 2
    line = one_line_error(err, "start or end outside every region", "labels 2.", "--outside drop")
    assert "outside=" not in line
    code, _, err = run(capsys, *base, "--traj-id", "trajectory_id")
    one_line_error(err, "--traj-id and --time go together")
    code, _, err = run(capsys, *base)
    one_line_error(err, "5908 row(s) of the input are not lines", "--traj-id COLUMN --time COLUMN")
    code, _, err = run(capsys, *base, "--traj-id", "trip", "--time", "t")
    one_line_error(err, "--traj-id 'trip'", "'trajectory_id'")
    code, _, err = run(capsys, *base, "--traj-id", "trajectory_id", "--time", "t", "--region-id", "nom")
    one_line_error(err, "--region-id 'nom'", "regions file", "'name'")
    assert not out.exists()
    code, _, err = run(capsys, *base, "--traj-id", "trajectory_id", "--time", "t", "--outside", "drop")
    assert code == 0, err
    assert len(pyogrio.read_dataframe(out)) == 4 and gpkg_record(out)["outside"] == "drop"


def test_flows_charge_each_tracker_once(capsys, tmp_path, tracks, store):
    out = tmp_path / "od.gpkg"
    code, _, err = run(capsys, *flows_args(tracks, out, "--budget-store", store))
    one_line_error(err, "--user COLUMN")
    code, _, err = run(capsys, *flows_args(tracks, out, "--budget-store", store, "--person", "tracker"))
    assert code == 0, err
    table = balances(store, unit="epsilon")
    assert sorted(table["person"]) == [0, 2, 19] and np.allclose(table["spent"], 1.0)  # tracker 2 has 3 trips
    assert releases(store)["kind"].tolist() == ["flows"]
    code, _, err = run(
        capsys, *flows_args(tracks, tmp_path / "again.gpkg", "--budget-store", store, "--user", "tracker")
    )
    assert code == 2
    one_line_error(err, "3 person(s) would exceed their lifetime budget", ": 0, 2, 19")
    assert not (tmp_path / "again.gpkg").exists()


# ---------------------------------------------------------------------------- help and names
@pytest.mark.parametrize("command", sorted(COUNT_COMMANDS))
def test_option_names_are_the_library_parameters(capsys, command):
    from geopriv.cli import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices[command]
    sub.format_help()  # builds the options
    params = set(inspect.signature(COUNT_COMMANDS[command]).parameters)
    own = {
        "--layer",
        "--crs",
        "--xy",
        "--out-layer",
        "--overwrite",
        "--seed",
        "--cells-layer",
        "--regions-layer",
        "--no-nonnegative",
        "--help",
    }
    for action in sub._actions:
        flag = next((f for f in action.option_strings if f.startswith("--")), None)
        if flag is not None and flag not in own:
            assert action.dest in params and flag == "--" + action.dest.replace("_", "-"), flag
    code, out, _ = run(capsys, command, "--help")
    flat = " ".join(out.split())
    assert code == 0 and "unit epsilon: dimensionless" in flat and "BEFORE any noise is drawn" in flat
    assert "dimensionless (total" in flat and f"geopriv {command} " in flat[flat.index("examples:") :]
