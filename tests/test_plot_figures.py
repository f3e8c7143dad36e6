"""Figures a GIS user trusts (issue 44, item 8): what the public plotting functions draw.

Maps have no raw CRS numbers and no scientific offset on their axes, a scale bar in **ground**
metres (checked against pyproj's geodesics: EPSG:3857 units are 1 / cos(latitude) ground metres
at Soho), a north arrow, context from the shipped public layers (Snow's pumps, Tokyo's
municipalities), colour bars of whole numbers for whole-number data (hops, counts), and titles
in plain words (never a record's internal name such as ``planar_laplace``).
"""

from __future__ import annotations

import math
import re
import subprocess
import sys

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from pyproj import CRS, Transformer

import geopriv
from geopriv import datasets
from geopriv.provenance import MECHANISM_NAMES

pytest.importorskip("matplotlib")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import BoundaryNorm  # noqa: E402

from geopriv import plot  # noqa: E402

SOHO = (-15800.0, 6711900.0, -14600.0, 6713300.0)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def deaths():
    return gpd.read_file(datasets.get_path("soho"), layer="deaths")


@pytest.fixture(scope="module")
def pumps():
    return gpd.read_file(datasets.get_path("soho"), layer="pumps")


@pytest.fixture(scope="module")
def released(deaths):
    return deaths.priv.perturb(level=math.log(4), radius=200, rng=1854)


# ---------------------------------------------------------------------------- helpers
def _scale_bar(ax):
    bars = [a for a in ax.artists if a.get_gid() == plot.SCALE_BAR_GID]
    assert len(bars) == 1, "one scale bar per map"
    return bars[0]


def _bar_metres(bar) -> float:
    """The bar's label in metres ('200 m', '1 km', '2.5 km')."""
    text = bar.txt_label.get_text()
    m = re.fullmatch(r"(\d+(?:\.\d+)?) (m|km)", text)
    assert m, f"scale bar label {text!r} is not a length in m or km"
    return float(m.group(1)) * (1000.0 if m.group(2) == "km" else 1.0)


def _bar_map_units(bar) -> float:
    (rect,) = bar.size_bar.get_children()
    return rect.get_width()


def _geodesic_length(crs, ax, width: float) -> float:
    """Ground metres of a horizontal segment of ``width`` CRS units at the map's centre (pyproj Geod)."""
    crs = CRS.from_user_input(crs)
    cx, cy = np.mean(ax.get_xlim()), np.mean(ax.get_ylim())
    to_geo = Transformer.from_crs(crs, crs.geodetic_crs, always_xy=True)
    (lon0, lon1), (lat0, lat1) = to_geo.transform([cx - width / 2, cx + width / 2], [cy, cy])
    return float(crs.geodetic_crs.get_geod().inv(lon0, lat0, lon1, lat1)[2])


def _north_arrow(ax):
    arrows = [t for t in ax.texts if t.get_gid() == plot.NORTH_ARROW_GID]
    assert len(arrows) == 1 and arrows[0].get_text() == "N"
    return arrows[0]


def _context(ax, name):
    return [c for c in ax.collections if str(c.get_gid()).startswith(f"{plot.CONTEXT_GID}-{name}")]


def _titles(fig) -> list[str]:
    texts = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    return texts + [ax.get_title() for ax in fig.axes]


def _assert_plain_words(fig):
    for text in _titles(fig):
        assert "_" not in text, f"internal name in a title: {text!r}"
        rest = text
        for plain in MECHANISM_NAMES.values():  # a plain name may say "eikonal mechanism" in its words
            rest = rest.replace(plain, "")
        for internal in MECHANISM_NAMES:
            assert internal not in rest, f"internal name {internal!r} in a title: {text!r}"


def _assert_no_offset(ax):
    ax.figure.canvas.draw()
    assert ax.xaxis.get_offset_text().get_text() == ""
    assert ax.yaxis.get_offset_text().get_text() == ""


