"""A release that protects almost nothing is warned about before its file is written (issue 44.4c).

``--radius 0.001`` used to write the file, print "released ...", and only then warn; the library
warns in its plan, before any noise (and before a budget store is charged).  The command line now
prints the plan's warnings before it writes; a refused input still prints its error alone.  The
warning's advice no longer tells a user who gave ``--level``/``--radius`` that ``--epsilon`` was
the mistake.  Real files, the shipped Soho deaths.
"""

from __future__ import annotations

import math
import warnings

import pyogrio
import pytest

import geopriv
from geopriv.exceptions import WeakProtectionWarning, user_message

from .test_cli import SOHO, one_line_error, run


def test_the_library_warns_before_any_noise_or_charge(tmp_path):
    deaths = pyogrio.read_dataframe(SOHO, layer="deaths")
    with geopriv.BudgetStore(f"sqlite:///{tmp_path / 'b.db'}", create=True) as store:
        store.grant(1.0, unit="epsilon/m")
        with warnings.catch_warnings():
            warnings.simplefilter("error", WeakProtectionWarning)
            with pytest.raises(WeakProtectionWarning) as caught:
                geopriv.perturb(deaths, level=math.log(4), radius=0.001, budget_store=store, person="Id")
        assert store.releases().empty and store.balances().empty  # refused before the charge (and the noise)
    cli = user_message(caught.value, "cli")
    assert "--level ln4 --radius 200" in cli and "instead" not in cli  # the radius is the mistake, not --epsilon


def test_the_cli_warns_before_it_writes(capsys, tmp_path):
    out = tmp_path / "out.gpkg"
    args = ("perturb", SOHO, out, "--layer", "deaths", "--level", "ln4", "--radius", "0.001", "--no-progress")
    code, _, err = run(capsys, *args)
    assert code == 0 and out.exists(), err
    lines = err.splitlines()
    warning = [i for i, line in enumerate(lines) if line.startswith("geopriv: warning: ")]
    written = [i for i, line in enumerate(lines) if line.startswith("released 324 points to")]
    assert len(warning) == 1 and len(written) == 1 and warning[0] < written[0], err
    assert "almost no protection" in lines[warning[0]] and "ln 4 within 0.001 m" in lines[warning[0]]


def test_a_refused_input_still_prints_its_error_alone(capsys, tmp_path):
    out = tmp_path / "out.gpkg"
    narrow = ("--bounds", "-15000", "6711900", "-14600", "6713300")  # leaves out the deaths west of x = -15000
    args = ("perturb", SOHO, out, "--layer", "deaths", "--level", "ln4", "--radius", "0.001", *narrow)
    code, _, err = run(capsys, *args)
    assert code == 2 and "warning" not in err and not out.exists()
    one_line_error(err, "outside the declared study area")
