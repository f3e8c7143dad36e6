"""geopriv.report.release_report: the release report, one self-contained HTML file for the data holder.

The report is rendered in a real headless Chromium (Debian's package, installed by scripts/test.sh as QGIS
is): it must load offline without a single console message and show all its figures.  Without Chromium
these rendering tests skip, except where GEOPRIV_REQUIRE_CHROMIUM=1 (scripts/test.sh), where they fail.
Nothing here is statistical beyond fixed seeds.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geopriv
from geopriv import io
from geopriv.exceptions import GeoprivError, OutputError, ParameterError
from geopriv.report import MIN_MAP_CELL_M, REPORT_SUFFIX, guarantee, release_report, report_path

from .conftest import data_path

LN4_200 = {"level": math.log(4), "radius": 200}


@pytest.fixture(scope="module")
def deaths():
    return io.read_vector(data_path("soho_cholera.gpkg"), "deaths")


@pytest.fixture(scope="module")
def released(deaths):
    return geopriv.perturb(deaths, rng=1, **LN4_200)


@pytest.fixture(scope="module")
def report_html(deaths, released):
    return release_report(deaths, released)


def text_of(doc: str) -> str:
    """The report without its embedded images."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:image/png;base64,", doc)


# ---------------------------------------------------------------------------- the guarantee
def test_guarantee_sentence_from_epsilon_per_metre():
    g = guarantee({"epsilon_per_m": math.log(4) / 200}, 200)
    assert "odds of being at A rather than B change by at most 4x when A and B are within 200 m" in g["sentence"]
    assert g["factor"] == pytest.approx(4.0)
    assert g["basis"] == "epsilon_per_m"
    row = g["table"].set_index("distance_m").loc[100.0]
    assert row["odds_factor"] == pytest.approx(2.0)
    # the effective epsilon (with the finite-precision term) is the one the guarantee rests on
    eff = guarantee({"epsilon_per_m": math.log(4) / 200, "effective_epsilon_per_m": math.log(4.1) / 200}, 200)
    assert "at most 4.1x" in eff["sentence"] and eff["basis"] == "effective_epsilon_per_m"


def test_guarantee_of_traces_location_dependent_and_synthetic_releases():
    trace = guarantee({"epsilon_per_m": math.log(10) / 100, "traj_id": "tid", "mechanism": "predictive_trace"}, 100)
    assert "trace A rather than trace B change by at most 10x" in trace["sentence"]
    eik = guarantee(
        {"mechanism": "eikonal", "epsilon_min_per_m": math.log(2) / 200, "epsilon_max_per_m": math.log(8) / 200}, 200
    )
    assert "at most 8x" in eik["sentence"] and "by at most 2x" in eik["sentence"]
    assert eik["basis"] == "epsilon_max_per_m"
    syn = guarantee({"epsilon": math.log(3), "n_people": 10}, 200)
    assert "at most 3x, for any A and B" in syn["sentence"] and syn["epsilon_per_m"] is None
    with pytest.raises(GeoprivError, match="states no epsilon"):
        guarantee({"mechanism": "aggregate", "epsilon": 1.0}, 200)


# ---------------------------------------------------------------------------- contents
def test_report_sections_and_public_parameters(report_html, released):
    doc = report_html
    assert doc.startswith("<!DOCTYPE html>")
    for section in ("guarantee", "parameters", "utility", "adversary", "maps", "reveals"):
        assert f'<section id="{section}">' in doc
    assert "Private: for the data holder, not for publication." in doc
    assert "change by at most 4.01x when A and B are within 200 m" in doc  # effective epsilon of the 1 m lattice
    record = released.attrs["geopriv"]
    for key in record:  # every public parameter is shown
        assert f"<td>{key}</td>" in doc
    assert "square cells of 100 m (ground metres)" in doc
    assert "Wasserstein-1 distance between the two point sets" in doc
    n_figures = int(re.search(r'data-figures-expected="(\d+)"', doc).group(1))
    assert n_figures == doc.count("<img ") >= 3


def test_report_is_self_contained(report_html):
    doc = text_of(report_html)
    assert "Content-Security-Policy" in doc and "default-src 'none'" in doc
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#|data:)""", doc)  # only in-page links and data: images
    assert "http://" not in doc and "https://" not in doc and "url(" not in doc and "@import" not in doc


def test_report_never_prints_a_true_coordinate(report_html, deaths):
    """No number in the report's text is within 1 CRS unit (about 0.6 m here) of a true x or y."""
    xy = np.column_stack([deaths.geometry.x, deaths.geometry.y])
    values = np.unique(xy.ravel())
    numbers = [
        float(m.replace(",", "")) for m in re.findall(r"-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?", text_of(report_html))
    ]
    assert numbers
    close = [v for v in numbers if np.min(np.abs(values - v)) <= 1.0]
    assert close == []


