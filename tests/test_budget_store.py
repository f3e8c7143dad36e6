"""BudgetStore semantics on both backends (a real SQLite file and a real PostgreSQL database).

What a store promises (geopriv/budget/store.py), checked through its public API and, for "nothing
changed" and "holds no coordinates", through a raw dump of every table (tests/budget_support.py):

* grants: a default for unseen persons (kept from the moment they are first charged), per-person
  totals, a total lowered below what was used leaves the person exhausted (never spent > total),
  every grant in the audit;
* units kept apart; a unit nobody was granted is refused;
* ``spent + reserved <= total`` always, and a model of the store (exact binary fractions) agrees
  with it after every one of a seeded random sequence of grants, charges, settlements and cancels;
* a refused charge names exactly the persons who cannot afford it (integers and strings) and
  charges nothing: every table identical;
* reserve(spend=False) + commit(spent) gives back the rest; cancel before start gives everything
  back; an exception after start commits in full;
* person ids: 5, np.int64(5) and "5" are one person, "05" another; floats, NaN, None and booleans
  refused by row label, never by value;
* perturb(budget_store=, person=): each person charged charged_per_row per row, a second release
  that would overspend refused before any noise (the Generator untouched), invalid input charges
  nothing, the index as person (named: yes; unnamed integers: refused);
* the audit holds no coordinates, and its parameters only public provenance fields.

Deterministic: fixed seeds; the charges and refusals depend on public parameters only, never on the
noise.
"""

from __future__ import annotations

import copy
import json
import math
import re
import struct
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

import geopriv
from geopriv.budget import (
    PER_METRE,
    PURE,
    SCHEMA_VERSION,
    BudgetStore,
    person_keys,
    value_unit,
)
from geopriv.exceptions import BudgetExceededError, IdentityError, ParameterError
from geopriv.provenance import ALLOWED_FIELDS
from tests.budget_support import (  # noqa: F401
    dump,
    dump_bytes,
    dump_text,
    kind,
    sqlite_path,
    store_url_fixture,
)

A = 1 / 64  # amounts and totals are multiples of 1/64 below 2^10: every sum is exact in binary floating point


@pytest.fixture
def store(store_url):
    with BudgetStore(store_url, create=True) as s:
        yield s


def balance(store, person, unit=PER_METRE):
    """(total, spent, reserved) of one person, or None when the store has not seen them in ``unit``."""
    b = store.balances(unit=unit)
    row = b[[p == person for p in b["person"]]]
    assert len(row) <= 1
    return None if row.empty else tuple(float(row[c].iloc[0]) for c in ("total", "spent", "reserved"))


def assert_within_totals(store):
    b = store.balances()
    assert (b["spent"] >= 0).all() and (b["reserved"] >= 0).all()
    assert (b["spent"] + b["reserved"] <= b["total"]).all(), b


def named(message: str, person) -> bool:
    """Whether a refusal names ``person`` (an int as itself, a string quoted as format_labels shows it)."""
    token = re.escape(repr(person))
    return re.search(rf"(?<![\w.'\"]){token}(?![\w'\"]|\.\d)", message) is not None


# ------------------------------------------------------------------------------------------ grants
def test_the_default_is_given_to_persons_at_their_first_charge(store):
    store.grant(8 * A, unit=PER_METRE)
    store.reserve([101, "ann"], A, unit=PER_METRE, kind="test")
    assert balance(store, 101) == (8 * A, A, 0.0) and balance(store, "ann") == (8 * A, A, 0.0)
    assert balance(store, 102) is None  # not seen yet: no row
    store.grant(20 * A, unit=PER_METRE)  # a new default: for persons not seen yet only
    store.reserve([101, 102], A, unit=PER_METRE, kind="test")
    assert balance(store, 101) == (8 * A, 2 * A, 0.0)
    assert balance(store, 102) == (20 * A, A, 0.0)
    defaults = store.defaults().set_index("unit")["default_total"]
    assert defaults[PER_METRE] == 20 * A and pd.isna(defaults[PURE])  # no default: persons need their own grant


def test_per_person_totals_replace_the_default(store):
    store.grant(1.0, unit=PER_METRE)
    store.grant(0.25, unit=PER_METRE, persons=[101, "ann"])  # before they were ever charged
    assert balance(store, 101) == (0.25, 0.0, 0.0) and balance(store, "ann") == (0.25, 0.0, 0.0)
    store.reserve([101], 0.25, unit=PER_METRE, kind="test")
    with pytest.raises(BudgetExceededError) as refused:
        store.reserve([101, 102], A, unit=PER_METRE, kind="test")
    assert named(str(refused.value), 101) and not named(str(refused.value), 102)
    store.reserve([102], 1.0, unit=PER_METRE, kind="test")  # the default
    store.grant(0.5, unit=PER_METRE, persons=[101])  # raised: 0.25 more
    store.reserve([101], 0.25, unit=PER_METRE, kind="test")
    assert balance(store, 101) == (0.5, 0.5, 0.0)
    assert_within_totals(store)


