"""The plan contract: every release kind is a frozen plan built from public parameters, then run on data.

In the spirit of pyproj's ``Transformer.from_crs(...).transform(...)``:

``plan_<kind>(crs, ..., **public parameters)``
    Validates every parameter that needs no row and fixes everything public (mechanism,
    frame, lattice, epsilon split, provenance fields).  Returns a frozen plan: it holds its
    parameters, touches no data, draws nothing and charges nothing.
``plan.run(data, store=None, rng=None, progress=None)``
    Checks the whole input against the plan, reserves the budget (the plan's run is the one
    place a release charges, through :func:`geopriv.release.charging.reserve`), draws the noise
    from ``rng`` bound to the data and the plan, settles the charge, and attaches the record.
    A dask frame goes to ``run_lazy``.
``plan.run_lazy(ddf, store=None, rng=None, progress=None)``
    The same plan over dask partitions.  The lazy runner is registered by
    :mod:`geopriv.distributed` under the plan's ``kind`` (:func:`geopriv.daskhook.register_lazy`),
    so the core never imports it.

A public function is then a docstring and ``return plan_<kind>(...).run(data, ...)``; the
accessor, the CLI and QGIS pass the same parameters.  ``docs/architecture.md`` has the five
steps of adding a release kind.
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..daskhook import is_dask, lazy

__all__ = ["Plan", "Executes", "lazy_kind", "input_crs", "opened_store"]


@contextlib.contextmanager
def opened_store(store):
    """The :class:`~geopriv.BudgetStore` of a run: a URL is opened here and closed after; a store object stays open."""
    from ..budget import open_store

    opened = open_store(store)
    try:
        yield opened
    finally:
        if opened is not None and opened is not store:
            opened.close()


def lazy_kind(kind: str) -> str:
    """The name a plan kind's lazy runner is registered under in :mod:`geopriv.daskhook`."""
    return f"plan:{kind}"


@runtime_checkable
class Plan(Protocol):
    """What a release plan offers its front ends."""

    kind: ClassVar[str]

    def run(self, data, *, store=None, rng=None, progress=None) -> Any: ...

    def run_lazy(self, ddf, *, store=None, rng=None, progress=None) -> Any: ...


class Executes:
    """Mixin for a plan's dataclass: ``run`` dispatches dask frames to ``run_lazy``; a kind defines ``run_memory``."""

    kind: ClassVar[str]

    def run(self, data, *, store=None, rng=None, progress=None):
        """Release ``data`` under this plan (in memory, or lazily for a dask frame).

        ``store``: a :class:`~geopriv.BudgetStore`, its URL (opened for the run and closed after),
        or None.
        """
        with opened_store(store) as store:
            if is_dask(data):
                return self.run_lazy(data, store=store, rng=rng, progress=progress)
            return self.run_memory(data, store=store, rng=rng, progress=progress)

    def run_memory(self, data, *, store=None, rng=None, progress=None):  # pragma: no cover - each kind has its own
        raise NotImplementedError

    def run_lazy(self, ddf, *, store=None, rng=None, progress=None):
        """The same plan over dask partitions (the runner :mod:`geopriv.distributed` registered for this kind)."""
        return lazy(lazy_kind(self.kind))(self, ddf, store=store, rng=rng, progress=progress)


def input_crs(data):
    """The CRS a plan for ``data`` is built in: the (dask) GeoDataFrame's or GeoSeries' own.

    Anything else (no geometry, no CRS) is refused by the release's input check, with its
    usual message, before a plan is built.
    """
    crs = getattr(data, "crs", None)
    if crs is None and is_dask(data):
        import geopandas as gpd

        from ..exceptions import GeoprivError, MissingCRSError

        if not isinstance(data._meta, (gpd.GeoDataFrame, gpd.GeoSeries)):
            raise GeoprivError("A release on dask takes a dask_geopandas GeoDataFrame (or GeoSeries) of points.")
        raise MissingCRSError("The dask GeoDataFrame")
    if crs is None:  # the input check's own first steps, so its own error (not geometries, no CRS, ...)
        from ..points import as_geoseries, check_coordinates, check_no_other_geometries, point_xy

        geoms = as_geoseries(data)
        check_no_other_geometries(data)
        check_coordinates(point_xy(geoms), geoms.crs, geoms.index)
    return crs
