"""Who a person is: the one rule that turns ids into identities, for bounding, charging and keys alike.

Every part of geopriv that knows people by an id asks :func:`identities` and nothing else: contribution
bounding (``max_per_user``), the budget store's charges and balances, keyed noise (lazy releases), the
trace ids of :func:`geopriv.sanitize_traces`, and every "repeated id" check, in memory and on every dask
partition.  So the person whose rows are bounded is the person who is charged, whatever the type a file
or a partition gave the column.

One person
----------
An id names a person by its *canonical form*:

* an integer (Python, numpy, pandas' nullable integers) is that integer;
* text is read in Unicode compatibility form NFKC (``"Renée"`` typed with a combining accent is
  ``"Renée"``; full-width ``"５"`` is ``"5"``), without what displays as nothing (control and format
  characters, zero-width spaces and joiners, byte-order marks, variation selectors) and without the
  whitespace around it: ids that display alike are one person.  Text that then spells an integer in
  decimal digits of any script (``"5"``, ``"05"``, ``"+5"``, ``"5.0"``, ``"٥"``) is that integer,
  so a register read from a CSV file and from a GeoPackage names the same people whatever the column's
  type.

Ids with the same canonical form are one person: bounded together, charged together, keyed alike, and
"repeated" where one row per person is allowed.  Merging is the safe direction: two people taken for one
are bounded more strictly and pay together; one person is never taken for two.  What cannot be read
soundly is refused by row label, never by value (:class:`~geopriv.exceptions.IdentityError`): missing
values (``None``, ``NaN``, ``NA``, blank text), booleans, floats (even whole ones: they may be coordinates,
and a float column is no register of people; convert it to integers), integers beyond 64 bits and any
other object.

The key
-------
A person's key is a signed 64-bit integer: the integer itself, or for other text a 64-bit hash of its
canonical UTF-8 bytes fixed by geopriv (FNV-1a over the bytes, then the length, through SplitMix64's
finaliser; never a library's hash, which could change between versions and give a person a second
budget).  Two texts that share a key are one person (merged, as above; about one chance in 2^64 per pair).
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pandas as pd

from .exceptions import Fix, IdentityError

__all__ = ["Identities", "identities", "identity_keys", "canonical_order", "IDENTITY_FIX", "INT64_MIN", "INT64_MAX"]

IDENTITY_FIX = Fix(
    "person_column",
    python="Pass person='<column>' naming a column of stable person ids (integers or strings, no missing values).",
    cli="Give --person COLUMN naming a column of stable person ids (integers or strings, no missing values).",
    qgis="Choose a 'Person id field' of stable person ids (integers or strings, no empty values).",
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: text that is an integer: an optional sign, ASCII digits, and optionally a point followed by zeros
_INTEGER_TEXT = re.compile(r"[+-]?\d+(?:\.0*)?")  # \d: any script's decimal digits ("٥" is 5, as for int())


class Identities:
    """The identity of every row: its person's key, and the text of the persons known by text.

    Attributes
    ----------
    keys : ndarray of int64
        One key per row (see the module docstring); equal keys are one person.
    text : dict
        ``key -> canonical text`` of the persons whose ids are text (not integers), to show them as the
        user knows them.
    """

    __slots__ = ("keys", "text")

    def __init__(self, keys: np.ndarray, text: dict | None = None):
        self.keys = keys
        self.text = {} if text is None else text

    def __len__(self) -> int:
        return len(self.keys)

    def group(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sorted unique keys, each row's index into them, each key's row count)."""
        uniq, inverse, counts = np.unique(self.keys, return_inverse=True, return_counts=True)
        return uniq.astype(np.int64, copy=False), inverse.reshape(-1).astype(np.intp), counts.astype(np.int64)

    def codes(self) -> np.ndarray:
        """Each row's person as ``0..m-1``, numbered in key order (a function of the ids only, not of row order)."""
        return self.group()[1].astype(np.int64)

    def shown(self, keys) -> list:
        """The persons of ``keys`` as a user knows them: the integer, or the canonical text."""
        return [self.text.get(int(k), int(k)) for k in keys]

    def canonical(self) -> list:
        """Every row's canonical id: an int, or the canonical text."""
        return self.shown(self.keys)

    def sorted_persons(self) -> tuple[list, np.ndarray]:
        """(the persons' canonical ids in :func:`canonical_order`, each row's index into them).

        The order is a function of the ids only (never of the row order): integers ascending, then texts.
        """
        keys, inverse, _ = self.group()
        shown = self.shown(keys)
        order = canonical_order(shown)
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        return [shown[i] for i in order], rank[inverse]


def canonical_order(canonical: list) -> np.ndarray:
    """Positions sorting canonical ids (ints and texts): integers ascending, then texts by code point."""
    return np.array(
        sorted(range(len(canonical)), key=lambda i: (type(canonical[i]) is str, canonical[i])), dtype=np.intp
    )


