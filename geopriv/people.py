"""Who is who in a network release: people indexed by an id field, ids read as the people's kind, repeated labels.

A graded release over a network (:func:`geopriv.diffuse_locations`) names people by ids: the
people layer's index, and the two ends of every edge of the public network.  The recipients are
published by those labels, so one label must be one person.  The command line
(``geopriv diffuse --id-field``) and QGIS (*Diffuse a location over a network*) read them the same
way, here: whole numbers stay numbers (feature ids, integer fields, whole numbers stored as
floats), anything else is text without surrounding spaces; an id is never empty and never shared.
Each front end words where the ids come from (``what``, and what its row labels are); the rules
are one.  The release itself refuses labels that name one person twice (:func:`repeated_people`).

Not to be confused with :mod:`geopriv.budget.persons`, which keys the person a budget store
charges (the ``person=`` column, or the source's label).  Both ask geopriv's one rule for who
is who (:func:`geopriv.identity.identities`): this module for the labels a network release
names and publishes, that one for the keys of lifetime budgets.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .exceptions import IdentityError, ParameterError

__all__ = ["index_people", "people_ids", "repeated_people"]


def _labels(index, mask, limit: int = 5) -> str:
    shown = [str(i) for i in index[mask][:limit]]
    return ", ".join(shown) + (", ..." if int(np.count_nonzero(mask)) > limit else "")


def index_people(gdf, field, *, what: str | None = None, rows: str = "row(s)", labels: str = "labels"):
    """The people indexed by their ids: ``field``'s values, or row numbers 0, 1, ... when ``field`` is None.

    Parameters
    ----------
    gdf : GeoDataFrame
        The people (one row each); not modified.
    field : str or None
        The column of their ids; it leaves the columns and becomes the index (named after it).
    what : str, optional
        How the front end names the field in messages (default ``"the id field 'NAME'"``).
    rows, labels : str
        What a row is (``"row(s)"``, ``"feature(s)"``) and what its labels are (``"labels"``,
        ``"feature ids"``) in messages.

    Returns
    -------
    GeoDataFrame
        A copy indexed by the ids: whole numbers as int64 (also when stored as floats), other
        values as text without surrounding spaces.

    Raises
    ------
    ParameterError
        An empty id (naming the rows' labels) or an id shared by several rows.
    """
    if field is None:
        return gdf.reset_index(drop=True)
    what = what or f"the id field {field!r}"
    ids = gdf[field]
    empty = ids.isna().to_numpy()
    if empty.any():
        raise ParameterError(
            f"{what} is empty at {int(empty.sum())} {rows} ({labels} {_labels(gdf.index, empty)}); "
            "every person needs an id"
        )
    if pd.api.types.is_float_dtype(ids.dtype) and bool((ids % 1 == 0).all()):
        ids = ids.astype("int64")  # whole numbers stored as floats
    elif not pd.api.types.is_integer_dtype(ids.dtype):
        ids = ids.map(lambda v: str(v).strip())
    from .identity import identities

    # repeated by geopriv's one rule for who is who (5 and "5", NFC and NFD forms of a name are one person)
    repeated = pd.Index(identities(ids, gdf.index, what).keys).duplicated()
    if repeated.any():
        raise ParameterError(f"{what} has {int(repeated.sum())} duplicate id(s); every person needs their own id")
    out = gdf.drop(columns=[field])
    out.index = pd.Index(ids.to_numpy(), name=field)
    return out


def people_ids(values, labels: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """``values`` (text or numbers) as ids of the people's kind, and the positions that cannot be.

    Parameters
    ----------
    values : iterable
        Ids as read (a table's column, a typed source id).
    labels : pandas.Index
        The people's ids (:func:`index_people`): whole numbers or text.

    Returns
    -------
    ids : ndarray
        int64 when the people's ids are whole numbers (-1 where a value is not one), else text.
    bad : ndarray of int
        Positions of the values that are empty, or not whole numbers when the ids are.
    """
    text = pd.Series(
        ["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip() for v in values], dtype=object
    )
    if pd.api.types.is_integer_dtype(labels.dtype):
        num = pd.to_numeric(text, errors="coerce")
        bad = (num.isna() | (num % 1 != 0)).to_numpy()
        return num.where(~bad, -1).astype("int64").to_numpy(), np.flatnonzero(bad)
    return text.to_numpy(dtype=object), np.flatnonzero((text == "").to_numpy())


def repeated_people(labels: pd.Index) -> np.ndarray:
    """Rows whose label names a person another row's label names too.

    Labels that are person ids (integers, text) are read by geopriv's one rule for who is who
    (:func:`geopriv.identity.identities`: ``5`` and ``"5"``, or the NFC and NFD forms of a name, are one
    person); other labels (floats, tuples) by equality.

    Parameters
    ----------
    labels : pandas.Index
        The people's labels (a layer's index).

    Returns
    -------
    numpy.ndarray of bool
        True at every row whose person has another row.
    """
    from .identity import identities

    values = np.asarray(labels, dtype=object)
    ids = np.fromiter(
        (isinstance(v, (str, int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values),
        bool,
        len(values),
    )
    repeated = np.asarray(labels.duplicated(keep=False))  # other labels: equal ones are the repeats
    if ids.any():
        try:
            keys = pd.Index(identities(pd.Index(values[ids], dtype=object), labels[ids], "index label").keys)
        except IdentityError:  # e.g. blank text: not a person id, compared as it is
            return repeated
        repeated[np.flatnonzero(ids)] |= np.asarray(keys.duplicated(keep=False))
    return repeated
