"""Person ids as the budget store keys them: one signed 64-bit integer per person.

A store must never give one person two budgets, so ids are normalised before they are keyed:

* an integer id is its own key (``5``, ``np.int64(5)``);
* a string that is a canonical decimal integer is that integer (``"5"`` is person ``5``: the same
  register read from a CSV file and from a GeoPackage keys the same person, whatever the column's
  type); ``"05"`` and ``"5 "`` are other strings;
* any other string is keyed by a 64-bit hash of its UTF-8 text, fixed by geopriv (FNV-1a and
  SplitMix64's finaliser: never a library's hash, which could change between versions) (the label is kept beside it, for
  :meth:`~geopriv.budget.BudgetStore.balances`).

Two ids that share a key share a budget: charged together, never undercounted.  Missing ids,
floats (possibly coordinates), booleans and other objects are refused
(:class:`~geopriv.exceptions.IdentityError`) by row label.
"""

from __future__ import annotations


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
    label_keys, label_text : ndarray of int64, list of str
        The keys of non-decimal string ids and their text (shown by the store instead of the key).
    """

    __slots__ = ("keys", "counts", "inverse", "label_keys", "label_text", "_labels")

    def __init__(self, keys, counts, inverse, label_keys=None, label_text=()):
        self.keys, self.counts, self.inverse = keys, counts, inverse
        self.label_keys = np.zeros(0, np.int64) if label_keys is None else label_keys
        self.label_text = list(label_text)
        self._labels = None

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def labels(self) -> dict:
        """``key -> text`` of the non-decimal string ids."""
        if self._labels is None:
            self._labels = dict(zip(self.label_keys.tolist(), self.label_text))
        return self._labels

    def shown(self, keys) -> list:
        """Labels for ``keys`` as a user knows them (the id itself)."""
        labels = self.labels
        return [labels.get(int(k), int(k)) for k in keys]


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
        return PersonKeys(empty, empty, np.zeros(0, np.intp))
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
        return _group(keys)
    if pd.api.types.is_string_dtype(ids.dtype) and ids.dtype != object:  # pandas' string dtypes: str or missing
        missing = np.asarray(ids.isna())
        if missing.any():
            raise IdentityError(f"have missing {what}s", _named(rows, missing), PERSON_FIX)
        return _strings(ids.to_numpy(dtype=object).tolist())
    values = np.asarray(ids, dtype=object)
    inferred = pd.api.types.infer_dtype(values, skipna=False)
    if inferred == "string":
        return _strings(values.tolist())
    keys = np.empty(n, np.int64)
    label_keys, label_text = None, ()
    kinds = np.fromiter((0 if type(v) is str else 1 if _is_int(v) else 2 for v in values), np.int8, n)  # noqa: E721
    if (kinds == 2).any():  # not shown by value: floats may be coordinates
        raise IdentityError(
            f"have {what}s that are neither integers nor strings (missing, NaN, floats or other objects; not shown)",
            _named(rows, kinds == 2),
            PERSON_FIX,
        )
    ints = kinds == 1
    if ints.any():
        as_int = [int(v) for v in values[ints]]
        if any(v < _INT64_MIN or v > _INT64_MAX for v in as_int):
            raise IdentityError(f"have integer {what}s beyond 64 bits", None, PERSON_FIX, count=int(ints.sum()))
        keys[ints] = as_int
    strs = ~ints
    if strs.any():
        idx = np.flatnonzero(strs)
        text = values[strs].tolist()
        skeys, decimal = _string_keys(text)
        keys[idx] = skeys
        if (~decimal).any():
            label_keys, label_text = skeys[~decimal], [t for t, d in zip(text, decimal) if not d]
    return _group(keys, label_keys, label_text)


def _strings(text: list) -> PersonKeys:
    keys, decimal = _string_keys(text)
    if decimal.all():
        return _group(keys)
    if not decimal.any():
        return _group(keys, keys, text)
    return _group(keys, keys[~decimal], [t for t, d in zip(text, decimal) if not d])


_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


def _string_keys(text: list) -> tuple[np.ndarray, np.ndarray]:
    """(keys, decimal) of string ids: a canonical decimal integer is its value; any other string a 64-bit hash.

    The hash is FNV-1a over the UTF-8 bytes, then the length, through SplitMix64's finaliser:
    written out here (not a library's hash, which could change between versions and give a person
    a second budget), and vectorised over the strings' bytes.
    """
    enc = [t.encode("utf-8", "surrogatepass") for t in text]
    n = len(enc)
    lens = np.fromiter(map(len, enc), np.int64, n)
    width = max(1, int(lens.max()) if n else 1)
    m = np.array(enc, dtype=f"S{width}").view(np.uint8).reshape(n, width)
    pos = np.arange(width)
    inside = pos[None, :] < lens[:, None]
    # canonical decimal integers: optional '-', 1-19 digits, no leading zero (but "0"), not "-0"
    neg = (m[:, 0] == ord("-")) & (lens > 0)
    digit = (m >= 48) & (m <= 57)
    first = (pos[None, :] == 0) & neg[:, None]
    ndig = lens - neg
    lead = m[np.arange(n), np.minimum(neg.astype(np.int64), width - 1)]
    decimal = (
        np.where(inside, digit | first, True).all(axis=1)
        & (ndig >= 1)
        & (ndig <= 19)
        & ~((lead == ord("0")) & ((ndig > 1) | neg))
    )
    keys = np.empty(n, np.int64)
    if decimal.any():
        vals = [int(t) for t, d in zip(text, decimal) if d]
        fits = np.fromiter((-(2**63) <= v < 2**63 for v in vals), bool, len(vals))
        at = np.flatnonzero(decimal)
        decimal[at[~fits]] = False
        keys[at[fits]] = [v for v, f in zip(vals, fits) if f]
    if (~decimal).any():
        rows = np.flatnonzero(~decimal)
        h = np.full(len(rows), _FNV_OFFSET, np.uint64)
        sub, within = m[rows], inside[rows]
        with np.errstate(over="ignore"):
            for j in range(width):
                step = (h ^ sub[:, j].astype(np.uint64)) * _FNV_PRIME
                h = np.where(within[:, j], step, h)
            h ^= lens[rows].astype(np.uint64)
            h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(31)
        keys[rows] = h.view(np.int64)
    return keys, decimal


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _named(rows: pd.Index, mask) -> list | None:
    """Row labels to show (integers or strings only: other labels may be coordinates)."""
    bad = rows[np.asarray(mask, bool)]
    if pd.api.types.is_integer_dtype(bad.dtype) or all(type(v) is str for v in bad):  # noqa: E721
        return list(bad)
    return None


def _group(keys: np.ndarray, label_keys=None, label_text=()) -> PersonKeys:
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return PersonKeys(
        uniq.astype(np.int64, copy=False), counts.astype(np.int64), inverse.reshape(-1), label_keys, label_text
    )
