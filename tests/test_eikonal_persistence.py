"""Reusing a saved eikonal mechanism: verification stamps, loads without kernel solves, early refusals.

A full verification that passes (build then save, or a load) leaves a stamp: an HMAC-SHA256 of
the file's content digest under a per-user key (``geopriv.mechanisms.eikonal.stamps``).  A load
that finds the stamp of exactly the file's content skips the verification and solves no kernel;
anything else is verified in full.  Each test has its own GEOPRIV_HOME (conftest).
"""

from __future__ import annotations

import json
import math
import os
import stat

import geopandas as gpd
import numpy as np
import pytest
from rasterio.transform import from_origin

from geopriv import EikonalMechanism, PrivacyMap
from geopriv.cli import main
from geopriv.exceptions import GeometryError, GeoprivWarning, MechanismFileError
from geopriv.mechanisms.eikonal import persistence, stamps


@pytest.fixture(scope="module")
def small():
    """A 12 x 12 map (UTM 54N, Tokyo's zone) and its verified mechanism."""
    x = np.linspace(0, 1, 12)
    eps = 1e-3 * (1 + 1.5 * np.exp(-((x[None, :] - 0.5) ** 2 + (x[:, None] - 0.5) ** 2) / 0.05))
    pm = PrivacyMap.from_epsilon(eps, transform=from_origin(500_000, 4_000_000, 400, 300), crs=32654)
    return EikonalMechanism.build(pm, margin=0.1, max_step=1)


def _inside(mech, n=40, seed=0):
    rng = np.random.default_rng(seed)
    xmin, ymin, xmax, ymax = mech.privacy_map.bounds
    return np.column_stack([rng.uniform(xmin, xmax, n), rng.uniform(ymin, ymax, n)])


def _rewrite(src, dst, edit_arrays=None, edit_meta=None):
    """``src`` rewritten as ``dst`` with edits and a recomputed (unkeyed) checksum, as anyone can."""
    with np.load(src) as z:
        arrays = {k: z[k].copy() for k in z.files}
    meta = json.loads(str(arrays.pop("meta")))
    if edit_arrays:
        edit_arrays(arrays)
    if edit_meta:
        edit_meta(meta)
    check = {k: v for k, v in meta.items() if k not in ("sha256", "hmac_sha256", "report")}
    meta["sha256"] = persistence.digest(arrays, check)
    np.savez(dst, meta=np.array(json.dumps(meta, default=persistence.json_default)), **arrays)
    return dst


def _untouched(mech) -> bool:
    """No kernel row computed, no stencil graph built: nothing heavy has run on this mechanism."""
    return not mech.kernels_held and "_row_cache" not in mech.__dict__ and "_graph" not in mech.__dict__


# ---------------------------------------------------------------------------- the stamp and the fast load
def test_a_saved_verified_build_loads_stamped_without_any_kernel_solve(small, tmp_path, geopriv_home):
    assert small.verification == "full"
    path = tmp_path / "m.npz"
    small.save(path)
    assert (geopriv_home / "verified").is_dir() and len(os.listdir(geopriv_home / "verified")) == 1
    back = EikonalMechanism.load(path, privacy_map=small.privacy_map)
    assert back.verification == "stamp" and _untouched(back)
    assert back.report.max_ratio == small.report.max_ratio and back.mechanism_id == small.mechanism_id
    # the rows computed when the release needs them are the verified ones: same draws for the same seed
    xy = _inside(small)
    assert np.array_equal(back.sample(xy, np.random.default_rng(5)), small.sample(xy, np.random.default_rng(5)))
    # verify="full" verifies anyway; kernels="held" keeps the kernels (still no verification needed)
    full = EikonalMechanism.load(path, verify="full")
    assert full.verification == "full" and full.kernels_held and full.report.ok
    held = EikonalMechanism.load(path, kernels="held")
    assert held.verification == "stamp" and np.array_equal(held.kernel, small.kernel)
    with pytest.raises(ValueError, match="verify"):
        EikonalMechanism.load(path, verify="sometimes")


def test_an_unstamped_file_is_verified_in_full_once_then_stamped(small, tmp_path, monkeypatch):
    path = tmp_path / "m.npz"
    small.save(path)
    monkeypatch.setenv("GEOPRIV_HOME", str(tmp_path / "another-home"))  # a user who never verified it
    first = EikonalMechanism.load(path)
    assert first.verification == "full" and first.kernels_held and first.report.ok
    second = EikonalMechanism.load(path)
    assert second.verification == "stamp" and _untouched(second)


