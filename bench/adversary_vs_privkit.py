"""Adversary error: geopriv.adversary against privkit 0.5.1 on the same releases (issue 34).

Planar Laplace at ln 4 within 200 m (epsilon = ln 4 / 200 per ground metre) on

* (a) the Soho cholera deaths (``geopriv/data/soho_cholera.gpkg`` layer ``deaths``, 324 points,
  EPSG:3857), public area ``SOHO`` (the docs' study area);
* (b) GeoLife queries: ``geopriv.sample_queries`` (the protocol of docs/traces.md, p = 0) on
  GeoLife users 000-009 (``geolife_users_000_009.parquet`` from ``$GEOPRIV_DATA``, default
  ``../shared/data`` beside the checkout, or ``--data``), the queries inside the public area
  ``GEOLIFE`` (4.2 x 4.4 km around Tsinghua/Zhongguancun in ``GEOLIFE_CRS``, a local transverse
  Mercator: geopriv's adversary needs a projected CRS; hard-coded), a seeded random subset.

Runs in two environments: geopriv in the project's (``.venv/latest``), privkit in its own
(``bash bench/setup_privkit.sh`` creates ``bench/.venv-privkit``; privkit pins numpy 1.26 and
needs TensorFlow, torch and open3d).  This one file is both halves: the geopriv side writes
``.npy``/``.json`` inputs into a temporary folder and runs ``bench/.venv-privkit/bin/python
bench/adversary_vs_privkit.py --privkit-worker DIR`` (which imports privkit, never geopriv)::

    bash bench/setup_privkit.sh                                  # once
    timeout 1200 nice .venv/latest/bin/python bench/adversary_vs_privkit.py [--n-mc-metric 3000]

Writes ``bench/results/adversary_vs_privkit.md`` and prints it (about 10 minutes on 2 shared cores;
the GeoLife half of privkit, 9,600 cells per likelihood in pure Python, is the long pole).

What is compared (per data set, uniform prior over the public area's grid; Soho also with the
deaths' own empirical prior, which privkit's OptimalHW/OmniHW attacks build from data)
--------------------------------------------------------------------------------------------
geopriv (``geopriv.adversary``)
    ``adversary_error(epsilon=..., area=..., crs=..., prior=...)``: ``expected_error_m`` (the
    optimal Bayesian adversary's expected error, Shokri et al. 2011, exact on the grid) and
    ``displacement_m``; ``empirical_adversary_error(true, released, adversary)`` on a concrete
    ``geopriv.perturb`` release (seeded), and ``adversary.guess(released)``.
privkit 0.5.1
    privkit has no expected-error function: its adversary error is the empirical mean of
    ``metrics.AdversaryError`` (great-circle distance, sphere of radius 6,371,009 m, between
    the truth and the attack's guess) after ``attacks.HW`` (Shokri et al. 2012's Bayesian attack
    for the distance loss: posterior = planar-Laplace likelihood on the grid's cell centres x
    mobility profile, guess = the posterior's geometric median by Weiszfeld iterations, a point
    anywhere, not restricted to cells).  Its expected error is estimated here by Monte Carlo
    (``--n-mc-metric`` / ``--n-mc-latlon`` truths drawn from the prior at cell centres, each
    released with privkit's planar Laplace sampler, clamped into the area as geopriv's releases
    are, and attacked; the first ``--n-mc-raw`` also unclamped).  geopriv's own guess is scored
    on the very same draws (paired), and its exact figure on ``--n-check`` draws of its model.  ``ppms.PlanarLaplace.expected_error()`` = 2 / epsilon is its
    expected displacement.  Two privkit set-ups:

    - ``privkit as shipped``: lat/lon data, ``utils.GridMap`` over the public area's lat/lon
      box with geopriv's cell side as spacing, ``ppms.PlanarLaplace`` for privkit's own
      release, ``HW`` with a uniform profile (or ``BuildKnowledge``'s normalised histogram of
      the truths: privkit's OmniHW profile).  privkit does its planar geometry on the x, y of
      Earth-centred Cartesian coordinates (the equatorial plane), see the report.
    - ``privkit on geopriv's grid``: privkit's own ``PlanarLaplace.planar_laplace_distribuition``
      and ``HW.execute_attack`` (likelihood, posterior, geometric median) run on geopriv's very
      grid, its cell centres given in local ground kilometres (azimuthal equidistant around the
      area's centre) through a small grid adapter, with geopriv's prior array; truths and
      releases in the same frame.  This isolates the Bayesian computation from privkit's
      geometry.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "adversary_vs_privkit.md"
PK_PYTHON = ROOT / "bench" / ".venv-privkit" / "bin" / "python"
PARQUET = "geolife_users_000_009.parquet"
DATA_DIR = Path(os.environ.get("GEOPRIV_DATA") or ROOT.parent / "shared" / "data")

LEVEL, RADIUS = math.log(4), 200.0
EPSILON = LEVEL / RADIUS  # per ground metre
#: the docs' public study area of the Soho deaths, EPSG:3857 (docs/synthesize.md, docs/diffusion.md)
SOHO = (-15800.0, 6711900.0, -14600.0, 6713300.0)
#: GeoLife's CRS: geopriv's adversary needs a projected CRS; a transverse Mercator centred on the
#: area (scale 1 there) keeps the area's rectangle a lat/lon box within a metre, so that privkit's
#: lat/lon GridMap covers the same ground (UTM 50N's meridian is 0.7 degrees away: 33 m of skew)
GEOLIFE_CRS = "+proj=tmerc +lat_0=39.99 +lon_0=116.325 +k=1 +x_0=0 +y_0=0 +datum=WGS84 +units=m +no_defs"
#: GeoLife public area in GEOLIFE_CRS: 4.2 x 4.4 km around Tsinghua / Zhongguancun (116.300-116.350 E,
#: 39.970-40.010 N), where users 000-009 live and work (hard-coded, not computed from the data)
GEOLIFE = (-2100.0, -2200.0, 2100.0, 2200.0)


# ============================================================================ privkit worker
# Runs in bench/.venv-privkit: imports numpy, pandas, pyproj and privkit only.


class _Cell:
    __slots__ = ("id",)

    def __init__(self, cell_id: int):
        self.id = cell_id


class _MetricGrid:
    """geopriv's grid as privkit sees a grid: cell centres in local ground km (row-major, ny x nx).

    Implements what ``PlanarLaplace.planar_laplace_distribuition`` and ``HW.execute_attack`` read
    from a ``privkit.utils.GridMap``: ``get_size``, ``cells[i][j].id`` (1-based, row-major),
    ``get_cartesian_cell`` and ``get_cartesian_cells`` (x, y, z; privkit uses x and y).
    """

    def __init__(self, centres_km: np.ndarray, ny: int, nx: int):
        self._xy = np.asarray(centres_km, dtype=float).reshape(ny, nx, 2)
        self._size = [ny, nx]
        self.cells = [[_Cell(i * nx + j + 1) for j in range(nx)] for i in range(ny)]
        self._cart = [[np.array([self._xy[i, j, 0], self._xy[i, j, 1], 0.0]) for j in range(nx)] for i in range(ny)]

    def get_size(self):
        return list(self._size)

    def get_cartesian_cell(self, i: int, j: int):
        return self._cart[i][j]

    def get_cartesian_cells(self):
        return self._cart


def _stats(v) -> dict:
    v = np.asarray(v, dtype=float)
    return {
        "mean_m": float(v.mean()),
        "median_m": float(np.median(v)),
        "p90_m": float(np.quantile(v, 0.9)),
        "se_m": float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan"),
        "n": int(len(v)),
    }


def _weiszfeld(w: np.ndarray, pts: np.ndarray, start: np.ndarray, tol_m: float = 1e-3, max_iter: int = 20000):
    """The weighted geometric median of ``pts`` (metres) run to convergence (steps under ``tol_m``)."""
    keep = w > 0
    w, pts = w[keep], pts[keep]
    y = np.asarray(start, dtype=float)
    for _ in range(max_iter):
        d = np.hypot(*(pts - y).T)
        if np.any(d < 1e-9):  # on a support point: stop there (Weiszfeld's fixed point)
            break
        t = w / d
        y_new = t @ pts / t.sum()
        if np.hypot(*(y_new - y)) < tol_m:
            return y_new
        y = y_new
    return y


def privkit_worker(work: Path) -> None:
    """The privkit half: reads ``work/config.json`` and arrays, writes ``work/privkit.json``."""
    import contextlib
    import io
    import random

    import pandas as pd
    import pyproj

    with contextlib.redirect_stdout(io.StringIO()):
        import privkit
        from privkit.attacks import HW
        from privkit.data import LocationData
        from privkit.metrics import AdversaryError, QualityLoss
        from privkit.ppms import PlanarLaplace
        from privkit.utils import GridMap
        from privkit.utils import constants as C
        from privkit.utils import geo_utils as gu
        from privkit.utils.training_utils import BuildKnowledge

    cfg = json.loads((work / "config.json").read_text())
    eps = float(cfg["epsilon_per_m"])
    ny, nx = cfg["shape"]
    rng = np.random.default_rng(cfg["seed"])
    random.seed(cfg["seed"])  # privkit's PlanarLaplace draws from the random module
    n_mc_metric, n_mc_latlon, n_mc_raw = int(cfg["n_mc_metric"]), int(cfg["n_mc_latlon"]), int(cfg["n_mc_raw"])
    area_m = np.asarray(cfg["area_m"], dtype=float)  # the public area's box in the local frame (xmin, ymin, xmax, ymax)
    aeqd = pyproj.CRS.from_proj4(cfg["aeqd"])
    to_m = pyproj.Transformer.from_crs("EPSG:4326", aeqd, always_xy=True)
    to_ll = pyproj.Transformer.from_crs(aeqd, "EPSG:4326", always_xy=True)
    true_ll = np.load(work / "true_lonlat.npy")
    rel_ll = np.load(work / "released_lonlat.npy")
    centres_m = np.load(work / "centres_m.npy")
    out: dict = {
        "privkit_version": privkit.__version__,
        "numpy_version": np.__version__,
        "expected_error_formula_m": PlanarLaplace(eps).expected_error(),
        "runs": {},
    }
    timings: dict = {}

    def adversary_error(true_lonlat, adv_lonlat):
        """privkit's AdversaryError metric on LocationData (great-circle metres)."""
        df = pd.DataFrame(
            {
                C.LATITUDE: true_lonlat[:, 1],
                C.LONGITUDE: true_lonlat[:, 0],
                C.ADV_LATITUDE: adv_lonlat[:, 1],
                C.ADV_LONGITUDE: adv_lonlat[:, 0],
            }
        )
        ld = LocationData()
        ld.load_data(df)
        m = AdversaryError()
        with contextlib.redirect_stdout(io.StringIO()):
            m.execute(ld)
        return np.asarray(m.values, dtype=float)

    def hw_latlon(true_lonlat, obf_lonlat, grid, profile):
        """privkit as shipped: HW on a LocationData with a GridMap; returns (guess lon/lat, errors)."""
        df = pd.DataFrame(
            {
                C.LATITUDE: true_lonlat[:, 1],
                C.LONGITUDE: true_lonlat[:, 0],
                C.OBF_LATITUDE: obf_lonlat[:, 1],
                C.OBF_LONGITUDE: obf_lonlat[:, 0],
            }
        )
        ld = LocationData()
        ld.load_data(df)  # uid = tid = 1 for every row: one "trajectory", all rows attacked
        ld.grid = grid
        ld.test_user_indexes = [(1, 1)]
        HW(eps, profile).execute(ld)
        guess = ld.data[[C.ADV_LONGITUDE, C.ADV_LATITUDE]].to_numpy(dtype=float)
        return guess, adversary_error(true_lonlat, guess)

    def hw_metric(obf_m, mgrid, prior, converged=None):
        """privkit's likelihood and HW attack on geopriv's grid (metres in, metres out).

        ``converged``: an array filled with the geometric median of the same posterior run to
        convergence (a diagnostic: privkit's Weiszfeld loop stops at a step under 31.6 m)."""
        pl, hw = PlanarLaplace(eps), HW(eps, prior)
        guesses = np.empty_like(obf_m)
        for k, z in enumerate(obf_m):
            f = pl.planar_laplace_distribuition(z / 1000.0, mgrid)
            guesses[k] = np.asarray(hw.execute_attack(f, mgrid), dtype=float) * 1000.0
            if converged is not None:
                post = f * prior
                converged[k] = _weiszfeld(post / post.sum(), centres_m, guesses[k])
        return guesses

    def pl_noise_m(n):
        """privkit's planar Laplace sampler (uniform angle, inverse-CDF radius), in the ground plane."""
        pl = PlanarLaplace(eps)
        r = np.array([pl.inverse_cumulative_gamma(random.random()) for _ in range(n)])
        th = np.array([random.random() * 2 * math.pi for _ in range(n)])
        return np.column_stack([r * np.cos(th), r * np.sin(th)])

    def metres_to_ll(xy):
        lon, lat = to_ll.transform(xy[:, 0], xy[:, 1])
        return np.column_stack([lon, lat])

    # ------------------------------------------------------------------ privkit on geopriv's grid
    mgrid = _MetricGrid(centres_m / 1000.0, ny, nx)
    rel_m = np.column_stack(to_m.transform(rel_ll[:, 0], rel_ll[:, 1]))
    for prior_name in cfg["priors"]:
        prior = np.load(work / f"prior_{prior_name}.npy").ravel()
        prior = prior / prior.sum()
        run: dict = {}
        t0 = time.perf_counter()
        conv = np.empty_like(rel_m)
        g = hw_metric(rel_m, mgrid, prior, converged=conv)
        g_ll = metres_to_ll(g)
        np.save(work / f"pk_metric_guess_{prior_name}.npy", g_ll)
        np.save(work / f"pk_metric_guess_converged_{prior_name}.npy", metres_to_ll(conv))
        run["release_geopriv"] = _stats(adversary_error(true_ll, g_ll))
        run["release_geopriv_converged"] = _stats(adversary_error(true_ll, metres_to_ll(conv)))
        run["weiszfeld_shift"] = _stats(np.hypot(*(conv - g).T))
        timings[f"metric/{prior_name}/release"] = time.perf_counter() - t0
        first = prior_name == cfg["priors"][0]  # the full Monte Carlo for the first prior, a shorter one after
        t0 = time.perf_counter()
        n = n_mc_metric if first else n_mc_metric // 2
        cells = rng.choice(len(prior), size=n, p=prior)
        x = centres_m[cells]
        z_raw = x + pl_noise_m(n)
        # releases clamped into the public area, as geopriv.perturb(bounds=) releases them
        z = np.clip(z_raw, area_m[:2], area_m[2:])
        g = hw_metric(z, mgrid, prior)
        x_ll, g_ll = metres_to_ll(x), metres_to_ll(g)
        run["mc"] = _stats(adversary_error(x_ll, g_ll))
        run["mc_displacement_raw"] = _stats(np.hypot(*(z_raw - x).T))
        run["mc_displacement_clamped"] = _stats(np.hypot(*(z - x).T))
        run["mc_clamped_share"] = float(np.mean(np.any(z != z_raw, axis=1)))
        # the draws, so that the geopriv side scores its own adversary on the very same ones
        np.save(work / f"pk_metric_mc_true_{prior_name}.npy", x_ll)
        np.save(work / f"pk_metric_mc_obs_{prior_name}.npy", metres_to_ll(z))
        np.save(work / f"pk_metric_mc_guess_{prior_name}.npy", g_ll)
        timings[f"metric/{prior_name}/mc"] = time.perf_counter() - t0
        if first:  # the same truths and noise, unclamped: what privkit's attack models (an unbounded release)
            t0 = time.perf_counter()
            k = min(n_mc_raw, n)
            g = hw_metric(z_raw[:k], mgrid, prior)
            run["mc_raw"] = _stats(adversary_error(x_ll[:k], metres_to_ll(g)))
            run["mc_raw_clamped_same_draws"] = _stats(adversary_error(x_ll[:k], g_ll[:k]))
            timings[f"metric/{prior_name}/mc_raw"] = time.perf_counter() - t0
        out["runs"][f"metric/{prior_name}"] = run

    # ------------------------------------------------------------------ privkit as shipped (lat/lon)
    min_lat, max_lat, min_lon, max_lon = cfg["bbox_latlon"]
    grid = GridMap(min_lat, max_lat, min_lon, max_lon, spacing=float(cfg["spacing_m"]))
    pny, pnx = grid.get_size()
    n_cells = pny * pnx
    centres_ll = np.array([[c.center[1], c.center[0]] for row in grid.cells for c in row])
    out["latlon_grid"] = {"shape": [pny, pnx], "spacing_m": float(cfg["spacing_m"])}
    for prior_name in cfg["priors"]:
        if prior_name == "uniform":
            profile = np.full(n_cells, 1.0 / n_cells)
        else:  # privkit's own profile from the data: OmniHW's normalised histogram of locationstamps
            bk = BuildKnowledge()
            bk.grid = grid
            stamps = [grid.get_locationstamp(lat, lon) for lon, lat in true_ll]
            profile = bk.norm_location_histogram(np.asarray(stamps))
        run = {}
        t0 = time.perf_counter()
        g_ll, err = hw_latlon(true_ll, rel_ll, grid, profile)
        np.save(work / f"pk_latlon_guess_{prior_name}.npy", g_ll)
        run["release_geopriv"] = _stats(err)
        timings[f"latlon/{prior_name}/release_geopriv"] = time.perf_counter() - t0
        # privkit's own release of the same truths: its PlanarLaplace never clamps (with a grid attached it
        # redraws until inside; none is attached here), so this release is unbounded
        t0 = time.perf_counter()
        df = pd.DataFrame({C.LATITUDE: true_ll[:, 1], C.LONGITUDE: true_ll[:, 0]})
        ld = LocationData()
        ld.load_data(df)
        PlanarLaplace(eps).execute(ld)
        obf = ld.data[[C.OBF_LONGITUDE, C.OBF_LATITUDE]].to_numpy(dtype=float)
        ql = QualityLoss()
        with contextlib.redirect_stdout(io.StringIO()):
            ql.execute(ld)  # reuses the column PlanarLaplace wrote: the sampled radius r
        ground = np.array([gu.great_circle_distance(a[1], a[0], b[1], b[0]) for a, b in zip(true_ll, obf)])
        _, err = hw_latlon(true_ll, obf, grid, profile)
        run["release_privkit"] = _stats(err)
        run["quality_loss_metric"] = _stats(ql.values)
        run["ground_displacement"] = _stats(ground)
        timings[f"latlon/{prior_name}/release_privkit"] = time.perf_counter() - t0
        # Monte Carlo of the expected error: truths = cell centres drawn from the profile, privkit's
        # PlanarLaplace, releases clamped into the area's lat/lon box (as geopriv's); unclamped after
        first = prior_name == cfg["priors"][0]
        t0 = time.perf_counter()
        n = n_mc_latlon if first else n_mc_latlon // 2
        cells = rng.choice(n_cells, size=n, p=profile / profile.sum())
        x = centres_ll[cells]
        pl = PlanarLaplace(eps)
        z_raw = np.array([pl.get_obfuscated_point(lat, lon)[:2] for lon, lat in x])[:, ::-1]
        z = np.column_stack([np.clip(z_raw[:, 0], min_lon, max_lon), np.clip(z_raw[:, 1], min_lat, max_lat)])
        _, err = hw_latlon(x, z, grid, profile)
        run["mc"] = _stats(err)
        dx = np.column_stack(to_m.transform(z_raw[:, 0], z_raw[:, 1])) - np.column_stack(
            to_m.transform(x[:, 0], x[:, 1])
        )
        run["mc_displacement_raw"] = _stats(np.hypot(*dx.T))
        run["mc_noise_sd_east_m"] = float(dx[:, 0].std())
        run["mc_noise_sd_north_m"] = float(dx[:, 1].std())
        timings[f"latlon/{prior_name}/mc"] = time.perf_counter() - t0
        if first:
            t0 = time.perf_counter()
            k = min(n_mc_raw // 2, n)
            _, err_raw = hw_latlon(x[:k], z_raw[:k], grid, profile)
            run["mc_raw"] = _stats(err_raw)
            run["mc_raw_clamped_same_draws"] = _stats(err[:k])
            timings[f"latlon/{prior_name}/mc_raw"] = time.perf_counter() - t0
        out["runs"][f"latlon/{prior_name}"] = run
    # the reference: privkit's sampler in the ground plane, the same draws' east/north spread
    dxy = pl_noise_m(max(n_mc_latlon, 2000))
    out["ground_plane_noise_sd_m"] = [float(dxy[:, 0].std()), float(dxy[:, 1].std())]
    # HW's way back from its plane to lat/lon: a guess meant 100 m north / east of the release (the
    # x, y of that point's Earth-centred coordinates, in km as HW uses them), with the release's z
    lat_c, lon_c = (min_lat + max_lat) / 2, (min_lon + max_lon) / 2
    # privkit's PlanarLaplace at the area's centre, 20,000 draws: its noise's shape on the ground
    pl = PlanarLaplace(eps)
    draws = np.array([pl.get_obfuscated_point(lat_c, lon_c) for _ in range(20_000)])
    mx, my = to_m.transform(lon_c, lat_c)
    dx = np.column_stack(to_m.transform(draws[:, 1], draws[:, 0])) - [mx, my]
    out["noise_shape"] = {
        "sd_east_m": float(dx[:, 0].std()),
        "sd_north_m": float(dx[:, 1].std()),
        "mean_ground_m": float(np.hypot(*dx.T).mean()),
        "mean_r_m": float(draws[:, 2].mean()),
        "n": len(draws),
    }
    _, _, z_obs = gu.geodetic2cartesian(lat_c, lon_c, gu.EARTH_RADIUS / 1000)
    back = {}
    for name, (dlon_m, dlat_m) in (("north", (0.0, 100.0)), ("east", (100.0, 0.0))):
        mx, my = to_m.transform(lon_c, lat_c)
        tlon, tlat = to_ll.transform(mx + dlon_m, my + dlat_m)
        gx, gy, _ = gu.geodetic2cartesian(tlat, tlon, gu.EARTH_RADIUS / 1000)
        blat, blon = gu.cartesian2geodetic(gx, gy, z_obs)
        bx, by = to_m.transform(blon, blat)
        back[name] = float(math.hypot(bx - mx, by - my))
    out["hw_back_conversion_100m"] = back
    out["lat_centre"] = lat_c
    out["timings_s"] = timings
    (work / "privkit.json").write_text(json.dumps(out, indent=1))


# ============================================================================ geopriv side

EXPLANATION = """## What each side computes

**privkit 0.5.1** (read in its source, `bench/.venv-privkit/lib/python3.11/site-packages/privkit/`):

* `ppms.PlanarLaplace(epsilon)` (`ppms/planar_laplace.py`): epsilon per metre.  It draws an angle
  theta uniformly and a radius r by the exact inverse CDF of planar Laplace's radial law (Lambert
  W_-1), then adds (r cos theta, r sin theta) to the **x, y of the point's Earth-centred Cartesian
  coordinates** (a sphere of radius 6,371,009 m), keeps z, and converts back (lat = asin(z/|p|),
  lon = atan2(y, x)).  A shift in the equatorial plane keeps its east-west part on the ground
  but its north-south part comes out multiplied by sin(latitude) (at the equator there is no
  north-south noise at all).  With a `GridMap` attached it redraws until the point is inside (a
  truncated law); it never clamps.  The `quality_loss` column it writes is the sampled r, and
  `metrics.QualityLoss.execute` reuses that column instead of measuring the ground distance.
  `expected_error()` is 2 / epsilon.
* `attacks.HW(epsilon, mobility_profile)` (`attacks/hw.py`): Shokri et al. 2012's Bayesian
  attack for the distance loss.  For each release z, the likelihood of each grid cell x is the
  planar-Laplace *density at the cell centre*, (1000 eps)^2 / (2 pi) exp(-1000 eps |z - x|),
  with z the released point (not a cell) and distances in km in the equatorial x, y plane of
  Earth-centred coordinates (so north-south distances shrink by sin(latitude)).  Posterior =
  likelihood x profile, normalised.  Guess = the posterior's weighted geometric median of the
  cell centres by Weiszfeld iterations from the posterior mean, stopped when a step is shorter
  than sqrt(1e-3) km = **31.6 m** (or after 200 iterations): a point anywhere in the grid's
  hull, not a cell.  It goes back to lat/lon with the release's z, which multiplies the
  guess's north-south move away from the release by sin^2(latitude) (measured above).
  `OptimalHW` / `OmniHW` build the profile from the data (normalised histogram of the train /
  test rows over the grid: the data's own empirical prior), `PEBA` estimates it from the
  releases.  privkit has no uniform prior of its own: the uniform profile here is passed to `HW`.
* `metrics.AdversaryError` (`metrics/adv_error.py`): per row, the great-circle distance (the
  sphere above) between the truth and the attack's guess; it prints mean and median.  There is
  no expectation over a prior anywhere in privkit (no counterpart of `expected_error_m`): hence
  the Monte Carlo here.
* `utils.GridMap(min_lat, max_lat, min_lon, max_lon, spacing)`: ceil(width / spacing) x
  ceil(height / spacing) cells of equal degrees covering exactly the lat/lon box (width measured
  along the north edge), numbered row-major from the north-west.
* Not compared: `ppms.PrivacyAwareRemapping` (Duarte et al. 2024: remaps releases to minimise
  the data's own count-weighted quality loss, a utility post-processing, not an adversary),
  `attacks.TopN` (re-identification by top places: the counterpart of
  `geopriv.attacks.top_places_*`), `attacks.PEBA` (profile estimation: no fixed prior to match).

**geopriv** (`geopriv.adversary`): a grid of square cells of one ground size (default
max(longest side / 100, 0.2 / eps)) anchored at the area's north-west corner in a projected CRS
(a geographic CRS is refused), rows and columns rounded up; the prior on the cells, truths at cell
centres; outputs are cells: a release is located in its cell, one beyond the area in the nearest
boundary cell, and the channel is the Laplace density's mass in each cell (5 x 5 sub-samples)
with the boundary cells holding all the mass beyond them (what clamping does); the guess for each
output is the area cell minimising the posterior expected distance (the exact discrete geometric
median), distances Euclidean in ground metres on the grid.  `expected_error_m` is the exact
expectation of that model; `displacement_m` the same with "guess = the release's own cell";
`empirical_adversary_error` the geodesic distance from each true point to its guessed cell
centre.

## Where they compute the same quantity

With privkit's own computation run on geopriv's grid and prior (the summary table), the expected
adversary error agrees to well within 5 % on every data set and prior, the paired comparison on
identical draws to a fraction of a per cent, and the expected displacement of the clamped release
too.  geopriv's exact figure also matches 100,000 draws of its own model (same grid, prior,
clamping) to within {check_max}: no error found in `expected_error_m`.  On a concrete release the errors
agree within {conv_max} once privkit's geometric median is run to convergence.  The remaining residuals
are the expected ones: geopriv guesses a cell (28.9 m / 44 m here) and sees the release's cell,
privkit guesses any point and sees the exact release; privkit's likelihood ignores the clamping
(it reads a clamped release as a planar Laplace output on the boundary), which barely matters
(the unclamped and clamped draws give the same error within {clamp_max}); privkit measures on a sphere
(R = 6,371,009 m) and geopriv on the WGS 84 ellipsoid (at most 0.3 % apart at these latitudes).

## Where they differ, and why

1. **privkit's 31.6 m Weiszfeld stop** (HW as is, Soho with the uniform prior: {rel_hw} on geopriv's
   release).  The guesses stay near the posterior mean they start from ({shift:.1f} m from the converged
   median on average).  Under the uniform prior this costs nothing in expectation (the paired Monte
   Carlo: {paired}): the expected cost is flat around the median.  On the Soho deaths, clustered in
   the middle of the area, a guess pulled toward the mean (the centre) happens to be closer: the
   uniform prior is wrong for those data, and privkit's inexact median is luckily wrong the same
   way.  Run to convergence, privkit's posterior gives geopriv's figure ({rel_conv}).
2. **privkit's geometry (as shipped)**.  (a) Its `PlanarLaplace` squeezes the noise north-south by
   sin(latitude) ({sin_s:.2f} in London, {sin_g:.2f} in Beijing; s.d. ratio measured above): its releases move
   {ground_s:.0f} m / {ground_g:.0f} m on the ground on average instead of 2 / eps = 289 m, and the guarantee it states
   (ln 4 within 200 m) holds east-west only (north-south it is ln 4 within 200 sin(lat) m: {r_s:.0f} m
   in London, {r_g:.0f} m in Beijing; no protection north-south at the equator).  So its own releases
   are attacked with smaller errors than geopriv's ({own_s} Soho, {own_g} GeoLife), and its Monte Carlo
   expected error is lower ({mc_s} Soho, {mc_g} GeoLife): less noise, not a better attack.  Its
   `QualityLoss` reports the sampled r (about 2 / eps): it overstates the ground displacement by
   {ql_s} / {ql_g}.  (b) `HW` measures distances in the equatorial plane and maps its guess back with
   the release's z: it believes north-south noise is 1 / sin(lat) wider than geopriv's (and
   1 / sin^2(lat) wider than its own), and its north-south moves land at sin^2(lat) of what it
   meant.  On geopriv's release with a uniform prior guesses stay near the release and this barely
   shows ({ship_s} / {ship_g}); with the concentrated empirical prior of the Soho deaths, where the guess
   must move far toward the cluster around the Broad Street pump, it costs {ship_e} (guesses a median {gap_e:.0f} m from geopriv's).
3. **2 / eps against `displacement_m`** are different quantities: privkit's `expected_error()`
   is the mean displacement of unbounded planar Laplace; geopriv's `displacement_m` is that of the
   release as published, clamped into the area and measured to its cell ({disp_s:.0f} m in Soho, where {cl_s:.0f} %
   of releases are clamped; {disp_g:.0f} m in the larger GeoLife area, {cl_g:.0f} % clamped).  The unclamped Monte
   Carlo displacement reproduces 2 / eps ({raw_disp:.0f} m).
4. **Grids**: privkit's `GridMap` divides the lat/lon box evenly (Soho: 31 x 27 cells of about
   27.7 x 28.1 m); geopriv's is anchored at the north-west corner with whole cells of 28.85 m, so
   it overhangs the area by 22 m to the south and 3 m to the east.  Both are given the same box.

## Noticed in geopriv (not a wrong number)

With a rectangular area, geopriv's grid rounds rows and columns up, and the cells of the overhang
are part of the uniform prior although their centres lie outside the declared area: in Soho the
southern row (3.2 % of the prior mass) has its centres 8 m south of the area, i.e. the adversary's
prior includes people where `perturb(bounds=...)` refuses data.  No guess lands there and the
effect on the figures is far below the grid's own sensitivity (0.7 % between 28.85 m and 8.72 m
cells), but "uniform over the public area" is, strictly, uniform over the grid.
"""


def _affine6(t) -> tuple:
    """(a, b, c, d, e, f) of an affine transform (affine.Affine or a 6-sequence): x = a*col + b*row + c."""
    if all(hasattr(t, k) for k in "abcdef"):
        return tuple(float(getattr(t, k)) for k in "abcdef")
    return tuple(float(v) for v in list(t)[:6])


def _grid_centres(adv) -> np.ndarray:
    """Cell centres (ny*nx, 2) of an AdversaryError's grid in its CRS, row-major like error_map."""
    a, b, c, d, e, f = _affine6(adv.transform)
    ny, nx = adv.shape
    col, row = np.meshgrid(np.arange(nx) + 0.5, np.arange(ny) + 0.5)
    return np.column_stack([(a * col + b * row + c).ravel(), (d * col + e * row + f).ravel()])


def _cell_of(adv, xy: np.ndarray) -> np.ndarray:
    """Flat (row-major) cell index of points (in the grid's CRS); -1 outside the grid."""
    a, b, c, d, e, f = _affine6(adv.transform)
    if b or d:
        raise SystemExit("rotated grid transforms are not handled here")
    ny, nx = adv.shape
    col = np.floor((xy[:, 0] - c) / a).astype(int)
    row = np.floor((xy[:, 1] - f) / e).astype(int)
    ok = (col >= 0) & (col < nx) & (row >= 0) & (row < ny)
    return np.where(ok, row * nx + col, -1)


def _rel(a: float, b: float) -> str:
    return f"{100.0 * (a - b) / b:+.1f} %"


def _m(v: float) -> str:
    return f"{v:,.1f} m"


def _soho_case():
    import geopandas as gpd

    deaths = gpd.read_file(ROOT / "geopriv" / "data" / "soho_cholera.gpkg", layer="deaths")
    return {
        "name": "soho",
        "title": "Soho deaths (324 points, EPSG:3857)",
        "true": deaths,
        "crs": deaths.crs,
        "crs_label": "EPSG:3857, the docs' study area",
        "area": SOHO,
        "priors": ["uniform", "empirical"],
    }


def _geolife_case(args):
    import geopandas as gpd
    import geopriv

    path = Path(args.data) if args.data else DATA_DIR / PARQUET
    fixes = gpd.read_parquet(path)
    q = geopriv.sample_queries(fixes, traj_id="trajectory_id", time="t", p=0.0, rng=args.seed).to_crs(GEOLIFE_CRS)
    xy = q.get_coordinates().to_numpy()
    inside = (xy[:, 0] >= GEOLIFE[0]) & (xy[:, 0] <= GEOLIFE[2]) & (xy[:, 1] >= GEOLIFE[1]) & (xy[:, 1] <= GEOLIFE[3])
    q_in = q[inside]
    # a seeded random subset in random order, renumbered (perturb refuses rows in spatial order)
    sub = q_in.sample(n=min(args.n_queries, len(q_in)), random_state=args.seed).reset_index(drop=True)
    sub = sub[["user", "trajectory_id", "t", "geometry"]]
    return {
        "name": "geolife",
        "true": sub,
        "crs": sub.crs,
        "area": GEOLIFE,
        "priors": ["uniform"],
        "crs_label": "metres of GEOLIFE_CRS, a transverse Mercator centred on 116.325 E, 39.99 N",
        "title": f"GeoLife queries ({len(sub)} of the {len(q_in):,} sample_queries queries inside the area; "
        f"{len(q):,} in all; a local transverse Mercator)",
    }


def _geopriv_side(case: dict, work: Path, args) -> None:
    """geopriv's figures for one data set; writes the privkit worker's inputs into ``work``."""
    import geopandas as gpd
    import pyproj

    import geopriv
    from geopriv.adversary import adversary_error, empirical_adversary_error

    true, crs, area = case["true"], case["crs"], case["area"]
    res: dict = {"timings_s": {}}
    t0 = time.perf_counter()
    adv = adversary_error(epsilon=EPSILON, area=area, crs=crs, prior="uniform")
    res["timings_s"]["adversary_error uniform"] = time.perf_counter() - t0
    released = geopriv.perturb(true, level=LEVEL, radius=RADIUS, bounds=area, rng=args.seed)
    case["released"] = released
    if case["name"] == "soho":  # grid sensitivity: geopriv's default cell (a fifth of 1/eps here) against finer ones
        res["grid_sensitivity"] = []
        for cell in (None, 14.0, 8.72):  # 8.72 m: the area's longest side (872 m) / 100
            a = adversary_error(epsilon=EPSILON, area=area, crs=crs, prior="uniform", cell=cell)
            res["grid_sensitivity"].append(
                (a.parameters["cell_m"], list(a.shape), a.expected_error_m, a.displacement_m)
            )
    ny, nx = adv.shape
    centres = _grid_centres(adv)
    to_ll = pyproj.Transformer.from_crs(adv.crs, "EPSG:4326", always_xy=True)
    c_ll = np.column_stack(to_ll.transform(centres[:, 0], centres[:, 1]))
    lon0, lat0 = (
        float(np.mean([c_ll[:, 0].min(), c_ll[:, 0].max()])),
        float(np.mean([c_ll[:, 1].min(), c_ll[:, 1].max()])),
    )
    aeqd = f"+proj=aeqd +lat_0={lat0:.8f} +lon_0={lon0:.8f} +datum=WGS84 +units=m +no_defs"
    to_m = pyproj.Transformer.from_crs("EPSG:4326", pyproj.CRS.from_proj4(aeqd), always_xy=True)
    c_m = np.column_stack(to_m.transform(c_ll[:, 0], c_ll[:, 1]))
    g = c_m.reshape(ny, nx, 2)
    spacing = float(np.median(np.hypot(*(g[:, 1:] - g[:, :-1]).reshape(-1, 2).T)))
    spacing_y = float(np.median(np.hypot(*(g[1:] - g[:-1]).reshape(-1, 2).T)))
    res.update(
        shape=[ny, nx],
        cell_m=[spacing, spacing_y],
        aeqd=aeqd,
        crs_name=adv.crs.name,
        lat0=lat0,
        parameters={
            k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
            for k, v in dict(adv.parameters).items()
        },
    )
    true_ll = true.to_crs("EPSG:4326").get_coordinates().to_numpy()
    rel_ll = released.to_crs("EPSG:4326").get_coordinates().to_numpy()
    np.save(work / "true_lonlat.npy", true_ll)
    np.save(work / "released_lonlat.npy", rel_ll)
    np.save(work / "centres_m.npy", c_m)
    # the public area as a lat/lon box, for privkit's GridMap (the area's corners)
    a_ll = np.column_stack(to_ll.transform([area[0], area[2], area[0], area[2]], [area[1], area[1], area[3], area[3]]))
    bbox = [float(a_ll[:, 1].min()), float(a_ll[:, 1].max()), float(a_ll[:, 0].min()), float(a_ll[:, 0].max())]
    a_m = np.column_stack(to_m.transform(a_ll[:, 0], a_ll[:, 1]))
    area_m = [float(a_m[:, 0].min()), float(a_m[:, 1].min()), float(a_m[:, 0].max()), float(a_m[:, 1].max())]

    true_xy = true.to_crs(adv.crs).get_coordinates().to_numpy()
    advs = {"uniform": adv}
    for prior_name in case["priors"]:
        if prior_name == "uniform":
            prior = np.full((ny, nx), 1.0 / (ny * nx))
        else:  # the data's own empirical prior: the truths' histogram on geopriv's grid
            idx = _cell_of(adv, true_xy)
            prior = np.bincount(idx[idx >= 0], minlength=ny * nx).reshape(ny, nx).astype(float)
            prior /= prior.sum()
            t0 = time.perf_counter()
            advs[prior_name] = adversary_error(epsilon=EPSILON, area=area, crs=crs, prior=prior)
            res["timings_s"][f"adversary_error {prior_name}"] = time.perf_counter() - t0
        np.save(work / f"prior_{prior_name}.npy", prior)
        a = advs[prior_name]
        emp = empirical_adversary_error(true, released, a)
        guess = a.guess(released)
        res[prior_name] = {
            "mc_check": _geopriv_mc_check(a, prior, area, args),
            "expected_error_m": float(a.expected_error_m),
            "displacement_m": float(a.displacement_m),
            "k_equivalent": None if a.k_equivalent is None else float(a.k_equivalent),
            "empirical": {k: float(v) for k, v in emp.attrs["summary"].items()},
            "empirical_values": emp.to_numpy(dtype=float),
            "guess_ll": gpd.GeoSeries(guess).to_crs("EPSG:4326").get_coordinates().to_numpy(),
        }
    case["geopriv"] = res
    case["advs"] = advs
    cfg = {
        "epsilon_per_m": EPSILON,
        "shape": [ny, nx],
        "seed": args.seed,
        "aeqd": aeqd,
        "n_mc_metric": args.n_mc_metric,
        "n_mc_latlon": args.n_mc_latlon,
        "n_mc_raw": args.n_mc_raw,
        "bbox_latlon": bbox,
        "area_m": area_m,
        "spacing_m": max(spacing, spacing_y),
        "priors": case["priors"],
    }
    (work / "config.json").write_text(json.dumps(cfg, indent=1))


def _geopriv_mc_check(adv, prior: np.ndarray, area, args) -> dict:
    """geopriv's own guess on ``--n-check`` draws of its grid model: truths at cell centres from the
    prior, planar Laplace noise (numpy), releases clamped into the area; checks ``expected_error_m``."""
    import geopandas as gpd

    from geopriv.cells import crs_units_per_metre
    from geopriv.metrics import ground_distance

    rng = np.random.default_rng(args.seed + 1000)
    n = args.n_check
    centres = _grid_centres(adv)
    cells = rng.choice(len(centres), size=n, p=prior.ravel() / prior.sum())
    x = centres[cells]
    r, th = rng.gamma(2.0, 1.0 / EPSILON, n), rng.uniform(0.0, 2 * math.pi, n)
    z = x + crs_units_per_metre(adv.crs, area) * np.column_stack([r * np.cos(th), r * np.sin(th)])
    z = np.column_stack([np.clip(z[:, 0], area[0], area[2]), np.clip(z[:, 1], area[1], area[3])])
    truth = gpd.GeoSeries(gpd.points_from_xy(x[:, 0], x[:, 1]), crs=adv.crs)
    guess = adv.guess(gpd.GeoSeries(gpd.points_from_xy(z[:, 0], z[:, 1]), crs=adv.crs))
    d = ground_distance(truth, x, guess.get_coordinates().to_numpy())
    return {"mean_m": float(d.mean()), "se_m": float(d.std(ddof=1) / math.sqrt(n)), "n": n}


def _geodesic(a_ll: np.ndarray, b_ll: np.ndarray) -> np.ndarray:
    import pyproj

    _, _, d = pyproj.Geod(ellps="WGS84").inv(a_ll[:, 0], a_ll[:, 1], b_ll[:, 0], b_ll[:, 1])
    return np.asarray(d, dtype=float)


def _score_geopriv_on_draws(adv, true_ll: np.ndarray, obs_ll: np.ndarray) -> np.ndarray:
    """geopriv's adversary (its guess, geodesic metres) on privkit's Monte Carlo draws."""
    import geopandas as gpd

    obs = gpd.GeoSeries(gpd.points_from_xy(obs_ll[:, 0], obs_ll[:, 1]), crs="EPSG:4326").to_crs(adv.crs)
    guess = gpd.GeoSeries(adv.guess(obs)).to_crs("EPSG:4326").get_coordinates().to_numpy()
    return _geodesic(true_ll, guess)


def _geopriv_version() -> str:
    import geopriv

    try:
        sha = subprocess.run(
            ["git", "-C", str(ROOT), "log", "-1", "--format=%h", "--", "geopriv/adversary.py"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return geopriv.__version__ + (f" (geopriv/adversary.py at {sha})" if sha else "")


def _facts(cases: list) -> dict:
    """The run's figures quoted in EXPLANATION (Soho and GeoLife both run)."""
    c = {case["name"]: case for case in cases}
    s, g = c["soho"], c["geolife"]
    pks, pkg = s["privkit"], g["privkit"]
    su, gu = s["geopriv"]["uniform"], g["geopriv"]["uniform"]
    ms, mg = pks["runs"]["metric/uniform"], pkg["runs"]["metric/uniform"]
    ls, lg, le = pks["runs"]["latlon/uniform"], pkg["runs"]["latlon/uniform"], pks["runs"]["latlon/empirical"]
    pct = lambda v: f"{100 * v:.1f} %"  # noqa: E731
    conv = [
        abs(
            case["privkit"]["runs"][f"metric/{p}"]["release_geopriv_converged"]["mean_m"]
            / case["geopriv"][p]["empirical"]["mean_m"]
            - 1
        )
        for case in cases
        for p in case["priors"]
    ]
    check = [
        abs(case["geopriv"][p]["mc_check"]["mean_m"] / case["geopriv"][p]["expected_error_m"] - 1)
        for case in cases
        for p in case["priors"]
    ]
    clamp = [
        abs(r["mc_raw"]["mean_m"] / r["mc_raw_clamped_same_draws"]["mean_m"] - 1)
        for case in cases
        for r in [case["privkit"]["runs"][f"metric/{case['priors'][0]}"]]
    ]
    sin_s, sin_g = math.sin(math.radians(pks["lat_centre"])), math.sin(math.radians(pkg["lat_centre"]))
    return {
        "conv_max": pct(max(conv)),
        "check_max": pct(max(check)),
        "clamp_max": pct(max(clamp)),
        "rel_hw": _rel(ms["release_geopriv"]["mean_m"], su["empirical"]["mean_m"]),
        "shift": ms["weiszfeld_shift"]["mean_m"],
        "paired": _rel(s["paired"]["uniform"]["privkit_mean_m"], s["paired"]["uniform"]["geopriv_mean_m"]),
        "rel_conv": _rel(ms["release_geopriv_converged"]["mean_m"], su["empirical"]["mean_m"]),
        "sin_s": sin_s,
        "sin_g": sin_g,
        "ground_s": pks["noise_shape"]["mean_ground_m"],
        "ground_g": pkg["noise_shape"]["mean_ground_m"],
        "r_s": RADIUS * sin_s,
        "r_g": RADIUS * sin_g,
        "own_s": _rel(ls["release_privkit"]["mean_m"], su["empirical"]["mean_m"]),
        "own_g": _rel(lg["release_privkit"]["mean_m"], gu["empirical"]["mean_m"]),
        "mc_s": _rel(ls["mc"]["mean_m"], su["expected_error_m"]),
        "mc_g": _rel(lg["mc"]["mean_m"], gu["expected_error_m"]),
        "ql_s": _rel(ls["quality_loss_metric"]["mean_m"], ls["ground_displacement"]["mean_m"]),
        "ql_g": _rel(lg["quality_loss_metric"]["mean_m"], lg["ground_displacement"]["mean_m"]),
        "ship_s": _rel(ls["release_geopriv"]["mean_m"], su["empirical"]["mean_m"]),
        "ship_g": _rel(lg["release_geopriv"]["mean_m"], gu["empirical"]["mean_m"]),
        "ship_e": _rel(le["release_geopriv"]["mean_m"], s["geopriv"]["empirical"]["empirical"]["mean_m"]),
        "gap_e": s["guess_dist_latlon"]["empirical"]["median_m"],
        "disp_s": su["displacement_m"],
        "disp_g": gu["displacement_m"],
        "cl_s": 100 * ms["mc_clamped_share"],
        "cl_g": 100 * mg["mc_clamped_share"],
        "raw_disp": ms["mc_displacement_raw"]["mean_m"],
    }


_FACT_KEYS = (
    "conv_max",
    "check_max",
    "clamp_max",
    "rel_hw",
    "shift",
    "paired",
    "rel_conv",
    "sin_s",
    "sin_g",
    "ground_s",
    "ground_g",
    "r_s",
    "r_g",
    "own_s",
    "own_g",
    "mc_s",
    "mc_g",
    "ql_s",
    "ql_g",
    "ship_s",
    "ship_g",
    "ship_e",
    "gap_e",
    "disp_s",
    "disp_g",
    "cl_s",
    "cl_g",
    "raw_disp",
)


def _report(cases: list, args, wall: float) -> str:
    L = ["# Adversary error: geopriv.adversary against privkit 0.5.1 (issue 34)", ""]
    L.append(
        f"Planar Laplace at ln 4 within 200 m (epsilon = {EPSILON:.6f} per ground metre; mean displacement "
        f"2/epsilon = {2 / EPSILON:.1f} m in the open plane), releases made by `geopriv.perturb(bounds=area)` "
        f"(seed {args.seed}: clamped into the area).  `timeout 1200 .venv/latest/bin/python "
        f"bench/adversary_vs_privkit.py --n-mc-metric {args.n_mc_metric} --n-mc-latlon {args.n_mc_latlon} "
        f"--n-mc-raw {args.n_mc_raw} --n-check {args.n_check} --n-queries {args.n_queries}`: {wall:.0f} s wall on {os.cpu_count()} "
        f"cores (the two data sets' privkit halves in parallel), Python {platform.python_version()}; privkit "
        f"{cases[0]['privkit']['privkit_version']} with numpy {cases[0]['privkit']['numpy_version']} in "
        f'`bench/.venv-privkit` (`bench/setup_privkit.sh`); geopriv {_geopriv_version()}.  "diff" is '
        f"(privkit - geopriv) / geopriv."
    )
    L.append("")
    L.append(
        "Columns: **geopriv**: `adversary_error(...)` (exact on its grid) and `empirical_adversary_error`; "
        "**privkit on geopriv's grid**: privkit's own `PlanarLaplace.planar_laplace_distribuition` and "
        "`HW.execute_attack` run on geopriv's cell centres in local ground km, with geopriv's prior array; "
        "**privkit as shipped**: lat/lon data, privkit's `GridMap`, `PlanarLaplace`, `HW`, `AdversaryError`.  "
        "privkit's expected errors are Monte Carlo means (truths drawn from the prior at cell centres, "
        "privkit's planar Laplace sampler, releases clamped into the area as geopriv's are) ± their standard "
        "error."
    )
    L.append("")
    L.append("## Summary: the same quantity computed by both")
    L.append("")
    L.append(
        "privkit's side here is its own code (likelihood, posterior, geometric median, metric) on geopriv's grid "
        'and prior; "as shipped" figures are in the per-data-set tables and explained below.'
    )
    L.append("")
    L.append("| data set, prior | quantity | geopriv | privkit | diff | within 5 % |")
    L.append("|---|---|---|---|---|---|")
    ordered = sorted(cases, key=lambda c: c["name"] != "soho")
    for case in ordered:
        gp, pk = case["geopriv"], case["privkit"]
        for prior_name in case["priors"]:
            g, pm, pr = gp[prior_name], pk["runs"][f"metric/{prior_name}"], case["paired"][prior_name]
            e = g["empirical"]
            rows = [
                (
                    "expected adversary error (geopriv exact; privkit HW, Monte Carlo)",
                    g["expected_error_m"],
                    pm["mc"]["mean_m"],
                    f" ± {pm['mc']['se_m']:.1f}",
                ),
                ("the same Monte Carlo draws, both adversaries", pr["geopriv_mean_m"], pr["privkit_mean_m"], ""),
                ("error on geopriv's release (privkit's HW as is)", e["mean_m"], pm["release_geopriv"]["mean_m"], ""),
                (
                    "error on geopriv's release (privkit's median run to convergence)",
                    e["mean_m"],
                    pm["release_geopriv_converged"]["mean_m"],
                    "",
                ),
                (
                    "expected displacement of the clamped release",
                    g["displacement_m"],
                    pm["mc_displacement_clamped"]["mean_m"],
                    f" ± {pm['mc_displacement_clamped']['se_m']:.1f}",
                ),
            ]
            for q, a, b, extra in rows:
                ok = "yes" if abs(b - a) <= 0.05 * a else "**no**"
                L.append(f"| {case['name']}, {prior_name} | {q} | {_m(a)} | {_m(b)}{extra} | {_rel(b, a)} | {ok} |")
    L.append("")
    for case in ordered:
        gp, pk = case["geopriv"], case["privkit"]
        L.append(f"## {case['title']}")
        L.append("")
        L.append(
            f"Public area {tuple(case['area'])} ({case['crs_label']}); geopriv's grid {gp['shape'][0]} x "
            f"{gp['shape'][1]} cells of {gp['cell_m'][0]:.2f} x {gp['cell_m'][1]:.2f} ground m (measured in a "
            f"local azimuthal equidistant frame; geopriv's own cell_m {gp['parameters'].get('cell_m')}); "
            f"privkit's lat/lon GridMap {pk['latlon_grid']['shape'][0]} x {pk['latlon_grid']['shape'][1]} "
            f"cells, spacing {pk['latlon_grid']['spacing_m']:.2f} m, over the same box.  "
            f"`adversary_error(released)` (epsilon and area from the release's record): "
            f"{_m(gp['from_release_expected_error_m'])}."
        )
        if "grid_sensitivity" in gp:
            L.append(
                "geopriv's grid sensitivity (uniform prior): "
                + "; ".join(
                    f"cell {c:.2f} m ({s[0]} x {s[1]}): expected error {e:.1f} m, displacement {d:.1f} m"
                    for c, s, e, d in gp["grid_sensitivity"]
                )
                + "."
            )
        L.append("")
        for prior_name in case["priors"]:
            g = gp[prior_name]
            pm, pl = pk["runs"][f"metric/{prior_name}"], pk["runs"][f"latlon/{prior_name}"]
            paired = case["paired"][prior_name]
            e = g["empirical"]
            L.append(f"### Prior: {prior_name}")
            L.append("")
            L.append("| quantity | geopriv | privkit on geopriv's grid | diff | privkit as shipped | diff |")
            L.append("|---|---|---|---|---|---|")
            L.append(
                f"| expected adversary error (releases clamped into the area) "
                f"| {_m(g['expected_error_m'])} | {_m(pm['mc']['mean_m'])} ± {pm['mc']['se_m']:.1f} "
                f"(n = {pm['mc']['n']}) | {_rel(pm['mc']['mean_m'], g['expected_error_m'])} "
                f"| {_m(pl['mc']['mean_m'])} ± {pl['mc']['se_m']:.1f} (n = {pl['mc']['n']}) "
                f"| {_rel(pl['mc']['mean_m'], g['expected_error_m'])} |"
            )
            L.append(
                f"| geopriv's guess on {g['mc_check']['n']:,} draws of its own grid model (numpy noise, clamped) "
                f"| {_m(g['mc_check']['mean_m'])} ± {g['mc_check']['se_m']:.1f} "
                f"({_rel(g['mc_check']['mean_m'], g['expected_error_m'])} from exact) | | | | |"
            )
            L.append(
                f"| the same Monte Carlo draws, both adversaries' guesses, geodesic metres "
                f"| {_m(paired['geopriv_mean_m'])} | {_m(paired['privkit_mean_m'])} "
                f"| {_rel(paired['privkit_mean_m'], paired['geopriv_mean_m'])} "
                f"(paired s.e. {paired['paired_se_pct']:.2f} %) | | |"
            )
            if "mc_raw" in pm:
                L.append(
                    f"| expected adversary error, releases *not* clamped (privkit's model), vs the same draws "
                    f"clamped | | {_m(pm['mc_raw']['mean_m'])} vs {_m(pm['mc_raw_clamped_same_draws']['mean_m'])} "
                    f"(n = {pm['mc_raw']['n']}) "
                    f"| {_rel(pm['mc_raw']['mean_m'], pm['mc_raw_clamped_same_draws']['mean_m'])} (vs clamped) "
                    f"| {_m(pl['mc_raw']['mean_m'])} vs {_m(pl['mc_raw_clamped_same_draws']['mean_m'])} "
                    f"(n = {pl['mc_raw']['n']}) "
                    f"| {_rel(pl['mc_raw']['mean_m'], pl['mc_raw_clamped_same_draws']['mean_m'])} (vs clamped) |"
                )
            L.append(
                f"| adversary error on geopriv's release: mean (median, p90), n = {int(e['n'])} "
                f"| {_m(e['mean_m'])} ({e['median_m']:.1f}, {e['p90_m']:.1f}) "
                f"| {_m(pm['release_geopriv']['mean_m'])} ({pm['release_geopriv']['median_m']:.1f}, "
                f"{pm['release_geopriv']['p90_m']:.1f}) | {_rel(pm['release_geopriv']['mean_m'], e['mean_m'])} "
                f"| {_m(pl['release_geopriv']['mean_m'])} ({pl['release_geopriv']['median_m']:.1f}, "
                f"{pl['release_geopriv']['p90_m']:.1f}) | {_rel(pl['release_geopriv']['mean_m'], e['mean_m'])} |"
            )
            L.append(
                f"| the same, privkit's posterior with its geometric median run to convergence (not privkit's "
                f"31.6 m stop; mean shift {pm['weiszfeld_shift']['mean_m']:.1f} m) | "
                f"| {_m(pm['release_geopriv_converged']['mean_m'])} "
                f"| {_rel(pm['release_geopriv_converged']['mean_m'], e['mean_m'])} | | |"
            )
            L.append(
                f"| adversary error on privkit's own (unclamped) release of the same truths | | | "
                f"| {_m(pl['release_privkit']['mean_m'])} | {_rel(pl['release_privkit']['mean_m'], e['mean_m'])} |"
            )
            L.append(
                f"| expected displacement, clamped releases (geopriv `displacement_m`: to the release's cell) "
                f"| {_m(g['displacement_m'])} | {_m(pm['mc_displacement_clamped']['mean_m'])} ± "
                f"{pm['mc_displacement_clamped']['se_m']:.1f} (Monte Carlo) "
                f"| {_rel(pm['mc_displacement_clamped']['mean_m'], g['displacement_m'])} | | |"
            )
            L.append(
                f"| expected displacement, unclamped (privkit `PlanarLaplace.expected_error()` = 2/eps; "
                f"Monte Carlo) | | {_m(pm['mc_displacement_raw']['mean_m'])} | "
                f"| {_m(pk['expected_error_formula_m'])}; {_m(pl['mc_displacement_raw']['mean_m'])} on the "
                f"ground | |"
            )
            L.append(
                f"| privkit's own release: its QualityLoss metric (mean) vs the true ground displacement | | | "
                f"| {_m(pl['quality_loss_metric']['mean_m'])} vs {_m(pl['ground_displacement']['mean_m'])} | |"
            )
            gd, gl = case["guess_dist"][prior_name], case["guess_dist_latlon"][prior_name]
            gc = case["guess_dist_converged"][prior_name]
            L.append("")
            L.append(
                f"Share of Monte Carlo releases clamped: {100 * pm['mc_clamped_share']:.1f} %.  Guesses on "
                f"geopriv's release, geopriv's `guess()` against privkit's HW on geopriv's grid: median "
                f"{gd['median_m']:.1f} m apart, p90 {gd['p90_m']:.1f} m, max {gd['max_m']:.1f} m (cell "
                f"{gp['cell_m'][0]:.1f} m); against privkit as shipped: median {gl['median_m']:.1f} m, p90 "
                f"{gl['p90_m']:.1f} m, max {gl['max_m']:.1f} m; against privkit's posterior with the median "
                f"run to convergence: median {gc['median_m']:.1f} m, p90 {gc['p90_m']:.1f} m, max "
                f"{gc['max_m']:.1f} m."
            )
            L.append("")
        ns = pk["noise_shape"]
        L.append(
            f"privkit's PlanarLaplace at the area's centre ({ns['n']:,} draws, azimuthal equidistant metres): "
            f"s.d. east {ns['sd_east_m']:.1f} m, north {ns['sd_north_m']:.1f} m (ratio "
            f"{ns['sd_north_m'] / ns['sd_east_m']:.3f}; sin(latitude) = {math.sin(math.radians(pk['lat_centre'])):.3f}); "
            f"mean ground displacement {ns['mean_ground_m']:.1f} m while its sampled radius r (what its "
            f"QualityLoss reports) averages {ns['mean_r_m']:.1f} m (2/eps = {2 / EPSILON:.1f} m).  The same "
            f"radius and angle laid in a true ground plane: s.d. {pk['ground_plane_noise_sd_m'][0]:.1f} / "
            f"{pk['ground_plane_noise_sd_m'][1]:.1f} m."
        )
        b = pk["hw_back_conversion_100m"]
        L.append(
            f"HW's way back to lat/lon (its guess's x, y with the release's z): a guess meant 100 m north of "
            f"the release lands {b['north']:.1f} m north (sin^2(latitude) x 100 = "
            f"{100 * math.sin(math.radians(pk['lat_centre'])) ** 2:.1f} m); 100 m east lands {b['east']:.1f} m "
            f"east."
        )
        L.append("")
        L.append(
            "Timings (s): geopriv "
            + ", ".join(f"{k} {v:.1f}" for k, v in gp["timings_s"].items())
            + "; privkit "
            + ", ".join(f"{k} {v:.0f}" for k, v in pk["timings_s"].items())
            + "."
        )
        L.append("")
    if {c["name"] for c in cases} == {"soho", "geolife"}:
        L.append(EXPLANATION.format(**_facts(cases)))
    else:
        L.append("(The explanation quotes both data sets' figures: run without --only.)")
    return "\n".join(L) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-mc-metric", type=int, default=3000, help="Monte Carlo draws, privkit on geopriv's grid")
    ap.add_argument("--n-mc-latlon", type=int, default=2000, help="Monte Carlo draws, privkit as shipped")
    ap.add_argument(
        "--n-mc-raw",
        type=int,
        default=1000,
        help="of those, draws also attacked unclamped (privkit on geopriv's grid; half as shipped)",
    )
    ap.add_argument("--n-check", type=int, default=100_000, help="draws of geopriv's check of its exact figure")
    ap.add_argument("--n-queries", type=int, default=500, help="GeoLife queries (a seeded subset)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=None, help=f"path of {PARQUET}")
    ap.add_argument("--only", choices=["soho", "geolife"], default=None)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    if not PK_PYTHON.exists():
        raise SystemExit("privkit's environment is missing: bash bench/setup_privkit.sh")
    t_start = time.perf_counter()
    builders = {"soho": _soho_case, "geolife": lambda: _geolife_case(args)}
    names = (
        [args.only] if args.only else ["geolife", "soho"]
    )  # GeoLife's geopriv side is the quicker: its worker starts first
    cases = []
    with tempfile.TemporaryDirectory(prefix="adversary_vs_privkit_") as tmp:
        procs = []
        for name in names:
            case = builders[name]()
            work = Path(tmp) / name
            work.mkdir()
            _geopriv_side(case, work, args)
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", DEEPFACE_HOME=str(work), PYTHONHASHSEED="0")
            log = open(work / "worker.log", "w")
            procs.append(
                (
                    case,
                    work,
                    log,
                    subprocess.Popen(
                        [str(PK_PYTHON), str(Path(__file__).resolve()), "--privkit-worker", str(work)],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        cwd=str(work),
                    ),
                )
            )
            cases.append(case)
            # while privkit works: the same adversary read from the release's own record (epsilon, bounds)
            from geopriv.adversary import adversary_error

            t0 = time.perf_counter()
            adv_rel = adversary_error(case["released"], area=case["area"])
            case["geopriv"]["timings_s"]["adversary_error(released)"] = time.perf_counter() - t0
            case["geopriv"]["from_release_expected_error_m"] = float(adv_rel.expected_error_m)
        for case, work, log, proc in procs:
            rc = proc.wait()
            log.close()
            if rc != 0:
                sys.stderr.write((work / "worker.log").read_text()[-5000:])
                raise SystemExit(f"privkit worker for {case['name']} failed (exit {rc})")
            pk = json.loads((work / "privkit.json").read_text())
            case["privkit"] = pk
            case["paired"], case["guess_dist"], case["guess_dist_latlon"], case["guess_dist_converged"] = {}, {}, {}, {}
            for prior_name in case["priors"]:
                x_ll = np.load(work / f"pk_metric_mc_true_{prior_name}.npy")
                z_ll = np.load(work / f"pk_metric_mc_obs_{prior_name}.npy")
                # both scored in geodesic metres (privkit's own metric, a sphere, is in the table above)
                e_pk = _geodesic(x_ll, np.load(work / f"pk_metric_mc_guess_{prior_name}.npy"))
                e_gp = _score_geopriv_on_draws(case["advs"][prior_name], x_ll, z_ll)
                diff = e_pk - e_gp
                case["paired"][prior_name] = {
                    "geopriv_mean_m": float(e_gp.mean()),
                    "privkit_mean_m": float(e_pk.mean()),
                    "paired_se_pct": float(100 * diff.std(ddof=1) / math.sqrt(len(diff)) / e_gp.mean()),
                }
                g_gp = case["geopriv"][prior_name]["guess_ll"]
                for key, fname in (
                    ("guess_dist", "pk_metric_guess"),
                    ("guess_dist_latlon", "pk_latlon_guess"),
                    ("guess_dist_converged", "pk_metric_guess_converged"),
                ):
                    d = _geodesic(g_gp, np.load(work / f"{fname}_{prior_name}.npy"))
                    case[key][prior_name] = {
                        "median_m": float(np.median(d)),
                        "p90_m": float(np.quantile(d, 0.9)),
                        "max_m": float(d.max()),
                    }
    text = _report(cases, args, time.perf_counter() - t_start)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--privkit-worker":
        privkit_worker(Path(sys.argv[2]))
    else:
        main()
