"""The speed layer on real Kafka, Redis and FerretDB, against an oracle that re-reads the log.

Every check compares realtime values with a recount of the events whose first copy sits at or past
the generation's cut: counts exactly, sketches within their bounds. The crash tests kill the
streaming process (JVM included) with SIGKILL at random moments, restart Redis, or flush it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from confluent_kafka import Producer

from batch_layer.job import BatchJob
from config.settings import Settings
from contract import PageView, encode, site_of
from ingest.topics import log_end_offsets
from speed_layer.job import SpeedJob
from stack import control
from stack.services import Kafka
from stores.redis import keys
from tests.conftest import ROOT
from tests.integration.conftest import (
    assert_merged_matches,
    assert_merged_visits_match,
    assert_realtime_matches,
    platform_env,
    produce,
    realtime_documents,
    traffic,
)
from tests.integration.contract.test_contract_everywhere import (
    assert_dead_lettered_once_each,
    invalid_records,
)
from tests.integration.filters_check import assert_filters_match
from tests.oracle import dedup, first_copies, read_log, recount, recount_past
from views import filter_table

BAD_RECORDS = [b"{not json", b'{"event_id":"x1","visitor_id":"v"}']


def live(seed: int, total: int, **overrides: Any) -> Any:
    """Live traffic (stamped now, some late and out of order) with duplicates and bad records."""
    return traffic(seed, total, span_hours=0.0, **overrides)


def redis_client(settings: Settings) -> redis.Redis:
    return redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)


def commit_of(settings: Settings) -> keys.SpeedCommit:
    r = redis_client(settings)
    try:
        return keys.decode_commit(r.get(keys.SPEED_COMMIT))
    except redis.ConnectionError:
        return keys.SpeedCommit()
    finally:
        r.close()


def wait_caught_up(settings: Settings, timeout: float = 180.0) -> None:
    ends = log_end_offsets(settings)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if commit_of(settings).offsets == ends:
            return
        time.sleep(0.3)
    raise AssertionError(f"the speed layer did not catch up: {commit_of(settings)} vs {ends}")


def wait_for_batch(settings: Settings, speed: SpeedProcess, batch_id: int, timeout: float = 120.0) -> None:
    """Until the job has committed ``batch_id`` (it is up and counting)."""
    deadline = time.monotonic() + timeout
    while commit_of(settings).batch_id < batch_id:
        assert time.monotonic() < deadline, speed.tail()
        time.sleep(0.2)


def served_cut(settings: Settings) -> tuple[int, dict[int, int]]:
    r = redis_client(settings)
    try:
        served = keys.decode_served(r.get(keys.SERVED))
    finally:
        r.close()
    return served.gen, served.cut


def produce_raw(settings: Settings, payloads: list[bytes], keys: list[bytes] | None = None) -> None:
    """Records written straight to `events`, bypassing ingest's validation (``keys``: the message
    key of each; ingest keys by ``visitor_id``, and the same key lands in the same partition)."""
    raw = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    for i, payload in enumerate(payloads):
        raw.produce(settings.events_topic, payload, None if keys is None else keys[i])
    assert raw.flush(30) == 0


def changed_resends(settings: Settings, events: list[PageView]) -> None:
    """Re-sends of ``events`` straight to `events` with the same ``event_id`` and key (so the same
    partition) and every other field the filter table reads changed: page, country, device,
    referrer, hour. Duplicates by the contract's rule (contract.duplicates): counted by no layer."""
    urls = sorted({e.url for e in events})
    bot, tool = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "curl/8.5.0"
    changed = [
        e.model_copy(
            update={
                "url": urls[(i * 7 + 1) % len(urls)],
                "country": "JP" if e.country == "NL" else "NL",
                "user_agent": tool if e.user_agent == bot else bot,
                "referrer": None if e.referrer else "https://www.bing.com/",
                "ts": e.ts - timedelta(hours=2),
            }
        )
        for i, e in enumerate(events)
    ]
    produce_raw(settings, [encode(e) for e in changed], [e.visitor_id.encode() for e in changed])


