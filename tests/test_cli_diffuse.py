"""``geopriv diffuse``: the command line of geopriv.diffuse_locations, end to end on the shipped Soho deaths.

Data: ``geopriv/data/soho_cholera.gpkg`` layer ``deaths`` (EPSG:3857) without its repeated
locations (5 points within 1e-11 m of another: a line end at two points would be ambiguous), written to a temporary folder with a
text id column ``person`` ("p0", "p1", ...) and a 0/1 column ``infected``; the network joins every
person to their 3 nearest neighbours, as a CSV of id pairs (row numbers, and person ids) and as a
GeoPackage line layer.  Some people are in components without row 0: they get no answer.
Public area: ``-15800 6711900 -14600 6713300`` (round numbers around Soho, as in
tests/test_cli_synthesize.py).  The CLI runs in this process (``geopriv.cli.main``).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import stat

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph
from scipy.spatial import cKDTree
from shapely.geometry import LineString

import geopriv
from geopriv.io import sidecar_path

from .test_cli import SOHO, one_line_error, run, snapshot

#: read CSV floats exactly: pandas 3 does by default (and deprecates float_precision), pandas 2 on request
EXACT_FLOATS = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}

BOUNDS = (-15800, 6711900, -14600, 6713300)
TABLE = ["--epsilon-table", "1:ln4/50", "4:ln4/2000"]  # ln 4 within 50 m for friends, within 2 km at 4 hops


class Net:
    """The people, the network files and the true hop distances from every person (for the checks)."""

    def __init__(self, folder):
        deaths = pyogrio.read_dataframe(SOHO, layer="deaths")
        same = pd.DataFrame({"x": deaths.geometry.x.round(2), "y": deaths.geometry.y.round(2)}).duplicated()
        people = deaths[~same.to_numpy()].reset_index(drop=True)
        people["person"] = [f"p{i}" for i in range(len(people))]
        people["infected"] = np.arange(len(people)) % 2
        self.people = people
        self.n = len(people)
        xy = np.column_stack([people.geometry.x, people.geometry.y])
        _, nn = cKDTree(xy).query(xy, 4)
        pairs = sorted({tuple(sorted((i, int(j)))) for i in range(self.n) for j in nn[i, 1:]})
        self.pairs = np.array(pairs)
        self.folder = folder
        self.input = folder / "people.gpkg"
        people.to_file(self.input, engine="pyogrio")
        self.edges = folder / "edges.csv"
        pd.DataFrame(self.pairs, columns=["a", "b"]).to_csv(self.edges, index=False)
        self.named_edges = folder / "named_edges.csv"  # person ids, in other columns than the first two
        pd.DataFrame(
            {
                "since": 2020,
                "who": people.person.to_numpy()[self.pairs[:, 0]],
                "whom": people.person.to_numpy()[self.pairs[:, 1]],
            }
        ).to_csv(self.named_edges, index=False)
        self.lines = folder / "lines.gpkg"
        gpd.GeoDataFrame(geometry=[LineString([xy[i], xy[j]]) for i, j in pairs], crs=people.crs).to_file(
            self.lines, engine="pyogrio"
        )
        adj = sp.coo_matrix((np.ones(len(pairs)), (self.pairs[:, 0], self.pairs[:, 1])), shape=(self.n, self.n))
        self.hops = csgraph.shortest_path(adj, unweighted=True, directed=False)

    def reached(self, source):
        """Rows that get an answer: connected to ``source``, other than itself."""
        d = self.hops[source]
        return np.flatnonzero(np.isfinite(d) & (np.arange(self.n) != source))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    return Net(tmp_path_factory.mktemp("net"))


def diffuse(net, out, *extra, network=("--edges",), source="0"):
    """The arguments of a diffuse run of person ``source`` over the edge table, with the public area."""
    graph = {"--edges": net.edges, "--network": net.lines}[network[0]]
    return ["diffuse", net.input, out, "--source", source, network[0], graph, *network[1:], "--bounds", *BOUNDS, *extra]


def gpkg_record(path, layer=None):
    return json.loads(pyogrio.read_info(path, layer=layer)["layer_metadata"]["geopriv"])


def xy(gdf):
    return np.column_stack([gdf.geometry.x, gdf.geometry.y])


# ---------------------------------------------------------------------------- success
def test_edge_table_release_with_provenance(capsys, tmp_path, net):
    out = tmp_path / "answers.gpkg"
    code, _, err = run(capsys, *diffuse(net, out, *TABLE, "--seed", "1"))
    assert code == 0, err
    reached = net.reached(0)
    unreachable = net.n - 1 - len(reached)
    assert unreachable > 0  # the data has people without a chain of neighbours to row 0
    back = pyogrio.read_dataframe(out)
    assert list(back.columns) == [
        "recipient",
        "network_distance",
        "epsilon_per_m",
        "effective_epsilon_per_m",
        "geometry",
    ]
    assert back.crs.to_epsg() == 3857
    assert back.recipient.tolist() == reached.tolist()  # row numbers, in the input's order; never the source
    assert np.array_equal(back.network_distance.to_numpy(), net.hops[0, reached])
    expected = np.interp(back.network_distance, [1, 4], [math.log(4) / 50, math.log(4) / 2000])
    assert np.allclose(back.epsilon_per_m, expected, rtol=1e-12)
    assert (back.effective_epsilon_per_m >= back.epsilon_per_m).all()
    assert (xy(back) >= BOUNDS[:2]).all() and (xy(back) <= BOUNDS[2:]).all()
    # one path: friends at the same distance get the same answer more often than not; never the true point
    assert not np.any(np.all(np.isclose(xy(back), xy(net.people.iloc[[0]])), axis=1))
    record = gpkg_record(out)
    assert "Markov jump process" in record["mechanism"] and "coalition" in record["definition"]
    assert record["distance"] == "hops" and record["recipients"] == len(reached)
    assert record["unreachable"] == unreachable and record["seeded"] is True
    assert record["coalition_epsilon_per_m"] == pytest.approx(back.epsilon_per_m.max())
    assert record["epsilon_min_per_m"] == pytest.approx(back.epsilon_per_m.min())
    assert record["declared_bounds"] == list(map(float, BOUNDS))
    assert not any("path" in key.lower() for key in record)  # the secret path is never in the provenance
    summary = [line for line in err.splitlines() if line.startswith("released ")]
    assert len(summary) == 1
    for needle in (
        f"to {len(reached)} recipient(s)",
        f"({unreachable} not connected to it: no answer)",
        f"coalition epsilon {back.epsilon_per_m.max():.6g} per metre",
        "by hops distance",
        "a fresh path: a new release",
        "seeded",
    ):
        assert needle in summary[0], needle


def test_line_network_in_another_crs_and_ids_from_a_field(capsys, tmp_path, net):
    """Lines are reprojected to the people's CRS and their ends matched within --tolerance; ids are text."""
    lines = tmp_path / "lines_lonlat.geojson"
    pyogrio.read_dataframe(net.lines).to_crs(4326).to_file(lines, engine="pyogrio")
    out = tmp_path / "answers.geojson"
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        out,
        "--id-field",
        "person",
        "--source",
        "p0",
        "--network",
        lines,
        "--tolerance",
        "0.01",
        *TABLE,
        "--bounds",
        *BOUNDS,
        "--seed",
        "2",
    )
    assert code == 0, err
    back = geopriv.io.read_vector(out)
    reached = net.reached(0)
    by_label = sorted(reached, key=lambda i: f"p{i}")  # published in label order, not the input's row order
    assert back.recipient.tolist() == [f"p{i}" for i in by_label]
    assert np.array_equal(back.network_distance.to_numpy(), net.hops[0, by_label])
    record = json.loads(sidecar_path(out).read_text())  # formats other than GeoPackage: the sidecar
    assert record["recipients"] == len(reached) and record["seeded"] is True
    # the same network as a table of person ids in named columns: the same recipients and distances
    out2 = tmp_path / "answers2.gpkg"
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        out2,
        "--id-field",
        "person",
        "--source",
        "p0",
        "--edges",
        net.named_edges,
        "--edge-columns",
        "who",
        "whom",
        *TABLE,
        "--bounds",
        *BOUNDS,
    )
    assert code == 0, err
    again = pyogrio.read_dataframe(out2)
    assert again.recipient.tolist() == back.recipient.tolist()
    assert np.array_equal(again.network_distance, back.network_distance)
    assert gpkg_record(out2)["seeded"] is False


