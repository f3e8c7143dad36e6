"""EikonalMechanism: location-dependent privacy (Koufogiannis & Pappas), verified.

Statistical tests use fixed seeds; each states its false-failure rate under the model (the
probability that a correct implementation fails for an unlucky seed), and each check of a
privacy property has a negative control that must be rejected by the same test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import zipfile

import geopandas as gpd
import numpy as np
import pytest
import rasterio

import geopriv
from geopriv import EikonalMechanism, PrivacyMap
from geopriv.exceptions import GeometryError, InfeasibleMechanismError, MechanismFileError, MissingCRSError
from geopriv.mechanisms import eikonal as eik
from geopriv.mechanisms.eikonal import kernels as kernels_mod
from geopriv.mechanisms.eikonal import persistence, verification
from geopriv.mechanisms.eikonal import weights as weights_mod
from geopriv.mechanisms.planar_laplace import radius_quantile

from .conftest import data_path

pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")


def from_origin(west, north, xsize, ysize):
    """North-up transform (rasterio.transform.from_origin multiplies Affines, broken with affine 3.0.1)."""
    return rasterio.Affine(xsize, 0.0, west, 0.0, -ysize, north)


BUILD = dict(margin=0.1, smooth=0.5, jump=0.2, max_step=2)


def _coarse_tokyo(factor: int = 4):
    """The shipped raster averaged over factor x factor blocks (no data where a block has none)."""
    with rasterio.open(data_path("tokyo_density_200.tif")) as ds:
        raw = ds.read(1).astype(float)
        t = ds.transform
        crs = ds.crs
    raw[raw < 0] = np.nan
    n = raw.shape[0] // factor
    blocks = raw[: n * factor, : n * factor].reshape(n, factor, n, factor)
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(blocks).sum(axis=(1, 3))
        mean = np.where(valid > 0, np.nansum(blocks, axis=(1, 3)) / np.maximum(valid, 1), np.nan)
    transform = rasterio.Affine(t.a * factor, 0, t.c, 0, t.e * factor, t.f)
    return mean, transform, crs


@pytest.fixture(scope="module")
def tokyo_pm():
    dens, transform, crs = _coarse_tokyo(4)  # 50 x 50 cells of ~2.9 x 2.6 km
    return PrivacyMap.from_population(dens, epsilon_range=(1e-4, 5e-4), transform=transform, crs=crs)


@pytest.fixture(scope="module")
def tokyo_mech(tokyo_pm):
    return EikonalMechanism.build(tokyo_pm, **BUILD)


@pytest.fixture(scope="module")
def const_pm():
    # 41 x 41 cells of 50 m, epsilon 1/200 per metre: 0.25 per cell
    return PrivacyMap.from_epsilon(
        np.full((41, 41), 1 / 200), transform=from_origin(500_000, 4_000_000, 50, 50), crs=32654
    )


@pytest.fixture(scope="module")
def const_mech(const_pm):
    return EikonalMechanism.build(const_pm, margin=0.05, max_step=1)


@pytest.fixture(scope="module")
def tiny_mech():
    x = np.linspace(0, 1, 12)
    eps = 1e-3 * (1 + 1.5 * np.exp(-((x[None, :] - 0.5) ** 2 + (x[:, None] - 0.5) ** 2) / 0.05))
    pm = PrivacyMap.from_epsilon(eps, transform=from_origin(500_000, 4_000_000, 400, 300), crs=32654)
    return EikonalMechanism.build(pm, margin=0.1, max_step=1)


def _dense(mech):
    """Full P matrix (inputs x outputs) from the stored arrays."""
    n = len(mech.normaliser)
    cT = math.exp(-mech.cap)
    K = np.full((n, len(mech.weights)), cT)
    rows = np.repeat(np.arange(n), np.diff(mech.indptr))
    K[rows, mech.indices] += mech.kernel
    return K * mech.weights[None, :] / mech.normaliser[:, None]


# ============================================================================ build and verify
def test_builds_and_verifies_on_the_shipped_raster(tokyo_mech):
    rep = tokyo_mech.report
    assert rep.ok and rep.max_ratio <= 1.0
    assert rep.max_ratio > 0.8  # the budget is used, not wasted
    assert set(rep.worst) >= {"node_a", "node_b", "output", "allowed_log_ratio", "realised_log_ratio"}
    assert rep.n_nodes == 2500 and rep.n_outputs == len(tokyo_mech.weights)
    assert "OK" in str(rep)
    # exact normalisation: every row sums to 1
    cT = math.exp(-tokyo_mech.cap)
    w = tokyo_mech.weights
    for node in (0, 1234, 2499):
        cols, p, floor = tokyo_mech.row(node)
        assert p.sum() + floor == pytest.approx(1.0, abs=1e-12)
    assert np.all(w >= 0)
    assert cT * w.sum() / tokyo_mech.normaliser.min() < 1e-3  # the capped part is negligible
    # a fresh verification of the stored arrays gives the same answer
    assert tokyo_mech.verify().max_ratio == pytest.approx(rep.max_ratio, rel=1e-12)
    # much better than planar Laplace at the smallest epsilon (which also meets the map)
    cmp = tokyo_mech.compare_laplace()
    assert cmp["laplace_mse_m2"] == pytest.approx(6 / 1e-4**2)
    assert cmp["ratio"] < 0.6


def test_verify_matches_a_brute_force_check(tiny_mech):
    P = _dense(tiny_mech)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    pm = tiny_mech.privacy_map
    ny, nx = pm.shape
    hx, hy = pm.cell_size
    eps = pm.epsilon_crs
    L = np.log(P).reshape(ny, nx, -1)
    worst = 0.0
    for di, dj in [(0, 1), (1, 0), (1, 1), (1, -1)]:
        for i in range(ny - di):
            for j in range(max(0, -dj), nx - max(0, dj)):
                allowed = math.hypot(di * hy, dj * hx) * (eps[i, j] + eps[i + di, j + dj]) / 2
                worst = max(worst, float(np.abs(L[i, j] - L[i + di, j + dj]).max()) / allowed)
    assert worst == pytest.approx(tiny_mech.report.max_ratio, rel=1e-9)
    assert worst <= 1.0


def test_negative_controls_are_rejected(tiny_mech):
    # the same kernels against a map asking for twice the privacy: must be caught
    pm = tiny_mech.privacy_map
    stricter = PrivacyMap(pm.epsilon / 2, pm.transform, pm.crs, pm.nodata_mask)
    rep = dataclasses.replace(tiny_mech, privacy_map=stricter).verify()
    assert not rep.ok and rep.max_ratio > 1.5
    # a normaliser that is not the row sum (rows not normalised exactly) is caught too
    s = tiny_mech.normaliser.copy()
    s[40] *= 1.5
    assert not dataclasses.replace(tiny_mech, normaliser=s).verify().ok


def test_build_refuses_when_the_weights_cannot_normalise(tiny_mech):
    with pytest.raises(InfeasibleMechanismError, match="margin"):
        EikonalMechanism.build(tiny_mech.privacy_map, margin=1e-4, max_iter=0, max_step=1)


def test_build_refuses_a_mechanism_that_fails_verification(tiny_mech, monkeypatch):
    from geopriv.mechanisms.eikonal import verification

    real = verification.verify

    def lying_verify(mech, extremes=None, rowsum=None):
        rep = real(mech, extremes, rowsum)
        return dataclasses.replace(rep, max_ratio=1.01)

    monkeypatch.setattr(verification, "verify", lying_verify)
    with pytest.raises(InfeasibleMechanismError, match="Nothing was returned"):
        EikonalMechanism.build(tiny_mech.privacy_map, margin=0.1, max_step=1)


def test_fast_marching_solver_also_verifies(tiny_mech):
    mech = EikonalMechanism.build(tiny_mech.privacy_map, margin=0.1, max_step=1, solver="fmm")
    assert mech.report.ok
    assert mech.params["solver"] == "fmm"


def test_parameters_are_checked(tiny_mech):
    pm = tiny_mech.privacy_map
    with pytest.raises(ValueError, match="margin"):
        EikonalMechanism.build(pm, margin=1.0)
    with pytest.raises(ValueError, match="max_step"):
        EikonalMechanism.build(pm, max_step=3)
    with pytest.raises(ValueError, match="solver"):
        EikonalMechanism.build(pm, solver="magic")
    with pytest.raises(TypeError, match="PrivacyMap"):
        EikonalMechanism.build(np.ones((3, 3)))


# ============================================================================ constant map: planar Laplace
def test_constant_map_is_planar_laplace(const_mech, const_pm):
    """Far from the borders a constant map gives planar Laplace at (1 - margin) epsilon.

    Exact quantities (no sampling): expected squared error of the centre node vs 6/eps^2,
    within 8 % (lattice, 16-neighbour travel times, jitter).  Negative control: Laplace at
    1.25 x epsilon is outside the same tolerance.
    """
    eps_k = 0.95 / 200
    prior = np.zeros(const_pm.shape)
    prior[20, 20] = 1
    mse = const_mech.expected_mse(prior)
    assert mse == pytest.approx(6 / eps_k**2, rel=0.08)
    assert not mse == pytest.approx(6 / (1.25 * eps_k) ** 2, rel=0.08)


def test_constant_map_sampling_statistics_match_laplace(const_mech, const_pm):
    """Sampled radii from the centre: mean, median and 90 % quantile vs planar Laplace.

    n = 40,000 draws, seed 7.  Tolerance 8 % = model difference (<= 4 %) plus >= 5 standard
    errors of each statistic (the mean's relative SE is 0.35 %, the quantiles' about 0.6 %),
    so a correct sampler fails with probability < 1e-6.  Negative control: the same
    statistics against Laplace at 1.25 x epsilon must fail.
    """
    rng = np.random.default_rng(7)
    x0, y0 = const_pm.node_x[20], const_pm.node_y[20]
    out = const_mech.sample(np.tile([x0, y0], (40_000, 1)), rng)
    r = np.hypot(out[:, 0] - x0, out[:, 1] - y0)
    stats = np.array([r.mean(), np.median(r), np.quantile(r, 0.9)])

    def laplace(eps):
        return np.array([2 / eps, float(radius_quantile(0.5, eps)), float(radius_quantile(0.9, eps))])

    eps_k = 0.95 / 200
    np.testing.assert_allclose(stats, laplace(eps_k), rtol=0.08)
    assert np.any(np.abs(stats / laplace(1.25 * eps_k) - 1) > 0.08)
    # the sampler agrees with the exact expected squared error of that node (5 sigma)
    prior = np.zeros(const_pm.shape)
    prior[20, 20] = 1
    se = (r**2).std() / math.sqrt(len(r))
    assert abs((r**2).mean() - const_mech.expected_mse(prior)) < 5 * se


# ============================================================================ empirical privacy
def _log_ratio_bins(a, b, min_count=400):
    """Per output bin: log(freq_a / freq_b) and its standard error (delta method)."""
    keys = np.union1d(a, b)
    ca = np.array([np.count_nonzero(a == k) for k in keys], float)
    cb = np.array([np.count_nonzero(b == k) for k in keys], float)
    ok = (ca >= min_count) & (cb >= min_count)
    est = np.log(ca[ok] / len(a)) - np.log(cb[ok] / len(b))
    se = np.sqrt(1 / ca[ok] + 1 / cb[ok])
    return est, se


def test_empirical_privacy_between_neighbouring_inputs(tokyo_mech):
    """Sampled outputs of two neighbouring nodes never differ by more than the allowed loss.

    For every output drawn >= 400 times from both nodes (200,000 draws each, seed 11) the
    estimated log-ratio minus 5 standard errors must stay below the allowed loss.  With at
    most ~500 such outputs, a correct mechanism fails with probability < 500 * 2.9e-7 < 2e-4
    (Bonferroni; the true ratios are <= allowed).  Negative control: the same test for nodes 6
    cells apart, against the allowed loss of one neighbour step, must detect the violation.
    """
    pm = tokyo_mech.privacy_map
    ny, nx = pm.shape
    dens = np.unravel_index(np.argmax(np.where(pm.nodata_mask, 0, pm.epsilon)), pm.shape)
    a = dens[0] * nx + dens[1]
    b = a + 1
    hx, _ = pm.cell_size
    eps = pm.epsilon_crs.ravel()
    allowed = hx * (eps[a] + eps[b]) / 2
    rng = np.random.default_rng(11)
    n = 200_000
    ya = tokyo_mech.sample_nodes(np.full(n, a), rng)
    yb = tokyo_mech.sample_nodes(np.full(n, b), rng)
    est, se = _log_ratio_bins(ya, yb)
    assert len(est) >= 5
    assert np.all(np.abs(est) - 5 * se <= allowed)
    # negative control
    c = a + 6
    yc = tokyo_mech.sample_nodes(np.full(n, c), rng)
    est, se = _log_ratio_bins(ya, yc)
    assert np.any(np.abs(est) - 5 * se > allowed)


def test_sampler_matches_the_exact_row_and_the_bilinear_mixture(tokyo_mech):
    """G-tests of sampled frequencies against exact probabilities (seed 5, alpha = 1e-6 each)."""
    from scipy.stats import chi2

    pm = tokyo_mech.privacy_map
    rng = np.random.default_rng(5)

    def g_test(draws, p):
        counts = np.bincount(draws, minlength=len(p)).astype(float)
        exp = p * len(draws)
        big = exp >= 5
        o = np.append(counts[big], counts[~big].sum())
        e = np.append(exp[big], exp[~big].sum())
        g = 2 * np.sum(np.where(o > 0, o * np.log(np.maximum(o, 1) / e), 0.0))
        return chi2.sf(g, len(o) - 1)

    x, y = pm.node_x[25], pm.node_y[20]
    p_node = tokyo_mech.distribution(x, y)
    assert g_test(tokyo_mech.sample_nodes(np.full(100_000, 20 * pm.shape[1] + 25), rng), p_node) > 1e-6
    # a location between four nodes: the bilinear mixture of their rows
    hx, hy = pm.cell_size
    u = (x + 0.3 * hx, y - 0.6 * hy)
    p_mix = tokyo_mech.distribution(*u)
    nodes = [20 * 50 + 25, 20 * 50 + 26, 21 * 50 + 25, 21 * 50 + 26]
    lam = [0.7 * 0.4, 0.3 * 0.4, 0.7 * 0.6, 0.3 * 0.6]
    expect = sum(l_ * tokyo_mech.distribution(pm.node_x[k % 50], pm.node_y[k // 50]) for l_, k in zip(lam, nodes))
    np.testing.assert_allclose(p_mix, expect, atol=1e-15)
    out = tokyo_mech.sample(np.tile(u, (100_000, 1)), rng, jitter=False)
    index = {tuple(v): k for k, v in enumerate(np.round(tokyo_mech.output_xy, 6))}
    draws = np.array([index[tuple(v)] for v in np.round(out, 6)])
    assert g_test(draws, p_mix) > 1e-6
    # negative control: the same draws are not distributed like the nearest node's row
    assert g_test(draws, p_node) < 1e-6


# ============================================================================ save / load
def test_save_load_round_trip(tmp_path, tokyo_mech):
    path = tmp_path / "mech.npz"
    digest = tokyo_mech.save(path)
    assert digest == tokyo_mech.mechanism_id
    back = EikonalMechanism.load(path, privacy_map=tokyo_mech.privacy_map, kernels="held")
    assert back.mechanism_id == tokyo_mech.mechanism_id
    np.testing.assert_array_equal(back.weights, tokyo_mech.weights)
    np.testing.assert_array_equal(back.kernel, tokyo_mech.kernel)
    assert back.report.max_ratio == tokyo_mech.report.max_ratio
    xy = np.column_stack([tokyo_mech.privacy_map.node_x[10:30], tokyo_mech.privacy_map.node_y[10:30]])
    np.testing.assert_array_equal(
        back.sample(xy, np.random.default_rng(3)), tokyo_mech.sample(xy, np.random.default_rng(3))
    )
    # saved after a verified build: stamped, so the default load solves nothing (rows on demand), same draws
    again = EikonalMechanism.load(path, verify=True)
    assert again.report.ok and again.verification == "stamp" and not again.kernels_held
    np.testing.assert_array_equal(
        again.sample(xy, np.random.default_rng(3)), tokyo_mech.sample(xy, np.random.default_rng(3))
    )


def test_corrupt_truncated_and_mismatched_files_are_refused(tmp_path, tokyo_mech, tiny_mech):
    path = tmp_path / "mech.npz"
    tokyo_mech.save(path)
    # corrupt one stored weight: checksum
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["weights"] = arrays["weights"].copy()
    arrays["weights"][3] *= 1.0001
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    with pytest.raises(MechanismFileError, match="checksum"):
        EikonalMechanism.load(bad)
    # truncated
    data = path.read_bytes()
    short = tmp_path / "short.npz"
    short.write_bytes(data[: len(data) // 2])
    with pytest.raises(MechanismFileError, match="truncated|corrupt"):
        EikonalMechanism.load(short)
    # another format version
    meta = json.loads(str(arrays["meta"]))
    meta["format_version"] = 99
    arrays["meta"] = np.array(json.dumps(meta))
    future = tmp_path / "future.npz"
    np.savez(future, **arrays)
    with pytest.raises(MechanismFileError, match="version"):
        EikonalMechanism.load(future)
    # not a mechanism at all
    other = tmp_path / "other.npz"
    np.savez(other, a=np.arange(3))
    with pytest.raises(MechanismFileError, match="not a geopriv mechanism"):
        EikonalMechanism.load(other)
    with pytest.raises(MechanismFileError, match="No mechanism file"):
        EikonalMechanism.load(tmp_path / "missing.npz")
    # built for another map
    with pytest.raises(MechanismFileError, match="another privacy map"):
        EikonalMechanism.load(path, privacy_map=tiny_mech.privacy_map)
    assert zipfile.is_zipfile(path)


# ============================================================================ releasing points
@pytest.fixture
def tokyo_points(tokyo_mech):
    pm = tokyo_mech.privacy_map
    rng = np.random.default_rng(2)
    xmin, ymin, xmax, ymax = pm.bounds
    x = rng.uniform(xmin + 20_000, xmax - 20_000, 300)
    y = rng.uniform(ymin + 20_000, ymax - 20_000, 300)
    return gpd.GeoDataFrame(
        {"id": np.arange(300), "v": rng.random(300)},
        geometry=gpd.points_from_xy(x, y),
        crs=pm.crs,
        index=[f"r{i}" for i in range(300)],
    )


def test_accessor_releases_through_the_mechanism(tokyo_mech, tokyo_points):
    before = tokyo_points.copy()
    out = tokyo_points.priv.perturb(mechanism=tokyo_mech, rng=4)
    assert out.index.equals(tokyo_points.index) and list(out.columns) == list(tokyo_points.columns)
    assert out.crs == tokyo_points.crs
    assert not out.geometry.geom_equals(tokyo_points.geometry).any()  # never a true location
    assert before.geometry.geom_equals(tokyo_points.geometry).all()  # input not modified
    rec = out.attrs["geopriv"]
    assert rec["mechanism"] == "eikonal" and rec["mechanism_id"] == tokyo_mech.mechanism_id
    assert rec["verified_max_ratio"] <= 1 and rec["seeded"] is True
    again = tokyo_points.priv.perturb(mechanism=tokyo_mech, rng=4)
    assert out.geometry.geom_equals(again.geometry).all()
    with pytest.raises(ValueError, match="carries its own"):
        tokyo_points.priv.perturb(mechanism=tokyo_mech, epsilon=0.01)


def test_points_in_another_crs_are_reprojected(tokyo_mech, tokyo_points):
    ll = tokyo_points.to_crs(4326)
    out = ll.priv.perturb(mechanism=tokyo_mech, rng=4)
    assert out.crs.to_epsg() == 4326
    d = geopriv.displacement(ll, out)
    assert d.median() < 50_000  # moved by the local noise, not teleported


def test_points_outside_the_raster_name_their_rows(tokyo_mech, tokyo_points):
    pts = tokyo_points.copy()
    pts.loc["r5", "geometry"] = gpd.points_from_xy([0.0], [0.0])[0]
    with pytest.raises(GeometryError, match=r"'r5'") as exc:
        pts.priv.perturb(mechanism=tokyo_mech, rng=1)
    assert "0.0" not in str(exc.value)  # rows are named, coordinates never
    # Beijing points (CRS mismatch with the map): all outside, a clear error
    beijing = gpd.GeoDataFrame(geometry=gpd.points_from_xy([448_000, 449_000], [4_416_000, 4_417_000]), crs=32650)
    with pytest.raises(GeometryError, match="outside the mechanism's privacy map") as exc:
        beijing.priv.perturb(mechanism=tokyo_mech, rng=1)
    # plain labels, both CRSs named, and that geopriv reprojected the points; Python advice in the library
    msg = str(exc.value)
    assert "labels 0, 1." in msg and "np.int64" not in msg and exc.value.labels == [0, 1]
    assert "EPSG:32650" in msg and "EPSG:30166" in msg and "reprojected" in msg
    assert "mech.with_outside('clamp')" in msg and "--outside" not in msg
    # documented fallback: clamp to the raster
    out = pts.priv.perturb(mechanism=tokyo_mech.with_outside("clamp"), rng=1)
    assert out.attrs["geopriv"]["outside"] == "clamp"
    no_crs = gpd.GeoDataFrame(geometry=gpd.points_from_xy([1.0], [2.0]))
    with pytest.raises(MissingCRSError):
        no_crs.priv.perturb(mechanism=tokyo_mech, rng=1)


# ============================================================================ evaluation and plots
def test_expected_mse_units_and_priors(tokyo_mech, const_mech):
    pm = tokyo_mech.privacy_map
    pop = tokyo_mech.expected_mse()
    assert pop == pytest.approx(tokyo_mech.expected_mse("population"))
    assert tokyo_mech.expected_mse("uniform") > pop  # sparse areas get more noise
    assert tokyo_mech.expected_mse(jitter=False) < pop
    with pytest.raises(ValueError, match="shape"):
        tokyo_mech.expected_mse(np.ones((3, 3)))
    with pytest.raises(ValueError, match="population"):
        const_mech.expected_mse("population")
    assert pm.prior().sum() == pytest.approx(1.0)


def test_plots_write_pngs(tmp_path, tokyo_mech):
    pytest.importorskip("matplotlib")
    from geopriv.plot import plot_mechanism, plot_privacy_map

    pm = tokyo_mech.privacy_map
    pts = [(pm.node_x[25], pm.node_y[20]), (pm.node_x[10], pm.node_y[10])]
    fig = plot_privacy_map(pm, points=pts, path=tmp_path / "map.png")
    assert (tmp_path / "map.png").stat().st_size > 10_000
    fig2 = plot_mechanism(tokyo_mech, pts, path=tmp_path / "mech.png")
    assert (tmp_path / "mech.png").stat().st_size > 10_000
    assert len(fig2.axes) >= 3
    import matplotlib.pyplot as plt

    plt.close(fig)
    plt.close(fig2)


def test_exported_at_top_level():
    assert geopriv.EikonalMechanism is EikonalMechanism


# ============================================================================ posterior-mean remap
def test_remap_lowers_expected_error_and_keeps_the_guarantee(tmp_path, tokyo_mech):
    rem = tokyo_mech.with_remap("population")
    # same distribution over outputs: the privacy arrays are untouched, only release positions differ
    for name in ("weights", "kernel", "indices", "normaliser"):
        assert getattr(rem, name) is getattr(tokyo_mech, name)
    assert rem.verify().max_ratio == pytest.approx(tokyo_mech.report.max_ratio)
    assert rem.remap_xy.shape == (len(tokyo_mech.weights), 2)
    # the posterior mean is the Bayes estimator under the prior: it cannot do worse there
    before, after = tokyo_mech.expected_mse(jitter=False), rem.expected_mse(jitter=False)
    assert after < 0.97 * before
    # negative control: a remap to the posterior mean of ANOTHER prior is not optimal for this one
    other = tokyo_mech.with_remap("uniform")
    assert other.expected_mse(jitter=False) > after
    # releases come from the remapped table; positions outside the raster's hull are pulled in
    pm = tokyo_mech.privacy_map
    xmin, ymin, xmax, ymax = pm.bounds
    out = rem.sample(np.column_stack([pm.node_x[5:25], pm.node_y[5:25]]), np.random.default_rng(1), jitter=False)
    assert np.isin(out[:, 0], rem.remap_xy[:, 0]).all()
    gx, gy = rem.remap_xy[:, 0], rem.remap_xy[:, 1]
    assert (gx >= xmin).all() and (gx <= xmax).all() and (gy >= ymin).all() and (gy <= ymax).all()
    # provenance says so, and save/load keeps it (different mechanism id: a different release rule)
    path = tmp_path / "remap.npz"
    rem.save(path)
    back = EikonalMechanism.load(path)
    np.testing.assert_array_equal(back.remap_xy, rem.remap_xy)
    assert back.remap_prior == "population" and back.mechanism_id != tokyo_mech.mechanism_id
    gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy(pm.node_x[5:9], pm.node_y[5:9]), crs=pm.crs)
    res = gdf.priv.perturb(mechanism=back, rng=2)
    assert "posterior mean" in res.attrs["geopriv"]["remap"]


def test_remap_on_a_constant_map_is_symmetric_and_pulls_inwards(const_mech):
    # uniform prior on a square raster: the centre output is its own posterior mean, and every
    # output is pulled towards the raster (never pushed away from it)
    rem = const_mech.with_remap("uniform")
    pm = const_mech.privacy_map
    c = np.array([pm.node_x[20], pm.node_y[20]])
    k = int(np.flatnonzero((const_mech.output_ij == [20, 20]).all(axis=1))[0])
    assert np.abs(rem.remap_xy[k] - c).max() < 1e-6 * 50
    before = np.hypot(*(const_mech.output_xy - c).T)
    after = np.hypot(*(rem.remap_xy - c).T)
    assert (after <= before + 1e-3).all()
    assert (np.abs(rem.remap_xy - c).max(axis=1) <= 20 * 50 + 1e-6).all()  # inside the nodes' hull


# ============================================================================ per-cell margin, weight solve
def test_per_cell_margin_is_accepted_and_verified(tiny_mech):
    pm = tiny_mech.privacy_map
    m = np.full(pm.shape, 0.1)
    m[:, :6] = 0.15
    mech = EikonalMechanism.build(pm, margin=m, max_step=1)
    assert mech.report.ok
    assert mech.params["margin"] == {"min": 0.1, "max": 0.15}
    # the kernels use (1 - margin) * epsilon where the map was not lowered
    k = mech.kernel_epsilon / pm.epsilon_crs
    assert k[:, :6].max() <= 0.85 + 1e-12 and k[:, 6:].max() <= 0.9 + 1e-12
    with pytest.raises(ValueError, match="shape"):
        EikonalMechanism.build(pm, margin=np.full((3, 3), 0.1))
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        EikonalMechanism.build(pm, margin=np.where(m > 0.12, 1.0, 0.1))


def test_truncated_weight_solve_matches_the_full_one(tokyo_pm):
    full = EikonalMechanism.build(tokyo_pm, **BUILD, solve_cap=None)
    fast = EikonalMechanism.build(tokyo_pm, **BUILD)
    assert full.report.ok and fast.report.ok
    # the normaliser is exact either way; only how well it is flattened may differ
    assert fast.params["normaliser_budget_used"] < 1.0
    assert fast.expected_mse() == pytest.approx(full.expected_mse(), rel=0.02)


def test_auto_margin_is_a_tenth_per_noise_length():
    from geopriv.mechanisms.eikonal.lowering import auto_margin

    # cells of 100 m: epsilon x cell = 0.25, 1, 5 / 50, 5, 1
    eps = np.array([[1 / 400, 1 / 100, 1 / 20], [1 / 2, 1 / 20, 1 / 100]])
    pm = PrivacyMap.from_epsilon(eps, transform=from_origin(500_000, 4_000_000, 100, 100), crs=32654)
    # (epsilon per CRS unit: UTM's scale factor 0.9996 moves the values by 4e-4)
    assert auto_margin(pm) == pytest.approx(np.array([[0.1, 0.1, 0.02], [0.01, 0.02, 0.1]]), rel=1e-3)


def test_auto_margin_on_a_fine_map_is_the_uniform_tenth(tiny_mech):
    pm = tiny_mech.privacy_map  # epsilon x cell < 1 everywhere
    auto = EikonalMechanism.build(pm, max_step=1)
    assert auto.params["margin"] == 0.1 and auto.params["margin_rule"].startswith("auto: uniform 0.1")
    assert np.array_equal(auto.weights, tiny_mech.weights) and np.array_equal(auto.kernel, tiny_mech.kernel)


def test_auto_margin_on_a_coarse_map_verifies_and_lowers_the_error():
    dens, transform, crs = _coarse_tokyo(20)  # 10 x 10 cells of ~15 km: epsilon x cell 1.5 .. 7
    pm = PrivacyMap.from_population(dens, epsilon_range=(1e-4, 5e-4), transform=transform, crs=crs)
    auto = EikonalMechanism.build(pm)
    uniform = EikonalMechanism.build(pm, margin=0.1)
    assert auto.report.ok and uniform.report.ok  # the guarantee is verified either way
    assert auto.params["margin_rule"].startswith("auto: 0.1 per noise length")
    assert 0.01 <= auto.params["margin"]["min"] < 0.02 and auto.params["margin"]["max"] < 0.1
    # deterministic (no sampling): less of the loss reserved, less error (measured: 13 % less)
    assert auto.expected_mse(jitter=False) < 0.92 * uniform.expected_mse(jitter=False)


def test_an_infeasible_auto_margin_falls_back_to_the_uniform_tenth(monkeypatch, tiny_mech):
    from geopriv.mechanisms.eikonal import mechanism as mech_module

    pm = tiny_mech.privacy_map
    monkeypatch.setattr(mech_module, "auto_margin", lambda _pm: np.full(pm.shape, 1e-6))  # far too little to normalise
    auto = EikonalMechanism.build(pm, max_step=1)
    assert auto.params["margin"] == 0.1 and "infeasible" in auto.params["margin_rule"] and auto.report.ok
    with pytest.raises(ValueError, match="auto"):
        EikonalMechanism.build(pm, margin="automatic")


def test_suggested_margin_rebuild_verifies_and_uses_less_margin(tiny_mech):
    pm = tiny_mech.privacy_map
    share = tiny_mech.normaliser_share()
    # the normaliser's share of the loss: the margin plus what lowering the kernel map freed on each edge
    assert share.shape == pm.shape and 0 < share.max() < 0.2
    assert tiny_mech.params["normaliser_budget_used"] < 1.0
    assert share.max() == pytest.approx(tiny_mech.params["normaliser_share"])
    m = tiny_mech.suggest_margin(floor=0.03)
    assert m.shape == pm.shape and m.min() >= 0.03 and m.max() <= 0.3
    again = EikonalMechanism.build(pm, margin=m, max_step=1)
    assert again.report.ok
    with pytest.raises(ValueError, match="factor"):
        tiny_mech.suggest_margin(factor=0.9)


# ============================================================================ tampering: checksum, normaliser, signature
def _attacker_sha256(arrays, meta):
    """The file's SHA-256 recomputed from scratch, as anyone can (the digest is unkeyed)."""
    import hashlib

    h = hashlib.sha256()
    h.update(json.dumps(meta, sort_keys=True, default=persistence.json_default).encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(k.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _tamper(src, dst, edit):
    """Rewrite the mechanism file ``src`` as ``dst`` with ``edit(arrays)`` applied and a valid SHA-256.

    The signature (if any) is kept as it was: an attacker without the key cannot recompute it.
    """
    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("meta")))
    check = {k: v for k, v in meta.items() if k not in ("sha256", "hmac_sha256", "report")}
    assert _attacker_sha256(arrays, check) == meta["sha256"]  # the recomputation is the real one
    arrays = {k: v.copy() for k, v in arrays.items()}
    edit(arrays)
    meta["sha256"] = _attacker_sha256(arrays, check)
    np.savez(dst, meta=np.array(json.dumps(meta)), **arrays)
    return dst


