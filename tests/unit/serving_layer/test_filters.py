"""serving_layer.filters without services: the body's parsing and its 422s, the SQL's bound values,
random filter trees on DuckDB against a plain evaluation of the same tree (over the batch part's
Parquet files and the realtime rows together), the row limit, the time limit and the queue, and
the answer of the filter table's path from a fake snapshot."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import re
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generations.model import Generation, Served, SpeedCommit
from generations.state import GenerationState
from serving_layer.filters import scan as scan_module
from serving_layer.filters import service as service_module
from serving_layer.filters.model import And, Condition, Filter, FilterQuery, Not, Or
from serving_layer.filters.parse import parse_query
from serving_layer.filters.scan import Busy, Limits, Scanner, ScanTimeout, TooManyRows, TooMuchRealtime
from serving_layer.filters.service import FilterService
from serving_layer.filters.sql import compile_query
from serving_layer.model import (
    COUNTS_ONLY,
    FilterRowsBudget,
    FilterRowsSnapshot,
    InvalidQuery,
    NotReady,
    RealtimeUnavailable,
)
from stores.memory import MemoryRealtimeStore
from stores.redis.filter_rows import read_bytes
from views.filter_table import DIMENSIONS, NAME, VISIT_COLUMNS, VISIT_PAGES, arrow_schema

TODAY = date(2026, 11, 26)
SITE = "shop.example.com"
DAYS = [date(2026, 11, 20) + timedelta(days=i) for i in range(3)]
EVIL = "'); DROP TABLE x; --"
VALUES = ["a", "ab", "b", "(none)", EVIL, "%_", "https://shop.example.com/a"]


def parse(**body: Any) -> FilterQuery:
    base: dict[str, Any] = {
        "site_id": SITE,
        "date_range": ["2026-11-20", "2026-11-22"],
        "metrics": ["visitors"],
    }
    return parse_query({**base, **body}, TODAY, 92, lambda s: s.lower())


def limits(**kw: Any) -> Limits:
    return Limits(
        **{
            "max_rows": 10**7,
            "concurrency": 2,
            "queue": 2,
            "timeout_s": 10.0,
            "threads": 1,
            "memory_mb": 256,
            **kw,
        }
    )


# --- parsing ----------------------------------------------------------------------------------------
def test_a_body_parses_aliases_resolved_and_defaults_filled_in() -> None:
    q = parse(
        metrics=["pageviews", "visitors"],
        dimensions=["visit:source", "time:day"],
        filters=[
            ["is", "visit:country", ["DE"]],
            ["or", [["contains", "event:page", ["/blog"]], ["not", ["is", "visit:device", ["Mobile"]]]]],
        ],
        pagination={"limit": 5},
    )
    assert q.dimensions == ("referrer", "time:day")
    assert q.filter == And(
        (
            Condition("is", "country", ("DE",)),
            Or((Condition("contains", "page", ("/blog",)), Not(Condition("is", "device", ("Mobile",))))),
        )
    )
    assert q.order_by == (("time:day", "asc"), ("referrer", "asc"))
    assert (q.limit, q.offset) == (5, 0)
    assert q.echo["filters"][0] == ["is", "country", ["DE"]]
    assert parse(date_range="7d").first_day == date(2026, 11, 20)
    assert parse(date_range="month").first_day == date(2026, 11, 1)
    assert parse(date_range="day").days == ["2026-11-26"]


def test_page_values_of_is_are_normalised_as_the_views_key_pages() -> None:
    q = parse(filters=[["is", "event:page", ["HTTPS://Shop.Example.com/cart?utm_source=x"]]])
    assert q.filter == Condition("is", "page", ("https://shop.example.com/cart",))
    q = parse(filters=[["contains", "event:page", ["/Cart"]]])
    assert q.filter == Condition("contains", "page", ("/Cart",))


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"site_id": ""}, "site_id"),
        ({"date_range": "year"}, "date_range"),
        ({"date_range": ["2026-11-22", "2026-11-20"]}, "date_range"),
        ({"date_range": ["2026-01-01", "2026-12-31"]}, "date_range"),
        ({"date_range": ["2026-11-20T10:30:00Z", "2026-11-21T10:59:59Z"]}, "date_range"),
        ({"date_range": ["2026-11-20T10:00:00Z", "2026-11-21T11:00:00Z"]}, "date_range"),
        ({"date_range": ["2026-11-20T10:00:00", "2026-11-21T10:59:59"]}, "date_range"),
        ({"date_range": ["2026-11-21T10:00:00Z", "2026-11-20T10:59:59Z"]}, "date_range"),
        ({"metrics": []}, "metrics"),
        ({"metrics": ["bounces"]}, "metrics"),
        ({"dimensions": ["visit:os"]}, "dimensions"),
        ({"dimensions": ["time:day", "time:hour"]}, "dimensions"),
        ({"filters": [["like", "visit:country", ["DE"]]]}, "filters"),
        ({"filters": [["is", "time:day", ["2026-11-20"]]]}, "filters"),
        ({"filters": [["is", "visit:country", "DE"]]}, "filters"),
        ({"filters": [["is", "visit:country", []]]}, "filters"),
        ({"filters": [["is", "visit:country", [1]]]}, "filters"),
        ({"filters": [["is", "event:page", ["not a url"]]]}, "filters"),
        (
            {"filters": [["not", ["not", ["not", ["not", ["not", ["is", "visit:country", ["DE"]]]]]]]]},
            "filters",
        ),
        ({"filters": [["is", "visit:country", ["DE"]]] * 51}, "filters"),
        ({"filters": [["is", "visit:country", ["x"] * 101]]}, "filters"),
        ({"filters": [["matches", "visit:country", ["a" * 1025]]]}, "filters"),
        ({"order_by": [["visit:os", "asc"]]}, "order_by"),
        ({"order_by": [["visitors", "up"]]}, "order_by"),
        ({"pagination": {"limit": 0}}, "pagination"),
        ({"pagination": {"limit": 10_001}}, "pagination"),
        ({"pagination": {"offset": -1}}, "pagination"),
        ({"segments": []}, "segments"),
    ],
)
def test_a_bad_body_is_an_invalid_query_naming_the_parameter(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidQuery) as exc:
        parse(**body)
    assert exc.value.param == param


# --- SQL ------------------------------------------------------------------------------------------
def test_every_value_is_a_bound_parameter_and_a_hostile_value_a_literal() -> None:
    q = parse(
        metrics=["pageviews"],
        filters=[
            ["is", "visit:country", [EVIL]],
            ["contains", "visit:source", ["%_"]],
            ["matches", "visit:device", ["^a"]],
        ],
    )
    compiled = compile_query(q, ["/data/gen=1/day=2026-11-20/part-0.parquet"], True)
    for value in (EVIL, "%_", "^a", SITE, "/data/gen=1"):
        assert value not in compiled.sql
    assert EVIL in compiled.params and "%_" in compiled.params and SITE in compiled.params
    assert " LIKE " not in compiled.sql.upper()
    table = _table(
        [_row(country=EVIL, referrer="x%_y", device="abc"), _row(country=EVIL, referrer="xy", device="abc")]
    )
    result = asyncio.run(Scanner(limits()).scan(q, [], table))
    assert [r[0] for r in result.rows] == [1]  # the country matched literally, % and _ no wildcards


def test_an_invalid_pattern_is_a_422_of_filters() -> None:
    q = parse(filters=[["matches", "visit:device", ["(unclosed"]]])
    with pytest.raises(InvalidQuery) as exc:
        asyncio.run(Scanner(limits()).scan(q, [], _table([_row()])))
    assert exc.value.param == "filters"


# --- random trees against a plain evaluation --------------------------------------------------------
def _row(**kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"site": SITE, "day": DAYS[0], "hour": 0, "visitor": 1, "pageviews": 1}
    row.update({d: "a" for d in DIMENSIONS})
    row.update(dict.fromkeys((*VISIT_PAGES, *VISIT_COLUMNS)))
    row.update(kw)
    return row


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    schema = arrow_schema()
    return pa.Table.from_pylist(rows, schema=schema)


def _holds(f: Filter, row: dict[str, Any]) -> bool:
    if isinstance(f, And):
        return all(_holds(i, row) for i in f.items)
    if isinstance(f, Or):
        return any(_holds(i, row) for i in f.items)
    if isinstance(f, Not):
        return not _holds(f.item, row)
    value = row[f.dimension]
    base = f.op.removesuffix("_not")
    if base == "is":
        hit = value in f.values
    elif base == "contains":
        hit = any(v in value for v in f.values)
    else:
        hit = any(re.search(v, value) for v in f.values)
    return hit != f.op.endswith("_not")


PATTERNS = ["^a", "b$", "a.", "^\\(", "none", "DROP"]
DIMS = ["country", "device", "referrer"]


def _condition() -> st.SearchStrategy[list[Any]]:
    op = st.sampled_from(["is", "is_not", "contains", "contains_not", "matches", "matches_not"])
    return st.builds(
        lambda o, d, vs, ps: [o, d, ps if o.startswith("matches") else vs],
        op,
        st.sampled_from(DIMS),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=3),
        st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2),
    )


FILTERS = st.recursive(
    _condition(),
    lambda inner: st.one_of(
        st.builds(lambda xs: ["and", xs], st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: ["or", xs], st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: ["not", x], inner),
    ),
    max_leaves=6,
)
ROWS = st.lists(
    st.builds(
        lambda site, day, hour, c, d, p, v, n, rt: (
            _row(site=site, day=day, hour=hour, country=c, device=d, referrer=p, visitor=v, pageviews=n),
            rt,
        ),
        st.sampled_from([SITE, "other.example.com"]),
        st.sampled_from([*DAYS, date(2026, 11, 23)]),
        st.integers(0, 23),
        st.sampled_from(VALUES),
        st.sampled_from(VALUES),
        st.sampled_from(VALUES),
        st.integers(-(2**63), 2**63 - 1) | st.integers(0, 5),
        st.integers(1, 9),
        st.booleans(),
    ),
    max_size=40,
)


def _depth(raw: list[Any]) -> int:
    if raw[0] in ("and", "or"):
        return 1 + max(_depth(i) for i in raw[1])
    return 1 + _depth(raw[1]) if raw[0] == "not" else 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    filters=st.lists(FILTERS, max_size=2),
    rows=ROWS,
    by=st.sampled_from([[], ["visit:device"], ["time:day", "visit:country"]]),
)
def test_random_filter_trees_agree_with_a_plain_evaluation(
    tmp_path_factory: Any, filters: list[Any], rows: list[Any], by: list[str]
) -> None:
    if any(_depth(f) > 5 for f in filters):
        return
    q = parse(metrics=["pageviews", "visitors"], dimensions=by, filters=filters, pagination={"limit": 10_000})
    batch = [r for r, rt in rows if not rt]
    realtime = [r for r, rt in rows if rt]
    root = tmp_path_factory.mktemp("filters")
    files = _write_batch(root, batch, gen=3)
    got = asyncio.run(Scanner(limits()).scan(q, files, _table(realtime)))
    expected: dict[tuple[str, ...], tuple[int, set[int]]] = {}
    for r, _ in rows:
        if r["site"] != SITE or r["day"] not in DAYS or (q.filter is not None and not _holds(q.filter, r)):
            continue
        key = tuple(r["day"].isoformat() if d == "time:day" else r[d] for d in q.dimensions)
        pv, visitors = expected.get(key, (0, set()))
        expected[key] = (pv + r["pageviews"], visitors | {r["visitor"]})
    as_found = {
        tuple(r[: len(q.dimensions)]): (r[len(q.dimensions)] or 0, r[len(q.dimensions) + 1]) for r in got.rows
    }
    if not q.dimensions and not expected:
        assert as_found in ({(): (0, 0)}, {})
        return
    assert as_found == {k: (pv, len(v)) for k, (pv, v) in expected.items()}
    assert got.total == len(expected)


def _write_batch(root: Any, rows: list[dict[str, Any]], gen: int) -> list[str]:
    files = []
    for day in sorted({r["day"] for r in rows}):
        of_day = [{k: v for k, v in r.items() if k != "day"} for r in rows if r["day"] == day]
        schema = pa.schema([f for f in arrow_schema() if f.name != "day"])
        path = os.path.join(str(root), f"gen={gen}", f"day={day.isoformat()}")
        os.makedirs(path, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(of_day, schema=schema), os.path.join(path, "part-00000.parquet"))
        files.append(os.path.join(path, "part-00000.parquet"))
    return files


# --- bounds ---------------------------------------------------------------------------------------
def _slow(con: Any, *args: Any) -> Any:
    return con.execute("SELECT count(*) FROM range(100000000000) a WHERE a.range % 7 = 3").fetchall()


def test_a_scan_past_its_time_is_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_module, "_execute", _slow)
    scanner = Scanner(limits(timeout_s=0.3))
    started = time.monotonic()
    with pytest.raises(ScanTimeout, match="LAMBDA_API_FILTER_TIMEOUT_S"):
        asyncio.run(scanner.scan(parse(), [], None))
    assert time.monotonic() - started < 5
    scanner.close()


def test_past_the_concurrency_and_its_queue_a_scan_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_module, "_execute", _slow)
    scanner = Scanner(limits(concurrency=1, queue=1, timeout_s=0.5))

    async def run() -> list[Any]:
        jobs = [asyncio.create_task(scanner.scan(parse(), [], None)) for _ in range(3)]
        return await asyncio.gather(*jobs, return_exceptions=True)

    outcomes = asyncio.run(run())
    assert sum(isinstance(o, Busy) for o in outcomes) == 1
    assert sum(isinstance(o, ScanTimeout) for o in outcomes) == 2
    scanner.close()


# --- the filter table's path from a fake snapshot --------------------------------------------------
Rows = FilterRowsSnapshot
"""A fake snapshot: served, commit, views and blobs (the counts filled in by :class:`FakeRealtime`)."""


class FakeBatch:
    def __init__(self, gen: Generation) -> None:
        self.gen = gen

    async def generation(self, gen: int) -> Generation:
        return self.gen

    async def served_generation(self) -> Generation | None:
        return self.gen


@dataclass
class FakeRealtime:
    rows: Rows | None = None
    down: bool = False
    asked: list[tuple[str, list[str]]] = field(default_factory=list)

    async def filter_rows_snapshot(
        self, site: str, days: list[str], budget: FilterRowsBudget | None = None
    ) -> Rows:
        """The fixed snapshot, its counts those of its streams, withheld outside ``budget`` as
        Redis' function withholds them."""
        self.asked.append((site, list(days)))
        if self.down:
            raise RealtimeUnavailable("redis down")
        assert self.rows is not None
        snap = self.rows
        if snap.served is None:
            return snap
        tables = [pa.ipc.open_stream(blob).read_all() for blob in snap.blobs]
        rows = sum(t.num_rows for t in tables)
        nbytes = sum(read_bytes(blob, t) for blob, t in zip(snap.blobs, tables, strict=True))
        if budget is not None and not budget.allows(snap.served.gen, rows, nbytes):
            return replace(snap, blobs=[], rows=rows, nbytes=nbytes, withheld=True)
        return replace(snap, rows=rows, nbytes=nbytes)


