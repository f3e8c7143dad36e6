"""The private Markov jump process (Koufogiannis and Pappas, "Diffusing private data over networks").

Statistical tests use fixed seeds, so each run is deterministic; the comment on each states the
probability that it would fail on a correct implementation over a random seed (its false-failure
rate), and each has a negative control that the same test must reject.
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
import stat

import numpy as np
import pytest
from scipy import integrate, special, stats

from geopriv.exceptions import GeoprivError, MechanismFileError
from geopriv.mechanisms.diffusion import (
    DiffusionPath,
    diffuse,
    expected_jumps,
    jump_radius_pdf,
    project_discrete,
    sample_jump_radius,
    sample_laplace,
    sample_noise_batch,
)

ALPHA = 1e-4  # KS / chi-square level: false-failure rate 1e-4 per assertion
Z = 4.5  # z-tests: two-sided false-failure rate 7e-6 per assertion


def _paths(dim, eps_max, eps_min, count, seed):
    gen = np.random.default_rng(seed)
    return [DiffusionPath.sample(dim, eps_max, eps_min, gen) for _ in range(count)]


def _noise(paths, levels):
    return np.stack([p.noise(levels) for p in paths])  # (count, len(levels), dim)


@pytest.fixture(scope="module")
def samples():
    """6,000 paths per dimension over [1, 8], read at four levels (used by several tests)."""
    levels = np.array([1.0, 2.5, 4.0, 8.0])
    return {n: (levels, _noise(_paths(n, 8.0, 1.0, 6000, 100 + n), levels)) for n in (1, 2, 3)}


# ---------------------------------------------------------------------------------------------
# marginals
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_marginal_radius_is_gamma_n(samples, n):
    # |V_eps| ~ Gamma(n, 1/eps) at every level; KS at ALPHA per level (false failure 4e-4 per n).
    levels, v = samples[n]
    for i, eps in enumerate(levels):
        r = np.linalg.norm(v[:, i], axis=1)
        assert stats.kstest(r, stats.gamma(n, scale=1 / eps).cdf).pvalue > ALPHA, eps
        # negative control: the same samples against a 15% wrong epsilon are rejected
        assert stats.kstest(r, stats.gamma(n, scale=1 / (1.15 * eps)).cdf).pvalue < ALPHA, eps


@pytest.mark.parametrize("n", [2, 3])
def test_marginal_direction_is_uniform(samples, n):
    # the direction of V is uniform: its first coordinate over the radius has the law of one
    # coordinate of a uniform unit vector (n=2: arcsine; n=3: uniform on [-1, 1]); KS at ALPHA.
    _, v = samples[n]
    x = v[:, 1, 0] / np.linalg.norm(v[:, 1], axis=1)
    law = stats.arcsine(loc=-1, scale=2) if n == 2 else stats.uniform(loc=-1, scale=2)
    assert stats.kstest(x, law.cdf).pvalue > ALPHA
    # negative control: |x| is not that law
    assert stats.kstest(np.abs(x), law.cdf).pvalue < ALPHA


@pytest.mark.parametrize("n", [1, 2, 3])
def test_mean_squared_norm(samples, n):
    # E|V_eps|^2 = n(n+1)/eps^2; z-test with the Gamma's exact variance (false failure 7e-6 per level).
    levels, v = samples[n]
    count = v.shape[0]
    for i, eps in enumerate(levels):
        r2 = (v[:, i] ** 2).sum(axis=1)
        mean = n * (n + 1) / eps**2
        sd = math.sqrt(n * (n + 1) * (n + 2) * (n + 3) / eps**4 - mean**2) / math.sqrt(count)
        assert abs(r2.mean() - mean) < Z * sd
        # negative control: n^2/eps^2 (Gaussian-like scaling) is rejected
        assert abs(r2.mean() - n * n / eps**2) > Z * sd


@pytest.mark.parametrize("n", [1, 2, 3])
def test_same_answer_probability(samples, n):
    # P(V_e1 == V_e2) = (e1/e2)^(n+1); binomial z-test (false failure 7e-6 per pair).
    levels, v = samples[n]
    count = v.shape[0]
    for i, j in [(2, 3), (1, 2), (0, 1)]:
        same = np.all(v[:, i] == v[:, j], axis=1).mean()
        p = (levels[i] / levels[j]) ** (n + 1)
        sd = math.sqrt(p * (1 - p) / count)
        assert abs(same - p) < Z * sd, (levels[i], levels[j])
        wrong = (levels[i] / levels[j]) ** n  # negative control: exponent n instead of n+1
        assert abs(same - wrong) > Z * sd


def test_increments_are_independent_of_the_top_value(samples):
    # V_lo - V_hi is independent of V_hi (what makes a coalition a post-processing of its best
    # member's answer): correlations of components and of norms ~ 0 (|z| < 4.5, false failure
    # 7e-6 each).  Negative control: with independent Laplace answers the increment is
    # correlated with V_hi (population correlation about -0.45).
    _, v = samples[2]
    root = math.sqrt(v.shape[0])

    def correlations(hi, lo):
        inc = lo - hi
        return (
            np.corrcoef(hi[:, 0], inc[:, 0])[0, 1],
            np.corrcoef(np.linalg.norm(hi, axis=1), np.linalg.norm(inc, axis=1))[0, 1],
        )

    for c in correlations(v[:, 3], v[:, 2]) + correlations(v[:, 3], v[:, 0]):
        assert abs(c) * root < Z
    gen = np.random.default_rng(9)
    indep_hi, indep_lo = sample_laplace(2, 8.0, v.shape[0], gen), sample_laplace(2, 4.0, v.shape[0], gen)
    assert abs(correlations(indep_hi, indep_lo)[0]) * root > Z


# ---------------------------------------------------------------------------------------------
# jumps
# ---------------------------------------------------------------------------------------------


def test_jump_counts_are_poisson():
    # n = 2 over [1, e^2]: Poisson with mean (n+1) * 2 = 6.  Mean: z-test (7e-6); dispersion
    # var/mean: z-test with sd sqrt(2/N) (approximate, 7e-6); chi-square GOF at ALPHA.
    n, lo, hi, count = 2, 1.0, math.e**2, 4000
    paths = _paths(n, hi, lo, count, 7)
    k = np.array([p.secret_arrays()["levels"].size for p in paths])
    mean = expected_jumps(n, lo, hi)
    assert mean == pytest.approx(6.0)
    assert abs(k.mean() - mean) < Z * math.sqrt(mean / count)
    assert abs(k.var(ddof=1) / k.mean() - 1) < Z * math.sqrt(2 / count)

    def chi2_pvalue(counts):
        edges = np.arange(0, 14)
        observed = np.array([(counts == e).sum() for e in edges[:-1]] + [(counts >= edges[-1]).sum()])
        probs = np.append(stats.poisson.pmf(edges[:-1], mean), stats.poisson.sf(edges[-1] - 1, mean))
        return stats.chisquare(observed, probs * counts.size).pvalue

    assert chi2_pvalue(k) > ALPHA
    # the jump levels are uniform in ln(eps) (a Poisson process of rate n+1 in ln eps): KS
    logs = np.concatenate([np.log(p.secret_arrays()["levels"]) for p in paths[:1000]])
    assert stats.kstest(logs, stats.uniform(0, 2).cdf).pvalue > ALPHA
    # negative controls: rate n instead of n+1 and an under-dispersed count with the right mean
    assert abs(k.mean() - n * 2) > Z * math.sqrt(mean / count)
    rng = np.random.default_rng(1)
    binom = rng.binomial(12, 0.5, count)
    assert abs(binom.var(ddof=1) / binom.mean() - 1) > Z * math.sqrt(2 / count)
    assert chi2_pvalue(binom) < ALPHA


def _table_one_pdf(r, n, eps):
    """Table I of the paper with beta = 1/eps, written out independently of the module."""
    beta = 1 / eps
    return 4 / (special.gamma(n / 2) * (2 * beta) ** (n / 2 + 1)) * r ** (n / 2) * special.kv(n / 2 - 1, r / beta)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_jump_radius_against_its_density(n):
    # The Bessel density integrates to 1 (normalisation checked numerically), the module's pdf
    # equals Table I, and 8,000 sampled radii pass a KS test against the numerically integrated
    # CDF at ALPHA (false failure 1e-4); samples drawn at a 15% wrong eps are rejected.
    eps = 0.7
    total, _ = integrate.quad(_table_one_pdf, 0, np.inf, args=(n, eps), limit=200)
    assert total == pytest.approx(1.0, abs=1e-8)
    grid = np.linspace(1e-6, 60 / eps, 4001)
    assert np.allclose(jump_radius_pdf(grid, n, eps), _table_one_pdf(grid, n, eps), rtol=1e-10, atol=1e-300)
    # CDF on a grid by integrating between grid points (adaptive quad per cell), then interpolation
    cells = [integrate.quad(_table_one_pdf, a, b, args=(n, eps))[0] for a, b in itertools.pairwise(grid)]
    head = integrate.quad(_table_one_pdf, 0, grid[0], args=(n, eps))[0]
    cdf_grid = head + np.concatenate([[0.0], np.cumsum(cells)])

    def cdf(x):
        return np.interp(x, grid, cdf_grid, left=0.0, right=1.0)

    assert cdf_grid[-1] == pytest.approx(1.0, abs=1e-9)
    r = sample_jump_radius(n, eps, 8000, np.random.default_rng(20 + n))
    assert stats.kstest(r, cdf).pvalue > ALPHA
    assert np.mean(r**2) == pytest.approx(2 * n / eps**2, rel=0.1)
    wrong = sample_jump_radius(n, 1.15 * eps, 8000, np.random.default_rng(40 + n))
    assert stats.kstest(wrong, cdf).pvalue < ALPHA
    if n in (1, 3):  # closed forms for odd n: Exp(eps) and Gamma(2, 1/eps)
        assert np.allclose(jump_radius_pdf(grid, n, eps), stats.gamma((n + 1) // 2, scale=1 / eps).pdf(grid), rtol=1e-9)


def test_batch_sampler_has_the_law_of_paths():
    # sample_noise_batch (used by the simulations) against DiffusionPath: two-sample KS on the
    # norm at a middle level and on the increment, and equal-answer frequencies (z-test).
    levels = np.array([0.5, 1.0, 3.0])
    v_path = _noise(_paths(2, 3.0, 0.5, 4000, 3), levels)
    v_batch = sample_noise_batch(2, levels, 4000, np.random.default_rng(4))
    for f in (lambda v: np.linalg.norm(v[:, 1], axis=1), lambda v: np.linalg.norm(v[:, 0] - v[:, 2], axis=1)):
        assert stats.ks_2samp(f(v_path), f(v_batch)).pvalue > ALPHA
    p = (1 / 3) ** 3
    same = np.all(v_batch[:, 1] == v_batch[:, 2], axis=1).mean()
    assert abs(same - p) < Z * math.sqrt(p * (1 - p) / 4000)
    # negative control: independent Laplace at the same levels (right marginals) fails both
    indep = np.stack([sample_laplace(2, e, 4000, np.random.default_rng(5 + i)) for i, e in enumerate(levels)], 1)
    assert (
        stats.ks_2samp(
            np.linalg.norm(v_path[:, 1] - v_path[:, 2], axis=1), np.linalg.norm(indep[:, 1] - indep[:, 2], axis=1)
        ).pvalue
        < ALPHA
    )
    assert abs(np.all(indep[:, 1] == indep[:, 2], axis=1).mean() - p) > Z * math.sqrt(p * (1 - p) / 4000)


# ---------------------------------------------------------------------------------------------
# privacy, empirically
# ---------------------------------------------------------------------------------------------


def test_pair_of_recipients_leaks_only_the_larger_epsilon():
    # n = 1, levels 0.9 and 1.0, u = 0 vs u' = 1.  For the events {(y1 + y2)/2 > t} the log of
    # P(event | u') / P(event | u) must be <= 1.0 (the larger epsilon times |u - u'|).  We
    # estimate it from 200,000 releases each and allow Z standard errors (false failure 7e-6
    # per event).  Negative control: independent Laplace answers leak about 1.5 > 1.0 there.
    count, levels = 200_000, np.array([0.9, 1.0])
    gen = np.random.default_rng(11)

    def loss(y0, y1, t):
        p0, p1 = (y0 > t).mean(), (y1 > t).mean()
        return math.log(p1 / p0), math.sqrt(1 / (p0 * count) + 1 / (p1 * count))

    a = sample_noise_batch(1, levels, count, gen)[:, :, 0].mean(axis=1)
    b = 1.0 + sample_noise_batch(1, levels, count, gen)[:, :, 0].mean(axis=1)
    ia = np.stack([sample_laplace(1, e, count, gen)[:, 0] for e in levels], 1).mean(axis=1)
    ib = 1.0 + np.stack([sample_laplace(1, e, count, gen)[:, 0] for e in levels], 1).mean(axis=1)
    for t in (2.0, 3.0):
        value, se = loss(a, b, t)
        assert value < 1.0 + Z * se, t
        value, se = loss(ia, ib, t)
        assert value > 1.0 + Z * se, t


def test_coalition_learns_no_more_than_its_best_member():
    # 8 recipients of a location (n = 2) at eps in [1.0, 1.2].  With one path, averaging, or
    # even the best linear combination fitted on 20,000 training releases, does not beat the
    # member with eps = 1.2 (MSE ratio >= 0.95; the true ratio is >= 1 and the estimate's sd is
    # < 1%, false failure < 1e-6).  Negative control: independent noise per recipient lets the
    # average reach about 1/8 of the best member's MSE (ratio < 0.3).
    k, count = 8, 20_000
    levels = np.geomspace(1.0, 1.2, k)
    gen = np.random.default_rng(12)
    diffused = sample_noise_batch(2, levels, 2 * count, gen)
    independent = np.stack([sample_laplace(2, e, 2 * count, gen) for e in levels], axis=1)

    def mse(noise):
        return float((noise**2).sum(axis=-1).mean())

    def best_linear(noise):
        train, test = noise[:count], noise[count:]
        cov = np.einsum("nid,njd->ij", train, train) / count
        w = np.linalg.solve(cov + 1e-12 * np.eye(k), np.ones(k))
        w /= w.sum()  # unbiased: weights add up to 1
        return mse(np.einsum("i,nid->nd", w, test))

    best = mse(diffused[count:, -1])
    assert best == pytest.approx(6 / 1.2**2, rel=0.05)
    assert mse(diffused[count:].mean(axis=1)) / best > 0.95
    assert best_linear(diffused) / best > 0.95
    best_i = mse(independent[count:, -1])
    assert mse(independent[count:].mean(axis=1)) / best_i < 0.3
    assert best_linear(independent) / best_i < 0.3


# ---------------------------------------------------------------------------------------------
# the path object
# ---------------------------------------------------------------------------------------------


def test_same_level_same_answer_and_vectorised():
    path = DiffusionPath.sample(2, 15.0, 0.5, rng=1)
    eps = np.array([0.5, 3.0, 3.0, 15.0, 7.0])
    a = path.noise(eps)
    assert a.shape == (5, 2)
    assert np.array_equal(a[1], a[2])
    assert np.array_equal(path.noise(eps[::-1]), a[::-1])
    a[0] = 0.0  # returned arrays are copies; the path cannot be changed through them
    assert not np.array_equal(path.noise([0.5])[0], a[0])
    with pytest.raises(AttributeError):
        path._values = None


def test_refuses_levels_outside_the_path_and_says_how_to_fix():
    path = DiffusionPath.sample(1, 4.0, 1.0, rng=2)
    with pytest.raises(GeoprivError, match=r"extend_up\(8"):
        path.noise([2.0, 8.0])
    with pytest.raises(GeoprivError, match=r"extend_down\(0.5"):
        path.noise([0.5])
    for bad in ([0.0], [-1.0], [np.nan], [np.inf], []):
        with pytest.raises(GeoprivError, match="finite|empty"):
            path.noise(bad)


def test_extend_down_keeps_answers_and_has_the_right_law():
    # Answers already given never change; the extended part has Laplace marginals (KS at
    # ALPHA) and the same-answer probability across the seam (z-test), vs direct sampling.
    gen = np.random.default_rng(13)
    levels = np.array([0.25, 0.5, 1.0, 2.0])
    first, extended = [], []
    for _ in range(4000):
        p = DiffusionPath.sample(2, 2.0, 1.0, gen)
        q = p.extend_down(0.25, gen)
        assert q.eps_min == 0.25 and q.eps_max == 2.0
        first.append(p.noise([1.0, 2.0]))
        extended.append(q.noise(levels))
    first, extended = np.array(first), np.array(extended)
    assert np.array_equal(first, extended[:, 2:])
    for i, eps in enumerate(levels):
        assert stats.kstest(np.linalg.norm(extended[:, i], axis=1), stats.gamma(2, scale=1 / eps).cdf).pvalue > ALPHA
    p = 0.5**3
    same = np.all(extended[:, 1] == extended[:, 2], axis=1).mean()
    assert abs(same - p) < Z * math.sqrt(p * (1 - p) / 4000)
    assert DiffusionPath.sample(2, 2.0, 1.0, rng=1).extend_down(1.5) is not None


@pytest.mark.parametrize("n", [1, 2])
def test_extend_up_is_the_exact_conditional(n):
    # A path over [1, 2] extended up to 4 has the law of a path built over [1, 4]: Laplace
    # marginals above the old top (KS at ALPHA), same-answer probabilities across the seam
    # (z-test, 7e-6), and the law of V_4 - V_1 (two-sample KS at ALPHA).  Negative control: a
    # naive "fresh Laplace above eps_max" extension gets the seam probability wrong.
    gen = np.random.default_rng(30 + n)
    count = 3000
    ext, direct = [], []
    for _ in range(count):
        p = DiffusionPath.sample(n, 2.0, 1.0, gen)
        q = p.extend_up(4.0, gen)
        assert np.array_equal(q.noise([1.0, 1.5, 2.0]), p.noise([1.0, 1.5, 2.0]))
        ext.append(q.noise([1.0, 2.0, 3.0, 4.0]))
        direct.append(DiffusionPath.sample(n, 4.0, 1.0, gen).noise([1.0, 2.0, 3.0, 4.0]))
    ext, direct = np.array(ext), np.array(direct)
    for i, eps in [(2, 3.0), (3, 4.0)]:
        assert stats.kstest(np.linalg.norm(ext[:, i], axis=1), stats.gamma(n, scale=1 / eps).cdf).pvalue > ALPHA
    for i, j, p in [(1, 3, 0.5 ** (n + 1)), (1, 2, (2 / 3) ** (n + 1))]:
        same = np.all(ext[:, i] == ext[:, j], axis=1).mean()
        assert abs(same - p) < Z * math.sqrt(p * (1 - p) / count)
        assert same > 0.05  # naive fresh draws above eps_max would never agree with the path
    inc = lambda v: np.linalg.norm(v[:, 3] - v[:, 0], axis=1)
    assert stats.ks_2samp(inc(ext), inc(direct)).pvalue > ALPHA
    naive = np.concatenate(
        [ext[:, :2], sample_laplace(n, np.array([3.0, 4.0] * count), 2 * count, gen).reshape(count, 2, n)], axis=1
    )
    assert np.all(naive[:, 1] == naive[:, 3], axis=1).mean() == 0.0


def test_describe_and_repr_show_no_secret():
    path = DiffusionPath.sample(2, 10.0, 1.0, rng=3)
    text = repr(path) + str(path.describe())
    arrays = path.secret_arrays()
    assert set(path.describe()) == {"mechanism", "reference", "dimension", "eps_min", "eps_max"}
    for x in np.concatenate([arrays["levels"], arrays["values"].ravel()]):
        assert f"{x:.4g}" not in text and repr(float(x)) not in text
    assert "secret" in repr(path).lower()


def test_save_load_round_trip_atomic_and_secret(tmp_path):
    path = DiffusionPath.sample(3, 20.0, 0.1, rng=4)
    target = tmp_path / "path.npz"
    assert path.save(target) == str(target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    loaded = DiffusionPath.load(target)
    eps = np.geomspace(0.1, 20.0, 50)
    assert np.array_equal(loaded.noise(eps), path.noise(eps))
    assert (loaded.dim, loaded.eps_min, loaded.eps_max) == (3, 0.1, 20.0)
    with np.load(target) as z:
        assert "SECRET" in str(z["SECRET"]) and "subtract the noise" in str(z["SECRET"])
    with pytest.raises(FileExistsError, match="overwrite=True"):
        DiffusionPath.sample(3, 20.0, 0.1, rng=5).save(target)
    assert np.array_equal(DiffusionPath.load(target).noise(eps), path.noise(eps))  # untouched
    other = DiffusionPath.sample(3, 20.0, 0.1, rng=5)
    other.save(target, overwrite=True)
    assert np.array_equal(DiffusionPath.load(target).noise(eps), other.noise(eps))
    assert [p.name for p in tmp_path.iterdir()] == ["path.npz"]  # no temporary file left behind
    # corrupt, foreign and missing files
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(MechanismFileError):
        DiffusionPath.load(tmp_path / "junk.npz")
    with pytest.raises(MechanismFileError):
        DiffusionPath.load(tmp_path / "missing.npz")
    with np.load(target) as z:
        data = {k: z[k] for k in z.files}
    data["values"] = data["values"] + 1.0
    np.savez(tmp_path / "changed.npz", **data)
    with pytest.raises(MechanismFileError, match="checksum"):
        DiffusionPath.load(tmp_path / "changed.npz")
    assert np.array_equal(pickle.loads(pickle.dumps(path)).noise(eps), path.noise(eps))


# ---------------------------------------------------------------------------------------------
# diffuse and projection
# ---------------------------------------------------------------------------------------------


def test_diffuse_scalar_vector_and_path_reuse():
    eps = np.array([0.5, 1.0, 15.0])
    y, path = diffuse(1.0, eps, rng=5)
    assert y.shape == (3,) and path.eps_min == 0.5 and path.eps_max == 15.0
    assert np.allclose(y - 1.0, path.noise(eps)[:, 0])
    y2, path2 = diffuse(1.0, [1.0, 0.1, 30.0], rng=6, path=path)  # extended both ways, consistently
    assert path2.eps_min == 0.1 and path2.eps_max == 30.0
    assert y2[0] == y[1]
    assert np.array_equal(path2.noise(eps), path.noise(eps))
    loc, p = diffuse([100.0, 200.0], eps, rng=7)
    assert loc.shape == (3, 2) and p.dim == 2
    with pytest.raises(GeoprivError, match="2-dimensional"):
        diffuse(1.0, eps, path=p)


@pytest.mark.parametrize("bad", [[0.0], [-1.0], [np.nan], [np.inf], [], [[1.0, 2.0]]])
def test_diffuse_rejects_bad_epsilons(bad):
    with pytest.raises(GeoprivError):
        diffuse(0.0, bad, rng=1)


def test_diffuse_rejects_non_finite_value_without_printing_it():
    with pytest.raises(GeoprivError) as info:
        diffuse([1.5, np.nan], [1.0], rng=1)
    assert "1.5" not in str(info.value)


def test_project_discrete():
    assert np.array_equal(project_discrete([-0.3, 0.49, 0.51, 7.0], [0, 1]), [0, 0, 1, 1])
    assert np.array_equal(project_discrete([0.5], [0, 1]), [0])  # ties go to the first listed
    pts = project_discrete([[0.1, 0.2], [5.0, 4.0]], [[0, 0], [5, 5]])
    assert np.array_equal(pts, [[0, 0], [5, 5]])
    with pytest.raises(GeoprivError):
        project_discrete([0.1], [])
    # the paper's infection bit: a recipient with a large epsilon mostly gets the truth
    y, _ = diffuse(1.0, np.full(1, 15.0), rng=8)
    assert project_discrete(y, [0, 1])[0] in (0.0, 1.0)


# ---------------------------------------------------------------------------------------------
# binding (issue 30): a path answers one source, one released quantity, one value, one frame
# ---------------------------------------------------------------------------------------------

FRAME = {
    "kind": "location",
    "crs": "EPSG:27700",
    "declared_bounds": None,
    "frame": "planar",
    "working_crs": "EPSG:27700",
    "scale_max": 1.0004,
    "grid": "auto",
    "lattice": "planar",
}


def _bound(value=(530000.0, 181000.0), source="a", rng=11):
    from geopriv.mechanisms.diffusion import LOCATION

    _, path = diffuse(list(value), [0.01, 0.02], rng=rng)
    return path.bind(source=source, released=LOCATION, frame=FRAME, value=value)


def test_low_level_diffuse_refuses_another_value_for_a_bound_path():
    from geopriv.exceptions import PathBindingError

    path = _bound()
    y, _ = diffuse([530000.0, 181000.0], [0.01], path=path)  # the same value: fine
    with pytest.raises(PathBindingError, match="value") as info:
        diffuse([530001.0, 181000.0], [0.01], path=path)  # one metre away: would publish the exact move
    assert "530001" not in str(info.value) and "530000" not in str(info.value)
    assert diffuse(0.0, [1.0], rng=1)[1].is_bound is False
    bit = diffuse(1.0, [1.0], rng=2)[1]
    bound_bit = bit.bind(
        source=1, released="value of column str:'infected'", frame={"kind": "value", "grid": "auto"}, value=1.0
    )
    with pytest.raises(PathBindingError):  # a value with two possibilities: the commitment is keyed
        diffuse(0.0, [1.0], path=bound_bit)
    with pytest.raises(PathBindingError, match="already bound"):
        bound_bit.bind(source=2, released="location", frame={}, value=1.0)


def test_binding_differences_name_what_differs_never_values():
    from geopriv.mechanisms.diffusion import LOCATION, value_column

    path = _bound()
    same = dict(source="a", released=LOCATION, frame=FRAME, value=(530000.0, 181000.0))
    assert path.binding_differences(**same) == []
    assert "source" in path.binding_differences(**{**same, "source": "b"})[0]
    assert "int:1" in " ".join(_bound(source=1).binding_differences(**{**same, "source": "1"}))  # 1 and "1" differ
    assert _bound(source=np.int64(1)).binding_differences(**{**same, "source": 1}) == []
    assert "released" in path.binding_differences(**{**same, "released": value_column("x")})[0]
    assert "bounds" in path.binding_differences(**{**same, "frame": {**FRAME, "declared_bounds": [0, 0, 1, 1]}})[0]
    assert "CRS" in path.binding_differences(**{**same, "frame": {**FRAME, "crs": "EPSG:32630"}})[0]
    assert "lattice" in path.binding_differences(**{**same, "frame": {**FRAME, "grid": 0.5}})[0]
    assert "value" in path.binding_differences(**{**same, "value": (530000.0, 181000.5)})[0]
    assert "dimension" in path.binding_differences(**{**same, "value": 1.0})[0]
    assert "not bound" in diffuse(1.0, [1.0], rng=1)[1].binding_differences(**same)[0]


def test_binding_survives_extension_pickle_save_and_load(tmp_path):
    from geopriv.exceptions import PathBindingError
    from geopriv.mechanisms.diffusion import LOCATION

    path = _bound()
    same = dict(source="a", released=LOCATION, frame=FRAME, value=(530000.0, 181000.0))
    for p in (path.extend_down(0.001, rng=1), path.extend_up(0.5, rng=2), pickle.loads(pickle.dumps(path))):
        assert p.binding == path.binding and p.binding_differences(**same) == []
    target = tmp_path / "bound.npz"
    path.save(target)
    loaded = DiffusionPath.load(target)
    assert loaded.binding == path.binding and loaded.binding_differences(**same) == []
    assert loaded.fingerprint() == path.fingerprint()
    with pytest.raises(PathBindingError, match="source"):
        loaded.check_binding(**{**same, "source": "b"})
    with pytest.raises(PathBindingError, match="value"):
        diffuse([530000.0, 181001.0], [0.01], path=loaded)
    # the binding is covered by the checksum
    with np.load(target) as z:
        data = {k: z[k] for k in z.files}
    import json

    meta = json.loads(str(data["meta"]))
    meta["binding"]["source"] = "str:'b'"
    data["meta"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "rebound.npz", **data)
    with pytest.raises(MechanismFileError, match="checksum"):
        DiffusionPath.load(tmp_path / "rebound.npz")
    # files of format version 1 (no binding) are refused with the fix
    meta = json.loads(str(data["meta"]))
    meta = {k: v for k, v in meta.items() if k not in ("binding", "commitment_key")}
    meta["format_version"] = 1
    data["meta"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "old.npz", **data)
    with pytest.raises(MechanismFileError, match="version 1.*fresh path"):
        DiffusionPath.load(tmp_path / "old.npz")


def test_repr_and_binding_show_no_key_or_commitment(tmp_path):
    path = _bound()
    text = repr(path) + str(path.describe()) + str(path.binding)
    key = path._key.hex()  # noqa: SLF001 (white-box: the secret must not leak)
    assert key not in text and path._binding["commitment"] not in text  # noqa: SLF001
    assert "530000" not in text and "bound=True" in repr(path)
    assert set(path.binding) == {"source", "released", "dim", "frame"}


def test_value_lattice_bound():
    from geopriv.mechanisms.diffusion import snap_values, value_lattice_epsilon

    eps, step = 2.0, 1.0 / 40.0
    r = 3 * step * 2.0**32
    eff = value_lattice_epsilon(eps, step, r)
    assert eps < eff < eps * 1.01
    assert value_lattice_epsilon(eps, step, 3.0) < eff  # a smaller range, a smaller term
    with pytest.raises(GeoprivError, match="too fine"):
        value_lattice_epsilon(eps, 1e-12, 1e6)
    y = snap_values([-3.0, 0.0126, 0.49, 7.0], 0.025, 0.0, 1.0)
    assert np.array_equal(y, np.array([0, 1, 20, 40]) * 0.025)
