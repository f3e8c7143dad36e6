"""Progress bars on a terminal only (issue 44, item 9): piped or redirected output gets no carriage-return bar.

tqdm's own rule (``disable=None``): a bar is drawn when its stream is a terminal, and not at all on a
pipe or a file, where its carriage-return updates would pile up on one giant line of a log.  The
command runs as a user runs it: ``geopriv build-mechanism`` in a subprocess, its stderr a real pipe or a
real pseudo-terminal (``os.openpty``).
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
import rasterio
from rasterio.windows import Window

import geopriv
from geopriv.progress import on_terminal, progress_bar, progress_callback

TOKYO = Path(geopriv.__file__).parent / "data" / "tokyo_density_200.tif"
GEOPRIV = [sys.executable, "-m", "geopriv.cli"]


@pytest.fixture(scope="module")
def small_raster(tmp_path_factory):
    """16 x 16 cells of the shipped Tokyo density raster (a build of about a second)."""
    path = tmp_path_factory.mktemp("raster") / "density.tif"
    with rasterio.open(TOKYO) as ds:
        t = ds.transform
        transform = rasterio.Affine(t.a, t.b, t.c + 90 * t.a, t.d, t.e, t.f + 90 * t.e)
        profile = ds.profile | {"width": 16, "height": 16, "transform": transform, "blockysize": 16}
        values = ds.read(1, window=Window(90, 90, 16, 16))
    with rasterio.open(path, "w", **profile) as out:
        out.write(values, 1)
    return path


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("GEOPRIV_TRACEBACK", "TQDM_DISABLE")}
    env["PYTHONPATH"] = str(Path(geopriv.__file__).parents[1])  # this checkout's geopriv
    return env


def _build(raster, out, *extra):
    return [*GEOPRIV, "build-mechanism", str(raster), str(out), "--epsilon-range", "ln4/3000", "ln4/600", *extra]


def test_build_mechanism_piped_draws_no_bar(small_raster, tmp_path):
    done = subprocess.run(
        _build(small_raster, tmp_path / "m.npz"), capture_output=True, env=_env(), timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()
    err = done.stderr
    assert b"\r" not in err, err  # no carriage-return updates: each line of the log is a line
    lines = err.decode().splitlines()
    assert [line.split(":")[0] for line in lines] == ["privacy map", f"wrote {tmp_path / 'm.npz'}"], lines
    assert (tmp_path / "m.npz").is_file()


def _on_a_terminal(argv, cwd) -> tuple[int, bytes]:
    """Run ``argv`` with stderr a pseudo-terminal (stdout a pipe): (exit code, what the terminal received)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 x 100, as a terminal window
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, env=_env(), cwd=cwd)
    finally:
        os.close(slave)
    received = b""
    try:
        while True:  # read while it runs (a full terminal buffer would block the child)
            ready, _, _ = select.select([master], [], [], 300)
            if not ready:
                proc.kill()
                raise AssertionError("no output for 300 s")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(master)
    proc.communicate(timeout=300)
    return proc.returncode, received


def test_build_mechanism_on_a_terminal_draws_its_bars(small_raster, tmp_path):
    code, received = _on_a_terminal(_build(small_raster, tmp_path / "m.npz"), tmp_path)
    assert code == 0, received.decode(errors="replace")
    bare_cr = received.replace(b"\r\n", b"\n").count(b"\r")  # the terminal ends lines with \r\n
    assert b"eikonal kernels" in received and b"100%" in received and bare_cr > 0, received
    code, received = _on_a_terminal(_build(small_raster, tmp_path / "n.npz", "--no-progress"), tmp_path)
    assert code == 0 and b"eikonal kernels" not in received, received


def test_the_librarys_bars_follow_the_same_rule(tmp_path):
    with open(tmp_path / "log.txt", "w") as log:  # a file is no terminal
        assert not on_terminal(log)
        bar = progress_bar(10, "perturb")
        assert bar.disable == (not on_terminal(sys.stderr))
        bar.close()
    callback, bar = progress_callback(True, 10)
    assert bar is not None and bar.disable == (not on_terminal(sys.stderr))
    callback(5, 10)  # a disabled bar takes updates and draws nothing
    bar.close()
    assert progress_callback(None, 10) == (None, None)
    master, slave = os.openpty()
    try:
        with os.fdopen(os.dup(slave), "w") as tty:
            assert on_terminal(tty)
    finally:
        os.close(master)
        os.close(slave)
