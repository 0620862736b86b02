"""In-memory sink for fast unit tests of the ingest path (no Kafka), beside the real-service tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from contract import PageView
from ingest.producer import ProduceStats


@dataclass
class DeadLetter:
    payload: bytes
    reason: str
    source: str


@dataclass
class InMemorySink:
    """Collects what :class:`~ingest.producer.EventProducer` would have produced."""

    events: list[PageView] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    stats: ProduceStats = field(default_factory=ProduceStats)
    flushes: int = 0

    def add(self, event: PageView) -> int:
        self.events.append(event)
        self.stats.sent += 1
        return len(self.events) - 1

    def dead_letter(self, payload: bytes, reason: str, source: str, key: str | None = None) -> None:
        self.stats.count_reject(reason)
        self.dead_letters.append(DeadLetter(payload, reason, source))

    def flush(self, timeout: float = 120.0) -> ProduceStats:
        self.flushes += 1
        return self.stats