def _exact_normaliser(arrays, cap):
    return (
        weights_mod.row_sums(arrays["indptr"], arrays["indices"], arrays["kernel"], arrays["weights"])
        + math.exp(-cap) * arrays["weights"].sum()
    )


def _scale_weights(arrays):
    arrays["weights"][::7] *= 10.0


def test_tampered_weights_with_recomputed_checksum_are_refused(tmp_path, tiny_mech):
    path = tmp_path / "mech.npz"
    tiny_mech.save(path, compact=False)
    bad = _tamper(path, tmp_path / "bad.npz", _scale_weights)
    # what sampling would really draw from breaks the guarantee: this is not a harmless edit
    w = tiny_mech.weights.copy()
    w[::7] *= 10.0
    real = dataclasses.replace(
        tiny_mech,
        weights=w,
        normaliser=_exact_normaliser({**persistence.file_arrays(tiny_mech), "weights": w}, tiny_mech.cap),
    )
    assert real.verify().max_ratio > 1.05
    # the stored normaliser no longer matches the weights: refused, whether or not the full check runs
    for verify in (True, False):
        with pytest.raises(MechanismFileError, match="normaliser that is not the row sums"):
            EikonalMechanism.load(bad, verify=verify)
    # verify() of an in-memory mechanism with edited weights reports it
    rep = dataclasses.replace(tiny_mech, weights=w).verify()
    assert not rep.ok and rep.normaliser_mismatch > 1e-3 and "edited" in str(rep)


