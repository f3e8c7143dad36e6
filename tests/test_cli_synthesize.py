"""``geopriv synthesize``: the command line of geopriv.synthesize, end to end on the shipped Soho deaths.

Data: ``geopriv/data/soho_cholera.gpkg`` layer ``deaths`` (324 points, EPSG:3857) and the public
area ``-15800 6711900 -14600 6713300`` (round numbers around Soho, chosen without the points).
The CLI runs in this process (``geopriv.cli.main``), as in tests/test_cli.py.
"""

from __future__ import annotations

import functools
import inspect
import json

import geopandas as gpd
import numpy as np
import pyogrio
import pytest
from shapely.geometry import box

import geopriv
from geopriv.io import sidecar_path

from .test_cli import SOHO, one_line_error, run, snapshot

BOUNDS = (-15800, 6711900, -14600, 6713300)
SOHO_ARGS = [SOHO, "--layer", "deaths"]


def synth(out, *extra):
    """The arguments of a synthesize run on the Soho deaths with the public area and a seed."""
    return ["synthesize", *SOHO_ARGS[:1], out, *SOHO_ARGS[1:], "--epsilon", "1", "--bounds", *BOUNDS, *extra]


@pytest.fixture(scope="module")
def deaths():
    return pyogrio.read_dataframe(SOHO, layer="deaths")


def gpkg_record(path, layer=None):
    return json.loads(pyogrio.read_info(path, layer=layer)["layer_metadata"]["geopriv"])


# ---------------------------------------------------------------------------- success
def test_synthesize_writes_synthetic_points_with_provenance(capsys, tmp_path, deaths):
    out = tmp_path / "synthetic.gpkg"
    code, _, err = run(capsys, *synth(out, "--seed", "1"))
    assert code == 0, err
    assert "released 324 synthetic points" in err and "epsilon 1 " in err and "method srw" in err
    assert "depth " in err and "seeded" in err and "not per metre" in err
    assert "note:" not in err  # bounds were declared
    back = pyogrio.read_dataframe(out)
    assert len(back) == 324 and back.crs.to_epsg() == 3857
    assert list(back.columns) == ["geometry"]  # attributes are not carried over
    xy = np.column_stack([back.geometry.x, back.geometry.y])
    assert (xy >= BOUNDS[:2]).all() and (xy <= BOUNDS[2:]).all()
    record = gpkg_record(out)
    assert record["method"] == "srw" and record["epsilon"] == 1.0 and record["seeded"] is True
    assert record["frame_area"] == "bounds" and record["declared_bounds"] == list(map(float, BOUNDS))
    assert record["n"] == 324 and record["n_people"] == 324 and isinstance(record["depth"], int)
    assert "differential privacy" in record["definition"]
    # the same seed gives the same synthetic set; the output is not the input
    code, _, err = run(capsys, *synth(tmp_path / "again.gpkg", "--seed", "1"))
    assert code == 0, err
    again = pyogrio.read_dataframe(tmp_path / "again.gpkg")
    assert np.array_equal(np.column_stack([again.geometry.x, again.geometry.y]), xy)
    true_xy = np.column_stack([deaths.geometry.x, deaths.geometry.y])
    assert not np.array_equal(np.sort(xy, axis=0), np.sort(true_xy, axis=0))


def test_synthesize_pmm_and_options(capsys, tmp_path):
    out = tmp_path / "synthetic.geojson"
    code, _, err = run(
        capsys,
        *synth(
            out, "--method", "pmm", "-n", "500", "--depth", "6", "--placement", "centre", "--grid", "5", "--seed", "2"
        ),
    )
    assert code == 0, err
    assert "released 500 synthetic points (from 324 people" in err and "method pmm" in err and "depth 6" in err
    back = geopriv.io.read_vector(out)
    assert len(back) == 500 and back.crs.to_epsg() == 3857
    record = json.loads(sidecar_path(out).read_text())  # other formats: the sidecar
    assert record["method"] == "pmm" and record["depth"] == 6 and record["n"] == 500
    assert record["placement"] == "centre" and record["grid_m"] == 5.0
    assert "private measure" in record["mechanism"]


def test_region_sets_the_public_area(capsys, tmp_path):
    region = tmp_path / "region.geojson"
    gpd.GeoDataFrame(geometry=[box(*BOUNDS)], crs=3857).to_file(region, engine="pyogrio")
    out = tmp_path / "synthetic.gpkg"
    code, _, err = run(
        capsys, "synthesize", SOHO, out, "--layer", "deaths", "--epsilon", "ln3", "--region", region, "--seed", "3"
    )
    assert code == 0, err
    assert "note:" not in err and "bounding box of --region" in err
    record = gpkg_record(out)
    assert record["region"] is True and record["frame_area"] == "region"
    assert record["epsilon"] == pytest.approx(np.log(3))


