"""Exceptions raised by geopriv.

Every message says what is wrong *and how to fix it*.  Messages name row labels, never
coordinates: an error log must not become a leak of the locations it was protecting.

How to fix it depends on where the user is: a Python caller drops a column with
``gdf.drop(columns=...)``, a command-line user with ``--drop``, a QGIS user with the 'Drop
field(s)' algorithm.  So an error (or warning) carries its fix apart from its problem, as a
:class:`Fix` with one short sentence per front end (``exc.fix``), and
``user_message(exc, front_end)`` renders the problem with that front end's advice only.
``str(exc)`` is the problem with the Python advice: what a library caller reads.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

__all__ = [
    "FRONT_ENDS",
    "caller_stacklevel",
    "Fix",
    "GeoprivError",
    "MissingCRSError",
    "CRSError",
    "GeometryError",
    "EmptyInputError",
    "IdentityError",
    "StaleReleaseError",
    "BudgetExceededError",
    "BudgetStoreError",
    "RasterError",
    "InfeasibleMechanismError",
    "MechanismFileError",
    "LocationAttributeError",
    "PathBindingError",
    "InputError",
    "OutputError",
    "ParameterError",
    "ParameterTypeError",
    "MissingDependencyError",
    "UsageError",
    "NetworkError",
    "GeoprivWarning",
    "DistortionWarning",
    "WeakProtectionWarning",
    "LowUtilityWarning",
    "format_labels",
    "user_message",
    "shows_message",
]


def format_labels(labels: Iterable, limit: int = 10) -> str:
    """Render row labels for an error message: the first ``limit`` and a count of the rest."""
    labels = list(labels)
    shown = ", ".join(repr(label) for label in labels[:limit])
    if len(labels) > limit:
        shown += f", ... ({len(labels) - limit} more)"
    return shown


#: the front ends an error's fix is written for: the Python API, the command line, the QGIS plugin
FRONT_ENDS = ("python", "cli", "qgis")


class Fix(namedtuple("Fix", ("kind", "python", "cli", "qgis"), defaults=("", "", ""))):
    """How to fix an error (or act on a warning), written once per front end (immutable).

    Every :class:`GeoprivError` and :class:`GeoprivWarning` may carry one as ``exc.fix``.  Like
    the messages, a fix names columns, options and CRSs, never coordinates.

    Parameters
    ----------
    kind : str
        A stable, machine-readable name of the fix (``"shuffle_rows"``, ``"drop_columns"``,
        ``"set_crs"``, ...; joined fixes: ``"shuffle_rows+drop_columns"``), for programs that
        act on errors.
    python, cli, qgis : str, optional
        The advice in each front end's own terms (Python calls and keywords; command-line
        options; QGIS algorithms and parameter labels as the dialogs show them), one or two short
        sentences.  Empty: that front end has nothing to add to the problem (it never falls back
        to another front end's advice, which its user could not follow).

    See Also
    --------
    GeoprivError : The base class of geopriv's errors, which carry a fix as ``exc.fix``.
    GeoprivWarning : The base class of geopriv's warnings, which may carry one too.

    Examples
    --------
    >>> fix = geopriv.Fix("drop_columns", python="Drop them: gdf = gdf.drop(columns=['lon']).",
    ...                   cli="Drop them with --drop lon.", qgis="Remove them with the 'Drop field(s)' algorithm.")
    >>> fix.text("cli")
    'Drop them with --drop lon.'

    A program acts on the kind of an error's fix, whatever its wording:

    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]))
    >>> try:
    ...     geopriv.perturb(gdf, level=math.log(4), radius=200, rng=1)
    ... except geopriv.GeoprivError as exc:
    ...     print(exc.fix.kind)
    ...     print(exc.fix.text("cli"))
    set_crs
    Give the CRS the coordinates of the data are really in with --crs, e.g. --crs EPSG:4326 for ...
    """

    __slots__ = ()  # a named tuple (no dataclasses import: ``import geopriv`` stays light)

    def text(self, front_end: str = "python") -> str:
        """The advice for ``front_end`` (one of :data:`FRONT_ENDS`); empty when it has none."""
        if front_end not in FRONT_ENDS:
            raise ParameterError(f"front_end must be one of {', '.join(map(repr, FRONT_ENDS))}, not {front_end!r}.")
        return getattr(self, front_end)

    @classmethod
    def same(cls, kind: str, text: str) -> Fix:
        """A fix worded the same in every front end (no option, keyword or dialog in it)."""
        return cls(kind, text, text, text)

    @classmethod
    def join(cls, *fixes: Fix | None) -> Fix | None:
        """One fix from several (each front end's sentences in order); None when there are none."""
        fixes = [f for f in fixes if f is not None]
        if not fixes:
            return None
        if len(fixes) == 1:
            return fixes[0]
        texts = {fe: " ".join(t for t in (getattr(f, fe) for f in fixes) if t) for fe in FRONT_ENDS}
        return cls("+".join(f.kind for f in fixes), **texts)


def _with_advice(problem: str, fix: Fix | None, front_end: str) -> str:
    advice = fix.text(front_end) if fix is not None else ""
    if not (problem and advice):
        return problem or advice
    # the command line's messages are written without a final period; the advice is a sentence of its own
    return f"{problem}{' ' if problem.rstrip().endswith(('.', '!', '?', ':')) else '. '}{advice}"


class _Advised:
    """A message that may carry a :class:`Fix`: ``problem`` is the message without it, ``str()`` adds the
    Python advice (the library's front end); the CLI and QGIS render their own with :func:`user_message`."""

    def __init__(self, *args, fix: Fix | None = None):
        super().__init__(*args)
        self.fix = fix

    @property
    def problem(self) -> str:
        """What is wrong, without the advice."""
        return super().__str__()

    def __str__(self):
        return _with_advice(self.problem, getattr(self, "fix", None), "python")


class GeoprivError(_Advised, ValueError):
    """Base class of geopriv's errors (a ValueError: bad input, nothing was released).

    ``fix`` (a :class:`Fix`, or None) is how to fix it, per front end; ``problem`` is the message
    without it, and ``str(exc)`` the problem with the Python advice.  Catch it to handle every
    refusal of geopriv's at once; its messages name row labels, never coordinates.

    Parameters
    ----------
    *args : str
        The problem: what is wrong, in a sentence or two (``exc.problem``).
    fix : Fix, optional
        How to fix it, per front end (``exc.fix``); None when the problem says it all.

    See Also
    --------
    Fix : The advice an error carries, per front end.
    GeoprivWarning : The base class of geopriv's warnings.
    MissingCRSError : The data has no CRS, so metres cannot be known.
    GeometryError : Geometries the mechanism cannot release.
    BudgetExceededError : A release would spend more privacy budget than is left.

    Examples
    --------
    Data without a CRS is refused before anything is drawn, and the error says how to fix it:

    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]))
    >>> try:
    ...     geopriv.perturb(gdf, level=math.log(4), radius=200, rng=1)
    ... except geopriv.GeoprivError as exc:
    ...     print(type(exc).__name__, exc.fix.kind)
    ...     print(exc.problem)
    MissingCRSError set_crs
    The data has no CRS, so geopriv cannot tell how far a metre is and cannot honour an epsilon per metre.

    It is a ``ValueError``, so code that already catches bad input catches it too:

    >>> issubclass(geopriv.MissingCRSError, ValueError)
    True
    """


def _set_crs_fix(what: str = "the data") -> Fix:
    return Fix(
        "set_crs",
        python="Set the CRS the coordinates are really in, e.g. gdf = gdf.set_crs('EPSG:4326') for "
        "longitude/latitude or gdf.set_crs(32650) for UTM zone 50N metres, then call again.",
        cli=f"Give the CRS the coordinates of {what} are really in with --crs, e.g. --crs EPSG:4326 for "
        "longitude/latitude or --crs EPSG:32650 for UTM zone 50N metres.",
        qgis="Set the layer's CRS to the one its coordinates are in (Layer Properties > Source, or the "
        "'Assign projection' algorithm), then run again.",
    )


class MissingCRSError(GeoprivError):
    """The data has no coordinate reference system, so metres cannot be known.

    Epsilon is per ground metre: without a CRS, geopriv cannot tell how far a metre is, and it
    refuses the data rather than guess.  The fix (kind ``"set_crs"``) says how to set the CRS the
    coordinates are really in, per front end.

    Parameters
    ----------
    what : str, default "the GeoDataFrame"
        What has no CRS, as the message names it (``"the true data"``, ``"The region"``).

    See Also
    --------
    CRSError : A CRS that cannot be related to ground metres, or two inputs that disagree.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]))
    >>> try:
    ...     geopriv.perturb(gdf, level=math.log(4), radius=200, rng=1)
    ... except geopriv.MissingCRSError as exc:
    ...     print(type(exc).__name__, exc.fix.kind)
    MissingCRSError set_crs
    >>> released = geopriv.perturb(gdf.set_crs("EPSG:32650"), level=math.log(4), radius=200, rng=1)
    >>> len(released)
    2
    """

    def __init__(self, what: str = "the GeoDataFrame"):
        super().__init__(
            f"{what} has no CRS, so geopriv cannot tell how far a metre is and cannot honour an epsilon per metre.",
            fix=_set_crs_fix(what[:1].lower() + what[1:]),
        )


class CRSError(GeoprivError):
    """The CRS cannot be related to ground metres, or two inputs disagree on CRS.

    Raised, for instance, for a square grid of cells in metres over data in a geographic CRS
    (degrees): its fix (kind ``"projected_crs"``) says to reproject to a CRS in metres.

    Parameters
    ----------
    *args : str
        The problem: which CRS, and why it cannot be used (``exc.problem``).
    fix : Fix, optional
        How to fix it, per front end (``exc.fix``).

    See Also
    --------
    MissingCRSError : The data has no CRS at all.
    DistortionWarning : A CRS whose scale varies over the data.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([116.30, 116.40], [39.90, 39.95]), crs="EPSG:4326")
    >>> try:
    ...     geopriv.aggregate(gdf, epsilon=1.0, cells=200, bounds=(116.0, 39.5, 117.0, 40.5), rng=1)
    ... except geopriv.CRSError as exc:
    ...     print(type(exc).__name__, exc.fix.kind)
    CRSError projected_crs
    >>> gdf.to_crs("EPSG:32650").crs.is_projected  # UTM zone 50N, in metres: cells=200 is 200 m
    True
    """


class GeometryError(GeoprivError):
    """Geometries the mechanism cannot release (not points, empty, missing, non-finite).

    The message counts the rows and names them by label (``exc.labels``), never by coordinates.

    Parameters
    ----------
    problem : str
        What is wrong with the rows, completing "N row(s) ..." (``"have no geometry (None)"``).
    labels : iterable
        The labels of the offending rows (``exc.labels``); the message shows the first ten.
    hint : str or Fix
        How to fix it: a :class:`Fix` per front end (``exc.fix``), or a sentence that holds in
        every front end, appended to the message.
    what : str, default "row(s)"
        What the rows are called in the message.

    See Also
    --------
    MissingCRSError : The data has no CRS.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    A row without a geometry cannot be released; the error names its label:

    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]), crs="EPSG:32650")
    >>> gdf.loc[1, "geometry"] = None
    >>> try:
    ...     geopriv.perturb(gdf, level=math.log(4), radius=200, rng=1)
    ... except geopriv.GeometryError as exc:
    ...     print(type(exc).__name__, exc.labels, exc.fix.kind)
    GeometryError [1] drop_rows
    """

    def __init__(self, problem: str, labels: Iterable, hint: str | Fix, what: str = "row(s)"):
        labels = list(labels)
        self.labels = labels
        message = f"{len(labels)} {what} {problem}: labels {format_labels(labels)}."
        if isinstance(hint, Fix):  # the advice, per front end
            super().__init__(message, fix=hint)
        else:  # advice that holds in every front end, part of the message
            super().__init__(f"{message} {hint}")


class IdentityError(GeoprivError):
    """Row identities that cannot key noise soundly: repeated, mixed-type, missing or positional.

    Names the rows by label when the labels are integers or strings; labels of any other type
    (floats: possibly coordinates) are counted, never shown.
    """

    def __init__(self, problem: str, labels: Iterable | None, hint: str | Fix, count: int | None = None):
        self.labels = None if labels is None else list(labels)
        n = count if count is not None else (len(self.labels) if self.labels is not None else 0)
        shown = "" if self.labels is None else f": labels {format_labels(self.labels)}"
        if isinstance(hint, Fix):
            super().__init__(f"{n} row(s) {problem}{shown}.", fix=hint)
        else:
            super().__init__(f"{n} row(s) {problem}{shown}. {hint}")


class StaleReleaseError(GeoprivError):
    """A lazy release computed on data other than the data it was built on (it answers those only)."""


class EmptyInputError(GeoprivError):
    """Nothing to release."""


class BudgetExceededError(GeoprivError):
    """A release would spend more privacy budget than is left; nothing was drawn.

    Raised by a :class:`BudgetAccountant` (in memory) or a :class:`BudgetStore` (persistent)
    before any noise is drawn: the budget is left as it was.

    Parameters
    ----------
    *args : str
        The problem: whose budget, and by how much the release would exceed it (epsilon per
        metre), naming persons by id, never by location (``exc.problem``).
    fix : Fix, optional
        How to proceed, per front end (``exc.fix``).

    See Also
    --------
    BudgetAccountant : A privacy budget per person, in memory.
    BudgetStore : A privacy budget per person, kept in a database.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    >>> acc = geopriv.BudgetAccountant(1.0)
    >>> acc.spend(0.6)
    >>> try:
    ...     acc.spend(0.6)
    ... except geopriv.BudgetExceededError as exc:
    ...     print(type(exc).__name__)
    BudgetExceededError
    >>> round(float(acc.remaining[0]), 6)  # the refused release spent nothing
    0.4
    """


class BudgetStoreError(GeoprivError):
    """A budget store that cannot be used: missing, locked, read-only, damaged, or from a newer geopriv.

    Nothing was charged and nothing was released.  A missing store is refused rather than
    created again, so that a mistyped path never starts everybody's budget afresh.

    Parameters
    ----------
    *args : str
        The problem: which store (its URL without a password), and what is wrong with it
        (``exc.problem``); never a database driver's own text.
    fix : Fix, optional
        How to fix it, per front end (``exc.fix``).

    See Also
    --------
    BudgetStore : Lifetime privacy budgets per person, in SQLite or PostgreSQL.
    BudgetExceededError : A store that works, but a budget that is spent.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    >>> try:
    ...     geopriv.BudgetStore("sqlite:///no_such_store.db")
    ... except geopriv.BudgetStoreError as exc:
    ...     print(type(exc).__name__, exc.fix.kind)
    BudgetStoreError budget_store
    >>> os.path.exists("no_such_store.db")
    False
    """


class RasterError(GeoprivError):
    """A raster (population or privacy map) that cannot be used: no data, bad values, bad geometry.

    Parameters
    ----------
    *args : str
        The problem: which raster, and what is wrong with it (``exc.problem``).
    fix : Fix, optional
        How to fix it, per front end (``exc.fix``); None when the problem says it.

    See Also
    --------
    PrivacyMap : Epsilon per ground metre over a raster's cells.
    InfeasibleMechanismError : A map that can be read, but no mechanism for it with the options given.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    An array is a raster only with its georeferencing:

    >>> try:
    ...     geopriv.PrivacyMap.from_population(np.ones((4, 4)), epsilon_range=(0.001, 0.01))
    ... except geopriv.RasterError as exc:
    ...     print(type(exc).__name__)
    ...     print(exc.problem)
    RasterError
    An array needs its georeferencing: pass transform= (an affine.Affine, ...) and crs=.
    >>> pm = geopriv.PrivacyMap.from_population(geopriv.datasets.get_path("tokyo_density_40"), epsilon_range=(0.001, 0.01))
    >>> pm.shape
    (40, 40)
    """


class InfeasibleMechanismError(GeoprivError):
    """No mechanism meeting the privacy map could be built with the given options; nothing was returned.

    The message says which limit was met and how to proceed (coarsen the map, raise a limit,
    loosen a margin).

    Parameters
    ----------
    *args : str
        The problem, and how to proceed (``exc.problem``).
    fix : Fix, optional
        How to fix it, per front end (``exc.fix``); None when the problem says it.

    See Also
    --------
    optimal_mechanism : The mechanism of least expected error for a privacy map.
    EikonalMechanism : Location-dependent privacy without a linear program.
    RasterError : A raster that cannot be used at all.

    Examples
    --------
    The full linear program for a 40 x 40 map is far above the default size limit, and is
    refused before any solving:

    >>> pm = geopriv.PrivacyMap.from_population(geopriv.datasets.get_path("tokyo_density_40"), epsilon_range=(0.001, 0.01))
    >>> try:
    ...     geopriv.optimal_mechanism(pm, solver="highs")
    ... except geopriv.InfeasibleMechanismError as exc:
    ...     print(type(exc).__name__)
    ...     print(exc.problem)
    InfeasibleMechanismError
    The LP for a 40 x 40 grid with pad=0 has 2,560,000 variables and ... Coarsen the map first, ...
    """


class MechanismFileError(GeoprivError):
    """A saved mechanism file is corrupt, truncated, from another format version, or not the one expected.

    Raised by :meth:`DiffusionPath.load <geopriv.DiffusionPath.load>` and the loaders of saved
    mechanisms, which verify a file's structure and checksum before using it.

    Parameters
    ----------
    *args : str
        The problem: which file, and what is wrong with it (``exc.problem``).
    fix : Fix, optional
        How to fix it, per front end (``exc.fix``); None when the problem says it.

    See Also
    --------
    DiffusionPath : A secret diffusion path, saved and loaded with a checksum.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    >>> with open("not_a_path.npz", "wb") as f:
    ...     _ = f.write(b"not a zip archive")
    >>> try:
    ...     geopriv.DiffusionPath.load("not_a_path.npz")
    ... except geopriv.MechanismFileError as exc:
    ...     print(type(exc).__name__)
    ...     print(exc.problem)
    MechanismFileError
    'not_a_path.npz' is not a readable diffusion path file (...); it may be truncated or corrupt.
    """


class LocationAttributeError(GeoprivError):
    """Attribute columns or the index hold the true locations and would be released verbatim.

    ``reasons`` maps each offending column label (``"<index>"`` for the index) to why it was
    flagged; neither the reasons nor the message contain coordinate values.

    Parameters
    ----------
    message : str
        The problem: which columns (or the index, or the row order) give the locations away,
        and why (``exc.problem``).
    reasons : dict, optional
        Why each offending column label was flagged (``exc.reasons``).
    fix : Fix, optional
        How to fix it, per front end (``exc.fix``): drop the columns, or keep them deliberately.

    See Also
    --------
    perturb : Refuses data whose attributes give the true locations away.
    GeometryError : Geometries that cannot be released.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    Columns holding the true coordinates would be released verbatim next to the noisy points:

    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]), crs="EPSG:32650")
    >>> gdf["x"], gdf["y"] = gdf.geometry.x, gdf.geometry.y
    >>> try:
    ...     geopriv.perturb(gdf, level=math.log(4), radius=200, rng=1)
    ... except geopriv.LocationAttributeError as exc:
    ...     print(type(exc).__name__, sorted(exc.reasons), exc.fix.kind)
    LocationAttributeError ['x', 'y'] drop_columns
    >>> released = geopriv.perturb(gdf.drop(columns=["x", "y"]), level=math.log(4), radius=200, rng=1)
    >>> list(released.columns)
    ['geometry']
    """

    def __init__(self, message: str, reasons: dict | None = None, fix: Fix | None = None):
        self.reasons = dict(reasons or {})
        super().__init__(message, fix=fix)


class InputError(GeoprivError):
    """An input file that cannot be read: missing, unreadable, too large, ambiguous layer, wrong CRS."""


class OutputError(GeoprivError):
    """An output that cannot be written safely: unknown format, exists, or is one of the inputs."""


class ParameterError(GeoprivError):
    """An option (keyword argument, command-line option, QGIS parameter) with a value that cannot be used."""


class ParameterTypeError(GeoprivError, TypeError):
    """An option of the wrong type: a ``TypeError`` (as Python's own checks raise) and a :class:`GeoprivError`
    (one root for every refusal of geopriv's), written by geopriv, so shown."""


def _install_fix(pip_name: str, extra: str = "") -> Fix:
    """How to install an optional package: geopriv's extra (which pins what geopriv was tested with), or the package."""
    how = f"pip install 'geopriv[{extra}]' (or pip install {pip_name})" if extra else f"pip install {pip_name}"
    return Fix(
        f"install_{pip_name}",
        python=f"Install it: {how}.",
        cli=f"Install it: {how}.",
        qgis=f"Install the {pip_name} package into QGIS's Python (pip install {pip_name}; on Windows from the "
        "OSGeo4W shell).",
    )


class MissingDependencyError(GeoprivError, ImportError):
    """An optional package that a capability needs is not installed (plotting: matplotlib; H3 cells: h3).

    An ``ImportError`` (what code guarding an optional import catches, so ``except ImportError`` keeps
    working) and a :class:`GeoprivError`: its message is geopriv's own (which capability, which package,
    which install line), never data, so the command line and QGIS show it rather than withhold it as they
    withhold a foreign ``ImportError``'s text.  Its fix (kind ``"install_<package>"``) is the install line.

    Parameters
    ----------
    problem : str
        What cannot run without which package (``exc.problem``), e.g. ``"Plotting needs matplotlib, which
        is not installed."``.
    package : str, optional
        The module that could not be imported (``exc.name``, as an ``ImportError``'s).
    extra : str, optional
        geopriv's extra that installs it (``"plot"``: ``pip install 'geopriv[plot]'``).
    pip_name : str, optional
        The package's name on PyPI when it is not ``package`` (``"pot"`` for the module ``ot``).
    fix : Fix, optional
        How to install it, per front end; by default the install line from ``extra`` and ``pip_name``.

    See Also
    --------
    GeoprivError : The base class of geopriv's errors.
    user_message : What the command line and QGIS show of an error.

    Examples
    --------
    >>> exc = geopriv.exceptions.MissingDependencyError(
    ...     "Plotting needs matplotlib, which is not installed.", package="matplotlib", extra="plot")
    >>> print(exc.problem)
    Plotting needs matplotlib, which is not installed.
    >>> print(exc.fix.text("cli"))
    Install it: pip install 'geopriv[plot]' (or pip install matplotlib).
    >>> isinstance(exc, ImportError), exc.name, exc.fix.kind
    (True, 'matplotlib', 'install_matplotlib')
    """

    def __init__(self, problem: str, *, package: str = "", extra: str = "", pip_name: str = "", fix: Fix | None = None):
        if fix is None and (package or pip_name):
            fix = _install_fix(pip_name or package, extra)
        super().__init__(problem, fix=fix)
        self.name = package or None  # ImportError's attribute: the module that could not be imported


class UsageError(GeoprivError):
    """Options that do not go together, or a required option missing (the command line's errors)."""


class NetworkError(GeoprivError):
    """A network (graph) that cannot be used: unknown nodes, bad weights, or weights so extreme that its
    distances cannot be computed accurately."""


class PathBindingError(GeoprivError):
    """A secret diffusion path was offered for another source, value, column, dimension or frame than it answers."""


class GeoprivWarning(_Advised, UserWarning):
    """Base class of geopriv's warnings; like an error, one may carry a :class:`Fix` (``fix``).

    A warning means the release went ahead and its guarantee holds, but something about it
    deserves a look: noise too small to protect, too large to be of use, or unevenly scaled.
    Filter on it to handle them all at once (``warnings.simplefilter("error", GeoprivWarning)``
    makes them errors).

    Parameters
    ----------
    *args : str
        What deserves a look (``w.problem``).
    fix : Fix, optional
        What to do about it, per front end (``w.fix``).

    See Also
    --------
    WeakProtectionWarning : Noise so small that it protects almost nothing.
    LowUtilityWarning : Noise so large that almost no utility is left.
    DistortionWarning : A CRS whose scale varies over the data.
    GeoprivError : The base class of geopriv's errors.

    Examples
    --------
    >>> import warnings
    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]), crs="EPSG:32650")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always", geopriv.GeoprivWarning)
    ...     released = geopriv.perturb(gdf, epsilon=5.0, rng=1)  # 5 per metre: 0.4 m of noise on average
    >>> [type(w.message).__name__ for w in caught if isinstance(w.message, geopriv.GeoprivWarning)]
    ['WeakProtectionWarning']
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", geopriv.GeoprivWarning)
    ...     try:
    ...         geopriv.perturb(gdf, epsilon=5.0, rng=1)
    ...     except geopriv.GeoprivWarning as w:
    ...         print("refused:", type(w).__name__, w.fix.kind)
    refused: WeakProtectionWarning level_radius
    """


class DistortionWarning(GeoprivWarning):
    """The CRS scale varies over the data: the guarantee holds, some points get more noise.

    Noise is scaled for the largest distortion over the declared area (so epsilon per ground
    metre holds everywhere), and a grid's cells, square in the CRS, vary in ground size as much.
    A local CRS (a UTM zone) or a smaller declared area avoids it.

    Parameters
    ----------
    *args : str
        How much the scale varies over the public area, and what to do (``w.problem``).
    fix : Fix, optional
        What to do about it, per front end (``w.fix``); None when the message says it.

    See Also
    --------
    CRSError : A CRS that cannot be related to ground metres at all.
    GeoprivWarning : The base class of geopriv's warnings.

    Examples
    --------
    Web Mercator over 2,000 km of latitude (cells of 50 km, southern Japan):

    >>> import warnings
    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([15.5e6, 15.6e6], [4.2e6, 4.3e6]), crs="EPSG:3857")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always", geopriv.GeoprivWarning)
    ...     counts = geopriv.aggregate(gdf, epsilon=1.0, cells=50_000, bounds=(15e6, 3.5e6, 16e6, 5.5e6), rng=1)
    >>> for w in caught:
    ...     if isinstance(w.message, geopriv.DistortionWarning):
    ...         print(w.message)
    The CRS's scale varies by 20.7 % over the public area: the grid's cells are square in the CRS and ...
    """


class WeakProtectionWarning(GeoprivWarning):
    """A release whose noise is so small that it protects almost nothing (:func:`geopriv.precision.check_noise_scale`).

    Warned when the mean displacement 2 / epsilon (ground metres) is below 10 m or the public
    lattice step, computed from the parameters alone, never from the data.  The usual cause is
    an epsilon given as a level (``ln 4``) instead of per ground metre.

    Parameters
    ----------
    *args : str
        The noise in metres and what it is below (``w.problem``).
    fix : Fix, optional
        How to set epsilon, per front end (``w.fix``; kind ``"level_radius"`` by default).

    See Also
    --------
    resolve_epsilon : Epsilon per ground metre from a level within a radius.
    LowUtilityWarning : The opposite: noise larger than the study area.
    GeoprivWarning : The base class of geopriv's warnings.

    Examples
    --------
    >>> import warnings
    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]), crs="EPSG:32650")
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", geopriv.WeakProtectionWarning)
    ...     try:
    ...         geopriv.perturb(gdf, epsilon=math.log(4), rng=1)  # ln 4 within 1 m: 1.4 m of noise
    ...     except geopriv.WeakProtectionWarning as w:
    ...         print(type(w).__name__, w.fix.kind)
    WeakProtectionWarning level_radius
    >>> released = geopriv.perturb(gdf, level=math.log(4), radius=200, rng=1)  # ln 4 within 200 m
    """


class LowUtilityWarning(GeoprivWarning):
    """A release whose noise is larger than the declared study area: almost no utility is left.

    Warned when the mean displacement 2 / epsilon (ground metres) exceeds the diameter of the
    declared area, or when the noise of private counts swamps the counts.  The release is
    private; it just tells almost nothing.

    Parameters
    ----------
    *args : str
        The noise and what it exceeds (``w.problem``).
    fix : Fix, optional
        What to change, per front end (``w.fix``).

    See Also
    --------
    WeakProtectionWarning : The opposite: noise too small to protect.
    aggregate : Private counts per cell, which warn when the noise swamps them.
    GeoprivWarning : The base class of geopriv's warnings.

    Examples
    --------
    Noise of 2,000 km on average in a declared area of 2 km x 2 km:

    >>> import warnings
    >>> gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([500000, 500100], [4400000, 4400050]), crs="EPSG:32650")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always", geopriv.GeoprivWarning)
    ...     released = geopriv.perturb(gdf, epsilon=1e-6, bounds=(499000, 4399000, 501000, 4401000), rng=1)
    >>> [(type(w.message).__name__, w.message.fix.kind) for w in caught
    ...  if isinstance(w.message, geopriv.GeoprivWarning)]
    [('LowUtilityWarning', 'level_radius')]
    """


def caller_stacklevel() -> int:
    """The ``stacklevel`` of :func:`warnings.warn` that points at the first caller outside geopriv.

    Called from the function that warns: the accessor, decorators and front ends in between do not
    count, so the warning names the user's line (and the test suite's "warnings in geopriv are
    errors" filter keeps meaning "raised at geopriv's own line").
    """
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back
        level += 1
    return level


def shows_message(exc: BaseException) -> bool:
    """Whether :func:`user_message` shows ``exc``'s own text: geopriv's errors and warnings, nothing else.

    Every error geopriv raises is one of its named classes (:class:`GeoprivError` and its
    subclasses: :class:`ParameterTypeError`, :class:`MissingDependencyError` for a missing optional
    package); a plain ``ValueError``, ``TypeError`` or ``ImportError`` comes from another library (or
    Python) and may quote data values, so its text is withheld.
    """
    return isinstance(exc, (GeoprivError, GeoprivWarning, ParameterTypeError))


#: what went wrong in a foreign library, by its top-level module: how to proceed (no data values)
_FOREIGN_HINTS = {
    "pyproj": "the coordinate reference system could not be used: check the file's CRS (or give the CRS explicitly)",
    "pyogrio": "GDAL could not read or write a file: check its format, layer and columns",
    "fiona": "GDAL could not read or write a file: check its format, layer and columns",
    "osgeo": "GDAL could not read or write a file: check its format, layer and columns",
    "rasterio": "GDAL could not read or write a raster: check that it is a GeoTIFF with a CRS",
    "shapely": "a geometry could not be processed: check the input's geometries",
    "pandas": "a column could not be processed: check the input's attribute columns and their types",
    "numpy": "an array computation failed: check the input's values and sizes",
    "scipy": "a numerical computation failed: check the input's values and sizes",
}
_LIBRARY_NAMES = {
    "builtins": "Python",
    "osgeo": "GDAL",
    "pyogrio": "GDAL (pyogrio)",
    "fiona": "GDAL (fiona)",
    "rasterio": "GDAL (rasterio)",
}


def user_message(
    exc: BaseException, front_end: str = "python", debug_hint: str = "rerun with GEOPRIV_TRACEBACK=1 to see it"
) -> str:
    """The one-line text shown to a user for ``exc`` (the command line and the QGIS plugin).

    An error or warning that carries a :class:`Fix` is shown as its problem followed by the
    advice for ``front_end`` only (``"python"``, ``"cli"`` or ``"qgis"``): a command-line user
    never reads Python code, a QGIS user never reads command-line options.

    geopriv's own errors and warnings (:class:`GeoprivError`, :class:`GeoprivWarning` and their
    subclasses) are written by geopriv to name row labels, never coordinates: their message is
    shown, on one line; so is a missing optional package (:class:`MissingDependencyError`, an
    ``ImportError`` written by geopriv: which package, how to install it).  Any other exception (pandas, pyproj, numpy, GDAL, a bare ``ValueError``)
    may quote values from the data in its text, so only its type, the library it comes from and a
    generic hint are shown; the text is withheld.  An :class:`OSError` with a file name shows the
    operating system's reason and the file name (both written by the user or the system, not
    data).  :class:`MemoryError` says how to proceed.

    Parameters
    ----------
    exc : BaseException
        The exception to describe (also a warning, e.g. the ``message`` of a caught warning).
    front_end : {"python", "cli", "qgis"}
        Whose advice to show, for errors and warnings that carry a :class:`Fix`.
    debug_hint : str, optional
        How the user can see the withheld text (the command line: ``GEOPRIV_TRACEBACK=1``; QGIS:
        the Python console).

    Returns
    -------
    str
        One line, without a trailing period.

    Examples
    --------
    >>> user_message(GeoprivError("2 row(s) are outside the bounds: labels 3, 7. Widen bounds="))
    '2 row(s) are outside the bounds: labels 3, 7. Widen bounds='
    >>> user_message(ValueError("could not convert string to float: '51.5123'"))[:43]
    'an error in Python (ValueError): its messag'
    """
    if front_end not in FRONT_ENDS:
        raise ParameterError(f"front_end must be one of {', '.join(map(repr, FRONT_ENDS))}, not {front_end!r}.")
    if shows_message(exc):
        fix = getattr(exc, "fix", None)
        text = _with_advice(exc.problem, fix, front_end) if isinstance(fix, Fix) else str(exc)
        text = " ".join(line.strip() for line in text.strip().splitlines() if line.strip())
        return text or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror and exc.filename and type(exc).__module__ == "builtins":
        return f"{exc.strerror}: {exc.filename}"
    name = type(exc).__qualname__
    module = (type(exc).__module__ or "builtins").split(".")[0]
    library = _LIBRARY_NAMES.get(module, module)
    if isinstance(exc, MemoryError):
        hint = "not enough memory: process the data in parts, or resample or clip large rasters"
    else:
        hint = _FOREIGN_HINTS.get(module)
    return (
        f"an error in {library} ({name}): "
        + (f"{hint}; " if hint else "")
        + f"its message is withheld because it may quote data values; {debug_hint}"
    )
