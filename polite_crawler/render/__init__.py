"""Rendering a page in a headless browser, only where a page needs one.

Nothing here imports Playwright until a render is asked for: the add-on installs
:class:`polite_crawler.render.handler.RenderDownloadHandler` only when
POLITE_RENDER is set (or the ``site`` spider runs with ``-a render=auto``), so a
plain crawl and ``make demo`` never start a browser.

* :mod:`polite_crawler.render.settings`: when rendering is on, and the settings it adds.
* :mod:`polite_crawler.render.handler`: the download handler (scrapy-playwright's,
  with every request of the browser served through the crawl's guarded HTTP handler).
* :mod:`polite_crawler.render.middleware`: the spider middleware that finds
  script-built pages and prefers what the site offers over a render.
* :mod:`polite_crawler.render.memory`: the browser's memory, from ``/proc``.
* The rules are pure, in :mod:`polite_crawler.policy.render`.
"""
