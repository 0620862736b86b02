"""The master dataset's manifest: the record of a segment (one absorb's exact offset ranges), the
store's write half (the batch layer's absorb commits segments) and its read halves (the batch layer
reads what is absorbed; the API's status reads the dead-letter totals and gaps). Backend:
``stores.mongo.manifest``.

Committing a segment is atomic: readers of the master dataset read only the committed segments
(batch_layer.master).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class Segment:
    segment_id: str
    gen: int
    path: str
    ranges: dict[int, tuple[int, int]]
    """partition -> [from, to) offsets absorbed."""
    events: int
    invalid: int
    days: list[str]
    committed_at: datetime
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    """Invalid records per field of their reason (``reason_field``)."""
    dedup_window_ms: int | None = None
    """The window its ``duplicates`` were found with (None: a segment absorbed before they were)."""
    gap: dict[str, Any] | None = None
    """Set on an accepted gap: offsets retention deleted before any absorb, recorded (who, when,
    from what time on records survive) so that the master dataset accounts for every offset."""


def segments_end(segments: Iterable[Segment]) -> dict[int, int]:
    """Per partition, the offset up to which these segments cover the log (the highest end)."""
    end: dict[int, int] = {}
    for segment in segments:
        for p, (_, to) in segment.ranges.items():
            end[p] = max(end.get(p, 0), to)
    return end


def invalid_reasons_total(per_segment: Iterable[Mapping[str, int] | None]) -> dict[str, int]:
    """Invalid records per field of their reason, summed over segments: what the batch layer has
    dead-lettered, each record once whatever crashes repeated."""
    total: dict[str, int] = {}
    for reasons in per_segment:
        if isinstance(reasons, Mapping):
            for name, n in reasons.items():
                total[name] = total.get(name, 0) + int(n)
    return total


class ManifestStore(Protocol):
    """The master dataset's manifest: the segments committed so far (batch_layer.master)."""

    def segments(self) -> list[Segment]:
        """Every committed segment, by generation and id."""
        ...

    def commit(self, segment: Segment) -> None:
        """Make a written segment part of the master dataset, atomically."""
        ...


class ManifestReader(Protocol):
    """The API's read of the manifest (its status: dead letters, what is absorbed, gaps)."""

    async def segments(self) -> list[Segment]:
        """Every committed segment, by generation and id."""
        ...
