"""The documentation site's front page starts a reader, and its guide pages waste no column (issue 44, item 7).

docs/index.md shows, in this order, what pydata-theme projects (GeoPandas, xarray) show: what geopriv
is, an install line, a quickstart of a few lines, a picture, then the guides and the reference (one
card each, over the toctrees of the whole site).  docs/conf.py drops the empty "Section Navigation"
sidebar of the flat guide pages, and docs/_static/geopriv.css makes long code lines scroll visibly
instead of looking cut off.

The quickstart itself runs in tests/test_docs.py (every ```python and ```bash block of docs/*.md runs
verbatim); here it is only read.  These checks need no Sphinx; :func:`test_built_front_page` builds
the front page and one guide when the docs extras (``pip install -e '.[docs,plot]'``) are importable.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
INDEX = DOCS / "index.md"
CONF = DOCS / "conf.py"

#: the toctrees of the site: their captions and entries, in order
GUIDES = [
    "examples",
    "privacy",
    "crs_and_errors",
    "eikonal",
    "traces",
    "synthesize",
    "aggregate",
    "evaluate",
    "diffusion",
    "budgets",
    "distributed",
    "architecture",
    "qgis",
]
REFERENCE = ["api/generated/index", "accessor", "cli", "qgis_algorithms"]

#: a front-page code line longer than this scrolls in the theme's column at 1280 px
MAX_FRONT_PAGE_LINE = 90

FENCE = re.compile(r"^(```+|~~~+)\s*(?P<lang>[\w+-]*)\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*.+?-->\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s#]+)(?:#[^)]*)?\)")


def front_page() -> str:
    return INDEX.read_text(encoding="utf-8")


def blocks(text: str) -> list[dict]:
    """The ``` fenced blocks: language, first line (0-based), source, whether marked not run."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, fence, body = i, m.group(1), []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        not_run = start > 0 and bool(NOT_RUN.match(lines[start - 1]))
        out.append({"lang": m["lang"], "line": start, "source": "\n".join(body) + "\n", "not_run": not_run})
        i += 1
    return out


def sections(text: str) -> dict[str, int]:
    """Level-2 headings and their line numbers."""
    return {m[2]: n for n, line in enumerate(text.splitlines()) if (m := HEADING.match(line)) and m[1] == "##"}


def toctrees(text: str) -> list[dict]:
    """The ``:::{toctree}`` directives: their options and entries."""
    out = []
    for m in re.finditer(r"^:::\{toctree\}\s*\n(?P<body>.*?)^:::\s*$", text, re.S | re.M):
        options, entries = {}, []
        for line in m["body"].splitlines():
            if opt := re.match(r"^:(\w+):\s*(.*)$", line):
                options[opt[1]] = opt[2]
            elif line.strip():
                entries.append(line.strip())
        out.append({"options": options, "entries": entries, "offset": m.start()})
    return out


def docname(target: str) -> str:
    """A link's target (``traces.md``, ``api/generated/index.rst``) as a Sphinx document name."""
    return re.sub(r"\.(md|rst)$", "", target)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def conf_assignments() -> dict:
    """The literal top-level assignments of docs/conf.py, read without running it (it imports geopriv)."""
    out = {}
    for node in ast.parse(CONF.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and value is not None:
            try:
                out[target.id] = ast.literal_eval(value)
            except ValueError:
                pass  # computed (f-strings, calls): not configuration this test reads
    return out


# ------------------------------------------------------------------------------------------ the page
def test_the_front_page_is_the_markdown_one():
    assert INDEX.is_file()
    # two roots would be ambiguous to Sphinx (index.rst beside index.md)
    assert not (DOCS / "index.rst").exists(), "docs/index.rst and docs/index.md: keep one front page"
    assert conf_assignments().get("root_doc", "index") == "index"


def test_sections_come_in_the_order_a_reader_needs():
    text = front_page()
    lines = text.splitlines()
    heads = sections(text)
    for name in ("Install", "Quickstart", "Guides", "Reference"):
        assert name in heads, f"the front page has no '## {name}' section"
    order = [heads[n] for n in ("Install", "Quickstart", "Guides", "Reference")]
    assert order == sorted(order), f"sections out of order: {heads}"
    # what it is, before installing it: a paragraph under the title naming the three front ends
    intro = " ".join(lines[1 : heads["Install"]])
    assert len(intro.split()) >= 40, "the front page says too little about what geopriv is"
    for words in ("gdf.priv", "`geopriv`", "QGIS", "geo-indistinguishability", "traces", "synthetic", "budget"):
        assert words in intro, f"the introduction does not mention {words!r}"
    # the picture comes after the quickstart and before the guides
    pictures = [n for n, line in enumerate(lines) if IMAGE.search(line)]
    assert any(heads["Quickstart"] < n < heads["Guides"] for n in pictures), "no picture between quickstart and guides"


def test_install_line():
    text = front_page()
    heads = sections(text)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    install = [b for b in blocks(text) if heads["Install"] < b["line"] < heads["Quickstart"] and b["lang"] == "bash"]
    assert install, "no ```bash install block under '## Install'"
    line = install[0]["source"]
    m = re.search(r"pip install ([\"']?)(?P<name>[\w.-]+)(?:\[(?P<extras>[\w,-]+)\])?\1", line)
    assert m, f"no 'pip install geopriv' line: {line!r}"
    assert m["name"] == project["name"], f"installs {m['name']!r}, the project is {project['name']!r}"
    asked = set((m["extras"] or "").split(",")) - {""}
    assert asked <= extras, f"extras {sorted(asked - extras)} are not in pyproject.toml ({sorted(extras)})"
    assert "plot" in asked, "the quickstart draws a picture: the install line needs the [plot] extra"
    # tests/test_docs.py would run it otherwise (and install packages)
    assert install[0]["not_run"], "the install block needs '<!-- not run: installs packages -->' on the line above"
    # the QGIS route is linked, not repeated
    install_text = "\n".join(text.splitlines()[heads["Install"] : heads["Quickstart"]])
    assert "(qgis.md)" in install_text, "the Install section does not point QGIS users to the QGIS guide"


