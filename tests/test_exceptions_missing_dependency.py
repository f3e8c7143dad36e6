"""geopriv's own messages about a missing optional package are shown, never withheld (issue 44, item 2).

``geopriv demo`` in a plain install said "an error in Python (ImportError): its message is withheld
because it may quote data values": the withheld text was geopriv's own "Plotting needs matplotlib".
geopriv's import guards raise :class:`~geopriv.exceptions.MissingDependencyError` (an ``ImportError``
and a ``GeoprivError``), which the command line and QGIS show with their own install advice; a
foreign ``ImportError``'s text stays withheld.  The real missing package (a fresh environment without
the ``plot`` extra) is in tests/test_wheel.py.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

import geopriv
from geopriv import cli
from geopriv.exceptions import FRONT_ENDS, GeoprivError, MissingDependencyError, shows_message, user_message

ROOT = Path(geopriv.__file__).parent

#: files whose import guards still raise a plain ImportError (not owned by the change that added the class):
#: each should become MissingDependencyError; the test fails when an entry is converted and not removed
NOT_YET_CONVERTED: set = set()


def _plot_error():
    return MissingDependencyError(
        "Plotting needs matplotlib, which is not installed.", package="matplotlib", extra="plot"
    )


def test_a_missing_dependency_is_an_import_error_and_geoprivs_own():
    exc = _plot_error()
    assert isinstance(exc, ImportError) and isinstance(exc, GeoprivError) and shows_message(exc)
    assert exc.name == "matplotlib" and exc.fix.kind == "install_matplotlib"
    with pytest.raises(ImportError):  # `except ImportError` guards keep catching it
        raise exc


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_its_message_is_shown_with_each_front_ends_install_advice(front_end):
    message = user_message(_plot_error(), front_end)
    assert message.startswith("Plotting needs matplotlib, which is not installed.")
    assert "withheld" not in message and "\n" not in message
    if front_end == "qgis":
        assert "QGIS's Python" in message and "geopriv[plot]" not in message
    else:
        assert "pip install 'geopriv[plot]'" in message


def test_the_command_line_prints_it():
    assert cli._message(_plot_error()) == (
        "Plotting needs matplotlib, which is not installed. Install it: pip install 'geopriv[plot]' "
        "(or pip install matplotlib)."
    )


def test_a_package_known_by_another_name_on_pypi():
    exc = MissingDependencyError("wasserstein() needs the POT library.", package="ot", extra="metrics", pip_name="pot")
    assert exc.name == "ot" and exc.fix.kind == "install_pot"
    assert "pip install 'geopriv[metrics]' (or pip install pot)" in user_message(exc, "cli")


def test_it_survives_pickling():
    """dask sends errors between processes."""
    back = pickle.loads(pickle.dumps(_plot_error()))
    assert type(back) is MissingDependencyError and back.fix == _plot_error().fix and back.name == "matplotlib"
    assert str(back) == str(_plot_error())


def test_a_foreign_import_errors_text_stays_withheld():
    try:
        import geopriv_no_such_module  # noqa: F401
    except ImportError as exc:
        foreign = exc
    message = user_message(foreign, "cli")
    assert "withheld" in message and "geopriv_no_such_module" not in message
    assert "withheld" in user_message(ImportError("cannot import name 'x' from '51.5123'"))


def test_no_plain_import_error_is_raised_by_geopriv():
    """Every guard of an optional import raises MissingDependencyError (or another GeoprivError): shown, never
    withheld.  A plain ImportError raised by geopriv would be withheld like a foreign one."""
    plain = {
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*.py")
        if p.name != "exceptions.py" and re.search(r"raise ImportError\(", p.read_text(encoding="utf-8"))
    }
    assert plain == NOT_YET_CONVERTED, (
        f"plain ImportErrors raised in {sorted(plain - NOT_YET_CONVERTED)}; converted and still listed: "
        f"{sorted(NOT_YET_CONVERTED - plain)}"
    )
