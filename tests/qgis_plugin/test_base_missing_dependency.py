"""QGIS shows geopriv's own message about a missing optional package, with QGIS's install advice (issue 44, item 2).

The plugin's error path (``error_message``, what a failed algorithm raises as its QgsProcessingException) is the
command line's rule (``geopriv.exceptions.user_message``): a :class:`MissingDependencyError` is geopriv's own text,
shown; a foreign ImportError's text stays withheld.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.qgis


def test_a_missing_package_is_named_with_qgis_advice(plugin):
    from geopriv.exceptions import MissingDependencyError

    from geopriv_qgis.algorithms.base import error_message

    exc = MissingDependencyError(
        "Plotting needs matplotlib, which is not installed.", package="matplotlib", extra="plot"
    )
    message = error_message(exc)
    assert message.startswith("Plotting needs matplotlib, which is not installed.")
    assert "QGIS's Python" in message and "pip install matplotlib" in message
    assert "withheld" not in message and "geopriv[plot]" not in message  # no command-line advice in QGIS


def test_a_foreign_import_error_stays_withheld(plugin):
    from geopriv_qgis.algorithms.base import error_message

    message = error_message(ImportError("cannot import name 'x' from '51.5123'"))
    assert "withheld" in message and "51.5123" not in message
