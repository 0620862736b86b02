"""API keys on the real services: made by the CLI, stored hashed in MongoDB, scopes and sites
enforced, and the bounds of a request (cost, concurrency, rate) answered with their status."""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api import keys_cli as api_keys_cli
from api.app import create_app
from api.auth import OpenOnNonLoopback, check_binding
from api.credentials import digest
from config.settings import Settings
from tests.conftest import ROOT
from tests.integration.conftest import platform_env
from tests.integration.serving_fixtures import Served
from tests.serving_support import assert_estimate, count

SHOP, BLOG = "shop.example.com", "blog.example.com"


def keys_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api", "keys", *args],
        cwd=ROOT,
        env=platform_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )


def keys_cli_here(settings: Settings, *args: str) -> tuple[int, str, str]:
    """The same command line in this process (a subprocess costs a second of imports)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = api_keys_cli.main(list(args), settings)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def add_key(settings: Settings, *args: str) -> str:
    code, out, err = keys_cli_here(settings, "add", *args)
    assert code == 0, err
    return out.strip()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def keyed(served: Served) -> Iterator[tuple[Settings, dict[str, str]]]:
    """The served platform with keys required, and keys of every kind made by the CLI."""
    settings = served.settings.model_copy(update={"api_auth": "keys", "api_key_cache_s": 0.0})
    keys = {
        "shop": add_key(
            settings, "--name", "shop-dash", "--scope", "read", "--site", "https://Shop.Example.com"
        ),
        "both": add_key(settings, "--name", "two", "--scope", "read", "--site", SHOP, "--site", BLOG),
        "all": add_key(settings, "--name", "all-sites", "--scope", "read"),
        "write": add_key(settings, "--name", "collector", "--scope", "write"),
        "admin": add_key(settings, "--name", "ops", "--scope", "admin"),
    }
    yield settings, keys
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    client[settings.mongo_db]["api_keys"].drop()
    client.close()


def test_keys_are_stored_hashed_and_listed_and_revoked_by_the_cli(
    keyed: tuple[Settings, dict[str, str]],
) -> None:
    settings, keys = keyed
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    try:
        docs = {d["name"]: d for d in client[settings.mongo_db]["api_keys"].find()}
    finally:
        client.close()
    shop = docs["shop-dash"]
    assert shop["digest"] == digest(keys["shop"]) and keys["shop"] not in str(docs)
    assert shop["scopes"] == ["read"] and shop["sites"] == [SHOP]
    assert docs["all-sites"]["sites"] is None
    listing = keys_cli(settings, "list").stdout  # `python -m api keys`, as an operator runs it
    assert shop["_id"] in listing and "shop-dash" in listing and keys["shop"] not in listing
    code, _, err = keys_cli_here(
        settings, "add", "--name", "x", "--scope", "read", "--site", "https://a.example.com/path"
    )
    assert code == 2 and "--site" in err

    made = keys_cli(settings, "add", "--name", "temporary", "--scope", "read")
    assert made.returncode == 0, made.stderr
    temp = made.stdout.strip()
    with TestClient(create_app(settings)) as api:
        assert api.get("/v1/dimensions", headers=bearer(temp)).status_code == 200
        temp_id = temp.split("_")[1]
        assert keys_cli_here(settings, "revoke", temp_id)[0] == 0
        refused = api.get("/v1/dimensions", headers=bearer(temp))
        assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
        assert keys_cli_here(settings, "revoke", temp_id)[0] == 1


def test_every_route_but_the_probes_needs_a_key_with_its_scope(
    keyed: tuple[Settings, dict[str, str]],
) -> None:
    settings, keys = keyed
    reads = [
        "/v1/dimensions",
        f"/v1/pageviews?site={SHOP}",
        f"/v1/unique-visitors?site={SHOP}",
        "/v1/top-urls",
        f"/v1/timeseries?site={SHOP}",
        f"/v1/breakdown?dimension=country&site={SHOP}",
    ]
    with TestClient(create_app(settings)) as api:
        for path in ("/healthz", "/readyz", "/openapi.json", "/"):
            assert api.get(path).status_code == 200, path
        for path in [*reads, "/v1/status", "/metrics"]:
            r = api.get(path)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer"), path
            assert api.get(path, headers=bearer("lak_00000000_" + "x" * 43)).status_code == 401, path
        assert api.post("/v1/events", json={}).status_code == 401
        for path in reads:
            assert api.get(path, headers=bearer(keys["shop"])).status_code == 200, path
            assert api.get(path, headers={"X-API-Key": keys["all"]}).status_code == 200, path
            assert api.get(path, headers=bearer(keys["admin"])).status_code == 403, path
        for path in ("/v1/status", "/metrics"):
            assert api.get(path, headers=bearer(keys["shop"])).status_code == 403, path
            assert api.get(path, headers=bearer(keys["admin"])).status_code == 200, path
        status = api.get("/v1/status", headers=bearer(keys["admin"])).json()
        assert status["auth"]["mode"] == "keys"
        refused = api.post("/v1/events", json={}, headers=bearer(keys["shop"]))
        assert refused.status_code == 403 and "'write' scope" in refused.json()["detail"]
        # the write key gets past the guard: its (empty) body is judged by the contract
        assert api.post("/v1/events", json=[], headers=bearer(keys["write"])).status_code == 422


def test_a_key_limited_to_sites_reads_those_only_and_lists_only_them(
    served: Served, keyed: tuple[Settings, dict[str, str]]
) -> None:
    settings, keys = keyed
    events = served.events
    start = min(e.ts for e in events).replace(minute=0, second=0, microsecond=0)
    end = max(e.ts for e in events).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    window = {"from": start.isoformat(), "to": end.isoformat()}
    shop = bearer(keys["shop"])
    with TestClient(create_app(settings)) as api:
        body = api.get("/v1/pageviews", params={"site": SHOP, **window}, headers=shop).json()
        assert body["total"] == count(events, "site", SHOP, start, end)[0]
        for params in (
            {"site": BLOG},
            {"url": f"https://{BLOG}/"},
            {"dimension": "country", "site": BLOG, "value": "DE"},
        ):
            path = "/v1/timeseries" if "dimension" in params else "/v1/pageviews"
            r = api.get(path, params={**params, **window}, headers=shop)
            assert r.status_code == 403, (path, params)
            assert r.json()["detail"] == f"this API key may read the sites {SHOP} only, not '{BLOG}'"
        assert api.get("/v1/top-urls", params={"site": BLOG, **window}, headers=shop).status_code == 403

        # top URLs without a site: the key's one site
        top = api.get("/v1/top-urls", params={"limit": 1000, **window}, headers=shop).json()
        assert top["urls"] and all(u["url"].startswith(f"https://{SHOP}/") for u in top["urls"])
        # several sites: name one
        r = api.get("/v1/top-urls", params=window, headers=bearer(keys["both"]))
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "site"]

        # the site listing: the key's sites only, with the numbers everyone else sees
        listing = {"dimension": "site", **window}
        everything = api.get("/v1/breakdown", params=listing, headers=bearer(keys["all"])).json()
        assert {e["value"] for e in everything["entries"]} == {SHOP, BLOG}
        mine = api.get("/v1/breakdown", params=listing, headers=shop).json()
        assert [e["value"] for e in mine["entries"]] == [SHOP]
        full = next(e for e in everything["entries"] if e["value"] == SHOP)
        assert (
            mine["entries"][0]["pageviews"] == full["pageviews"] == count(events, "site", SHOP, start, end)[0]
        )
        assert mine["totals"]["pageviews"] == full["pageviews"]
        assert_estimate(mine["entries"][0]["visitors"], len(count(events, "site", SHOP, start, end)[1]))
        both = api.get("/v1/breakdown", params=listing, headers=bearer(keys["both"])).json()
        assert both["entries"] == everything["entries"]
        assert both["totals"]["pageviews"] == everything["totals"]["pageviews"]


def test_a_query_above_the_cost_limit_is_a_422_naming_the_limit_and_the_cost(
    keyed: tuple[Settings, dict[str, str]],
) -> None:
    settings, keys = keyed
    with TestClient(create_app(settings)) as api:
        params = {"dimension": "page", "limit": 1000, "from": "2026-08-01T00:00Z", "to": "2026-11-01T00:00Z"}
        r = api.get("/v1/breakdown", params=params, headers=bearer(keys["all"]))
        assert r.status_code == 422, r.text
        detail = r.json()["detail"][0]
        assert detail["loc"] == ["query", "limit"] and detail["type"] == "cost_limit"
        assert detail["ctx"] == {"cost": 92 * 2 + 92 * 1002, "limit": settings.api_max_cost}
        assert "92,368" in detail["msg"] and "20,000" in detail["msg"]
        assert (
            api.get("/v1/breakdown", params={**params, "limit": 100}, headers=bearer(keys["all"])).status_code
            == 200
        )


def test_a_key_over_its_rate_gets_429_with_retry_after(keyed: tuple[Settings, dict[str, str]]) -> None:
    settings, keys = keyed
    with TestClient(create_app(settings.model_copy(update={"api_rate_limit": "3/minute"}))) as api:
        codes = [api.get("/v1/dimensions", headers=bearer(keys["all"])).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        r = api.get("/v1/dimensions", headers=bearer(keys["all"]))
        assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60
        assert "3/minute" in r.json()["detail"]
        # another key has its own count
        assert api.get("/v1/dimensions", headers=bearer(keys["shop"])).status_code == 200


def test_a_worker_at_its_concurrency_limit_answers_503_with_retry_after(
    keyed: tuple[Settings, dict[str, str]],
) -> None:
    settings, keys = keyed
    app = create_app(settings.model_copy(update={"api_max_concurrency": 1, "api_retry_after_s": 7}))
    held = {"after": "o1.eyIwIjogMTAwMDAwMDAwMH0", "wait_ms": 1500, "site": SHOP}  # offsets never reached

    async def race() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            slow = asyncio.create_task(client.get("/v1/pageviews", params=held, headers=bearer(keys["all"])))
            await asyncio.sleep(0.3)
            refused = await client.get("/v1/dimensions", headers=bearer(keys["all"]))
            health = await client.get("/healthz")
            return await slow, refused, health

    slow, refused, health = asyncio.run(race())
    assert slow.status_code == 504  # the held request ran out its wait
    assert refused.status_code == 503 and refused.headers["retry-after"] == "7"
    assert "LAMBDA_API_MAX_CONCURRENCY" in refused.json()["detail"]
    assert health.status_code == 200


def test_open_mode_serves_loopback_only_and_says_so(bare: Settings) -> None:
    check_binding(bare, "127.0.0.1")
    with pytest.raises(OpenOnNonLoopback, match=r"refusing to serve without API keys on 0\.0\.0\.0"):
        check_binding(bare, "0.0.0.0")
    with pytest.raises(OpenOnNonLoopback):
        create_app(bare.model_copy(update={"api_host": "192.0.2.10"}))
    check_binding(bare.model_copy(update={"api_auth": "keys"}), "0.0.0.0")
    done = subprocess.run(
        [sys.executable, "-m", "api", "run", "--host", "0.0.0.0", "--port", "1"],
        cwd=ROOT,
        env=platform_env(bare),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "refusing to serve without API keys" in done.stderr
    with TestClient(create_app(bare)) as api:
        status = api.get("/v1/status").json()
        assert status["auth"]["mode"] == "open" and "loopback only" in status["auth"]["note"]
