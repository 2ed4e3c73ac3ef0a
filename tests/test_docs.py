"""The manual: its example spiders crawl a loopback web politely, its settings reference
names every POLITE_* setting, and it builds (Sphinx, warnings as errors)."""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted

from demo.web.server import Site, TestWeb, overlaps, page, short_rests
from polite_crawler.addon import PINNED
from polite_crawler.defaults import POLITE_DEFAULTS
from tests.crawl import run_crawl

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
import polite_settings  # noqa: E402

HOST = "127.0.0.1"
REST = 0.1  # a loopback rest: the rule is the same, the number small


def _example(name: str) -> ModuleType:
    """A spider module of docs/examples/, the file the manual shows."""
    path = DOCS / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_examples_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- testing a spider on loopback (the manual includes this part) ---------------------------

def small_site() -> Site:
    """Three pages and a part robots.txt keeps the crawler out of."""
    return Site({
        "/robots.txt": "User-agent: *\nDisallow: /private/\n",
        "/": page("Home", "The front page.", ["/a/1", "/a/2", "/private/secret"]),
        "/a/1": page("First", "The first article.", ["/", "/a/2"]),
        "/a/2": page("Second", "The second article.", ["/", "/private/secret"]),
        "/private/secret": page("Secret", "Not for crawlers."),
    })


def on_loopback(spidercls: type, web: TestWeb) -> type:
    """The spider as written, its start URL and allowed domain moved to the test web."""
    return type(spidercls.__name__, (spidercls,), {
        "start_urls": [web.url(HOST)], "allowed_domains": [HOST]})


def assert_polite(web: TestWeb) -> None:
    """What the site's own log shows: robots.txt first, nothing disallowed, one request
    at a time, the rest between two requests."""
    log = web.entries(HOST)
    assert log[0].path == "/robots.txt"
    assert not [e.path for e in log if e.path.startswith("/private/")]
    assert overlaps(log) == []
    assert short_rests(log, REST, slack=0.01) == []


@pytest_twisted.ensureDeferred
async def test_the_tutorial_spider_crawls_politely(web_factory: Any) -> None:
    web = web_factory({HOST: small_site()})
    spider = on_loopback(_example("articles").ArticlesSpider, web)
    result = await run_crawl(spider, settings={"POLITE_REST_PAGE": REST})

    assert_polite(web)
    assert {dict(i)["title"] for i in result.items} == {"First", "Home", "Second"}
    # The items are the spider's own: the keys it wrote, nothing added.
    assert {frozenset(dict(i)) for i in result.items} == {frozenset({"url", "title"})}

# --- end of the part the manual includes -------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_the_crawlspider_example_crawls_politely(web_factory: Any) -> None:
    web = web_factory({HOST: small_site()})
    result = await run_crawl(on_loopback(_example("crawl_articles").CrawlArticlesSpider, web),
                             settings={"POLITE_REST_PAGE": REST})
    assert_polite(web)
    # Only the articles have a callback; each item is the three keys the spider wrote.
    items = sorted((dict(i) for i in result.items), key=lambda i: i["url"])
    assert [i["title"] for i in items] == ["First", "Second"]
    assert {frozenset(i) for i in items} == {frozenset({"url", "title", "noindex"})}
    assert [i["noindex"] for i in items] == [False, False]


@pytest_twisted.ensureDeferred
async def test_the_gentle_example_is_gentler(web_factory: Any) -> None:
    # Its numbers reach the crawl, above the defaults: robots.txt here keeps it out of the
    # whole site, so the ten-second rest is read from the settings, not waited for.
    web = web_factory({HOST: Site({"/robots.txt": "User-agent: *\nDisallow: /\n",
                                   "/": page("Home")})})
    spider = on_loopback(_example("gentle").GentleSpider, web)
    result = await run_crawl(spider)

    settings = result.crawler.settings
    # DOWNLOAD_DELAY = 10 is a floor on both rests.
    assert settings.getfloat("POLITE_REST_PAGE") == 10.0
    assert settings.getfloat("POLITE_REST_API") == 10.0
    assert settings.getint("POLITE_HOST_BUDGET") == 500
    assert settings.getint("POLITE_MAX_DEPTH") == 3
    assert [e.path for e in web.entries(HOST)] == ["/robots.txt"]
    assert result.items == []


