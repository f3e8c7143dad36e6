"""The QGIS algorithm reference (docs/qgis_algorithms.rst), rendered from the provider's own help strings.

``docs/_generated/qgis_algorithms.json`` is written by ``python -m qgis_plugin.reference`` in a Python
that imports QGIS (the documentation's Python does not); tests/qgis_plugin/test_reference.py fails
when it no longer matches the provider.  The directive ``.. qgis-algorithms::`` turns it into one
section per group and algorithm: the help text the Processing dialog shows, then its parameters and
outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

SOURCE = Path(__file__).resolve().parents[1] / "_generated" / "qgis_algorithms.json"


def _cell(text) -> str:
    text = "" if text is None else str(text)
    return text.replace("\n", " ").replace("|", "\\|").replace("*", "\\*").replace("`", "'") or " "


def _default(p) -> str:
    if p.get("choices") and isinstance(p["default"], int) and 0 <= p["default"] < len(p["choices"]):
        return p["choices"][p["default"]]
    return "" if p["default"] is None else str(p["default"])


def _rst(algorithms) -> list[str]:
    lines, group = [], None
    for alg in algorithms:
        if alg["group"] != group:
            group = alg["group"]
            lines += [group, "-" * len(group), ""]
        title = f"{alg['name']} (``{alg['id']}``)"
        lines += [title, "~" * len(title), "", ".. raw:: html", ""]
        lines += ["   " + line for line in alg["help"].splitlines()] + [""]
        lines += [
            ".. list-table:: Parameters",
            "   :header-rows: 1",
            "   :widths: 18 34 14 34",
            "",
            "   * - name",
            "     - label",
            "     - type",
            "     - default / notes",
        ]
        for p in alg["parameters"]:
            notes = _default(p)
            flags = [f for f, on in (("optional", p["optional"]), ("advanced", p["advanced"])) if on]
            if flags:
                notes = (notes + "; " if notes else "") + ", ".join(flags)
            if p.get("choices"):
                notes += (" — choices: " if notes else "choices: ") + "; ".join(p["choices"])
            lines += [
                f"   * - ``{p['name']}``",
                f"     - {_cell(p['label'])}",
                f"     - {_cell(p['type'])}",
                f"     - {_cell(notes)}",
            ]
        lines.append("")
        if alg["outputs"]:
            lines += ["Outputs: " + "; ".join(f"``{o['name']}`` ({_cell(o['label'])})" for o in alg["outputs"]), ""]
    return lines


class QgisAlgorithms(Directive):
    has_content = False

    def run(self):
        algorithms = json.loads(SOURCE.read_text(encoding="utf-8"))
        from docutils import nodes

        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(_rst(algorithms), source=str(SOURCE)), container)
        return container.children


def setup(app):
    app.add_directive("qgis-algorithms", QgisAlgorithms)
    return {"parallel_read_safe": True}
