"""POST /api/event's rules without services: visitor ids and their salts, the client address behind
proxies, the page URL on the site, the country, the access log, and what the collector produces."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from datetime import date, timedelta
from typing import Any

import httpx
import orjson
import pytest
from fastapi import HTTPException
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from api.collect import COLLECT_PATH
from api.collect.access_log import RedactCollectAddresses
from api.collect.address import client_address, networks
from api.collect.collector import Collector, allowed_origins, clean_user_agent
from api.collect.country import CountryLookup
from api.collect.payload import page_url
from api.collect.snippet import snippet
from api.collect.visitors import VisitorIds, visitor_hash
from api.concurrency import EXEMPT, ConcurrencyLimit
from api.events import InvalidEvents
from config.settings import Settings
from contract import decode
from contract.codec import bounds_from
from ingest.producer import DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
from stores.salts import MemorySaltStore

text = st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=40)
SITE = "shop.example.com"
CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"


# --- visitor ids ------------------------------------------------------------------------------------
@given(st.binary(min_size=16, max_size=32), text, text, text, text, text, text)
def test_a_visitor_id_is_a_function_of_salt_site_address_and_agent_and_nothing_collides(
    salt: bytes, site: str, address: str, agent: str, site2: str, address2: str, agent2: str
) -> None:
    one = visitor_hash(salt, site, address, agent)
    assert one == visitor_hash(salt, site, address, agent) and len(one) == 32
    if (site, address, agent) != (site2, address2, agent2):
        assert one != visitor_hash(salt, site2, address2, agent2)
    assert one != visitor_hash(bytes(b ^ 1 for b in salt), site, address, agent)


def test_workers_agree_on_the_salt_and_only_today_and_yesterday_are_kept() -> None:
    store = MemorySaltStore()
    day = [date(2026, 11, 20)]
    a, b = VisitorIds(store, lambda: day[0]), VisitorIds(store, lambda: day[0])

    async def ids() -> tuple[str, str]:
        return await a.visitor_id(SITE, "203.0.113.7", CHROME), await b.visitor_id(
            SITE, "203.0.113.7", CHROME
        )

    first = asyncio.run(ids())
    assert first[0] == first[1]
    day[0] += timedelta(days=1)
    second = asyncio.run(ids())
    assert second[0] == second[1] != first[0]  # a new day: a new salt, a new visitor id
    day[0] += timedelta(days=1)
    asyncio.run(ids())
    assert asyncio.run(store.days()) == [date(2026, 11, 21), date(2026, 11, 22)]


# --- the client address -----------------------------------------------------------------------------
PROXIES = networks(["10.0.0.0/8", "192.0.2.1"])


def test_forwarded_for_counts_only_from_a_listed_proxy() -> None:
    assert client_address("198.51.100.9", "203.0.113.7", PROXIES) == "198.51.100.9"
    assert client_address("10.1.2.3", "203.0.113.7", PROXIES) == "203.0.113.7"
    # the client's own claim (left) is ignored: the rightmost address no listed proxy wrote
    assert client_address("10.1.2.3", "1.1.1.1, 203.0.113.7, 192.0.2.1", PROXIES) == "203.0.113.7"
    assert client_address("10.1.2.3", "203.0.113.7", ()) == "10.1.2.3"
    assert client_address(None, None, PROXIES) == ""


@given(st.lists(st.ip_addresses(v=4).map(str), min_size=1, max_size=6), st.ip_addresses(v=4).map(str))
def test_the_address_is_never_a_listed_proxy_unless_every_hop_is_one(hops: list[str], peer: str) -> None:
    got = client_address(peer, ", ".join(hops), PROXIES)
    chain = [peer, *hops]
    trusted = [any(ipaddress.ip_address(h) in n for n in PROXIES) for h in chain]
    assert got in chain
    if not trusted[0]:
        assert got == peer
    elif not all(trusted):
        assert not any(ipaddress.ip_address(got) in n for n in PROXIES)


# --- the page's URL, the user agent, the country, the origins ---------------------------------------
@given(
    st.sampled_from(["http", "https", "HTTPS"]), st.sampled_from(["www.shop.example.com", "127.0.0.1:8000"])
)
def test_the_page_url_is_the_path_and_query_under_the_configured_site(scheme: str, host: str) -> None:
    assert page_url(f"{scheme}://{host}/cart?x=1#top", SITE, False) == f"{scheme.lower()}://{SITE}/cart?x=1"
    assert (
        page_url(f"{scheme}://{host}/app#/settings", SITE, True)
        == f"{scheme.lower()}://{SITE}/app%23/settings"
    )
    assert page_url(f"{scheme}://{host}", SITE, False) == f"{scheme.lower()}://{SITE}/"
    assert page_url("ftp://x/y", SITE, False) == "ftp://x/y"  # the contract says why not


def test_user_agents_fit_the_contract_and_origins_default_to_the_sites() -> None:
    assert clean_user_agent("a\tb" + "x" * 600) == ("a b" + "x" * 600)[:512]
    assert clean_user_agent("") is None
    settings = Settings(collect_sites=[SITE])
    assert allowed_origins(settings) == {
        f"{s}://{h}" for s in ("https", "http") for h in (SITE, f"www.{SITE}")
    }
    assert allowed_origins(settings.model_copy(update={"collect_origins": ["https://A.test/"]})) == {
        "https://a.test"
    }


def test_country_comes_from_the_shipped_database_and_private_addresses_have_none() -> None:
    countries = CountryLookup()
    assert countries.country("8.8.8.8") == "US"
    assert countries.country("2001:4860:4860::8888") == "US"
    assert countries.country("127.0.0.1") is None
    assert countries.country("10.0.0.1") is None
    assert countries.country("not an address") is None
    assert countries.country("") is None


def test_the_access_log_never_shows_the_address_of_a_collected_event() -> None:
    redact = RedactCollectAddresses()
    fmt = '%s - "%s %s HTTP/%s" %d'
    record = logging.LogRecord(
        "uvicorn.access", 20, "", 0, fmt, ("203.0.113.7:5000", "POST", "/api/event", "1.1", 202), None
    )
    assert redact.filter(record) and "203.0.113.7" not in record.getMessage()
    other = logging.LogRecord(
        "uvicorn.access", 20, "", 0, fmt, ("203.0.113.7:5000", "GET", "/healthz", "1.1", 200), None
    )
    assert redact.filter(other) and "203.0.113.7" in other.getMessage()


# --- the collector, with an in-memory producer ------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bytes | None, dict[str, bytes]]] = []

    async def send(
        self, topic: str, value: bytes, key: bytes | None, headers: list[tuple[str, Any]] | None = None
    ) -> tuple[int, int]:
        self.records.append((topic, value, key, dict(headers or [])))
        return 0, len(self.records) - 1

    def close(self) -> None:
        pass


COUNTRIES = CountryLookup()


def collector(**settings: Any) -> tuple[Collector, Recorder]:
    recorder = Recorder()
    s = Settings(collect_sites=[SITE], **settings)
    return Collector(s, MemorySaltStore(), CollectorRegistry(), recorder, COUNTRIES), recorder


def post(c: Collector, payload: dict[str, Any], ua: str = CHROME, origin: str | None = None) -> Any:
    return asyncio.run(c.collect(orjson.dumps(payload), "8.8.8.8", None, ua, origin))


def test_a_page_view_becomes_a_contract_event_without_the_address() -> None:
    c, rec = collector()
    answer = post(
        c, {"n": "pageview", "u": "https://www.shop.example.com/p?q=1", "d": SITE, "r": None, "w": 1280}
    )
    assert answer.result == "counted"
    [(topic, value, key, _)] = rec.records
    event = decode(value, bounds_from(Settings()))
    assert topic == "events" and event.event_id == answer.event_id
    assert (
        event.url == "https://shop.example.com/p?q=1" and event.country == "US" and event.user_agent == CHROME
    )
    assert key == event.visitor_id.encode() and b"8.8.8.8" not in value
    again = post(c, {"n": "pageview", "u": "https://shop.example.com/", "d": SITE})
    assert decode(rec.records[1][1], bounds_from(Settings())).visitor_id == event.visitor_id
    assert again.event_id != answer.event_id


def test_other_events_and_contract_failures_are_dead_lettered_with_their_reason() -> None:
    c, rec = collector()
    assert post(c, {"n": "engagement", "u": "https://shop.example.com/", "d": SITE}).result == "dead_lettered"
    assert post(
        c, {"n": "pageview", "u": "https://shop.example.com/", "d": SITE, "r": "android-app://x"}
    ).reason
    (t1, v1, _, h1), (t2, _, _, h2) = rec.records
    assert (t1, t2) == ("events.dlq", "events.dlq")
    assert h1[DLQ_REASON_HEADER].startswith(b"n: ") and h2[DLQ_REASON_HEADER].startswith(b"referrer: ")
    assert h1[DLQ_SOURCE_HEADER] == b"collect" and b"8.8.8.8" not in v1


def test_unknown_sites_origins_and_bad_payloads_are_refused_naming_the_field() -> None:
    c, rec = collector()
    with pytest.raises(HTTPException) as refused:
        post(c, {"n": "pageview", "u": "https://other.example/", "d": "other.example"})
    assert refused.value.status_code == 403 and str(refused.value.detail).startswith("d: ")
    with pytest.raises(HTTPException) as origin:
        post(c, {"n": "pageview", "u": "https://shop.example.com/", "d": SITE}, origin="https://evil.test")
    assert origin.value.status_code == 403 and "Origin" in str(origin.value.detail)
    with pytest.raises(InvalidEvents) as bad:
        post(c, {"n": "pageview", "d": SITE})
    assert bad.value.errors[0]["loc"] == ["body", "u"]
    assert post(
        c, {"n": "pageview", "u": "https://shop.example.com/", "d": SITE}, origin="https://shop.example.com"
    )
    assert len(rec.records) == 1


def test_bots_are_dropped_only_when_the_setting_says_so() -> None:
    bot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
    kept, _ = collector()
    assert (
        post(kept, {"n": "pageview", "u": "https://shop.example.com/", "d": SITE}, ua=bot).result == "counted"
    )
    dropped, rec2 = collector(collect_drop_bots=True)
    assert (
        post(dropped, {"n": "pageview", "u": "https://shop.example.com/", "d": SITE}, ua=bot).result
        == "dropped"
    )
    assert not rec2.records


def test_the_snippet_loads_the_tracker_and_points_it_here() -> None:
    line = snippet("https://analytics.example.com/", SITE)
    assert line.startswith('<script type="module">import { init } from "/js/plausible.js"; init(')
    config = orjson.loads(line.split("init(", 1)[1].removesuffix(");</script>"))
    assert config == {"domain": SITE, "endpoint": "https://analytics.example.com/api/event"}


def test_collection_has_a_concurrency_limit_of_its_own() -> None:
    """Page views waiting for Kafka do not take the query routes' slots, nor the other way round."""
    gate = asyncio.Event()

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        await gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    queries = ConcurrencyLimit(slow, 1, 5, exempt=EXEMPT | {COLLECT_PATH})
    app = ConcurrencyLimit(
        queries, 2, 5, setting="LAMBDA_COLLECT_MAX_IN_FLIGHT", paths=frozenset({COLLECT_PATH})
    )

    async def race() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            held = [asyncio.create_task(client.post(COLLECT_PATH)) for _ in range(2)]
            held.append(asyncio.create_task(client.get("/v1/pageviews")))
            await asyncio.sleep(0.1)
            refused = [await client.post(COLLECT_PATH), await client.get("/v1/breakdown")]
            gate.set()
            return [*refused, *[await h for h in held]]

    collect, query, *served = asyncio.run(race())
    assert collect.status_code == 503 and "LAMBDA_COLLECT_MAX_IN_FLIGHT" in collect.json()["detail"]
    assert query.status_code == 503 and "LAMBDA_API_MAX_CONCURRENCY" in query.json()["detail"]
    assert [r.status_code for r in served] == [200, 200, 200]
