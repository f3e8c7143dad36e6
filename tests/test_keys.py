"""geopriv.keys: the PRF, typed identities, per-row streams and the secret root.

Statistical tests use fixed seeds; each KS test is run at alpha = 1e-4 (false-failure rate per
test), and each has a negative control that must be rejected at the same threshold.
"""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from geopriv.exceptions import IdentityError
from geopriv.keys import (
    RowStreams,
    SecretRoot,
    allow_secret_pickling,
    check_unique,
    float_words,
    fold_digests,
    identity_digests,
    row_streams,
    rows_of,
    siphash24_128,
)
from geopriv.mechanisms.planar_laplace import polar_noise, spherical_radius

ALPHA = 1e-4
M = (1 << 64) - 1


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & M


def _ref_siphash128(k0: int, k1: int, msg: bytes) -> tuple[int, int]:
    """SipHash-2-4 with 128-bit output, byte-oriented, from the paper's description."""
    v0, v1, v2, v3 = (
        k0 ^ 0x736F6D6570736575,
        k1 ^ 0x646F72616E646F6D ^ 0xEE,
        k0 ^ 0x6C7967656E657261,
        k1 ^ 0x7465646279746573,
    )

    def rnd():
        nonlocal v0, v1, v2, v3
        v0 = (v0 + v1) & M
        v1 = _rotl(v1, 13)
        v1 ^= v0
        v0 = _rotl(v0, 32)  # noqa: E702
        v2 = (v2 + v3) & M
        v3 = _rotl(v3, 16)
        v3 ^= v2  # noqa: E702
        v0 = (v0 + v3) & M
        v3 = _rotl(v3, 21)
        v3 ^= v0  # noqa: E702
        v2 = (v2 + v1) & M
        v1 = _rotl(v1, 17)
        v1 ^= v2
        v2 = _rotl(v2, 32)  # noqa: E702

    n = len(msg)
    full = n - n % 8
    for i in range(0, full, 8):
        m = int.from_bytes(msg[i : i + 8], "little")
        v3 ^= m
        rnd()
        rnd()  # noqa: E702
        v0 ^= m
    last = int.from_bytes(msg[full:] + bytes(8 - (n - full)), "little") & ((1 << 56) - 1) if n - full else 0
    last |= (n & 0xFF) << 56
    v3 ^= last
    rnd()
    rnd()  # noqa: E702
    v0 ^= last
    v2 ^= 0xEE
    for _ in range(4):
        rnd()
    h0 = v0 ^ v1 ^ v2 ^ v3
    v1 ^= 0xDD
    for _ in range(4):
        rnd()
    return h0, v0 ^ v1 ^ v2 ^ v3


def test_reference_siphash_matches_the_published_vector():
    # SipHash-2-4-128, key 00..0f, empty message (vectors.h of the reference implementation)
    k0 = int.from_bytes(bytes(range(8)), "little")
    k1 = int.from_bytes(bytes(range(8, 16)), "little")
    h0, h1 = _ref_siphash128(k0, k1, b"")
    out = h0.to_bytes(8, "little") + h1.to_bytes(8, "little")
    assert out.hex() == "a3817f04ba25a8e66df67214c7550293"


@pytest.mark.parametrize("m", [1, 2, 4, 5])
def test_vectorised_siphash_equals_the_reference(m):
    rng = np.random.default_rng(m)
    key = (int(rng.integers(0, 2**63)) * 2 + 1, int(rng.integers(0, 2**63)))
    words = [rng.integers(0, 2**63, 200_000 if m == 1 else 50, dtype=np.uint64) * np.uint64(2) for _ in range(m)]
    h0, h1 = siphash24_128(key, words)
    for i in (0, 1, len(words[0]) - 1):
        msg = b"".join(int(w[i]).to_bytes(8, "little") for w in words)
        assert (int(h0[i]), int(h1[i])) == _ref_siphash128(key[0], key[1], msg)


def test_identities_are_the_persons_of_geopriv_identity():
    a = identity_digests(pd.Index([1], dtype=object))
    b = identity_digests(pd.Index(["1"]))
    assert (a[0][0], a[1][0]) == (b[0][0], b[1][0])  # 1 and "1" are one person, as for bounding and budgets
    ints = identity_digests(pd.Index(np.arange(1000)))
    assert len(np.unique(fold_digests(*ints))) == 1000
    for bad in ([None, 1], [float("nan"), 2.0], [1.5, 2.5], [True, False], [2**70, 1], ["a", " "]):
        with pytest.raises(IdentityError, match="row"):
            identity_digests(pd.Index(bad, dtype=object) if bad[0] is not True else pd.Index(bad))
    # 1 and "1" in one index are one person twice: a repeat
    with pytest.raises(IdentityError, match="repeat"):
        check_unique(fold_digests(*identity_digests(pd.Index([1, "1"], dtype=object))), pd.Index([0, 1]))
    # float labels may be coordinates: counted, never shown
    with pytest.raises(IdentityError) as err:
        identity_digests(pd.Index([500016.52763552853, 5700001.25]))
    assert "500016" not in str(err.value) and "5700001" not in str(err.value)