def filter_table_pageviews(
    settings: Settings, day_map: dict[str, int], gen: int
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """(site, day) -> page views of the filter table's batch part (the files ``day_map`` names) and
    of its realtime part (generation ``gen``'s rows in Redis), read straight from the stores: its
    page-view rows (a visit row's page views are its visit's, counted again)."""
    import pyarrow.parquet as pq

    from stores.parquet.filter_table import batch_files
    from stores.redis.filter_rows import decode_blobs
    from tests.integration.speed_layer.test_speed_filter_rows import stored_lists

    batch: Counter[tuple[str, str]] = Counter()
    for path in batch_files(settings.filter_table_uri, day_map):
        day = Path(path).parent.name.removeprefix(f"{filter_table.DAY}=")
        part = pq.read_table(path, columns=[filter_table.SITE, "pageviews", filter_table.VISITS]).to_pydict()
        for site, pv, visits in zip(
            part[filter_table.SITE], part["pageviews"], part[filter_table.VISITS], strict=True
        ):
            if visits is None:
                batch[(site, day)] += pv
    realtime: Counter[tuple[str, str]] = Counter()
    for blobs in stored_lists(settings, gen).values():
        rows = decode_blobs(blobs).to_pydict()
        for site, day, pv, visits in zip(
            rows[filter_table.SITE],
            rows[filter_table.DAY],
            rows["pageviews"],
            rows[filter_table.VISITS],
            strict=True,
        ):
            if visits is None:
                realtime[(site, day.isoformat())] += pv
    return batch, realtime


class SpeedProcess:
    """``python -m speed_layer run`` as its own process group (the JVM is a child of it)."""

    def __init__(self, settings: Settings, log_path: Any) -> None:
        self.env = platform_env(settings)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "speed_layer", "run"],
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the job stops its query between two batches
        return self.proc.wait(90)

    def tail(self) -> str:
        return str(self.log_path.read_text(errors="replace")[-3000:])


REBUILDING = ("dedup state not at the micro-batch's start", "visit state: none in this JVM yet: rebuilding")
"""What the job logs when it starts rebuilding its states: the dedup's (speed_layer.dedup), or the
visits' with the dedup's of the log it replays, which a restarted job does before its first
micro-batch (speed_layer.micro_batch)."""


def _rebuilds(speed: SpeedProcess) -> int:
    text = speed.log_path.read_text(errors="replace")
    return sum(text.count(line) for line in REBUILDING)


def kill_while_rebuilding(settings: Settings, speed: SpeedProcess, seed: int, rng: random.Random) -> None:
    """Kill the (just restarted) job while it rebuilds its states for a micro-batch of fresh
    events, then start it again."""
    seen = _rebuilds(speed)
    events = produce_in_background(settings, seeds=[seed], per_seed=1_000, pause_s=0.0)
    deadline = time.monotonic() + 120
    while _rebuilds(speed) <= seen:
        assert time.monotonic() < deadline, speed.tail()
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 0.5))
    speed.kill()
    speed.start()
    events.join(120)


@pytest.fixture
def speed(platform: Settings, tmp_path: Any) -> Iterator[SpeedProcess]:
    process = SpeedProcess(platform, tmp_path / "speed.out")
    yield process
    if process.proc is not None and process.proc.poll() is None:
        os.killpg(process.proc.pid, signal.SIGKILL)
        process.proc.wait(30)


class BackgroundProducer(threading.Thread):
    """Produces ``seeds`` one after another through ingest; :meth:`join` re-raises its failure, so a
    test never mistakes a producer that gave up for one that finished."""

    def __init__(self, settings: Settings, seeds: list[int], per_seed: int, pause_s: float) -> None:
        super().__init__(daemon=True)
        self.settings, self.seeds, self.per_seed, self.pause_s = settings, seeds, per_seed, pause_s
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            for seed in self.seeds:
                produce(self.settings, live(seed, self.per_seed))
                time.sleep(self.pause_s)
        except BaseException as exc:
            self.failure = exc

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        assert not self.is_alive(), f"the producer has not finished after {timeout} s"
        if self.failure is not None:
            raise AssertionError(f"the producer failed: {self.failure!r}") from self.failure


