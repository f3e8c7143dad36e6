"""Synthesize points (private measure): ``geopriv.synthesize`` on a point layer -> a new synthetic point layer."""

from __future__ import annotations

import numpy as np
from qgis.core import (
    QgsFields,
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingParameterFeatureSink,
    QgsWkbTypes,
)

from .base import BOUNDS_LABEL, GRID_LABEL, TYPE_POINTS, TYPE_POLYGONS, GeoprivAlgorithm, library_default
from .layers import feature_for
from .parameters import Choice, Extent, Number, Source, add_parameters

#: the plugin's default epsilon: the library has none (epsilon is required there), so the dialog proposes this one
DEFAULT_EPSILON = 1.0
#: the label of a dimensionless epsilon (synthesize and the count releases: not per metre, unlike the perturbations)
TOTAL_EPSILON_LABEL = "Epsilon (dimensionless (total): differential privacy of the whole release, not per metre)"


class Synthesize(GeoprivAlgorithm):
    NAME = "synthesize"
    DISPLAY_NAME = "Synthesize points (differential privacy, private measure)"
    GROUP = "Release points"
    GROUP_ID = "points"
    GEOPRIV_API = ("synthesize", "make_rng")
    GEOPRIV_KEYWORDS = {
        "synthesize": (
            "epsilon",
            "bounds",
            "region",
            "n",
            "method",
            "depth",
            "placement",
            "grid",
            "rng",
            "budget_store",
            "person",
        )
    }
    RELEASE_FUNCTION = "synthesize"
    HELP = f"""<p>Releases a <b>synthetic point set</b> instead of the points themselves: a private measure of
the whole layer (Boedihardjo, Strohmer and Vershynin, PTRF 2024; He, Vershynin and Zhu, COLT 2023) whose
distribution is close to the true points' in the Wasserstein-1 distance, so densities, clusters, shares within a
distance and mean distances to facilities are preserved. The output is a <b>new layer</b> of synthetic points in
the input's CRS: the synthetic points belong to nobody, so <b>attributes are not carried over</b> and the features
are not matched to the input's.</p>
<p><b>Privacy model</b>: &epsilon;-differential privacy with <b>&epsilon; dimensionless</b> (not per metre, unlike
the perturbation algorithms): if any one person's location is replaced by <i>any</i> other location in the
<b>public area</b>, the probability of any synthetic set changes by at most a factor exp(&epsilon;). The number of
people is public. <b>Epsilon</b> is the privacy loss of the whole release; the library has no default for it, and
this dialog proposes {DEFAULT_EPSILON:g} (smaller: more private, coarser synthetic points).</p>
<p>The <b>public area</b> (an extent, in any CRS: it is converted to the layer's CRS) is where a person could be:
the space-filling curve is laid over it and every input point must lie inside it (features outside are refused,
named by feature id). It is published with the release, so choose it <b>without looking at individual points</b>
(a city's or study region's extent, round numbers); never use the input layer's extent (the plugin refuses it).
The synthetic points are spread over the whole public area, so it is <b>needed</b>: empty, the region's bounding
box; with neither the algorithm stops (the CRS's area of use, the whole world for Web Mercator, is no study area).
A <b>region</b> (polygons, optional) keeps the synthetic points inside it (points outside go to the nearest lattice
node inside); its bounding box is the public area when the extent is empty.</p>
<p><b>Number of synthetic points</b>: empty, as many as input points; any other number is drawn from the same
private measure at no extra privacy cost. <b>Method</b>: <i>srw</i>, the super-regular random walk along a Hilbert
curve (default), or <i>pmm</i>, the private measure mechanism (a noisy partition tree with a per-level budget
split). Advanced: the <b>depth</b> of the partition tree (2<sup>depth</sup> cells along the curve; empty: chosen
from the number of points and epsilon), the <b>placement</b> of each synthetic point in its cell (uniform, or at
its centre), and the <b>grid step</b> in ground metres of the public lattice the points are snapped to (empty: 1 m,
finer when cells are smaller than 20 m).</p>
<p>The provenance (log and <b>PROVENANCE</b> output) records epsilon, the method, the tree depth and per-level noise
scales, the public area and the lattice. Leave the <b>random seed</b> empty for a real release.</p>"""

    INPUT = "INPUT"
    REGION = "REGION"
    N = "N"
    METHOD = "METHOD"
    DEPTH = "DEPTH"
    PLACEMENT = "PLACEMENT"
    OUTPUT = "OUTPUT"
    N_OUT = "N_SYNTHETIC"
    DEPTH_OUT = "TREE_DEPTH"

    METHODS = ["srw", "pmm"]
    PLACEMENTS = ["uniform", "centre"]

    @staticmethod
    def default(parameter):
        """The library's default of a synthesize keyword (the plugin has none of its own)."""
        return library_default("synthesize", parameter)

    def initAlgorithm(self, config=None):  # noqa: N802
        add_parameters(self, self.parameter_table())
        self.add_seed_parameter()
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Synthetic points", TYPE_POINTS))
        self.addOutput(QgsProcessingOutputNumber(self.N_OUT, "Number of synthetic points"))
        self.addOutput(QgsProcessingOutputNumber(self.DEPTH_OUT, "Depth of the partition tree"))
        self.add_provenance_output()

    def parameter_table(self) -> tuple:
        """The parameters before the seed, in the dialog's order: the layer, epsilon, the public area, the measure."""
        from geopriv.frame import DEFAULT_GRID_M
        from geopriv.mechanisms.private_measure import MAX_DEPTH

        return (
            Source(self.INPUT, "Point layer (one point per person)", (TYPE_POINTS,)),
            Number(
                self.EPSILON,
                TOTAL_EPSILON_LABEL,
                DEFAULT_EPSILON,
                minimum=0.0,
                help="One person's location replaced anywhere in the public area changes the probability of any "
                f"synthetic set by at most exp(epsilon). The library has no default; {DEFAULT_EPSILON:g} is the "
                "plugin's proposal. Smaller: more private, coarser synthetic points.",
            ),
            Extent(
                self.BOUNDS,
                BOUNDS_LABEL,
                optional=True,
                help="The public area where a person could be, in any CRS (it is converted to the layer's CRS; "
                "without a CRS the numbers are in the layer's CRS). The space-filling curve is laid over it, and "
                "every input point must lie inside it: features outside are refused, named by feature id. It is "
                "published with the release: choose it without looking at individual points (a city or "
                "study-region boundary, round numbers). Never use 'Calculate from layer' on the input layer itself: "
                "its extent is the bounding box of the true points (the plugin refuses it). Empty: the bounding box "
                "of the region; with neither the algorithm stops (the synthetic points are spread over the whole "
                "public area, and the CRS's area of use is no study area).",
            ),
            Source(
                self.REGION,
                "Region the synthetic points must stay in (polygons; empty: the public area)",
                (TYPE_POLYGONS,),
                optional=True,
                help="A public polygon: synthetic points outside it go to the nearest lattice node inside. Its "
                "bounding box is the public area when the extent is empty.",
            ),
            Number(
                self.N,
                "Number of synthetic points (empty: as many as input points)",
                minimum=1,
                integer=True,
                optional=True,
                help="Drawn from the private measure: post-processing, no extra privacy loss.",
            ),
            Choice(
                self.METHOD,
                "Method",
                (
                    "srw: super-regular random walk along a Hilbert curve",
                    "pmm: private measure mechanism (noisy partition tree)",
                ),
                self.METHODS,
                self.default("method"),
            ),
            Number(
                self.DEPTH,
                "Depth of the partition tree (levels; empty: automatic from the number of points and epsilon)",
                minimum=1,
                maximum=MAX_DEPTH[2],
                integer=True,
                optional=True,
                advanced=True,
                help='2^depth cells along the curve. Empty: the library\'s depth="auto", a public function of the '
                "number of points and epsilon.",
            ),
            Choice(
                self.PLACEMENT,
                "Placement of each synthetic point in its cell",
                ("Uniform inside the cell", "At the cell's centre"),
                self.PLACEMENTS,
                self.default("placement"),
                advanced=True,
            ),
            Number(
                self.GRID,
                GRID_LABEL,
                minimum=0.0,
                optional=True,
                advanced=True,
                help="Synthetic points are snapped to a public lattice of this step in ground metres, anchored at the "
                "CRS's origin. Empty: the library's automatic step (grid=\"auto\"): "
                f"{DEFAULT_GRID_M:g} m, or finer when the cells are smaller than 20 m.",
            ),
        )

    def options(self, parameters, context, feedback, data) -> dict:
        """synthesize's keyword arguments from the parameters (only the optional ones that are set)."""
        options = {
            "epsilon": self.parameterAsDouble(parameters, self.EPSILON, context),
            "method": self.METHODS[self.parameterAsEnum(parameters, self.METHOD, context)],
            "placement": self.PLACEMENTS[self.parameterAsEnum(parameters, self.PLACEMENT, context)],
        }
        bounds = self.public_study_area(parameters, context, data)  # converted to the layer's CRS; never its extent
        if bounds is not None:
            options["bounds"] = bounds
        for name, keyword in ((self.N, "n"), (self.DEPTH, "depth")):
            if self.is_set(parameters, name):
                options[keyword] = self.parameterAsInt(parameters, name, context)
        grid = self.optional_number(parameters, self.GRID, context)
        if grid is not None:
            options["grid"] = grid
        if self.is_set(parameters, self.REGION):
            options["region"] = self.read_layer(parameters, self.REGION, context, feedback, progress=(10, 10)).gdf
        return options  # without either, the library refuses the release (with the fix in this dialog's terms)

    def compute(self, parameters, context, feedback):
        import geopriv

        budget = self.budget_options(parameters, context, feedback, geopriv.synthesize)  # before any work
        # Geometry only (and the persons a budget store charges): attributes are not released.
        data = self.read_layer(parameters, self.INPUT, context, feedback)
        options = self.options(parameters, context, feedback, data)
        options.update(budget)
        rng = self.random_source(parameters, context, feedback)

        synthetic, record = self.release(geopriv.synthesize, data.gdf, feedback, rng=rng, **options)

        dest = self.write_synthetic(parameters, context, data, synthetic, feedback)
        self.report(
            feedback,
            record,
            (
                "mechanism",
                "method",
                "epsilon",
                "depth",
                "curve",
                "frame_area",
                "public_area",
                "grid_m",
                "placement",
                "region",
                "n_people",
                "n",
            ),
        )
        self.report(feedback, record, ("definition",))
        self.report(feedback, record, ("finite_precision",))
        return {
            self.OUTPUT: dest,
            self.N_OUT: record.get("n"),
            self.DEPTH_OUT: record.get("depth"),
            self.PROVENANCE: self.provenance_json(record),
        }

    def write_synthetic(self, parameters, context, data, result, feedback, progress=(90.0, 100.0)):
        """Write the synthetic points as a new point layer in the input's CRS, without fields (nothing is matched
        to an input feature)."""
        fields = QgsFields()
        sink, dest_id = self.parameterAsSink(parameters, self.OUTPUT, context, fields, QgsWkbTypes.Point, data.crs)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, self.OUTPUT))
        from qgis.core import QgsGeometry, QgsPointXY

        geoms = result.geometry.values
        xs, ys = (np.asarray(geoms.x), np.asarray(geoms.y)) if len(geoms) else (np.empty(0), np.empty(0))
        features = (
            feature_for(fields, [], QgsGeometry.fromPointXY(QgsPointXY(float(xs[i]), float(ys[i]))))
            for i in range(len(result))
        )
        self.add_features(sink, parameters, self.OUTPUT, features, len(result), feedback, progress)
        return dest_id
