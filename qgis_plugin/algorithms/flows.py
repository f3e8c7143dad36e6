"""Private flows between regions: ``geopriv.flows`` on trajectory points or trip lines -> origin-destination lines."""

from __future__ import annotations

from qgis.core import (
    QgsProcessing,
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingParameterEnum,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterField,
    QgsWkbTypes,
)

from .base import PERSON_LABEL, TYPE_POINTS, TYPE_POLYGONS
from .counts import COUNT_KEYWORDS, MAX_PER_USER_LABEL, CountRelease

TYPE_LINES = QgsProcessing.TypeVectorLine
#: the label of OUTSIDE (the library's QGIS advice names it: "Set 'Trips outside every region' to 'drop'")
OUTSIDE_LABEL = "Trips outside every region"
TRAJ_ID_LABEL = "Trace id field (one trip per trace; trajectory points only)"
TIME_LABEL = "Time field (date-time, numbers, or ISO text in one format; trajectory points only)"


class Flows(CountRelease):
    NAME = "flows"
    DISPLAY_NAME = "Private flows between regions"
    GEOPRIV_API = ("flows", "make_rng")
    GEOPRIV_KEYWORDS = {"flows": COUNT_KEYWORDS + ("regions", "traj_id", "time", "region_id", "outside")}
    RELEASE_FUNCTION = "flows"
    ROWS = "trips"
    ITEM = "trip"
    BUDGET_CHARGE = "each person was charged epsilon once, whatever their number of trips"
    HELP = f"""<p>Releases <b>private origin-destination flows</b> between <b>public regions</b> (districts,
zones) with <b>user-level differential privacy</b>: adding or removing one person with all of their trips changes
the probability of any released table by at most a factor exp(&epsilon;). Every ordered pair of regions (origin,
destination) is released with its count of trips, <b>empty or not</b>, as integers with exact discrete Laplace
noise on a consistent hierarchy (pairs, origins, all trips). <b>Epsilon</b> is dimensionless, for the whole table
(the dialog proposes 1).</p>
<p><b>Trips</b>: trajectory points with a <b>trace id field</b> (one trip per trace) and a <b>time field</b> (a trip
runs from its earliest point to its latest: date-time fields and numbers sort as times, text sorts as text, so
ISO 8601 text must be in one format and time zone), or a <b>line layer</b> with one line per trip (from its first
vertex to its last). A trip end falls in the first region that holds it. <b>{OUTSIDE_LABEL}</b> (starting or ending outside
every region): <i>refuse</i> stops and names the trips (trace ids, or feature ids for lines) and writes nothing;
<i>drop</i> leaves them out (a rule on each trip alone: the guarantee is unchanged). The <b>region id field</b>
names the regions in the output (empty: their feature ids).</p>
<p>The <b>{PERSON_LABEL}</b> says whose trips are whose (constant within a trip): each person keeps at most
<b>{MAX_PER_USER_LABEL}</b> trips, chosen at random, and the noise grows in proportion. Empty: every trip is its own
person. With a <b>budget store</b> (advanced) each person is charged epsilon once, before any noise is drawn.</p>
<p>Output: one line per ordered pair in the input's CRS, between the regions' representative points (zero length
for trips within a region), with <b>origin</b>, <b>destination</b>, <b>count</b> and <b>expected_error</b> (the root
mean squared error of the count, public). Advanced: the <b>levels of the hierarchy</b> and <b>non-negative
counts</b>. The provenance (log and <b>PROVENANCE</b> output) records epsilon, the regions and the trip rule. Leave
the <b>random seed</b> empty for a real release.</p>"""

    TRAJ_ID = "TRAJ_ID_FIELD"
    TIME = "TIME_FIELD"
    REGIONS = "REGIONS"
    REGION_ID = "REGION_ID"
    OUTSIDE = "OUTSIDE"
    OUTSIDE_RULES = ["refuse", "drop"]
    NEW_COLUMNS = ("origin", "destination", "count", "expected_error")

    def initAlgorithm(self, config=None):  # noqa: N802
        self.addParameter(
            QgsProcessingParameterFeatureSource(
                self.INPUT, "Trips: trajectory points, or one line per trip", [TYPE_POINTS, TYPE_LINES]
            )
        )
        self.add_epsilon_parameter()
        self.addParameter(
            QgsProcessingParameterField(self.TRAJ_ID, TRAJ_ID_LABEL, parentLayerParameterName=self.INPUT, optional=True)
        )
        self.addParameter(
            QgsProcessingParameterField(self.TIME, TIME_LABEL, parentLayerParameterName=self.INPUT, optional=True)
        )
        regions = QgsProcessingParameterFeatureSource(self.REGIONS, "Regions (public polygons)", [TYPE_POLYGONS])
        regions.setHelp(
            "Public polygons (districts, zones), in any CRS, laid out without looking at the trips. Every "
            "ordered pair of them is released: n regions make n² pairs."
        )
        self.addParameter(regions)
        self.addParameter(
            QgsProcessingParameterField(
                self.REGION_ID,
                "Region id field (names in the output; empty: feature ids)",
                parentLayerParameterName=self.REGIONS,
                optional=True,
            )
        )
        self.addParameter(
            QgsProcessingParameterEnum(
                self.OUTSIDE,
                OUTSIDE_LABEL,
                ["refuse: stop and name those trips, write nothing", "drop: leave those trips out"],
                defaultValue=self.OUTSIDE_RULES.index(self.default("outside")),
            )
        )
        self.add_person_parameters(f"{MAX_PER_USER_LABEL} (here: trips per person)")
        self.add_hierarchy_parameters()
        self.add_seed_parameter()
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Private flows between regions", TYPE_LINES))
        self.addOutput(QgsProcessingOutputNumber(self.N_CELLS, "Number of origin-destination pairs released"))
        self.add_provenance_output()

    def trip_fields(self, parameters, context):
        """(trace id field, time field): both for trajectory points, neither for a line layer."""
        source = self.parameterAsSource(parameters, self.INPUT, context)
        if source is None:
            raise QgsProcessingException(self.invalidSourceError(parameters, self.INPUT))
        traj_id = (self.field_names(parameters, self.TRAJ_ID, context) or [None])[0]
        time = (self.field_names(parameters, self.TIME, context) or [None])[0]
        points = QgsWkbTypes.geometryType(source.wkbType()) == QgsWkbTypes.PointGeometry
        if points and (traj_id is None or time is None):
            raise QgsProcessingException(
                f"{self.displayName()}: trajectory points need the '{TRAJ_ID_LABEL.split(' (')[0]}' and the "
                f"'{TIME_LABEL.split(' (')[0]}' (a trip runs from its earliest point to its latest); or give a line "
                "layer with one line per trip."
            )
        if not points and (traj_id is not None or time is not None):
            raise QgsProcessingException(
                f"{self.displayName()}: a line layer has one trip per line (from its first vertex to its last): leave "
                f"the '{TRAJ_ID_LABEL.split(' (')[0]}' and the '{TIME_LABEL.split(' (')[0]}' empty."
            )
        return traj_id, time

    def compute(self, parameters, context, feedback):
        import geopriv

        budget = self.budget_options(parameters, context, feedback, geopriv.flows)  # before any work
        traj_id, time = self.trip_fields(parameters, context)
        user = self.user_field(parameters, context)
        columns = [c for c in dict.fromkeys((traj_id, time, user)) if c is not None]
        data = self.read_layer(parameters, self.INPUT, context, feedback, columns=columns)
        region_id = (self.field_names(parameters, self.REGION_ID, context) or [None])[0]
        regions = self.read_layer(
            parameters, self.REGIONS, context, feedback, columns=[region_id] if region_id else [], progress=(10, 12)
        )
        options = self.count_options(parameters, context, feedback)
        options.update(budget)
        rng = self.random_source(parameters, context, feedback)

        od, record = self.release(
            geopriv.flows,
            data.gdf,
            feedback,
            regions=regions.gdf,
            traj_id=traj_id,
            time=time,
            region_id=region_id,
            outside=self.OUTSIDE_RULES[self.parameterAsEnum(parameters, self.OUTSIDE, context)],
            rng=rng,
            **options,
        )

        dest = self.write_frame(
            parameters,
            self.OUTPUT,
            context,
            od,
            self.NEW_COLUMNS,
            data.crs,
            self.wkb_type(od.geometry.values, QgsWkbTypes.LineString, QgsWkbTypes.MultiLineString),
            feedback=feedback,
        )
        self.report_release(feedback, record)
        self.report(feedback, record, ("regions", "trip_rule", "outside"))
        return {
            self.OUTPUT: dest,
            self.N_CELLS: record.get("n_cells", len(od)),
            self.PROVENANCE: self.provenance_json(record),
        }
