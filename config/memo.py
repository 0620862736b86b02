"""Memoisation bounded in bytes, each cache by one setting: what a process keeps of pure functions
it is asked again and again (range tilings, read plans, normalised URLs).

``@memo("api_tiling_cache_bytes")`` caches a function in a cachetools ``LRUCache`` whose size is
the estimated bytes of each entry (its arguments and its result, :func:`deep_size`), so what a
caller asks can never grow a process past the setting: a 92-day hourly tiling weighs about 0.5 MB,
a normalised URL up to a few KB. Until :func:`configure` is called with the process' settings, a
cache is bounded by the setting's default. A result bigger than the whole bound is not cached.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Hashable
from functools import update_wrapper
from types import BuiltinFunctionType, FunctionType, ModuleType
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from cachetools import LRUCache

if TYPE_CHECKING:
    from config.settings import Settings

P = ParamSpec("P")
R = TypeVar("R")

_SHARED = (type, ModuleType, FunctionType, BuiltinFunctionType)
"""Objects an entry refers to but does not own: not counted."""


SAMPLE = 16
"""A sequence longer than this is sized from this many of its items, evenly spaced."""


def deep_size(obj: object) -> int:
    """Bytes of ``obj`` and of every object it refers to, each counted once (classes, modules and
    functions it refers to are shared, not counted). A long tuple or list is sized from
    :data:`SAMPLE` of its items spread over it, scaled to its length: the cached values are
    sequences of items of one shape (tiles, buckets, days), and sizing 2,208 buckets item by item
    would cost more than making them."""
    return _size(obj, set())


def _size(obj: object, seen: set[int]) -> int:
    if id(obj) in seen or isinstance(obj, _SHARED):
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, tuple | list) and len(obj) > SAMPLE:
        step = len(obj) / SAMPLE
        sampled = sum(_size(obj[int(k * step)], seen) for k in range(SAMPLE))
        return size + sampled * len(obj) // SAMPLE
    return size + sum(_size(child, seen) for child in gc.get_referents(obj))


class Bound:
    """One setting's cache, shared by every function memoised under that setting."""

    def __init__(self, setting: str, max_bytes: int) -> None:
        self.setting = setting
        self.lock = threading.Lock()
        self.cache: LRUCache[Hashable, tuple[Any, int]] = LRUCache(max_bytes, getsizeof=_entry_size)

    @property
    def max_bytes(self) -> int:
        return int(self.cache.maxsize)

    @property
    def bytes(self) -> int:
        return int(self.cache.currsize)

    def __len__(self) -> int:
        return len(self.cache)

    def resize(self, max_bytes: int) -> None:
        """A new bound; the entries are dropped (they are only a cache)."""
        with self.lock:
            self.cache = LRUCache(max_bytes, getsizeof=_entry_size)

    def clear(self) -> None:
        self.resize(self.max_bytes)


class Memo(Generic[P, R]):
    """A function cached in its setting's byte-bounded LRU (see the module)."""

    def __init__(self, fn: Callable[P, R], bound: Bound) -> None:
        self.fn = fn
        self.bound = bound
        update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        key: Hashable = (self.fn, args, tuple(kwargs.items())) if kwargs else (self.fn, args)
        bound = self.bound
        try:
            with bound.lock:
                value: R = bound.cache[key][0]
                return value
        except KeyError:
            pass
        value = self.fn(*args, **kwargs)
        size = deep_size(args) + deep_size(value) + ENTRY_OVERHEAD
        if size <= bound.max_bytes:
            with bound.lock:
                bound.cache[key] = (value, size)
        return value

    def cache_clear(self) -> None:
        self.bound.clear()


ENTRY_OVERHEAD = 200
"""Bytes of an entry besides its arguments and result: the key and entry tuples, the LRU's dict
slot and its order link."""


def _entry_size(entry: tuple[Any, int]) -> int:
    return entry[1]


BOUNDS: dict[str, Bound] = {}
"""The caches of this process, by the setting that bounds each."""


def memo(setting: str) -> Callable[[Callable[P, R]], Memo[P, R]]:
    """Caches a pure function in the LRU bounded by the bytes the setting ``setting`` names (one
    LRU per setting, shared by the functions that name it)."""
    from config.settings import Settings

    default = Settings.model_fields[setting].default
    assert isinstance(default, int), setting
    bound = BOUNDS.setdefault(setting, Bound(setting, default))

    def wrap(fn: Callable[P, R]) -> Memo[P, R]:
        return Memo(fn, bound)

    return wrap


def configure(settings: Settings) -> None:
    """Bounds every cache by its setting in ``settings`` (the API calls it when it starts)."""
    for setting, bound in BOUNDS.items():
        max_bytes = getattr(settings, setting)
        if max_bytes != bound.max_bytes:
            bound.resize(max_bytes)
