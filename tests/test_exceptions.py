"""``geopriv.exceptions.user_message``: the one rule for what the command line and QGIS show of an error."""
from __future__ import annotations

import pandas as pd
import pytest

import geopriv
from geopriv.exceptions import (
    GeoprivError, GeometryError, NetworkError, OutputError, ParameterError, RasterError, UsageError, user_message,
)

COORDINATE = "-15539.127"


def _caught(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the point of the test
        return exc
    raise AssertionError("no exception")


def test_foreign_texts_are_withheld_by_type():
    pandas_error = _caught(lambda: pd.to_datetime(pd.Series([f"{COORDINATE} not a date"]), format="%Y"))
    assert COORDINATE in str(pandas_error)  # the foreign text does quote the value
    message = user_message(pandas_error)
    assert COORDINATE not in message and "ValueError" in message and "withheld" in message
    assert "GEOPRIV_TRACEBACK=1" in message
    key = _caught(lambda: {}[f"POINT ({COORDINATE} 6712903.4)"])
    assert COORDINATE not in user_message(key) and "KeyError" in user_message(key)
    assert "--debug" in user_message(RuntimeError(COORDINATE), debug_hint="rerun with --debug to see it")


def test_a_plain_error_quoting_a_foreign_one_is_withheld_even_from_geopriv():
    """Raised while handling another exception (whose text it might carry): withheld."""
    exc = _caught(lambda: geopriv.mechanisms.planar_laplace.check_epsilon(f"{COORDINATE}x"))
    assert type(exc) is ValueError and exc.__context__ is not None
    assert COORDINATE not in user_message(exc)


def test_geoprivs_own_errors_are_shown_on_one_line():
    for exc in (GeoprivError("first line\n  second line"), ParameterError("max_cells must be positive"),
                RasterError("too large"), NetworkError("rescale"), OutputError("is the input file"),
                UsageError("give --epsilon"), GeometryError("are outside", [3, 7], "Widen bounds=.")):
        message = user_message(exc)
        assert "\n" not in message and "withheld" not in message
    assert user_message(GeoprivError("first line\n  second line")) == "first line second line"
    assert user_message(GeometryError("are outside", [3, 7], "Widen.")) == "2 row(s) are outside: labels 3, 7. Widen."
    assert isinstance(ParameterError("x"), ValueError)  # `except ValueError` callers keep working


def test_plain_value_error_of_geopriv_not_yet_converted_is_shown():
    """Transitional: a plain ValueError from a ``raise`` of geopriv's own, outside any handler."""
    exc = _caught(lambda: geopriv.mechanisms.planar_laplace.check_epsilon(-1.0))
    assert type(exc) is ValueError and "epsilon must be finite and > 0" in user_message(exc)


def test_files_are_named_with_the_systems_reason():
    exc = _caught(lambda: open("/nonexistent/geopriv-test.gpkg"))
    assert user_message(exc) == "No such file or directory: /nonexistent/geopriv-test.gpkg"


@pytest.mark.parametrize("exc", [MemoryError(), MemoryError("x" * 10)])
def test_memory_errors_say_what_to_do(exc):
    assert "not enough memory" in user_message(exc)
