"""The package's structure rules that a linter does not state (issue 30).

The layers themselves are import-linter contracts in pyproject.toml, checked by ``lint-imports``
in scripts/test.sh; here: no private name crosses modules (a name two modules share is public
in the lower one), and the core never imports a front end even lazily.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _imports(package):
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                yield path, node


def test_no_private_name_is_imported_across_modules():
    bad = []
    for package in ("geopriv", "qgis_plugin"):
        for path, node in _imports(package):
            mod = node.module or ""
            if not (node.level or mod.startswith(("geopriv", "qgis_plugin"))):
                continue
            names = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            private_module = [p for p in mod.split(".") if p.startswith("_") and p != "_version"]
            if names or private_module:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} from {'.' * node.level}{mod} import {names}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_the_core_never_imports_a_front_end():
    front = ("distributed", "cli", "qgis_plugin")
    bad = []
    for path, node in _imports("geopriv"):
        rel = path.relative_to(ROOT / "geopriv").parts
        if rel[0] in ("distributed", "cli", "cli.py", "accessor.py"):
            continue
        mod = node.module or ""
        target = mod.split(".")[0] if node.level == 1 else (mod.split(".")[1] if mod.startswith("geopriv.") else mod)
        if node.level == 1 and target in front or mod.startswith(("geopriv.distributed", "geopriv.cli", "qgis_plugin")):
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {mod}")
    assert not bad, "\n".join(bad)
