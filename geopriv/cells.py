"""Public cells for private counts: a square grid, H3 hexagons, or public polygons (and, for flows,
the ordered pairs of public regions: :class:`FlowCells`).

Every kind of cells answers the same four questions from public information only:

``locate(xy)``
    the cell of every row (``-1`` outside every cell: refused by the caller, naming rows);
``keys(depth)``
    the public hierarchy over the cells (one key array per level, leaves first), from which
    :class:`~geopriv.mechanisms.hierarchy.CellTree` is built;
``geometry()`` and ``ids()``
    the released cells' polygons (in the data's CRS) and their ids;
``describe()``
    provenance fields.

The cells never depend on the data: a grid is anchored on the declared area's lower-left
corner, H3 cells cover the declared area, polygons are given.  Every cell of the public area is
released, empty or not.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from pyproj import Transformer

from .crs import as_crs
from .defaults import DEFAULT_MAX_DISTORTION
from .exceptions import CRSError, Fix, GeoprivError, ParameterError, ParameterTypeError

__all__ = [
    "GridCells",
    "H3Cells",
    "PolygonCells",
    "FlowCells",
    "make_cells",
    "MAX_CELLS",
    "parse_cells",
    "check_polygons_not_from_data",
    "crs_units_per_metre",
    "h3_parents",
]

#: most cells one release may have (memory: a few int64 and float arrays per cell and level)
MAX_CELLS = 20_000_000

_H3_FIX = Fix(
    "install_h3",
    python="Install it: pip install 'geopriv[h3]' (or pip install h3).",
    cli="Install it: pip install 'geopriv[h3]' (or pip install h3).",
    qgis="Install the h3 package into QGIS's Python (pip install h3 from the OSGeo4W shell), or use a square grid.",
)


def parse_cells(cells):
    """``cells=`` as ``("grid", step_m)``, ``("h3", resolution)`` or ``("polygons", GeoDataFrame)``.

    Accepted: a positive number (a square grid step in metres), ``"h3:9"`` / ``("h3", 9)``, a
    string of a number (``"250"``, ``"250m"``), or a GeoDataFrame / GeoSeries of public polygons.
    """
    if isinstance(cells, (gpd.GeoDataFrame, gpd.GeoSeries)):
        return "polygons", cells
    if isinstance(cells, tuple) and len(cells) == 2 and cells[0] == "h3":
        return "h3", _h3_resolution(cells[1])
    if isinstance(cells, str):
        text = cells.strip().lower()
        if text.startswith("h3"):
            return "h3", _h3_resolution(text[2:].lstrip(":= "))
        text = text[:-1] if text.endswith("m") else text
        try:
            cells = float(text)
        except ValueError:
            raise ParameterError(
                f"{cells!r} is not a grid step in metres, an H3 resolution ('h3:9') or public polygons.",
                fix=_cells_fix(),
            ) from None
    if isinstance(cells, (bool, np.bool_)) or not isinstance(cells, numbers.Real):
        raise ParameterTypeError(
            "cells must be a grid step in metres (e.g. 250), 'h3:<resolution>' or a GeoDataFrame of public polygons."
        )
    step = float(cells)
    if not (math.isfinite(step) and step > 0):
        raise ParameterError(f"The grid step must be a positive number of metres, got {step!r}.", fix=_cells_fix())
    return "grid", step


def _cells_fix() -> Fix:
    return Fix(
        "cells",
        python="Give cells=250 (a 250 m square grid), cells='h3:9' (H3 resolution 9) or cells=<a "
        "GeoDataFrame of public polygons, e.g. districts>.",
        cli="Give --cells 250 (a 250 m square grid), --cells h3:9 (H3 resolution 9) or --cells <a file of "
        "public polygons, e.g. districts>.",
        qgis="Set 'Cells' to a grid step in metres, or give a layer of public polygons.",
    )


def _h3_resolution(value) -> int:
    try:
        res = int(str(value).strip())
    except ValueError:
        raise ParameterError(
            f"The H3 resolution must be an integer from 0 to 15, got {value!r}.", fix=_cells_fix()
        ) from None
    if not 0 <= res <= 15:
        raise ParameterError(f"The H3 resolution must be from 0 to 15, got {res}.", fix=_cells_fix())
    return res


def _too_many(n: float, what: str) -> None:
    if n > MAX_CELLS:
        raise ParameterError(
            f"{what} would have about {n:,.0f} cells (at most {MAX_CELLS:,} per release).",
            fix=Fix(
                "fewer_cells",
                python="Declare a smaller study area with bounds=, or use larger cells.",
                cli="Declare a smaller study area with --bounds, or use larger --cells.",
                qgis="Set a smaller 'Public study area', or use larger cells.",
            ),
        )


def crs_units_per_metre(crs, rect) -> float:
    """CRS units per ground metre over the public area ``rect`` (a function of public data).

    Where the CRS's scale stays within 1 % of its unit over the area (UTM, national grids: the
    tolerance geopriv's public frame uses), its unit is taken as it is, so 100 m cells are 100
    units and line up with round coordinates; otherwise (Web Mercator away from the equator) the
    scale at the area's centre.  Warns (:class:`~geopriv.exceptions.DistortionWarning`) when the
    scale varies by more than 1 % over the area: cells then differ in ground size by as much.
    """
    import warnings

    from .crs import ground_scale
    from .exceptions import DistortionWarning, caller_stacklevel

    xmin, ymin, xmax, ymax = rect
    xs = np.array([(xmin + xmax) / 2, xmin, xmax, xmin, xmax])
    ys = np.array([(ymin + ymax) / 2, ymin, ymin, ymax, ymax])
    smax, smin = ground_scale(crs, xs, ys)
    scale = np.sqrt(smax * smin)
    spread = float(scale.max() / scale.min() - 1)
    if spread > 0.01 or float(np.max(smax / smin)) - 1 > 0.01:
        warnings.warn(
            f"The CRS's scale varies by {100 * spread:.1f} % over the public area: the grid's cells are square in "
            "the CRS and their ground size varies as much. Reproject to a local CRS (a UTM zone) for cells of one "
            "size.",
            DistortionWarning,
            stacklevel=caller_stacklevel(),
        )
    unit = crs.axis_info[0].unit_conversion_factor if crs.axis_info else 1.0
    nominal = 1.0 / float(unit or 1.0)  # CRS units per metre of its own unit
    if float(np.max(np.abs(scale / nominal - 1))) <= DEFAULT_MAX_DISTORTION:
        return nominal
    return float(scale[0])


def _quadtree_keys(ix: np.ndarray, iy: np.ndarray, depth: int) -> list:
    """Keys of levels 0..depth of a quadtree over integer cell positions (level l: positions >> l)."""
    span = int(max(ix.max(initial=0), iy.max(initial=0))) + 1
    return [((ix >> lev).astype(np.int64) * span + (iy >> lev)) for lev in range(depth + 1)]


def _levels_to_one(nx: int, ny: int) -> int:
    return max(1, math.ceil(math.log2(max(nx, ny, 2))))


@dataclasses.dataclass(frozen=True)
class GridCells:
    """A square grid of ``step`` CRS units anchored at the public area's lower-left corner.

    ``kept`` are the flat positions (``row * nx + col``, rows from the north) of the released
    cells: all of them, or those meeting ``region``.
    """

    crs: object
    x0: float
    y0: float
    step: float
    step_m: float
    nx: int
    ny: int
    kept: np.ndarray
    area_source: str
    x1: float = math.inf  # the public area's east and north edges: the last column and row reach them
    y1: float = math.inf

    @classmethod
    def build(cls, crs, step_m: float, rect, region_geom, area_source: str) -> "GridCells":
        crs = as_crs(crs)
        if not crs.is_projected:
            raise CRSError(
                f"A square grid in metres needs a projected CRS; {crs.name} is geographic (degrees).",
                fix=Fix(
                    "projected_crs",
                    python="Reproject the data to a projected CRS in metres for your area (a UTM zone, "
                    "e.g. gdf.to_crs('EPSG:32650')), or use H3 cells: cells='h3:9'.",
                    cli="Reproject the file to a projected CRS in metres (e.g. ogr2ogr -t_srs EPSG:32650 OUT IN), or "
                    "use H3 cells: --cells h3:9.",
                    qgis="Reproject the layer to a projected CRS in metres ('Reproject layer'), or use H3 cells.",
                ),
            )
        step = step_m * crs_units_per_metre(crs, rect)
        xmin, ymin, xmax, ymax = rect
        nx = max(1, math.ceil((xmax - xmin) / step - 1e-9))
        ny = max(1, math.ceil((ymax - ymin) / step - 1e-9))
        _too_many(float(nx) * ny, f"A {step_m:g} m grid over the public area")
        if nx * ny == 1 and region_geom is None:
            raise ParameterError(f"The {step_m:g} m grid has a single cell over the public area: use smaller cells.")
        if region_geom is None:
            kept = np.arange(nx * ny, dtype=np.int64)
        else:
            ix, iy = np.meshgrid(np.arange(nx), np.arange(ny))
            boxes = shapely.box(
                xmin + ix * step, ymin + (ny - 1 - iy) * step, xmin + (ix + 1) * step, ymin + (ny - iy) * step
            )
            kept = np.flatnonzero(
                shapely.intersects(boxes.ravel(), region_geom) & ~shapely.touches(boxes.ravel(), region_geom)
            ).astype(np.int64)
            if not len(kept):
                raise ParameterError("No grid cell meets the region.")
        return cls(
            crs,
            float(xmin),
            float(ymin),
            float(step),
            float(step_m),
            int(nx),
            int(ny),
            kept,
            area_source,
            float(xmax),
            float(ymax),
        )

    @property
    def n(self) -> int:
        return len(self.kept)

    def _lookup(self):
        lut = np.full(self.nx * self.ny, -1, dtype=np.int64)
        lut[self.kept] = np.arange(len(self.kept))
        return lut

    def locate(self, xy: np.ndarray) -> np.ndarray:
        col = np.floor((xy[:, 0] - self.x0) / self.step)
        row_s = np.floor((xy[:, 1] - self.y0) / self.step)  # from the south
        # a point on the north or east edge of the grid or of the public area (which float rounding may put a
        # hair beyond the grid's) belongs to the last cell
        if len(xy) and col.max() >= self.nx:
            col = np.where((col == self.nx) & (xy[:, 0] <= self._east), self.nx - 1, col)
        if len(xy) and row_s.max() >= self.ny:
            row_s = np.where((row_s == self.ny) & (xy[:, 1] <= self._north), self.ny - 1, row_s)
        ok = (col >= 0) & (col < self.nx) & (row_s >= 0) & (row_s < self.ny)
        everywhere = bool(ok.all())
        if not everywhere:
            col, row_s = np.where(ok, col, 0), np.where(ok, row_s, 0)
        flat = (self.ny - 1 - row_s.astype(np.int64)) * self.nx + col.astype(np.int64)
        if len(self.kept) == self.nx * self.ny:  # every cell is released: its position is its index
            out = flat
        else:
            out = self._lookup()[flat]
        return out if everywhere else np.where(ok, out, -1)

    @property
    def _east(self) -> float:
        east = self.x0 + self.nx * self.step
        return max(east, self.x1) if math.isfinite(self.x1) and self.x1 - east < 1e-6 * self.step else east

    @property
    def _north(self) -> float:
        north = self.y0 + self.ny * self.step
        return max(north, self.y1) if math.isfinite(self.y1) and self.y1 - north < 1e-6 * self.step else north

    def keys(self) -> list:
        row, col = np.divmod(self.kept, self.nx)
        return _quadtree_keys(col, self.ny - 1 - row, _levels_to_one(self.nx, self.ny))

    def ids(self) -> np.ndarray:
        return self.kept.copy()

    def geometry(self) -> np.ndarray:
        row, col = np.divmod(self.kept, self.nx)
        top = self.y0 + (self.ny - row) * self.step
        left = self.x0 + col * self.step
        right = np.where(col == self.nx - 1, self._east, left + self.step)
        top = np.where(row == 0, self._north, top)
        return shapely.box(left, self.y0 + (self.ny - row - 1) * self.step, right, top)

    def transform(self):
        """The raster transform (north up) of the full grid."""
        from affine import Affine

        return Affine(self.step, 0.0, self.x0, 0.0, -self.step, self.y0 + self.ny * self.step)

    def cell_area_km2(self) -> np.ndarray:
        return np.full(self.n, self.step_m**2 / 1e6)

    def describe(self) -> dict:
        return {
            "cells": f"square grid of {self.step_m:g} m",
            "cell_size_m": self.step_m,
            "cell_size_crs": self.step,
            "grid_shape": [self.ny, self.nx],
            "grid_origin": [self.x0, self.y0],
            "n_cells": self.n,
        }


# ----------------------------------------------------------------------------- H3
def _h3():
    try:
        import h3
    except ImportError:
        raise GeoprivError("H3 cells need the h3 package, which is not installed.", fix=_H3_FIX) from None
    return h3


_H3_RES_SHIFT = 52
_H3_DIGITS = 15


def h3_parents(cells: np.ndarray, res: int, parent_res: int) -> np.ndarray:
    """H3 parents of uint64 ``cells`` of resolution ``res`` at ``parent_res`` (bit arithmetic, vectorised)."""
    out = cells.astype(np.uint64).copy()
    out &= ~np.uint64(0xF << _H3_RES_SHIFT)
    out |= np.uint64(parent_res << _H3_RES_SHIFT)
    for r in range(parent_res + 1, res + 1):
        out |= np.uint64(0x7 << ((_H3_DIGITS - r) * 3))
    return out


@dataclasses.dataclass(frozen=True)
class H3Cells:
    """The H3 cells of one resolution that meet the public area (any part of a cell)."""

    crs: object
    res: int
    cells: np.ndarray  # sorted uint64
    area_source: str

    @classmethod
    def build(cls, crs, res: int, rect, region_geom, area_source: str) -> "H3Cells":
        h3 = _h3()
        crs = as_crs(crs)
        area = region_geom if region_geom is not None else shapely.box(*rect)
        geo = as_crs("EPSG:4326")
        t = Transformer.from_crs(crs, geo, always_xy=True)
        dens = shapely.segmentize(area, max(area.length / 400, 1e-9)) if area.length > 0 else area
        ll = shapely.transform(dens, lambda c: np.column_stack(t.transform(c[:, 0], c[:, 1])))
        lat = float(shapely.get_coordinates(ll)[:, 1].mean())
        km2 = float(shapely.area(ll)) * 111.32**2 * max(math.cos(math.radians(lat)), 1e-6)
        approx = km2 / h3.average_hexagon_area(res, unit="km^2")
        _too_many(approx, f"H3 resolution {res} over the public area")
        shape = h3.geo_to_h3shape(shapely.geometry.mapping(ll))
        found = h3.h3shape_to_cells_experimental(shape, res, contain="overlap")
        cells = np.unique(np.array([h3.str_to_int(c) for c in found], dtype=np.uint64))
        if not len(cells):
            raise ParameterError("No H3 cell meets the public area.")
        out = cls(crs, int(res), cells, area_source)
        # public check: sample points of the area (and its boundary) must all fall in the cell set
        gx, gy = np.meshgrid(np.linspace(rect[0], rect[2], 41), np.linspace(rect[1], rect[3], 41))
        sample = np.column_stack([gx.ravel(), gy.ravel()])
        if region_geom is not None:
            sample = sample[shapely.contains_xy(region_geom, sample[:, 0], sample[:, 1])]
        if len(sample) and (out.locate(sample) < 0).any():
            raise ParameterError(
                f"H3 cells of resolution {res} do not cover the public area (an area around a pole or across the "
                "antimeridian, or too large).",
                fix=Fix(
                    "split_area",
                    python="Split the area into smaller ones and release them separately, or use a square "
                    "grid in a projected CRS.",
                    cli="Split the area into smaller ones and release them separately, or use a square grid.",
                    qgis="Split the study area into smaller ones, or use a square grid.",
                ),
            )
        return out

    @property
    def n(self) -> int:
        return len(self.cells)

    def locate(self, xy: np.ndarray) -> np.ndarray:
        h3 = _h3()
        lon, lat = Transformer.from_crs(self.crs, as_crs("EPSG:4326"), always_xy=True).transform(xy[:, 0], xy[:, 1])
        to_cell = h3.api.basic_int.latlng_to_cell
        res = self.res
        lat, lon = np.asarray(lat, dtype=float), np.asarray(lon, dtype=float)
        ok = np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90) & (np.abs(lon) <= 180)
        lat, lon = np.where(ok, lat, 0.0), np.where(ok, lon, 0.0)
        idx = np.fromiter(
            (to_cell(a, b, res) for a, b in zip(lat.tolist(), lon.tolist())), dtype=np.uint64, count=len(xy)
        )
        idx[~ok] = 0  # no H3 cell is 0: such rows are outside every cell
        pos = np.searchsorted(self.cells, idx)
        pos = np.minimum(pos, len(self.cells) - 1)
        return np.where(self.cells[pos] == idx, pos, -1).astype(np.int64)

    def keys(self) -> list:
        return [self.cells] + [h3_parents(self.cells, self.res, r) for r in range(self.res - 1, -1, -1)]

    def ids(self) -> np.ndarray:
        return self.cells.copy()

    def geometry(self) -> np.ndarray:
        h3 = _h3()
        t = Transformer.from_crs(as_crs("EPSG:4326"), self.crs, always_xy=True)
        rings = [np.array(h3.api.basic_int.cell_to_boundary(c))[:, ::-1] for c in self.cells.tolist()]
        sizes = np.array([len(r) for r in rings])  # 6, or 5 for pentagons (and more where edges are distorted)
        ll = np.concatenate(rings)
        x, y = t.transform(ll[:, 0], ll[:, 1])  # one transform for every vertex
        xy = np.column_stack([x, y])
        rings_ix = np.repeat(np.arange(len(rings)), sizes)
        return shapely.polygons(shapely.linearrings(xy, indices=rings_ix))

    def cell_area_km2(self) -> np.ndarray:
        h3 = _h3()
        return np.array([h3.api.basic_int.cell_area(c, unit="km^2") for c in self.cells.tolist()])

    def describe(self) -> dict:
        return {"cells": f"H3 resolution {self.res}", "h3_resolution": self.res, "n_cells": self.n}


# ----------------------------------------------------------------------------- polygons
@dataclasses.dataclass(frozen=True)
class PolygonCells:
    """Public polygons (districts, a tessellation), in the data's CRS; a row falls in the first that holds it."""

    crs: object
    frame: gpd.GeoDataFrame
    geoms: np.ndarray

    @classmethod
    def build(cls, crs, polygons) -> "PolygonCells":
        crs = as_crs(crs)
        if polygons.crs is None:
            from .exceptions import MissingCRSError

            raise MissingCRSError("The cells")
        frame = polygons.to_frame() if isinstance(polygons, gpd.GeoSeries) else polygons
        frame = frame.to_crs(crs) if not as_crs(frame.crs).equals(crs) else frame
        geoms = np.asarray(frame.geometry.values, dtype=object)
        if not len(geoms):
            raise ParameterError("The cells layer has no polygons.")
        kinds = shapely.get_type_id(geoms)
        bad = ~np.isin(kinds, (3, 6)) | shapely.is_empty(geoms)
        if bad.any():
            from .exceptions import GeometryError

            raise GeometryError(
                "are not polygons (cells must be polygons with an area)",
                frame.index[bad],
                "Give public polygons (districts, a tessellation) as cells.",
            )
        _too_many(len(geoms), "The cells layer")
        shapely.prepare(geoms)
        return cls(crs, frame, geoms)

    @property
    def n(self) -> int:
        return len(self.geoms)

    def locate(self, xy: np.ndarray) -> np.ndarray:
        tree = shapely.STRtree(self.geoms)
        pts, polys = tree.query(shapely.points(xy), predicate="intersects")
        out = np.full(len(xy), -1, dtype=np.int64)
        if len(pts):
            first = pd.Series(polys).groupby(pts).min()  # the first polygon that holds the point
            out[first.index.to_numpy()] = first.to_numpy()
        return out

    def keys(self) -> list:
        rep = shapely.get_coordinates(shapely.point_on_surface(self.geoms))
        xmin, ymin = rep.min(axis=0)
        size = max(float(np.ptp(rep[:, 0])), float(np.ptp(rep[:, 1])), 1e-9)
        depth = _levels_to_one(int(math.ceil(math.sqrt(self.n))), 1)
        side = 1 << depth
        ix = np.minimum((rep[:, 0] - xmin) / size * side, side - 1).astype(np.int64)
        iy = np.minimum((rep[:, 1] - ymin) / size * side, side - 1).astype(np.int64)
        quad = _quadtree_keys(ix, iy, depth)
        # level 0 are the polygons themselves (two may share a quadtree square)
        return [np.arange(self.n, dtype=np.int64)] + quad[:]

    def ids(self) -> np.ndarray:
        return np.arange(self.n, dtype=np.int64)

    def geometry(self) -> np.ndarray:
        return self.geoms

    def cell_area_km2(self) -> np.ndarray:
        unit = self.crs.axis_info[0].unit_conversion_factor if self.crs.is_projected else None
        if unit is None:
            return (
                gpd.GeoSeries(self.geoms, crs=self.crs)
                .to_crs(self.crs.geodetic_crs)
                .to_crs("+proj=cea +datum=WGS84")
                .area.to_numpy()
                / 1e6
            )
        return shapely.area(self.geoms) * unit**2 / 1e6

    def check_not_from_data(self, xy: np.ndarray) -> None:
        """Refuse cells built on the data: polygons with data points on their corners or at their
        centres (a convex hull, a Delaunay mesh, buffers of the points), or whose extent the points
        touch on two or more edges."""
        from .frame import check_area_not_from_data, touched_edges

        check_polygons_not_from_data(self.geoms, xy, "The cells")
        check_area_not_from_data(touched_edges(xy, tuple(shapely.total_bounds(self.geoms))), "region")

    def describe(self) -> dict:
        return {"cells": f"{self.n} public polygons", "n_cells": self.n}


