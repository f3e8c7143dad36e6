import json
import math
import subprocess
import sys

import geopandas as gpd
import pyogrio
import pytest

from geopriv.cli import main

from .conftest import shared


def test_perturb_gpkg_to_geojson(tmp_path, capsys):
    src = shared("geolife_sample.gpkg")
    out = tmp_path / "out.geojson"
    assert main(["perturb", str(src), str(out), "--level", "ln4", "--radius", "200", "--no-progress"]) == 0
    a = gpd.read_file(src)
    b = gpd.read_file(out)
    assert len(a) == len(b) and b.crs == a.crs
    assert set(a.columns) <= set(b.columns)
    assert (out.parent / "out.geojson.geopriv.json").exists()
    assert "released 5908 points" in capsys.readouterr().err


def test_perturb_gpkg_records_provenance_in_layer_metadata(tmp_path):
    out = tmp_path / "o.gpkg"
    assert main(["perturb", str(shared("soho_cholera.gpkg")), str(out), "--layer", "deaths", "--epsilon", "0.01",
                 "--seed", "1", "--no-progress"]) == 0
    meta = pyogrio.read_info(out)["layer_metadata"]
    rec = json.loads(meta["geopriv"])
    assert rec["epsilon_per_m"] == 0.01 and rec["seeded"] is True


@pytest.mark.parametrize("args,needle", [
    (["perturb", "missing.gpkg", "o.gpkg", "--epsilon", "0.01"], "does not exist"),
    (["perturb", "SRC", "o.gpkg", "--epsilon", "-1"], "epsilon must be finite"),
    (["perturb", "SRC", "o.gpkg", "--level", "1"], "give --epsilon"),
    (["perturb", "SRC", "SRC", "--epsilon", "0.01", "--overwrite"], "input file"),
])
def test_bad_input_one_line_error_nonzero_exit(tmp_path, args, needle):
    src = shared("geolife_sample.gpkg")
    args = [str(src) if a == "SRC" else (str(tmp_path / a) if a.endswith(".gpkg") else a) for a in args]
    proc = subprocess.run([sys.executable, "-m", "geopriv.cli", *args], capture_output=True, text=True)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert src.exists()


def test_existing_output_needs_overwrite(tmp_path, capsys):
    out = tmp_path / "o.gpkg"
    out.write_text("x")
    assert main(["perturb", str(shared("geolife_sample.gpkg")), str(out), "--epsilon", "0.01"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert out.read_text() == "x"


def test_demo_writes_gpkg_and_png(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--seed", "1"]) == 0
    gdf = gpd.read_file(tmp_path / "soho_perturbed.gpkg")
    assert len(gdf) == 324 and gdf.crs.to_epsg() == 3857
    png = (tmp_path / "soho_map.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_report(tmp_path, capsys):
    out = tmp_path / "o.gpkg"
    src = shared("geolife_sample.gpkg")
    main(["perturb", str(src), str(out), "--epsilon", str(math.log(4) / 200), "--no-progress"])
    capsys.readouterr()
    assert main(["report", str(src), str(out)]) == 0
    assert "alpha_0.9_m" in capsys.readouterr().out
