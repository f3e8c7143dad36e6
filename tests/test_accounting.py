"""Budget accountant: refuses before noise, never shows more than its budget, totals only go down."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geopriv import BudgetAccountant, BudgetExceededError
from geopriv.exceptions import GeoprivError
from geopriv.mechanisms.predictive import FixedRate, FixedUtility, IndependentMechanism, PredictiveMechanism, Traces


def test_spend_until_refused_and_nothing_recorded_on_refusal():
    acc = BudgetAccountant(1.0)
    acc.spend(0.4)
    acc.spend(0.5)
    with pytest.raises(BudgetExceededError, match="Nothing was drawn or recorded"):
        acc.spend(0.2)
    assert acc.spent[0] == pytest.approx(0.9)
    acc.spend(acc.headroom()[0])  # exactly what is left is accepted
    assert acc.spent[0] <= acc.total[0]
    assert acc.remaining[0] == 0.0


def test_refusal_is_atomic_and_names_labels():
    acc = BudgetAccountant([1.0, 1.0, 1.0], labels=["alice", "bob", "carol"])
    acc.spend([0.9, 0.1, 0.1])
    with pytest.raises(BudgetExceededError) as err:
        acc.spend([0.2, 0.2, 0.2])
    assert "'alice'" in str(err.value) and "'bob'" not in str(err.value)
    np.testing.assert_allclose(acc.spent, [0.9, 0.1, 0.1])  # all or nothing


def test_reserve_then_settle_spends_at_most_the_reservation():
    acc = BudgetAccountant([1.0, 1.0])
    acc.reserve([0.6, 0.6])
    with pytest.raises(BudgetExceededError):
        acc.reserve([0.5, 0.0])  # the reservation counts
    acc.settle([0.6, 0.6], [0.1, 0.6])
    np.testing.assert_allclose(acc.spent, [0.1, 0.6])
    np.testing.assert_allclose(acc.reserved, [0.0, 0.0])
    with pytest.raises(GeoprivError):
        acc.reserve([0.1, 0.1])
        acc.settle([0.1, 0.1], [0.2, 0.0])  # spending more than reserved is a bug


def test_totals_can_be_lowered_never_raised():
    acc = BudgetAccountant([1.0, 1.0])
    acc.spend([0.5, 0.2])
    acc.lower_total([0.8, 0.1])  # below what b spent: b is exhausted, never "over"
    np.testing.assert_allclose(acc.total, [0.8, 0.2])
    assert np.all(acc.spent <= acc.total)
    with pytest.raises(GeoprivError, match="only be lowered"):
        acc.lower_total([0.9, 0.2])
    with pytest.raises(ValueError):
        acc.total[0] = 5.0  # read-only view
    with pytest.raises(ValueError):
        BudgetAccountant([1.0, -1.0])
    with pytest.raises(ValueError):
        BudgetAccountant(math.inf)


def test_affordable_and_repeated_rows():
    acc = BudgetAccountant([1.0, 0.5])
    np.testing.assert_array_equal(acc.affordable([0.7, 0.7]), [True, False])
    with pytest.raises(ValueError, match="once per call"):
        acc.spend([0.1, 0.1], rows=[0, 0])
    with pytest.raises(ValueError):
        acc.spend([-0.1, 0.1])
    df = acc.to_frame()
    assert list(df.columns) == ["total", "spent", "reserved", "remaining"]


@settings(max_examples=60, deadline=None)
@given(total=st.floats(1e-6, 10.0), parts=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40))
def test_property_ledger_never_exceeds_total(total, parts):
    acc = BudgetAccountant(total)
    for frac in parts:
        amount = frac * total / 3
        try:
            acc.spend(amount)
        except BudgetExceededError:
            pass
        try:
            acc.reserve(amount)
            acc.settle(amount, amount * 0.5)
        except BudgetExceededError:
            pass
        assert acc.spent[0] + acc.reserved[0] <= acc.total[0]
    room = acc.headroom()
    acc.spend(room)  # the headroom is always accepted exactly
    assert acc.spent[0] <= acc.total[0]


def _traces(n_traces=3, length=5):
    xy = np.zeros((n_traces * length, 2))
    t = np.tile(np.arange(length) * 60.0, n_traces)
    return Traces.from_lengths(xy, t, np.full(n_traces, length))


def test_independent_refuses_before_drawing_noise():
    tr = _traces()
    acc = BudgetAccountant(np.full(3, 1.0))
    acc.spend([0.0, 0.99, 0.0])  # trace 1 can no longer pay a query at rate 0.1
    gen = np.random.default_rng(0)
    before = gen.bit_generator.state
    # the mechanism pays what is left: it never overdraws, it releases fewer queries
    run = IndependentMechanism(FixedRate(rate=0.1)).run(tr, 1.0, gen, acc)
    assert (run.status[5:10] == 3).all()  # trace 1 exhausted from its first query
    assert gen.bit_generator.state != before
    assert np.all(acc.spent <= acc.total)
    with pytest.raises(ValueError, match="disagrees"):
        IndependentMechanism(FixedRate(rate=0.1)).run(tr, 2.0, gen, acc)
    with pytest.raises(ValueError, match="one budget per trace"):
        IndependentMechanism(FixedRate(rate=0.1)).run(tr, accountant=BudgetAccountant([1.0, 1.0]))


class _Overspending(FixedUtility):
    """A broken manager that ignores the budget: the accountant must stop it before any noise."""

    def fit(self, eps_theta, eps_noise, remaining, tested, total=None):
        return eps_theta * 1e6, eps_noise * 1e6, tested, np.ones(len(remaining), dtype=bool)

    def exhausted(self, state):
        return np.zeros(len(state.remaining), dtype=bool)


def test_accountant_stops_a_broken_manager_before_any_draw():
    tr = _traces()
    gen = np.random.default_rng(0)
    before = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        PredictiveMechanism(_Overspending(accuracy=100.0)).run(tr, 1e-3, gen)
    assert gen.bit_generator.state == before  # not a single random number was drawn


# ---------------------------------------------------------------------------- diffusion ledger (issue 30)
def _diffusion_paths():
    from geopriv.mechanisms.diffusion import LOCATION, diffuse, value_column

    _, loc = diffuse([1.0, 2.0], [0.01], rng=1)
    loc = loc.bind(source="a", released=LOCATION, frame={"kind": "location"}, value=[1.0, 2.0])
    _, bit = diffuse(1.0, [1.0], rng=2)
    bit = bit.bind(source="a", released=value_column("infected"), frame={"kind": "value"}, value=1.0)
    return loc, bit


def test_diffusion_ledger_refuses_a_path_bound_to_another_source_or_quantity():
    from geopriv import DiffusionLedger
    from geopriv.exceptions import PathBindingError

    loc, bit = _diffusion_paths()
    ledger = DiffusionLedger(total=1.0)
    ledger.record("a", 0.01, None, loc)
    with pytest.raises(PathBindingError, match="row str:'a'"):
        ledger.check("b", 0.01, loc)  # would be charged to b as if it answered b
    with pytest.raises(PathBindingError):
        ledger.record("b", 0.02, loc, loc)
    with pytest.raises(PathBindingError, match="infected"):
        ledger.check("a", 0.01, loc, value="infected")
    with pytest.raises(PathBindingError):
        ledger.check("a", 1.0, bit)  # a value path charged as a location
    assert ledger.spent("b") == 0.0 and ledger.spent("a") == pytest.approx(0.01)


def test_diffusion_ledger_keeps_metres_and_value_units_apart():
    from geopriv import DiffusionLedger

    loc, bit = _diffusion_paths()
    ledger = DiffusionLedger(total=0.05, value_total=4.0)
    ledger.record("a", 0.01, None, loc)
    ledger.record("a", 3.0, None, bit, value="infected")
    assert ledger.spent("a") == pytest.approx(0.01)  # never 3.01: metres and units are not added
    assert ledger.spent("a", value="infected") == pytest.approx(3.0)
    frame = ledger.to_frame()
    assert sorted(frame.released) == ["location", "value of column str:'infected'"]
    assert set(frame.unit) == {"per ground metre", "per unit of the value"}
    assert frame.set_index("released").loc["location", "total"] == 0.05
    with pytest.raises(BudgetExceededError, match="infected"):
        ledger.check("a", 1.5, None, value="infected")
    ledger.check("a", 0.04, None)  # the location budget is its own
    # typed sources: 1 and "1" are different people
    ledger.record(1, 0.02, None, _bound_to(1))
    assert ledger.spent(1) == pytest.approx(0.02) and ledger.spent("1") == 0.0


def _bound_to(source):
    from geopriv.mechanisms.diffusion import LOCATION, diffuse

    _, fresh = diffuse([1.0, 2.0], [0.01], rng=3)
    return fresh.bind(source=source, released=LOCATION, frame={"kind": "location"}, value=[1.0, 2.0])
