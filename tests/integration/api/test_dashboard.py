"""The dashboard in a real headless Chromium, on the real local stack, served by a real uvicorn.

The page must show exactly what the public API answers for the same parameters, load nothing from
outside this machine, log no console error, follow the controls, show live numbers rising while the
speed layer counts new events, and say clearly when Redis or MongoDB is down. The run saves a
screenshot to docs/dashboard.png (the README shows it).

Needs Debian's ``chromium`` and ``chromium-driver`` (installed by ``make setup``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from api.app import create_app
from batch_layer.job import BatchJob
from config.settings import Settings
from speed_layer.job import SpeedJob
from stack import control
from tests.integration.conftest import isolated_platform, produce, traffic

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOT = ROOT / "docs" / "dashboard.png"
SITE = "shop.example.com"
NO_NUMBER = "\u2013"  # what the page shows where it has no number (an en dash)
BREAKDOWNS = (
    *("page", "entry_page", "exit_page", "referrer", "country", "device"),
    *("channel", "utm_source", "utm_campaign"),
)
METRICS = ("visitors", "visits", "pageviews", "views_per_visit", "bounce_rate", "visit_duration")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--lang=en-US",
)


# --- fixtures: a platform with history and realtime views, the API on a port, a browser ----------
@pytest.fixture(scope="module")
def platform(stack: Settings, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A served batch generation over 30 hours of traffic, and realtime views of the traffic after
    its cut (counted by the speed layer)."""
    with isolated_platform(stack, tmp_path_factory.mktemp("dashboard"), redis_db=11) as settings:
        produce(settings, traffic(seed=31, total=3_000, span_hours=30))
        job = BatchJob(settings, spark)
        try:
            job.run()
        finally:
            job.close()
        produce(settings, traffic(seed=32, total=600, span_hours=2))
        SpeedJob(settings, spark).run(available_now=True)
        yield settings