def test_single_part_multilines_are_read_as_lines(capsys, tmp_path, net):
    from shapely.geometry import MultiLineString

    lines = pyogrio.read_dataframe(net.lines)
    multi = tmp_path / "multi.gpkg"
    gpd.GeoDataFrame(geometry=[MultiLineString([g]) for g in lines.geometry], crs=lines.crs).to_file(
        multi, engine="pyogrio"
    )
    out = tmp_path / "answers.gpkg"
    code, _, err = run(
        capsys, "diffuse", net.input, out, "--source", "0", "--network", multi, *TABLE, "--bounds", *BOUNDS
    )
    assert code == 0, err
    back = pyogrio.read_dataframe(out)
    assert back.recipient.tolist() == net.reached(0).tolist()
    assert np.array_equal(back.network_distance, net.hops[0, net.reached(0)])


def test_resistance_distance_and_the_exponential_form(capsys, tmp_path, net):
    out = tmp_path / "answers.gpkg"
    code, _, err = run(
        capsys,
        *diffuse(
            net,
            out,
            "--distance",
            "resistance",
            "--epsilon-exp",
            "0.5",
            "ln0.03",
            "--seed",
            "3",
            network=("--network",),
        ),
    )
    assert code == 0, err
    back = pyogrio.read_dataframe(out)
    d = back.network_distance.to_numpy()
    assert np.allclose(back.epsilon_per_m, 0.03 * np.exp(-0.5 * d), rtol=1e-12)
    friends = net.hops[0, back.recipient] == 1
    assert np.all(d[friends] <= 1.0 + 1e-12) and np.all(d <= net.hops[0, back.recipient] + 1e-9)
    assert gpkg_record(out)["distance"] == "resistance" and "by resistance distance" in err


