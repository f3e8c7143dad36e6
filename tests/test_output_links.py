"""Outputs never follow a symbolic link planted at their path (issue 41 item 4), and a refusal names the file
that exists (item 6a).

The one rule (:mod:`geopriv.io`): a symbolic link at an output path, dangling or not, is an existing output.
Without ``overwrite`` it is refused, naming the link, with a fix ("remove it or choose another path"); with
``overwrite`` the link itself is replaced by a new regular file.  Its target is never created, opened or
changed.  Every writer is checked here: the command line's vector and CSV outputs and their sidecars,
``geopriv.heatmap(path=)`` and the GeoTIFF writers, ``release_report``, the plots, ``PrivacyMap.to_geotiff``,
``geopriv calibrate --curve`` and the staged single files (ledgers, exports, mechanisms, paths).

No randomness matters here: every assertion is about which files exist and what they hold.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

import geopriv
from geopriv import io
from geopriv.exceptions import OutputError

from .test_cli import SOHO, one_line_error, run

DATA = Path(geopriv.__file__).parent / "data"
BOUNDS = ["-15800", "6711900", "-14600", "6713300"]  # the shipped study area's box (EPSG:3857)
KEEP = b"keep me: not an output"

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX symbolic links")


@pytest.fixture(scope="module")
def deaths():
    return io.read_vector(SOHO, "deaths")


@pytest.fixture(scope="module")
def released(deaths):
    return geopriv.perturb(deaths, level=math.log(4), radius=200, rng=1)


def dangling(tmp_path, name):
    """A symbolic link ``name`` to a file that does not exist (in another folder): (link, its target)."""
    (tmp_path / "elsewhere").mkdir(exist_ok=True)
    target = tmp_path / "elsewhere" / ("target-of-" + name)
    link = tmp_path / name
    link.symlink_to(target)
    return link, target


def to_file(tmp_path, name):
    """A symbolic link ``name`` to an existing file holding KEEP: (link, its target)."""
    (tmp_path / "elsewhere").mkdir(exist_ok=True)
    target = tmp_path / "elsewhere" / ("target-of-" + name)
    target.write_bytes(KEEP)
    link = tmp_path / name
    link.symlink_to(target)
    return link, target


def replaced(link) -> bool:
    """The link was replaced by a regular file (not written through)."""
    return not link.is_symlink() and link.is_file()


def agg(out, *extra):
    return ["aggregate", SOHO, out, "--layer", "deaths", "--epsilon", "1", "--cells", "100", "--bounds", *BOUNDS,
            "--seed", "1", *extra]  # fmt: skip


# ---------------------------------------------------------------------------- geopriv aggregate
@pytest.mark.parametrize("name", ["out.gpkg", "out.csv", "out.geojson"])
def test_cli_aggregate_refuses_a_dangling_link_and_never_creates_its_target(capsys, tmp_path, name):
    link, target = dangling(tmp_path, name)
    code, _, err = run(capsys, *agg(link))
    assert code != 0
    one_line_error(err, f"{link} is a symbolic link", "--overwrite")
    assert not os.path.lexists(target) and link.is_symlink()

    code, _, err = run(capsys, *agg(link, "--overwrite"))
    assert code == 0, err
    assert not os.path.lexists(target)  # the link itself was replaced
    assert replaced(link) and len(io.read_vector(link)) > 0


@pytest.mark.parametrize("name", ["out.gpkg", "out.csv"])
def test_cli_aggregate_leaves_the_file_a_link_points_to_unchanged(capsys, tmp_path, name):
    link, target = to_file(tmp_path, name)
    code, _, err = run(capsys, *agg(link))
    assert code != 0 and "symbolic link" in err
    assert target.read_bytes() == KEEP
    code, _, err = run(capsys, *agg(link, "--overwrite"))
    assert code == 0, err
    assert target.read_bytes() == KEEP and replaced(link)


def test_cli_aggregate_refuses_a_link_at_the_sidecar(capsys, tmp_path):
    out = tmp_path / "out.csv"
    side = io.sidecar_path(out)
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "record.json"
    side.symlink_to(target)
    code, _, err = run(capsys, *agg(out))
    one_line_error(err, str(side), "symbolic link")
    assert not out.exists() and not os.path.lexists(target)
    code, _, err = run(capsys, *agg(out, "--overwrite"))
    assert code == 0, err
    assert not os.path.lexists(target) and replaced(side) and out.is_file()


def test_cli_aggregate_names_the_sidecar_when_only_the_sidecar_exists(capsys, tmp_path):
    """Issue 41 item 6a: not "out.csv exists" when out.csv does not."""
    out = tmp_path / "out.csv"
    side = io.sidecar_path(out)
    side.write_text("{}")
    code, _, err = run(capsys, *agg(out))
    line = one_line_error(err, f"{side} exists", "--overwrite")
    assert f"{out} exists" not in line
    assert not out.exists() and side.read_text() == "{}"


def test_write_vector_names_the_shapefile_part_that_exists(tmp_path, deaths):
    out = tmp_path / "o.shp"
    (tmp_path / "o.dbf").write_bytes(KEEP)
    with pytest.raises(OutputError, match=r"o\.dbf exists") as refused:
        io.write_vector(deaths, out)
    assert f"{out} exists" not in str(refused.value)
    assert (tmp_path / "o.dbf").read_bytes() == KEEP and not out.exists()


def test_write_vector_into_a_linked_geopackage_never_changes_the_target(tmp_path, deaths):
    """Adding a layer to an existing GeoPackage needs no overwrite, but not through a link."""
    real = tmp_path / "real.gpkg"
    io.write_vector(deaths.iloc[:3], real, layer="first")
    before = real.read_bytes()
    link = tmp_path / "link.gpkg"
    link.symlink_to(real)
    with pytest.raises(OutputError, match="symbolic link"):
        io.write_vector(deaths.iloc[:4], link, layer="second")
    assert real.read_bytes() == before
    io.write_vector(deaths.iloc[:4], link, layer="second", overwrite=True)
    assert real.read_bytes() == before and replaced(link)
    assert len(io.read_vector(link, "second")) == 4


# ---------------------------------------------------------------------------- GeoTIFFs
def test_heatmap_path_refuses_a_dangling_link(tmp_path, deaths):
    link, target = dangling(tmp_path, "heat.tif")
    area = tuple(float(v) for v in BOUNDS)
    with pytest.raises(OutputError, match="is a symbolic link"):
        geopriv.heatmap(deaths, 1.0, resolution=100, bounds=area, rng=1, path=link)
    assert not os.path.lexists(target)
    geopriv.heatmap(deaths, 1.0, resolution=100, bounds=area, rng=1, path=link, overwrite=True)
    assert not os.path.lexists(target) and replaced(link)


def test_heatmap_path_leaves_a_linked_file_unchanged(tmp_path, deaths):
    link, target = to_file(tmp_path, "heat.tif")
    area = tuple(float(v) for v in BOUNDS)
    with pytest.raises(OutputError, match="is a symbolic link"):
        geopriv.heatmap(deaths, 1.0, resolution=100, bounds=area, rng=1, path=link)
    geopriv.heatmap(deaths, 1.0, resolution=100, bounds=area, rng=1, path=link, overwrite=True)
    assert target.read_bytes() == KEEP and replaced(link)


def test_cli_heatmap_refuses_a_dangling_link(capsys, tmp_path):
    link, target = dangling(tmp_path, "heat.tif")
    code, _, err = run(
        capsys, "heatmap", SOHO, link, "--layer", "deaths", "--epsilon", "1", "--resolution", "100",
        "--bounds", *BOUNDS,
    )  # fmt: skip
    one_line_error(err, "symbolic link")
    assert not os.path.lexists(target)


def test_adversary_map_never_written_through_a_link(tmp_path):
    adv = geopriv.adversary_error(
        level=math.log(4), radius=200, area=(400000, 4400000, 402000, 4401000), crs="EPSG:32650", cell=200
    )
    link, target = dangling(tmp_path, "adv.tif")
    with pytest.raises(OutputError, match="symbolic link"):
        adv.to_raster(link)
    assert not os.path.lexists(target)
    link2, target2 = to_file(tmp_path, "adv2.tif")
    adv.to_raster(link2, overwrite=True)
    assert target2.read_bytes() == KEEP and replaced(link2)


def test_privacy_map_geotiff_replaces_a_link_never_its_target(tmp_path):
    import numpy as np
    import rasterio

    src = tmp_path / "eps.tif"
    with rasterio.open(
        src, "w", driver="GTiff", height=4, width=4, count=1, dtype="float64", crs="EPSG:32654",
        transform=rasterio.Affine(100, 0, 0, 0, -100, 400),
    ) as ds:  # fmt: skip
        ds.write(np.full((4, 4), 1e-3), 1)
    pm = geopriv.PrivacyMap.from_epsilon(src)
    link, target = dangling(tmp_path, "map.tif")
    pm.to_geotiff(link)
    assert not os.path.lexists(target) and replaced(link)
    link2, target2 = to_file(tmp_path, "map2.tif")
    pm.to_geotiff(link2)
    assert target2.read_bytes() == KEEP and replaced(link2)


# ---------------------------------------------------------------------------- report, plots, tables
def test_release_report_refuses_a_dangling_link(tmp_path, deaths, released):
    link, target = dangling(tmp_path, "r.html")
    with pytest.raises(OutputError, match="is a symbolic link"):
        geopriv.release_report(deaths, released, link)
    assert not os.path.lexists(target)
    geopriv.release_report(deaths, released, link, overwrite=True)
    assert not os.path.lexists(target) and replaced(link)


def test_release_report_leaves_a_linked_file_unchanged(tmp_path, deaths, released):
    link, target = to_file(tmp_path, "r.html")
    with pytest.raises(OutputError, match="is a symbolic link"):
        geopriv.release_report(deaths, released, link)
    geopriv.release_report(deaths, released, link, overwrite=True)
    assert target.read_bytes() == KEEP and replaced(link)


def test_plot_release_path_replaces_a_link_never_its_target(tmp_path, deaths, released):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from geopriv.plot import plot_release

    link, target = dangling(tmp_path, "map.png")
    plt.close(plot_release(deaths, released, path=link))
    assert not os.path.lexists(target) and replaced(link) and link.read_bytes()[:4] == b"\x89PNG"
    link2, target2 = to_file(tmp_path, "map2.png")
    plt.close(plot_release(deaths, released, path=link2))
    assert target2.read_bytes() == KEEP and replaced(link2)


def test_cli_calibrate_curve_refuses_a_link(capsys, tmp_path):
    link, target = dangling(tmp_path, "curve.csv")
    args = ["calibrate", "adversary_error", 300, "--bounds", "400000", "4400000", "404000", "4403000",
            "--crs", "EPSG:32650", "--cell", 200, "--curve", link]  # fmt: skip
    code, _, err = run(capsys, *args)
    one_line_error(err, "symbolic link")
    assert not os.path.lexists(target)
    code, _, err = run(capsys, *args, "--overwrite")
    assert code == 0, err
    assert not os.path.lexists(target) and replaced(link)


def test_check_file_output_refuses_links_and_staging_replaces_only_the_link(tmp_path):
    """The single-file outputs (ledgers, budget exports, mechanisms, paths, privacy maps) are checked
    with check_file_output and staged with Staging.file."""
    link, target = dangling(tmp_path, "ledger.csv")
    with pytest.raises(OutputError, match="is a symbolic link") as refused:
        io.check_file_output(link, suffixes=[".csv"], what="ledger")
    assert refused.value.fix.kind == "symbolic_link"
    dest = io.check_file_output(link, suffixes=[".csv"], what="ledger", overwrite=True)
    with io.Staging() as stage:
        stage.file(dest, lambda tmp: tmp.write_text("a\n1\n"), overwrite=True)
        stage.commit()
    assert not os.path.lexists(target) and replaced(link) and link.read_text() == "a\n1\n"


def test_staging_without_overwrite_never_clobbers_what_appeared_meanwhile(tmp_path):
    out = tmp_path / "table.csv"
    dest = io.check_file_output(out, suffixes=[".csv"], what="table")
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "t"
    out.symlink_to(target)  # planted after the check
    with pytest.raises(OutputError, match="symbolic link"):
        with io.Staging() as stage:
            stage.file(dest, lambda tmp: tmp.write_text("x\n"), overwrite=False)
            stage.commit()
    assert out.is_symlink() and not os.path.lexists(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "table.csv"]


def test_write_new_file_places_without_following(tmp_path):
    link, target = dangling(tmp_path, "f.bin")
    with pytest.raises(FileExistsError):
        io.write_new_file(link, lambda fh: fh.write(b"new"))
    assert not os.path.lexists(target)
    io.write_new_file(link, lambda fh: fh.write(b"new"), overwrite=True)
    assert not os.path.lexists(target) and replaced(link) and link.read_bytes() == b"new"