@dataclass
class FakeEngine:
    batch: FakeBatch
    realtime: Any
    degraded: list[str] = field(default_factory=list)

    def on_degraded(self, store: str, exc: Exception) -> None:
        self.degraded.append(store)

    async def description(self, view: str) -> dict[str, Any] | None:
        return {"per_site": view != "page"}


def _blob(rows: list[dict[str, Any]]) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, arrow_schema()) as writer:
        writer.write_table(_table(rows))
    return sink.getvalue()


def _generation(fp: str = "f1", days: dict[str, int] | None = None) -> Generation:
    return Generation(
        gen=3,
        kind="incremental",
        state=GenerationState.SERVED,
        cut={0: 100},
        started_at=datetime(2026, 11, 26, tzinfo=UTC),
        day_map={NAME: days if days is not None else {d.isoformat(): 3 for d in DAYS}},
        fingerprints={NAME: fp},
    )


def _service(tmp_path: Any, realtime: Any, gen: Generation, **kw: Any) -> tuple[FilterService, FakeEngine]:
    batch_rows = [
        _row(country="DE", visitor=1, pageviews=2),
        _row(country="DE", visitor=2, pageviews=1, day=DAYS[1]),
        _row(country="FR", visitor=3, pageviews=5),
        _row(site="other.example.com", country="DE", visitor=9, pageviews=7),
    ]
    _write_batch(tmp_path, batch_rows, gen=3)
    engine = FakeEngine(FakeBatch(gen), realtime)
    return FilterService(engine, Scanner(limits(**kw)), tmp_path.as_uri(), 1000), engine


