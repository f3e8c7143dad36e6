"""Private counts per cell: ``geopriv.aggregate`` on a point layer -> a polygon layer of public cells with counts."""

from __future__ import annotations

from qgis.core import (
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterNumber,
    QgsProcessingParameterString,
    QgsWkbTypes,
)

from .base import PERSON_LABEL, TYPE_POINTS, TYPE_POLYGONS
from .counts import COUNT_KEYWORDS, MAX_PER_USER_LABEL, CountRelease
from .layers import check_new_fields

#: the label of CELLS (the library's QGIS advice names it: "Set 'Cells' to a grid step in metres, ...")
CELLS_LABEL = "Cells: a square grid step (metres, e.g. 250) or an H3 resolution (h3:9)"


class Aggregate(CountRelease):
    NAME = "aggregate"
    DISPLAY_NAME = "Private counts per cell"
    GEOPRIV_API = ("aggregate", "make_rng")
    GEOPRIV_KEYWORDS = {"aggregate": COUNT_KEYWORDS + ("cells", "bounds", "region", "suppress")}
    RELEASE_FUNCTION = "aggregate"
    HELP = f"""<p>Releases <b>private counts of points per public cell</b> with <b>user-level differential
privacy</b>: adding or removing one person with all of their points changes the probability of any released map by
at most a factor exp(&epsilon;). <b>Every cell of the public area is released, empty or not</b>; the counts are
integers with exact discrete Laplace noise on a public hierarchy of cells made consistent (Hay et al. 2010: a
cell's parent equals the sum of its children), non-negative by default. <b>Epsilon</b> is dimensionless, for the
whole map (the library has no default; the dialog proposes 1).</p>
<p><b>Cells</b>: a square grid step in ground metres (<code>250</code>, a projected layer), an H3 resolution
(<code>h3:9</code>, any CRS; needs the <code>h3</code> package in QGIS's Python), or a <b>layer of public
polygons</b> (districts, a tessellation laid out without looking at the points; their attributes are kept). A grid
or H3 cells need the <b>public study area</b> (an extent in any CRS, chosen without looking at the points; the grid
is anchored on its lower-left corner) or a <b>region</b> (public polygons: only the cells meeting it are released).
Every point must lie in a cell: features outside are refused, named by feature id, and nothing is written.</p>
<p>The <b>{PERSON_LABEL}</b> says whose points are whose: each person keeps at most <b>{MAX_PER_USER_LABEL}</b>
points, chosen at random (never by location), and the noise grows in proportion. Empty: every feature is its own
person. With a <b>budget store</b> (advanced) each person is charged epsilon once, before any noise is drawn.</p>
<p>Output: one polygon per cell in the input's CRS with <b>cell</b> (grid: row &times; columns + column from the
north-west; H3: the 64-bit index; polygons: their position, after the layer's own fields), <b>count</b> and
<b>expected_error</b> (the root mean squared error of the count, public: from the parameters alone). Advanced: the
<b>levels of the hierarchy</b> (how epsilon is split), <b>non-negative counts</b>, and <b>suppress counts below</b>
(released as 0). The provenance (log and <b>PROVENANCE</b> output) records epsilon, the cells, the split and the
expected errors. Leave the <b>random seed</b> empty for a real release.</p>"""

    CELLS = "CELLS"
    CELLS_LAYER = "CELLS_LAYER"
    SUPPRESS = "SUPPRESS"
    NEW_COLUMNS = ("cell", "count", "expected_error")

    def initAlgorithm(self, config=None):  # noqa: N802
        self.addParameter(QgsProcessingParameterFeatureSource(self.INPUT, "Point layer", [TYPE_POINTS]))
        self.add_epsilon_parameter()
        cells = QgsProcessingParameterString(self.CELLS, CELLS_LABEL, defaultValue=None, optional=True)
        cells.setHelp(
            "A square grid step in ground metres (250 or 250m; the layer must be in a projected CRS), or "
            "h3:<resolution> for H3 hexagons (0-15; h3:9 cells are about 0.1 km²). The library has no "
            "default: the cell size depends on the area and the number of points. Leave empty when the "
            "cells are a layer of public polygons."
        )
        self.addParameter(cells)
        layer = QgsProcessingParameterFeatureSource(
            self.CELLS_LAYER,
            "Cells as a layer of public polygons (districts; instead of a grid step or H3)",
            [TYPE_POLYGONS],
            optional=True,
        )
        layer.setHelp(
            "Public polygons (districts, a tessellation laid out without looking at the points), in any "
            "CRS: they are the cells and the public area (leave the study area and region empty). A point "
            "falls in the first polygon that holds it. The output keeps their fields."
        )
        self.addParameter(layer)
        self.add_person_parameters()
        self.add_area_parameters("Needed for a grid or H3 cells unless a region is given; not with a layer of cells.")
        self.add_hierarchy_parameters()
        suppress = QgsProcessingParameterNumber(
            self.SUPPRESS,
            "Suppress counts below (released as 0; empty: none)",
            QgsProcessingParameterNumber.Integer,
            defaultValue=self.default("suppress"),
            optional=True,
            minValue=1,
        )
        suppress.setHelp(
            "Post-processing: counts below this number are released as 0 (the expected error no longer "
            "applies to those cells). No extra privacy cost."
        )
        suppress.setFlags(suppress.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        self.addParameter(suppress)
        self.add_seed_parameter()
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Private counts per cell", TYPE_POLYGONS))
        self.addOutput(QgsProcessingOutputNumber(self.N_CELLS, "Number of cells released"))
        self.add_provenance_output()

    def cells_option(self, parameters, context, feedback):
        """cells= (the text of CELLS, parsed by the library) and the cells layer read (None for a grid or H3)."""
        has_text, has_layer = self.is_set(parameters, self.CELLS), self.is_set(parameters, self.CELLS_LAYER)
        if has_text == has_layer:
            raise QgsProcessingException(
                f"{self.displayName()}: set either '{CELLS_LABEL.split(':')[0]}' (a grid step in metres or h3:<res>) "
                f"or '{self.parameterDefinition(self.CELLS_LAYER).description()}', "
                + ("not both." if has_text else "one of them.")
            )
        if has_text:
            return self.parameterAsString(parameters, self.CELLS, context).strip(), None
        cells = self.read_layer(parameters, self.CELLS_LAYER, context, feedback, progress=(10, 12))
        check_new_fields(cells.fields, self.NEW_COLUMNS)  # before the release: a clash would waste it
        return cells.gdf, cells

    def compute(self, parameters, context, feedback):
        import geopriv

        budget = self.budget_options(parameters, context, feedback, geopriv.aggregate)  # before any work
        cells, cells_layer = self.cells_option(parameters, context, feedback)
        user = self.user_field(parameters, context)
        data = self.read_layer(parameters, self.INPUT, context, feedback, columns=[user] if user else [])
        options = self.count_options(parameters, context, feedback)
        # passed as set: the library refuses a grid without a public area, and an area with a layer of cells
        options.update(self.area_options(parameters, context, feedback, data))
        if self.is_set(parameters, self.SUPPRESS):
            options["suppress"] = self.parameterAsInt(parameters, self.SUPPRESS, context)
        options.update(budget)
        rng = self.random_source(parameters, context, feedback)

        counts, record = self.release(geopriv.aggregate, data.gdf, feedback, cells=cells, rng=rng, **options)

        base = {}  # a grid or H3: the counts only
        if cells_layer is not None:
            # the cells layer's own attributes, unchanged, then the counts (row k: the k-th polygon read)
            ids = cells_layer.gdf.index.to_numpy()
            base = dict(
                base_fields=cells_layer.fields,
                base_attributes=[cells_layer.attributes[int(ids[k])] for k in counts["cell"]],
            )
        dest = self.write_frame(
            parameters,
            self.OUTPUT,
            context,
            counts,
            self.NEW_COLUMNS,
            data.crs,
            self.wkb_type(counts.geometry.values, QgsWkbTypes.Polygon, QgsWkbTypes.MultiPolygon),
            feedback=feedback,
            **base,
        )
        self.report_release(feedback, record)
        return {
            self.OUTPUT: dest,
            self.N_CELLS: record.get("n_cells", len(counts)),
            self.PROVENANCE: self.provenance_json(record),
        }
