"""Privacy budgets: spend, reserve, refuse.  Separate from the mechanisms.

Mechanisms (:mod:`geopriv.mechanisms`) *report* what a release costs; an accountant *spends*
budget and *refuses* a release that would overspend, before any noise is drawn.  geopriv's
budgets are epsilons per ground metre (see :mod:`geopriv.crs`): a trace sanitised with a total
budget ``epsilon`` is ``epsilon * d_inf``-private (Chatzikokolakis et al. 2014, Theorem 3.1).

:class:`BudgetAccountant` holds one budget per *label* (a trace id, a user, or one label for
a single budget) and works on many labels at once with numpy arrays:

* :meth:`~BudgetAccountant.spend` checks the whole request first and records it only if every
  label can afford its share; otherwise it raises :class:`~geopriv.exceptions.BudgetExceededError`
  and records nothing.
* :meth:`~BudgetAccountant.reserve` / :meth:`~BudgetAccountant.settle` is the two-phase form a
  predictive step needs: reserve the worst case (test + noise) before the test and the noise
  are drawn, then settle what the public outcome says was spent (the test alone on an easy
  step, Lemma 1), giving back the rest.
* The invariant ``spent + reserved <= total`` holds at all times, compared in floating point
  exactly as stored, so a ledger can never show more than its budget.
* A total can be lowered (:meth:`~BudgetAccountant.lower_total`), never raised: there is no
  method that raises it and the arrays handed out are read-only copies.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from .exceptions import BudgetExceededError, GeoprivError, ParameterError, format_labels

__all__ = ["BudgetAccountant", "DiffusionLedger"]


def _positive_totals(total, n):
    arr = np.array(total, dtype=float, copy=True).reshape(-1) if np.ndim(total) else np.full(n, float(total))
    if arr.shape != (n,):
        raise ParameterError(f"total must be a number or one number per label ({n}), got shape {np.shape(total)}.")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ParameterError(
            "Every total budget must be finite and > 0 (epsilon per metre), e.g. math.log(10) / 100 for "
            "'ln 10 within 100 m over the whole trace'."
        )
    return arr


class BudgetAccountant:
    """Privacy budgets (epsilon per ground metre) for one or many labels.

    Parameters
    ----------
    total : float or array_like
        The total budget of each label: one number for all, or one per label.
    labels : iterable, optional
        Names used in error messages and :meth:`to_frame` (trace ids, user ids).  Default:
        a single unnamed budget (``labels=[None]``) when ``total`` is a number, else 0..n-1.

    Raises
    ------
    geopriv.exceptions.ParameterError
        If a total is not finite and > 0, ``total`` does not give one number per label, or
        there is no label.

    See Also
    --------
    BudgetStore : Lifetime budgets per person, kept in a database across sessions.
    DiffusionLedger : What graded releases over a network cost (a path costs its largest epsilon).
    BudgetExceededError : Raised when a release would overspend; nothing is recorded.

    Examples
    --------
    >>> acc = geopriv.BudgetAccountant(1.0)
    >>> acc.spend(0.4); acc.spend(0.5)
    >>> float(acc.remaining[0])
    0.09999...
    >>> try:
    ...     acc.spend(0.2)
    ... except geopriv.BudgetExceededError as exc:
    ...     print(type(exc).__name__)
    BudgetExceededError

    One budget per trace, spent for several traces at once (all or nothing):

    >>> acc = geopriv.BudgetAccountant([0.02, 0.01], labels=["trace a", "trace b"])
    >>> acc.spend([0.005, 0.005])
    >>> acc.to_frame()["remaining"].round(6).tolist()
    [0.015, 0.005]
    """

    def __init__(self, total, labels: Iterable | None = None):
        if labels is None:
            labels = [None] if np.ndim(total) == 0 else list(range(len(np.atleast_1d(total))))
        self._labels = list(labels)
        n = len(self._labels)
        if n == 0:
            raise ParameterError("An accountant needs at least one label (one budget).")
        self._total = _positive_totals(total, n)
        self._spent = np.zeros(n)
        self._reserved = np.zeros(n)

    # ------------------------------------------------------------------ views
    @property
    def labels(self) -> list:
        return list(self._labels)

    @property
    def total(self) -> np.ndarray:
        """Total budget of each label (a read-only copy)."""
        return self._readonly(self._total)

    @property
    def spent(self) -> np.ndarray:
        """Budget spent by settled releases (a read-only copy)."""
        return self._readonly(self._spent)

    @property
    def reserved(self) -> np.ndarray:
        """Budget held by reservations not yet settled (a read-only copy)."""
        return self._readonly(self._reserved)

    @property
    def remaining(self) -> np.ndarray:
        """``total - spent - reserved``, never negative."""
        return self._readonly(np.maximum(self._total - self._spent - self._reserved, 0.0))

    @staticmethod
    def _readonly(a):
        out = a.copy()
        out.setflags(write=False)
        return out

    def __len__(self) -> int:
        return len(self._labels)

    def __repr__(self) -> str:
        return f"BudgetAccountant({len(self)} label(s), spent {self._spent.sum():.6g} of {self._total.sum():.6g})"

    # ------------------------------------------------------------------ checks
    def _rows_amounts(self, amounts, rows, assume_unique=False):
        if rows is None:
            rows = np.arange(len(self._labels))
        else:
            rows = np.asarray(rows)
            if rows.dtype == bool:
                rows = np.flatnonzero(rows)
            rows = rows.astype(np.intp, copy=False)
        amounts = np.broadcast_to(np.asarray(amounts, dtype=float), rows.shape)
        if not np.all(np.isfinite(amounts)) or np.any(amounts < 0):
            raise ParameterError("Amounts of budget must be finite and >= 0.")
        if not assume_unique and len(np.unique(rows)) != len(rows):
            raise ParameterError("Each label may appear once per call; add the amounts first.")
        return rows, amounts

    def headroom(self, rows=None) -> np.ndarray:
        """The largest amount each of ``rows`` can still take: ``affordable(headroom(rows), rows)`` is all True.

        ``total - spent - reserved`` rounded down until the accountant's own floating-point
        check accepts it, so a release sized to the headroom is never refused by rounding.
        """
        rows = np.arange(len(self._labels)) if rows is None else np.asarray(rows, dtype=np.intp)
        used = self._spent[rows] + self._reserved[rows]
        room = np.maximum(self._total[rows] - used, 0.0)
        for _ in range(8):
            over = used + room > self._total[rows]
            if not over.any():
                break
            room[over] = np.nextafter(room[over], 0.0)
        return room

    def affordable(self, amounts, rows=None) -> np.ndarray:
        """Which of ``rows`` can take ``amounts`` more (bool array); nothing is recorded."""
        rows, amounts = self._rows_amounts(amounts, rows)
        return self._spent[rows] + self._reserved[rows] + amounts <= self._total[rows]

    def _refuse(self, rows, amounts, ok, what):
        bad = rows[~ok]
        labels = [self._labels[i] for i in bad]
        short = float(np.max(self._spent[bad] + self._reserved[bad] + amounts[~ok] - self._total[bad]))
        raise BudgetExceededError(
            f"{what} would exceed the privacy budget of {len(bad)} label(s): {format_labels(labels)} "
            f"(over by up to {short:.3g} per metre). Nothing was drawn or recorded. Release fewer points, "
            "use a smaller epsilon per release, or start a new budget period deliberately (a new accountant)."
        )

    # ------------------------------------------------------------------ spending
    def spend(self, amounts, rows=None, *, assume_unique=False) -> None:
        """Record ``amounts`` for ``rows`` (all labels by default), or raise and record nothing.

        ``assume_unique=True`` skips the check that ``rows`` has no repeats (for hot loops).

        Raises
        ------
        BudgetExceededError
            If any row would go over its total.  Call this *before* drawing noise.
        """
        rows, amounts = self._rows_amounts(amounts, rows, assume_unique)
        ok = self._spent[rows] + self._reserved[rows] + amounts <= self._total[rows]
        if not ok.all():
            self._refuse(rows, amounts, ok, "This release")
        self._spent[rows] += amounts

    def reserve(self, amounts, rows=None, *, assume_unique=False) -> None:
        """Hold ``amounts`` (the worst case of a release) for ``rows``, or raise and hold nothing."""
        rows, amounts = self._rows_amounts(amounts, rows, assume_unique)
        ok = self._spent[rows] + self._reserved[rows] + amounts <= self._total[rows]
        if not ok.all():
            self._refuse(rows, amounts, ok, "This reservation")
        self._reserved[rows] += amounts

    def settle(self, reserved, spent, rows=None, *, assume_unique=False) -> None:
        """Turn a reservation into spending: ``spent <= reserved`` is recorded, the rest freed.

        Because ``spent <= reserved`` and floating-point addition is monotonic, the settled
        ``spent`` can never exceed the total that the reservation was checked against.
        """
        rows, reserved = self._rows_amounts(reserved, rows, assume_unique)
        spent = np.broadcast_to(np.asarray(spent, dtype=float), rows.shape)
        held = self._reserved[rows]
        if not (np.all(spent <= reserved) and np.all(spent >= 0) and np.all(reserved <= held * (1 + 1e-12) + 1e-300)):
            raise GeoprivError("settle(): spent must be within what was reserved for each row (a mechanism bug).")
        held = np.maximum(held - reserved, 0.0)
        self._reserved[rows] = held
        self._spent[rows] = np.minimum(self._spent[rows] + spent, self._total[rows] - held)

    def lower_total(self, new_total, rows=None) -> None:
        """Lower the total budget of ``rows`` (always allowed); raising it is refused.

        A total lowered below what is already spent (and reserved) leaves the label exhausted:
        its total becomes what it has used, so the ledger still never shows more than the total.
        """
        rows, new_total = self._rows_amounts(new_total, rows)
        if np.any(new_total > self._total[rows]):
            raise GeoprivError(
                "A privacy budget can only be lowered: raising the total would silently weaken the guarantee "
                "already given for earlier releases. Start a new accountant for a new, deliberate budget period."
            )
        used = self._spent[rows] + self._reserved[rows]
        self._total[rows] = np.maximum(new_total, used)

    def to_frame(self) -> pd.DataFrame:
        """One row per label: total, spent, reserved, remaining."""
        return pd.DataFrame(
            {"total": self._total, "spent": self._spent, "reserved": self._reserved, "remaining": self.remaining},
            index=pd.Index(self._labels, name="label"),
        )


class DiffusionLedger:
    """What graded releases over a network cost: per source and per released quantity, the largest epsilon of each path.

    One path (:class:`~geopriv.mechanisms.diffusion.DiffusionPath`) answers any number of
    recipients, and any coalition of them learns no more than its closest member
    (Koufogiannis and Pappas): a path costs its **largest** epsilon, not the sum.  Answering more
    recipients from the same path (or extending it) charges only the increase of that largest
    epsilon; a **fresh** path for the same source is a new, independent release and is charged
    in full (the epsilons of independent paths add up).

    Totals are kept per ``(source, released)``: the source's location (epsilon per ground metre)
    and each value column (epsilon per unit of that value) have their own totals, because
    metres and units of a value cannot be added.  ``spent(source)`` is the location total;
    ``spent(source, value="infected")`` a value's.  (They still compose: a location and a value
    of the same person that are related leak together; the ledger does not model that.)

    A path is charged by its binding: a bound path made for another source, or for another
    released quantity, is refused by :meth:`check` and :meth:`record`
    (:class:`~geopriv.exceptions.PathBindingError`) instead of being charged as if it answered
    this one.

    Parameters
    ----------
    total : float, optional
        Budget per source for locations (epsilon per ground metre).  ``None``: record only,
        never refuse.
    value_total : float, optional
        Budget per source and value column (epsilon per unit of the value).  Default: ``total``
        (give it explicitly: the units differ).

    Raises
    ------
    geopriv.exceptions.ParameterError
        If ``total`` or ``value_total`` is not finite and > 0.

    See Also
    --------
    diffuse_locations : A location (or value) released to a network, charged to a ledger (``ledger=``).
    DiffusionPath : The secret path whose largest epsilon is charged.
    BudgetAccountant : Budgets that add up release by release.

    Notes
    -----
    The ledger recognises a path by :meth:`~geopriv.mechanisms.diffusion.DiffusionPath.fingerprint`
    (a SHA-256 of its noise and binding); it keeps no path and :meth:`to_frame` shows no fingerprint.

    Examples
    --------
    A path answering recipients up to 0.02 per ground metre costs 0.02; extending the same path
    to 0.03 costs only the increase:

    >>> ledger = geopriv.DiffusionLedger(total=0.05)
    >>> path = geopriv.DiffusionPath.sample(2, eps_max=0.02, eps_min=0.001, rng=1)
    >>> ledger.record("ann", 0.02, None, path)
    0.02
    >>> wider = path.extend_up(0.03, rng=2)
    >>> round(ledger.record("ann", 0.03, path, wider), 6)
    0.01
    >>> ledger.spent("ann")
    0.03

    A fresh path is an independent release, charged in full, and refused before any noise is
    drawn when it would overspend:

    >>> try:
    ...     ledger.check("ann", 0.04)
    ... except geopriv.BudgetExceededError as exc:
    ...     print(type(exc).__name__)
    BudgetExceededError
    """

    def __init__(self, total: float | None = None, value_total: float | None = None):
        if total is not None:
            total = float(_positive_totals(total, 1)[0])
        if value_total is not None:
            value_total = float(_positive_totals(value_total, 1)[0])
        self._total = total
        self._value_total = total if value_total is None else value_total
        self._entries: dict = {}  # (typed source, released) -> [source label, released text, [[fingerprint, eps]]]

    @staticmethod
    def _what(value) -> str:
        from .keys import LOCATION, value_column

        return LOCATION if value is None else value_column(value)

    def _key(self, source, value):
        from .keys import typed_label

        return (typed_label(source), self._what(value))

    def _limit(self, value):
        return self._total if value is None else self._value_total

    def _check_binding(self, source, value, path) -> None:
        from .exceptions import PathBindingError
        from .keys import typed_label

        if path is None or not getattr(path, "is_bound", False):
            return
        bound = path.binding
        diffs = []
        if bound["source"] != typed_label(source):
            diffs.append(f"the path answers row {bound['source']}, not row {typed_label(source)}")
        if bound["released"] != self._what(value):
            diffs.append(f"the path answers {bound['released']}, not {self._what(value)}")
        if diffs:
            raise PathBindingError(
                "the ledger cannot charge this path to this release: " + "; ".join(diffs) + ". Charge it to the source "
                "and quantity it was made for, or draw a fresh path for this one (a new release, charged in full)."
            )

    def _entry(self, source, path, value=None):
        if path is None:
            return None
        fp = path.fingerprint()
        for entry in self._entries.get(self._key(source, value), [None, None, []])[2]:
            if entry[0] == fp:
                return entry
        return None

    def spent(self, source, *, value=None) -> float:
        """Total charged to ``source`` for its location (or for column ``value``): the sum over paths of each largest epsilon."""
        row = self._entries.get(self._key(source, value))
        return 0.0 if row is None else float(sum(e[1] for e in row[2]))

    def cost(self, source, epsilon_max: float, path=None, *, value=None) -> float:
        """What answering up to ``epsilon_max`` costs: the whole of it for a new path, the increase for ``path``.

        A path this ledger has not seen is treated as new (charged in full).
        """
        entry = self._entry(source, path, value)
        return float(epsilon_max) if entry is None else max(0.0, float(epsilon_max) - entry[1])

    def check(self, source, epsilon_max: float, path=None, *, value=None) -> float:
        """Refuse before any noise is drawn if the release would overspend (BudgetExceededError) or ``path`` answers another source or quantity (PathBindingError)."""
        self._check_binding(source, value, path)
        cost = self.cost(source, epsilon_max, path, value=value)
        limit = self._limit(value)
        spent = self.spent(source, value=value)
        if limit is not None and spent + cost > limit * (1 + 1e-12):
            what = "location" if value is None else f"value {value!r}"
            raise BudgetExceededError(
                f"source {source!r} has spent {spent:.6g} of its {limit:.6g} for its {what}; this release would "
                f"cost {cost:.6g} more. Answer recipients from the path already used for this source (path=...), "
                "whose largest epsilon is already paid, or lower the epsilon function."
            )
        return cost

    def record(self, source, epsilon_max: float, old_path, new_path, *, value=None) -> float:
        """Charge the release that answered up to ``epsilon_max`` from ``new_path`` (an extension of ``old_path``, or new)."""
        self._check_binding(source, value, new_path)
        cost = self.check(source, epsilon_max, old_path, value=value)
        entry = self._entry(source, old_path, value)
        if entry is None:
            row = self._entries.setdefault(self._key(source, value), [source, self._what(value), []])
            row[2].append([new_path.fingerprint(), float(epsilon_max)])
        else:
            entry[0] = new_path.fingerprint()
            entry[1] = max(entry[1], float(epsilon_max))
        return cost

    def to_frame(self) -> pd.DataFrame:
        """One row per (source, released): unit, paths, spent (sum of each path's largest epsilon), total, remaining."""
        from .keys import LOCATION

        rows = []
        for (_, what), (source, _, entries) in self._entries.items():
            spent = float(sum(e[1] for e in entries))
            limit = self._total if what == LOCATION else self._value_total
            rows.append(
                {
                    "source": source,
                    "released": what,
                    "unit": "per ground metre" if what == LOCATION else "per unit of the value",
                    "paths": len(entries),
                    "largest_epsilon": max(e[1] for e in entries),
                    "spent": spent,
                    "total": limit,
                    "remaining": None if limit is None else max(limit - spent, 0.0),
                }
            )
        return pd.DataFrame(
            rows, columns=["source", "released", "unit", "paths", "largest_epsilon", "spent", "total", "remaining"]
        )

    def __repr__(self) -> str:
        return f"DiffusionLedger({len(self._entries)} (source, released) pair(s), total={self._total}, value_total={self._value_total})"
