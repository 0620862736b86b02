"""Comparison ranges: the range a query is compared with, and the change between two figures.

``compare=previous_period`` compares ``[start, end)`` with the range of the same length just before
it, ``[start - (end - start), start)``; ``compare=year_over_year`` with the same calendar range one
year earlier (each end moved back one year, 29 February to 28 February, so that range may be one
day longer). The comparison range is answered by the same query as the range itself, from its own
snapshot, with its own coverage and exactness; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Generic, TypeVar

from serving_layer.model import InvalidQuery
from serving_layer.queries import EARLIEST


class Compare(StrEnum):
    PREVIOUS_PERIOD = "previous_period"
    YEAR_OVER_YEAR = "year_over_year"


A = TypeVar("A")


@dataclass(frozen=True)
class Compared(Generic[A]):
    """The answer of a query's comparison range, and which comparison it is."""

    compare: Compare
    answer: A


def year_earlier(t: datetime) -> datetime:
    """``t`` one calendar year earlier; 29 February becomes 28 February."""
    if t.month == 2 and t.day == 29:
        return t.replace(year=t.year - 1, day=28)
    return t.replace(year=t.year - 1)


def comparison_range(start: datetime, end: datetime, compare: Compare) -> tuple[datetime, datetime]:
    """The range ``[start, end)`` is compared with; InvalidQuery naming ``compare`` if it would
    begin before the earliest time a query may ask for."""
    if compare is Compare.PREVIOUS_PERIOD:
        if start - EARLIEST < end - start:
            raise InvalidQuery("compare", f"the previous period would begin before {EARLIEST:%Y-%m-%d}")
        return start - (end - start), start
    if start.year - 1 < EARLIEST.year:
        raise InvalidQuery("compare", f"a year earlier would begin before {EARLIEST:%Y-%m-%d}")
    return year_earlier(start), year_earlier(end)


def percent_change(value: float | None, base: float | None) -> float | None:
    """The change from ``base`` to ``value`` in percent of ``base`` (rounded to 0.01); None when
    either is missing or the base is 0 (no percentage describes growth from nothing)."""
    if value is None or base is None or base == 0:
        return None
    return round((value - base) / base * 100, 2)