def test_returns_html_or_writes_an_owner_only_file_once(deaths, released, tmp_path):
    path = tmp_path / ("released" + REPORT_SUFFIX)
    written = release_report(deaths, released, path)
    assert Path(written) == path and path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # private: readable by its owner only
    before = path.read_bytes()
    with pytest.raises(OutputError, match="exists"):
        release_report(deaths, released, path)
    assert path.read_bytes() == before
    release_report(deaths, released, path, overwrite=True, title="Second")
    assert "Second" in path.read_text(encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind
    with pytest.raises(OutputError, match=r"must end in \.html"):
        release_report(deaths, released, tmp_path / "report.txt")
    assert report_path("out/homes_private.gpkg") == Path("out/homes_private.private-report.html")


def test_refusals(deaths, released):
    with pytest.raises(ParameterError, match="finer than 100 m"):
        release_report(deaths, released, map_cell=MIN_MAP_CELL_M / 2)
    bare = released.copy()
    bare.attrs = {}
    with pytest.raises(GeoprivError, match="no release record"):
        release_report(deaths, bare)
    with pytest.raises(ParameterError, match="min_count"):
        release_report(deaths, released, min_count=0)


#: a public rectangle around Soho (EPSG:3857), chosen without looking at the points
SOHO_AREA = (-16500.0, 6711000.0, -13800.0, 6714200.0)


def test_adversary_section(deaths, released):
    """The optimal adversary (geopriv.adversary) on a declared public area: its expected error is close to planar
    Laplace's 2 / epsilon in the open (289 m), less near the area's edges; its error on these points is reported."""
    doc = release_report(deaths, released, area=SOHO_AREA, cell=60)
    text = text_of(doc)
    section = text[text.index('<section id="adversary">') : text.index('<section id="maps">')]
    expected = float(re.search(r"optimal adversary&#x27;s expected error \(m\)</td><td>([\d.]+)<", section).group(1))
    assert 200 < expected < 2 / released.attrs["geopriv"]["epsilon_per_m"]
    assert "adversary&#x27;s error on these points: mean (m)" in section
    assert "needs a population raster" in section
    assert 'alt="adversary error map"' in section
    # without a public area the section says how to give one, and the rest of the report is there
    bare = release_report(deaths, released)
    assert "Not computed" in bare[bare.index('<section id="adversary">') : bare.index('<section id="maps">')]
    assert "area=" in bare


def test_eikonal_release_with_its_mechanism_and_a_population():
    """A location-dependent release: the guarantee by place from the privacy map, the adversary of the mechanism
    itself, and the k-equivalent from a population on its grid (people per km2)."""
    import geopandas as gpd
    from rasterio.transform import from_origin

    x = np.linspace(0, 1, 12)
    eps = 1e-3 * (1 + 1.5 * np.exp(-((x[None, :] - 0.5) ** 2 + (x[:, None] - 0.5) ** 2) / 0.05))
    pm = geopriv.PrivacyMap.from_epsilon(eps, transform=from_origin(500_000, 4_000_000, 400, 300), crs=32654)
    mech = geopriv.EikonalMechanism.build(pm, margin=0.1, max_step=1)
    xy = np.random.default_rng(3).uniform([500_400, 3_996_900], [504_400, 3_999_700], size=(300, 2))
    true = gpd.GeoDataFrame(geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=32654)
    out = geopriv.perturb(true, mechanism=mech, rng=4)
    doc = release_report(true, out, mechanism=mech, population=np.full((12, 12), 500.0))
    hi, lo = math.exp(float(eps.max()) * 200), math.exp(float(eps.min()) * 200)
    assert f"at most {hi:.3g}x when A and B are within 200 m of each other, wherever they are" in doc
    assert f"by at most {lo:.3g}x" in doc
    assert 'alt="guarantee by place"' in doc and "verified on its grid" in doc
    assert 'alt="adversary k map"' in doc
    k = float(
        re.search(r"people expected in the adversary&#x27;s 90 % region</td><td>([\d,.]+)<", doc)
        .group(1)
        .replace(",", "")
    )
    assert k > 0
    assert "<td>the mechanism&#x27;s privacy map</td>" in doc


def test_min_count_and_map_cell(deaths, released):
    doc = release_report(deaths, released, map_cell=250, min_count=3)
    assert "square cells of 250 m" in doc and "cells with fewer than 3 are blank" in doc


def test_synthetic_release_is_compared_as_a_distribution(deaths):
    b = deaths.total_bounds
    pad = 200.0
    synthetic = geopriv.synthesize(deaths, 1.0, bounds=(b[0] - pad, b[1] - pad, b[2] + pad, b[3] + pad), rng=2)
    doc = release_report(deaths, synthetic)
    assert "belongs to nobody" in doc and "for any A and B in the public area" in doc
    assert "mean displacement" not in doc
    assert "Wasserstein-1 distance between the two point sets" in doc


def test_trace_release_counts_withheld_rows():
    fixes = io.read_vector(data_path("geolife_sample.gpkg"))
    fixes["t"] = pd.to_datetime(fixes["t"], format="ISO8601")
    out = geopriv.sanitize_traces(
        fixes,
        level=math.log(10),
        radius=100,
        traj_id="trajectory_id",
        time="t",
        rate=0.033,
        rng=1,
        bounds=(116.2, 39.8, 116.7, 40.2),
    )
    withheld = int(out.geometry.isna().sum())
    assert withheld > 0
    doc = release_report(fixes, out, radius=100)
    assert "trace A rather than trace B change by at most 10x" in doc
    assert f"{withheld:,} released row(s) carry no location" in doc
    assert "counts of true fixes per 1000 m cell" in doc
    # the trace attacks (geopriv.attacks): aggregates over persons only
    attacks = doc[doc.index('<section id="attacks">') : doc.index('<section id="maps">')]
    assert "home attack: persons with a home in the true data" in attacks
    assert "re-identified by their top 2 places" in attacks
    assert "local mean solar time" in attacks  # the time stamps carry a zone and no tz= was given
    assert "optimal adversary's error is computed for point releases" in doc


# ---------------------------------------------------------------------------- command line
def test_cli_report_html(deaths, tmp_path, capsys):
    from geopriv.cli import main

    source = data_path("soho_cholera.gpkg")
    rel = tmp_path / "deaths_private.gpkg"
    assert (
        main(
            ["perturb", str(source), str(rel), "--layer", "deaths", "--level", "ln4", "--radius", "200", "--seed", "3"]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["report", str(source), str(rel), "--layer", "deaths", "--html"]) == 0
    out, err = capsys.readouterr()
    default = tmp_path / "deaths_private.private-report.html"
    assert default.exists() and "mean_m" in out and "private, for the data holder" in err
    assert "change by at most 4.01x when A and B are within 200 m" in default.read_text(encoding="utf-8")
    # refused without --overwrite; replaced with it
    assert main(["report", str(source), str(rel), "--layer", "deaths", "--html"]) != 0
    assert "exists. Pass --overwrite" in capsys.readouterr().err
    chosen = tmp_path / "mine.html"
    assert main(["report", str(source), str(rel), "--layer", "deaths", "--html", str(chosen), "--map-cell", "200"]) == 0
    assert "square cells of 200 m" in chosen.read_text(encoding="utf-8")
    assert main(["report", str(source), str(rel), "--layer", "deaths", "--map-cell", "200"]) != 0
    assert "add --html" in capsys.readouterr().err
    # without a declared area the adversary section says how to give one; --bounds gives it
    assert "Give the public area with --bounds" in default.read_text(encoding="utf-8")
    assert (
        main(
            [
                "report",
                str(source),
                str(rel),
                "--layer",
                "deaths",
                "--html",
                "--overwrite",
                "--bounds",
                *map(str, SOHO_AREA),
            ]
        )
        == 0
    )
    assert "optimal adversary&#x27;s expected error (m)" in default.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------- in a real browser
def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("GEOPRIV_REQUIRE_CHROMIUM") == "1":
            pytest.fail(
                "GEOPRIV_REQUIRE_CHROMIUM=1 but chromium is not installed (scripts/test.sh installs "
                "Debian's package: apt-get install chromium)",
                pytrace=False,
            )
        pytest.skip("chromium is not installed (scripts/test.sh installs Debian's package)")
    return exe


def browse(page: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    """Headless Chromium on ``page``, with every network request sent to a closed loopback port (offline)."""
    args = [
        chromium(),
        "--headless=new",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--proxy-server=127.0.0.1:9",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
        page.as_uri(),
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=180, check=False)


def test_report_renders_in_headless_chromium(deaths, released, tmp_path):
    """The report loads offline without any console message (a script error or a blocked load would log one), every
    figure decodes (naturalWidth > 0, counted by the report's own script), and a screenshot is not blank."""
    page = Path(release_report(deaths, released, tmp_path / ("soho" + REPORT_SUFFIX)))
    # --virtual-time-budget: the DOM is dumped after the page's load handlers and any timers have run
    done = browse(page, tmp_path, "--virtual-time-budget=5000", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    body = re.search(r"<body[^>]*>", done.stdout).group(0)
    expected = int(re.search(r'data-figures-expected="(\d+)"', body).group(1))
    loaded = int(re.search(r'data-figures-loaded="(\d+)"', body).group(1))
    assert loaded == expected >= 3

    shot = tmp_path / "report.png"
    done = browse(page, tmp_path, "--hide-scrollbars", "--window-size=1100,3000", f"--screenshot={shot}")
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as im:
        rgb = np.asarray(im.convert("RGB"))
    assert rgb.shape[:2] == (3000, 1100)
    assert (rgb.min(axis=2) < 200).mean() > 0.03  # text and figures, not a blank page
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 100  # colour maps, not just text


def test_a_broken_page_is_caught(tmp_path):
    """The check above can fail: a script error reaches the console."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>", encoding="utf-8")
    done = browse(page, tmp_path, "--dump-dom")
    console = "\n".join(line for line in done.stderr.splitlines() if ":CONSOLE" in line)
    assert "undefinedFunction" in console
