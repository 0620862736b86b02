"""Batch + realtime = reference for visits: a generated log fed to the speed layer's micro-batch
code in several micro-batches, in arrival order (some views late), against the pure-Python
sessioniser (tests/oracle_visits.py).

What runs is the speed layer's own Spark work for a micro-batch (``speed_layer.outputs.rows``: the
shared pass with the visits' changes made in the scan by the JVM's visit state of each partition,
``speed_layer.visits``) and its own bookkeeping (``RealtimeRows.visit_flags``,
``visits.state_sink``), with two
stand-ins so that no service is needed:

- Kafka: each record gets a partition (by visitor, as the platform's producers key it), an offset
  and a log-append time; a copy of an event is a record the dedup marks, as the scan's dedup marks
  later copies (the rule of contract.duplicates for exact copies: tests.oracle.dedup), so it
  reaches the visit state uncounted, as in the scan;
- Redis: a dict-backed client with the few commands the bookkeeping uses.

Each example picks the active generations (1 with its cut at the log start, 2 with a drawn cut
per partition) and where the stream starts: at the log start, or at generation 2's cut with the
states seeded from the events below it (speed_layer.visit_rebuild's own function, as a rebuild
seeds them from the master dataset). The batch part of generation ``g`` is the reference over the
events below its cut (tests/unit/views/test_visits_batch_property.py holds the batch views to that
reference), so for every ``g``: reference(below g's cut) + realtime(g) must equal reference(all
events), in every bucket and hour. Views within the horizon and visitors on one partition: no
bucket may be flagged. A second property shortens the horizon and lets log-append times follow
event time, so that late views fall behind it: every bucket whose (site, day) is not flagged must
still be exact (never silently wrong). Some examples evaluate a micro-batch twice (as a commit
that finds a new generation does) or lose the states before one (a restart): the answers must
not change.

Each micro-batch is a few Spark jobs, so the tests draw few examples; LAMBDA_VISIT_SPEED_EXAMPLES
sets more for a deeper run.
"""

from __future__ import annotations

import os
import uuid
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.settings import get_settings
from contract import PageView, site_of
from generations.model import Offsets
from speed_layer import current_visitors, visit_rebuild, visits
from speed_layer.micro_batch import MicroBatch
from speed_layer.outputs import COUNTED, TAGS, Materialised, Outputs, RealtimeRows, rows
from stores.realtime_hash import realtime_write
from stores.redis import visit_state
from tests.oracle_visits import (
    VisitRecount,
    combine,
    compare_recounts,
    describe,
    sessionise,
    sum_rows,
    visit_recount,
)
from tests.visit_strategies import MIDNIGHT, VisitLog, visit_log_sets
from views import all_views

GAP_S = get_settings().session_gap_s
LOG_TIME0_MS = int((MIDNIGHT.timestamp() + 3600) * 1000)
"""Log-append times start an hour after the midnight the generated views lie around: every view is
well within the default horizon (12 h behind the newest record), none is flagged."""
PARTITIONS = 2
EXAMPLES = int(os.environ.get("LAMBDA_VISIT_SPEED_EXAMPLES", "0"))
"""Examples per test for a deeper run (each micro-batch is a few Spark jobs: few by default)."""


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    event: PageView
    log_time_ms: int


def records_of(log: VisitLog, follow_event_time: bool = False) -> list[Record]:
    """The log's events as Kafka records in arrival order, a visitor's views on one partition.

    Log-append times are a second apart from LOG_TIME0_MS, or with ``follow_event_time`` a minute
    after the newest event time so far (a late view is then as far behind the watermark as it is
    behind the newest view)."""
    offsets = [0] * PARTITIONS
    out = []
    newest_ms = 0
    for i, e in enumerate(log.events):
        p = zlib.crc32(e.visitor_id.encode()) % PARTITIONS
        newest_ms = max(newest_ms, int(e.ts.timestamp() * 1000))
        log_time_ms = newest_ms + 60_000 if follow_event_time else LOG_TIME0_MS + 1000 * i
        out.append(Record(p, offsets[p], e, log_time_ms))
        offsets[p] += 1
    return out


def first_copies(records: list[Record]) -> list[Record]:
    """The records the dedup keeps: the first copy of each (day, event_id), as tests.oracle.dedup
    keeps the first event."""
    seen: set[tuple[str, str]] = set()
    out = []
    for r in records:
        ident = (r.event.ts.strftime("%Y-%m-%d"), r.event.event_id)
        if ident not in seen:
            seen.add(ident)
            out.append(r)
    return out


