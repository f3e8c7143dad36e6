"""Golden releases: every seeded release of the shipped data is the one geopriv made before issue 42's refactor.

Issue 42 splits long functions without changing what they do, so a seeded release must come out
bit for bit as before: the same released geometry (WKB, row by row), the same attribute columns
(values and dtypes), the same index and the same provenance record (``attrs["geopriv"]``).  Each
case below releases real data shipped in the repository (``geopriv/data``) through
the public API (and, for two cases, the command line), seeded, and is compared with
``tests/data/release_golden.json``, computed by this module on the code *before* the refactor
(commit 58f2df0, the parent of the refactor's first commit).

The golden file stores, per case and per released object ("part"), SHA-256 digests of the
geometry, of every column and of the index, small readable summaries beside them, and the
normalised provenance record itself, so a failure names the case, the part and the field that
changed (and, for provenance, the old and new values).

Regenerate (only when a release is *meant* to change, never to make a refactor pass)::

    python -m tests.test_release_golden        # writes tests/data/release_golden.json

from the checkout whose releases are the reference.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import platform
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

import geopriv

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "release_golden.json"
SOHO = ROOT / "geopriv" / "data" / "soho_cholera.gpkg"
STUDY_AREA = ROOT / "geopriv" / "data" / "study_area.gpkg"
TOKYO_40 = ROOT / "geopriv" / "data" / "tokyo_density_40.tif"
GEOLIFE = ROOT / "geopriv" / "data" / "geolife_sample.gpkg"
MUNICIPALITIES = ROOT / "geopriv" / "data" / "tokyo_municipalities.gpkg"

LN4_200 = math.log(4) / 200  # "ln 4 within 200 m", per metre
SOHO_BOUNDS = (-15800.0, 6711900.0, -14600.0, 6713300.0)  # the study area's box (EPSG:3857)
BEIJING_4326 = (116.0, 39.5, 117.0, 40.5)  # the sanitize_traces docstring's public area
BEIJING_UTM = (362_000.0, 4_362_000.0, 550_000.0, 4_550_000.0)  # tests/test_distributed_traces.py

# ---------------------------------------------------------------------------- provenance normalisation
#: Provenance fields that legitimately differ between two runs of the same seeded release, replaced by a
#: placeholder (at any depth: also inside ``previous`` records) when, and only when, they hold what they should:
#:
#: * ``created_utc``: the time stamp of the release (geopriv.provenance.make_record), an ISO 8601 time with a UTC
#:   offset; it differs on every run.
#: * ``geopriv_version``: the library version (``geopriv.__version__``), which may be bumped without changing any
#:   release; normalised only when it equals the running library's version.
#:
#: Nothing else varies: the records hold no path, URL, host or run id (the budget store is recorded by kind,
#: "sqlite", never by its location; ``mechanism_id`` is the SHA-256 of the mechanism's arrays, the same for the
#: same build), which this module checked by generating the golden file twice.  A record field that is not
#: normalised is compared exactly.
VARYING_FIELDS = ("created_utc", "geopriv_version")


def _is_utc_timestamp(value) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return dt.datetime.fromisoformat(value).utcoffset() is not None
    except ValueError:
        return False


def _normalised_value(key, value):
    if key == "created_utc" and _is_utc_timestamp(value):
        return "<created_utc>"
    if key == "geopriv_version" and value == geopriv.__version__:
        return "<geopriv.__version__>"
    return normalise(value)


def normalise(record):
    """``record`` as canonical JSON data, with the :data:`VARYING_FIELDS` replaced by placeholders."""
    if isinstance(record, dict):
        return {str(k): _normalised_value(k, v) for k, v in record.items()}
    if isinstance(record, (list, tuple)):
        return [normalise(v) for v in record]
    return json.loads(json.dumps(record, default=str))


def canonical(value) -> str:
    """Canonical JSON text (sorted keys; anything not JSON as its str)."""
    return json.dumps(value, sort_keys=True, default=str, allow_nan=True)


# ---------------------------------------------------------------------------- fingerprints
def _sha(chunks) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(len(chunk).to_bytes(8, "little"))
        h.update(chunk)
    return h.hexdigest()


def _array_digest(values) -> dict:
    """dtype and SHA-256 of a column or index: raw bytes for numbers and booleans, the repr of each value else."""
    array = pd.Series(values) if not isinstance(values, pd.Series) else values
    dtype = str(array.dtype)
    raw = np.asarray(array.to_numpy())
    if raw.dtype.kind in "biufcmM":  # numbers, booleans, naive times: the bytes
        digest = _sha([dtype.encode(), np.ascontiguousarray(raw).tobytes()])
    else:  # strings, objects, times with a zone, nullable types: every value's repr (a float's repr is exact)
        digest = _sha([dtype.encode()] + [repr(v).encode() for v in array.tolist()])
    return {"dtype": dtype, "sha256": digest}


def _geometry_digest(geoms) -> dict:
    """SHA-256 of each row's WKB (little endian, 2-D/3-D as released), missing geometries marked, and a summary."""
    values = np.asarray(geoms, dtype=object)
    wkb = shapely.to_wkb(values, byte_order=1, include_srid=False)
    chunks = [b"<missing>" if w is None else bytes(w) for w in wkb]
    xy = shapely.get_coordinates(values[pd.notna(values)])
    return {
        "sha256": _sha(chunks),
        "missing": int(sum(w is None for w in wkb)),
        "types": sorted({g.geom_type for g in values if g is not None}),
        "coordinate_sum": [repr(float(s)) for s in xy.sum(axis=0)] if len(xy) else [],
    }