COMBINED: dict[str, Any] = {
    "filters": [["is", "visit:country", ["DE"]], ["is_not", "visit:device", ["x"]]],
    "metrics": ["visitors", "pageviews"],
}


def test_the_filter_table_path_merges_batch_and_realtime_exactly(tmp_path: Any) -> None:
    rt = Rows(
        Served(3, {0: 100}),
        SpeedCommit(7, {0: 130}),
        frozenset({f"{NAME}@f1"}),
        [_blob([_row(country="DE", visitor=1, pageviews=4, day=DAYS[2])])],
    )
    service, _ = _service(tmp_path, FakeRealtime(rt), _generation())
    a = asyncio.run(service.answer(parse(**COMBINED)))
    assert a.path == "filter_table" and a.exact == {"visitors": True, "pageviews": True}
    assert [r.metrics for r in a.results] == [(2, 7)]  # visitor 1 in both parts counts once
    assert a.coverage.realtime_offsets == {0: 130} and not a.coverage.partial
    assert a.scanned_rows is not None and a.scanned_rows >= 4


def test_a_range_of_datetimes_counts_its_whole_utc_hours_only(tmp_path: Any) -> None:
    """``["...T10:00:00+01:00", "...T01:59:59Z"]``: hours 9-23 of the first day and 0-1 of the next."""
    rows = [
        _row(hour=8, visitor=1),
        _row(hour=9, visitor=2),
        _row(hour=23, visitor=3),
        _row(hour=1, visitor=4, day=DAYS[1]),
        _row(hour=2, visitor=5, day=DAYS[1]),
    ]
    q = parse(date_range=["2026-11-20T10:00:00+01:00", "2026-11-21T01:59:59Z"], metrics=["visitors"])
    assert (q.first_hour, q.last_hour) == (9, 1)
    assert q.start == datetime(2026, 11, 20, 9, tzinfo=UTC) and q.end == datetime(2026, 11, 21, 2, tzinfo=UTC)
    files = _write_batch(tmp_path, rows, gen=1)
    scanned = asyncio.run(Scanner(limits()).scan(q, files, None))
    assert scanned.rows[0][1] == 3  # visitors 2, 3 and 4 (after the page views)


