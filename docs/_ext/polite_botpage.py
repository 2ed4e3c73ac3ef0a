"""The bot page as this version renders it, published with the manual as bot-page.html.

polite_crawler.botpage renders the page site owners read from the crawler's settings;
here it is rendered from the defaults (with example identity fields filled in, as an
operator's would be), so the manual's "For site owners" page links to the real text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# An operator's fields, as an example: the rest of the page comes from the defaults.
EXAMPLE = {
    "POLITE_BOT_URL": "https://crawler.example.org/bot/",
    "POLITE_CONTACT": "crawler@example.org",
    "POLITE_SOURCE_ADDRESSES": "crawler.example.org",
    "POLITE_PURPOSE": "An example operator's crawl: it keeps the text of public pages "
                      "for a search index.",
}


def render_example() -> str:
    from scrapy.settings import Settings

    from polite_crawler.addon import ENFORCED, PINNED
    from polite_crawler.botpage import render_bot_page
    from polite_crawler.defaults import POLITE_DEFAULTS

    settings = Settings()
    for name, value in POLITE_DEFAULTS.items():
        settings.set(name, value, priority="addon")
    for name, value in PINNED.items():
        settings.set(name, value, priority=ENFORCED)
    settings.setdict(EXAMPLE, priority="cmdline")
    return render_bot_page(settings)


def _write(app: Any, config: Any) -> None:
    outdir = Path(app.outdir)
    out = outdir.parent / f"{outdir.name}-extra"  # beside the output, not in it
    out.mkdir(parents=True, exist_ok=True)
    (out / "bot-page.html").write_text(render_example(), encoding="utf-8")
    config.html_extra_path = [*config.html_extra_path, str(out)]


def main_text(page: str) -> str:
    """The page's <main> element: the text a site owner reads, without its own styles."""
    start, end = page.index("<main"), page.index("</main>") + len("</main>")
    return page[start:end]


def setup(app: Any) -> dict[str, Any]:
    from docutils import nodes
    from docutils.parsers.rst import Directive

    class PoliteBotPage(Directive):
        """The bot page's text, inline (``polite-botpage``)."""

        def run(self) -> list[Any]:
            html = main_text(render_example())
            return [nodes.raw("", f'<div class="polite-botpage">{html}</div>', format="html")]

    app.add_directive("polite-botpage", PoliteBotPage)
    app.connect("config-inited", _write)
    return {"version": "1", "parallel_read_safe": True}
