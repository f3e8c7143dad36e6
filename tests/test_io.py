"""geopriv.io: format from the extension, atomic replacement, GeoPackage layers kept, inputs protected."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyogrio
import pytest
from shapely.geometry import LineString, Point, box

import geopriv
from geopriv.io import (
    FORMATS,
    InputError,
    OutputError,
    Staging,
    check_file_output,
    check_output,
    read_vector,
    sidecar_path,
    write_vector,
)

SOHO = Path(geopriv.__file__).parent / "data" / "soho_cholera.gpkg"


def points(n=3, crs=3857, **columns):
    gdf = gpd.GeoDataFrame(
        {"a": list(range(n)), **columns},
        geometry=[Point(-15_000 + 10 * i, 6_713_000 + 5 * i) for i in range(n)],
        crs=crs,
    )
    gdf.attrs["geopriv"] = {"mechanism": "test", "n": n}
    return gdf


def snapshot(folder: Path) -> dict:
    """Every file below ``folder`` (hidden ones too) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def mixed_geometries():
    """A genuine write failure: a Shapefile holds one geometry type; GDAL refuses the polygon half-way."""
    return gpd.GeoDataFrame(
        {"a": [1, 2, 3]}, geometry=[Point(0, 0), box(0, 0, 1, 1), LineString([(0, 0), (1, 1)])], crs=3857
    )


# ---------------------------------------------------------------------------- formats
@pytest.mark.parametrize("ext", [e for e in FORMATS if e != ".parquet"])
def test_every_format_round_trips_with_provenance(tmp_path, ext):
    out = tmp_path / f"out{ext}"
    written = write_vector(points(), out)
    assert written == out and out.exists()
    back = read_vector(out)
    assert len(back) == 3 and list(back["a"]) == [0, 1, 2]
    assert "WKT" not in back.columns  # a CSV's WKT text is the geometry, not an attribute that would leak it
    if ext == ".csv":
        assert back.crs is None  # CSV has no CRS: the sidecar names it, read_vector(crs=) sets it
        assert read_vector(out, crs=3857).crs.to_epsg() == 3857
    else:
        assert back.crs.to_epsg() == 3857
    if ext == ".gpkg":  # layer metadata, no sidecar
        assert json.loads(pyogrio.read_info(out)["layer_metadata"]["geopriv"])["mechanism"] == "test"
        assert not sidecar_path(out).exists()
    else:
        assert json.loads(sidecar_path(out).read_text())["mechanism"] == "test"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary files left


def test_geoparquet(tmp_path):
    out = tmp_path / "out.parquet"
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(OutputError, match="needs pyarrow"):
            check_output(out)
        return
    write_vector(points(), out)
    assert len(read_vector(out)) == 3 and json.loads(sidecar_path(out).read_text())["n"] == 3


def test_unknown_extension_is_refused_with_the_list_before_anything_is_written(tmp_path):
    with pytest.raises(OutputError) as exc:
        write_vector(points(), tmp_path / "out.xyz")
    for ext in FORMATS:
        assert ext in str(exc.value)
    with pytest.raises(OutputError, match="extension"):
        check_output(tmp_path / "no_extension")
    assert list(tmp_path.iterdir()) == []  # in particular no ESRI Shapefile directory


def test_layer_names_apply_to_geopackage_only(tmp_path):
    with pytest.raises(OutputError, match="GeoPackage"):
        check_output(tmp_path / "out.geojson", layer="homes")


def test_output_that_is_a_directory_is_refused(tmp_path):
    (tmp_path / "dir.gpkg").mkdir()
    with pytest.raises(OutputError, match="directory"):
        check_output(tmp_path / "dir.gpkg")


# ---------------------------------------------------------------------------- existing outputs
def test_existing_file_needs_overwrite_and_is_replaced_atomically(tmp_path):
    out = tmp_path / "out.geojson"
    write_vector(points(2), out)
    before = snapshot(tmp_path)
    with pytest.raises(OutputError, match="overwrite"):
        write_vector(points(5), out)
    assert snapshot(tmp_path) == before
    write_vector(points(5), out, overwrite=True)
    assert len(read_vector(out)) == 5 and json.loads(sidecar_path(out).read_text())["n"] == 5


