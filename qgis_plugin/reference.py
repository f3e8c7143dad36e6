"""The provider's algorithms as data: the source of the documentation site's QGIS algorithm reference.

:func:`algorithm_reference` reads each algorithm's own help string, parameters (name, label,
type, default, optional, advanced, help) and outputs from the running provider, so the site
shows what the Processing dialog shows.  ``python -m qgis_plugin.reference OUT.json`` (in a
Python that imports QGIS) writes it; docs/_ext/geopriv_qgis_docs.py renders the committed
docs/_generated/qgis_algorithms.json, and tests/qgis_plugin/test_reference.py fails when that
file is older than the provider.
"""

from __future__ import annotations

import json
import sys


def _plain(value):
    """A parameter default as JSON: numbers, strings, booleans and None as they are, anything else as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def algorithm_reference(provider) -> list[dict]:
    """One dict per algorithm of ``provider``, in the toolbox's order of groups and names."""
    from qgis.core import QgsProcessingParameterDefinition as Definition

    out = []
    for alg in sorted(provider.algorithms(), key=lambda a: (a.group(), a.displayName())):
        params = []
        for p in alg.parameterDefinitions():
            entry = {
                "name": p.name(),
                "label": p.description(),
                "type": p.type(),
                "default": _plain(p.defaultValue()),
                "optional": bool(p.flags() & Definition.FlagOptional),
                "advanced": bool(p.flags() & Definition.FlagAdvanced),
                "help": p.help() or "",
            }
            options = getattr(p, "options", None)
            if callable(options) and p.type() == "enum":
                entry["choices"] = list(options())
            params.append(entry)
        outputs = [
            {"name": o.name(), "label": o.description(), "type": o.type()}
            for o in alg.outputDefinitions()
            if o.name() not in {p["name"] for p in params}
        ]
        out.append(
            {
                "id": alg.id(),
                "name": alg.displayName(),
                "group": alg.group(),
                "help": alg.shortHelpString(),
                "parameters": params,
                "outputs": outputs,
            }
        )
    return out


def main(argv=None) -> int:
    """Write the reference of the geopriv provider as JSON (argv: the output path)."""
    from qgis.core import QgsApplication

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m qgis_plugin.reference OUT.json", file=sys.stderr)
        return 2
    app = QgsApplication([], False)
    app.initQgis()
    from .provider import GeoprivProvider

    provider = GeoprivProvider()
    QgsApplication.processingRegistry().addProvider(provider)
    from geopriv.io import write_new_file

    text = json.dumps(algorithm_reference(provider), indent=1, ensure_ascii=False) + "\n"
    # atomically, a symbolic link at the path replaced itself (never written through), as every geopriv output
    write_new_file(argv[0], lambda fh: fh.write(text.encode("utf-8")), overwrite=True, mode=0o644)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