def test_a_total_lowered_below_what_was_used_leaves_the_person_exhausted(store):
    store.grant(1.0, unit=PER_METRE)
    store.reserve([101], 40 * A, unit=PER_METRE, kind="test")
    store.reserve(["ann"], 10 * A, unit=PER_METRE, kind="test", spend=False)  # held, not spent yet
    store.reserve(["ann"], 20 * A, unit=PER_METRE, kind="test")
    store.grant(8 * A, unit=PER_METRE, persons=[101, "ann"])
    assert balance(store, 101) == (40 * A, 40 * A, 0.0)  # total = what was used: never spent > total
    assert balance(store, "ann") == (30 * A, 20 * A, 10 * A)
    b = store.balances()
    assert (b["remaining"] == 0).all() and (b["spent"] <= b["total"]).all()
    for person in (101, "ann"):
        with pytest.raises(BudgetExceededError):
            store.reserve([person], 2.0**-40, unit=PER_METRE, kind="test")  # not even a crumb
    store.grant(0.0, unit=PER_METRE, persons=[102])  # a person granted nothing can release nothing
    with pytest.raises(BudgetExceededError):
        store.reserve([102], 2.0**-40, unit=PER_METRE, kind="test")
    store.reserve([102], 0.0, unit=PER_METRE, kind="test")  # a release that costs nothing is not refused
    assert_within_totals(store)


@pytest.mark.parametrize("finish", ["settled for nothing", "cancelled"])
def test_a_lowered_grant_holds_once_a_pending_reservation_is_given_back(store, finish):
    """Lowered below what is in use, a total stays up only while the use holds it: a reservation given back (settled
    for less, or cancelled) brings it down to the grant, so the person cannot spend again what was taken away.
    Negative control: without the lowering the same reservation given back leaves its room."""
    store.grant(1.0, unit=PER_METRE)
    for person in ("low", "control"):
        store.reserve([person], 32 * A, unit=PER_METRE, kind="test")
    pending = {p: store.reserve([p], 16 * A, unit=PER_METRE, kind="test", spend=False) for p in ("low", "control")}
    store.grant(8 * A, unit=PER_METRE, persons=["low"])
    assert balance(store, "low") == (48 * A, 32 * A, 16 * A)
    for reservation in pending.values():
        reservation.commit([0.0]) if finish == "settled for nothing" else reservation.cancel()
    assert balance(store, "low") == (32 * A, 32 * A, 0.0)  # exhausted: the grant (8 A) is below what was spent
    with pytest.raises(BudgetExceededError, match="'low'"):
        store.reserve(["low"], A, unit=PER_METRE, kind="test")
    store.reserve(["control"], 16 * A, unit=PER_METRE, kind="test")  # the control got its room back
    assert_within_totals(store)


def test_every_grant_is_audited(store):
    store.grant(1.0, unit=PER_METRE, note="everyone, for life")
    store.grant(0.5, unit=PER_METRE, persons=["ann"], note="ann asked")
    store.grant(0.25, unit=PURE, persons=[2**62 + 1])  # a key pandas would round as a float
    store.grant(0.75, unit=PER_METRE, persons=[101, 102, "bob"])
    g = store.grants()
    assert list(g.columns) == ["time_utc", "unit", "person", "total", "persons", "note"]
    g["note"] = g["note"].fillna("-")  # no note: None, or NaN in pandas' string columns
    assert g[["unit", "person", "total", "persons", "note"]].to_dict("records") == [
        {"unit": PER_METRE, "person": None, "total": 1.0, "persons": 0, "note": "everyone, for life"},
        {"unit": PER_METRE, "person": "ann", "total": 0.5, "persons": 1, "note": "ann asked"},
        {"unit": PURE, "person": 2**62 + 1, "total": 0.25, "persons": 1, "note": "-"},
        {"unit": PER_METRE, "person": None, "total": 0.75, "persons": 3, "note": "-"},
    ]
    assert list(g["time_utc"]) == sorted(g["time_utc"])
    with pytest.raises(ParameterError):
        store.grant(-1.0, unit=PER_METRE)
    with pytest.raises(ParameterError):
        store.grant(math.inf, unit=PER_METRE, persons=[1])
    with pytest.raises(ParameterError):
        store.grant(1.0, unit="metres")
    assert len(store.grants()) == 4


