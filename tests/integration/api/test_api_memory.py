"""Memory stays bounded whatever callers ask: 20,000 distinct queries through one uvicorn worker
(a real process on the test stack) keep its RSS under its size after warming up plus the caches'
bounds plus a stated margin, while every cache fills to its bound and evicts.

Before the caches were bounded in bytes, the tilings kept 4,096 entries whatever their size (a
7-day hourly tiling and read plan weigh about 100 KB, a 92-day one 0.6 MB), the URL normaliser
65,536 URLs of up to 16 KB. Measured once with those caches put back: the same run grew the worker
by 58.5 MB (88.8 -> 147.3 MB) and this test failed; with the bounds, +11.3 MB (89.0 -> 100.3 MB);
with the answer and query-string caches added (6 MB more of bounds), +21.1 MB (89.6 -> 110.7 MB)."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psutil

from bench.commits import commit
from bench.vegeta import installed
from config.settings import Settings, get_settings
from stores.redis import keys
from tests.conftest import PORT_OFFSET
from tests.integration.api.test_api_schema import start_api, stop_api
from tests.integration.serving_fixtures import redis_of

PORT = 18310 + PORT_OFFSET
MB = 1 << 20
BOUNDS = {
    "LAMBDA_API_TILING_CACHE_BYTES": 8 * MB,
    "LAMBDA_API_READ_PLAN_CACHE_BYTES": 4 * MB,
    "LAMBDA_URL_CACHE_BYTES": 2 * MB,
    "LAMBDA_API_PARAMS_CACHE_BYTES": 2 * MB,
    "LAMBDA_API_ANSWER_CACHE_BYTES": 4 * MB,
}
DOCUMENTS_MB = 8  # LAMBDA_API_CACHE_MB; the rankings' cache takes a quarter more
QUERIES = 20_000
MARGIN = 16 * MB
"""What a worker may allocate past its warmed-up size besides the caches: the allocator's
fragmentation and free lists, connection buffers, metrics series."""
BASE = datetime(2024, 1, 1, tzinfo=UTC)
COST = 100
"""The run's LAMBDA_API_MAX_COST: a 1-3 day daily series costs at most 56, a 4-day hourly one 100+."""
ATTACK = ["-lazy", "-rate=0", "-duration=0", "-max-body=0", "-timeout=30s"] + [
    f"-{option}=8" for option in ("workers", "max-workers", "connections", "max-connections")
]
"""Each target once (``-lazy`` ends the attack with the targets), 8 keep-alive connections."""


def query(i: int) -> tuple[str, dict[str, str]]:
    """The i-th query: every one distinct (its range, and its page for the page queries). One in
    four is 4 to 7 days hourly: above the run's cost limit, it is refused (422) once its range is
    tiled, without reading a store; the others, 1 to 3 days daily, are answered."""
    start = BASE + timedelta(hours=i)
    hourly = i % 4 == 0
    days = 4 + i % 4 if hourly else 1 + i % 3
    window = {
        "from": start.isoformat(),
        "to": (start + timedelta(days=days)).isoformat(),
        "granularity": "hour" if hourly else "day",
    }
    if i % 2:
        return "/v1/pageviews", {"url": f"https://Shop.Example.com/p/{i}?ref={'x' * (i % 900)}", **window}
    return "/v1/unique-visitors", {"site": "shop.example.com", **window}