def _record_part(record) -> dict:
    rec = normalise(record)
    return {"provenance": rec, "provenance_sha256": hashlib.sha256(canonical(rec).encode()).hexdigest()}


def fingerprint_frame(frame: pd.DataFrame) -> dict:
    """The digests of a (Geo)DataFrame: index, every column, the geometry column, CRS and provenance."""
    out = {"rows": len(frame), "column_order": [str(c) for c in frame.columns]}
    out["index"] = dict(_array_digest(pd.Series(frame.index.to_numpy(), dtype=frame.index.dtype)))
    out["index"]["names"] = [None if n is None else str(n) for n in frame.index.names]
    geometry = frame.geometry.name if isinstance(frame, gpd.GeoDataFrame) else None
    out["columns"] = {str(c): _array_digest(frame[c]) for c in frame.columns if c != geometry}
    if geometry is not None:
        out["geometry"] = _geometry_digest(frame.geometry.array)
        out["crs"] = None if frame.crs is None else frame.crs.to_string()
    if "geopriv" in frame.attrs:
        out.update(_record_part(frame.attrs["geopriv"]))
    return out


def fingerprint_heatmap(hm) -> dict:
    """The digests of a :class:`geopriv.Heatmap`: both rasters' bytes and dtypes, transform, CRS, unit, record."""
    out = {
        "values": {"dtype": str(hm.values.dtype), "shape": list(hm.values.shape)},
        "expected_error": {"dtype": str(hm.expected_error.dtype), "shape": list(hm.expected_error.shape)},
    }
    out["values"]["sha256"] = _sha([np.ascontiguousarray(hm.values).tobytes()])
    out["expected_error"]["sha256"] = _sha([np.ascontiguousarray(hm.expected_error).tobytes()])
    out["transform"] = [repr(float(v)) for v in tuple(hm.transform)[:6]]
    out["crs"] = hm.crs.to_string()
    out["unit"] = hm.unit
    out["nodata"] = repr(hm.nodata)
    out.update(_record_part(hm.record))
    return out


def fingerprint(part) -> dict:
    if isinstance(part, geopriv.Heatmap):
        return fingerprint_heatmap(part)
    if isinstance(part, pd.DataFrame):
        return fingerprint_frame(part)
    if isinstance(part, dict):  # a provenance record read from a file
        return _record_part(part)
    raise TypeError(f"cannot fingerprint {type(part).__name__}")


# ---------------------------------------------------------------------------- shipped data (read once)
@functools.cache
def deaths() -> gpd.GeoDataFrame:
    """The 324 Soho cholera deaths, EPSG:3857."""
    return gpd.read_file(SOHO, layer="deaths")


@functools.cache
def study_area() -> gpd.GeoDataFrame:
    return gpd.read_file(STUDY_AREA)


@functools.cache
def geolife() -> gpd.GeoDataFrame:
    """5 GeoLife trajectories in Beijing (5,908 fixes, EPSG:4326)."""
    return gpd.read_file(GEOLIFE)


@functools.cache
def queries() -> gpd.GeoDataFrame:
    """The sanitize_traces docstring's queries: the GeoLife sample through sample_queries(rng=0)."""
    return geopriv.sample_queries(geolife(), traj_id="trajectory_id", time="t", rng=0)