@dataclasses.dataclass(frozen=True)
class FlowCells:
    """Origin-destination pairs of public regions: leaf ``o * n + d``; the hierarchy is pair, origin, all."""

    regions: PolygonCells
    names: np.ndarray

    @property
    def n(self) -> int:
        return self.regions.n**2

    @property
    def crs(self):
        return self.regions.crs

    def keys(self) -> list:
        m = self.regions.n
        pair = np.arange(m * m, dtype=np.int64)
        return [pair, pair // m, np.zeros(m * m, dtype=np.int64)]

    def describe(self) -> dict:
        return {
            "cells": f"origin-destination pairs of {self.regions.n} public regions",
            "regions": self.regions.n,
            "n_cells": self.n,
        }


def check_polygons_not_from_data(geoms, xy: np.ndarray, what: str) -> None:
    """Refuse polygons with 3 or more data points on their corners or at their centres (to 1e-9 of their extent)."""
    import shapely

    if not len(xy):
        return
    verts = shapely.get_coordinates(geoms)
    centres = np.vstack(
        [shapely.get_coordinates(shapely.centroid(geoms)), shapely.get_coordinates(shapely.point_on_surface(geoms))]
    )
    b = shapely.total_bounds(geoms)
    tol = 1e-9 * max(float(b[2] - b[0]), float(b[3] - b[1]), 1.0)

    def hits(ref):
        if not len(ref):
            return 0
        tree = shapely.STRtree(shapely.points(ref))
        found, _ = tree.query(shapely.points(xy), predicate="dwithin", distance=tol)
        return len(np.unique(found))

    n = max(hits(verts), hits(centres))
    if n >= 3:
        raise GeoprivError(
            f"{what} looks computed from the data: {n} points lie exactly on its corners or at its centres, and it is "
            "published with the release. Use public polygons (districts, a tessellation laid out without looking at "
            "the points)."
        )


def make_cells(kind: str, value, crs, rect, region_geom, area_source: str):
    """The cells of a release from its parsed ``cells=`` (see :func:`parse_cells`)."""
    if kind == "grid":
        return GridCells.build(crs, value, rect, region_geom, area_source)
    if kind == "h3":
        return H3Cells.build(crs, value, rect, region_geom, area_source)
    return PolygonCells.build(crs, value)
