"""From a tracker's request to a record acknowledged by Kafka: the work behind ``POST /api/event``.

Refused outright (4xx, nothing produced): a body that is not the tracker's payload (422 naming
the field), a site not in ``LAMBDA_COLLECT_SITES`` or a browser page of an origin not allowed
(403 naming ``d`` or ``Origin``): the endpoint is public, and these are what keep it to the
configured sites. Everything else is answered 202 once Kafka has it: a page view that satisfies
the contract goes to the events topic, anything else (another event name, a URL or referrer the
contract refuses) to the DLQ with the contract's reason and ``dlq.source`` = ``collect``, exactly
as ingest's rejects. With ``LAMBDA_COLLECT_DROP_BOTS`` a bot's page view (views.devices) is
answered and counted in ``/metrics`` but not produced.

The dead letter holds the event as built (no address: only the visitor id derived from it) and
the tracker's payload, so that a later feature (custom events) could replay it.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi import HTTPException
from prometheus_client import CollectorRegistry, Counter
from pymongo.errors import PyMongoError

from api.collect.address import client_address, networks
from api.collect.country import CountryLookup
from api.collect.payload import PAGEVIEW, CollectAnswer, TrackerEvent, page_url, parse
from api.collect.producer import AckedProducer, RecordSender
from api.collect.visitors import VisitorIds
from config.settings import Settings
from contract import ContractError, encode, validate
from contract.codec import bounds_from
from contract.events import MAX_USER_AGENT_LENGTH
from ingest.producer import dlq_headers
from stores.salts import SaltStore
from views.devices import classify

DLQ_SOURCE = "collect"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def allowed_origins(settings: Settings) -> frozenset[str]:
    """``LAMBDA_COLLECT_ORIGINS``, or each collected site's and its ``www.`` twin's, https and http."""
    if settings.collect_origins:
        return frozenset(o.rstrip("/").lower() for o in settings.collect_origins)
    hosts = {h for site in settings.collect_sites for h in (site.lower(), f"www.{site.lower()}")}
    return frozenset(f"{scheme}://{host}" for host in hosts for scheme in ("https", "http"))


def clean_user_agent(raw: str | None) -> str | None:
    """The User-Agent header as the contract takes it: control characters (a tab is legal in a
    header) as spaces, at most the contract's length."""
    if not raw:
        return None
    return _CONTROL.sub(" ", raw)[:MAX_USER_AGENT_LENGTH]


class Collector:
    def __init__(
        self,
        settings: Settings,
        salts: SaltStore,
        registry: CollectorRegistry,
        producer: RecordSender | None = None,
        countries: CountryLookup | None = None,
    ) -> None:
        self.settings = settings
        self.sites = frozenset(s.lower() for s in settings.collect_sites)
        self.origins = allowed_origins(settings)
        self.proxies = networks(settings.collect_trusted_proxies)
        self.visitors = VisitorIds(salts)
        self.producer: RecordSender = producer or AckedProducer(settings)
        self.countries = countries or CountryLookup()
        self.bounds = bounds_from(settings)
        self.results = Counter(
            "lambda_collect_events",
            "Events posted to /api/event, by what became of them (refused: a 4xx, nothing produced).",
            ["result"],
            registry=registry,
        )

    def origin_allowed(self, origin: str | None) -> bool:
        """A request without ``Origin`` is not a browser page's cross-origin call: not judged here."""
        return origin is None or origin.rstrip("/").lower() in self.origins

    async def collect(
        self,
        body: bytes,
        peer: str | None,
        forwarded_for: str | None,
        user_agent: str | None,
        origin: str | None,
    ) -> CollectAnswer:
        try:
            payload = parse(body)
            site = payload.d.strip().lower()
            if site not in self.sites:
                raise HTTPException(403, f"d: site {site!r} is not collected here (LAMBDA_COLLECT_SITES)")
            if not self.origin_allowed(origin):
                raise HTTPException(403, f"Origin: {origin!r} may not post events (LAMBDA_COLLECT_ORIGINS)")
        except Exception:
            self.results.labels("refused").inc()
            raise
        ua = clean_user_agent(user_agent)
        if self.settings.collect_drop_bots and classify(ua) == "bot":
            self.results.labels("dropped").inc()
            return CollectAnswer(result="dropped", event_id=None, reason="user_agent: a bot (views.devices)")
        address = client_address(peer, forwarded_for, self.proxies)
        event = {
            "event_id": str(uuid.uuid4()),
            "ts": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "visitor_id": await self._visitor_id(site, address, ua or ""),
            "url": page_url(payload.u, site, bool(payload.h)),
            "referrer": payload.r or None,
            "user_agent": ua,
            "country": self.countries.country(address),
        }
        if payload.n != PAGEVIEW:
            return await self._dead_letter(
                event, payload, f"n: event {payload.n!r} is not counted: only pageview is"
            )
        try:
            valid = validate(event, self.bounds)
        except ContractError as exc:
            return await self._dead_letter(event, payload, exc.reason)
        await self.producer.send(self.settings.events_topic, encode(valid), valid.visitor_id.encode())
        self.results.labels("counted").inc()
        return CollectAnswer(result="counted", event_id=valid.event_id, reason=None)

    async def _visitor_id(self, site: str, address: str, user_agent: str) -> str:
        try:
            return await self.visitors.visitor_id(site, address, user_agent)
        except PyMongoError as exc:  # the day's salt could not be read or stored
            raise HTTPException(
                503,
                f"the salts of visitor ids are unavailable: {type(exc).__name__}",
                headers={"Retry-After": str(self.settings.api_retry_after_s)},
            ) from exc

    async def _dead_letter(self, event: dict[str, Any], payload: TrackerEvent, reason: str) -> CollectAnswer:
        record = orjson.dumps({"event": event, "tracker": payload.model_dump(exclude_none=True)})
        await self.producer.send(self.settings.dlq_topic, record, None, dlq_headers(reason, DLQ_SOURCE))
        self.results.labels("dead_lettered").inc()
        return CollectAnswer(result="dead_lettered", event_id=None, reason=reason)

    def close(self) -> None:
        self.producer.close()
