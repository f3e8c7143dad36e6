"""geopriv:diffuse in a real QGIS, on the shipped Soho cholera deaths (EPSG:3857) and a nearest-neighbour network.

* The people: the deaths without their repeated locations (a line end at two points would be
  ambiguous), as a memory layer with a text id field ``person`` ("p0", ...); feature ids 1, 2, ...
* The network: every person joined to their 3 nearest neighbours, as a line layer, as a CSV table of
  person ids (read by OGR: text fields) and as a memory table of feature ids (integer fields).
  Some people are not connected to the first one: they get no answer, and the log says so.
* The output: one point per recipient in the people's CRS with recipient, network_distance,
  epsilon_per_m, effective_epsilon_per_m; the library's provenance, never the secret path.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from qgis_helpers import Log, data_path, memory_layer, points_xy, vector

pytestmark = pytest.mark.qgis

SOHO = ("soho_cholera.gpkg", "deaths")
BOUNDS = (-15800, 6711900, -14600, 6713300)  # public area around Soho, round numbers (EPSG:3857)
EXTENT = f"{BOUNDS[0]},{BOUNDS[2]},{BOUNDS[1]},{BOUNDS[3]} [EPSG:3857]"  # as QGIS writes extents: xmin,xmax,ymin,ymax
TABLE = "1:ln4/50 4:ln4/2000"  # ln 4 within 50 m for friends, within 2 km at 4 hops and beyond
FIELDS = ["recipient", "network_distance", "epsilon_per_m", "effective_epsilon_per_m"]


class Soho:
    """The people layer, the three forms of the network and the true hop distances."""

    def __init__(self, folder):
        import pandas as pd
        import scipy.sparse as sp
        from scipy.sparse import csgraph
        from scipy.spatial import cKDTree

        xy = points_xy(data_path(*SOHO))
        keep = ~pd.DataFrame(np.round(xy, 2)).duplicated().to_numpy()
        xy = xy[keep]
        self.n = len(xy)
        self.people = memory_layer(
            [f"POINT({x!r} {y!r})" for x, y in xy],
            crs="EPSG:3857",
            fields=(("person", "string"),),
            values=[(f"p{i}",) for i in range(self.n)],
        )
        self.fid = np.array([f.id() for f in self.people.getFeatures()])
        _, nn = cKDTree(xy).query(xy, 4)
        self.pairs = np.array(sorted({tuple(sorted((i, int(j)))) for i in range(self.n) for j in nn[i, 1:]}))
        self.lines = memory_layer(
            [f"LINESTRING({xy[i, 0]!r} {xy[i, 1]!r}, {xy[j, 0]!r} {xy[j, 1]!r})" for i, j in self.pairs],
            crs="EPSG:3857",
            geometry="LineString",
        )
        csv = folder / "friends.csv"
        pd.DataFrame(
            {"since": 2020, "who": [f"p{i}" for i in self.pairs[:, 0]], "whom": [f"p{j}" for j in self.pairs[:, 1]]}
        ).to_csv(csv, index=False)
        self.csv = vector(str(csv), "friends")
        self.table = memory_layer(
            [None] * len(self.pairs),
            crs=None,
            geometry="None",
            fields=(("a", "integer"), ("b", "integer")),
            values=[(int(self.fid[i]), int(self.fid[j])) for i, j in self.pairs],
        )
        adj = sp.coo_matrix((np.ones(len(self.pairs)), (self.pairs[:, 0], self.pairs[:, 1])), shape=(self.n, self.n))
        self.hops = csgraph.shortest_path(adj, unweighted=True, directed=False)

    def reached(self, row=0):
        """Row positions that get an answer when person ``row`` is the source."""
        d = self.hops[row]
        return np.flatnonzero(np.isfinite(d) & (np.arange(self.n) != row))


@pytest.fixture(scope="module")
def soho(qgis_app, tmp_path_factory):
    return Soho(tmp_path_factory.mktemp("network"))


def diffuse(run, soho, feedback=None, **params):
    base = {
        "INPUT": soho.people,
        "SOURCE": str(soho.fid[0]),
        "NETWORK": soho.lines,
        "EPSILON_TABLE": TABLE,
        "BOUNDS": EXTENT,
        "SEED": 1,
        "OUTPUT": "TEMPORARY_OUTPUT",
    }
    base.update(params)
    return run("diffuse", {k: v for k, v in base.items() if v is not None}, feedback=feedback)


def table(layer):
    return {name: [f[name] for f in layer.getFeatures()] for name in layer.fields().names()}


# ---------------------------------------------------------------------------- success
def test_line_network_answers_every_connected_person(run, soho):
    feedback = Log()
    result = diffuse(run, soho, feedback=feedback)
    out = result["OUTPUT"]
    reached = soho.reached()
    assert out.featureCount() == len(reached) == result["RECIPIENTS"]
    assert out.fields().names() == FIELDS
    assert out.crs().authid() == "EPSG:3857"
    values = table(out)
    assert values["recipient"] == soho.fid[reached].tolist()  # feature ids, never the source's
    assert np.array_equal(values["network_distance"], soho.hops[0, reached])
    expected = np.interp(values["network_distance"], [1, 4], [math.log(4) / 50, math.log(4) / 2000])
    assert np.allclose(values["epsilon_per_m"], expected, rtol=1e-12)
    assert np.all(np.array(values["effective_epsilon_per_m"]) >= np.array(values["epsilon_per_m"]))
    xy = points_xy(out)
    assert (xy >= BOUNDS[:2]).all() and (xy <= BOUNDS[2:]).all()
    record = json.loads(result["PROVENANCE"])
    assert "Markov jump process" in record["mechanism"] and "coalition" in record["definition"]
    assert record["recipients"] == len(reached) and record["distance"] == "hops" and record["seeded"] is True
    assert record["coalition_epsilon_per_m"] == pytest.approx(max(values["epsilon_per_m"]))
    assert result["COALITION_EPSILON_PER_M"] == record["coalition_epsilon_per_m"]
    assert record["frame_area"] == "bounds" and record["declared_bounds"] == pytest.approx(BOUNDS)
    assert not any("path" in key.lower() for key in record)  # the secret path is never in the provenance
    assert any(t.startswith("mechanism = ") and "coalition_epsilon_per_m = " in t for t in feedback.infos)
    assert any("not kept" in t and "fresh release" in t for t in feedback.infos)
    assert any("Random seed 1" in w for w in feedback.warnings)


def test_csv_table_of_ids_from_a_field_and_the_exponential_form(run, soho):
    """A CSV read by OGR (text fields) naming people by the id field; epsilon(d) = exp(B - A d)."""
    result = diffuse(
        run,
        soho,
        ID_FIELD="person",
        SOURCE="p0",
        NETWORK=None,
        EDGES=soho.csv,
        EDGE_FROM="who",
        EDGE_TO="whom",
        EPSILON_TABLE=None,
        EXP_A=0.5,
        EXP_B=math.log(0.03),
        DISTANCE=1,
        SEED=2,
    )
    out = result["OUTPUT"]
    values = table(out)
    assert out.fields().names() == FIELDS and out.crs().authid() == "EPSG:3857"
    by_id = sorted(soho.reached(), key=lambda i: f"p{i}")  # in id order, never the layer's feature order
    assert values["recipient"] == [f"p{i}" for i in by_id]
    d = np.array(values["network_distance"])
    assert np.allclose(values["epsilon_per_m"], 0.03 * np.exp(-0.5 * d), rtol=1e-12)
    assert np.all(d <= soho.hops[0, by_id] + 1e-9)  # resistance <= hops
    assert json.loads(result["PROVENANCE"])["distance"] == "resistance"


def test_table_of_feature_ids_gives_the_lines_distances(run, soho):
    by_lines = table(diffuse(run, soho)["OUTPUT"])
    result = diffuse(run, soho, NETWORK=None, EDGES=soho.table, EDGE_FROM="a", EDGE_TO="b", SEED=3)
    by_table = table(result["OUTPUT"])
    assert by_table["recipient"] == by_lines["recipient"]
    assert by_table["network_distance"] == by_lines["network_distance"]


def test_single_part_multilines_are_read_as_lines(run, soho):
    """GeoPackage line layers from QGIS usually hold MultiLineStrings of one part."""
    multi = memory_layer(
        [f"MULTILINESTRING(({f.geometry().asWkt()[len('LineString (') : -1]}))" for f in soho.lines.getFeatures()],
        crs="EPSG:3857",
        geometry="MultiLineString",
    )
    assert multi.featureCount() == len(soho.pairs)
    by_lines = table(diffuse(run, soho)["OUTPUT"])
    by_multi = table(diffuse(run, soho, NETWORK=multi)["OUTPUT"])
    assert by_multi["recipient"] == by_lines["recipient"]
    assert by_multi["network_distance"] == by_lines["network_distance"]


def test_lines_in_another_crs_are_reprojected(run, soho):
    """Lines in longitude/latitude: reprojected to the people's Web Mercator, ends matched within 1 cm."""
    from pyproj import Transformer

    to_lonlat = Transformer.from_crs("EPSG:3857", "EPSG:4326", always_xy=True)
    wkts = []
    for f in soho.lines.getFeatures():
        (x0, y0), (x1, y1) = [(p.x(), p.y()) for p in f.geometry().asPolyline()]
        (lon0, lon1), (lat0, lat1) = to_lonlat.transform([x0, x1], [y0, y1])
        wkts.append(f"LINESTRING({lon0!r} {lat0!r}, {lon1!r} {lat1!r})")
    lonlat = memory_layer(wkts, crs="EPSG:4326", geometry="LineString")
    by_lines = table(diffuse(run, soho)["OUTPUT"])
    result = diffuse(run, soho, NETWORK=lonlat, TOLERANCE=0.01)
    assert result["OUTPUT"].crs().authid() == "EPSG:3857"
    by_lonlat = table(result["OUTPUT"])
    assert by_lonlat["recipient"] == by_lines["recipient"]
    assert by_lonlat["network_distance"] == by_lines["network_distance"]


