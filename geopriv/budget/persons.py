"""Person ids as the budget store keys them: one signed 64-bit integer per person.

A store must never give one person two budgets, so ids are normalised before they are keyed:

* an integer id is its own key (``5``, ``np.int64(5)``);
* a string that is a canonical decimal integer is that integer (``"5"`` is person ``5``: the same
  register read from a CSV file and from a GeoPackage keys the same person, whatever the column's
  type); ``"05"`` and ``"5 "`` are other strings;
* any other string is keyed by a 64-bit SipHash of its text (the label is kept beside it, for
  :meth:`~geopriv.budget.BudgetStore.balances`).

Two ids that share a key share a budget: charged together, never undercounted.  Missing ids,
floats (possibly coordinates), booleans and other objects are refused
(:class:`~geopriv.exceptions.IdentityError`) by row label.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..exceptions import Fix, IdentityError

__all__ = ["PersonKeys", "person_keys", "PERSON_FIX"]

PERSON_FIX = Fix(
    "person_column",
    python="Pass person='<column>' naming a column of stable person ids (integers or strings, no missing values).",
    cli="Give --person COLUMN naming a column of stable person ids (integers or strings, no missing values).",
    qgis="Choose a 'Person id field' of stable person ids (integers or strings, no empty values).",
)

_DECIMAL = re.compile(r"-?(0|[1-9][0-9]{0,18})")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class PersonKeys:
    """The persons of a release: sorted unique keys, each one's row count, and labels to show.

    Attributes
    ----------
    keys : ndarray of int64
        Sorted unique keys (the order in which the store locks and charges them).
    counts : ndarray of int64
        How many rows of the release each key has.
    inverse : ndarray of intp
        For each row, the index of its key in ``keys``.
    labels : dict
        ``key -> label`` for keys of non-decimal string ids (shown by the store instead of the key).
    """

    __slots__ = ("keys", "counts", "inverse", "labels")

    def __init__(self, keys, counts, inverse, labels):
        self.keys, self.counts, self.inverse, self.labels = keys, counts, inverse, labels

    def __len__(self) -> int:
        return len(self.keys)

    def shown(self, keys) -> list:
        """Labels for ``keys`` as a user knows them (the id itself)."""
        return [self.labels.get(int(k), int(k)) for k in keys]


def person_keys(ids, row_labels=None, what: str = "person id") -> PersonKeys:
    """Key the person id of every row (see the module docstring); refuse what cannot name a person.

    Parameters
    ----------
    ids : array-like
        One id per row (repeats are the same person).
    row_labels : array-like, optional
        Row labels used to name the offending rows in an error (default: the positions).
    """
    ids = pd.Index(ids) if not isinstance(ids, pd.Index) else ids
    rows = pd.Index(range(len(ids))) if row_labels is None else pd.Index(row_labels)
    n = len(ids)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return PersonKeys(empty, empty, np.zeros(0, np.intp), {})
    if pd.api.types.is_bool_dtype(ids.dtype):
        raise IdentityError(f"have boolean {what}s: they cannot tell people apart", None, PERSON_FIX, count=n)
    if pd.api.types.is_integer_dtype(ids.dtype) and not isinstance(ids.dtype, pd.CategoricalDtype):
        if ids.hasnans:
            raise IdentityError(f"have missing {what}s", _named(rows, np.asarray(ids.isna())), PERSON_FIX)
        if pd.api.types.is_unsigned_integer_dtype(ids.dtype):
            big = np.asarray(ids, dtype=np.uint64) > np.uint64(_INT64_MAX)
            if big.any():
                raise IdentityError(f"have {what}s of 2^63 or more", _named(rows, big), PERSON_FIX)
        keys = np.asarray(ids, dtype=np.int64)
        return _group(keys, {})
    values = np.asarray(ids, dtype=object)
    keys = np.empty(n, np.int64)
    labels: dict = {}
    kinds = np.fromiter((0 if type(v) is str else 1 if _is_int(v) else 2 for v in values), np.int8, n)  # noqa: E721
    if (kinds == 2).any():  # not shown by value: floats may be coordinates
        raise IdentityError(f"have {what}s that are neither integers nor strings (missing, NaN, floats or other "
                            "objects; not shown)", _named(rows, kinds == 2), PERSON_FIX)
    ints = kinds == 1
    if ints.any():
        as_int = [int(v) for v in values[ints]]
        if any(v < _INT64_MIN or v > _INT64_MAX for v in as_int):
            raise IdentityError(f"have integer {what}s beyond 64 bits", None, PERSON_FIX, count=int(ints.sum()))
        keys[ints] = as_int
    strs = ~ints
    if strs.any():
        s = pd.Series(values[strs], dtype=object)
        decimal = s.str.fullmatch(_DECIMAL.pattern).to_numpy(bool)
        idx = np.flatnonzero(strs)
        if decimal.any():
            keys[idx[decimal]] = [int(v) for v in s[decimal]]
        if (~decimal).any():
            text = s[~decimal]
            hashed = pd.util.hash_pandas_object(text, index=False, hash_key="geopriv-person-k").to_numpy(np.uint64)
            hashed = hashed.view(np.int64)
            keys[idx[~decimal]] = hashed
            labels = dict(zip(hashed.tolist(), text.tolist()))
    return _group(keys, labels)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _named(rows: pd.Index, mask) -> list | None:
    """Row labels to show (integers or strings only: other labels may be coordinates)."""
    bad = rows[np.asarray(mask, bool)]
    if pd.api.types.is_integer_dtype(bad.dtype) or all(type(v) is str for v in bad):  # noqa: E721
        return list(bad)
    return None


def _group(keys: np.ndarray, labels: dict) -> PersonKeys:
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    if labels:
        present = set(uniq.tolist())
        labels = {k: v for k, v in labels.items() if k in present}
    return PersonKeys(uniq.astype(np.int64, copy=False), counts.astype(np.int64), inverse.reshape(-1), labels)
