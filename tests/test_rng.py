import numpy as np
import pytest

from geopriv.rng import make_rng


def test_default_is_os_entropy_and_not_seeded():
    a, b = make_rng(None), make_rng(None)
    assert not a.seeded and not b.seeded
    assert not np.array_equal(a.generator.random(4), b.generator.random(4))


def test_default_does_not_touch_global_state():
    np.random.seed(123)
    expected = np.random.random(3)
    np.random.seed(123)
    make_rng(None).generator.random(10)
    make_rng(5).generator.random(10)
    assert np.array_equal(np.random.random(3), expected)


def test_int_seed_is_reproducible_and_recorded_as_seeded():
    a, b = make_rng(42), make_rng(42)
    assert a.seeded and b.seeded
    assert np.array_equal(a.generator.random(4), b.generator.random(4))


def test_generator_passes_through():
    g = np.random.default_rng(1)
    src = make_rng(g)
    assert src.generator is g and src.seeded


@pytest.mark.parametrize("bad", [True, -1, 1.5, "7", np.random.RandomState(1)])
def test_bad_rng_rejected(bad):
    with pytest.raises((TypeError, ValueError)):
        make_rng(bad)