def test_consistently_tampered_weights_and_normaliser_are_refused_by_verification(tmp_path, tiny_mech):
    path = tmp_path / "mech.npz"
    tiny_mech.save(path, compact=False)

    def edit(arrays):
        _scale_weights(arrays)
        arrays["normaliser"] = _exact_normaliser(arrays, tiny_mech.cap)

    bad = _tamper(path, tmp_path / "bad.npz", edit)
    with pytest.raises(MechanismFileError, match="does not meet its privacy map"):
        EikonalMechanism.load(bad)  # verify=True is the default
    # the same edit on a signed file is refused by the signature even without the full check
    tiny_mech.save(path, key="secret", compact=False, overwrite=True)
    signed_bad = _tamper(path, tmp_path / "signed_bad.npz", edit)
    with pytest.raises(MechanismFileError, match="signature"):
        EikonalMechanism.load(signed_bad, key="secret", verify=False)


@pytest.mark.parametrize(
    "edit, match",
    [
        (_scale_weights, "normaliser that is not the row sums"),
        (lambda a: a["weights"].__setitem__(5, np.nan), "weights"),
        (lambda a: a["weights"].__setitem__(5, -1.0), "weights"),
        (lambda a: a.__setitem__("weights", np.array(1.0)), "weights has shape"),
    ],
    ids=["scaled", "nan", "negative", "0-d"],
)
def test_tampered_weights_of_a_compact_file_are_refused(tmp_path, tiny_mech, edit, match):
    """The weights of a compact file (kernels recomputed at load) are checked like a full file's."""
    path = tmp_path / "c.npz"
    tiny_mech.save(path)  # compact
    bad = _tamper(path, tmp_path / "bad.npz", edit)
    for verify in (True, False):
        with pytest.raises(MechanismFileError, match=match):
            EikonalMechanism.load(bad, verify=verify, n_jobs=2)