def test_value_release_with_support(capsys, tmp_path, net):
    out = tmp_path / "bit.csv"
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        out,
        "--source",
        "1",
        "--edges",
        net.edges,
        "--value",
        "infected",
        "--support",
        "0",
        "1",
        "--distance",
        "resistance",
        "--epsilon-exp",
        "3.3",
        "4",
        "--seed",
        "4",
    )
    assert code == 0, err
    table = pd.read_csv(out)
    assert list(table.columns) == ["recipient", "network_distance", "epsilon", "response"]
    assert table.recipient.tolist() == net.reached(1).tolist()
    assert set(table.response.unique()) <= {0.0, 1.0}
    assert np.allclose(table.epsilon, np.exp(4 - 3.3 * table.network_distance), rtol=1e-12)
    record = json.loads(sidecar_path(out).read_text())
    assert record["coalition_epsilon"] == pytest.approx(table.epsilon.max())
    assert "per unit of the value" in record["definition"] and "projected" in record["finite_precision"]
    assert "person 1's 'infected'" in err and "per unit of the value" in err
    # the closest recipients (epsilon up to e^4 per unit) mostly get the true bit, 1
    assert table.response[table.epsilon > 10].mean() > 0.5


# ---------------------------------------------------------------------------- the secret path
def test_save_path_then_path_gives_identical_answers(capsys, tmp_path, net):
    first, secret = tmp_path / "first.gpkg", tmp_path / "private" / "path0.npz"
    code, _, err = run(capsys, *diffuse(net, first, *TABLE, "--save-path", secret))
    assert code == 0, err
    warning = [line for line in err.splitlines() if "SECRET" in line]
    assert len(warning) == 1 and warning[0].startswith("geopriv: warning: ") and "never publish" in warning[0]
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    path = geopriv.DiffusionPath.load(secret)
    assert path.dim == 2 and "secret" in repr(path)
    # later: the same recipients get exactly the same answers from the saved path (whatever the seed)
    second = tmp_path / "second.gpkg"
    code, _, err = run(capsys, *diffuse(net, second, *TABLE, "--path", secret, "--seed", "99"))
    assert code == 0, err
    assert "answered from the earlier path" in err and "extended" not in err
    a, b = pyogrio.read_dataframe(first), pyogrio.read_dataframe(second)
    assert a.recipient.tolist() == b.recipient.tolist() and np.array_equal(xy(a), xy(b))
    # without the path, a fresh release: other answers
    third = tmp_path / "third.gpkg"
    code, _, err = run(capsys, *diffuse(net, third, *TABLE))
    assert code == 0, err
    assert not np.array_equal(xy(a), xy(pyogrio.read_dataframe(third)))
    # a closer recipient than planned: the path is extended; unsaved, the command says so
    code, _, err = run(
        capsys, *diffuse(net, tmp_path / "fourth.gpkg", "--epsilon-table", "1:ln4/20", "4:ln4/2000", "--path", secret)
    )
    assert code == 0, err
    assert "was extended" in err and "--save-path" in err
    # saved back over the same file (needs --overwrite), still owner-only
    code, _, err = run(
        capsys,
        *diffuse(
            net,
            tmp_path / "fifth.gpkg",
            "--epsilon-table",
            "1:ln4/20",
            "4:ln4/2000",
            "--path",
            secret,
            "--save-path",
            secret,
        ),
    )
    one_line_error(err, "--overwrite")
    code, _, err = run(
        capsys,
        *diffuse(
            net,
            tmp_path / "fifth.gpkg",
            "--epsilon-table",
            "1:ln4/20",
            "4:ln4/2000",
            "--path",
            secret,
            "--save-path",
            secret,
            "--overwrite",
        ),
    )
    assert code == 0, err
    assert geopriv.DiffusionPath.load(secret).eps_max > path.eps_max
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600