def below(records: Iterable[Record], cut: Offsets) -> list[Record]:
    return [r for r in records if r.offset < cut.get(r.partition, 0)]


# --- Redis stand-in --------------------------------------------------------------------------------


@dataclass
class FakeRedis:
    """The commands the visit bookkeeping uses (stores.redis.visit_state), on dicts; its pipeline
    is itself (the commit's transaction applies at once)."""

    sets: dict[str, set[str]] = field(default_factory=dict)
    hashes: dict[str, dict[str, str]] = field(default_factory=dict)

    def scan_iter(self, match: str, count: int = 0) -> list[str]:
        return []

    def sadd(self, key: str, *members: str) -> None:
        self.sets.setdefault(key, set()).update(members)

    def hset(
        self, key: str, name: str | None = None, value: Any = None, mapping: dict[str, Any] | None = None
    ) -> None:
        h = self.hashes.setdefault(key, {})
        if name is not None:
            h[name] = str(value)
        for k, v in (mapping or {}).items():
            h[k] = str(v)

    def hgetall(self, key: str) -> dict[str, str]:
        return dict(self.hashes.get(key, {}))

    @contextmanager
    def pipeline(self, transaction: bool = True) -> Iterator[FakeRedis]:
        yield self

    def execute(self) -> list[Any]:
        return []


# --- the speed layer, driven -----------------------------------------------------------------------


EVENT_COLUMNS = (
    "event_id string, ts timestamp, visitor_id string, url string, referrer string, "
    "user_agent string, country string, kafka_partition int, kafka_offset long"
)


def _event_row(r: Record) -> tuple[Any, ...]:
    e = r.event
    return (e.event_id, e.ts, e.visitor_id, e.url, e.referrer, e.user_agent, e.country, r.partition, r.offset)


def _dataframe(spark: Any, records: list[Record], active: dict[int, Offsets], counted: set[int]) -> Any:
    """The micro-batch's records as the job tags them, in the scan's order (one Spark partition
    per Kafka partition, in offset order): contract columns, the Kafka partition and offset,
    ``_counted`` (not a copy the dedup marks) and ``_tags``, the active generations whose cut the
    record is at or past."""
    frames = []
    for p in sorted({r.partition for r in records}):
        rows = [
            (
                *_event_row(r),
                id(r) in counted,
                [g for g, cut in sorted(active.items()) if r.offset >= cut.get(r.partition, 0)],
            )
            for r in sorted(records, key=lambda r: r.offset)
            if r.partition == p
        ]
        frames.append(
            spark.createDataFrame(rows, f"{EVENT_COLUMNS}, {COUNTED} boolean, {TAGS} array<int>").coalesce(1)
        )
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out.withColumn(current_visitors.MINUTE, current_visitors.minute_column())


