"""Column expressions built once per JVM, and the values dimensions are given: what the shared
pass (views.shared_pass) and a dimension's own checks (views.dimension) build their columns with."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_BUILT: dict[tuple[object, ...], Column] = {}


def built(key: tuple[object, ...], build: Callable[[], Column]) -> Column:
    """``build()``, built once per JVM and reused by every later pass with the same ``key``.

    The speed layer builds the pass anew for each micro-batch, and PySpark builds a column
    expression one py4j call per function: the device rules alone are about 120 calls, the whole
    pass about 0.7 s of a small micro-batch before Spark runs anything (docs/views.md). A column
    is an unresolved expression, so one object serves any number of DataFrames."""
    from pyspark import SparkContext

    full = (id(SparkContext._gateway), *key)
    if full not in _BUILT:
        _BUILT[full] = build()
    return _BUILT[full]


def with_given(events: DataFrame, given: Iterable[tuple[str, Callable[[], Column]]]) -> DataFrame:
    """``events`` with the values some dimensions are given (``Dimension.given``: name and
    column), in one projection, each name once; the columns are built once per JVM
    (:func:`built`)."""
    wanted = dict.fromkeys((n, v) for n, v in given if n not in events.columns)
    if not wanted:
        return events
    return events.select("*", *[built(("given", n, v), _named(v, n)) for n, v in wanted])


def _named(value: Callable[[], Column], name: str) -> Callable[[], Column]:
    return lambda: value().alias(name)