def test_seed_reproduces_and_no_seed_is_a_fresh_release(run, soho):
    a = points_xy(diffuse(run, soho, SEED=5)["OUTPUT"])
    b = points_xy(diffuse(run, soho, SEED=5)["OUTPUT"])
    c = diffuse(run, soho, SEED=None)
    assert np.array_equal(a, b) and not np.array_equal(a, points_xy(c["OUTPUT"]))
    assert json.loads(c["PROVENANCE"])["seeded"] is False


# ---------------------------------------------------------------------------- unconnected people
def test_people_not_connected_are_reported(run, soho):
    unreachable = soho.n - 1 - len(soho.reached())
    assert unreachable > 0
    feedback = Log()
    result = diffuse(run, soho, feedback=feedback)
    assert result["UNREACHABLE"] == unreachable == json.loads(result["PROVENANCE"])["unreachable"]
    warning = [w for w in feedback.warnings if w.startswith("UnreachableRecipientsWarning: ")]
    assert len(warning) == 1 and f"{unreachable} row(s) are not connected" in warning[0]
    first = soho.fid[min(set(range(1, soho.n)) - set(soho.reached().tolist()))]
    assert f"labels {first}," in warning[0]  # named by feature id
    assert any(f"unreachable = {unreachable}" in t for t in feedback.infos)


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("params", [{"SOURCE": "99999"}, {"SOURCE": "p0"}, {"SOURCE": "0", "ID_FIELD": "person"}])
def test_source_not_found(run, soho, tmp_path, params):
    from qgis.core import QgsProcessingException

    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException) as refused:
        diffuse(run, soho, OUTPUT=str(target), **params)
    message = str(refused.value)
    assert message.startswith("Diffuse a location over a network (graded release): ")
    assert f"source '{params['SOURCE']}' is not a person of the people layer" in message
    assert ("id field 'person'" in message) == ("ID_FIELD" in params)
    assert not target.exists()


