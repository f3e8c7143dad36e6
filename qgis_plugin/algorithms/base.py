"""The shared base of every geopriv algorithm.

A subclass sets its names and help, declares its parameters in ``initAlgorithm`` (with the
helpers here for the common ones, and tables of :mod:`.parameters` rows for its own) and implements ``compute(parameters, context, feedback)``:
read the inputs with :meth:`read_layer` / :meth:`raster_path`, make *one* geopriv call,
write the outputs with :meth:`write_points` / :meth:`write_table`, after refusing outputs that
are inputs (:meth:`check_outputs`).  The base turns every error into a
:class:`QgsProcessingException` whose text is ``geopriv.exceptions.user_message`` (geopriv's own
messages shown, other libraries' texts withheld: they may quote data values), its warnings into
feedback warnings, drives the progress bar and honours cancellation (see :meth:`release`).

A release is exactly one geopriv call on the whole layer (:meth:`release`): the library owns
the metric frame, the budget accounting and the provenance record, which the algorithm reports
and outputs unmodified.  Nothing random is kept between runs: :meth:`random_source` is called
inside every run, so each run of a batch draws fresh entropy from the operating system unless
the user gives a seed.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import re
import warnings

import numpy as np
import pandas as pd
from qgis.core import (
    QgsFeatureSink,
    QgsProcessing,
    QgsProcessingAlgorithm,
    QgsProcessingException,
    QgsProcessingOutputString,
    QgsProcessingParameterBoolean,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterExtent,
    QgsProcessingParameterField,
    QgsProcessingParameterNumber,
    QgsProcessingParameterString,
    QgsWkbTypes,
)
from qgis.PyQt.QtGui import QIcon

from .layers import Cancelled, PointData, feature_for, fields_for, read_features, to_qgis

ICON = os.path.join(os.path.dirname(os.path.dirname(__file__)), "icon.svg")

LN4 = math.log(4.0)


# What to do in QGIS, appended to the library's message for these geopriv errors.
QGIS_HINTS = {
    "MissingCRSError": "In QGIS: set the layer's CRS (Layer Properties > Source, or the 'Assign projection' "
    "algorithm) to the CRS its coordinates are in, then run again.",
    "GeometryError": "In QGIS, the labels are feature ids; 'Multipart to singleparts' splits MultiPoints, "
    "'Centroids' or 'Point on surface' turn lines and polygons into points, and 'Remove null "
    "geometries' drops features without geometry.",
    "LocationAttributeError": "In QGIS, the 'Drop field(s)' algorithm removes fields.",
}
# GeometryErrors about where points lie (outside the public study area, the CRS, the map) rather than what they are
OUTSIDE_HINT = "In QGIS, the labels are feature ids."
# The library's keyword arguments of a release and the labels of the parameters that set them (the
# labels are also how the library's own messages name them for QGIS: "Keep these attribute columns").
GRID_LABEL = "Grid step of the released points (metres; empty: the library's automatic step)"
CONTINUOUS_LABEL = "Continuous output (unrounded coordinates; no finite-precision bound)"
BOUNDS_LABEL = "Public study area"
KEEP_LABEL = "Keep these attribute columns (location-like columns are refused otherwise)"
KEEP_ORDER_LABEL = "The row order is public (keep it)"
#: the library's label for the order of the rows in ``keep=`` (geopriv.attributes.ROW_ORDER)
ROW_ORDER = "<row order>"
#: what the release parameters pass (the plugin refuses to load with a geopriv whose release lacks one)
RELEASE_KEYWORDS = ("grid", "continuous", "bounds", "keep")
KEYWORD_PARAMETERS = {
    "bounds=": BOUNDS_LABEL,
    "grid=": "Grid step of the released points",
    "continuous=": "Continuous output",
}
# The lifetime budget store (geopriv.BudgetStore): the library's budget_store= and person=, on every release
# algorithm. The labels are how the library's own QGIS advice names them ("the 'Budget store' parameter",
# "a 'Person id field'"). Text, not a file parameter: a file parameter refuses a postgresql:// URL.
BUDGET_STORE_LABEL = "Budget store (SQLite file or postgresql:// URL)"
PERSON_LABEL = "Person id field"
#: the library keywords the budget parameters set, in the order (BUDGET_STORE, PERSON)
BUDGET_KEYWORDS = ("budget_store", "person")
#: how to create a store and grant budgets (the library's command line: QGIS has no algorithm for it)
GRANT_ADVICE = (
    "create it and grant budgets first with the command line: geopriv budget grant STORE --unit UNIT "
    "--total T (UNIT epsilon/m for perturb, sanitize traces and diffuse; epsilon for synthesize, counts "
    "per cell, heatmaps and flows)"
)

# How to shuffle a layer in QGIS (checked on QGIS 3.22: 'Random extract' keeps the layer's order, QGIS expressions
# have no random(), and a GeoPackage output takes a 'fid' field's values as feature ids, i.e. restores the old order).
SHUFFLE_ADVICE = (
    "shuffle the features with the 'Order by expression' algorithm and the expression randf() (a random "
    "number per feature; 'Random extract' keeps the layer's order), and drop any id field numbered in "
    "the old order with 'Drop field(s)', a GeoPackage's 'fid' field too (a GeoPackage output uses it as "
    "the feature id and would list the features in the old order again)"
)
# A LocationAttributeError about the row order: the QGIS way to fix it, or to keep the order deliberately.
ROW_ORDER_HINT = (
    f"In QGIS: {SHUFFLE_ADVICE}, then release the shuffled layer. If the order is public anyway, tick "
    f"the advanced parameter '{KEEP_ORDER_LABEL}' (KEEP_ORDER): the dialog's 'Keep these attribute "
    "columns' list offers fields only."
)


def qgis_hint(exc, message: str):
    """What to do in QGIS for a geopriv error (None: the library's message says it all)."""
    hints = []
    hint = next((QGIS_HINTS[k.__name__] for k in type(exc).__mro__ if k.__name__ in QGIS_HINTS), None)
    if hint == QGIS_HINTS["GeometryError"] and " outside " in message:
        hint = OUTSIDE_HINT  # where the points lie, not what they are
    reasons = getattr(exc, "reasons", None) or {}  # a LocationAttributeError: what it found, by column label
    if hint == QGIS_HINTS["LocationAttributeError"] and reasons and set(reasons) <= {ROW_ORDER}:
        hint = None  # only the row order: no field to drop
    if hint:
        hints.append(hint)
    if ROW_ORDER in reasons:
        hints.append(ROW_ORDER_HINT)
    named = [
        f"{keyword} is the '{label}' parameter"
        for keyword, label in KEYWORD_PARAMETERS.items()
        if keyword in message and label not in message
    ]
    if named:
        hints.append(f"In QGIS, {'; '.join(named)}.")
    return " ".join(hints) or None


def library_default(function, parameter):
    """The default of ``parameter`` in the geopriv function named ``function`` (the library's, not the plugin's)."""
    import geopriv

    return inspect.signature(getattr(geopriv, function)).parameters[parameter].default


def _accepts_progress(function) -> bool:
    """Whether a geopriv function takes ``progress=`` (every release should; older ones may not)."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return "progress" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _json_value(value):
    """JSON for the values json does not know: numpy scalars and arrays, then text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


#: how a QGIS user sees the text of an error whose message the plugin withholds
DEBUG_HINT = (
    "set the environment variable GEOPRIV_TRACEBACK=1 before starting QGIS and run it again to see it "
    "(it may show values from your data)"
)


def error_message(exc) -> str:
    """The text QGIS shows for an exception: ``geopriv.exceptions.user_message`` (shared with the command line).

    geopriv's own errors show their problem and what to do in QGIS only (the library's fix for
    the ``"qgis"`` front end: no Python code, no command-line options); errors that carry no fix
    get the hints of :func:`qgis_hint`.  Any other exception (pandas, pyproj, numpy, GDAL, a bare
    ValueError) shows its type and a generic sentence, never its text, which may quote data
    values such as coordinates.
    """
    from geopriv.exceptions import Fix, shows_message, user_message

    message = user_message(exc, front_end="qgis", debug_hint=DEBUG_HINT)
    if shows_message(exc) and not isinstance(getattr(exc, "fix", None), Fix):
        hint = qgis_hint(exc, message)
        if hint:
            message = f"{message} {hint}"
    return message


def warning_message(warning) -> str:
    """The text QGIS logs for a caught geopriv warning: its problem and what to do in QGIS."""
    from geopriv.exceptions import user_message

    return f"{warning.category.__name__}: {user_message(warning.message, front_end='qgis')}"


def _guarded_init(init):
    """``initAlgorithm`` that cannot take QGIS down: an exception escaping it aborts the QGIS process.

    The error is logged (QGIS's message log, tab "geopriv") and kept; the algorithm then refuses to
    run with that message instead of running with half its parameters.
    """

    def initAlgorithm(self, config=None):  # noqa: N802  (QGIS API)
        try:
            init(self, config)
            if self.RELEASE_FUNCTION:  # every release: the lifetime budget store, declared once here
                self.add_budget_parameters()
        except Exception as exc:  # noqa: BLE001  (anything here would abort QGIS)
            from qgis.core import Qgis, QgsMessageLog

            self.init_error = (
                f"{self.displayName() or type(self).__name__}: its parameters could not be set up "
                f"({error_message(exc)}); install a geopriv that matches the plugin."
            )
            QgsMessageLog.logMessage(self.init_error, "geopriv", Qgis.Critical)

    initAlgorithm.__doc__ = init.__doc__
    initAlgorithm.guarded = True
    return initAlgorithm


class GeoprivAlgorithm(QgsProcessingAlgorithm):
    """Base class: names, help, error mapping, progress, cancellation, layer conversion."""

    #: why initAlgorithm failed (None: it did not); such an algorithm refuses to run
    init_error = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("initAlgorithm")
        if init is not None and not getattr(init, "guarded", False):
            cls.initAlgorithm = _guarded_init(init)

    def checkParameterValues(self, parameters, context):  # noqa: N802
        if self.init_error:
            return False, self.init_error
        refusal = self.budget_store_refusal(parameters, context)
        if refusal:  # before QGIS writes the parameters to its log and history
            return False, refusal
        return super().checkParameterValues(parameters, context)

    NAME = ""
    DISPLAY_NAME = ""
    GROUP = ""
    GROUP_ID = ""
    HELP = ""
    #: geopriv names the algorithm calls: the plugin refuses to load if the library lacks one.
    GEOPRIV_API: tuple = ()
    #: keyword arguments the algorithm passes to geopriv functions: {function name: (keyword, ...)}.
    GEOPRIV_KEYWORDS: dict = {}
    #: the geopriv release function the algorithm calls (None: not a release). A release gets the BUDGET_STORE and
    #: PERSON parameters (added after its initAlgorithm) and passes them as that function's budget_store= and person=.
    RELEASE_FUNCTION = None
    #: the parameter whose field the library charges when PERSON is empty (traces: the trace id field); None: the
    #: library would charge the index, here QGIS feature ids, which are not persons, so a store needs PERSON
    PERSON_DEFAULT = None
    #: whether PERSON serves the budget store only (an advanced field added after initAlgorithm); False: the
    #: algorithm declares the PERSON field itself, as the persons of its own privacy model (the count releases:
    #: the library's user=, the persons whose rows are bounded, who are also the persons a budget store charges)
    PERSON_BUDGET_ONLY = True
    #: what a charged release cost when its record has no cost per row (traces, diffuse), for the log
    BUDGET_CHARGE = "the persons were charged"

    SEED = "SEED"
    PROVENANCE = "PROVENANCE"
    LEVEL = "LEVEL"
    RADIUS = "RADIUS"
    EPSILON = "EPSILON"
    GRID = "GRID"
    CONTINUOUS = "CONTINUOUS"
    BOUNDS = "BOUNDS"
    KEEP = "KEEP"
    KEEP_ORDER = "KEEP_ORDER"
    BUDGET_STORE = "BUDGET_STORE"
    PERSON = "PERSON"

    # --- identity -------------------------------------------------------------------------
    def name(self):
        return self.NAME

    def displayName(self):  # noqa: N802
        return self.DISPLAY_NAME

    def group(self):
        return self.GROUP

    def groupId(self):  # noqa: N802
        return self.GROUP_ID

    def shortHelpString(self):  # noqa: N802
        """The help panel's text: HELP with its source line breaks removed (QGIS makes every line a paragraph)."""
        return re.sub(r"\s*\n\s*", " ", self.HELP).strip()

    def icon(self):
        return QIcon(ICON)

    def createInstance(self):  # noqa: N802
        return type(self)()

    # --- running ----------------------------------------------------------------------------
    def compute(self, parameters, context, feedback) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802
        self._stores = []  # budget stores opened by this run (budget_options), closed when it ends
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                # no output may be one of the inputs (same file, or a link to it): processing.run does not ask
                self.check_outputs(
                    self.output_files(parameters, context),
                    self.input_files(
                        parameters,
                        context,
                        [
                            d.name()
                            for d in self.parameterDefinitions()
                            if d.type() in ("source", "vector", "raster", "file")
                        ],
                    ),
                )
                results = self.compute(parameters, context, feedback)
            except Cancelled:
                raise QgsProcessingException(
                    f"{self.displayName()}: cancelled by the user; no output was written."
                ) from None
            except QgsProcessingException:
                raise
            except Exception as exc:  # one rule for every error: geopriv's messages shown, foreign texts withheld
                if os.environ.get("GEOPRIV_TRACEBACK", "") not in ("", "0"):
                    raise
                raise QgsProcessingException(f"{self.displayName()}: {error_message(exc)}") from None
            finally:
                for store in self._stores:
                    with contextlib.suppress(Exception):  # a store that cannot close changes nothing of the run
                        store.close()
                self._stores = []
        import geopriv

        seen = set()
        for warning in caught:
            ours = issubclass(warning.category, geopriv.GeoprivWarning)
            text = warning_message(warning) if ours else f"{warning.category.__name__}: {warning.message}"
            if text in seen:
                continue
            seen.add(text)
            if ours:
                feedback.pushWarning(text)  # geopriv's own warnings are meant for the user (with the QGIS advice)
            else:
                feedback.pushDebugInfo(f"{text} ({warning.filename}:{warning.lineno})")
        feedback.setProgress(100)
        return results

    # --- progress and cancellation -----------------------------------------------------------
    @staticmethod
    def progress_callback(feedback, start: float, end: float):
        """A geopriv ``progress=`` callable mapping (done, total) onto [start, end] % of the bar.

        It raises :class:`Cancelled` when the user has cancelled, which stops the geopriv call
        at its next progress report; nothing is written.
        """

        def callback(done, total):
            if feedback.isCanceled():
                raise Cancelled()
            if total:
                feedback.setProgress(start + (end - start) * min(done / total, 1.0))

        return callback

    @staticmethod
    def check_cancelled(feedback):
        if feedback.isCanceled():
            raise Cancelled()

    def release(self, function, data, feedback, start=10.0, end=90.0, **kwargs):
        """The run's one geopriv call: ``function(data, progress=..., **kwargs)`` on the whole layer.

        The library's progress reports move the bar over [start, end] % and raise
        :class:`Cancelled` when the user has cancelled, which the library propagates: nothing
        is written.  Cancellation is checked once more after the call, the last chance before
        writing (a release is written whole).  ``progress=`` is passed only when ``function``
        accepts it.  Returns (result, the library's provenance record, unmodified).
        """
        self.check_cancelled(feedback)
        if _accepts_progress(function):
            kwargs["progress"] = self.progress_callback(feedback, start, end)
        result = function(data, **kwargs)
        feedback.setProgress(end)
        self.check_cancelled(feedback)
        record = self.provenance(result)
        if kwargs.get("budget_store") is not None:
            self.report_budget(feedback, record)
        return result, record

    def provenance(self, result) -> dict:
        """The library's provenance record of a release (``result.attrs["geopriv"]``), as it is."""
        record = getattr(result, "attrs", {}).get("geopriv")
        if not isinstance(record, dict):  # a release is never written without its provenance
            raise QgsProcessingException(
                f"{self.displayName()}: geopriv returned no provenance record; "
                "nothing was written. Install a matching geopriv version."
            )
        return record

    # --- parameters --------------------------------------------------------------------------
    def add_seed_parameter(self):
        param = QgsProcessingParameterNumber(
            self.SEED,
            "Random seed (leave empty: fresh noise from the operating system's entropy)",
            QgsProcessingParameterNumber.Integer,
            defaultValue=None,
            optional=True,
            minValue=0,
        )
        param.setHelp(
            "Only for tests and demonstrations: anyone who knows the seed can regenerate the noise "
            "and recover the true locations. Leave empty for a real release."
        )
        param.setFlags(param.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        self.addParameter(param)

    def add_budget_parameters(self):
        """BUDGET_STORE and PERSON (advanced, optional): the library's ``budget_store=`` and ``person=`` of
        :attr:`RELEASE_FUNCTION`, on the layer parameter INPUT. Called once for every release, after its
        ``initAlgorithm``; empty, they change nothing."""
        store = QgsProcessingParameterString(self.BUDGET_STORE, BUDGET_STORE_LABEL, defaultValue=None, optional=True)
        store.setHelp(
            "A geopriv budget store keeps each person's lifetime privacy budget across releases, runs and programs "
            "(QGIS, Python, the command line). When set, every person of the layer is charged what the release costs "
            "them before any noise is drawn; if anyone's remaining budget is too small the algorithm stops, names "
            "them, charges nobody and writes nothing. A SQLite file (a path, or sqlite:///path) or a PostgreSQL URL "
            "(postgresql://user@host/database): put the password in a ~/.pgpass file or the PGPASSWORD environment "
            "variable, never in the URL (QGIS writes parameters to its log and history). The store must exist: "
            f"{GRANT_ADVICE}. Empty: no store, nothing is charged."
        )
        if not self.PERSON_BUDGET_ONLY:  # declared by the algorithm (it is not only for the budget store)
            store.setFlags(store.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
            self.addParameter(store)
            return
        person = QgsProcessingParameterField(self.PERSON, PERSON_LABEL, parentLayerParameterName="INPUT", optional=True)
        person.setHelp(
            "The field of stable person ids (integers or text, no empty values) charged in the budget store; a person "
            "with several features pays for each. Feature ids are not persons (an export or an edit renumbers them), "
            "so with a budget store this field is needed"
            + (
                f" unless '{self.parameterDefinition(self.PERSON_DEFAULT).description()}' is set (then that field's "
                "values are the persons)"
                if self.PERSON_DEFAULT
                else ""
            )
            + ". Used only with a budget store."
        )
        for param in (store, person):
            param.setFlags(param.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
            self.addParameter(param)

    def budget_store_refusal(self, parameters, context):
        """Why BUDGET_STORE cannot be used as typed (a password in a URL), or None. Never quotes the value."""
        if not self.is_set(parameters, self.BUDGET_STORE):
            return None
        from urllib.parse import parse_qs, urlsplit

        url = str(parameters.get(self.BUDGET_STORE)).strip()
        if "://" not in url:
            return None
        try:
            parts = urlsplit(url)
            has_password = bool(parts.password) or "password" in {k.lower() for k in parse_qs(parts.query)}
        except ValueError:
            return None  # the library refuses a malformed URL
        if has_password:
            return (
                f"{self.displayName()}: the '{BUDGET_STORE_LABEL}' holds a password. QGIS writes every "
                "parameter to its log and processing history, so give the URL without it "
                "(postgresql://user@host/database) and put the password in a ~/.pgpass file (pgpass.conf on "
                "Windows), a PostgreSQL service file or the PGPASSWORD environment variable."
            )
        return None

    def budget_person(self, parameters, context):
        """The PERSON field when a budget store is set (None: empty, or no store)."""
        if not self.RELEASE_FUNCTION or not self.is_set(parameters, self.BUDGET_STORE):
            return None
        return (self.field_names(parameters, self.PERSON, context) or [None])[0]

    def budget_options(self, parameters, context, feedback, function) -> dict:
        """``budget_store=`` (the store, opened) and ``person=`` for ``function``; {} when BUDGET_STORE is empty.

        Called before the layer is read: a missing or unusable store stops the run before any work
        (the library's BudgetStoreError, with the QGIS advice).  The store is opened here so that its
        connection is closed when the run ends.  Refused: a ``function`` of the installed geopriv that
        takes no store (never silently dropped), and persons left to the feature ids.
        """
        if not self.is_set(parameters, self.BUDGET_STORE):
            if self.PERSON_BUDGET_ONLY and self.is_set(parameters, self.PERSON):
                feedback.pushWarning(f"'{PERSON_LABEL}' is used with a budget store only; without one it is ignored.")
            return {}
        refusal = self.budget_store_refusal(parameters, context)
        if refusal:
            raise QgsProcessingException(refusal)
        try:
            accepted = inspect.signature(function).parameters
        except (TypeError, ValueError):
            accepted = {}
        name = getattr(function, "__name__", "release")
        if not all(k in accepted for k in BUDGET_KEYWORDS):
            raise QgsProcessingException(
                f"{self.displayName()}: the installed geopriv's {name} does not take a budget store yet; leave "
                f"'{BUDGET_STORE_LABEL}' empty, or install a geopriv whose {name} takes budget_store= and person=."
            )
        person = self.budget_person(parameters, context)
        if person is None and not (self.PERSON_DEFAULT and self.is_set(parameters, self.PERSON_DEFAULT)):
            default = (
                f" or the '{self.parameterDefinition(self.PERSON_DEFAULT).description()}'"
                if self.PERSON_DEFAULT
                else ""
            )
            raise QgsProcessingException(
                f"{self.displayName()}: a budget store charges persons: choose the '{PERSON_LABEL}'{default} (a field "
                "of stable person ids). Feature ids are not persons: an export or an edit renumbers them, and a "
                "person would be charged under someone else's id. Nothing was charged."
            )
        import geopriv

        url = self.parameterAsString(parameters, self.BUDGET_STORE, context).strip()
        if "://" not in url:
            url = os.path.expanduser(url)  # a plain path to a SQLite file
        store = geopriv.BudgetStore(url)  # a missing store is refused here, with the QGIS advice
        if getattr(self, "_stores", None) is None:  # compute() called outside processAlgorithm (closed when collected)
            self._stores = []
        self._stores.append(store)
        options = {"budget_store": store}
        if person is not None:
            options["person"] = person
        return options

    def report_budget(self, feedback, record: dict):
        """One line after a charged release: the unit and the cost per row (never the store's URL or any location)."""
        unit = record.get("budget_unit")
        per_row = record.get("charged_per_row")
        if isinstance(per_row, (int, float)):
            cost = f"each row cost {per_row:.6g} {unit} (a person pays for each of their rows)"
        else:
            cost = f"{self.BUDGET_CHARGE} (in {unit})"
        feedback.pushInfo(
            f"Budget store ({record.get('budget_store')}): {cost}, charged to the budget store before "
            "the noise was drawn."
        )

    def add_privacy_parameters(self, level: float, radius: float, level_label: str = None, epsilon_label: str = None):
        """LEVEL within RADIUS (metres), or EPSILON per metre (optional; replaces them when set)."""
        label = (
            level_label
            or f"Privacy level within the radius ({level:.4g} = ln {math.exp(level):.4g}: "
            f"at most {math.exp(level):.4g} times more likely)"
        )
        # text, so that "ln4" is exactly ln 4 (a number field would show and record 1.386294)
        base = math.exp(level)
        default = f"ln{round(base)}" if abs(math.log(round(base)) - level) < 1e-12 else repr(level)
        param = QgsProcessingParameterString(self.LEVEL, label, defaultValue=default)
        param.setHelp(
            "Privacy loss allowed between two locations that are 'radius' metres apart: "
            "epsilon = level / radius per metre. A number, or ln4 / ln(4) for exactly ln 4."
        )
        self.addParameter(param)
        self.addParameter(
            QgsProcessingParameterNumber(
                self.RADIUS, "Radius (metres)", QgsProcessingParameterNumber.Double, defaultValue=radius, minValue=0.0
            )
        )
        epsilon = QgsProcessingParameterNumber(
            self.EPSILON,
            epsilon_label or "Epsilon (privacy loss per ground metre; if set, replaces level and radius)",
            QgsProcessingParameterNumber.Double,
            defaultValue=None,
            optional=True,
            minValue=0.0,
        )
        epsilon.setHelp(
            "Per ground metre: epsilon = level / radius, e.g. 0.0069 for ln 4 within 200 m. The level "
            "itself (1.386 = ln 4) given as epsilon would be ln 4 within 1 m: almost no protection (a "
            "warning says so)."
        )
        self.addParameter(epsilon)

    def privacy(self, parameters, context, feedback) -> dict:
        """geopriv keyword arguments: ``epsilon=`` if EPSILON is set, else ``level=`` and ``radius=``."""
        epsilon = self.optional_number(parameters, self.EPSILON, context)
        if epsilon is not None:
            feedback.pushInfo(f"Using epsilon = {epsilon:g} per metre; level and radius are ignored.")
            return {"epsilon": epsilon}
        from geopriv.parsing import parse_number

        return {
            "level": parse_number(self.parameterAsString(parameters, self.LEVEL, context)),
            "radius": self.parameterAsDouble(parameters, self.RADIUS, context),
        }

    def add_release_parameters(
        self, input_name: str, function: str, grid_help: str, bounds_help: str, keep_order_help: str = ""
    ):
        """GRID, CONTINUOUS, BOUNDS, KEEP and KEEP_ORDER: the public lattice, the public study area, the kept columns
        and the kept row order.

        They set the keyword arguments ``grid``, ``continuous``, ``bounds`` and ``keep`` of the geopriv
        function named ``function`` (KEEP_ORDER adds the library's ``"<row order>"`` to ``keep``); an
        empty parameter is the library's default (read from its signature, so the plugin never has
        defaults of its own).
        """
        grid = QgsProcessingParameterNumber(
            self.GRID, GRID_LABEL, QgsProcessingParameterNumber.Double, defaultValue=None, optional=True, minValue=0.0
        )
        grid.setHelp(grid_help)
        continuous = QgsProcessingParameterBoolean(
            self.CONTINUOUS, CONTINUOUS_LABEL, defaultValue=bool(library_default(function, "continuous"))
        )
        continuous.setHelp(
            "Releases unrounded floating-point coordinates instead of snapping them to the public lattice: there is "
            "then no finite-precision bound (the provenance says so and the effective epsilon is empty). Floating-point "
            "noise can leak more than its epsilon (Mironov 2012), so leave it unticked for a real release. It cannot "
            "be combined with a grid step."
        )
        bounds = QgsProcessingParameterExtent(self.BOUNDS, BOUNDS_LABEL, defaultValue=None, optional=True)
        bounds.setHelp(
            "The area your data is about, in any CRS (it is converted to the layer's CRS; without a CRS the numbers "
            "are in the layer's CRS). It is public: choose it without looking at individual points (a city or "
            "study-region boundary, round numbers); it fixes the release's scale and lattice and is written in the "
            "provenance. Every input point must lie inside it: features outside are refused, named by feature id. "
            "Never use 'Calculate from layer' on the input layer itself: its extent is the bounding box of the true "
            "points (the plugin refuses it). " + bounds_help
        )
        keep = QgsProcessingParameterField(
            self.KEEP, KEEP_LABEL, parentLayerParameterName=input_name, allowMultiple=True, optional=True
        )
        keep.setHelp(
            "The output keeps every attribute of the input. A column that holds the true locations (coordinates in the "
            "layer's CRS, longitude/latitude or Web Mercator, WKT, GeoJSON or WKB, 'lat, lon' text, ...) would be "
            "released unchanged next to the perturbed point, so such columns stop the algorithm, which names them. "
            "Drop them (e.g. with 'Drop field(s)'), or list here the ones that are not really locations: they are "
            "written unchanged and named in the provenance (kept_columns). The order of the features is kept with "
            f"'{KEEP_ORDER_LABEL}'."
        )
        keep_order = QgsProcessingParameterBoolean(self.KEEP_ORDER, KEEP_ORDER_LABEL, defaultValue=False)
        keep_order.setHelp(
            "The output lists the features in the input's order. QGIS layers often come in a spatial order (FlatGeobuf "
            "files are sorted along a Hilbert curve, spatial joins and database exports list neighbours together), and "
            "a release in that order publishes the order of the true points: averaging each released point with its "
            "neighbours in that order cancels much of the noise. So a layer whose features are in spatial order stops "
            "the algorithm (and so does a field that puts them in spatial order when sorted by it). The safe fix: "
            f"{SHUFFLE_ADVICE}. Tick this only if the order is public anyway: the features are then released in "
            f"their order, and the provenance names '{ROW_ORDER}' in kept_columns."
            + (f" {keep_order_help}" if keep_order_help else "")
        )
        for param in (grid, continuous, bounds, keep, keep_order):
            param.setFlags(param.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
            self.addParameter(param)

    def release_options(self, parameters, context, feedback, data: PointData, function) -> dict:
        """``grid``, ``continuous``, ``bounds`` and ``keep`` (with ``"<row order>"`` when KEEP_ORDER is
        ticked) for ``function`` from the release parameters.

        Only what the user set is passed (an empty parameter is the library's default), and only
        keywords ``function`` takes; a set parameter the function does not take is an error, never
        silently dropped.
        """
        options = {}
        grid = self.optional_number(parameters, self.GRID, context)
        if grid is not None:
            options["grid"] = grid
        if self.parameterAsBool(parameters, self.CONTINUOUS, context):
            options["continuous"] = True
            feedback.pushWarning(
                "Continuous output: the released coordinates are not rounded to a lattice, so the "
                "release has no finite-precision bound (recorded in the provenance)."
            )
        bounds = self.public_study_area(parameters, context, data)
        if bounds is not None:
            options["bounds"] = bounds
        keep = self.field_names(parameters, self.KEEP, context)
        if self.parameterAsBool(parameters, self.KEEP_ORDER, context) and ROW_ORDER not in keep:
            keep.append(ROW_ORDER)
        if ROW_ORDER in keep:
            feedback.pushWarning(
                "The row order is kept: the features are released in the input layer's order, which "
                f"must be public (recorded in the provenance: '{ROW_ORDER}' in kept_columns)."
            )
        if keep:
            options["keep"] = keep
        try:
            accepted = inspect.signature(function).parameters
        except (TypeError, ValueError):
            return options
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
            unknown = [k for k in options if k not in accepted]
            if unknown:
                raise QgsProcessingException(
                    f"{self.displayName()}: the installed geopriv's {getattr(function, '__name__', 'release')} does not "
                    f"take {', '.join(unknown)}; install a matching geopriv version or leave those parameters empty."
                )
        return options

    def public_study_area(self, parameters, context, data: PointData):
        """BOUNDS as (xmin, ymin, xmax, ymax) in the layer's CRS, or None when it is empty.

        Refuses the input layer's own extent (the bounding box of the true points, which the
        release would publish): a public area is chosen without looking at the points.
        """
        if not self.is_set(parameters, self.BOUNDS):
            return None
        refusal = (
            f"{self.displayName()}: the '{BOUNDS_LABEL}' is the extent of the input layer, i.e. the bounding "
            "box of the true points, which the release would publish. Choose the area without looking at "
            "individual points: a public boundary (city, district, study region) or an extent in round numbers "
            "that holds the data."
        )
        value, source = parameters.get(self.BOUNDS), parameters.get(getattr(self, "INPUT", None))
        if value is not None and (value is source or (isinstance(value, str) and value == source)):
            raise QgsProcessingException(refusal)
        rect = self.parameterAsExtent(parameters, self.BOUNDS, context, data.crs)
        if rect is None or rect.isNull():
            return None
        bounds = (rect.xMinimum(), rect.yMinimum(), rect.xMaximum(), rect.yMaximum())
        geoms = data.gdf.geometry.values
        present = ~(geoms.isna() | geoms.is_empty) if len(geoms) else np.zeros(0, dtype=bool)
        if present.any():
            extent = geoms[present].total_bounds
            # the layer's own extent, also as a provider reports it (GeoPackage: rounded outwards to float32)
            scale = max(extent[2] - extent[0], extent[3] - extent[1], float(np.abs(extent).max()), 1e-9)
            if np.all(np.abs(np.asarray(bounds) - extent) <= 1e-6 * scale):
                raise QgsProcessingException(refusal)
        return bounds

    def add_provenance_output(self):
        self.addOutput(QgsProcessingOutputString(self.PROVENANCE, "Provenance of the release (JSON)"))

    @staticmethod
    def is_set(parameters, name) -> bool:
        value = parameters.get(name)
        return value is not None and not (isinstance(value, str) and value.strip() == "")

    def optional_number(self, parameters, name, context):
        if not self.is_set(parameters, name):
            return None
        return self.parameterAsDouble(parameters, name, context)

    def random_source(self, parameters, context, feedback):
        """geopriv's random source for this run: OS entropy, or the seed (with a warning) when one is given.

        Call it inside ``compute`` on every run and never keep what it returns (on the algorithm,
        the provider or a module): each run of a batch must draw its own entropy.
        """
        import geopriv

        seed = None
        if self.is_set(parameters, self.SEED):
            seed = self.parameterAsInt(parameters, self.SEED, context)
            feedback.pushWarning(
                f"Random seed {seed} given: the noise is reproducible, so anyone who knows the seed can recover "
                "the true locations. Use a seed for tests and demonstrations only."
            )
        return geopriv.make_rng(seed)

    def field_names(self, parameters, name, context) -> list:
        """Names chosen in a field parameter ([] when optional and empty)."""
        return [f for f in self.parameterAsFields(parameters, name, context) if f]

    # --- inputs ------------------------------------------------------------------------------
    def read_layer(
        self, parameters, name, context, feedback, columns=(), progress=(0.0, 10.0), all_fields=False
    ) -> PointData:
        """The layer parameter ``name`` as a :class:`PointData`; ``columns`` become GeoDataFrame columns.

        ``all_fields=True`` puts every field in the GeoDataFrame: a release needs them, because
        the output keeps every attribute and geopriv refuses attribute columns that hold the true
        locations (unless kept deliberately with KEEP).
        """
        source = self.parameterAsSource(parameters, name, context)
        if source is None:
            raise QgsProcessingException(self.invalidSourceError(parameters, name))
        label = self.parameterDefinition(name).description()
        columns = list(columns)
        person = self.budget_person(parameters, context) if name == "INPUT" else None
        if person is not None and person not in columns:
            columns.append(person)  # the persons the budget store charges
        if all_fields:
            fields = source.fields()
            columns = list(dict.fromkeys(columns + [fields.at(i).name() for i in range(fields.count())]))
        return read_features(source, columns, name=f"layer '{label}'", feedback=feedback, progress=progress)

    def raster_path(self, parameters, name, context):
        """(file path, QgsCoordinateReferenceSystem) of a GDAL raster layer parameter."""
        layer = self.parameterAsRasterLayer(parameters, name, context)
        if layer is None:
            raise QgsProcessingException(self.invalidRasterError(parameters, name))
        if layer.providerType() != "gdal":
            raise QgsProcessingException(
                f"The raster '{layer.name()}' is served by the '{layer.providerType()}' provider; geopriv reads "
                "raster files through GDAL. Save it as a GeoTIFF first (Raster > Conversion > Translate)."
            )
        return layer.source().split("|")[0], layer.crs()

    # --- outputs -----------------------------------------------------------------------------
    def input_files(self, parameters, context, names) -> list:
        """The files behind the layer and file parameters ``names`` that are set (for :meth:`check_outputs`)."""
        files = []
        for name in names:
            if not self.is_set(parameters, name):
                continue
            kind = self.parameterDefinition(name).type()
            if kind == "file":
                source = self.parameterAsFile(parameters, name, context)
            else:
                layer = (
                    self.parameterAsRasterLayer(parameters, name, context)
                    if kind == "raster"
                    else self.parameterAsVectorLayer(parameters, name, context)
                )
                source = layer.source() if layer is not None else None
            if source:
                files.append(source.split("|")[0])  # "in.gpkg|layername=a": the file
        return files

    def output_files(self, parameters, context) -> list:
        """The files every destination parameter that is set will write (memory and temporary outputs excluded)."""
        files = []
        for d in self.parameterDefinitions():
            if not d.isDestination() or not self.is_set(parameters, d.name()):
                continue
            dest = (
                self.parameterAsFileOutput(parameters, d.name(), context)
                if d.type() == "fileDestination"
                else self.parameterAsOutputLayer(parameters, d.name(), context)
            )
            if dest and not str(dest).startswith(("memory:", "TEMPORARY_OUTPUT")):
                files.append(str(dest))
        return files

    def check_outputs(self, outputs, inputs) -> None:
        """Refuse an output that is one of the inputs (the same file, a hard link or a symbolic link to it).

        ``outputs`` are output paths (empty and None entries are skipped), ``inputs`` the input
        files (:meth:`input_files`).  ``processing.run`` does not ask before replacing a file,
        so this is checked before any work, with :func:`geopriv.io.check_output_not_input`,
        the check the command line makes.
        """
        from geopriv.io import check_output_not_input

        for out in outputs:
            if out:
                check_output_not_input(str(out).split("|")[0], inputs)

    def write_points(
        self, parameters, name, context, data: PointData, result, new_columns=(), feedback=None, progress=(90.0, 100.0)
    ):
        """Write geopriv's result as a point layer in the input's CRS.

        Each output row is matched to its input feature by index label (the QGIS feature id):
        the input's attributes are written back unchanged, followed by ``new_columns`` of the
        result.  Rows geopriv did not return are not written; rows it returned without a
        location (None) are written without geometry.
        """
        fields = fields_for(result, list(new_columns), base=data.fields)
        sink, dest_id = self.parameterAsSink(parameters, name, context, fields, QgsWkbTypes.Point, data.crs)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, name))
        geoms = result.geometry.values
        present = ~(geoms.isna() | geoms.is_empty)  # rows geopriv released without a location
        xs = np.where(present, geoms.x, np.nan) if len(geoms) else np.empty(0)
        ys = np.where(present, geoms.y, np.nan) if len(geoms) else np.empty(0)
        extra = [result[c].to_numpy(dtype=object) for c in new_columns]
        labels = result.index.to_numpy()
        from qgis.core import QgsGeometry, QgsPointXY

        def features():
            for i, label in enumerate(labels):
                attrs = list(data.attributes[int(label)]) + [to_qgis(col[i]) for col in extra]
                geometry = QgsGeometry.fromPointXY(QgsPointXY(xs[i], ys[i])) if present[i] else None
                yield feature_for(fields, attrs, geometry)

        self.add_features(sink, parameters, name, features(), len(result), feedback, progress)
        return dest_id

    def write_table(self, parameters, name, context, table: pd.DataFrame):
        """Write a DataFrame as a table without geometry (one field per column)."""
        table = table.reset_index(drop=True)
        fields = fields_for(table, list(table.columns))
        sink, dest_id = self.parameterAsSink(parameters, name, context, fields, QgsWkbTypes.NoGeometry)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, name))
        columns = [table[c].to_numpy(dtype=object) for c in table.columns]
        features = (feature_for(fields, [to_qgis(col[i]) for col in columns]) for i in range(len(table)))
        self.add_features(sink, parameters, name, features, len(table))
        return dest_id

    def add_features(self, sink, parameters, name, features, total, feedback=None, progress=(90.0, 100.0)):
        """Add ``features`` (``total`` QgsFeatures) to the sink of the output ``name``; refused if one fails.

        The bar moves over ``progress`` % when ``feedback`` is given. No cancelling here: a release
        is written whole.
        """
        total = max(total, 1)
        for i, feature in enumerate(features):
            if feedback is not None and i % 10_000 == 0:
                feedback.setProgress(progress[0] + (progress[1] - progress[0]) * i / total)
            if not sink.addFeature(feature, QgsFeatureSink.FastInsert):
                raise QgsProcessingException(self.writeFeatureError(sink, parameters, name))

    @staticmethod
    def provenance_json(record: dict) -> str:
        """The library's provenance record as JSON, field for field (numpy values as Python values)."""
        return json.dumps(record, default=_json_value, sort_keys=True)

    @staticmethod
    def report(feedback, record: dict, keys):
        """Log some fields of the library's provenance record, as they are (absent and empty fields are skipped)."""
        shown = ", ".join(f"{k} = {record.get(k)}" for k in keys if record.get(k) not in (None, [], ""))
        if shown:
            feedback.pushInfo(shown)


# For convenience of algorithm modules.
TYPE_POINTS = QgsProcessing.TypeVectorPoint
TYPE_POLYGONS = QgsProcessing.TypeVectorPolygon