# ------------------------------------------------------------------------------------------ units
def test_units_are_kept_apart(store):
    store.grant(1.0, unit=PER_METRE)
    store.grant(2.0, unit=PURE)
    store.reserve([101, "ann"], 1.5, unit=PURE, kind="synthesize")
    assert balance(store, 101, PURE) == (2.0, 1.5, 0.0)
    assert balance(store, 101, PER_METRE) is None  # an epsilon charge never touches epsilon/m
    store.reserve([101, "ann"], 1.0, unit=PER_METRE, kind="perturb")  # the whole epsilon/m budget is still there
    with pytest.raises(BudgetExceededError):
        store.reserve([101], 0.75, unit=PURE, kind="synthesize")
    with pytest.raises(BudgetExceededError):
        store.reserve([101], A, unit=PER_METRE, kind="perturb")
    assert balance(store, 101, PURE) == (2.0, 1.5, 0.0) and balance(store, 101, PER_METRE) == (1.0, 1.0, 0.0)


def test_a_unit_nobody_was_granted_is_refused(store, store_url):
    store.grant(1.0, unit=PER_METRE)
    before = dump(store_url)
    for unit in (PURE, value_unit("population")):
        with pytest.raises(BudgetExceededError) as refused:
            store.reserve([101, "ann"], A, unit=unit, kind="test")
        assert repr(unit) in str(refused.value) and "Nothing was drawn or charged" in str(refused.value)
    with pytest.raises(ParameterError):
        store.reserve([101], A, unit="epsilon/km", kind="test")
    assert store.releases().empty and store.balances(unit=PURE).empty
    assert dump(store_url) == before


# ------------------------------------------------------------------------------------------ refusals
def test_a_refusal_names_exactly_the_persons_who_cannot_afford_it_and_charges_nothing(store, store_url):
    store.grant(8 * A, unit=PER_METRE)
    store.grant(2 * A, unit=PER_METRE, persons=[101, "ann", 103])
    store.reserve([102, "bob"], 7 * A, unit=PER_METRE, kind="test")
    store.reserve([104], A, unit=PER_METRE, kind="test", spend=False)  # a reservation counts against the total
    before = dump(store_url)
    release = [101, 101, 101, "ann", "ann", 102, "bob", 103, 104, "cyd", "dee"]  # 3 rows of 101, 2 of ann, ...
    with pytest.raises(BudgetExceededError) as refused:
        store.reserve(release, A, unit=PER_METRE, kind="test", parameters={"mechanism": "planar_laplace"})
    message = str(refused.value)
    # 101: 3A > 2A; ann: 2A <= 2A fits; 102 and bob: 7A + A = 8A fits; 103: A fits; 104: A held + A fits; new: A
    over = {101}
    for person in set(release):
        assert named(message, person) == (person in over), (person, message)
    assert "Nothing was drawn or charged" in message
    assert dump(store_url) == before  # no balance, release, charge or label changed: "cyd" was never seen

    store.reserve([102], A, unit=PER_METRE, kind="test")  # now 102 is at its total
    with pytest.raises(BudgetExceededError) as refused:
        store.reserve([101, "ann", 102, "bob", "cyd", 104], [A, 3 * A, A, A, 9 * A, A], unit=PER_METRE, kind="test")
    message = str(refused.value)
    # 101: A <= 2A fits; ann: 3A > 2A; 102: 8A + A > 8A; bob: 7A + A fits; cyd (new): 9A > the default 8A
    for person, is_over in {101: False, "ann": True, 102: True, "bob": False, "cyd": True, 104: False}.items():
        assert named(message, person) == is_over, (person, message)
    assert len(store.releases()) == 3 and store.balances(persons=["cyd"]).empty


def test_refusals_never_show_anything_but_person_ids_amounts_and_the_unit(store, store_url):
    """A refusal's text: the persons' ids (as given: ints, strings), counts, the unit and epsilons; never a row
    label, a parameter value or the store's URL."""
    store.grant(A, unit=PER_METRE)
    secret_parameters = {"mechanism": "planar_laplace", "radius_m": 123.456789}
    with pytest.raises(BudgetExceededError) as refused:
        store.reserve(
            pd.Index([7001, 7001], name="pid"),
            A,
            unit=PER_METRE,
            kind="test",
            parameters=secret_parameters,
            row_labels=["row-a", "row-b"],
        )
    message = str(refused.value)
    assert named(message, 7001) and "row-a" not in message and "123.45" not in message
    assert store_url not in message and "budgets.db" not in message