def test_tampered_normaliser_is_refused(tmp_path, tiny_mech):
    path = tmp_path / "mech.npz"
    tiny_mech.save(path, compact=False)

    def edit(arrays):
        arrays["normaliser"][40] *= 1.5

    bad = _tamper(path, tmp_path / "bad.npz", edit)
    for verify in (True, False):
        with pytest.raises(MechanismFileError, match="normaliser"):
            EikonalMechanism.load(bad, verify=verify)


def _first_row_with(arrays, k):
    ip = arrays["indptr"]
    return int(np.flatnonzero(np.diff(ip) >= k)[0])


def _set_weight(value):
    def edit(arrays):
        arrays["weights"][5] = value if not callable(value) else value(arrays["weights"][5])

    return edit


def _index_out_of_range(arrays):
    arrays["indices"][10] = len(arrays["weights"]) + 3


def _negative_index(arrays):
    arrays["indices"][10] = -1


def _duplicate_index(arrays):
    r = _first_row_with(arrays, 2)
    lo = arrays["indptr"][r]
    arrays["indices"][lo + 1] = arrays["indices"][lo]


def _indptr_not_monotone(arrays):
    r = _first_row_with(arrays, 1)
    arrays["indptr"][r + 1] = arrays["indptr"][r] - 1 if arrays["indptr"][r] > 0 else arrays["indptr"][r + 2] + 1