def _integer_ticks(cb) -> list[float]:
    ticks = list(cb.get_ticks())
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    labels = [
        t.get_text() for t in (cb.ax.get_yticklabels() if cb.orientation == "vertical" else cb.ax.get_xticklabels())
    ]
    assert all(re.fullmatch(r"[−-]?\d+", lab) for lab in labels if lab), labels
    return ticks


# ---------------------------------------------------------------------------- plot_release
def test_the_soho_map_has_no_offset_and_a_scale_bar_in_ground_metres(deaths, released):
    fig = plot.plot_release(deaths, released)
    ax = fig.axes[0]
    _assert_no_offset(ax)
    assert not len(ax.get_xticks()) and not len(ax.get_yticks())  # no raw EPSG:3857 numbers
    bar = _scale_bar(ax)
    metres, width = _bar_metres(bar), _bar_map_units(bar)
    assert bar.length_m == metres and bar.map_units == pytest.approx(width)
    # the bar's length in map units is that many *ground* metres: pyproj's geodesic says so
    assert _geodesic_length("EPSG:3857", ax, width) == pytest.approx(metres, rel=1e-3)
    # ... which is about 1 / cos(latitude) EPSG:3857 units per metre at Soho (51.5 N), not one
    lat = Transformer.from_crs(3857, 4326, always_xy=True).transform(*np.mean([ax.get_xlim(), ax.get_ylim()], axis=1))[
        1
    ]
    assert 51.4 < lat < 51.6
    assert width / metres == pytest.approx(1 / math.cos(math.radians(lat)), rel=5e-3)
    arrow = _north_arrow(ax)
    assert arrow.angle_deg == pytest.approx(0.0, abs=1e-6)  # Web Mercator: grid north is true north


def test_the_soho_map_shows_the_pumps_and_says_what_every_marker_is(deaths, released, pumps):
    fig = plot.plot_release(deaths, released)
    ax = fig.axes[0]
    drawn = _context(ax, "soho_pumps")
    assert drawn, "Snow's pumps are drawn on a map of Soho"
    xy = np.vstack([c.get_offsets() for c in drawn])
    shipped = np.column_stack([pumps.geometry.x, pumps.geometry.y])
    assert len(xy) >= 10 and all(np.hypot(*(shipped - p).T).min() < 1e-6 for p in xy)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for words in ("true location", "released location", "water pump", "Broad Street pump"):
        assert any(words in label for label in labels), (words, labels)


def test_titles_are_in_plain_words(deaths, released):
    fig = plot.plot_release(deaths, released)
    _assert_plain_words(fig)
    assert "geo-indistinguishable" in fig._suptitle.get_text() and "ln 4 within 200 m" in fig._suptitle.get_text()
    assert fig.axes[0].get_title() == MECHANISM_NAMES[released.attrs["geopriv"]["mechanism"]]
    planar = deaths.to_crs(27700).priv.perturb(level=math.log(4), radius=200, rng=1)
    fig = plot.plot_release(deaths.to_crs(27700), planar)
    _assert_plain_words(fig)
    assert fig.axes[0].get_title() == "Planar Laplace (geo-indistinguishability)"


def test_context_is_optional_and_can_be_asked_for(deaths, released):
    ax = plot.plot_release(deaths, released, context=None).axes[0]
    assert not _context(ax, "soho_pumps")
    assert not any("pump" in t.get_text() for t in ax.get_legend().get_texts())
    # the same deaths in British National Grid, context asked for by name: pumps reprojected onto the map
    bng = deaths.to_crs(27700)
    fig = plot.plot_release(bng, released.to_crs(27700), context="soho_pumps", ticks="km")
    ax = fig.axes[0]
    assert _context(ax, "soho_pumps")
    _assert_no_offset(ax)  # km ticks, no '1e6'
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"[\d,]+(\.\d)?", s) for s in labels), labels
    assert "km" in ax.get_xlabel() and "EPSG:27700" in ax.get_xlabel()
    bar = _scale_bar(ax)
    assert _geodesic_length("EPSG:27700", ax, _bar_map_units(bar)) == pytest.approx(_bar_metres(bar), rel=1e-3)


