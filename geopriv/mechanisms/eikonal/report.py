"""The verification report of an eikonal mechanism (what :func:`.verification.verify` returns)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: largest verified ratio (realised log-ratio / allowed) a mechanism may have: 1 plus float rounding
TOLERANCE = 1e-9
#: largest relative difference allowed between the stored normaliser and the one recomputed from the
#: weights and kernels (the build stores exactly that recomputation; float64 sums of positive terms
#: in another order differ by far less)
NORMALISER_RTOL = 1e-10


@dataclass(frozen=True, eq=False)
class VerifyReport:
    """Realised local Lipschitz constant of a mechanism against its privacy map.

    Attributes
    ----------
    max_ratio : float
        max over neighbouring node pairs (a, b) and outputs y of
        |ln P(Q(a)=y) - ln P(Q(b)=y)| / (|a - b| (eps(a) + eps(b)) / 2), lengths in ground
        metres.  <= 1 means the guarantee holds on the grid.
    normaliser_ratio : float
        The same maximum for the normaliser term |delta ln s| alone (the part of the budget
        the weights used).
    worst : dict
        Where ``max_ratio`` is reached: the two raster (row, col) nodes, the output index and
        its position (CRS), the realised and allowed log-ratios.
    node_ratio : ndarray (ny, nx)
        Largest ratio over the edges at each node (for maps).
    n_nodes, n_outputs, n_edges : int
    seconds : float
    normaliser_mismatch : float
        Largest relative difference between the stored normaliser and the one recomputed
        from the weights and kernels (what sampling really divides by).  The ratios above are
        computed with the recomputed one; a mismatch above ``NORMALISER_RTOL`` (1e-10) means
        the arrays were edited after the build, and the report is not ``ok``.
    """

    max_ratio: float
    normaliser_ratio: float
    worst: dict
    node_ratio: np.ndarray = field(repr=False)
    n_nodes: int = 0
    n_outputs: int = 0
    n_edges: int = 0
    seconds: float = 0.0
    tolerance: float = TOLERANCE
    normaliser_mismatch: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the realised constant is within the target (up to ``tolerance``) and the
        stored normaliser is the one the weights and kernels give."""
        return bool(self.max_ratio <= 1.0 + self.tolerance and self.normaliser_mismatch <= NORMALISER_RTOL)

    def to_dict(self) -> dict:
        return {
            "max_ratio": self.max_ratio,
            "normaliser_ratio": self.normaliser_ratio,
            "worst": self.worst,
            "n_nodes": self.n_nodes,
            "n_outputs": self.n_outputs,
            "n_edges": self.n_edges,
            "seconds": self.seconds,
            "tolerance": self.tolerance,
            "normaliser_mismatch": self.normaliser_mismatch,
            "ok": self.ok,
        }

    def __str__(self) -> str:
        w = self.worst
        return (
            f"realised/target local Lipschitz constant: max {self.max_ratio:.6f} "
            f"({'OK' if self.ok else 'VIOLATED'}; normaliser share {self.normaliser_ratio:.4f}) over "
            f"{self.n_edges} neighbouring node pairs x {self.n_outputs} outputs; worst between raster nodes "
            f"{w.get('node_a')} and {w.get('node_b')}, output {w.get('output')}"
            + (
                f"; the stored normaliser differs from the weights' row sums by up to {self.normaliser_mismatch:.3g} "
                "(relative): the arrays were edited after the build"
                if self.normaliser_mismatch > NORMALISER_RTOL
                else ""
            )
        )