def _negative_kernel(arrays):
    arrays["kernel"][20] = -arrays["kernel"][20]


def _nan_kernel(arrays):
    arrays["kernel"][20] = np.nan


def _output_outside(arrays):
    arrays["output_ij"][0, 0] = 10_000


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize(
    "edit, match",
    [
        (_set_weight(np.nan), "weight.*not finite"),
        (_set_weight(np.inf), "weight.*not finite"),
        (_set_weight(lambda v: -v), "weight.*negative"),
        (_index_out_of_range, "indices outside"),
        (_negative_index, "indices outside"),
        (_duplicate_index, "strictly increasing"),
        (_indptr_not_monotone, "indptr"),
        (_negative_kernel, "kernel values are negative"),
        (_nan_kernel, "kernel values are not finite"),
        (_output_outside, "output_ij outside the padded grid"),
    ],
    ids=[
        "nan-weight",
        "inf-weight",
        "negative-weight",
        "index-too-large",
        "negative-index",
        "duplicate-index",
        "indptr",
        "negative-kernel",
        "nan-kernel",
        "output-outside",
    ],
)
def test_invalid_arrays_are_refused_with_a_rebuild_hint(tmp_path, tiny_mech, edit, match, verify):
    path = tmp_path / "mech.npz"
    tiny_mech.save(path, compact=False)
    bad = _tamper(path, tmp_path / "bad.npz", edit)
    with pytest.raises(MechanismFileError, match=match) as exc:
        EikonalMechanism.load(bad, verify=verify)
    assert "Rebuild" in str(exc.value) and "bad.npz" in str(exc.value)