def produce_in_background(
    settings: Settings, seeds: list[int], per_seed: int, pause_s: float
) -> BackgroundProducer:
    producer = BackgroundProducer(settings, seeds, per_seed, pause_s)
    producer.start()
    return producer


def test_realtime_views_count_exactly_the_events_past_the_cut(platform: Settings, spark: Any) -> None:
    """Re-sends of events below the cut, late events, out-of-order events and invalid records:
    the realtime views of a generation hold exactly the events whose first copy is past its cut.

    Records that bypassed ingest go straight to `events` before the batch's cut and after it: one
    of each breach of the contract (test_contract_everywhere's), and re-sends whose fields changed.
    Neither layer counts them, in the views or in the filter table (both parts), and each layer
    dead-letters every invalid record it reads with ingest's reason."""
    first = produce(platform, live(seed=1, total=5_000))
    invalid_below = invalid_records("below")
    produce_raw(platform, invalid_below)
    changed_resends(platform, first[1_000:1_300])
    batch = BatchJob(platform, spark)
    try:
        summary = batch.run()
        served_gen = batch.registry.served()
        assert served_gen is not None
        gen, day_map = summary.gen, served_gen.day_map[filter_table.NAME]
    finally:
        batch.close()
    assert summary.invalid_records == len(invalid_below)
    second = produce(platform, live(seed=2, total=5_000))
    produce(platform, [encode(e) for e in first[:1_000]])  # re-sends of events the batch views hold
    invalid_past = BAD_RECORDS + invalid_records("past")
    produce_raw(platform, invalid_past)
    changed_resends(platform, first[1_300:1_500] + second[:300])  # of events below and past the cut

    # The other tests' micro-batches are small enough for one task: this one takes the shuffled
    # path of large micro-batches.
    SpeedJob(platform.model_copy(update={"speed_single_partition_rows": 0}), spark).run(available_now=True)

    served, cut = served_cut(platform)
    assert served == gen and cut
    log = read_log(platform.kafka_bootstrap, platform.events_topic)
    # The recount's input is the valid events as produced: the invalid records and the changed
    # re-sends are not among the first copies the oracle reads from the log.
    assert sum(1 for r in log if r.event is None) == len(invalid_below) + len(invalid_past)
    kept = first_copies(log)
    valid = [r.event for r in kept if r.event]
    assert Counter(map(encode, valid)) == Counter(map(encode, dedup(first + second)))
    assert_realtime_matches(realtime_documents(platform, gen), recount_past(log, cut))
    assert_merged_matches(platform, recount(valid))
    assert commit_of(platform).offsets == log_end_offsets(platform)

    # The filter table: each part holds exactly the valid first copies on its side of the cut ...
    sides: dict[bool, Counter[tuple[str, str]]] = {False: Counter(), True: Counter()}
    for r in kept:
        if r.event:
            sides[r.offset >= cut.get(r.partition, 0)][
                (site_of(r.event.url), r.event.ts.strftime("%Y-%m-%d"))
            ] += 1
    assert filter_table_pageviews(platform, day_map, gen) == (sides[False], sides[True])
    # ... and POST /v2/query answers combined filters over both as the recount of them does.
    assert_filters_match(platform, valid, at=1)

    # Each layer dead-letters the invalid records it read, with ingest's reason, under a key
    # naming the record's log position: the batch layer those below its cut, the speed layer all
    # (it reads from one dedup window before the cut).
    assert_dead_lettered_once_each(platform, "batch-absorb", invalid_below)
    assert_dead_lettered_once_each(platform, "speed-layer", invalid_below + invalid_past)

    # A second run over the same checkpoint finds nothing new and changes nothing.
    before = realtime_documents(platform, gen)
    SpeedJob(platform, spark).run(available_now=True)
    assert realtime_documents(platform, gen) == before


