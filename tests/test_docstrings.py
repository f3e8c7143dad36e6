"""Every public name's docstring is a reference: numpydoc's validation, and its Examples run as doctests.

* numpydoc.validate (the checks of numpydoc's own ``numpydoc lint``) on every function and class of
  ``geopriv.__all__``: no error among :data:`CHECKED` (a summary, every parameter documented with a
  type and a description, Returns for what is returned, See Also, Examples, ...);
* the Examples of each of them run with doctest in a temporary folder holding the shipped data
  (``geopriv/data``, ``tests/data``), as a reader pastes them: the outputs shown must match (with
  ``...`` and whitespace normalised), and at least one line of each must really run (lines marked
  ``# doctest: +SKIP`` are allowed for what cannot run here, such as QGIS).

numpydoc is a test dependency (the ``test`` extra).
"""

from __future__ import annotations

import doctest
import inspect
import os
from pathlib import Path

import pytest

import geopriv

numpydoc_validate = pytest.importorskip("numpydoc.validate")

ROOT = Path(__file__).resolve().parents[1]

#: numpydoc validation codes that fail the test
CHECKED = {
    "GL01",
    "GL02",
    "GL03",
    "GL05",
    "GL06",
    "GL07",
    "GL08",
    "GL10",  # layout, unknown or misordered sections
    "SS01",
    "SS02",
    "SS03",
    "SS04",
    "SS05",  # a one-line summary, capitalised, ending with a period
    "PR01",
    "PR02",
    "PR03",
    "PR07",
    "PR08",
    "PR10",  # every parameter documented, described, in order
    "RT01",
    "RT03",  # what is returned, and a description
    "SA01",
    "SA03",  # See Also, with descriptions
    "EX01",  # Examples
}


def _public():
    names = []
    for name in geopriv.__all__:
        obj = getattr(geopriv, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            names.append(name)
    return names


PUBLIC = _public()


@pytest.mark.parametrize("name", PUBLIC)
def test_numpydoc_validation(name):
    obj = getattr(geopriv, name)
    # by the object's own path: "geopriv.perturb" would be the module of that name, not the function
    errors = [
        (code, text)
        for code, text in numpydoc_validate.validate(f"{obj.__module__}.{obj.__qualname__}")["errors"]
        if code in CHECKED
    ]
    assert not errors, "\n".join(f"{code}: {text}" for code, text in errors)


@pytest.fixture
def data_folder(tmp_path, monkeypatch):
    # an empty folder, nothing copied: the examples read the shipped data with geopriv.datasets.get_path
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return tmp_path


@pytest.mark.parametrize("name", PUBLIC)
def test_examples_run(name, data_folder):
    import math

    import geopandas as gpd
    import numpy as np
    import pandas as pd

    obj = getattr(geopriv, name)
    globs = {"geopriv": geopriv, "np": np, "pd": pd, "gpd": gpd, "math": math, "os": os}
    tests = doctest.DocTestFinder(recurse=False).find(obj, f"geopriv.{name}", globs=globs)
    examples = [ex for t in tests for ex in t.examples]
    ran = [ex for ex in examples if not ex.options.get(doctest.SKIP)]
    assert ran, f"geopriv.{name}: its Examples have no line that runs (all +SKIP, or none)"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"geopriv.{name}: {result.failed} example(s) failed (see the output above)"
