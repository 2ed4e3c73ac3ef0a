"""URL rows: URLs queued in bulk with no Request stored, and the Request made from one.

A queue row's ``data`` is either a pickled ``Request`` (a pickle starts with 0x80) or a
URL row (``FrontierScheduler.enqueue_urls``): :data:`URL_ROW`, then the id of its
template in decimal (``frontier_template``: the callback and errback names and the meta
many rows share, pickled once), then what is the row's own: nothing; ``b"\\0"`` and
its lastmod (UTF-8); or ``b"\\1"`` and a pickled dict of meta. The row's URL is the
queue row's ``url`` column, already canonical; the Request is made when the frontier
dispatches the row (:meth:`UrlRows.request`).
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from scrapy import Request

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from scrapy import Spider

    from polite_crawler.interfaces import URLQueue

URL_ROW = b"u"
LASTMOD = "polite_lastmod"


class UrlRows:
    """The URL rows of one crawl's queue store: templates stored once and kept in memory
    by their bytes and by their id, rows encoded, Requests made back."""

    def __init__(self) -> None:
        self._ids: dict[bytes, int] = {}  # templates' ids, by their bytes
        self._by_id: dict[int, tuple[str, str | None, dict[str, Any]]] = {}

    def encode(
        self,
        queue: URLQueue,
        batch: list[tuple[str, str, Mapping[str, Any] | None]],
        refusals: list[str | None],
        *,
        callback: str,
        errback: str | None,
        meta: Mapping[str, Any] | None,
        priority: Callable[[str], int] | int,
    ) -> list[tuple[str, int, str, bytes]]:
        """``(origin, priority, url, data)`` of each ``(url, origin, extra meta)`` of
        ``batch`` not refused (``refusals``: None where admitted), for ``push_many``.

        The template is stored in ``queue`` first, whether any row is admitted or not.
        """
        plain = URL_ROW + str(self._template(queue, callback, errback, meta)).encode("ascii")
        with_lastmod = plain + b"\0"
        fixed = priority if isinstance(priority, int) else 0
        prio_of: Callable[[str], int] = (
            priority if not isinstance(priority, int) else lambda _url: fixed)
        rows: list[tuple[str, int, str, bytes]] = []
        append = rows.append
        for (url, origin, extra), refused in zip(batch, refusals, strict=True):
            if refused is not None:
                continue
            if not extra:
                data = plain
            elif len(extra) == 1 and isinstance(extra.get(LASTMOD), str):
                data = with_lastmod + extra[LASTMOD].encode("utf-8")
            else:
                data = plain + b"\1" + pickle.dumps(dict(extra), protocol=5)
            append((origin, prio_of(url), url, data))
        return rows

    def _template(self, queue: URLQueue, callback: str, errback: str | None,
                  meta: Mapping[str, Any] | None) -> int:
        data = pickle.dumps((callback, errback, dict(meta or {})), protocol=5)
        found = self._ids.get(data)
        if found is None:
            found = self._ids[data] = queue.template_id(data)
        return found

    def request(self, queue: URLQueue, spider: Spider | None, url: str, prio: int,
                data: bytes) -> Request:
        """The Request of a URL row of ``queue`` (``data`` starts with :data:`URL_ROW`),
        its callback and errback the ``spider``'s methods of the template's names."""
        body = data[1:]
        digits = len(body) - len(body.lstrip(b"0123456789"))
        template_id = int(body[:digits])
        template = self._by_id.get(template_id)
        if template is None:
            stored = queue.template(template_id)
            if stored is None:
                raise ValueError(f"URL row template {template_id} is missing")
            template = self._by_id[template_id] = pickle.loads(stored)
        callback, errback, base = template
        meta = dict(base)
        kind, own = body[digits:digits + 1], body[digits + 1:]
        if kind == b"\0":
            meta[LASTMOD] = own.decode("utf-8")
        elif kind == b"\1":
            meta.update(pickle.loads(own))
        return Request(
            url, callback=getattr(spider, callback), priority=prio, meta=meta,
            errback=getattr(spider, errback) if errback else None,
        )