@pytest.mark.parametrize(
    "params, needle",
    [
        ({"EPSILON_TABLE": "1:ln4/2000 4:ln4/50"}, "increases with distance"),
        ({"EPSILON_TABLE": None, "EXP_A": -0.5, "EXP_B": -3.5}, "a = -0.5 < 0"),
        ({"EPSILON_TABLE": None}, "say how epsilon falls"),
        ({"EXP_A": 0.5, "EXP_B": -3.5}, "not both"),
        ({"EPSILON_TABLE": "1-0.01"}, "not a DISTANCE:EPSILON pair"),
        ({"EDGES": "TABLE", "EDGE_FROM": "a", "EDGE_TO": "b"}, "one of them"),
        ({"NETWORK": None}, "one of them"),
        ({"NETWORK": None, "EDGES": "TABLE"}, "choose the two id fields"),
        (
            {"NETWORK": None, "EDGES": "CSV", "EDGE_FROM": "who", "EDGE_TO": "whom"},
            "'who' is empty or not a whole number",
        ),
    ],
)
def test_bad_parameters_stop_with_the_reason(run, soho, tmp_path, params, needle):
    from qgis.core import QgsProcessingException

    layers = {"TABLE": soho.table, "CSV": soho.csv}
    target = tmp_path / "never.gpkg"
    with pytest.raises(QgsProcessingException, match=needle):
        diffuse(
            run,
            soho,
            OUTPUT=str(target),
            **{k: layers.get(v, v) if isinstance(v, str) else v for k, v in params.items()},
        )
    assert not target.exists()


