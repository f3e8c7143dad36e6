"""One name and one default per concept: every QGIS parameter named like the library keyword it sets
(``MAX_PER_USER`` for ``max_per_user=``) proposes the library's own default.

Derived from the algorithms' own declarations (``GEOPRIV_KEYWORDS``: the keywords each passes to which
geopriv function) and the library's signatures, so a default changed in the library and not in the
plugin (or the reverse) fails here.  Choice parameters (enums) map labels to values per algorithm and
are checked in each algorithm's tests.
"""

from __future__ import annotations

import inspect

import pytest

pytestmark = pytest.mark.qgis

#: a number field cannot hold the library's "auto": empty means it, and its label says so ("empty: ...")
AUTO = "auto"


def _library_function(name):
    import geopriv

    obj = geopriv
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _checked(provider):
    from qgis.core import QgsProcessingParameterEnum

    found = []
    for alg in provider.algorithms():
        for function, keywords in alg.GEOPRIV_KEYWORDS.items():
            signature = inspect.signature(_library_function(function)).parameters
            for keyword in keywords:
                param = alg.parameterDefinition(keyword.upper())
                if param is None or keyword not in signature or isinstance(param, QgsProcessingParameterEnum):
                    continue
                default = signature[keyword].default
                if (
                    default is inspect.Parameter.empty
                    or default is None
                    or not isinstance(default, (bool, int, float, str))
                ):
                    continue
                found.append((alg.name(), param.name(), param.defaultValue(), default, param.description()))
    return found


def test_qgis_parameters_propose_the_librarys_defaults(provider):
    checked = _checked(provider)
    assert len(checked) >= 10  # the test looks at something

    def same(qgis, lib, label):
        if lib == AUTO and qgis is None:
            return "empty" in label.lower()
        if isinstance(lib, (int, float)) and not isinstance(lib, bool) and qgis is not None:
            return float(qgis) == float(lib)
        return qgis == lib

    drift = [(alg, name, qgis, lib) for alg, name, qgis, lib, label in checked if not same(qgis, lib, label)]
    assert not drift, "QGIS defaults differ from the library's: " + "; ".join(
        f"{alg}.{name}: QGIS {qgis!r}, library {lib!r}" for alg, name, qgis, lib in drift
    )
