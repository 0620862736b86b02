"""POST /v1/events behind the route: read a bounded body, validate against the contract, produce.

A request is all or nothing: if any event breaks the contract, none is produced and the 422 lists
every broken field of every event, so a client fixes its batch once. Accepted events go to Kafka
through the platform's one producer (idempotent, acks=all); the answer names each event's
partition and offset and an offsets token for read-your-writes.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import HTTPException, Request

from api.kafka import KafkaUnavailable
from config.settings import Settings
from contract import ContractError, PageView, validate
from contract.codec import bounds_from
from ingest.producer import EventProducer
from serving_layer.consistency import encode_token


class PayloadTooLarge(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidEvents(Exception):
    """Every problem of a rejected body: FastAPI's error shape, ``loc`` = ["body", index, field]."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} invalid field(s)")
        self.errors = errors


def field_error(loc: list[str | int], msg: str, kind: str = "value_error") -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind}


def require_json(request: Request) -> None:
    """415 unless the request declares ``Content-Type: application/json``. A ``text/plain`` (or form)
    POST is a "simple" cross-origin request that any web page can send without a CORS preflight;
    requiring JSON makes the browser ask first, and CORS decides."""
    declared = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if declared != "application/json":
        raise HTTPException(
            status_code=415,
            detail=f"Content-Type must be application/json, not {declared or 'missing'}",
        )


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refusing (413) as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"body of {declared} bytes exceeds the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def load_json(body: bytes) -> Any:
    """The body's JSON value, or InvalidEvents (a 422) saying where it is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidEvents([field_error(["body"], f"is not valid JSON: {exc}", "json_invalid")]) from None


def parse_events(body: bytes, settings: Settings) -> list[PageView]:
    """One event (a JSON object) or a batch (an array of them), each validated by the contract."""
    data = load_json(body)
    items = data if isinstance(data, list) else [data]
    if not items:
        raise InvalidEvents([field_error(["body"], "must hold at least one event")])
    if len(items) > settings.api_max_events:
        raise PayloadTooLarge(
            f"{len(items)} events exceed the limit of {settings.api_max_events} per request"
        )
    bounds = bounds_from(settings)
    events: list[PageView] = []
    errors: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append(field_error(["body", i], "must be a JSON object (an event)", "type_error"))
            continue
        try:
            events.append(validate(item, bounds))
        except ContractError as exc:
            # The contract's reason is one "field: problem" clause per broken field.
            for clause in exc.reason.split("; "):
                field, _, problem = clause.partition(": ")
                errors.append(field_error(["body", i, field], problem or clause))
    if errors:
        raise InvalidEvents(errors)
    return events


_LOW_LATENCY: dict[str, Any] = {"linger.ms": 2}
"""A request waits for its acks: batching for 20 ms (the bulk default) would be 20 ms per POST."""


@dataclass(frozen=True)
class Accepted:
    events: list[tuple[str, int, int]]
    """(event_id, partition, offset) in request order."""
    token: str


class EventIngest:
    """The API's producer. librdkafka batches across requests; a lock keeps one request's produce
    and flush together, because the producer's offset bookkeeping is not thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._producer: EventProducer | None = None
        self._lock = threading.Lock()

    def _get(self) -> EventProducer:
        if self._producer is None:
            self._producer = EventProducer(self.settings, report_offsets=True, **_LOW_LATENCY)
        return self._producer

    def _produce(self, events: list[PageView]) -> Accepted:
        with self._lock:
            producer = self._get()
            indexes = [producer.add(e) for e in events]
            try:
                producer.flush(self.settings.api_produce_timeout_s)
            except TimeoutError as exc:
                raise KafkaUnavailable(f"Kafka did not acknowledge the events: {exc}") from exc
            positions = [producer.take_offsets(i) for i in indexes]
        if any(p is None for p in positions):
            failed = sum(p is None for p in positions)
            raise KafkaUnavailable(f"Kafka refused {failed} of {len(events)} events; resending is safe")
        accepted = [(e.event_id, p[0], p[1]) for e, p in zip(events, positions, strict=True) if p is not None]
        ends: dict[int, int] = {}
        for _, partition, offset in accepted:
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        return Accepted(accepted, encode_token(ends))

    async def produce(self, events: list[PageView]) -> Accepted:
        return await asyncio.to_thread(self._produce, events)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.settings.api_produce_timeout_s)
