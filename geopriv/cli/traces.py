"""geopriv sanitize-traces and geopriv sample-queries: location traces."""

from __future__ import annotations

import os
import sys

from .common import (
    CLIError,
    budget_options,
    charge_note,
    check_crs,
    check_person,
    check_privacy,
    given_options,
    input_options,
    library_option,
    mark_shuffled,
    open_budget_store,
    privacy_kwargs,
    privacy_options,
    read_points,
    release_options,
    release_rows,
    rng_note,
    rows_note,
    rows_options,
)


def _column(text: str):
    """A column name; the empty string means None (no column)."""
    return None if text == "" else text


# ---------------------------------------------------------------------------- traces
_TRACE_OPTIONS = (
    "method",
    "budget",
    "rate",
    "accuracy",
    "skip_speed",
    "stale_after",
    "predictor",
    "on_exhausted",
    "eta",
    "gamma",
    "delta",
    "prediction_rate",
)


def _cmd_sanitize_traces(args) -> int:
    import geopriv

    from .. import io

    check_privacy(args)
    if args.rate is not None and args.accuracy is not None:
        raise CLIError("give either --rate (budget fixed_rate) or --accuracy (budget fixed_utility), not both")
    if args.shuffle and args.time is None:
        raise CLIError(
            "--shuffle with --time '': without time stamps the rows' order is the query order, which a "
            "shuffle would destroy; give the time stamp column with --time"
        )
    crs = check_crs(args.crs)
    inputs = [args.input]
    io.check_input(args.input)
    target = io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    ledger_dest = None
    if args.ledger is not None:
        ledger_dest = io.check_file_output(
            args.ledger, suffixes=(".csv",), what="ledger", overwrite=args.overwrite, protect=inputs + [args.output]
        )
        if os.path.realpath(os.path.abspath(ledger_dest)) == os.path.realpath(os.path.abspath(target.path)):
            raise CLIError("--ledger must be another file than OUT")
    open_budget_store(
        args,
        None
        if args.traj_id is not None
        else "--budget-store charges each trace's person, and --traj-id '' makes all rows one trace: name "
        "the column of its person id with --person COLUMN",
    )

    gdf = release_rows(
        read_points(args.input, args.layer, crs, xy=args.xy),
        args,
        needed=(("--traj-id", args.traj_id), ("--time", args.time), ("--person", args.person)),
    )
    check_person(gdf, args)
    kwargs = given_options(
        args,
        _TRACE_OPTIONS + ("rng", "grid", "continuous", "bounds", "keep", "max_distortion", "budget_store", "person"),
    )
    out = mark_shuffled(
        geopriv.sanitize_traces(
            gdf,
            traj_id=args.traj_id,
            time=args.time,
            progress=True if args.progress else None,
            **privacy_kwargs(args),
            **kwargs,
        ),
        args,
    )
    ledger = geopriv.trace_ledger(out)
    with io.Staging() as stage:  # both outputs, or neither
        stage.vector(out, io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs))
        if ledger_dest is not None:
            stage.file(ledger_dest, lambda tmp: ledger.to_csv(tmp), overwrite=args.overwrite)
        stage.commit()
    rec = out.attrs["geopriv"]
    print(
        f"released {rec['n_released']} of {rec['n']} queries in {rec['traces']} trace(s) to {args.output}"
        + rows_note(args)
        + (f" (ledger: {args.ledger})" if args.ledger else "")
        + f": {rec['method']}, {rec['budget']}, epsilon {rec['epsilon_per_m']:.6g} per metre per trace{rng_note(rec)}",
        file=sys.stderr,
    )
    charge_note(rec, args, "each trace's person its worst case, settled to what the ledger says it spent,")
    return 0


def _cmd_sample_queries(args) -> int:
    import geopriv

    from .. import io

    crs = check_crs(args.crs)
    inputs = [args.input]
    io.check_input(args.input)
    io.check_output(args.output, args.out_layer, args.overwrite, protect=inputs)
    gdf = read_points(args.input, args.layer, crs, xy=args.xy)
    kwargs = given_options(
        args, ("p", "short", "jump", "jitter", "max_speed", "speed_window", "max_gap", "time_unit", "rng")
    )
    out = geopriv.sample_queries(gdf, traj_id=args.traj_id, time=args.time, **kwargs)
    io.write_vector(out, args.output, layer=args.out_layer, overwrite=args.overwrite, protect=inputs)
    print(f"sampled {len(out)} queries from {len(gdf)} fixes to {args.output}", file=sys.stderr)
    return 0


EPILOG_TRACES = """examples:
  # ln 10 within 100 m for each whole trace, about 3.3 % of it per query (~30 queries)
  geopriv sanitize-traces queries.gpkg released.gpkg --traj-id user --time t \\
      --level ln10 --radius 100 --rate 0.033 --ledger ledger.csv

  # longitude/latitude data need a public study area; fixed accuracy of 3 km per noisy release
  geopriv sanitize-traces queries.csv released.gpkg --crs EPSG:4326 --traj-id user --time t \\
      --bounds 115.4 39.4 117.6 41.1 --level ln10 --radius 100 --budget fixed_utility --accuracy 3000
"""