def test_quickstart_is_a_few_lines_that_run():
    text = front_page()
    heads = sections(text)
    python = [b for b in blocks(text) if heads["Quickstart"] < b["line"] < heads["Guides"] and b["lang"] == "python"]
    assert python, "no ```python block under '## Quickstart'"
    source = python[0]["source"]
    code = [line for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert 4 <= len(code) <= 8, f"a quickstart of {len(code)} lines: about five are the point"
    tree = ast.parse(source)  # a SyntaxError fails here
    # run as written by tests/test_docs.py: never marked
    assert not python[0]["not_run"], "the quickstart must run (tests/test_docs.py runs every unmarked block)"
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert any(c.endswith("datasets.get_path") for c in calls), "the quickstart should read the shipped data"
    assert any(c.endswith(".priv.perturb") for c in calls), "the quickstart should release with gdf.priv.perturb"
    # the data sets it names are shipped
    from geopriv import datasets

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("datasets.get_path"):
            name = ast.literal_eval(node.args[0])
            assert datasets.get_path(name).is_file()


def test_front_page_code_lines_fit_the_column():
    """No code line of the front page needs scrolling at 1280 px (the guides' long lines scroll visibly)."""
    long = [
        (b["line"] + 1 + k, line)
        for b in blocks(front_page())
        for k, line in enumerate(b["source"].splitlines(), start=1)
        if len(line) > MAX_FRONT_PAGE_LINE
    ]
    assert not long, f"front-page code lines over {MAX_FRONT_PAGE_LINE} characters: {long}"


def test_pictures_exist():
    text = front_page()
    images = list(IMAGE.finditer(text))
    assert images, "the front page has no picture"
    for image in images:
        src = image["src"]
        path = DOCS / src
        assert path.is_file(), f"{src}: no such file under docs/"
        assert image["alt"].strip(), f"{src}: a picture without alternative text"
        width, height = png_size(path) if path.suffix == ".png" else (None, None)
        if width is not None:
            assert width >= 800 and height >= 300, f"{src} is {width} x {height}: too small for the front page"
    # the screenshot of the built page (issue 44, item 7) is kept beside it
    shot = DOCS / "img" / "front_page_screenshot.png"
    assert shot.is_file(), "docs/img/front_page_screenshot.png is missing"
    assert png_size(shot)[0] == 1280, "the front page's screenshot is taken at 1280 px"


def test_toctrees_list_every_page_and_cards_link_them():
    text = front_page()
    trees = toctrees(text)
    by_caption = {t["options"].get("caption"): t for t in trees}
    assert set(by_caption) == {"Guides", "Reference"}, f"toctrees: {list(by_caption)}"
    assert by_caption["Guides"]["entries"] == GUIDES
    assert by_caption["Reference"]["entries"] == REFERENCE
    # every page of docs/ is in a toctree (a page outside them is an orphan Sphinx warns about)
    pages = {p.stem for p in DOCS.glob("*.md")} | {p.stem for p in DOCS.glob("*.rst")}
    pages.discard("index")
    listed = set(GUIDES) | set(REFERENCE)
    assert pages | {"api/generated/index"} == listed, (
        f"not in a toctree: {sorted(pages - listed)}; listed but missing: {sorted(listed - pages - {'api/generated/index'})}"
    )
    # the API index is written by conf.py at each build
    assert '"api" / "generated" / "index.rst"' in CONF.read_text(encoding="utf-8")
    # one card (a list item with a link and a line of text) per entry, in the toctree's order
    heads = sections(text)
    lines = text.splitlines()
    for caption, entries, end in (("Guides", GUIDES, heads["Reference"]), ("Reference", REFERENCE, len(lines))):
        part = lines[heads[caption] : end]
        cards = [line for line in part if line.startswith("- ")]
        targets = [docname(m["target"]) for line in cards if (m := LINK.search(line))]
        assert targets == entries, f"{caption} cards link {targets}, the toctree lists {entries}"
        for line in cards:
            described = line.split(":", 1)[1].strip() if "**:" in line else ""
            assert len(described.split()) >= 4, f"a card without its one line of description: {line!r}"


# ------------------------------------------------------------------------------------------ conf.py
def test_conf_drops_the_empty_section_navigation():
    conf = conf_assignments()
    options = conf.get("html_theme_options", {})
    sidebars = conf.get("html_sidebars", {})
    flat = GUIDES + REFERENCE[1:]  # every page but the API reference's
    # with includehidden the theme cannot tell that a flat page's section is empty (index.md's toctrees
    # are hidden); without it, it drops the sidebar wherever there is nothing to navigate
    dropped_by_theme = options.get("sidebar_includehidden", True) is False
    dropped_by_page = all(sidebars.get(p) == [] for p in flat)
    assert dropped_by_theme or dropped_by_page, "the guide pages would show an empty 'Section Navigation' sidebar"
    # ...but not everywhere: the API reference's pages have a section to navigate
    assert sidebars.get("**") != [] and sidebars.get("api/generated/*") != []
    # and the secondary sidebar (on this page) stays
    secondary = options.get("secondary_sidebar_items")
    assert secondary is None or "page-toc" in str(secondary)


def test_conf_enables_the_front_page_directives():
    conf = conf_assignments()
    # ::: fences: tests/test_docs.py reads every ``` fence as code to run
    assert "colon_fence" in conf.get("myst_enable_extensions", [])
    assert not re.search(r"^```\{", front_page(), re.M), "a ```{directive} fence: use ::: (tests/test_docs.py)"


def test_long_code_lines_scroll_visibly():
    conf = conf_assignments()
    assert "_static" in conf.get("html_static_path", [])
    css_files = conf.get("html_css_files", [])
    assert css_files, "no html_css_files"
    css = "\n".join((DOCS / "_static" / f).read_text(encoding="utf-8") for f in css_files)
    # (selector, declarations) of every innermost rule, comments removed
    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S))
    pre = [(k.strip(), v) for k, v in rules if "pre" in k]
    assert any("overflow-x: auto" in v for _, v in pre), "code blocks do not scroll"
    assert not any("overflow: hidden" in v or "overflow-x: hidden" in v for _, v in pre), "code is cut off"
    # a styled (never overlay) scrollbar in Blink/WebKit, the standard one in Firefox
    assert any("::-webkit-scrollbar" in k and "height" in v for k, v in pre), "no always-drawn scrollbar"
    assert "scrollbar-width" in css