@contextmanager
def serve(settings: Settings, wrap: Callable[[Any], Any] | None = None) -> Iterator[str]:
    """The API (and so the dashboard) served by uvicorn on a free port of 127.0.0.1; ``wrap`` may
    put an ASGI app of the test's in front of it."""
    app = create_app(settings)
    config = uvicorn.Config(app if wrap is None else wrap(app), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="dashboard-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def base(platform: Settings) -> Iterator[str]:
    with serve(platform) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("chromium and chromium-driver are missing: run `make setup` (it installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="dashboard-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Both paths given: Selenium runs them as they are and never looks for a driver online.
    session = webdriver.Chrome(options=options, service=Service(driver))
    session.set_window_size(1280, 1000)
    try:
        yield session
    finally:
        session.quit()
        shutil.rmtree(profile, ignore_errors=True)


# --- helpers ------------------------------------------------------------------------------------------
def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def loads(browser: WebDriver, kind: str = "mainLoads") -> int:
    return int(browser.execute_script(f"return document.documentElement.dataset.{kind} || '0'"))


def open_dashboard(browser: WebDriver, base: str, **params: str) -> None:
    query = "&".join(f"{k}={v}" for k, v in {"site": SITE, "refresh": "1", **params}.items())
    browser.get(f"{base}/?{query}")
    wait_for("the first load", lambda: loads(browser) >= 1 and loads(browser, "liveLoads") >= 1)


def after_next_load(browser: WebDriver, action: Callable[[], Any]) -> None:
    before = loads(browser)
    action()
    wait_for("the page to re-query", lambda: loads(browser) > before)


def console_errors(browser: WebDriver, base: str) -> list[dict[str, Any]]:
    """The console's errors since the last read that belong to this page: a page left by an earlier
    test may still have polled its own server (stopped since) before the browser moved on, and
    those failed requests name that server's address, not ``base``."""
    return [
        e
        for e in browser.get_log("browser")
        if e["level"] == "SEVERE" and (e.get("source") != "network" or base in e["message"])
    ]


def js_round(value: float) -> int:
    """An estimate as the page shows it: JavaScript rounds halves up (Python's round() to even),
    so 1614.5 is shown as 1,615."""
    return math.floor(value + 0.5)


def digits(text: str) -> int:
    """An integer shown with thousands separators (and maybe ≈)."""
    found = re.sub(r"[^0-9]", "", text)
    assert found, f"no number in {text!r}"
    return int(found)


def text_of(browser: WebDriver, element_id: str) -> str:
    text: str = browser.find_element(By.ID, element_id).text
    return text


def shown_query(browser: WebDriver) -> dict[str, str]:
    query: dict[str, str] = browser.execute_script("return window.dashboard.query")
    return query


def shown_metric(browser: WebDriver) -> str:
    metric: str = browser.execute_script("return window.dashboard.metric")
    return metric


def api_get(base: str, path: str, **params: Any) -> dict[str, Any]:
    response = httpx.get(f"{base}{path}", params=params, timeout=30)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def parse(t: str) -> datetime:
    return datetime.fromisoformat(t.replace("Z", "+00:00"))


def shown_value(raw: str | None) -> float | None:
    """A figure the page keeps in ``data-value`` (empty: none)."""
    return None if not raw else float(raw)


def api_value(metric: str, value: Any) -> float | None:
    if value is None:
        return None
    return float(value["estimate"] if metric == "visitors" else value)


def assert_page_equals_api(browser: WebDriver, base: str) -> dict[str, Any]:
    """The chart's data, the six numbers with their exactness, the series table and the
    breakdown tables are the API's answers to the queries the page says it made."""
    q = shown_query(browser)
    assert q["site"] == SITE and q["metrics"] == ",".join(METRICS)
    answer = api_get(base, "/v1/timeseries", dimension="site", **q)
    series = answer["series"]
    metric = shown_metric(browser)
    chart = browser.execute_script("return window.dashboard.chart.data")
    assert chart[0] == [parse(p["start"]).timestamp() for p in series]
    if metric == "visitors":
        assert chart[1:] == [[p["visitors"][b] for p in series] for b in ("estimate", "lower", "upper")]
    else:
        assert chart[1:] == [[p[metric] for p in series]]
    assert digits(text_of(browser, "total-pageviews")) == answer["total"]["pageviews"]
    shown_visitors = text_of(browser, "total-visitors")
    assert digits(shown_visitors) == js_round(answer["total"]["visitors"]["estimate"])
    assert shown_visitors.startswith("≈") != answer["total"]["visitors"]["exact"]
    for m in METRICS:
        tile = browser.find_element(By.CSS_SELECTOR, f'#metric [data-metric="{m}"]')
        assert shown_value(tile.get_attribute("data-value")) == api_value(m, answer["total"][m]), m
        exact = answer["total"]["visitors"]["exact"] if m == "visitors" else answer["exactness"][m]["exact"]
        assert tile.get_attribute("data-exact") == str(exact).lower(), m
        assert tile.find_element(By.CSS_SELECTOR, ".exactness").text, m
    assert answer["total"]["visits"] > 0 and answer["exactness"]["visits"]["exact"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#series-table tbody tr")
    assert len(rows) == len(series)

    for dimension in BREAKDOWNS:
        section = browser.find_element(By.CSS_SELECTOR, f'.breakdown[data-dimension="{dimension}"]')
        metrics = section.get_attribute("data-metrics")
        expected = api_get(
            base,
            "/v1/breakdown",
            site=SITE,
            dimension=dimension,
            metrics=metrics,
            limit=10,
            **{"from": q["from"], "to": q["to"]},
        )
        # One read in the page (a script runs between two renders): the range includes the current
        # hour, so the page re-queries every minute and may replace the rows between two reads.
        rows = browser.execute_script(
            "return [...arguments[0].querySelectorAll('tbody tr')].map((tr) => [tr.dataset.value, "
            "[...tr.querySelectorAll('td[data-metric]')]"
            ".map((td) => [td.dataset.metric, td.dataset.value])]);",
            section,
        )
        shown = [(value, [(m, shown_value(v)) for m, v in cells]) for value, cells in rows]
        assert shown == [
            (e["value"], [(m, api_value(m, e[m])) for m in metrics.split(",")]) for e in expected["entries"]
        ], dimension
        assert expected["entries"], f"no {dimension} in the range: the test data is too thin"
    return answer


# --- the tests ----------------------------------------------------------------------------------------
def test_the_page_is_served_offline_and_equals_the_api(browser: WebDriver, base: str) -> None:
    page = httpx.get(f"{base}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert httpx.get(f"{base}/dashboard/../api/app.py").status_code == 404
    assert httpx.get(f"{base}/dashboard/vendor/uplot/LICENSE").text.startswith("The MIT License")

    open_dashboard(browser, base, range="24h", granularity="hour")
    q = shown_query(browser)
    start, end = parse(q["from"]), parse(q["to"])
    now = datetime.now(UTC)
    assert end - start == timedelta(hours=24) and end.minute == 0 and now < end <= now + timedelta(hours=1)
    answer = assert_page_equals_api(browser, base)
    assert answer["total"]["pageviews"] > 0 and not answer["partial"]

    # The freshness panel: the shown total's split between the layers, from the answer's `covers`.
    covers = answer["covers"]
    batch = sum(covers["batch_offsets"].values())
    realtime = sum(o - covers["batch_offsets"].get(p, 0) for p, o in covers["realtime_offsets"].items())
    assert batch > 0 and realtime > 0
    assert digits(text_of(browser, "fresh-batch").split(" log records")[0]) == batch
    assert digits(text_of(browser, "fresh-realtime").split(" log records")[0]) == realtime
    status = api_get(base, "/v1/status")
    assert text_of(browser, "fresh-generation").startswith(str(status["served"]["generation"]))
    assert text_of(browser, "fresh-microbatch").startswith(f"#{status['speed']['batch_id']} at ")
    assert "UTC" in text_of(browser, "fresh-cut")

    # The chart switches between the six numbers (keyboard: the arrow keys move the radio group),
    # redrawn from the same answer.
    for metric in ("visits", "pageviews", "views_per_visit", "bounce_rate", "visit_duration"):
        browser.find_element(By.CSS_SELECTOR, f'#metric [data-metric="{metric}"]').click()
        wait_for(f"the chart of {metric}", lambda: shown_metric(browser) == metric)  # noqa: B023
        assert f"metric={metric}" in browser.current_url
        assert_page_equals_api(browser, base)
    browser.execute_script("document.querySelector('input[name=metric]:checked').focus()")
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()  # from the last to the first
    wait_for("the chart of visitors", lambda: shown_metric(browser) == "visitors")
    assert_page_equals_api(browser, base)

    # Nothing was requested from anywhere but the API, and nothing went wrong in the console.
    resources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).concat([location.href])"
    )
    assert resources and all(url.startswith(f"{base}/") for url in resources), resources
    assert browser.find_element(By.ID, "banner").get_attribute("hidden") is not None
    errors = console_errors(browser, base)
    assert errors == []

    # Laptop width: the screenshot in the README (the whole page), nothing focused.
    browser.execute_script("document.activeElement.blur()")
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, height + 140)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))
    browser.set_window_size(1280, 1000)


def test_phone_width_keeps_everything_inside_the_screen(browser: WebDriver, base: str) -> None:
    browser.set_window_size(390, 844)
    try:
        open_dashboard(browser, base)
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0
        chart = browser.execute_script("return window.dashboard.chart.width")
        assert 200 < chart <= 390
    finally:
        browser.set_window_size(1280, 1000)