def test_the_demo_map_is_drawn_in_the_new_style(tmp_path, capsys):
    from geopriv.cli import main

    assert main(["demo", "--out", str(tmp_path), "--seed", "1"]) == 0
    assert (tmp_path / "soho_map.png").read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------- synthetic points
def test_synthetic_points_beside_the_truth(deaths):
    synth = deaths.priv.synthesize(2.0, bounds=SOHO, rng=1854)
    fig = plot.plot_synthetic(deaths, synth)
    _assert_plain_words(fig)
    assert "ε = 2" in fig._suptitle.get_text()
    for ax in fig.axes[:2]:
        _assert_no_offset(ax)
        _north_arrow(ax)
        bar = _scale_bar(ax)
        assert _geodesic_length("EPSG:3857", ax, _bar_map_units(bar)) == pytest.approx(_bar_metres(bar), rel=1e-3)
        assert _context(ax, "soho_pumps")
        assert any("public area" in t.get_text() for t in ax.get_legend().get_texts())


# ---------------------------------------------------------------------------- integer colour bars
@pytest.fixture(scope="module")
def told(deaths):
    people = deaths.iloc[:6].set_axis(["alice", "bob", "carol", "dan", "erin", "frank"])
    edges = pd.DataFrame(
        {"who": ["alice", "bob", "carol", "alice", "erin"], "whom": ["bob", "carol", "dan", "erin", "frank"]}
    )
    told, _path = people.priv.diffuse_locations(
        lambda hops: math.log(4) / (100 * (1 + hops)), source="alice", graph=edges, distance="hops", bounds=SOHO, rng=3
    )
    return people, told


def test_hops_get_a_colour_bar_of_whole_numbers(told):
    people, told = told
    fig = plot.plot_diffusion(told, people.loc[["alice"]])
    ax = fig.axes[0]
    (sc,) = [c for c in ax.collections if c.get_gid() == "geopriv-recipients"]
    assert isinstance(sc.norm, BoundaryNorm)  # one flat colour per hop count, not a continuous ramp
    assert _integer_ticks(sc.colorbar) == [1, 2, 3]
    assert "hops from alice" in sc.colorbar.ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "alice's true location (the source)" in labels  # the star is explained
    assert any(label.startswith("what a recipient is told") for label in labels)
    # recipients told the same point are named together, with their hops
    notes = {t.get_text() for t in ax.texts if t.get_gid() is None and ":" in t.get_text()}
    assert "bob, erin: 1 hop" in notes
    _assert_plain_words(fig)
    assert fig._suptitle.get_text() == "What each recipient is told of alice's location"
    _assert_no_offset(ax)
    _north_arrow(ax)
    _scale_bar(ax)


def test_counts_get_a_colour_bar_of_whole_numbers(deaths):
    counts = deaths.priv.aggregate(1.0, cells=100, bounds=SOHO, rng=1854)
    true = geopriv.aggregate(deaths, 1e9, cells=100, bounds=SOHO, rng=1)
    fig = plot.plot_counts(counts, true=true)
    cells = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "geopriv-cells"]
    assert len(cells) == 2 and cells[0].norm is cells[1].norm  # one colour scale for both panels
    ticks = _integer_ticks(cells[-1].colorbar)
    assert min(ticks) <= counts["count"].min() and max(ticks) <= max(counts["count"].max(), true["count"].max())
    _assert_plain_words(fig)
    for ax in fig.axes[:2]:
        _assert_no_offset(ax)
        _scale_bar(ax)


def test_integer_colormap_wide_ranges_still_tick_whole_numbers():
    fig, ax = plt.subplots()
    values = np.arange(0, 501, 7)
    cmap, norm = plot.integer_colormap(values)
    sc = ax.scatter(values, values, c=values, cmap=cmap, norm=norm)
    cb = plot.integer_colorbar(sc, label="count")
    fig.canvas.draw()
    _integer_ticks(cb)
    cmap, norm = plot.integer_colormap([1, 2, 3, 4])
    assert isinstance(norm, BoundaryNorm) and cmap.N == 4 and list(norm.boundaries) == [0.5, 1.5, 2.5, 3.5, 4.5]


