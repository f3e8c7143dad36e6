"""Command line: one subcommand per capability of the library.

::

    geopriv perturb homes.gpkg homes_private.gpkg --level ln4 --radius 200
    geopriv privacy-map density.tif privacy_map.tif --epsilon-range ln4/3000 ln4/600
    geopriv build-mechanism density.tif tokyo.npz --epsilon-range ln4/3000 ln4/600
    geopriv perturb homes.gpkg homes_private.gpkg --mechanism tokyo.npz
    geopriv synthesize homes.gpkg synthetic.gpkg --epsilon 1 --bounds 440000 4400000 470000 4430000
    geopriv diffuse people.gpkg answers.gpkg --source 17 --edges friends.csv --epsilon-table 1:ln4/50 4:ln4/2000
    geopriv sanitize-traces queries.gpkg released.gpkg --traj-id user --time t --level ln10 --radius 100 \\
        --rate 0.033 --ledger ledger.csv
    geopriv sample-queries fixes.gpkg queries.gpkg --traj-id trajectory_id --time t -p 0.3
    geopriv aggregate homes.gpkg counts.gpkg --epsilon 1 --cells 250 --bounds 440000 4400000 470000 4430000
    geopriv heatmap homes.gpkg heatmap.tif --epsilon 1 --resolution 250 --region city.gpkg
    geopriv flows tracks.gpkg od.gpkg --epsilon 1 --regions districts.gpkg --traj-id trip --time t --user person
    geopriv report homes.gpkg homes_private.gpkg
    geopriv demo
    geopriv datasets soho

One module per command (its parser options, its epilog of worked examples and its run function
together): :mod:`.perturb`, :mod:`.synthesize`, :mod:`.diffuse`, :mod:`.eikonal` (privacy-map,
build-mechanism), :mod:`.traces` (sanitize-traces, sample-queries), :mod:`.counts` (aggregate,
heatmap, flows), :mod:`.report`, :mod:`.measured` (adversary-error, calibrate), :mod:`.budget` and
:mod:`.demo`; what they share (the parser class, argument types, library defaults in ``--help``,
reading inputs, the privacy, release and budget options) is in :mod:`.common`.  This module builds
the parser and runs a command.

Options carry the library's names (``--max-distortion`` is ``max_distortion=``; ``--seed`` is
``rng=``) and, when not given, are not passed at all, so the library's own defaults apply; the
defaults shown by ``--help`` are read from the library's signatures.

Every command checks its arguments, its input files and its outputs (format from the
extension, existing files, outputs that are inputs: :mod:`geopriv.io`) before it reads any data
or draws any noise, and writes its outputs atomically: a failed run leaves every file as it
was.  Bad input gives one line ``geopriv: error: ...`` on stderr and exit code 2, never a
traceback.  The line is :func:`geopriv.exceptions.user_message`, shared with the QGIS plugin:
geopriv's own errors (:class:`geopriv.GeoprivError` subclasses) are shown, and they name rows,
never coordinates; errors from other libraries (pandas, pyproj, numpy, GDAL) and bare Python
errors, whose text may quote values from the data, are reported by type with a hint.
``GEOPRIV_TRACEBACK=1`` shows the full error instead (it may show data values).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import user_message
from .budget import EPILOG_BUDGET, budget_arguments
from .common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, PACKAGE_DIR, Parser
from .counts import (
    EPILOG_AGGREGATE,
    EPILOG_FLOWS,
    EPILOG_HEATMAP,
    aggregate_arguments,
    flows_arguments,
    heatmap_arguments,
)
from .datasets import EPILOG_DATASETS, datasets_arguments
from .demo import EPILOG_DEMO, demo_arguments
from .diffuse import EPILOG_DIFFUSE, diffuse_arguments
from .eikonal import EPILOG_BUILD, EPILOG_PRIVACY_MAP, build_mechanism_arguments, privacy_map_arguments
from .measured import EPILOG_ADVERSARY, EPILOG_CALIBRATE, adversary_arguments, calibrate_arguments
from .perturb import EPILOG_PERTURB, perturb_arguments
from .report import EPILOG_REPORT, report_arguments
from .synthesize import EPILOG_SYNTHESIZE, synthesize_arguments
from .traces import EPILOG_SAMPLE, EPILOG_TRACES, sample_queries_arguments, sanitize_traces_arguments

__all__ = ["main", "build_parser"]


@dataclass(frozen=True)
class Command:
    """One subcommand, as data: its name, its one-line help, its description and examples, and the
    function that adds its options (called only when the command is parsed or shown: :class:`.common.Parser`)."""

    name: str
    help: str
    description: str
    epilog: str
    arguments: Callable


#: the commands, in the order ``geopriv --help`` lists them
COMMANDS = (
    Command(
        "perturb",
        help="release points with geo-indistinguishability, or a location-dependent mechanism",
        description="Release point locations: geopriv.perturb (planar Laplace noise per ground metre, "
        "or a saved location-dependent mechanism).",
        epilog=EPILOG_PERTURB,
        arguments=perturb_arguments,
    ),
    Command(
        "synthesize",
        help="release a synthetic point set with epsilon-differential privacy (private measure)",
        description="Release synthetic points: geopriv.synthesize (a private measure of the whole point "
        "set over a public area: super-regular random walk on a Hilbert curve, or the private "
        "measure mechanism). The output is a new layer of synthetic points; attributes are "
        "not carried over.",
        epilog=EPILOG_SYNTHESIZE,
        arguments=synthesize_arguments,
    ),
    Command(
        "diffuse",
        help="release one person's location (or value) to everyone connected to her in a "
        "network, more accurately to closer people (private Markov jump process)",
        description="Graded release over a public network: geopriv.diffuse_locations (Koufogiannis and "
        "Pappas' private Markov jump process). The person --source's location is told to "
        "every other person connected to her, each at epsilon(d) per metre for their "
        "network distance d (never more accurate for a farther person), all from ONE secret "
        "noise path: any group of recipients pooling their answers learns no more than its "
        "closest member. People not connected to her get no answer.",
        epilog=EPILOG_DIFFUSE,
        arguments=diffuse_arguments,
    ),
    Command(
        "aggregate",
        help="private counts of points per public cell (grid, H3 or polygons), user level",
        description="Release counts per public cell: geopriv.aggregate (exact discrete Laplace noise on a "
        "consistent hierarchy of cells, every cell of the public area released, each person's "
        "rows bounded). The output is a layer of cells with their counts.",
        epilog=EPILOG_AGGREGATE,
        arguments=aggregate_arguments,
    ),
    Command(
        "heatmap",
        help="a private heatmap GeoTIFF (counts or densities on a square grid), user level",
        description="Release a heatmap: geopriv.heatmap (the counts of aggregate on a square grid, as a "
        "north-up GeoTIFF: band 1 the values, band 2 their expected error).",
        epilog=EPILOG_HEATMAP,
        arguments=heatmap_arguments,
    ),
    Command(
        "flows",
        help="private origin-destination trip counts between public regions, user level",
        description="Release origin-destination flows: geopriv.flows (every ordered pair of public "
        "regions is a cell, released with its count of trips, empty or not, as a line layer).",
        epilog=EPILOG_FLOWS,
        arguments=flows_arguments,
    ),
    Command(
        "privacy-map",
        help="population raster -> privacy map GeoTIFF (epsilon per metre)",
        description="Build a privacy map from a population raster: geopriv.PrivacyMap.from_population, "
        "written with to_geotiff.",
        epilog=EPILOG_PRIVACY_MAP,
        arguments=privacy_map_arguments,
    ),
    Command(
        "build-mechanism",
        help="population or privacy-map raster -> saved location-dependent mechanism",
        description="Build and verify a location-dependent mechanism: geopriv.EikonalMechanism.build, "
        "saved with save() for 'geopriv perturb --mechanism'.",
        epilog=EPILOG_BUILD,
        arguments=build_mechanism_arguments,
    ),
    Command(
        "sanitize-traces",
        help="release location traces within a budget per trace (predictive mechanism)",
        description="Release location traces: geopriv.sanitize_traces (one budget per trace, spent by "
        "the predictive mechanism or independent noise).",
        epilog=EPILOG_TRACES,
        arguments=sanitize_traces_arguments,
    ),
    Command(
        "sample-queries",
        help="raw GPS trajectories -> query traces (the paper's sampling protocol)",
        description="Turn GPS fixes into query traces: geopriv.sample_queries (Chatzikokolakis et al. "
        "2014, sec. 5). Not a release: the output holds true locations.",
        epilog=EPILOG_SAMPLE,
        arguments=sample_queries_arguments,
    ),
    Command(
        "report",
        help="displacement statistics (ground metres) between a true and a released file",
        description="Displacement statistics: geopriv.utility_report (n, mean, median, alpha, max, "
        "MSE, RMSE in ground metres).",
        epilog=EPILOG_REPORT,
        arguments=report_arguments,
    ),
    Command(
        "adversary-error",
        help="measured privacy of planar Laplace in metres: the optimal adversary's "
        "error on a public area (and the k-equivalent)",
        description="The optimal Bayesian adversary (Shokri et al. 2011): geopriv.adversary_error, exactly "
        "on a grid over the public area. Reads no data.",
        epilog=EPILOG_ADVERSARY,
        arguments=adversary_arguments,
    ),
    Command(
        "calibrate",
        help="the epsilon meeting a target: adversary error, k-equivalent or displacement",
        description="Choose epsilon: geopriv.calibrate (planar Laplace on a public area). Reads no data.",
        epilog=EPILOG_CALIBRATE,
        arguments=calibrate_arguments,
    ),
    Command(
        "budget",
        help="lifetime privacy budgets per person (grant, show, export a store)",
        description="Lifetime privacy budgets per person, kept in a store (geopriv.BudgetStore: a SQLite "
        "file or a PostgreSQL database) that every release command charges with "
        "--budget-store URL --person COLUMN before any noise is drawn.",
        epilog=EPILOG_BUDGET,
        arguments=budget_arguments,
    ),
    Command(
        "demo",
        help="perturb the shipped Soho cholera points; write a GeoPackage and a PNG map (with the plot extra)",
        description="The Quickstart demo on shipped data (John Snow's Soho cholera deaths, EPSG:3857).",
        epilog=EPILOG_DEMO,
        arguments=demo_arguments,
    ),
    Command(
        "datasets",
        help="list the shipped data sets, or print one's path (geopriv.datasets.get_path)",
        description="The small real data sets shipped with geopriv (the examples' data): their names, or "
        "the path of one, so that an example runs from any folder.",
        epilog=EPILOG_DATASETS,
        arguments=datasets_arguments,
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser; each command's options are added when that command is parsed or shown.

    The options read the library's defaults from its signatures, which imports the library (numpy,
    GeoPandas, ...): ``geopriv --help``, ``--version`` and a mistyped command import none of it.
    """
    import geopriv

    parser = Parser(
        prog="geopriv",
        description="Location privacy with formal guarantees (geopriv's library, on files).",
        epilog="examples:\n  geopriv perturb homes.gpkg homes_private.gpkg --level ln4 --radius 200\n"
        "  geopriv demo --out out\n\nEach command's --help has worked examples.",
    )
    parser.add_argument("--version", action="version", version=f"geopriv {geopriv.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        sub.add_parser(
            command.name,
            help=command.help,
            description=command.description,
            epilog=command.epilog,
            arguments=command.arguments,
        )
    return parser


