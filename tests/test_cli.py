"""The command line: every subcommand end to end on shipped data, one-line errors, safe outputs.

Data: ``geopriv/data`` (shipped with the package) and small synthetic layers written to
``tmp_path``; nothing outside the checkout is read.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
import rasterio
from rasterio.windows import Window
from shapely.geometry import Point

import geopriv
from geopriv import cli
from geopriv.cli import main
from geopriv.io import sidecar_path

DATA = Path(geopriv.__file__).parent / "data"
SOHO = DATA / "soho_cholera.gpkg"
TOKYO = DATA / "tokyo_density_200.tif"
COMMANDS = [
    "perturb",
    "privacy-map",
    "build-mechanism",
    "sanitize-traces",
    "sample-queries",
    "synthesize",
    "diffuse",
    "report",
    "demo",
    "aggregate",
    "heatmap",
    "flows",
]
LN4_200 = ["--level", "ln4", "--radius", "200"]


# ---------------------------------------------------------------------------- helpers and data
def run(capsys, *args):
    """main() in this process: (exit code, stdout, stderr)."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse (usage errors, --help)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, *needles: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("geopriv: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def deaths():
    return pyogrio.read_dataframe(SOHO, layer="deaths")


@pytest.fixture
def homes(tmp_path, deaths):
    """A single-layer copy of the Soho deaths (EPSG:3857), as a user's input file."""
    path = tmp_path / "homes.gpkg"
    deaths.to_file(path, engine="pyogrio")
    return path


def synthetic_fixes(n_users=3, n=60, seed=1):
    """GPS-like fixes every 30 s of slow walkers in UTM 50N (stand-in for GeoLife)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        t0 = pd.Timestamp("2009-01-01 08:00", tz="UTC") + pd.Timedelta(hours=u)
        xy = np.array([448_000.0 + 1000 * u, 4_416_000.0]) + np.cumsum(rng.normal(0, 5, (n, 2)), axis=0)
        rows += [dict(user=f"u{u}", t=t0 + pd.Timedelta(seconds=30 * k), x=x, y=y) for k, (x, y) in enumerate(xy)]
    df = pd.DataFrame(rows)
    return gpd.GeoDataFrame(df[["user", "t"]], geometry=gpd.points_from_xy(df.x, df.y), crs=32650)


@pytest.fixture
def fixes(tmp_path):
    path = tmp_path / "fixes.gpkg"
    synthetic_fixes().to_file(path, engine="pyogrio")
    return path


@pytest.fixture(scope="module")
def small_raster(tmp_path_factory):
    """16 x 16 cells of the shipped Tokyo density raster (fast to build a mechanism on)."""
    path = tmp_path_factory.mktemp("raster") / "density.tif"
    with rasterio.open(TOKYO) as ds:
        t = ds.transform  # the window's transform by hand (rasterio's multiplies Affines: deprecated in affine 3)
        transform = rasterio.Affine(t.a, t.b, t.c + 90 * t.a, t.d, t.e, t.f + 90 * t.e)
        profile = ds.profile | {"width": 16, "height": 16, "transform": transform, "blockysize": 16}
        values = ds.read(1, window=Window(90, 90, 16, 16))
    with rasterio.open(path, "w", **profile) as out:
        out.write(values, 1)
    return path


@pytest.fixture(scope="module")
def mechanism(small_raster):
    """build-mechanism end to end (about a second): the saved, verified mechanism."""
    out = small_raster.parent / "mech.npz"
    assert (
        main(
            ["build-mechanism", str(small_raster), str(out), "--epsilon-range", "ln4/3000", "ln4/600", "--no-progress"]
        )
        == 0
    )
    return out


@pytest.fixture
def lonlat_in_raster(tmp_path, small_raster):
    """40 points inside the small raster, in longitude/latitude."""
    pm = geopriv.PrivacyMap.from_population(small_raster, epsilon_range=(1e-3, 2e-3))
    b = pm.bounds
    rng = np.random.default_rng(0)
    x = rng.uniform(b[0] + 1000, b[2] - 1000, 40)
    y = rng.uniform(b[1] + 1000, b[3] - 1000, 40)
    gdf = gpd.GeoDataFrame({"name": [f"p{i}" for i in range(40)]}, geometry=gpd.points_from_xy(x, y), crs=pm.crs)
    path = tmp_path / "points.gpkg"
    gdf.to_crs(4326).to_file(path, engine="pyogrio")
    return path


# ---------------------------------------------------------------------------- help
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_a_worked_example(capsys, command):
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    examples = out[out.index("examples:") :]
    assert f"geopriv {command} " in examples or (command == "demo" and "geopriv demo" in examples)


def test_top_level_help_lists_every_command(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and all(c in out for c in COMMANDS) and "examples:" in out


def test_max_step_takes_powers_of_two_or_none(capsys):
    from geopriv.cli import build_parser
    from geopriv.cli.common import NONE

    parse = build_parser().parse_args
    assert parse(["build-mechanism", "in.tif", "out.npz", "--max-step", "8"]).max_step == 8
    assert parse(["build-mechanism", "in.tif", "out.npz", "--max-step", "none"]).max_step is NONE
    for bad in ("3", "0", "two"):
        with pytest.raises(SystemExit):
            parse(["build-mechanism", "in.tif", "out.npz", "--max-step", bad])
        assert "power of two" in capsys.readouterr().err


def test_help_shows_the_librarys_defaults(capsys):
    """Defaults are read from the signatures, never typed again in the CLI."""
    build = inspect.signature(geopriv.EikonalMechanism.build).parameters
    _, out, _ = run(capsys, "build-mechanism", "--help")
    flat = " ".join(out.split())
    assert f"(default: {build['margin'].default})" in flat and f"(default: {build['pad'].default:g})" in flat
    sq = inspect.signature(geopriv.sample_queries).parameters
    _, out, _ = run(capsys, "sample-queries", "--help")
    assert f"(default: {sq['max_gap'].default:g})" in " ".join(out.split())
    _, out, _ = run(capsys, "report", "--help")
    assert "--quantile" in out and "--delta" not in out  # the deprecated name still works, undocumented


def test_options_not_given_are_not_passed(monkeypatch, capsys, homes, tmp_path):
    """So the library's own defaults apply (no second copy of them in the CLI)."""
    seen = {}
    real = geopriv.perturb

    @functools.wraps(real)
    def recorder(data, **kwargs):
        seen.update(kwargs)
        return real(data, **kwargs)

    monkeypatch.setattr(geopriv, "perturb", recorder)
    code, _, err = run(capsys, "perturb", homes, tmp_path / "o.gpkg", *LN4_200, "--grid", "5")
    assert code == 0, err
    assert set(seen) == {"level", "radius", "grid", "progress"}
    assert seen["level"] == pytest.approx(math.log(4)) and seen["grid"] == 5


