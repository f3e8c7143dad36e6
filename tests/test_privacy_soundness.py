"""Adversarial tests: a release may depend on the data only through the noise.

Each test states the attack in its docstring.  Statistical tests state their false-failure
rate and carry a *negative control*: the old, broken behaviour (data-centred frame,
data-anchored lattice, unrounded float output) re-implemented here, inside the test, and shown
to be caught by the very same attack and threshold.

Only the shipped ``geopriv/data/soho_cholera.gpkg`` and synthetic points are used, so the file
runs from a fresh clone.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
import shapely
from pyproj import CRS, Geod, Transformer
from scipy.stats import binom

import geopriv
from geopriv.cli import main as cli_main
from geopriv.frame import public_frame, public_lattice

SOHO = Path(geopriv.__file__).parent / "data" / "soho_cholera.gpkg"
LN4 = math.log(4)
WGS84 = Geod(ellps="WGS84")
# a local-origin CRS (site grid): transverse Mercator with its origin in central London, k = 1
LOCAL_CRS = CRS.from_proj4(
    "+proj=tmerc +lat_0=51.5 +lon_0=-0.13 +k=1 +x_0=0 +y_0=0 +ellps=WGS84 +units=m +no_defs +type=crs"
)
LOCAL_BOUNDS = (-5000.0, -5000.0, 5000.0, 5000.0)


# ---------------------------------------------------------------------------- fixtures and helpers
@pytest.fixture(scope="module")
def deaths():
    """The shipped Soho cholera deaths (324 points, EPSG:3857); attribute columns dropped."""
    return gpd.read_file(SOHO, layer="deaths", engine="pyogrio")[["geometry"]]


@pytest.fixture(scope="module")
def madrid():
    """A different synthetic point set (60 points around Madrid), EPSG:4326; inside UTM zone 30."""
    rng = np.random.default_rng(12345)
    return gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(-3.70 + rng.uniform(-0.05, 0.05, 60), 40.42 + rng.uniform(-0.05, 0.05, 60)),
        crs=4326,
    )


_NUM = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def numbers_in(obj):
    """Every number in ``obj``: numeric values, and numbers written inside strings (JSON or text), recursively."""
    if obj is None or isinstance(obj, (bool, np.bool_)):
        return
    if isinstance(obj, (int, float, np.integer, np.floating)):
        yield float(obj)
    elif isinstance(obj, (bytes, bytearray)):
        yield from numbers_in(obj.decode("utf-8", "replace"))
    elif isinstance(obj, str):
        try:
            parsed = json.loads(obj)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            yield from numbers_in(parsed)
        for m in _NUM.finditer(obj):
            try:
                yield float(m.group())
            except ValueError:  # pragma: no cover
                pass
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from numbers_in(k)
            yield from numbers_in(v)
    elif isinstance(obj, (list, tuple, set)):
        for v in obj:
            yield from numbers_in(v)


def coordinate_views(points: gpd.GeoDataFrame):
    """(label, xs, ys, tolerance) of the points in their CRS, EPSG:4326 and their UTM zone.

    Tolerance: 1 km in metre-like CRS units, 0.01 degree in longitude/latitude.
    """
    views = []
    utm = points.to_crs(4326).estimate_utm_crs()
    for crs in (points.crs, CRS.from_epsg(4326), utm):
        c = points.to_crs(crs).get_coordinates()
        views.append((CRS(crs).to_string(), c.x.to_numpy(), c.y.to_numpy(), 0.01 if CRS(crs).is_geographic else 1000.0))
    return views


def assert_no_coordinates(obj, points: gpd.GeoDataFrame, what: str):
    nums = np.array(sorted(set(numbers_in(obj))), dtype=float)
    if nums.size == 0:
        return
    for label, xs, ys, tol in coordinate_views(points):
        for axis, vals in (("x", xs), ("y", ys)):
            d = np.abs(nums[:, None] - vals[None, :])
            hit = d <= tol
            assert not hit.any(), (
                f"{what} holds the number {nums[hit.any(axis=1)][0]!r}, within {tol:g} of a point's {axis} in {label}"
            )


def run_cli(args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli_main([str(a) for a in args])
    return rc, err.getvalue()


def binom_sf(k, n, p):
    """P(Binomial(n, p) >= k)."""
    return float(binom.sf(k - 1, n, p))


def success_bound(L: float) -> float:
    """Best success probability (equal priors) of telling apart two inputs under L-indistinguishability."""
    return math.exp(L) / (1.0 + math.exp(L))


def geodesic_m(lon1, lat1, lon2, lat2):
    return np.asarray(WGS84.inv(lon1, lat1, lon2, lat2)[2], dtype=float)


def old_data_centred_release(lon, lat, eps_per_m, grid_m, rng):
    """NEGATIVE CONTROL: the old release of a one-point data set in longitude/latitude.

    The old code drew noise in an azimuthal equidistant frame centred on the *data's* bounding
    box (for one point: the point itself) and snapped to a grid anchored at that centre
    (``np.round(work / step) * step`` in the working frame), then transformed back.
    ``lon``/``lat`` are arrays: each entry is its own one-point data set.
    """
    lon = np.asarray(lon, float)
    lat = np.asarray(lat, float)
    out = np.empty((len(lon), 2))
    for key in set(zip(lon.tolist(), lat.tolist())):
        sel = (lon == key[0]) & (lat == key[1])
        aeqd = CRS.from_proj4(
            f"+proj=aeqd +lat_0={key[1]!r} +lon_0={key[0]!r} +x_0=0 +y_0=0 +ellps=WGS84 +units=m +type=crs"
        )
        n = int(sel.sum())
        r = rng.standard_gamma(2.0, n) / eps_per_m
        t = rng.random(n) * 2 * math.pi
        work = np.column_stack([r * np.cos(t), r * np.sin(t)])
        if grid_m is not None:
            work = np.round(work / grid_m) * grid_m
        back = Transformer.from_crs(aeqd, 4326, always_xy=True)
        x, y = back.transform(work[:, 0], work[:, 1])
        out[sel] = np.column_stack([x, y])
    return out


# ============================================================================ 1. provenance is public
def _public_options(crs):
    box = (-5.0, 39.0, 1.0, 53.0)  # a public study area holding both London and Madrid, in degrees
    b = Transformer.from_crs(4326, crs, always_xy=True).transform_bounds(*box, densify_pts=21)
    inner = Transformer.from_crs(4326, crs, always_xy=True).transform_bounds(-4.9, 39.1, 0.9, 52.9, densify_pts=21)
    return [
        {},
        {"grid": 25},
        {"continuous": True},
        {"bounds": b},
        {"bounds": b, "region": shapely.box(*inner), "grid": 10},
    ]


@pytest.mark.parametrize("crs", [3857, 4326, 32630])
def test_provenance_identical_for_different_datasets(deaths, madrid, crs):
    """Attack: read the data's location off the published provenance.

    The old code published the data-centred working CRS (lat_0/lon_0 of the data), the scale
    measured over the data's extent, etc.  Two unrelated data sets (Soho, London vs. synthetic
    points around Madrid) released in the same CRS with the same public parameters must give
    byte-identical records apart from ``created_utc`` and ``n``.
    """
    a_data, b_data = deaths.to_crs(crs), madrid.to_crs(crs)
    for opts in _public_options(crs):
        a = geopriv.perturb(a_data, level=LN4, radius=200, **opts).attrs["geopriv"]
        b = geopriv.perturb(b_data, level=LN4, radius=200, **opts).attrs["geopriv"]
        strip = lambda r: {k: v for k, v in r.items() if k not in ("created_utc", "n")}  # noqa: E731
        sa, sb = strip(a), strip(b)
        diff = {k: (sa.get(k), sb.get(k)) for k in set(sa) | set(sb) if sa.get(k) != sb.get(k)}
        assert not diff, f"EPSG:{crs} {opts}: provenance differs between data sets: {diff}"
        assert json.dumps(sa, sort_keys=True) == json.dumps(sb, sort_keys=True)


def test_provenance_identical_for_different_datasets_cli(deaths, madrid, tmp_path):
    """Attack: as above, on the GeoPackage layer metadata the CLI writes (EPSG:3857 inputs)."""
    recs = []
    for name, data in (("soho", deaths), ("madrid", madrid.to_crs(3857))):
        src = tmp_path / f"{name}.gpkg"
        data.to_file(src, engine="pyogrio")
        out = tmp_path / f"{name}_out.gpkg"
        rc, err = run_cli(["perturb", src, out, "--level", "ln4", "--radius", "200", "--no-progress"])
        assert rc == 0, err
        recs.append(json.loads(pyogrio.read_info(out)["layer_metadata"]["geopriv"]))
    a, b = ({k: v for k, v in r.items() if k not in ("created_utc", "n")} for r in recs)
    assert a == b


@pytest.mark.parametrize("crs", [3857, 4326, 32630])
def test_one_point_provenance_holds_no_coordinate(deaths, crs):
    """Attack: for a one-point release, look for any number in the record near the true point.

    Walks every value of ``attrs["geopriv"]`` recursively (numbers, and numbers written inside
    strings); none may be within 1 km (0.01 degree) of the point's coordinates in the data's
    CRS, in EPSG:4326 or in its UTM zone.  Covers the default, grid=25 and continuous releases.
    """
    pt = deaths.iloc[[17]].to_crs(crs)
    for opts in ({}, {"grid": 25}, {"continuous": True}):
        rec = geopriv.perturb(pt, level=LN4, radius=200, **opts).attrs["geopriv"]
        assert_no_coordinates(rec, pt, f"attrs['geopriv'] of a one-point release in EPSG:{crs} {opts}")


def test_one_point_trace_provenance_holds_no_coordinate(deaths):
    """Attack: the same on a one-point trace release (record with its ledger), UTM 30N."""
    pt = deaths.iloc[[17]].to_crs(32630).assign(user="u", t=0.0)
    rec = geopriv.sanitize_traces(pt, traj_id="user", time="t", level=math.log(10), radius=100, rate=0.5).attrs[
        "geopriv"
    ]
    assert_no_coordinates(rec, pt[["geometry"]], "attrs['geopriv'] of a one-point trace release")


@pytest.mark.parametrize("crs", [3857, 4326, 32630])
def test_one_point_cli_metadata_and_sidecar_hold_no_coordinate(deaths, tmp_path, crs):
    """Attack: read the true point from what the CLI writes beside a one-point release.

    The GeoPackage layer metadata (``perturb IN OUT.gpkg --level ln4 --radius 200``) and the
    ``.geopriv.json`` sidecar of a GeoJSON output: no number within 1 km / 0.01 degree of the
    point in its CRS, EPSG:4326 or its UTM zone.
    """
    pt = deaths.iloc[[17]].to_crs(crs)
    src = tmp_path / "one.gpkg"
    pt.to_file(src, engine="pyogrio")
    gpkg = tmp_path / "out.gpkg"
    rc, err = run_cli(["perturb", src, gpkg, "--level", "ln4", "--radius", "200", "--no-progress"])
    assert rc == 0, err
    meta = pyogrio.read_info(gpkg)["layer_metadata"]
    assert meta and "geopriv" in meta
    assert_no_coordinates(meta, pt, "GeoPackage layer metadata")
    assert_no_coordinates(err, pt, "the CLI's stderr summary")

    gj = tmp_path / "out.geojson"
    rc, err = run_cli(["perturb", src, gj, "--level", "ln4", "--radius", "200", "--no-progress"])
    assert rc == 0, err
    sidecar = gj.with_name(gj.name + ".geopriv.json")
    assert sidecar.exists()
    assert_no_coordinates(sidecar.read_text(), pt, "the .geopriv.json sidecar")


# ============================================================================ 2. exact true point
def _is_true_point(released_lonlat, lon, lat, tol_m=1e-6):
    return (
        geodesic_m(
            released_lonlat[:, 0],
            released_lonlat[:, 1],
            np.full(len(released_lonlat), lon),
            np.full(len(released_lonlat), lat),
        )
        <= tol_m
    )


def test_grid_release_never_returns_the_true_point(deaths):
    """Attack: with grid=500 the old data-centred grid returned the *exact* true point whenever
    the noise rounded to the centre cell.

    A one-point EPSG:4326 data set released 200 times (200 separate calls) with grid=500 and
    level ln 4 within 400 m (mean noise 577 m, so the grid is accepted) must never return the
    true point.  ln 4 within 200 m with grid=500 (grid coarser than the noise) must be refused.

    Negative control (the old release, re-implemented): 2,000 runs return the true point in
    about 25 % of runs at ln 4 / 400 m and in about 58 % (more than half) at ln 4 / 200 m.
    Thresholds 10 % and 50 %: false-failure rates below 1e-15 and about 1e-22.
    """
    pt = deaths.iloc[[0]].to_crs(4326)
    lon, lat = pt.geometry.iloc[0].x, pt.geometry.iloc[0].y
    out = np.array(
        [
            shapely.get_coordinates(geopriv.perturb(pt, level=LN4, radius=400, grid=500).geometry.values)[0]
            for _ in range(200)
        ]
    )
    hits = int(_is_true_point(out, lon, lat).sum())
    assert hits == 0, f"{hits} of 200 grid=500 releases returned the true point"
    assert not ((out[:, 0] == lon) & (out[:, 1] == lat)).any()
    with pytest.raises(ValueError, match="coarser than the noise"):
        geopriv.perturb(pt, level=LN4, radius=200, grid=500)

    rng = np.random.default_rng(2024)
    for radius, floor in ((400, 0.10), (200, 0.50)):
        ctl = old_data_centred_release(np.full(2000, lon), np.full(2000, lat), LN4 / radius, 500.0, rng)
        rate = _is_true_point(ctl, lon, lat).mean()
        assert rate > floor, f"negative control: old release returned the true point in only {rate:.3f} of runs"


def test_grid_release_never_returns_the_true_point_cli(deaths, tmp_path):
    """Attack: the same through the CLI (``--grid 500``): a file of 200 copies of the one true
    point (200 independent releases) and 5 separate one-point CLI runs never give the true point;
    ``--radius 200 --grid 500`` is refused with exit code 2 and nothing written.
    """
    pt = deaths.iloc[[0]].to_crs(4326)
    lon, lat = pt.geometry.iloc[0].x, pt.geometry.iloc[0].y
    many = gpd.GeoDataFrame(geometry=[pt.geometry.iloc[0]] * 200, crs=4326)
    src = tmp_path / "many.gpkg"
    many.to_file(src, engine="pyogrio")
    out = tmp_path / "many_out.gpkg"
    rc, err = run_cli(["perturb", src, out, "--level", "ln4", "--radius", "400", "--grid", "500", "--no-progress"])
    assert rc == 0, err
    rel = shapely.get_coordinates(gpd.read_file(out, engine="pyogrio").geometry.values)
    assert len(rel) == 200
    assert not _is_true_point(rel, lon, lat).any()

    one = tmp_path / "one.gpkg"
    pt.to_file(one, engine="pyogrio")
    for i in range(5):
        o = tmp_path / f"one_{i}.gpkg"
        rc, err = run_cli(["perturb", one, o, "--level", "ln4", "--radius", "400", "--grid", "500", "--no-progress"])
        assert rc == 0, err
        assert not _is_true_point(
            shapely.get_coordinates(gpd.read_file(o, engine="pyogrio").geometry.values), lon, lat
        ).any()

    bad = tmp_path / "bad.gpkg"
    rc, err = run_cli(["perturb", one, bad, "--level", "ln4", "--radius", "200", "--grid", "500", "--no-progress"])
    assert rc == 2 and "coarser than the noise" in err and not bad.exists()


# ============================================================================ 3. public lattice
def _on_public_lattice(xy, crs, grid_m):
    """True where a released point is a node of the public lattice (computed without any data)."""
    lat = public_lattice(public_frame(crs), grid_m)
    return np.all(lat.snap(xy) == xy, axis=1), lat


def _old_anchor_snap(xy, grid_step):
    """NEGATIVE CONTROL: the old grid, anchored at the data's bounding-box centre."""
    c = (xy.min(axis=0) + xy.max(axis=0)) / 2
    return np.round((xy - c) / grid_step) * grid_step + c


