"""Start paths wait for the services they need, and say what they wait for.

In steady state the jobs wait through an outage of Kafka, MongoDB or Redis (the speed layer retries
its commit; the batch layer fails its run and the next one tries again). A job that *starts* while a
service is down should do the same instead of dying on its first call: :func:`wait_for_services`
probes each service with a real request (a Kafka metadata request, MongoDB ``ping``, Redis ``PING``),
retries every second, logs what it is waiting for, and gives up after ``service_wait_s`` with the
last error of each service still down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from config.settings import Settings

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0
RETRY_WAIT_S = 1.0
LOG_EVERY_S = 10.0


class ServicesUnavailable(RuntimeError):
    """A service a job needs did not answer within ``service_wait_s``."""


def _kafka(settings: Settings) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap, "socket.timeout.ms": 3000})
    admin.list_topics(timeout=PROBE_TIMEOUT_S)


def _mongodb(settings: Settings) -> None:
    from pymongo import MongoClient

    client: MongoClient[dict[str, object]] = MongoClient(
        settings.mongo_url, serverSelectionTimeoutMS=int(PROBE_TIMEOUT_S * 1000)
    )
    try:
        client.admin.command("ping")
    finally:
        client.close()


def _redis(settings: Settings) -> None:
    import redis

    client = redis.Redis.from_url(settings.redis_url, socket_timeout=PROBE_TIMEOUT_S)
    try:
        client.ping()
    finally:
        client.close()


PROBES: dict[str, Callable[[Settings], None]] = {"kafka": _kafka, "mongodb": _mongodb, "redis": _redis}


def address(settings: Settings, service: str) -> str:
    return {
        "kafka": settings.kafka_bootstrap,
        "mongodb": settings.mongo_url,
        "redis": f"{settings.redis_host}:{settings.redis_port}/{settings.redis_db}",
    }[service]


def wait_for_services(
    settings: Settings, services: Iterable[str] = ("kafka", "mongodb", "redis"), job: str = "the job"
) -> None:
    """Return once every named service answers; ServicesUnavailable after ``service_wait_s``."""
    down = list(services)
    started = time.monotonic()
    last_log = 0.0
    errors: dict[str, str] = {}
    while True:
        still = []
        for service in down:
            try:
                PROBES[service](settings)
            except Exception as exc:  # each client raises its own kinds: all mean "not yet"
                errors[service] = f"{type(exc).__name__}: {exc}"
                still.append(service)
        waited = time.monotonic() - started
        if not still:
            if waited >= RETRY_WAIT_S:
                log.info("%s: every service answers after %.0f s", job, waited)
            return
        down = still
        if waited >= settings.service_wait_s:
            detail = "; ".join(f"{s} at {address(settings, s)}: {errors[s]}" for s in down)
            raise ServicesUnavailable(f"{job} gave up after {waited:.0f} s waiting for {detail}")
        if waited - last_log >= LOG_EVERY_S or last_log == 0.0:
            last_log = max(waited, 1e-9)
            log.warning(
                "%s is waiting for %s (%.0f s so far)",
                job,
                ", ".join(f"{s} at {address(settings, s)} ({errors[s][:200]})" for s in down),
                waited,
            )
        time.sleep(RETRY_WAIT_S)