EPILOG_SAMPLE = """examples:
  # the evaluation protocol of Chatzikokolakis et al. 2014 on raw GPS fixes: jumps of 60 min with p = 0.3
  geopriv sample-queries fixes.gpkg queries.gpkg --traj-id trajectory_id --time t -p 0.3 --seed 1
  geopriv sanitize-traces queries.gpkg released.gpkg --traj-id trajectory_id --time t --level ln10 --radius 100 --rate 0.033
"""


def sanitize_traces_arguments(t) -> None:
    import geopriv

    st = geopriv.sanitize_traces
    t.add_argument("input", help="points of the traces (any OGR format, .parquet)")
    t.add_argument("output", help="output file; format from the extension")
    t.add_argument(
        "--traj-id",
        required=True,
        type=_column,
        metavar="COLUMN",
        help="trace id column: one budget per trace ('' : all rows are one trace)",
    )
    t.add_argument(
        "--time",
        required=True,
        type=_column,
        metavar="COLUMN",
        help="time stamp column (datetimes, ISO text or seconds; '' : rows are in query order)",
    )
    privacy_options(
        t,
        st,
        "budget of each whole trace (give --level and --radius, or --epsilon per ground metre)",
        whole=" of each whole trace",
    )
    g = t.add_argument_group("mechanism and budget manager")
    library_option(
        g, st, "method", choices=("predictive", "independent"), help="predictive mechanism or independent noise"
    )
    library_option(g, st, "budget", choices=("fixed_rate", "fixed_utility"), help="budget manager")
    library_option(
        g, st, "rate", type=float, help="fixed_rate: fraction of the trace's budget per query on average, e.g. 0.033"
    )
    library_option(
        g,
        st,
        "accuracy",
        type=float,
        help="fixed_utility: metres within which a noisy release falls with probability delta",
    )
    library_option(
        g, st, "skip_speed", type=float, help="time skip rule: assumed top speed in metres per second (e.g. 0.139)"
    )
    library_option(
        g, st, "stale_after", type=float, help="seconds after which a prediction is not tested (fresh noise)"
    )
    library_option(
        g, st, "predictor", choices=("parrot", "cluster_mean"), help="prediction of the predictive mechanism"
    )
    library_option(
        g,
        st,
        "on_exhausted",
        choices=("empty", "last"),
        help="rows a trace's budget cannot pay for: no geometry, or the trace's last released point",
    )
    library_option(g, st, "eta", type=float, help="budget manager: utility slack (0.5 .. 1)")
    library_option(g, st, "gamma", type=float, help="budget manager: test-noise to threshold ratio")
    library_option(g, st, "delta", type=float, help="budget manager: accuracy level of alpha(delta), in (0.5, 1)")
    library_option(g, st, "prediction_rate", type=float, help="fixed_rate: prior prediction rate")
    release_options(t, st)
    t.add_argument(
        "--ledger", metavar="LEDGER.csv", help="also write the per-trace budget ledger (geopriv.trace_ledger) as CSV"
    )
    budget_options(
        t,
        st,
        "each trace's person the trace's worst case in epsilon per ground metre (unit epsilon/m: "
        "the budget of the whole trace plus the lattice's increment per row), settled after the run to "
        "what the ledger says was spent, the rest given back,",
        "column of stable person ids whose lifetime budgets --budget-store charges, constant within a "
        "trace; a person with several traces pays for each (default: the --traj-id column, each trace "
        "its own person)",
    )
    rows_options(t)
    t.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    input_options(t)
    t.set_defaults(func=_cmd_sanitize_traces)


def sample_queries_arguments(s) -> None:
    import geopriv

    sq = geopriv.sample_queries
    s.add_argument("input", help="GPS fixes (any OGR format, .parquet)")
    s.add_argument("output", help="query points; format from the extension")
    s.add_argument("--traj-id", required=True, metavar="COLUMN", help="trajectory id column")
    s.add_argument("--time", required=True, metavar="COLUMN", help="time stamp column")
    g = s.add_argument_group("sampling")
    library_option(g, sq, "p", "-p", type=float, help="probability of a jump between queries, 0 .. 1")
    library_option(g, sq, "short", type=float, help="seconds between frequent queries")
    library_option(g, sq, "jump", type=float, help="seconds of a jump")
    library_option(g, sq, "jitter", type=float, help="relative standard deviation of the intervals")
    library_option(g, sq, "max_speed", type=float, help="queries only while slower than this (metres per second)")
    library_option(g, sq, "speed_window", type=float, help="seconds over which speed is measured")
    library_option(g, sq, "max_gap", type=float, help="largest age in seconds of the fix a query uses")
    library_option(g, sq, "time_unit", type=str, help="unit of numeric time stamps (s, ms, us, ns, min, h, D)")
    library_option(
        g,
        sq,
        "rng",
        "--seed",
        type=int,
        metavar="SEED",
        show_default=False,
        help="seed of the sampling, which is not a privacy mechanism (default: OS entropy)",
    )
    input_options(s)
    s.set_defaults(func=_cmd_sample_queries)