def test_changing_range_and_granularity_requeries(browser: WebDriver, base: str) -> None:
    open_dashboard(browser, base, range="24h", granularity="hour")
    # Keyboard only: the arrow key moves the range radio group from "Last 24 h" to "7 days".
    after_next_load(
        browser,
        lambda: browser.find_element(By.CSS_SELECTOR, 'input[name="range"][value="24h"]').send_keys(
            Keys.ARROW_RIGHT
        ),
    )
    q = shown_query(browser)
    assert parse(q["to"]) - parse(q["from"]) == timedelta(days=7) and q["granularity"] == "hour"
    assert "range=7d" in browser.current_url
    assert_page_equals_api(browser, base)

    after_next_load(
        browser, lambda: Select(browser.find_element(By.ID, "granularity")).select_by_value("day")
    )
    q = shown_query(browser)
    assert q["granularity"] == "day" and parse(q["to"]).hour == 0
    assert parse(q["to"]) - parse(q["from"]) == timedelta(days=7)
    assert len(browser.execute_script("return window.dashboard.chart.data[0]")) == 7
    assert_page_equals_api(browser, base)

    # A custom range, typed as UTC, applied with the button.
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(hours=30)
    browser.find_element(By.CSS_SELECTOR, 'input[name="range"][value="custom"]').click()
    for element_id, t in (("from", start), ("to", end)):
        browser.execute_script(
            "document.getElementById(arguments[0]).value = arguments[1]",
            element_id,
            t.strftime("%Y-%m-%dT%H:%M"),
        )
    after_next_load(browser, lambda: browser.find_element(By.ID, "apply").click())
    q = shown_query(browser)
    assert (parse(q["from"]), parse(q["to"])) == (start, end)
    assert_page_equals_api(browser, base)

    # A range that is not whole hours is refused on the page, naming the problem.
    browser.execute_script(
        "document.getElementById('from').value = arguments[0]", start.strftime("%Y-%m-%dT%H:30")
    )
    browser.find_element(By.ID, "apply").click()
    assert "whole hours" in wait_for("the form error", lambda: text_of(browser, "form-error"))


def test_live_numbers_rise_while_the_speed_layer_counts_new_events(
    browser: WebDriver, base: str, platform: Settings, spark: Any
) -> None:
    open_dashboard(browser, base, range="24h")
    before_day = digits(text_of(browser, "live-day-pageviews"))
    before_hour = digits(text_of(browser, "live-hour-pageviews"))
    assert before_day == api_get(base, "/v1/timeseries", site=SITE, **today())["total"]["pageviews"]

    url = f"https://{SITE}/live-{uuid.uuid4().hex[:6]}"
    events = [
        {
            "event_id": f"dash-{uuid.uuid4().hex[:12]}",
            "ts": datetime.now(UTC).isoformat(),
            "visitor_id": f"v-dash-{i % 3}",
            "url": url,
        }
        for i in range(7)
    ]
    response = httpx.post(f"{base}/v1/events", json=events, timeout=30)
    assert response.status_code == 202, response.text
    SpeedJob(platform, spark).run(available_now=True)

    wait_for(
        "the live page views to rise by 7",
        lambda: digits(text_of(browser, "live-day-pageviews")) == before_day + 7,
    )
    assert digits(text_of(browser, "live-hour-pageviews")) == before_hour + 7
    assert digits(text_of(browser, "live-lag")) == 0

    def current_matches() -> bool:
        answer = api_get(base, "/v1/current-visitors", site=SITE)
        shown = text_of(browser, "live-current-visitors")
        if not answer["covered"] or not re.search(r"[0-9]", shown):
            return False
        v = answer["visitors"]
        exact = bool(v["exact"])
        return digits(shown.split("95%")[0]) == js_round(v["estimate"]) and ("≈" not in shown) == exact

    # The three visitors just counted are among the current visitors, shown as the API gives them.
    wait_for("the current visitors as the API answers them", current_matches)


def today() -> dict[str, str]:
    now = datetime.now(UTC)
    start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return {"from": start.isoformat(), "to": end.isoformat(), "granularity": "hour"}


def banner_kind(browser: WebDriver) -> str:
    kind: str = browser.execute_script(
        "const b = document.getElementById('banner'); return b.hidden ? '' : b.dataset.kind"
    )
    return kind


def test_redis_down_shows_batch_only_numbers(browser: WebDriver, base: str, stack: Settings) -> None:
    open_dashboard(browser, base, range="24h")
    full = digits(text_of(browser, "total-pageviews"))
    control.down(stack, ["redis"])
    try:
        wait_for("the Redis-down banner", lambda: banner_kind(browser) == "redis-down")
        banner = text_of(browser, "banner")
        assert "Redis is down" in banner and "batch-only" in banner
        wait_for(
            "the batch-only numbers", lambda: browser.execute_script("return window.dashboard.series.partial")
        )
        q = shown_query(browser)
        partial = api_get(base, "/v1/timeseries", dimension="site", **q)
        assert partial["partial"] and partial["missing"] == ["realtime"]
        assert digits(text_of(browser, "total-pageviews")) == partial["total"]["pageviews"] < full
        assert text_of(browser, "fresh-realtime").startswith("missing")
        assert "Redis" in text_of(browser, "fresh-lag")
    finally:
        control.up(stack, ["redis"])
    wait_for("the banner to clear", lambda: banner_kind(browser) == "", timeout=60)
    wait_for("the full numbers", lambda: digits(text_of(browser, "total-pageviews")) == full)