# ------------------------------------------------------------------------------------------ reservations
def test_a_reservation_settled_for_less_gives_back_the_rest(store):
    store.grant(16 * A, unit=PER_METRE)
    r = store.reserve([101, 101, "ann", 102], 4 * A, unit=PER_METRE, kind="sanitize_traces", spend=False)
    order = r.persons.shown(r.persons.keys)  # the order of r.amounts and of commit's spent
    amounts = dict(zip(order, r.amounts))
    assert amounts == {101: 8 * A, "ann": 4 * A, 102: 4 * A}
    assert balance(store, 101) == (16 * A, 0.0, 8 * A)
    assert store.releases()["state"].tolist() == ["reserved"]
    assert store.charges()["spent"].isna().all()  # not settled yet
    with pytest.raises(BudgetExceededError):  # the reservation counts: 8A held + 9A > 16A
        store.reserve([101], 9 * A, unit=PER_METRE, kind="test")
    spent = {101: 3 * A, "ann": 0.0, 102: 4 * A}
    with pytest.raises(ParameterError):  # more than reserved: a bug in the caller, nothing settled
        r.commit(np.array([spent[p] if p != "ann" else 5 * A for p in order]))
    assert store.releases()["state"].tolist() == ["reserved"] and balance(store, 101) == (16 * A, 0.0, 8 * A)
    r.commit(np.array([spent[p] for p in order]))
    r.commit()  # a second commit does nothing
    for person, used in spent.items():
        assert balance(store, person) == (16 * A, used, 0.0)
    rel = store.releases().iloc[0]
    assert rel["state"] == "settled" and not pd.isna(rel["finished_utc"]) and rel["kind"] == "sanitize_traces"
    ch = store.charges(rel["release_id"])
    assert dict(zip(ch["person"], ch["reserved"])) == amounts and dict(zip(ch["person"], ch["spent"])) == spent
    store.reserve([101], 13 * A, unit=PER_METRE, kind="test")  # what was given back can be spent
    assert balance(store, 101) == (16 * A, 16 * A, 0.0)


@pytest.mark.parametrize("spend", [True, False])
def test_cancel_before_start_gives_everything_back(store, spend):
    store.grant(8 * A, unit=PER_METRE)
    r = store.reserve([101, "ann", "ann"], 3 * A, unit=PER_METRE, kind="test", spend=spend)
    assert balance(store, "ann") == ((8 * A, 6 * A, 0.0) if spend else (8 * A, 0.0, 6 * A))
    r.cancel()
    assert balance(store, 101) == (8 * A, 0.0, 0.0) and balance(store, "ann") == (8 * A, 0.0, 0.0)
    assert store.releases()["state"].tolist() == ["cancelled"]
    assert (store.charges()["spent"] == 0).all()
    r2 = store.reserve(["ann"], 8 * A, unit=PER_METRE, kind="test", spend=spend)  # all of it is back
    r2.start()
    with pytest.raises(ParameterError):  # noise may have been drawn: nothing can be given back
        r2.cancel()
    r2.commit()
    assert balance(store, "ann") == (8 * A, 8 * A, 0.0)


@pytest.mark.parametrize("spend", [True, False])
def test_an_exception_inside_a_reservation_gives_back_before_start_and_commits_in_full_after(store, spend):
    store.grant(8 * A, unit=PER_METRE)
    with pytest.raises(KeyError), store.reserve([101], 2 * A, unit=PER_METRE, kind="test", spend=spend):
        raise KeyError("before any draw")
    assert balance(store, 101) == (8 * A, 0.0, 0.0)
    with pytest.raises(KeyError), store.reserve([101], 2 * A, unit=PER_METRE, kind="test", spend=spend) as r:
        r.start()
        raise KeyError("while drawing")
    assert balance(store, 101) == (8 * A, 2 * A, 0.0)
    with store.reserve([101], 3 * A, unit=PER_METRE, kind="test", spend=spend) as r:
        r.start()
    assert balance(store, 101) == (8 * A, 5 * A, 0.0)
    assert store.releases()["state"].tolist() == ["cancelled"] + ["charged" if spend else "settled"] * 2


