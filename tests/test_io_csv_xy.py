"""A CSV in, a CSV out (issue 44.5): points read from two columns (``--xy X Y``, ``read_vector(xy=)``) are
written to a CSV output back into those two columns, in their place, with no ``WKT`` column.

Each command runs twice with the same ``--seed`` (the same release): once to a GeoPackage, whose binary
doubles are the released points exactly, and once to a CSV.  The CSV read back with the same ``--xy``
must give those points bit for bit (the lattice's values: none lost), and every coordinate cell must be
the shortest text of its float (``repr``: no digit invented).  Before the fix the CSV had a ``WKT`` column
first and no x/y columns, written with 15 significant digits (a longitude such as -0.1332937908559586 came
back as -0.133293790855959, off the lattice).

Data: the shipped Soho deaths (``geopriv/data/soho_cholera.gpkg``, EPSG:3857), as longitude/latitude and as
Web Mercator x/y tables; synthetic walkers in UTM 50N (``tests/test_cli.synthetic_fixes``) for traces.
The CLI runs in this process (``geopriv.cli.main``).
"""

from __future__ import annotations

import csv

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
from shapely.geometry import box

from geopriv import io
from geopriv.exceptions import OutputError

from .test_cli import LN4_200, SOHO, run, synthetic_fixes

BOUNDS = ("-15800", "6711900", "-14600", "6713300")  # round numbers around Soho (EPSG:3857)


@pytest.fixture(scope="module")
def deaths():
    return pyogrio.read_dataframe(SOHO, layer="deaths")


def lonlat_table(deaths, path):
    """The deaths as a user's CSV: the coordinates in the middle of the columns, not at the end."""
    ll = deaths.geometry.to_crs(4326)
    table = pd.DataFrame(
        {"Id": deaths["Id"], "lon": ll.x, "note": "x", "Count": deaths["Count"], "lat": ll.y, "street": "Broad St"}
    )
    table.to_csv(path, index=False)
    return path


