"""``geopriv.diffuse_locations``: release one person's location (or value) to her whole network, graded by distance.

The GeoPandas-facing side of Koufogiannis and Pappas' private Markov jump process
(:mod:`geopriv.mechanisms.diffusion`): close friends get an accurate answer, strangers a noisy
one, at epsilon(d) per ground metre for a non-increasing function of the network distance d,
and any coalition of recipients learns no more than its closest member.  Distances come from
:mod:`geopriv.network`; the location goes through the public release path
(:func:`geopriv.release.release_diffusion`); the budget is charged by
:class:`~geopriv.accounting.DiffusionLedger` (a path costs its largest epsilon).

Notes
-----
What is published, and in which order: one row per recipient, with its index label, its network
distance (the graph is public), its epsilon and its answer.  The rows are in the order of the
recipients' index labels (sorted; labels of mixed types by type name, then value), a function of
public information only: the input's row order (often spatial: FlatGeobuf files are Hilbert-sorted) is never published.
Because the labels themselves and their order are published, an index assigned in spatial
order (or holding coordinates) is refused with :class:`~geopriv.exceptions.LocationAttributeError`
by :func:`geopriv.attributes.check_location_attributes` run on the rows in label order;
attribute columns are not checked because none is released.
"""

from __future__ import annotations

import warnings

import geopandas as gpd
import numpy as np
import pandas as pd

from .attributes import INDEX, ROW_ORDER, check_location_attributes
from .budget import PER_METRE, PERSON_FIX, open_store, opens_budget_store, value_unit
from .exceptions import (
    EmptyInputError,
    Fix,
    GeoprivError,
    IdentityError,
    LocationAttributeError,
    ParameterTypeError,
    format_labels,
)
from .frame import DEFAULT_MAX_DISTORTION
from .network import (
    Network,
    UnreachableRecipientsWarning,
    as_network,
    epsilon_of_distance,
    hop_distance,
    resistance_distance,
)
from .provenance import attach, make_record
from .release import budget_fields, release_diffusion

__all__ = ["diffuse_locations", "network_distances", "recipient_order", "VALUE_RANGE_STEPS"]

DISTANCES = ("hops", "resistance")
#: how to fix recipients' labels that give the locations away (they are published, in their order)
_LABELS_FIX = Fix(
    "relabel_people",
    python="Label the people with ids not assigned in spatial order (e.g. a random id column as the index, with the "
    f"graph's nodes named by it); if the labels are public anyway, keep them deliberately: keep=[{INDEX!r}].",
    cli="Name the people with --id-field COLUMN, a column of ids not assigned in spatial order (the default ids are "
    "row numbers), used by --source and the network too.",
    qgis="Choose an 'Id field of the people' whose values were not assigned in spatial order (the default "
    "ids are feature ids), used by the source and the network too.",
)
#: Without ``value_range=``, value answers are clamped to +-(VALUE_RANGE_STEPS * step): a public
#: range from the lattice step alone (2^32 steps), over which the 1-D finite-precision term is
#: about 0.2 % of epsilon at the default step.
VALUE_RANGE_STEPS = 2.0**32


def recipient_order(labels) -> np.ndarray:
    """Positions that put ``labels`` in publication order: sorted labels (a function of the labels only).

    Labels that cannot be compared with each other (mixed types) are ordered by type name,
    then by value within a type (:func:`geopriv.mechanisms.diffusion.typed_label` text).

    Parameters
    ----------
    labels : pandas.Index

    Returns
    -------
    numpy.ndarray of int
    """
    from .mechanisms.diffusion import typed_label

    labels = pd.Index(labels)
    try:
        return np.asarray(labels.argsort(kind="stable"))
    except TypeError:
        keys = [typed_label(v) for v in labels]
        return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.intp)


