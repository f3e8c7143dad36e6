"""Perturb points (geo-indistinguishability): ``geopriv.perturb`` on a point layer."""

from __future__ import annotations

from qgis.core import (
    QgsProcessingOutputNumber,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFeatureSource,
)

from .base import BUDGET_KEYWORDS, LN4, RELEASE_KEYWORDS, TYPE_POINTS, TYPE_POLYGONS, GeoprivAlgorithm


class PerturbPoints(GeoprivAlgorithm):
    NAME = "perturbpoints"
    DISPLAY_NAME = "Perturb points (geo-indistinguishability)"
    GROUP = "Release points"
    GROUP_ID = "points"
    GEOPRIV_API = ("perturb", "make_rng")
    GEOPRIV_KEYWORDS = {"perturb": RELEASE_KEYWORDS + BUDGET_KEYWORDS}
    RELEASE_FUNCTION = "perturb"
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
<p>Released points are snapped to a <b>public lattice</b> (advanced: <b>grid step</b>, in ground metres; empty:
the library's automatic step, 1 m, or 1/(20 &epsilon;) when the noise is finer), anchored at the CRS's origin (in
longitude/latitude, at the equator), with the finite-precision guarantee of section 4 of the paper (reported as the
effective epsilon). <b>Continuous output</b> releases unrounded coordinates instead: no finite-precision bound.</p>
<p>The <b>public study area</b> (advanced, optional, any CRS) is the area your data is about: every input must lie
inside it (features outside are refused, named by feature id), and it fixes the release's scale and lattice. It is
public: choose it without looking at individual points, never from the input layer's extent. Empty: the CRS's area
of use (longitude/latitude and Web Mercator: the whole globe). A <b>region</b> (polygons, optional) keeps the
released points inside it (outputs outside go to the nearest lattice node inside).</p>
<p>The output keeps every attribute. Columns that hold the true locations (coordinates, longitude/latitude, WKT,
...) would be released next to the perturbed points, so they stop the algorithm, which names them; drop them, or
list those that are not really locations in <b>keep these attribute columns</b>.</p>
<p>The output lists the features in the input's order. A layer in <b>spatial order</b> (FlatGeobuf files are
Hilbert-sorted, spatial joins and database exports list neighbours together) would publish the order of the true
points, so it stops the algorithm, as does a field numbered in that order: shuffle the features first ('Order by
expression' with the expression <code>randf()</code>) and drop ids numbered in the old order. Tick <b>the row order is
public</b> (advanced) only if the order is public anyway.</p>
<p>Leave the <b>random seed</b> empty for a real release.</p>"""

    INPUT = "INPUT"
    REGION = "REGION"
    OUTPUT = "OUTPUT"
    EPSILON_OUT = "EPSILON_PER_M"
    EFFECTIVE_OUT = "EFFECTIVE_EPSILON_PER_M"

    def initAlgorithm(self, config=None):  # noqa: N802
        from geopriv.frame import DEFAULT_GRID_M

        self.addParameter(QgsProcessingParameterFeatureSource(self.INPUT, "Point layer", [TYPE_POINTS]))
        self.add_privacy_parameters(level=LN4, radius=200.0)
        self.add_release_parameters(
            self.INPUT,
            "perturb",
            grid_help=f"Released points are snapped to a public lattice of this step in ground metres, anchored at the "
            "CRS's origin (in longitude/latitude, at the equator), with the finite-precision effective epsilon "
            "reported (Andr\u00e9s et al. 2013, Thm 4.1). Empty: the library's automatic step "
            f'(grid="auto"): {DEFAULT_GRID_M:g} m, or 1/(20 epsilon) metres when the noise is finer. A step '
            "coarser than the noise (2/epsilon) is refused.",
            bounds_help="Empty: the CRS's area of use (longitude/latitude and Web Mercator: the whole globe).",
        )
        region = QgsProcessingParameterFeatureSource(
            self.REGION,
            "Region the released points must stay in (polygons; empty: anywhere)",
            [TYPE_POLYGONS],
            optional=True,
        )
        region.setFlags(region.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        self.addParameter(region)
        self.add_seed_parameter()
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Perturbed points", TYPE_POINTS))
        self.addOutput(QgsProcessingOutputNumber(self.EPSILON_OUT, "Epsilon per metre"))
        self.addOutput(
            QgsProcessingOutputNumber(self.EFFECTIVE_OUT, "Effective epsilon per metre (with grid and region)")
        )
        self.add_provenance_output()

    def compute(self, parameters, context, feedback):
        import geopriv

        budget = self.budget_options(parameters, context, feedback, geopriv.perturb)  # before any work
        data = self.read_layer(parameters, self.INPUT, context, feedback, all_fields=True)
        options = self.privacy(parameters, context, feedback)
        options.update(budget)
        options.update(self.release_options(parameters, context, feedback, data, geopriv.perturb))
        if self.is_set(parameters, self.REGION):
            options["region"] = self.read_layer(parameters, self.REGION, context, feedback, progress=(10, 10)).gdf
        rng = self.random_source(parameters, context, feedback)

        released, record = self.release(geopriv.perturb, data.gdf, feedback, rng=rng, **options)

        dest = self.write_points(parameters, self.OUTPUT, context, data, released, feedback=feedback)
        self.report(
            feedback,
            record,
            (
                "mechanism",
                "epsilon_per_m",
                "effective_epsilon_per_m",
                "frame",
                "frame_area",
                "working_crs",
                "grid_m",
                "declared_bounds",
                "kept_columns",
                "n",
            ),
        )
        self.report(feedback, record, ("finite_precision",))
        return {
            self.OUTPUT: dest,
            self.EPSILON_OUT: record.get("epsilon_per_m"),
            self.EFFECTIVE_OUT: record.get("effective_epsilon_per_m"),
            self.PROVENANCE: self.provenance_json(record),
        }