def test_unverified_mechanisms_are_never_stamped(small, tmp_path, geopriv_home):
    pm = small.privacy_map
    raw = EikonalMechanism.build(pm, margin=0.1, max_step=1, verify=False)
    assert raw.verification is None
    raw.save(tmp_path / "raw.npz")
    assert not (geopriv_home / "verified").exists() or not os.listdir(geopriv_home / "verified")
    small.save(tmp_path / "m.npz")
    lax = EikonalMechanism.load(tmp_path / "m.npz", verify=False, kernels="held")
    assert lax.verification == "stamp"  # its stamp was found: verify=False had nothing left to skip
    assert EikonalMechanism.load(tmp_path / "raw.npz").verification == "full"


# ---------------------------------------------------------------------------- tampering: never trusted
def test_a_tampered_file_with_its_stamp_kept_is_verified_again_and_refused(small, tmp_path):
    path = tmp_path / "m.npz"
    small.save(path)  # stamped
    stamped = EikonalMechanism.load(path)
    assert stamped.verification == "stamp"

    def sharpen(arrays):  # one array value changed (the stamp, kept in the store, is untouched)
        arrays["weights"][7] *= 1.5

    bad = _rewrite(path, tmp_path / "bad.npz", sharpen)
    with pytest.raises(MechanismFileError, match="normaliser|does not meet"):
        EikonalMechanism.load(bad)
    # an edit that still meets the map is verified again too (not trusted), then accepted and stamped anew
    harmless = _rewrite(
        path, tmp_path / "harmless.npz", lambda a: a["weights"].__setitem__(7, a["weights"][7] * (1 + 1e-14))
    )
    again = EikonalMechanism.load(harmless)
    assert again.verification == "full" and again.report.ok
    assert EikonalMechanism.load(harmless).verification == "stamp"


def test_the_stamp_covers_the_stored_report(small, tmp_path):
    path = tmp_path / "m.npz"
    small.save(path)

    def flatter(meta):  # a report claiming a better ratio (the checksum does not cover the report)
        meta["report"]["max_ratio"] = 0.5

    edited = _rewrite(path, tmp_path / "edited.npz", edit_meta=flatter)
    back = EikonalMechanism.load(edited)
    assert back.verification == "full" and back.report.max_ratio == pytest.approx(small.report.max_ratio, rel=1e-9)
    # its stored report is not what verification found: never stamped, verified at every load
    assert EikonalMechanism.load(edited).verification == "full"


def test_a_stamp_made_with_another_key_is_not_accepted(small, tmp_path, monkeypatch):
    path = tmp_path / "m.npz"
    a, b = tmp_path / "alice", tmp_path / "bob"
    monkeypatch.setenv("GEOPRIV_HOME", str(a))
    small.save(path)
    assert EikonalMechanism.load(path).verification == "stamp"
    monkeypatch.setenv("GEOPRIV_HOME", str(b))
    (b / "verified").mkdir(parents=True, mode=0o700)
    for name in os.listdir(a / "verified"):  # Alice's stamps copied over: made with her key, never found
        (b / "verified" / name).touch()
    assert EikonalMechanism.load(path).verification == "full"  # Bob verifies in full (and stamps with his key)
    assert EikonalMechanism.load(path).verification == "stamp"
    assert (a / "stamp.key").read_bytes() != (b / "stamp.key").read_bytes()


def test_the_key_is_private_and_never_appears_anywhere(small, tmp_path, geopriv_home):
    path = tmp_path / "m.npz"
    small.save(path)
    key_file = geopriv_home / "stamp.key"
    key = key_file.read_bytes()
    assert len(key) == stamps.KEY_BYTES
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(geopriv_home.stat().st_mode) == 0o700
    back = EikonalMechanism.load(path)
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(*_inside(small, 5).T), crs=small.crs)
    out = pts.priv.perturb(mechanism=back, rng=1)
    data = path.read_bytes()
    texts = [
        repr(back),
        str(back),
        str(back.report),
        repr(back.__dict__),
        json.dumps(out.attrs["geopriv"], default=str),
        data.decode("latin-1"),
    ]
    for form in (key, key.hex(), key.hex().upper()):
        for text in texts:
            assert (form if isinstance(form, str) else form.decode("latin-1")) not in text
    assert key not in data
    # nothing secret-derived is saved: the file's metadata has no stamp (the stamps stay in the data directory)
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
    assert not {k for k in meta if "stamp" in k}
    for name in os.listdir(geopriv_home / "verified"):
        assert name not in data.decode("latin-1")


def test_a_key_others_can_read_is_not_used(small, tmp_path, geopriv_home):
    path = tmp_path / "m.npz"
    small.save(path)
    os.chmod(geopriv_home / "stamp.key", 0o644)
    with pytest.warns(GeoprivWarning, match="chmod 600"):
        back = EikonalMechanism.load(path)
    assert back.verification == "full"