def _network(graph, data, tolerance, weight):
    import scipy.sparse as sp

    if sp.issparse(graph):
        if graph.shape[0] != len(data):
            raise GeoprivError(
                f"the adjacency matrix is {graph.shape[0]} x {graph.shape[1]} but the layer has {len(data)} rows; its "
                "rows must be the layer's rows, in order."
            )
        return as_network(graph, nodes=data.index, weight=weight)
    if isinstance(graph, gpd.GeoDataFrame):
        return as_network(graph, points=data, tolerance=tolerance, weight=weight)
    if isinstance(graph, (np.ndarray, list, tuple, pd.DataFrame)):
        ends = graph.iloc[:, :2].to_numpy() if isinstance(graph, pd.DataFrame) else np.asarray(graph, dtype=object)
        if ends.ndim != 2 or ends.shape[1] != 2:
            raise GeoprivError("an edge list must have two entries per edge (the row labels of its two ends).")
        extra = pd.Index(pd.unique(ends.ravel())).difference(data.index)
        if len(extra):
            raise GeoprivError(
                f"{len(extra)} node(s) of the edge list are not rows of the layer: {format_labels(extra)}. Name the "
                "edges' ends by the layer's index labels (gdf.index), or drop those edges."
            )
        return as_network(graph, nodes=data.index, weight=weight)
    return as_network(graph, weight=weight)


def network_distances(data, graph, source, *, distance: str = "hops", tolerance: float = 0.0, weight=None) -> pd.Series:
    """Network distance from row ``source`` to every row of ``data`` (inf: not connected, or not in the graph).

    Parameters
    ----------
    data : GeoDataFrame
        The people, one row each, named by their index labels.
    graph : networkx graph, edge list, scipy sparse matrix or GeoDataFrame of lines
        A networkx graph or an (m, 2) edge list / two-column table of row labels, a scipy
        sparse adjacency matrix over the rows in order, or a GeoDataFrame of LineStrings between
        the rows' points (ends matched within ``tolerance`` CRS units).
    source : hashable
        The index label of the source row.
    distance : {"hops", "resistance"}
        Shortest-path hops, or effective resistance (sparse selected inversion).
    tolerance : float
        Matching of line ends to points (line networks only).
    weight : column label or array, optional
        Edge weights (conductances); default every edge 1.

    Returns
    -------
    pandas.Series
        ``distance``, indexed like ``data``: hops (a whole number) or ohms of unit resistors.

    Raises
    ------
    geopriv.GeoprivError
        If ``distance`` is unknown, the graph names nodes that are not rows of ``data``, or
        ``source`` is not a node of the graph.

    See Also
    --------
    diffuse_locations : A location released to every row, graded by this distance.
    hop_distance : Hops from a node of a network.
    resistance_distance : Effective resistance from a node of a network.

    Notes
    -----
    Duplicate edges count differently by input type (:func:`geopriv.network.as_network`), and
    only for ``"resistance"`` (hops never depend on them):

    * edge list, table or line layer: an edge given twice (also as ``(a, b)`` and ``(b, a)``)
      is ONE edge of weight 1 without ``weight=``; with ``weight=`` the weights of the copies add
      up (parallel conductances);
    * networkx ``MultiGraph``: parallel edges add up, also without ``weight=`` (k parallel edges
      are one edge of conductance k); a ``Graph`` has no duplicates;
    * scipy sparse matrix: an entry is the weight; duplicate COO entries add up.

    De-duplicate the input (or give it weights) when this matters for your resistance distances.

    Examples
    --------
    Four people (UTM zone 50N, metres) and who knows whom, as an edge list of index labels:

    >>> people = gpd.GeoDataFrame(index=["ann", "bob", "cat", "dan"], crs="EPSG:32650",
    ...                           geometry=gpd.points_from_xy([500300, 500000, 500900, 500100],
    ...                                                       [4400100, 4400600, 4400200, 4400000]))
    >>> edges = [("ann", "bob"), ("bob", "cat"), ("ann", "cat"), ("cat", "dan")]
    >>> geopriv.network_distances(people, edges, "ann").tolist()
    [0.0, 1.0, 1.0, 2.0]

    Effective resistance counts the two routes from ann to bob (1 and 2 edges): 2/3.

    >>> geopriv.network_distances(people, edges, "ann", distance="resistance").round(3).tolist()
    [0.0, 0.667, 0.667, 1.667]
    """
    if distance not in DISTANCES:
        raise GeoprivError(f"distance must be 'hops' or 'resistance', got {distance!r}.")
    net = _network(graph, data, tolerance, weight)
    extra = net.labels.difference(data.index)
    if len(extra):
        raise GeoprivError(
            f"{len(extra)} node(s) of the graph are not rows of the layer: {format_labels(extra)}. Name the graph's "
            "nodes by the layer's index labels (gdf.index), or drop those nodes."
        )
    if source not in net.labels:
        net.index_of(source)  # raises, naming the source
    net = _in_label_order(net)
    d = hop_distance(net, source) if distance == "hops" else resistance_distance(net, source)
    return d.reindex(data.index, fill_value=np.inf).rename("distance")


