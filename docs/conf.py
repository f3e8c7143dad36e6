"""Sphinx configuration of geopriv's documentation site (built by scripts/docs.sh, warnings as errors).

The pages are the Markdown guides in docs/*.md (through myst-parser, as they are: tests/test_docs.py runs
their code), the API reference of every name in ``geopriv.__all__`` (autosummary and numpydoc; its list is
written here, at each build, into api/generated/) and the command line's reference (sphinx-argparse).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))  # geopriv_cli_docs: the CLI parser with every command's options

import geopriv  # noqa: E402

project = "geopriv"
author = "geopriv developers"
copyright = "geopriv developers"
release = geopriv.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinxarg.ext",
    "matplotlib.sphinxext.plot_directive",  # examples.rst: figures run at build time
    "geopriv_qgis_docs",  # qgis_algorithms.rst: the provider's own help strings (docs/_generated)
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "_generated", "img", "Thumbs.db", ".DS_Store"]
smartquotes = False  # options stay as typed: --level, not an en dash (the CLI's help texts, the guides' code)

# Markdown pages: their links to sections (privacy.md#keyed-noise-...) go to headings down to ####
myst_heading_anchors = 4
# ::: fences for directives (index.md's toctrees and cards): tests/test_docs.py reads every ``` fence as code
myst_enable_extensions = ["colon_fence"]

# API reference: one page per public name, generated at build time
autosummary_generate = True
autodoc_typehints = "none"  # the numpydoc docstrings say the types
numpydoc_show_class_members = False  # the class pages list their members themselves (autosummary's template)
numpydoc_class_members_toctree = False

# examples.rst: the examples of one page share a namespace (like one session), PNG only
plot_working_directory = str(HERE)
plot_formats = [("png", 100)]
plot_html_show_formats = False
plot_html_show_source_link = False

html_theme = "pydata_sphinx_theme"
html_title = f"geopriv {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # the guides' titles are long: two of them and "More" keep the header on one line at 1280 px
    "header_links_before_dropdown": 2,
    # No empty "Section Navigation" sidebar: the guides are flat pages (no sub-pages), but with
    # includehidden (the theme's default) the theme assumes every page below the root has a section
    # to show, and draws the heading with nothing under it.  Without it the theme looks, and drops
    # the primary sidebar wherever the page's section has no sub-pages, keeping it where it has some
    # (the API reference's pages); the secondary sidebar (on this page) stays on every page.
    "sidebar_includehidden": False,
}
html_static_path = ["_static"]
# code lines longer than the column scroll, with a visible scrollbar and a shadow at the cut edge
# (as on GeoPandas' and xarray's pydata-theme sites, which scroll too); the front page's cards
html_css_files = ["geopriv.css"]


def _write_api_index() -> None:
    """api/generated/index.rst: an autosummary of every public name, grouped (functions, classes, errors)."""
    groups: dict[str, list[str]] = {"Functions": [], "Classes": [], "Errors": [], "Warnings": []}
    for name in geopriv.__all__:
        if name.startswith("_"):
            continue
        obj = getattr(geopriv, name)
        if inspect.isclass(obj) and issubclass(obj, Warning):
            groups["Warnings"].append(name)
        elif inspect.isclass(obj) and issubclass(obj, BaseException):
            groups["Errors"].append(name)
        elif inspect.isclass(obj):
            groups["Classes"].append(name)
        else:
            groups["Functions"].append(name)
    lines = [
        "API reference",
        "=============",
        "",
        "Every public name of ``geopriv`` (``geopriv.__all__``).  :doc:`The GeoPandas accessor </accessor>` "
        "``gdf.priv`` calls these functions on a GeoDataFrame.",
        "",
        ".. currentmodule:: geopriv",
        "",
    ]
    for title, names in groups.items():
        if not names:
            continue
        lines += [title, "-" * len(title), "", ".. autosummary::", "   :toctree: .", ""]
        lines += [f"   {name}" for name in names]
        lines.append("")
    out = HERE / "api" / "generated" / "index.rst"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)


_write_api_index()

_OUTSIDE = re.compile(r"\]\((\.\./[^)#\s]+)\)")


def _outside_links(app, docname, source) -> None:
    """Links from a guide to files outside docs/ (../bench/results/*.md) become downloads of those files."""
    source[0] = _OUTSIDE.sub(r"](path:\1)", source[0])


def setup(app):
    app.connect("source-read", _outside_links)
