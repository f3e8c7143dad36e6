"""Speed of the release report and of the exact adversary error (issue 34 targets: a report for
100,000 points under 60 s; the exact adversary error on a 200 x 200 grid under 30 s).

Side by side in one script: the release itself (perturb of the same points) as the baseline, the
report (guarantee, utility with W1, the adversary on the public area and on these points, maps),
and the adversary error alone at 100 x 100 and 200 x 200 cells.
Run: .venv/latest/bin/python bench/report_speed.py   (about a minute on 2 cores)
Writes bench/results/report_speed.md.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import geopandas as gpd
import numpy as np

import geopriv

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "report_speed.md"
CRS = "EPSG:32650"


def timed(f, *a, **k):
    t = time.perf_counter()
    r = f(*a, **k)
    return r, time.perf_counter() - t


def main():
    rng = np.random.default_rng(1)
    n = 100_000
    xy = rng.uniform([0, 0], [10_000, 10_000], size=(n, 2)) + [400_000, 4_400_000]
    true = gpd.GeoDataFrame(geometry=gpd.points_from_xy(xy[:, 0], xy[:, 1]), crs=CRS)
    bounds = (400_000, 4_400_000, 410_000, 4_410_000)
    released, t_release = timed(true.priv.perturb, level=math.log(4), radius=200, bounds=bounds, rng=2)
    with tempfile.TemporaryDirectory() as tmp:
        path, t_report = timed(geopriv.release_report, true, released, Path(tmp) / "r.private-report.html")
        size = Path(path).stat().st_size
    a100, t100 = timed(geopriv.adversary_error, released, cell=100)
    a200, t200 = timed(geopriv.adversary_error, released, cell=50)
    lines = [
        "# Release report and adversary error: speed",
        "",
        "`bench/report_speed.py`, 2 cores; 100,000 points uniform over 10 x 10 km (UTM 50N), "
        "ln 4 within 200 m, area declared.",
        "",
        "| what | time | ratio to the release |",
        "|---|---|---|",
        f"| the release (perturb, baseline) | {t_release:.1f} s | 1.0 |",
        f"| release report, 100,000 points (HTML {size / 1e6:.1f} MB) | {t_report:.1f} s | "
        f"{t_report / t_release:.1f} |",
        f"| adversary error, {a100.shape[0]} x {a100.shape[1]} cells | {t100:.1f} s | {t100 / t_release:.1f} |",
        f"| adversary error, {a200.shape[0]} x {a200.shape[1]} cells | {t200:.1f} s | {t200 / t_release:.1f} |",
        "",
        f"Targets: report under 60 s ({'met' if t_report < 60 else 'MISSED'}); 200 x 200 under 30 s "
        f"({'met' if t200 < 30 else 'MISSED'}).",
        "",
    ]
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
