"""Build privacy map: ``geopriv.PrivacyMap.from_population`` on a population raster, written as a GeoTIFF.

The parameters that turn density into epsilon are shared with the location-dependent
perturbation (:mod:`.perturb_location_dependent`), which builds the same map.
"""

from __future__ import annotations

import inspect

from qgis.core import QgsProcessingException, QgsProcessingOutputNumber, QgsProcessingParameterRasterDestination

from .base import LN4, GeoprivAlgorithm
from .layers import pyproj_crs
from .parameters import Band, Choice, Number, Raster, add_parameters

#: the library's ``units=`` of a population raster, and how the dialogs name them (also the measured-privacy ones)
UNITS = ["per_km2", "per_cell"]
UNIT_OPTIONS = ("People per km\u00b2 of ground", "People per cell")


def suggested_range():
    """The library's suggested epsilon range (ln 4 within 3,000 m to 600 m): the README's and the CLI's examples."""
    from geopriv.defaults import SUGGESTED_EPSILON_RANGE

    return SUGGESTED_EPSILON_RANGE


def map_default(parameter):
    """The default of ``parameter`` in ``geopriv.PrivacyMap.from_population``: the plugin has none of its own."""
    import geopriv

    return inspect.signature(geopriv.PrivacyMap.from_population).parameters[parameter].default


MAP_HELP = """<p>The <b>privacy map</b> gives every location its own privacy level epsilon (per ground metre),
from population density (Koufogiannis and Pappas, <i>Location-dependent privacy</i>): where many people live, a
small perturbation already hides a person, so epsilon can be larger (less noise) there. Epsilon grows linearly
with density: either from <b>epsilon where nobody lives</b> to <b>epsilon at the highest density</b> of the raster
(the default, ln 4 within 3,000 m to ln 4 within 600 m), or, when both are set, as <b>floor</b> + <b>slope</b>
&times; density. Cells without data count as empty by default: they get the lowest epsilon, the strongest
protection. If no data means a place where nobody can be (sea, lakes), choose <b>the level of the nearest cell
with data</b> for them: then a dense coast is not forced to blend down to the sea's level (less noise there), and
the guarantee between points across the water follows the coast's level. The raster must be in a projected CRS; its values are people per km&sup2; of ground (or counts per
cell, with the units option).</p>
<p><b>Regularise</b> (optional) lowers epsilon (never raises it: a lower epsilon is a stronger guarantee) only
where the noise scale would change faster than the given metres per metre, next to sharp jumps from sparse to
dense areas.</p>"""