# ---------------------------------------------------------------------------- perturb
@pytest.mark.parametrize("ext", [".gpkg", ".geojson", ".fgb", ".shp", ".csv"])
def test_perturb_to_every_format(capsys, homes, tmp_path, ext, deaths):
    out = tmp_path / f"released{ext}"
    code, _, err = run(capsys, "perturb", homes, out, *LN4_200, "--seed", "1")
    assert code == 0, err
    assert "released 324 points" in err and "seeded" in err
    back = geopriv.io.read_vector(out, crs=3857 if ext == ".csv" else None)
    assert len(back) == 324 and back.crs.to_epsg() == 3857
    assert list(back["Count"]) == list(deaths["Count"])  # rows in order, attributes kept
    d = geopriv.displacement(deaths, back)
    assert 0.5 < d.mean() / (2 / (math.log(4) / 200)) < 1.5  # mean of planar Laplace: 2 / epsilon
    if ext == ".gpkg":
        record = json.loads(pyogrio.read_info(out)["layer_metadata"]["geopriv"])
    else:
        record = json.loads(sidecar_path(out).read_text())
    assert record["seeded"] is True and record["epsilon_per_m"] == pytest.approx(math.log(4) / 200)


def test_finding_overwrite_of_a_csv_writes_it_whole(capsys, homes, tmp_path):
    """Was: the old prev.csv deleted, then a header-only file, a traceback and exit 1."""
    prev = tmp_path / "prev.csv"
    prev.write_text("old,content\n")
    code, _, err = run(capsys, "perturb", homes, prev, *LN4_200, "--overwrite")
    assert code == 0 and "Traceback" not in err, err
    back = geopriv.io.read_vector(prev, crs=3857)
    assert len(back) == 324 and back.geometry.notna().all()


def test_finding_out_layer_into_a_multi_layer_geopackage(capsys, homes, tmp_path):
    """Was: --overwrite deleted the other layers; without it no new layer could be added."""
    project = tmp_path / "project.gpkg"
    shutil.copy(SOHO, project)  # layers deaths, pumps
    pumps = pyogrio.read_dataframe(project, layer="pumps")
    deaths = pyogrio.read_dataframe(project, layer="deaths")

    code, _, err = run(capsys, "perturb", homes, project, *LN4_200, "--out-layer", "homes_private")
    assert code == 0, err  # a new layer, no --overwrite needed
    assert sorted(pyogrio.list_layers(project)[:, 0]) == ["deaths", "homes_private", "pumps"]

    before = project.read_bytes()
    code, _, err = run(capsys, "perturb", homes, project, *LN4_200, "--out-layer", "homes_private")
    one_line_error(err, "already has a layer 'homes_private'", "--overwrite")
    assert code == 2 and project.read_bytes() == before

    code, _, err = run(capsys, "perturb", homes, project, *LN4_200, "--out-layer", "homes_private", "--overwrite")
    assert code == 0, err
    assert sorted(pyogrio.list_layers(project)[:, 0]) == ["deaths", "homes_private", "pumps"]
    pd.testing.assert_frame_equal(pyogrio.read_dataframe(project, layer="pumps"), pumps)  # untouched layers equal
    pd.testing.assert_frame_equal(pyogrio.read_dataframe(project, layer="deaths"), deaths)


