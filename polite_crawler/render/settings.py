"""When rendering is on, and what the add-on installs for it (no Playwright import)."""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

MODES = ("", "meta", "auto")
HANDLER = "polite_crawler.render.handler.RenderDownloadHandler"
MIDDLEWARE = "polite_crawler.render.middleware.RenderTriggerMiddleware"
# Spider middleware order: nearer the spider than the trap middleware (70) and the
# trap memory (75), so what it yields instead of a shell passes their rules.
MIDDLEWARE_ORDER = 80


class RenderSettingError(ValueError):
    """POLITE_RENDER or ``-a render=`` holds something else than "", "meta" or "auto"."""


def render_mode(settings: BaseSettings, spider: Any = None) -> str:
    """"" (never render), "meta" (requests marked ``meta["polite_render"]``) or "auto"
    (also pages found built by scripts). ``-a render=...`` on the spider wins."""
    value = getattr(spider, "render", None)
    if not isinstance(value, (str, bool)):  # -a render=... is a string; a method is not it
        value = None
    if value is None:
        from polite_crawler.defaults import polite_settings

        value = polite_settings(settings).get("POLITE_RENDER")
    if value is True:
        value = "meta"
    mode = str(value or "").strip().lower()
    if mode in ("0", "false", "no", "off", "never"):
        mode = ""
    if mode in ("1", "true", "yes", "on"):
        mode = "meta"
    if mode not in MODES:
        raise RenderSettingError(
            f"POLITE_RENDER / -a render= must be one of 'meta', 'auto' or empty, not {value!r}")
    return mode


def check_installed(settings: BaseSettings) -> None:
    """Rendering is on: the browser and scrapy-playwright must be there (checked without
    importing them). Raised here, in the add-on, the crawl does not start; Scrapy would
    only log a download handler that fails to load and send nothing."""
    if importlib.util.find_spec("scrapy_playwright") is None:
        raise RenderSettingError(
            "rendering is on (POLITE_RENDER / -a render=) but scrapy-playwright is not "
            "installed: pip install -e '.[render]'")
    from polite_crawler.defaults import polite_settings

    executable = polite_settings(settings).get("POLITE_RENDER_BROWSER")
    if not os.access(executable, os.X_OK):
        raise RenderSettingError(
            f"rendering is on (POLITE_RENDER / -a render=) but the browser {executable!r} "
            "is missing: apt-get install chromium, or set POLITE_RENDER_BROWSER")


def render_problem(settings: BaseSettings, spider: Any = None) -> str | None:
    """Why rendering, when it is on, could not work (None: it is off, or it can)."""
    try:
        if render_mode(settings, spider):
            check_installed(settings)
    except RenderSettingError as exc:
        return str(exc)
    return None


def install(settings: BaseSettings, spider: Any, priority: int) -> None:
    """Swap in the render download handler and the trigger middleware when rendering is on."""
    mode = render_mode(settings, spider)
    if not mode:
        return
    check_installed(settings)
    settings.set("POLITE_RENDER", mode, priority=priority)
    handlers = dict(settings.getdict("DOWNLOAD_HANDLERS"))
    handlers.update(dict.fromkeys(("http", "https"), HANDLER))
    settings.set("DOWNLOAD_HANDLERS", handlers, priority=priority)
    mws = dict(settings.getdict("SPIDER_MIDDLEWARES"))
    mws[MIDDLEWARE] = MIDDLEWARE_ORDER
    settings.set("SPIDER_MIDDLEWARES", mws, priority=priority)
