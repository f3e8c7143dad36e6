"""The ``priv`` accessor: ``gdf.priv.<method>(...)`` is ``geopriv.<method>(gdf, ...)``.

Thin and stateless: every method is a docstring and one call of a public function.
"""
from __future__ import annotations

import pandas as pd

from . import metrics as _metrics
from .perturb import perturb as _perturb
from . import traces as _traces

__all__ = ["PrivAccessor"]


class _Base:
    def __init__(self, obj):
        self._obj = obj

    def perturb(self, epsilon=None, **kwargs):
        """Release the points with geo-indistinguishability: same as :func:`geopriv.perturb`.

        ``epsilon`` per ground metre, or ``level=`` and ``radius=`` (metres); ``rng=None`` uses
        OS entropy; ``grid=``/``region=`` discretise and truncate; ``mechanism=`` uses a
        prebuilt mechanism.  Returns a new object; this one is not modified.
        """
        return _perturb(self._obj, epsilon, **kwargs)

    def sanitize_traces(self, **kwargs):
        """Release location traces within a budget per trace: same as :func:`geopriv.sanitize_traces`.

        ``traj_id=`` and ``time=`` name the trace id and time stamp columns; ``epsilon`` (total per
        trace, per ground metre) or ``level=``/``radius=``; ``method="predictive"`` (default) or
        ``"independent"``; ``budget="fixed_rate"`` with ``rate=`` or ``"fixed_utility"`` with
        ``accuracy=`` (metres).  Returns a new GeoDataFrame with ``predicted``, ``status`` and
        ``epsilon_spent`` columns; the per-trace ledger is ``result.priv.ledger()``.
        """
        return _traces.sanitize_traces(self._obj, **kwargs)

    def ledger(self):
        """The per-trace budget ledger of a :func:`geopriv.sanitize_traces` result: :func:`geopriv.trace_ledger`."""
        return _traces.trace_ledger(self._obj)

    def displacement(self, released):
        """Ground distance in metres from each point to its released version: :func:`geopriv.metrics.displacement`."""
        return _metrics.displacement(self._obj, released)

    def utility_report(self, released, delta: float = 0.9):
        """Displacement statistics against ``released``: :func:`geopriv.metrics.utility_report`."""
        return _metrics.utility_report(self._obj, released, delta=delta)


@pd.api.extensions.register_dataframe_accessor("priv")
class PrivAccessor(_Base):
    """geopriv on a GeoDataFrame: ``gdf.priv.perturb(...)``, ``gdf.priv.utility_report(...)``."""

    def __init__(self, obj):
        import geopandas as gpd

        if not isinstance(obj, gpd.GeoDataFrame):
            raise AttributeError(
                "The .priv accessor needs a GeoDataFrame; build one with geopandas.GeoDataFrame(df, geometry=..., crs=...)."
            )
        super().__init__(obj)


@pd.api.extensions.register_series_accessor("priv")
class PrivSeriesAccessor(_Base):
    """geopriv on a GeoSeries of points: ``s.priv.perturb(...)``."""

    def __init__(self, obj):
        import geopandas as gpd

        if not isinstance(obj, gpd.GeoSeries):
            raise AttributeError("The .priv accessor needs a GeoSeries of points.")
        super().__init__(obj)
