"""Perturb points with location-dependent privacy: ``geopriv.perturb`` with an ``EikonalMechanism``.

The mechanism is either built from a population raster (the privacy map parameters of
:mod:`.build_privacy_map` plus the mechanism options) or loaded from a file saved earlier.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass

from qgis.core import (
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingOutputString,
    QgsProcessingParameterBoolean,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFile,
    QgsProcessingParameterFileDestination,
)

from geopriv.adapters import mechanism_options

from .base import BUDGET_KEYWORDS, RELEASE_KEYWORDS, TYPE_POINTS, GeoprivAlgorithm
from .build_privacy_map import MAP_HELP, PrivacyMapParameters
from .parameters import Choice, Number, Row, Source, add_parameters


@dataclass(frozen=True)
class MechanismFile(Row):
    """A saved mechanism file (.npz) to read."""

    def build(self):
        return QgsProcessingParameterFile(
            self.name, self.label, behavior=QgsProcessingParameterFile.File, extension="npz", optional=self.optional
        )


@dataclass(frozen=True)
class Flag(Row):
    """A check box, unticked by default."""

    def build(self):
        return QgsProcessingParameterBoolean(self.name, self.label, defaultValue=False)


def build_default(parameter):
    """The default of ``parameter`` in ``geopriv.EikonalMechanism.build``: the plugin has none of its own."""
    import geopriv

    return inspect.signature(geopriv.EikonalMechanism.build).parameters[parameter].default


def load_default(parameter):
    """The default of ``parameter`` in ``geopriv.EikonalMechanism.load`` (read from the function that implements it)."""
    from geopriv.mechanisms.eikonal import persistence

    return inspect.signature(persistence.load).parameters[parameter].default


def mechanism_default(field):
    """The default of a field of ``geopriv.EikonalMechanism`` (e.g. ``outside``)."""
    import geopriv

    return {f.name: f.default for f in dataclasses.fields(geopriv.EikonalMechanism)}[field]


class PerturbLocationDependent(PrivacyMapParameters, GeoprivAlgorithm):
    NAME = "perturblocationdependent"
    DISPLAY_NAME = "Perturb points with location-dependent privacy"
    GROUP = "Location-dependent privacy"
    GROUP_ID = "locationdependent"
    GEOPRIV_API = ("PrivacyMap", "EikonalMechanism", "perturb", "make_rng")
    GEOPRIV_KEYWORDS = {"perturb": RELEASE_KEYWORDS + BUDGET_KEYWORDS}
    RELEASE_FUNCTION = "perturb"
    HELP = (
        """<p>Releases every point with <b>location-dependent privacy</b> (the eikonal mechanism of Koufogiannis and
Pappas): each location is protected at the privacy level of the <b>privacy map</b> where it lies, so points in
dense areas get less noise than points in sparse ones, with a guarantee checked on the raster grid when the
mechanism is built (the realised privacy loss between neighbouring cells never exceeds the map's).</p>"""
        + MAP_HELP
        + """
<p><b>Mechanism</b>: built from the raster with the options below (about a second for 25 &times; 25 cells, up to
minutes for 200 &times; 200: resample a large raster first, or build once and <b>save</b> the mechanism), or
<b>loaded from a file</b> saved earlier (then the raster and the options are not used). Points may be in any CRS:
they are released in the map's CRS and written back in theirs. Points outside the raster stop the algorithm
(their feature ids are named), unless <b>outside the raster</b> is set to release them as if at the nearest point
of the raster. A <b>public study area</b> (advanced, optional, any CRS; public: choose it without looking at
individual points) replaces the privacy map's extent as the area that fixes the release's lattice: every point must
then lie inside it.</p>
<p>Released points are snapped to a <b>public lattice</b> (advanced: <b>grid step</b> in ground metres; empty: the
library's automatic step, from the map's largest epsilon); <b>continuous output</b> releases unrounded coordinates,
with no finite-precision bound. The output keeps every attribute: columns that hold the true locations stop the
algorithm, which names them, unless listed in <b>keep these attribute columns</b>. The output lists the features in
the input's order, so a layer in <b>spatial order</b> (FlatGeobuf files, spatial joins, database exports), or a field
numbered in that order, stops it too: shuffle the features first ('Order by expression' with <code>randf()</code>) and
drop ids numbered in the old order, or tick <b>the row order is public</b> (advanced) if it is.</p>
<p><b>Release the most likely true position</b>: each output is replaced by its posterior mean under the
population (where a person who produced it most likely is). This is post-processing with public data, so the
guarantee is unchanged, and the expected error is lower (about 10 % on the Tokyo raster); released points are
pulled towards populated places (off the sea, out of empty land).</p>
<p>Options (advanced; their defaults are the library's, those of <code>EikonalMechanism.build</code>):
<b>margin</b> is the share of the privacy loss kept for exact normalisation (larger: easier to build, more noise;
empty: automatic, 0.1 per noise length); <b>smooth</b> builds the kernels from a regularised map (empty: no
smoothing); <b>jump</b> also limits epsilon's change between neighbouring cells (empty: no limit); <b>output spacing</b>,
<b>largest output step</b>, <b>padding</b> and <b>cap</b> trade building time for smoothness; <b>kernels computed on
demand</b> keeps no kernel in memory (for rasters of 1000 &times; 1000 cells and more: the same mechanism; a few
points cost a few shortest-path searches, a layer covering the whole raster about one pass of kernel solves). If no valid
mechanism exists for the options, the message says which option to change.</p>
<p>Leave the <b>random seed</b> empty for a real release.</p>"""
    )

    INPUT = "INPUT"
    MECHANISM_FILE = "MECHANISM_FILE"
    SAVE_MECHANISM = "SAVE_MECHANISM"
    OUTSIDE = "OUTSIDE"
    REMAP = "REMAP"
    MARGIN = "MARGIN"
    SMOOTH = "SMOOTH"
    JUMP = "JUMP"
    OUTPUT_SPACING = "OUTPUT_SPACING"
    MAX_STEP = "MAX_STEP"
    PAD = "PAD"
    CAP = "CAP"
    KERNELS = "KERNELS"
    OUTPUT = "OUTPUT"

    OUTSIDE_RULES = ["error", "clamp"]
    STEPS = [1, 2, 4, 8, None]  # None: no cap, the spacing follows 1/epsilon only

    def initAlgorithm(self, config=None):  # noqa: N802
        from geopriv.frame import DEFAULT_GRID_M

        add_parameters(self, (Source(self.INPUT, "Point layer", (TYPE_POINTS,)),))
        self.add_map_parameters(optional=True)
        add_parameters(self, self.mechanism_parameters())
        self.add_release_parameters(
            self.INPUT,
            "perturb",
            grid_help="Released points are snapped to a public lattice of this step in ground metres, anchored at the "
            "CRS's origin (in longitude/latitude, at the equator); the mechanism's outputs are discrete, the "
            "lattice only rounds their within-cell jitter (post-processing). Empty: the library's automatic "
            f'step (grid="auto"): {DEFAULT_GRID_M:g} m, or 1/(20 epsilon) metres for the map\'s largest '
            "epsilon when its noise is finer.",
            bounds_help="Empty: the privacy map's extent fixes the lattice, and the mechanism itself handles points "
            "outside the raster ('Points outside the raster').",
        )
        self.add_seed_parameter()
        self.addParameter(
            QgsProcessingParameterFileDestination(
                self.SAVE_MECHANISM,
                "Save the built mechanism to (.npz; to perturb more points later)",
                fileFilter="geopriv mechanism (*.npz)",
                optional=True,
                createByDefault=False,
            )
        )
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Perturbed points", TYPE_POINTS))
        self.addOutput(
            QgsProcessingOutputNumber("VERIFIED_MAX_RATIO", "Verified largest privacy loss / allowed loss (<= 1)")
        )
        self.addOutput(QgsProcessingOutputString("MECHANISM_ID", "Mechanism id (SHA-256)"))
        self.add_provenance_output()

    def mechanism_parameters(self) -> tuple:
        """The saved mechanism and the release options, then the build options (advanced), as a table.

        Every default is the library's own: ``EikonalMechanism.build``'s and ``load``'s, read from
        their signatures, and the mechanism's own rule for points outside the raster.
        """
        return (
            MechanismFile(
                self.MECHANISM_FILE,
                "Saved mechanism (.npz; if set, the raster and mechanism options are not used)",
                optional=True,
            ),
            Choice(
                self.OUTSIDE,
                "Points outside the raster",
                ("Stop with an error naming them", "Release them as if at the nearest point of the raster"),
                tuple(self.OUTSIDE_RULES),
                mechanism_default("outside"),
            ),
            Flag(
                self.REMAP,
                "Release the most likely true position (posterior mean under the population; lower error)",
            ),
            # empty is the library's default margin ("auto": 0.1 per noise length), which a number field cannot show
            Number(
                self.MARGIN,
                "Margin: share of the privacy loss kept for normalisation (0-1; empty: automatic, 0.1 per noise length)",
                optional=True,
                minimum=0.0,
                maximum=1.0,
                advanced=True,
            ),
            Number(
                self.SMOOTH,
                "Smooth the kernels' map (metres per metre; empty: no smoothing)",
                build_default("smooth"),
                optional=True,
                minimum=0.0,
                advanced=True,
            ),
            Number(
                self.JUMP,
                "Limit epsilon's change between neighbouring cells to exp(jump) (empty: no limit)",
                build_default("jump"),
                optional=True,
                minimum=0.0,
                advanced=True,
            ),
            Number(
                self.OUTPUT_SPACING,
                "Output spacing (largest spacing x epsilon)",
                build_default("output_spacing"),
                minimum=0.0,
                advanced=True,
            ),
            Choice(
                self.MAX_STEP,
                "Largest output step (cells)",
                tuple("no cap" if s is None else str(s) for s in self.STEPS),
                tuple(self.STEPS),
                build_default("max_step"),
                advanced=True,
            ),
            Number(
                self.PAD, "Padding beyond the raster (noise lengths)", build_default("pad"), minimum=0.0, advanced=True
            ),
            Number(self.CAP, "Kernel cap (travel-time units)", build_default("cap"), minimum=0.0, advanced=True),
            Choice(
                self.KERNELS,
                "Kernels (built or loaded mechanism)",
                (
                    "Automatic (held when building; a saved file verified before by you: computed when needed)",
                    "Held in memory (fastest for many points)",
                    "Computed on demand (large rasters: least memory)",
                ),
                tuple(self.kernel_modes()),
                load_default("kernels"),
                advanced=True,
            ),
        )

    @staticmethod
    def kernel_modes():
        """How a mechanism keeps its kernels, in the enum's order (the library's names, those of ``load``)."""
        from geopriv.mechanisms.eikonal.mechanism import LOAD_KERNELS

        return list(LOAD_KERNELS)

    def mechanism(self, parameters, context, feedback):
        """The EikonalMechanism: loaded from the file parameter, or built from the raster; with the release options.

        The options (points outside the raster, the posterior-mean release) are set by
        :func:`geopriv.adapters.mechanism_options`, as the command line sets them.
        """
        import geopriv

        path = self.parameterAsFile(parameters, self.MECHANISM_FILE, context)
        kernels = self.kernel_modes()[self.parameterAsEnum(parameters, self.KERNELS, context)]
        if path:
            feedback.pushInfo(f"Loading the mechanism from {path}")
            # with the library's default verification (none again for a file this user verified before);
            # KERNELS absent (a script leaving it out): the library's default for loads
            if self.KERNELS not in parameters:
                kernels = load_default("kernels")
            mechanism = geopriv.EikonalMechanism.load(
                path, progress=self.progress_callback(feedback, 10, 70), kernels=kernels
            )
        else:
            mechanism = self.build_mechanism(parameters, context, feedback, kernels)
        if mechanism.report is not None:
            feedback.pushInfo(f"Verified: {mechanism.report}")
        outside = self.OUTSIDE_RULES[self.parameterAsEnum(parameters, self.OUTSIDE, context)]
        remap = self.parameterAsBool(parameters, self.REMAP, context)
        if remap and mechanism.remap_xy is None and mechanism.privacy_map.population is not None:
            feedback.pushInfo("Releasing posterior means under the population (post-processing; same guarantee)")
        return mechanism_options(mechanism, outside=outside, remap=remap)

    def build_mechanism(self, parameters, context, feedback, kernels):
        """The EikonalMechanism built from the population raster with the dialog's options (the library's defaults)."""
        import geopriv

        if not self.is_set(parameters, self.POPULATION):
            raise QgsProcessingException(
                "Give a population raster to build the mechanism from, or a saved mechanism file."
            )
        privacy_map = self.privacy_map(parameters, context, feedback)
        feedback.pushInfo("Building the mechanism (kernels, weights, verification) ...")
        number = lambda name: self.parameterAsDouble(parameters, name, context)  # noqa: E731
        # SMOOTH: absent (a script leaving it out) is the library's default, set but empty is "no smoothing"
        smooth = (
            self.optional_number(parameters, self.SMOOTH, context)
            if self.SMOOTH in parameters
            else build_default("smooth")
        )
        jump = (
            self.optional_number(parameters, self.JUMP, context) if self.JUMP in parameters else build_default("jump")
        )
        margin = self.optional_number(parameters, self.MARGIN, context)
        margin = build_default("margin") if margin is None else margin
        return geopriv.EikonalMechanism.build(
            privacy_map,
            margin=margin,
            smooth=smooth,
            jump=jump,
            output_spacing=number(self.OUTPUT_SPACING),
            max_step=self.STEPS[self.parameterAsEnum(parameters, self.MAX_STEP, context)],
            pad=number(self.PAD),
            cap=number(self.CAP),
            kernels=build_default("kernels") if kernels == "auto" else kernels,
            progress=self.progress_callback(feedback, 10, 70),
        )

    def compute(self, parameters, context, feedback):
        import geopriv

        saved = self.parameterAsFileOutput(parameters, self.SAVE_MECHANISM, context)
        # before any work: neither the mechanism file nor the points may replace an input
        inputs = self.input_files(parameters, context, [self.INPUT, self.POPULATION, self.MECHANISM_FILE])
        self.check_outputs([saved, self.parameterAsOutputLayer(parameters, self.OUTPUT, context)], inputs)
        budget = self.budget_options(parameters, context, feedback, geopriv.perturb)  # before any work
        data = self.read_layer(parameters, self.INPUT, context, feedback, all_fields=True)
        options = self.release_options(parameters, context, feedback, data, geopriv.perturb)
        options.update(budget)
        mechanism = self.mechanism(parameters, context, feedback)
        if saved:
            # a QGIS file destination: the dialog asks before replacing a file (inputs were refused above);
            # written atomically, and a symbolic link there is replaced, never written through
            digest = mechanism.save(saved, overwrite=True)
            feedback.pushInfo(f"Saved the mechanism to {saved} (SHA-256 {digest})")
        rng = self.random_source(parameters, context, feedback)

        released, record = self.release(
            geopriv.perturb, data.gdf, feedback, start=70.0, end=90.0, mechanism=mechanism, rng=rng, **options
        )

        dest = self.write_points(parameters, self.OUTPUT, context, data, released, feedback=feedback)
        self.report(
            feedback,
            record,
            (
                "mechanism",
                "epsilon_min_per_m",
                "epsilon_max_per_m",
                "verified_max_ratio",
                "grid_m",
                "declared_bounds",
                "kept_columns",
                "n",
            ),
        )
        self.report(feedback, record, ("finite_precision",))
        results = {
            self.OUTPUT: dest,
            "VERIFIED_MAX_RATIO": record.get("verified_max_ratio"),
            "MECHANISM_ID": record.get("mechanism_id"),
            self.PROVENANCE: self.provenance_json(record),
        }
        if saved:
            results[self.SAVE_MECHANISM] = saved
        return results