def rows(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def xy_of(gdf):
    return np.column_stack([gdf.geometry.x.to_numpy(), gdf.geometry.y.to_numpy()])


def assert_exact_text(table, x, y):
    """Every coordinate cell is repr of its float: the lattice's value, no digit invented, none lost."""
    header, body = table[0], table[1:]
    for column in (x, y):
        cells = [r[header.index(column)] for r in body]
        assert cells and all(c == repr(float(c)) for c in cells), cells[:5]


def released_twice(capsys, tmp_path, args, name="out"):
    """The same seeded release to a GeoPackage and to a CSV: (the GeoPackage's points, the CSV's path)."""
    gpkg, out = tmp_path / f"{name}.gpkg", tmp_path / f"{name}.csv"
    for dest in (gpkg, out):
        code, _, err = run(capsys, args[0], args[1], dest, *args[2:])
        assert code == 0, err
    return pyogrio.read_dataframe(gpkg), out


# ---------------------------------------------------------------------------- perturb
def test_perturb_writes_the_released_lon_lat_back_into_their_columns(capsys, tmp_path, deaths):
    src = lonlat_table(deaths, tmp_path / "homes.csv")
    args = ["perturb", src, *LN4_200, "--xy", "lon", "lat", "--crs", "EPSG:4326", "--drop", "note"]
    released, out = released_twice(capsys, tmp_path, args + ["--seed", "7", "--no-progress"])
    table = rows(out)
    assert table[0] == ["Id", "lon", "Count", "lat", "street"]  # the input's columns, in place; no WKT
    assert len(table) == len(deaths) + 1
    assert_exact_text(table, "lon", "lat")
    back = io.read_vector(out, crs="EPSG:4326", xy=("lon", "lat"))  # what the CLI reads with --xy lon lat
    assert np.array_equal(xy_of(back), xy_of(released))  # bit for bit: the released points, on their lattice
    assert back["Id"].tolist() == released["Id"].tolist() and back["street"].eq("Broad St").all()
    true = pd.read_csv(src)
    assert not np.isin(back.geometry.x.to_numpy(), true["lon"].to_numpy()).any()  # the true ones are dropped
    record = io.read_provenance(out)  # provenance as before: the sidecar beside the CSV
    assert io.sidecar_path(out).is_file() and record["n"] == len(deaths) and record["input_crs"] == "EPSG:4326"


def test_perturb_of_a_csv_with_a_wkt_column_still_writes_wkt(capsys, tmp_path, deaths):
    """Without --xy the CSV output keeps its WKT column (today's behaviour), first."""
    src = tmp_path / "homes.csv"
    io.write_vector(deaths, src)
    code, _, err = run(capsys, "perturb", src, tmp_path / "out.csv", *LN4_200, "--crs", "EPSG:3857", "--seed", 1)
    assert code == 0, err
    assert rows(tmp_path / "out.csv")[0] == ["WKT", "Id", "Count"]


# ---------------------------------------------------------------------------- synthesize
def test_synthesize_writes_x_y_columns_only(capsys, tmp_path, deaths):
    src = tmp_path / "deaths.csv"
    pd.DataFrame({"x": deaths.geometry.x, "y": deaths.geometry.y, "Count": deaths["Count"]}).to_csv(src, index=False)
    args = ["synthesize", src, "--xy", "x", "y", "--crs", "EPSG:3857", "--epsilon", "1", "--bounds", *BOUNDS]
    released, out = released_twice(capsys, tmp_path, args + ["--seed", "3", "--no-progress"])
    table = rows(out)
    assert table[0] == ["x", "y"]  # synthetic points carry no attributes
    assert_exact_text(table, "x", "y")
    back = io.read_vector(out, crs="EPSG:3857", xy=("x", "y"))
    assert np.array_equal(xy_of(back), xy_of(released))
    assert io.read_provenance(out)["n"] == len(released)


# ---------------------------------------------------------------------------- sample-queries, sanitize-traces
def test_traces_from_a_csv_of_fixes_to_a_csv_of_released_queries(capsys, tmp_path):
    fixes = synthetic_fixes(n=40)
    src = tmp_path / "fixes.csv"
    pd.DataFrame(
        {"user": fixes["user"], "easting": fixes.geometry.x, "northing": fixes.geometry.y, "t": fixes["t"]}
    ).to_csv(src, index=False)
    xy = ["--xy", "easting", "northing", "--crs", "EPSG:32650"]
    queries = tmp_path / "queries.csv"
    code, _, err = run(
        capsys, "sample-queries", src, queries, *xy, "--traj-id", "user", "--time", "t", "-p", "0.5", "--seed", 1
    )
    assert code == 0, err
    table = rows(queries)
    assert table[0][:4] == ["user", "easting", "northing", "t"]  # the fixes' columns, then source_row
    assert_exact_text(table, "easting", "northing")
    picked = io.read_vector(queries, crs="EPSG:32650", xy=("easting", "northing"))
    assert np.array_equal(xy_of(picked), xy_of(fixes.iloc[picked["source_row"].to_numpy()]))  # true fixes, exact

    args = ["sanitize-traces", queries, *xy, "--traj-id", "user", "--time", "t", "--epsilon", "ln10/100"]
    released, out = released_twice(capsys, tmp_path, args + ["--rate", "0.1", "--seed", "2", "--no-progress"])
    table = rows(out)
    assert table[0][:4] == ["user", "easting", "northing", "t"] and "WKT" not in table[0]
    assert {"predicted", "status", "epsilon_spent"} <= set(table[0])
    assert_exact_text(table, "easting", "northing")
    back = io.read_vector(out, crs="EPSG:32650", xy=("easting", "northing"))
    assert len(back) == len(picked) and np.array_equal(xy_of(back), xy_of(released))
    assert io.read_provenance(out)["method"] == "predictive"


# ---------------------------------------------------------------------------- what keeps its WKT column
def test_counts_of_xy_points_are_cells_with_wkt(capsys, tmp_path, deaths):
    """aggregate reads --xy points but releases polygons: they keep the WKT column."""
    src = tmp_path / "deaths.csv"
    pd.DataFrame({"x": deaths.geometry.x, "y": deaths.geometry.y}).to_csv(src, index=False)
    out = tmp_path / "cells.csv"
    code, _, err = run(
        capsys, "aggregate", src, out, "--xy", "x", "y", "--crs", "EPSG:3857", "--cells", "200", "--bounds", *BOUNDS,
        "--epsilon", "1", "--seed", 1,
    )  # fmt: skip
    assert code == 0, err
    header = rows(out)[0]
    assert header[0] == "WKT" and "x" not in header and "y" not in header


def test_library_write_vector_follows_the_note_and_xy(tmp_path):
    points = gpd.GeoDataFrame(
        {"a": [1, 2], "b": ["u", "v"]}, geometry=gpd.points_from_xy([0.1 + 0.2, 448000.5], [1 / 3, 4416000.25])
    )
    points = points.set_crs(32650)[["a", "geometry", "b"]]
    out = io.write_vector(points, tmp_path / "plain.csv")
    assert rows(out)[0] == ["WKT", "a", "b"]  # no note, no xy=: WKT as always
    out = io.write_vector(points, tmp_path / "en.csv", xy=("e", "n"))  # asked for: at the geometry's place
    table = rows(out)
    assert table[0] == ["a", "e", "n", "b"] and table[1][1:3] == ["0.30000000000000004", "0.3333333333333333"]
    assert np.array_equal(xy_of(io.read_vector(out, crs=32650, xy=("e", "n"))), xy_of(points))

    src = tmp_path / "in.csv"
    pd.DataFrame({"n": [1.0, 2.0], "id": [7, 8], "e": [3.0, 4.0]}).to_csv(src, index=False)
    read = io.read_vector(src, crs=32650, xy=("e", "n"))
    assert read.attrs[io.XY_ATTR]["columns"] == ["n", "id", "e"]
    assert rows(io.write_vector(read, tmp_path / "back.csv"))[0] == ["n", "id", "e"]  # the order read
    assert rows(io.write_vector(read.to_crs(4326), tmp_path / "ll.csv"))[0] == ["WKT", "id"]  # not the CRS read in
    pq = pytest.importorskip("pyarrow.parquet")
    meta = pq.read_schema(io.write_vector(read, tmp_path / "back.parquet")).metadata or {}
    assert all(io.XY_ATTR.encode() not in v for v in meta.values())  # the note is not written into files
    assert io.XY_ATTR in read.attrs  # nor taken from the caller's frame

    polygons = gpd.GeoDataFrame(geometry=[box(0, 0, 1, 1)], crs=32650)
    with pytest.raises(OutputError, match="other than points"):
        io.write_vector(polygons, tmp_path / "poly.csv", xy=("x", "y"))
    with pytest.raises(OutputError, match="not a .csv file"):
        io.write_vector(points, tmp_path / "p.gpkg", xy=("x", "y"))
    with pytest.raises(OutputError, match="already has a column 'b'"):
        io.write_vector(points, tmp_path / "b.csv", xy=("x", "b"))
    assert not any((tmp_path / n).exists() for n in ("poly.csv", "p.gpkg", "b.csv"))


def test_table_xy_says_which_files_to_read_with_xy(tmp_path):
    src = tmp_path / "in.csv"
    pd.DataFrame({"e": [3.0], "n": [1.0]}).to_csv(src, index=False)
    assert io.table_xy(src, ("e", "n")) == ("e", "n")
    assert io.table_xy(src, ("e", "z")) is None and io.table_xy(src, None) is None
    read = io.read_vector(src, crs=32650, xy=("e", "n"))
    assert io.table_xy(io.write_vector(read, tmp_path / "xy.csv"), ("e", "n")) == ("e", "n")  # a release's CSV
    assert io.table_xy(io.write_vector(read.to_crs(4326), tmp_path / "ll.csv"), ("e", "n")) is None  # a WKT CSV
    assert io.table_xy(io.write_vector(read, tmp_path / "out.gpkg"), ("e", "n")) is None  # has a geometry
    assert io.table_xy(tmp_path / "missing.csv", ("e", "n")) is None


def test_report_reads_a_released_csv_with_the_same_xy(capsys, tmp_path, deaths):
    """``geopriv report true.csv released.csv --xy lon lat``: the released table is read from its x/y columns."""
    src = lonlat_table(deaths, tmp_path / "homes.csv")
    args = ["perturb", src, *LN4_200, "--xy", "lon", "lat", "--crs", "EPSG:4326", "--seed", "7", "--no-progress"]
    released, out = released_twice(capsys, tmp_path, args)
    code, text, err = run(capsys, "report", src, out, "--xy", "lon", "lat", "--crs", "EPSG:4326", "--id", "Id")
    assert code == 0, err
    code_gpkg, text_gpkg, err = run(
        capsys, "report", src, tmp_path / "out.gpkg", "--xy", "lon", "lat", "--crs", "EPSG:4326", "--id", "Id"
    )
    assert code_gpkg == 0, err
    assert text == text_gpkg  # the same statistics whether the release was written as CSV or GeoPackage
