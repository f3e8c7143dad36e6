"""geopriv datasets: the shipped data's paths, for shell examples that run from any folder."""

from __future__ import annotations

from .common import CLIError


def _cmd_datasets(args) -> int:
    from .. import datasets

    if args.name is None:
        width = max(map(len, datasets.DATASETS))
        for name, dataset in datasets.DATASETS.items():
            print(f"{name:<{width}}  {dataset.crs:<10}  {dataset.description}")
        print(f"\nfolder: {datasets.DATA}")
        return 0
    try:
        path = datasets.get_path(args.name)
    except KeyError:
        known = ", ".join(datasets.names())
        raise CLIError(
            f"no shipped data set is called {args.name!r}: the names are {known} ('geopriv datasets' lists them)"
        )
    print(path)
    return 0


EPILOG_DATASETS = """examples:
  geopriv datasets                  # the names, CRS and contents of the shipped data
  geopriv datasets soho             # the path of one, to use anywhere:
  geopriv perturb "$(geopriv datasets soho)" deaths_private.gpkg --layer deaths --level ln4 --radius 200

In Python the same paths are geopriv.datasets.get_path("soho").
"""


def datasets_arguments(d) -> None:
    d.add_argument("name", nargs="?", help="a data set's name (soho, geolife, ...): print its path; none: list them")
    d.set_defaults(func=_cmd_datasets)