def test_non_finite_remap_is_refused(tmp_path, tiny_mech):
    path = tmp_path / "remap.npz"
    tiny_mech.with_remap("uniform").save(path, compact=False)

    def edit(arrays):
        arrays["remap_xy"][3, 0] = np.nan

    with pytest.raises(MechanismFileError, match="remap_xy"):
        EikonalMechanism.load(_tamper(path, tmp_path / "bad.npz", edit), verify=False)


def test_signed_file_round_trip_and_wrong_key(tmp_path, tiny_mech):
    path = tmp_path / "signed.npz"
    digest = tiny_mech.save(path, key="correct horse")
    assert digest == tiny_mech.mechanism_id  # the signature does not change the mechanism's id
    back = EikonalMechanism.load(path, key="correct horse")
    assert back.mechanism_id == tiny_mech.mechanism_id and back.report.ok
    assert EikonalMechanism.load(path, key=b"correct horse", verify=False).mechanism_id == tiny_mech.mechanism_id
    with pytest.raises(MechanismFileError, match="signature"):
        EikonalMechanism.load(path, key="wrong key")
    # without a key a signed file loads with the plain checks
    assert EikonalMechanism.load(path).mechanism_id == tiny_mech.mechanism_id
    # a key refuses an unsigned file
    plain = tmp_path / "plain.npz"
    tiny_mech.save(plain)
    with pytest.raises(MechanismFileError, match="not signed"):
        EikonalMechanism.load(plain, key="correct horse")
    # stripping the signature from a signed file does not help
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("meta")))
    del meta["hmac_sha256"]
    stripped = tmp_path / "stripped.npz"
    np.savez(stripped, meta=np.array(json.dumps(meta)), **arrays)
    with pytest.raises(MechanismFileError, match="not signed"):
        EikonalMechanism.load(stripped, key="correct horse")
    with pytest.raises(TypeError, match="key"):
        tiny_mech.save(tmp_path / "x.npz", key=123)
    with pytest.raises(ValueError, match="empty"):
        tiny_mech.save(tmp_path / "x.npz", key="")


def test_untouched_file_loads_in_both_modes(tmp_path, tiny_mech):
    path = tmp_path / "mech.npz"
    tiny_mech.save(path, compact=False)
    # the control for the tamper tests: rewriting with a recomputed checksum but no edit is accepted
    same = _tamper(path, tmp_path / "same.npz", lambda arrays: None)
    for p in (path, same):
        for verify in (True, False):
            back = EikonalMechanism.load(p, verify=verify, privacy_map=tiny_mech.privacy_map)
            assert back.mechanism_id == tiny_mech.mechanism_id and back.report.ok
    fresh = EikonalMechanism.load(path)
    assert fresh.report.normaliser_mismatch == 0.0
    assert fresh.report.max_ratio == pytest.approx(tiny_mech.report.max_ratio, rel=1e-12)


# ============================================================================ outputs without kernel entries
README_RANGE = (math.log(4) / 2000, math.log(4) / 400)  # the README's and QGIS's default epsilon range


def _tokyo_crop(r0: int, c0: int, size: int):
    """A size x size window of the shipped raster (no data kept as NaN), with its transform and CRS."""
    with rasterio.open(data_path("tokyo_density_200.tif")) as ds:
        raw = ds.read(1).astype(float)
        t = ds.transform
        crs = ds.crs
    raw[raw < 0] = np.nan
    window = raw[r0 : r0 + size, c0 : c0 + size]
    return window, rasterio.Affine(t.a, 0, t.c + c0 * t.a, 0, t.e, t.f + r0 * t.e), crs


def _tokyo_average(n: int):
    """The shipped raster average-resampled by GDAL to n x n cells (as gdal.Translate -r average does)."""
    from rasterio.enums import Resampling

    with rasterio.open(data_path("tokyo_density_200.tif")) as ds:
        values = ds.read(1, out_shape=(n, n), resampling=Resampling.average, masked=True)
        transform = ds.transform * ds.transform.scale(ds.width / n, ds.height / n)
        crs = ds.crs
    return values, transform, crs


def _empty_output_columns(mech) -> np.ndarray:
    """Outputs whose kernel has no entry on the raster (only the uniform exp(-cap) floor)."""
    return np.setdiff1d(np.arange(len(mech.weights)), mech.indices)


@pytest.mark.parametrize("raster", ["crop 16 x 16 at rows/cols 20:36", "average-resampled 12 x 12"])
def test_build_handles_outputs_without_kernel_entries(raster, tmp_path):
    """Regression: np.add.reduceat raised IndexError when the last output columns were empty.

    Both rasters are real (the shipped Tokyo raster, with no-data cells) and give outputs at
    the end of the padded output lattice whose kernels never reach the raster above the solve
    cap: the case the column counting of the truncated weight solve did not handle.
    """
    if raster.startswith("crop"):
        values, transform, crs = _tokyo_crop(20, 20, 16)
        assert np.isnan(values).any()  # no-data cells (Tokyo Bay / outside the area)
    else:
        values, transform, crs = _tokyo_average(12)
        assert np.ma.getmaskarray(values).any()
    pm = PrivacyMap.from_population(values, transform=transform, crs=crs, epsilon_range=README_RANGE)
    mech = EikonalMechanism.build(pm)
    empty = _empty_output_columns(mech)
    assert len(mech.weights) - 1 in empty  # the trailing columns that made reduceat fail
    assert mech.report.ok and mech.report.max_ratio <= 1.0
    cT = math.exp(-mech.cap)
    for node in (0, pm.shape[0] * pm.shape[1] - 1):
        cols, p, floor = mech.row(node)
        assert p.sum() + floor == pytest.approx(1.0, abs=1e-12)
    # it releases points and survives a save / load (which re-verifies it)
    xy = np.column_stack([mech.privacy_map.node_x[[3, 7, 10]], mech.privacy_map.node_y[[2, 5, 9]]])
    out = mech.sample(xy, np.random.default_rng(0))
    assert out.shape == (3, 2) and np.isfinite(out).all()
    mech.save(tmp_path / "m.npz")
    back = EikonalMechanism.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.weights, mech.weights)
    assert cT * mech.weights.sum() / mech.normaliser.min() < 0.05


def test_kept_column_pointers_handle_empty_columns_anywhere():
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    dense = rng.random((30, 12)) * (rng.random((30, 12)) < 0.4)
    dense[:, [0, 5, 6, 10, 11]] = 0.0  # empty columns first, in the middle and last
    S = sp.csc_matrix(dense)
    keep = S.data >= 0.5
    T = sp.csc_matrix((S.data[keep], S.indices[keep], kernels_mod.kept_indptr(S.indptr, keep)), shape=S.shape)
    np.testing.assert_array_equal(T.toarray(), np.where(dense >= 0.5, dense, 0.0))
    assert kernels_mod.kept_indptr(np.zeros(4, np.int64), np.zeros(0, bool)).tolist() == [0, 0, 0, 0]