def test_kill_9_at_random_moments_neither_loses_nor_double_counts(
    platform: Settings, speed: SpeedProcess
) -> None:
    """Two kills, each at a random moment after a commit, while events flow: each restart replays
    the batch in flight (skipped if Redis has it, counted if not). Each round first gives the
    (re)started job events to commit, then starts a second producer right before the kill, so that
    every kill, not only the first, hits a loaded stream. Every start of the job costs about 20 s
    of JVM and first micro-batch here, which is what bounds the count.

    Every restart rebuilds the dedup state from the log (a fresh JVM holds none); in one round the
    restarted job is killed again while it rebuilds, so the next start rebuilds from scratch."""
    seed_of_run = random.SystemRandom().randrange(2**31)
    rng = random.Random(seed_of_run)
    kills: list[str] = []
    speed.start()
    for round_ in range(2):
        if round_ == 1:
            kill_while_rebuilding(platform, speed, 100 + round_, rng)
        seed = 10 + 3 * round_
        committed = commit_of(platform).batch_id
        to_commit = produce_in_background(platform, seeds=[seed], per_seed=1_000, pause_s=0.0)
        deadline = time.monotonic() + 120
        while commit_of(platform).batch_id <= committed:  # it is up and committing
            assert time.monotonic() < deadline, speed.tail()
            time.sleep(0.2)
        flowing = produce_in_background(platform, seeds=[seed + 1, seed + 2], per_seed=1_500, pause_s=0.5)
        if round_ == 0:
            # This kill hits a micro-batch Spark has planned (its offsets are in the checkpoint) and
            # Redis has not committed: the restart must replay it.
            in_flight = wait_for_uncommitted_batch(platform, speed)
        else:
            time.sleep(rng.uniform(0.0, 1.5))
        speed.kill()
        kills.append(f"round {round_}: {kill_moment(platform)}")
        if round_ == 0:  # killed before Redis had it: only a replay of it can make the counts right
            assert commit_of(platform).batch_id < in_flight, kills
        speed.start()
        to_commit.join(120)
        flowing.join(120)
    wait_caught_up(platform)
    assert speed.stop() == 0, speed.tail()
    happened = f"seed {seed_of_run}; kills: " + "; ".join(kills)
    print(happened)

    log = read_log(platform.kafka_bootstrap, platform.events_topic)
    try:
        assert_realtime_matches(realtime_documents(platform, 0), recount_past(log, {}))
        # Visits too: every kill replayed its batch's state reads and retractions exactly once.
        assert_merged_visits_match(platform, [r.event for r in first_copies(log) if r.event])
        # And the filter table's realtime rows: each kill's replay appended its rows once.
        assert_filters_match(platform, [r.event for r in first_copies(log) if r.event], at=seed_of_run)
    except AssertionError as exc:
        raise AssertionError(f"{happened}\n{exc}") from exc


def _batch_ids(platform: Settings, folder: str) -> list[int]:
    root = Path(platform.speed_checkpoint_uri.removeprefix("file://")) / folder
    return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit()) if root.is_dir() else []


def kill_moment(platform: Settings) -> str:
    """What the checkpoint and Redis hold at a kill: the last micro-batch Spark planned, the last
    it finished, and the last Redis committed."""
    planned, finished = _batch_ids(platform, "offsets"), _batch_ids(platform, "commits")
    return (
        f"batch {planned[-1] if planned else None} planned, {finished[-1] if finished else None} "
        f"finished in Spark, {commit_of(platform).batch_id} committed in Redis"
    )


def wait_for_uncommitted_batch(platform: Settings, speed: SpeedProcess, timeout: float = 120.0) -> int:
    """Until Spark has planned a micro-batch that Redis has not committed; its id."""
    deadline = time.monotonic() + timeout
    while True:
        planned = _batch_ids(platform, "offsets")
        if planned and planned[-1] > commit_of(platform).batch_id:
            return planned[-1]
        assert time.monotonic() < deadline, speed.tail()
        time.sleep(0.01)


