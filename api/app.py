"""The FastAPI application: services built once per process, errors mapped to status codes.

Errors are never a silent wrong number:
- a bad parameter is a 422 naming it (same shape as FastAPI's own validation errors);
- MongoDB down is a 503 with Retry-After (no batch views, no right answer);
- Redis down is a batch-only answer flagged ``partial`` (see serving_layer.engine), or a 503 for
  an answer of the speed layer alone (current visitors);
- a read-your-writes wait that runs out is a 504 listing the partitions not yet covered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi

from api import cost, render
from api.answer_cache import AnswerCache
from api.auth import Authenticator, check_binding, mode_note
from api.collect import COLLECT_PATH, access_log
from api.collect.collector import Collector
from api.concurrency import EXEMPT, ConcurrencyLimit
from api.cost import TooCostly
from api.events import EventIngest, InvalidEvents, PayloadTooLarge
from api.kafka import KafkaProbe, KafkaUnavailable
from api.metrics import ApiMetrics, MetricsMiddleware
from api.ratelimit import RateLimiter
from api.routes import collect, current_visitors, dashboard, dimensions, events, ops, queries, query_v2
from api.services import Services
from config import memo
from config.settings import Settings, get_settings
from contract import PageView
from serving_layer import (
    BatchUnavailable,
    ConsistencyTimeout,
    InvalidQuery,
    NothingServed,
    QueryEngine,
    RealtimeUnavailable,
    SeriesQuery,
    TopQuery,
)
from serving_layer.filters import Busy, FilterService, ScanTimeout, TooManyRows
from serving_layer.filters.scan import Limits, Scanner
from serving_layer.model import NotReady
from stores.mongo.api_keys import MongoApiKeyStore
from stores.mongo.client import connect_async
from stores.mongo.manifest import MongoManifestReader
from stores.mongo.reader import MongoBatchReader
from stores.mongo.salts import MongoSaltStore
from stores.redis.reader import RedisRealtimeReader, connect

log = logging.getLogger(__name__)

DESCRIPTION = """Web analytics over an immutable event log, answered exactly: every number is the
served generation's batch views (MongoDB) merged with its realtime views (Redis) by Kafka offsets,
read as one consistent snapshot. Unique visitors are HLL sketch unions with 95% bounds.
Buckets are UTC hours and days; ranges must be whole hours."""


def build_services(settings: Settings) -> Services:
    metrics = ApiMetrics()
    mongo = connect_async(settings, read_timeout_s=settings.api_mongo_read_timeout_s)
    batch = MongoBatchReader(
        mongo, settings.mongo_db, settings.api_cache_mb * 1024 * 1024, settings.api_mongo_concurrency
    )
    redis_client = connect(settings)
    realtime = RedisRealtimeReader(redis_client)
    engine = QueryEngine(
        batch,
        realtime,
        on_degraded=lambda store, exc: metrics.store_errors.labels(store).inc(),
        on_bad_key=lambda view, key: metrics.bad_keys.labels(view).inc(),
    )
    cache = batch.documents_cache
    metrics.gauge("lambda_api_batch_cache_bytes", "Bytes of batch documents cached.", lambda: cache.bytes)
    metrics.gauge("lambda_api_batch_cache_hits", "Batch document cache hits.", lambda: cache.hits)
    metrics.gauge("lambda_api_batch_cache_misses", "Batch document cache misses.", lambda: cache.misses)
    answers = AnswerCache(realtime, settings.api_answer_cache_bytes)
    metrics.gauge("lambda_api_answer_cache_bytes", "Bytes of answers cached.", lambda: answers.cached_bytes)
    metrics.gauge("lambda_api_answer_cache_hits", "Answers sent from the cache.", lambda: answers.hits)
    metrics.gauge("lambda_api_answer_cache_misses", "Cacheable answers computed.", lambda: answers.misses)
    metrics.gauge(
        "lambda_api_answer_cache_stale",
        "Cached answers a commit or a generation switch made stale.",
        lambda: answers.stale,
    )
    for setting, bound in memo.BOUNDS.items():  # tilings, read plans, normalised URLs
        name = f"lambda_{setting.removeprefix('api_').removesuffix('_bytes')}_bytes"
        metrics.gauge(name, f"Bytes cached (bound: LAMBDA_{setting.upper()}).", _bytes_of(bound))
    return Services(
        settings=settings,
        engine=engine,
        answers=answers,
        ingest=EventIngest(settings),
        kafka=KafkaProbe(settings),
        metrics=metrics,
        manifest=MongoManifestReader(mongo[settings.mongo_db]),
        redis=redis_client,
        auth=Authenticator(settings, MongoApiKeyStore(mongo[settings.mongo_db])),
        rate=RateLimiter(settings.api_rate_limit),
        close_stores=_closer(realtime.aclose, mongo.close),
        collect=Collector(settings, MongoSaltStore(mongo[settings.mongo_db]), metrics.registry),
        filters=filter_service(settings, engine),
    )


def filter_service(settings: Settings, engine: QueryEngine) -> FilterService:
    """POST /v2/query's work: the engine for the views path, a bounded scanner for the filter table."""
    limits = Limits(
        max_rows=settings.api_filter_max_rows,
        max_realtime_bytes=settings.api_filter_max_realtime_mb * 2**20,
        concurrency=settings.api_filter_concurrency,
        queue=settings.api_filter_queue,
        timeout_s=settings.api_filter_timeout_s,
        threads=settings.api_filter_threads,
        memory_mb=settings.api_filter_memory_mb,
    )

    def check_cost(q: SeriesQuery | TopQuery) -> None:
        asked = cost.series_cost(q) if isinstance(q, SeriesQuery) else cost.top_cost(q)
        cost.check(asked, settings.api_max_cost, "date_range", "body")

    return FilterService(
        engine, Scanner(limits), settings.filter_table_uri, settings.api_max_top, check_cost=check_cost
    )