def test_verification_in_bands_is_the_same_as_in_one_piece(tiny_mech, monkeypatch):
    """Bands of raster lines (memory: one band) check every edge: same worst ratio, place and per-node map."""
    from geopriv.mechanisms.eikonal import verification

    whole = verification.verify(tiny_mech)
    monkeypatch.setattr(verification, "BAND_ENTRIES", 1)  # two lines per band: the most bands
    ny = tiny_mech.privacy_map.shape[0]
    assert len(list(verification._bands(tiny_mech))) == ny - 1
    banded = verification.verify(tiny_mech)
    assert banded.max_ratio == whole.max_ratio
    assert banded.worst == whole.worst
    np.testing.assert_array_equal(banded.node_ratio, whole.node_ratio)


def test_column_sums_match_scipy_in_blocks():
    import scipy.sparse as sp

    rng = np.random.default_rng(8)
    dense = (rng.random((37, 11)) * (rng.random((37, 11)) < 0.35)).astype(np.float32)
    dense[[0, 17, 36], :] = 0.0  # empty rows first, in the middle and last
    S = sp.csr_matrix(dense)
    vs = [rng.random(37), rng.standard_normal(37)]
    for chunk in (1, 7, 10_000):
        got = weights_mod.column_sums(S.indptr.astype(np.int64), S.indices, S.data, vs, 11, chunk=chunk)
        for g, v in zip(got, vs):
            np.testing.assert_allclose(g, dense.T.astype(float) @ v, rtol=1e-12, atol=1e-12)


def test_kernel_columns_csr_truncation_and_products_match_scipy():
    """The column-block kernels give the same CSR (sorted, no entry lost) and products as one scipy matrix."""
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    dense = (rng.random((40, 23)) * (rng.random((40, 23)) < 0.3)).astype(np.float32)
    dense[:, [0, 7, 22]] = 0.0  # empty outputs, first, middle and last
    dense[[3, 39], :] = 0.0  # inputs no kernel reaches
    cuts = [0, 5, 6, 14, 23]  # blocks of unequal widths, one of a single column
    cols = kernels_mod.KernelColumns(
        [(a, sp.csc_matrix(dense[:, a:b])) for a, b in zip(cuts[:-1], cuts[1:])], dense.shape
    )
    ref = sp.csr_matrix(dense)
    ref.sort_indices()
    assert cols.nnz == ref.nnz
    w = rng.random(23).astype(np.float32)
    r = rng.random(40).astype(np.float32)
    for threads in (1, 2, 3):
        ops = weights_mod._BlockProducts(cols, threads)
        np.testing.assert_allclose(ops.mul(w), dense.astype(float) @ w, rtol=1e-6)
        np.testing.assert_allclose(ops.rmul(r), dense.T.astype(float) @ r, rtol=1e-6)
        ops.close()
    small = cols.truncated(np.float32(0.5))
    assert small.nnz == int((dense >= 0.5).sum())
    for threads in (2, 3, 9):  # groups of blocks placed in parallel: the same arrays
        got = kernels_mod.KernelColumns(list(cols.blocks), cols.shape).to_csr(threads=threads)
        for g, want in zip(got, (ref.indptr, ref.indices, ref.data)):
            np.testing.assert_array_equal(g, want)
    indptr, indices, data = cols.to_csr(release=True)
    np.testing.assert_array_equal(indptr, ref.indptr)
    np.testing.assert_array_equal(indices, ref.indices)
    np.testing.assert_array_equal(data, ref.data)
    assert indices.dtype == np.int32 and data.dtype == np.float32 and indptr.dtype == np.int64
    assert cols.blocks == [] and cols.nnz == 0  # released: the blocks are gone
    i2, j2, d2 = small.to_csr()
    np.testing.assert_array_equal(
        sp.csr_matrix((d2, j2, i2), shape=dense.shape).toarray(), np.where(dense >= 0.5, dense, 0)
    )


def test_verification_from_worker_extremes_equals_the_check_of_the_arrays(tokyo_mech):
    """The build verifies from the kernel workers' per-edge extremes; reading the arrays gives the same report."""
    from geopriv.mechanisms.eikonal import verification

    fast, slow = tokyo_mech.report, tokyo_mech.verify()
    assert fast.max_ratio == pytest.approx(slow.max_ratio, rel=1e-12)
    assert fast.normaliser_ratio == slow.normaliser_ratio
    assert fast.worst["node_a"] == slow.worst["node_a"] and fast.worst["node_b"] == slow.worst["node_b"]
    assert fast.worst["output"] == slow.worst["output"]
    np.testing.assert_allclose(fast.node_ratio, slow.node_ratio, rtol=1e-12, atol=1e-15)
    # the bands of the arrays' check overlap by one line: every edge is seen, whatever the band size
    lines3 = 3 * len(tokyo_mech.kernel) // tokyo_mech.privacy_map.shape[0]  # bands of about 3 raster lines
    small = verification.verify(tokyo_mech, verification.extremes_from_arrays(tokyo_mech, lines3))
    assert small.max_ratio == slow.max_ratio and small.worst == slow.worst


def test_worker_extremes_catch_a_sharpened_kernel(tiny_mech):
    """Negative control: one kernel entry raised 5x (normaliser recomputed) breaks the map; both checks see it equally."""
    from geopriv.mechanisms.eikonal import verification

    k = tiny_mech.kernel.copy()
    row = 5 * tiny_mech.privacy_map.shape[1] + 5
    pos = int(tiny_mech.indptr[row]) + 3
    k[pos] *= 5.0
    bad = dataclasses.replace(tiny_mech, kernel=k)
    bad = dataclasses.replace(bad, normaliser=verification.exact_normaliser(bad))
    rep = verification.verify(bad)
    assert not rep.ok and rep.worst["output"] == int(tiny_mech.indices[pos])
    assert tiny_mech.verify().ok
    with pytest.raises(ValueError, match="raster"):
        verification.verify(bad, kernels_mod.LogRatioExtremes((3, 3)))


def test_sampling_tables_are_the_per_row_cumulative_sums(tokyo_mech):
    from geopriv.mechanisms.eikonal import sampling

    m = tokyo_mech
    ref = np.empty(len(m.kernel))
    ip = m.indptr
    for r in range(len(m.normaliser)):
        lo, hi = ip[r], ip[r + 1]
        if hi > lo:
            np.cumsum(m.weights[m.indices[lo:hi]] * m.kernel[lo:hi], out=ref[lo:hi])
            ref[lo:hi] /= m.normaliser[r]
    for block, threads in ((1, 1), (1000, 1), (1000, 3), (10**9, 2)):  # one row per block, many, all; threads
        assert np.array_equal(sampling.row_cdf(ip, m.indices, m.kernel, m.weights, m.normaliser, block, threads), ref)


# ============================================================================ compact files (kernels recomputed at load)
def test_compact_file_is_small_and_loads_the_same_kernels(tmp_path, tiny_mech):
    compact, full = tmp_path / "c.npz", tmp_path / "f.npz"
    digest = tiny_mech.save(compact)  # compact is the default
    tiny_mech.save(full, compact=False)
    assert digest == tiny_mech.mechanism_id
    assert compact.stat().st_size * 5 < full.stat().st_size
    with np.load(compact) as z:
        assert not {"indptr", "indices", "kernel"} & set(z.files)
        assert json.loads(str(z["meta"]))["format_version"] == eik.COMPACT_VERSION
    # verify="full": verified again although stamped at save (the default would solve no kernel at all)
    back = EikonalMechanism.load(compact, privacy_map=tiny_mech.privacy_map, verify="full")
    assert back.verification == "full" and back.kernels_held
    for name in ("indptr", "indices", "kernel", "weights", "normaliser", "output_ij"):
        assert np.array_equal(getattr(back, name), getattr(tiny_mech, name)), name
    assert back.report.ok and back.mechanism_id == tiny_mech.mechanism_id
    # the load's report (kernel extremes from its workers) is the one read from the arrays alone
    again = back.verify()
    assert (again.max_ratio, again.normaliser_mismatch, again.worst) == (
        back.report.max_ratio,
        back.report.normaliser_mismatch,
        back.report.worst,
    )
    assert np.array_equal(verification.exact_normaliser(back), back.normaliser)
    # a mechanism loaded from a compact file saves compact again, byte-identical content
    assert back.save(tmp_path / "again.npz") == digest
    # samples agree draw for draw
    pm = tiny_mech.privacy_map
    xy = np.column_stack([np.full(50, pm.node_x.mean()), np.full(50, pm.node_y.mean())])
    assert np.array_equal(back.sample(xy, np.random.default_rng(3)), tiny_mech.sample(xy, np.random.default_rng(3)))