def test_failed_write_leaves_every_file_byte_identical(tmp_path):
    for ext in (".shp", ".gpkg"):
        out = tmp_path / f"old{ext}"
        write_vector(points(), out, layer="old" if ext == ".gpkg" else None)
    before = snapshot(tmp_path)
    with pytest.raises(pyogrio.errors.FeatureError):  # GDAL refuses the second feature, half-way through
        write_vector(mixed_geometries(), tmp_path / "old.shp", overwrite=True)
    assert snapshot(tmp_path) == before  # no partial file, no temporary left behind


def test_failed_write_into_a_new_folder_leaves_no_folder(tmp_path):
    with pytest.raises(pyogrio.errors.FeatureError):
        write_vector(mixed_geometries(), tmp_path / "new" / "deeper" / "out.shp")
    assert list(tmp_path.iterdir()) == []


def test_permissions_of_a_replaced_file_are_kept(tmp_path):
    out = tmp_path / "out.fgb"
    write_vector(points(), out)
    os.chmod(out, 0o640)
    write_vector(points(4), out, overwrite=True)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_replacing_without_a_record_removes_a_stale_sidecar(tmp_path):
    out = tmp_path / "out.geojson"
    write_vector(points(), out)
    plain = points()
    plain.attrs.clear()
    write_vector(plain, out, overwrite=True)
    assert not sidecar_path(out).exists()


# ---------------------------------------------------------------------------- GeoPackage layers
def test_geopackage_layers_are_added_and_replaced_one_at_a_time(tmp_path):
    project = tmp_path / "project.gpkg"
    shutil.copy(SOHO, project)  # two layers: deaths, pumps
    pumps = pyogrio.read_dataframe(project, layer="pumps")
    deaths = pyogrio.read_dataframe(project, layer="deaths")

    write_vector(points(), project, layer="homes_private")  # a new layer needs no overwrite
    assert sorted(pyogrio.list_layers(project)[:, 0]) == ["deaths", "homes_private", "pumps"]
    before = project.read_bytes()
    for name in ("homes_private", "HOMES_PRIVATE"):  # SQLite table names are case-insensitive
        with pytest.raises(OutputError, match="already has a layer"):
            write_vector(points(7), project, layer=name)
    assert project.read_bytes() == before

    write_vector(points(7), project, layer="homes_private", overwrite=True)
    assert len(pyogrio.read_dataframe(project, layer="homes_private")) == 7
    assert sorted(pyogrio.list_layers(project)[:, 0]) == ["deaths", "homes_private", "pumps"]
    pd.testing.assert_frame_equal(pyogrio.read_dataframe(project, layer="pumps"), pumps)
    pd.testing.assert_frame_equal(pyogrio.read_dataframe(project, layer="deaths"), deaths)
    assert json.loads(pyogrio.read_info(project, layer="homes_private")["layer_metadata"]["geopriv"])["n"] == 7
    assert not sidecar_path(project).exists()


def test_default_layer_is_the_file_name(tmp_path):
    out = tmp_path / "homes.gpkg"
    write_vector(points(), out)
    assert list(pyogrio.list_layers(out)[:, 0]) == ["homes"]
    with pytest.raises(OutputError, match="layer 'homes'"):
        write_vector(points(), out)


def test_geopackage_open_elsewhere_is_not_copied(tmp_path):
    out = tmp_path / "busy.gpkg"
    write_vector(points(), out)
    Path(str(out) + "-wal").write_bytes(b"")
    with pytest.raises(OutputError, match="open in another program"):
        write_vector(points(), out, layer="more")