def test_without_bounds_the_release_is_refused(capsys, tmp_path, deaths):
    """No declared area: refused as the library refuses it (issue 44.3: the CRS's area of use is no study area)."""
    utm = tmp_path / "deaths_utm.gpkg"
    deaths.to_crs(32630).to_file(utm, engine="pyogrio")  # UTM 30N: a bounded area of use holding London
    out = tmp_path / "synthetic.gpkg"
    code, _, err = run(capsys, "synthesize", utm, out, "--epsilon", "1", "--seed", "4")
    one_line_error(err, "needs a declared public area", "--bounds XMIN YMIN XMAX YMAX", "--region")
    assert code == 2 and not out.exists()
    # bad input without --bounds: still one line
    code, _, err = run(capsys, "synthesize", utm, tmp_path / "bad.gpkg", "--epsilon", "0")
    one_line_error(err, "epsilon must be finite and > 0")
    assert code == 2 and not (tmp_path / "bad.gpkg").exists()


def test_options_not_given_are_not_passed(monkeypatch, capsys, tmp_path):
    """So the library's own defaults apply (no second copy of them in the CLI)."""
    seen = {}
    real = geopriv.synthesize

    @functools.wraps(real)
    def recorder(data, epsilon, **kwargs):
        seen.update(kwargs, epsilon=epsilon)
        return real(data, epsilon, **kwargs)

    monkeypatch.setattr(geopriv, "synthesize", recorder)
    code, _, err = run(capsys, *synth(tmp_path / "o.gpkg"))
    assert code == 0, err
    assert set(seen) == {"epsilon", "bounds", "progress"}
    assert seen["epsilon"] == 1.0 and seen["bounds"] == tuple(map(float, BOUNDS))


# ---------------------------------------------------------------------------- refusals
def test_points_outside_bounds_are_refused_naming_rows(capsys, tmp_path):
    out = tmp_path / "synthetic.gpkg"
    code, _, err = run(
        capsys,
        "synthesize",
        SOHO,
        out,
        "--layer",
        "deaths",
        "--epsilon",
        "1",
        "--bounds",
        -15000,
        6711900,
        -14600,
        6713300,
    )
    line = one_line_error(err, "row(s) lie outside the declared study area", "--bounds", "labels ")
    assert code == 2
    assert not out.exists() and list(tmp_path.iterdir()) == []
    for value in ("-15539", "6712903", "51.51", "-0.13"):  # rows are named, never coordinates
        assert value not in line


def test_existing_output_is_not_clobbered_without_overwrite(capsys, tmp_path):
    out = tmp_path / "synthetic.geojson"
    out.write_text('{"type": "FeatureCollection", "features": []}')
    before = snapshot(tmp_path)
    code, _, err = run(capsys, *synth(out))
    one_line_error(err, "--overwrite")
    assert code == 2 and snapshot(tmp_path) == before
    code, _, err = run(capsys, *synth(out, "--overwrite", "--seed", "5"))
    assert code == 0, err
    assert len(geopriv.io.read_vector(out)) == 324
    assert json.loads(sidecar_path(out).read_text())["method"] == "srw"


def test_output_that_is_the_input_is_refused(capsys, tmp_path, deaths):
    homes = tmp_path / "homes.gpkg"
    deaths.to_file(homes, engine="pyogrio")
    before = homes.read_bytes()
    code, _, err = run(capsys, "synthesize", homes, homes, "--epsilon", "1", "--bounds", *BOUNDS, "--overwrite")
    one_line_error(err, "is the input file")
    assert code == 2 and homes.read_bytes() == before


@pytest.mark.parametrize(
    "extra, needles",
    [
        ([], ["--epsilon"]),  # required: epsilon has no default
        (["--epsilon", "0"], ["epsilon must be finite and > 0"]),
        (["--epsilon", "1", "--method", "laplace"], ["--method"]),
        (["--epsilon", "1", "--placement", "corner"], ["--placement"]),
        (["--epsilon", "1", "--depth", "deep"], ["not a depth"]),
        (["--epsilon", "1", "--depth", "0"], ["depth must be 'auto' or an integer"]),
        (["--epsilon", "1", "-n", "0"], ["positive integer"]),
    ],
)
def test_bad_arguments_are_one_line_exit_2_nothing_written(capsys, tmp_path, extra, needles):
    before = snapshot(tmp_path)
    code, _, err = run(
        capsys,
        "synthesize",
        SOHO,
        tmp_path / "o.gpkg",
        "--layer",
        "deaths",
        *(extra + ["--bounds", *BOUNDS] if extra else []),
    )
    one_line_error(err, *needles)
    assert code == 2 and snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- help
def test_help_has_an_example_and_the_librarys_defaults(capsys):
    code, out, _ = run(capsys, "synthesize", "--help")
    assert code == 0
    assert "geopriv synthesize " in out[out.index("examples:") :]
    flat = " ".join(out.split())
    library = inspect.signature(geopriv.synthesize).parameters
    for flag, name in (
        ("--method", "method"),
        ("--depth", "depth"),
        ("--placement", "placement"),
        ("--grid", "grid"),
        ("--max-distortion", "max_distortion"),
    ):
        default = library[name].default
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        start = flat.index(f"{flag} ", flat.index("public area and synthetic points"))
        assert f"(default: {shown})" in flat[start : flat.index(" --", start + len(flag) + 1)], flag
    assert library["epsilon"].default is inspect.Parameter.empty  # so --epsilon is required
    assert "dimensionless" in flat and "not per metre" in flat
    assert "never derived from the data" in flat
    code, out, _ = run(capsys, "--help")
    assert "synthesize" in out
