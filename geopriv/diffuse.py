"""``geopriv.diffuse_locations``: release one person's location (or value) to her whole network, graded by distance.

The GeoPandas-facing side of Koufogiannis and Pappas' private Markov jump process
(:mod:`geopriv.mechanisms.diffusion`): close friends get an accurate answer, strangers a noisy
one, at epsilon(d) per ground metre for a non-increasing function of the network distance d,
and any coalition of recipients learns no more than its closest member.  Distances come from
:mod:`geopriv.network`; the location goes through the public release path
(:func:`geopriv.release.release_diffusion`); the budget is charged by
:class:`~geopriv.accounting.DiffusionLedger` (a path costs its largest epsilon).
"""
from __future__ import annotations

import warnings

import geopandas as gpd
import numpy as np
import pandas as pd

from .exceptions import EmptyInputError, GeoprivError, format_labels
from .frame import DEFAULT_MAX_DISTORTION
from .network import UnreachableRecipientsWarning, as_network, epsilon_of_distance, hop_distance, resistance_distance
from .provenance import attach, make_record
from .release import release_diffusion

__all__ = ["diffuse_locations", "network_distances"]

DISTANCES = ("hops", "resistance")


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

    ``graph``: a networkx graph or an (m, 2) edge list / two-column table of row labels, a scipy
    sparse adjacency matrix over the rows in order, or a GeoDataFrame of LineStrings between the
    rows' points (ends matched within ``tolerance`` CRS units).  ``distance``: ``"hops"``
    (shortest path) or ``"resistance"`` (effective resistance, sparse selected inversion).
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
    d = hop_distance(net, source) if distance == "hops" else resistance_distance(net, source)
    return d.reindex(data.index, fill_value=np.inf).rename("distance")