def test_with_redis_down_the_batch_part_alone_flagged_partial(tmp_path: Any) -> None:
    service, engine = _service(tmp_path, FakeRealtime(down=True), _generation())
    a = asyncio.run(service.answer(parse(**COMBINED)))
    assert [r.metrics for r in a.results] == [(2, 3)]
    assert a.coverage.partial and a.coverage.missing == ("realtime",) and engine.degraded == ["redis"]


def test_a_table_counted_with_other_code_is_not_ready(tmp_path: Any) -> None:
    rt = Rows(Served(3, {0: 100}), SpeedCommit(7, {0: 130}), frozenset({f"{NAME}@other"}), [])
    service, _ = _service(tmp_path, FakeRealtime(rt), _generation())
    with pytest.raises(NotReady):
        asyncio.run(service.answer(parse(**COMBINED)))
    without_table = Generation(3, "full", GenerationState.SERVED, {0: 5}, datetime(2026, 11, 26, tzinfo=UTC))
    service, _ = _service(tmp_path, FakeRealtime(down=True), without_table)
    with pytest.raises(NotReady, match="no batch views"):
        asyncio.run(service.answer(parse(**COMBINED)))


def test_the_row_estimate_above_the_limit_is_refused_before_the_scan(tmp_path: Any) -> None:
    service, _ = _service(tmp_path, FakeRealtime(down=True), _generation(), max_rows=2)
    with pytest.raises(TooManyRows) as exc:
        asyncio.run(service.answer(parse(**COMBINED)))
    assert (
        exc.value.param == "date_range"
        and exc.value.rows >= 3
        and "LAMBDA_API_FILTER_MAX_ROWS" in exc.value.problem
    )


