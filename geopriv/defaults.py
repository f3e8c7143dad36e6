"""Defaults that light modules need too: plain constants, no imports.

``geopriv.accessor`` is registered as soon as pandas is imported and must not import the numeric
stack then; its signatures repeat the library's defaults, so those live here, one name each, and
the modules that own the concepts (``geopriv.frame``, ``geopriv.metrics``) import them from here.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_DISTORTION", "DEFAULT_QUANTILE", "SUGGESTED_EPSILON_RANGE"]

#: A projected CRS whose scale varies by at most this much over its public area is used as is.
#: Variation costs utility only (noise is scaled for the largest scale), never privacy.
DEFAULT_MAX_DISTORTION = 0.01

#: :func:`geopriv.utility_report`'s alpha is the radius containing this share of the displacements.
DEFAULT_QUANTILE = 0.9

#: The privacy map's suggested epsilon range (per ground metre), used by the documentation's and the command
#: line's examples and proposed by the QGIS dialog: ln 4 within 3,000 m where nobody lives, within 600 m at the
#: highest density.  ``PrivacyMap.from_population`` itself has no default: a rule must be chosen.
SUGGESTED_EPSILON_RANGE = (1.3862943611198906 / 3000, 1.3862943611198906 / 600)
