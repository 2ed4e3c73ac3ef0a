"""Sites that refused the crawler, remembered in Redis: one memory for the whole cluster.

With ``POLITE_FRONTIER=redis://...`` the blocks of :mod:`polite_crawler.store.blocks`
live in one Redis hash, ``polite:blocks`` (field: the origin; value: the block as
JSON), shared by every worker on every machine and every crawl on the Redis. Blocks
are few (sites that refused the crawler), so a worker reads the whole hash when it
opens and every few seconds on a thread; it writes one field per refusal.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from polite_crawler.policy.blocks import Block
from polite_crawler.store.redis_keys import (
    PREFIX,
    TIMEOUT,
    blocks_key,
    redis_client,
    redis_errors,
)


def _decode(origin: str, raw: Any) -> Block | None:
    try:
        data = json.loads(bytes(raw).decode("utf-8"))
        return Block(**{**data, "origin": origin})
    except (ValueError, TypeError):
        return None  # not one of ours: ignored, the origin is not blocked


class RedisBlockStore:
    """A :class:`~polite_crawler.interfaces.BlockStore` on Redis (see the module doc)."""

    def __init__(self, url: str, *, timeout: float = TIMEOUT, prefix: str = PREFIX) -> None:
        self.r: Any = redis_client(url, timeout)
        self.key = blocks_key(prefix)
        self.errors = redis_errors()

    def load(self, origin: str) -> Block | None:
        raw = self.r.hget(self.key, origin)
        return None if raw is None else _decode(origin, raw)

    def all(self) -> list[Block]:
        found = (_decode(bytes(k).decode("utf-8"), v)
                 for k, v in self.r.hgetall(self.key).items())
        return sorted((b for b in found if b is not None), key=lambda b: b.origin)

    def save(self, block: Block) -> None:
        data = {k: v for k, v in asdict(block).items() if k != "origin"}
        self.r.hset(self.key, block.origin, json.dumps(data, sort_keys=True))

    def delete(self, origin: str) -> int:
        return int(self.r.hdel(self.key, origin))

    def close(self) -> None:
        self.r.close()


__all__ = ["RedisBlockStore"]
