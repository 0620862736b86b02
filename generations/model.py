"""The records of the generation protocol, whatever store holds them: offsets, the served
generation and the speed layer's commit."""

from __future__ import annotations

from dataclasses import dataclass, field

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