def test_a_location_path_does_not_answer_a_value(capsys, tmp_path, net):
    secret = tmp_path / "path.npz"
    code, _, err = run(capsys, *diffuse(net, tmp_path / "a.gpkg", *TABLE, "--save-path", secret))
    assert code == 0, err
    before = snapshot(tmp_path)
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        tmp_path / "bit.csv",
        "--source",
        "0",
        "--edges",
        net.edges,
        "--value",
        "infected",
        "--epsilon-exp",
        "3.3",
        "4",
        "--path",
        secret,
    )
    one_line_error(err, "2-dimensional")
    assert code == 2 and snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- binding (issue 30)
@pytest.mark.parametrize(
    "change, needle",
    [
        (["--source", "1"], "source"),
        (["--bounds", "-16000", "6711000", "-14000", "6714000"], "bounds"),
        (["--grid", "0.5"], "lattice"),
    ],
)
def test_a_path_file_answers_only_its_source_and_frame(capsys, tmp_path, net, change, needle):
    secret = tmp_path / "path.npz"
    code, _, err = run(capsys, *diffuse(net, tmp_path / "a.gpkg", *TABLE, "--save-path", secret))
    assert code == 0, err
    args = diffuse(net, tmp_path / "b.gpkg", *TABLE, "--path", secret)
    for flag in change[::2]:  # replace the flag's value(s)
        i = args.index(flag) if flag in args else None
        if i is not None:
            del args[i : i + (5 if flag == "--bounds" else 2)]
    args += change
    before = snapshot(tmp_path)
    code, _, err = run(capsys, *args)
    one_line_error(err, needle)
    assert code == 2 and "fresh path" in err and snapshot(tmp_path) == before
    assert "-15" not in err.replace("-15800", "").replace("-16000", "")  # no coordinate in the message


def test_a_value_path_file_refuses_a_changed_value(capsys, tmp_path, net):
    secret = tmp_path / "bit.npz"
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        tmp_path / "bit.csv",
        "--source",
        "1",
        "--edges",
        net.edges,
        "--value",
        "infected",
        "--epsilon-exp",
        "3.3",
        "4",
        "--save-path",
        secret,
    )
    assert code == 0, err
    table = pd.read_csv(tmp_path / "bit.csv", **EXACT_FLOATS)
    step = min(1.0, 1.0 / (20.0 * table.epsilon.max()))
    assert np.array_equal(table.response.to_numpy(), np.round(table.response.to_numpy() / step) * step)
    flipped = tmp_path / "flipped.gpkg"
    people = net.people.copy()
    people["infected"] = 1 - people["infected"]
    people.to_file(flipped, engine="pyogrio")
    code, _, err = run(
        capsys,
        "diffuse",
        flipped,
        tmp_path / "bit2.csv",
        "--source",
        "1",
        "--edges",
        net.edges,
        "--value",
        "infected",
        "--epsilon-exp",
        "3.3",
        "4",
        "--path",
        secret,
    )
    one_line_error(err, "value")
    assert code == 2 and not (tmp_path / "bit2.csv").exists()