# --- the realtime part bounded before it is fetched (the memory backend) ------------------------------
MARK = f"{NAME}@f1"


@dataclass
class CountingRealtime(MemoryRealtimeStore):
    """The memory backend, recording the budget of every read."""

    budgets: list[FilterRowsBudget | None] = field(default_factory=list)

    async def filter_rows_snapshot(
        self, site: str, days: Any, budget: FilterRowsBudget | None = None
    ) -> FilterRowsSnapshot:
        self.budgets.append(budget)
        return await super().filter_rows_snapshot(site, days, budget)


class Generations(FakeBatch):
    """Several generations, the served one switchable."""

    def __init__(self, *gens: Generation) -> None:
        super().__init__(gens[0])
        self.by_gen = {g.gen: g for g in gens}

    async def generation(self, gen: int) -> Generation:
        return self.by_gen[gen]


def _realtime(gen: int = 3, pageviews: int = 4) -> CountingRealtime:
    """Realtime rows of generation ``gen`` in two streams on two days: 5 rows of the site's DE
    visitor 1, 3 of other visitors."""
    store = CountingRealtime(served=Served(gen, {0: 100}), commit=SpeedCommit(7, {0: 130}))
    store.views[gen] = frozenset({MARK})
    five = [_row(country="DE", visitor=1, pageviews=pageviews, hour=h, day=DAYS[2]) for h in range(5)]
    three = [_row(country="DE", visitor=10 + i, pageviews=1, day=DAYS[1]) for i in range(3)]
    store.append_filter_rows(gen, SITE, DAYS[2].isoformat(), _blob(five))
    store.append_filter_rows(gen, SITE, DAYS[1].isoformat(), _blob(three))
    return store


