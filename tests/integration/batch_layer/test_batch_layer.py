"""The batch layer on real Kafka, FerretDB and Redis, checked against a pure-Python recount."""

from __future__ import annotations

import hashlib
import io
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from batch_layer.diff import diff_generations
from batch_layer.job import BatchJob
from batch_layer.lease import LeaseHeld
from config.settings import Settings
from contract import ContractError, decode, utc
from stores.redis import keys
from tests.conftest import ROOT
from tests.integration.conftest import (
    assert_matches_oracle,
    platform_env,
    produce,
    served_documents,
    traffic,
)
from tests.oracle import recount
from views import all_views, shared_pass


def master_files(settings: Settings) -> dict[str, str]:
    root = Path(settings.master_uri.removeprefix("file://"))
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def job(platform: Settings, spark: Any) -> Any:
    j = BatchJob(platform, spark)
    yield j
    j.close()


def test_batch_views_match_the_oracle_and_incremental_equals_full(platform: Settings, job: BatchJob) -> None:
    events = produce(platform, traffic(seed=1, total=20_000))
    first = job.run()
    assert first.gen == 1 and first.events_absorbed == len(events)
    # The sites' hours hold over 8 KB of sketches: kept apart (stores.mongo.codec), and read back below.
    assert first.hour_sketch_documents > 0
    assert_matches_oracle(served_documents(platform), recount(events))

    # New traffic, partly late (hours back, so older days are touched too), then an incremental run.
    new_events = produce(platform, traffic(seed=2, total=4_000, span_hours=2.0, late_fraction=0.2))
    events += new_events
    incremental = job.run()
    assert incremental.kind == "incremental" and incremental.events_absorbed == len(new_events)
    new_days = {e.ts.strftime("%Y-%m-%d") for e in new_events}
    assert incremental.view_days_recomputed == {v.name: len(new_days) for v in all_views()}
    assert len(new_days) < first.view_days_recomputed["page"]
    after_incremental = served_documents(platform)
    assert_matches_oracle(after_incremental, recount(events))

    full = job.run(full=True)
    assert full.kind == "full" and full.events_absorbed == 0
    after_full = served_documents(platform)
    assert after_full.keys() == after_incremental.keys()
    for view in after_full:
        assert after_full[view].keys() == after_incremental[view].keys()
        for ident, doc in after_full[view].items():
            other = after_incremental[view][ident]
            for field in ("pv", "uv", "h_pv", "h_uv"):
                assert doc[field] == other[field], (view, ident, field)

    # An absorb with nothing new is a no-op; the master dataset does not change.
    before = master_files(platform)
    again = job.run()
    assert again.events_absorbed == 0 and sum(again.view_days_recomputed.values()) == 0
    assert master_files(platform) == before


