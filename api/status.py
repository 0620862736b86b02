"""GET /v1/status and /readyz behind the routes: each store asked concurrently, each failure
reported by component instead of failing the whole answer (status is what you read during an
incident)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from api.kafka import KafkaUnavailable, LogOffsets
from api.services import Services
from contract import utc
from serving_layer import NothingServed, ServingError, ServingState


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return utc.as_utc(t)


async def batch_dead_letters(services: Services) -> dict[str, int]:
    """Per field of the reason, every record the batch layer dead-lettered: the invalid records of
    the master dataset's committed segments (each once, whatever crashes repeated)."""
    segments = services.mongo[services.settings.mongo_db]["master_segments"]
    total: dict[str, int] = {}
    async for doc in segments.find({}, {"invalid_reasons": 1}):
        reasons = doc.get("invalid_reasons")
        if isinstance(reasons, dict):
            for name, n in reasons.items():
                total[name] = total.get(name, 0) + int(n)
    return total


def _speed_dead_letters(stats: dict[str, object] | None) -> dict[str, int] | None:
    reasons = stats.get("invalid_reasons_total") if stats else None
    return {str(k): int(v) for k, v in reasons.items()} if isinstance(reasons, dict) else None


async def collect_status(services: Services) -> dict[str, Any]:
    errors: dict[str, str] = {}
    state_result, log_result, batch_letters = await asyncio.gather(
        services.engine.state(),
        services.kafka.offsets(),
        asyncio.wait_for(batch_dead_letters(services), services.settings.api_kafka_timeout_s),
        return_exceptions=True,
    )
    state: ServingState | None = None
    log: LogOffsets | None = None
    if isinstance(state_result, ServingState):
        state = state_result
        if state.realtime_error:
            errors["redis"] = state.realtime_error
    elif isinstance(state_result, NothingServed):
        errors["served"] = str(state_result)
    elif isinstance(state_result, ServingError):
        errors["mongodb"] = str(state_result)
    elif isinstance(state_result, BaseException):
        raise state_result
    if isinstance(log_result, LogOffsets):
        log = log_result
    elif isinstance(log_result, KafkaUnavailable):
        errors["kafka"] = str(log_result)
    elif isinstance(log_result, BaseException):
        raise log_result

    served = None
    if state is not None:
        g = state.generation
        served = {
            "generation": g.gen,
            "cut": g.cut,
            "cut_at": g.started_at,
            "served_at": g.served_at,
            "batch_age_s": round((utc.now() - g.started_at).total_seconds(), 3),
        }
    speed = None
    if state is not None and state.commit is not None:
        committed = state.commit.offsets
        cut = state.generation.cut
        lag = None
        if log is not None:
            # Events in the log that no view holds yet: beyond both the cut and the speed layer's commit.
            lag = {
                p: max(0, end - max(committed.get(p, 0), cut.get(p, 0))) for p, end in log.events_end.items()
            }
        stats = state.speed_stats
        speed = {
            "batch_id": state.commit.batch_id,
            "committed_offsets": committed,
            "lag": lag,
            "last_batch_at": _parse_time(stats.get("at")) if stats else None,
            "last_batch": stats,
        }
    log_out = None if log is None else {"end_offsets": log.events_end, "dlq_records": log.dlq_records}
    if isinstance(batch_letters, BaseException):
        errors.setdefault("mongodb", f"dead letters of the batch layer: {batch_letters!r}")
    dead_letters = {
        "batch_absorb": batch_letters if isinstance(batch_letters, dict) else None,
        "speed_layer": _speed_dead_letters(state.speed_stats) if state is not None else None,
        "in_dlq": log.dlq_by_source if log is not None else None,
    }
    services.metrics.dead_letters.update(dead_letters)
    return {"served": served, "speed": speed, "log": log_out, "dead_letters": dead_letters, "errors": errors}


async def _check(aw: Any) -> dict[str, Any]:
    try:
        await aw
    except Exception as exc:
        return {"ok": False, "detail": str(exc) or type(exc).__name__}
    return {"ok": True, "detail": "ok"}


async def readiness(services: Services) -> dict[str, Any]:
    """Ready when MongoDB answers: without it nothing can be served; Redis or Kafka being down only
    degrades answers (batch-only) or writes, and is reported here for the operator."""
    engine = services.engine
    mongo, redis_check, kafka = await asyncio.gather(
        _check(engine.batch.ping()), _check(engine.realtime.ping()), _check(services.kafka.offsets())
    )
    return {"ready": mongo["ok"], "checks": {"mongodb": mongo, "redis": redis_check, "kafka": kafka}}