@pytest.mark.parametrize("kind", ["hard", "symbolic", "same"])
def test_finding_output_linked_to_the_input_is_refused(capsys, homes, tmp_path, kind):
    """Was: a hard link passed the same-file check (path comparison) and the input was overwritten."""
    before = homes.read_bytes()
    out = tmp_path / "out.gpkg"
    if kind == "hard":
        os.link(homes, out)
    elif kind == "symbolic":
        os.symlink(homes, out)
    else:
        out = homes
    code, _, err = run(capsys, "perturb", homes, out, *LN4_200, "--overwrite")
    one_line_error(err, "is the input file")
    assert code == 2 and homes.read_bytes() == before


def test_finding_epsilon_with_level_is_refused_before_any_work(capsys, tmp_path):
    """Was: --epsilon silently won.  The input does not even exist: nothing was read."""
    missing = tmp_path / "not_read.gpkg"
    for extra in (
        ["--epsilon", "0.01", "--level", "ln4", "--radius", "200"],
        ["--epsilon", "0.01", "--radius", "200"],
        ["--mechanism", "m.npz", "--epsilon", "0.01"],
        ["--level", "ln4"],
    ):
        code, _, err = run(capsys, "perturb", missing, tmp_path / "o.gpkg", *extra)
        line = one_line_error(err)
        assert code == 2 and "does not exist" not in line, line
    assert list(tmp_path.iterdir()) == []


def test_finding_unknown_extension_is_refused(capsys, homes, tmp_path):
    """Was: out.xyz silently became an ESRI Shapefile directory."""
    before = set(tmp_path.iterdir())
    code, _, err = run(capsys, "perturb", homes, tmp_path / "out.xyz", *LN4_200)
    one_line_error(err, ".xyz", ".gpkg", ".geojson", ".fgb", ".shp", ".csv", ".parquet")
    assert code == 2 and set(tmp_path.iterdir()) == before


def test_perturb_options(capsys, homes, tmp_path, deaths):
    region = tmp_path / "region.geojson"
    b = deaths.total_bounds
    gpd.GeoDataFrame(
        geometry=[
            gpd.GeoSeries.from_xy([b[0]], [b[1]]).buffer(1).iloc[0].envelope.union(Point(b[0], b[1]).buffer(2000))
        ],
        crs=3857,
    ).to_file(region, engine="pyogrio")
    out = tmp_path / "o.gpkg"
    code, _, err = run(
        capsys,
        "perturb",
        homes,
        out,
        "--epsilon",
        "ln4/200",
        "--grid",
        "25",
        "--region",
        region,
        "--bounds",
        b[0] - 5000,
        b[1] - 5000,
        b[2] + 5000,
        b[3] + 5000,
        "--seed",
        "3",
    )
    assert code == 0, err
    record = json.loads(pyogrio.read_info(out)["layer_metadata"]["geopriv"])
    assert record["grid_m"] == 25 and record["region"] is True and record["declared_bounds"] is not None


# ---------------------------------------------------------------------------- bad input: one line, exit 2
@pytest.fixture
def bad_files(tmp_path, deaths):
    metres_as_degrees = tmp_path / "metres_4326.gpkg"
    deaths.set_crs(4326, allow_override=True).to_file(metres_as_degrees, engine="pyogrio")
    lat95 = tmp_path / "lat95.geojson"
    gpd.GeoDataFrame({"v": [1, 2]}, geometry=[Point(10, 45), Point(10, 95)], crs=4326).to_file(lat95, engine="pyogrio")
    with_lon = tmp_path / "with_lon.gpkg"
    ll = deaths.to_crs(4326)
    ll.assign(lon=ll.geometry.x).to_file(with_lon, engine="pyogrio")
    return {
        "METRES_4326": metres_as_degrees,
        "LAT95": lat95,
        "WITH_LON": with_lon,
        "SOHO": SOHO,
        "NOT_RASTER": SOHO,
        "TOKYO": TOKYO,
        "MISSING": tmp_path / "missing.gpkg",
    }


