"""Requests to bytes and back, for the on-disk queue.

The same dict as :meth:`scrapy.Request.to_dict` (and read back with
:func:`scrapy.utils.request.request_from_dict`), with the spider's callbacks stored
by name. ``Request.to_dict`` looks a callback's name up by listing every method of
the spider for every request; here the name is found once per function.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from scrapy.http.request import NO_CALLBACK
from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from scrapy import Request, Spider

_NO_CALLBACK = "__polite_no_callback__"


class RequestCodec:
    def __init__(self, spider: Spider | None) -> None:
        self.spider = spider
        self._names: dict[Any, str] = {}

    def _name(self, func: Any) -> Any:
        if func is None or isinstance(func, str):
            return func
        if func is NO_CALLBACK:
            return _NO_CALLBACK
        inner = getattr(func, "__func__", None)
        if inner is None or getattr(func, "__self__", None) is not self.spider:
            raise ValueError(f"{func!r} is not a method of the spider")
        name = self._names.get(inner)
        if name is None:
            name = inner.__name__
            bound = getattr(self.spider, name, None)
            if getattr(bound, "__func__", None) is not inner:
                raise ValueError(f"{func!r} is not reachable by its name on the spider")
            self._names[inner] = name
        return name

    def dumps(self, request: Request) -> bytes:
        d: dict[str, Any] = {
            "url": request.url,
            "callback": self._name(request.callback),
            "errback": self._name(request.errback),
            "headers": dict(request.headers),
        }
        for attr in request.attributes:
            d.setdefault(attr, getattr(request, attr))
        if type(request).__module__ != "scrapy.http.request" or \
                type(request).__name__ != "Request":
            d["_class"] = f"{type(request).__module__}.{type(request).__name__}"
        return pickle.dumps(d, protocol=5)

    def loads(self, data: bytes) -> Request:
        d = pickle.loads(data)
        no_callback = d.get("callback") == _NO_CALLBACK
        if no_callback:
            d["callback"] = None
        request = request_from_dict(d, spider=self.spider)
        if no_callback:
            request.callback = NO_CALLBACK
        return request