@pytest.mark.parametrize("crs", [32630, 3857, 4326])
def test_lattice_is_the_same_for_different_and_moved_datasets(deaths, madrid, crs):
    """Attack: read where the data is from the lattice phase (x mod step) of the release.

    Soho, Soho moved by (7.3 m, 11.9 m) in the CRS, and unrelated points around Madrid, all in
    the same CRS with grid=25: every released coordinate is a node of the one public lattice
    (fixed by the CRS and the grid alone), i.e. the residues of x / step are identical (zero)
    for all three.  In a planar CRS every difference between released x's of the data sets is
    an integer multiple of the public step.

    Negative control: the old data-anchored grid (centre of each data set's bounding box)
    puts Soho and moved Soho on lattices with different residues.
    """
    soho = deaths.to_crs(crs)
    moved = soho.copy()
    moved["geometry"] = shapely.transform(
        soho.geometry.values, lambda c: c + (7.3, 11.9) if CRS(crs).is_projected else c + (7.3 / 69_000, 11.9 / 111_000)
    )
    sets = {"soho": soho, "moved": moved, "madrid": madrid.to_crs(crs)}
    lattice = None
    released = {}
    for name, data in sets.items():
        xy = shapely.get_coordinates(geopriv.perturb(data, level=LN4, radius=200, grid=25).geometry.values)
        ok, lattice = _on_public_lattice(xy, crs, 25)
        assert ok.all(), f"EPSG:{crs}: {int((~ok).sum())} released points of {name} are off the public lattice"
        released[name] = xy
    if lattice.kind == "planar":
        step = lattice.step
        allx = np.concatenate([released[k][:, 0] for k in released])
        k = (allx - allx[0]) / step
        assert np.allclose(k, np.round(k), atol=1e-6), "released x of different data sets are on different lattices"
        res = {n: np.unique(np.round(np.mod(v[:, 0] / step, 1.0), 6) % 1.0) for n, v in released.items()}
        assert all(np.array_equal(res["soho"], r) for r in res.values()), res
        # negative control: the data-anchored grid moves with the data
        rng = np.random.default_rng(3)
        old = {}
        for n in ("soho", "moved"):
            xy = shapely.get_coordinates(sets[n].geometry.values)
            noisy = xy + rng.laplace(0, 100, xy.shape)
            old[n] = _old_anchor_snap(noisy, step)
        r_old = [np.unique(np.round(np.mod(old[n][:, 0] / step, 1.0), 6)) for n in old]
        assert not np.array_equal(r_old[0], r_old[1]), "negative control failed: old anchored lattices coincide"


