"""geopriv.AdversaryError's repr: one short line a notebook can show (issue 44, item 9).

The dataclass's own repr printed the error and k-equivalent maps and the CRS's whole definition: about 100 lines.
"""

from __future__ import annotations

import math

import numpy as np

import geopriv

SOHO = (-15800.0, 6711900.0, -14600.0, 6713300.0)


def test_the_repr_is_one_short_line_of_the_measures():
    adv = geopriv.adversary_error(level=math.log(4), radius=200, area=SOHO, crs="EPSG:3857")
    text = repr(adv)
    assert "\n" not in text and len(text) < 250, text
    assert "array(" not in text and "PROJCRS" not in text and "Affine" not in text
    assert text.startswith("AdversaryError(Planar Laplace (geo-indistinguishability), epsilon 0.006931 per metre")
    assert f"expected error {adv.expected_error_m:,.1f} m" in text
    assert f"expected displacement {adv.displacement_m:,.1f} m" in text
    assert "uniform prior" in text and f"{adv.shape[0]} x {adv.shape[1]} cells of 28.85 m" in text
    assert text.endswith("EPSG:3857)")
    assert str(adv) == text


def test_the_repr_names_the_k_equivalent_and_a_local_crs():
    people = np.full((20, 20), 50.0)  # people per cell of the 100 m grid
    adv = geopriv.adversary_error(
        epsilon=0.01, area=(0, 0, 2000, 2000), crs="EPSG:32650", cell=100, population=people, units="per_cell"
    )
    assert f"k-equivalent {adv.k_equivalent:,.1f} people at 90 %" in repr(adv)
    lonlat = geopriv.adversary_error(epsilon=0.01, area=(-0.142, 51.509, -0.131, 51.517), crs="EPSG:4326")
    assert repr(lonlat).endswith("'local azimuthal equidistant, centred on the public area')")
