"""The crawl's seen set as admission asks it, and the memo of its "seen" answers.

The seen set (the queue store's: 16-byte BLAKE2b digests of canonical URLs) takes
each URL once: asked with a fingerprint, it answers "new" and adds it, or "seen".
Where it only grows while this job holds it (the driver says so:
``FrontierDriver.seen_set_only_grows``, the embedded queue's JOBDIR file), a URL it
answered "seen" for is seen for the rest of the run: :class:`SeenSet` keeps those
canonical URLs in memory (at most :data:`SEEN_URLS_KEPT`, then forgotten all at once)
and does not ask again about them: a site's navigation links, on every page of it.
Only "seen" answers are kept; a restart starts with nothing kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.frontier.dupefilter import url_fingerprint

if TYPE_CHECKING:
    from polite_crawler.interfaces import URLQueue

# Canonical URLs the seen set answered "seen" for, kept in memory at most (then
# forgotten all at once): up to ~10 MB of URLs.
SEEN_URLS_KEPT = 65_536


class SeenSet:
    """A queue store's seen set, asked in batches (see the module docstring).

    ``known`` holds the "seen" answers kept (None: nothing kept, every URL asked);
    :meth:`keep` turns the memo on, only where the seen set only grows while this
    job holds it.
    """

    def __init__(self) -> None:
        self.known: set[str] | None = None

    def keep(self, on: bool) -> None:
        """Keep the "seen" answers from now on (``on``), or none; nothing kept yet."""
        self.known = set() if on else None

    @staticmethod
    def add(queue: URLQueue, fps: list[bytes]) -> list[bool]:
        """The seen set's answer for each fingerprint (True: new, added now)."""
        return queue.add_seen_many(fps) if fps else []

    def new_urls(self, queue: URLQueue, urls: list[str]) -> list[bool]:
        """The seen set's answer for each canonical URL (True: new, added now), as
        :meth:`add` of their fingerprints gives it; a URL the seen set answered "seen"
        for before is answered from memory."""
        known = self.known
        if known is None:
            return self.add(queue, [url_fingerprint(u) for u in urls])
        asked = [u for u in urls if u not in known]
        if not asked:
            return [False] * len(urls)
        answers = self.add(queue, [url_fingerprint(u) for u in asked])
        if len(asked) == len(urls):
            fresh = answers
        else:
            it = iter(answers)  # in order: a URL asked twice is new the first time only
            fresh = [u not in known and next(it) for u in urls]
        if len(known) + len(asked) > SEEN_URLS_KEPT:
            known.clear()
        known.update(u for u, new in zip(asked, answers, strict=True) if not new)
        return fresh
