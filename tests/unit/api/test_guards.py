"""The request guards without services: key format and digest, who a key makes the caller (over an
in-memory key store), scopes and sites, the cost model and the rate limit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from api import cost
from api.auth import Authenticator, Caller, Forbidden, Unauthorized, is_loopback, require_scope, require_site
from api.credentials import digest, key_id_of, new_key
from api.ratelimit import RateLimited, RateLimiter
from config.settings import Settings
from serving_layer import SeriesQuery, TopQuery
from serving_layer.tiling import Granularity
from stores.api_keys import ApiKeyRecord

T0 = datetime(2026, 11, 1, tzinfo=UTC)


class MemoryKeys:
    def __init__(self) -> None:
        self.records: dict[str, ApiKeyRecord] = {}
        self.reads = 0

    async def insert(self, record: ApiKeyRecord) -> None:
        self.records[record.key_id] = record

    async def get(self, key_id: str) -> ApiKeyRecord | None:
        self.reads += 1
        return self.records.get(key_id)

    async def all(self) -> list[ApiKeyRecord]:
        return list(self.records.values())

    async def revoke(self, key_id: str, at: datetime) -> bool:
        from dataclasses import replace

        self.records[key_id] = replace(self.records[key_id], revoked_at=at)
        return True


def test_a_key_is_random_named_by_its_id_and_stored_as_its_digest() -> None:
    key, record = new_key("dash", {"read"}, ("shop.example.com",))
    other, _ = new_key("dash", {"read"}, None)
    assert key != other and key.startswith("lak_") and len(key) == 4 + 8 + 1 + 43
    assert key_id_of(key) == record.key_id and record.digest == digest(key) and key not in repr(record)
    assert key_id_of("lak_zz_nope") is None and key_id_of(key + "x") is None
    with pytest.raises(ValueError, match="scopes"):
        new_key("x", {"root"}, None)
    with pytest.raises(ValueError, match="scopes"):
        new_key("x", set(), None)


def test_the_caller_of_a_key_open_mode_and_the_legacy_ingest_key() -> None:
    async def run() -> None:
        store = MemoryKeys()
        key, record = new_key("dash", {"read"}, ("shop.example.com",))
        await store.insert(record)
        keyed = Authenticator(Settings(api_auth="keys", api_key_cache_s=60), store)
        caller = await keyed.caller(key)
        assert caller == Caller(record.key_id, frozenset({"read"}), frozenset({"shop.example.com"}))
        await keyed.caller(key)
        assert store.reads == 1  # remembered for api_key_cache_s
        for wrong in (None, "nope", key[:-1] + ("A" if key[-1] != "A" else "B")):
            with pytest.raises(Unauthorized):
                await keyed.caller(wrong)
        await store.revoke(record.key_id, T0)
        assert (await keyed.caller(key)).key_id == record.key_id  # still cached
        fresh = Authenticator(Settings(api_auth="keys", api_key_cache_s=0), store)
        with pytest.raises(Unauthorized, match="revoked"):
            await fresh.caller(key)

        open_ = Authenticator(Settings(api_auth="open"), store)
        assert (await open_.caller(None)).scopes == {"read", "write", "admin"}
        legacy = Authenticator(Settings(api_auth="open", api_key=SecretStr("s3cret")), store)
        anonymous = await legacy.caller(None)
        assert anonymous.scopes == {"read", "admin"}  # writes need the ingest key, as before
        with pytest.raises(Unauthorized, match="'write' scope"):
            require_scope(anonymous, "write")
        assert (await legacy.caller("s3cret")).scopes == {"write"}

    asyncio.run(run())


def test_scopes_and_sites() -> None:
    reader = Caller("k", frozenset({"read"}), frozenset({"a.example.com"}))
    require_scope(reader, "read")
    with pytest.raises(Forbidden, match="lacks the 'admin' scope"):
        require_scope(reader, "admin")
    require_site(reader, "a.example.com")
    with pytest.raises(Forbidden, match=r"may read the sites a\.example\.com only, not 'b\.example\.com'"):
        require_site(reader, "b.example.com")
    require_site(Caller("k", frozenset({"read"})), "b.example.com")
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1") and not is_loopback("example.com")


def test_the_cost_model() -> None:
    hourly = SeriesQuery("site", "s", T0, T0 + timedelta(days=92), Granularity.HOUR)
    assert cost.series_cost(hourly) == 92 + 92 * 24 + 92
    edges = SeriesQuery("site", "s", T0 + timedelta(hours=5), T0 + timedelta(days=2), Granularity.DAY)
    assert cost.series_cost(edges) == 2 + (19 + 1) + (19 + 1)
    top = TopQuery("page", T0, T0 + timedelta(days=92), 1000)
    assert cost.top_cost(top) == 184
    breakdown = TopQuery("page", T0, T0 + timedelta(days=92), 1000, visitors=True)
    assert cost.top_cost(breakdown) == 184 + 92 * 1002
    with pytest.raises(cost.TooCostly) as err:
        cost.check(cost.top_cost(breakdown), 20_000, "limit")
    detail = err.value.detail()[0]
    assert detail["loc"] == ["query", "limit"] and detail["ctx"] == {"cost": 92_368, "limit": 20_000}
    cost.check(20_000, 20_000, "to")


def test_the_rate_limit_counts_each_key_apart() -> None:
    limiter = RateLimiter("2/minute")
    limiter.hit("a")
    limiter.hit("a")
    limiter.hit("b")
    with pytest.raises(RateLimited) as err:
        limiter.hit("a")
    assert err.value.status_code == 429 and 1 <= int((err.value.headers or {})["Retry-After"]) <= 60