def test_mongodb_down_says_so_and_recovers(browser: WebDriver, platform: Settings, stack: Settings) -> None:
    # An API that has read the batch documents keeps answering from its cache (they never change), so
    # the outage is seen by an API process started while MongoDB is down: every query is a 503.
    control.down(stack, ["ferretdb"])
    try:
        with serve(platform) as cold:
            browser.get(f"{cold}/?site={SITE}&range=24h&refresh=1")
            wait_for("the MongoDB-down banner", lambda: banner_kind(browser) == "mongodb-down", timeout=60)
            assert "MongoDB is down" in text_of(browser, "banner")
            assert text_of(browser, "total-pageviews") == NO_NUMBER
            page_rows = '.breakdown[data-dimension="page"] tbody tr'
            wait_for(
                "the tables to say why they are empty",
                lambda: (
                    [r.text for r in browser.find_elements(By.CSS_SELECTOR, page_rows)]
                    == ["Unavailable: MongoDB is down."]
                ),
            )
            wait_for("the status", lambda: text_of(browser, "fresh-generation").startswith("unknown"))
            control.up(stack, ["ferretdb"])
            wait_for("the banner to clear", lambda: banner_kind(browser) == "", timeout=90)
            wait_for("the numbers", lambda: text_of(browser, "total-pageviews") != NO_NUMBER)
            assert_page_equals_api(browser, cold)
            browser.get("about:blank")  # before its server stops, so the page polls it no more
    finally:
        control.up(stack, ["ferretdb"])


def test_with_keys_required_the_page_asks_for_a_key_once_and_sends_it_in_a_header(
    browser: WebDriver, platform: Settings
) -> None:
    """With LAMBDA_API_AUTH=keys the page asks for a key at its first 401, keeps it in
    sessionStorage (a reload does not ask again, a new session does), sends it as a header (never
    in a URL) and shows what the key may read: its site only, and no status without `admin`."""
    keyed = platform.model_copy(update={"api_auth": "keys"})
    made = subprocess.run(
        [sys.executable, "-m", "api", "keys", "add", "--name", "dash", "--scope", "read", "--site", SITE],
        cwd=ROOT,
        env={**os.environ, **keyed.to_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    key = made.stdout.strip()
    with serve(keyed) as base:
        browser.get(f"{base}/?site={SITE}&refresh=1")
        wait_for("the key form", lambda: browser.find_element(By.ID, "key-form").is_displayed())
        browser.find_element(By.ID, "key-input").send_keys(key + Keys.ENTER)
        wait_for("the first load", lambda: loads(browser) >= 1 and loads(browser, "liveLoads") >= 1)
        assert not browser.find_element(By.ID, "key-form").is_displayed()
        q = shown_query(browser)
        answer = httpx.get(
            f"{base}/v1/timeseries",
            params={"dimension": "site", **q},
            headers={"Authorization": f"Bearer {key}"},
        ).json()
        assert digits(text_of(browser, "total-pageviews")) == answer["total"]["pageviews"] > 0
        assert [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "site")).options] == [
            SITE
        ]
        wait_for("the status note", lambda: "admin scope" in text_of(browser, "fresh-generation"))
        assert browser.execute_script("return sessionStorage.getItem('lambda-api-key')") == key
        urls = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name).concat([location.href])"
        )
        assert urls and not any(key in url for url in urls)

        browser.refresh()  # the same session: no question
        wait_for("the reload", lambda: loads(browser) >= 1)
        assert not browser.find_element(By.ID, "key-form").is_displayed()

        browser.execute_script("sessionStorage.clear()")  # a new session asks again
        browser.refresh()
        wait_for("the key form again", lambda: browser.find_element(By.ID, "key-form").is_displayed())
        browser.get("about:blank")  # before its server stops, so the page polls it no more


def test_the_top_numbers_show_the_comparison_and_each_table_downloads_as_the_api_csv(
    browser: WebDriver, base: str
) -> None:
    """``compare=previous_period``: each of the six numbers shows the answer's change in percent;
    weeks as the granularity; every table's "Download CSV" saves the API's CSV of that table."""
    browser.get_log("browser")  # what earlier tests left (their stores down) is not this test's
    open_dashboard(browser, base, range="24h", granularity="week", compare="previous_period")
    q = shown_query(browser)
    assert q["compare"] == "previous_period" and q["granularity"] == "week"
    answer = assert_page_equals_api(browser, base)
    assert answer["comparison"]["compare"] == "previous_period"
    for m in METRICS:
        tile = browser.find_element(By.CSS_SELECTOR, f'#metric [data-metric="{m}"]')
        change = answer["change"][m]
        assert shown_value(tile.get_attribute("data-change")) == change, m
        shown = tile.find_element(By.CSS_SELECTOR, ".change").text
        assert "vs the previous period" in shown if change is not None else "nothing in" in shown, (m, shown)

    for name in ("series", *BREAKDOWNS):
        browser.execute_script("window.dashboard.downloaded = null")
        browser.find_element(By.CSS_SELECTOR, f'button.download[data-table="{name}"]').click()
        got = wait_for(
            f"the CSV of {name}", lambda: browser.execute_script("return window.dashboard.downloaded")
        )
        assert got["name"] == name
        expected = httpx.get(f"{base}/{got['path']}", params={**got["query"], "format": "csv"}, timeout=30)
        assert expected.status_code == 200 and got["csv"] == expected.text, name
        assert got["csv"].startswith("period,from,to,row,"), name

    # Without a comparison, the numbers show no change.
    after_next_load(browser, lambda: Select(browser.find_element(By.ID, "compare")).select_by_value(""))
    assert "compare" not in shown_query(browser) and "compare=" not in browser.current_url
    assert browser.find_elements(By.CSS_SELECTOR, "#metric .change") == []
    errors = console_errors(browser, base)
    assert errors == []