@pytest.fixture()
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of streams each decode of the service got (a spy on it: the decode is no store)."""
    calls: list[int] = []
    real = service_module.decode_blobs

    def spy(blobs: list[bytes]) -> Any:
        calls.append(len(blobs))
        return real(blobs)

    monkeypatch.setattr(service_module, "decode_blobs", spy)
    return calls


def test_realtime_rows_over_the_row_limit_are_refused_before_they_are_fetched(
    tmp_path: Any, decoded: list[int]
) -> None:
    realtime = _realtime()
    service, _ = _service(tmp_path, realtime, _generation())
    a = asyncio.run(service.answer(parse(**COMBINED)))
    assert [r.metrics for r in a.results] == [(5, 26)]
    assert a.scanned_rows is not None
    batch_rows = a.scanned_rows - 8
    assert batch_rows >= 3 and decoded == [2] and realtime.filter_reads == 1
    # The service's first read asks for the counts alone; the next, for the rows within the limit.
    assert realtime.budgets == [COUNTS_ONLY, FilterRowsBudget(3, 10**7 - batch_rows, 256 * 2**20)]

    for limit in (a.scanned_rows - 1, batch_rows, batch_rows - 1):
        service, _ = _service(tmp_path, realtime, _generation(), max_rows=limit)
        for _ in range(2):  # a service's first query (counts alone) and the next (a budget)
            with pytest.raises(TooManyRows) as exc:
                asyncio.run(service.answer(parse(**COMBINED)))
            assert (exc.value.rows, exc.value.limit) == (a.scanned_rows, limit)
            assert "LAMBDA_API_FILTER_MAX_ROWS" in exc.value.problem
        assert realtime.budgets[-1] == FilterRowsBudget(3, limit - batch_rows, 256 * 2**20)
    assert decoded == [2] and realtime.filter_reads == 1, "nothing fetched nor decoded"

    service, _ = _service(tmp_path, realtime, _generation(), max_rows=a.scanned_rows)
    assert asyncio.run(service.answer(parse(**COMBINED))).results == a.results  # at the limit: read


def test_realtime_rows_over_the_bytes_limit_are_refused_before_they_are_fetched(
    tmp_path: Any, decoded: list[int]
) -> None:
    realtime = _realtime()
    nbytes = sum(b for _, b in realtime.filter_sizes.values())
    assert nbytes > sum(len(b) for blobs in realtime.filter_rows.values() for b in blobs)  # plus decoded
    service, _ = _service(tmp_path, realtime, _generation(), max_realtime_bytes=nbytes - 1)
    for _ in range(2):
        with pytest.raises(TooMuchRealtime) as exc:
            asyncio.run(service.answer(parse(**COMBINED)))
        assert exc.value.ctx == {"bytes": nbytes, "limit": nbytes - 1}
        assert "LAMBDA_API_FILTER_MAX_REALTIME_MB" in exc.value.problem and exc.value.param == "date_range"
    assert decoded == [] and realtime.filter_reads == 0
    service, _ = _service(tmp_path, realtime, _generation(), max_realtime_bytes=nbytes)
    assert [r.metrics for r in asyncio.run(service.answer(parse(**COMBINED))).results] == [(5, 26)]
    assert decoded == [2]


def test_a_read_budgeted_for_a_generation_no_longer_served_is_made_again(tmp_path: Any) -> None:
    realtime = _realtime()
    gen3, gen4 = _generation(), replace(_generation(), gen=4, cut={0: 120})
    service, engine = _service(tmp_path, realtime, gen3)
    engine.batch = Generations(gen3, gen4)
    asyncio.run(service.answer(parse(**COMBINED)))
    asyncio.run(service.answer(parse(**COMBINED)))
    assert [b.gen if b else None for b in realtime.budgets] == [-1, 3, 3]
    # Generation 4 is served now, with other realtime rows: the budget for 3 reads nothing.
    four = _realtime(gen=4, pageviews=1)
    realtime.served = four.served
    realtime.filter_rows, realtime.filter_sizes = four.filter_rows, four.filter_sizes
    realtime.views[4] = frozenset({MARK})
    a = asyncio.run(service.answer(parse(**COMBINED)))
    assert [b.gen if b else None for b in realtime.budgets] == [-1, 3, 3, 3, 4]
    assert a.coverage.generation == 4 and [r.metrics for r in a.results] == [(5, 11)]


def _visit(visitor: int, views: int, duration_ms: int, sign: int = 1, **kw: Any) -> dict[str, Any]:
    """A visit row (views.filter_table.visit_entry), signed as the speed layer writes it."""
    row = _row(visitor=visitor, pageviews=sign * views, page=None)
    row.update(entry_page=f"https://{SITE}/", exit_page=f"https://{SITE}/x")
    row.update(visits=sign, bounces=sign * int(views == 1), duration_ms=sign * duration_ms)
    row.update(kw)
    return row


def test_visit_metrics_under_combined_filters_sum_the_visit_rows_and_their_retractions(tmp_path: Any) -> None:
    """Visit 1 (one view) is in the batch part; a late view merged it into a visit of two views
    (60 s) in the realtime part: its retraction and the new visit. Visitor 2's visit is in DE too,
    visitor 3's in FR. Page views and visitors stay those of the page-view rows; with an entry page
    filter every figure is the visits'."""
    visits = tmp_path / "visits"
    batch = [
        _visit(1, 1, 0, country="DE"),
        _visit(2, 3, 120_000, country="DE", entry_page=f"https://{SITE}/a"),
    ]
    batch += [_visit(3, 1, 0, country="FR")]
    realtime = [_visit(1, 1, 0, sign=-1, country="DE"), _visit(1, 2, 60_000, country="DE")]
    rt = Rows(Served(3, {0: 100}), SpeedCommit(7, {0: 130}), frozenset({f"{NAME}@f1"}), [_blob(realtime)])
    service, _ = _service(tmp_path, FakeRealtime(rt), _generation())
    extra = _write_batch(visits, batch, gen=3)  # a second file of the same day
    files_of = service.files_of
    service.files_of = lambda root, days: [*files_of(root, days), *extra]
    metrics = ["visitors", "pageviews", "visits", "bounce_rate", "visit_duration", "views_per_visit"]
    a = asyncio.run(service.answer(parse(filters=COMBINED["filters"], metrics=metrics)))
    assert a.path == "filter_table"
    # the page-view rows: visitors 1 and 2, 3 page views; visits 1 (2 views, 60 s) and 2 (3, 120 s)
    assert [r.metrics for r in a.results] == [(2, 3, 2, 0.0, 90.0, 2.5)]
    entry = ["is", "visit:entry_page", [f"https://{SITE}/"]]
    a = asyncio.run(service.answer(parse(filters=[*COMBINED["filters"], entry], metrics=metrics)))
    assert [r.metrics for r in a.results] == [(1, 2, 1, 0.0, 60.0, 2.0)]  # visitor 1's visit alone
    per_entry = parse(
        filters=COMBINED["filters"], metrics=["visits", "visitors"], dimensions=["visit:entry_page"]
    )
    a = asyncio.run(service.answer(per_entry))
    assert [(r.dimensions, r.metrics) for r in a.results] == [  # by the visits' page views
        ((f"https://{SITE}/a",), (1, 1)),
        ((f"https://{SITE}/",), (1, 1)),
    ]