@functools.cache
def geolife_utm() -> gpd.GeoDataFrame:
    """GeoLife in UTM 50N cut into trips of 300 fixes, opaque labels (tests/test_distributed_traces.py ``trips``)."""
    g = geolife().to_crs(32650).drop(columns=["id", "sequence"])
    g["trip"] = g["trajectory_id"] * 1000 + g.groupby("trajectory_id").cumcount() // 300
    g.index = np.random.default_rng(0).permutation(len(g)) * 3 + 11
    return g


def beijing_boxes() -> gpd.GeoDataFrame:
    """Four public 14 km boxes holding every GeoLife trip end, in EPSG:4326 (tests/test_cli_aggregate.py)."""
    boxes = [shapely.box(x, y, x + 14_000, y + 14_000) for x in (438_000, 452_000) for y in (4_410_000, 4_424_000)]
    return gpd.GeoDataFrame({"name": ["SW", "NW", "SE", "NE"]}, geometry=boxes, crs=32650).to_crs(4326)


@functools.cache
def tokyo_mechanism():
    """The eikonal mechanism on the central-Tokyo raster (README's ranges; built and verified in ~3 s)."""
    pm = geopriv.PrivacyMap.from_population(TOKYO_40, epsilon_range=(math.log(4) / 3000, math.log(4) / 600))
    return geopriv.EikonalMechanism.build(pm, n_jobs=1)


@functools.cache
def tokyo_points() -> gpd.GeoDataFrame:
    """A point in each Tokyo municipality inside the raster, shuffled (the file is in spatial order)."""
    towns = gpd.read_file(MUNICIPALITIES)
    pts = gpd.GeoDataFrame({"GEOCODE": towns["GEOCODE"]}, geometry=towns.representative_point(), crs=towns.crs)
    pts = pts.clip(tokyo_mechanism().privacy_map.bounds)
    return pts.sample(frac=1.0, random_state=0).reset_index(drop=True)


@functools.cache
def network():
    """The Soho deaths in British National Grid, deduplicated, p0..pN, and their 4-nearest-neighbour edges."""
    from scipy.spatial import cKDTree

    d = deaths().to_crs(27700)
    d = d[~d.geometry.duplicated()].reset_index(drop=True)
    d.index = [f"p{i}" for i in range(len(d))]
    xy = np.column_stack([d.geometry.x, d.geometry.y])
    _, nn = cKDTree(xy).query(xy, 5)
    edges = [(d.index[i], d.index[j]) for i in range(len(d)) for j in nn[i, 1:] if i != j]
    return d, edges


def lazy(gdf, k):
    dask_geopandas = pytest.importorskip("dask_geopandas")
    return dask_geopandas.from_geopandas(gdf, npartitions=k)


# ---------------------------------------------------------------------------- the cases
#: case name -> function(tmp_path) returning {part name: released object}
CASES: dict = {}


def case(name):
    def register(fn):
        CASES[name] = fn
        return fn

    return register


@case("perturb_epsilon")
def _(tmp):
    return {"release": geopriv.perturb(deaths(), LN4_200, rng=1)}


@case("perturb_level_radius_grid_region")
def _(tmp):
    region = study_area().geometry.iloc[0]  # declared public area, not computed from the points
    out = deaths().priv.perturb(level=math.log(4), radius=200, grid=10, region=region, rng=2)
    return {"release": out}


@case("perturb_lonlat_twice")
def _(tmp):
    ll = deaths().to_crs(4326)  # the spherical frame; released twice: the second record keeps the first
    once = geopriv.perturb(ll, level=math.log(4), radius=200, rng=3)
    return {"release": geopriv.perturb(once, LN4_200 / 2, rng=4)}


@case("perturb_eikonal")
def _(tmp):
    # GEOCODE sorts the towns in spatial order: released only because it is kept deliberately (kept_columns)
    return {"release": tokyo_points().priv.perturb(mechanism=tokyo_mechanism(), keep=["GEOCODE"], rng=4)}


@case("perturb_budget_store")
def _(tmp):
    store = geopriv.BudgetStore(tmp / "budgets.db", create=True)
    with store:
        store.grant(1.0, unit="epsilon/m")
        out = geopriv.perturb(deaths(), LN4_200, person="Id", budget_store=store, rng=5)
        balances = store.balances().sort_values("person", kind="stable").reset_index(drop=True)
        # the audit without its times, release ids and library version (they differ on every run)
        audit = store.releases()[
            ["kind", "unit", "mechanism", "parameters", "state", "persons", "rows_released", "largest_charge"]
        ]
    return {"release": out, "balances": balances, "audit": audit}


