"""Awaiting the page store's thread from the reactor thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")


async def result(future: Future[T]) -> T:
    """The result of a store-thread future, awaited without blocking the reactor."""
    if future.done():
        return future.result()
    from twisted.internet import reactor

    d: Deferred[T] = Deferred()

    def _fire(f: Future[T]) -> None:
        exc = f.exception()
        if exc is not None:
            d.errback(Failure(exc))  # type: ignore[no-untyped-call]
        else:
            d.callback(f.result())

    future.add_done_callback(lambda f: reactor.callFromThread(_fire, f))
    return await maybe_deferred_to_future(d)