# ------------------------------------------------------------------------------------------ the build
def test_built_front_page(tmp_path):
    """With Sphinx and the docs extras: the front page and a guide, built, show what the source promises."""
    for module in ("sphinx", "pydata_sphinx_theme", "myst_parser", "numpydoc", "sphinxarg", "matplotlib"):
        pytest.importorskip(module, reason=f"{module} is not installed (pip install -e '.[docs,plot]')")
    src = tmp_path / "docs"
    src.mkdir()
    for name in ("conf.py", "index.md", "traces.md"):
        shutil.copy2(DOCS / name, src / name)
    for folder in ("_ext", "_generated", "_static", "img"):
        shutil.copytree(DOCS / folder, src / folder)
    out = tmp_path / "html"
    # the other pages are left out (their toctree entries only warn): seconds, not a minute
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", "-D", "autosummary_generate=0", str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    index = (out / "index.html").read_text(encoding="utf-8")
    shown = re.sub(r"<[^>]+>", "", index)  # the text a reader sees (highlighting splits code into spans)
    assert 'pip install "geopriv[plot]"' in shown.replace("&quot;", '"')
    assert 'class="highlight-python' in index and "datasets.get_path" in shown
    for src_attr in re.findall(r'<img[^>]+src="([^"]+)"', index):
        assert (out / src_attr).is_file(), f"the built front page shows a missing image {src_attr}"
    assert "front_page.png" in index
    assert "geopriv.css" in index
    guide = (out / "traces.html").read_text(encoding="utf-8")
    primary = guide.split('id="pst-primary-sidebar"', 1)[1].split("<main", 1)[0]
    assert "Section Navigation" not in primary, "the guide shows an empty 'Section Navigation' sidebar"
    assert 'class="bd-sidebar-primary bd-sidebar hide-on-wide"' in guide, "the guide keeps an empty primary sidebar"
    assert "On this page" in guide, "the secondary sidebar is gone"
