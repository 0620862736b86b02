"""Speed layer soak: steady traffic for minutes, faults at random moments, memory sampled, and the
merged answers checked against a recount of the log at the end.

While the generator produces at ``--rate`` events/s for ``--minutes``:
- the speed layer runs in its own process group and is killed with SIGKILL ``--kills`` times at
  random moments (restarted at once each time: the restart replays the batch in flight);
- Redis is stopped and started once, and the Kafka broker is killed with SIGKILL and restarted
  once, at random moments;
- a batch generation (``python -m batch_layer run``) opens every ``--batch-every`` seconds;
- every 5 s: the speed layer's resident memory (its Python and the driver JVM, which holds the
  dedup state in local mode), Redis ``used_memory`` and the lag (records behind the log end).

Then the traffic stops, the layer catches up, and the served generation's batch views plus its
realtime views are compared with the oracle's recount of every event in the log (the test suite's
oracle: page views per view, key, day and hour exactly, visitors within the sketch's bounds). It
prints what it checked and writes ``bench/results/soak.json``. The faults fall in the first 60% of
the run; memory is "flat" when it grew by at most 10% over the last quarter, which is fault-free.
The dedup state holds the fingerprints of one dedup window (``LAMBDA_SPEED_DEDUP_WINDOW_S``, 600 s)
and up to a grace and a time bucket more (docs/contract.md): it grows until the run is longer than
that, then stays level.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import redis
from pymongo import MongoClient
from rich.console import Console

from bench.common import running_stack, write_result
from bench.speed import committed, live_traffic
from config.settings import Settings, get_settings
from ingest.topics import delete_topics, ensure_topics, log_end_offsets
from stack import control
from stack.services import Kafka
from tests.integration.speed_layer.test_speed_layer import SpeedProcess

SAMPLE_EVERY_S = 5.0
FAULTS_UNTIL = 0.6
"""Faults happen in the first 60% of the run; memory is judged over its last quarter."""
JUDGED_FROM = 0.75
FLAT_TOLERANCE = 0.1
MEMORY = ("speed_rss_mib", "redis_used_mib")


def soak_settings(base: Settings) -> Settings:
    root = (base.var_dir / "bench" / "soak").resolve()
    return base.model_copy(
        update={
            "events_topic": "bench.soak.events",
            "dlq_topic": "bench.soak.dlq",
            "mongo_db": "bench_soak",
            "redis_db": 4,
            "master_path": (root / "master").as_uri(),
            "speed_checkpoint_path": (root / "speed-checkpoint").as_uri(),
            "retire_grace_s": 0.0,
            "speed_trigger_s": 0.5,
        }
    )


def fresh(settings: Settings) -> None:
    """New topics, an empty database, Redis db, master dataset and checkpoint."""
    delete_topics(settings, [settings.events_topic, settings.dlq_topic])
    ensure_topics(settings)
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    client.drop_database(settings.mongo_db)
    client.close()
    redis.Redis.from_url(settings.redis_url).flushdb()
    shutil.rmtree(settings.var_dir / "bench" / "soak", ignore_errors=True)


class SpeedLayer(SpeedProcess):
    """``python -m speed_layer run`` in its own process group, so SIGKILL takes its JVM too (the
    test suite's process, with its resident memory)."""

    def rss_mib(self) -> float:
        """Resident memory of the job's process and its children (the driver JVM, Python workers)."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
            return sum(p.memory_info().rss for p in procs) / 2**20
        except psutil.Error:
            return 0.0


class Sampler(threading.Thread):
    """Every SAMPLE_EVERY_S: memory of the job, Redis memory, lag."""

    def __init__(self, settings: Settings, speed: SpeedLayer, started: float) -> None:
        super().__init__(daemon=True)
        self.settings, self.speed, self.started = settings, speed, started
        self.samples: list[dict[str, float | None]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        r = redis.Redis.from_url(self.settings.redis_url, socket_timeout=2)
        while not self.stop.wait(SAMPLE_EVERY_S):
            sample: dict[str, float | None] = {
                "t": round(time.monotonic() - self.started, 1),
                "speed_rss_mib": round(self.speed.rss_mib(), 1),
            }
            try:
                sample["redis_used_mib"] = round(int(r.info("memory")["used_memory"]) / 2**20, 1)
                _, done = committed(r)
                sample["lag"] = sum(log_end_offsets(self.settings).values()) - done
            except Exception:  # Redis or the broker is down for a fault: a gap in the samples
                sample.setdefault("redis_used_mib", None)
                sample["lag"] = None
            self.samples.append(sample)


def flat(samples: list[dict[str, float | None]], name: str, since_s: float) -> dict[str, Any]:
    """Whether ``name`` stayed flat over the fault-free end of the run (samples from ``since_s``):
    its growth from the first to the last of them, within FLAT_TOLERANCE of the first."""
    values = [
        float(v) for s in samples if s["t"] is not None and float(s["t"]) >= since_s and (v := s.get(name))
    ]
    if len(values) < 4:
        return {"flat": None, "samples": len(values)}
    growth = (values[-1] - values[0]) / values[0]
    return {
        "from_mib": round(values[0], 1),
        "to_mib": round(values[-1], 1),
        "max_mib": round(max(float(v) for s in samples if (v := s.get(name))), 1),
        "growth": round(growth, 3),
        "flat": growth <= FLAT_TOLERANCE,
    }


def batch_runs(settings: Settings, every_s: float, stop: threading.Event, log: Path, done: list[int]) -> None:
    """A batch generation every ``every_s`` seconds (the next one waits for the last to end)."""
    env = {**os.environ, **settings.to_env()}
    while not stop.wait(every_s):
        with log.open("ab") as out:
            code = subprocess.run(
                [sys.executable, "-m", "batch_layer", "run"], env=env, stdout=out, stderr=subprocess.STDOUT
            ).returncode
        done.append(code)


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    base = get_settings()
    settings = soak_settings(base)
    fresh(settings)
    r = redis.Redis.from_url(settings.redis_url)
    seconds = args.minutes * 60
    rng = random.Random(args.seed)
    kinds = ["kill -9 speed layer"] * args.kills + ["redis restart", "broker kill -9"]
    faults = sorted((rng.uniform(0.1, FAULTS_UNTIL) * seconds, kind) for kind in kinds)
    speed = SpeedLayer(settings, base.log_dir / "bench-soak-speed.out")
    speed.start()
    started = time.monotonic()
    stop = threading.Event()
    traffic = threading.Thread(
        target=live_traffic, args=(settings, args.rate, seconds + 3600, stop), daemon=True
    )
    traffic.start()
    sampler = Sampler(settings, speed, started)
    sampler.start()
    batch_codes: list[int] = []
    batches = threading.Thread(
        target=batch_runs,
        args=(settings, args.batch_every, stop, base.log_dir / "bench-soak-batch.out", batch_codes),
        daemon=True,
    )
    batches.start()
    done_faults: list[dict[str, Any]] = []
    console.print(
        f"soak: {args.rate:,} events/s for {args.minutes} min; faults at {[round(t) for t, _ in faults]} s"
    )
    shown = 0.0
    try:
        for at, fault in [*faults, (seconds, "end")]:
            while (elapsed := time.monotonic() - started) < at:
                if elapsed - shown >= 30:
                    shown = elapsed
                    last = sampler.samples[-1] if sampler.samples else {}
                    console.print(
                        f"  {elapsed:5.0f} s  lag {last.get('lag')}  "
                        f"speed RSS {last.get('speed_rss_mib')} MiB  "
                        f"Redis {last.get('redis_used_mib')} MiB  batch runs {len(batch_codes)}"
                    )
                if speed.proc is not None and speed.proc.poll() is not None:
                    raise RuntimeError(
                        f"the speed layer exited with {speed.proc.returncode}: see {speed.log_path}"
                    )
                time.sleep(0.5)
            if fault == "end":
                break
            console.print(f"  {time.monotonic() - started:5.0f} s  {fault}")
            if fault == "kill -9 speed layer":
                speed.kill()
                speed.start()
            elif fault == "redis restart":
                control.down(settings, ["redis"])
                time.sleep(2.0)
                control.up(settings, ["redis"])
            else:
                pid = control._owned_pid(Kafka(settings))
                assert pid is not None, "the broker is not running"
                os.kill(pid, signal.SIGKILL)
                time.sleep(1.0)
                control.up(settings, ["kafka"])
            done_faults.append({"at_s": round(time.monotonic() - started, 1), "fault": fault})
    finally:
        stop.set()
    traffic.join(300)
    batches.join(1200)
    console.print("traffic stopped; the speed layer catches up")
    end = sum(log_end_offsets(settings).values())
    caught_up_at = None
    deadline = time.monotonic() + args.catch_up_minutes * 60
    while time.monotonic() < deadline:
        if committed(r)[1] >= end:
            caught_up_at = time.monotonic() - started
            break
        time.sleep(1.0)
    sampler.stop.set()
    sampler.join(10)
    exit_code = speed.stop()
    result: dict[str, Any] = {
        "rate": args.rate,
        "minutes": args.minutes,
        "events_in_log": end,
        "faults": done_faults,
        "batch_generations": len(batch_codes),
        "batch_exit_codes": batch_codes,
        "speed_exit_code": exit_code,
        "caught_up_after_s": None if caught_up_at is None else round(caught_up_at, 1),
        "memory": {name: flat(sampler.samples, name, seconds * JUDGED_FROM) for name in MEMORY},
        "lag_max": max((s["lag"] or 0 for s in sampler.samples), default=0),
        "samples": sampler.samples,
    }
    result["exact"] = check_exact(settings, console) if caught_up_at is not None else None
    return result


def check_exact(settings: Settings, console: Console) -> bool:
    """The served generation's merged answers against the oracle's recount of the whole log."""
    from tests.integration.conftest import assert_merged_matches
    from tests.oracle import first_copies, read_log, recount

    t0 = time.monotonic()
    log = read_log(settings.kafka_bootstrap, settings.events_topic)
    expected = recount(rec.event for rec in first_copies(log) if rec.event)
    try:
        assert_merged_matches(settings, expected)
    except AssertionError as exc:
        console.print(f"[red]merged answers differ from the recount[/]: {str(exc)[:500]}")
        return False
    buckets = sum(len(b) for b in expected.values())
    console.print(
        f"merged answers equal the recount of {len(log):,} records: {buckets:,} (view, key, day) buckets, "
        f"page views per hour exactly, visitors within the sketch bounds ({time.monotonic() - t0:.0f} s)"
    )
    return True


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=2_000, help="events/s of generated traffic")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kills", type=int, default=5, help="SIGKILLs of the speed layer")
    parser.add_argument("--batch-every", type=float, default=120.0, help="seconds between batch generations")
    parser.add_argument("--catch-up-minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    console = Console(soft_wrap=True)
    with running_stack(get_settings()):
        result = run(args, console)
    for name, m in result["memory"].items():
        console.print(f"{name}: {m}")
    console.print(
        f"faults: {len(result['faults'])}, batch generations: {result['batch_generations']} "
        f"(exit codes {sorted(set(result['batch_exit_codes']))}), lag max {result['lag_max']:,}, "
        f"caught up after {result['caught_up_after_s']} s, exact: {result['exact']}"
    )
    console.print(f"results: {write_result('soak', result)}")


if __name__ == "__main__":
    main()