@dataclass
class SpeedRun:
    """The speed layer's states and realtime rows across the micro-batches of one run."""

    spark: Any
    active: dict[int, Offsets]
    single_partition: bool
    redis: FakeRedis = field(default_factory=FakeRedis)
    realtime: dict[int, list[Any]] = field(default_factory=dict)
    flags: list[tuple[int, str, str]] = field(default_factory=list)
    lateness_s: int | None = None
    """The state's horizon (visit_lateness_s) when not the settings'."""
    namespace: str = field(default_factory=lambda: f"test-visits-{uuid.uuid4()}")
    positions: dict[int, int] = field(default_factory=dict)
    """Each partition's offset the states stand at."""
    seeded: Any = None
    """The seed the next micro-batch's states start from where they are missing."""

    def job(self) -> Any:
        dims = all_views()
        s = get_settings()
        if self.lateness_s is not None:
            s = s.model_copy(update={"visit_lateness_s": self.lateness_s})
        return SimpleNamespace(
            settings=s,
            dimensions=dims,
            input_columns=("country", "event_id", "referrer", "ts", "url", "user_agent", "visitor_id"),
            redis=self.redis,
            visits=visits.ScanVisits(self.spark, self.namespace),
        )

    def seed(self, records: list[Record], start: Offsets) -> None:
        """The states at ``start`` after ``records`` (the counted page views below it, which a
        rebuild reads from the master dataset) and the bookkeeping of a fresh start."""
        job = self.job()
        self.positions = {p: start.get(p, 0) for p in range(PARTITIONS)}
        if not records:
            visit_state.clear(self.redis, visits.dimensions_mark(job.dimensions))
            dropped = visit_state.NEVER
        else:
            watermark_ms = max(r.log_time_ms for r in records)
            horizon = visits.Horizon(watermark_ms, visit_state.NEVER, job.settings.visit_lateness_s, GAP_S)
            dropped = horizon.drop_before_us
            visit_state.clear(self.redis, visits.dimensions_mark(job.dimensions), watermark_ms, dropped)
        self.seeded = self._seed(job, records, dropped)

    def _seed(self, job: Any, records: list[Record], dropped_before_us: int) -> Any:
        seed = job.visits.seed(self.positions)
        if records:
            df = self.spark.createDataFrame([_event_row(r) for r in records], EVENT_COLUMNS)
            found = visit_rebuild.seed_visits(df, job.dimensions, job.input_columns, GAP_S, dropped_before_us)
            seed.add(found._jdf.toLocalIterator())
        return seed

    def lose_states(self, counted_below: list[Record]) -> None:
        """A restart: the states are gone, and the next micro-batch starts from a rebuild's seed
        (every counted page view below the states' offsets is in the master dataset)."""
        job = self.job()
        job.visits.forget()
        meta = visit_state.read_meta(self.redis)
        self.seeded = self._seed(job, counted_below, meta.dropped_before_us)

    def micro_batch(self, records: list[Record], counted: set[int], evaluate_twice: bool) -> None:
        """One micro-batch of ``records`` (the dedup counts those in ``counted``), committed to the
        bookkeeping and the realtime rows."""
        batch = MicroBatch.__new__(MicroBatch)
        batch.context = self.job()
        batch.report = SimpleNamespace(phases={})  # type: ignore[assignment]
        batch.visit_meta = visit_state.read_meta(self.redis)
        starts = dict(self.positions)
        ends = dict(starts)
        for r in records:
            ends[r.partition] = max(ends[r.partition], r.offset + 1)
        batch.starts, batch.ends = starts, ends
        batch._visit_seed = self.seeded
        made = Outputs(batch.context.settings, batch.context.dimensions, False)

        def evaluate() -> RealtimeRows:
            materialise = Materialised({})
            try:
                tagged = _dataframe(self.spark, records, self.active, counted)
                return rows(made, tagged, batch._visits(), self.single_partition, materialise, self.active)
            finally:
                materialise.release()

        made_rows = evaluate()
        if evaluate_twice:  # a commit that found a new generation computes the rows again
            again = evaluate()
            for a, b in ((again.views, made_rows.views), (again.visit_flags, made_rows.visit_flags)):
                assert sorted(map(repr, a)) == sorted(map(repr, b)), "a range evaluated twice changed"
        self.seeded = None
        self.positions = ends
        made_rows.visit_progress = batch._visit_progress(max(r.log_time_ms for r in records))
        for row in made_rows.views:
            realtime_write(row)  # what the sink writes of it: every row must be writable
            self.realtime.setdefault(int(row["gen"]), []).append(row)
        self.flags += made_rows.visit_flags
        sink = visits.state_sink(made_rows.visit_flags, made_rows.visit_progress)
        assert sink is not None
        sink.flush(self.redis)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[VisitLog, dict[int, Offsets], bool, list[int], bool]:
    """(log, active generations, whether the stream starts at generation 2's cut, micro-batch
    boundaries as positions in the stream's arrival order, single-partition pass). A boundary
    drawn negative evaluates the micro-batch after it twice; one drawn twice (or its negative
    too) loses the states before it."""
    log = draw(visit_log_sets(max_logs=3, gap_us=GAP_S * 1_000_000))
    counts = [0] * PARTITIONS
    for r in records_of(log):
        counts[r.partition] += 1
    cut = {p: draw(st.integers(0, n)) for p, n in enumerate(counts)}
    kind = draw(
        st.sampled_from(["both from the log start", "only 2 from the log start", "only 2 from its cut"])
    )
    active = {1: {}, 2: cut} if kind == "both from the log start" else {2: cut}
    n = len(log.events)
    boundaries = draw(st.lists(st.integers(1, n) | st.integers(-n, -1), min_size=1, max_size=3))
    return log, active, kind == "only 2 from its cut", boundaries, draw(st.booleans())