@case("sanitize_traces_predictive")
def _(tmp):
    q = queries()
    out = geopriv.sanitize_traces(
        q, traj_id="trajectory_id", time="t", level=math.log(10), radius=100, rate=0.033, bounds=BEIJING_4326, rng=0
    )
    return {"queries": q, "release": out, "ledger": geopriv.trace_ledger(out)}


@case("sanitize_traces_independent")
def _(tmp):
    out = geopriv.sanitize_traces(
        queries(),
        traj_id="trajectory_id",
        time="t",
        epsilon=math.log(10) / 100,
        method="independent",
        budget="fixed_utility",
        accuracy=3000,
        bounds=BEIJING_4326,
        rng=1,
    )
    return {"release": out, "ledger": geopriv.trace_ledger(out)}


@case("sanitize_traces_predictive_skip_utm")
def _(tmp):
    out = geopriv.sanitize_traces(
        geolife_utm(),
        traj_id="trip",
        time="t",
        epsilon=math.log(10) / 100,
        budget="fixed_utility",
        accuracy=3000,
        skip_speed=4.17,
        bounds=BEIJING_UTM,
        rng=6,
    )
    return {"release": out, "ledger": geopriv.trace_ledger(out)}


@case("synthesize_srw")
def _(tmp):
    return {"release": deaths().priv.synthesize(1.0, bounds=SOHO_BOUNDS, method="srw", rng=7)}


@case("synthesize_pmm")
def _(tmp):
    return {"release": geopriv.synthesize(deaths(), 2.0, bounds=SOHO_BOUNDS, method="pmm", rng=8)}


@case("aggregate_grid")
def _(tmp):
    return {"release": geopriv.aggregate(deaths(), 1.0, cells=50, bounds=SOHO_BOUNDS, rng=7)}


@case("aggregate_user_h3")
def _(tmp):
    out = geopriv.aggregate(
        geolife(), 1.0, cells="h3:7", user="tracker", max_per_user=20, bounds=BEIJING_4326, suppress=2, rng=9
    )
    return {"release": out}


@case("aggregate_polygons")
def _(tmp):
    cells = study_area()  # one public polygon with its attribute
    return {"release": geopriv.aggregate(deaths(), 0.5, cells=cells, rng=10)}


@case("heatmap_count")
def _(tmp):
    return {"release": geopriv.heatmap(deaths(), 1.0, resolution=50, bounds=SOHO_BOUNDS, rng=1)}


@case("heatmap_density_file")
def _(tmp):
    import rasterio

    path = tmp / "heat.tif"
    hm = geopriv.heatmap(deaths(), 2.0, resolution=100, bounds=SOHO_BOUNDS, values="density", rng=2, path=path)
    with rasterio.open(path) as ds:
        written = {"bands": [ds.read(i + 1).tobytes().hex() for i in range(ds.count)], "crs": ds.crs.to_string()}
        written["transform"] = [repr(float(v)) for v in tuple(ds.transform)[:6]]
        written["dtypes"] = list(ds.dtypes)
        tag = json.loads(ds.tags()["GEOPRIV"])
    file_part = _record_part(tag)
    file_part["raster_sha256"] = hashlib.sha256(canonical(written).encode()).hexdigest()
    return {"release": hm, "file": file_part}


@case("flows_geolife")
def _(tmp):
    out = geopriv.flows(
        geolife().to_crs(32650),
        1.0,
        regions=beijing_boxes(),
        traj_id="trajectory_id",
        time="t",
        user="tracker",
        max_per_user=2,
        region_id="name",
        rng=3,
    )
    return {"release": out}


def _diffusion_policy(h):
    return math.log(4) / (50.0 * (1.0 + h))  # ln 4 within 50 m for friends, less with every hop


@case("diffuse_locations")
def _(tmp):
    from geopriv.network import UnreachableRecipientsWarning

    people, edges = network()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        out, _path = people.priv.diffuse_locations(_diffusion_policy, source="p0", graph=edges, rng=1)
    return {"release": out}  # the path holds the secret stream: never published, not compared


