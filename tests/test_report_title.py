"""geopriv.release_report: the mechanism in plain words (issue 44, item 9) and a finite expected displacement on a
Web Mercator release (issue 44, item 1: it was shown as "—")."""

from __future__ import annotations

import html
import math
import re

import pytest

import geopriv
from geopriv import io
from geopriv.provenance import MECHANISM_NAMES, mechanism_name
from geopriv.report import release_report

from .conftest import data_path

LN4_200 = {"level": math.log(4), "radius": 200}
SOHO = (-15800.0, 6711900.0, -14600.0, 6713300.0)


@pytest.fixture(scope="module")
def deaths():
    return io.read_vector(data_path("soho_cholera.gpkg"), "deaths")


def _row(doc: str, label: str) -> str:
    m = re.search(re.escape(html.escape(label)) + r"</td><td>([^<]*)<", doc)
    assert m is not None, label
    return m.group(1)


def test_a_web_mercator_release_shows_its_expected_displacement_and_the_mechanism_by_name(deaths):
    released = geopriv.perturb(deaths, rng=1, bounds=SOHO, **LN4_200)
    doc = release_report(deaths, released)
    shown = _row(doc, "expected displacement under the prior (m)")
    assert shown != "—" and 200 < float(shown.replace(",", "")) < 260
    assert "<h1>Release report: Planar Laplace (geo-indistinguishability)</h1>" in doc
    assert "<title>PRIVATE: Release report: Planar Laplace (geo-indistinguishability)</title>" in doc
    assert "Release report: planar_laplace" not in doc
    assert release_report(deaths, released, title="Soho").count("<h1>Soho</h1>") == 1


def test_a_lon_lat_release_has_its_adversary_and_its_name(deaths):
    lonlat = deaths.to_crs(4326)
    b = (-0.1419, 51.5094, -0.1312, 51.5172)  # Soho's public rectangle in degrees
    released = geopriv.perturb(lonlat, rng=1, bounds=b, **LN4_200)
    assert released.attrs["geopriv"]["mechanism"] == "spherical_laplace"
    doc = release_report(lonlat, released)
    assert f"<h1>Release report: {html.escape(MECHANISM_NAMES['spherical_laplace'])}</h1>" in doc
    assert 180 < float(_row(doc, "optimal adversary's expected error (m)").replace(",", "")) < 230
    assert 200 < float(_row(doc, "expected displacement under the prior (m)").replace(",", "")) < 260


def test_one_table_of_mechanism_names():
    """Every identifier a release record's "mechanism" holds has a plain name; sentences stay as they are."""
    for key in ("planar_laplace", "spherical_laplace", "eikonal", "predictive_trace", "independent_trace"):
        name = mechanism_name({"mechanism": key})
        assert name == MECHANISM_NAMES[key] and "_" not in name and name[0].isupper()
    sentence = "discrete Laplace counts on a tree of cells, made consistent (Hay et al. 2010)"
    assert mechanism_name({"mechanism": sentence}) == sentence
    assert mechanism_name({}) == "a release"
    assert mechanism_name("planar_laplace") == MECHANISM_NAMES["planar_laplace"]
