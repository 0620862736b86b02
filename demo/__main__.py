"""The end of ``make demo``: wait until the platform has caught up, then show it answering.

By the time this runs, ``make demo`` has started the stack, produced two days of history, published
a batch generation, started the speed layer, sent live traffic past the generation's cut and
started the API. This waits for the API to be ready and the speed layer to have counted every
event, then prints example queries as curl commands with their answers: page views, unique
visitors, and visits with their bounce rate and duration; weeks and months, a comparison with the
previous period and a CSV answer (demo.reports).

It says how the API is guarded: open on loopback (the local default, LAMBDA_API_AUTH=open), or
with keys required (LAMBDA_API_AUTH=keys), in which case it makes a key for its own queries and
shows it in the curl commands.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from api.auth import mode_note
from api.collect.snippet import snippet
from api.credentials import new_key
from config.settings import Settings, get_settings
from contract import site_of
from demo.reports import print_reports
from ingest.topics import log_end_offsets
from stores.mongo.api_keys import MongoApiKeyStore
from stores.mongo.client import connect_async
from stores.redis import client as redis_client
from stores.redis.handshake import speed_commit

HEADERS: dict[str, str] = {}
"""The demo's key, when the API requires one."""
CURL = "curl -s"


def _wait(what: str, ready: Callable[[], bool], timeout: float = 180.0) -> None:
    """Ask ``ready`` every half second until it says yes; exit the demo after ``timeout``."""
    try:
        Retrying(
            stop=stop_after_delay(timeout), wait=wait_fixed(0.5), retry=retry_if_result(lambda ok: not ok)
        )(ready)
    except RetryError:
        sys.exit(f"demo: gave up waiting for {what} after {timeout:.0f} s (see var/log/)")


def _api_ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


async def _make_key(settings: Settings) -> str:
    client = connect_async(settings)
    try:
        key, record = new_key("demo", {"read", "admin"}, None)
        await MongoApiKeyStore(client[settings.mongo_db]).insert(record)
        return key
    finally:
        await client.close()


def _guard(settings: Settings) -> None:
    """Says how the API is guarded; with keys required, makes the demo's key."""
    global CURL
    print(f"API authentication: {mode_note(settings)}")
    if settings.api_auth == "open":
        print("Anyone on this machine may query it; it refuses other interfaces without keys.")
        print("Keys: `make api-key-add NAME=dashboard SCOPES=read`, then LAMBDA_API_AUTH=keys.")
        return
    key = asyncio.run(_make_key(settings))
    HEADERS["Authorization"] = f"Bearer {key}"
    CURL = f"curl -s -H 'Authorization: Bearer {key}'"
    print(f"The demo made itself a read+admin key (revoke it with `make api-key-revoke ID={key[4:12]}`).")


def _shorten(value: Any, items: int = 4) -> Any:
    """Long series cut to their last few items, so an answer fits on a screen."""
    if isinstance(value, list) and len(value) > items:
        return [f"... {len(value) - items} earlier", *(_shorten(v) for v in value[-items:])]
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    return value


COLUMNS = ("pageviews", "visitors", "visits", "bounce_rate", "visit_duration")
"""The metrics the breakdown tables show, of those each dimension answers (GET /v1/dimensions)."""


def _cell(metric: str, value: Any) -> str:
    if value is None:
        return f"{'-':>16}"
    if metric == "visitors":
        return f"{value['estimate']:>16,.0f}"
    if metric == "bounce_rate":
        return f"{value:>15.1f}%"
    if metric == "visit_duration":
        return f"{value:>14,.0f} s"
    return f"{value:>16,}"


def _print_breakdowns(base: str, start: str, end: str) -> None:
    """A breakdown of shop.example.com by every dimension the API lists, as small tables, with
    the metrics each dimension answers."""
    dimensions = httpx.get(f"{base}/v1/dimensions", headers=HEADERS, timeout=60).json()["dimensions"]
    for d in dimensions:
        site = {} if d["name"] == "site" else {"site": "shop.example.com"}
        metrics = [m for m in COLUMNS if m in d.get("metrics", ("visitors", "pageviews"))]
        params: dict[str, str | int] = {
            "dimension": d["name"],
            "from": start,
            "to": end,
            "limit": 5,
            "metrics": ",".join(metrics),
            **site,
        }
        request = httpx.Request("GET", f"{base}/v1/breakdown", params=params)
        answer = httpx.get(str(request.url), headers=HEADERS, timeout=60).json()
        print(f"\n$ {CURL} '{request.url}'")
        if "entries" not in answer:
            print(json.dumps(answer, indent=2))
            continue
        print(f"  {d['name']:<36}" + "".join(f"{m:>16}" for m in metrics))
        for e in answer["entries"]:
            print(f"  {e['value'][:36]:<36}" + "".join(_cell(m, e[m]) for m in metrics))
        totals = answer["totals"]
        print(f"  {'(all)':<36}" + "".join(_cell(m, totals[m]) for m in metrics))