def _closer(*closes: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """Close these clients, one after the other."""

    async def close() -> None:
        for c in closes:
            await c()

    return close


def _bytes_of(bound: memo.Bound) -> Callable[[], float]:
    return lambda: bound.bytes


def _retry_after(services: Services) -> dict[str, str]:
    return {"Retry-After": str(services.settings.api_retry_after_s)}


def _install_error_handlers(app: FastAPI, services: Services) -> None:
    async def invalid_query(request: Request, exc: Exception) -> render.JsonBytes:
        assert isinstance(exc, InvalidQuery)
        where = getattr(exc, "location", "query")
        detail = [{"loc": [where, exc.param], "msg": exc.problem, "type": "value_error"}]
        return render.json_response({"detail": detail}, 422)

    async def too_many_rows(request: Request, exc: Exception) -> render.JsonBytes:
        assert isinstance(exc, TooManyRows)
        detail = [
            {
                "loc": ["body", exc.param],
                "msg": exc.problem,
                "type": "cost_limit",
                "ctx": exc.ctx,
            }
        ]
        return render.json_response({"detail": detail}, 422)

    async def scan_busy(request: Request, exc: Exception) -> render.JsonBytes:
        return render.json_response({"detail": str(exc)}, 429, _retry_after(services))

    async def scan_timeout(request: Request, exc: Exception) -> render.JsonBytes:
        log.warning("504: %s", exc)
        return render.json_response({"detail": str(exc)}, 504)

    async def too_costly(request: Request, exc: Exception) -> render.JsonBytes:
        assert isinstance(exc, TooCostly)
        return render.json_response({"detail": exc.detail()}, 422)

    async def invalid_events(request: Request, exc: Exception) -> render.JsonBytes:
        assert isinstance(exc, InvalidEvents)
        return render.json_response({"detail": exc.errors}, 422)

    async def too_large(request: Request, exc: Exception) -> render.JsonBytes:
        assert isinstance(exc, PayloadTooLarge)
        return render.json_response({"detail": exc.detail}, 413)

    async def batch_down(request: Request, exc: Exception) -> render.JsonBytes:
        services.metrics.store_errors.labels("mongodb").inc()
        log.warning("503: %s", exc)
        return render.json_response(
            {"detail": f"batch views unavailable: {exc}"}, 503, _retry_after(services)
        )

    async def nothing_served(request: Request, exc: Exception) -> render.JsonBytes:
        return render.json_response({"detail": str(exc)}, 503, _retry_after(services))

    async def not_ready(request: Request, exc: Exception) -> render.JsonBytes:
        assert isinstance(exc, NotReady)
        return render.json_response({"detail": str(exc), "dimension": exc.view}, 409)

    async def kafka_down(request: Request, exc: Exception) -> render.JsonBytes:
        services.metrics.store_errors.labels("kafka").inc()
        log.warning("503: %s", exc)
        return render.json_response({"detail": str(exc)}, 503, _retry_after(services))

    async def realtime_down(request: Request, exc: Exception) -> render.JsonBytes:
        # Only an answer of the speed layer alone raises it (the others fall back on the batch views).
        services.metrics.store_errors.labels("redis").inc()
        log.warning("503: %s", exc)
        return render.json_response({"detail": str(exc)}, 503, _retry_after(services))

    async def timed_out(request: Request, exc: Exception) -> render.JsonBytes:
        assert isinstance(exc, ConsistencyTimeout)
        return render.json_response({"detail": str(exc), "pending": exc.pending}, 504)

    app.add_exception_handler(InvalidQuery, invalid_query)
    app.add_exception_handler(TooManyRows, too_many_rows)
    app.add_exception_handler(Busy, scan_busy)
    app.add_exception_handler(ScanTimeout, scan_timeout)
    app.add_exception_handler(TooCostly, too_costly)
    app.add_exception_handler(InvalidEvents, invalid_events)
    app.add_exception_handler(PayloadTooLarge, too_large)
    app.add_exception_handler(BatchUnavailable, batch_down)
    app.add_exception_handler(NothingServed, nothing_served)
    app.add_exception_handler(NotReady, not_ready)
    app.add_exception_handler(KafkaUnavailable, kafka_down)
    app.add_exception_handler(RealtimeUnavailable, realtime_down)
    app.add_exception_handler(ConsistencyTimeout, timed_out)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    check_binding(settings, settings.api_host)
    memo.configure(settings)
    services = build_services(settings)
    access_log.install()  # no client address of /api/event in uvicorn's access log
    log.info("API authentication: %s", mode_note(settings))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.collect_sites:  # read the country database now, not in the first page view
            await asyncio.to_thread(services.collect.countries.load)
        try:
            yield
        finally:
            services.collect.close()
            if services.filters is not None:
                services.filters.scanner.close()
            services.ingest.close()
            services.kafka.close()
            await services.close_stores()

    app = FastAPI(
        title="Lambda analytics API",
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # The HTTP server answers a request it cannot parse before the API sees it (for example a
        # request line over its limit, a URL of some 64 KB): any operation may get it.
        responses={400: {"description": "A request the HTTP server cannot parse (too long, malformed)."}},
    )
    app.state.services = services
    app.include_router(queries.router)
    app.include_router(dimensions.router)
    app.include_router(current_visitors.router)
    app.include_router(events.router)
    app.include_router(collect.router)
    app.include_router(ops.router)
    app.include_router(dashboard.router)
    app.include_router(query_v2.router)
    _install_error_handlers(app, services)
    app.add_middleware(MetricsMiddleware, metrics=services.metrics)
    app.add_middleware(
        ConcurrencyLimit,
        limit=settings.api_max_concurrency,
        retry_after_s=settings.api_retry_after_s,
        exempt=EXEMPT | {COLLECT_PATH},
    )
    app.add_middleware(  # page views mostly wait for Kafka's acknowledgement: a limit of their own
        ConcurrencyLimit,
        limit=settings.collect_max_in_flight,
        retry_after_s=settings.api_retry_after_s,
        setting="LAMBDA_COLLECT_MAX_IN_FLIGHT",
        paths=frozenset({COLLECT_PATH}),
    )
    if settings.api_cors_origins:  # none by default: a browser reads answers of this origin only
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.api_cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "Authorization", "X-API-Key"],
            max_age=600,
        )

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            # The events body is parsed by hand (limits, per-event errors); document its model here.
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components["PageView"] = PageView.model_json_schema(ref_template="#/components/schemas/{model}")
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
