"""``geopriv.exceptions.user_message``: the one rule for what the command line and QGIS show of an error."""

from __future__ import annotations

import pandas as pd
import pytest

import geopriv
from geopriv.exceptions import (
    GeoprivError,
    GeometryError,
    NetworkError,
    OutputError,
    ParameterError,
    RasterError,
    UsageError,
    user_message,
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
    for exc in (
        GeoprivError("first line\n  second line"),
        ParameterError("max_cells must be positive"),
        RasterError("too large"),
        NetworkError("rescale"),
        OutputError("is the input file"),
        UsageError("give --epsilon"),
        GeometryError("are outside", [3, 7], "Widen bounds=."),
    ):
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
    plain = [
        f"{p.relative_to(root)}:{i}"
        for p in root.rglob("*.py")
        if p.name != "exceptions.py"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"raise (ValueError|TypeError)\(", line)
    ]
    assert not plain, plain


def test_files_are_named_with_the_systems_reason():
    exc = _caught(lambda: open("/nonexistent/geopriv-test.gpkg"))
    assert user_message(exc) == "No such file or directory: /nonexistent/geopriv-test.gpkg"


@pytest.mark.parametrize("exc", [MemoryError(), MemoryError("x" * 10)])
def test_memory_errors_say_what_to_do(exc):
    assert "not enough memory" in user_message(exc)


# ---------------------------------------------------------------------------- fixes per front end (issue 31)
def test_a_fix_is_immutable_and_rendered_per_front_end():
    import pickle

    from geopriv.exceptions import FRONT_ENDS, Fix

    fix = Fix("drop_columns", python="gdf = gdf.drop(columns=['lon']).", cli="--drop lon.", qgis="'Drop field(s)'.")
    with pytest.raises(AttributeError):
        fix.cli = "x"
    exc = GeoprivError("'lon' holds longitudes.", fix=fix)
    assert str(exc) == "'lon' holds longitudes. gdf = gdf.drop(columns=['lon'])."  # the library's text: Python
    assert exc.problem == "'lon' holds longitudes." and exc.fix is fix
    assert [user_message(exc, fe) for fe in FRONT_ENDS] == [
        "'lon' holds longitudes. gdf = gdf.drop(columns=['lon']).",
        "'lon' holds longitudes. --drop lon.",
        "'lon' holds longitudes. 'Drop field(s)'.",
    ]
    with pytest.raises(ParameterError, match="front_end"):
        user_message(exc, "R")
    # a front end without advice shows the problem only, never another front end's advice
    assert user_message(GeoprivError("No layer.", fix=Fix("k", python="layer=", cli="--layer")), "qgis") == "No layer."
    # a problem written without a final period (the command line's style) gets one before the advice
    assert (
        user_message(OutputError("out.gpkg exists", fix=Fix("k", cli="Pass --overwrite.")), "cli")
        == "out.gpkg exists. Pass --overwrite."
    )
    back = pickle.loads(pickle.dumps(exc))  # dask sends errors between processes
    assert back.fix == fix and str(back) == str(exc)
    joined = Fix.join(fix, None, Fix.same("shuffle_rows", "Shuffle."))
    assert joined.kind == "drop_columns+shuffle_rows" and joined.text("qgis") == "'Drop field(s)'. Shuffle."
    assert Fix.join(None) is None and Fix.join(fix) is fix


def _converted_errors():
    """geopriv errors a command-line or QGIS user meets, each raised by the library itself."""
    import math

    import geopandas as gpd
    import numpy as np

    from geopriv.precision import check_epsilon

    deaths = gpd.read_file(pathlib.Path(geopriv.__file__).parent / "data" / "soho_cholera.gpkg", layer="deaths")
    lonlat = deaths.geometry.to_crs(4326)
    ordered = deaths.iloc[np.argsort(deaths.geometry.x.to_numpy())].reset_index(drop=True)
    with_lon = deaths.assign(lon=lonlat.x, lat=lonlat.y)
    multi = deaths.copy()
    multi.loc[3, "geometry"] = shapely.MultiPoint([(0, 0), (1, 1)])
    degrees = deaths.to_crs(4326).set_crs(3857, allow_override=True)  # longitude/latitude labelled Web Mercator
    far = deaths.copy()
    far.loc[5, "geometry"] = shapely.Point(0, 0)
    kw = dict(level=math.log(4), radius=200, rng=1)
    return {
        "row order": lambda: geopriv.perturb(ordered, **kw),
        "location columns": lambda: geopriv.perturb(with_lon, **kw),
        "unknown keep": lambda: geopriv.perturb(deaths, keep=["Lon"], **kw),
        "no CRS": lambda: geopriv.perturb(deaths.set_crs(None, allow_override=True), **kw),
        "MultiPoint": lambda: geopriv.perturb(multi, **kw),
        "metres as degrees": lambda: geopriv.perturb(deaths.set_crs(4326, allow_override=True), **kw),
        "degrees as Web Mercator": lambda: geopriv.perturb(degrees, keep=["Id"], **kw),
        "outside the study area": lambda: geopriv.perturb(far, bounds=(-16000, 6711000, -14000, 6714000), **kw),
        "epsilon 0": lambda: check_epsilon(0.0),
        "traces need a plane": lambda: geopriv.sanitize_traces(
            deaths.to_crs(4326).assign(u=1, t=0.0), traj_id="u", time="t", rate=0.1, **kw
        ),
        "missing trace id": lambda: geopriv.sanitize_traces(
            deaths, traj_id="user", time=None, rate=0.1, bounds=(-16000, 6711000, -14000, 6714000), **kw
        ),
        "continuous and grid": lambda: geopriv.perturb(deaths, continuous=True, grid=5, **kw),
    }


