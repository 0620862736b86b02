"""The layout of a realtime view as a hash of fields, shared by the Redis backend (stores.redis)
and its in-memory twin (stores.memory): the fields a view row writes, the fields a read's cells
name, and the decoding of what was read into the serving layer's values.

A realtime view of (generation, view, key, day) is a hash of these fields, the realtime twin of a
batch document: ``pv`` and ``pv:HH`` page views in the day and in hour HH (00-23), ``sk`` and
``sk:HH`` the HLL sketches of their visitors, ``vi bo du vv`` and ``vi:HH`` ... the visit sums
(stores.rows.VISIT_FIELDS). Exact distinct counts are not kept in realtime: they do not add up
across micro-batches. Nothing outside ``stores`` spells a field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from stores.realtime_views import (
    EMPTY_DAY,
    HOURS,
    NO_VISITS,
    Cell,
    Measure,
    RealtimeDay,
    VisitSums,
)
from stores.rows import VISIT_FIELDS, ranking_score, visit_metric

PV = "pv"
SKETCH = "sk"


def hour_field(kind: str, hour: int) -> str:
    """``pv:07`` / ``sk:07``: the hourly field of a realtime hash."""
    return f"{kind}:{hour:02d}"


def _cell_fields(measure: Measure, hour: int | None) -> tuple[str, ...]:
    names = {Measure.PAGEVIEWS: (PV,), Measure.VISITORS: (SKETCH,), Measure.VISITS: VISIT_FIELDS}[measure]
    return names if hour is None else tuple(hour_field(name, hour) for name in names)


_FIELDS: dict[Cell, tuple[str, ...]] = {
    (measure, hour): _cell_fields(measure, hour) for measure in Measure for hour in (None, *range(HOURS))
}


@lru_cache(maxsize=4096)
def fields_of(cells: tuple[Cell, ...]) -> tuple[str, ...]:
    """The fields that hold ``cells``, in their order (a visit cell is four fields)."""
    return tuple(f for cell in cells for f in _FIELDS[cell])


def decode(cells: tuple[Cell, ...], values: Sequence[bytes | str | None]) -> RealtimeDay:
    """The values read for :func:`fields_of` ``(cells)`` (None where a field is absent) as the
    serving layer's value."""
    if all(v is None for v in values):
        return EMPTY_DAY
    pv = 0
    h_pv: list[int] | None = None
    sk: bytes | None = None
    h_sk: list[bytes | None] | None = None
    visits = NO_VISITS
    h_visits: list[VisitSums] | None = None
    i = 0
    for measure, hour in cells:
        if measure is Measure.VISITS:
            raw = values[i : i + 4]
            i += 4
            if all(v is None for v in raw):
                continue
            vi, bo, du, vv = (0 if v is None else int(v) for v in raw)
            if hour is None:
                visits = (vi, bo, du, vv)
            else:
                h_visits = h_visits or [NO_VISITS] * HOURS
                h_visits[hour] = (vi, bo, du, vv)
            continue
        value = values[i]
        i += 1
        if value is None:
            continue
        if measure is Measure.PAGEVIEWS:
            if hour is None:
                pv = int(value)
            else:
                h_pv = h_pv or [0] * HOURS
                h_pv[hour] = int(value)
        else:
            sketch = value if isinstance(value, bytes) else value.encode()
            if hour is None:
                sk = sketch
            else:
                h_sk = h_sk or [None] * HOURS
                h_sk[hour] = sketch
    return RealtimeDay(
        pv,
        EMPTY_DAY.h_pv if h_pv is None else tuple(h_pv),
        sk,
        EMPTY_DAY.h_sk if h_sk is None else tuple(h_sk),
        visits,
        EMPTY_DAY.h_visits if h_visits is None else tuple(h_visits),
    )


@dataclass(frozen=True)
class RealtimeWrite:
    """What one view row (views.rows) adds to its realtime hash: increments per field, sketches to
    union per field, and its key's ranking score (page views; visits for a view of visits only)."""

    increments: dict[str, int]
    sketches: dict[str, bytes]
    score: int


def realtime_write(row: Any) -> RealtimeWrite:
    """The fields a view row writes (the one mapping every realtime store applies): page views and
    their sketches where the row has page views, visit metrics where they are not zero."""
    increments: dict[str, int] = {}
    found: dict[str, bytes] = {}
    pv = int(row["pv"])
    if pv:
        increments[PV] = pv
        found[SKETCH] = bytes(row["sk"])
    for name in VISIT_FIELDS:
        if n := visit_metric(row, name):
            increments[name] = n
    for h in row["hours"]:
        hour = h["hour"]
        if h["pv"]:
            increments[hour_field(PV, hour)] = int(h["pv"])
            found[hour_field(SKETCH, hour)] = bytes(h["sk"])
        for name in VISIT_FIELDS:
            if n := visit_metric(h, name):
                increments[hour_field(name, hour)] = n
    return RealtimeWrite(increments, found, ranking_score(row))
