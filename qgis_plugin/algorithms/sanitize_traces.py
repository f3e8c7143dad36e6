"""Sanitize traces: ``geopriv.sanitize_traces`` on a point layer of traces, plus its budget ledger."""

from __future__ import annotations

import math

from qgis.core import QgsProcessingException, QgsProcessingOutputNumber, QgsProcessingParameterFeatureSink

from .base import BUDGET_KEYWORDS, RELEASE_KEYWORDS, TYPE_POINTS, GeoprivAlgorithm, library_default
from .layers import check_new_fields
from .parameters import Choice, Field, Number, Source, add_parameters

LN10 = math.log(10.0)


class SanitizeTraces(GeoprivAlgorithm):
    NAME = "sanitizetraces"
    DISPLAY_NAME = "Sanitize traces (predictive mechanism)"
    GROUP = "Traces"
    GROUP_ID = "traces"
    GEOPRIV_API = ("sanitize_traces", "trace_ledger", "make_rng")
    GEOPRIV_KEYWORDS = {"sanitize_traces": RELEASE_KEYWORDS + BUDGET_KEYWORDS}
    RELEASE_FUNCTION = "sanitize_traces"
    PERSON_DEFAULT = "TRAJ_ID_FIELD"  # the library's default person: the trace id
    BUDGET_CHARGE = (
        "each trace's person was charged the trace's worst case, then given back what the ledger says "
        "the trace did not spend"
    )
    HELP = """<p>Releases location <b>traces</b> (the points one user queries a service from, over time) within a
<b>privacy budget per trace</b>, with the <b>predictive mechanism</b> of Chatzikokolakis, Palamidessi and Stronati
(PETS 2014) or with independent planar Laplace noise. Each trace (rows sharing the <b>trace id field</b>,
ordered by the <b>time field</b>) gets the total budget: level within radius (metres), or epsilon per metre, for
the whole trace. With the predictive method each point is first compared, by a private test, with a prediction
from what was already released; if the test passes the prediction is reported at the cost of the test only,
otherwise fresh noise is drawn.</p>
<p><b>Budget manager</b>: <i>fixed rate</i> spends on average the <b>budget rate</b> fraction of the budget per
point (0.033: about 30 points per trace) and gives the best accuracy at that rate; <i>fixed utility</i> aims at
the <b>accuracy (metres)</b> for every noisy point and covers as many points as the budget allows. When a trace's
budget runs out, its remaining points are written without geometry (default), with the trace's last released
point, or the algorithm fails and writes nothing.</p>
<p>Output: the input points with their attributes and CRS, the released location as geometry, and three fields
per point: <b>predicted</b> (the released point is the prediction), <b>status</b> (noise, predicted, skipped or
exhausted) and <b>epsilon_spent</b> (budget per metre spent at that point). The <b>ledger</b> table has one row
per trace: queries, released, noise, predicted, skipped, exhausted, tests, budget, spent, remaining, ...</p>
<p>Noise is drawn in a plane fixed by public information: a projected layer's CRS over its area of use, or, for a
<b>longitude/latitude</b> layer, an equidistant projection centred on the <b>public study area</b> (advanced; any
CRS), which such layers need. Choose it without looking at individual points (a city or region boundary, round
numbers; never the input layer's extent): every point must lie inside it (features outside are refused, named by
feature id). Released points are snapped to a <b>public lattice</b> (advanced: <b>grid step</b> in ground metres;
empty: 1 m); <b>continuous output</b> releases unrounded coordinates, with no finite-precision bound. The output keeps
every attribute: columns that hold the true locations stop the algorithm, which names them, unless listed in
<b>keep these attribute columns</b>. Features in the order of the trace id and time fields are fine (that order is
public; without either field the feature order is taken as the time order and kept), but any other spatial order
(a Hilbert-sorted FlatGeobuf file, a spatial join) would be published with the release and stops the algorithm:
shuffle the features first ('Order by expression' with <code>randf()</code>), or tick <b>the row order is public</b>
(advanced) if it is.</p>
<p>Time stamps may be date-time fields, ISO 8601 text or numbers of seconds; they are public (they order the
trace and drive the optional time skip rule). Leave the <b>random seed</b> empty for a real release.</p>"""

    INPUT = "INPUT"
    TRAJ_ID = "TRAJ_ID_FIELD"
    TIME = "TIME_FIELD"
    METHOD = "METHOD"
    BUDGET = "BUDGET"
    RATE = "RATE"
    ACCURACY = "ACCURACY"
    SKIP_SPEED = "SKIP_SPEED"
    STALE_AFTER = "STALE_AFTER"
    PREDICTOR = "PREDICTOR"
    ON_EXHAUSTED = "ON_EXHAUSTED"
    ETA = "ETA"
    GAMMA = "GAMMA"
    DELTA = "DELTA"
    PREDICTION_RATE = "PREDICTION_RATE"
    OUTPUT = "OUTPUT"
    LEDGER = "LEDGER"

    METHODS = ["predictive", "independent"]
    BUDGETS = ["fixed_rate", "fixed_utility"]
    PREDICTORS = ["parrot", "cluster_mean"]
    EXHAUSTED = ["empty", "last", "fail"]
    NEW_COLUMNS = ("predicted", "status", "epsilon_spent")

    @staticmethod
    def default(parameter):
        """The library's default of a sanitize_traces keyword (the plugin has none of its own)."""
        return library_default("sanitize_traces", parameter)

    def initAlgorithm(self, config=None):  # noqa: N802
        add_parameters(self, self.trace_table())
        self.add_privacy_parameters(
            level=LN10,
            radius=100.0,
            level_label="Privacy level of each whole trace within the radius (2.303 = ln 10)",
            epsilon_label="Epsilon per trace (privacy loss per ground metre; if set, replaces level and radius)",
        )
        add_parameters(self, self.budget_table())
        add_parameters(self, self.advanced_table())
        self.add_trace_release_parameters()
        self.add_seed_parameter()
        self.addParameter(QgsProcessingParameterFeatureSink(self.OUTPUT, "Sanitized traces", TYPE_POINTS))
        self.addParameter(QgsProcessingParameterFeatureSink(self.LEDGER, "Budget ledger (one row per trace)"))
        self.addOutput(QgsProcessingOutputNumber("N_RELEASED", "Points released"))
        self.addOutput(QgsProcessingOutputNumber("N_EXHAUSTED", "Points not released (budget exhausted)"))
        self.add_provenance_output()

    def trace_table(self) -> tuple:
        """The layer, its trace id and time fields, and the method (the first parameters of the dialog)."""
        return (
            Source(self.INPUT, "Points of the traces", (TYPE_POINTS,)),
            Field(
                self.TRAJ_ID,
                "Trace id field (one budget per trace; empty: all points are one trace)",
                self.INPUT,
                optional=True,
            ),
            Field(
                self.TIME,
                "Time field (date-time, ISO text or seconds; empty: the layer's feature order)",
                self.INPUT,
                optional=True,
            ),
            Choice(
                self.METHOD,
                "Method",
                ("Predictive (private test against a prediction)", "Independent planar Laplace noise"),
                self.METHODS,
                self.default("method"),
            ),
        )

    def budget_table(self) -> tuple:
        """The budget manager and what it spends: after the privacy level, before the advanced parameters."""
        return (
            Choice(
                self.BUDGET,
                "Budget manager",
                ("Fixed rate (budget rate per point)", "Fixed utility (accuracy in metres)"),
                self.BUDGETS,
                self.default("budget"),
            ),
            Number(
                self.RATE,
                "Budget rate: fraction of the trace's budget per point, on average (fixed rate)",
                0.033,
                minimum=0.0,
                maximum=1.0,
            ),
            Number(
                self.ACCURACY,
                "Accuracy of each noisy point, alpha(delta) (metres; fixed utility)",
                3000.0,
                minimum=0.0,
            ),
            Choice(
                self.ON_EXHAUSTED,
                "When a trace's budget runs out",
                (
                    "Write its remaining points without geometry",
                    "Write the trace's last released point",
                    "Fail and write nothing",
                ),
                self.EXHAUSTED,
                self.default("on_exhausted"),
            ),
        )

    def advanced_table(self) -> tuple:
        """The time skip rule, the predictor and the mechanism's constants (advanced; the library's defaults)."""
        default = self.default
        return (
            Number(
                self.SKIP_SPEED,
                "Time skip rule: assumed top speed (metres per second; empty: no skipping)",
                minimum=0.0,
                optional=True,
                advanced=True,
            ),
            Number(
                self.STALE_AFTER,
                "Skip the test when the last noisy point is older than (seconds; empty: never)",
                minimum=0.0,
                optional=True,
                advanced=True,
            ),
            Choice(
                self.PREDICTOR,
                "Prediction (predictive method)",
                ("Parrot: the last released point", "Cluster mean: mean of the noisy points at the current place"),
                self.PREDICTORS,
                default("predictor"),
                advanced=True,
            ),
            Number(self.ETA, "Utility slack eta (0.5-1)", default("eta"), minimum=0.0, advanced=True),
            Number(self.GAMMA, "Threshold to test-noise ratio gamma", default("gamma"), minimum=0.0, advanced=True),
            Number(
                self.DELTA,
                "Accuracy level delta of alpha(delta) (0-1)",
                default("delta"),
                minimum=0.0,
                maximum=1.0,
                advanced=True,
            ),
            Number(
                self.PREDICTION_RATE,
                "Prior prediction rate (fixed rate, 0-1)",
                default("prediction_rate"),
                minimum=0.0,
                maximum=1.0,
                advanced=True,
            ),
        )

    def add_trace_release_parameters(self):
        """The public lattice, study area, kept columns and row order, with what they mean for traces."""
        from geopriv.frame import DEFAULT_GRID_M

        self.add_release_parameters(
            self.INPUT,
            "sanitize_traces",
            grid_help="Released points are snapped to a public lattice of this step in ground metres, anchored at the "
            "CRS's origin (in longitude/latitude, at the equator); the provenance bounds what rounding adds to "
            f"each noisy draw's epsilon. Empty: the library's automatic step (grid=\"auto\"): {DEFAULT_GRID_M:g} m.",
            bounds_help="Needed for longitude/latitude layers: noise is drawn in an equidistant projection centred on "
            "it. Empty: a projected layer's CRS over its area of use.",
            keep_order_help="Traces: features in the order of the trace id and time fields are never refused (that "
            "order is public); without either field the features' order is taken as the time order and "
            "kept without this option. Tick it only for another order that is public.",
        )

    def options(self, parameters, context, feedback) -> dict:
        """sanitize_traces' keyword arguments from the parameters (only those that apply)."""
        number = lambda name: self.parameterAsDouble(parameters, name, context)  # noqa: E731
        method = self.METHODS[self.parameterAsEnum(parameters, self.METHOD, context)]
        budget = self.BUDGETS[self.parameterAsEnum(parameters, self.BUDGET, context)]
        options = dict(
            self.privacy(parameters, context, feedback),
            method=method,
            budget=budget,
            eta=number(self.ETA),
            gamma=number(self.GAMMA),
            delta=number(self.DELTA),
        )
        if budget == "fixed_rate":
            options.update(rate=number(self.RATE), prediction_rate=number(self.PREDICTION_RATE))
        else:
            options["accuracy"] = number(self.ACCURACY)
        if method == "predictive":
            options.update(
                predictor=self.PREDICTORS[self.parameterAsEnum(parameters, self.PREDICTOR, context)],
                skip_speed=self.optional_number(parameters, self.SKIP_SPEED, context),
                stale_after=self.optional_number(parameters, self.STALE_AFTER, context),
            )
        else:
            for name in (self.SKIP_SPEED, self.STALE_AFTER):
                if self.is_set(parameters, name):
                    feedback.pushWarning(
                        f"'{self.parameterDefinition(name).description()}' applies to the "
                        "predictive method only; ignored."
                    )
        return options

    def compute(self, parameters, context, feedback):
        import geopriv

        budget = self.budget_options(parameters, context, feedback, geopriv.sanitize_traces)  # before any work
        traj_id = (self.field_names(parameters, self.TRAJ_ID, context) or [None])[0]
        time = (self.field_names(parameters, self.TIME, context) or [None])[0]
        columns = [c for c in dict.fromkeys((traj_id, time)) if c is not None]
        data = self.read_layer(parameters, self.INPUT, context, feedback, columns=columns, all_fields=True)
        check_new_fields(data.fields, self.NEW_COLUMNS)  # before the release: a clash would waste it
        options = self.options(parameters, context, feedback)
        options.update(self.release_options(parameters, context, feedback, data, geopriv.sanitize_traces))
        options.update(budget)
        on_exhausted = self.EXHAUSTED[self.parameterAsEnum(parameters, self.ON_EXHAUSTED, context)]
        options["on_exhausted"] = "empty" if on_exhausted == "fail" else on_exhausted
        rng = self.random_source(parameters, context, feedback)

        # One call for the whole layer: the library gives every trace its budget and keeps the ledger.
        # release() passes progress= (sanitize_traces takes it): the library reports from inside its run, so the
        # bar moves over 10-90 % while traces are released and a cancel stops the run at its next report.
        released, record = self.release(
            geopriv.sanitize_traces, data.gdf, feedback, traj_id=traj_id, time=time, rng=rng, **options
        )
        ledger = geopriv.trace_ledger(released)
        exhausted = ledger[ledger["exhausted"] > 0]
        if len(exhausted):
            shown = ", ".join(str(t) for t in exhausted.index[:10]) + (" ..." if len(exhausted) > 10 else "")
            message = (
                f"The budget of {len(exhausted)} trace(s) ran out before their last point ({shown}): "
                f"{int(exhausted['exhausted'].sum())} point(s) were not released. A larger epsilon (or level, "
                "or smaller radius), a lower budget rate, a coarser accuracy or the time skip rule covers more "
                "points."
            )
            if on_exhausted == "fail":
                raise QgsProcessingException(f"{self.displayName()}: {message} Nothing was written.")
            feedback.pushWarning(message)

        dest = self.write_points(parameters, self.OUTPUT, context, data, released, self.NEW_COLUMNS, feedback)
        ledger_dest = self.write_table(parameters, self.LEDGER, context, ledger.reset_index(names=traj_id or "trace"))
        self.report(
            feedback,
            record,
            (
                "mechanism",
                "epsilon_per_m",
                "budget",
                "traces",
                "frame",
                "working_crs",
                "grid_m",
                "declared_bounds",
                "kept_columns",
                "n",
            ),
        )
        self.report(feedback, record, ("finite_precision",))
        n_released = record.get("n_released")
        return {
            self.OUTPUT: dest,
            self.LEDGER: ledger_dest,
            "N_RELEASED": int(ledger["released"].sum()) if n_released is None else n_released,
            "N_EXHAUSTED": int(ledger["exhausted"].sum()),
            self.PROVENANCE: self.provenance_json(record),
        }
