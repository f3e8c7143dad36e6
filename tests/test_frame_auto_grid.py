"""An automatic lattice finer than float coordinates is blamed on epsilon, not on a grid nobody gave (issue 44.4a).

``--epsilon 1e9`` used to say "The grid of 5e-11 m is finer than the precision of coordinates ...
allows" although no grid was given: the automatic grid (1/(20 epsilon)) follows epsilon, so the
message now says epsilon is so large that the lattice it implies is finer than float precision,
the largest epsilon the automatic grid allows here and, when one exists, an explicit grid that
would do.  A grid the user gave is still named as theirs.  The shipped Soho deaths (EPSG:3857).
"""

from __future__ import annotations

import pyogrio
import pytest

import geopriv
from geopriv.exceptions import ParameterError, user_message

from .test_cli import SOHO, one_line_error, run

#: epsilons this large protect nothing: said (a WeakProtectionWarning), not tested here
pytestmark = pytest.mark.filterwarnings("ignore::geopriv.WeakProtectionWarning")


@pytest.fixture(scope="module")
def deaths():
    return pyogrio.read_dataframe(SOHO, layer="deaths")


def test_a_huge_epsilon_is_named_not_the_grid(deaths):
    with pytest.raises(ParameterError) as err:
        geopriv.perturb(deaths, epsilon=1e9, rng=0)
    message = str(err.value)
    assert "The grid of" not in message and "no grid was given" in message
    assert "Epsilon 1e+09 per ground metre is so large that the lattice it implies is finer" in message
    assert "1/(20 epsilon) = 5e-11 m" in message and "WGS 84 / Pseudo-Mercator" in message
    assert err.value.fix.kind == "smaller_epsilon" and "level=math.log(4), radius=200" in message
    assert "grid=" not in message  # no explicit grid helps: any the coordinates hold is coarser than the noise
    cli = user_message(err.value, "cli")
    assert "--level ln4 --radius 200" in cli and "level=" not in cli and "--grid" not in cli
    assert "'Epsilon'" not in cli and "math." not in user_message(err.value, "qgis")


def test_the_largest_epsilon_and_the_explicit_grids_said_do_work(deaths):
    with pytest.raises(ParameterError) as err:
        geopriv.perturb(deaths, epsilon=2e4, rng=0)
    message = str(err.value)
    largest = float(message.split("at most ")[1].split(" per ground metre")[0])
    low, high = (float(v) for v in message.split("explicit grid= between ")[1].split(" metres")[0].split(" and "))
    assert low < high <= 2 / 2e4
    for grid in (low, high):  # the window said is allowed
        assert geopriv.perturb(deaths, epsilon=2e4, grid=grid, rng=0).attrs["geopriv"]["grid_m"] == grid
    assert geopriv.perturb(deaths, epsilon=largest, rng=0).attrs["geopriv"]["epsilon_per_m"] == largest
    with pytest.raises(ParameterError, match="no grid was given"):
        geopriv.perturb(deaths, epsilon=largest * 1.1, rng=0)


def test_a_given_grid_is_still_named_as_given(deaths):
    with pytest.raises(ParameterError) as err:
        geopriv.perturb(deaths, epsilon=2e4, grid=1e-6, rng=0)
    message = str(err.value)
    assert message.startswith("The grid of 1e-06 m is finer than the precision") and "no grid was given" not in message
    assert "Use a coarser grid." in message and "smaller epsilon" not in message


def test_a_synthetic_release_says_its_automatic_grid_comes_from_the_cells(deaths):
    x, y = -15000.0, 6712500.0
    with pytest.raises(ParameterError) as err:  # a depth-30 tree over a 1 m square: cells of 3e-5 m
        geopriv.synthesize(_two_points(deaths, x, y), 1.0, bounds=(x, y, x + 1, y + 1), depth=30, rng=0)
    message = str(err.value)
    assert "no grid was given" in message and "depth-30 tree" in message and "The grid of" not in message
    assert "depth=" in message and "--depth" in user_message(err.value, "cli")


def _two_points(deaths, x, y):
    import geopandas as gpd

    return gpd.GeoDataFrame(geometry=gpd.points_from_xy([x + 0.25, x + 0.75], [y + 0.25, y + 0.75]), crs=deaths.crs)


def test_the_cli_names_epsilon_and_its_options(capsys, tmp_path):
    out = tmp_path / "out.gpkg"
    code, _, err = run(capsys, "perturb", SOHO, out, "--layer", "deaths", "--epsilon", "1e9", "--no-progress")
    line = one_line_error(err, "Epsilon 1e+09 per ground metre is so large", "no grid was given", "--level ln4")
    assert code == 2 and not out.exists() and "The grid of" not in line and "level=" not in line
    code, _, err = run(capsys, "perturb", SOHO, out, "--layer", "deaths", "--epsilon", "2e4", "--no-progress")
    line = one_line_error(err, "no grid was given", "or give --grid between ")
    assert code == 2 and not out.exists() and "grid=" not in line


def test_traces_and_diffusion_blame_epsilon_too():
    """The other releases that derive a lattice from epsilon say the same (not "The grid of ...")."""
    import geopandas as gpd
    import pandas as pd
    from shapely.geometry import Point

    fixes = gpd.GeoDataFrame(
        {"trip": [1, 1, 1], "t": pd.to_datetime(["2008-01-01 00:00", "2008-01-01 00:01", "2008-01-01 00:02"])},
        geometry=[Point(-15000, 6712500), Point(-15010, 6712510), Point(-15020, 6712520)],
        crs="EPSG:3857",
    )
    with pytest.raises(ParameterError) as err:
        geopriv.sanitize_traces(
            fixes,
            traj_id="trip",
            time="t",
            epsilon=1e9,
            rate=0.033,
            grid="auto",
            bounds=(-15800, 6711900, -14600, 6713300),
            rng=0,
        )
    assert "The grid of" not in str(err.value) and "no grid was given" in str(err.value)
    people = gpd.GeoDataFrame(
        geometry=[Point(-15000, 6712500), Point(-15100, 6712600)], index=["a", "b"], crs="EPSG:3857"
    )
    with pytest.raises(ParameterError) as err:
        geopriv.diffuse_locations(
            people, lambda hops: 1e9, source="a", graph=[("a", "b")], bounds=(-15800, 6711900, -14600, 6713300), rng=0
        )
    assert "The grid of" not in str(err.value) and "no grid was given" in str(err.value)
