"""geopriv:aggregate, geopriv:heatmap and geopriv:flows (the count releases) in a real, headless QGIS.

Real layers (the shipped Soho cholera deaths, 324 points in EPSG:3857; the GeoLife sample, 5,908
fixes of 5 trajectories by 3 trackers in EPSG:4326), real GeoPackage and GeoTIFF files, real
SQLite and PostgreSQL budget stores; no mocks.

* Each algorithm writes its output (cells, a two-band GeoTIFF, origin-destination lines) with the
  library's provenance, and its counts are the library's own (the same call with the same seed).
* Points outside the public area are refused, named by feature id (never coordinates), and
  nothing is written; trips outside every region are refused naming the trips, or dropped.
* The provider lists the three algorithms, whose parameters carry the library's names and
  defaults, and the labels the library's QGIS advice quotes.

Deterministic: every release is seeded.  The one statistical bound (the released total of the 324
deaths within 60) holds for the fixed seed; with another seed it would fail with probability about
6e-4 (the total's noise is discrete Laplace of scale 8 under the default split).
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from qgis_helpers import Log, attributes, data_path, memory_layer, vector

pytestmark = [
    pytest.mark.qgis,
    pytest.mark.filterwarnings("ignore:The noise swamps the counts"),
]  # few points: said, not tested

SOHO = ("soho_cholera.gpkg", "deaths")
BOUNDS = (-15800, 6711900, -14600, 6713300)  # a public area around Soho in round numbers (EPSG:3857)
EXTENT = f"{BOUNDS[0]},{BOUNDS[2]},{BOUNDS[1]},{BOUNDS[3]} [EPSG:3857]"  # as QGIS writes extents: xmin,xmax,ymin,ymax
NARROW = f"-15000,{BOUNDS[2]},{BOUNDS[1]},{BOUNDS[3]} [EPSG:3857]"  # leaves out the deaths west of x = -15000
BEIJING = "116.2,116.7,39.8,40.1 [EPSG:4326]"  # round numbers around the GeoLife sample
ALGORITHMS = {
    "aggregate": "Private counts per cell",
    "heatmap": "Private heatmap",
    "flows": "Private flows between regions",
}


def soho_frame():
    import geopandas as gpd

    return gpd.read_file(data_path(*SOHO).split("|")[0], layer=SOHO[1])


def outside_ids(x=-15000):
    """The feature ids of the deaths west of ``x`` (outside NARROW)."""
    return {f.id() for f in vector(data_path(*SOHO)).getFeatures() if f.geometry().asPoint().x() < x}


def shown_ids(message):
    """The feature ids a refusal names ("... labels 3, 17, 42 ..." ; the list may end with "...")."""
    listed = message.split("labels ", 1)[1].split(".", 1)[0].split("(")[0]
    return {int(t) for t in listed.replace("...", "").split(",") if t.strip()}


def soho_coordinate_texts():
    xy = soho_frame().get_coordinates().to_numpy()
    return {f"{v:.0f}" for v in xy.ravel()} | {f"{v:.2f}" for v in xy.ravel()}


def regions_layer(crs="EPSG:4326", names=("sw", "se", "nw", "ne")):
    """Four public zones around Beijing (a 2 x 2 split of BEIJING), with a text field 'zone'."""
    boxes = [
        (116.2, 39.8, 116.45, 39.95),
        (116.45, 39.8, 116.7, 39.95),
        (116.2, 39.95, 116.45, 40.1),
        (116.45, 39.95, 116.7, 40.1),
    ]
    wkts = [f"POLYGON(({a} {b}, {c} {b}, {c} {d}, {a} {d}, {a} {b}))" for a, b, c, d in boxes]
    return memory_layer(wkts, crs=crs, geometry="Polygon", fields=(("zone", "string"),), values=[[n] for n in names])


def field_names(layer):
    return [f.name() for f in layer.fields()]


# --- Private counts per cell --------------------------------------------------------------------------
def test_counts_per_grid_cell_are_the_librarys(run):
    import geopriv

    log = Log()
    result = run(
        "aggregate",
        {
            "INPUT": data_path(*SOHO),
            "EPSILON": 1.0,
            "CELLS": "100",
            "BOUNDS": EXTENT,
            "SEED": 1,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
        feedback=log,
    )
    out = result["OUTPUT"]
    record = json.loads(result["PROVENANCE"])
    ny, nx = record["grid_shape"]  # 100 ground metres: about 161 Web Mercator units at 51.5 N (1,200 x 1,400 units)
    assert (nx, ny) == (8, 9) and record["cell_size_crs"] == pytest.approx(160.6, abs=0.5)
    assert out.featureCount() == nx * ny == result["N_CELLS"] == record["n_cells"]  # every cell released
    assert field_names(out) == ["cell", "count", "expected_error"]
    assert out.crs().authid() == "EPSG:3857"
    assert out.geometryType() == 2  # polygons
    assert record["epsilon"] == 1.0 and record["cells"] == "square grid of 100 m" and record["cell_size_m"] == 100
    assert record["declared_bounds"] == list(BOUNDS) and record["seeded"] is True
    assert record["user"] is None and record["max_per_user"] == 1
    rows = attributes(out)
    counts = np.array([r[1] for r in rows])
    assert (counts >= 0).all() and abs(counts.sum() - 324) < 60  # see the module docstring
    # the plugin holds no privacy logic: the same call of the library with the same seed gives the same map
    library = geopriv.aggregate(soho_frame(), 1.0, cells=100, bounds=BOUNDS, rng=1)
    assert [r[0] for r in rows] == library["cell"].tolist()
    assert counts.tolist() == library["count"].tolist()
    assert np.allclose([r[2] for r in rows], library["expected_error"])
    first = next(out.getFeatures()).geometry().boundingBox()  # cell 0: the north-west cell of the anchored grid
    step = record["cell_size_crs"]
    assert (first.xMinimum(), first.yMaximum(), first.width()) == pytest.approx(
        (BOUNDS[0], BOUNDS[1] + ny * step, step)
    )
    assert any("No 'Person id field'" in w for w in log.warnings)
    assert any(line.startswith("mechanism = ") and f"n_cells = {nx * ny}" in line for line in log.infos)


def test_h3_cells_with_a_person_id_field(run):
    h3 = pytest.importorskip("h3")
    log = Log()
    result = run(
        "aggregate",
        {
            "INPUT": data_path("geolife_sample.gpkg"),
            "EPSILON": 2.0,
            "CELLS": "h3:7",
            "USER": "tracker",
            "MAX_PER_USER": 500,
            "BOUNDS": BEIJING,
            "SEED": 2,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
        feedback=log,
    )
    out = result["OUTPUT"]
    record = json.loads(result["PROVENANCE"])
    assert record["h3_resolution"] == 7 and record["user"] == "tracker" and record["max_per_user"] == 500
    assert out.featureCount() == record["n_cells"] == result["N_CELLS"] > 100
    assert out.crs().authid() == "EPSG:4326"
    cells = [r[0] for r in attributes(out)]
    assert all(h3.is_valid_cell(h3.int_to_str(c)) and h3.get_resolution(h3.int_to_str(c)) == 7 for c in cells)
    assert not any("No 'Person id field'" in w for w in log.warnings)


def test_a_layer_of_public_polygons_as_cells_keeps_its_fields(run):
    west = (
        f"POLYGON(({BOUNDS[0]} {BOUNDS[1]}, -15200 {BOUNDS[1]}, -15200 {BOUNDS[3]}, {BOUNDS[0]} {BOUNDS[3]}, "
        f"{BOUNDS[0]} {BOUNDS[1]}))"
    )
    east = (
        f"POLYGON((-15200 {BOUNDS[1]}, {BOUNDS[2]} {BOUNDS[1]}, {BOUNDS[2]} {BOUNDS[3]}, -15200 {BOUNDS[3]}, "
        f"-15200 {BOUNDS[1]}))"
    )
    districts = memory_layer(
        [west, east], crs="EPSG:3857", geometry="Polygon", fields=(("name", "string"),), values=[["west"], ["east"]]
    )
    result = run(
        "aggregate", {"INPUT": data_path(*SOHO), "CELLS_LAYER": districts, "SEED": 3, "OUTPUT": "TEMPORARY_OUTPUT"}
    )
    out = result["OUTPUT"]
    assert field_names(out) == ["name", "cell", "count", "expected_error"]
    rows = attributes(out)
    assert [r[:2] for r in rows] == [["west", 0], ["east", 1]]
    assert json.loads(result["PROVENANCE"])["cells"] == "2 public polygons"


def test_the_cells_are_a_step_or_a_layer(run, tmp_path):
    from qgis.core import QgsProcessingException

    counted = memory_layer(
        ["POLYGON((-15800 6711900, -14600 6711900, -14600 6713300, -15800 6711900))"],
        crs="EPSG:3857",
        geometry="Polygon",
        fields=(("Count", "integer"),),
        values=[[1]],
    )
    target = tmp_path / "never.gpkg"
    for extra, expected in (
        ({}, "one of them"),
        ({"CELLS": "100", "CELLS_LAYER": counted}, "not both"),
        ({"CELLS_LAYER": counted}, "already has a field"),
    ):
        with pytest.raises(QgsProcessingException, match=expected):
            run("aggregate", {"INPUT": data_path(*SOHO), "SEED": 1, "OUTPUT": str(target), **extra})
        assert not target.exists()


def test_a_grid_needs_a_public_area(run):
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException) as refused:
        run("aggregate", {"INPUT": data_path(*SOHO), "CELLS": "100", "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT"})
    message = str(refused.value)
    assert message.startswith("Private counts per cell: ") and "'Public study area'" in message
    assert "bounds=" not in message and "--bounds" not in message  # the QGIS advice only


def test_advanced_parameters_reach_the_library(run):
    from qgis.core import QgsProcessingException

    base = {"INPUT": data_path(*SOHO), "CELLS": "100", "BOUNDS": EXTENT, "SEED": 1, "OUTPUT": "TEMPORARY_OUTPUT"}
    cells_only = json.loads(
        run("aggregate", {**base, "LEVELS": "false", "NONNEGATIVE": False, "SUPPRESS": 2})["PROVENANCE"]
    )
    assert cells_only["epsilon_per_level"][0] == 1.0 and not any(cells_only["epsilon_per_level"][1:])
    assert cells_only["nonnegative"] is False and cells_only["suppress"] == 2
    depth = cells_only["tree_levels"]
    weights = json.loads(
        run("aggregate", {**base, "LEVELS": ", ".join(["1"] + ["0"] * (depth - 2) + ["1"])})["PROVENANCE"]
    )
    assert weights["epsilon_per_level"][0] == weights["epsilon_per_level"][-1] == 0.5
    auto = json.loads(run("aggregate", base)["PROVENANCE"])
    assert auto["epsilon_per_level"][0] == 7 / 8 and auto["epsilon_per_level"][-1] == 1 / 8  # the library's "auto"
    with pytest.raises(QgsProcessingException, match="^Private counts per cell: the 'Levels of the hierarchy' must"):
        run("aggregate", {**base, "LEVELS": "most"})


@pytest.mark.parametrize("alg_id", ["aggregate", "heatmap"])
def test_points_outside_the_public_area_are_refused_naming_feature_ids(run, tmp_path, alg_id):
    from qgis.core import QgsProcessingException

    target = tmp_path / ("never.gpkg" if alg_id == "aggregate" else "never.tif")
    cells = {"CELLS": "100"} if alg_id == "aggregate" else {"RESOLUTION": 100.0}
    with pytest.raises(QgsProcessingException) as refused:
        run(alg_id, {"INPUT": data_path(*SOHO), "BOUNDS": NARROW, "SEED": 1, "OUTPUT": str(target), **cells})
    message = str(refused.value)
    assert message.startswith(f"{ALGORITHMS[alg_id]}: ")
    assert "lie outside the declared study area" in message and "labels " in message
    assert "'Public study area'" in message and "bounds=" not in message  # the QGIS advice
    shown = shown_ids(message)
    assert shown and shown <= outside_ids()  # feature ids of the points outside, and only those
    for text in soho_coordinate_texts():
        assert text not in message  # never coordinates
    assert not target.exists() and not list(tmp_path.iterdir())  # nothing written


def test_the_input_layers_own_extent_is_refused(run):
    from qgis.core import QgsProcessingException

    layer = vector(data_path(*SOHO))
    e = layer.extent()
    own = f"{e.xMinimum()},{e.xMaximum()},{e.yMinimum()},{e.yMaximum()} [EPSG:3857]"
    with pytest.raises(QgsProcessingException, match="bounding box of the true points"):
        run("aggregate", {"INPUT": layer, "CELLS": "100", "BOUNDS": own, "OUTPUT": "TEMPORARY_OUTPUT"})


# --- Private heatmap --------------------------------------------------------------------------------
def test_heatmap_is_a_two_band_geotiff_written_by_the_library(run, tmp_path):
    import geopriv
    from osgeo import gdal
    from qgis.core import QgsRasterLayer

    target = tmp_path / "heatmap.tif"
    log = Log()
    result = run(
        "heatmap",
        {
            "INPUT": data_path(*SOHO),
            "EPSILON": 1.0,
            "RESOLUTION": 50.0,
            "BOUNDS": EXTENT,
            "SEED": 4,
            "OUTPUT": str(target),
        },
        feedback=log,
    )
    assert result["OUTPUT"] == str(target) and target.exists()
    layer = QgsRasterLayer(str(target), "heatmap")
    assert layer.isValid() and layer.bandCount() == 2
    record = json.loads(result["PROVENANCE"])
    ny, nx = record["grid_shape"]  # 50 ground metres: about 80 Web Mercator units at 51.5 N
    assert (nx, ny) == (15, 18)
    assert (layer.width(), layer.height()) == (nx, ny) and layer.crs().authid() == "EPSG:3857"
    assert layer.rasterUnitsPerPixelX() == pytest.approx(record["cell_size_crs"])
    assert layer.extent().xMinimum() == pytest.approx(BOUNDS[0])  # anchored on the public area's lower-left corner
    assert layer.extent().yMinimum() == pytest.approx(BOUNDS[1])
    assert record["values"] == "count" and record["cell_size_m"] == 50.0 and record["n_cells"] == nx * ny
    assert result["N_CELLS"] == nx * ny and record["seeded"] is True
    ds = gdal.Open(str(target))
    assert json.loads(ds.GetMetadataItem("GEOPRIV"))["n_cells"] == nx * ny  # the provenance, in the file
    assert ds.GetRasterBand(1).GetDescription() == "count"
    assert ds.GetRasterBand(2).GetDescription() == "expected error (count)"
    values = ds.GetRasterBand(1).ReadAsArray()
    library = geopriv.heatmap(soho_frame(), 1.0, resolution=50, bounds=BOUNDS, rng=4)
    assert np.array_equal(values, library.values)  # the library's release, as it wrote it
    ds = None
    # 270 cells of 50 m for 324 deaths: the library's warning reaches the log, with its QGIS advice
    swamped = [w for w in log.warnings if "The noise swamps the counts" in w]
    assert len(swamped) == 1 and "'Most rows per person'" in swamped[0] and "max_per_user" not in swamped[0]


def test_heatmap_of_densities(run, tmp_path):
    from osgeo import gdal

    target = tmp_path / "density.tif"
    result = run(
        "heatmap",
        {
            "INPUT": data_path(*SOHO),
            "RESOLUTION": 100.0,
            "VALUES": 1,
            "BOUNDS": EXTENT,
            "SEED": 5,
            "OUTPUT": str(target),
        },
    )
    assert json.loads(result["PROVENANCE"])["values"] == "density"
    ds = gdal.Open(str(target))
    assert ds.RasterCount == 2 and ds.GetRasterBand(1).DataType == gdal.GDT_Float32
    assert ds.GetRasterBand(1).GetDescription() == "count per km²"
    values = ds.GetRasterBand(1).ReadAsArray()
    assert np.allclose(values * 0.01, np.round(values * 0.01), atol=1e-3)  # whole counts per 0.01 km² cell
    ds = None


def test_heatmap_to_a_temporary_output(run):
    from qgis.core import QgsRasterLayer

    result = run(
        "heatmap",
        {"INPUT": data_path(*SOHO), "RESOLUTION": 100.0, "BOUNDS": EXTENT, "SEED": 6, "OUTPUT": "TEMPORARY_OUTPUT"},
    )
    layer = QgsRasterLayer(result["OUTPUT"], "heatmap")
    assert layer.isValid() and layer.bandCount() == 2 and result["OUTPUT"].endswith(".tif")


# --- Private flows between regions --------------------------------------------------------------------
def test_flows_from_trajectory_points(run):
    import geopandas as gpd
    import geopriv

    regions = regions_layer()
    result = run(
        "flows",
        {
            "INPUT": data_path("geolife_sample.gpkg"),
            "EPSILON": 1.0,
            "TRAJ_ID_FIELD": "trajectory_id",
            "TIME_FIELD": "t",
            "REGIONS": regions,
            "REGION_ID": "zone",
            "USER": "tracker",
            "MAX_PER_USER": 3,
            "SEED": 4,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    out = result["OUTPUT"]
    assert out.featureCount() == 16 == result["N_CELLS"]  # every ordered pair of the 4 zones, empty or not
    assert field_names(out) == ["origin", "destination", "count", "expected_error"]
    assert out.crs().authid() == "EPSG:4326" and out.geometryType() == 1  # lines
    rows = attributes(out)
    zones = ["sw", "se", "nw", "ne"]
    assert [r[:2] for r in rows] == [[o, d] for o in zones for d in zones]
    record = json.loads(result["PROVENANCE"])
    assert record["traj_id"] == "trajectory_id" and record["time"] == "t" and record["outside"] == "refuse"
    assert record["regions"] == 4 and record["user"] == "tracker" and record["max_per_user"] == 3
    sample = gpd.read_file(data_path("geolife_sample.gpkg"))
    zones_frame = gpd.GeoDataFrame(
        {"zone": zones},
        crs="EPSG:4326",
        geometry=gpd.GeoSeries.from_wkt([f.geometry().asWkt() for f in regions.getFeatures()]).values,
    )
    library = geopriv.flows(
        sample,
        1.0,
        regions=zones_frame,
        traj_id="trajectory_id",
        time="t",
        user="tracker",
        max_per_user=3,
        region_id="zone",
        rng=4,
    )
    assert [r[2] for r in rows] == library["count"].tolist()  # the library's release
    assert sum(r[2] for r in rows) > 0  # (with this seed: some seeds release all zeros for these 5 trips)


def trips_layer():
    """Five trips as lines in EPSG:4326 around Beijing; the last one ends outside every zone."""
    lines = [
        "LINESTRING(116.3 39.9, 116.5 39.9)",
        "LINESTRING(116.3 39.9, 116.31 39.91)",
        "LINESTRING(116.6 40.0, 116.3 39.85)",
        "LINESTRING(116.5 39.85, 116.3 40.05)",
        "LINESTRING(116.3 39.9, 117.5 39.9)",
    ]
    return memory_layer(
        lines,
        crs="EPSG:4326",
        geometry="LineString",
        fields=(("pid", "string"),),
        values=[["a"], ["a"], ["b"], ["c"], ["d"]],
    )


def test_trips_outside_every_region_are_refused_or_dropped(run, tmp_path):
    from qgis.core import QgsProcessingException

    trips = trips_layer()
    last = max(f.id() for f in trips.getFeatures())
    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException) as refused:
        run("flows", {"INPUT": trips, "REGIONS": regions_layer(), "SEED": 8, "OUTPUT": str(target)})
    message = str(refused.value)
    assert message.startswith("Private flows between regions: ")
    assert "outside every region" in message and shown_ids(message) == {last}  # the trip, by its feature id
    assert "'Trips outside every region' to 'drop'" in message and "outside=" not in message  # the QGIS advice
    for text in ("117.5", "116.3", "39.9"):
        assert text not in message
    assert not target.exists()

    result = run(
        "flows",
        {
            "INPUT": trips,
            "REGIONS": regions_layer(),
            "OUTSIDE": 1,
            "USER": "pid",
            "MAX_PER_USER": 2,
            "SEED": 8,
            "OUTPUT": str(target),
        },
    )
    assert json.loads(result["PROVENANCE"])["outside"] == "drop"
    written = vector(str(target))
    assert written.featureCount() == 16
    names = {f["origin"] for f in written.getFeatures()}
    assert names == {f.id() for f in regions_layer().getFeatures()}  # no region id field: feature ids


def test_trip_fields_match_the_layer_type(run):
    from qgis.core import QgsProcessingException

    with pytest.raises(
        QgsProcessingException, match="trajectory points need the 'Trace id field' and the 'Time field'"
    ):
        run(
            "flows",
            {"INPUT": data_path("geolife_sample.gpkg"), "REGIONS": regions_layer(), "OUTPUT": "TEMPORARY_OUTPUT"},
        )
    with pytest.raises(QgsProcessingException, match="a line layer has one trip per line"):
        run(
            "flows",
            {"INPUT": trips_layer(), "TRAJ_ID_FIELD": "pid", "REGIONS": regions_layer(), "OUTPUT": "TEMPORARY_OUTPUT"},
        )


# --- budget store ---------------------------------------------------------------------------------------
def people_layer():
    """Six deaths-like points in Soho with person ids: person-0 has two of them."""
    xs = [-15500, -15400, -15300, -15200, -15100, -15000]
    return memory_layer(
        [f"POINT({x} 6712500)" for x in xs],
        crs="EPSG:3857",
        fields=(("pid", "string"),),
        values=[["person-0"], ["person-0"]] + [[f"person-{i}"] for i in range(1, 5)],
    )


def granted_store(url, total):
    import geopriv

    with geopriv.BudgetStore(url, create=True) as store:
        store.grant(total, unit="epsilon", note="test: one release")


def store_state(url):
    import geopriv

    with geopriv.BudgetStore(url) as store:
        return store.balances(unit="epsilon").set_index("person").sort_index(), len(store.releases())


def test_a_budget_store_charges_each_person_once(run, tmp_path):
    from qgis.core import QgsProcessingException

    path = str(tmp_path / "budgets.db")
    granted_store(f"sqlite:///{path}", 1.5)
    params = {
        "INPUT": people_layer(),
        "EPSILON": 1.0,
        "CELLS": "100",
        "BOUNDS": EXTENT,
        "USER": "pid",
        "MAX_PER_USER": 2,
        "BUDGET_STORE": path,
        "SEED": 9,
    }
    log = Log()
    result = run("aggregate", {**params, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=log)
    record = json.loads(result["PROVENANCE"])
    assert record["budget_store"] == "sqlite" and record["budget_unit"] == "epsilon"
    table, releases = store_state(path)
    assert releases == 1 and list(table.index) == [f"person-{i}" for i in range(5)]
    assert np.allclose(table["spent"], 1.0)  # person-0, with two points, is charged once too
    assert any("Budget store (sqlite)" in line and "before the noise was drawn" in line for line in log.infos)

    target = tmp_path / "second.gpkg"
    with pytest.raises(QgsProcessingException) as refused:
        run("aggregate", {**params, "OUTPUT": str(target)})
    assert "person(s) would exceed their lifetime budget in 'epsilon'" in str(refused.value)
    assert "'person-0'" in str(refused.value)
    assert not target.exists() and store_state(path)[1] == 1  # nothing written, nobody charged

    with pytest.raises(QgsProcessingException, match="choose the 'Person id field'"):
        run("aggregate", {**params, "USER": None, "MAX_PER_USER": 1, "OUTPUT": "TEMPORARY_OUTPUT"})


@pytest.mark.postgresql
def test_a_postgresql_budget_store(run, pg_url, tmp_path):
    granted_store(pg_url, 1.5)
    target = tmp_path / "flows.gpkg"
    trips = trips_layer()
    result = run(
        "flows",
        {
            "INPUT": trips,
            "REGIONS": regions_layer(),
            "OUTSIDE": 1,
            "USER": "pid",
            "MAX_PER_USER": 2,
            "BUDGET_STORE": pg_url,
            "SEED": 10,
            "OUTPUT": str(target),
        },
    )
    assert json.loads(result["PROVENANCE"])["budget_store"] == "postgresql"
    table, releases = store_state(pg_url)
    assert releases == 1 and list(table.index) == ["a", "b", "c", "d"] and np.allclose(table["spent"], 1.0)
    assert vector(str(target)).featureCount() == 16


# --- the provider ------------------------------------------------------------------------------------------
def test_the_provider_lists_them(provider):
    from qgis.core import QgsApplication

    registry = QgsApplication.processingRegistry()
    ids = {alg.id() for alg in provider.algorithms()}
    for name, display in ALGORITHMS.items():
        assert f"geopriv:{name}" in ids
        alg = registry.algorithmById(f"geopriv:{name}")
        assert alg is not None and alg.displayName() == display
        assert alg.group() == "Counts, heatmaps and flows" and alg.groupId() == "counts"
        assert len(alg.shortHelpString()) > 200 and "\n" not in alg.shortHelpString()
        assert alg.RELEASE_FUNCTION == name


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_parameters_are_the_librarys(provider, name):
    import geopriv
    from geopriv.budget import PERSON_FIX
    from qgis.core import QgsProcessingParameterDefinition as Definition

    alg = provider.algorithm(name)
    library = inspect.signature(getattr(geopriv, name)).parameters
    for function, keywords in alg.GEOPRIV_KEYWORDS.items():
        assert set(keywords) <= set(inspect.signature(getattr(geopriv, function)).parameters), function
    assert library["epsilon"].default is inspect.Parameter.empty  # the plugin proposes 1 and says so
    assert alg.parameterDefinition("EPSILON").defaultValue() == 1.0
    assert alg.parameterDefinition("MAX_PER_USER").defaultValue() == library["max_per_user"].default
    assert alg.parameterDefinition("LEVELS").defaultValue() == library["levels"].default
    assert alg.parameterDefinition("NONNEGATIVE").defaultValue() is library["nonnegative"].default
    user = alg.parameterDefinition("USER")  # the library's user=, also the persons a budget store charges
    assert user.description() == "Person id field" and f"'{user.description()}'" in PERSON_FIX.qgis
    assert not user.flags() & Definition.FlagAdvanced and user.flags() & Definition.FlagOptional
    assert alg.parameterDefinition("PERSON") is None  # one field for one concept
    assert alg.parameterDefinition("BUDGET_STORE").flags() & Definition.FlagAdvanced
    if name == "aggregate":
        assert alg.parameterDefinition("SUPPRESS").defaultValue() is library["suppress"].default
    if name == "heatmap":
        assert alg.VALUE_KINDS[alg.parameterDefinition("VALUES").defaultValue()] == library["values"].default
    if name == "flows":
        assert alg.OUTSIDE_RULES[alg.parameterDefinition("OUTSIDE").defaultValue()] == library["outside"].default


def test_the_qgis_names_in_the_librarys_advice_are_the_dialogs(provider):
    """The library's QGIS fixes for counts quote these labels: the dialogs must have them."""
    from geopriv.counting import OUTSIDE_FIX
    from geopriv.cells import _cells_fix
    from geopriv.counting import check_max_per_user
    from geopriv.exceptions import ParameterError

    with pytest.raises(ParameterError) as most:
        check_max_per_user(2, None)
    advice = {
        "aggregate": [_cells_fix().qgis, most.value.fix.qgis],
        "heatmap": [most.value.fix.qgis],
        "flows": [OUTSIDE_FIX.qgis, most.value.fix.qgis],
    }
    for name, texts in advice.items():
        labels = [d.description() for d in provider.algorithm(name).parameterDefinitions()]
        for text in texts:
            quoted = text.split("'")[1::2]
            for label in quoted:
                if label in ("drop",):
                    continue  # an option of the parameter
                assert any(d.startswith(label) for d in labels), (name, label)