# ---------------------------------------------------------------------------- traces
def test_the_traces_title_says_what_happened_in_plain_words():
    fixes = gpd.read_file(datasets.get_path("geolife")).drop(columns=["id", "sequence"])
    queries = geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", rng=7)
    traces = queries.priv.sanitize_traces(
        traj_id="trajectory_id",
        time="t",
        bounds=(115.4, 39.4, 117.6, 41.1),
        level=math.log(10),
        radius=100,
        rate=0.033,
        rng=7,
    )
    fig = plot.plot_traces(queries, traces)
    predicted = int((traces["status"] == "predicted").sum())
    assert fig._suptitle.get_text() == (
        f"Private traces: {predicted} of {len(traces)} points answered from the prediction, spending no budget"
    )
    _assert_plain_words(fig)
    ax = fig.axes[0]
    assert "ln 10 within 100 m for each whole trace" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    spent = int((traces["status"] == "exhausted").sum())
    assert f"not released, the trace's budget was spent: {spent}" in labels
    assert any(label.startswith("answered from the prediction (no budget)") for label in labels)
    _assert_no_offset(ax)
    bar = _scale_bar(ax)  # drawn in the data's UTM zone (longitude/latitude are not square)
    assert "EPSG:32650" in " ".join(t.get_text() for t in ax.texts)
    assert _geodesic_length("EPSG:32650", ax, _bar_map_units(bar)) == pytest.approx(_bar_metres(bar), rel=1e-3)


# ---------------------------------------------------------------------------- Tokyo
@pytest.fixture(scope="module")
def tokyo_map():
    return geopriv.PrivacyMap.from_population(
        str(datasets.get_path("tokyo_density_40")), epsilon_range=(math.log(4) / 3000, math.log(4) / 600)
    )


def test_the_tokyo_privacy_map_has_its_municipalities_and_a_true_north_arrow(tokyo_map):
    fig = plot.plot_privacy_map(tokyo_map)
    ax = fig.axes[0]
    assert _context(ax, "tokyo_municipalities"), "Tokyo's municipality boundaries are drawn on a Tokyo map"
    _assert_no_offset(ax)
    bar = _scale_bar(ax)
    assert _geodesic_length("EPSG:30166", ax, _bar_map_units(bar)) == pytest.approx(_bar_metres(bar), rel=1e-3)
    # EPSG:30166's central meridian is 136 E: at Tokyo (139.7 E) true north is about 2 degrees off grid north
    assert 1.0 < abs(_north_arrow(ax).angle_deg) < 4.0
    _assert_plain_words(fig)
    assert "ε per km" in fig.axes[1].get_ylabel()


def test_plot_mechanism_titles_name_the_mechanism_in_plain_words():
    from rasterio import Affine

    x = np.linspace(0, 1, 12)
    eps = 1e-3 * (1 + 1.5 * np.exp(-((x[None, :] - 0.5) ** 2 + (x[:, None] - 0.5) ** 2) / 0.05))
    pm = geopriv.PrivacyMap.from_epsilon(eps, transform=Affine(400, 0.0, 500_000, 0.0, -300, 4_000_000), crs=32654)
    mech = geopriv.EikonalMechanism.build(pm, margin=0.1, max_step=1)
    fig = plot.plot_mechanism(mech, [(pm.node_x[5], pm.node_y[5])])
    _assert_plain_words(fig)
    assert fig._suptitle.get_text().startswith(MECHANISM_NAMES["eikonal"])
    maps = [ax for ax in fig.axes if ax.get_label() != "<colorbar>" and ax.get_visible()]
    assert [ax.get_title() for ax in maps] == ["Privacy map (ε per km)", "Released from u1: ε = 2.38 per km there"]
    for ax in maps:
        _assert_no_offset(ax)
        _scale_bar(ax)


# ---------------------------------------------------------------------------- matplotlib stays optional
def test_plot_imports_without_matplotlib():
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name=name)
sys.meta_path.insert(0, Block())
import geopriv.plot as plot
assert "matplotlib" not in sys.modules
try:
    plot.require_matplotlib()
except ImportError as exc:
    print(type(exc).__name__)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "MissingDependencyError", done.stderr
