"""Person ids as the budget store keys them: one signed 64-bit integer per person.

Who is one person is decided by :func:`geopriv.identity.identities`, the one rule geopriv applies to
bounding, charging, keyed noise and repeated-id checks alike: ``5``, ``np.int64(5)``, ``"5"``,
``" 5 "`` and ``"05"`` are person 5; the NFC and NFD forms of ``"Renée"`` are one person; other text is
keyed by a fixed 64-bit hash of its canonical form (the text is kept beside it, for
:meth:`~geopriv.budget.BudgetStore.balances`).

Two ids that share a key share a budget: charged together, never undercounted.  Missing ids,
floats (possibly coordinates), booleans and other objects are refused
(:class:`~geopriv.exceptions.IdentityError`) by row label.
"""

from __future__ import annotations

import numpy as np

from ..identity import IDENTITY_FIX, Identities, identities

__all__ = ["PersonKeys", "person_keys", "persons_of", "PERSON_FIX"]

PERSON_FIX = IDENTITY_FIX


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
    """Key the person of every row (:func:`geopriv.identity.identities`); refuse what cannot name a person.

    Parameters
    ----------
    ids : array-like
        One id per row (repeats are the same person).
    row_labels : array-like, optional
        Row labels used to name the offending rows in an error (default: the positions).
    """
    return persons_of(identities(ids, row_labels, what))


def persons_of(ident: Identities, once: bool = False) -> PersonKeys:
    """The :class:`PersonKeys` of rows whose identities are ``ident``; ``once``: one row each (charged once)."""
    keys, inverse, counts = ident.group()
    if once:
        counts = np.ones(len(keys), np.int64)
    text = ident.text
    label_keys = np.fromiter(text.keys(), np.int64, len(text))
    return PersonKeys(keys, counts, inverse, label_keys, list(text.values()))
