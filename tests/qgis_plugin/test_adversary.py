"""geopriv:adversaryerror and geopriv:calibrate (measured privacy) in a real, headless QGIS.

Real GeoTIFF outputs and tables; the shipped central Tokyo population raster for the
k-equivalent.  Both algorithms read no data: their results must equal the library's own call with
the same public parameters (the plugin holds no logic), and their parameters carry the library's
names and defaults.  Deterministic (no randomness is involved).
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from qgis_helpers import Log, attributes, data_path

pytestmark = [pytest.mark.qgis]

BOUNDS = (400_000, 4_400_000, 404_000, 4_403_000)  # 4 x 3 km in UTM 50N, round numbers
EXTENT = f"{BOUNDS[0]},{BOUNDS[2]},{BOUNDS[1]},{BOUNDS[3]} [EPSG:32650]"


def test_adversary_error_is_the_librarys_and_writes_the_map(run, tmp_path):
    import geopriv
    import rasterio

    log = Log()
    out = str(tmp_path / "adversary.tif")
    result = run(
        "adversaryerror",
        {"LEVEL": "ln4", "RADIUS": 200, "BOUNDS": EXTENT, "CRS": "EPSG:32650", "CELL": 100, "OUTPUT": out},
        feedback=log,
    )
    library = geopriv.adversary_error(level=math.log(4), radius=200, area=BOUNDS, crs="EPSG:32650", cell=100)
    assert result["ADVERSARY_ERROR_M"] == pytest.approx(library.expected_error_m, rel=1e-12)
    assert result["DISPLACEMENT_M"] == pytest.approx(library.displacement_m, rel=1e-12)
    assert result["K_EQUIVALENT"] is None
    with rasterio.open(out) as ds:
        assert ds.count == 1 and ds.crs.to_epsg() == 32650 and (ds.width, ds.height) == (40, 30)
        np.testing.assert_allclose(ds.read(1), library.error_map.astype(np.float32))
    assert any("Optimal adversary's expected error" in line for line in log.infos)


def test_k_equivalent_from_a_population_raster(run, tmp_path):
    import geopriv

    tokyo = data_path("tokyo_density_40.tif")
    pm = geopriv.PrivacyMap.from_population(tokyo, epsilon_range=(1e-4, 5e-4))
    b = pm.bounds
    extent = f"{b[0]},{b[2]},{b[1]},{b[3]} [{pm.crs.to_authority()[0]}:{pm.crs.to_authority()[1]}]"
    result = run(
        "adversaryerror",
        {
            "EPSILON": math.log(4) / 1000,
            "BOUNDS": extent,
            "CRS": ":".join(pm.crs.to_authority()),
            "POPULATION": tokyo,
            "PRIOR": 1,
            "OUTPUT": str(tmp_path / "k.tif"),
        },
    )
    library = geopriv.adversary_error(
        epsilon=math.log(4) / 1000, area=b, crs=pm.crs, population=tokyo, prior="population"
    )
    assert result["K_EQUIVALENT"] == pytest.approx(library.k_equivalent, rel=1e-9) and result["K_EQUIVALENT"] > 0


def test_calibrate_is_the_librarys(run):
    import geopriv

    result = run(
        "calibrate",
        {
            "TARGET": 0,
            "VALUE": 300,
            "RADIUS": 200,
            "BOUNDS": EXTENT,
            "CRS": "EPSG:32650",
            "CELL": 200,
            "OUTPUT": "TEMPORARY_OUTPUT",
        },
    )
    library = geopriv.calibrate("adversary_error", 300, area=BOUNDS, crs="EPSG:32650", cell=200)
    assert result["EPSILON"] == pytest.approx(library.epsilon_per_m, rel=1e-12)
    assert result["LEVEL"] == pytest.approx(library.epsilon_per_m * 200, rel=1e-12)
    rows = attributes(result["OUTPUT"])
    assert len(rows) == len(library.curve)
    assert [r[0] for r in rows] == pytest.approx(library.curve["epsilon_per_m"].tolist())


def test_an_area_is_needed(run):
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException):
        run("adversaryerror", {"LEVEL": "ln4", "RADIUS": 200, "CRS": "EPSG:32650", "OUTPUT": "TEMPORARY_OUTPUT"})


def test_parameters_are_the_librarys(provider):
    import geopriv

    for name, function in (("adversaryerror", "adversary_error"), ("calibrate", "calibrate")):
        alg = provider.algorithm(name)
        assert alg.group() == "Measured privacy" and len(alg.shortHelpString()) > 200
        for fn, keywords in alg.GEOPRIV_KEYWORDS.items():
            assert set(keywords) <= set(inspect.signature(getattr(geopriv, fn)).parameters), fn
        library = inspect.signature(getattr(geopriv, function)).parameters
        assert alg.PRIOR_CHOICES[alg.parameterDefinition("PRIOR").defaultValue()] == library["prior"].default
        assert alg.UNIT_CHOICES[alg.parameterDefinition("UNITS").defaultValue()] == library["units"].default
