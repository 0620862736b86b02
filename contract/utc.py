"""Time in UTC, defined once.

Every stored and served time is UTC. MongoDB (and FerretDB) hand datetimes back naive, pydantic
hands them back with its own tzinfo, and the hot paths convert millions of them to epoch seconds:
these helpers are the one place that knows how.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

_EPOCH_ORDINAL = datetime(1970, 1, 1).toordinal()


def now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


@overload
def as_utc(value: datetime) -> datetime: ...
@overload
def as_utc(value: None) -> None: ...
def as_utc(value: datetime | None) -> datetime | None:
    """Naive times are UTC (what the stores return); aware ones are converted to UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def epoch_seconds(ts: datetime) -> float:
    """``ts.timestamp()`` of a datetime whose UTC offset is zero, to the same float, at half the cost
    (pydantic's tzinfo makes ``timestamp()`` slow): the exact microseconds over 10**6, as CPython
    computes it."""
    seconds = (ts.toordinal() - _EPOCH_ORDINAL) * 86400 + ts.hour * 3600 + ts.minute * 60 + ts.second
    return (seconds * 1_000_000 + ts.microsecond) / 1_000_000