def _phase_attack(z, cand, step_m):
    """Guess which of two one-point inputs ``cand`` (2, 2) lon/lat produced each release ``z`` (n, 2).

    The best attack we know from released coordinates: (1) lattice phase: express z in the
    azimuthal equidistant frame centred on each candidate; if z is a grid node of exactly one
    candidate's frame (residue of x / step and y / step below 1e-6), pick it; (2) otherwise the
    likelihood-ratio test of the Laplace density: the geodesically nearer candidate.
    """
    resid = []
    for lon, lat in cand.tolist():
        aeqd = CRS.from_proj4(f"+proj=aeqd +lat_0={lat!r} +lon_0={lon!r} +x_0=0 +y_0=0 +ellps=WGS84 +units=m +type=crs")
        x, y = Transformer.from_crs(4326, aeqd, always_xy=True).transform(z[:, 0], z[:, 1])
        w = np.column_stack([x, y]) / step_m
        resid.append(np.abs(w - np.round(w)).max(axis=1) < 1e-6)
    d0 = geodesic_m(z[:, 0], z[:, 1], np.full(len(z), cand[0, 0]), np.full(len(z), cand[0, 1]))
    d1 = geodesic_m(z[:, 0], z[:, 1], np.full(len(z), cand[1, 0]), np.full(len(z), cand[1, 1]))
    guess = (d1 < d0).astype(int)
    guess = np.where(resid[0] & ~resid[1], 0, guess)
    guess = np.where(resid[1] & ~resid[0], 1, guess)
    return guess


