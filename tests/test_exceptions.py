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


def test_a_plain_value_error_is_withheld_wherever_it_comes_from():
    """Every error geopriv raises is a named class; a plain ValueError is foreign (Python, numpy...)."""
    exc = _caught(lambda: float(f"{COORDINATE}x"))
    assert type(exc) is ValueError and COORDINATE not in user_message(exc)


def test_geoprivs_own_errors_are_shown_on_one_line():
    for exc in (GeoprivError("first line\n  second line"), ParameterError("max_cells must be positive"),
                RasterError("too large"), NetworkError("rescale"), OutputError("is the input file"),
                UsageError("give --epsilon"), GeometryError("are outside", [3, 7], "Widen bounds=.")):
        message = user_message(exc)
        assert "\n" not in message and "withheld" not in message
    assert user_message(GeoprivError("first line\n  second line")) == "first line second line"
    assert user_message(GeometryError("are outside", [3, 7], "Widen.")) == "2 row(s) are outside: labels 3, 7. Widen."
    assert isinstance(ParameterError("x"), ValueError)  # `except ValueError` callers keep working


def test_geoprivs_parameter_errors_are_named_and_shown():
    """No plain ValueError/TypeError is raised by geopriv itself any more (issue 30: named classes)."""
    from geopriv.exceptions import ParameterTypeError

    exc = _caught(lambda: geopriv.mechanisms.planar_laplace.check_epsilon(-1.0))
    assert isinstance(exc, ParameterError) and "epsilon must be finite and > 0" in user_message(exc)
    exc = _caught(lambda: geopriv.mechanisms.planar_laplace.check_epsilon(True))
    assert isinstance(exc, ParameterTypeError) and isinstance(exc, TypeError) and "bool" in user_message(exc)


def test_no_plain_value_or_type_error_is_raised_by_geopriv():
    import pathlib
    import re

    root = pathlib.Path(geopriv.__file__).parent
    plain = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if p.name != "exceptions.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"raise (ValueError|TypeError)\(", line)]
    assert not plain, plain


def test_files_are_named_with_the_systems_reason():
    exc = _caught(lambda: open("/nonexistent/geopriv-test.gpkg"))
    assert user_message(exc) == "No such file or directory: /nonexistent/geopriv-test.gpkg"


@pytest.mark.parametrize("exc", [MemoryError(), MemoryError("x" * 10)])
def test_memory_errors_say_what_to_do(exc):
    assert "not enough memory" in user_message(exc)