def main() -> int:
    settings = get_settings()
    base = f"http://{settings.api_host}:{settings.api_port}"
    _guard(settings)
    r = redis_client.connect(settings)
    ends = log_end_offsets(settings)
    _wait("the API", lambda: _api_ready(base))
    _wait(
        "the speed layer to catch up",
        lambda: all(speed_commit(r).offsets.get(p, 0) >= o for p, o in ends.items()),
    )
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    day_ago, two_days_ago = (now - timedelta(hours=24)).isoformat(), (now - timedelta(days=2)).isoformat()
    top = httpx.get(f"{base}/v1/top-urls", params={"limit": 3}, headers=HEADERS, timeout=60).json()
    url = top["urls"][0]["url"] if top.get("urls") else "https://shop.example.com/"
    queries: list[tuple[str, dict[str, str | int]]] = [
        ("/v1/status", {}),
        ("/v1/top-urls", {"limit": 3}),
        ("/v1/pageviews", {"url": url, "from": day_ago, "to": now.isoformat(), "granularity": "hour"}),
        (
            "/v1/unique-visitors",
            {"url": url, "from": two_days_ago, "to": now.isoformat(), "granularity": "day"},
        ),
        ("/v1/pageviews", {"site": "shop.example.com", "granularity": "day"}),
        ("/v1/dimensions", {}),
        (
            "/v1/timeseries",
            {"site": "shop.example.com", "dimension": "country", "value": "DE", "granularity": "day"},
        ),
        # The six numbers of a site, per day: visits, bounce rate and visit duration too.
        (
            "/v1/timeseries",
            {
                "site": "shop.example.com",
                "granularity": "day",
                "metrics": "visitors,visits,pageviews,views_per_visit,bounce_rate,visit_duration",
            },
        ),
        # Visits from paid search ads per day: the channel of each visit's first view, from its
        # referrer and the landing page's UTM values (views.channels).
        (
            "/v1/timeseries",
            {
                "site": "shop.example.com",
                "dimension": "channel",
                "value": "Paid Search",
                "granularity": "day",
                "metrics": "visitors,visits,bounce_rate",
            },
        ),
        # The pages visits start on, with their bounce rate and duration.
        (
            "/v1/breakdown",
            {
                "site": "shop.example.com",
                "dimension": "entry_page",
                "metrics": "visits,bounce_rate,visit_duration",
                "from": two_days_ago,
                "to": now.isoformat(),
                "limit": 3,
            },
        ),
        # Who is on the site right now: the speed layer's visitors of the last 5 minutes (the live
        # events were just stamped now), and of its top page.
        ("/v1/current-visitors", {"site": "shop.example.com"}),
        ("/v1/current-visitors", {"site": site_of(url), "page": url, "minutes": 10}),
    ]
    for path, params in queries:
        request = httpx.Request("GET", f"{base}{path}", params=params)
        response = httpx.get(str(request.url), headers=HEADERS, timeout=60)
        print(f"\n$ {CURL} '{request.url}'")
        print(json.dumps(_shorten(response.json()), indent=2))
    _print_breakdowns(base, two_days_ago, now.isoformat())
    _print_combined_filters(base)
    print_reports(base, now, HEADERS, CURL)
    print(f"\nThe API keeps serving on {base} (OpenAPI: {base}/docs); `make api-stop` stops it,")
    print("`make speed-stop` the speed layer, `make down` the local stack.")
    print(f"\nThe dashboard: {base}/  (open it in a browser; it refreshes while the speed layer runs)")
    print(f"API authentication: {mode_note(settings)}")
    _print_snippet(settings, base)
    return 0


def _print_combined_filters(base: str) -> None:
    """A query of two filters (POST /v2/query): page views and exact visitors of the mobile
    visitors from Germany, per referrer, over the last 7 days: the batch files and the realtime
    rows of the filter table, under one generation."""
    body = {
        "site_id": "shop.example.com",
        "date_range": "7d",
        "metrics": ["visitors", "pageviews"],
        "dimensions": ["visit:source"],
        "filters": [["is", "visit:country", ["DE"]], ["is", "visit:device", ["mobile"]]],
        "pagination": {"limit": 5},
    }
    response = httpx.post(f"{base}/v2/query", json=body, headers=HEADERS, timeout=60)
    print(f"\n$ {CURL} -X POST '{base}/v2/query' -H 'Content-Type: application/json' -d '{json.dumps(body)}'")
    print(json.dumps(_shorten(response.json(), items=5), indent=2))


def _print_snippet(settings: Settings, base: str) -> None:
    """How a real site sends its page views here: the official Plausible tracker, one line."""
    site = settings.collect_sites[0] if settings.collect_sites else "shop.example.com"
    print("\nCollect from your own site: copy the tracker's browser build (npm package")
    print("@plausible-analytics/tracker, file plausible.js) to /js/ on the site, and add to each page:")
    print(f"\n  {snippet(base, site)}\n")
    if site not in settings.collect_sites:
        print("and let the API collect the site (LAMBDA_COLLECT_SITES, the sites it collects):")
        print(f"  make api-stop && LAMBDA_COLLECT_SITES='[\"{site}\"]' make api-start")
    print("Privacy: no cookie, no stored address; visitor ids are hashed with a salt that changes every")
    print('UTC day and is deleted after two (README, "Collecting from web pages").')


if __name__ == "__main__":
    sys.exit(main())