def _in_label_order(net: Network) -> Network:
    """``net`` with its nodes in publication order (:func:`recipient_order` of its labels).

    A resistance distance's low-order bits depend on the order of the nodes in the solver; the
    nodes come in the order of the layer's rows (or of the graph's nodes), which is often spatial
    and never published.  In label order the distances, and so the published epsilons, their
    largest value and the lattice step that follows it, are functions of the labels and the edges only.
    """
    perm = recipient_order(net.labels)
    if np.array_equal(perm, np.arange(len(perm))):
        return net
    adj = net.adjacency[perm][:, perm].tocsr()
    adj.sort_indices()
    return Network(adj, net.labels[perm])


@opens_budget_store
def diffuse_locations(
    data,
    epsilon,
    *,
    source,
    graph,
    distance: str = "hops",
    value=None,
    support=None,
    value_range=None,
    continuous: bool = False,
    path=None,
    rng=None,
    bounds=None,
    grid="auto",
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    ledger=None,
    on_unreachable: str = "warn",
    tolerance: float = 0.0,
    weight=None,
    keep=(),
    budget_store=None,
    person=None,
):
    """Release the location of row ``source`` to every other row, graded by network distance.

    Recipient j gets ``u + V_{eps(d_j)}`` from ONE secret path of the private Markov jump
    process (Koufogiannis and Pappas): alone, recipient j has ``eps(d_j)``-geo-indistinguishability
    (per ground metre); any coalition of recipients together learns no more than its closest
    member (the largest epsilon among them).

    Parameters
    ----------
    data : GeoDataFrame of points
        The people, one row each, named by their index labels.  Only the source's location is
        released; no attribute is.  Never modified.
    epsilon : callable, (distances, epsilons) table or mapping
        Privacy level per ground metre as a non-increasing function of the network distance,
        e.g. ``lambda d: math.log(4) / (200 * (1 + d))`` (a farther recipient must not get a
        more accurate answer: an increasing function is refused).
    source : hashable
        The index label of the row whose location is released.
    graph : networkx graph, edge list, scipy sparse matrix or GeoDataFrame of lines
        The (public) network between the rows: see :func:`network_distances` (which also says
        how duplicate edges count).
    distance : {"hops", "resistance"}
        Shortest-path hops, or effective resistance (a smoother distance that counts
        multiple paths).
    value : column label, optional
        Release this column's value at the source row instead of its location (e.g. an
        infection bit); epsilon is then per unit of the value.  Returns a DataFrame.
    support : sequence, optional
        With ``value``: project each answer to the nearest of these values (``[0, 1]`` for a
        bit; post-processing; a finite support is a lattice, so no other snapping is done).
    value_range : (lo, hi), optional
        With ``value``: the public range of the value, chosen without looking at the data.
        Answers are clamped to the lattice nodes in it and the source's value must lie in it.
        Default: ``+-VALUE_RANGE_STEPS`` lattice steps around 0.
    continuous : bool, default False
        With ``value`` and no ``support``: publish raw float64 answers ``u + V`` instead of
        snapping them to the public lattice.  Only on explicit request: the low-order bits of
        float answers can give the value away (Mironov 2012); recorded as having no
        finite-precision bound.
    path : DiffusionPath, optional
        The SECRET path of an earlier release of this same source and value (same column, same
        private value, same CRS, bounds and grid rule): answers are consistent with it and only
        the increase of the largest epsilon is charged.  A path made for anything else is
        refused with :class:`~geopriv.exceptions.PathBindingError` before any noise or charge.
        Without it a fresh path is drawn and bound to this release: a new release that spends
        again.
    rng : None, int, SeedSequence or Generator
        ``None`` (default): OS entropy.
    bounds : (xmin, ymin, xmax, ymax), optional
        The public study area in the data's CRS, as in :func:`geopriv.perturb` (the path needs
        a plane: longitude/latitude data need ``bounds=``).  ``bounds=`` that any row's point
        touches on two edges (the data's own extent) are refused.  Not used with ``value``.
    grid : "auto" or float
        The public lattice step in ground metres, as in :func:`geopriv.perturb`; "auto" follows
        the largest epsilon.  With ``value``, the step in units of the value ("auto":
        ``min(1, 1 / (20 epsilon_max))``).
    max_distortion : float
        Largest scale variation of a projected CRS over the public area for which it is used as
        is, as in :func:`geopriv.perturb`.  Not used with ``value``.
    ledger : DiffusionLedger, optional
        Charged before any noise is drawn (refuses an overspend); a path costs its largest
        epsilon, kept per source and per released quantity (location, or each value column).
    on_unreachable : {"warn", "raise", "ignore"}
        Rows not connected to the source (or not in the graph) get no answer; by default a
        warning names them.
    tolerance : float
        Matching of line ends to points, in CRS units (line networks only): see
        :func:`geopriv.network.as_network`.
    weight : column label or array, optional
        Edge weights (conductances); default every edge 1.
    keep : iterable, optional
        ``("<index>",)`` publishes the recipients' labels even though they are in spatial order
        (for labels that are public anyway).  Nothing else can be kept: no column is released.
    budget_store : geopriv.BudgetStore or str, optional
        A persistent store of lifetime budgets (or its URL).  The source's person is charged,
        before any noise is drawn, the path's largest effective epsilon (per ground metre for a
        location, in the unit ``"epsilon per unit of <column>"`` for a value); an extended path
        that this store charged before costs only the increase of its largest epsilon.
    person : column label, optional
        The column of stable person ids; the source row's id is charged.  Default: the source's
        index label.

    Returns
    -------
    (GeoDataFrame or DataFrame, DiffusionPath)
        One row per recipient (index: its label), in the order of the labels (never the input's
        row order), with ``network_distance``, ``epsilon_per_m`` (or ``epsilon``),
        ``effective_epsilon_per_m`` and the released point (or ``response``);
        ``attrs["geopriv"]`` is the provenance (public fields; never the path).  The path is
        SECRET and bound to this source, value and frame: with it anyone subtracts the noise.
        Keep it only to answer later recipients of the same release.

    Raises
    ------
    geopriv.exceptions.PathBindingError
        ``path`` was made for another source, value, column, dimension or frame.
    geopriv.exceptions.LocationAttributeError
        The index labels (published) are in spatial order or hold coordinates.
    geopriv.BudgetExceededError
        The ``ledger`` or the ``budget_store`` cannot afford the largest epsilon; nothing was drawn.
    geopriv.GeoprivError
        ``source`` is not a row label, the labels are not unique, the graph names nodes that are
        not rows, or nobody is connected to the source.

    Warns
    -----
    geopriv.network.UnreachableRecipientsWarning
        Rows not connected to the source get no answer (``on_unreachable="warn"``).

    See Also
    --------
    network_distances : The network distances the epsilons are a function of.
    epsilon_of_distance : Checks and evaluates the epsilon function.
    diffuse : The same release for a value given as numbers, without a GeoDataFrame.
    DiffusionLedger : What graded releases cost, per source (a path costs its largest epsilon).
    perturb : One epsilon for everybody: an independent release per point.

    Examples
    --------
    Four people and who knows whom; ann's location goes to the others at ln 4 within 200 m for
    her friends, within 400 m for friends of friends (epsilon per ground metre):

    >>> people = gpd.GeoDataFrame(index=["ann", "bob", "cat", "dan"], crs="EPSG:32650",
    ...                           geometry=gpd.points_from_xy([500300, 500000, 500900, 500100],
    ...                                                       [4400100, 4400600, 4400200, 4400000]))
    >>> edges = [("ann", "bob"), ("bob", "cat"), ("ann", "cat"), ("cat", "dan")]
    >>> out, path = geopriv.diffuse_locations(people, lambda d: math.log(4) / (200 * d), source="ann", graph=edges,
    ...                                       bounds=(499000, 4399000, 502000, 4402000), rng=1)
    >>> out[["network_distance", "epsilon_per_m"]].round(5)
         network_distance  epsilon_per_m
    bob               1.0        0.00693
    cat               1.0        0.00693
    dan               2.0        0.00347
    >>> path  # SECRET: keep it with the data owner, to answer later recipients consistently
    DiffusionPath(dim=2, eps_min=0.0034..., eps_max=0.0069..., bound=True, <secret noise path: values not shown>)

    A value instead of the location (an infection bit, epsilon per unit of the value),
    projected to 0 or 1:

    >>> people["infected"] = [1, 0, 0, 1]
    >>> answers, _ = geopriv.diffuse_locations(people, lambda d: 2.0 / d, source="ann", graph=edges,
    ...                                        value="infected", support=[0, 1], rng=1)
    >>> answers.columns.tolist()
    ['network_distance', 'epsilon', 'response']
    """
    if not isinstance(data, gpd.GeoDataFrame):
        raise ParameterTypeError("diffuse_locations needs a GeoDataFrame of the people (one point per row).")
    if on_unreachable not in ("warn", "raise", "ignore"):
        raise GeoprivError(f"on_unreachable must be 'warn', 'raise' or 'ignore', got {on_unreachable!r}.")
    if support is not None and value is None:
        raise GeoprivError("support= projects released values; give value=<column> too (locations are not projected).")
    if value is None and (value_range is not None or continuous):
        raise GeoprivError(
            "value_range= and continuous= apply to value releases; give value=<column> too (locations "
            "are always snapped to the public lattice)."
        )
    if isinstance(continuous, (np.bool_,)):
        continuous = bool(continuous)
    if not isinstance(continuous, bool):
        raise ParameterTypeError("continuous must be True or False.")
    keep = (keep,) if isinstance(keep, str) else tuple(keep or ())
    if any(k != INDEX for k in keep):
        raise GeoprivError(f"keep= can only hold {INDEX!r} here (the recipients' labels): no column is released.")
    schedule = epsilon_of_distance(epsilon)
    if source not in data.index:
        raise GeoprivError(
            f"source {source!r} is not a row label of the layer. Pass the index label of the person "
            "whose location is released."
        )
    repeated = _repeated_people(data.index)
    if repeated.any():  # recipients are named (and published) by label: one label, one person
        dup = data.index[repeated]
        raise IdentityError(
            "share their index label: recipients are named, and published, by label",
            list(dict.fromkeys(dup)),
            Fix(
                "unique_labels",
                python="Give every person a unique label (a unique id column as the "
                "index, or gdf.sample(frac=1).reset_index(drop=True)).",
                cli="Give every person a unique id (--id-field).",
                qgis="Give every person a unique id ('Id field of the people').",
            ),
        )
    source = data.index[data.index.get_loc(source)]  # the label as stored (its type is part of a path's binding)
    if path is not None:
        from .mechanisms.diffusion import DiffusionPath

        if not isinstance(path, DiffusionPath):
            raise ParameterTypeError(
                f"path must be a DiffusionPath (the secret path of an earlier release), got {type(path).__name__}."
            )
    d = network_distances(data, graph, source, distance=distance, tolerance=tolerance, weight=weight)
    order = recipient_order(data.index)
    if INDEX not in keep:
        # the recipients' labels and their order are published: they must not follow the locations
        try:
            check_location_attributes(data.geometry.iloc[order])
        except LocationAttributeError as exc:  # the fix is the labels, not the rows' order
            raise LocationAttributeError(
                "The recipients' labels give the true locations away: they are published, in their order, and "
                + (
                    "they hold locations"
                    if set(exc.reasons) - {ROW_ORDER}
                    else "sorted by them the people are in spatial order"
                )
                + " ("
                + "; ".join(r.split(" (")[0] for r in exc.reasons.values())
                + ").",
                exc.reasons,
                fix=_LABELS_FIX,
            ) from None
    d = d.iloc[order]
    reach = np.isfinite(d.to_numpy())
    reach[d.index.get_loc(source)] = False
    unreachable = d.index[~np.isfinite(d.to_numpy())]
    pending_warning = None
    if len(unreachable):
        msg = (
            f"{len(unreachable)} row(s) are not connected to the source in the graph and get no answer: "
            f"labels {format_labels(unreachable)}."
        )
        if on_unreachable == "raise":
            raise GeoprivError(
                msg,
                fix=Fix(
                    "connect",
                    python="Connect them, or pass on_unreachable='warn' or 'ignore'.",
                    cli="Connect them, or give --on-unreachable warn or ignore.",
                    qgis="Connect them.",
                ),
            )
        if on_unreachable == "warn":  # after the release: a call that fails says one thing only
            pending_warning = msg
    if not reach.any():
        raise EmptyInputError(f"no row other than the source {source!r} is connected to it: there is nobody to answer.")
    recipients = d.index[reach]
    dist = d.to_numpy()[reach]
    eps = schedule(dist)
    old_path = path
    what = None if value is None else value
    store = open_store(budget_store)
    charged = {}
    if store is not None:
        if person is not None and person not in data.columns:
            raise GeoprivError(f"person={person!r} is not a column of the data.", fix=PERSON_FIX)
        pid = source if person is None else data.loc[source, person]
        unit = PER_METRE if value is None else value_unit(value)

    def charge_check(effective_max=None):
        if ledger is not None:
            ledger.check(source, float(eps.max()), old_path, value=what)
        if store is not None:  # after every check, just before the noise
            largest = float(eps.max()) if effective_max is None else max(float(effective_max), float(eps.max()))
            charged["largest"] = largest
            charged["reservation"] = store.charge_path(
                pid,
                largest,
                unit=unit,
                path=old_path,
                kind="diffuse_locations",
                parameters={
                    "mechanism": "private Markov jump process (graded release over a network)",
                    "distance": distance,
                    "recipients": int(len(recipients)),
                    "coalition_epsilon_per_m" if value is None else "coalition_epsilon": float(eps.max()),
                },
            )
            charged["reservation"].start()

    def charge_done(new_path):
        if store is not None:
            charged["reservation"].commit()
            store.record_path(new_path, pid, charged["largest"], unit=unit, old_path=old_path)

    extra = {"distance": distance, "recipients": int(len(recipients)), "unreachable": int(len(unreachable))}
    if value is None:
        out, effective, new_path, fields, seeded = release_diffusion(
            data,
            source,
            eps,
            recipients,
            path=path,
            rng=rng,
            bounds=bounds,
            grid=grid,
            max_distortion=max_distortion,
            before_noise=charge_check,
        )
        if ledger is not None:
            ledger.record(source, float(eps.max()), old_path, new_path)
        charge_done(new_path)
        result = gpd.GeoDataFrame(
            {"network_distance": dist, "epsilon_per_m": eps, "effective_epsilon_per_m": effective},
            geometry=gpd.points_from_xy(out[:, 0], out[:, 1]),
            crs=data.crs,
            index=recipients,
        )
        fields.update(extra)
        if store is not None:
            fields.update(budget_fields(store, PER_METRE, None))
        out = (attach(result, data, make_record(fields, seeded=seeded, n=len(recipients))), new_path)
    else:
        out = _diffuse_value(
            data,
            source,
            value,
            support,
            value_range,
            continuous,
            grid,
            eps,
            dist,
            recipients,
            path,
            rng,
            ledger,
            charge_check,
            extra,
            charge_done,
        )
        if store is not None:
            out[0].attrs["geopriv"].update(budget_fields(store, unit, None))
    if pending_warning is not None:
        warnings.warn(pending_warning, UnreachableRecipientsWarning, stacklevel=2)
    return out


