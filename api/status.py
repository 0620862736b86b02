"""GET /v1/status and /readyz behind the routes: each store asked concurrently, each failure
reported by component instead of failing the whole answer (status is what you read during an
incident)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from api.auth import mode_note
from api.kafka import KafkaUnavailable, LogOffsets
from api.services import Services
from config.settings import Settings
from contract import utc
from serving_layer import NothingServed, ServingError, ServingState
from stores.errors import StoreUnavailable
from stores.manifest import invalid_reasons_total, segments_end
from stores.redis import status as redis_status


def _as_time(value: object) -> datetime | None:
    return utc.as_utc(value) if isinstance(value, datetime) else None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return utc.as_utc(t)


@dataclass(frozen=True)
class Manifest:
    """What /v1/status reads from the master dataset's manifest, in one scan."""

    dead_letters: dict[str, int]
    """Per field of the reason, every record the batch layer dead-lettered (each once, whatever
    crashes repeated)."""
    absorbed_until: dict[int, int]
    gaps: list[dict[str, Any]]
    """Offsets retention deleted before they were absorbed, accepted by an operator."""


async def read_manifest(services: Services) -> Manifest:
    segments = await services.manifest.segments()
    gaps = [
        {
            "offsets": {str(p): list(r) for p, r in s.ranges.items()},
            "accepted_by": s.gap.get("accepted_by"),
            "accepted_at": _as_time(s.committed_at),
            "records_survive_from": s.gap.get("records_survive_from") or {},
        }
        for s in segments
        if isinstance(s.gap, dict)
    ]
    return Manifest(invalid_reasons_total(s.invalid_reasons for s in segments), segments_end(segments), gaps)


async def repair_generation_pointer(services: Services) -> bool:
    """Whether Redis' served pointer was behind MongoDB's (a run died between the two writes of
    a switch) and was brought forward: the registry's repair, in a thread (it is synchronous)."""
    served = await services.engine.batch.served_generation()
    if served is None:
        return False
    if await redis_status.served_gen(services.redis) >= served.gen:
        return False
    return await asyncio.to_thread(_repair, services.settings)


def _repair(settings: Settings) -> bool:
    from generations.registry import GenerationRegistry
    from stores.mongo import client as mongo_client
    from stores.mongo.generations import MongoGenerationStore
    from stores.redis import client as redis_client
    from stores.redis.handshake import RedisHotCopy

    mongo = mongo_client.connect(settings, timeout_ms=settings.api_mongo_timeout_ms)
    r = redis_client.connect(settings, timeout_s=settings.api_redis_timeout_ms / 1000)
    try:
        registry = GenerationRegistry(MongoGenerationStore(mongo[settings.mongo_db]), RedisHotCopy(r), dict)
        return registry.repair_hot_copy()
    finally:
        mongo.close()
        r.close()


async def redis_memory(services: Services) -> dict[str, Any]:
    """Redis' used memory against its maxmemory (None there: no limit). Realtime views live as long
    as their generation does, so a batch layer that stops publishing shows here first."""
    return await redis_status.memory(services.redis)


def _speed_dead_letters(stats: dict[str, object] | None) -> dict[str, int] | None:
    reasons = stats.get("invalid_reasons_total") if stats else None
    return {str(k): int(v) for k, v in reasons.items()} if isinstance(reasons, dict) else None


async def collect_status(services: Services) -> dict[str, Any]:
    errors: dict[str, str] = {}
    timeout = services.settings.api_kafka_timeout_s
    repaired = False
    try:  # first, so that the state read next sees the repaired pointer
        repaired = await asyncio.wait_for(repair_generation_pointer(services), timeout)
    except Exception as exc:  # a store that is down is reported below by its own read
        errors["repair"] = f"comparing the served pointers of MongoDB and Redis: {exc!r}"
    state_result, log_result, manifest, memory = await asyncio.gather(
        services.engine.state(),
        services.kafka.offsets(),
        asyncio.wait_for(read_manifest(services), timeout),
        asyncio.wait_for(redis_memory(services), timeout),
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
    elif isinstance(state_result, ServingError | StoreUnavailable):
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
        age = (utc.now() - g.started_at).total_seconds()
        served = {
            "generation": g.gen,
            "cut": g.cut,
            "cut_at": g.started_at,
            "served_at": g.served_at,
            "batch_age_s": round(age, 3),
            "stalled": age > services.settings.batch_stalled_after_s,
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
    master = None
    if isinstance(manifest, BaseException):
        errors.setdefault("mongodb", f"the master dataset's manifest: {manifest!r}")
    else:
        master = {"absorbed_until": manifest.absorbed_until, "gaps": manifest.gaps, "retention": None}
        try:
            master["retention"] = (await services.kafka.retention(manifest.absorbed_until)).as_dict()
        except KafkaUnavailable as exc:
            errors.setdefault("kafka", str(exc))
    if isinstance(memory, BaseException):
        errors.setdefault("redis", f"memory: {memory!r}")
    dead_letters = {
        "batch_absorb": manifest.dead_letters if isinstance(manifest, Manifest) else None,
        "speed_layer": _speed_dead_letters(state.speed_stats) if state is not None else None,
        "in_dlq": log.dlq_by_source if log is not None else None,
    }
    result = {
        "served": served,
        "speed": speed,
        "log": log_out,
        "master": master,
        "redis": None if isinstance(memory, BaseException) else memory,
        "repaired_pointer": repaired,
        "dead_letters": dead_letters,
        "errors": errors,
        "auth": {"mode": services.settings.api_auth, "note": mode_note(services.settings)},
    }
    services.metrics.dead_letters.update(dead_letters)
    services.metrics.operations.update(result)
    return result


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