def test_an_edit_of_the_shared_pass_recomputes_every_view_without_touching_the_master_dataset(
    platform: Settings, job: BatchJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared pass is edited (not any declaration): the next ordinary run recomputes every view
    in full, and so does the run after the fix; the master dataset stays byte-identical."""
    events = produce(platform, traffic(seed=3, total=8_000, span_hours=30))
    expected = recount(events)
    first = job.run()
    days = first.view_days_recomputed["page"]
    original = shared_pass.aggregate

    def aggregate(visits: Any, dimensions: Any, by: Any, lg_k: int) -> Any:
        """The bug: every page view counted twice, daily and hourly."""
        from pyspark.sql import functions as F

        rows = original(visits, dimensions, by, lg_k)
        return rows.withColumn("pv", F.col("pv") * 2).withColumn(
            "hours", F.transform("hours", lambda h: h.withField("pv", h["pv"] * 2))
        )

    monkeypatch.setattr(shared_pass, "aggregate", aggregate)
    wrong = job.run()  # an incremental run with no new events: only the fingerprints changed
    assert wrong.events_absorbed == 0 and wrong.view_days_recomputed == {v.name: days for v in all_views()}
    docs = served_documents(platform)["page"]
    assert all(d["pv"] == 2 * expected["page"][ident].pv for ident, d in docs.items())
    files_before = master_files(platform)

    monkeypatch.setattr(shared_pass, "aggregate", original)
    fixed = job.run()
    assert fixed.events_absorbed == 0 and fixed.view_days_recomputed == {v.name: days for v in all_views()}
    assert_matches_oracle(served_documents(platform), expected)
    assert master_files(platform) == files_before

    a, b = job.registry.get(wrong.gen), job.registry.get(fixed.gen)
    assert a is not None and b is not None
    by_view = {d.view: d for d in diff_generations(job.store, a, b)}
    for view in expected:
        assert by_view[view].changed == len(expected[view]) and by_view[view].unchanged == 0
    sample = by_view["page"].sample[0]
    assert sample["a"]["pv"] == 2 * sample["b"]["pv"]

    result = subprocess.run(
        [sys.executable, "-m", "batch_layer", "diff", str(wrong.gen), str(fixed.gen)],
        cwd=ROOT,
        env=platform_env(platform),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"page: {len(expected['page']):,} changed" in result.stdout


KILLED_RUN_LEASE_S = 8.0
"""The lease of a run the test kills: long enough to see the next run refused, short to wait out."""


def paused_run(platform: Settings, pause_at: str, lease_s: float) -> subprocess.Popen[str]:
    """``python -m batch_layer run`` held at a checkpoint (batch_layer.faults), its stdout read up to
    the PAUSED line; stderr goes to a file that the caller may read."""
    env = {**platform_env(platform), "LAMBDA_BATCH_PAUSE_AT": pause_at, "LAMBDA_BATCH_LEASE_S": str(lease_s)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "batch_layer", "run"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(f"PAUSED AT {pause_at}"):
            return proc
    proc.kill()
    pytest.fail(f"the batch run ended (code {proc.wait()}) before reaching {pause_at}")


def wait_for_lease_expiry(job: BatchJob, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = job.lease.document()
        expires = record.expires_at if record else None
        if expires is None or expires <= utc.now():
            return
        time.sleep(0.2)
    pytest.fail("the lease did not expire")


@pytest.mark.parametrize("pause_at", ["absorbed", "writing"])
def test_a_killed_run_leaves_the_served_generation_and_a_rerun_matches_the_oracle(
    platform: Settings, job: BatchJob, pause_at: str
) -> None:
    events = produce(platform, traffic(seed=4, total=6_000, span_hours=20))
    job.run()
    served_before = job.registry.served()
    docs_before = served_documents(platform)
    events += produce(platform, traffic(seed=5, total=3_000, span_hours=2))

    proc = paused_run(platform, pause_at, lease_s=KILLED_RUN_LEASE_S)
    try:
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    # The killed run's lease has not expired yet: no run may clean up after it before it has.
    with pytest.raises(LeaseHeld, match="another batch run holds the lease"):
        job.run()

    served_after_crash = job.registry.served()
    assert served_after_crash is not None and served_before is not None
    assert served_after_crash.gen == served_before.gen
    assert served_documents(platform) == docs_before

    wait_for_lease_expiry(job)
    rerun = job.run()
    assert rerun.gen > served_before.gen + 1  # the killed run's generation number is never reused
    assert_matches_oracle(served_documents(platform), recount(events))
    states = {g.gen: g.state for g in job.registry.all()}
    assert states[served_before.gen + 1].startswith("failed")


def test_a_run_killed_between_the_two_writes_of_the_switch_is_repaired_on_the_next_start(
    platform: Settings, job: BatchJob
) -> None:
    """Killed after the MongoDB pointer and before Redis' copy: Redis serves the previous generation
    (still exact: it stayed active) until the next start path or status read brings it forward."""
    events = produce(platform, traffic(seed=10, total=3_000, span_hours=10))
    first = job.run()
    events += produce(platform, traffic(seed=11, total=1_000, span_hours=2))
    proc = paused_run(platform, "switching", lease_s=KILLED_RUN_LEASE_S)
    proc.kill()
    proc.wait(timeout=30)
    served = job.registry.served()
    assert served is not None and served.gen == first.gen + 1  # MongoDB switched ...
    hot = keys.decode_served(job.redis.get(keys.SERVED))
    assert hot.gen == first.gen  # ... Redis did not
    assert job.registry.ensure_hot_copy() == {served.gen: served.cut}  # the speed layer's start path
    assert keys.decode_served(job.redis.get(keys.SERVED)) == keys.Served(served.gen, served.cut)
    assert not job.registry.repair_hot_copy()
    assert_matches_oracle(served_documents(platform), recount(events))


def test_a_run_paused_past_its_lease_cannot_publish_and_the_run_that_took_over_is_exact(
    platform: Settings, job: BatchJob
) -> None:
    """A run stopped (SIGSTOP: its heartbeat stops too) after writing its views, past its lease; a
    new run takes the lease over, fails and drops the paused run's generation and publishes its own.
    Resumed, the paused run finds its lease lost at its next step and exits without publishing."""
    events = produce(platform, traffic(seed=8, total=4_000, span_hours=10))
    job.run()
    events += produce(platform, traffic(seed=9, total=2_000, span_hours=2))
    proc = paused_run(platform, "written", lease_s=4.0)
    try:
        proc.send_signal(signal.SIGSTOP)
        wait_for_lease_expiry(job)
        taken_over = job.run()
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGUSR1)  # go on from the checkpoint: to the publish
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    said = stdout + stderr
    assert "batch run failed: publish: " in said and "lease" in said, said[-3000:]
    served = job.registry.served()
    assert served is not None and served.gen == taken_over.gen
    paused_gen = taken_over.gen - 1
    assert (job.registry.get(paused_gen) or served).state.startswith("failed")
    assert_matches_oracle(served_documents(platform), recount(events))


def test_records_deleted_before_absorption_stop_the_batch_layer_until_the_gap_is_accepted(
    platform: Settings, job: BatchJob
) -> None:
    """Retention (here: a deletion of records, as retention does) takes records the master dataset
    never absorbed: every run stops naming the lost offsets, until the operator accepts the gap; it
    is then in the manifest with who and when, and the views hold every surviving event exactly."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from batch_layer.__main__ import _accept_gap
    from batch_layer.master import AbsorbError
    from ingest.topics import log_end_offsets
    from tests.oracle import first_copies, read_log

    produce(platform, traffic(seed=12, total=2_000, span_hours=5))
    job.run()
    produce(platform, traffic(seed=13, total=1_000, span_hours=2))
    log = read_log(platform.kafka_bootstrap, platform.events_topic)
    absorbed, ends = job.master.absorbed_until(), log_end_offsets(platform)
    assert ends[0] > absorbed[0]
    admin = AdminClient({"bootstrap.servers": platform.kafka_bootstrap})
    for future in admin.delete_records([TopicPartition(platform.events_topic, 0, ends[0])]).values():
        future.result(30)

    lost = rf"partition 0: offsets {absorbed[0]}\.\.{ends[0]} were deleted by retention"
    with pytest.raises(AbsorbError, match=lost):
        job.run()
    with pytest.raises(AbsorbError, match="python -m batch_layer accept-gap"):
        job.run()  # and again: nothing moves on by itself
    assert _accept_gap(Console(file=io.StringIO()), job, confirmed=False) == 2 and job.master.gaps() == []

    accepted = subprocess.run(
        [sys.executable, "-m", "batch_layer", "accept-gap", "--yes"],
        cwd=ROOT,
        env=platform_env(platform),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert f"partition 0: offsets {absorbed[0]}..{ends[0]}" in accepted.stdout
    [gap] = job.master.gaps()
    assert gap.ranges == {0: (absorbed[0], ends[0])} and gap.events == 0 and gap.days == []
    assert gap.gap is not None and "@" in gap.gap["accepted_by"] and "retention" in gap.gap["reason"]

    summary = job.run()
    assert summary.retention["retention_used"] is not None and not summary.retention["at_risk"]
    survivors = [r for r in log if not (r.partition == 0 and r.offset >= absorbed[0])]
    assert summary.events_absorbed == sum(
        1 for r in survivors if r.event and r.offset >= absorbed[r.partition]
    )
    assert_matches_oracle(
        served_documents(platform), recount(r.event for r in first_copies(survivors) if r.event)
    )

    # The answers that may lack events of the gap say so; one that starts after them does not.
    from fastapi.testclient import TestClient

    from api.app import create_app

    [recorded] = job.registry.served().stats["lost_to_retention"]
    events_before = utc.as_utc(recorded["events_before"])
    day = utc.now().replace(hour=0, minute=0, second=0, microsecond=0)
    later = events_before.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    with TestClient(create_app(platform)) as api:
        site = {"site": "shop.example.com", "granularity": "day"}
        covering = api.get(
            "/v1/pageviews",
            params={
                **site,
                "from": (day - timedelta(days=6)).isoformat(),
                "to": (day + timedelta(days=1)).isoformat(),
            },
        ).json()
        assert [g["offsets"] for g in covering["covers"]["lost_to_retention"]] == [
            {"0": [absorbed[0], ends[0]]}
        ]
        after = api.get(
            "/v1/pageviews",
            params={
                "site": "shop.example.com",
                "from": later.isoformat(),
                "to": (later + timedelta(hours=1)).isoformat(),
            },
        ).json()
        assert after["covers"]["lost_to_retention"] == [], after


def test_retiring_a_generation_deletes_its_collections_and_realtime_keys(
    platform: Settings, job: BatchJob, spark: Any
) -> None:
    """Three full recomputes with the speed layer counting between them: the oldest generation is
    retired (two are kept) and, after the grace period (0 here), its batch collections and its
    realtime keys are gone, while the answers stay exact."""
    import redis

    from generations.state import GenerationState
    from speed_layer.job import SpeedJob
    from tests.integration.conftest import assert_merged_matches

    r = redis.Redis.from_url(platform.redis_url)
    events: list[Any] = []
    for seed in (14, 15, 16):
        events += produce(platform, traffic(seed=seed, total=1_500, span_hours=4))
        SpeedJob(platform, spark).run(available_now=True)
        summary = job.run(full=True)
    first = job.registry.get(1)
    assert first is not None and first.state is GenerationState.RETIRED_DROPPED
    assert summary.retired == [1] and summary.dropped_collections
    assert all(name.endswith("_g1") for name in summary.dropped_collections)
    names = job.db.list_collection_names()
    assert not [n for n in names if n.startswith("bv_") and n.endswith("_g1")], names
    assert [n for n in names if n.startswith("bv_") and n.endswith(f"_g{summary.gen}")]
    assert list(r.scan_iter(match=keys.realtime_pattern(1))) == []
    assert 1 not in {int(g) for g in r.smembers(keys.REALTIME_GENS)}
    assert list(r.scan_iter(match=keys.realtime_pattern(2), count=1000))  # kept: still retained
    r.close()
    SpeedJob(platform, spark).run(available_now=True)
    assert_merged_matches(platform, recount(events))


def test_records_that_bypassed_ingest_are_dead_lettered_by_the_absorb_not_counted(
    platform: Settings, job: BatchJob
) -> None:
    """A producer that writes to `events` directly can put anything there: the batch layer keeps
    it in the master dataset's invalid partition, sends it to the DLQ with a reason, and counts
    only valid events."""
    from confluent_kafka import Producer

    from ingest.producer import DLQ_KEY_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
    from tests.integration.ingest.test_ingest_kafka import consume_all

    events = produce(platform, traffic(seed=6, total=2_000, span_hours=5, malformed_fraction=0.0))
    bad = [b"{not json", b'{"event_id":"x1","visitor_id":"v"}', b'{"schema_version":7}']
    raw = Producer({"bootstrap.servers": platform.kafka_bootstrap})
    for payload in bad:
        raw.produce(platform.events_topic, payload)
    assert raw.flush(30) == 0

    summary = job.run()
    assert (summary.events_absorbed, summary.invalid_records) == (len(events), len(bad))
    assert_matches_oracle(served_documents(platform), recount(events))
    rejects = consume_all(platform, platform.dlq_topic)
    assert sorted(m.value() or b"" for m in rejects) == sorted(bad)
    for m in rejects:
        headers = dict(m.headers())
        assert headers[DLQ_SOURCE_HEADER] == b"batch-absorb"
        assert headers[DLQ_KEY_HEADER].decode().startswith(f"batch-absorb:{platform.events_topic}:")
    reasons = {m.value(): dict(m.headers())[DLQ_REASON_HEADER].decode() for m in rejects}
    for value, reason in reasons.items():  # the reason ingest gives, word for word
        with pytest.raises(ContractError) as rejected:
            decode(value or b"")
        assert reason == rejected.value.reason
    assert "schema_version: " in reasons[b'{"schema_version":7}']
    assert "ts: Field required" in reasons[b'{"event_id":"x1","visitor_id":"v"}']