# ---------------------------------------------------------------------------- unreachable people
def test_people_not_connected_are_reported(capsys, tmp_path, net):
    reached = net.reached(0)
    unreachable = net.n - 1 - len(reached)
    code, _, err = run(capsys, *diffuse(net, tmp_path / "a.gpkg", *TABLE))
    assert code == 0, err
    warning = [line for line in err.splitlines() if "not connected" in line and line.startswith("geopriv: warning")]
    assert len(warning) == 1 and f"{unreachable} row(s)" in warning[0] and "labels " in warning[0]
    first = min(set(range(1, net.n)) - set(reached.tolist()))
    assert f"labels {first}," in warning[0]
    # ignore: no warning, still counted in the summary and the provenance
    code, _, err = run(capsys, *diffuse(net, tmp_path / "b.gpkg", *TABLE, "--on-unreachable", "ignore"))
    assert code == 0 and "warning" not in err and f"({unreachable} not connected" in err
    assert gpkg_record(tmp_path / "b.gpkg")["unreachable"] == unreachable
    # raise: one line, nothing written
    before = snapshot(tmp_path)
    code, _, err = run(capsys, *diffuse(net, tmp_path / "c.gpkg", *TABLE, "--on-unreachable", "raise"))
    one_line_error(err, f"{unreachable} row(s) are not connected")
    assert code == 2 and snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("source, id_field", [("9999", None), ("p0", None), ("0", "person"), ("p9999", "person")])
def test_source_not_in_the_layer_is_one_line(capsys, tmp_path, net, source, id_field):
    extra = ["--id-field", id_field] if id_field else []
    code, _, err = run(capsys, *diffuse(net, tmp_path / "a.gpkg", *TABLE, *extra, source=source))
    line = one_line_error(err, f"--source {source} is not a person of the input")
    assert ("--id-field 'person'" in line) == bool(id_field) and ("row numbers" in line) != bool(id_field)
    assert code == 2 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "policy, needles",
    [
        (["--epsilon-table", "1:ln4/2000", "4:ln4/50"], ["increases with distance", "farther recipient"]),
        (["--epsilon-exp", "-0.5", "ln0.03"], ["a = -0.5 < 0", "farther recipient"]),
    ],
)
def test_increasing_epsilon_is_refused(capsys, tmp_path, net, policy, needles):
    code, _, err = run(capsys, *diffuse(net, tmp_path / "a.gpkg", *policy))
    one_line_error(err, *needles)
    assert code == 2 and list(tmp_path.iterdir()) == []


def test_existing_outputs_are_not_clobbered_without_overwrite(capsys, tmp_path, net):
    out = tmp_path / "answers.geojson"
    out.write_text('{"type": "FeatureCollection", "features": []}')
    before = snapshot(tmp_path)
    code, _, err = run(capsys, *diffuse(net, out, *TABLE))
    one_line_error(err, "--overwrite")
    assert code == 2 and snapshot(tmp_path) == before
    # nor an existing path file (checked before any work: the answers are not written either)
    secret = tmp_path / "path.npz"
    secret.write_bytes(b"an old path")
    before = snapshot(tmp_path)
    code, _, err = run(capsys, *diffuse(net, tmp_path / "new.gpkg", *TABLE, "--save-path", secret))
    one_line_error(err, "path.npz exists", "--overwrite")
    assert code == 2 and snapshot(tmp_path) == before
    code, _, err = run(capsys, *diffuse(net, out, *TABLE, "--overwrite"))
    assert code == 0, err
    assert len(geopriv.io.read_vector(out)) == len(net.reached(0))
    assert json.loads(sidecar_path(out).read_text())["recipients"] == len(net.reached(0))


def test_outputs_that_are_inputs_are_refused(capsys, tmp_path, net):
    code, _, err = run(capsys, *diffuse(net, net.edges, *TABLE, "--overwrite"))
    one_line_error(err, "is the input file")
    assert code == 2
    code, _, err = run(capsys, *diffuse(net, tmp_path / "a.gpkg", *TABLE, "--save-path", net.input, "--overwrite"))
    one_line_error(err, "must end in .npz")
    assert code == 2 and list(tmp_path.iterdir()) == []