def test_duplicates_named_by_label():
    ids = pd.Index(["a", "b", "a"])
    with pytest.raises(IdentityError, match=r"labels 10, 12"):
        check_unique(fold_digests(*identity_digests(ids)), pd.Index([10, 11, 12]))


def _streams(n, seed=1):
    root = SecretRoot.draw(seed)
    ids = identity_digests(pd.Index(np.arange(n)))
    return row_streams(root, "test", ids, float_words(np.zeros((n, 2))))


def test_row_streams_have_the_right_laws_and_a_wrong_law_is_rejected():
    n = 200_000
    s = _streams(n)
    u = s.random(n)
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    g = s.standard_gamma(2.0, n)
    assert stats.kstest(g, stats.gamma(2).cdf).pvalue > ALPHA
    assert stats.kstest(g, stats.gamma(2.2).cdf).pvalue < ALPHA  # negative control: a 10 % wrong shape
    lap = s.laplace(0.0, 3.0, n)
    assert stats.kstest(lap, stats.laplace(scale=3.0).cdf).pvalue > ALPHA
    # consecutive draws of one row, and neighbouring rows, are uncorrelated
    v = s.random(n)
    assert abs(np.corrcoef(u, v)[0, 1]) < 5 / np.sqrt(n)
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 5 / np.sqrt(n)


def test_a_rows_variates_do_not_depend_on_the_rows_drawn_with_it():
    a, b = _streams(1000), _streams(1000)
    full = a.random(1000)
    sub = rows_of(b, np.arange(500, 1000)).random(500)
    assert np.array_equal(full[500:], sub)
    # rejection loops (spherical radius) draw for subsets: each row's result is its own
    r_all = spherical_radius(1000, 1e-6, 6.371e6, _streams(1000, 5))
    r_sub = spherical_radius(300, 1e-6, 6.371e6, _streams(1000, 5).subset(np.arange(700, 1000)))
    assert np.array_equal(r_all[700:], r_sub)
    # planar Laplace from keyed streams: the radius is Gamma(2, 1/eps)
    noise = polar_noise(100_000, 0.5, _streams(100_000, 3))
    radius = np.hypot(noise[:, 0], noise[:, 1])
    assert stats.kstest(radius, stats.gamma(2, scale=2.0).cdf).pvalue > ALPHA
    assert stats.kstest(radius, stats.gamma(2, scale=2.2).cdf).pvalue < ALPHA  # negative control


def test_keys_bind_identity_content_and_root():
    root = SecretRoot.draw(7)
    ids = identity_digests(pd.Index([1, 2, 3]))
    xy = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]])
    base = row_streams(root, "perturb", ids, float_words(xy)).random(3)
    again = row_streams(root, "perturb", ids, float_words(xy)).random(3)
    assert np.array_equal(base, again)  # same rows, same data: a replay
    assert len(set(base)) == 3  # same place, different people: different noise
    moved = xy.copy()
    moved[0, 0] += 1e-9
    other = row_streams(root, "perturb", ids, float_words(moved)).random(3)
    assert other[0] != base[0] and np.array_equal(other[1:], base[1:])  # only the changed row draws anew
    assert not np.array_equal(row_streams(root, "traces", ids, float_words(xy)).random(3), base)  # purposes apart
    assert not np.array_equal(row_streams(SecretRoot.draw(8), "perturb", ids, float_words(xy)).random(3), base)


def test_streams_refuse_draws_that_are_not_one_per_row():
    s = _streams(10)
    with pytest.raises(RuntimeError, match="one variate per row"):
        s.random(5)
    with pytest.raises(RuntimeError, match="integer shapes"):
        s.standard_gamma(1.5, 10)


def test_the_root_is_never_shown_and_survives_pickling():
    root = SecretRoot.draw()
    value = root._value
    for text in (repr(root), str(root), root.__dask_tokenize__()):
        assert str(value) not in text and format(value, "x") not in text
    assert "secret" in repr(root) and "secret" in repr(RowStreams(np.zeros(1, np.uint64), np.zeros(1, np.uint64)))
    with allow_secret_pickling():  # a plain dumps is refused (tests/test_secret_pickling.py)
        back = pickle.loads(pickle.dumps(root))
    assert back.purpose_key("p") == root.purpose_key("p") and back.seeded is False
    assert SecretRoot.draw(1).seeded is True
    with pytest.raises(AttributeError):
        root.seeded = True
