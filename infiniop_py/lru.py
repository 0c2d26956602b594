"""A bounded least-recently-used mapping whose evicted values are released by a callback."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable


class LRU:
    """At most ``limit`` entries; adding one more evicts the least recently used and calls
    ``release(key, value)`` on it (e.g. destroying a descriptor or freeing device memory).

    ``get`` marks a hit as most recently used; ``clear`` releases every entry.
    """

    __slots__ = ("limit", "_data", "_release")

    def __init__(self, limit: int, release: Callable[[Hashable, object], None] | None = None):
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"LRU limit must be a positive int, got {limit!r}")
        self.limit = limit
        self._data: OrderedDict = OrderedDict()
        self._release = release

    def get(self, key, default=None):
        data = self._data
        value = data.get(key, default)
        if value is not default:
            data.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        data = self._data
        if key in data:
            old = data.pop(key)
            if old is not value:
                self._evicted(key, old)
        data[key] = value
        while len(data) > self.limit:
            self._evicted(*data.popitem(last=False))

    def _evicted(self, key, value) -> None:
        if self._release is not None:
            self._release(key, value)

    def clear(self) -> None:
        data = self._data
        while data:
            self._evicted(*data.popitem(last=False))

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key) -> bool:
        return key in self._data

    def values(self):
        return list(self._data.values())