def test_web_mercator_without_a_study_area_names_the_parameter(run, soho):
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException, match="'Public study area' parameter"):
        diffuse(run, soho, BOUNDS=None)


def test_the_people_layers_own_extent_is_refused(run, soho):
    from qgis.core import QgsProcessingException

    extent = soho.people.extent()
    own = f"{extent.xMinimum()},{extent.xMaximum()},{extent.yMinimum()},{extent.yMaximum()} [EPSG:3857]"
    with pytest.raises(QgsProcessingException, match="bounding box of the true points"):
        diffuse(run, soho, BOUNDS=own)


def test_parameters_follow_the_library(provider):
    import inspect

    import geopriv

    alg = provider.algorithm("diffuse")
    library = inspect.signature(geopriv.diffuse_locations).parameters
    assert alg.parameterDefinition("DISTANCE").defaultValue() == ["hops", "resistance"].index(
        library["distance"].default
    )
    assert alg.parameterDefinition("TOLERANCE").defaultValue() == library["tolerance"].default
    help_text = alg.shortHelpString()
    assert "not saved" in help_text and "fresh release" in help_text and "closest" in help_text


# ---------------------------------------------------------------------------- publication order (issue 30)
def test_recipients_follow_their_ids_not_the_layers_feature_order(run, soho):
    """The same people in another feature order (ids from the id field): the same output order and answers."""
    order = np.random.default_rng(3).permutation(soho.n)
    feats = list(soho.people.getFeatures())
    shuffled = memory_layer(
        [feats[i].geometry().asWkt(17) for i in order],
        crs="EPSG:3857",
        fields=(("person", "string"),),
        values=[(f"p{i}",) for i in order],
    )
    common = dict(ID_FIELD="person", SOURCE="p0", NETWORK=None, EDGES=soho.csv, EDGE_FROM="who", EDGE_TO="whom", SEED=4)
    a = diffuse(run, soho, **common)["OUTPUT"]
    b = diffuse(run, soho, INPUT=shuffled, **common)["OUTPUT"]
    assert table(a)["recipient"] == table(b)["recipient"] == sorted(table(a)["recipient"])
    assert np.array_equal(points_xy(a), points_xy(b))


def test_no_path_is_taken_or_kept(provider):
    """QGIS draws a fresh, bound path every run and never keeps one: no parameter takes a path file."""
    alg = provider.algorithm("diffuse")
    names = [p.name().lower() for p in alg.parameterDefinitions()]
    assert not any("path" in n for n in names)