# --- filters: a click on a value filters every panel, through POST /v2/query --------------------------
VISIT_METRICS = ("visits", "views_per_visit", "bounce_rate", "visit_duration")
VISIT_PAGES = ("entry_page", "exit_page")
PRICING = f"https://{SITE}/pricing"
HOME = f"https://{SITE}/"
REMOVE = "\u00d7"  # a chip's remove button (a multiplication sign)
UNAVAILABLE = "\u2014"  # what a figure the filtered answer cannot give shows (an em dash)
NOT_WITH_PAGE = "not available with a page filter: filter by entry page instead"
# Canned rows of POST /v2/query per dimension: (value, visitors, page views); their visit figures
# follow from those (canned_figures).
CANNED_ROWS: dict[str, list[tuple[str, int, int]]] = {
    "page": [(PRICING, 20, 30), (HOME, 8, 10)],
    "entry_page": [(HOME, 12, 25), (PRICING, 3, 3)],
    "exit_page": [(PRICING, 9, 17)],
    "referrer": [("news.example.org", 6, 9)],
    "country": [("DE", 40, 90), ("FR", 7, 12)],
    "device": [("Desktop", 30, 70)],
    "channel": [("Organic Search", 11, 15)],
    "utm_source": [("newsletter", 5, 6)],
    "utm_campaign": [("spring", 4, 4)],
}
CANNED_TOTAL = (123, 456)  # visitors, page views
CANNED_HOURS = (2, 5)  # the first hours of the range get (visitors, page views) = (h + 1, 2h + 3)


def canned_figures(visitors: int, pageviews: int) -> dict[str, int | float]:
    """Every metric of a canned row, as POST /v2/query gives them (counts ints, the rest floats)."""
    visits = visitors + 1
    return {
        "visitors": visitors,
        "pageviews": pageviews,
        "visits": visits,
        "views_per_visit": round(pageviews / visits, 3),
        "bounce_rate": 37.5,
        "visit_duration": 42.125,
    }


