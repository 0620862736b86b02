"""Prometheus metrics of the API: request latency per route, store errors, cache effectiveness.

Each app gets its own registry (tests build several apps in one process); the middleware is plain
ASGI rather than Starlette's BaseHTTPMiddleware, which costs a task and a queue per request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class DeadLetters(Collector):
    """Dead letters per source and field of the reason, from the last /v1/status snapshot.

    ``lambda_layer_dead_letters``: what the batch layer (committed master segments) and the speed
    layer (committed micro-batches) dead-lettered, each record once. ``lambda_dlq_records``: what
    the DLQ topic holds by its headers, every source including ingest, repeats dropped by key.
    """

    def __init__(self) -> None:
        self.snapshot: dict[str, Any] = {}

    def update(self, snapshot: dict[str, Any]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        layers = GaugeMetricFamily(
            "lambda_layer_dead_letters",
            "Records a layer dead-lettered (committed), by source and field of the reason.",
            labels=["source", "reason"],
        )
        for source, name in (("batch-absorb", "batch_absorb"), ("speed-layer", "speed_layer")):
            for reason, n in sorted((self.snapshot.get(name) or {}).items()):
                layers.add_metric([source, reason], float(n))
        yield layers
        dlq = GaugeMetricFamily(
            "lambda_dlq_records",
            "Records read from the dead-letter topic, by source and field of the reason.",
            labels=["source", "reason"],
        )
        for source, reasons in sorted((self.snapshot.get("in_dlq") or {}).items()):
            for reason, n in sorted(reasons.items()):
                dlq.add_metric([source, reason], float(n))
        yield dlq


class Operations(Collector):
    """What an operator watches, from the last /v1/status snapshot: how old the served cut is and
    whether the batch layer counts as stalled, Redis memory against its limit, how much of the
    topic's retention the oldest unabsorbed record has used, and accepted gaps."""

    def __init__(self) -> None:
        self.snapshot: dict[str, Any] = {}

    def update(self, snapshot: dict[str, Any]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        served = self.snapshot.get("served") or {}
        memory = self.snapshot.get("redis") or {}
        master = self.snapshot.get("master") or {}
        retention = master.get("retention") or {}
        gauges: list[tuple[str, str, Any]] = [
            (
                "lambda_served_cut_age_seconds",
                "Seconds since the served generation's cut.",
                served.get("batch_age_s"),
            ),
            (
                "lambda_batch_stalled",
                "1 when the served cut is older than batch_stalled_after_s.",
                served.get("stalled"),
            ),
            ("lambda_redis_used_memory_bytes", "Redis used_memory.", memory.get("used_memory_bytes")),
            (
                "lambda_redis_maxmemory_bytes",
                "Redis maxmemory (absent: no limit).",
                memory.get("maxmemory_bytes"),
            ),
            (
                "lambda_log_retention_used_ratio",
                "Age of the oldest unabsorbed record over the topic's retention.",
                retention.get("retention_used"),
            ),
            (
                "lambda_master_gaps",
                "Accepted gaps in the master dataset.",
                len(master.get("gaps") or []) if master else None,
            ),
        ]
        for name, help_text, value in gauges:
            family = GaugeMetricFamily(name, help_text)
            if value is not None:
                family.add_metric([], float(value))
            yield family


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Histogram(
            "lambda_api_request_seconds",
            "Time to answer a request, by method, route template and status.",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.store_errors = Counter(
            "lambda_api_store_errors_total",
            "Reads or writes that failed because a store (mongodb, redis, kafka) did not answer.",
            ["store"],
            registry=self.registry,
        )
        self.bad_keys = Counter(
            "lambda_api_malformed_keys_total",
            "Stored view keys that did not parse and were left out of an answer, by view.",
            ["view"],
            registry=self.registry,
        )
        self.dead_letters = DeadLetters()
        self.registry.register(self.dead_letters)
        self.operations = Operations()
        self.registry.register(self.operations)

    def gauge(self, name: str, doc: str, fn: Callable[[], float]) -> None:
        Gauge(name, doc, registry=self.registry).set_function(fn)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(scope["method"], template, str(status)).observe(
                time.perf_counter() - started
            )
