"""Measured privacy: ``geopriv.adversary_error`` (error maps as a GeoTIFF) and ``geopriv.calibrate`` (epsilon for a target).

Neither reads any data: both are functions of public parameters (the mechanism, the public study
area, a population raster), so they can be run before anything is released.
"""

from __future__ import annotations

from qgis.core import (
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingParameterCrs,
    QgsProcessingParameterEnum,
    QgsProcessingParameterExtent,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterNumber,
    QgsProcessingParameterRasterDestination,
    QgsProcessingParameterRasterLayer,
)

from .base import BOUNDS_LABEL, LN4, GeoprivAlgorithm, library_default
from .build_privacy_map import UNIT_OPTIONS, UNITS
from .layers import pyproj_crs

PRIOR_NAMES = ["uniform", "population"]
#: the library's ``units=`` of the population raster (the same choice as the privacy map's)
UNIT_NAMES = UNITS


class MeasuredPrivacy(GeoprivAlgorithm):
    """Shared: the public study area with its CRS, the population raster, the prior, the grid step."""

    GROUP = "Measured privacy"
    GROUP_ID = "measuredprivacy"
    BOUNDS = "BOUNDS"
    CRS = "CRS"
    POPULATION = "POPULATION"
    UNITS = "UNITS"
    PRIOR = "PRIOR"
    CELL = "CELL"
    PRIOR_CHOICES = PRIOR_NAMES
    UNIT_CHOICES = UNIT_NAMES

    def add_area_parameters(self):
        self.addParameter(QgsProcessingParameterExtent(self.BOUNDS, BOUNDS_LABEL))
        self.addParameter(
            QgsProcessingParameterCrs(
                self.CRS,
                "CRS of the area (longitude/latitude: laid on a local grid in metres)",
                defaultValue="ProjectCrs",
            )
        )
        self.addParameter(
            QgsProcessingParameterRasterLayer(
                self.POPULATION, "Population raster (for the k-equivalent and the population prior)", optional=True
            )
        )
        self.addParameter(
            QgsProcessingParameterEnum(
                self.UNITS,
                "Raster values are",
                list(UNIT_OPTIONS),
                defaultValue=UNIT_NAMES.index(library_default("adversary_error", "units")),
            )
        )
        self.addParameter(
            QgsProcessingParameterEnum(
                self.PRIOR,
                "The adversary's prior (where it believes people are)",
                ["Uniform over the study area", "The population raster"],
                defaultValue=PRIOR_NAMES.index(library_default("adversary_error", "prior")),
            )
        )
        cell = QgsProcessingParameterNumber(
            self.CELL,
            "Grid step (metres; empty: the library's choice)",
            QgsProcessingParameterNumber.Double,
            defaultValue=None,
            optional=True,
            minValue=0.0,
        )
        cell.setHelp(
            "The adversary's grid. Empty: the area's longest side / 100, or a fifth of the noise's scale "
            "when coarser (adversary error); the longest side / 60 (choose epsilon)."
        )
        self.addParameter(cell)

    def area_options(self, parameters, context) -> dict:
        """``area=``, ``crs=``, ``prior=``, ``population=``, ``units=`` and ``cell=`` for the library."""
        crs = self.parameterAsCrs(parameters, self.CRS, context)
        if crs is None or not crs.isValid():
            raise QgsProcessingException("Choose the CRS of the grid: a projected CRS in metres (a UTM zone).")
        rect = self.parameterAsExtent(parameters, self.BOUNDS, context, crs)
        if rect is None or rect.isNull():
            raise QgsProcessingException(f"Set the '{BOUNDS_LABEL}': the public area the adversary's grid covers.")
        options = {
            "area": (rect.xMinimum(), rect.yMinimum(), rect.xMaximum(), rect.yMaximum()),
            "crs": pyproj_crs(crs),
            "prior": PRIOR_NAMES[self.parameterAsEnum(parameters, self.PRIOR, context)],
            "units": UNIT_NAMES[self.parameterAsEnum(parameters, self.UNITS, context)],
            "cell": self.optional_number(parameters, self.CELL, context),
        }
        if self.is_set(parameters, self.POPULATION):
            options["population"] = self.raster_path(parameters, self.POPULATION, context)[0]
        return options