@settings(
    # Each micro-batch is 7-12 Spark jobs (seconds): few examples by default, more for a deeper run.
    max_examples=EXAMPLES or 1,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(scenario=scenarios())
def test_batch_plus_realtime_visits_equal_the_reference(
    spark: Any, scenario: tuple[VisitLog, dict[int, Offsets], bool, list[int], bool]
) -> None:
    log, active, from_cut, boundaries, single = scenario
    run, kept, context = _run(spark, log, active, from_cut, boundaries, single, records_of(log))
    expected = visit_recount((r.event for r in kept), GAP_S)
    assert not run.flags, f"flagged {run.flags}\n{context}"
    for gen, cut in active.items():
        batch_part = visit_recount((r.event for r in below(kept, cut)), GAP_S)
        realtime = sum_rows(run.realtime.get(gen, []))
        problems = compare_recounts(expected, combine(batch_part, realtime))
        assert not problems, (
            f"generation {gen} (cut {cut}): batch + realtime != reference:\n"
            + "\n".join(problems[:40])
            + f"\n{context}"
        )


def _run(
    spark: Any,
    log: VisitLog,
    active: dict[int, Offsets],
    from_cut: bool,
    boundaries: list[int],
    single: bool,
    records: list[Record],
    lateness_s: int | None = None,
) -> tuple[SpeedRun, list[Record], str]:
    """The speed layer over ``records`` (seeded and cut into micro-batches as the scenario says):
    the run, the records the dedup keeps, and a description for a failure."""
    kept = first_copies(records)
    run = SpeedRun(spark, active, single, lateness_s=lateness_s)
    start = active[2] if from_cut else {}
    run.seed(below(kept, start), start)
    stream = [r for r in records if r.offset >= start.get(r.partition, 0)]
    counted = {id(r) for r in kept}
    marks = [abs(b) for b in boundaries]
    twice = {min(abs(b), len(stream)) for b in boundaries if b < 0}
    lost = {min(b, len(stream)) for b in marks if marks.count(b) > 1}
    points = [0, *sorted({min(b, len(stream)) for b in marks}), len(stream)]
    for a, b in pairwise(points):
        if b > a:
            if a in lost:
                run.lose_states(below(kept, run.positions))
            run.micro_batch(stream[a:b], counted, evaluate_twice=a in twice)
    context = (
        f"active {active}, stream from {start or 'the log start'}, micro-batches at {points[1:-1]} "
        f"(evaluated twice after {sorted(twice)}, states lost before {sorted(lost)}), "
        f"single_partition={single}, lateness {lateness_s}\nlog:\n{log}\n\n"
        f"reference visits:\n{describe(sessionise((r.event for r in kept), GAP_S))}"
    )
    return run, kept, context


def _unflagged(recount: VisitRecount, flagged: set[tuple[str, str]]) -> VisitRecount:
    """The buckets whose (site, day) is not flagged (a key's site: the site itself, the part before
    ``|`` of a per-site key, the host of an entry or exit page)."""

    def site(view: str, key: str) -> str:
        return site_of(key) if view in ("entry_page", "exit_page") else key.split("|", 1)[0]

    return {
        view: {(k, d): b for (k, d), b in buckets.items() if (site(view, k), d) not in flagged}
        for view, buckets in recount.items()
    }


@settings(
    max_examples=EXAMPLES or 1,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(scenario=scenarios(), lateness_s=st.sampled_from([0, 600, 1800, 3600]))
def test_realtime_visits_are_exact_wherever_they_are_not_flagged(
    spark: Any, scenario: tuple[VisitLog, dict[int, Offsets], bool, list[int], bool], lateness_s: int
) -> None:
    """With a short horizon and log-append times that follow event time, late views fall behind
    the state's horizon: the (site, day) of their visits is flagged, and every bucket that is not
    flagged is still exact (never silently wrong)."""
    log, active, from_cut, boundaries, single = scenario
    records = records_of(log, follow_event_time=True)
    run, kept, context = _run(spark, log, active, from_cut, boundaries, single, records, lateness_s)
    expected = visit_recount((r.event for r in kept), GAP_S)
    for gen, cut in active.items():
        flagged = {(site, day) for g, site, day in run.flags if g == gen}
        batch_part = visit_recount((r.event for r in below(kept, cut)), GAP_S)
        got = combine(batch_part, sum_rows(run.realtime.get(gen, [])))
        problems = compare_recounts(_unflagged(expected, flagged), _unflagged(got, flagged))
        assert not problems, (
            f"generation {gen} (cut {cut}, flagged {sorted(flagged)}): unflagged buckets wrong:\n"
            + "\n".join(problems[:40])
            + f"\n{context}"
        )
