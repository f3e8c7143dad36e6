"""The test suite reads only data inside the repository, so it runs from a fresh clone."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import DATA_DIRS, ROOT, data_path

TESTS = ROOT / "tests"


def test_data_listed_in_the_readme_is_shipped_with_its_licence():
    readme = (TESTS / "data" / "README.md").read_text()
    listed = re.findall(r"^\| `([^`]+)` \|", readme, flags=re.M)
    assert listed, "tests/data/README.md lists no files"
    for name in listed:
        assert (TESTS / "data" / name).is_file(), name
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        assert "BSD" in row or "licen" in row.lower(), f"{name}: no licence in its README row"
    shipped = {p.name for p in (TESTS / "data").iterdir() if p.name != "README.md"}
    assert shipped == set(listed), "every file in tests/data needs a README row (source, licence)"


def test_no_test_reads_outside_the_repository():
    pattern = re.compile(r"""(["'/])shared\1|\.\./shared|parent\s*/\s*["']shared["']""")
    offenders = [
        str(p.relative_to(ROOT))
        for p in TESTS.rglob("*.py")
        if p.name != Path(__file__).name and pattern.search(p.read_text())
    ]
    assert offenders == []
    for folder in DATA_DIRS:
        assert ROOT in folder.parents
    assert data_path("soho_cholera.gpkg").parent == ROOT / "geopriv" / "data"
    assert data_path("geolife_sample.gpkg").parent == ROOT / "geopriv" / "data"


def test_shipped_data_are_listed_with_their_licence_and_reachable_by_name():
    """Every file in geopriv/data has a README row (source, licence) and a geopriv.datasets name."""
    from geopriv import datasets

    folder = ROOT / "geopriv" / "data"
    readme = (folder / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", readme, flags=re.M))
    # GDAL's own statistics sidecars (*.aux.xml, ignored by git) appear when QGIS opens a raster here
    shipped = {p.name for p in folder.iterdir() if p.name != "README.md" and not p.name.endswith(".aux.xml")}
    assert shipped == set(rows), "every file in geopriv/data needs a README row (file, name, what, licence)"
    for file, name in rows.items():
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{file}` |"))
        assert "BSD" in row, f"{file}: no licence in its README row"
        assert datasets.get_path(name) == folder / file
    assert set(datasets.names()) == set(rows.values())


def test_shipped_geopackages_are_version_1_2_which_qgis_3_22_opens_without_a_warning():
    import sqlite3

    for folder in DATA_DIRS:
        for path in sorted(Path(folder).glob("*.gpkg")):
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                assert db.execute("pragma user_version").fetchone()[0] == 10200, path.name