def test_lattice_phase_does_not_tell_apart_two_points_10m_apart(deaths):
    """Attack: tell apart two inputs 10 m apart from single releases, using the lattice phase.

    EPSG:4326, grid=25, epsilon = ln(4)/200 per metre.  x0 is a Soho death, x1 the point 10 m
    to the north-east.  4,000 trials with a fair secret bit: 100 of them as separate one-point
    releases, the other 3,900 as rows of one release (equivalent when the lattice is public,
    which test_lattice_is_the_same_for_different_and_moved_datasets checks).  Under
    eps'-geo-indistinguishability (eps' = the record's effective epsilon) no attack succeeds
    with probability above e^{10 eps'} / (1 + e^{10 eps'}) ~ 0.517.  We fail when the observed
    success is significant at the 1e-6 level against that bound (exact binomial; about
    bound + 0.038 for 4,000 trials): false-failure rate < 1e-6 for a sound release.

    Negative control: the old data-centred grid (re-implemented) is told apart in ~100 % of
    trials by the same attack and fails the same threshold.
    """
    p0 = deaths.iloc[[0]].to_crs(4326).geometry.iloc[0]
    lon1, lat1, _ = WGS84.fwd(p0.x, p0.y, 45.0, 10.0)
    cand = np.array([[p0.x, p0.y], [lon1, lat1]])
    n_single, n_bulk = 100, 3900
    rng = np.random.default_rng()
    secret = rng.integers(0, 2, n_single + n_bulk)

    rel = np.empty((n_single + n_bulk, 2))
    eff = []
    for i in range(n_single):
        one = gpd.GeoDataFrame(geometry=[shapely.Point(cand[secret[i]])], crs=4326)
        r = geopriv.perturb(one, level=LN4, radius=200, grid=25)
        rel[i] = shapely.get_coordinates(r.geometry.values)[0]
        eff.append(r.attrs["geopriv"]["effective_epsilon_per_m"])
    bulk = gpd.GeoDataFrame(geometry=shapely.points(cand[secret[n_single:]]), crs=4326)
    r = geopriv.perturb(bulk, level=LN4, radius=200, grid=25)
    rel[n_single:] = shapely.get_coordinates(r.geometry.values)
    eff.append(r.attrs["geopriv"]["effective_epsilon_per_m"])

    d = float(geodesic_m(cand[0, 0], cand[0, 1], cand[1, 0], cand[1, 1]))
    bound = success_bound(max(eff) * d)
    n = len(secret)
    wins = int((_phase_attack(rel, cand, 25.0) == secret).sum())
    p_value = binom_sf(wins, n, bound)
    assert p_value > 1e-6, f"attack success {wins / n:.4f} exceeds the bound {bound:.4f} (p = {p_value:.2e})"

    # negative control: the old data-centred grid, one-point data sets
    old = old_data_centred_release(cand[secret, 0], cand[secret, 1], LN4 / 200, 25.0, np.random.default_rng(7))
    wins_old = int((_phase_attack(old, cand, 25.0) == secret).sum())
    assert binom_sf(wins_old, n, bound) < 1e-6 and wins_old / n > 0.95, (
        f"negative control not caught: old data-anchored grid told apart in {wins_old / n:.4f} of trials"
    )


