"""The official Plausible tracker in a real headless Chromium posts to POST /api/event; the page
views, visitors and referrer the API then answers for the site are what the browser did.

The test page (served by this test, with the vendored tracker: tests/integration/api/tracker/) is
reached by a link from a page of another origin, so the browser sends a referrer, then moves
across two more pages with ``history.pushState``, which the tracker's own history mode records.
Its events reach the views through Kafka and the speed layer, as every event does.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from api.collect.collector import DLQ_SOURCE
from config.settings import Settings
from ingest.producer import DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
from ingest.topics import log_end_offsets
from speed_layer.job import SpeedJob
from tests.integration.api.test_dashboard import api_get, browser, serve, wait_for
from tests.integration.ingest.test_ingest_kafka import consume_all

__all__ = ["browser"]  # the dashboard tests' Chromium, a fixture of this module too

TRACKER = Path(__file__).resolve().parent / "tracker"
SITE = "tracker.test"
PAGES = ("/shop/", "/shop/cart", "/shop/checkout")

APP_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>shop</title></head>
<body>
<p id="page">shop</p>
<button id="cart" onclick="history.pushState({{}}, '', '/shop/cart')">cart</button>
<button id="checkout" onclick="history.pushState({{}}, '', '/shop/checkout')">checkout</button>
<script type="module">
  import {{ init }} from "/tracker/plausible.js";
  // The tracker ignores pages driven by WebDriver and on 127.0.0.1 unless told otherwise.
  window.__plausible = true;
  // Every body the tracker posts, page views and its engagement events alike, as it posts it.
  window.sent = [];
  const post = window.fetch;
  window.fetch = (url, options) => {{
    window.sent.push(JSON.parse(options.body));
    return post(url, options);
  }};
  init({{ domain: "{site}", endpoint: "{endpoint}", captureOnLocalhost: true }});
</script>
</body></html>
"""
REFERRER_PAGE = '<!doctype html><html><body><a id="go" href="{target}">to the shop</a></body></html>'


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """A static server for the test pages and the vendored tracker (written once the API's
    address is known)."""
    root = tmp_path_factory.mktemp("tracker-pages")
    shutil.copytree(TRACKER, root / "tracker")
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="tracker-pages", daemon=True)
    thread.start()
    try:
        yield root, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_tracker_in_a_browser_is_counted_as_the_browser_went(
    bare: Settings, spark: Any, browser: WebDriver, pages: tuple[Path, int]
) -> None:
    root, port = pages
    origin = f"http://127.0.0.1:{port}"
    settings = bare.model_copy(update={"collect_sites": [SITE], "collect_origins": [origin]})
    with serve(settings) as api:
        (root / "shop").mkdir()
        (root / "shop" / "index.html").write_text(APP_PAGE.format(site=SITE, endpoint=f"{api}/api/event"))
        (root / "from.html").write_text(REFERRER_PAGE.format(target=f"{origin}/shop/"))
        before = sum(log_end_offsets(settings).values())

        # Another origin links to the shop: the browser sends that origin as the referrer.
        browser.get(f"http://localhost:{port}/from.html")
        browser.find_element(By.ID, "go").click()
        wait_for("the shop page", lambda: browser.execute_script("return (window.sent || []).length") >= 1)
        for button in ("cart", "checkout"):
            browser.find_element(By.ID, button).click()
        wait_for(
            "the three page views in Kafka", lambda: sum(log_end_offsets(settings).values()) - before >= 3
        )
        sent: list[dict[str, Any]] = browser.execute_script("return window.sent")
        referrer: str = browser.execute_script("return document.referrer")
        user_agent: str = browser.execute_script("return navigator.userAgent")
        views = [p for p in sent if p["n"] == "pageview"]
        assert [p["u"].removeprefix(origin) for p in views] == list(PAGES)
        assert {p["r"] for p in views} == {referrer} and referrer.startswith("http://localhost:")

        SpeedJob(settings, spark).run(available_now=True)
        now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        window = {
            "site": SITE,
            "from": (now - timedelta(hours=1)).isoformat(),
            "to": (now + timedelta(hours=1)).isoformat(),
        }
        pageviews = api_get(api, "/v1/pageviews", **window)
        visitors = api_get(api, "/v1/unique-visitors", **window)
        by_page = api_get(api, "/v1/breakdown", dimension="page", **window)
        by_referrer = api_get(api, "/v1/breakdown", dimension="referrer", **window)

    assert pageviews["total"] == len(views) == 3
    assert visitors["total"]["estimate"] == 1  # one browser, one day: one visitor id
    assert {e["value"]: e["pageviews"] for e in by_page["entries"]} == {f"http://{SITE}{p}": 1 for p in PAGES}
    assert {e["value"]: e["pageviews"] for e in by_referrer["entries"]} == {referrer.split("/")[2]: 3}

    counted = consume_all(settings, settings.events_topic)
    assert all(user_agent.encode() in m.value() for m in counted[-3:])

    # What the tracker sent besides page views (its engagement events) is in the DLQ, with why.
    def dead_letters() -> list[dict[str, Any]]:
        letters = [dict(m.headers() or []) for m in consume_all(settings, settings.dlq_topic)]
        return [h for h in letters if h.get(DLQ_SOURCE_HEADER) == DLQ_SOURCE.encode()]

    others = [p for p in browser.execute_script("return window.sent") if p["n"] != "pageview"]
    assert others, "the tracker sent no engagement event"
    collected = wait_for(
        "the engagement events in the DLQ", lambda: len(dead_letters()) >= len(others) and dead_letters()
    )
    assert len(collected) == len(others)
    assert all(
        h[DLQ_REASON_HEADER] == b"n: event 'engagement' is not counted: only pageview is" for h in collected
    )