def identity_keys(ids, row_labels=None, what: str = "person id") -> np.ndarray:
    """The key of every row's person (int64): ``identities(ids, row_labels, what).keys``."""
    return identities(ids, row_labels, what).keys


def identities(ids, row_labels=None, what: str = "person id") -> Identities:
    """The identity of every row's id (module docstring); refuse, by row label, what cannot name a person.

    Parameters
    ----------
    ids : array-like
        One id per row (a column, an index, a list); repeats are the same person.
    row_labels : array-like, optional
        Row labels used to name the offending rows in an error (default: the positions).
    what : str
        How messages name the ids ("person id", "trace id", "index label").

    Returns
    -------
    Identities

    Raises
    ------
    IdentityError
        Missing, boolean, float or out-of-range ids, or objects that are neither integers nor text.
    """
    if isinstance(ids, (pd.Series, pd.Index)):
        values = ids
    else:
        values = pd.Index(ids if isinstance(ids, np.ndarray) else list(ids), tupleize_cols=False)
    n = len(values)
    rows = pd.RangeIndex(n) if row_labels is None else pd.Index(row_labels)
    if n == 0:
        return Identities(np.zeros(0, np.int64))
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return identities(np.asarray(values, dtype=object), rows, what)
    if pd.api.types.is_bool_dtype(dtype):
        raise IdentityError(f"have boolean {what}s: they cannot tell people apart", None, IDENTITY_FIX, count=n)
    if pd.api.types.is_integer_dtype(dtype):
        missing = np.asarray(pd.isna(values), bool)
        if missing.any():
            raise IdentityError(f"have missing {what}s", _named(rows, missing), IDENTITY_FIX)
        if pd.api.types.is_unsigned_integer_dtype(dtype):
            big = np.asarray(values, dtype=np.uint64) > np.uint64(INT64_MAX)
            if big.any():
                raise IdentityError(f"have {what}s of 2^63 or more", _named(rows, big), IDENTITY_FIX)
        return Identities(np.asarray(values, dtype=np.int64).copy())
    if pd.api.types.is_float_dtype(dtype):
        _float_keys(np.asarray(values, dtype=np.float64), rows, what)
    if pd.api.types.is_string_dtype(dtype) and dtype != np.dtype(object):  # pandas' string dtypes: text or missing
        missing = np.asarray(pd.isna(values), bool)
        if missing.any():
            raise IdentityError(f"have missing {what}s", _named(rows, missing), IDENTITY_FIX)
        keys, text = _text_keys(np.asarray(values, dtype=object), rows, what)
        return Identities(keys, text)
    return _objects(np.asarray(values, dtype=object), rows, what)


def _objects(values: np.ndarray, rows: pd.Index, what: str) -> Identities:
    """Ids of an object column: each read by its own type (a partition may mix them)."""
    n = len(values)
    kind = np.fromiter((_kind(v) for v in values), np.int8, n)
    missing = kind == _MISSING
    if missing.any():
        raise IdentityError(f"have missing {what}s", _named(rows, missing), IDENTITY_FIX)
    if (kind == _BOOL).any():
        raise IdentityError(
            f"have boolean {what}s: they cannot tell people apart", _named(rows, kind == _BOOL), IDENTITY_FIX
        )
    if (kind == _OTHER).any():  # not shown by value: they may be coordinates
        raise IdentityError(
            f"have {what}s that are neither integers nor text (objects of another kind; not shown)",
            _named(rows, kind == _OTHER),
            IDENTITY_FIX,
        )
    keys = np.empty(n, np.int64)
    text: dict = {}
    ints = kind == _INT
    if ints.any():
        as_int = [int(v) for v in values[ints]]
        wide = np.fromiter((v < INT64_MIN or v > INT64_MAX for v in as_int), bool, len(as_int))
        if wide.any():
            raise IdentityError(f"have integer {what}s beyond 64 bits", _named(rows, _spread(ints, wide)), IDENTITY_FIX)
        keys[ints] = as_int
    floats = kind == _FLOAT
    if floats.any():
        _float_keys(np.array(values[floats], dtype=np.float64), rows[floats], what)
    strs = kind == _STR
    if strs.any():
        keys[strs], text = _text_keys(values[strs], rows[strs], what)
    return Identities(keys, text)


_STR, _INT, _FLOAT, _MISSING, _BOOL, _OTHER = range(6)


