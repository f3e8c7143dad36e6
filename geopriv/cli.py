"""Command line: ``geopriv perturb IN OUT --level ln4 --radius 200`` and friends.

Any OGR vector format in and out (read and written with pyogrio).  Bad input gives a one-line
error on stderr and a non-zero exit code; nothing is written.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

__all__ = ["main"]

EXIT_BAD_INPUT = 2


class CLIError(Exception):
    """A user-facing error: printed as one line."""


def _level(text: str) -> float:
    """Accept numbers and the common 'ln4' / 'ln(4)' / 'log(4)' spellings."""
    t = text.strip().lower().replace(" ", "")
    for prefix in ("ln(", "log("):
        if t.startswith(prefix) and t.endswith(")"):
            return math.log(float(t[len(prefix):-1]))
    if t.startswith("ln"):
        return math.log(float(t[2:]))
    return float(t)


def _read(path: str, layer: str | None):
    import geopandas as gpd

    p = Path(path)
    if not p.exists():
        raise CLIError(f"input file {path} does not exist")
    try:
        return gpd.read_file(p, layer=layer, engine="pyogrio")
    except Exception as exc:  # pyogrio raises several types; one line is what the user needs
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CLIError(f"cannot read {path}{' layer ' + layer if layer else ''}: {msg}") from None


def _check_output(path: str, overwrite: bool, source: str | None = None) -> Path:
    out = Path(path)
    if source is not None and out.exists() and out.resolve() == Path(source).resolve():
        raise CLIError("the output path is the input file; choose another OUT so the input is kept")
    if out.exists() and not overwrite:
        raise CLIError(f"{path} exists; pass --overwrite to replace it")
    return out


def _write(gdf, path: str, layer: str | None, overwrite: bool, source: str | None = None):
    out = _check_output(path, overwrite, source)
    if out.exists():
        out.unlink()
    out.parent.mkdir(parents=True, exist_ok=True)
    record = gdf.attrs.get("geopriv")
    kwargs = {}
    if out.suffix.lower() == ".gpkg" and record is not None:
        kwargs["layer_metadata"] = {"geopriv": json.dumps(record, default=str)}
    gdf.to_file(out, layer=layer, engine="pyogrio", **kwargs)
    if record is not None and "layer_metadata" not in kwargs:
        out.with_name(out.name + ".geopriv.json").write_text(json.dumps(record, indent=2, default=str))


def _cmd_perturb(args) -> int:
    import geopriv

    _check_output(args.output, args.overwrite, args.input)
    gdf = _read(args.input, args.layer)
    region = None
    if args.region:
        region = _read(args.region, None)
    kwargs = dict(
        rng=args.seed, grid="auto" if args.grid is None else args.grid, continuous=args.continuous,
        bounds=args.bounds, region=region, keep=args.keep or (), progress=True if args.progress else None,
    )
    if args.epsilon is not None:
        out = geopriv.perturb(gdf, args.epsilon, **kwargs)
    else:
        out = geopriv.perturb(gdf, level=args.level, radius=args.radius, **kwargs)
    _write(out, args.output, args.out_layer, args.overwrite, args.input)
    rec = out.attrs["geopriv"]
    print(
        f"released {rec['n']} points to {args.output}: epsilon {rec['epsilon_per_m']:.6g} per metre "
        + (f"(effective {rec['effective_epsilon_per_m']:.6g}), " if rec.get("effective_epsilon_per_m") else "(continuous: no finite-precision bound), ")
        + f"CRS {rec['input_crs']}"
        + (" [seeded: reproducible, not for real releases]" if rec["seeded"] else ""),
        file=sys.stderr,
    )
    return 0


def _cmd_report(args) -> int:
    import geopriv

    true = _read(args.true, args.layer)
    released = _read(args.released, None)
    report = geopriv.utility_report(true, released, delta=args.delta)
    print(report.to_string())
    return 0


def _cmd_demo(args) -> int:
    import geopandas as gpd

    import geopriv
    from geopriv.plot import plot_release

    data = Path(geopriv.__file__).parent / "data" / "soho_cholera.gpkg"
    deaths = gpd.read_file(data, layer="deaths", engine="pyogrio")
    out = geopriv.perturb(deaths, level=math.log(4), radius=args.radius, rng=args.seed)
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    gpkg = outdir / "soho_perturbed.gpkg"
    png = outdir / "soho_map.png"
    _write(out, str(gpkg), "deaths_perturbed", overwrite=True)
    plot_release(
        deaths, out, path=png,
        title=f"Soho cholera deaths (1854), EPSG:3857: ln 4 within {args.radius:g} m",
    )
    rep = geopriv.utility_report(deaths, out)
    rec = out.attrs["geopriv"]
    print(f"Input : {data.name} layer 'deaths', {len(deaths)} points, {deaths.crs}")
    from geopriv.crs import ground_scale

    c = deaths.geometry.union_all().centroid
    smax, _ = ground_scale(deaths.crs, c.x, c.y)
    frame = "in the input CRS" if rec["frame"] == "planar" else "per point on the ellipsoid's sphere (returned in EPSG:3857)"
    print(
        f"Privacy: ln 4 within {args.radius:g} m = {rec['epsilon_per_m']:.5f} per ground metre; EPSG:3857 has "
        f"{float(smax[0]):.3f} units per ground metre here, so noise was drawn {frame}"
    )
    print(f"Utility: mean {rep['mean_m']:.1f} m, median {rep['median_m']:.1f} m, alpha(0.9) {rep['alpha_0.9_m']:.1f} m")
    print(f"Wrote  : {gpkg}\n         {png}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    import geopriv

    parser = argparse.ArgumentParser(prog="geopriv", description="Location privacy with formal guarantees.")
    parser.add_argument("--version", action="version", version=f"geopriv {geopriv.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("perturb", help="release points with geo-indistinguishability (planar Laplace)")
    p.add_argument("input", help="input vector file (any OGR format: .gpkg, .shp, .geojson, .fgb, ...)")
    p.add_argument("output", help="output vector file; format from the extension")
    g = p.add_argument_group("privacy (give --epsilon, or --level and --radius)")
    g.add_argument("--epsilon", type=float, help="privacy loss per ground metre")
    g.add_argument("--level", type=_level, help="privacy level within --radius, e.g. ln4 or 1.386")
    g.add_argument("--radius", type=float, help="radius in metres for --level")
    p.add_argument("--layer", help="input layer (multi-layer formats)")
    p.add_argument("--out-layer", help="output layer name")
    p.add_argument("--grid", type=float, help="step in metres of the public lattice outputs are snapped to (default: 1 m, finer for large epsilon)")
    p.add_argument("--continuous", action="store_true", help="release unrounded coordinates (no finite-precision bound; not recommended)")
    p.add_argument("--bounds", type=float, nargs=4, metavar=("XMIN", "YMIN", "XMAX", "YMAX"),
                   help="public study area in the input's CRS (default: the CRS's area of use)")
    p.add_argument("--region", help="vector file of the polygon outputs are kept in")
    p.add_argument("--keep", action="append", metavar="COLUMN",
                   help="keep a location-like attribute column deliberately (repeatable); such columns are refused otherwise")
    p.add_argument("--seed", type=int, help="seed for reproducible demos/tests only (default: OS entropy)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.set_defaults(func=_cmd_perturb)

    r = sub.add_parser("report", help="displacement statistics (metres) between a true and a released file")
    r.add_argument("true")
    r.add_argument("released")
    r.add_argument("--layer", help="layer of the true file")
    r.add_argument("--delta", type=float, default=0.9, help="quantile for alpha(delta), default 0.9")
    r.set_defaults(func=_cmd_report)

    d = sub.add_parser("demo", help="perturb the shipped Soho cholera points; write a GeoPackage and a PNG map")
    d.add_argument("--out", default="out", help="output folder (default: out)")
    d.add_argument("--radius", type=float, default=50.0, help="metres within which the level is ln 4 (default 50)")
    d.add_argument("--seed", type=int, default=None, help="seed for a reproducible picture (default: OS entropy)")
    d.set_defaults(func=_cmd_demo)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "perturb" and args.epsilon is None and (args.level is None or args.radius is None):
        parser.exit(EXIT_BAD_INPUT, "geopriv: error: give --epsilon, or both --level and --radius\n")
    try:
        return args.func(args)
    except CLIError as exc:
        print(f"geopriv: error: {exc}", file=sys.stderr)
    except (ValueError, TypeError, OSError, ImportError) as exc:  # GeoprivError is a ValueError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"geopriv: error: {first}", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
