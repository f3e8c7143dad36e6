#!/usr/bin/env python3
"""Build the installable QGIS plugin zip: dist/geopriv_qgis.zip.

    python scripts/build_plugin.py [--out PATH]

The zip holds one folder, ``geopriv_qgis/``, with the plugin package (qgis_plugin/), the
top-level metadata.txt and LICENSE: what QGIS's Plugins > Manage and Install Plugins >
Install from ZIP expects.  The zip is reproducible (sorted entries, fixed timestamps).  Only
the standard library is used; geopriv itself is not bundled (it is installed into QGIS's
Python separately, see docs/qgis.md).
"""

from __future__ import annotations

import argparse
import configparser
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIR = ROOT / "qgis_plugin"
FOLDER = "geopriv_qgis"
EXCLUDE_DIRS = {"__pycache__", ".pytest_cache"}
EXCLUDE_SUFFIXES = {".pyc", ".pyo"}
STAMP = (2020, 1, 1, 0, 0, 0)


def library_version() -> str:
    text = (ROOT / "geopriv" / "_version.py").read_text()
    match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
    if not match:
        raise SystemExit("cannot read __version__ from geopriv/_version.py")
    return match.group(1)


def check_metadata(path: Path) -> configparser.ConfigParser:
    meta = configparser.ConfigParser()
    meta.read(path, encoding="utf-8")
    general = meta["general"]
    for key in ("name", "qgisMinimumVersion", "description", "about", "version", "author"):
        if not general.get(key, "").strip():
            raise SystemExit(f"metadata.txt: '{key}' is required")
    if general.get("hasProcessingProvider", "").strip().lower() != "yes":
        raise SystemExit("metadata.txt: hasProcessingProvider must be 'yes'")
    if general["version"].strip() != library_version():
        raise SystemExit(
            f"metadata.txt version {general['version']} differs from geopriv {library_version()}: "
            "release the plugin with the library version it was built for"
        )
    return meta


def plugin_files():
    for path in sorted(PLUGIN_DIR.rglob("*")):
        if path.is_dir() or EXCLUDE_DIRS.intersection(path.relative_to(PLUGIN_DIR).parts):
            continue
        if path.suffix in EXCLUDE_SUFFIXES or path.name == "metadata.txt":
            continue
        yield path, f"{FOLDER}/{path.relative_to(PLUGIN_DIR).as_posix()}"


def library_wheel(folder: Path) -> Path:
    """Build the geopriv wheel (pure Python, no dependencies bundled) into ``folder``."""
    env = dict(os.environ, SOURCE_DATE_EPOCH="1577836800", PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit("building the geopriv wheel failed:\n" + done.stderr[-2000:])
    wheels = sorted(folder.glob("geopriv-*.whl"))
    if len(wheels) != 1 or not wheels[0].name.startswith(f"geopriv-{library_version()}-"):
        raise SystemExit(f"expected one geopriv-{library_version()} wheel, pip wrote {[w.name for w in wheels]}")
    return wheels[0]


def build(out: Path) -> Path:
    check_metadata(ROOT / "metadata.txt")
    entries = list(plugin_files())
    scratch = tempfile.TemporaryDirectory()
    wheel = library_wheel(Path(scratch.name))
    entries.append((wheel, f"{FOLDER}/wheels/{wheel.name}"))
    entries.append((ROOT / "metadata.txt", f"{FOLDER}/metadata.txt"))
    entries.append((ROOT / "LICENSE", f"{FOLDER}/LICENSE"))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for source, name in sorted(entries, key=lambda e: e[1]):
            info = zipfile.ZipInfo(name, date_time=STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, source.read_bytes())
    tmp.replace(out)  # atomic: a concurrent reader never sees half a zip
    scratch.cleanup()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / f"{FOLDER}.zip", help="zip to write")
    args = parser.parse_args(argv)
    out = build(args.out.resolve())
    with zipfile.ZipFile(out) as zf:
        count = len(zf.namelist())
    print(f"{out} ({count} files, plugin folder {FOLDER}/, geopriv {library_version()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
