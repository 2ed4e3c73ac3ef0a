"""The main text of a page: without navigation, headers, footers and other boilerplate.

Resiliparse's main-content extraction (Lexbor HTML parser, C), chosen by
measurement on the 530 pages of the Python documentation (``python -m
bench.cpu_per_page``, stages): 3.2-4 ms a page (parse included), no sidebar,
navigation bar or footer left in. trafilatura, the other well-kept choice, is
not installed here; it took about 56 ms a page on the same pages by the issue's
measurement."""

from __future__ import annotations

from dataclasses import dataclass

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree
from resiliparse.parse.lang import detect_fast

# Main-content extraction costs the square of the nesting depth (100,000 nested
# divs: minutes of CPU). Deeper pages get the plain-text extraction, which is linear.
MAX_DEPTH = 512
# Matches an element MAX_DEPTH levels down; Lexbor checks it in C, about 0.2 ms a page.
_TOO_DEEP = " > ".join(["*"] * MAX_DEPTH)

# The language guess looks at this much text: enough for a stable answer, cheap.
LANG_SAMPLE = 4000
LANG_MIN_CHARS = 40


@dataclass(frozen=True)
class MainText:
    title: str
    text: str  # paragraphs separated by blank lines
    language: str | None  # ISO 639-1 guess, None when too little text
    too_deep: bool = False  # nesting beyond MAX_DEPTH: plain text, boilerplate included


def main_text(body: bytes, encoding: str | None = "utf-8", *, shallow: bool = False) -> MainText:
    """Title, main text and language of an HTML document.

    >>> m = main_text(b"<html><head><title>T</title></head><body><nav><a href=/>Home</a>"
    ...               b"</nav><main><h1>Hello</h1><p>The text of the page is here.</p></main>"
    ...               b"</body></html>")
    >>> m.title, "Home" in m.text, "The text of the page is here." in m.text
    ('T', False, True)

    ``shallow``: the caller knows the page nests less than :data:`MAX_DEPTH` deep
    (libxml2 read all of it: :attr:`polite_crawler.policy.links.PageLinks.too_deep`
    is False), and the depth check is skipped. libxml2 nests a page at least as
    deeply as Lexbor does (a test holds that on every construct that nests), and
    stops at 256.
    """
    try:
        tree = HTMLTree.parse_from_bytes(body, encoding or "utf-8", errors="replace")
    except (LookupError, ValueError):
        tree = HTMLTree.parse_from_bytes(body, "utf-8", errors="replace")
    title = " ".join((tree.title or "").split())
    too_deep = (not shallow and tree.document is not None
                and tree.document.query_selector(_TOO_DEEP) is not None)
    text = extract_plain_text(tree, main_content=not too_deep, preserve_formatting=True,
                              list_bullets=False, alt_texts=False)
    return MainText(title, text, language_of(text), too_deep)


def language_of(text: str) -> str | None:
    """A cheap language guess (Resiliparse's fast detector), None for short texts."""
    sample = text[:LANG_SAMPLE]
    if len(sample.strip()) < LANG_MIN_CHARS:
        return None
    lang, _score = detect_fast(sample)
    return lang or None