BAD = {
    "metres labelled EPSG:4326": (["perturb", "METRES_4326", "OUT.gpkg", *LN4_200], ["labels", "WGS 84"]),
    "latitude 95": (["perturb", "LAT95", "OUT.gpkg", *LN4_200], ["labels 1"]),
    "unknown extension": (["perturb", "SOHO", "OUT.xyz", "--layer", "deaths", *LN4_200], [".gpkg"]),
    "missing file": (["perturb", "MISSING", "OUT.gpkg", *LN4_200], ["does not exist"]),
    "several layers": (["perturb", "SOHO", "OUT.gpkg", *LN4_200], ["'deaths', 'pumps'", "--layer"]),
    "location column": (["perturb", "WITH_LON", "OUT.gpkg", *LN4_200], ["'lon'", "--keep"]),
    "outside bounds": (
        ["perturb", "SOHO", "OUT.gpkg", "--layer", "deaths", *LN4_200, "--bounds", "0", "0", "10", "10"],
        ["labels"],
    ),
    "epsilon <= 0": (
        ["perturb", "SOHO", "OUT.gpkg", "--layer", "deaths", "--epsilon", "-1"],
        ["epsilon must be finite"],
    ),
    "not a number": (["perturb", "SOHO", "OUT.gpkg", "--epsilon", "abc"], ["not a number"]),
    "bad --crs": (["perturb", "SOHO", "OUT.gpkg", "--layer", "deaths", *LN4_200, "--crs", "EPSG:nope"], ["EPSG:nope"]),
    "--out-layer for GeoJSON": (
        ["perturb", "SOHO", "OUT.geojson", "--layer", "deaths", *LN4_200, "--out-layer", "x"],
        ["GeoPackage"],
    ),
    "--region with --mechanism": (
        ["perturb", "SOHO", "OUT.gpkg", "--mechanism", "m.npz", "--region", "r.gpkg"],
        ["--region"],
    ),
    "--remap without --mechanism": (["perturb", "SOHO", "OUT.gpkg", *LN4_200, "--remap"], ["--mechanism"]),
    "range and slope": (
        ["privacy-map", "NOT_RASTER", "OUT.tif", "--epsilon-range", "1e-4", "1e-3", "--slope", "1"],
        ["not both"],
    ),
    "no density rule": (["privacy-map", "NOT_RASTER", "OUT.tif"], ["--epsilon-range"]),
    "not a raster": (["privacy-map", "NOT_RASTER", "OUT.tif", "--epsilon-range", "1e-4", "1e-3"], ["not a raster"]),
    "mechanism as .tif": (["build-mechanism", "TOKYO", "OUT.tif", "--from-epsilon"], [".npz"]),
    "rate and accuracy": (
        [
            "sanitize-traces",
            "SOHO",
            "OUT.gpkg",
            "--traj-id",
            "Id",
            "--time",
            "",
            *LN4_200,
            "--rate",
            "0.1",
            "--accuracy",
            "100",
        ],
        ["not both"],
    ),
    "no --traj-id": (["sanitize-traces", "SOHO", "OUT.gpkg", "--time", "t", *LN4_200], ["--traj-id"]),
    "bad method": (
        ["sanitize-traces", "SOHO", "OUT.gpkg", "--traj-id", "a", "--time", "t", "--method", "x"],
        ["--method"],
    ),
    "unknown column": (
        ["sample-queries", "SOHO", "OUT.gpkg", "--layer", "deaths", "--traj-id", "user", "--time", "t"],
        ["'user'"],
    ),
    "report: missing id": (
        ["report", "SOHO", "SOHO", "--layer", "deaths", "--released-layer", "deaths", "--id", "x"],
        ["'x'"],
    ),
    "report: quantile 1": (
        ["report", "SOHO", "SOHO", "--layer", "deaths", "--released-layer", "deaths", "--quantile", "1"],
        ["quantile must be strictly between 0 and 1"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_nothing_written(capsys, tmp_path, bad_files, case):
    args, needles = BAD[case]
    args = [str(bad_files[a]) if a in bad_files else str(tmp_path / a) if a.startswith("OUT.") else a for a in args]
    before = snapshot(tmp_path)
    code, out, err = run(capsys, *args)
    line = one_line_error(err, *needles)
    assert code == 2
    assert snapshot(tmp_path) == before  # nothing written, no temporary left
    for value in ("-15539", "6712903", "51.51", "-0.13"):  # no coordinate of the data in the message
        assert value not in line


@pytest.mark.parametrize("case", ["metres labelled EPSG:4326", "unknown extension"])
def test_a_real_process_prints_one_line_and_exits_2(tmp_path, bad_files, case):
    args, needles = BAD[case]
    args = [str(bad_files[a]) if a in bad_files else str(tmp_path / a) if a.startswith("OUT.") else a for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "geopriv.cli", *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "GEOPRIV_TRACEBACK"},
    )
    assert proc.returncode == 2
    one_line_error(proc.stderr, *needles)


def test_foreign_errors_are_named_by_type_without_their_text(monkeypatch, capsys, homes, tmp_path):
    """pandas/pyproj/GDAL messages may quote data values: only the type and a hint are printed."""
    import pyproj

    @functools.wraps(geopriv.perturb)
    def leaky(data, **kwargs):
        x = float(data.geometry.x.iloc[0])
        pyproj.CRS(f"+proj=nonsense +x_0={x}")  # a pyproj error whose text holds a coordinate

    monkeypatch.setattr(geopriv, "perturb", leaky)
    x = str(float(pyogrio.read_dataframe(homes).geometry.x.iloc[0]))[:8]
    code, _, err = run(capsys, "perturb", homes, tmp_path / "o.gpkg", *LN4_200)
    line = one_line_error(err, "pyproj", "CRS", "GEOPRIV_TRACEBACK=1")
    assert code == 2 and x not in err and not (tmp_path / "o.gpkg").exists()

    @functools.wraps(geopriv.perturb)
    def pandas_error(data, **kwargs):
        pd.to_datetime(pd.Series([f"{x} not a date"]), format="%Y")

    monkeypatch.setattr(geopriv, "perturb", pandas_error)
    code, _, err = run(capsys, "perturb", homes, tmp_path / "o.gpkg", *LN4_200)
    one_line_error(err, "ValueError", "withheld")
    assert code == 2 and x not in err

    monkeypatch.setenv("GEOPRIV_TRACEBACK", "1")  # developers can ask for the whole error
    with pytest.raises(ValueError):
        main(["perturb", str(homes), str(tmp_path / "o.gpkg"), *LN4_200])
    assert line


def test_failed_overwrite_leaves_old_files_byte_identical(capsys, homes, tmp_path, bad_files):
    """Real release failures after the output checks: a location-like column, points outside --bounds."""
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    for name in ("a.gpkg", "b.csv", "c.shp", "d.geojson"):
        assert run(capsys, "perturb", homes, outputs / name, *LN4_200)[0] == 0
    before = snapshot(outputs)
    for name in ("a.gpkg", "b.csv", "c.shp", "d.geojson"):
        code, _, err = run(capsys, "perturb", bad_files["WITH_LON"], outputs / name, *LN4_200, "--overwrite")
        one_line_error(err, "'lon'")
        code2, _, err2 = run(
            capsys, "perturb", homes, outputs / name, *LN4_200, "--overwrite", "--bounds", "0", "0", "10", "10"
        )
        one_line_error(err2, "labels")
        assert code == code2 == 2
    assert snapshot(outputs) == before


# ---------------------------------------------------------------------------- location-dependent privacy
def test_privacy_map(capsys, small_raster, tmp_path):
    out = tmp_path / "map.tif"
    code, _, err = run(capsys, "privacy-map", small_raster, out, "--epsilon-range", "ln4/3000", "ln4/600")
    assert code == 0, err
    expected = geopriv.PrivacyMap.from_population(small_raster, epsilon_range=(math.log(4) / 3000, math.log(4) / 600))
    np.testing.assert_array_equal(geopriv.PrivacyMap.from_epsilon(out).epsilon, expected.epsilon)
    before = out.read_bytes()
    code, _, err = run(capsys, "privacy-map", small_raster, out, "--floor", "2e-4", "--slope", "1e-5")
    one_line_error(err, "--overwrite")
    assert out.read_bytes() == before
    code, _, err = run(
        capsys,
        "privacy-map",
        small_raster,
        out,
        "--floor",
        "2e-4",
        "--slope",
        "1e-5",
        "--overwrite",
        "--nodata-epsilon",
        "nearest",
        "--regularise",
        "0.5",
    )
    assert code == 0, err
    assert geopriv.PrivacyMap.from_epsilon(out).epsilon.min() >= 2e-4 * (1 - 1e-12)
    code, _, err = run(
        capsys, "privacy-map", small_raster, small_raster, "--floor", "2e-4", "--slope", "1e-5", "--overwrite"
    )
    one_line_error(err, "is the input file")


def test_build_mechanism_and_perturb_with_it(capsys, mechanism, small_raster, lonlat_in_raster, tmp_path):
    loaded = geopriv.EikonalMechanism.load(mechanism)
    assert loaded.report.ok
    out = tmp_path / "released.geojson"
    code, _, err = run(capsys, "perturb", lonlat_in_raster, out, "--mechanism", mechanism, "--seed", "2")
    assert code == 0, err
    assert "location-dependent epsilon" in err
    record = json.loads(sidecar_path(out).read_text())
    assert record["mechanism"] == "eikonal" and record["mechanism_id"] == loaded.mechanism_id
    code, _, err = run(
        capsys,
        "perturb",
        lonlat_in_raster,
        tmp_path / "remap.gpkg",
        "--mechanism",
        mechanism,
        "--remap",
        "--outside",
        "clamp",
    )
    assert code == 0, err
    rec = json.loads(pyogrio.read_info(tmp_path / "remap.gpkg")["layer_metadata"]["geopriv"])
    assert rec["outside"] == "clamp" and "posterior mean" in rec["remap"]
    # a privacy map GeoTIFF is a valid input too (--from-epsilon), with the build options
    pm_file = tmp_path / "map.tif"
    assert run(capsys, "privacy-map", small_raster, pm_file, "--epsilon-range", "ln4/3000", "ln4/600")[0] == 0
    code, _, err = run(
        capsys,
        "build-mechanism",
        pm_file,
        tmp_path / "m2.npz",
        "--from-epsilon",
        "--margin",
        "0.2",
        "--smooth",
        "none",
        "--jump",
        "0.2",
        "--max-step",
        "1",
        "--no-progress",
    )
    assert code == 0, err
    params = geopriv.EikonalMechanism.load(tmp_path / "m2.npz").params
    assert params["smooth"] is None and params["jump"] == 0.2
    code, _, err = run(capsys, "build-mechanism", pm_file, tmp_path / "m3.npz", "--from-epsilon", "--units", "per_cell")
    one_line_error(err, "--from-epsilon")


def test_kernels_on_demand_from_the_command_line(capsys, mechanism, small_raster, lonlat_in_raster, tmp_path):
    """--kernels on_demand: build (same verified mechanism) and perturb (same release as held, same seed)."""
    lazy = tmp_path / "lazy.npz"
    code, _, err = run(
        capsys,
        "build-mechanism",
        small_raster,
        lazy,
        "--epsilon-range",
        "ln4/3000",
        "ln4/600",
        "--kernels",
        "on_demand",
        "--no-progress",
    )
    assert code == 0, err
    held = geopriv.EikonalMechanism.load(mechanism)
    assert geopriv.EikonalMechanism.load(lazy).report.max_ratio == pytest.approx(held.report.max_ratio, rel=1e-12)
    outs = {}
    for kernels in ("held", "on_demand"):
        out = tmp_path / f"released_{kernels}.gpkg"
        code, _, err = run(
            capsys,
            "perturb",
            lonlat_in_raster,
            out,
            "--mechanism",
            mechanism,
            "--seed",
            "4",
            "--kernels",
            kernels,
            "--n-jobs",
            "1",
        )
        assert code == 0, err
        outs[kernels] = gpd.read_file(out, engine="pyogrio")
    assert outs["held"].geometry.equals(outs["on_demand"].geometry)
    code, _, err = run(
        capsys, "perturb", lonlat_in_raster, tmp_path / "planar.gpkg", "--epsilon", "0.01", "--kernels", "on_demand"
    )
    one_line_error(err, "--kernels")


# ---------------------------------------------------------------------------- traces
def test_sample_queries_then_sanitize_traces_with_ledger(capsys, fixes, tmp_path):
    queries = tmp_path / "queries.gpkg"
    code, _, err = run(
        capsys, "sample-queries", fixes, queries, "--traj-id", "user", "--time", "t", "-p", "0", "--seed", "1"
    )
    assert code == 0, err
    q = pyogrio.read_dataframe(queries)
    assert 60 <= len(q) <= 100 and "source_row" in q and q.crs.to_epsg() == 32650

    out, ledger = tmp_path / "released.gpkg", tmp_path / "ledger.csv"
    args = [
        "sanitize-traces",
        queries,
        out,
        "--traj-id",
        "user",
        "--time",
        "t",
        "--level",
        "ln10",
        "--radius",
        "100",
        "--rate",
        "0.1",
        "--ledger",
        ledger,
    ]
    code, _, err = run(capsys, *args, "--seed", "2")
    assert code == 0, err
    released = pyogrio.read_dataframe(out)
    assert len(released) == len(q) and {"predicted", "status", "epsilon_spent"} <= set(released.columns)
    table = pd.read_csv(ledger, index_col=0)
    assert list(table.index) == ["u0", "u1", "u2"]
    assert (table["spent"] <= table["budget"] * (1 + 1e-12)).all() and table["queries"].sum() == len(q)
    record = json.loads(pyogrio.read_info(out)["layer_metadata"]["geopriv"])
    assert record["method"] == "predictive" and record["traces"] == 3

    before = snapshot(tmp_path)
    code, _, err = run(capsys, *args)  # both outputs exist: refused before any work
    one_line_error(err, "--overwrite")
    assert snapshot(tmp_path) == before

    code, _, err = run(
        capsys,
        "sanitize-traces",
        queries,
        tmp_path / "other.shp",
        "--traj-id",
        "user",
        "--time",
        "t",
        "--epsilon",
        "ln10/100",
        "--budget",
        "fixed_utility",
        "--accuracy",
        "3000",
        "--method",
        "independent",
        "--on-exhausted",
        "last",
    )
    assert code == 0, err
    assert len(geopriv.io.read_vector(tmp_path / "other.shp")) == len(q)


# ---------------------------------------------------------------------------- report, demo
def test_report(capsys, homes, tmp_path, deaths):
    out = tmp_path / "released.geojson"
    assert run(capsys, "perturb", homes, out, *LN4_200, "--seed", "4")[0] == 0
    code, text, err = run(capsys, "report", homes, out)
    assert code == 0, err
    assert "alpha_0.9_m" in text and "radius containing 90 % of the displacements" in text
    code, text, _ = run(capsys, "report", homes, out, "--quantile", "0.5", "--json")
    values = json.loads(text)
    assert values["n"] == 324 and values["alpha_0.5_m"] == pytest.approx(values["median_m"])
    expected = geopriv.utility_report(deaths, geopriv.io.read_vector(out), quantile=0.5)
    assert values["mean_m"] == pytest.approx(expected["mean_m"])
    # matched by an id column, the released rows reversed
    ids = tmp_path / "ids.gpkg"
    rev = tmp_path / "rev.geojson"
    deaths.assign(key=range(324)).to_file(ids, engine="pyogrio")
    geopriv.io.read_vector(out).assign(key=range(324)).iloc[::-1].to_file(rev, engine="pyogrio")
    code, text, _ = run(capsys, "report", ids, rev, "--id", "key", "--json")
    assert json.loads(text)["mean_m"] == pytest.approx(values["mean_m"])
    code, text, err = run(capsys, "report", homes, out, "--delta", "0.5", "--json")  # deprecated name
    assert code == 0 and json.loads(text)["alpha_0.5_m"] == pytest.approx(values["alpha_0.5_m"])
    assert "--delta is deprecated" in err


def test_demo_writes_gpkg_and_png(capsys, tmp_path):
    code, text, err = run(capsys, "demo", "--out", tmp_path, "--seed", "1")
    assert code == 0, err
    gdf = pyogrio.read_dataframe(tmp_path / "soho_perturbed.gpkg", layer="deaths_perturbed")
    assert len(gdf) == 324 and gdf.crs.to_epsg() == 3857
    assert "90 % of the points moved less than" in text
    png = (tmp_path / "soho_map.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert run(capsys, "demo", "--out", tmp_path, "--seed", "1")[0] == 0  # a demo folder is simply replaced


def test_number_syntax():
    from geopriv.cli.common import number_arg

    assert number_arg("ln4/200") == pytest.approx(math.log(4) / 200)
    assert number_arg("ln(10)") == pytest.approx(math.log(10)) == number_arg("log(10)")
    assert number_arg("1e-3") == 0.001
    with pytest.raises(Exception, match="not a number"):
        number_arg("4/0")


def test_library_warnings_are_one_line_and_never_errors(capsys, tmp_path):
    """A DistortionWarning (huge declared area) is printed as one line, even where warnings are errors."""
    src = tmp_path / "lonlat.gpkg"
    synthetic_fixes().to_crs(4326).to_file(src, engine="pyogrio")
    code, _, err = run(
        capsys,
        "sanitize-traces",
        src,
        tmp_path / "o.gpkg",
        "--traj-id",
        "user",
        "--time",
        "t",
        "--level",
        "ln10",
        "--radius",
        "100",
        "--rate",
        "0.1",
        "--bounds",
        "60",
        "0",
        "170",
        "70",
    )
    assert code == 0, err
    lines = err.splitlines()
    assert all(line.startswith(("geopriv: warning: ", "released ")) for line in lines), err
    assert len([line for line in lines if "distorts distances" in line]) == 1 and "Traceback" not in err
    assert len(lines) == len(set(lines))  # other libraries' warnings: once each, by type and origin


def test_csv_input_with_its_crs_given(capsys, tmp_path):
    """CSV (WKT geometry, no CRS) in: --crs says what the coordinates are; time stamps are typed."""
    src = tmp_path / "queries.csv"
    geopriv.io.write_vector(synthetic_fixes(n=20), src)
    args = [
        "sanitize-traces",
        src,
        tmp_path / "o.geojson",
        "--traj-id",
        "user",
        "--time",
        "t",
        "--epsilon",
        "ln10/100",
        "--rate",
        "0.1",
    ]
    code, _, err = run(capsys, *args)
    one_line_error(err, "has no CRS", "--crs EPSG:4326")
    code, _, err = run(capsys, *args, "--crs", "EPSG:32650")
    assert code == 0, err
    assert len(geopriv.io.read_vector(tmp_path / "o.geojson")) == 60


def test_sigterm_cleans_up_like_ctrl_c(tmp_path):
    """SIGTERM mid-run (timeout, systemd, CI) leaves no staging directory and no output."""
    import signal
    import subprocess
    import sys
    import time

    import geopandas as gpd
    import numpy as np

    rng = np.random.default_rng(0)
    n = 1_500_000
    big = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(440_000 + rng.uniform(0, 30_000, n), 4_400_000 + rng.uniform(0, 30_000, n)),
        crs=32650,
    )
    src = tmp_path / "big.fgb"
    big.to_file(src, engine="pyogrio", layer_options={"SPATIAL_INDEX": "NO"})
    out = tmp_path / "out.gpkg"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "geopriv.cli",
            "perturb",
            str(src),
            str(out),
            "--level",
            "ln4",
            "--radius",
            "200",
            "--no-progress",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not [p for p in tmp_path.iterdir() if p.name.endswith(".geopriv-tmp")]:  # signal while writing
        assert proc.poll() is None, "the run ended before it started writing its output"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".geopriv-tmp")]