def test_the_store_agrees_with_a_model_through_a_random_sequence_of_operations(store):
    """200 seeded random grants, charges (spend and reserve), settlements, cancels; after each, every balance
    equals a model's (exact: amounts are multiples of 1/64) and spent + reserved <= total; a charge is refused
    exactly when the model says someone cannot afford it, naming exactly them."""
    rng = np.random.default_rng(20240611)
    persons = [101, 102, 103, 104, "ann", "bob", "cyd", "105"]  # "105" is person 105
    canon = {p: (int(p) if isinstance(p, str) and p.isdigit() else p) for p in persons}
    units = [PER_METRE, PURE]
    model = {u: {} for u in units}  # unit -> person -> [total, spent, reserved]
    default = {u: None for u in units}
    open_reservations = []
    refusals = 0
    for step in range(200):
        op = rng.choice(
            ["default", "grant", "spend", "reserve", "settle", "cancel"], p=[0.05, 0.1, 0.35, 0.2, 0.2, 0.1]
        )
        unit = units[rng.integers(2)]
        if op == "default":
            default[unit] = float(rng.integers(0, 24)) * A
            store.grant(default[unit], unit=unit)
        elif op == "grant":
            who = [persons[i] for i in rng.choice(len(persons), size=rng.integers(1, 4), replace=False)]
            total = float(rng.integers(0, 24)) * A
            store.grant(total, unit=unit, persons=who)
            for p in {canon[w] for w in who}:
                bal = model[unit].setdefault(p, [total, 0.0, 0.0])
                bal[0] = max(total, bal[1] + bal[2])
        elif op in ("spend", "reserve"):
            who = [persons[i] for i in rng.choice(len(persons), size=rng.integers(1, 6), replace=True)]
            per_row = rng.integers(0, 4, len(who)) * A
            need = {}
            for w, a in zip(who, per_row):
                need[canon[w]] = need.get(canon[w], 0.0) + float(a)
            over = set()
            for p, a in need.items():
                if p in model[unit]:
                    t, s, r = model[unit][p]
                    if s + r + a > t:
                        over.add(p)
                elif default[unit] is None or a > default[unit]:
                    over.add(p)
            try:
                res = store.reserve(who, per_row, unit=unit, kind="model", spend=op == "spend")
            except BudgetExceededError as exc:
                assert over, f"step {step}: refused although everyone can afford it: {exc}"
                for p in need:
                    assert named(str(exc), p) == (p in over), (step, p, str(exc))
                refusals += 1
            else:
                assert not over, f"step {step}: charged although {over} cannot afford it"
                for p, a in need.items():
                    bal = model[unit].setdefault(p, [default[unit], 0.0, 0.0])
                    bal[1 if op == "spend" else 2] += a
                if op == "reserve":
                    open_reservations.append((unit, res))
                else:
                    res.commit()
        elif op == "settle" and open_reservations:
            unit, res = open_reservations.pop(rng.integers(len(open_reservations)))
            spent = np.floor(res.amounts * rng.uniform(0, 1, len(res.amounts)) / A) * A
            res.commit(spent)
            for p, a, s in zip(res.persons.shown(res.persons.keys), res.amounts, spent):
                model[unit][p][2] -= a
                model[unit][p][1] += s
        elif op == "cancel" and open_reservations:
            unit, res = open_reservations.pop(rng.integers(len(open_reservations)))
            res.cancel()
            for p, a in zip(res.persons.shown(res.persons.keys), res.amounts):
                model[unit][p][2] -= a
        b = store.balances()
        assert (b["spent"] + b["reserved"] <= b["total"]).all(), (step, b)
        got = {
            (u, p): (t, s, r)
            for p, u, t, s, r in b[["person", "unit", "total", "spent", "reserved"]].itertuples(index=False)
        }
        want = {(u, p): tuple(v) for u in units for p, v in model[u].items()}
        assert got == want, f"step {step} ({op})"
    assert refusals > 10 and len(store.releases()) > 50  # the sequence did reach the limits


# ------------------------------------------------------------------------------------------ person ids
def test_person_ids_are_normalised(store):
    store.grant(1.0, unit=PER_METRE)
    store.reserve([5, "5", np.int64(5), "05", " 5", "-7", -7, "alice", "Alice"], A, unit=PER_METRE, kind="test")
    b = store.balances().set_index("person")
    # 5 == "5" == np.int64(5) == "05" == " 5"; "-7" == -7 (geopriv.identity: one rule for every use of an id)
    assert b.loc[5, "spent"] == 5 * A and b.loc[-7, "spent"] == 2 * A
    for other in ("alice", "Alice"):
        assert b.loc[other, "spent"] == A
    assert len(b) == 4
    keys = person_keys(pd.Series(["5", "x"], dtype="string"))  # pandas' string dtype: the same keys
    assert keys.keys.tolist() == person_keys(["5", "x"]).keys.tolist()
    assert 5 in keys.keys.tolist()
    assert person_keys(pd.array([5, 6], dtype="Int64")).keys.tolist() == [5, 6]
    assert person_keys([2**63 - 1, -(2**63)]).keys.tolist() == [-(2**63), 2**63 - 1]


BAD_IDS = [1.5, 448123.25, float("nan"), None, pd.NA, True, np.float64(3.0), b"5", (1, 2)]
BAD_COLUMNS = [
    pd.Series([1.0, 2.0, 3.0]),  # floats, even whole ones (possibly coordinates)
    pd.Series([True, False, True]),
    pd.Series([1, None, 3], dtype="Int64"),
    pd.Series(["a", None, "c"], dtype="string"),
    pd.Series([2**64 - 1, 1, 2], dtype="uint64"),
]


def test_unusable_person_ids_are_refused_by_row_label_never_by_value(store, store_url):
    store.grant(1.0, unit=PER_METRE)
    before = dump(store_url)
    for bad in BAD_IDS:
        ids = pd.Series([7, bad, "ann"], index=["row-a", "row-b", "row-c"], dtype=object)
        with pytest.raises(IdentityError) as refused:
            store.reserve(ids.to_numpy(), A, unit=PER_METRE, kind="test", row_labels=ids.index)
        message = str(refused.value)
        assert "row-b" in message and "row-a" not in message and "row-c" not in message, (bad, message)
        assert "448123" not in message and "1.5" not in message
    for column in BAD_COLUMNS:
        with pytest.raises(IdentityError):
            store.reserve(column, A, unit=PER_METRE, kind="test", row_labels=[10, 11, 12])
    assert dump(store_url) == before