# --- the settings reference --------------------------------------------------------------------

def test_the_settings_reference_names_every_setting_of_defaults_py() -> None:
    documented = [s.name for section in polite_settings.read_sections() for s in section.settings]
    assert documented == list(POLITE_DEFAULTS)
    for section in polite_settings.read_sections():
        for doc in section.settings:
            assert doc.default == POLITE_DEFAULTS[doc.name]
            assert doc.meaning or doc.bounds, doc.name


def test_a_setting_without_a_meaning_stops_the_reference(tmp_path: Path) -> None:
    source = (ROOT / "polite_crawler" / "defaults.py").read_text("utf-8")
    broken = source.replace("POLITE_DEFAULTS: dict[str, Any] = {",
                            "POLITE_DEFAULTS: dict[str, Any] = {\n    \"POLITE_UNSAID\": 1,", 1)
    path = tmp_path / "defaults.py"
    path.write_text(broken, "utf-8")
    with pytest.raises(polite_settings.UndocumentedSetting, match="POLITE_UNSAID"):
        polite_settings.read_sections(path)


def test_the_rest_floors_are_stated_as_bounds() -> None:
    # policy/rest.py raises these to the seeds' numbers for a public host: the reference
    # must say so, with the number.
    from polite_crawler.policy.rest import PUBLIC_FLOOR

    docs = {s.name: s for section in polite_settings.read_sections() for s in section.settings}
    for name, floor in (("POLITE_REST_PAGE", PUBLIC_FLOOR.rest_page),
                        ("POLITE_REST_API", PUBLIC_FLOOR.rest_api),
                        ("POLITE_REST_DURATION_FACTOR", PUBLIC_FLOOR.duration_factor),
                        ("POLITE_REST_DURATION_MAX", PUBLIC_FLOOR.duration_max),
                        ("POLITE_CRAWL_DELAY_MAX", PUBLIC_FLOOR.crawl_delay_max)):
        assert f"at least {floor:g} for a public host" in docs[name].bounds, name


def test_every_pinned_scrapy_setting_says_what_replaces_it() -> None:
    rows = polite_settings.pinned_rows()
    assert [name for name, _, _ in rows] == list(PINNED)


@pytest.mark.slow
def test_the_manual_builds_without_a_warning(tmp_path: Path) -> None:
    if shutil.which("sphinx-build", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("sphinx is not installed (pip install -e '.[docs]')")
    out = tmp_path / "html"
    run = subprocess.run(
        [str(Path(sys.executable).parent / "sphinx-build"), "-W", "--keep-going", "-q",
         "-b", "html", "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    settings_page = (out / "settings.html").read_text("utf-8")
    for name in POLITE_DEFAULTS:
        assert f'id="std-setting-{name}"' in settings_page, name
    assert (out / "bot-page.html").read_text("utf-8").count("PoliteCrawler") > 3


def _without_types(tree: ast.AST) -> str:
    """The code of ``tree`` with its annotations and type-only imports left out."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            for arg in (*node.args.args, *node.args.kwonlyargs):
                arg.annotation = None
    return ast.dump(tree)


def test_the_readme_spider_is_the_tutorial_spider() -> None:
    # The front page shows the tutorial's spider without its type hints; it is the same
    # code as the one the test above crawls.
    readme = (ROOT / "README.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    shown = next(b for b in blocks if "class ArticlesSpider" in b)
    example = ast.parse((DOCS / "examples" / "articles.py").read_text("utf-8"))
    readme_class = next(n for n in ast.parse(shown).body if isinstance(n, ast.ClassDef))
    example_class = next(n for n in example.body if isinstance(n, ast.ClassDef))
    assert _without_types(readme_class) == _without_types(example_class)


def test_the_operators_page_has_every_command() -> None:
    # Every command the package registers (pyproject.toml's scrapy.commands entry points)
    # has its section on the operator's page.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    commands = project["entry-points"]["scrapy.commands"]
    page = (DOCS / "operating.md").read_text("utf-8")
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    missing = [name for name in commands if not any(name in h for h in headings)]
    assert not missing, f"docs/operating.md has no section for: {missing}"