class AdversaryErrorAlgorithm(MeasuredPrivacy):
    NAME = "adversaryerror"
    DISPLAY_NAME = "Adversary error of planar Laplace (measured privacy)"
    GEOPRIV_API = ("adversary_error",)
    GEOPRIV_KEYWORDS = {
        "adversary_error": ("level", "radius", "epsilon", "area", "crs", "prior", "population", "units", "cell")
    }
    HELP = """<p>How much a planar Laplace release (<i>Perturb points</i>) protects, <b>in metres</b>: the expected
error of the <b>optimal Bayesian adversary</b> (Shokri et al., <i>Quantifying Location Privacy</i>, 2011) who knows
the mechanism and a <b>prior</b> over where people are, sees a released point and guesses the true location.
It is computed exactly on a grid over the <b>public study area</b> (releases beyond it are shown on its edge, as
geopriv clamps them). No data is read: it depends only on the privacy level, the area and the prior, so it can be
run before releasing anything.</p>
<p>Outputs: the adversary error, the expected displacement of the releases (what the adversary gets by taking a
release at face value), and a GeoTIFF of the adversary's error for a person living in each cell (band 1, metres).
With a <b>population raster</b>: the <b>k-equivalent</b>, the expected number of people inside the region the
adversary is 90 % sure of (band 2), for readers used to k-anonymity. The prior must be public knowledge (a census
raster), never the points being released.</p>"""

    OUTPUT = "OUTPUT"
    ERROR = "ADVERSARY_ERROR_M"
    DISPLACEMENT = "DISPLACEMENT_M"
    K = "K_EQUIVALENT"

    def initAlgorithm(self, config=None):  # noqa: N802
        self.add_privacy_parameters(level=LN4, radius=200.0)
        self.add_area_parameters()
        self.addParameter(
            QgsProcessingParameterRasterDestination(
                self.OUTPUT, "Adversary error map (GeoTIFF: band 1 metres, band 2 k-equivalent)"
            )
        )
        self.addOutput(QgsProcessingOutputNumber(self.ERROR, "Adversary error (m)"))
        self.addOutput(QgsProcessingOutputNumber(self.DISPLACEMENT, "Expected displacement (m)"))
        self.addOutput(QgsProcessingOutputNumber(self.K, "k-equivalent (people; needs a population raster)"))

    def compute(self, parameters, context, feedback):
        import geopriv

        options = {**self.privacy(parameters, context, feedback), **self.area_options(parameters, context)}
        out = self.parameterAsOutputLayer(parameters, self.OUTPUT, context)
        adv = geopriv.adversary_error(progress=self.progress_callback(feedback, 0.0, 95.0), **options)
        adv.to_raster(out, overwrite=True)  # QGIS asked before overwriting, as for its own rasters
        feedback.pushInfo(
            f"Optimal adversary's expected error: {adv.expected_error_m:,.1f} m; expected displacement "
            f"of the releases: {adv.displacement_m:,.1f} m; grid {adv.shape[1]} x {adv.shape[0]} cells of "
            f"{adv.parameters['cell_m']:,.1f} m; prior: {adv.prior}."
        )
        if adv.k_equivalent is not None:
            feedback.pushInfo(
                f"k-equivalent: {adv.k_equivalent:,.1f} people in the adversary's {adv.confidence:.0%} region."
            )
        return {
            self.OUTPUT: out,
            self.ERROR: adv.expected_error_m,
            self.DISPLACEMENT: adv.displacement_m,
            self.K: adv.k_equivalent,
        }


class CalibrateAlgorithm(MeasuredPrivacy):
    NAME = "calibrate"
    DISPLAY_NAME = "Choose epsilon for a target (calibrate)"
    GEOPRIV_API = ("calibrate",)
    GEOPRIV_KEYWORDS = {"calibrate": ("area", "crs", "prior", "population", "units", "cell")}
    HELP = """<p>The planar Laplace <b>epsilon</b> (per ground metre) that meets a target on the <b>public study
area</b>: the largest epsilon whose <b>optimal adversary</b> still errs by at least the value in metres; the largest
epsilon leaving at least the value in people in the adversary's 90 % region (<b>k-equivalent</b>, needs a
population raster); or the smallest epsilon whose releases are within the value in metres on average
(<b>displacement</b>). Outputs: epsilon, the same as a level within the radius, and the curve behind it as a
table (epsilon, displacement, adversary error, k-equivalent). No data is read.</p>"""

    TARGET = "TARGET"
    VALUE = "VALUE"
    RADIUS = "RADIUS"
    OUTPUT = "OUTPUT"
    EPSILON_OUT = "EPSILON"
    LEVEL_OUT = "LEVEL"
    TARGETS = ["adversary_error", "k_equivalent", "displacement"]

    def initAlgorithm(self, config=None):  # noqa: N802
        self.addParameter(
            QgsProcessingParameterEnum(
                self.TARGET,
                "Target",
                ["Adversary error at least (m)", "k-equivalent at least (people)", "Displacement at most (m)"],
                defaultValue=0,
            )
        )
        self.addParameter(
            QgsProcessingParameterNumber(
                self.VALUE,
                "Target value (metres, or people)",
                QgsProcessingParameterNumber.Double,
                defaultValue=None,
                minValue=0.0,
            )
        )
        self.addParameter(
            QgsProcessingParameterNumber(
                self.RADIUS,
                "Radius for the level (metres)",
                QgsProcessingParameterNumber.Double,
                defaultValue=200.0,
                minValue=0.0,
            )
        )
        self.add_area_parameters()
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Curve (epsilon and the measures)"))
        self.addOutput(QgsProcessingOutputNumber(self.EPSILON_OUT, "Epsilon (per ground metre)"))
        self.addOutput(QgsProcessingOutputNumber(self.LEVEL_OUT, "Level within the radius"))

    def compute(self, parameters, context, feedback):
        import geopriv

        target = self.TARGETS[self.parameterAsEnum(parameters, self.TARGET, context)]
        options = self.area_options(parameters, context)
        cal = geopriv.calibrate(target, self.parameterAsDouble(parameters, self.VALUE, context), **options)
        radius = self.parameterAsDouble(parameters, self.RADIUS, context)
        if not cal.met:
            feedback.pushWarning(
                "No epsilon in the range tried meets the target: the one shown is the closest. "
                "Change the target or the study area."
            )
        feedback.pushInfo(f"Epsilon {cal.epsilon_per_m:.6g} per metre: ln {cal.level(radius):.4g} within {radius:g} m.")
        out = self.write_table(parameters, self.OUTPUT, context, cal.curve)
        return {self.OUTPUT: out, self.EPSILON_OUT: cal.epsilon_per_m, self.LEVEL_OUT: cal.level(radius)}