def diffuse_locations(
    data,
    epsilon,
    *,
    source,
    graph,
    distance: str = "hops",
    value=None,
    support=None,
    path=None,
    rng=None,
    bounds=None,
    grid="auto",
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    ledger=None,
    on_unreachable: str = "warn",
    tolerance: float = 0.0,
    weight=None,
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
        The (public) network between the rows: see :func:`network_distances`.
    distance : {"hops", "resistance"}
        Shortest-path hops, or effective resistance (a smoother distance that counts
        multiple paths).
    value : column label, optional
        Release this column's value at the source row instead of its location (e.g. an
        infection bit); epsilon is then per unit of the value.  Returns a DataFrame.
    support : sequence, optional
        With ``value``: project each answer to the nearest of these values (``[0, 1]`` for a
        bit; post-processing).
    path : DiffusionPath, optional
        The SECRET path of an earlier release of this same source (same CRS and bounds):
        answers are consistent with it and only the increase of the largest epsilon is
        charged.  Without it a fresh path is drawn: a new release that spends again.
    rng : None, int, SeedSequence or Generator
        ``None`` (default): OS entropy.
    bounds, grid, max_distortion
        The public study area, lattice and CRS handling, as in :func:`geopriv.perturb` (the
        path needs a plane: longitude/latitude data need ``bounds=``).  The lattice step follows
        the largest epsilon.
    ledger : DiffusionLedger, optional
        Charged before any noise is drawn (refuses an overspend); a path costs its largest epsilon.
    on_unreachable : {"warn", "raise", "ignore"}
        Rows not connected to the source (or not in the graph) get no answer; by default a
        warning names them.
    tolerance, weight
        Matching of line ends to points, and edge weights (conductances): see :func:`geopriv.network.as_network`.

    Returns
    -------
    (GeoDataFrame or DataFrame, DiffusionPath)
        One row per recipient (index: its label) with ``network_distance``, ``epsilon_per_m`` (or
        ``epsilon``), ``effective_epsilon_per_m`` and the released point (or ``response``);
        ``attrs["geopriv"]`` is the provenance (public fields; never the path).  The path is
        SECRET: with it anyone subtracts the noise.  Keep it only to answer later recipients.
    """
    if not isinstance(data, gpd.GeoDataFrame):
        raise TypeError("diffuse_locations needs a GeoDataFrame of the people (one point per row).")
    if on_unreachable not in ("warn", "raise", "ignore"):
        raise GeoprivError(f"on_unreachable must be 'warn', 'raise' or 'ignore', got {on_unreachable!r}.")
    if support is not None and value is None:
        raise GeoprivError("support= projects released values; give value=<column> too (locations are not projected).")
    schedule = epsilon_of_distance(epsilon)
    if source not in data.index:
        raise GeoprivError(f"source {source!r} is not a row label of the layer. Pass the index label of the person "
                           "whose location is released.")
    d = network_distances(data, graph, source, distance=distance, tolerance=tolerance, weight=weight)
    reach = np.isfinite(d.to_numpy())
    reach[data.index.get_loc(source)] = False
    unreachable = d.index[~np.isfinite(d.to_numpy())]
    pending_warning = None
    if len(unreachable):
        msg = (f"{len(unreachable)} row(s) are not connected to the source in the graph and get no answer: "
               f"labels {format_labels(unreachable)}.")
        if on_unreachable == "raise":
            raise GeoprivError(msg + " Connect them, or pass on_unreachable='warn' or 'ignore'.")
        if on_unreachable == "warn":  # after the release: a call that fails says one thing only
            pending_warning = msg
    if not reach.any():
        raise EmptyInputError(f"no row other than the source {source!r} is connected to it: there is nobody to answer.")
    recipients = d.index[reach]
    dist = d.to_numpy()[reach]
    eps = schedule(dist)
    old_path = path

    def charge_check():
        if ledger is not None:
            ledger.check(source, float(eps.max()), old_path)

    extra = {"distance": distance, "recipients": int(len(recipients)), "unreachable": int(len(unreachable))}
    if value is None:
        out, effective, new_path, fields, seeded = release_diffusion(
            data, source, eps, recipients, path=path, rng=rng, bounds=bounds, grid=grid,
            max_distortion=max_distortion, before_noise=charge_check,
        )
        if ledger is not None:
            ledger.record(source, float(eps.max()), old_path, new_path)
        result = gpd.GeoDataFrame(
            {"network_distance": dist, "epsilon_per_m": eps, "effective_epsilon_per_m": effective},
            geometry=gpd.points_from_xy(out[:, 0], out[:, 1]), crs=data.crs, index=recipients,
        )
        fields.update(extra)
        out = (attach(result, data, make_record(fields, seeded=seeded, n=len(recipients))), new_path)
    else:
        out = _diffuse_value(data, source, value, support, eps, dist, recipients, path, rng, ledger, charge_check, extra)
    if pending_warning is not None:
        warnings.warn(pending_warning, UnreachableRecipientsWarning, stacklevel=2)
    return out


def _diffuse_value(data, source, column, support, eps, dist, recipients, path, rng, ledger, charge_check, extra):
    from .mechanisms.diffusion import diffuse, project_discrete
    from .rng import make_rng

    if column not in data.columns or column == data.geometry.name:
        raise GeoprivError(f"value={column!r} is not an attribute column of the layer.")
    raw = data.loc[source, column]
    try:
        u = float(raw)
    except (TypeError, ValueError):
        raise GeoprivError(f"value column {column!r} must be numeric at the source row (e.g. 0/1 for a bit).") from None
    if not np.isfinite(u):
        raise GeoprivError(f"value column {column!r} is missing (NaN) at the source row; nothing can be released.")
    charge_check()
    source_rng = make_rng(rng)
    responses, new_path = diffuse(u, eps, source_rng.generator, path=path)
    if ledger is not None:
        ledger.record(source, float(eps.max()), path, new_path)
    if support is not None:
        responses = project_discrete(responses, np.asarray(support, dtype=float))
    result = pd.DataFrame({"network_distance": dist, "epsilon": eps, "response": responses}, index=recipients)
    fields = {
        "mechanism": "private Markov jump process (graded release over a network)",
        "definition": "each recipient epsilon(d)-private per unit of the value; any coalition of recipients learns no "
                      "more than its closest member (the largest epsilon among them)",
        "epsilon_min": float(eps.min()), "epsilon_max": float(eps.max()),
        "coalition_epsilon": float(eps.max()),
        "finite_precision": "none: float64 answers" + ("" if support is None else ", projected to a finite support"),
        **extra,
    }
    result.attrs["geopriv"] = make_record(fields, seeded=source_rng.seeded, n=len(recipients))
    return result, new_path
