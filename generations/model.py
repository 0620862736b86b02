"""The records of the generation protocol, whatever store holds them: a generation, offsets, the
served generation and the speed layer's commit."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from generations.state import GenerationState

Offsets = dict[int, int]
"""Kafka offsets of the events topic by partition: a cut, a commit's end, a log end."""


@dataclass(frozen=True)
class SpeedCommit:
    """The speed layer's last committed micro-batch: its id and end offsets."""

    batch_id: int = -1
    offsets: Offsets = field(default_factory=dict)


@dataclass(frozen=True)
class Served:
    gen: int = -1
    """-1: nothing is served (no speed layer and no batch run yet)."""
    cut: Offsets = field(default_factory=dict)


DayMap = dict[str, dict[str, int]]
"""view name -> UTC day -> generation whose stored documents hold that day."""


class GenerationError(RuntimeError):
    """A generation the registry cannot open, lock, publish or read."""


@dataclass
class Generation:
    """One batch run: its state, its cut, and which stored documents make up each of its views.
    The registry's record, and what a query reads of a published generation."""

    gen: int
    kind: str
    """"full" (every view recomputed from the whole master dataset) or "incremental"."""
    state: GenerationState
    cut: Offsets
    started_at: datetime
    finished_at: datetime | None = None
    served_at: datetime | None = None
    retired_at: datetime | None = None
    day_map: DayMap = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)
    views: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What the API needs to serve each view with no code of its own: its description, whether it
    is per site, example values (views.dimension)."""
    stats: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


GENERATION_ZERO = Generation(
    gen=0, kind="full", state=GenerationState.SERVED, cut={}, started_at=datetime(1970, 1, 1, tzinfo=UTC)
)
"""What is served before the first batch run: generation 0 has no batch views and its cut is the
start of the log, so the realtime views alone answer (generations.registry.ensure_hot_copy). It is
only in Redis' pointer, never a registry document, so the readers know it without one."""
