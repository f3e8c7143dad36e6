"""The release files agree with the package: CITATION.cff, CHANGELOG.md, metadata.txt and the one version.

CITATION.cff is checked here for the structure of the Citation File Format 1.2.0 (the keys each
entry needs, their types, the reference types and DOI syntax of the schema), without the
schema's validator: ``cffconvert --validate`` (which pins jsonschema < 4, so it is not in the
test environments) accepted this file when it was written.
"""

from __future__ import annotations

import configparser
import re
import tomllib

import yaml

import geopriv

from .conftest import ROOT

#: the reference types of CFF 1.2.0 (schema.json, definitions.reference.properties.type.enum)
CFF_TYPES = {
    "art",
    "article",
    "audiovisual",
    "bill",
    "blog",
    "book",
    "catalogue",
    "conference-paper",
    "conference",
    "data",
    "database",
    "dictionary",
    "edited-work",
    "encyclopedia",
    "film-broadcast",
    "generic",
    "government-document",
    "grant",
    "hearing",
    "historical-work",
    "legal-case",
    "legal-rule",
    "magazine-article",
    "manual",
    "map",
    "multimedia",
    "music",
    "newspaper-article",
    "pamphlet",
    "patent",
    "personal-communication",
    "proceedings",
    "report",
    "serial",
    "slides",
    "software-code",
    "software-container",
    "software-executable",
    "software-virtual-machine",
    "software",
    "sound-recording",
    "standard",
    "statute",
    "thesis",
    "unpublished",
    "video",
    "website",
}
#: CFF 1.2.0's DOI pattern (schema.json, definitions.doi)
DOI = re.compile(r"^10\.\d{4,9}(\.\d+)?/[A-Za-z0-9:/_;\-\.\(\)\[\]\\]+$")
#: the papers the mechanisms come from (README.md's capability table and the mechanisms' docstrings):
#: (first author's family name, year, a word of the title)
PAPERS = [
    ("Andrés", 2013, "geo-indistinguishability"),
    ("Koufogiannis", 2016, "location-dependent"),
    ("Koufogiannis", 2018, "diffusing"),
    ("Chatzikokolakis", 2014, "predictive"),
    ("Boedihardjo", 2024, "random walks"),
    ("He", 2023, "synthetic data"),
    ("Hay", 2010, "consistency"),
    ("Canonne", 2020, "discrete gaussian"),
]


def _cff():
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def _check_authors(authors, where):
    assert isinstance(authors, list) and authors, f"{where}: authors must be a non-empty list"
    for author in authors:
        assert isinstance(author, dict), where
        person = {"family-names", "given-names"} & set(author)
        assert person or "name" in author, f"{where}: an author needs family-names/given-names or name: {author}"
        assert all(isinstance(v, str) and v for v in author.values()), f"{where}: {author}"


def test_citation_cff_has_the_structure_of_cff_1_2_0_and_geoprivs_version_and_license():
    cff = _cff()
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title"):
        assert isinstance(cff[key], str) and cff[key].strip(), key
    _check_authors(cff["authors"], "CITATION.cff")
    assert cff["type"] == "software"
    assert cff["version"] == geopriv.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert cff["license"] == project["license"]
    assert all(isinstance(k, str) for k in cff["keywords"])


def test_every_reference_is_well_formed():
    for ref in _cff()["references"]:
        where = ref.get("title", ref)
        assert ref["type"] in CFF_TYPES, where
        assert isinstance(ref["title"], str) and ref["title"].strip(), where
        _check_authors(ref["authors"], where)
        assert isinstance(ref["year"], int), where
        if "doi" in ref:
            assert DOI.match(str(ref["doi"])), where
        if "url" in ref:
            assert re.match(r"^https?://", ref["url"]), where
        for key in ("conference", "publisher"):
            if key in ref:
                assert isinstance(ref[key], dict) and ref[key].get("name"), f"{where}: {key} is an entity with a name"
        if ref["type"] == "article":
            assert ref.get("journal"), f"{where}: an article names its journal"
        if ref["type"] == "conference-paper":
            assert ref.get("collection-title") or ref.get("conference"), where


def test_the_papers_behind_the_mechanisms_are_cited():
    refs = _cff()["references"]
    for family, year, word in PAPERS:
        found = [
            r
            for r in refs
            if r["authors"][0].get("family-names") == family and r["year"] == year and word in r["title"].lower()
        ]
        assert len(found) == 1, (family, year, word)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = [line for line in readme.splitlines() if line.startswith("| ") and "priv." in line]
    assert table, "README.md's capability table is gone"
    cited = {r["authors"][0].get("family-names") for r in refs}
    for line in table:  # each paper column's first authors ("Andrés et al., CCS 2013"; "A, B, C, PTRF 2024; ...")
        paper = line.split("|")[2]
        for part in paper.split(";"):
            first = part.strip().split(",")[0].split(" ")[0]
            assert first in cited, f"README cites {part.strip()!r}, CITATION.cff does not"


def test_the_version_has_one_source_that_every_release_file_agrees_with():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "geopriv._version.__version__"}
    meta = configparser.ConfigParser()
    meta.read(ROOT / "metadata.txt", encoding="utf-8")
    assert meta["general"]["version"].strip() == geopriv.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    released = re.findall(r"^## \[(\d[^\]]*)\]", changelog, flags=re.M)
    assert released and released[0] == geopriv.__version__, released
    assert re.search(r"^## \[Unreleased\]", changelog, flags=re.M)
    assert re.search(r"^### (Added|Changed|Deprecated|Removed|Fixed|Security)$", changelog, flags=re.M)
