"""A client-rendered site for the test web: an HTML shell, a script, a JSON API.

:class:`RenderedSite` serves what a single-page application serves:

* ``/story/<n>``: an HTML shell with no text (an empty ``<div id="root">``, a
  ``<noscript>`` asking for JavaScript), a stylesheet, a favicon link, an image,
  the application script and an analytics tag from another host (``beacon_host``);
* ``/static/app.js``: reads the page's number, fetches ``/api/story/<n>.json``
  and builds the article from it; it also calls ``/api/private/track`` (disallowed
  by robots.txt) and an internal address (``internal_origin``), loads a web font
  and an image, and sends a beacon to ``beacon_host``;
* ``/api/story/<n>.json``: the article (title, paragraphs);
* ``/alt/<n>``: the same shell, declaring its JSON form with
  ``<link rel="alternate" type="application/json">``;
* ``/feedpage/<n>``: the same shell, declaring ``/feed.xml``, an RSS feed with every
  story's text;
* ``/static/app.css``, ``/static/hero.jpg``, ``/static/font.woff2``,
  ``/favicon.ico``: what a browser would load but the content does not need
  (sized like a small real site's, for ``bench/render_bytes.py``).

:class:`BeaconSite` is the analytics host: a tag script and a collector.
"""

from __future__ import annotations

import json
import random
import re
from html import escape
from typing import Any

from demo.web.prose import paragraphs, title
from demo.web.server import Req, Resp, Site

ROBOTS = "User-agent: *\nDisallow: /api/private/\n"
PRIVATE = "/api/private/track"


def _noise(seed: str, size: int) -> bytes:
    """Incompressible bytes, as an image or a font is."""
    return random.Random(seed).randbytes(size)


def story(n: int) -> dict[str, Any]:
    seed = f"rendered-{n}"
    return {"id": n, "title": title(seed), "paragraphs": list(paragraphs(seed, 5))}


def _shell(n: int, beacon_origin: str, *, alternate: bool = False, feed: bool = False) -> bytes:
    alt = (f'<link rel="alternate" type="application/json" href="/api/story/{n}.json">'
           if alternate else "")
    if feed:
        alt += '<link rel="alternate" type="application/rss+xml" href="/feed.xml">'

    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Loading…</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="/favicon.ico">
