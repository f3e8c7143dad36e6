"""geopriv: location privacy with formal guarantees for GeoPandas and QGIS.

``import geopriv`` registers the ``priv`` accessor: ``gdf.priv.perturb(...)`` is
``geopriv.perturb(gdf, ...)``.
"""
from ._version import __version__
from . import daskhook  # noqa: F401  (ddf.priv on dask-geopandas frames, without importing dask here)
from . import accessor as _accessor  # noqa: F401  (registers gdf.priv)
from .frame import PublicFrame, public_frame
from .exceptions import (
    BudgetExceededError,
    CRSError,
    DistortionWarning,
    GeometryError,
    GeoprivError,
    GeoprivWarning,
    InfeasibleMechanismError,
    LocationAttributeError,
    MechanismFileError,
    MissingCRSError,
    RasterError,
)
from .mechanisms.planar_laplace import PlanarLaplace
from .mechanisms.eikonal import EikonalMechanism
from .mechanisms.optimal import OptimalMechanism, optimal_mechanism
from .privacy_map import PrivacyMap
from .metrics import displacement, utility_report, wasserstein, wasserstein_bound
from .perturb import perturb, resolve_epsilon
from .rng import make_rng
from .accounting import BudgetAccountant
from .mechanisms.predictive import FixedRate, FixedUtility
from .traces import sample_queries, sanitize_traces, trace_ledger
from .synthesize import synthesize, synthesize_xy
from .mechanisms.private_measure import PrivateMeasure
from .mechanisms.diffusion import DiffusionPath, diffuse, project_discrete
from .network import epsilon_of_distance, hop_distance, resistance_distance, diffuse_over_network
from .diffuse import diffuse_locations, network_distances
from .accounting import DiffusionLedger

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
    "make_rng",
    "sanitize_traces",
    "synthesize",
    "synthesize_xy",
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
    "FixedRate",
    "FixedUtility",
    "public_frame",
    "PublicFrame",
    "GeoprivError",
    "MissingCRSError",
    "CRSError",
    "GeometryError",
    "BudgetExceededError",
    "RasterError",
    "InfeasibleMechanismError",
    "LocationAttributeError",
    "MechanismFileError",
    "GeoprivWarning",
    "DistortionWarning",
]
