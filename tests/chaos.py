"""Chaos: traffic flowing, faults at random (seeded, logged) moments, only the platform's own
recovery, and at the end every bucket of every view against the recount of the log.

The faults, drawn with replacement from :data:`FAULTS`:

- ``speed``: SIGKILL of the speed layer's process group (its Python and its Spark JVM); its keeper
  (stack.keeper) restarts it, as compose's restart policy does in production;
- ``batch``: SIGKILL of the batch run in progress (or of the next one, as soon as it started); the
  next scheduled run takes the lease over once it expired and cleans up;
- ``kafka``, ``redis``, ``ferretdb``: SIGKILL of the service, then started again by the stack's own
  ``up`` (what a container's restart policy does); the jobs wait for it or are restarted.

Batch runs are scheduled every ``batch_every_s`` seconds, as ``make batch-loop`` would. When the
faults are done the traffic stops, the next scheduled batch runs and the speed layer catch up, and
the served generation's batch views plus its realtime views are compared with the oracle's recount.

The short version runs in the test suite (tests/integration/stack/test_chaos.py); ``make soak`` runs a
longer one with ``python -m tests.chaos``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from contract import PageView
from contract.codec import bounds_from
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import RawRecord, ingest, paced
from ingest.producer import EventProducer
from stack import control, jobs
from stack.services import Service, all_services
from tests.oracle import Recount, first_copies, read_log, recount

log = logging.getLogger("chaos")

ROOT = Path(__file__).resolve().parent.parent
FAULTS = ("speed", "speed", "batch", "kafka", "redis", "ferretdb")
"""Speed-layer kills are drawn twice as often: they are the fault with the most protocol behind it."""

CHAOS_SETTINGS = {
    # A killed batch run's lease is taken over by the next scheduled run soon after.
    "batch_lease_s": "15",
    # Services die on purpose here: the keeper must not give up on a job that could not start
    # while one was down.
    "job_restart_max": "1000",
    "job_restart_backoff_max_s": "5",
}


@dataclass
class Fault:
    at_s: float
    kind: str
    done_at_s: float | None = None
    detail: str = ""


@dataclass
class Report:
    seed: int
    faults: list[Fault] = field(default_factory=list)
    batch_exit_codes: list[int] = field(default_factory=list)
    speed_restarts: int = 0
    events_sent: int = 0


def chaos_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        **settings.to_env(),
        **{f"LAMBDA_{k.upper()}": v for k, v in CHAOS_SETTINGS.items()},
    }


class Scheduler(threading.Thread):
    """``python -m batch_layer run`` every ``every_s`` seconds (as make batch-loop), each run a
    process of its own so that a fault can SIGKILL it."""

    def __init__(self, settings: Settings, every_s: float, out: Path, report: Report) -> None:
        super().__init__(daemon=True, name="batch-scheduler")
        self.env, self.every_s, self.out, self.report = chaos_env(settings), every_s, out, report
        self.stop = threading.Event()
        self.current: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()

    def run_once(self) -> int:
        with self.out.open("ab") as sink, self.lock:
            self.current = subprocess.Popen(
                [sys.executable, "-m", "batch_layer", "run"],
                cwd=ROOT,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        code = self.current.wait()
        self.report.batch_exit_codes.append(code)
        return code

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.run_once()

    def recover(self, attempts: int = 3) -> int:
        """Scheduled runs until one succeeds, at most ``attempts``, a lease apart: a run killed in
        the last seconds still holds its lease, and the next run refuses to start until the lease
        has expired, as ``make batch-loop`` would find it. Returns the last run's exit code."""
        code = self.run_once()
        for _ in range(attempts - 1):
            if code == 0:
                break
            time.sleep(float(CHAOS_SETTINGS["batch_lease_s"]))
            code = self.run_once()
        return code

    def kill_current(self, timeout_s: float) -> str:
        """SIGKILL the run in progress, or the next one as soon as it starts."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                proc = self.current
                if proc is not None and proc.poll() is None:
                    time.sleep(random.uniform(1.0, 6.0))  # somewhere inside the run
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    return f"batch run pid {proc.pid}"
            time.sleep(0.2)
        return "no batch run started in time"


def _service(settings: Settings, name: str) -> Service:
    return next(s for s in all_services(settings) if s.name == name)


def kill_service(settings: Settings, name: str) -> str:
    service = _service(settings, name)
    pid = service.supervised.pid()
    if pid is None:
        return f"{name} was not running"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    time.sleep(1.0)
    control.up(settings, [name])
    return f"{name} pid {pid} killed and started again"


def kill_speed(settings: Settings) -> str:
    pid = jobs.job_process(settings, "speed").pid()
    if pid is None:
        return "the speed layer was not running (its keeper is restarting it)"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return f"speed layer pid {pid}"


def traffic(
    settings: Settings, rate: int, seconds: float, seed: int, stop: threading.Event, sent: list[int]
) -> None:
    """Irregular traffic (duplicates, late and out-of-order events, malformed records) at ``rate``."""
    generator = TrafficGenerator(
        GeneratorConfig(
            total=int(rate * seconds),
            seed=seed,
            urls=200,
            visitors=3_000,
            span_hours=6.0,
            duplicate_fraction=0.05,
            late_fraction=0.05,
            out_of_order_fraction=0.1,
            malformed_fraction=0.005,
        )
    )

    def records() -> Iterator[RawRecord]:
        for record in paced(generator, rate):
            if stop.is_set():
                return
            sent[0] += 1
            yield record

    ingest(records(), EventProducer(settings), source="chaos", bounds=bounds_from(settings))


def run(
    settings: Settings,
    *,
    faults: int,
    seconds: float,
    rate: int,
    batch_every_s: float,
    seed: int,
    wait_for: Callable[[Settings, float], None],
) -> Report:
    """Run the chaos and return what happened; ``wait_for(settings, timeout)`` waits until the speed
    layer has caught up with the log (the caller's check)."""
    report = Report(seed=seed)
    rng = random.Random(seed)
    plan = sorted((rng.uniform(0.05, 0.9) * seconds, rng.choice(FAULTS)) for _ in range(faults))
    log.info("chaos seed %d: %s", seed, ", ".join(f"{kind} at {at:.0f} s" for at, kind in plan))
    env = chaos_env(settings)
    started_speed = subprocess.run(
        [sys.executable, "-m", "speed_layer", "start"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert started_speed.returncode == 0, started_speed.stdout + started_speed.stderr
    stop = threading.Event()
    sent = [0]
    producer = threading.Thread(
        target=traffic, args=(settings, rate, seconds * 3, seed, stop, sent), daemon=True, name="traffic"
    )
    scheduler = Scheduler(settings, batch_every_s, settings.log_dir / "chaos-batch.out", report)
    t0 = time.monotonic()
    producer.start()
    scheduler.start()
    try:
        for at, kind in plan:
            time.sleep(max(0.0, at - (time.monotonic() - t0)))
            fault = Fault(at_s=round(time.monotonic() - t0, 1), kind=kind)
            if kind == "speed":
                fault.detail = kill_speed(settings)
            elif kind == "batch":
                fault.detail = scheduler.kill_current(timeout_s=batch_every_s + 120)
            else:
                fault.detail = kill_service(settings, kind)
            fault.done_at_s = round(time.monotonic() - t0, 1)
            log.info("chaos fault %s at %.1f s: %s", kind, fault.at_s, fault.detail)
            report.faults.append(fault)
        time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
    finally:
        stop.set()
        scheduler.stop.set()
        producer.join(120)
        scheduler.join(900)
    report.events_sent = sent[0]
    # The platform recovers by itself: the next scheduled runs, and the speed layer catches up.
    scheduler.recover()
    wait_for(settings, 600.0)
    report.speed_restarts = jobs.status(settings, "speed").restarts
    return report


def log_events(settings: Settings) -> list[PageView]:
    """Every event in the platform's log, duplicates removed (the first copy of each)."""
    records = read_log(settings.kafka_bootstrap, settings.events_topic)
    return [r.event for r in first_copies(records) if r.event]


def recount_log(settings: Settings) -> Recount:
    """The oracle's recount of every event in the platform's log (duplicates removed)."""
    return recount(log_events(settings))


def stop_speed(settings: Settings) -> None:
    subprocess.run(
        [sys.executable, "-m", "speed_layer", "stop"], cwd=ROOT, env=chaos_env(settings), capture_output=True
    )


def main() -> int:
    """``make soak``: the long chaos run on the developer's stack, in a platform of its own."""
    from tests.integration.conftest import assert_merged_matches, isolated_platform
    from tests.integration.speed_layer.test_speed_layer import wait_caught_up

    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--faults", type=int, default=60)
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--rate", type=int, default=1_000)
    parser.add_argument("--batch-every", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    from config.settings import get_settings

    base = get_settings()
    control.up(base)
    root = base.var_dir / "chaos"
    with isolated_platform(base, root, redis_db=5) as settings:
        try:
            report = run(
                settings,
                faults=args.faults,
                seconds=args.minutes * 60,
                rate=args.rate,
                batch_every_s=args.batch_every,
                seed=seed,
                wait_for=lambda s, timeout: wait_caught_up(s, timeout),
            )
        finally:
            stop_speed(settings)
        expected = recount(
            r.event
            for r in first_copies(read_log(settings.kafka_bootstrap, settings.events_topic))
            if r.event
        )
        assert_merged_matches(settings, expected)
    print(
        f"seed {seed}: {len(report.faults)} faults, {report.events_sent:,} events, "
        f"{report.speed_restarts} speed-layer restarts, batch exit codes {report.batch_exit_codes}; "
        "every bucket of every view equals the recount"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
