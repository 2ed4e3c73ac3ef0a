"""Awaiting the page store's thread from the reactor thread."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, TypeVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")


def _in_asyncio_task() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no running event loop
        return False


async def result(future: Future[T]) -> T:
    """The result of a store-thread future, awaited without blocking the reactor.

    Works in coroutines that asyncio runs (Scrapy's, with the asyncio reactor)
    and in those Twisted runs (``Deferred.fromCoroutine``).
    """
    if future.done():
        return future.result()
    if _in_asyncio_task():
        return await asyncio.wrap_future(future)
    from twisted.internet import reactor

    d: Deferred[T] = Deferred()

    def _fire(f: Future[T]) -> None:
        exc = f.exception()
        if exc is not None:
            d.errback(Failure(exc))  # type: ignore[no-untyped-call]
        else:
            d.callback(f.result())

    future.add_done_callback(lambda f: reactor.callFromThread(_fire, f))
    return await d