# ============================================================================ 4. floating point (Mironov)
N_FP = 40_000


def _last_bit(v):
    m, _ = np.frexp(v)
    return np.abs(m) * 2.0**53 % 2.0 == 1.0


def _not_multiple_2m53(v):
    return np.ldexp(v, 53) % 1.0 != 0.0


def _fp_classifiers(step):
    """Classifiers fixed in advance: each returns True where it guesses x0 (y = 0), else x1 (y = 1 m)."""
    return {
        "last mantissa bit is 1": lambda y: _last_bit(y),
        "y not a multiple of 2^-53": lambda y: _not_multiple_2m53(y),
        "y exactly k * step": lambda y: np.round(y / step) * step == y,
        "low bits, else nearer": lambda y: (
            _not_multiple_2m53(y) | (~_not_multiple_2m53(y) & (np.abs(y) < np.abs(y - 1.0)))
        ),
    }


def _fp_audit(y0, y1, step, bound):
    """Success of each classifier and the p-value of its excess over the bound (one-sided binomial)."""
    n = len(y0) + len(y1)
    out = {}
    for name, clf in _fp_classifiers(step).items():
        wins = int(clf(y0).sum() + (~clf(y1)).sum())
        wins = max(wins, n - wins)  # an attacker may flip any classifier
        out[name] = (wins / n, binom_sf(wins, n, bound))
    return out


def _fp_precision(y0, y1, bound):
    """'Certain x0' events: y not a multiple of 2^-53.  P(x0 | event) may not exceed the bound."""
    k0, k1 = int(_not_multiple_2m53(y0).sum()), int(_not_multiple_2m53(y1).sum())
    k = k0 + k1
    return k0, k1, (binom_sf(max(k0, k1), k, bound) if k else 1.0)


def _local_release(y0, **kw):
    g = gpd.GeoDataFrame(geometry=gpd.points_from_xy(np.zeros(N_FP), np.full(N_FP, y0)), crs=LOCAL_CRS)
    r = geopriv.perturb(g, level=LN4, radius=10, bounds=LOCAL_BOUNDS, **kw)
    return shapely.get_coordinates(r.geometry.values)[:, 1], r.attrs["geopriv"]