def _repeated_people(labels: pd.Index) -> np.ndarray:
    """Rows whose label names a person another row's label names too.

    Labels that are person ids (integers, text) are read by geopriv's one rule for who is who
    (:func:`geopriv.identity.identities`: ``5`` and ``"5"``, or the NFC and NFD forms of a name, are one
    person); other labels (floats, tuples) by equality.
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


def _value_lattice(grid, eps_max, value_range):
    """(step, lo, hi, declared) of the public value lattice: step from grid= or the largest epsilon; the public range."""
    from .frame import default_grid

    if isinstance(grid, str):
        if grid != "auto":
            raise GeoprivError(
                f"grid must be a step in units of the value or 'auto' for a value release, got {grid!r}."
            )
        step = default_grid(eps_max)
    else:
        if isinstance(grid, (bool, np.bool_)):
            raise ParameterTypeError("grid must be a number (the value lattice step) or 'auto', not a bool.")
        try:
            step = float(grid)
        except (TypeError, ValueError):
            raise GeoprivError("grid must be a number (the value lattice step) or 'auto'.") from None
        if not (np.isfinite(step) and step > 0):
            raise GeoprivError("grid (the value lattice step) must be finite and > 0.")
        if step > 2.0 / eps_max:
            raise GeoprivError(
                f"the value lattice step {step:g} is coarser than the noise (mean size {2.0 / eps_max:.3g} at the largest "
                "epsilon): most answers would snap back to the true value. Use a step well below 2/epsilon, or 'auto'."
            )
    if value_range is None:
        half = VALUE_RANGE_STEPS * step
        return step, -half, half, False
    try:
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError):
        raise GeoprivError("value_range must be two numbers (lo, hi): the public range of the value.") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise GeoprivError("value_range must be two finite numbers lo < hi: the public range of the value.")
    return step, lo, hi, True


def _diffuse_value(
    data,
    source,
    column,
    support,
    value_range,
    continuous,
    grid,
    eps,
    dist,
    recipients,
    path,
    rng,
    ledger,
    charge_check,
    extra,
    charge_done,
):
    from .mechanisms.diffusion import diffuse, project_discrete, snap_values, value_column, value_lattice_epsilon
    from .rng import make_rng, unordered

    if column not in data.columns or column == data.geometry.name:
        raise GeoprivError(f"value={column!r} is not an attribute column of the layer.")
    raw = data.loc[source, column]
    try:
        u = float(raw)
    except (TypeError, ValueError):
        raise GeoprivError(f"value column {column!r} must be numeric at the source row (e.g. 0/1 for a bit).") from None
    if not np.isfinite(u):
        raise GeoprivError(f"value column {column!r} is missing (NaN) at the source row; nothing can be released.")
    eps_max = float(eps.max())
    step, lo, hi, declared = _value_lattice(grid, eps_max, value_range)
    lattice = support is None and not continuous
    if lattice:
        if not lo <= u <= hi:
            raise GeoprivError(
                f"the value of column {column!r} at the source row {source!r} lies outside the public range "
                + ("declared" if declared else f"+-{hi:g} (the default: {VALUE_RANGE_STEPS:g} lattice steps)")
                + ".",
                fix=Fix(
                    "value_range",
                    python="Declare value_range=(lo, hi) covering every possible value, chosen "
                    "without looking at the data.",
                    cli="Declare --value-range LO HI covering every possible value, chosen without looking at the "
                    "data.",
                    qgis="Declare a public range covering every possible value, chosen without looking at the data.",
                ),
            )
        r_max = max(abs(lo), abs(hi)) + (hi - lo)
        unique = np.unique(eps)
        eff_unique = np.array([value_lattice_epsilon(e, step, r_max) for e in unique])
        effective = eff_unique[np.searchsorted(unique, eps)]
    frame = {"kind": "value", "grid": "auto" if isinstance(grid, str) else float(step)}
    released = value_column(column)
    label = data.index[data.index.get_loc(source)]
    if path is not None:
        path.check_binding(source=label, released=released, frame=frame, value=u)
    charge_check(float(effective.max()) if lattice else None)
    source_rng = make_rng(rng).bind(  # a seed replays only for the same data and parameters
        unordered(data[column]),  # any row order: recipients are answered in label order
        unordered(pd.DataFrame({"epsilon": np.asarray(eps, dtype=float)}, index=pd.Index(recipients))),
        params=[repr(label), repr(column), frame, repr(value_range), bool(continuous)],
        purpose="diffuse_values",
    )
    responses, new_path = diffuse(u, eps, source_rng.generator, path=path)
    if path is None:
        new_path = new_path.bind(source=label, released=released, frame=frame, value=u)
    if ledger is not None:
        ledger.record(source, eps_max, path, new_path, value=column)
    charge_done(new_path)
    if support is not None:
        responses = project_discrete(responses, np.asarray(support, dtype=float))
        precision = (
            "projected to a finite public support of "
            f"{len(np.unique(np.asarray(support, dtype=float)))} value(s): the answers take only those values"
        )
    elif continuous:
        precision = "none: continuous float64 output (explicitly requested)"
    else:
        responses = snap_values(responses, step, lo, hi)
        precision = (
            f"1-D lattice: answers are integer multiples of {step:g} clamped to "
            + (f"value_range [{lo:g}, {hi:g}]" if declared else f"the default public range +-{hi:g}")
            + "; effective epsilon per unit from the 1-D analogue of Andres et al. 2013 Thm 4.1 (Mironov "
            "2012), for values at least one step apart"
        )
    result = pd.DataFrame({"network_distance": dist, "epsilon": eps, "response": responses}, index=recipients)
    fields = {
        "mechanism": "private Markov jump process (graded release over a network)",
        "definition": "each recipient epsilon(d)-private per unit of the value; any coalition of recipients learns no "
        "more than its closest member (the largest epsilon among them)",
        "epsilon_min": float(eps.min()),
        "epsilon_max": eps_max,
        "coalition_epsilon": eps_max,
        "finite_precision": precision,
        **extra,
    }
    if lattice:
        fields["effective_epsilon"] = float(effective.max())
    result.attrs["geopriv"] = make_record(fields, seeded=source_rng.seeded, n=len(recipients))
    return result, new_path
