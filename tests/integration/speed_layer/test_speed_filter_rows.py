"""The filter table's realtime rows (speed_layer.filter_rows) on real Kafka, Redis and FerretDB: the
rows the reader decodes for the served generation hold exactly the events whose first copy is past
its cut, per (site, day, hour, every dimension's value): page views summed, visitors distinct; the
counts beside the lists are exactly their rows; a replayed micro-batch adds none, rows or counts."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import redis

from batch_layer.job import BatchJob
from config.settings import Settings
from contract import encode, site_of
from speed_layer.job import SpeedJob
from stores.mongo.codec import stored_layout
from stores.redis import keys
from stores.redis.filter_rows import decode_blobs
from stores.redis.reader import RedisRealtimeReader, connect
from tests import oracle_filters
from tests.integration.conftest import produce
from tests.integration.filters_check import assert_counts_match_lists
from tests.integration.speed_layer.test_speed_layer import live, served_cut
from tests.oracle import DIMENSION_KEYS, LogRecord, first_copies, read_log
from views import filter_table
from views.registry import get_view

Cell = tuple[Any, ...]
"""(site, day, hour, value of each of the table's dimensions)."""


def oracle(log: Iterable[LogRecord], cut: dict[int, int]) -> dict[Cell, tuple[int, int]]:
    """Per cell, the page views and distinct visitors of the events whose first copy is at or past
    ``cut``, each dimension's value its view's key without a per-site key's ``site|``."""
    per_site = {name: get_view(name).per_site for name in filter_table.DIMENSIONS}
    cells: dict[Cell, tuple[int, set[str]]] = {}
    for r in first_copies(log):
        e = r.event
        if e is None or r.offset < cut.get(r.partition, 0):
            continue
        site = site_of(e.url)
        values = []
        for name in filter_table.DIMENSIONS:
            key = DIMENSION_KEYS[name](e)
            if per_site[name]:
                assert key.startswith(f"{site}|"), key
                key = key[len(site) + 1 :]
            values.append(key)
        cell = (site, e.ts.strftime("%Y-%m-%d"), e.ts.hour, *values)
        pv, visitors = cells.get(cell, (0, set()))
        visitors.add(e.visitor_id)
        cells[cell] = (pv + 1, visitors)
    return {cell: (pv, len(visitors)) for cell, (pv, visitors) in cells.items()}


VISIT_GROUP = (*filter_table.DIMENSIONS[1:], *filter_table.VISIT_PAGES)


def assert_visit_rows_are_the_difference(
    rows: list[dict[str, Any]], log: Iterable[LogRecord], cut: dict[int, int]
) -> None:
    """The realtime visit rows, summed per (site, day, hour, first view's values, entry and exit
    page), are the visits of every first copy minus the visits of those below the cut (which the
    batch part holds), by the reference sessioniser: retractions included, nothing else."""
    stored: dict[Cell, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for row in rows:
        cell = (row["site"], row["day"].isoformat(), row["hour"], *(row[n] for n in VISIT_GROUP))
        sums = stored[cell]
        for i, c in enumerate((filter_table.VISITS, filter_table.BOUNCES, filter_table.DURATION_MS)):
            sums[i] += row[c]
        sums[3] += row[filter_table.PAGEVIEWS]
    copies = [r for r in first_copies(log) if r.event is not None]
    below = [r.event for r in copies if r.offset < cut.get(r.partition, 0) and r.event is not None]
    expected: dict[Cell, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for sign, events in ((1, [r.event for r in copies if r.event is not None]), (-1, below)):
        for v in oracle_filters.visit_rows(events):
            sums = expected[(v.site, v.day, v.hour, *(v.values[n] for n in VISIT_GROUP))]
            for i, value in enumerate((1, int(v.bounced), v.duration_ms, v.views)):
                sums[i] += sign * value

    def nonzero(cells: dict[Cell, list[int]]) -> dict[Cell, list[int]]:
        return {c: s for c, s in cells.items() if any(s)}

    assert nonzero(stored) == nonzero(expected)
    split = {v.views for v in oracle_filters.sessionise(below)} - {
        v.views for v in oracle_filters.sessionise([r.event for r in copies if r.event is not None])
    }
    assert split, "no visit of the batch part grew past the cut: nothing to retract"
    assert any(row[filter_table.VISITS] <= 0 for row in rows), "no retraction among the realtime rows"


def stored_lists(settings: Settings, gen: int) -> dict[tuple[str, str], list[bytes]]:
    """(site, day) -> the elements of generation ``gen``'s lists, read straight from Redis."""
    r = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)
    try:
        prefix = keys.generation_prefix(gen) + keys.FILTERS_SUFFIX
        out: dict[tuple[str, str], list[bytes]] = {}
        for key in r.scan_iter(match=prefix + "*", count=1000):
            day, site = key.decode().removeprefix(prefix).split("|", 1)
            out[(site, day)] = [bytes(blob) for blob in r.lrange(key, 0, -1)]
        return out
    finally:
        r.close()


def read_cells(
    settings: Settings, gen: int, wanted: set[tuple[str, str]], visit_rows: list[dict[str, Any]]
) -> dict[Cell, tuple[int, int]]:
    """The cells of the page-view rows the reader returns for every site and its days, checking
    each snapshot names the served generation counted with the filter table; the visit rows are
    appended to ``visit_rows``."""
    days_of: dict[str, list[str]] = defaultdict(list)
    for site, day in sorted(wanted):
        days_of[site].append(day)

    async def read() -> list[Any]:
        client = connect(settings)
        reader = RedisRealtimeReader(client)
        try:
            tables = []
            for site, days in days_of.items():
                snap = await reader.filter_rows_snapshot(site, days)
                assert snap.served is not None and snap.served.gen == gen
                assert snap.views is not None and filter_table.mark(stored_layout()) in snap.views
                table = decode_blobs(snap.blobs)
                assert set(table.column(filter_table.SITE).to_pylist()) == {site}
                tables.append(table)
            return tables
        finally:
            await client.aclose()

    cells: dict[Cell, tuple[int, set[int]]] = {}
    for table in asyncio.run(read()):
        for row in table.to_pylist():
            if row[filter_table.VISITS] is not None:
                visit_rows.append(row)
                continue
            cell = (
                row["site"],
                row["day"].isoformat(),
                row["hour"],
                *(row[name] for name in filter_table.DIMENSIONS),
            )
            pv, visitors = cells.get(cell, (0, set()))
            visitors.add(row["visitor"])
            cells[cell] = (pv + row["pageviews"], visitors)
    return {cell: (pv, len(visitors)) for cell, (pv, visitors) in cells.items()}


def forget_last_commit(settings: Settings) -> int:
    """Remove the checkpoint's record that the last micro-batch completed: the next start runs it
    again (a crash after the Redis commit and before Spark's). Returns its batch id."""
    commits = Path(settings.speed_checkpoint_uri.removeprefix("file://")) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_realtime_filter_rows_hold_exactly_the_events_past_the_cut(platform: Settings, spark: Any) -> None:
    first = produce(platform, live(seed=31, total=2_000))
    batch = BatchJob(platform, spark)
    try:
        gen = batch.run().gen
    finally:
        batch.close()
    produce(platform, live(seed=32, total=2_000))
    produce(platform, [encode(e) for e in first[:300]])  # re-sends of events the batch part holds
    # Small micro-batches on the shuffled path first, then the single-task path of small ones.
    shuffled = {"speed_single_partition_rows": 0, "speed_max_offsets_per_trigger": 1_500}
    SpeedJob(platform.model_copy(update=shuffled), spark).run(available_now=True)
    produce(platform, live(seed=33, total=1_500))
    SpeedJob(platform, spark).run(available_now=True)

    served, cut = served_cut(platform)
    assert served == gen and cut
    expected = oracle(read_log(platform.kafka_bootstrap, platform.events_topic), cut)
    lists = stored_lists(platform, gen)
    assert set(lists) == {(cell[0], cell[1]) for cell in expected}
    assert max(len(elements) for elements in lists.values()) >= 3, "one micro-batch each"
    visit_rows: list[dict[str, Any]] = []
    got = read_cells(platform, gen, set(lists), visit_rows)
    assert got == expected
    assert_visit_rows_are_the_difference(
        visit_rows, read_log(platform.kafka_bootstrap, platform.events_topic), cut
    )
    # The counts beside the lists (a hash per site, incremented in the same commits) are theirs.
    r = redis.Redis(host=platform.redis_host, port=platform.redis_port, db=platform.redis_db)
    rows = assert_counts_match_lists(r)
    assert rows >= len(expected)  # a row per cell and micro-batch at least

    # A micro-batch run again after its commit (Spark lost its own record of it) adds no rows.
    replayed = forget_last_commit(platform)
    job = SpeedJob(platform, spark)
    job.run(available_now=True)
    assert job.last is not None and job.last.batch_id == replayed and job.last.skipped
    assert stored_lists(platform, gen) == lists
    assert assert_counts_match_lists(r) == rows  # nor counts any
    r.close()
