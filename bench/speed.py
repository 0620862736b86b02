"""Speed layer: sustained throughput and freshness, with Kafka, Redis, Spark and the generator on
this one machine.

1. Sustained: a backlog of generated events is loaded first; the streaming job then runs with
   ``maxOffsetsPerTrigger`` so each micro-batch holds a fixed slice of it, for at least 60 s of
   micro-batches. The rate it sustains is events processed per second of wall time; the lag
   (records behind the log end) is sampled to show it shrinks steadily rather than grow.
2. Freshness: the generator produces live traffic at a fixed rate (half the sustained rate, capped
   at the target's 50,000/s) while probe events with URLs of their own are sent every 100 ms; a
   poller notes when each probe's increment becomes visible in Redis. p50 and p95 of
   (visible - produced) are the freshness.

Targets: at least 200,000 events/s sustained; freshness p95 <= 2 s at 50,000 events/s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from rich.console import Console

from bench.common import produce_generated, running_stack, write_result
from config.settings import Settings, get_settings
from contract import PageView
from contract.codec import bounds_from
from generations import keys
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import ingest, paced
from ingest.producer import EventProducer
from ingest.topics import delete_topics, ensure_topics, log_end_offsets

TARGET_SUSTAINED = 200_000
TARGET_FRESHNESS_P95_S = 2.0
FRESHNESS_RATE_CAP = 50_000


def _settings(base: Settings, name: str) -> Settings:
    return base.model_copy(
        update={
            "events_topic": f"bench.speed.{name}",
            "dlq_topic": "bench.speed.dlq",
            "mongo_db": "bench_speed",
            "redis_db": 3,
            "speed_checkpoint_path": (base.var_dir / "bench" / f"speed-checkpoint-{name}").resolve().as_uri(),
        }
    )


def _env(settings: Settings, trigger_s: float, max_offsets: int) -> dict[str, str]:
    """The speed layer's process: this benchmark's settings with its trigger and batch size."""
    job = settings.model_copy(
        update={"speed_trigger_s": trigger_s, "speed_max_offsets_per_trigger": max_offsets}
    )
    return {**os.environ, **job.to_env()}


def _fresh(settings: Settings) -> redis.Redis:
    """A new topic, an empty Redis db and checkpoint: every run measures from the same start."""
    delete_topics(settings, [settings.events_topic])
    ensure_topics(settings)
    shutil.rmtree(Path(settings.speed_checkpoint_uri.removeprefix("file://")), ignore_errors=True)
    r = redis.Redis.from_url(settings.redis_url)
    r.flushdb()
    return r


def _start_speed(
    settings: Settings, trigger_s: float, max_offsets: int, log: Path
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "speed_layer", "run"],
        env=_env(settings, trigger_s, max_offsets),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(90)
    except subprocess.TimeoutExpired:
        proc.kill()


def _committed(r: redis.Redis) -> tuple[int, int]:
    commit = keys.decode_commit(r.get(keys.SPEED_COMMIT))
    return commit.batch_id, sum(commit.offsets.values())


def _generator(total: int | None, seed: int) -> TrafficGenerator:
    return TrafficGenerator(GeneratorConfig(total=total, seed=seed, malformed_fraction=0.0))


def sustained(
    base: Settings, console: Console, backlog: int, batch: int, min_seconds: float
) -> dict[str, Any]:
    settings = _settings(base, "sustained")
    r = _fresh(settings)
    produce_generated(settings, console, backlog, span_hours=0.0, seed=1)
    end = sum(log_end_offsets(settings).values())
    log_path = base.log_dir / "bench-speed-sustained.out"
    proc = _start_speed(settings, trigger_s=0.5, max_offsets=batch, log=log_path)
    samples: list[dict[str, float]] = []
    try:
        # The clock starts at the first commit: Spark's start-up is not the layer's throughput.
        while _committed(r)[0] < 0:
            if proc.poll() is not None:
                raise RuntimeError(f"the speed layer exited: see {log_path}")
            time.sleep(0.1)
        t0, (_, done0) = time.monotonic(), _committed(r)
        while True:
            time.sleep(1.0)
            batch_id, done = _committed(r)
            elapsed = time.monotonic() - t0
            samples.append({"t": round(elapsed, 1), "processed": done - done0, "lag": end - done})
            console.print(
                f"  {elapsed:5.0f} s  batch {batch_id}  processed {done - done0:,}  lag {end - done:,}"
            )
            if done >= end or (elapsed >= min_seconds and end - done < batch):
                break
            if proc.poll() is not None:
                raise RuntimeError(f"the speed layer exited: see {log_path}")
    finally:
        _stop(proc)
    processed, seconds = samples[-1]["processed"], samples[-1]["t"]
    rate = processed / seconds
    console.print(f"sustained: {processed:,.0f} events in {seconds:.0f} s = [bold]{rate:,.0f} events/s[/]")
    return {
        "backlog": backlog,
        "events_per_micro_batch": batch,
        "events_processed": processed,
        "seconds": seconds,
        "events_per_s": round(rate),
        "target_events_per_s": TARGET_SUSTAINED,
        "met": rate >= TARGET_SUSTAINED,
        "lag_samples": samples,
    }


def freshness(base: Settings, console: Console, rate: int, seconds: float) -> dict[str, Any]:
    settings = _settings(base, "freshness")
    r = _fresh(settings)
    log_path = base.log_dir / "bench-speed-freshness.out"
    proc = _start_speed(settings, trigger_s=0.25, max_offsets=max(rate * 4, 10_000), log=log_path)
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    stop = threading.Event()
    lags: list[int] = []
    try:
        # Warm up: wait until the job committed its first (empty or not) micro-batch.
        produce_background = threading.Thread(
            target=_live_traffic, args=(settings, rate, seconds + 30, stop), daemon=True
        )
        produce_background.start()
        # Warm up: Spark starts while traffic already flows; probe only once the backlog is gone.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the speed layer exited: see {log_path}")
            batch_id, done = _committed(r)
            if batch_id >= 2 and sum(log_end_offsets(settings).values()) - done < rate:
                break
            time.sleep(0.5)
        poller = threading.Thread(target=_poll_probes, args=(settings, sent, seen, stop), daemon=True)
        poller.start()
        probes = EventProducer(settings, **{"linger.ms": 1})  # type: ignore[arg-type]
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < seconds:
            url = f"https://probe.example.com/p/{n}"
            now = datetime.now(UTC)
            probes.add(PageView(event_id=f"probe-{n}-{time.time_ns()}", ts=now, visitor_id="probe", url=url))
            probes.poll(0)
            sent[url] = time.time()
            n += 1
            if n % 10 == 0:
                _, done = _committed(r)
                lags.append(sum(log_end_offsets(settings).values()) - done)
            time.sleep(0.1)
        probes.flush()
        time.sleep(5.0)
    finally:
        stop.set()
        _stop(proc)
    delays = sorted(seen[u] - sent[u] for u in seen)
    missing = len(sent) - len(seen)
    p50 = statistics.median(delays)
    p95 = delays[int(0.95 * (len(delays) - 1))]
    console.print(
        f"freshness at {rate:,} events/s: p50 [bold]{p50:.2f} s[/], p95 [bold]{p95:.2f} s[/] "
        f"over {len(delays)} probes ({missing} not seen); lag max {max(lags, default=0):,}"
    )
    return {
        "events_per_s": rate,
        "probes": len(sent),
        "probes_not_seen": missing,
        "p50_s": round(p50, 3),
        "p95_s": round(p95, 3),
        "max_s": round(delays[-1], 3),
        "target_p95_s": TARGET_FRESHNESS_P95_S,
        "met": p95 <= TARGET_FRESHNESS_P95_S and rate >= FRESHNESS_RATE_CAP,
        "lag_samples": lags,
    }


def _live_traffic(settings: Settings, rate: int, seconds: float, stop: threading.Event) -> None:
    def records() -> Any:
        for record in paced(_generator(int(rate * seconds), seed=2), rate):
            if stop.is_set():
                return
            yield record

    ingest(records(), EventProducer(settings), source="bench", bounds=bounds_from(settings))


def _poll_probes(
    settings: Settings, sent: dict[str, float], seen: dict[str, float], stop: threading.Event
) -> None:
    r = redis.Redis.from_url(settings.redis_url)
    while not stop.is_set():
        pending = [u for u in list(sent) if u not in seen]
        if pending:
            day = datetime.now(UTC).strftime("%Y-%m-%d")
            with r.pipeline(transaction=False) as pipe:
                for url in pending:
                    pipe.hexists(keys.realtime_key(0, "page", url, day), keys.PV)
                found = pipe.execute()
            now = time.time()
            for url, hit in zip(pending, found, strict=True):
                if hit:
                    seen[url] = now
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=15_000_000)
    parser.add_argument("--batch", type=int, default=1_000_000, help="events per micro-batch (sustained)")
    parser.add_argument("--min-seconds", type=float, default=60.0)
    parser.add_argument("--freshness-seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=0, help="freshness rate (default: half the sustained)")
    args = parser.parse_args()
    console = Console()
    base = get_settings()
    with running_stack(base):
        result: dict[str, Any] = {}
        result["sustained"] = sustained(base, console, args.backlog, args.batch, args.min_seconds)
        rate = args.rate or min(FRESHNESS_RATE_CAP, result["sustained"]["events_per_s"] // 2)
        result["freshness"] = freshness(base, console, rate, args.freshness_seconds)
        path = write_result("speed", result)
        console.print(f"results: {path}")


if __name__ == "__main__":
    main()
