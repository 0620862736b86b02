"""What the API asks Kafka outside of producing: is it up, where do the logs end, how big is the DLQ.

confluent-kafka calls block, so they run in a worker thread, one at a time (a lock: concurrent
/v1/status calls must not open a consumer each), and every call has a timeout, so a Kafka outage
slows /v1/status and /readyz by at most that timeout and never touches the query routes.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from config.settings import Settings
from ingest.topics import watermarks


class KafkaUnavailable(RuntimeError):
    """Kafka did not answer (or did not acknowledge) in time."""


@dataclass(frozen=True)
class LogOffsets:
    events_end: dict[int, int]
    dlq_records: int


class KafkaProbe:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()

    def _offsets(self) -> LogOffsets:
        s, timeout = self.settings, self.settings.api_kafka_timeout_s
        try:
            with self._lock:
                events = watermarks(s, timeout)
                dlq = watermarks(s, timeout, s.dlq_topic)
        except Exception as exc:  # confluent-kafka raises KafkaException, RuntimeError, ...
            raise KafkaUnavailable(f"Kafka: {exc}") from exc
        return LogOffsets({p: high for p, (_, high) in events.items()}, sum(h - lo for lo, h in dlq.values()))

    async def offsets(self) -> LogOffsets:
        return await asyncio.to_thread(self._offsets)

    async def end_offsets(self) -> dict[int, int]:
        return (await self.offsets()).events_end
