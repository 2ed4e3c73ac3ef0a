"""Sphinx configuration of the polite_crawler manual (``make docs``).

Built offline: no intersphinx, no remote theme (alabaster ships with Sphinx). Pages
are Markdown (myst-parser); the settings reference is generated from
polite_crawler/defaults.py by the local extension in _ext/.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

from polite_crawler import __version__  # noqa: E402

project = "polite_crawler"
author = "the polite_crawler authors"
copyright = "the polite_crawler authors"
version = release = __version__

extensions = ["myst_parser", "polite_settings", "polite_botpage"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["deflist", "colon_fence"]
myst_heading_anchors = 3

html_theme = "alabaster"
html_title = f"polite_crawler {release}"
html_theme_options = {
    "description": "Crawl other people's sites at a cost they would not notice",
    "page_width": "1180px",  # room for 100-column code
    "sidebar_width": "240px",
}
html_static_path: list[str] = []
# bot-page.html is added to html_extra_path by _ext/polite_botpage.py.
