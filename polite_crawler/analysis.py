"""What an HTML page says, worked out once per response and shared.

Several components read every page: the page-rules middleware (meta robots,
rel=nofollow), the yield monitor (how much of the text is new), the ``site``
spider (links, title, rel=canonical) and the page item (main text). Each asks
here; the first to ask does the work and the others reuse it, so a page is
parsed once by lxml (:func:`polite_crawler.policy.links.extract_links`),
once by Lexbor for its main text (:func:`polite_crawler.extract.main_text`),
and its main text cut into words once (:func:`polite_crawler.policy.text.read_words`,
for the yield monitor and the fingerprints), whoever the spider is and in
whatever order the components run.

Results are held per response object, weakly: nothing outlives the response,
and a replaced response (``response.replace(...)``) is read afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from polite_crawler.extract import MainText, main_text
from polite_crawler.policy.links import PageLinks, extract_links
from polite_crawler.policy.text import Words, read_words
from polite_crawler.policy.traps import MIN_MAIN_WORDS, html_text

if TYPE_CHECKING:
    from scrapy.http import Response


@dataclass
class _Reading:
    links: PageLinks | None = None
    links_cap: int = -1
    main: MainText | None = None
    words: Words | None = None


_READINGS: WeakKeyDictionary[Response, _Reading] = WeakKeyDictionary()


def _reading(response: Response) -> _Reading:
    reading = _READINGS.get(response)
    if reading is None:
        reading = _READINGS[response] = _Reading()
    return reading


def _encoding(response: Response) -> str | None:
    return getattr(response, "encoding", None)


def page_links(response: Response, max_links: int) -> PageLinks:
    """Links, title, rel=canonical and meta tags of the page (one lxml parse), at most
    ``max_links`` of them (POLITE_MAX_LINKS_PER_PAGE)."""
    reading = _reading(response)
    if reading.links is None or reading.links_cap != max_links:
        reading.links = extract_links(response.body, response.url, _encoding(response),
                                      max_links=max_links)
        reading.links_cap = max_links
    return reading.links


def page_text(response: Response) -> MainText:
    """Title, main text and language of the page (one Lexbor parse)."""
    reading = _reading(response)
    if reading.main is None:
        # A page libxml2 read to the end nests too little for the depth check
        # (:func:`polite_crawler.extract.main_text`).
        shallow = reading.links is not None and not reading.links.too_deep
        reading.main = main_text(response.body, _encoding(response), shallow=shallow)
    return reading.main


def page_words(response: Response) -> Words:
    """The main text's words, hashed once (the yield monitor's and the fingerprints')."""
    reading = _reading(response)
    if reading.words is None:
        reading.words = read_words(page_text(response).text)
    return reading.words


def yield_text(response: Response) -> tuple[str, Words | None]:
    """What the yield monitor judges: the main text (and its words), or all the text if thin."""
    read = page_words(response)
    if read.raw.size > MIN_MAIN_WORDS:
        return read.text, read
    return html_text(response.body, _encoding(response) or "utf-8"), None
