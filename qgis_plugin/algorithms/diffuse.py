"""Diffuse a location over a network: ``geopriv.diffuse_locations`` from one person to everyone connected to her."""

from __future__ import annotations


from dataclasses import dataclass

import numpy as np
import pandas as pd
from qgis.core import (
    QgsProcessing,
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterString,
    QgsWkbTypes,
)

from geopriv.adapters import Wording, edge_list, epsilon_policy, line_network, person_id

from .base import BOUNDS_LABEL, GRID_LABEL, TYPE_POINTS, GeoprivAlgorithm, library_default
from .layers import feature_for, fields_for, to_qgis
from .parameters import Choice, Extent, Field, Number, Row, Source, add_parameters

TYPE_LINES = QgsProcessing.TypeVectorLine
TYPE_TABLES = QgsProcessing.TypeVector  # any vector layer, with or without geometry (a CSV table)

#: the dialog's words for what geopriv.adapters refuses (the parameters it names)
WORDING = Wording(
    not_a_person="source '{value}' is not a person of the people layer (the ids are {described}).",
    bad_ids="{what} is empty or not a whole number at {n} feature(s) (feature ids {labels}); it must hold people "
    "ids ({described}).",
    unknown_ids="the network table refers to {n} id(s) that are not people of the people layer ({shown}); the ids "
    "are {described}.",
    same_columns="the network table's two id fields must be different fields.",
)


@dataclass(frozen=True)
class Text(Row):
    """A line of text (no default)."""

    def build(self):
        return QgsProcessingParameterString(self.name, self.label, defaultValue=None, optional=self.optional)


