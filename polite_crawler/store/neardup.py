"""Near duplicates: the SimHashes of stored pages, searchable, and the first page of
each one's cluster (the page store's ``near_duplicate_of``).

Loaded from the page store when it opens (``SQLPageBackend.fingerprints``) and kept
by its thread; :class:`~polite_crawler.policy.simhash.SimHashIndex` answers which
stored fingerprints are within the distance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.policy.simhash import SimHashIndex

if TYPE_CHECKING:
    from collections.abc import Iterator


class NearDuplicates:
    """Stored pages' SimHashes and the first page of each one's cluster."""

    def __init__(self, max_distance: int) -> None:
        self.index = SimHashIndex(max_distance)
        self._urls: list[str] = []
        self._root: list[int] = []  # position of the first page of the cluster
        self._pos: dict[str, int] = {}

    def load(self, rows: Iterator[tuple[str, int, str | None]]) -> None:
        for canonical, h, root in rows:
            root_pos = self._pos.get(root) if root else None
            self._add(canonical, h, root_pos)

    def _add(self, canonical: str, h: int, root_pos: int | None) -> int:
        old = self._pos.get(canonical)
        if old is not None:
            self.index.remove(old)
        pos = self.index.add(h)
        self._urls.append(canonical)
        self._root.append(pos if root_pos is None else root_pos)
        self._pos[canonical] = pos
        return pos

    def link(self, canonical: str, h: int) -> str | None:
        """Add a page; returns the first page of the cluster it joins, or None."""
        own = self._pos.get(canonical)
        roots = {self._root[p] for p in self.index.near(h) if p != own}
        # The first page of the cluster: the earliest stored (not this page itself).
        roots = {r for r in roots if self._urls[r] != canonical}
        root_pos = min(roots) if roots else None
        self._add(canonical, h, root_pos)
        return self._urls[root_pos] if root_pos is not None else None

    def forget(self, canonical: str) -> None:
        pos = self._pos.pop(canonical, None)
        if pos is not None:
            self.index.remove(pos)

    def __len__(self) -> int:
        return len(self._pos)


__all__ = ["NearDuplicates"]
