"""Perturb points (geo-indistinguishability): ``geopriv.perturb`` on a point layer."""
from __future__ import annotations

from qgis.core import (
    QgsProcessingOutputNumber,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterNumber,
)

from .base import LN4, TYPE_POINTS, TYPE_POLYGONS, GeoprivAlgorithm


class PerturbPoints(GeoprivAlgorithm):
    NAME = "perturbpoints"
    DISPLAY_NAME = "Perturb points (geo-indistinguishability)"
    GROUP = "Release points"
    GROUP_ID = "points"
    GEOPRIV_API = ("perturb", "make_rng")
    HELP = """<p>Releases every point of the layer with <b>geo-indistinguishability</b> (planar Laplace noise,
Andr&eacute;s et al., CCS 2013): two true locations <i>d</i> metres apart are at most
exp(&epsilon; &middot; <i>d</i>) times more or less likely to produce any released point.</p>
<p><b>Privacy level</b> within <b>radius (metres)</b> sets &epsilon; = level / radius per metre: the default,
ln 4 within 200 m, means an observer cannot tell locations 200 m apart by more than a factor 4.
Alternatively give <b>epsilon</b> directly (privacy loss per ground metre); it then replaces level and radius.
A smaller epsilon, a lower level or a larger radius means more noise: the typical displacement is 2/&epsilon;
metres.</p>
<p>Works in any CRS with a datum (projected, Web Mercator or longitude/latitude): distances are ground
metres, and the output keeps the input's CRS and attributes; only the geometry changes. MultiPoints with
one part are treated as points; Z values are dropped.</p>
<p><b>Grid (metres)</b> and <b>region</b> (optional) snap outputs to a grid and keep them inside the region's
polygons, with the finite-precision guarantee of section 4 of the paper (reported as the effective epsilon).</p>
<p>Leave the <b>random seed</b> empty for a real release.</p>"""

    INPUT = "INPUT"
    GRID = "GRID"
    REGION = "REGION"
    OUTPUT = "OUTPUT"
    EPSILON_OUT = "EPSILON_PER_M"
    EFFECTIVE_OUT = "EFFECTIVE_EPSILON_PER_M"

    def initAlgorithm(self, config=None):  # noqa: N802
        self.addParameter(QgsProcessingParameterFeatureSource(self.INPUT, "Point layer", [TYPE_POINTS]))
        self.add_privacy_parameters(level=LN4, radius=200.0)
        grid = QgsProcessingParameterNumber(
            self.GRID, "Grid step of the released points (metres; empty: no grid)",
            QgsProcessingParameterNumber.Double, defaultValue=None, optional=True, minValue=0.0)
        grid.setFlags(grid.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        self.addParameter(grid)
        region = QgsProcessingParameterFeatureSource(
            self.REGION, "Region the released points must stay in (polygons; empty: anywhere)", [TYPE_POLYGONS],
            optional=True)
        region.setFlags(region.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        self.addParameter(region)
        self.add_seed_parameter()
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Perturbed points", TYPE_POINTS))
        self.addOutput(QgsProcessingOutputNumber(self.EPSILON_OUT, "Epsilon per metre"))
        self.addOutput(QgsProcessingOutputNumber(self.EFFECTIVE_OUT, "Effective epsilon per metre (with grid and region)"))
        self.add_provenance_output()

    def compute(self, parameters, context, feedback):
        import geopriv

        data = self.read_layer(parameters, self.INPUT, context, feedback)
        options = self.privacy(parameters, context, feedback)
        options["grid"] = self.optional_number(parameters, self.GRID, context)
        if self.is_set(parameters, self.REGION):
            options["region"] = self.read_layer(parameters, self.REGION, context, feedback, progress=(10, 10)).gdf
        rng = self.random_source(parameters, context, feedback)

        released, records = self.in_chunks(
            data.gdf, lambda rows, progress: geopriv.perturb(rows, rng=rng, progress=progress, **options), feedback)

        dest = self.write_points(parameters, self.OUTPUT, context, data, released, feedback=feedback)
        record = dict(records[0], n=len(released), chunks=len(records))
        effective = max(r.get("effective_epsilon_per_m") or 0.0 for r in records) or None
        record["effective_epsilon_per_m"] = effective
        self.report(feedback, record, ("mechanism", "epsilon_per_m", "effective_epsilon_per_m", "working_crs", "n"))
        return {self.OUTPUT: dest, self.EPSILON_OUT: record.get("epsilon_per_m"),
                self.EFFECTIVE_OUT: effective, self.PROVENANCE: self.provenance_json(record)}