# ---------------------------------------------------------------------------- errors: one message rule, sizes, outputs
def test_a_tiny_file_of_a_huge_raster_is_refused_with_its_size_and_the_fix(capsys, tmp_path):
    """20000 x 20000 cells compressed to well under 1 MB: refused from the header, not by running out of memory."""
    path = tmp_path / "huge.tif"
    profile = dict(
        driver="GTiff",
        height=20_000,
        width=20_000,
        count=1,
        dtype="uint8",
        crs="EPSG:30166",
        transform=rasterio.Affine(10.0, 0.0, 300_000.0, 0.0, -10.0, 0.0),
        tiled=True,
        blockxsize=512,
        blockysize=512,
        compress="deflate",
        sparse_ok=True,
    )
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(np.ones((512, 512), np.uint8), 1, window=Window(0, 0, 512, 512))
    assert path.stat().st_size < 1_000_000
    for command in ("privacy-map", "build-mechanism"):
        out = tmp_path / ("map.tif" if command == "privacy-map" else "m.npz")
        code, _, err = run(capsys, command, path, out, "--epsilon-range", "ln4/3000", "ln4/600")
        line = one_line_error(err, "20000 x 20000", "--max-cells", "Resample")
        assert code == 2 and "time stamps" not in line and not out.exists()


