"""The settings reference, read from polite_crawler/defaults.py, so it cannot drift.

Each entry of ``POLITE_DEFAULTS`` is documented by the comment lines above it (after
the entry before it) and the comment beside it; a ``# --- title ---`` line starts a
section; a sentence starting "Bounds:" says where the code clamps the value. An entry
with no comment is an error: the build stops and names it.

As a Sphinx extension it adds the directives ``polite-settings`` (the whole reference),
``polite-pinned`` (the Scrapy settings the add-on pins, with what replaces each) and
``polite-exit-statuses`` (polite_crawler.closing's close reasons and exit statuses), and
the ``setting`` role and target (as Scrapy's own manual has).
``python docs/_ext/polite_settings.py`` prints the reference as Markdown.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULTS_PY = Path(__file__).resolve().parents[2] / "polite_crawler" / "defaults.py"

_SECTION = re.compile(r"^---+\s*(?P<title>.*?)\s*-*$")
_BOUNDS = re.compile(r"\bBounds:\s*(?P<bounds>.*)$", re.S)


class UndocumentedSetting(Exception):
    """An entry of POLITE_DEFAULTS with no comment saying what it means."""


@dataclass
class SettingDoc:
    name: str
    default: Any
    source: str  # the default as written (24 * 3600.0)
    meaning: str
    bounds: str
    line: int


@dataclass
class Section:
    title: str
    note: str = ""  # the heading's parenthesis: where to read more
    settings: list[SettingDoc] = field(default_factory=list)


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """{line: (comment text, whole line)} of every comment in ``source``."""
    found: dict[int, tuple[str, bool]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            found[tok.start[0]] = (text, tok.line[: tok.start[1]].strip() == "")
    return found


def read_sections(path: Path = DEFAULTS_PY) -> list[Section]:
    """The documented entries of ``POLITE_DEFAULTS`` in ``path``, in their order, by section.

    Raises :class:`UndocumentedSetting` naming every entry without a meaning.
    """
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    node = next(
        n for n in tree.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        and n.target.id == "POLITE_DEFAULTS"
    )
    table = node.value
    assert isinstance(table, ast.Dict)
    namespace: dict[str, Any] = {}
    exec(compile(source, str(path), "exec"), namespace)  # the values as Python sees them
    values: dict[str, Any] = namespace["POLITE_DEFAULTS"]
    comments = _comments(source)
    sections: list[Section] = [Section("general")]
    missing: list[str] = []
    previous_end = node.lineno  # the line of "POLITE_DEFAULTS ... = {"
    for key, value in zip(table.keys, table.values, strict=True):
        assert isinstance(key, ast.Constant) and isinstance(key.value, str)
        above: list[str] = []
        for line in range(previous_end + 1, key.lineno):
            text, whole = comments.get(line, ("", False))
            if not whole:
                continue
            heading = _SECTION.match(text)
            if heading:
                title, _, note = heading.group("title").partition(" (")
                sections.append(Section(title, note.removesuffix(")")))
                above = []
            else:
                above.append(text)
        last = value.end_lineno or key.lineno
        beside = [comments[line][0] for line in range(key.lineno, last + 1)
                  if line in comments and not comments[line][1]]
        previous_end = last
        meaning = " ".join(above + beside).strip()
        bounds = ""
        found = _BOUNDS.search(meaning)
        if found:
            bounds = found.group("bounds").strip()
            meaning = meaning[: found.start()].strip()
        if not meaning and not bounds:
            missing.append(f"{key.value} (defaults.py line {key.lineno})")
        sections[-1].settings.append(SettingDoc(
            name=key.value, default=values[key.value],
            source=ast.get_source_segment(source, value) or repr(values[key.value]),
            meaning=meaning, bounds=bounds, line=key.lineno))
    if missing:
        raise UndocumentedSetting(
            "polite_crawler/defaults.py: no comment says what these settings mean; write one "
            "above or beside each entry (and a 'Bounds:' sentence where the code clamps it): "
            + ", ".join(missing))
    return [s for s in sections if s.settings]


def show_default(doc: SettingDoc) -> str:
    """The default as a reader wants it: the value, and the expression it was written as."""
    value = doc.default
    shown = '""' if value == "" else repr(value)
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1000:
        shown = f"{int(value):,}".replace(",", "_") + ".0"
    if doc.source not in (shown, repr(value)) and not doc.source.startswith(("'", '"')):
        shown = f"{shown} ({doc.source})"
    return shown


def to_rst(sections: list[Section]) -> str:
    """The reference as reST: a section per group, a ``setting`` target and title per entry."""
    out: list[str] = []
    for section in sections:
        title = section.title[:1].upper() + section.title[1:]
        out += [title, "~" * len(title), ""]
        if section.note:
            out += [f"See also: {_literal(section.note)}.", ""]
        for doc in section.settings:
            out += [f".. setting:: {doc.name}", "", doc.name, "^" * len(doc.name), ""]
            out += [f"Default: ``{show_default(doc)}``", ""]
            if doc.bounds:
                out += [f"Bounds: {_literal(doc.bounds)}", ""]
            if doc.meaning:
                out += [_literal(doc.meaning[:1].upper() + doc.meaning[1:]), ""]
    return "\n".join(out)


def _literal(text: str) -> str:
    """Setting names, meta keys and paths in a comment, set as code."""
    return re.sub(r"(?<![\w`])((?:POLITE|DOWNLOAD|CONCURRENT)_[A-Z0-9_*]+|meta\[[^\]]+\]"
                  r"(?: = \w+)?|<[^>\s]+>[^\s,;)]*|[\w./-]+\.(?:py|txt|md|jsonl|sqlite3)\b)",
                  r"``\1``", text)


# What replaces each Scrapy setting the add-on pins (polite_crawler.addon.PINNED).
PINNED_REPLACED_BY: dict[str, str] = {
    "DOWNLOAD_DELAY": "the frontier's rest after each exchange (POLITE_REST_PAGE, "
                      "POLITE_REST_API, Crawl-delay, the server's slowness); see "
                      "\"What a spider may set\" for a spider's own DOWNLOAD_DELAY",
    "DOWNLOAD_DELAY_JITTER": "POLITE_JITTER",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "the frontier: one request in flight per host "
                                      "(its name, whichever scheme or port)",
    "AUTOTHROTTLE_ENABLED": "the latency watch (POLITE_LATENCY_*) and the duration "
                            "rest (POLITE_REST_DURATION_FACTOR), which only ever slow down",
    "ROBOTSTXT_OBEY": "polite_crawler's own robots.txt middleware (strict RFC 9309, "
                      "unreadable means fetch nothing), always on",
    "COOKIES_ENABLED": "nothing: a crawler has no session to keep, and cookies grow traps",
    "REDIRECT_MAX_TIMES": "5 hops, each hop checked by the address policy and robots.txt",
    "METAREFRESH_ENABLED": "nothing: a meta refresh is not followed as a redirect",
    "DOWNLOAD_HANDLERS": "GuardedHTTPDownloadHandler for http and https: the address "
                         "checked at connect, POLITE_*_TIMEOUT, the response head cap",
}


def pinned_rows() -> list[tuple[str, str, str]]:
    """(setting, pinned value, what replaces it) for every pinned Scrapy setting."""
    from polite_crawler.addon import PINNED

    missing = sorted(set(PINNED) - set(PINNED_REPLACED_BY))
    if missing:
        raise UndocumentedSetting(
            "polite_crawler.addon.PINNED pins settings the manual does not explain; add them "
            "to PINNED_REPLACED_BY in docs/_ext/polite_settings.py: " + ", ".join(missing))
    rows = []
    for name, value in PINNED.items():
        shown = ("{'http': ..., 'https': ...}" if isinstance(value, dict) else repr(value))
        rows.append((name, shown, PINNED_REPLACED_BY[name]))
    return rows


def setup(app: Any) -> dict[str, Any]:
    from docutils import nodes
    from docutils.parsers.rst import Directive
    from docutils.statemachine import StringList
    from sphinx.util.nodes import nested_parse_with_titles

    class _Generated(Directive):
        def rst(self) -> str:
            raise NotImplementedError

        def run(self) -> list[Any]:
            try:
                text = self.rst()
            except UndocumentedSetting as exc:
                raise self.error(str(exc)) from None
            container = nodes.section()
            container.document = self.state.document
            nested_parse_with_titles(
                self.state, StringList(text.splitlines(), str(DEFAULTS_PY)), container)
            return list(container.children)

    class PoliteSettings(_Generated):
        def rst(self) -> str:
            return to_rst(read_sections())

    class PolitePinned(_Generated):
        def rst(self) -> str:
            lines = []
            for name, value, replaced in pinned_rows():
                lines += [f"``{name}`` = ``{value}``", f"   {_literal(replaced)}", ""]
            return "\n".join(lines)

    class PoliteExitStatuses(_Generated):
        def rst(self) -> str:
            from polite_crawler.closing import EXIT_STATUS

            rows = [f"   * - ``{reason}``\n     - {status}"
                    for reason, status in EXIT_STATUS.items()]
            return "\n".join([".. list-table::", "   :header-rows: 1", "",
                              "   * - close reason", "     - exit status", *rows])

    app.add_crossref_type("setting", "setting", indextemplate="pair: %s; setting")
    app.add_directive("polite-settings", PoliteSettings)
    app.add_directive("polite-pinned", PolitePinned)
    app.add_directive("polite-exit-statuses", PoliteExitStatuses)
    return {"version": "1", "parallel_read_safe": True}


if __name__ == "__main__":
    print(to_rst(read_sections()))
