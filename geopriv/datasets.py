"""The small real data sets shipped with geopriv, reachable from anywhere.

Every example in the README, the docs and the docstrings reads its data through
:func:`get_path`, so it runs where the reader stands, after ``pip install geopriv`` or in a clone,
with nothing copied beside it (in the spirit of ``geodatasets.get_path``)::

    >>> import geopandas as gpd
    >>> from geopriv import datasets
    >>> deaths = gpd.read_file(datasets.get_path("soho"), layer="deaths")
    >>> len(deaths)
    324
    >>> sorted(datasets.names())[:3]
    ['geolife', 'soho', 'soho_study_area']

From a shell, ``geopriv datasets`` lists them and ``geopriv datasets soho`` prints one path:
``geopriv perturb "$(geopriv datasets soho)" out.gpkg --layer deaths ...``.

The files are public data (BSD-3-Clause); their sources are in ``geopriv/data/README.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Dataset", "DATASETS", "get_path", "names"]

#: the folder of the shipped files, inside the installed package
DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Dataset:
    """One shipped file: its short name, file, CRS and what it holds."""

    name: str
    file: str
    crs: str
    description: str

    @property
    def path(self) -> Path:
        return DATA / self.file


#: the shipped data sets, by short name
DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "soho",
            "soho_cholera.gpkg",
            "EPSG:3857",
            "Snow's 1854 Soho cholera map: layers 'deaths' (324 addresses, their deaths in column Count) and 'pumps' (13 pumps)",
        ),
        Dataset(
            "soho_study_area",
            "study_area.gpkg",
            "EPSG:3857",
            "the Soho study area, one polygon: a declared area (--region) for Soho releases",
        ),
        Dataset(
            "tokyo_density_200",
            "tokyo_density_200.tif",
            "EPSG:30166",
            "population density of the Tokyo area, 200 m cells (a privacy map's input)",
        ),
        Dataset(
            "tokyo_density_40",
            "tokyo_density_40.tif",
            "EPSG:30166",
            "population density of central Tokyo, 40 m cells (a location-dependent mechanism's input)",
        ),
        Dataset(
            "tokyo_municipalities",
            "tokyo_municipalities.gpkg",
            "EPSG:30166",
            "the 262 Tokyo-area municipality polygons behind the density rasters",
        ),
        Dataset(
            "geolife",
            "geolife_sample.gpkg",
            "EPSG:4326",
            "5,908 GPS fixes of 5 GeoLife trajectories (Beijing, 2008-2009): trajectory_id, tracker, t",
        ),
    )
}


def names() -> list[str]:
    """The short names :func:`get_path` knows."""
    return list(DATASETS)


def get_path(name: str) -> Path:
    """The path of a shipped data set, by its short name (``"soho"``) or its file name.

    Parameters
    ----------
    name : str
        One of :func:`names` (``"soho"``, ``"soho_study_area"``, ``"tokyo_density_200"``,
        ``"tokyo_density_40"``, ``"tokyo_municipalities"``, ``"geolife"``), or the file's name
        (``"soho_cholera.gpkg"``).

    Returns
    -------
    pathlib.Path
        An absolute path to the file inside the installed package; read it, do not write to it.

    Raises
    ------
    KeyError
        For an unknown name; the message lists the known ones.
    """
    dataset = DATASETS.get(name) or next((d for d in DATASETS.values() if d.file == name), None)
    if dataset is None:
        known = ", ".join(repr(n) for n in DATASETS)
        raise KeyError(f"no shipped data set is called {name!r}: the names are {known} (geopriv.datasets.names())")
    path = dataset.path
    if not path.is_file():  # a broken installation, not the caller's mistake
        raise FileNotFoundError(
            f"the shipped data set {dataset.name!r} ({dataset.file}) is missing from this installation of "
            "geopriv: reinstall it (pip install --force-reinstall geopriv)"
        )
    return path