class Diffuse(GeoprivAlgorithm):
    NAME = "diffuse"
    DISPLAY_NAME = "Diffuse a location over a network (graded release)"
    GROUP = "Release points"
    GROUP_ID = "points"
    GEOPRIV_API = ("diffuse_locations", "epsilon_of_distance", "make_rng")
    GEOPRIV_KEYWORDS = {
        "diffuse_locations": (
            "source",
            "graph",
            "distance",
            "tolerance",
            "bounds",
            "grid",
            "rng",
            "budget_store",
            "person",
        ),
        "epsilon_of_distance": ("kind",),
    }
    HELP = """<p>Tells <b>one person's location</b> (the <b>source</b>) to <b>everyone connected to her</b> in a
public network, the more accurately the closer they are (Koufogiannis and Pappas, "Diffusing private data over
networks": the private Markov jump process). Recipient <i>j</i>, at network distance <i>d</i> from the source, gets
her location with planar Laplace noise at &epsilon;(<i>d</i>) per ground metre: alone, <i>j</i> has
&epsilon;(<i>d</i>)-geo-indistinguishability. All answers come from <b>one secret noise path</b>, so <b>any group of
recipients</b> pooling their answers (friends comparing notes, fake accounts) <b>learns no more than its closest
member</b>: the release costs the largest epsilon, not the sum (the <i>coalition epsilon</i>). Neighbours at similar
distances often get identical answers; that is part of the design.</p>
<p><b>People</b>: a point layer, one point per person, named by <b>feature id</b> or by the values of the <b>id
field</b> (unique). <b>Source</b>: the id of the person whose location is released. Only her location is released;
no attribute of anyone is.</p>
<p><b>Network</b> (public), either a <b>line layer</b> whose lines join two people's points (line ends matched to
points within the <b>tolerance</b>, in the people layer's CRS units; lines in another CRS are reprojected), or a
<b>table of id pairs</b> (any layer, e.g. a CSV without geometry) with its two <b>id fields</b>: one edge per row.
<b>Network distance</b>: <i>hops</i> (edges on a shortest path) or <i>resistance</i> (effective resistance, which
counts every path). People <b>not connected</b> to the source get <b>no answer</b>: the log names them (by id) and
<b>UNREACHABLE</b> counts them.</p>
<p><b>Epsilon by distance</b>, never larger for a farther person (an increasing policy is refused): either an
<b>epsilon table</b> of <code>distance:epsilon</code> pairs, epsilon per metre, e.g. <code>1:ln4/50 4:ln4/2000</code>
(ln 4 within 50 m for friends, ln 4 within 2 km at 4 hops and beyond; <code>ln</code> and <code>/</code> are
understood), interpolated linearly (advanced: or as steps), constant before the first and after the last distance;
or <b>A</b> and <b>B</b> for &epsilon;(<i>d</i>) = exp(B &minus; A <i>d</i>) per metre, the paper's form (B is the
natural log of epsilon at distance 0: B = ln 0.03 = &minus;3.51 gives 0.03 per metre).</p>
<p>The noise is drawn in a plane fixed by public information: a projected layer's CRS over its area of use, or
the <b>public study area</b> (any CRS), which longitude/latitude and Web Mercator layers need. Choose it without
looking at individual points (a city or study-region boundary, round numbers); never the people layer's extent
(refused). Answers are snapped to a <b>public lattice</b> (advanced: <b>grid step</b> in ground metres; empty: 1 m,
finer for a large epsilon) and the finite-precision bound is reported per recipient.</p>
<p><b>Output</b>: one point per recipient, in the people layer's CRS, with <b>recipient</b> (its id),
<b>network_distance</b>, <b>epsilon_per_m</b> and <b>effective_epsilon_per_m</b>; no other attribute. Recipients
are written in the order of their ids, never in the layer's feature order (which is often spatial); ids assigned in
spatial order are refused, because they are published. The
provenance (log and <b>PROVENANCE</b>) records the epsilon range, the coalition epsilon, the distance, the number of
recipients and of unreachable people, the frame and the lattice.</p>
<p><b>The noise path is not saved</b>: with it anyone would remove the noise from every answer. So every run is a
<b>fresh release</b> that spends its epsilon again, and a group holding answers from two runs may average them. To
answer people who join later from the same path (consistently, without spending again below the largest epsilon)
use the library (<code>geopriv.diffuse_locations(..., path=...)</code>) or the command line
(<code>geopriv diffuse --save-path</code> / <code>--path</code>), which keep the secret path in a private file and
refuse it for any other person, value, CRS, study area or grid. They can also release an attribute's value (e.g. an
infection bit) instead of the location. Leave the <b>random seed</b>
empty for a real release.</p>"""

    INPUT = "INPUT"
    ID_FIELD = "ID_FIELD"
    SOURCE = "SOURCE"
    NETWORK = "NETWORK"
    TOLERANCE = "TOLERANCE"
    EDGES = "EDGES"
    EDGE_FROM = "EDGE_FROM"
    EDGE_TO = "EDGE_TO"
    DISTANCE = "DISTANCE"
    EPSILON_TABLE = "EPSILON_TABLE"
    EPSILON_KIND = "EPSILON_KIND"
    EXP_A = "EXP_A"
    EXP_B = "EXP_B"
    OUTPUT = "OUTPUT"
    RECIPIENTS_OUT = "RECIPIENTS"
    UNREACHABLE_OUT = "UNREACHABLE"
    COALITION_OUT = "COALITION_EPSILON_PER_M"

    RELEASE_FUNCTION = "diffuse_locations"
    PERSON_DEFAULT = "ID_FIELD"  # the library's default person: the source's id
    BUDGET_CHARGE = "the source's person was charged the largest effective epsilon of the answers"

    DISTANCES = ["hops", "resistance"]
    KINDS = ["linear", "step"]

    def initAlgorithm(self, config=None):  # noqa: N802
        add_parameters(self, self.people_parameters())
        add_parameters(self, self.network_parameters())
        add_parameters(self, self.epsilon_parameters())
        self.add_seed_parameter()
        self.addParameter(
            QgsProcessingParameterFeatureSink(self.OUTPUT, "Answers (one point per recipient)", TYPE_POINTS)
        )
        self.addOutput(QgsProcessingOutputNumber(self.RECIPIENTS_OUT, "Number of recipients"))
        self.addOutput(
            QgsProcessingOutputNumber(self.UNREACHABLE_OUT, "People not connected to the source (no answer)")
        )
        self.addOutput(
            QgsProcessingOutputNumber(self.COALITION_OUT, "Coalition epsilon per metre (the largest released)")
        )
        self.add_provenance_output()

    def people_parameters(self) -> tuple:
        """The people, their ids and the source, as a table (the dialog's first rows)."""
        return (
            Source(self.INPUT, "People (one point per person)", (TYPE_POINTS,)),
            Field(
                self.ID_FIELD,
                "Id field of the people (unique; empty: the feature id)",
                self.INPUT,
                optional=True,
                help="Names the people in the source parameter, in the network table and in the output's "
                "'recipient' field. Empty: QGIS feature ids.",
            ),
            Text(
                self.SOURCE,
                "Source: id of the person whose location is released (feature id, or the id field's value)",
                help="Only this person's location is released, to every other person connected to her.",
            ),
        )

    def network_parameters(self) -> tuple:
        """The public network, as lines or as a table of id pairs, and the network distance."""
        return (
            Source(
                self.NETWORK,
                "Network as lines between the people's points (or give a table below)",
                (TYPE_LINES,),
                optional=True,
                help="Each line joins the two people whose points are at its ends (its first and last vertex). "
                "Lines in another CRS are reprojected to the people layer's.",
            ),
            Number(
                self.TOLERANCE,
                "Tolerance for line ends (people layer's CRS units)",
                library_default("diffuse_locations", "tolerance"),
                minimum=0.0,
                help="Largest distance between a line end and its person's point; 0: exactly at the point. An "
                "end within the tolerance of no point, or of two, stops the algorithm naming the line.",
            ),
            Source(
                self.EDGES,
                "Network as a table of id pairs (any layer, e.g. a CSV; or give lines above)",
                (TYPE_TABLES,),
                optional=True,
                help="One edge per row: the ids (feature ids, or the id field's values) of two people.",
            ),
            Field(self.EDGE_FROM, "Table: field with the id of one end", self.EDGES, optional=True),
            Field(self.EDGE_TO, "Table: field with the id of the other end", self.EDGES, optional=True),
            Choice(
                self.DISTANCE,
                "Network distance",
                ("hops: edges on a shortest path", "resistance: effective resistance (counts every path)"),
                tuple(self.DISTANCES),
                library_default("diffuse_locations", "distance"),
            ),
        )

    def epsilon_parameters(self) -> tuple:
        """Epsilon by network distance (a table, or A and B), the public study area and the lattice."""
        import inspect

        import geopriv

        return (
            Text(
                self.EPSILON_TABLE,
                "Epsilon per ground metre by network distance: distance:epsilon pairs, e.g. 1:ln4/50 "
                "4:ln4/2000 (or give A and B)",
                optional=True,
                help="Epsilon must not increase with distance. Between the distances: linear interpolation "
                "(advanced: steps); the first epsilon below the first distance, the last beyond the last. 'ln' and "
                "'/' are understood: ln4/50 is ln(4)/50.",
            ),
            Number(
                self.EXP_A,
                "A in epsilon(d) = exp(B - A d) per ground metre (>= 0: decrease per unit of distance)",
                optional=True,
            ),
            Number(
                self.EXP_B,
                "B in epsilon(d) = exp(B - A d) per ground metre (ln of epsilon at distance 0)",
                optional=True,
            ),
            Extent(
                self.BOUNDS,
                BOUNDS_LABEL,
                optional=True,
                help="The area your data is about, in any CRS (it is converted to the people layer's CRS). It is "
                "public: choose it without looking at individual points (a city or study-region boundary, round "
                "numbers); it fixes the plane the noise is drawn in and is written in the provenance. The source "
                "must lie inside it. Never use 'Calculate from layer' on the people layer itself (refused). Empty: "
                "the CRS's area of use, which longitude/latitude and Web Mercator layers cannot use.",
            ),
            Choice(
                self.EPSILON_KIND,
                "Epsilon table between its distances",
                ("Linear interpolation", "Steps"),
                tuple(self.KINDS),
                inspect.signature(geopriv.epsilon_of_distance).parameters["kind"].default,
                advanced=True,
            ),
            Number(
                self.GRID,
                GRID_LABEL,
                optional=True,
                minimum=0.0,
                advanced=True,
                help="Answers are snapped to a public lattice of this step in ground metres, fixed by the largest "
                "epsilon, with the finite-precision effective epsilon reported per recipient. Empty: the "
                'library\'s automatic step (grid="auto").',
            ),
        )

    # --- parameters -> geopriv arguments ------------------------------------------------------
    def fail(self, message):
        return QgsProcessingException(f"{self.displayName()}: {message}")

    def epsilon_policy(self, parameters, context):
        """The epsilon-of-distance schedule (geopriv.adapters): the table, or exp(B - A d); exactly one of them."""
        table = (
            self.parameterAsString(parameters, self.EPSILON_TABLE, context)
            if self.is_set(parameters, self.EPSILON_TABLE)
            else ""
        )
        a = self.optional_number(parameters, self.EXP_A, context)
        b = self.optional_number(parameters, self.EXP_B, context)
        kind = self.KINDS[self.parameterAsEnum(parameters, self.EPSILON_KIND, context)] if table.strip() else None
        return epsilon_policy(table, (a, b), kind=kind)

    def people(self, parameters, context, feedback):
        """The people layer indexed by id (feature id, or the id field's values), and how the ids are described."""
        field = (
            self.parameterAsString(parameters, self.ID_FIELD, context) if self.is_set(parameters, self.ID_FIELD) else ""
        )
        data = self.read_layer(
            parameters, self.INPUT, context, feedback, columns=[field] if field else [], progress=(0.0, 10.0)
        )
        gdf = data.gdf
        if not field:
            return data, gdf, "feature ids"
        from geopriv.people import index_people

        gdf = index_people(gdf, field, rows="feature(s)", labels="feature ids")
        return data, gdf, f"values of the id field '{field}'"

    def source(self, parameters, context, labels, described):
        text = self.parameterAsString(parameters, self.SOURCE, context).strip()
        return person_id(text, labels, described=described, wording=WORDING)

    def lines(self, parameters, context, feedback, people):
        """The line layer as a GeoDataFrame in the people's CRS (geopriv.adapters.line_network)."""
        gdf = self.read_layer(parameters, self.NETWORK, context, feedback, progress=(10.0, 20.0)).gdf
        if gdf.crs is None:
            feedback.pushWarning("The network's line layer has no CRS: it is taken to be the people layer's.")
        return line_network(gdf, people.crs)

    def edges(self, parameters, context, feedback, labels, described):
        """The table's two id fields as a DataFrame of people ids (geopriv.adapters.edge_list; one edge per row)."""
        names = [
            self.parameterAsString(parameters, p, context) if self.is_set(parameters, p) else ""
            for p in (self.EDGE_FROM, self.EDGE_TO)
        ]
        if not all(names):
            raise self.fail(
                "choose the two id fields of the network table (one edge per row: the ids of its two ends)."
            )
        if names[0] == names[1]:  # before the table is read
            raise self.fail(WORDING.same_columns)
        table = self.read_layer(parameters, self.EDGES, context, feedback, columns=names, progress=(10.0, 20.0)).gdf
        return edge_list(
            table,
            names,
            labels,
            what=lambda name: f"the network table's field '{name}'",
            described=described,
            wording=WORDING,
        )

    # --- the run ------------------------------------------------------------------------------
    def compute(self, parameters, context, feedback):
        import geopriv

        lines_given, table_given = self.is_set(parameters, self.NETWORK), self.is_set(parameters, self.EDGES)
        if lines_given == table_given:
            raise self.fail(
                "give the network either as lines between the people's points or as a table of id pairs (one of them)."
            )
        budget = self.budget_options(parameters, context, feedback, geopriv.diffuse_locations)  # before any work
        epsilon = self.epsilon_policy(parameters, context)
        data, people, described = self.people(parameters, context, feedback)
        if budget.get("person") is not None and budget["person"] == people.index.name:
            del budget["person"]  # the id field is the index: the library's default person (the source's id)
        source = self.source(parameters, context, people.index, described)
        options = {"distance": self.DISTANCES[self.parameterAsEnum(parameters, self.DISTANCE, context)]}
        if lines_given:
            graph = self.lines(parameters, context, feedback, people)
            options["tolerance"] = self.parameterAsDouble(parameters, self.TOLERANCE, context)
        else:
            graph = self.edges(parameters, context, feedback, people.index, described)
        bounds = self.public_study_area(parameters, context, data)  # in the people's CRS; never their extent
        if bounds is not None:
            options["bounds"] = bounds
        grid = self.optional_number(parameters, self.GRID, context)
        if grid is not None:
            options["grid"] = grid
        rng = self.random_source(parameters, context, feedback)

        self.check_cancelled(feedback)
        feedback.setProgress(20)
        answers, _secret = geopriv.diffuse_locations(
            people, epsilon, source=source, graph=graph, rng=rng, **options, **budget
        )
        del _secret  # the noise path is SECRET and is never kept or written: a later run is a fresh release
        feedback.setProgress(90)
        self.check_cancelled(feedback)
        record = self.provenance(answers)
        if budget:
            self.report_budget(feedback, record)

        dest = self.write_answers(parameters, context, data, answers, feedback)
        self.report(
            feedback,
            record,
            (
                "mechanism",
                "distance",
                "recipients",
                "unreachable",
                "epsilon_min_per_m",
                "epsilon_max_per_m",
                "coalition_epsilon_per_m",
                "effective_epsilon_per_m",
                "frame",
                "frame_area",
                "grid_m",
                "declared_bounds",
            ),
        )
        self.report(feedback, record, ("definition",))
        self.report(feedback, record, ("finite_precision",))
        feedback.pushInfo(
            "The noise path was not kept (it is secret: with it anyone removes the noise). Running "
            "again is a fresh release that spends its epsilon again."
        )
        return {
            self.OUTPUT: dest,
            self.RECIPIENTS_OUT: record.get("recipients"),
            self.UNREACHABLE_OUT: record.get("unreachable"),
            self.COALITION_OUT: record.get("coalition_epsilon_per_m"),
            self.PROVENANCE: self.provenance_json(record),
        }

    def write_answers(self, parameters, context, data, answers, feedback, progress=(90.0, 100.0)):
        """One point per recipient in the people's CRS: recipient, network_distance, epsilon_per_m,
        effective_epsilon_per_m (no attribute of the people layer)."""
        columns = ["recipient", "network_distance", "epsilon_per_m", "effective_epsilon_per_m"]
        table = pd.DataFrame({"recipient": answers.index.to_numpy(), **{c: answers[c].to_numpy() for c in columns[1:]}})
        fields = fields_for(table, columns)
        sink, dest_id = self.parameterAsSink(parameters, self.OUTPUT, context, fields, QgsWkbTypes.Point, data.crs)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, self.OUTPUT))
        from qgis.core import QgsGeometry, QgsPointXY

        geoms = answers.geometry.values
        xs, ys = (np.asarray(geoms.x), np.asarray(geoms.y)) if len(geoms) else (np.empty(0), np.empty(0))
        values = [table[c].to_numpy(dtype=object) for c in columns]
        features = (
            feature_for(
                fields,
                [to_qgis(v[i]) for v in values],
                QgsGeometry.fromPointXY(QgsPointXY(float(xs[i]), float(ys[i]))),
            )
            for i in range(len(table))
        )
        self.add_features(sink, parameters, self.OUTPUT, features, len(table), feedback, progress)
        return dest_id
