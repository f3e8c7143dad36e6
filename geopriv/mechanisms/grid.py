"""Grid helpers shared by the location-dependent mechanisms (eikonal and optimal).

Both mechanisms work on the nodes (cell centres) of a :class:`~geopriv.PrivacyMap` and state
their guarantee per 8-neighbour edge: for neighbouring nodes a, b the log-ratio of any output's
probability is at most ``allowed(a, b) = |a - b| (epsilon(a) + epsilon(b)) / 2``.  The edges come
in four families (east, south, south-east, south-west), each stored as an array indexed by its
first node, in the order of :func:`geopriv.privacy_map.edge_weights`.
"""

from __future__ import annotations

import numpy as np

from ..privacy_map import PrivacyMap, edge_weights

__all__ = ["edge_slices", "edge_window", "allowed", "mean_ground_scale", "edge_list", "EDGE_OFFSETS"]

#: (row, col) step from the first to the second node of each edge family
EDGE_OFFSETS = ((0, 1), (1, 0), (1, 1), (1, -1))


def edge_slices():
    """(slice_a, slice_b) for the 4 edge families, matching :func:`edge_weights`."""
    s, e0, e1 = slice(None), slice(0, -1), slice(1, None)
    return [((s, e0), (s, e1)), ((e0, s), (e1, s)), ((e0, e0), (e1, e1)), ((e0, e1), (e1, e0))]


def edge_window(family: int, r0: int, r1: int, c0: int, c1: int):
    """Index of a family's edge array for the edges inside the node window [r0:r1, c0:c1].

    For a window ``L`` of node values, ``L[sa] - L[sb]`` (the family's :func:`edge_slices`)
    lines up with ``edge_array[edge_window(family, ...)]``: edge arrays are indexed by the
    first node for the east, south and south-east families, and by (row, col - 1) of the
    first node for the south-west family.
    """
    return (slice(r0, r1 - (0 if family == 0 else 1)), slice(c0, c1 - (0 if family == 1 else 1)))


def allowed(pm: PrivacyMap):
    """Allowed log-ratio per edge (4 family arrays), conservative ground lengths, in CRS terms."""
    hx, hy = pm.cell_size
    return edge_weights(pm.epsilon_crs, hy, hx)


def mean_ground_scale(pm: PrivacyMap) -> float:
    """CRS units per ground metre, averaged over the map (1 for metric CRSs away from distortion)."""
    return float(np.mean(pm.ground_scale[0] + pm.ground_scale[1]) / 2)


def edge_list(shape, per_family):
    """(ia, ib, w): flat node indices (row-major) and the value of every 8-neighbour edge."""
    ny, nx = shape
    idx = np.arange(ny * nx).reshape(ny, nx)
    ia, ib, w = [], [], []
    for (sa, sb), al in zip(edge_slices(), per_family):
        ia.append(idx[sa].ravel())
        ib.append(idx[sb].ravel())
        w.append(np.asarray(al, float).ravel())
    return np.concatenate(ia), np.concatenate(ib), np.concatenate(w)