def test_compact_file_with_a_loosened_kernel_rate_fails_verification(tmp_path, tiny_mech):
    """Negative control: sharper kernels (rate x 3) recomputed at load break the map; load refuses."""
    path = tmp_path / "c.npz"
    tiny_mech.save(path)

    def edit(arrays):  # the stored kernel_epsilon edited with it: only verification can tell
        arrays["kernel_rate"] *= 3.0
        arrays["kernel_epsilon"] *= 3.0

    bad = _tamper(path, tmp_path / "bad.npz", edit)
    with pytest.raises(MechanismFileError, match="normaliser|does not meet"):
        EikonalMechanism.load(bad)
    # the rate map alone: its stored copy on the raster (kernel_epsilon) no longer agrees with it
    only_rate = _tamper(path, tmp_path / "rate.npz", lambda a: a["kernel_rate"].__imul__(3.0))
    with pytest.raises(MechanismFileError, match="kernel_epsilon"):
        EikonalMechanism.load(only_rate)


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda a: a["kernel_rate"].__setitem__((0, 0), np.nan), "kernel_rate"),
        (lambda a: a["output_apex"].__setitem__(0, -1.0), "output_apex"),
        (lambda a: a["output_ij"].__setitem__((0, 0), 10_000), "output_ij outside"),
    ],
    ids=["nan-rate", "negative-apex", "output-outside"],
)
def test_invalid_compact_contents_are_refused_before_any_solve(tmp_path, tiny_mech, edit, match):
    path = tmp_path / "c.npz"
    tiny_mech.save(path)
    with pytest.raises(MechanismFileError, match=match) as exc:
        EikonalMechanism.load(_tamper(path, tmp_path / "bad.npz", edit))
    assert "Rebuild" in str(exc.value)


def test_full_file_of_a_loaded_full_mechanism_cannot_be_saved_compact(tmp_path, tiny_mech):
    path = tmp_path / "f.npz"
    tiny_mech.save(path, compact=False)
    back = EikonalMechanism.load(path)
    assert back.can_save_compact  # the full file of this version also keeps the kernel rate map
    legacy = dataclasses.replace(back, kernel_rate=None, output_apex=None)
    with pytest.raises(ValueError, match="compact=False"):
        legacy.save(tmp_path / "x.npz", compact=True)
    assert legacy.save(tmp_path / "x.npz") != ""  # default: full


def test_kernel_workers_run_under_spawn(tiny_mech):
    """Workers get the problem through the pool initializer: the spawn start method (Windows, macOS) works."""
    pm = tiny_mech.privacy_map
    assert tiny_mech.params["n_outputs"] > 256  # more than one chunk: the pool is really used
    mech = EikonalMechanism.build(pm, n_jobs=2, mp_context="spawn", margin=0.1, max_step=1)
    # the kernels are the same to the bit (the weights' threaded sums may round differently)
    assert np.array_equal(mech.kernel, tiny_mech.kernel) and np.array_equal(mech.indices, tiny_mech.indices)
    assert mech.report.ok


# ---------------------------------------------------------------------------- saving: atomic, never clobbering
def test_save_refuses_an_existing_file_unless_overwrite(tmp_path, tiny_mech):
    path = tmp_path / "m.npz"
    path.write_bytes(b"someone else's file")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        tiny_mech.save(path)
    assert path.read_bytes() == b"someone else's file"
    digest = tiny_mech.save(path, overwrite=True)
    assert EikonalMechanism.load(path, verify=False).mechanism_id == digest
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temporary left behind


def test_save_leaves_an_unrelated_tmp_file_alone(tmp_path, tiny_mech):
    path = tmp_path / "m.npz"
    other = tmp_path / "m.npz.tmp"
    other.write_bytes(b"not geopriv's")
    tiny_mech.save(path)
    assert other.read_bytes() == b"not geopriv's"
    tiny_mech.save(path, overwrite=True)
    assert other.read_bytes() == b"not geopriv's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz", "m.npz.tmp"]


def test_save_never_writes_through_a_symbolic_link(tmp_path, tiny_mech):
    target = tmp_path / "precious.npz"
    target.write_bytes(b"precious")
    link = tmp_path / "link.npz"
    link.symlink_to(target)
    with pytest.raises(FileExistsError):
        tiny_mech.save(link)
    dangling = tmp_path / "dangling.npz"
    dangling.symlink_to(tmp_path / "nowhere.npz")
    with pytest.raises(FileExistsError):
        tiny_mech.save(dangling)
    assert not (tmp_path / "nowhere.npz").exists()
    tiny_mech.save(link, overwrite=True)  # replaces the link itself
    assert target.read_bytes() == b"precious" and not link.is_symlink()
    EikonalMechanism.load(link, verify=False)


def test_failed_save_leaves_the_old_file_and_no_temporary(tmp_path, tiny_mech, monkeypatch):
    path = tmp_path / "m.npz"
    tiny_mech.save(path)
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(persistence.np, "savez", broken)
    with pytest.raises(OSError, match="disk full"):
        tiny_mech.save(path, overwrite=True)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["m.npz"]


# ---------------------------------------------------------------------------- derived arrays verified at load
def _double_step(arrays):
    arrays["output_step"][3] = 2


def _odd_step(arrays):
    arrays["output_step"][3] = 3


def _loosen_kernel_epsilon(arrays):
    arrays["kernel_epsilon"] *= 1.5


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "full"])
@pytest.mark.parametrize(
    "edit, match",
    [
        (_double_step, "output_step"),
        (_loosen_kernel_epsilon, "kernel_epsilon"),
    ],
    ids=["output_step", "kernel_epsilon"],
)
def test_tampered_output_step_and_kernel_epsilon_are_refused(tmp_path, tiny_mech, edit, match, compact):
    """Stored copies of what the kernel rate map determines must agree with it (checksum recomputed by the attacker)."""
    path = tmp_path / "m.npz"
    tiny_mech.save(path, compact=compact)
    bad = _tamper(path, tmp_path / "bad.npz", edit)
    for verify in (True, False):
        with pytest.raises(MechanismFileError, match=match) as exc:
            EikonalMechanism.load(bad, verify=verify)
        assert "Rebuild" in str(exc.value)
    EikonalMechanism.load(path, verify=False)  # negative control: the untouched file loads


@pytest.mark.parametrize(
    "edit, match",
    [
        (_odd_step, "powers of two"),
        (_loosen_kernel_epsilon, "kernel_epsilon"),
    ],
    ids=["odd-step", "kernel_epsilon"],
)
def test_mechanisms_without_a_kernel_rate_map_check_what_they_can(tiny_mech, edit, match):
    legacy = dataclasses.replace(tiny_mech, kernel_rate=None, output_apex=None)
    verification.check_arrays(legacy)  # negative control
    arrays = {"output_step": tiny_mech.output_step.copy(), "kernel_epsilon": tiny_mech.kernel_epsilon.copy()}
    edit(arrays)
    with pytest.raises(MechanismFileError, match=match):
        verification.check_arrays(dataclasses.replace(legacy, **arrays))
