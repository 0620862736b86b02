"""The registry of views: the one place both layers look up what to compute.

A view is a PySpark function from the visits table (:mod:`views.visits`: each event once, counted
per URL, hour and visitor) to a DataFrame of view rows (:mod:`views.rows`). The batch job builds
the visits of the master dataset once and applies every registered view to them; the streaming
job does the same for each micro-batch. Adding a view means writing one function and decorating
it with :func:`register`.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ViewFunction = Callable[["DataFrame", int], "DataFrame"]
"""(visits, hll lgConfigK) -> view rows."""


@dataclass(frozen=True)
class View:
    name: str
    key: str
    """What the key column holds ("url", "site"), for readers and the API."""
    compute: ViewFunction
    fingerprint: str
    """Hash of the function's source: a changed definition makes its stored batch views stale."""

    def __call__(self, visits: DataFrame, lg_k: int) -> DataFrame:
        return self.compute(visits, lg_k)


_REGISTRY: dict[str, View] = {}


def _fingerprint(fn: Callable[..., object]) -> str:
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = repr(fn)
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def register(name: str, key: str) -> Callable[[ViewFunction], ViewFunction]:
    """Decorator: make ``fn`` the definition of view ``name`` (a later registration replaces it)."""

    def decorate(fn: ViewFunction) -> ViewFunction:
        _REGISTRY[name] = View(name=name, key=key, compute=fn, fingerprint=_fingerprint(fn))
        return fn

    return decorate


def all_views() -> list[View]:
    _load_definitions()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def get_view(name: str) -> View:
    _load_definitions()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no view named {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


@contextmanager
def replaced(name: str, fn: ViewFunction, key: str | None = None) -> Iterator[View]:
    """Temporarily swap a view's definition (tests of bug fixes and recomputes use this)."""
    original = get_view(name)
    register(name, key or original.key)(fn)
    try:
        yield _REGISTRY[name]
    finally:
        _REGISTRY[name] = original


def _load_definitions() -> None:
    # Importing the definition modules registers their views.
    import views.traffic  # noqa: F401
