"""A synthetic release needs a declared study area, refused like a heatmap's without one (issue 44.3).

The synthetic points are spread over the whole public area, so a CRS's area of use (the whole
world for Web Mercator: points about +-1.6e7 m apart, a W1 of 2,394 km on the Soho deaths) is
no study area: without ``bounds=`` or ``region=`` the release is refused, in the library (in
memory, on dask, and its plan without data) and on the command line, with the one fix every
release that needs a declared area gives (:data:`geopriv.frame.STUDY_AREA_FIX`).  No mocks: the
shipped Soho deaths (EPSG:3857) and files written by the command line.
"""

from __future__ import annotations

import geopandas as gpd
import pyogrio
import pytest

import geopriv
from geopriv.exceptions import ParameterError
from geopriv.frame import STUDY_AREA_FIX
from geopriv.release import plan_synthetic

from .test_cli import SOHO, one_line_error, run

SOHO_BOUNDS = (-15800, 6711900, -14600, 6713300)  # a public area around Soho, round numbers (EPSG:3857)
NEEDS = "needs a declared public area"


@pytest.fixture(scope="module")
def deaths():
    return pyogrio.read_dataframe(SOHO, layer="deaths")


def heatmap_refusal(data) -> ParameterError:
    with pytest.raises(ParameterError, match=NEEDS) as err:
        geopriv.heatmap(data, 1.0, resolution=50, rng=0)
    return err.value


@pytest.mark.parametrize("form", ["frame", "series", "accessor"])
def test_no_declared_area_is_refused_with_the_heatmaps_fix(deaths, form):
    call = {
        "frame": lambda: geopriv.synthesize(deaths, 1.0, rng=0),
        "series": lambda: geopriv.synthesize(deaths.geometry, 1.0, rng=0),
        "accessor": lambda: deaths.priv.synthesize(1.0, rng=0),
    }[form]
    with pytest.raises(ParameterError, match=NEEDS) as err:
        call()
    message = str(err.value)
    assert "WGS 84 / Pseudo-Mercator" in message and "area of use" in message
    assert err.value.fix == STUDY_AREA_FIX == heatmap_refusal(deaths).fix  # one fix, in one place
    assert "bounds=(xmin, ymin, xmax, ymax)" in message and "region=" in message


def test_a_crs_with_a_bounded_area_of_use_is_refused_too(deaths):
    """UTM 30N's area of use (hundreds of kilometres) is no study area either."""
    with pytest.raises(ParameterError, match=NEEDS):
        geopriv.synthesize(deaths.to_crs(32630), 1.0, rng=0)


def test_the_plan_refuses_before_any_row(deaths):
    with pytest.raises(ParameterError, match=NEEDS) as err:
        plan_synthetic(deaths.crs, geopriv.PrivateMeasure(1.0, dim=2))
    assert err.value.fix == STUDY_AREA_FIX


def test_the_data_errors_still_come_first(deaths):
    """Rows outside any area are the data's error (a wrong CRS label explains a "missing" area)."""
    bad = gpd.GeoDataFrame(geometry=gpd.points_from_xy([0.0, float("nan")], [0.0, 1.0]), crs=3857)
    with pytest.raises(geopriv.GeoprivError) as err:
        geopriv.synthesize(bad, 1.0, rng=0)
    assert NEEDS not in str(err.value)


def test_a_region_or_bounds_declare_it(deaths):
    region = gpd.read_file(geopriv.__path__[0] + "/data/study_area.gpkg")  # Soho's public area, EPSG:3857
    by_region = geopriv.synthesize(deaths, 1.0, region=region, rng=0).attrs["geopriv"]
    assert by_region["frame_area"] == "region" and by_region["public_area"] == pytest.approx(SOHO_BOUNDS)
    by_bounds = geopriv.synthesize(deaths, 1.0, bounds=SOHO_BOUNDS, rng=0).attrs["geopriv"]
    assert by_bounds["frame_area"] == "bounds" and by_bounds["declared_bounds"] == pytest.approx(SOHO_BOUNDS)


def test_a_lazy_release_is_refused_when_built(deaths):
    dask_geopandas = pytest.importorskip("dask_geopandas")
    lazy = dask_geopandas.from_geopandas(deaths, npartitions=2)
    with pytest.raises(ParameterError, match=NEEDS) as err:
        lazy.priv.synthesize(1.0, rng=0)
    assert err.value.fix == STUDY_AREA_FIX


# ---------------------------------------------------------------------------- the command line
def test_the_cli_refuses_it_as_heatmap_does_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "synthetic.gpkg"
    code, _, err = run(capsys, "synthesize", SOHO, out, "--layer", "deaths", "--epsilon", "1", "--seed", "1")
    line = one_line_error(err, NEEDS, "--bounds XMIN YMIN XMAX YMAX", "--region", "WGS 84 / Pseudo-Mercator")
    assert code == 2 and not out.exists() and list(tmp_path.iterdir()) == []
    assert "bounds=" not in line and "note:" not in err
    assert line.endswith(STUDY_AREA_FIX.cli)
    tif = tmp_path / "heat.tif"
    code, _, err = run(capsys, "heatmap", SOHO, tif, "--layer", "deaths", "--epsilon", "1", "--resolution", "50")
    assert code == 2 and one_line_error(err, NEEDS).endswith(STUDY_AREA_FIX.cli) and not tif.exists()


def test_the_cli_help_no_longer_offers_the_area_of_use(capsys):
    code, out, _ = run(capsys, "synthesize", "--help")
    text = " ".join(out.split())
    assert code == 0 and "area of use: coarse" not in text and "one of them is needed" in text