def test_max_cells_option(capsys, tmp_path, small_raster):
    out = tmp_path / "map.tif"
    code, _, err = run(
        capsys, "privacy-map", small_raster, out, "--epsilon-range", "ln4/3000", "ln4/600", "--max-cells", "4"
    )
    one_line_error(err, "more than the limit of 4")
    assert code == 2 and not out.exists()
    assert (
        run(capsys, "privacy-map", small_raster, out, "--epsilon-range", "ln4/3000", "ln4/600", "--max-cells", "none")[
            0
        ]
        == 0
    )
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["privacy-map", "a.tif", "b.tif", "--max-cells", "-3"])


def test_geoprivs_own_plain_value_error_text_is_withheld_unless_it_is_a_geopriv_error(
    monkeypatch, capsys, homes, tmp_path
):
    """The rule is the exception's type: a bare ValueError's text is withheld (a GeoprivError's is shown)."""
    from geopriv.exceptions import GeometryError

    @functools.wraps(geopriv.perturb)
    def bare(data, **kwargs):
        raise ValueError("bad point at -15539.1 6712903.4")  # as a forgotten raise in geopriv would

    monkeypatch.setattr(geopriv, "perturb", bare)
    code, _, err = run(capsys, "perturb", homes, tmp_path / "o.gpkg", *LN4_200)
    line = one_line_error(err, "ValueError", "withheld", "GEOPRIV_TRACEBACK=1")
    assert code == 2 and "-15539" not in line

    @functools.wraps(geopriv.perturb)
    def ours(data, **kwargs):
        raise GeometryError("are outside the public area", [3, 7], "Widen --bounds.")

    monkeypatch.setattr(geopriv, "perturb", ours)
    code, _, err = run(capsys, "perturb", homes, tmp_path / "o.gpkg", *LN4_200)
    one_line_error(err, "2 row(s) are outside the public area: labels 3, 7. Widen --bounds.")


def test_raster_outputs_that_are_inputs_are_refused_through_links(capsys, tmp_path, small_raster):
    raster = tmp_path / "density.tif"
    shutil.copy(small_raster, raster)
    before = raster.read_bytes()
    link = tmp_path / "link.tif"
    link.symlink_to(raster)
    hard = tmp_path / "hard.tif"
    os.link(raster, hard)
    for out in (raster, link, hard):
        code, _, err = run(capsys, "privacy-map", raster, out, "--epsilon-range", "ln4/3000", "ln4/600", "--overwrite")
        one_line_error(err, "is the input file")
        assert code == 2
    assert raster.read_bytes() == before