import pathlib  # noqa: E402 - used by the table above

import shapely  # noqa: E402


@pytest.mark.parametrize("case", sorted(_converted_errors()))
def test_each_front_end_reads_only_its_own_advice(case):
    import re

    from geopriv.exceptions import Fix

    exc = _caught(_converted_errors()[case])
    assert isinstance(exc, GeoprivError) and isinstance(exc.fix, Fix), (case, exc)
    python, cli, qgis = (user_message(exc, fe) for fe in ("python", "cli", "qgis"))
    assert python == " ".join(str(exc).split())  # the library's own text is the Python one
    python_code = re.compile(r"gdf\.|\b[a-z_]+=[\[('<\w]|math\.log")  # calls and keyword arguments
    for text in (cli, qgis):
        assert not python_code.search(text), (case, text)
    assert "--" not in qgis and "command line" not in qgis, (case, qgis)
    assert "QGIS" not in cli and "(Python)" not in cli, (case, cli)
    assert exc.fix.cli and exc.fix.qgis, case  # every one of these has advice for both front ends
    if case == "missing trace id":
        assert "--traj-id" in cli and "'Trace id field'" in qgis and "traj_id=None" in python
    assert len(cli) < 800 and len(qgis) < 800, (case, len(cli), len(qgis))  # short: not the 1,900-character wall


# ---------------------------------------------------------------------------- noise-scale warnings (issue 31)
def test_noise_scale_warnings_come_from_public_parameters_only():
    import math
    import warnings

    from geopriv.exceptions import LowUtilityWarning, WeakProtectionWarning
    from geopriv.precision import PROTECTION_FLOOR_M, check_noise_scale, expected_displacement

    assert PROTECTION_FLOOR_M == 10.0 and expected_displacement(0.2) == pytest.approx(10.0)
    with pytest.warns(WeakProtectionWarning) as caught:  # ln 4 read as epsilon per metre: 1.44 m on average
        assert check_noise_scale(math.log(4)) == pytest.approx(2 / math.log(4))
    (w,) = caught
    assert "1.44 m on average" in str(w.message) and "level=math.log(4), radius=200" in str(w.message)
    assert w.filename == __file__  # attributed to the caller, not to geopriv
    cli, qgis = user_message(w.message, "cli"), user_message(w.message, "qgis")
    assert "--level ln4 --radius 200" in cli and "math." not in cli and "level=" not in cli
    assert "'Epsilon' empty" in qgis and "--" not in qgis and "math." not in qgis
    with pytest.warns(WeakProtectionWarning, match="less than the public lattice step of 25 m"):
        check_noise_scale(0.1, grid_m=25)  # 20 m of noise on a 25 m lattice
    with pytest.warns(LowUtilityWarning, match=r"2,000 m on average .* diameter of 500 m"):
        check_noise_scale(0.001, area_m=500.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_noise_scale(math.log(4) / 200, grid_m=1.0, area_m=5_000.0)  # ln 4 within 200 m in a 5 km area: fine
        check_noise_scale(0.001)  # no declared area: no utility check


def test_releases_warn_about_their_noise_scale():
    import math
    import warnings

    import geopandas as gpd

    from geopriv.exceptions import LowUtilityWarning, WeakProtectionWarning

    deaths = gpd.read_file(pathlib.Path(geopriv.__file__).parent / "data" / "soho_cholera.gpkg", layer="deaths")
    soho = (-15800, 6711900, -14600, 6713300)
    with pytest.warns(WeakProtectionWarning, match="0.01 m on average"):
        geopriv.perturb(deaths, epsilon=200, rng=1)
    with pytest.warns(LowUtilityWarning):
        geopriv.perturb(deaths, epsilon=1e-4, bounds=soho, rng=1)  # 20 km of noise over a 1.8 km area
    with pytest.warns(WeakProtectionWarning, match="Each trace's whole budget"):
        geopriv.sanitize_traces(
            deaths.assign(u=deaths.index % 5),
            traj_id="u",
            time=None,
            epsilon=1.0,
            rate=0.5,
            bounds=soho,
            rng=1,
            keep=["<row order>"],
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeakProtectionWarning)
        warnings.simplefilter("error", LowUtilityWarning)
        geopriv.perturb(deaths, level=math.log(4), radius=200, rng=1)
        geopriv.perturb(deaths, level=math.log(4), radius=200, bounds=soho, rng=1)