def test_edge_table_with_ids_that_are_not_people(capsys, tmp_path, net):
    edges = tmp_path / "edges.csv"
    pd.DataFrame({"a": [0, 1, 5000], "b": [1, 2, 0]}).to_csv(edges, index=False)
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        tmp_path / "a.gpkg",
        "--source",
        "0",
        "--edges",
        edges,
        *TABLE,
        "--bounds",
        *BOUNDS,
    )
    one_line_error(err, "1 id(s) that are not people of the input (5000)")
    pd.DataFrame({"a": [0, "x"], "b": [1, 2]}).to_csv(edges, index=False)
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        tmp_path / "a.gpkg",
        "--source",
        "0",
        "--edges",
        edges,
        *TABLE,
        "--bounds",
        *BOUNDS,
    )
    one_line_error(err, "column 'a'", "not whole numbers", "row 2")
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        tmp_path / "a.gpkg",
        "--source",
        "0",
        "--edges",
        edges,
        *TABLE,
        "--edge-columns",
        "a",
        "c",
        "--bounds",
        *BOUNDS,
    )
    one_line_error(err, "no column 'c'", "'a', 'b'")
    assert code == 2 and not (tmp_path / "a.gpkg").exists()


@pytest.mark.parametrize(
    "extra, needles",
    [
        (["--source", "0", *TABLE], ["--network LINES", "--edges TABLE"]),
        (["--source", "0", "--edges", "EDGES", "--network", "LINES", *TABLE], ["one of them"]),
        (["--source", "0", "--edges", "EDGES"], ["--epsilon-table", "--epsilon-exp"]),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--epsilon-exp", "1", "0"], ["not both"]),
        (
            ["--source", "0", "--edges", "EDGES", "--epsilon-exp", "1", "0", "--epsilon-kind", "step"],
            ["--epsilon-kind"],
        ),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--support", "0", "1"], ["--support", "--value"]),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--tolerance", "1"], ["--tolerance applies to --network"]),
        (["--source", "0", "--network", "LINES", *TABLE, "--edge-columns", "a", "b"], ["--edge-columns applies"]),
        (["--source", "0", "--edges", "EDGES", "--epsilon-table", "1-0.01"], ["DISTANCE:EPSILON"]),
        (["--source", "0", "--edges", "EDGES", "--epsilon-table", "1:x"], ["not a number"]),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--value", "infected"], ["must end in .csv"]),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--continuous"], ["--continuous apply to --value"]),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--value-range", "0", "1"], ["--value-range", "--value"]),
        (
            ["--source", "0", "--edges", "EDGES", *TABLE, "--value", "infected", "--bounds", *map(str, BOUNDS)],
            ["--bounds apply to location releases"],
        ),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--distance", "euclid"], ["--distance"]),
        (["--edges", "EDGES", *TABLE], ["--source"]),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--id-field", "nobody"], ["no column 'nobody'", "'person'"]),
        (["--source", "0", "--edges", "EDGES", *TABLE, "--path", "missing.npz"], ["path file", "does not exist"]),
    ],
)
def test_bad_arguments_are_one_line_exit_2_nothing_written(capsys, tmp_path, net, extra, needles):
    files = {"EDGES": str(net.edges), "LINES": str(net.lines)}
    before = snapshot(tmp_path)
    bounds = [] if "--value" in extra else ["--bounds", *BOUNDS]  # bounds apply to locations only
    code, _, err = run(capsys, "diffuse", net.input, tmp_path / "a.gpkg", *[files.get(a, a) for a in extra], *bounds)
    one_line_error(err, *needles)
    assert code == 2 and snapshot(tmp_path) == before


def test_web_mercator_without_bounds_asks_for_them(capsys, tmp_path, net):
    code, _, err = run(capsys, "diffuse", net.input, tmp_path / "a.gpkg", "--source", "0", "--edges", net.edges, *TABLE)
    one_line_error(err, "bounds")
    assert code == 2 and list(tmp_path.iterdir()) == []


def test_options_not_given_are_not_passed(monkeypatch, capsys, tmp_path, net):
    """So the library's own defaults apply (no second copy of them in the CLI)."""
    seen = {}
    real = geopriv.diffuse_locations

    @functools.wraps(real)
    def recorder(data, epsilon, **kwargs):
        seen.update(kwargs)
        return real(data, epsilon, **kwargs)

    monkeypatch.setattr(geopriv, "diffuse_locations", recorder)
    code, _, err = run(capsys, *diffuse(net, tmp_path / "a.gpkg", *TABLE))
    assert code == 0, err
    assert set(seen) == {"source", "graph", "bounds"}
    assert seen["source"] == 0 and seen["bounds"] == tuple(map(float, BOUNDS))
    assert list(seen["graph"].columns) == ["from", "to"] and len(seen["graph"]) == len(net.pairs)