def test_floating_point_low_bits_do_not_tell_apart_two_points_1m_apart():
    """Attack (Mironov 2012): tell apart two inputs 1 m apart from the low-order bits of the
    released floats, where coordinates are small (local-origin CRS: a transverse Mercator with
    its origin at the data, declared bounds +-5 km).

    x0 = (0, 0), x1 = (0, 1 m); level ln 4 within 10 m (epsilon 0.139 per metre, so the float
    effects near the origin are frequent); 40,000 releases of each.  Classifiers, fixed in
    advance, on the released y: the parity of the last mantissa bit; whether y is a multiple of
    2^-53 (near 0 the release of x1 = fl(1 + noise) always is, the release of x0 = noise often
    is not); whether y is exactly k * step; and low bits combined with the nearer-candidate rule.
    Each classifier's success (or its flip's) must not exceed e^{eps'} / (1 + e^{eps'}) ~ 0.535
    (eps' the effective epsilon times the 1 m ground distance) at the 1e-6 significance level
    (~ bound + 0.008; an attacker may also flip a classifier): false-failure rate < 1e-5 over
    the four.  The 'certain x0' event (y not a multiple of 2^-53) must not carry more evidence
    than the bound either (binomial test on the events, same level).

    Negative controls: the same classifiers on ``continuous=True`` output of the library and on
    a naive ``x + noise`` float release implemented here: the last-bit classifier succeeds ~0.56
    and the 'certain x0' event is seen hundreds of times under x0 and never under x1.
    """
    y0, rec = _local_release(0.0)
    y1, _ = _local_release(1.0)
    step = public_lattice(public_frame(LOCAL_CRS, bounds=LOCAL_BOUNDS), rec["grid_m"]).step
    lon, lat = Transformer.from_crs(LOCAL_CRS, 4326, always_xy=True).transform([0.0, 0.0], [0.0, 1.0])
    d = float(geodesic_m(lon[0], lat[0], lon[1], lat[1]))
    bound = success_bound(rec["effective_epsilon_per_m"] * d)
    audit = _fp_audit(y0, y1, step, bound)
    for name, (succ, p) in audit.items():
        assert p > 1e-6, f"default release: classifier '{name}' succeeds {succ:.4f} > bound {bound:.4f} (p = {p:.1e})"
    k0, k1, p = _fp_precision(y0, y1, bound)
    assert p > 1e-6, f"default release: 'certain' events {k0} under x0 vs {k1} under x1"

    # negative control 1: continuous=True output of the library
    c0, _ = _local_release(0.0, continuous=True)
    c1, _ = _local_release(1.0, continuous=True)
    # negative control 2: naive float release x + noise, no rounding
    rng = np.random.default_rng(11)
    eps = LN4 / 10

    def naive(y):
        r = rng.standard_gamma(2.0, N_FP) / eps
        return y + r * np.sin(rng.random(N_FP) * 2 * math.pi)

    for label, (a, b) in {"continuous=True": (c0, c1), "naive x + noise": (naive(0.0), naive(1.0))}.items():
        audit_c = _fp_audit(a, b, step, bound)
        caught = [n for n, (_, pv) in audit_c.items() if pv < 1e-6]
        assert "last mantissa bit is 1" in caught, f"negative control {label} not caught: {audit_c}"
        k0c, k1c, pc = _fp_precision(a, b, bound)
        assert pc < 1e-6 and k0c > 100 and k1c == 0, f"negative control {label}: certain events {k0c} vs {k1c}"


# ============================================================================ 5. degenerate parameters
def test_degenerate_privacy_parameters_refused(deaths):
    """Attack: parameters that make the 'noise' vanish or make no sense.

    epsilon=1e300 (noise 2e-300 m: the release is the true point), epsilon=True, level=True,
    radius=True, grid=True and a grid coarser than the noise are refused with errors saying
    what to change; nothing is released.
    """
    for crs in (4326, 3857, 32630):
        pt = deaths.iloc[[0]].to_crs(crs)
        with pytest.raises(ValueError, match="(?i)epsilon"):
            geopriv.perturb(pt, 1e300)
        with pytest.raises(ValueError, match="(?i)epsilon"):
            geopriv.perturb(pt, 1e300, grid=1)
    pt = deaths.iloc[[0]]
    for kwargs, exc, needle in [
        (dict(epsilon=True), TypeError, "bool"),
        (dict(level=True, radius=200), TypeError, "bool"),
        (dict(level=LN4, radius=True), TypeError, "bool"),
        (dict(level=LN4, radius=200, grid=True), TypeError, "bool"),
        (dict(level=LN4, radius=200, grid=300), ValueError, "coarser than the noise"),
        (dict(level=LN4, radius=200, grid=float("nan")), ValueError, "finite"),
        (dict(level=LN4, radius=200, continuous=1), TypeError, "True or False"),
    ]:
        with pytest.raises(exc, match=needle):
            geopriv.perturb(pt, **kwargs)


@pytest.mark.parametrize("eps", [1e300, 1e10])
@pytest.mark.parametrize("crs", [4326, 3857, 32630])
def test_huge_epsilon_with_continuous_refused(deaths, crs, eps):
    """Attack: continuous=True with a huge epsilon returns the true location up to rounding.

    epsilon 1e300 (and 1e10) per metre asks for noise far below the float spacing of the
    coordinates; with continuous=True there is no lattice to refuse it, so the precision check
    must still refuse it (in every frame: longitude/latitude, Web Mercator, UTM).
    """
    pt = deaths.iloc[[0]].to_crs(crs)
    with pytest.raises(ValueError, match="(?i)epsilon"):
        out = geopriv.perturb(pt, eps, continuous=True)
        moved = float(shapely.distance(out.geometry.iloc[0], pt.geometry.iloc[0]))
        pytest.fail(
            f"EPSG:{crs} epsilon={eps:g} continuous=True was accepted and released a point {moved:.3g} CRS "
            "units from the true point"
        )


@pytest.mark.parametrize(
    "kw",
    [{}, {"continuous": True}, {"method": "independent", "continuous": True}],
    ids=["lattice", "continuous", "independent-continuous"],
)
def test_huge_epsilon_refused_for_traces(deaths, kw):
    """Attack: the same degenerate epsilon through sanitize_traces (UTM 30N, one trace).

    epsilon=1e300 per metre: with continuous=True the released points are the true points
    exactly; with the default lattice they are the true point's own 1 m cell, every time.
    Must be refused like perturb refuses it.
    """
    tr = deaths.iloc[:20].to_crs(32630).assign(user=0, t=np.arange(20.0))
    with pytest.raises(ValueError, match="(?i)epsilon"):
        out = geopriv.sanitize_traces(tr, traj_id="user", time="t", epsilon=1e300, rate=0.1, **kw)
        ok = out.geometry.notna().to_numpy()
        dist = shapely.distance(out.geometry.values[ok], tr.geometry.values[ok])
        pytest.fail(
            f"sanitize_traces(epsilon=1e300, {kw}) was accepted: released {ok.sum()} points, "
            f"{int((dist == 0).sum())} of them exactly the true point (max error {dist.max():.3g} m)"
        )