<link rel="stylesheet" href="/static/app.css">{alt}
<script async src="{beacon_origin}/tag.js"></script>
</head><body>
<noscript>You need to enable JavaScript to run this app.</noscript>
<img src="/static/hero.jpg" alt="">
<div id="root" data-story="{n}"></div>
<script src="/static/app.js"></script>
</body></html>""".encode()


APP_JS = """(function () {
  var root = document.getElementById('root');
  var n = root.getAttribute('data-story');
  var font = new FontFace('Body', 'url(/static/font.woff2)');
  font.load().catch(function () {});
  fetch('/api/private/track?story=' + n).catch(function () {});
  fetch('%(internal)s/latest/meta-data/').catch(function () {});
  try { navigator.sendBeacon('%(beacon)s/collect', 'story=' + n); } catch (e) {}
  fetch('/api/story/' + n + '.json').then(function (r) { return r.json(); })
    .then(function (data) {
      document.title = data.title;
      var main = document.createElement('main');
      var art = document.createElement('article');
      var h1 = document.createElement('h1');
      h1.textContent = data.title;
      art.appendChild(h1);
      data.paragraphs.forEach(function (text) {
        var p = document.createElement('p');
        p.textContent = text;
        art.appendChild(p);
      });
      var pic = document.createElement('img');
      pic.src = '/static/hero.jpg?inline=' + n;
      art.appendChild(pic);
      main.appendChild(art);
      root.appendChild(main);
      root.setAttribute('data-ready', '1');
    });
})();
"""
# A framework's worth of script, as the application's bundle carries (kept in
# the script's size only: it is a comment).
_BUNDLE_PAD = "/* " + "x" * 3000 + " */\n"


class RenderedSite(Site):
    """The client-rendered site; ``beacon_origin`` is the analytics host's origin,
    ``internal_origin`` an address the script tries to reach (a cloud metadata
    service by default)."""

    def __init__(self, beacon_origin: str, *, stories: int = 3,
                 internal_origin: str = "http://169.254.169.254") -> None:
        super().__init__()
        self.beacon_origin = beacon_origin
        self.stories = stories
        self.app_js = (APP_JS % {"beacon": beacon_origin, "internal": internal_origin}
                       + _BUNDLE_PAD).encode()
        self.css = "".join(f".c{i}{{margin:{i % 7}px;font-family:Body,serif}}\n"
                           for i in range(1500)).encode()
        self.assets = {
            "/static/hero.jpg": (_noise("hero", 120_000), "image/jpeg"),
            "/static/font.woff2": (_noise("font", 90_000), "font/woff2"),
            "/favicon.ico": (_noise("favicon", 15_000), "image/x-icon"),
        }

    def _story_number(self, path: str, prefix: str) -> int | None:
        m = re.fullmatch(prefix + r"(\d+)", path)
        if m is None or not 1 <= int(m.group(1)) <= self.stories:
            return None
        return int(m.group(1))

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        if path == "/robots.txt":
            return Resp(200, ROBOTS.encode(), content_type="text/plain")
        if path == "/sitemap.xml":
            return Resp(404, b"not found", content_type="text/plain")
        n = self._story_number(path, "/story/")
        if n is not None:
            return Resp(200, _shell(n, self.beacon_origin))
        n = self._story_number(path, "/alt/")
        if n is not None:
            return Resp(200, _shell(n, self.beacon_origin, alternate=True))
        n = self._story_number(path, "/feedpage/")
        if n is not None:
            return Resp(200, _shell(n, self.beacon_origin, feed=True))
        if path == "/feed.xml":
            return Resp(200, self.feed(), content_type="application/rss+xml")
        m = re.fullmatch(r"/api/story/(\d+)\.json", path)
        if m is not None and 1 <= int(m.group(1)) <= self.stories:
            body = json.dumps(story(int(m.group(1)))).encode()
            return Resp(200, body, content_type="application/json")
        if path == PRIVATE:
            return Resp(204, b"", content_type="text/plain")
        if path == "/static/app.js":
            return Resp(200, self.app_js, content_type="application/javascript",
                        headers={"Cache-Control": "max-age=3600"})
        if path == "/static/app.css":
            return Resp(200, self.css, content_type="text/css")
        if path in self.assets:
            body, ctype = self.assets[path]
            return Resp(200, body, content_type=ctype, gzip_ok=False)
        return Resp(404, b"<html><body>Not found</body></html>")


    def feed(self) -> bytes:
        """RSS 2.0 with each story's full text in ``content:encoded``."""
        items = []
        for n in range(1, self.stories + 1):
            data = story(n)
            body = "".join(f"<p>{escape(p)}</p>" for p in data["paragraphs"])
            items.append(f"<item><title>{escape(str(data['title']))}</title>"
                         f"<link>/feedpage/{n}</link>"
                         f"<content:encoded>{escape(body)}</content:encoded></item>")
        return ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0" '
                'xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel>'
                "<title>Stories</title>" + "".join(items) + "</channel></rss>").encode()


class BeaconSite(Site):
    """An analytics host: a tag-manager script and a collector."""

    TAG = ("(function(){var i=new Image();i.src=document.currentScript.src.replace("
           "'/tag.js','/pixel.gif');})();\n/* " + "t" * 40_000 + " */\n").encode()

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        if path == "/tag.js":
            return Resp(200, self.TAG, content_type="application/javascript")
        if path in ("/collect", "/pixel.gif"):
            return Resp(204, b"", content_type="text/plain")
        if path == "/robots.txt":
            return Resp(200, b"User-agent: *\nAllow: /\n", content_type="text/plain")
        return Resp(404, b"")
