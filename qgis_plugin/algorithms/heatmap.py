"""Private heatmap: ``geopriv.heatmap`` on a point layer -> a GeoTIFF written by the library (values, error)."""

from __future__ import annotations

from qgis.core import (
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingParameterEnum,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterNumber,
    QgsProcessingParameterRasterDestination,
)

from .base import PERSON_LABEL, TYPE_POINTS
from .counts import COUNT_KEYWORDS, MAX_PER_USER_LABEL, CountRelease


class Heatmap(CountRelease):
    NAME = "heatmap"
    DISPLAY_NAME = "Private heatmap"
    GEOPRIV_API = ("heatmap", "make_rng")
    GEOPRIV_KEYWORDS = {"heatmap": COUNT_KEYWORDS + ("resolution", "bounds", "region", "values", "path", "overwrite")}
    RELEASE_FUNCTION = "heatmap"
    HELP = f"""<p>Releases a <b>private heatmap</b>: counts of points (or densities per km²) on a square grid over
the <b>public study area</b>, as a north-up <b>GeoTIFF</b> ready for styling (band 1: the values, band 2: their
expected error; cells outside the region are no-data; the provenance is in the file's metadata). It is the same
release as <i>Private counts per cell</i> with a square grid: <b>user-level differential privacy</b> (one person
with all of their points added or removed changes the probability of any heatmap by at most a factor
exp(&epsilon;)), every cell released, empty or not, exact discrete Laplace noise on a consistent hierarchy of
cells. <b>Epsilon</b> is dimensionless, for the whole map (the dialog proposes 1).</p>
<p><b>Resolution</b>: the cell size in ground metres (a projected layer; the library has no default). The
<b>public study area</b> (an extent in any CRS, chosen without looking at the points; the grid is anchored on its
lower-left corner) or a <b>region</b> (public polygons: only the cells meeting it are released) is needed. Every
point must lie inside it: features outside are refused, named by feature id, and nothing is written.
<b>Values</b>: counts (integers, no-data -1), or densities per km² (the same release divided by the cell area).</p>
<p>The <b>{PERSON_LABEL}</b> says whose points are whose: each person keeps at most <b>{MAX_PER_USER_LABEL}</b>
points, chosen at random, and the noise grows in proportion. Empty: every feature is its own person. With a
<b>budget store</b> (advanced) each person is charged epsilon once, before any noise is drawn. Advanced: the
<b>levels of the hierarchy</b> and <b>non-negative counts</b>. The provenance (log and <b>PROVENANCE</b> output)
records epsilon, the grid and the expected errors. Leave the <b>random seed</b> empty for a real release.</p>"""

    RESOLUTION = "RESOLUTION"
    VALUES = "VALUES"
    VALUE_KINDS = ["count", "density"]

    def initAlgorithm(self, config=None):  # noqa: N802
        self.addParameter(QgsProcessingParameterFeatureSource(self.INPUT, "Point layer", [TYPE_POINTS]))
        self.add_epsilon_parameter()
        resolution = QgsProcessingParameterNumber(
            self.RESOLUTION,
            "Resolution: cell size of the square grid (metres)",
            QgsProcessingParameterNumber.Double,
            defaultValue=None,
            minValue=0.0,
        )
        resolution.setHelp(
            "The side of the square cells in ground metres (the layer must be in a projected CRS). "
            "The library has no default: it depends on the area and the number of points; smaller "
            "cells hold fewer points each, so the noise weighs more."
        )
        self.addParameter(resolution)
        self.addParameter(
            QgsProcessingParameterEnum(
                self.VALUES,
                "Values",
                ["count: points per cell", "density: points per km²"],
                defaultValue=self.VALUE_KINDS.index(self.default("values")),
            )
        )
        self.add_person_parameters()
        self.add_area_parameters("Needed unless a region is given.")
        self.add_hierarchy_parameters()
        self.add_seed_parameter()
        self.addParameter(
            QgsProcessingParameterRasterDestination(
                self.OUTPUT, "Private heatmap (GeoTIFF: band 1 values, band 2 expected error)"
            )
        )
        self.addOutput(QgsProcessingOutputNumber(self.N_CELLS, "Number of cells released"))
        self.add_provenance_output()

    def provenance(self, result) -> dict:
        """A Heatmap keeps its provenance record in ``record`` (the GeoTIFF's metadata holds it too)."""
        record = getattr(result, "record", None)
        if not isinstance(record, dict):
            raise QgsProcessingException(
                f"{self.displayName()}: geopriv returned no provenance record. Install a matching geopriv version."
            )
        return record

    def compute(self, parameters, context, feedback):
        import geopriv

        out = self.parameterAsOutputLayer(parameters, self.OUTPUT, context)
        budget = self.budget_options(parameters, context, feedback, geopriv.heatmap)  # before any work
        user = self.user_field(parameters, context)
        data = self.read_layer(parameters, self.INPUT, context, feedback, columns=[user] if user else [])
        options = self.count_options(parameters, context, feedback)
        options.update(self.area_options(parameters, context, feedback, data))
        options.update(budget)
        rng = self.random_source(parameters, context, feedback)
        self.check_cancelled(feedback)  # the last chance: the library writes the GeoTIFF inside its call
        # The library checks the path before the release and writes the file atomically after it; an existing file
        # is replaced (QGIS asked before the run, as for its own raster outputs; an input is refused before any work).
        heatmap = geopriv.heatmap(
            data.gdf,
            resolution=self.parameterAsDouble(parameters, self.RESOLUTION, context),
            values=self.VALUE_KINDS[self.parameterAsEnum(parameters, self.VALUES, context)],
            rng=rng,
            path=out,
            overwrite=True,
            **options,
        )
        record = self.provenance(heatmap)
        if budget:
            self.report_budget(feedback, record)
        self.report_release(feedback, record)
        feedback.pushInfo(f"Band 1: {heatmap.unit}; band 2: its expected error; no-data: {heatmap.nodata}.")
        return {self.OUTPUT: out, self.N_CELLS: record.get("n_cells"), self.PROVENANCE: self.provenance_json(record)}
