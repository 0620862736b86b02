"""The batch filter table (views.filter_table, stores.parquet.filter_table) on real Kafka,
FerretDB and Redis: every row against a pure-Python recount of the produced events, incremental
runs against a full recompute, its fingerprint, its garbage collection, and its plan."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from batch_layer.job import BatchJob, RunSummary, kept, released, table_rows
from config.settings import Settings
from contract import PageView, site_of
from generations.model import Generation
from stores.mongo.codec import stored_layout
from stores.parquet.filter_table import batch_files, generation_dir, generations
from tests import oracle_filters
from tests.integration.conftest import produce, traffic
from tests.oracle import DIMENSION_KEYS, dedup
from views import all_views, filter_table, get_view, input_columns, shared_pass

Group = tuple[Any, ...]
"""(site, day, hour, every dimension's value) of a row of the table."""


@pytest.fixture
def job(platform: Settings, spark: Any) -> Any:
    j = BatchJob(platform, spark)
    yield j
    j.close()


def expected_table(events: list[PageView]) -> dict[Group, tuple[int, set[str]]]:
    """Per group: page views and the visitor ids, recounted from the events (deduplicated by the
    rule the layers apply), each dimension's value its view's stored key without ``site|``."""
    per_site = {name: get_view(name).per_site for name in filter_table.DIMENSIONS}
    out: dict[Group, tuple[int, set[str]]] = {}
    pv: Counter[Group] = Counter()
    visitors: dict[Group, set[str]] = defaultdict(set)
    for e in dedup(events):
        values = []
        for name in filter_table.DIMENSIONS:
            key = DIMENSION_KEYS[name](e)
            values.append(key.split("|", 1)[1] if per_site[name] else key)
        group = (site_of(e.url), e.ts.strftime("%Y-%m-%d"), e.ts.hour, *values)
        pv[group] += 1
        visitors[group].add(e.visitor_id)
    for group, n in pv.items():
        out[group] = (n, visitors[group])
    return out


def stored_rows(settings: Settings, gen: Generation) -> list[tuple[Any, ...]]:
    """Every row of the table as ``gen`` serves it (its day map's ``filters`` entry), read with
    pyarrow from the files stores.parquet.filter_table lists, the day from the file's directory;
    each file's rows are checked to be in the declared order."""
    schema = filter_table.arrow_schema()
    columns = [c for c in filter_table.COLUMNS if c != filter_table.DAY]
    rows = []
    for path in batch_files(settings.filter_table_uri, gen.day_map[filter_table.NAME]):
        day = re.search(r"/day=(\d{4}-\d{2}-\d{2})/", path)
        assert day is not None and Path(path).parent.parent.name.startswith("gen=")
        table = pq.ParquetFile(path).read()  # not read_table: it would add gen and day from the path
        assert table.column_names == columns, path
        for name in columns:
            assert table.schema.field(name).type == schema.field(name).type, (path, name)
        assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression in ("ZSTD", "SNAPPY")
        data = table.to_pydict()
        file_rows = [
            tuple(data[c][i] if c != filter_table.DAY else day.group(1) for c in filter_table.COLUMNS)
            for i in range(table.num_rows)
        ]
        order = [COLUMN_INDEX[c] for c in filter_table.SORT]
        keys = [tuple((r[i] is not None, r[i]) for i in order) for r in file_rows]  # Spark: nulls first
        assert keys == sorted(keys), f"{path} is not sorted by {filter_table.SORT}"
        rows += file_rows
    return rows


COLUMN_INDEX = {c: i for i, c in enumerate(filter_table.COLUMNS)}


def assert_matches_recount(rows: list[tuple[Any, ...]], events: list[PageView]) -> None:
    """Each (group, visitor) once; per group, the page views and the number of distinct visitor
    hashes equal the recount's page views and distinct visitor ids."""
    assert_visits_match_recount(rows, events)
    visitor, pageviews = COLUMN_INDEX[filter_table.VISITOR], COLUMN_INDEX[filter_table.PAGEVIEWS]
    visits = COLUMN_INDEX[filter_table.VISITS]
    pv: Counter[Group] = Counter()
    hashes: dict[Group, set[int]] = defaultdict(set)
    seen: set[tuple[Any, ...]] = set()
    for r in rows:
        if r[visits] is not None:
            continue  # a visit row
        assert all(
            r[COLUMN_INDEX[c]] is None for c in (*filter_table.VISIT_PAGES, *filter_table.VISIT_COLUMNS)
        )
        group = r[: COLUMN_INDEX[filter_table.VISIT_PAGES[0]]]
        assert (group, r[visitor]) not in seen, f"two rows of {group} for one visitor"
        seen.add((group, r[visitor]))
        assert r[pageviews] > 0
        pv[group] += r[pageviews]
        hashes[group].add(r[visitor])
    expected = expected_table(events)
    only_stored, only_recounted = sorted(set(pv) - set(expected)), sorted(set(expected) - set(pv))
    assert not only_stored and not only_recounted, (only_stored[:3], only_recounted[:3])
    for group, (n, ids) in expected.items():
        assert pv[group] == n, group
        assert len(hashes[group]) == len(ids), group


def assert_visits_match_recount(rows: list[tuple[Any, ...]], events: list[PageView]) -> None:
    """The visit rows: per (site, day, hour, first view's values, entry and exit page), the visits,
    bounces, duration and page views of the reference sessioniser's visits (tests.oracle_visits),
    and their visitors; every visit row has no page."""
    at = COLUMN_INDEX
    names = (*filter_table.DIMENSIONS[1:], *filter_table.VISIT_PAGES)
    stored: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    hashes: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    for r in rows:
        if r[at[filter_table.VISITS]] is None:
            continue
        assert r[at["page"]] is None and r[at[filter_table.VISITS]] > 0
        group = (r[at["site"]], r[at["day"]], r[at["hour"]], *(r[at[n]] for n in names))
        sums = stored[group]
        for i, c in enumerate((filter_table.VISITS, filter_table.BOUNCES, filter_table.DURATION_MS)):
            sums[i] += r[at[c]]
        sums[3] += r[at[filter_table.PAGEVIEWS]]
        hashes[group].add(r[at[filter_table.VISITOR]])
    expected: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    who: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    for v in oracle_filters.visit_rows(dedup(events)):
        group = (v.site, v.day, v.hour, *(v.values[n] for n in names))
        sums = expected[group]
        sums[0], sums[1], sums[2], sums[3] = (
            sums[0] + 1,
            sums[1] + v.bounced,
            sums[2] + v.duration_ms,
            sums[3] + v.views,
        )
        who[group].add(v.visitor)
    assert dict(stored) == dict(expected)
    assert {g: len(h) for g, h in hashes.items()} == {g: len(w) for g, w in who.items()}


def served(job: BatchJob) -> Generation:
    gen = job.registry.served()
    assert gen is not None
    return gen


def days_of(events: list[PageView]) -> set[str]:
    return {e.ts.strftime("%Y-%m-%d") for e in events}


def test_the_table_matches_the_recount_and_an_incremental_run_equals_a_full_recompute(
    platform: Settings, job: BatchJob
) -> None:
    events = produce(platform, traffic(seed=41, total=6_000, span_hours=30))
    first = job.run()
    all_days = sorted(days_of(events))
    assert first.filter_table["days_recomputed"] == len(all_days) and first.filter_table["files"] > 0
    g1 = served(job)
    assert g1.fingerprints[filter_table.NAME] == filter_table.fingerprint(stored_layout())
    assert g1.day_map[filter_table.NAME] == dict.fromkeys(all_days, g1.gen)
    assert filter_table.NAME not in g1.views  # a table, not a view: the API does not list it
    assert_matches_recount(stored_rows(platform, g1), events)

    # New traffic, partly late: an incremental run rewrites the days it touches only.
    new_events = produce(platform, traffic(seed=42, total=1_500, span_hours=2.0, late_fraction=0.2))
    events += new_events
    incremental = job.run()
    new_days = days_of(new_events)
    assert incremental.filter_table["days_recomputed"] == len(new_days) < len(days_of(events))
    g2 = served(job)
    assert g2.day_map[filter_table.NAME] == {d: g2.gen if d in new_days else g1.gen for d in days_of(events)}
    after_incremental = stored_rows(platform, g2)
    assert_matches_recount(after_incremental, events)

    full = job.run(full=True)
    g3 = served(job)
    assert full.filter_table["days_recomputed"] == len(days_of(events))
    assert set(g3.day_map[filter_table.NAME].values()) == {g3.gen}
    assert Counter(stored_rows(platform, g3)) == Counter(after_incremental)


def test_a_changed_fingerprint_recomputes_every_day_of_the_table_and_no_view(
    platform: Settings, job: BatchJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = produce(platform, traffic(seed=43, total=3_000, span_hours=30))
    job.run()
    days = len(days_of(events))
    again = job.run()
    assert again.filter_table == {} and sum(again.view_days_recomputed.values()) == 0

    monkeypatch.setattr(filter_table, "fingerprint", lambda layout: "changed")
    changed = job.run()
    assert changed.filter_table["days_recomputed"] == days
    assert sum(changed.view_days_recomputed.values()) == 0  # the views are reused as they are
    gen = served(job)
    assert gen.fingerprints[filter_table.NAME] == "changed"
    assert set(gen.day_map[filter_table.NAME].values()) == {gen.gen}
    assert_matches_recount(stored_rows(platform, gen), events)

    # A view whose code changed recomputes every day of its own, with the table's days untouched.
    more = produce(platform, traffic(seed=44, total=500, span_hours=1.0))
    events += more
    ok = job.run()
    assert ok.filter_table["days_recomputed"] == len(days_of(more))
    assert_matches_recount(stored_rows(platform, served(job)), events)


def test_turned_off_the_table_is_neither_written_nor_named(platform: Settings, spark: Any) -> None:
    off = platform.model_copy(update={"filter_table": False})
    produce(off, traffic(seed=45, total=1_000, span_hours=6))
    job = BatchJob(off, spark)
    try:
        summary = job.run()
        gen = served(job)
    finally:
        job.close()
    assert summary.filter_table == {}
    assert filter_table.NAME not in gen.day_map and filter_table.NAME not in gen.fingerprints
    assert generations(off.filter_table_uri) == []


def test_garbage_collection_deletes_a_retired_generation_after_the_grace_period_never_a_referenced_one(
    platform: Settings, job: BatchJob
) -> None:
    """Incremental runs reuse older generations' days: a retired generation's directory stays as
    long as a retained generation's day map names it, and once none does, goes only after the
    grace period."""
    produce(platform, traffic(seed=46, total=2_000, span_hours=30))
    job.run()  # 1: every day
    for seed in (47, 48):  # 2, 3: the newest day(s) only; 1 is retired after 3 but still referenced
        produce(platform, traffic(seed=seed, total=300, span_hours=0.5))
        summary = job.run()
    assert summary.retired == [1]
    gen3 = served(job)
    assert 1 in gen3.day_map[filter_table.NAME].values()
    assert generations(platform.filter_table_uri) == [1, 2, 3]

    job.settings = job.settings.model_copy(update={"retire_grace_s": 3600.0})
    job.run(full=True)  # 4: 2 retired, 3 (referencing 1 and 2) retained
    job.run(full=True)  # 5: 3 retired; nothing retained references 1, 2 or 3, but 2 and 3 are in their grace
    assert generations(platform.filter_table_uri) == [2, 3, 4, 5]
    assert not generation_dir(platform.filter_table_uri, 1).exists()

    job.settings = job.settings.model_copy(update={"retire_grace_s": 0.0})
    last: RunSummary = job.run(full=True)  # 6: 4 retired; the grace is over for 2, 3 and 4
    assert generations(platform.filter_table_uri) == [5, 6]
    assert str(generation_dir(platform.filter_table_uri, 4)) in last.dropped_filter_table
    gen = served(job)
    assert batch_files(platform.filter_table_uri, gen.day_map[filter_table.NAME])


def test_the_table_adds_no_exchange_to_the_shared_pass(platform: Settings, job: BatchJob, spark: Any) -> None:
    """The table's aggregation is satisfied by the events moved by visitor: its plan has the
    exchanges of the moved events (the one shuffle, by visitor, and the shared pass's own small
    ones) and no other. Over the moved events kept for both writes (batch_layer.job.kept), neither
    the table nor the views' pass exchanges the events again."""
    produce(platform, traffic(seed=49, total=500, span_hours=4))
    job.run()
    events = job.master.read(spark)
    views = all_views()
    keyed = shared_pass.keyed_events(events.select(*input_columns(views, spark)), views, ())
    moved = shared_pass.partitioned(keyed, single_partition=False)
    days = job.master.days()
    rows = table_rows(moved, views, days[-1:], days).sortWithinPartitions(
        filter_table.DAY, *filter_table.SORT
    )

    def exchanges(df: Any) -> list[tuple[str, str]]:
        """(kind, first column) of each exchange above the scan of kept events, if any."""
        plan = str(df._jdf.queryExecution().executedPlan().toString()).partition("InMemoryTableScan")[0]
        return [(k, c.split("#")[0]) for k, c in re.findall(r"(?<!Broadcast)Exchange (\w+)\(([^,]+)", plan)]

    assert ("hashpartitioning", "visitor_id") in exchanges(rows)
    assert len(exchanges(rows)) == len(exchanges(moved))
    persisted = kept(moved, "MEMORY_AND_DISK")
    try:
        assert exchanges(table_rows(persisted, views, days, days)) == []
        view_rows = shared_pass.aggregate(shared_pass.count_per_visitor(persisted, views, ()), views, (), 12)
        # The aggregation's own exchanges of per-visitor counts, by view; no event moves again.
        assert {c for _, c in exchanges(view_rows)} == {"v"}
        assert persisted.count() == moved.count()
    finally:
        released(persisted)
