"""Validation of point inputs shared by every mechanism.

Errors name row labels, never coordinates, and say how to fix the input.
"""
from __future__ import annotations

import geopandas as gpd
import numpy as np
import shapely

from .exceptions import EmptyInputError, GeometryError, GeoprivError, MissingCRSError

__all__ = ["as_geoseries", "point_xy", "check_no_other_geometries"]


def as_geoseries(data, what: str = "data") -> gpd.GeoSeries:
    """The active geometry of a GeoDataFrame, or the GeoSeries itself; checks the CRS."""
    if isinstance(data, gpd.GeoDataFrame):
        try:
            geoms = data.geometry
        except AttributeError:
            raise GeoprivError(
                f"{what} has no active geometry column. Call gdf.set_geometry('column') first."
            ) from None
    elif isinstance(data, gpd.GeoSeries):
        geoms = data
    else:
        raise TypeError(
            f"{what} must be a GeoDataFrame or GeoSeries, got {type(data).__name__}. "
            "Build one with geopandas.GeoDataFrame(df, geometry=geopandas.points_from_xy(x, y), crs=...)."
        )
    if geoms.crs is None:
        raise MissingCRSError(f"The {what}")
    return geoms


def check_no_other_geometries(data, what: str = "data") -> None:
    """Refuse GeoDataFrames that carry extra geometry columns: they would leak true locations."""
    if not isinstance(data, gpd.GeoDataFrame):
        return
    active = data.geometry.name
    others = [c for c in data.columns if c != active and isinstance(data[c].dtype, gpd.array.GeometryDtype)]
    if others:
        raise GeoprivError(
            f"{what} has other geometry column(s) {others} that would be released unperturbed next to the "
            f"perturbed '{active}'. Drop them (gdf.drop(columns={others!r})) or release each one separately."
        )


def point_xy(geoms: gpd.GeoSeries, what: str = "data") -> np.ndarray:
    """(n, 2) float array of the points' x, y; clear errors for anything that is not a finite point."""
    n = len(geoms)
    if n == 0:
        raise EmptyInputError(f"{what} has no rows: there is nothing to release.")
    arr = geoms.values._data if hasattr(geoms.values, "_data") else np.asarray(geoms.values)
    index = geoms.index
    tid = shapely.get_type_id(arr)
    if (tid != 0).any():
        missing = tid == -1
        if missing.any():
            raise GeometryError(
                "have no geometry (None)", index[missing],
                "Drop them (gdf[gdf.geometry.notna()]) or fill them before releasing.",
            )
        multi = tid == 4
        if multi.any():
            raise GeometryError(
                "are MultiPoints", index[multi],
                "Each part is a location of its own and spends its own budget: split them with "
                "gdf.explode(index_parts=True) and release the parts, or keep one representative point per row.",
            )
        other = tid != 0
        raise GeometryError(
            "are not points (lines, polygons, ...)", index[other],
            "geopriv releases point locations. Use gdf.representative_point() or the centroid if that is "
            "what you mean to protect, or drop those rows.",
        )
    coords = shapely.get_coordinates(arr)
    if len(coords) != n:
        empty = shapely.is_empty(arr)
        raise GeometryError(
            "are empty points", index[empty],
            "Drop them (gdf[~gdf.is_empty]) before releasing.",
        )
    bad = ~np.isfinite(coords).all(axis=1)
    if bad.any():
        raise GeometryError(
            "have NaN or infinite coordinates", index[bad],
            "Fix or drop them before releasing.",
        )
    return coords
