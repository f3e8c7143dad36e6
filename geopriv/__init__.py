"""geopriv: location privacy with formal guarantees for GeoPandas and QGIS.

``import geopriv`` registers the ``priv`` accessor: ``gdf.priv.perturb(...)`` is
``geopriv.perturb(gdf, ...)``.

``import geopriv`` itself imports no third-party package (issue 31: start-up in a few hundredths of
a second, for the command line and QGIS too): each public name is imported from its module when it
is first used (PEP 562 ``__getattr__``), and ``gdf.priv`` is registered the moment pandas is
imported, or now if it already is (``geopriv.importhook``; ``ddf.priv`` the same way when
dask_geopandas is, ``geopriv.daskhook``).
"""

import importlib
import sys
import types

from . import daskhook  # noqa: F401  (ddf.priv on dask-geopandas frames, without importing dask here)
from ._version import __version__
from .exceptions import (
    BudgetExceededError,
    BudgetStoreError,
    CRSError,
    DistortionWarning,
    Fix,
    GeometryError,
    GeoprivError,
    GeoprivWarning,
    InfeasibleMechanismError,
    LocationAttributeError,
    LowUtilityWarning,
    MechanismFileError,
    MissingCRSError,
    RasterError,
    WeakProtectionWarning,
)
from .importhook import when_imported

#: each public name that is not imported above, and the module it is imported from on first use
_LAZY = {
    "PublicFrame": ".frame",
    "public_frame": ".frame",
    "PlanarLaplace": ".mechanisms.planar_laplace",
    "EikonalMechanism": ".mechanisms.eikonal",
    "OptimalMechanism": ".mechanisms.optimal",
    "optimal_mechanism": ".mechanisms.optimal",
    "PrivacyMap": ".privacy_map",
    "displacement": ".metrics",
    "utility_report": ".metrics",
    "wasserstein": ".metrics",
    "wasserstein_bound": ".metrics",
    "perturb": ".perturb",
    "resolve_epsilon": ".perturb",
    "make_rng": ".rng",
    "BudgetAccountant": ".accounting",
    "BudgetStore": ".budget",
    "DiffusionLedger": ".accounting",
    "FixedRate": ".mechanisms.predictive",
    "FixedUtility": ".mechanisms.predictive",
    "sample_queries": ".traces",
    "sanitize_traces": ".traces",
    "trace_ledger": ".traces",
    "synthesize": ".synthesize",
    "synthesize_xy": ".synthesize",
    "PrivateMeasure": ".mechanisms.private_measure",
    "DiffusionPath": ".mechanisms.diffusion",
    "diffuse": ".mechanisms.diffusion",
    "project_discrete": ".mechanisms.diffusion",
    "epsilon_of_distance": ".network",
    "hop_distance": ".network",
    "resistance_distance": ".network",
    "diffuse_over_network": ".network",
    "diffuse_locations": ".diffuse",
    "aggregate": ".aggregate",
    "heatmap": ".aggregate",
    "flows": ".aggregate",
    "Heatmap": ".aggregate",
    "network_distances": ".diffuse",
    "show_versions": ".versions",
    "adversary_error": ".adversary",
    "AdversaryError": ".adversary",
    "empirical_adversary_error": ".adversary",
    "calibrate": ".adversary",
    "Calibration": ".adversary",
    "home_inference": ".attacks",
    "home_attack": ".attacks",
    "top_places_uniqueness": ".attacks",
    "top_places_attack": ".attacks",
    "query_error": ".attacks",
    "release_report": ".report",
    "report_path": ".report",
}

#: the core's modules, imported on first attribute access as ``import geopriv`` used to import them all
#: (``geopriv.cli``, ``geopriv.plot`` and ``geopriv.distributed`` are imported by name, as before)
_SUBMODULES = frozenset(
    {
        "accessor",
        "accounting",
        "adversary",
        "aggregate",
        "attacks",
        "attributes",
        "cells",
        "counting",
        "crs",
        "daskhook",
        "datasets",
        "defaults",
        "diffuse",
        "exceptions",
        "frame",
        "importhook",
        "io",
        "keys",
        "mechanisms",
        "metrics",
        "network",
        "parsing",
        "perturb",
        "points",
        "precision",
        "privacy_map",
        "progress",
        "provenance",
        "release",
        "report",
        "rng",
        "synthesize",
        "traces",
    }
)

#: public functions named like a module: ``geopriv.perturb`` is the function, never the module
_SHADOWED = frozenset(_LAZY) & _SUBMODULES


class _Package(types.ModuleType):
    """geopriv's module type: importing ``geopriv.perturb`` (the module) keeps ``geopriv.perturb`` the function.

    The import system binds each submodule on its package when it is first imported; before the
    names were lazy, ``from .perturb import perturb`` here rebound them afterwards.
    """

    def __setattr__(self, name, value):
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # once: later look-ups do not come here
        return value
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)


def _register_accessor():
    importlib.import_module(".accessor", __name__)  # registers gdf.priv and s.priv on pandas' classes


when_imported("pandas", _register_accessor)

__all__ = [
    "__version__",
    "perturb",
    "resolve_epsilon",
    "PlanarLaplace",
    "PrivacyMap",
    "EikonalMechanism",
    "OptimalMechanism",
    "optimal_mechanism",
    "displacement",
    "utility_report",
    "wasserstein",
    "wasserstein_bound",
    "adversary_error",
    "AdversaryError",
    "empirical_adversary_error",
    "calibrate",
    "Calibration",
    "home_inference",
    "home_attack",
    "top_places_uniqueness",
    "top_places_attack",
    "query_error",
    "release_report",
    "report_path",
    "make_rng",
    "sanitize_traces",
    "synthesize",
    "synthesize_xy",
    "aggregate",
    "heatmap",
    "flows",
    "Heatmap",
    "PrivateMeasure",
    "diffuse",
    "diffuse_locations",
    "diffuse_over_network",
    "network_distances",
    "DiffusionPath",
    "DiffusionLedger",
    "project_discrete",
    "epsilon_of_distance",
    "hop_distance",
    "resistance_distance",
    "sample_queries",
    "trace_ledger",
    "BudgetAccountant",
    "BudgetStore",
    "FixedRate",
    "FixedUtility",
    "public_frame",
    "PublicFrame",
    "GeoprivError",
    "MissingCRSError",
    "CRSError",
    "GeometryError",
    "BudgetExceededError",
    "BudgetStoreError",
    "RasterError",
    "InfeasibleMechanismError",
    "LocationAttributeError",
    "MechanismFileError",
    "GeoprivWarning",
    "DistortionWarning",
    "WeakProtectionWarning",
    "LowUtilityWarning",
    "Fix",
    "show_versions",
]
