"""The shared part of the count releases (``geopriv.aggregate``, ``geopriv.heatmap``, ``geopriv.flows``).

Their common parameters (epsilon, the person id field and the most rows per person, the public
study area and region, the hierarchy's levels and non-negativity), named and defaulted as the
library's keywords, and the writing of a released GeoDataFrame of cells or lines as a new layer.
No privacy logic: every run is one library call on the whole layer (:meth:`GeoprivAlgorithm.release`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import shapely
from qgis.core import (
    QgsGeometry,
    QgsProcessingException,
    QgsProcessingParameterBoolean,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterExtent,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterField,
    QgsProcessingParameterNumber,
    QgsProcessingParameterString,
    QgsWkbTypes,
)

from .base import BOUNDS_LABEL, PERSON_LABEL, TYPE_POLYGONS, GeoprivAlgorithm, library_default
from .layers import feature_for, fields_for, to_qgis
from .parameters import Number, add_parameters
from .synthesize import DEFAULT_EPSILON, TOTAL_EPSILON_LABEL

#: the label of MAX_PER_USER (the library's QGIS advice names it: "leave 'Most rows per person' at 1")
MAX_PER_USER_LABEL = "Most rows per person"
#: the library keywords every count release takes (besides its data, cells and rng)
COUNT_KEYWORDS = ("epsilon", "user", "max_per_user", "levels", "nonnegative", "rng", "budget_store", "person")


def parse_levels(text: str, who: str = "geopriv"):
    """LEVELS as the library's ``levels=``: "auto", a number of levels, "false" (the cells only) or weights.

    Weights are comma-separated numbers or fractions, one per level of the tree, the cells first
    (``7, 0, 1``).  Refused here only when the text is none of these; the library checks the rest.
    """
    value = text.strip().lower()
    if value in ("", "auto"):
        return "auto"
    if value in ("false", "no", "cells"):
        return False
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return [Fraction(w.strip()) for w in value.split(",")]
    except (ValueError, ZeroDivisionError):
        raise QgsProcessingException(
            f"{who}: the 'Levels of the hierarchy' must be auto, a number of levels, false (the cells only) or "
            "comma-separated weights such as 7, 0, 1 (one per level, the cells first)."
        ) from None


class CountRelease(GeoprivAlgorithm):
    """Base of the count releases: user-level differential privacy, epsilon dimensionless (total)."""

    GROUP = "Counts, heatmaps and flows"
    GROUP_ID = "counts"
    # The person id field is the library's user= (the persons whose rows are bounded), which a budget store also
    # charges (once each, epsilon): one field, declared here, not an advanced budget-only one.
    PERSON = "USER"
    PERSON_BUDGET_ONLY = False
    BUDGET_CHARGE = "each person was charged epsilon once, whatever their number of rows"

    INPUT = "INPUT"
    MAX_PER_USER = "MAX_PER_USER"
    REGION = "REGION"
    LEVELS = "LEVELS"
    NONNEGATIVE = "NONNEGATIVE"
    OUTPUT = "OUTPUT"
    N_CELLS = "N_CELLS"

    #: what one person contributes, in the labels and help ("rows", "trips"), and one of them ("feature", "trip")
    ROWS = "rows"
    ITEM = "feature"

    def default(self, parameter):
        """The library's default of a keyword of this release (the plugin has none of its own)."""
        return library_default(self.RELEASE_FUNCTION, parameter)

    # --- parameters ------------------------------------------------------------------------
    def add_epsilon_parameter(self):
        """EPSILON: dimensionless, the whole release's (as for 'Synthesize points', with the plugin's proposal)."""
        epsilon = Number(
            self.EPSILON,
            TOTAL_EPSILON_LABEL,
            DEFAULT_EPSILON,
            minimum=0.0,
            help=f"Adding or removing one person with all of their {self.ROWS} changes the probability of any "
            "released result by at most exp(epsilon) (user-level differential privacy). The library has no default; "
            f"{DEFAULT_EPSILON:g} is the plugin's proposal (as for 'Synthesize points'). Smaller: more private, "
            "noisier counts. With a budget store each person is charged epsilon once.",
        )
        add_parameters(self, (epsilon,))

    def add_person_parameters(self, max_label: str = MAX_PER_USER_LABEL):
        """USER (the library's user=, also the persons a budget store charges) and MAX_PER_USER."""
        user = QgsProcessingParameterField(
            self.PERSON, PERSON_LABEL, parentLayerParameterName=self.INPUT, optional=True
        )
        user.setHelp(
            f"The field of stable person ids (integers or text, no empty values). Each person keeps at most "
            f"'{MAX_PER_USER_LABEL}' {self.ROWS}, chosen at random (never by where they are), and the guarantee "
            f"covers a person with all of their {self.ROWS}. Empty: every {self.ITEM} is its own person, so a person "
            f"with k {self.ITEM}s is protected at k times epsilon only. With a budget store this field is needed "
            "(feature ids are not persons: an export or an edit renumbers them); each person is charged epsilon once."
        )
        self.addParameter(user)
        most = QgsProcessingParameterNumber(
            self.MAX_PER_USER,
            max_label,
            QgsProcessingParameterNumber.Integer,
            defaultValue=self.default("max_per_user"),
            minValue=1,
        )
        most.setHelp(
            f"A person's {self.ROWS} beyond this number are dropped at random (never by location) before counting. "
            f"The noise grows in proportion. Above {self.default('max_per_user')} it needs the '{PERSON_LABEL}'."
        )
        self.addParameter(most)

    def add_area_parameters(self, bounds_help: str):
        """BOUNDS (the public study area, an extent) and REGION (public polygons; only cells meeting it are kept)."""
        bounds = QgsProcessingParameterExtent(self.BOUNDS, BOUNDS_LABEL, defaultValue=None, optional=True)
        bounds.setHelp(
            "The area your data is about, in any CRS (it is converted to the layer's CRS; without a CRS the numbers "
            "are in the layer's CRS). It is public: choose it without looking at individual points (a city or "
            "study-region boundary, round numbers); every cell in it is released, empty or not, and it is written "
            "in the provenance. Every input point must lie inside it: features outside are refused, named by "
            "feature id. Never use 'Calculate from layer' on the input layer itself: its extent is the bounding box "
            "of the true points (the plugin refuses it). " + bounds_help
        )
        self.addParameter(bounds)
        region = QgsProcessingParameterFeatureSource(
            self.REGION,
            "Region (public polygons; only the cells meeting it are released)",
            [TYPE_POLYGONS],
            optional=True,
        )
        region.setHelp(
            "A public polygon layer (a city's boundary), in any CRS: only the cells that meet it are "
            "released. Its bounding box is the public study area when the extent is empty."
        )
        self.addParameter(region)

    def add_hierarchy_parameters(self):
        """LEVELS and NONNEGATIVE (advanced): how epsilon is split over the hierarchy, and counts >= 0."""
        levels = QgsProcessingParameterString(
            self.LEVELS,
            "Levels of the hierarchy (auto, a number, or weights)",
            defaultValue=str(self.default("levels")),
        )
        levels.setHelp(
            "How epsilon is split over the public hierarchy of cells (Hay et al. 2010). auto (the library's "
            "default): 7/8 to the cells and 1/8 to the whole area's total; a number k: k measured levels with "
            "equal shares (best where most cells are empty); false: the cells only; or comma-separated weights, "
            "one per level, the cells first."
        )
        nonnegative = QgsProcessingParameterBoolean(
            self.NONNEGATIVE, "Non-negative counts (that still add up)", defaultValue=bool(self.default("nonnegative"))
        )
        nonnegative.setHelp(
            "Releases counts >= 0 that still add up over the hierarchy (post-processing: no extra "
            "privacy cost). Unticked: unbiased counts, some negative."
        )
        for param in (levels, nonnegative):
            param.setFlags(param.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
            self.addParameter(param)

    # --- options -----------------------------------------------------------------------------
    def user_field(self, parameters, context):
        """The person id field (None: every feature is its own person)."""
        return (self.field_names(parameters, self.PERSON, context) or [None])[0]

    def count_options(self, parameters, context, feedback) -> dict:
        """epsilon, user, max_per_user, levels and nonnegative from the parameters."""
        user = self.user_field(parameters, context)
        if user is None:
            feedback.pushWarning(
                f"No '{PERSON_LABEL}': every {self.ITEM} is its own person, so a person with several "
                f"{self.ITEM}s is protected at a multiple of epsilon only."
            )
        return {
            "epsilon": self.parameterAsDouble(parameters, self.EPSILON, context),
            "user": user,
            "max_per_user": self.parameterAsInt(parameters, self.MAX_PER_USER, context),
            "levels": parse_levels(self.parameterAsString(parameters, self.LEVELS, context), self.displayName()),
            "nonnegative": self.parameterAsBool(parameters, self.NONNEGATIVE, context),
        }

    def area_options(self, parameters, context, feedback, data) -> dict:
        """bounds (the public study area in the layer's CRS; never its own extent) and region, when set."""
        options = {}
        bounds = self.public_study_area(parameters, context, data)
        if bounds is not None:
            options["bounds"] = bounds
        if self.is_set(parameters, self.REGION):
            options["region"] = self.read_layer(parameters, self.REGION, context, feedback, progress=(10, 10)).gdf
        return options

    def report_release(self, feedback, record: dict):
        self.report(
            feedback,
            record,
            (
                "mechanism",
                "epsilon",
                "max_per_user",
                "user",
                "cells",
                "n_cells",
                "tree_levels",
                "epsilon_per_level",
                "declared_bounds",
                "region",
                "nonnegative",
                "suppress",
            ),
        )
        self.report(feedback, record, ("expected_error",))
        self.report(feedback, record, ("definition",))

    # --- outputs -----------------------------------------------------------------------------
    @staticmethod
    def wkb_type(geoms, single, multi):
        """The layer type for ``geoms``: ``multi`` when any is multipart, with Z when any has Z."""
        geoms = np.asarray(geoms, dtype=object)
        kinds = shapely.get_type_id(geoms)
        kind = multi if ((kinds >= 4) & (kinds <= 6)).any() else single
        if len(geoms) and shapely.has_z(geoms).any():
            kind = QgsWkbTypes.addZ(kind)
        return kind

    def write_frame(
        self,
        parameters,
        name,
        context,
        result,
        columns,
        crs,
        wkb_type,
        base_fields=None,
        base_attributes=None,
        feedback=None,
        progress=(90.0, 100.0),
    ):
        """Write the library's released GeoDataFrame as a new layer of ``wkb_type`` in ``crs``.

        Fields: ``base_fields`` with ``base_attributes`` (one list per row, e.g. a cells layer's own
        attributes, unchanged), then ``columns`` of the result.  Every row is written (a release is
        written whole).
        """
        fields = fields_for(result, list(columns), base=base_fields)
        sink, dest_id = self.parameterAsSink(parameters, name, context, fields, wkb_type, crs)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, name))
        wkbs = shapely.to_wkb(np.asarray(result.geometry.values, dtype=object))
        values = [result[c].to_numpy(dtype=object) for c in columns]
        multi = QgsWkbTypes.isMultiType(wkb_type)

        def features():
            for i in range(len(result)):
                geometry = QgsGeometry()
                geometry.fromWkb(wkbs[i])
                if multi:
                    geometry.convertToMultiType()
                base = list(base_attributes[i]) if base_attributes is not None else []
                yield feature_for(fields, base + [to_qgis(v[i]) for v in values], geometry)

        self.add_features(sink, parameters, name, features(), len(result), feedback, progress)
        return dest_id
