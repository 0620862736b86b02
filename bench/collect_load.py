"""The load of POST /api/event: tracker payloads as real pages send them, for the collection
bench (bench/collect.py) and its test (tests/integration/api/test_collect_load.py).

Payloads cycle over pages, referrers and user agents (a mix of sites' traffic); the requests come
from behind a listed proxy (``X-Forwarded-For``) with public addresses, so the country lookup and
the visitor hashing do their real work.
"""

from __future__ import annotations

import orjson

from bench.vegeta import Post

SITE = "load.example.com"
ADDRESSES = ("81.2.69.142", "8.8.8.8", "2a00:1450:4001::1", "185.60.216.35", "203.0.113.9")
AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:132.0) Gecko/20100101 Firefox/132.0",
)
REFERRERS = (None, "https://www.google.com/", "https://news.ycombinator.com/item?id=1")


def tracker_posts(endpoint: str, count: int = 120) -> list[Post]:
    """``count`` distinct requests of the tracker's page views to ``endpoint``."""
    posts = []
    for i in range(count):
        body = {
            "n": "pageview",
            "u": f"https://{SITE}/p/{i % 40}",
            "d": SITE,
            "r": REFERRERS[i % len(REFERRERS)],
            "w": 1280,
            "v": 36,
        }
        headers = {
            "Content-Type": "text/plain",
            "User-Agent": AGENTS[i % len(AGENTS)],
            "X-Forwarded-For": ADDRESSES[i % len(ADDRESSES)],
        }
        posts.append(Post(endpoint, orjson.dumps(body), headers))
    return posts