def test_a_file_that_is_not_a_geopackage_needs_overwrite(tmp_path):
    out = tmp_path / "out.gpkg"
    out.write_text("not a geopackage")
    with pytest.raises(OutputError, match="overwrite"):
        write_vector(points(), out)
    assert out.read_text() == "not a geopackage"
    write_vector(points(), out, overwrite=True)
    assert len(read_vector(out)) == 3


# ---------------------------------------------------------------------------- inputs are protected
def test_hard_link_and_symbolic_link_to_an_input_are_refused(tmp_path):
    src = tmp_path / "in.gpkg"
    shutil.copy(SOHO, src)
    before = src.read_bytes()
    os.link(src, tmp_path / "hard.gpkg")
    os.symlink(src, tmp_path / "soft.gpkg")
    for name in ("in.gpkg", "hard.gpkg", "soft.gpkg"):
        with pytest.raises(OutputError, match="is the input file"):
            write_vector(points(), tmp_path / name, layer="new", overwrite=True, protect=[src])
    assert src.read_bytes() == before


def test_shapefile_parts_are_protected_and_replaced_together(tmp_path):
    src = tmp_path / "in.shp"
    write_vector(points(), src)
    (tmp_path / "out").mkdir()
    os.link(tmp_path / "in.dbf", tmp_path / "out" / "o.dbf")  # one part of the output is the input's
    with pytest.raises(OutputError, match="is the input file"):
        write_vector(points(), tmp_path / "out" / "o.shp", overwrite=True, protect=[src])

    out = tmp_path / "new.shp"
    write_vector(points(2), out)
    (tmp_path / "new.qix").write_bytes(b"stale spatial index")
    write_vector(points(6), out, overwrite=True)
    assert not (tmp_path / "new.qix").exists()  # an index of the old data would be wrong
    assert len(read_vector(out)) == 6
    assert {p.suffix for p in tmp_path.glob("new.*")} == {".shp", ".shx", ".dbf", ".prj", ".cpg", ".json"}


def test_a_symbolic_link_at_the_output_is_replaced_never_written_through(tmp_path):
    """The rule of every output (geopriv.io): a link is an existing output, refused without overwrite;
    with it the link itself is replaced by a new file and its target is left as it was."""
    target = tmp_path / "real.geojson"
    write_vector(points(2), target)
    before = target.read_bytes()
    link = tmp_path / "link.geojson"
    os.symlink(target, link)
    with pytest.raises(OutputError, match="is a symbolic link") as refused:
        write_vector(points(4), link)
    assert refused.value.fix.kind == "symbolic_link"
    write_vector(points(4), link, overwrite=True)
    assert not link.is_symlink() and len(read_vector(link)) == 4
    assert target.read_bytes() == before


# ---------------------------------------------------------------------------- staging and single files
def test_staging_commits_all_outputs_or_none(tmp_path):
    a = check_output(tmp_path / "a.gpkg")
    b = check_file_output(tmp_path / "b.csv", suffixes=[".csv"], what="table")
    with pytest.raises(RuntimeError, match="boom"):
        with Staging() as stage:
            stage.vector(points(), a)

            def fail(tmp):
                raise RuntimeError("boom")

            stage.file(b, fail)
            stage.commit()
    assert list(tmp_path.iterdir()) == []
    with Staging() as stage:
        stage.vector(points(), a)
        stage.file(b, lambda tmp: pd.DataFrame({"x": [1]}).to_csv(tmp))
        stage.commit()
    assert (tmp_path / "a.gpkg").exists() and (tmp_path / "b.csv").exists()


def test_check_file_output(tmp_path):
    (tmp_path / "m.tif").write_bytes(b"x")
    with pytest.raises(OutputError, match=r"\.tif"):
        check_file_output(tmp_path / "m.png", suffixes=[".tif"], what="GeoTIFF")
    with pytest.raises(OutputError, match="overwrite"):
        check_file_output(tmp_path / "m.tif", suffixes=[".tif"], what="GeoTIFF")
    with pytest.raises(OutputError, match="is the input file"):
        check_file_output(
            tmp_path / "m.tif", suffixes=[".tif"], what="GeoTIFF", overwrite=True, protect=[tmp_path / "m.tif"]
        )
    assert (
        check_file_output(tmp_path / "m.tif", suffixes=[".tif"], what="GeoTIFF", overwrite=True) == tmp_path / "m.tif"
    )


