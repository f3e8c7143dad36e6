"""The inputs the command line and the QGIS plugin both read, read once.

``geopriv diffuse`` and QGIS's *Diffuse a location over a network* take the same inputs in their
own terms (options on a command line, parameters in a dialog): an epsilon-of-distance policy
written as ``"1:ln4/50 4:ln4/2000"`` or as A and B of exp(B - A d), a public network given as a
table of id pairs or as a line layer, the id of the person released.  ``geopriv perturb
--mechanism`` and QGIS's *Perturb points with location-dependent privacy* both load a saved
mechanism and set its options (points outside the raster, the posterior-mean release).  What
they read from these inputs is decided here, once, so the two front ends cannot drift apart: the
same text is the same policy, the same table the same edges, the same file the same mechanism.

The functions take plain values, (Geo)DataFrames and paths, never an ``argparse`` namespace or a
QGIS parameter: each front end turns its own options into these values, and reads its own files
(the command line with :mod:`geopriv.io`, QGIS with its data providers).  Each front end also
words where an input comes from: the options and parameters it names in a refusal are passed in
(a :class:`Wording` of message templates, as :func:`geopriv.people.index_people` takes ``what=``),
and the advice of a refusal is a :class:`~geopriv.exceptions.Fix` with one text per front end.
The rules are one.

This module sits just below the front ends (import-linter's layers): it may use the public API,
and nothing in the core imports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .exceptions import Fix, InputError, ParameterError, UsageError

__all__ = [
    "Wording",
    "epsilon_policy",
    "person_id",
    "edge_list",
    "line_network",
    "load_mechanism",
    "mechanism_options",
]

#: the advice when the epsilon policy is missing (or given twice, on the command line)
_POLICY_FIX = Fix(
    "epsilon_policy",
    python="give table= (distance:epsilon pairs, e.g. '1:ln4/50 4:ln4/2000') or exponential=(a, b) for "
    "exp(b - a d), not both.",
    cli="--epsilon-table D:EPSILON ... (e.g. --epsilon-table 1:ln4/50 4:ln4/2000), or --epsilon-exp A B for "
    "exp(B - A d), not both",
    qgis="an epsilon table (e.g. 1:ln4/50 4:ln4/2000), or both A and B for epsilon(d) = exp(B - A d) per metre.",
)
#: the advice when both forms are given (the command line's is the same as for none)
_POLICY_TWICE_FIX = _POLICY_FIX._replace(
    qgis="give either an epsilon table or A and B (epsilon = exp(B - A d)), not both."
)
_POLICY_PROBLEM = "say how epsilon falls with network distance d:"


@dataclass(frozen=True)
class Wording:
    """How a front end words the refusals of :func:`person_id` and :func:`edge_list`.

    Each field is a :meth:`str.format` template; a template may leave out any of the fields it is
    given.  The defaults are the library's own words (a Python caller's).

    Parameters
    ----------
    not_a_person : str
        A source id that is no person's: ``{value}`` (as given), ``{described}`` (what the ids are).
    bad_ids : str
        A column with ids that cannot be people's (empty, or not whole numbers when the people's
        ids are): ``{what}`` (the column, as :func:`edge_list` is told), ``{n}`` (how many),
        ``{row}`` (the first one's row number, from 1), ``{labels}`` (the first five's row labels),
        ``{described}``.
    empty_ids : str or None
        The same for a column with empty ids, the same fields (None: ``bad_ids`` says it).
    unknown_ids : str
        Edges naming ids that are no person's: ``{n}``, ``{shown}`` (the first five),
        ``{described}``.
    same_columns : str
        The two ends of the edges read from one column (no fields).
    bad_weights : str
        A weight column with values that are not numbers: ``{weight}`` (its name), ``{n}``.
    """

    not_a_person: str = "{value!r} is not a person of the people (the ids are {described})"
    bad_ids: str = (
        "{what}: {n} id(s) are empty or not whole numbers (first at row {row}), but the people's ids are {described}"
    )
    empty_ids: str | None = None
    unknown_ids: str = (
        "the edges refer to {n} id(s) that are not people ({shown}); the ids must be the people's ({described})"
    )
    same_columns: str = "the two ends of the edges are the same column: give two different columns"
    bad_weights: str = "the weight column {weight!r}: {n} value(s) are not numbers"


# ---------------------------------------------------------------------------- the epsilon policy
def epsilon_policy(table=None, exponential=None, *, kind=None):
    """The epsilon-of-distance schedule of a network release, from a table or from exp(B - A d).

    A front end offers the two forms of :func:`geopriv.epsilon_of_distance` a user can type: a
    table of network distances and the epsilon at each (``"1:ln4/50 4:ln4/2000"``: ln 4 within
    50 m at 1 hop, ln 4 within 2 km at 4 hops), or Koufogiannis and Pappas' exp(B - A d).
    Exactly one must be given, before any data is read.

    Parameters
    ----------
    table : str or sequence of (float, float), optional
        ``distance:epsilon`` pairs as text (:func:`geopriv.parsing.parse_epsilon_table`: ``ln``
        and ``/`` are understood), or as (distance, epsilon) pairs in any order.  Empty text is
        not given.
    exponential : (float or None, float or None), optional
        A and B of epsilon(d) = exp(B - A d) per ground metre; both are needed, and either one
        given counts as the form being chosen.
    kind : {"linear", "step"}, optional
        How the table is read between its distances (default: the library's); not used by the
        exponential form.

    Returns
    -------
    EpsilonSchedule
        What :func:`geopriv.diffuse_locations` takes as its epsilon.

    Raises
    ------
    UsageError
        Neither form given, both, or only one of A and B.
    ParameterError
        A table that is not ``distance:epsilon`` pairs, an epsilon that increases with distance,
        A < 0 (the library's checks).
    """
    from .network import ExponentialEpsilon, epsilon_of_distance

    if isinstance(table, str):
        table = table if table.strip() else None
    exp_given = exponential is not None and any(v is not None for v in exponential)
    if table is not None and exp_given:
        raise UsageError(_POLICY_PROBLEM, fix=_POLICY_TWICE_FIX)
    if table is None:
        if not exp_given or any(v is None for v in exponential):
            raise UsageError(_POLICY_PROBLEM, fix=_POLICY_FIX)
        a, b = exponential
        return epsilon_of_distance(ExponentialEpsilon(a, b))
    if isinstance(table, str):
        from .parsing import parse_epsilon_table

        try:
            distances, epsilons = parse_epsilon_table(table)
        except ValueError as exc:
            raise ParameterError(f"epsilon table: {exc}.") from None
    else:
        pairs = sorted(table)
        distances, epsilons = [d for d, _ in pairs], [e for _, e in pairs]
    return epsilon_of_distance((distances, epsilons), **({} if kind is None else {"kind": kind}))


# ---------------------------------------------------------------------------- people and edges
def person_id(value, labels, *, described: str, wording: Wording = Wording()):
    """The id of one person, typed by a user (the source of a release), as the people's ids are.

    Parameters
    ----------
    value : str or number
        The id as given (text is read as :func:`geopriv.people.people_ids` reads ids).
    labels : pandas.Index
        The people's ids (:func:`geopriv.people.index_people`).
    described : str
        What the ids are, in the front end's words (``"feature ids"``, ``"values of --id-field 'person'"``).
    wording : Wording
        The front end's templates (``not_a_person``).

    Returns
    -------
    int or str
        The id, one of ``labels``.

    Raises
    ------
    InputError
        The value names nobody.
    """
    from .people import people_ids

    ids, bad = people_ids([value], labels)
    if len(bad) or ids[0] not in labels:
        raise InputError(wording.not_a_person.format(value=value, described=described))
    return ids[0]


def edge_list(table, columns, labels, *, weight=None, what=None, described: str = "", wording: Wording = Wording()):
    """A public network's edges, read from a table of id pairs (one edge per row).

    Parameters
    ----------
    table : DataFrame
        The table as read (CSV values as text, a layer's fields as they are); its index labels
        the rows in messages.
    columns : (str, str)
        The two columns holding the ids of each edge's ends.
    labels : pandas.Index
        The people's ids (:func:`geopriv.people.index_people`): every id of the table must be one.
    weight : str, optional
        A column of edge weights (conductances, numbers); kept as the edges' ``"weight"``.
    what : callable, optional
        ``what(column)``: how the front end names a column in messages (default ``"column 'NAME'"``).
    described : str
        What the people's ids are, in the front end's words.
    wording : Wording
        The front end's templates (``bad_ids``, ``empty_ids``, ``unknown_ids``, ``same_columns``,
        ``bad_weights``).

    Returns
    -------
    DataFrame
        Columns ``from`` and ``to`` (people ids), and ``weight`` (float) with ``weight=``: what
        :func:`geopriv.diffuse_locations` takes as ``graph=``.

    Raises
    ------
    InputError
        The same column for both ends, ids that are empty or not of the people's kind, ids that
        are no person's, weights that are not numbers.
    """
    import pandas as pd

    if columns[0] == columns[1]:
        raise InputError(wording.same_columns)
    what = what or (lambda column: f"column {column!r}")
    edges = pd.DataFrame(
        {
            end: _ids_of_column(table, column, labels, what(column), described, wording)
            for end, column in zip(("from", "to"), columns)
        }
    )
    unknown = pd.Index(pd.unique(edges.to_numpy().ravel())).difference(labels)
    if len(unknown):
        shown = ", ".join(str(u) for u in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise InputError(wording.unknown_ids.format(n=len(unknown), shown=shown, described=described))
    if weight is not None:
        w = pd.to_numeric(table[weight], errors="coerce")
        if w.isna().any():
            raise InputError(wording.bad_weights.format(weight=weight, n=int(w.isna().sum())))
        edges["weight"] = w.to_numpy(dtype=float)
    return edges


def _is_empty(value) -> bool:
    """No id at all (None, NaN, blank text), as opposed to an id of the wrong kind."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""


def _ids_of_column(table, column, labels, what: str, described: str, wording: Wording):
    """One edge end's column as people ids, or the front end's refusal naming its first bad rows."""
    import numpy as np

    from .people import people_ids

    values = table[column].tolist()
    ids, bad = people_ids(values, labels)
    if not len(bad):
        return ids
    template, rows = wording.bad_ids, bad
    if wording.empty_ids is not None:
        empty = [i for i in bad if _is_empty(values[i])]
        if empty:
            template, rows = wording.empty_ids, np.asarray(empty)
    raise InputError(
        template.format(
            what=what,
            n=len(rows),
            row=int(np.min(rows)) + 1,
            labels=", ".join(str(i) for i in table.index[rows][:5]),
            described=described,
        )
    )


def line_network(lines, crs):
    """A public network given as lines between the people's points, ready for ``graph=``.

    Lines are reprojected to the people's CRS (a layer without a CRS is taken to be in it: the
    front end says so), and single-part MultiLineStrings, which many formats write for every
    line, are read as the LineStrings they are.

    Parameters
    ----------
    lines : GeoDataFrame
        The line layer as read; not modified.
    crs : pyproj.CRS or None
        The people's CRS.

    Returns
    -------
    GeoDataFrame
        The lines in ``crs``: each joins the two people whose points are at its ends
        (:func:`geopriv.diffuse_locations` matches them within its ``tolerance``).
    """
    import shapely

    if lines.crs is None:
        lines = lines.set_crs(crs, allow_override=True)
    elif crs is not None and lines.crs != crs:
        lines = lines.to_crs(crs)
    g = lines.geometry.values
    single = (shapely.get_type_id(g) == 5) & (shapely.get_num_geometries(g) == 1)
    if single.any():
        lines = lines.copy()
        lines.loc[single, lines.geometry.name] = shapely.get_geometry(g[single], 0)
    return lines


# ---------------------------------------------------------------------------- saved mechanisms
_REMAP_FIX = Fix(
    "remap_population",
    python="Build the mechanism from a population raster (PrivacyMap.from_population), or remap under another "
    "public prior: mechanism.with_remap(prior=ARRAY).",
    cli="Leave out --remap, or build the mechanism from the population raster ('geopriv build-mechanism').",
    qgis="Untick it, or build the mechanism from the population raster.",
)


def load_mechanism(path, *, points=None, outside=None, remap=False, kernels=None, n_jobs=None, progress=None):
    """A saved location-dependent mechanism, loaded with a front end's options.

    Parameters
    ----------
    path : str or Path
        A file written by :meth:`geopriv.EikonalMechanism.save`; verified on load (the library's
        default verification).
    points : GeoDataFrame, optional
        The points to release: checked against the file's public map before the load (which may
        verify the whole file), unless ``outside="clamp"`` releases points outside it anyway.
    outside, remap
        As :func:`mechanism_options`.
    kernels, n_jobs : optional
        :meth:`~geopriv.EikonalMechanism.load`'s; not given: the library's defaults.
    progress : optional
        :meth:`~geopriv.EikonalMechanism.load`'s progress report.

    Returns
    -------
    EikonalMechanism
        The loaded mechanism with the options applied.

    Raises
    ------
    MechanismFileError
        An unreadable or unverifiable file (the library's check).
    GeometryError
        Points outside the file's map, with ``points=`` and no ``outside="clamp"``.
    """
    import geopriv

    if points is not None and outside != "clamp":  # from the file's public map alone: before a full load
        try:
            geopriv.EikonalMechanism.check_points(path, points)
        except geopriv.MechanismFileError:
            pass  # an unreadable file: the load below says precisely what is wrong with it
    given = {name: value for name, value in (("kernels", kernels), ("n_jobs", n_jobs)) if value is not None}
    mechanism = geopriv.EikonalMechanism.load(path, progress=progress, **given)
    return mechanism_options(mechanism, outside=outside, remap=remap)


def mechanism_options(mechanism, *, outside=None, remap=False):
    """A location-dependent mechanism with a front end's release options (same guarantee).

    Parameters
    ----------
    mechanism : EikonalMechanism
        Built or loaded.
    outside : {"error", "clamp"}, optional
        Points outside the raster: refused, or released as if at its nearest point (None: the
        mechanism's own rule).
    remap : bool
        Release each output's posterior mean under the population behind the map (post-processing
        with public data; a mechanism already remapped stays as it is).

    Returns
    -------
    EikonalMechanism

    Raises
    ------
    ParameterError
        ``remap`` for a mechanism built from an epsilon raster (no population behind it).
    """
    if outside is not None and outside != mechanism.outside:
        mechanism = mechanism.with_outside(outside)
    if remap and mechanism.remap_xy is None:
        if mechanism.privacy_map.population is None:
            raise ParameterError(
                "The posterior-mean release needs the population behind the privacy map; this mechanism was built "
                "from an epsilon raster.",
                fix=_REMAP_FIX,
            )
        mechanism = mechanism.with_remap("population")
    return mechanism
