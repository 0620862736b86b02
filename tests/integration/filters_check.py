"""The check of combined filters on the real stack: ``POST /v2/query`` against the recount.

:func:`assert_filters_match` asks the API (in process, on the real stores) random filter trees
drawn by hypothesis over the values the events hold, with and without dimensions, and compares
every group's page views and visitors with tests.oracle_filters' evaluation of the same tree on
the deduplicated events: exactly, across the batch/realtime cut. It also holds the filter table to
the 1-D views where both answer: one ``is`` on a page through the views, the same condition
through the table (page views equal, the views' visitors within their sketch's error).

:func:`assert_counts_match_lists` holds the counts of the realtime part's lists (the hashes of sizes
the speed layer increments with each RPUSH) to the lists themselves; :func:`assert_filters_match`
checks them first.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import redis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, seed
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from api.app import create_app
from config.settings import Settings
from contract import PageView
from stores.redis import keys
from stores.redis.filter_rows import decode_blobs
from tests import oracle_filters as oracle

DIMENSION_CHOICES: tuple[tuple[str, ...], ...] = (
    (),
    ("country",),
    ("time:hour",),
    ("page", "device"),
    ("referrer",),
    ("channel", "time:day"),
)


def _answered(found: dict[str, Any]) -> dict[tuple[Any, ...], tuple[int, int]]:
    """(dimension values...) -> (page views, visitors) of an answer."""
    metrics = found["query"]["metrics"]
    out = {}
    for r in found["results"]:
        values = dict(zip(metrics, r["metrics"], strict=True))
        out[tuple(r["dimensions"])] = (int(values["pageviews"]), int(values["visitors"]))
    assert len(out) == len(found["results"]), "a group answered twice"
    return out


def assert_filters_match(
    settings: Settings, events: Iterable[PageView], examples: int = 20, at: int = 0
) -> None:
    """``examples`` random filter trees per site of the two busiest, each with a random choice of
    dimensions, answered by the filter table exactly as the recount of ``events`` (first copies:
    tests.oracle.first_copies) says; ``at`` seeds the draw (print it on failure to replay it)."""
    events = list(events)
    client = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)
    try:
        assert_counts_match_lists(client)
    finally:
        client.close()
    rows = oracle.rows(events)
    days = (min(r.day for r in rows), max(r.day for r in rows))
    sites = [s for s, _ in Counter(r.site for r in rows).most_common(2)]
    with TestClient(create_app(settings)) as api:

        def ask(body: dict[str, Any]) -> dict[str, Any]:
            return whole_answer(lambda: api.post("/v2/query", json=body), body)

        visits = oracle.visit_rows(events)
        for site in sites:
            _assert_trees_match(ask, rows, site, days, examples, at)
            _assert_visit_trees_match(ask, rows, visits, site, days, examples, at)
            _assert_views_agree(ask, rows, site, days, settings.hll_lg_k)


PARTIAL_TRIES = 5
"""Asks of one query while its answers are partial (flagged, the batch part alone)."""


def whole_answer(post: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The answer of ``post()`` (a 200) that holds both parts. A realtime read slower than the
    API's Redis timeout (``LAMBDA_API_REDIS_TIMEOUT_MS``, 500 ms: a loaded machine, a fresh
    connection) gives an answer flagged ``partial``, the batch part alone, missing ``realtime``:
    flagged, never silently wrong, so it is asked again; the exactness checks compare whole
    answers only."""
    for _ in range(PARTIAL_TRIES):
        answer = post()
        assert answer.status_code == 200, (body, answer.text)
        found: dict[str, Any] = answer.json()
        if not found["partial"]:
            return found
        assert found["missing"] == ["realtime"], (body, found["missing"])
        time.sleep(0.5)
    raise AssertionError(f"{PARTIAL_TRIES} answers in a row were partial: {body}")


Lists = dict[tuple[str, str], list[bytes]]
Sizes = dict[tuple[str, str], dict[str, int]]


def filter_keys(r: redis.Redis, gen: int) -> tuple[Lists, Sizes]:
    """Generation ``gen``'s filter rows as stored, read at one instant (the keys listed and read
    under WATCH of the speed layer's commit record, again if a commit came between): (site, day) ->
    the list's streams, and (site, day) -> {"rows": n, "bytes": n} of its hash of sizes."""
    lists_at = keys.generation_prefix(gen) + keys.FILTERS_SUFFIX
    sizes_at = keys.generation_prefix(gen) + keys.FILTER_SIZES_SUFFIX
    while True:
        with r.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.SPEED_COMMIT)  # type: ignore[no-untyped-call]
                list_keys = sorted(k.decode() for k in pipe.scan_iter(match=lists_at + "*", count=1000))
                size_keys = sorted(k.decode() for k in pipe.scan_iter(match=sizes_at + "*", count=1000))
                pipe.multi()
                for key in list_keys:
                    pipe.lrange(key, 0, -1)
                for key in size_keys:
                    pipe.hgetall(key)
                replies = pipe.execute()
            except redis.WatchError:
                continue
        break
    lists: Lists = {}
    for key, blobs in zip(list_keys, replies[: len(list_keys)], strict=True):
        day, site = key.removeprefix(lists_at).split("|", 1)
        lists[(site, day)] = [bytes(b) for b in blobs]
    counted: Sizes = {}
    for key, fields in zip(size_keys, replies[len(list_keys) :], strict=True):
        site = key.removeprefix(sizes_at)
        for field, value in fields.items():
            name, day = field.decode().split(":", 1)
            counted.setdefault((site, day), {})[name] = int(value)
    return lists, counted