def drive(url: str, rss_of: psutil.Process, queries: Iterable[int]) -> tuple[int, dict[str, int]]:
    """Sends each query once over 8 keep-alive connections (vegeta, a closed loop: the test's own
    CPU stays out of the worker's way); the highest RSS sampled and the status codes answered."""
    vegeta = str(installed(get_settings().cache_dir))
    targets = "".join(f"GET {httpx.URL(url + path, params=params)}\n" for path, params in map(query, queries))
    with tempfile.TemporaryDirectory(prefix="vegeta-") as tmp:
        results = Path(tmp) / "results.bin"
        attack = subprocess.Popen(
            [vegeta, "attack", *ATTACK, f"-output={results}"],
            stdin=subprocess.PIPE,
            text=True,
        )
        assert attack.stdin is not None
        attack.stdin.write(targets)
        attack.stdin.close()
        peak = 0
        while attack.poll() is None:
            peak = max(peak, rss_of.memory_info().rss)
            time.sleep(0.1)
        assert attack.returncode == 0
        report = subprocess.run(
            [vegeta, "report", "-type=json", str(results)], capture_output=True, text=True, check=True
        )
    codes: dict[str, int] = json.loads(report.stdout)["status_codes"]
    codes.pop("0", None)  # the end of the targets, which vegeta counts as one error
    return max(peak, rss_of.memory_info().rss), codes


def cache_bytes(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics").text
    return {m[1]: float(m[2]) for m in re.finditer(r"^lambda_(\w+)_cache_bytes (\S+)$", text, re.M)}


def test_rss_stays_under_the_cache_bounds_plus_a_margin_over_20000_distinct_queries(bare: Settings) -> None:
    env = {name: str(v) for name, v in BOUNDS.items()}
    # A speed-layer commit, so that every answer has a stamp and is kept by the answer cache.
    with redis_of(bare) as r:
        commit(r, [], keys.decode_served(r.get(keys.SERVED)).cut)
    proc = start_api(bare, PORT, LAMBDA_API_CACHE_MB=str(DOCUMENTS_MB), LAMBDA_API_MAX_COST=str(COST), **env)
    url = f"http://127.0.0.1:{PORT}"
    try:
        worker = psutil.Process(proc.pid)
        _, warm = drive(url, worker, [QUERIES + i % 8 for i in range(400)])  # 8 queries, 50 times
        warmed = worker.memory_info().rss
        peak, codes = drive(url, worker, range(QUERIES))
        caches = cache_bytes(url)
    finally:
        stop_api(proc)
    assert warm == {"200": 300, "422": 100} and codes == {"200": QUERIES * 3 // 4, "422": QUERIES // 4}
    bound = sum(BOUNDS.values()) + DOCUMENTS_MB * MB * 5 // 4
    print(
        f"RSS after warming up (8 queries, 50 times each) {warmed / MB:.1f} MB, peak over "
        f"{QUERIES:,} distinct queries {peak / MB:.1f} MB (+{(peak - warmed) / MB:.1f} MB); "
        f"caches bound {bound / MB:.0f} MB, "
        f"margin {MARGIN / MB:.0f} MB; caches at the end: "
        + ", ".join(f"{name} {v / MB:.1f} MB" for name, v in caches.items())
    )
    # every bounded cache filled to near its bound (so it evicted) and none went past it
    assert caches["tiling"] <= BOUNDS["LAMBDA_API_TILING_CACHE_BYTES"]
    assert caches["tiling"] > 0.8 * BOUNDS["LAMBDA_API_TILING_CACHE_BYTES"]
    assert 0.8 * BOUNDS["LAMBDA_API_READ_PLAN_CACHE_BYTES"] < caches["read_plan"]
    assert caches["read_plan"] <= BOUNDS["LAMBDA_API_READ_PLAN_CACHE_BYTES"]
    assert 0.8 * BOUNDS["LAMBDA_URL_CACHE_BYTES"] < caches["url"] <= BOUNDS["LAMBDA_URL_CACHE_BYTES"]
    params, answers = BOUNDS["LAMBDA_API_PARAMS_CACHE_BYTES"], BOUNDS["LAMBDA_API_ANSWER_CACHE_BYTES"]
    assert 0.8 * params < caches["params"] <= params
    assert 0.8 * answers < caches["api_answer"] <= answers
    assert peak <= warmed + bound + MARGIN, (peak / MB, warmed / MB)