# ---------------------------------------------------------------------------- help
def test_help_has_examples_the_librarys_defaults_and_says_the_path_is_secret(capsys):
    code, out, _ = run(capsys, "diffuse", "--help")
    assert code == 0
    examples = out[out.index("examples:") :]
    assert "geopriv diffuse " in examples and "--epsilon-table" in examples and "--epsilon-exp" in examples
    assert "--save-path" in examples and "--path" in examples and "--value" in examples
    flat = " ".join(out.split())
    library = inspect.signature(geopriv.diffuse_locations).parameters
    for flag, name in (
        ("--distance", "distance"),
        ("--tolerance", "tolerance"),
        ("--on-unreachable", "on_unreachable"),
        ("--grid", "grid"),
        ("--max-distortion", "max_distortion"),
    ):
        default = library[name].default
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        start = flat.index(f"{flag} ", flat.index("options:"))
        assert f"(default: {shown})" in flat[start : flat.index(" --", start + len(flag) + 1)], flag
    kind = inspect.signature(geopriv.epsilon_of_distance).parameters["kind"].default
    start = flat.index("--epsilon-kind {", flat.index("options:"))
    assert f"(default: {kind})" in flat[start : flat.index(" --epsilon-exp", start)]
    assert "SAVES THE SECRET NOISE PATH" in flat and "recovers the true location" in flat
    assert "exp(B - A d)" in flat and "must not increase with distance" in flat
    code, out, _ = run(capsys, "--help")
    assert "diffuse" in out


def test_value_releases_take_the_librarys_lattice_options(capsys, tmp_path, net):
    """--grid, --value-range and --continuous: the library's value lattice from the command line (issue 30)."""
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        tmp_path / "a.csv",
        "--source",
        "1",
        "--edges",
        net.edges,
        "--value",
        "infected",
        "--epsilon-exp",
        "3.3",
        "4",
        "--grid",
        "0.25",
        "--value-range",
        "-2",
        "3",
        "--seed",
        "1",
    )
    assert code == 0, err
    table = pd.read_csv(tmp_path / "a.csv", **EXACT_FLOATS)
    r = table.response.to_numpy()
    assert np.array_equal(r, np.round(r / 0.25) * 0.25) and r.min() >= -2 and r.max() <= 3
    code, _, err = run(
        capsys,
        "diffuse",
        net.input,
        tmp_path / "b.csv",
        "--source",
        "1",
        "--edges",
        net.edges,
        "--value",
        "infected",
        "--epsilon-exp",
        "3.3",
        "4",
        "--continuous",
        "--seed",
        "1",
    )
    assert code == 0, err
    r = pd.read_csv(tmp_path / "b.csv", **EXACT_FLOATS).response.to_numpy()
    assert not np.array_equal(r, np.round(r / 0.05) * 0.05)  # raw floats, on explicit request


def test_published_floats_do_not_depend_on_the_input_row_order(capsys, tmp_path, net):
    """Issue 41.2 through the CLI: the same people in another row order publish bit-identical distances,
    epsilons and provenance with resistance distances (the solver sees the people in label order)."""
    shuffled = tmp_path / "shuffled.gpkg"
    net.people.iloc[np.random.default_rng(5).permutation(net.n)].to_file(shuffled, engine="pyogrio")
    outs = []
    for src in (net.input, shuffled):
        out = tmp_path / f"answers_{src.stem}.csv"
        args = ["diffuse", src, out, "--id-field", "person", "--source", "p0", "--edges", net.named_edges]
        args += ["--edge-columns", "who", "whom", "--distance", "resistance", "--value", "infected", *TABLE]
        code, _, err = run(capsys, *args)
        assert code == 0, err
        outs.append((pd.read_csv(out), json.loads(sidecar_path(out).read_text())))
    (a, ra), (b, rb) = outs
    assert a.recipient.tolist() == b.recipient.tolist()  # label order, whatever the rows' order
    floats = [c for c in a.columns if pd.api.types.is_float_dtype(a[c]) and c != "infected"]
    assert "network_distance" in floats and len(floats) >= 2
    for col in floats:  # distances and epsilons published bit for bit alike (the noisy answers are fresh)
        if col not in ("value", "answer", "response"):
            assert np.array_equal(a[col].to_numpy(), b[col].to_numpy()), col
    drop = ("created_utc",)
    assert {k: v for k, v in ra.items() if k not in drop} == {k: v for k, v in rb.items() if k not in drop}