def test_float_row_labels_are_never_shown(store):
    store.grant(1.0, unit=PER_METRE)
    with pytest.raises(IdentityError) as refused:
        store.reserve([1, None], A, unit=PER_METRE, kind="test", row_labels=[448123.25, 4416000.75])
    assert "448123" not in str(refused.value) and "4416000" not in str(refused.value)


# ------------------------------------------------------------------------------------------ views
def test_balances_releases_charges_and_info(store):
    store.grant(1.0, unit=PER_METRE)
    store.grant(2.0, unit=PURE)
    first = store.reserve(
        [101, 101, "ann"],
        4 * A,
        unit=PER_METRE,
        kind="perturb",
        parameters={"mechanism": "planar_laplace", "epsilon_per_m": 0.01},
        rows_released=3,
    )
    first.commit()
    second = store.reserve(["ann", 102], [A, 2 * A], unit=PURE, kind="synthesize", spend=False)
    b = store.balances()
    assert list(b.columns) == ["person", "unit", "total", "spent", "reserved", "remaining"]
    assert len(b) == 4 and (b["remaining"] == b["total"] - b["spent"] - b["reserved"]).all()
    assert store.balances(unit=PURE, persons=["ann"]).to_dict("records") == [
        {"person": "ann", "unit": PURE, "total": 2.0, "spent": 0.0, "reserved": A, "remaining": 2.0 - A}
    ]
    assert store.balances(persons=[101, "nobody"])["person"].tolist() == [101]

    rel = store.releases()
    assert list(rel.columns) == [
        "release_id",
        "kind",
        "unit",
        "mechanism",
        "parameters",
        "state",
        "started_utc",
        "finished_utc",
        "persons",
        "rows_released",
        "largest_charge",
        "geopriv_version",
    ]
    assert rel["release_id"].tolist() == [first.release_id, second.release_id]
    assert rel["kind"].tolist() == ["perturb", "synthesize"] and rel["unit"].tolist() == [PER_METRE, PURE]
    assert rel["mechanism"][0] == "planar_laplace" and pd.isna(rel["mechanism"][1])
    assert json.loads(rel["parameters"][0]) == {"mechanism": "planar_laplace", "epsilon_per_m": 0.01}
    assert rel["state"].tolist() == ["charged", "reserved"]
    assert not pd.isna(rel["finished_utc"][0]) and pd.isna(rel["finished_utc"][1])
    assert rel["persons"].tolist() == [2, 2] and rel["rows_released"][0] == 3
    assert rel["largest_charge"].tolist() == [8 * A, 2 * A]
    assert set(rel["geopriv_version"]) == {geopriv.__version__}

    ch = store.charges()
    assert list(ch.columns) == ["release_id", "person", "unit", "reserved", "spent"]
    mine = ch[ch["release_id"] == first.release_id]
    assert dict(zip(mine["person"], mine["spent"])) == {101: 8 * A, "ann": 4 * A}
    held = store.charges(second.release_id)
    assert dict(zip(held["person"], held["reserved"])) == {"ann": A, 102: 2 * A} and held["spent"].isna().all()
    second.commit([0.0, A] if second.persons.shown(second.persons.keys)[0] == "ann" else [A, 0.0])
    held = store.charges(second.release_id)
    assert dict(zip(held["person"], held["spent"])) == {"ann": 0.0, 102: A}

    info = store.info()
    assert info["schema_version"] == SCHEMA_VERSION and info["created_with"] == geopriv.__version__
    assert info["persons"] == 3 and info["url"] == store.url
    assert info["releases"] == {"charged": 1, "reserved": 0, "settled": 1, "cancelled": 0}
    assert repr(store) == f"BudgetStore({store.url!r})"


@pytest.mark.postgresql
def test_a_password_in_the_url_is_never_shown(pg_url):
    url = pg_url.replace("postgresql://geopriv@", "postgresql://geopriv:s3cr3t-pw@")
    with BudgetStore(url, create=True) as s:  # trust authentication: the password is not needed, only carried
        assert "s3cr3t" not in s.url and "s3cr3t" not in repr(s) and "s3cr3t" not in str(s.info())
        s.grant(1.0, unit=PER_METRE)
        with pytest.raises(BudgetExceededError) as refused:
            s.reserve([1], 2.0, unit=PER_METRE, kind="test")
        assert "s3cr3t" not in str(refused.value)
        s.reserve([1], 0.5, unit=PER_METRE, kind="test", parameters={"budget_store": s.kind})
        assert "s3cr3t" not in dump_text(pg_url)


def test_a_store_cannot_be_pickled(store):
    import pickle

    with pytest.raises(TypeError, match="URL"):
        pickle.dumps(store)


# ------------------------------------------------------------------------------------------ perturb
UTM = 32650
LEVEL, RADIUS = math.log(4), 200