# ---------------------------------------------------------------------------- points outside the map
def test_outside_points_are_refused_before_any_kernel_work_with_plain_labels(small, tmp_path):
    path = tmp_path / "m.npz"
    small.save(path)
    mech = EikonalMechanism.load(path)
    assert _untouched(mech)
    xy = _inside(small, 6)
    xy[[1, 4]] = [[520_000.0, 3_990_000.0], [480_000.0, 4_010_000.0]]  # a few km off the 5 x 4 km map
    for index, shown in ((None, "labels 1, 4."), (list("abcdef"), "labels 'b', 'e'.")):
        pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(*xy.T), crs=small.crs, index=index)
        with pytest.raises(GeometryError, match="outside the mechanism's privacy map") as exc:
            pts.priv.perturb(mechanism=mech, rng=1)
        msg = str(exc.value)
        assert shown in msg and "np." not in msg and "mech.with_outside('clamp')" in msg
        assert "520" not in msg and "4010" not in msg  # rows are named, coordinates never
        assert _untouched(mech)  # refused before a single row was computed
    # the sampler's own check (points given in the map's CRS) names rows plainly too
    with pytest.raises(GeometryError, match=r"labels 1, 4\.") as exc:
        mech.sample(xy, np.random.default_rng(0))
    assert "np.int64" not in str(exc.value) and _untouched(mech)
    # from the file alone (no verification, no kernel): what the command line checks before loading
    with pytest.raises(GeometryError, match="labels 1, 4"):
        EikonalMechanism.check_points(path, gpd.GeoDataFrame(geometry=gpd.points_from_xy(*xy.T), crs=small.crs))
    EikonalMechanism.check_points(path, gpd.GeoDataFrame(geometry=gpd.points_from_xy(*_inside(small).T), crs=small.crs))


def test_cli_refuses_outside_points_with_cli_advice_naming_both_crss(small, tmp_path, capsys, geopriv_home):
    path = tmp_path / "m.npz"
    small.save(path)
    (geopriv_home / "verified").rename(tmp_path / "hidden")  # not stamped: the check must come before a full load
    xy = _inside(small, 5)
    pts = gpd.GeoDataFrame({"v": np.arange(5)}, geometry=gpd.points_from_xy(*xy.T), crs=small.crs).to_crs(3857)
    pts.loc[2, "geometry"] = gpd.points_from_xy([15_000_000.0], [4_000_000.0])[0]
    src = tmp_path / "pts.gpkg"
    pts.to_file(src)
    out = tmp_path / "out.gpkg"
    code = main(["perturb", str(src), str(out), "--mechanism", str(path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    line = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert line.startswith("geopriv: error: 1 row(s) lie outside the mechanism's privacy map"), line
    assert "labels 2." in line and "np.int64" not in line
    assert "--outside clamp" in line and "with_outside" not in line
    assert "EPSG:3857" in line and "EPSG:32654" in line and "reprojected" in line
    assert not (geopriv_home / "verified").exists()  # nothing was verified (no stamp made): refused before the load
    # and with --outside clamp it releases
    assert main(["perturb", str(src), str(out), "--mechanism", str(path), "--outside", "clamp", "--no-progress"]) == 0
    assert len(gpd.read_file(out)) == 5


def test_cli_reuses_a_stamped_file_without_verifying_it_again(small, tmp_path, capsys):
    path = tmp_path / "m.npz"
    small.save(path)
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(*_inside(small, 30).T), crs=small.crs)
    src, out = tmp_path / "pts.gpkg", tmp_path / "out.gpkg"
    pts.to_file(src)
    assert main(["perturb", str(src), str(out), "--mechanism", str(path), "--no-progress", "--seed", "3"]) == 0
    lib = pts.priv.perturb(mechanism=small, rng=3)
    released = gpd.read_file(out)
    assert np.allclose(released.geometry.x, lib.geometry.x, rtol=0, atol=1e-6)  # the verified mechanism's draws
    assert (
        main(
            [
                "perturb",
                str(src),
                str(out),
                "--mechanism",
                str(path),
                "--kernels",
                "auto",
                "--overwrite",
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()


def test_read_map_reads_the_public_map_only(small, tmp_path):
    path = tmp_path / "m.npz"
    small.save(path)
    pm = persistence.read_map(path)
    assert (
        pm.shape == small.privacy_map.shape
        and pm.crs.equals(small.crs)
        and np.array_equal(pm.epsilon, small.privacy_map.epsilon)
    )
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(MechanismFileError, match="not a readable"):
        persistence.read_map(tmp_path / "junk.npz")
    with pytest.raises(MechanismFileError, match="No mechanism file"):
        persistence.read_map(tmp_path / "missing.npz")
    assert math.isfinite(pm.epsilon_min)
