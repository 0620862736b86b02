"""Validate records against the contract and produce them: the one path every source takes.

A source yields raw records in one of three shapes:
- ``bytes``: one JSON document (a JSONL line, an HTTP body item);
- ``dict``: fields already parsed (the generator);
- ``(bytes, dict)``: parsed fields plus the original bytes to keep in the DLQ (a CSV line);
- :class:`Unreadable`: bytes the source itself could not split into fields, with the reason.
Valid ones go to `events`, the rest to the DLQ with their reason; the caller gets the counts.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from contract import ContractError, TimeBounds, decode, validate
from ingest.producer import EventSink, ProduceStats


@dataclass(frozen=True)
class Unreadable:
    payload: bytes
    reason: str


RawRecord = bytes | dict[str, Any] | tuple[bytes, dict[str, Any]] | Unreadable

_PROGRESS_EVERY = 5_000


class RateColumn(ProgressColumn):
    """Records per second over the whole run so far (steadier than rich's windowed speed)."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.completed / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:,.0f} ev/s", style="progress.data.speed")


def progress_bar(console: Console | None = None) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _split(record: RawRecord) -> tuple[bytes | None, dict[str, Any] | None]:
    if isinstance(record, bytes):
        return record, None
    if isinstance(record, dict):
        return None, record
    if isinstance(record, Unreadable):
        raise ContractError(record.reason)
    return record[0], record[1]


def _original(record: RawRecord) -> bytes:
    if isinstance(record, bytes):
        return record
    if isinstance(record, Unreadable):
        return record.payload
    if isinstance(record, dict):
        return orjson.dumps(record, default=str, option=orjson.OPT_UTC_Z)
    return record[0]


def ingest(
    records: Iterable[RawRecord],
    producer: EventSink,
    *,
    source: str,
    bounds: TimeBounds,
    total: int | None = None,
    progress: Progress | None = None,
    description: str = "ingest",
) -> ProduceStats:
    """Validate and produce every record, then flush; returns the run's counts.

    The flush at the end is part of the run: a run reports success only when Kafka acknowledged
    every event and every rejection.
    """
    task = progress.add_task(description, total=total) if progress is not None else None

    def advance(n: int) -> None:
        if progress is not None and task is not None:
            progress.advance(task, n)

    # The loop allocates millions of short-lived, acyclic objects; reference counting frees them
    # all, and the cyclic collector would only scan them again and again (docs/design.md).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _validate_and_produce(records, producer, source, bounds, advance)
    finally:
        if gc_was_enabled:
            gc.enable()
    return producer.flush()


def _validate_and_produce(
    records: Iterable[RawRecord],
    producer: EventSink,
    source: str,
    bounds: TimeBounds,
    advance: Callable[[int], None],
) -> None:
    pending = 0
    for record in records:
        try:
            payload, fields = _split(record)
            event = validate(fields, bounds) if fields is not None else decode(payload or b"", bounds)
        except ContractError as exc:
            producer.dead_letter(_original(record), exc.reason, source)
        else:
            producer.add(event)
        pending += 1
        if pending == _PROGRESS_EVERY:
            advance(pending)
            pending = 0
    advance(pending)


def paced(records: Iterable[RawRecord], rate: float | None) -> Iterator[RawRecord]:
    """Hold a source to ``rate`` records per second (None or 0: as fast as possible)."""
    if not rate:
        yield from records
        return
    start = time.monotonic()
    for n, record in enumerate(records, 1):
        yield record
        if n % 256 == 0:
            ahead = n / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