# ---------------------------------------------------------------------------- reading
def test_read_vector_checks(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_vector(tmp_path / "missing.gpkg")
    with pytest.raises(InputError, match=r"2 layers \('deaths', 'pumps'\)"):
        read_vector(SOHO)  # no silent choice of the first layer
    assert len(read_vector(SOHO, "pumps")) == 13
    with pytest.raises(InputError, match="layer 'nope'"):
        read_vector(SOHO, "nope")
    (tmp_path / "bad.gpkg").write_text("not a geopackage")
    with pytest.raises(InputError, match="cannot read"):
        read_vector(tmp_path / "bad.gpkg")
    with pytest.raises(InputError, match="not one pyproj knows"):
        read_vector(SOHO, "pumps", crs="EPSG:not-a-code")
    assert read_vector(SOHO, "pumps", crs=4326).crs.to_epsg() == 4326  # replaces the file's (a wrong label)
    (tmp_path / "plain.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="WKT"):
        read_vector(tmp_path / "plain.csv")


# ------------------------------------------------------------------ findings of the adversarial CLI review
def _soho():

    from geopriv.io import read_vector

    return read_vector(Path(__file__).resolve().parents[1] / "geopriv" / "data" / "soho_cholera.gpkg", "deaths")


def test_shapefile_input_parts_are_protected_in_any_letter_case(tmp_path):
    from geopriv.io import OutputError, check_output

    _soho().to_file(tmp_path / "a.shp", engine="pyogrio")
    (tmp_path / "a.shp").rename(tmp_path / "a.SHP")  # the parts stay a.dbf, a.shx, ...: GDAL opens them
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(OutputError, match="is the input"):
        check_output(tmp_path / "a.shp", overwrite=True, protect=[tmp_path / "a.SHP"])
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_concurrent_writers_into_one_geopackage_keep_every_layer(tmp_path):
    import threading

    import pyogrio

    from geopriv.io import write_vector

    gdf = _soho()
    path = tmp_path / "project.gpkg"
    write_vector(gdf.iloc[:5], path, layer="keepme")
    errors = []

    def write(name):
        try:
            write_vector(gdf, path, layer=name)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"L{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(pyogrio.list_layers(path)[:, 0]) == ["L0", "L1", "L2", "L3", "keepme"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project.gpkg"]  # no lock file, no staging directory


#: a second geopriv run: says "ready" just before it writes its layer into the GeoPackage (argv: path, layer)
_WRITE_A_LAYER = """
import sys
from pathlib import Path

import geopriv
from geopriv.io import read_vector, write_vector

gdf = read_vector(Path(geopriv.__file__).parent / "data" / "soho_cholera.gpkg", "deaths")
print("ready", flush=True)
write_vector(gdf, sys.argv[1], layer=sys.argv[2])
print("written", flush=True)
"""


def test_two_processes_writing_into_one_geopackage_both_keep_their_layer(tmp_path):
    """Two real processes (two QGIS runs, two commands) write a layer into one GeoPackage at once.

    This run holds the folder's lock (a Staging writing another file) until both processes have
    started writing, so both then queue on the lock (filelock, as on Windows) and run one after
    the other: each copies the GeoPackage only after the other's commit.  Without the lock the
    second commit would fail ("changed while geopriv was writing") or drop the first layer.  It
    could fail only if a process were not started (an interpreter that cannot import geopriv).
    """
    import subprocess
    import sys

    from geopriv.io import LOCK_NAME

    path = tmp_path / "project.gpkg"
    write_vector(_soho().iloc[:5], path, layer="keepme")
    procs = []

    def start_both_while_holding_the_lock(tmp):
        assert (tmp_path / LOCK_NAME).exists()  # held for as long as this run writes there
        for name in ("first", "second"):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _WRITE_A_LAYER, str(path), name],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in procs:
            assert proc.stdout.readline() == "ready\n", proc.communicate()[1]
        # both are now writing, blocked on the lock this run holds: nothing of theirs is in the file yet
        assert list(pyogrio.list_layers(path)[:, 0]) == ["keepme"]
        tmp.write_text("a\n")

    try:
        with Staging() as stage:
            stage.file(tmp_path / "other.csv", start_both_while_holding_the_lock)
            stage.commit()
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0 and out == "written\n", err
    finally:
        for proc in procs:
            if proc.poll() is None:  # pragma: no cover - a failure above
                proc.kill()
                proc.communicate()
    assert sorted(pyogrio.list_layers(path)[:, 0]) == ["first", "keepme", "second"]
    assert len(read_vector(path, "first")) == len(read_vector(path, "second")) == len(_soho())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.csv", "project.gpkg"]  # the lock file removed