def _kind(v) -> int:
    t = type(v)
    if t is str:
        return _STR
    if t is int:
        return _INT
    if v is None or v is pd.NA or v is pd.NaT:
        return _MISSING
    if isinstance(v, (bool, np.bool_)):
        return _BOOL
    if isinstance(v, (int, np.integer)):
        return _INT
    if isinstance(v, (float, np.floating)):
        return _MISSING if v != v else _FLOAT
    if isinstance(v, str):  # str subclasses (numpy.str_)
        return _STR
    return _OTHER


def _spread(mask: np.ndarray, sub: np.ndarray) -> np.ndarray:
    """The rows of ``mask`` selected by ``sub`` (a mask over ``mask``'s true positions), as a full mask."""
    out = np.zeros(len(mask), bool)
    out[np.flatnonzero(mask)[sub]] = True
    return out


def _float_keys(f: np.ndarray, rows: pd.Index, what: str) -> np.ndarray:
    """Refuse float ids (by row label, never by value): missing ones as missing, the rest as floats."""
    missing = np.isnan(f)
    if missing.any():
        raise IdentityError(f"have missing {what}s (NaN)", _named(rows, missing), IDENTITY_FIX)
    raise IdentityError(
        f"have {what}s that are floats (not shown: they may be coordinates); a person id is an integer or text",
        _named(rows, np.ones(len(f), bool)),
        Fix(
            "integer_ids",
            python="Convert the ids to integers (e.g. gdf[col].astype('int64')) or to text.",
            cli="Store the id column as integers or text in the file.",
            qgis="Make the id field an integer or text field ('Refactor fields').",
        ),
    )


def _text_keys(values: np.ndarray, rows: pd.Index, what: str) -> tuple[np.ndarray, dict]:
    """(keys, key -> text of the non-integer ones) of text ids: NFKC, no format characters, stripped, integers read
    as integers.  Each distinct text is read once (a person's rows repeat it)."""
    codes, uniq = pd.factorize(pd.Series(values, dtype=object), sort=False)
    words = [t if t.isascii() and t.isprintable() else _fold(t) for t in uniq.tolist()]
    words = [t.strip() for t in words]  # printable ASCII is its own canonical form; the rest is folded
    blank = np.fromiter((not t for t in words), bool, len(words))
    if blank.any():
        raise IdentityError(f"have blank {what}s (empty or only spaces)", _named(rows, blank[codes]), IDENTITY_FIX)
    integer = np.fromiter((_INTEGER_TEXT.fullmatch(t) is not None for t in words), bool, len(words))
    ukeys = np.empty(len(words), np.int64)
    text: dict = {}
    if integer.any():
        vals = [int(t.split(".", 1)[0]) for t, i in zip(words, integer) if i]  # int() reads every script's digits
        wide = np.fromiter((v < INT64_MIN or v > INT64_MAX for v in vals), bool, len(vals))
        if wide.any():
            raise IdentityError(
                f"have {what}s that are integers beyond 64 bits",
                _named(rows, _spread(integer, wide)[codes]),
                IDENTITY_FIX,
            )
        ukeys[integer] = vals
    if (~integer).any():
        named = [t for t, i in zip(words, integer) if not i]
        hashed = _hash_text(named)
        ukeys[~integer] = hashed
        text = dict(zip(hashed.tolist(), named))
    return ukeys[codes], text


#: code points that display as nothing (Unicode's Default_Ignorable_Code_Point, less what NFKC already folds)
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]"
)


def _fold(text: str) -> str:
    """Unicode compatibility form (NFKC) without what displays as nothing: control and format characters,
    default-ignorable code points (zero-width spaces and joiners, byte-order marks, variation selectors)."""
    folded = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text))
    if folded.isprintable():  # no control or format character left (the common case): nothing more to drop
        return folded
    return "".join(c for c in folded if unicodedata.category(c) not in ("Cc", "Cf"))


_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


def _hash_text(text: list) -> np.ndarray:
    """The fixed 64-bit hash of each text (module docstring), vectorised over the texts' bytes."""
    enc = [t.encode("utf-8", "surrogatepass") for t in text]
    n = len(enc)
    lens = np.fromiter(map(len, enc), np.int64, n)
    width = max(1, int(lens.max()) if n else 1)
    m = np.array(enc, dtype=f"S{width}").view(np.uint8).reshape(n, width)
    inside = np.arange(width)[None, :] < lens[:, None]
    h = np.full(n, _FNV_OFFSET, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(width):
            step = (h ^ m[:, j].astype(np.uint64)) * _FNV_PRIME
            h = np.where(inside[:, j], step, h)
        h ^= lens.astype(np.uint64)
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h.view(np.int64)


def _named(rows: pd.Index, mask) -> list | None:
    """Row labels to show (integers or strings only: other labels may be coordinates)."""
    bad = rows[np.asarray(mask, bool)]
    if pd.api.types.is_integer_dtype(bad.dtype) or all(type(v) is str for v in bad):  # noqa: E721
        return list(bad)
    return None
