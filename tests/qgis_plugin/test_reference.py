"""The documentation site's QGIS algorithm reference is the provider's own: docs/_generated/qgis_algorithms.json
must equal what the running provider says (help strings, parameters, defaults, outputs).

When an algorithm changes, this fails with the command that regenerates the file.
"""

from __future__ import annotations

import json

import pytest

from qgis_helpers import ROOT

pytestmark = pytest.mark.qgis

COMMITTED = ROOT / "docs" / "_generated" / "qgis_algorithms.json"


def test_the_committed_reference_is_the_providers(provider):
    from geopriv_qgis.reference import algorithm_reference

    live = json.loads(json.dumps(algorithm_reference(provider), ensure_ascii=False))
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert [a["id"] for a in committed] == [a["id"] for a in live], (
        "docs/_generated/qgis_algorithms.json is out of date: regenerate it with QT_QPA_PLATFORM=offscreen "
        "python -m qgis_plugin.reference docs/_generated/qgis_algorithms.json (in the QGIS environment)"
    )
    for old, new in zip(committed, live):
        assert old == new, (
            f"{new['id']} changed: regenerate docs/_generated/qgis_algorithms.json with "
            "QT_QPA_PLATFORM=offscreen python -m qgis_plugin.reference docs/_generated/qgis_algorithms.json"
        )
    assert len(live) == len(provider.algorithms()) and all(len(a["help"]) > 200 for a in live)