# ---------------------------------------------------------------------------- errors and warnings
def _message(exc: BaseException) -> str:
    """The one line printed for ``exc``: :func:`geopriv.exceptions.user_message` (shared with QGIS)."""
    return user_message(exc, "cli", debug_hint="set GEOPRIV_TRACEBACK=1 to see it")


_SHOWN: set = set()
#: warning lines of this run, printed once the command has succeeded (a failed run says one thing: its error)
_PENDING: list = []


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """One line per warning on stderr once the command succeeded: geopriv's text (with the command line's advice);
    for other libraries' warnings, their type and origin once."""
    from ..exceptions import GeoprivWarning

    try:
        ours = issubclass(category, GeoprivWarning) or Path(filename).resolve().is_relative_to(PACKAGE_DIR)
    except (OSError, ValueError):  # pragma: no cover
        ours = False
    if ours:  # with the command line's advice when it carries a fix (a GeoprivWarning instance)
        text = " ".join((user_message(message, "cli") if isinstance(message, GeoprivWarning) else str(message)).split())
    else:
        parts = Path(filename).parts
        origin = parts[parts.index("site-packages") + 1] if "site-packages" in parts[:-1] else Path(filename).stem
        text = f"{category.__name__} from {origin} (details withheld: they may quote data values; GEOPRIV_TRACEBACK=1 shows them)"
    if text in _SHOWN:
        return
    _SHOWN.add(text)
    _PENDING.append(f"geopriv: warning: {text}")


