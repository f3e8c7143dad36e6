"""``ddf.priv``: the same accessor on dask-geopandas frames (each method dispatches to its lazy form)."""

from __future__ import annotations

from ..accessor import PrivBase

__all__ = ["DaskPrivAccessor"]


class DaskPrivAccessor(PrivBase):
    """geopriv on a dask-geopandas GeoDataFrame or GeoSeries: ``ddf.priv.perturb(...)`` returns a lazy release."""