def test_a_redis_restart_and_a_broker_kill_9_mid_run_lose_nothing(
    platform: Settings, speed: SpeedProcess
) -> None:
    """Redis stops and comes back while the job counts, then the Kafka broker is killed with
    SIGKILL and restarted while events flow: the job waits for each and counts every event once."""
    speed.start()
    producer = produce_in_background(platform, seeds=[20, 21, 22, 23], per_seed=3_000, pause_s=0.5)
    wait_for_batch(platform, speed, 1)
    control.down(platform, ["redis"])
    time.sleep(2.0)
    control.up(platform, ["redis"])
    producer.join(120)
    wait_for_batch(platform, speed, commit_of(platform).batch_id + 1)
    producer = produce_in_background(platform, seeds=[24, 25], per_seed=3_000, pause_s=0.5)
    flowing = sum(log_end_offsets(platform).values())
    while sum(log_end_offsets(platform).values()) < flowing + 1_000:  # the broker dies mid-stream
        assert producer.is_alive(), "the producer finished before the broker was killed"
        time.sleep(0.05)
    broker = control._owned_pid(Kafka(platform))
    assert broker is not None, "the test stack's broker is not running"
    os.kill(broker, signal.SIGKILL)
    time.sleep(1.0)
    control.up(platform, ["kafka"])
    producer.join(300)
    wait_caught_up(platform)
    assert speed.stop() == 0, speed.tail()

    log = read_log(platform.kafka_bootstrap, platform.events_topic)
    assert_realtime_matches(realtime_documents(platform, 0), recount_past(log, {}))


def test_a_flushed_redis_stops_the_job_and_rebuild_realtime_restores_the_views(
    platform: Settings, spark: Any, speed: SpeedProcess
) -> None:
    produce(platform, live(seed=30, total=3_000))
    batch = BatchJob(platform, spark)
    try:
        gen = batch.run().gen
    finally:
        batch.close()
    speed.start()
    producer = produce_in_background(platform, seeds=[31, 32, 33], per_seed=3_000, pause_s=0.5)
    deadline = time.monotonic() + 120
    while commit_of(platform).batch_id < 1:
        assert time.monotonic() < deadline, speed.tail()
        time.sleep(0.2)
    r = redis_client(platform)
    r.flushdb()
    r.close()
    producer.join(120)
    # The next micro-batch finds its predecessor's commit gone and refuses to count on top of it.
    assert speed.proc is not None and speed.proc.wait(120) == 3, speed.tail()
    assert "make rebuild-realtime" in speed.tail()

    rebuild = subprocess.run(
        [sys.executable, "-m", "speed_layer", "rebuild"],
        cwd=ROOT,
        env=platform_env(platform),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rebuild.returncode == 0, rebuild.stdout[-2000:] + rebuild.stderr[-3000:]
    assert commit_of(platform).offsets == log_end_offsets(platform)
    served, cut = served_cut(platform)
    assert served == gen
    log = read_log(platform.kafka_bootstrap, platform.events_topic)
    assert_realtime_matches(realtime_documents(platform, gen), recount_past(log, cut))
    assert_merged_matches(platform, recount(r.event for r in first_copies(log) if r.event))


def test_batch_generations_at_random_moments_merge_exactly_with_the_realtime_views(
    platform: Settings, spark: Any, speed: SpeedProcess
) -> None:
    """The product's promise: at every quiescent moment, served batch views + realtime views of
    the same generation equal a recount of every event in the log, while batch runs open and
    publish generations at random moments during continuous traffic."""
    rng = random.Random()
    speed.start()
    batch = BatchJob(platform, spark)
    try:
        seed, sent = 100, list[PageView]()
        for round_ in range(2):
            producer = produce_in_background(
                platform, seeds=[seed, seed + 1, seed + 2], per_seed=2_000, pause_s=0.4
            )
            seed += 3
            time.sleep(rng.uniform(0.0, 2.0))
            summary = batch.run()  # opens its cut while events flow and the speed layer commits
            producer.join(120)
            if round_ == 1:
                sent = produce(platform, [encode(e) for e in sent])  # re-sends below the newest cut
            wait_caught_up(platform)
            served, _ = served_cut(platform)
            assert served == summary.gen
            log = read_log(platform.kafka_bootstrap, platform.events_topic)
            first = [r.event for r in first_copies(log) if r.event]
            assert_merged_matches(platform, recount(first))
            # Visits: batch + realtime (retractions included) = the reference sessioniser's.
            assert_merged_visits_match(platform, first)
            # Combined filters: the batch files + the realtime rows of the same generation.
            assert_filters_match(platform, first, at=round_)
    finally:
        batch.close()
    assert speed.stop() == 0, speed.tail()