class CannedQueryV2:
    """In front of the API: answers POST /v2/query with canned rows in the shape of the Plausible
    Stats API v2 (each asked metric's figure, in the order asked), and keeps each request body;
    every other request goes to the API."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def wrap(self, app: Any) -> Any:
        async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or (scope["method"], scope["path"]) != ("POST", "/v2/query"):
                await app(scope, receive, send)
                return
            data, more = b"", True
            while more:
                message = await receive()
                data += message.get("body", b"")
                more = message.get("more_body", False)
            headers = dict(scope["headers"])
            assert headers.get(b"content-type") == b"application/json"
            body = json.loads(data)
            self.bodies.append(body)
            answer = json.dumps(self.answer(body)).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": answer})

        return asgi

    @staticmethod
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        dimensions = body["dimensions"]
        rows: list[tuple[str | None, int, int]]
        if not dimensions:
            rows = [(None, *CANNED_TOTAL)]
        elif dimensions == ["time:hour"]:
            start = parse(body["date_range"][0])
            rows = [
                ((start + timedelta(hours=h)).strftime("%Y-%m-%d %H:%M:%S"), h + 1, 2 * h + 3)
                for h in range(*CANNED_HOURS)
            ]
        else:
            rows = list(CANNED_ROWS[dimensions[0]])
        results = [
            {
                "metrics": [canned_figures(v, pv)[m] for m in body["metrics"]],
                "dimensions": [] if d is None else [d],
            }
            for d, v, pv in rows
        ]
        return {
            "results": results,
            "meta": {"total_rows": len(rows), "scanned_rows": 1000, "notes": []},
            "query": body,
            "generation": 1,
            "covers": {},
            "exact": dict.fromkeys(body["metrics"], True),
            "path": "filter_table",
            "partial": False,
        }


def chips(browser: WebDriver) -> list[str]:
    shown: list[str] = browser.execute_script(
        "const nav = document.getElementById('filters');"
        "return nav.hidden ? [] : [...nav.querySelectorAll('li.chip')].map((li) => li.textContent)"
    )
    return shown


def click_filter(browser: WebDriver, dimension: str, value: str) -> None:
    link = browser.find_element(
        By.CSS_SELECTOR, f'.breakdown[data-dimension="{dimension}"] tr[data-value="{value}"] a.filter'
    )
    after_next_load(browser, link.click)


def first_value(browser: WebDriver, dimension: str) -> str:
    value = browser.find_element(
        By.CSS_SELECTOR, f'.breakdown[data-dimension="{dimension}"] tbody tr'
    ).get_attribute("data-value")
    assert value, f"no {dimension} row"
    return value


def table_cells(browser: WebDriver, dimension: str) -> list[tuple[str, list[tuple[str, Any, str]]]]:
    """A table's rows in one read: (its value, or its message, [(metric, figure, why not)]): the
    figure a cell keeps (None: none), or for a figure not available "—" and the reason it gives."""
    rows: list[tuple[str, list[list[str]]]] = browser.execute_script(
        "return [...document.querySelectorAll(`.breakdown[data-dimension='${arguments[0]}'] tbody tr`)]"
        ".map((tr) => [tr.dataset.value || tr.textContent, [...tr.querySelectorAll('td[data-metric]')]"
        ".map((td) => [td.dataset.metric, td.textContent, td.dataset.value, td.dataset.unavailable"
        " ? td.title : ''])])",
        dimension,
    )
    out = []
    for value, cells in rows:
        shown: list[tuple[str, Any, str]] = []
        for metric, text, raw, why in cells:
            assert (text == UNAVAILABLE) == bool(why), (dimension, metric, text, why)
            shown.append((metric, UNAVAILABLE if why else shown_value(raw), why))
        out.append((value, shown))
    return out


def expected_cells(
    metrics: list[str], figures: dict[str, Any], page_filter: bool
) -> list[tuple[str, Any, str]]:
    """A filtered row's cells as :func:`table_cells` reads them, for the answer's ``figures``."""
    return [
        (m, UNAVAILABLE, NOT_WITH_PAGE) if page_filter and m in VISIT_METRICS else (m, figures[m], "")
        for m in metrics
    ]


def section_metrics(browser: WebDriver, dimension: str) -> list[str]:
    section = browser.find_element(By.CSS_SELECTOR, f'.breakdown[data-dimension="{dimension}"]')
    metrics = section.get_attribute("data-metrics")
    assert metrics, dimension
    return metrics.split(",")


def filtered_bodies(browser: WebDriver, filters: list[list[Any]]) -> dict[str, dict[str, Any]]:
    """The POST /v2/query bodies one load with ``filters`` must send, per panel (``total``,
    ``series`` and each table that can be given with them): each for the metrics its panel shows,
    but the visit metrics with a page filter; no entry or exit page table with a page filter, no
    page table with an entry or exit page filter."""
    q = shown_query(browser)
    start, end = parse(q["from"]), parse(q["to"])
    named = {f[1] for f in filters}
    page = "page" in named

    def shown(metrics: Sequence[str]) -> list[str]:
        return [m for m in metrics if not (page and m in VISIT_METRICS)]

    # Whole UTC days go as dates (e.g. "24h" asked for in the day's last hour), as the page sends them.
    whole_days = start.timestamp() % 86400 == 0 and end.timestamp() % 86400 == 0
    common = {
        "site_id": SITE,
        "date_range": (
            [start.strftime("%Y-%m-%d"), (end - timedelta(days=1)).strftime("%Y-%m-%d")]
            if whole_days
            else [
                start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                (end - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            ]
        ),
        "filters": filters,
    }
    bodies: dict[str, dict[str, Any]] = {
        "total": {**common, "metrics": shown(METRICS), "dimensions": []},
        "series": {**common, "metrics": shown(METRICS), "dimensions": ["time:hour"]},
    }
    for dimension in BREAKDOWNS:
        if (page and dimension in VISIT_PAGES) or (dimension == "page" and named & set(VISIT_PAGES)):
            continue
        metrics = section_metrics(browser, dimension)
        order = "pageviews" if "pageviews" in metrics else "visitors" if page else "visits"
        bodies[dimension] = {
            **common,
            "metrics": shown(metrics),
            "dimensions": [dimension],
            "order_by": [[order, "desc"]],
            "pagination": {"limit": 10, "offset": 0},
        }
    return bodies


def assert_totals(browser: WebDriver, figures: dict[str, Any], page_filter: bool) -> None:
    """The six numbers: ``figures`` (metric to the answer's figure), and with a page filter the
    visit figures not available, saying why (and their radio buttons disabled)."""
    for m in METRICS:
        tile = browser.find_element(By.CSS_SELECTOR, f'#metric [data-metric="{m}"]')
        disabled = tile.find_element(By.CSS_SELECTOR, "input").get_attribute("disabled") is not None
        if page_filter and m in VISIT_METRICS:
            assert text_of(browser, f"total-{m}") == UNAVAILABLE, m
            assert tile.get_attribute("title") == NOT_WITH_PAGE, m
            assert tile.get_attribute("data-unavailable") == "true" and disabled, m
            assert tile.find_element(By.CSS_SELECTOR, ".exactness").text == NOT_WITH_PAGE, m
            continue
        assert shown_value(tile.get_attribute("data-value")) == figures[m], m
        assert tile.get_attribute("data-unavailable") == "false" and not disabled, m
        assert text_of(browser, f"total-{m}") not in (UNAVAILABLE, NO_NUMBER), m


def assert_canned_panels(
    browser: WebDriver, filters: list[list[Any]], bodies: list[dict[str, Any]], charted: str
) -> None:
    """The requests of one load with ``filters`` (one per panel), and the panels showing their
    canned answers; the chart of ``charted``."""
    expected = filtered_bodies(browser, filters)
    key = lambda b: json.dumps(b, sort_keys=True)  # noqa: E731
    assert sorted(map(key, bodies)) == sorted(map(key, expected.values()))
    page_filter = any(f[1] == "page" for f in filters)

    # The top numbers: every figure as answered, but the visit figures with a page filter.
    assert text_of(browser, "total-visitors") == str(CANNED_TOTAL[0])
    assert text_of(browser, "total-pageviews") == str(CANNED_TOTAL[1])
    assert_totals(browser, canned_figures(*CANNED_TOTAL), page_filter)
    # The chart: every hour of the range, the canned hours with their figures, the others none.
    q = shown_query(browser)
    chart = browser.execute_script("return window.dashboard.chart.data")
    assert shown_metric(browser) == charted and len(chart[0]) == 24
    assert chart[0][0] == parse(q["from"]).timestamp()
    empty = 0 if charted in ("visitors", "visits", "pageviews") else None
    assert chart[1] == [
        canned_figures(h + 1, 2 * h + 3)[charted] if CANNED_HOURS[0] <= h < CANNED_HOURS[1] else empty
        for h in range(24)
    ]
    # The tables: the canned rows, every column shown as answered ("—" for a visit column with a
    # page filter); a table that cannot be given with these filters says why.
    for dimension in BREAKDOWNS:
        metrics = section_metrics(browser, dimension)
        if dimension not in expected:
            [(message, cells)] = table_cells(browser, dimension)
            assert message.startswith("Not available with ") and "not kept per page" in message, dimension
            assert cells == [], dimension
            continue
        rows = [
            (value, expected_cells(metrics, canned_figures(visitors, pageviews), page_filter))
            for value, visitors, pageviews in CANNED_ROWS[dimension]
        ]
        assert table_cells(browser, dimension) == rows, dimension
    assert browser.find_element(By.CSS_SELECTOR, 'button.download[data-table="page"]').get_attribute(
        "disabled"
    )


def test_a_click_on_a_value_filters_every_panel_and_the_address_keeps_it(
    browser: WebDriver, platform: Settings
) -> None:
    """A click on a country adds the chip "Country is DE" (with its remove button) and
    ``f=country:DE`` to the address; every panel is then read from POST /v2/query (here canned) with
    the filter and the metrics it shows, visit figures included; a second click, on a page, adds a
    second filter (AND), under which the visit figures and the entry and exit pages are not
    available; a reload and back and forward keep them; a click on an entry page replaces the page
    filter (the two never go together), and removing the chips gives the unfiltered page of the
    GET /v1 answers again."""
    v2 = CannedQueryV2()
    browser.get_log("browser")
    with serve(platform, wrap=v2.wrap) as base:
        open_dashboard(browser, base, range="24h", granularity="hour", metric="visits")
        assert chips(browser) == [] and v2.bodies == []
        assert_page_equals_api(browser, base)
        country = first_value(browser, "country")

        click_filter(browser, "country", country)
        assert chips(browser) == [f"Country is {country} {REMOVE}"]
        assert browser.current_url.endswith(f"&f=country:{country}")
        by_country = [["is", "country", [country]]]
        assert_canned_panels(browser, by_country, v2.bodies, "visits")

        # A second filter: both, in the order they were added, in the requests and the address. A
        # page filter: no visit figure, the chart of visitors instead of visits.
        v2.bodies.clear()
        click_filter(browser, "page", PRICING)
        both = [*by_country, ["is", "page", [PRICING]]]
        assert chips(browser) == [f"Country is {country} {REMOVE}", f"Page is {PRICING} {REMOVE}"]
        assert browser.current_url.endswith(f"&f=country:{country}&f=page:{PRICING}")
        assert_canned_panels(browser, both, v2.bodies, "visitors")

        # A reload keeps them; back and forward move between the filters.
        v2.bodies.clear()
        browser.refresh()
        wait_for("the reload", lambda: loads(browser) >= 1)
        assert chips(browser) == [f"Country is {country} {REMOVE}", f"Page is {PRICING} {REMOVE}"]
        assert_canned_panels(browser, both, v2.bodies, "visitors")
        browser.back()
        wait_for("the country filter alone", lambda: chips(browser) == [f"Country is {country} {REMOVE}"])
        wait_for("its panels", lambda: text_of(browser, "total-visits") == str(CANNED_TOTAL[0] + 1))
        assert shown_metric(browser) == "visits"
        browser.forward()
        wait_for("both filters", lambda: len(chips(browser)) == 2)
        wait_for("the visits not available", lambda: text_of(browser, "total-visits") == UNAVAILABLE)

        # Removing the page chip, then a click on an entry page: that filter, and no page table.
        before = loads(browser)
        browser.find_element(By.CSS_SELECTOR, '#filters li[data-dimension="page"] button.remove').click()
        wait_for(
            "one chip",
            lambda: chips(browser) == [f"Country is {country} {REMOVE}"] and loads(browser) > before,
        )
        assert "f=page" not in browser.current_url
        v2.bodies.clear()
        click_filter(browser, "entry_page", HOME)
        by_entry = [*by_country, ["is", "entry_page", [HOME]]]
        assert chips(browser) == [f"Country is {country} {REMOVE}", f"Entry page is {HOME} {REMOVE}"]
        assert browser.current_url.endswith(f"&f=country:{country}&f=entry_page:{HOME}")
        assert_canned_panels(browser, by_entry, v2.bodies, "visits")

        # An address with a page and an entry page (never made by a click): the later one is kept.
        v2.bodies.clear()
        browser.get(f"{base}/?site={SITE}&refresh=1&f=entry_page:{HOME}&f=page:{PRICING}")
        wait_for(
            "the page filter",
            lambda: loads(browser) >= 1 and chips(browser) == [f"Page is {PRICING} {REMOVE}"],
        )
        assert_canned_panels(browser, [["is", "page", [PRICING]]], v2.bodies, "visitors")
        browser.back()
        wait_for("the entry page filter", lambda: len(chips(browser)) == 2)

        # Removing the chips: the address without them, and the unfiltered panels of the API again.
        before = loads(browser)
        browser.find_element(
            By.CSS_SELECTOR, '#filters li[data-dimension="entry_page"] button.remove'
        ).click()
        wait_for("one chip", lambda: len(chips(browser)) == 1 and loads(browser) > before)
        v2.bodies.clear()
        after_next_load(browser, browser.find_element(By.CSS_SELECTOR, "#filters button.remove").click)
        assert chips(browser) == [] and "f=" not in browser.current_url and v2.bodies == []
        assert browser.find_element(By.ID, "filters").get_attribute("hidden") is not None
        assert_page_equals_api(browser, base)
        assert text_of(browser, "total-visits") not in (UNAVAILABLE, NO_NUMBER)
        errors = console_errors(browser, base)
        assert errors == []
        browser.get("about:blank")  # before its server stops, so the page polls it no more


def post_query(base: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{base}/v2/query", json=body, timeout=30)
    assert response.status_code == 200, (body, response.text)
    answer: dict[str, Any] = response.json()
    return answer


def assert_panels_equal_the_endpoint(
    browser: WebDriver, base: str, filters: list[list[Any]]
) -> dict[str, Any]:
    """The page sent one body per panel, each the expected one, and every panel shows the real
    endpoint's answer to it: the six numbers (every metric but the visit ones under a page filter),
    the chart's series and each table's rows and columns. Returns the total's answer."""
    expected = filtered_bodies(browser, filters)
    sent = browser.execute_script(
        "return Object.fromEntries(Object.entries(window.dashboard.queries).map(([k, v]) => [k, v.body]))"
    )
    assert sent == expected
    page_filter = any(f[1] == "page" for f in filters)
    total = post_query(base, expected["total"])
    names = total["query"]["metrics"]
    assert names == expected["total"]["metrics"]
    assert total["exact"] == dict.fromkeys(names, True), total["exact"]
    [row] = total["results"]
    figures = dict(zip(names, row["metrics"], strict=True))
    assert figures["pageviews"] > 0
    assert digits(text_of(browser, "total-pageviews")) == figures["pageviews"]
    assert digits(text_of(browser, "total-visitors")) == figures["visitors"]
    assert_totals(browser, figures, page_filter)

    # The chart: the series' figures of the charted metric per hour (an hour without page views is
    # no row of the answer: none of it, 0 for a count).
    series = post_query(base, expected["series"])
    metric = shown_metric(browser)
    at = series["query"]["metrics"].index(metric)
    by_hour = {
        parse(r["dimensions"][0].replace(" ", "T") + "Z").timestamp(): r["metrics"][at]
        for r in series["results"]
    }
    chart = browser.execute_script("return window.dashboard.chart.data")
    empty = 0 if metric in ("visitors", "visits", "pageviews") else None
    assert chart[1] == [by_hour.get(t, empty) for t in chart[0]], metric

    # The tables, as the endpoint answers their bodies; the others say why they are not given.
    for dimension in BREAKDOWNS:
        metrics = section_metrics(browser, dimension)
        if dimension not in expected:
            [(message, cells)] = table_cells(browser, dimension)
            assert message.startswith("Not available with ") and cells == [], dimension
            continue
        answer = post_query(base, expected[dimension])
        asked = answer["query"]["metrics"]
        rows = [
            (
                r["dimensions"][0],
                expected_cells(metrics, dict(zip(asked, r["metrics"], strict=True)), page_filter),
            )
            for r in answer["results"]
        ]
        assert table_cells(browser, dimension) == rows, dimension
    return total


def test_with_filters_the_panels_show_the_real_endpoints_answers(browser: WebDriver, base: str) -> None:
    """On the real POST /v2/query (a batch generation and the speed layer's rows past its cut): after
    two filters by clicking (the top country, then the top device among its visitors), every panel
    shows the endpoint's exact answer for the same range and filters, the visit figures included
    (charted too); with a page filter instead, the visit figures say they are not available; and a
    click on the top entry page filters by it, the page table then saying why it is not given."""
    browser.get_log("browser")
    open_dashboard(browser, base, range="24h", granularity="hour")
    country = first_value(browser, "country")
    click_filter(browser, "country", country)
    device = first_value(browser, "device")
    click_filter(browser, "device", device)
    filters = [["is", "country", [country]], ["is", "device", [device]]]
    total = assert_panels_equal_the_endpoint(browser, base, filters)
    assert total["path"] == "filter_table"
    figures = dict(zip(total["query"]["metrics"], total["results"][0]["metrics"], strict=True))
    assert figures["visits"] > 0 and isinstance(figures["visits"], int)
    for m in ("bounce_rate", "visit_duration", "views_per_visit"):
        assert isinstance(figures[m], float), m
    # The visit figures charted, from the same answers.
    for metric in ("visits", "bounce_rate", "visit_duration"):
        browser.find_element(By.CSS_SELECTOR, f'#metric [data-metric="{metric}"]').click()
        wait_for(f"the chart of {metric}", lambda: shown_metric(browser) == metric)  # noqa: B023
        assert_panels_equal_the_endpoint(browser, base, filters)

    # A page filter: the visit figures are not available (visits are not kept per page); the chart
    # shows visitors instead, and the entry and exit pages say why they are not given.
    page = first_value(browser, "page")
    click_filter(browser, "page", page)
    assert shown_metric(browser) == "visitors"
    assert_panels_equal_the_endpoint(browser, base, [*filters, ["is", "page", [page]]])
    for dimension in VISIT_PAGES:
        [(message, _)] = table_cells(browser, dimension)
        assert message.startswith("Not available with a page filter"), message

    # Without it, a click on the top entry page: the visits that began there.
    before = loads(browser)
    browser.find_element(By.CSS_SELECTOR, '#filters li[data-dimension="page"] button.remove').click()
    wait_for("two chips", lambda: len(chips(browser)) == 2 and loads(browser) > before)
    entry = first_value(browser, "entry_page")
    click_filter(browser, "entry_page", entry)
    assert chips(browser)[-1] == f"Entry page is {entry} {REMOVE}"
    assert browser.current_url.endswith(f"&f=entry_page:{entry}")
    by_entry = [*filters, ["is", "entry_page", [entry]]]
    total = assert_panels_equal_the_endpoint(browser, base, by_entry)
    [(message, _)] = table_cells(browser, "page")
    assert message.startswith("Not available with an entry or exit page filter"), message
    [(first, _)] = table_cells(browser, "entry_page")
    assert first == entry
    errors = console_errors(browser, base)
    assert errors == []
    browser.get("about:blank")


def test_an_entry_page_alone_filters_every_panel(browser: WebDriver, base: str) -> None:
    """A click on an entry page of the unfiltered page: every figure is that of the visits that
    began there (their page views, at least one a visit; the visitors who made them, at most one a
    visit), and the chart has them."""
    browser.get_log("browser")
    open_dashboard(browser, base, range="24h", granularity="hour")
    entry = first_value(browser, "entry_page")
    click_filter(browser, "entry_page", entry)
    assert chips(browser) == [f"Entry page is {entry} {REMOVE}"]
    figures = {
        m: shown_value(
            browser.find_element(By.CSS_SELECTOR, f'#metric [data-metric="{m}"]').get_attribute("data-value")
        )
        for m in METRICS
    }
    visits = figures["visits"]
    assert visits and figures["pageviews"] and figures["visitors"], figures
    assert figures["pageviews"] >= visits >= figures["visitors"] > 0, figures
    chart = browser.execute_script("return window.dashboard.chart.data")
    assert shown_metric(browser) == "visitors" and any(chart[1]), chart[1]
    browser.get("about:blank")