#: argv: counter file, rounds.  Each round reads the counter and stages it plus one: a lost update unless
#: the runs take turns (each round takes the folder's lock, and removes its file, afresh)
_COUNT_UNDER_THE_LOCK = """
import sys
from pathlib import Path

from geopriv.io import Staging

counter = Path(sys.argv[1])
for _ in range(int(sys.argv[2])):
    with Staging() as stage:
        stage.file(counter, lambda tmp: tmp.write_text(str(int(counter.read_text()) + 1)))
        stage.commit()
"""


def test_writers_take_turns_while_the_lock_file_comes_and_goes(tmp_path):
    """Four processes, 150 writes each, to one file: every write is kept (the count is exact).

    Each write removes the lock file while it still holds it, and the others keep opening it,
    waiting on it and making it anew: the lock must still admit one writer at a time (the run
    that waited on a removed file retries on the new one).  It fails only if two writers held
    the lock at once (an update lost: a count short) or a writer failed; no randomness.
    """
    import subprocess
    import sys

    counter = tmp_path / "count.txt"
    counter.write_text("0")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _COUNT_UNDER_THE_LOCK, str(counter), "150"], stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    errors = [proc.communicate(timeout=600)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 4, errors
    assert counter.read_text() == "600"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["count.txt"]


def test_a_lock_file_left_by_a_killed_run_neither_blocks_nor_stays(tmp_path):
    """A process killed outright while writing leaves ``.geopriv.lock`` (its lock died with it)."""
    from geopriv.io import LOCK_NAME

    (tmp_path / LOCK_NAME).write_bytes(b"")
    write_vector(points(), tmp_path / "out.gpkg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.gpkg"]


def test_a_folder_that_cannot_be_locked_is_refused_with_advice(tmp_path):
    """Where the lock file cannot be made (here a directory of its name, or a planted symbolic link,
    which is never followed: its target is not truncated), nothing is written and the error is
    geopriv's own, with advice, not the operating system's text."""
    from geopriv.exceptions import user_message
    from geopriv.io import LOCK_NAME

    (tmp_path / LOCK_NAME).mkdir()
    with pytest.raises(OutputError, match="could not lock that folder") as refused:
        write_vector(points(), tmp_path / "out.gpkg")
    assert refused.value.fix is not None and "local disk" in user_message(refused.value, front_end="qgis")
    assert "Is a directory" not in str(refused.value) and "Errno" not in str(refused.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]

    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    (tmp_path / LOCK_NAME).rmdir()
    (tmp_path / LOCK_NAME).symlink_to(precious)
    with pytest.raises(OutputError, match="could not lock that folder"):
        write_vector(points(), tmp_path / "out.gpkg")
    assert precious.read_text() == "keep me" and not (tmp_path / "out.gpkg").exists()


def test_a_second_writer_without_overwrite_does_not_clobber(tmp_path):
    from geopriv.io import OutputError, Staging, check_output

    gdf = _soho()
    out = tmp_path / "same.fgb"
    target = check_output(out)  # checked while the file does not exist yet ...
    gdf.iloc[:3].to_file(out, engine="pyogrio")  # ... then another run writes it
    before = out.read_bytes()
    with pytest.raises(OutputError, match="exists"):
        with Staging() as stage:
            stage.vector(gdf, target)
            stage.commit()
    assert out.read_bytes() == before


def test_leftover_aux_xml_is_removed_when_a_raster_is_replaced(tmp_path):
    from geopriv.io import Staging

    dest = tmp_path / "map.tif"
    dest.write_bytes(b"old")
    aux = tmp_path / "map.tif.aux.xml"
    aux.write_text("<PAMDataset><SRS>EPSG:4326</SRS></PAMDataset>")
    with Staging() as stage:
        stage.file(dest, lambda tmp: tmp.write_bytes(b"new"))
        stage.commit()
    assert dest.read_bytes() == b"new" and not aux.exists()


def test_cli_ledger_spelled_differently_from_out_is_refused(tmp_path, capsys):
    import numpy as np
    import pandas as pd

    from geopriv.cli import main

    gdf = _soho().to_crs(32630)
    gdf = gdf.iloc[np.random.default_rng(0).permutation(len(gdf))].reset_index(drop=True)[["geometry"]]
    gdf["user"] = [f"u{i % 10}" for i in range(len(gdf))]
    gdf["t"] = pd.Timestamp("1854-09-01", tz="UTC") + pd.to_timedelta(np.arange(len(gdf)) * 60, unit="s")
    src = tmp_path / "q.gpkg"
    gdf.to_file(src, engine="pyogrio")
    sub = tmp_path / "sub"
    sub.mkdir()
    rc = main(
        [
            "sanitize-traces",
            str(src),
            str(sub / "out.csv"),
            "--traj-id",
            "user",
            "--time",
            "t",
            "--epsilon",
            "0.01",
            "--rate",
            "0.1",
            "--ledger",
            str(sub / ".." / "sub" / "out.csv"),
        ]
    )
    assert rc == 2 and not (sub / "out.csv").exists()
    assert "another file than OUT" in capsys.readouterr().err


def test_demo_replaces_a_link_at_its_picture_never_its_target(tmp_path):
    from geopriv.cli import main

    out = tmp_path / "out"
    out.mkdir()
    important = tmp_path / "important.txt"
    important.write_text("keep me")
    (out / "soho_map.png").symlink_to(important)
    assert main(["demo", "--out", str(out), "--seed", "1"]) == 0
    assert important.read_text() == "keep me"
    assert not (out / "soho_map.png").is_symlink() and (out / "soho_map.png").read_bytes()[:4] == b"\x89PNG"


def test_an_interrupt_right_after_the_staging_directory_is_made_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C / SIGTERM arriving just after the staging directory exists (the window a loaded
    machine opened in test_cli's SIGTERM test): the directory is still removed."""
    real_mkdir = Path.mkdir

    def mkdir_then_interrupt(self, *args, **kwargs):
        real_mkdir(self, *args, **kwargs)
        if self.name.endswith(".geopriv-tmp"):
            raise KeyboardInterrupt  # as a signal handler would, between two bytecodes

    monkeypatch.setattr(Path, "mkdir", mkdir_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        with Staging() as stage:
            stage.file(tmp_path / "out.csv", lambda tmp: tmp.write_text("a\n"))
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_a_new_geopackage_is_version_1_2(tmp_path):
    """QGIS 3.22 (GDAL 3.6) warns on every open of a GeoPackage 1.4, GDAL >= 3.7's default."""
    import sqlite3

    from geopriv.io import write_vector
    from shapely.geometry import Point

    out = write_vector(gpd.GeoDataFrame({"a": [1]}, geometry=[Point(0, 0)], crs=32650), tmp_path / "o.gpkg")
    with sqlite3.connect(out) as db:
        assert db.execute("pragma user_version").fetchone()[0] == 10200
