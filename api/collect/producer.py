"""The collection endpoint's producer: each request awaits its own record's acknowledgement,
while librdkafka batches the records of every request in flight together.

``POST /v1/events`` produces and flushes under a lock (a batch per request). A page view is one
small record per request, arriving at thousands of requests a second: flushing per request would
serialise them behind one round trip to the broker each. Here a request queues its record with a
delivery callback and awaits a future; a thread serves librdkafka's callbacks and settles the
futures on the event loop (the pattern of confluent-kafka's asyncio example). The producer's
settings are the platform's (ingest.producer.producer_config: idempotence, acks=all), with a short
linger, and a record not acknowledged within ``api_produce_timeout_s`` fails the request (503):
librdkafka gives up on it by then too, so a 503 is not a record written behind the client's back.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Protocol

from confluent_kafka import KafkaError, Message, Producer

from api.kafka import KafkaUnavailable
from config.settings import Settings
from ingest.producer import producer_config

POLL_S = 0.05


class RecordSender(Protocol):
    """What the collector needs of a producer (an in-memory recorder in unit tests)."""

    async def send(
        self, topic: str, value: bytes, key: bytes | None, headers: list[tuple[str, Any]] | None = None
    ) -> tuple[int, int]: ...

    def close(self) -> None: ...


class AckedProducer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._start_lock = threading.Lock()

    def _get(self) -> Producer:
        if self._producer is None:
            with self._start_lock:
                if self._producer is None:
                    timeout_ms = int(self.settings.api_produce_timeout_s * 1000)
                    config = producer_config(
                        self.settings, **{"linger.ms": 2, "message.timeout.ms": timeout_ms}
                    )
                    producer = Producer(config)
                    self._thread = threading.Thread(target=self._serve, args=(producer,), daemon=True)
                    self._thread.name = "collect-producer"
                    self._thread.start()
                    self._producer = producer
        return self._producer

    def _serve(self, producer: Producer) -> None:
        """Delivery callbacks run here, inside poll."""
        while not self._stop.is_set():
            producer.poll(POLL_S)

    async def send(
        self, topic: str, value: bytes, key: bytes | None, headers: list[tuple[str, Any]] | None = None
    ) -> tuple[int, int]:
        """Produces one record and returns its (partition, offset) once Kafka acknowledged it."""
        producer = self._get()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[int, int]] = loop.create_future()

        def settle(err: KafkaError | None, partition: int | None, offset: int | None) -> None:
            if done.done():
                return
            if err is not None or partition is None or offset is None:
                done.set_exception(KafkaUnavailable(f"Kafka did not take the event: {err}"))
            else:
                done.set_result((partition, offset))

        def delivered(err: KafkaError | None, msg: Message) -> None:
            loop.call_soon_threadsafe(settle, err, msg.partition(), msg.offset())

        try:
            producer.produce(topic, value, key, headers=headers, on_delivery=delivered)
        except BufferError as exc:  # librdkafka's queue is full: Kafka is not keeping up
            raise KafkaUnavailable(f"the producer's queue is full: {exc}") from exc
        try:
            return await asyncio.wait_for(done, self.settings.api_produce_timeout_s + 1.0)
        except TimeoutError as exc:
            raise KafkaUnavailable("Kafka did not acknowledge the event in time") from exc

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._producer is not None:
            self._producer.flush(self.settings.api_produce_timeout_s)