@pytest.fixture
def people():
    """12 points around Beijing (UTM 50N) with coordinates of many digits; pid: 101 x1, 102 x2, 103 x3, ann x2,
    bob x1, "104" x3 (the same person as 104)."""
    rng = np.random.default_rng(11)
    x = 448_000 + rng.uniform(0, 3_000, 12)
    y = 4_416_000 + rng.uniform(0, 3_000, 12)
    pid = [101, 102, 102, 103, 103, 103, "ann", "ann", "bob", "104", 104, "104"]
    return gpd.GeoDataFrame(
        {"pid": pd.Series(pid, dtype=object), "value": np.arange(12)}, geometry=gpd.points_from_xy(x, y), crs=UTM
    )


ROWS = {101: 1, 102: 2, 103: 3, "ann": 2, "bob": 1, 104: 3}


def test_perturb_charges_every_person_the_row_cost_times_their_rows(store, people, store_url):
    store.grant(1.0, unit=PER_METRE)
    out = people.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, person="pid", rng=1)
    record = out.attrs["geopriv"]
    cost = record["charged_per_row"]
    assert record["budget_store"] == kind(store_url) and record["budget_unit"] == PER_METRE
    assert cost >= LEVEL / RADIUS and cost == pytest.approx(LEVEL / RADIUS, rel=1e-4)
    b = store.balances().set_index("person")
    assert set(b.index) == set(ROWS)
    for person, rows in ROWS.items():
        assert b.loc[person, "spent"] == cost * rows and b.loc[person, "reserved"] == 0
    rel = store.releases().iloc[0]
    assert (rel["kind"], rel["state"], rel["mechanism"], rel["persons"], rel["rows_released"]) == (
        "perturb",
        "charged",
        "planar_laplace",
        6,
        12,
    )
    assert not pd.isna(rel["finished_utc"]) and rel["largest_charge"] == cost * 3

    out2 = geopriv.perturb(people, level=LEVEL, radius=RADIUS, budget_store=store, person="pid", rng=2)  # same
    assert out2.attrs["geopriv"]["charged_per_row"] == cost
    b = store.balances().set_index("person")
    for person, rows in ROWS.items():
        assert b.loc[person, "spent"] == cost * rows + cost * rows


def test_perturb_with_the_store_url(people, store_url):
    with BudgetStore(store_url, create=True) as s:
        s.grant(1.0, unit=PER_METRE)
    out = people.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store_url, person="pid", rng=1)
    with BudgetStore(store_url) as s:
        spent = s.balances().set_index("person")["spent"]
        assert spent[103] == 3 * out.attrs["geopriv"]["charged_per_row"]


def test_a_release_that_would_overspend_is_refused_before_any_noise(store, people, store_url):
    store.grant(1.0, unit=PER_METRE)
    cost = people.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, person="pid", rng=1).attrs["geopriv"][
        "charged_per_row"
    ]
    store.grant(2.5 * cost, unit=PER_METRE, persons=list(ROWS))  # one-row persons can afford one more row
    before = dump(store_url)
    rng = np.random.default_rng(5)
    state = copy.deepcopy(rng.bit_generator.state)
    with pytest.raises(BudgetExceededError) as refused:
        people.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, person="pid", rng=rng)
    message = str(refused.value)
    for person, rows in ROWS.items():
        assert named(message, person) == (rows > 1), (person, message)
    assert rng.bit_generator.state == state  # not a single draw
    assert dump(store_url) == before
    one_row = people[people["pid"].isin([101, "bob"])]
    one_row.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, person="pid", rng=rng)
    assert rng.bit_generator.state != state
    assert store.balances(persons=[101])["spent"].item() == 2 * cost


def test_invalid_input_charges_nothing(store, people, store_url):
    store.grant(1.0, unit=PER_METRE)
    before = dump(store_url)
    rng = np.random.default_rng(5)
    state = copy.deepcopy(rng.bit_generator.state)
    xmin, ymin, xmax, ymax = people.total_bounds
    outside = (xmin + 1, ymin - 1, xmax + 1, ymax + 1)  # the westernmost point is outside the declared area
    with pytest.raises(geopriv.GeoprivError) as refused:
        people.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, person="pid", rng=rng, bounds=outside)
    assert not isinstance(refused.value, BudgetExceededError)
    with pytest.raises(IdentityError):  # a missing person id
        people.assign(pid=people["pid"].where(people.index != 3, None)).priv.perturb(
            level=LEVEL, radius=RADIUS, budget_store=store, person="pid", rng=rng
        )
    with pytest.raises(geopriv.GeoprivError):  # no such column
        people.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, person="nope", rng=rng)
    assert rng.bit_generator.state == state and dump(store_url) == before


