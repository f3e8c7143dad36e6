"""The provider: registration, every algorithm described, usable from the graphical modeler."""

from __future__ import annotations

import configparser

import pytest

from qgis_helpers import ROOT, data_path

pytestmark = pytest.mark.qgis

EXPECTED = {
    "geopriv:perturbpoints",
    "geopriv:buildprivacymap",
    "geopriv:perturblocationdependent",
    "geopriv:synthesize",
    "geopriv:diffuse",
    "geopriv:sanitizetraces",
    "geopriv:utilityreport",
    "geopriv:aggregate",
    "geopriv:heatmap",
    "geopriv:flows",
    "geopriv:adversaryerror",
    "geopriv:calibrate",
}


def test_provider_registers_every_algorithm(provider):
    from qgis.core import QgsApplication

    registry = QgsApplication.processingRegistry()
    assert registry.providerById("geopriv") is provider
    ids = {alg.id() for alg in provider.algorithms()}
    assert ids == EXPECTED
    for alg_id in ids:
        assert registry.algorithmById(alg_id) is not None


def test_every_algorithm_is_described(provider):
    for alg in provider.algorithms():
        assert alg.displayName() and alg.group() and alg.groupId()
        assert len(alg.shortHelpString()) > 200, alg.id()
        for param in alg.parameterDefinitions():
            assert param.description(), (alg.id(), param.name())
        names = " ".join(p.description().lower() for p in alg.parameterDefinitions())
        if "radius" in names or "grid" in names:
            assert "(metres" in names, alg.id()


def test_the_about_text_lists_every_algorithm(provider):
    """The QGIS plugin repository shows metadata.txt's about text: it names every algorithm as the toolbox does."""
    meta = configparser.ConfigParser()
    meta.read(ROOT / "metadata.txt", encoding="utf-8")
    about = meta["general"]["about"]
    missing = [alg.displayName() for alg in provider.algorithms() if alg.displayName() not in about]
    assert not missing, f"metadata.txt's about text does not name: {missing}"


def test_metadata_matches_library_and_plugin():
    import geopriv

    meta = configparser.ConfigParser()
    meta.read(ROOT / "metadata.txt", encoding="utf-8")
    general = meta["general"]
    assert general["version"] == geopriv.__version__
    assert general["hasProcessingProvider"] == "yes"
    assert general["qgisMinimumVersion"] == "3.22"
    assert (ROOT / "qgis_plugin" / general["icon"]).exists()
    # no invented addresses: empty until the project has a public repository and tracker
    for key in ("tracker", "repository", "homepage"):
        assert general.get(key, "") == "" or general[key].startswith("https://")


def test_class_factory_says_what_to_install_when_geopriv_is_missing(plugin, monkeypatch):
    import sys

    from geopriv_qgis import compat

    monkeypatch.setitem(sys.modules, "geopriv", None)  # import geopriv now fails
    with pytest.raises(ImportError, match=r"the plugin offers to install what is missing"):
        compat.check_geopriv()


def test_class_factory_says_what_to_install_when_a_dependency_of_geopriv_is_missing(plugin, monkeypatch):
    """``import geopriv`` imports no dependency: a missing one shows when the plugin's names are looked up."""
    import sys
    import types

    import geopriv

    from geopriv_qgis import compat

    def missing(name):
        raise ModuleNotFoundError("No module named 'geopandas'", name="geopandas")

    broken = types.ModuleType("geopriv")
    broken.__file__, broken.__version__, broken.__getattr__ = geopriv.__file__, geopriv.__version__, missing
    monkeypatch.setitem(sys.modules, "geopriv", broken)
    with pytest.raises(ImportError, match=r"which QGIS cannot import \(No module named 'geopandas'\)"):
        compat.check_geopriv()


def test_class_factory_names_missing_library_functions(plugin, monkeypatch):
    import sys
    import types

    import geopriv

    from geopriv_qgis import compat

    # an older geopriv, without utility_report (geopriv's own names are imported on first use: a
    # deleted one would come back, so the older version is a module of its own)
    older = types.ModuleType("geopriv")
    older.__file__, older.__version__ = geopriv.__file__, geopriv.__version__
    for name in geopriv.__all__:
        if name != "utility_report":
            setattr(older, name, getattr(geopriv, name))
    monkeypatch.setitem(sys.modules, "geopriv", older)
    with pytest.raises(ImportError, match="lacks utility_report"):
        compat.check_geopriv()


def test_algorithms_chain_in_the_graphical_modeler(provider):
    """A model 'perturb, then report utility' built with the modeler API runs end to end."""
    import processing
    from qgis.core import (
        QgsProcessingModelAlgorithm,
        QgsProcessingModelChildAlgorithm,
        QgsProcessingModelChildParameterSource as Source,
        QgsProcessingModelOutput,
        QgsProcessingModelParameter,
        QgsProcessingParameterFeatureSource,
    )

    model = QgsProcessingModelAlgorithm("perturb and report", "tests")
    model.addModelParameter(
        QgsProcessingParameterFeatureSource("points", "Points"), QgsProcessingModelParameter("points")
    )
    perturb = QgsProcessingModelChildAlgorithm("geopriv:perturbpoints")
    perturb.setChildId("perturb")
    perturb.addParameterSources("INPUT", [Source.fromModelParameter("points")])
    perturb.addParameterSources("RADIUS", [Source.fromStaticValue(50.0)])
    perturb.addParameterSources("SEED", [Source.fromStaticValue(3)])
    model.addChildAlgorithm(perturb)
    report = QgsProcessingModelChildAlgorithm("geopriv:utilityreport")
    report.setChildId("report")
    report.addParameterSources("ORIGINAL", [Source.fromModelParameter("points")])
    report.addParameterSources("RELEASED", [Source.fromChildOutput("perturb", "OUTPUT")])
    output = QgsProcessingModelOutput("utility", "Utility")
    output.setChildId("report")
    output.setChildOutputName("OUTPUT")
    report.setModelOutputs({"utility": output})
    model.addChildAlgorithm(report)

    results = processing.run(
        model, {"points": data_path("soho_cholera.gpkg", "deaths"), "report:utility": "TEMPORARY_OUTPUT"}
    )
    table = results["report:utility"]
    rows = [f.attributes() for f in table.getFeatures()]
    names = [f.name() for f in table.fields()]
    assert len(rows) == 1
    row = dict(zip(names, rows[0]))
    assert row["n"] == 324
    # ln 4 within 50 m: mean displacement 2 / epsilon = 72 m
    assert 55 < row["mean_m"] < 90


def test_an_error_while_setting_up_parameters_does_not_abort_qgis(plugin):
    """QGIS calls initAlgorithm from C++ (QgsProcessingAlgorithm::create): an exception escaping it aborts the whole
    QGIS process.  A failing set-up is logged and the algorithm refuses to run, with the reason."""
    from qgis.core import QgsProcessingContext

    from geopriv_qgis.algorithms.perturb_points import PerturbPoints

    class Broken(PerturbPoints):
        def initAlgorithm(self, config=None):  # noqa: N802
            raise KeyError("kernels")

        def createInstance(self):  # noqa: N802
            return Broken()

    alg = Broken().create({})  # C++ create() -> initAlgorithm: must come back, not abort
    assert alg.init_error and "could not be set up" in alg.init_error
    ok, message = alg.checkParameterValues({}, QgsProcessingContext())
    assert not ok and message == alg.init_error
