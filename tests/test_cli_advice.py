"""The command line speaks its own language (issue 31): its advice, its flags, its units.

* errors give the command line's fix only (no Python code): ``geopriv.exceptions.user_message(exc, "cli")``;
* the options that fix lacked: ``--shuffle`` (rows in a random order, from OS entropy), ``--drop COLUMN``,
  ``--xy X Y`` (a CSV of coordinates);
* a wrong ``--layer`` lists the layers; degrees declared as a metric CRS are refused as a CRS error;
* ``--epsilon`` says its unit, and a value that protects almost nothing is warned about;
* ``geopriv report`` refuses displacements of a synthetic set and compares distributions (``--wasserstein``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import geopandas as gpd
import numpy as np
import pyogrio
import pytest

import geopriv
from geopriv.cli import common, main

DATA = Path(geopriv.__file__).parent / "data"
SOHO = DATA / "soho_cholera.gpkg"
SOHO_BOUNDS = ["-15800", "6711900", "-14600", "6713300"]
LN4_200 = ["--level", "ln4", "--radius", "200"]
PYTHON_CODE = re.compile(r"gdf\.|\b[a-z_]+=[\[('<\w]|math\.log")


def run(capsys, *args):
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("geopriv: error: "), err
    assert not PYTHON_CODE.search(lines[0]), lines[0]  # never advice a command-line user cannot follow
    return lines[0]


@pytest.fixture(scope="module")
def deaths():
    return pyogrio.read_dataframe(SOHO, layer="deaths")


def write(gdf, path):
    gdf.to_file(path, engine="pyogrio")
    return path


def west_to_east(deaths):
    """The deaths listed from west to east (their order gives them away), renumbered."""
    return (
        deaths.iloc[np.argsort(deaths.geometry.x.to_numpy())]
        .reset_index(drop=True)
        .assign(Id=lambda d: np.random.default_rng(0).permutation(len(d)))
    )


def lonlat_csv(deaths, path, order=None):
    ll = deaths.geometry.to_crs(4326)
    table = deaths.drop(columns="geometry").assign(lon=ll.x.to_numpy(), lat=ll.y.to_numpy())
    if order is not None:
        table = table.iloc[order]
    table.to_csv(path, index=False)
    return path


# ---------------------------------------------------------------------------- the order check and --shuffle
def test_a_file_in_spatial_order_is_refused_with_the_shuffle_flag(capsys, tmp_path, deaths):
    ordered = write(west_to_east(deaths), tmp_path / "ordered.gpkg")
    code, _, err = run(capsys, "perturb", ordered, tmp_path / "out.gpkg", *LN4_200)
    line = error_line(err)
    assert code == 2 and "The row order gives the true locations away" in line
    assert "--shuffle" in line and "--keep '<row order>'" in line and "QGIS" not in line
    assert not (tmp_path / "out.gpkg").exists()


def test_shuffle_releases_the_rows_in_a_random_order(capsys, tmp_path, deaths, monkeypatch):
    ordered_frame = west_to_east(deaths)
    ordered = write(ordered_frame, tmp_path / "ordered.gpkg")
    monkeypatch.setattr(common, "_shuffle_generator", lambda: np.random.default_rng(7))  # a fixed seed: tests only
    code, _, err = run(
        capsys, "perturb", ordered, tmp_path / "out.gpkg", *LN4_200, "--shuffle", "--seed", 1, "--no-progress"
    )
    assert code == 0, err
    assert "rows in a random order" in err
    out = pyogrio.read_dataframe(tmp_path / "out.gpkg")
    assert len(out) == len(ordered_frame)
    ids = out["Id"].to_numpy()
    assert sorted(ids) == sorted(ordered_frame["Id"]) and not np.array_equal(ids, ordered_frame["Id"].to_numpy())
    np.testing.assert_array_equal(ids, ordered_frame["Id"].to_numpy()[np.random.default_rng(7).permutation(324)])
    record = pyogrio.read_info(tmp_path / "out.gpkg")["layer_metadata"]["geopriv"]
    assert json.loads(record)["row_order"] == "shuffled"  # that it was shuffled; never how
    assert "permutation" not in record
    # matching the rows by their order would compare the wrong rows: refused, with the ways out
    code, out_text, err = run(capsys, "report", ordered, tmp_path / "out.gpkg")
    assert code == 2 and out_text == "" and "--id" in error_line(err) and "--wasserstein" in err
    code, out_text, err = run(capsys, "report", ordered, tmp_path / "out.gpkg", "--id", "Id", "--json")
    assert code == 0, err
    assert 100 < json.loads(out_text)["mean_m"] < 600  # ln 4 within 200 m: 289 m on average


def test_the_shuffle_draws_fresh_entropy_and_not_the_seed(capsys, tmp_path, deaths):
    """Two runs with the same --seed list the rows in different orders: the order never follows a public seed."""
    ordered = write(west_to_east(deaths), tmp_path / "ordered.gpkg")
    orders = []
    for name in ("a.gpkg", "b.gpkg"):
        assert (
            run(capsys, "perturb", ordered, tmp_path / name, *LN4_200, "--shuffle", "--seed", 1, "--no-progress")[0]
            == 0
        )
        orders.append(pyogrio.read_dataframe(tmp_path / name)["Id"].to_numpy())
    assert not np.array_equal(*orders)  # 324! orders: equal by chance with probability ~1e-680


def test_shuffle_with_traces_needs_time_stamps(capsys, tmp_path, deaths):
    path = write(deaths.assign(user=deaths.index % 3), tmp_path / "q.gpkg")
    code, _, err = run(
        capsys,
        "sanitize-traces",
        path,
        tmp_path / "out.gpkg",
        "--traj-id",
        "user",
        "--time",
        "",
        *LN4_200,
        "--rate",
        "0.1",
        "--bounds",
        *SOHO_BOUNDS,
        "--shuffle",
    )
    assert code == 2 and "--shuffle" in error_line(err) and "--time" in err


# ---------------------------------------------------------------------------- --drop
def test_location_columns_are_refused_with_the_drop_flag_which_works(capsys, tmp_path, deaths):
    ll = deaths.geometry.to_crs(4326)
    path = write(deaths.assign(lon=ll.x.to_numpy(), lat=ll.y.to_numpy()), tmp_path / "with_lonlat.gpkg")
    code, _, err = run(capsys, "perturb", path, tmp_path / "out.gpkg", *LN4_200)
    line = error_line(err)
    assert code == 2 and "--drop lon --drop lat" in line and "--keep lon --keep lat" in line
    code, _, err = run(
        capsys, "perturb", path, tmp_path / "out.gpkg", *LN4_200, "--drop", "lon", "--drop", "lat", "--no-progress"
    )
    assert code == 0, err
    assert "without column(s) lon, lat" in err
    out = pyogrio.read_dataframe(tmp_path / "out.gpkg")
    assert list(out.columns) == ["Id", "Count", "geometry"]


def test_drop_names_the_columns_there_are(capsys, tmp_path, deaths):
    path = write(deaths, tmp_path / "homes.gpkg")
    code, _, err = run(capsys, "perturb", path, tmp_path / "out.gpkg", *LN4_200, "--drop", "nope")
    assert code == 2 and "'Id', 'Count'" in error_line(err)
    traces = write(deaths.assign(user=deaths.index % 3, t=deaths.index * 60.0), tmp_path / "q.gpkg")
    code, _, err = run(
        capsys,
        "sanitize-traces",
        traces,
        tmp_path / "out.gpkg",
        "--traj-id",
        "user",
        "--time",
        "t",
        *LN4_200,
        "--rate",
        "0.1",
        "--drop",
        "t",
    )
    assert code == 2 and "--time column" in error_line(err)


# ---------------------------------------------------------------------------- --xy, --layer, --crs
def test_a_csv_of_longitude_latitude_is_read_with_xy(capsys, tmp_path, deaths):
    csv = lonlat_csv(deaths, tmp_path / "deaths.csv")
    code, _, err = run(capsys, "perturb", csv, tmp_path / "out.gpkg", *LN4_200, "--crs", "EPSG:4326")
    assert code == 2 and "--xy X_COLUMN Y_COLUMN" in error_line(err)  # no WKT column: says how to read x/y
    code, _, err = run(
        capsys,
        "perturb",
        csv,
        tmp_path / "out.gpkg",
        *LN4_200,
        "--xy",
        "lon",
        "lat",
        "--crs",
        "EPSG:4326",
        "--no-progress",
        "--seed",
        1,
    )
    assert code == 0, err
    out = pyogrio.read_dataframe(tmp_path / "out.gpkg")
    assert list(out.columns) == ["Id", "Count", "geometry"]  # the coordinate columns are not released
    assert out.crs.to_epsg() == 4326 and len(out) == len(deaths)
    code, _, err = run(
        capsys, "perturb", csv, tmp_path / "out2.gpkg", *LN4_200, "--xy", "x", "lat", "--crs", "EPSG:4326"
    )
    line = error_line(err)
    assert code == 2 and "no column 'x'" in line and "'lon'" in line and "--xy" in line
    code, out_text, err = run(
        capsys, "report", csv, tmp_path / "out.gpkg", "--xy", "lon", "lat", "--crs", "EPSG:4326", "--json"
    )
    assert code == 0, err
    assert 100 < json.loads(out_text)["mean_m"] < 600


def test_cells_that_are_not_numbers_are_refused_by_row(capsys, tmp_path, deaths):
    csv = lonlat_csv(deaths, tmp_path / "deaths.csv")
    text = csv.read_text().splitlines()
    text[4] = ",".join(text[4].split(",")[:-1] + ["n/a"])  # row 3 (from 0) has no latitude
    csv.write_text("\n".join(text) + "\n")
    code, _, err = run(
        capsys, "perturb", csv, tmp_path / "out.gpkg", *LN4_200, "--xy", "lon", "lat", "--crs", "EPSG:4326"
    )
    line = error_line(err)
    assert code == 2 and "labels 3." in line and "row numbers, from 0" in line


def test_a_wrong_layer_lists_the_layers(capsys, tmp_path):
    code, _, err = run(capsys, "perturb", SOHO, tmp_path / "out.gpkg", *LN4_200, "--layer", "death")
    line = error_line(err)
    assert code == 2 and "no layer 'death'" in line and "'deaths', 'pumps'" in line and "--layer" in line
    code, _, err = run(capsys, "perturb", SOHO, tmp_path / "out.gpkg", *LN4_200)
    assert code == 2 and "'deaths', 'pumps'" in error_line(err) and "layer=" not in err


def test_degrees_declared_as_web_mercator_are_a_crs_error_even_with_keep(capsys, tmp_path, deaths):
    """The user study's case: lon/lat given --crs EPSG:3857. It was blamed on the lon/lat columns, and with --keep
    the data were released destroyed; now the CRS is refused first, naming the declared CRS and no coordinate."""
    csv = lonlat_csv(deaths, tmp_path / "deaths.csv")
    ll = deaths.geometry.to_crs(4326)
    for extra in ([], ["--keep", "lon"]):
        code, _, err = run(
            capsys, "perturb", csv, tmp_path / "out.gpkg", *LN4_200, "--xy", "lon", "lat", "--crs", "EPSG:3857", *extra
        )
        line = error_line(err)
        assert code == 2 and "Pseudo-Mercator" in line and "--crs EPSG:4326" in line
        assert "attribute column" not in line
        assert not any(f"{v:.3f}" in line for v in np.concatenate([ll.x, ll.y]))
        assert not (tmp_path / "out.gpkg").exists()


# ---------------------------------------------------------------------------- units and warnings
def test_epsilon_help_says_its_unit(capsys):
    for command, unit in (
        ("perturb", "per ground"),
        ("sanitize-traces", "per ground"),
        ("synthesize", "dimensionless (total"),
    ):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0
        text = " ".join(out.split())
        options = text[: text.index("examples:")]
        epsilon = options[options.rindex("--epsilon ") :]  # its help, after the usage line
        assert unit in epsilon[:200], (command, epsilon[:200])
    code, out, _ = run(capsys, "perturb", "--help")
    examples = out[out.index("examples:") :]
    assert "--level ln4 --radius 200" in examples and "--epsilon " not in examples.replace("--epsilon ln4/200 per", "")


def test_an_epsilon_that_protects_nothing_is_warned_about(capsys, tmp_path, deaths):
    homes = write(deaths, tmp_path / "homes.gpkg")
    code, _, err = run(capsys, "perturb", homes, tmp_path / "a.gpkg", "--epsilon", "200", "--no-progress")
    assert code == 0, err
    warning = [line for line in err.splitlines() if line.startswith("geopriv: warning: ")]
    assert len(warning) == 1 and "almost no protection" in warning[0] and "0.01 m on average" in warning[0]
    assert "--level ln4 --radius 200" in warning[0] and not PYTHON_CODE.search(warning[0])
    code, _, err = run(capsys, "perturb", homes, tmp_path / "b.gpkg", "--epsilon", "ln4", "--no-progress")
    assert code == 0 and "1.44 m on average" in err
    code, _, err = run(capsys, "perturb", homes, tmp_path / "c.gpkg", *LN4_200, "--no-progress")
    assert code == 0 and "warning" not in err, err
    code, _, err = run(
        capsys, "perturb", homes, tmp_path / "d.gpkg", "--epsilon", "1e-4", "--bounds", *SOHO_BOUNDS, "--no-progress"
    )
    assert code == 0 and "almost no utility" in err and "diameter" in err


def test_a_run_that_fails_prints_its_error_only(capsys, tmp_path, deaths):
    """Warnings are printed once the command succeeded: bad input stays one line."""
    ordered = write(west_to_east(deaths), tmp_path / "ordered.gpkg")
    code, _, err = run(capsys, "perturb", ordered, tmp_path / "out.gpkg", "--epsilon", "200")
    assert code == 2 and "warning" not in err
    error_line(err)


# ---------------------------------------------------------------------------- report on a synthetic set
def test_report_refuses_displacements_of_a_synthetic_set(capsys, tmp_path):
    synthetic = tmp_path / "synthetic.gpkg"
    code, _, err = run(
        capsys,
        "synthesize",
        SOHO,
        synthetic,
        "--layer",
        "deaths",
        "--epsilon",
        "2",
        "--bounds",
        *SOHO_BOUNDS,
        "--no-progress",
        "--seed",
        1,
    )
    assert code == 0, err
    code, out, err = run(capsys, "report", SOHO, synthetic, "--layer", "deaths")
    line = error_line(err)
    assert code == 2 and out == "" and "synthetic" in line and "nobody's" in line and "--wasserstein" in line
    code, out, err = run(capsys, "report", SOHO, synthetic, "--layer", "deaths", "--wasserstein", "--json")
    assert code == 0, err
    values = json.loads(out)
    assert values["n_true"] == values["n_released"] == 324 and 0 < values["wasserstein_m"] < 200
    code, out, err = run(capsys, "report", SOHO, synthetic, "--layer", "deaths", "--wasserstein")
    assert code == 0 and "wasserstein_m" in out and "ground metres" in out
    code, _, err = run(capsys, "report", SOHO, synthetic, "--layer", "deaths", "--wasserstein", "--quantile", "0.5")
    assert code == 2 and "--wasserstein" in error_line(err)


def test_the_library_refuses_displacements_of_a_synthetic_set(deaths):
    from geopriv.exceptions import GeoprivError, user_message

    synthetic = geopriv.synthesize(deaths, 2.0, bounds=tuple(float(v) for v in SOHO_BOUNDS), rng=1)
    with pytest.raises(GeoprivError, match="nobody's") as info:
        geopriv.utility_report(deaths, synthetic)
    assert "geopriv.wasserstein(true, released)" in str(info.value)
    assert "--wasserstein" in user_message(info.value, "cli")
    assert geopriv.wasserstein(deaths, synthetic) > 0  # the comparison that means something


def test_read_vector_takes_xy_and_lists_layers(tmp_path, deaths):
    from geopriv.exceptions import InputError
    from geopriv.io import read_vector

    csv = lonlat_csv(deaths, tmp_path / "deaths.csv")
    gdf = read_vector(csv, xy=("lon", "lat"), crs="EPSG:4326")
    assert isinstance(gdf, gpd.GeoDataFrame) and list(gdf.columns) == ["Id", "Count", "geometry"]
    ll = deaths.geometry.to_crs(4326)
    np.testing.assert_allclose(gdf.geometry.x, ll.x)
    with pytest.raises(InputError, match=r"has no layer 'x'; its layers are: 'deaths', 'pumps'") as info:
        read_vector(SOHO, "x")
    assert info.value.layers == ["deaths", "pumps"] and "layer=" in str(info.value)


def test_diffuse_ids_in_spatial_order_are_refused_with_the_id_field_flag(capsys, tmp_path, deaths):
    """The recipients' ids are published in their order: row numbers of a file listed west to east give the people
    away. The fix is ids not assigned in spatial order (--id-field), not a shuffle (the network names people by id)."""
    people = write(west_to_east(deaths), tmp_path / "people.gpkg")
    edges = tmp_path / "friends.csv"
    edges.write_text("a,b\n" + "".join(f"{i},{i + 1}\n" for i in range(323)))
    common = ["--edges", edges, "--epsilon-table", "1:ln4/50", "4:ln4/2000", "--bounds", *SOHO_BOUNDS]
    code, _, err = run(capsys, "diffuse", people, tmp_path / "a.gpkg", "--source", 3, *common)
    line = error_line(err)
    assert code == 2 and "recipients' labels" in line and "--id-field" in line and "--shuffle" not in line
    ids = pyogrio.read_dataframe(people)["Id"].to_numpy()  # a random permutation: not in spatial order
    edges.write_text("a,b\n" + "".join(f"{ids[i]},{ids[i + 1]}\n" for i in range(323)))
    code, _, err = run(
        capsys,
        "diffuse",
        people,
        tmp_path / "a.gpkg",
        "--source",
        int(ids[3]),
        "--id-field",
        "Id",
        *common,
        "--seed",
        1,
    )
    assert code == 0, err
    code, _, err = run(
        capsys,
        "diffuse",
        people,
        tmp_path / "b.gpkg",
        "--source",
        int(ids[3]),
        "--id-field",
        "Id",
        "--edges",
        edges,
        "--epsilon-table",
        "1:200",
        "4:100",
        "--bounds",
        *SOHO_BOUNDS,
        "--seed",
        1,
    )
    assert code == 0 and "almost no protection" in err and "--epsilon-table" in err and "--level" not in err