def test_the_index_as_person(store, people, store_url):
    store.grant(1.0, unit=PER_METRE)
    before = dump(store_url)
    with pytest.raises(IdentityError):  # an unnamed integer index looks like positions
        people.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, rng=1)
    assert dump(store_url) == before
    named_index = people.set_index("pid")
    out = named_index.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, rng=1)
    cost = out.attrs["geopriv"]["charged_per_row"]
    b = store.balances().set_index("person")
    assert {p: b.loc[p, "spent"] for p in ROWS} == {p: cost * rows for p, rows in ROWS.items()}
    ints = people.set_index(pd.Index(np.arange(500, 512), name="member"))  # a named integer index: declared ids
    ints.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, rng=1)
    assert store.balances(persons=[511])["spent"].item() == cost


# ------------------------------------------------------------------------------------------ no coordinates
def _coordinate_patterns(gdf):
    texts, packed = set(), set()
    for v in np.concatenate([gdf.geometry.x.to_numpy(), gdf.geometry.y.to_numpy()]):
        texts |= {repr(float(v)), f"{v:.1f}", f"{v:.2f}", f"{v:.3f}"}
        packed |= {struct.pack("<d", v), struct.pack(">d", v), struct.pack("<f", v)}
    return texts, packed


def test_the_store_holds_no_coordinates(store, people, store_url):
    store.grant(1.0, unit=PER_METRE)
    store.grant(4.0, unit=PURE)
    people.priv.perturb(level=LEVEL, radius=RADIUS, budget_store=store, person="pid", rng=1)
    people.priv.perturb(
        level=LEVEL,
        radius=RADIUS,
        budget_store=store,
        person="pid",
        rng=2,
        bounds=(447_000, 4_415_000, 452_000, 4_420_000),
    )  # a public, round area
    geopriv.synthesize(
        people, epsilon=0.5, budget_store=store, person="pid", rng=3, bounds=(447_000, 4_415_000, 452_000, 4_420_000)
    )
    texts, packed = _coordinate_patterns(people)
    text, raw = dump_text(store_url), dump_bytes(store_url)
    for t in texts:
        assert t not in text, f"a coordinate ({t}) is in the store"
    for p in packed:
        assert p not in raw, "a packed coordinate is in the store"
    if kind(store_url) == "sqlite":  # and nowhere in the files (free pages, the write-ahead log)
        files = b"".join(
            Path(sqlite_path(store_url) + suffix).read_bytes()
            for suffix in ("", "-wal")
            if Path(sqlite_path(store_url) + suffix).exists()
        )
        for t in texts:
            assert t.encode() not in files
        for p in packed:
            assert p not in files
    rel = store.releases()
    assert len(rel) == 3
    for parameters in rel["parameters"]:
        fields = json.loads(parameters)
        assert set(fields) <= set(ALLOWED_FIELDS), set(fields) - set(ALLOWED_FIELDS)
        assert "seed" not in fields and "budget_store" in fields
        assert fields["budget_store"] == kind(store_url)  # the kind, never the URL
    assert store_url not in text


def test_a_schema_1_store_is_rekeyed_by_the_identity_rule(store_url):
    """Issue 41: schema 1 keyed text ids by their raw text ("05", NFD "Renée" were persons of their own); opening
    it re-keys them by geopriv.identity, merging persons that became one (amounts add up, the smaller total kept),
    so nobody gets a second budget from the upgrade."""
    import unicodedata

    from geopriv.identity import _hash_text
    from tests.budget_support import execute

    with BudgetStore(store_url, create=True) as s:
        s.grant(1.0, unit="epsilon")
        s.reserve([5, "Zoë"], 0.25, unit="epsilon", kind="test")
    unit = execute(store_url, "SELECT id FROM geopriv_unit WHERE unit = 'epsilon'")[0][0]
    nfd = unicodedata.normalize("NFD", "Renée")
    old = {text: int(_hash_text([text])[0]) for text in ("05", nfd, " Zoë")}
    statements = []
    for text, spent in (("05", 0.5), (nfd, 0.125), (" Zoë", 0.5)):
        statements += [
            ("INSERT INTO geopriv_person (person, label) VALUES (?, ?)", (old[text], text)),
            (
                f"INSERT INTO geopriv_budget_{unit} (person, total, spent, reserved) VALUES (?, ?, ?, 0)",
                (old[text], 1.0, spent),
            ),
        ]
    execute(store_url, *statements, "UPDATE geopriv_meta SET value = '1' WHERE key = 'schema_version'")
    with BudgetStore(store_url) as s:
        assert s.info()["schema_version"] == SCHEMA_VERSION
        bal = s.balances(unit="epsilon").set_index("person")["spent"].to_dict()
        assert bal == {5: 0.75, "Zoë": 0.75, "Renée": 0.125}  # "05" is 5 and " Zoë" is "Zoë": merged, never split
        with pytest.raises(BudgetExceededError):  # the merged person cannot spend a second budget
            s.reserve(["05"], 0.5, unit="epsilon", kind="test")
    keys = {r[0] for r in execute(store_url, "SELECT person FROM geopriv_person")}
    assert not keys & set(old.values())