@case("diffuse_locations_value")
def _(tmp):
    from geopriv.network import UnreachableRecipientsWarning

    people, edges = network()
    flagged = people.assign(infected=(np.arange(len(people)) % 3 == 0).astype(int))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableRecipientsWarning)
        out, _path = flagged.priv.diffuse_locations(
            lambda d: np.exp(-3.3 * d + 4),
            source="p0",
            graph=edges,
            distance="resistance",
            value="infected",
            support=[0, 1],
            rng=1,
        )
    return {"release": out}


# ---------------------------------------------------------------------------- dask (when installed)
@case("dask_perturb")
def _(tmp):
    released = lazy(deaths().rename_axis("death"), 3).priv.perturb(level=math.log(4), radius=200, rng=11)
    return {"release": released.compute(scheduler="synchronous")}


@case("dask_sanitize_traces")
def _(tmp):
    import dask

    kw = dict(traj_id="trip", time="t", epsilon=math.log(10) / 100, rate=0.1, bounds=BEIJING_UTM)
    released = geopriv.sanitize_traces(lazy(geolife_utm(), 2), rng=4, **kw)
    out, ledger = dask.compute(released, geopriv.trace_ledger(released), scheduler="synchronous")
    return {"release": out, "ledger": ledger}


@case("dask_aggregate")
def _(tmp):
    return {"release": geopriv.aggregate(lazy(deaths(), 3), 1.0, cells=50, bounds=SOHO_BOUNDS, rng=7)}


@case("dask_heatmap")
def _(tmp):
    return {"release": geopriv.heatmap(lazy(deaths(), 3), 1.0, resolution=50, bounds=SOHO_BOUNDS, rng=1)}


@case("dask_flows")
def _(tmp):
    out = geopriv.flows(
        lazy(geolife().to_crs(32650), 3),
        1.0,
        regions=beijing_boxes(),
        traj_id="trajectory_id",
        time="t",
        user="tracker",
        max_per_user=2,
        region_id="name",
        rng=3,
    )
    return {"release": out}


# ---------------------------------------------------------------------------- the command line
def _cli(*args) -> None:
    from geopriv.cli import main

    code = main([str(a) for a in args])
    assert code == 0, f"geopriv {' '.join(map(str, args))} exited {code}"


def _written(path, layer=None) -> dict:
    """The features of a written GeoPackage layer and the record in its metadata."""
    import pyogrio

    features = pyogrio.read_dataframe(path, layer=layer)
    record = json.loads(pyogrio.read_info(path, layer=layer)["layer_metadata"]["geopriv"])
    features.attrs["geopriv"] = record
    return {"file": features}


@case("cli_perturb")
def _(tmp):
    out = tmp / "released.gpkg"
    _cli("perturb", SOHO, out, "--layer", "deaths", "--level", "ln4", "--radius", "200", "--seed", "1", "--no-progress")
    return _written(out)


@case("cli_aggregate")
def _(tmp):
    out = tmp / "counts.gpkg"
    _cli(
        "aggregate", SOHO, out, "--layer", "deaths", "--epsilon", "1", "--cells", "100", "--bounds", *SOHO_BOUNDS,
        "--seed", "1",
    )  # fmt: skip
    return _written(out)


@case("cli_sanitize_traces")
def _(tmp):
    out = tmp / "released.gpkg"
    _cli(
        "sanitize-traces", GEOLIFE, out, "--traj-id", "trajectory_id", "--time", "t", "--level", "ln10",
        "--radius", "100", "--rate", "0.033", "--bounds", *BEIJING_4326, "--seed", "2", "--no-progress",
    )  # fmt: skip
    return _written(out)


# ---------------------------------------------------------------------------- computing and comparing
def compute(name: str, tmp: Path) -> dict:
    """Run case ``name`` in the folder ``tmp``: {part: fingerprint}, as JSON data."""
    with warnings.catch_warnings():
        # tiny data: some releases are mostly noise and say so (LowUtilityWarning); irrelevant to their values
        warnings.simplefilter("ignore", geopriv.GeoprivWarning)
        parts = CASES[name](tmp)
    result = {key: part if _is_fingerprint(part) else fingerprint(part) for key, part in parts.items()}
    return json.loads(canonical(result))


def _is_fingerprint(part) -> bool:
    return isinstance(part, dict) and "provenance_sha256" in part


