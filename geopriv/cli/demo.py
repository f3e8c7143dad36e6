"""geopriv demo: the Quickstart on shipped data.

It runs after the plain install (``pip install geopriv``): the release and its numbers need only
geopriv's dependencies; the map is drawn when matplotlib (the ``plot`` extra) is installed, and
otherwise the demo says how to get it.
"""

from __future__ import annotations

import math
from pathlib import Path


def _cmd_demo(args) -> int:
    import geopriv

    from .. import datasets, io
    from ..exceptions import MissingDependencyError, user_message
    from ..plot import plot_release, require_matplotlib

    try:  # the map needs the plot extra; the release does not, so a plain install runs the demo without it
        require_matplotlib()
        no_map = None
    except MissingDependencyError as exc:
        no_map = exc
    data = datasets.get_path("soho")
    deaths = io.read_vector(data, "deaths")
    out = geopriv.perturb(deaths, level=math.log(4), radius=args.radius, rng=args.seed)
    outdir = Path(args.out)
    gpkg = outdir / "soho_perturbed.gpkg"
    png = outdir / "soho_map.png"
    target = io.check_output(gpkg, "deaths_perturbed", True)
    with io.Staging() as stage:  # both files or neither; a link at png is replaced, not written through
        stage.vector(out, target)
        if no_map is None:
            stage.file(
                png,
                lambda tmp: plot_release(
                    deaths,
                    out,
                    path=tmp.with_suffix(".png"),
                    title="Soho cholera deaths (1854): true addresses and a geo-indistinguishable release "
                    f"(ε = ln 4 within {args.radius:g} m)",
                ),
            )
        stage.commit()
    rep = geopriv.utility_report(deaths, out)
    rec = out.attrs["geopriv"]
    print(f"Input : {data.name} layer 'deaths', {len(deaths)} points, {deaths.crs}")
    from ..crs import ground_scale

    c = deaths.geometry.union_all().centroid
    smax, _ = ground_scale(deaths.crs, c.x, c.y)
    frame = (
        "in the input CRS"
        if rec["frame"] == "planar"
        else "per point on the ellipsoid's sphere (returned in EPSG:3857)"
    )
    print(
        f"Privacy: ln 4 within {args.radius:g} m = {rec['epsilon_per_m']:.5f} per ground metre; EPSG:3857 has "
        f"{float(smax[0]):.3f} units per ground metre here, so noise was drawn {frame}"
    )
    print(
        f"Utility: mean {rep['mean_m']:.1f} m, median {rep['median_m']:.1f} m; 90 % of the points moved less than "
        f"{rep['alpha_0.9_m']:.1f} m (alpha_0.9_m)"
    )
    if no_map is None:
        print(f"Wrote  : {gpkg}\n         {png}")
    else:
        print(f"Wrote  : {gpkg}")
        print(f"Map    : not drawn. {user_message(no_map, 'cli')} Then run the demo again to draw {png}.")
    return 0


EPILOG_DEMO = """examples:
  geopriv demo --out out --seed 1     # writes out/soho_perturbed.gpkg and out/soho_map.png

The map (out/soho_map.png) needs matplotlib, the plot extra: pip install 'geopriv[plot]'.
Without it the demo writes the release, prints its privacy and utility, and says how to get the map.
"""


def demo_arguments(d) -> None:
    d.add_argument("--out", default="out", help="output folder (default: out); its files are replaced")
    d.add_argument("--radius", type=float, default=50.0, help="metres within which the level is ln 4 (default 50)")
    d.add_argument("--seed", type=int, default=None, help="seed for a reproducible picture (default: OS entropy)")
    d.set_defaults(func=_cmd_demo)