@pytest.mark.parametrize("how", ["bounds", "region"])
@pytest.mark.parametrize("crs", [4326, 3857, 32630])
def test_grid_coarser_than_declared_area_refused(deaths, crs, how):
    """Attack: a grid coarser than the declared bounds= / region= makes every release one of a
    few nodes (the one nearest the data).  It must be refused in every CRS, geographic included.

    Level ln 4 within 10 km (mean noise 14 km, so a 10 km grid passes the noise check); the
    public area is a 0.1 x 0.15 degree box around Soho (about 7 km x 17 km).
    """
    pt = deaths.iloc[[0]].to_crs(crs)
    box = (-0.2, 51.45, -0.1, 51.6)
    b = Transformer.from_crs(4326, crs, always_xy=True).transform_bounds(*box, densify_pts=21)
    area = {"bounds": b} if how == "bounds" else {"region": shapely.box(*b)}
    with pytest.raises(ValueError, match="coarser than the declared area"):
        out = geopriv.perturb(pt, level=LN4, radius=10_000, grid=10_000, **area)
        pytest.fail(
            f"EPSG:{crs} grid=10000 with {how}= of about 7 km x 17 km was accepted "
            f"(frame {out.attrs['geopriv']['frame']!r})"
        )


# ============================================================================ 6. location attributes
def _with_location_columns(deaths):
    ll = deaths.to_crs(4326).get_coordinates()
    return deaths.assign(
        lon=ll.x.to_numpy(),
        lat=ll.y.to_numpy(),
        wkt=deaths.to_crs(4326).geometry.to_wkt().to_numpy(),
        count=np.arange(len(deaths)) % 7,
    )


def test_location_attributes_refused_by_perturb(deaths):
    """Attack: read the true locations from attribute columns the release passes through.

    lon/lat numbers, a WKT column and an index holding x are refused with a
    LocationAttributeError naming each column (and never a coordinate); keep= lets them
    through deliberately.
    """
    data = _with_location_columns(deaths)
    cases = {
        ("lon", "lat"): data[["lon", "lat", "count", "geometry"]],
        ("wkt",): data[["wkt", "count", "geometry"]],
        ("<index>",): data[["count", "geometry"]].set_index(pd.Index(deaths.get_coordinates().x.to_numpy(), name="x")),
    }
    for cols, gdf in cases.items():
        with pytest.raises(geopriv.LocationAttributeError) as ei:
            geopriv.perturb(gdf, level=LN4, radius=200)
        msg = str(ei.value)
        for c in cols:
            assert repr(c) in msg or f"'{c}'" in msg or c in msg, f"message does not name {c!r}: {msg}"
        assert set(ei.value.reasons) == set(cols)
        assert_no_coordinates(msg, deaths, "LocationAttributeError message")
        out = geopriv.perturb(gdf, level=LN4, radius=200, keep=list(cols))
        assert out.attrs["geopriv"]["kept_columns"] == sorted(cols)


def test_location_attributes_refused_by_sanitize_traces(deaths):
    """Attack: the same through sanitize_traces: lon/lat and WKT columns refused, keep= passes."""
    data = (
        _with_location_columns(deaths)
        .to_crs(32630)
        .assign(user=np.arange(len(deaths)) % 5, t=np.arange(len(deaths)) * 60.0)
    )
    for cols in (("lon", "lat"), ("wkt",)):
        gdf = data[list(cols) + ["user", "t", "geometry"]]
        with pytest.raises(geopriv.LocationAttributeError) as ei:
            geopriv.sanitize_traces(gdf, traj_id="user", time="t", level=math.log(10), radius=100, rate=0.1)
        for c in cols:
            assert c in str(ei.value)
        assert_no_coordinates(str(ei.value), deaths, "LocationAttributeError message (traces)")
        out = geopriv.sanitize_traces(
            gdf, traj_id="user", time="t", level=math.log(10), radius=100, rate=0.1, keep=list(cols)
        )
        assert out.attrs["geopriv"]["kept_columns"] == sorted(cols)


def test_location_attributes_refused_by_cli(deaths, tmp_path):
    """Attack: the same through the CLI: exit code 2, one line naming the columns, nothing
    written, no coordinate in the message; ``--keep`` for each lets them through."""
    src = tmp_path / "ll.gpkg"
    _with_location_columns(deaths).to_file(src, engine="pyogrio")
    out = tmp_path / "out.gpkg"
    rc, err = run_cli(["perturb", src, out, "--level", "ln4", "--radius", "200", "--no-progress"])
    assert rc == 2 and not out.exists()
    for c in ("lon", "lat", "wkt"):
        assert f"'{c}'" in err
    assert_no_coordinates(err, deaths, "CLI error")
    rc, err = run_cli(
        [
            "perturb",
            src,
            out,
            "--level",
            "ln4",
            "--radius",
            "200",
            "--no-progress",
            "--keep",
            "lon",
            "--keep",
            "lat",
            "--keep",
            "wkt",
        ]
    )
    assert rc == 0, err
    assert json.loads(pyogrio.read_info(out)["layer_metadata"]["geopriv"])["kept_columns"] == ["lat", "lon", "wkt"]


# ============================================================================ 7. errors hold no coordinates
def _message(fn):
    with pytest.raises(ValueError) as ei:
        fn()
    return str(ei.value)