class PrivacyMapParameters:
    """The parameters that make a ``geopriv.PrivacyMap`` from a population raster (a mixin)."""

    POPULATION = "POPULATION"
    BAND = "BAND"
    UNITS = "UNITS"
    EPSILON_LOW = "EPSILON_LOW"
    EPSILON_HIGH = "EPSILON_HIGH"
    FLOOR = "FLOOR"
    SLOPE = "SLOPE"
    REGULARISE = "REGULARISE"
    NODATA = "NODATA"
    NODATA_RULES = [None, "nearest"]

    def add_map_parameters(self, optional=False):
        """Declare :meth:`map_parameter_table` (``optional``: the population raster may be left empty)."""
        add_parameters(self, self.map_parameter_table(optional))

    def map_parameter_table(self, optional=False) -> tuple:
        """The population raster and the rule from density to epsilon (the last three advanced), as a table.

        ``optional``: the raster may be left empty (an algorithm that also takes a ready-made map).
        """
        band = map_default("band")
        low, high = suggested_range()
        return (
            Raster(self.POPULATION, "Population raster (people per km\u00b2, projected CRS)", optional=optional),
            # optional: QGIS 3.22 refuses a missing value of a required band parameter even with a default
            Band(self.BAND, f"Band (empty: band {band})", self.POPULATION, default=band, optional=True),
            Choice(
                self.UNITS,
                "Raster values are",
                UNIT_OPTIONS,
                UNITS,
                map_default("units"),
            ),
            Number(
                self.EPSILON_LOW,
                f"Epsilon where nobody lives (per ground metre; default ln 4 within {LN4 / low:,.0f} m)",
                low,
                minimum=0.0,
            ),
            Number(
                self.EPSILON_HIGH,
                f"Epsilon at the raster's highest density (per ground metre; default ln 4 within {LN4 / high:,.0f} m)",
                high,
                minimum=0.0,
            ),
            Choice(
                self.NODATA,
                "No-data cells are",
                (
                    "Unknown or empty: strongest protection (epsilon where nobody lives)",
                    "Places nobody can be (sea, lakes): the level of the nearest cell with data",
                ),
                self.NODATA_RULES,
                map_default("nodata_epsilon"),
            ),
            Number(
                self.FLOOR,
                "Floor: epsilon per ground metre at zero density (with slope, replaces the range)",
                minimum=0.0,
                optional=True,
                advanced=True,
            ),
            Number(
                self.SLOPE,
                "Slope: extra epsilon per ground metre for each person per km\u00b2 (with floor)",
                minimum=0.0,
                optional=True,
                advanced=True,
            ),
            Number(
                self.REGULARISE,
                "Regularise: largest change of the noise scale (metres per metre; empty: none)",
                minimum=0.0,
                optional=True,
                advanced=True,
            ),
        )

    def privacy_map(self, parameters, context, feedback):
        """The ``geopriv.PrivacyMap`` the map parameters describe (one library call, plus regularisation)."""
        import geopriv

        path, crs = self.raster_path(parameters, self.POPULATION, context)
        floor = self.optional_number(parameters, self.FLOOR, context)
        slope = self.optional_number(parameters, self.SLOPE, context)
        if (floor is None) != (slope is None):
            raise QgsProcessingException(
                "Give both the floor and the slope (epsilon = floor + slope x density), "
                "or neither to use the epsilon range."
            )
        if floor is not None:
            rule = {"floor": floor, "slope": slope}
        else:
            rule = {
                "epsilon_range": (
                    self.parameterAsDouble(parameters, self.EPSILON_LOW, context),
                    self.parameterAsDouble(parameters, self.EPSILON_HIGH, context),
                )
            }
        privacy_map = geopriv.PrivacyMap.from_population(
            path,
            crs=pyproj_crs(crs),  # the layer's CRS as QGIS shows it (None: the file's, if any)
            band=self.parameterAsInt(parameters, self.BAND, context) or map_default("band"),
            units=UNITS[self.parameterAsEnum(parameters, self.UNITS, context)],
            nodata_epsilon=self.NODATA_RULES[self.parameterAsEnum(parameters, self.NODATA, context)],
            **rule,
        )
        regularise = self.optional_number(parameters, self.REGULARISE, context)
        if regularise is not None:
            privacy_map = privacy_map.regularised(regularise)
        feedback.pushInfo(repr(privacy_map))
        return privacy_map


class BuildPrivacyMap(PrivacyMapParameters, GeoprivAlgorithm):
    NAME = "buildprivacymap"
    DISPLAY_NAME = "Build privacy map from a population raster"
    GROUP = "Location-dependent privacy"
    GROUP_ID = "locationdependent"
    GEOPRIV_API = ("PrivacyMap",)
    HELP = (
        MAP_HELP
        + """<p>Output: a GeoTIFF of epsilon per ground metre on the population raster's grid and CRS,
to inspect or style in QGIS; <i>Perturb points with location-dependent privacy</i> builds the same map from the
same parameters.</p>"""
    )

    OUTPUT = "OUTPUT"

    def initAlgorithm(self, config=None):  # noqa: N802
        self.add_map_parameters()
        self.addParameter(QgsProcessingParameterRasterDestination(self.OUTPUT, "Privacy map (epsilon per metre)"))
        self.addOutput(QgsProcessingOutputNumber("EPSILON_MIN", "Smallest epsilon per metre"))
        self.addOutput(QgsProcessingOutputNumber("EPSILON_MAX", "Largest epsilon per metre"))

    def compute(self, parameters, context, feedback):
        out = self.parameterAsOutputLayer(parameters, self.OUTPUT, context)
        self.check_outputs([out], self.input_files(parameters, context, [self.POPULATION]))  # before any work
        privacy_map = self.privacy_map(parameters, context, feedback)
        self.check_cancelled(feedback)
        privacy_map.to_geotiff(out)
        return {self.OUTPUT: out, "EPSILON_MIN": privacy_map.epsilon_min, "EPSILON_MAX": privacy_map.epsilon_max}
