"""Scrapy's check of generator callbacks, made once per callback instead of once per page.

Before every callback Scrapy asks whether the callback is a generator with a
``return value`` (``WARN_ON_GENERATOR_RETURN_VALUE``): it reads the method's
source and parses it with :mod:`ast`, and remembers the answer in a cache keyed
*weakly* by the callable. A callback is a bound method, and the frontier
rebuilds each request from disk, so each page brings a new bound method: the
answer is forgotten as soon as the previous request is gone, and the source is
parsed again for every page (about 2 ms of CPU a page for the ``site`` spider).

:func:`keep_callback` is called with each response's callback before Scrapy
checks it, keeps the first bound method of each function alive on the spider
and has Scrapy's cache entry made under that object, and a bound method equals every other
bound method of the same function and spider, so every later lookup finds it.
The check and its warning are Scrapy's, unchanged; only the repeats are saved.
"""

from __future__ import annotations

import contextlib
from typing import Any

from scrapy.utils.misc import is_generator_with_return_value

_KEPT = "_polite_kept_callbacks"


def keep_callback(spider: Any, callback: Any) -> None:
    """Keep a request's ``callback`` (before Scrapy checks it) alive on ``spider``."""
    if callback is None:
        return
    kept = getattr(spider, _KEPT, None)
    if kept is None:
        kept = set()
        try:
            setattr(spider, _KEPT, kept)
        except AttributeError:  # a spider with __slots__: nothing to keep it on
            return
    if callback in kept:
        return
    try:
        kept.add(callback)
    except TypeError:  # an unhashable callable: Scrapy cannot cache it either
        return
    # Make Scrapy's cache entry now, under the kept object (the answer is the same).
    with contextlib.suppress(Exception):  # Scrapy reports its own failures when it checks
        is_generator_with_return_value(callback)
