"""Memory stays bounded whatever callers ask: 20,000 distinct queries through one uvicorn worker
(a real process on the test stack) keep its RSS under its size after warming up plus the caches'
bounds plus a stated margin, while every cache fills to its bound and evicts.

Before the caches were bounded in bytes, the tilings alone kept 4,096 entries whatever their size
(a 7-day hourly tiling and read plan weigh about 100 KB, a 92-day one 0.6 MB), the URL normaliser
65,536 URLs of up to 16 KB.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import httpx
import psutil

from config.settings import Settings
from tests.conftest import PORT_OFFSET
from tests.integration.test_api_schema import start_api, stop_api

PORT = 18310 + PORT_OFFSET
MB = 1 << 20
BOUNDS = {
    "LAMBDA_API_TILING_CACHE_BYTES": 8 * MB,
    "LAMBDA_API_READ_PLAN_CACHE_BYTES": 4 * MB,
    "LAMBDA_URL_CACHE_BYTES": 2 * MB,
}
DOCUMENTS_MB = 8  # LAMBDA_API_CACHE_MB; the rankings' cache takes a quarter more
QUERIES = 20_000
MARGIN = 48 * MB
"""What a worker may allocate past its warmed-up size besides the caches: the allocator's
fragmentation and free lists, connection buffers, metrics series."""
BASE = datetime(2024, 1, 1, tzinfo=UTC)


def query(i: int) -> tuple[str, dict[str, str]]:
    """The i-th query: every one distinct (its range, and its page for the page queries)."""
    start = BASE + timedelta(hours=i)
    hourly = i % 4 == 0
    days = 1 + i % 3 if hourly else 1 + i % 31
    window = {
        "from": start.isoformat(),
        "to": (start + timedelta(days=days)).isoformat(),
        "granularity": "hour" if hourly else "day",
    }
    if i % 2:
        return "/v1/pageviews", {"url": f"https://Shop.Example.com/p/{i}?ref={'x' * (i % 900)}", **window}
    return "/v1/unique-visitors", {"site": "shop.example.com", **window}


async def drive(url: str, rss_of: psutil.Process, queries: range) -> tuple[int, set[int]]:
    """Sends the queries over 8 connections; the highest RSS sampled and the statuses seen."""
    peak = 0
    statuses: set[int] = set()
    todo = iter(queries)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal peak
        for i in todo:
            path, params = query(i)
            statuses.add((await client.get(path, params=params)).status_code)
            if i % 250 == 0:
                peak = max(peak, rss_of.memory_info().rss)

    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        await asyncio.gather(*(worker(client) for _ in range(8)))
    return max(peak, rss_of.memory_info().rss), statuses


def cache_bytes(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics").text
    return {m[1]: float(m[2]) for m in re.finditer(r"^lambda_(\w+)_cache_bytes (\S+)$", text, re.M)}


def test_rss_stays_under_the_cache_bounds_plus_a_margin_over_20000_distinct_queries(bare: Settings) -> None:
    env = {name: str(v) for name, v in BOUNDS.items()}
    proc = start_api(bare, PORT, LAMBDA_API_CACHE_MB=str(DOCUMENTS_MB), **env)
    url = f"http://127.0.0.1:{PORT}"
    try:
        worker = psutil.Process(proc.pid)
        _, statuses = asyncio.run(drive(url, worker, range(QUERIES, QUERIES + 1_000)))
        warmed = worker.memory_info().rss
        peak, more = asyncio.run(drive(url, worker, range(QUERIES)))
        statuses |= more
        caches = cache_bytes(url)
    finally:
        stop_api(proc)
    assert statuses == {200}
    bound = sum(BOUNDS.values()) + DOCUMENTS_MB * MB * 5 // 4
    print(
        f"RSS after 1,000 warm-up queries {warmed / MB:.1f} MB, peak over {QUERIES:,} distinct queries "
        f"{peak / MB:.1f} MB (+{(peak - warmed) / MB:.1f} MB); caches bound {bound / MB:.0f} MB, "
        f"margin {MARGIN / MB:.0f} MB; caches at the end: "
        + ", ".join(f"{name} {v / MB:.1f} MB" for name, v in caches.items())
    )
    # every bounded cache filled to near its bound (so it evicted) and none went past it
    assert caches["tiling"] <= BOUNDS["LAMBDA_API_TILING_CACHE_BYTES"]
    assert caches["tiling"] > 0.8 * BOUNDS["LAMBDA_API_TILING_CACHE_BYTES"]
    assert 0.8 * BOUNDS["LAMBDA_API_READ_PLAN_CACHE_BYTES"] < caches["read_plan"]
    assert caches["read_plan"] <= BOUNDS["LAMBDA_API_READ_PLAN_CACHE_BYTES"]
    assert 0.8 * BOUNDS["LAMBDA_URL_CACHE_BYTES"] < caches["url"] <= BOUNDS["LAMBDA_URL_CACHE_BYTES"]
    assert peak <= warmed + bound + MARGIN, (peak / MB, warmed / MB)
