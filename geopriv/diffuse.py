"""``geopriv.diffuse_locations``: release one person's location (or value) to her whole network, graded by distance.

The GeoPandas-facing side of Koufogiannis and Pappas' private Markov jump process
(:mod:`geopriv.mechanisms.diffusion`): close friends get an accurate answer, strangers a noisy
one, at epsilon(d) per ground metre for a non-increasing function of the network distance d,
and any coalition of recipients learns no more than its closest member.  Distances come from
:mod:`geopriv.network` (:func:`network_distances`); the release is the diffusion plan
(:func:`geopriv.release.diffusion.plan_diffusion`), whose run checks the people, charges the
``ledger`` (:class:`~geopriv.accounting.DiffusionLedger`: a path costs its largest epsilon) and
the budget store once, draws the path and records the release.

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

from .budget import opens_budget_store
from .frame import DEFAULT_MAX_DISTORTION
from .network import DISTANCES, network_distances, recipient_order  # noqa: F401 - their old home: geopriv.diffuse.X
from .people import repeated_people as _repeated_people  # noqa: F401 - its old name here
from .release.diffusion import VALUE_RANGE_STEPS, check_people, plan_diffusion

__all__ = ["diffuse_locations", "network_distances", "recipient_order", "VALUE_RANGE_STEPS"]


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
    check_people(data)
    return plan_diffusion(
        data.crs,
        epsilon,
        source=source,
        graph=graph,
        distance=distance,
        value=value,
        support=support,
        value_range=value_range,
        continuous=continuous,
        bounds=bounds,
        grid=grid,
        max_distortion=max_distortion,
        ledger=ledger,
        on_unreachable=on_unreachable,
        tolerance=tolerance,
        weight=weight,
        keep=keep,
        person=person,
    ).run(data, store=budget_store, rng=rng, path=path)