def test_geometry_errors_hold_no_coordinates(deaths, madrid):
    """Attack: read locations from error messages (logs): points outside the declared bounds=,
    outside the CRS's area of use, NaN points.  The messages name row labels only."""
    g = deaths.to_crs(4326)
    msgs = []
    msgs.append(_message(lambda: geopriv.perturb(g, level=LN4, radius=200, bounds=(-0.14, 51.50, -0.13, 51.52))))
    u = deaths.to_crs(32630)
    msgs.append(_message(lambda: geopriv.perturb(u, level=LN4, radius=200, bounds=(698600, 5710600, 699000, 5711000))))
    msgs.append(
        _message(
            lambda: geopriv.sanitize_traces(
                u.assign(user=0, t=np.arange(len(u)) * 1.0),
                traj_id="user",
                time="t",
                level=math.log(10),
                radius=100,
                rate=0.1,
                bounds=(698600, 5710600, 699000, 5711000),
            )
        )
    )
    both = pd.concat([deaths, madrid.to_crs(3857)], ignore_index=True).to_crs(
        32633
    )  # London / Madrid: outside zone 33's band
    msgs.append(_message(lambda: geopriv.perturb(both, level=LN4, radius=200)))
    nan = g.copy()
    nan.loc[5, "geometry"] = shapely.Point(np.nan, np.nan)
    msgs.append(_message(lambda: geopriv.perturb(nan, level=LN4, radius=200)))
    assert all("label" in m for m in msgs), msgs
    for m in msgs:
        assert_no_coordinates(m, deaths, f"error message {m!r}")


def test_trace_id_errors_hold_no_coordinates(deaths):
    """Attack: read locations from the errors about a bad traj_id (a location column, the
    geometry column, a missing column, missing ids, mixed types)."""
    ll = deaths.to_crs(4326).get_coordinates()
    base = deaths.to_crs(32630).assign(
        user=np.arange(len(deaths)) % 5, t=np.arange(len(deaths)) * 60.0, lon=ll.x.to_numpy(), lat=ll.y.to_numpy()
    )
    run = lambda d, tid, **kw: (
        lambda: geopriv.sanitize_traces(
            d,
            traj_id=tid,
            time="t",
            level=math.log(10),  # noqa: E731
            radius=100,
            rate=0.1,
            **kw,
        )
    )
    nan_ids = base.drop(columns=["lon", "lat"]).astype({"user": float})
    nan_ids.loc[3, "user"] = np.nan
    # fractional ids (here the longitudes themselves, in an object column with text): refused, never shown
    mixed = base.drop(columns=["lon", "lat"]).assign(
        user=pd.Series([ll.x.iloc[i] if i % 2 else "1" for i in range(len(base))], dtype=object, index=base.index)
    )
    msgs = [
        _message(run(base, "lon", keep=["lon", "lat"])),
        _message(run(base, "geometry", keep=["lon", "lat"])),
        _message(run(base, "no_such_column", keep=["lon", "lat"])),
        _message(run(nan_ids, "user")),
        _message(run(mixed, "user")),
    ]
    for m in msgs:
        assert_no_coordinates(m, deaths, f"error message {m!r}")


def test_time_stamp_error_holds_no_coordinates(deaths):
    """Attack: a GPS log where one corrupted time-stamp cell holds the fix's 'lat,lon' text.

    The column is ISO text otherwise, so it is not a location column (1 row in 324); the error
    about the unreadable time stamp must name the row, not echo the cell (a location).
    """
    ll = deaths.to_crs(4326).get_coordinates()
    t = (
        pd.date_range("2024-01-01", periods=len(deaths), freq="min")
        .strftime("%Y-%m-%dT%H:%M:%S")
        .to_numpy()
        .astype(object)
    )
    t[7] = f"{ll.y.iloc[7]:.6f},{ll.x.iloc[7]:.6f}"
    data = deaths.to_crs(32630).assign(user=np.arange(len(deaths)) % 5, t=t)
    msg = _message(
        lambda: geopriv.sanitize_traces(data, traj_id="user", time="t", level=math.log(10), radius=100, rate=0.1)
    )
    assert_no_coordinates(msg, deaths, f"time-stamp error message {msg!r}")


# ============================================================================ 8. traces parameters
def test_trace_parameter_refusals(deaths):
    """Attack: trace ids that are locations or split one user's budget; a budget manager whose
    private test has no threshold.

    traj_id naming the geometry column and FixedRate(delta=0.5) at construction are refused; ids mixing
    '1' and 1 are one trace (one budget: geopriv.identity), never two.
    """
    base = deaths.to_crs(32630).assign(user=np.arange(len(deaths)) % 5, t=np.arange(len(deaths)) * 60.0)
    with pytest.raises(geopriv.GeoprivError, match="geometry column"):
        geopriv.sanitize_traces(base, traj_id="geometry", time="t", level=math.log(10), radius=100, rate=0.1)
    mixed = base.assign(user=pd.Series(["1" if i % 2 else 1 for i in range(len(base))], dtype=object, index=base.index))
    out = geopriv.sanitize_traces(mixed, traj_id="user", time="t", level=math.log(10), radius=100, rate=0.1)
    assert len(geopriv.trace_ledger(out)) == 1  # one user, one budget, however the id is written
    with pytest.raises(ValueError, match="delta"):
        geopriv.FixedRate(rate=0.1, delta=0.5)
    with pytest.raises(ValueError, match="delta"):
        geopriv.FixedUtility(accuracy=100, delta=0.5)