def _sigterm_as_interrupt():
    """SIGTERM (timeout, systemd, CI) cleans up like Ctrl-C: staged files are removed, nothing replaced."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # pragma: no cover - signals need the main thread
        return

    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # pragma: no cover
        pass


def main(argv=None) -> int:
    """Run the command line; returns the exit code (0, or 2 for bad input)."""
    _sigterm_as_interrupt()
    try:  # parsing a command's options imports the library: Ctrl-C there is no traceback either
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:
        print("geopriv: interrupted; no output was written or replaced", file=sys.stderr)
        return EXIT_INTERRUPTED
    debug = os.environ.get("GEOPRIV_TRACEBACK", "") not in ("", "0")
    _SHOWN.clear()
    _PENDING.clear()
    try:
        with warnings.catch_warnings():
            from ..exceptions import GeoprivWarning

            warnings.simplefilter("default", GeoprivWarning)  # shown once, as one line, never raised
            if not debug:
                warnings.showwarning = _show_warning
            code = args.func(args)
        for line in _PENDING:
            print(line, file=sys.stderr)
        return code
    except KeyboardInterrupt:
        charged = hasattr(getattr(args, "budget_store", None), "close")  # a release interrupted once noise was drawn
        print(
            "geopriv: interrupted; no output was written or replaced"
            + (
                "; a budget the store charged before the noise was drawn stays charged ('geopriv budget show STORE')"
                if charged
                else ""
            ),
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `geopriv budget show STORE | head`: the reader left, nothing is wrong
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except Exception as exc:  # one line, never a traceback: see _message for what is shown
        if debug:
            raise
        print(f"geopriv: error: {_message(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        store = getattr(args, "budget_store", None)  # opened by open_budget_store
        if hasattr(store, "close"):
            store.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