def _leaves(data, prefix=""):
    """(dotted path, canonical JSON) of every leaf; lists of plain values are leaves (a ledger column, a box)."""
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list) and any(isinstance(v, (dict, list)) for v in data):  # e.g. provenance's previous
        yield f"{prefix}.length", canonical(len(data))
        for i, value in enumerate(data):
            yield from _leaves(value, f"{prefix}[{i}]")
    else:
        yield prefix, canonical(data)


def differences(golden: dict, now: dict) -> list[str]:
    """One line per field that changed, was added or disappeared (provenance fields show both values)."""
    a, b = dict(_leaves(golden)), dict(_leaves(now))
    lines = []
    for key in sorted(set(a) | set(b)):
        if key.endswith("provenance_sha256"):
            continue  # the record's fields themselves are compared (and shown) one by one
        if a.get(key) != b.get(key):
            old = a.get(key, "<absent>")
            new = b.get(key, "<absent>")
            lines.append(f"  {key}: golden {_short(old)}, now {_short(new)}")
    return lines


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


#: the libraries whose versions shape a release's bits (float formatting, PROJ, dtypes): a golden file is
#: compared only in an environment with the same versions of all of them
NUMERIC_DEPS = ("numpy", "pandas", "geopandas", "shapely", "pyproj", "scipy", "rasterio", "pyogrio", "h3", "dask")


@functools.cache
def golden() -> dict:
    """The golden file computed with this environment's library versions (one per environment the suite runs in).

    scripts/test.sh runs the suite on the newest releases and on the dependency floors (QGIS's
    Python): each has its golden file, computed by the pre-refactor code in that environment.
    Bits legitimately differ between library versions (pandas 3's string dtype, PROJ's last
    digits), so a file is only compared where its versions are the running ones.
    """
    files = sorted(GOLDEN.parent.glob("release_golden*.json"))
    if GOLDEN not in files:
        pytest.fail(f"{GOLDEN} is missing: it is part of the repository (python -m tests.test_release_golden)")
    mine = _versions()
    for path in files:
        data = json.loads(path.read_text())
        if all(data["generated_with"].get(dep) == mine[dep] for dep in NUMERIC_DEPS):
            return data
    have = {p.name: {d: json.loads(p.read_text())["generated_with"].get(d) for d in NUMERIC_DEPS} for p in files}
    pytest.skip(f"no golden file was computed with these library versions ({mine}); there are {have}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_release_is_the_golden_one(name, tmp_path):
    if name.startswith("dask_"):
        pytest.importorskip("dask_geopandas")
    expected = golden()["cases"].get(name)
    assert expected is not None, f"case {name!r} is not in the golden file: regenerate it on the reference code"
    diff = differences(expected, compute(name, tmp_path))
    assert not diff, f"case {name!r}: the seeded release changed in {len(diff)} field(s):\n" + "\n".join(diff)


def test_every_golden_case_is_tested():
    assert sorted(golden()["cases"]) == sorted(CASES)


# ---------------------------------------------------------------------------- regeneration
def _versions() -> dict:
    import importlib.metadata as md

    found = {"python": platform.python_version(), "geopriv": geopriv.__version__}
    for dist in ("numpy", "pandas", "geopandas", "shapely", "pyproj", "scipy", "rasterio", "pyogrio", "h3", "dask"):
        try:
            found[dist] = md.version(dist)
        except md.PackageNotFoundError:
            found[dist] = None
    return found


def _commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def regenerate(path: Path = GOLDEN) -> dict:
    """Compute every case on this checkout's code and write the golden file (``path``)."""
    import os

    cases = {}
    with tempfile.TemporaryDirectory() as home:
        os.environ["GEOPRIV_HOME"] = home  # as tests/conftest.py: no stamps written to the real data directory
        for name in sorted(CASES):
            with tempfile.TemporaryDirectory() as tmp:
                cases[name] = compute(name, Path(tmp))
            print(f"{name}: {', '.join(cases[name])}", file=sys.stderr)
    data = {
        "about": "Seeded releases of the shipped data before issue 42's refactor; tests/test_release_golden.py",
        "generated_from_commit": _commit(),
        "generated_with": _versions(),
        "normalised_provenance_fields": list(VARYING_FIELDS),
        "cases": cases,
    }
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


if __name__ == "__main__":  # python -m tests.test_release_golden [tests/data/release_golden_<environment>.json]
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN
    regenerate(target)
    print(f"wrote {target}", file=sys.stderr)