def assert_counts_match_lists(r: redis.Redis) -> int:
    """Every realtime generation's counts of its filter rows against its lists, read at one instant:
    per (site, day) the rows counted are exactly the rows of the list's streams, and the bytes
    counted are the streams' sizes exactly plus their rows' Arrow size as encoded, which the decoded
    size matches within a few percent; no count without its list, no list without its count.
    Returns the rows checked."""
    checked = 0
    for gen in sorted(int(g) for g in r.smembers(keys.REALTIME_GENS)):
        lists, counted = filter_keys(r, gen)
        assert set(counted) == set(lists), (gen, set(counted) ^ set(lists))
        for at, blobs in lists.items():
            tables = [decode_blobs([b]) for b in blobs]
            rows, streams = sum(t.num_rows for t in tables), sum(len(b) for b in blobs)
            decoded = sum(t.nbytes for t in tables)
            assert counted[at]["rows"] == rows, (gen, at, counted[at], rows)
            arrow = counted[at]["bytes"] - streams
            assert 0.95 * decoded <= arrow <= 1.25 * decoded, (gen, at, counted[at], streams, decoded)
            checked += rows
    return checked


def _assert_trees_match(
    ask: Any, rows: list[oracle.Row], site: str, days: tuple[str, str], examples: int, at: int
) -> None:
    """``examples`` random filter trees of ``site``'s values through the table, against the recount."""
    values = oracle.values_by_dimension(rows, site)
    trees = st.lists(oracle.filter_trees(values), min_size=1, max_size=2)

    @seed(at)
    @hypothesis_settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(filters=trees, dimensions=st.sampled_from(DIMENSION_CHOICES))
    def check(filters: list[Any], dimensions: tuple[str, ...]) -> None:
        body = {
            "site_id": site,
            "date_range": list(days),
            "metrics": ["pageviews", "visitors"],
            "dimensions": list(dimensions),
            # a condition every row passes: the table's path even for a single `is`
            "filters": [*filters, ["is_not", "country", ["--"]]],
            "pagination": {"limit": 10_000},
        }
        found = ask(body)
        assert found["path"] == "filter_table", found["path"]
        assert found["exact"] == {"pageviews": True, "visitors": True}
        expected = oracle.answer(rows, site, days, filters, dimensions)
        if not dimensions and not expected:
            expected = {(): (0, 0)}  # totals are one row, zeros when nothing passes
        answered = _answered(found)
        if answered != expected:
            again = ask(body)
            raise AssertionError(
                f"round {at}: {body}\nanswered {answered}, covering {found['covers']}\n"
                f"recount  {expected}\nasked again: {_answered(again)}, covering {again['covers']}"
            )

    check()


def _assert_views_agree(
    ask: Any, rows: list[oracle.Row], site: str, days: tuple[str, str], lg_k: int
) -> None:
    """The busiest page of ``site`` through today's views and through the table: the same page
    views per day, and the views' visitors (sketch unions) within 3 standard errors of the table's."""
    page = Counter(r.values["page"] for r in rows if r.site == site).most_common(1)[0][0]
    base = {
        "site_id": site,
        "date_range": list(days),
        "metrics": ["pageviews", "visitors"],
        "dimensions": ["time:day"],
        "pagination": {"limit": 10_000},
    }
    through_views = ask({**base, "filters": [["is", "page", [page]]]})
    through_table = ask({**base, "filters": [["is", "page", [page]], ["is_not", "country", ["--"]]]})
    assert (through_views["path"], through_table["path"]) == ("views", "filter_table")
    views = _answered(through_views)
    table = _answered(through_table)
    assert {d: pv for d, (pv, _) in views.items()} == {d: pv for d, (pv, _) in table.items()}
    error = 3 * 1.04 / math.sqrt(2**lg_k)
    for day, (_, exact) in table.items():
        estimate = views[day][1]
        assert abs(estimate - exact) <= max(1.0, error * exact), (page, day, estimate, exact)


VISIT_DIMENSION_CHOICES: tuple[tuple[str, ...], ...] = (
    (),
    ("country",),
    ("entry_page",),
    ("time:hour",),
    ("channel", "exit_page"),
    ("referrer", "time:day"),
)
ALL_METRICS = ["pageviews", "visitors", *oracle.VISIT_FIGURES]


def _assert_visit_trees_match(
    ask: Any,
    rows: list[oracle.Row],
    visits: list[oracle.VisitRow],
    site: str,
    days: tuple[str, str],
    examples: int,
    at: int,
) -> None:
    """``examples`` random filter trees over the visits' values (their first view's, their entry
    and exit pages) with every metric, against the reference sessioniser's visits."""
    values = oracle.values_by_dimension(visits, site)
    trees = st.lists(oracle.filter_trees(values), min_size=1, max_size=2)

    @seed(at)
    @hypothesis_settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(filters=trees, dimensions=st.sampled_from(VISIT_DIMENSION_CHOICES))
    def check(filters: list[Any], dimensions: tuple[str, ...]) -> None:
        body = {
            "site_id": site,
            "date_range": list(days),
            "metrics": ALL_METRICS,
            "dimensions": list(dimensions),
            "filters": [*filters, ["is_not", "country", ["--"]]],
            "pagination": {"limit": 10_000},
        }
        found = ask(body)
        assert found["path"] == "filter_table", found["path"]
        assert found["exact"] == dict.fromkeys(ALL_METRICS, True), found
        expected = oracle.answer_visits(rows, visits, site, days, filters, dimensions)
        if not dimensions and not expected:
            expected = {(): {**dict.fromkeys(ALL_METRICS, None), "pageviews": 0, "visitors": 0, "visits": 0}}
        answered = {
            tuple(r["dimensions"]): dict(zip(ALL_METRICS, r["metrics"], strict=True))
            for r in found["results"]
        }
        assert answered == expected, (at, body)

    check()