def test_visit_metrics_per_page_are_a_422_naming_the_parameter() -> None:
    with pytest.raises(InvalidQuery) as exc:
        parse(filters=COMBINED["filters"], metrics=["visitors", "bounce_rate"], dimensions=["event:page"])
    assert exc.value.param == "dimensions" and "bounce_rate" in exc.value.problem
    with pytest.raises(InvalidQuery) as exc:
        page = [f"https://{SITE}/"]
        parse(filters=[["is", "event:page", page], ["is", "visit:entry_page", page]])
    assert exc.value.param == "filters" and "entry_page" in exc.value.problem


def test_visit_figures_of_a_flagged_day_are_not_exact(tmp_path: Any) -> None:
    """The realtime part flagged a day of the site (a view later than the visit state's horizon):
    the visit metrics say they are not exact and why; page views and visitors stay exact, unless
    the query names an entry page (then every figure is the visits')."""
    flags = frozenset({(SITE, DAYS[1].isoformat())})
    realtime = [_visit(1, 2, 60_000, country="DE")]
    rt = Rows(Served(3, {0: 100}), SpeedCommit(7, {0: 130}), frozenset({f"{NAME}@f1"}), [_blob(realtime)])
    rt = dataclasses.replace(rt, visit_flags=flags)
    service, _ = _service(tmp_path, FakeRealtime(rt), _generation())
    a = asyncio.run(service.answer(parse(filters=COMBINED["filters"], metrics=["pageviews", "visits"])))
    assert a.exact == {"pageviews": True, "visits": False} and DAYS[1].isoformat() in a.notes[0]
    entry = ["is", "visit:entry_page", [f"https://{SITE}/"]]
    a = asyncio.run(service.answer(parse(filters=[*COMBINED["filters"], entry], metrics=["pageviews"])))
    assert a.exact == {"pageviews": False}
    late = parse(filters=COMBINED["filters"], metrics=["visits"], date_range=["2026-11-22", "2026-11-22"])
    assert asyncio.run(service.answer(late)).exact == {"visits": True}  # another day


def test_an_entry_page_alone_is_the_tables_not_the_views(tmp_path: Any) -> None:
    """One `is` of one entry page would be a series of the entry page view, which counts visits
    only (no page views, no visitors): the table answers it, every figure the visits'."""
    service, _ = _service(tmp_path, FakeRealtime(down=True), _generation())
    extra = _write_batch(
        tmp_path / "visits", [_visit(1, 2, 60_000), _visit(2, 1, 0, entry_page=f"https://{SITE}/a")], 3
    )
    files_of = service.files_of
    service.files_of = lambda root, days: [*files_of(root, days), *extra]
    q = parse(
        filters=[["is", "visit:entry_page", [f"https://{SITE}/"]]],
        metrics=["visitors", "pageviews", "visits"],
    )
    a = asyncio.run(service.answer(q))
    assert a.path == "filter_table" and [r.metrics for r in a.results] == [(1, 2, 1)]
