"""Speed layer: sustained throughput against its floor, and freshness, with Kafka, Redis, Spark and
the generator on this one machine.

1. Sustained: a backlog of generated events is loaded first; the streaming job then runs with
   ``maxOffsetsPerTrigger`` so each micro-batch holds a fixed slice of it, timed from the end of
   its second micro-batch (warm-up) for at least 60 s. Then, on the same topic from its start,
   with the same slices, the floor (bench/speed_floor.py): the least Spark work for the same
   output (read, parse with the contract schema, the same rows by the speed layer's own function,
   written with its own sinks; no contract verdicts, no dedup, no exactly-once commit). Both rates
   and their ratio, as shipped and again counting page views and visitors only (:data:`VARIANTS`);
   the lag (records behind the log end) is sampled for both, and where each second of a
   micro-batch goes, step by step, beside the floor's (:func:`steps`: the medians of the timed
   micro-batches).
2. Freshness, as a user sees it: the generator produces live traffic at 20,000 events/s
   (``--rate``) while probe events on a site of their own are sent every 100 ms; the API
   (``python -m api``) is asked for that site's page views every 50 ms, and a probe
   is seen when an answer first counts it. p50, p95 and max of (seen - produced). Then the same
   with the floor in place of the speed layer, from the live topic's end with back-to-back
   triggers, writing where the API reads.

Targets: the speed layer's throughput at 85% of its floor or more, its freshness p95 at most 1.5x
its floor's. Absolute figures move from machine to machine; the ratios, measured in the same run,
do not.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import redis
from rich.console import Console

from bench.common import produce_generated, running_stack, start_api, write_result
from config.settings import Settings, get_settings
from contract import PageView
from contract.codec import bounds_from
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import ingest, paced
from ingest.producer import EventProducer
from ingest.topics import delete_topics, ensure_topics, log_end_offsets
from stores.redis import keys

TARGET_RATIO_TO_FLOOR = 0.85
TARGET_FRESHNESS_RATIO = 1.5
"""The speed layer's freshness p95 at most this multiple of its floor's, measured in the same run."""
PROBE_SITE = "probe.example.com"
FLOOR_PROBE_SITE = "probe-floor.example.com"
WARMUP_MICRO_BATCHES = 2
"""Micro-batches a job runs before the sustained rate is timed (bench/speed.py, both jobs)."""
WARMUP_EVENTS = 2_000
"""Events the speed layer counts before the freshness run's live traffic starts."""
FRESHNESS_WARMUP_MICRO_BATCHES = 20
"""Micro-batches of the freshness runs left out of their step medians (the warm-up, the wait for
the job to keep up)."""
PROBE_WAIT_S = 300.0
"""How long, after the last probe, the probes not yet seen are waited for (the live traffic has
stopped by then)."""
FLOOR_REDIS_DB = 4
"""The throughput floor's Redis database (its visit state), apart from the speed layer's."""
FRESHNESS_RATE = 20_000
"""The live traffic of the freshness run, events/s: the rate the target is set at."""


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


def _env(settings: Settings, trigger_s: float, max_offsets: int | None) -> dict[str, str]:
    """The speed layer's process: this benchmark's settings with its trigger and batch size."""
    job = settings.model_copy(
        update={"speed_trigger_s": trigger_s, "speed_max_offsets_per_trigger": max_offsets}
    )
    return {**os.environ, **job.to_env()}


def _fresh(settings: Settings, keep_topic: bool = False) -> redis.Redis:
    """A new topic (unless ``keep_topic``), an empty Redis db and checkpoint: every run measures
    from the same start."""
    if not keep_topic:
        delete_topics(settings, [settings.events_topic])
        ensure_topics(settings)
    shutil.rmtree(Path(settings.speed_checkpoint_uri.removeprefix("file://")), ignore_errors=True)
    r = redis.Redis.from_url(settings.redis_url)
    r.flushdb()
    return r


def _spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A Spark job of this benchmark (``python -m ...``), output to ``log``, in a process group of
    its own so that :func:`_stop` can end its JVM with it."""
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _start_speed(
    settings: Settings, trigger_s: float, max_offsets: int | None, log: Path
) -> subprocess.Popen[bytes]:
    return _spawn(["speed_layer", "run"], _env(settings, trigger_s, max_offsets), log)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to a job of :func:`_spawn` (the speed layer stops its query between two
    micro-batches), then SIGKILL to its whole process group: the Spark JVM is a child of the Python
    process, and outlives it when only the parent is killed (an orphaned JVM would then run through
    the next measurement)."""
    proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(90)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def committed(r: redis.Redis) -> tuple[int, int]:
    """(batch id, events) of the speed layer's last commit in Redis."""
    commit = keys.decode_commit(r.get(keys.SPEED_COMMIT))
    return commit.batch_id, sum(commit.offsets.values())


def _generator(total: int | None, seed: int) -> TrafficGenerator:
    return TrafficGenerator(GeneratorConfig(total=total, seed=seed, malformed_fraction=0.0))


VARIANTS: dict[str, dict[str, Any]] = {
    "every output": {},
    "page views and visitors only": {"count_visits": False, "filter_table": False},
}
"""The sustained run's configurations, each run by the speed layer and by its floor on the same
backlog: as shipped (the visits with their retractions, the filter table, the current visitors),
and counting page views and visitors alone (what the visits and the filter table cost, beside the
guarantees)."""


def sustained(
    base: Settings, console: Console, backlog: int, batch: int, min_seconds: float
) -> dict[str, Any]:
    """The speed layer, then its floor (bench/speed_floor.py), each from the start of the same
    backlog with the same micro-batch size, each timed in its steady state (:func:`_timed`) for
    at least ``min_seconds``: events/s of both and their ratio, as shipped; the same for the
    speed layer and its floor counting page views and visitors only under ``variants``."""
    settings = _settings(base, "sustained")
    delete_topics(settings, [settings.events_topic])
    ensure_topics(settings)
    produce_generated(settings, console, backlog, span_hours=0.0, seed=1)
    end = sum(log_end_offsets(settings).values())
    runs = {
        label: _pair(settings.model_copy(update=update), label, console, batch, end, min_seconds)
        for label, update in VARIANTS.items()
    }
    shipped = runs.pop("every output")
    return {
        **shipped,
        "backlog": backlog,
        "events_per_micro_batch": batch,
        "variants": runs,
    }


def _pair(
    settings: Settings, label: str, console: Console, batch: int, end: int, min_seconds: float
) -> dict[str, Any]:
    """The speed layer and its floor on the loaded topic under ``settings``."""
    r = _fresh(settings, keep_topic=True)
    slug = label.replace(" ", "-")
    log_path = settings.log_dir / f"bench-speed-sustained-{slug}.out"
    console.print(f"speed layer, {label}, {batch:,} events per micro-batch:")
    proc = _start_speed(settings, trigger_s=0.5, max_offsets=batch, log=log_path)
    layer = _timed(console, proc, log_path, lambda: committed(r)[1], end, min_seconds)

    floor_dir = settings.var_dir / "bench" / "speed-floor"
    shutil.rmtree(floor_dir, ignore_errors=True)
    floor_dir.mkdir(parents=True)
    progress = floor_dir / "progress.jsonl"
    floor_log = settings.log_dir / f"bench-speed-floor-{slug}.out"
    console.print(f"floor, {label} (read, parse with the contract schema, the same rows, collect):")
    floor_settings = settings.model_copy(update={"redis_db": FLOOR_REDIS_DB})
    floor_proc = _spawn(
        [
            *("bench.speed_floor", "--topic", settings.events_topic),
            *("--max-offsets", str(batch), "--checkpoint", str(floor_dir / "checkpoint")),
            *("--progress", str(progress)),
        ],
        _env(floor_settings, trigger_s=0.5, max_offsets=batch),
        floor_log,
    )
    floor = _timed(console, floor_proc, floor_log, lambda: _floor_counted(progress), end, min_seconds)
    ratio = layer["events_per_s"] / floor["events_per_s"]
    console.print(
        f"sustained, {label}: speed layer [bold]{layer['events_per_s']:,} events/s[/], floor "
        f"{floor['events_per_s']:,} events/s: [bold]{ratio:.2f}[/] of the floor"
    )
    breakdown = steps(log_path, progress, WARMUP_MICRO_BATCHES)
    show_steps(console, breakdown)
    return {
        "steps": breakdown,
        "events_per_s": layer["events_per_s"],
        "floor_events_per_s": floor["events_per_s"],
        "ratio_to_floor": round(ratio, 3),
        "target_ratio_to_floor": TARGET_RATIO_TO_FLOOR,
        "met": ratio >= TARGET_RATIO_TO_FLOOR,
        "speed_layer": layer,
        "floor": floor,
    }


def _timed(
    console: Console,
    proc: subprocess.Popen[bytes],
    log_path: Path,
    processed: Callable[[], int],
    end: int,
    min_seconds: float,
) -> dict[str, Any]:
    """Events/s of a streaming process working through a backlog, in its steady state: timed from
    the end of its second micro-batch (the JVM's start, code generation and the first Python
    workers are not its throughput: the first two micro-batches take up to twice as long as the
    later ones) for at least ``min_seconds``, or until the backlog is done."""
    samples: list[dict[str, float]] = []
    try:
        seen: set[int] = set()
        while len(seen - {0}) < WARMUP_MICRO_BATCHES:
            if proc.poll() is not None:
                raise RuntimeError(f"the job exited: see {log_path}")
            seen.add(processed())
            time.sleep(0.1)
        t0, done0 = time.monotonic(), processed()
        shown = 0.0
        while True:
            time.sleep(0.25)  # the rate ends at the last micro-batch seen: within 0.25 s of it
            done = processed()
            elapsed = time.monotonic() - t0
            samples.append({"t": round(elapsed, 2), "processed": done - done0, "lag": end - done})
            if elapsed - shown >= 10:
                shown = elapsed
                console.print(f"  {elapsed:5.0f} s  processed {done - done0:,}  lag {end - done:,}")
            if done >= end or (elapsed >= min_seconds and done > done0):
                break
            if proc.poll() is not None:
                raise RuntimeError(f"the job exited: see {log_path}")
    finally:
        _stop(proc)
    # The rate up to the last micro-batch seen: its events arrive all at once.
    last = max(samples, key=lambda s: (s["processed"], -s["t"]))
    rate = last["processed"] / last["t"]
    console.print(f"  {last['processed']:,.0f} events in {last['t']:.0f} s = {rate:,.0f} events/s")
    return {
        "events_processed": last["processed"],
        "seconds": last["t"],
        "events_per_s": round(rate),
        "lag_samples": samples[::4],  # one per second
    }


STEPS = {
    "read": "Kafka, contract, dedup; the keys (materialised)",
    "visits": "visits: the state read, sessionised (before the visits moved into the scan)",
    "views": "the rows: views, visits' deltas, filters; collect",
    "dedup rebuild": "dedup state rebuilt from the log",
    "visit rebuild": "visit state rebuilt from the master dataset and the log",
    "dead letters": "dead letters to Kafka",
    "filter rows": "filter rows encoded",
    "commit": "Redis commit (one transaction)",
}
"""The steps of a micro-batch as its log line names them (speed_layer.job), each timed apart."""

BATCH_LINE = re.compile(
    r"batch (?P<id>\d+): (?P<rows>\d+) rows .* in (?P<seconds>[\d.]+) s \((?P<phases>[^)]*)\)$"
)
"""The speed layer's log line of a committed micro-batch (speed_layer.job)."""


def steps(layer_log: Path, floor_progress: Path, skip: int) -> dict[str, Any]:
    """Where a micro-batch's seconds go, step by step, the speed layer's beside the floor's: the
    medians over the micro-batches after the first ``skip`` (warm-up) of each. The speed layer's
    steps are those of its log line (the read: Kafka, the contract, the dedup and the keys,
    materialised; the visits; the rest of the Spark work, the rows collected; the dead letters;
    the filter rows encoded; the Redis commit) and what is left (the checkpoint's offset log, the
    trigger); the floor's are those of its progress lines (the same steps where it has them), its
    whole micro-batch from one progress line to the next."""
    layer: list[dict[str, float]] = []
    for line in layer_log.read_text(errors="replace").splitlines():
        m = BATCH_LINE.search(line)
        if m is None or int(m["rows"]) == 0:
            continue
        phases: dict[str, float] = {}
        for part in m["phases"].split(", "):  # "views 1.23 s", "dead letters 0.01 s"
            name, _, value = part.removesuffix(" s").rpartition(" ")
            if name:
                phases[name] = float(value)
        layer.append({"rows": float(m["rows"]), "total": float(m["seconds"]), **phases})
    floor_lines = [json.loads(x) for x in floor_progress.read_text().splitlines() if x.strip()]
    floor = [
        {"rows": float(b["events"]), "total": b["at"] - a["at"], **b.get("phases", {})}
        for a, b in itertools.pairwise(floor_lines)
        if b["events"]
    ]

    def medians(batches: list[dict[str, float]]) -> dict[str, float]:
        timed = batches[skip:] or batches
        names = sorted({k for b in timed for k in b} | {"rows", "total", *STEPS})
        found = {
            k: round(statistics.median(b.get(k, 0.0) for b in timed), 3) if timed else 0.0 for k in names
        }
        spent = sum(v for k, v in found.items() if k not in ("rows", "total"))
        found["other"] = round(found["total"] - spent, 3)
        return found

    return {"speed_layer": medians(layer), "floor": medians(floor), "micro_batches": len(layer)}


def show_steps(console: Console, breakdown: dict[str, Any]) -> None:
    layer, floor = breakdown["speed_layer"], breakdown["floor"]
    console.print("where a micro-batch's seconds go (medians, timed micro-batches):")
    console.print(f"  {'step':<50} {'speed layer':>12} {'floor':>8}")
    console.print(
        f"  {'events per micro-batch':<50} {layer.get('rows', 0):>12,.0f} {floor.get('rows', 0):>8,.0f}"
    )
    for key, label in {**STEPS, "other": "offset log, trigger, driver"}.items():
        console.print(f"  {label:<50} {layer.get(key, 0):>12.2f} {floor.get(key, 0):>8.2f}")
    console.print(f"  {'whole micro-batch':<50} {layer.get('total', 0):>12.2f} {floor.get('total', 0):>8.2f}")


def _floor_counted(progress: Path) -> int:
    """Events the floor job counted so far (its progress file: a JSON line per micro-batch)."""
    if not progress.exists():
        return 0
    return sum(json.loads(line)["events"] for line in progress.read_text().splitlines() if line.strip())


def freshness(base: Settings, console: Console, rate: int, seconds: float) -> dict[str, Any]:
    """The speed layer's freshness, then its floor's (bench/speed_floor.py), each under the same
    live traffic and the same probes, read through the same API (:func:`_probed`)."""
    settings = _settings(base, "freshness")
    r = _fresh(settings)
    port = base.api_port + 102
    api = start_api(settings, port)
    try:
        log_path = base.log_dir / "bench-speed-freshness.out"
        # No cap on a micro-batch, as the floor has none: a job that fell behind takes all there is.
        proc = _start_speed(settings, trigger_s=0.25, max_offsets=None, log=log_path)

        def layer_ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"the speed layer exited: see {log_path}")
            return sum(log_end_offsets(settings).values()) - committed(r)[1] < 2 * rate

        try:
            # The job's start (JVM, first micro-batches) is not its freshness: it counts a warm-up
            # before the live traffic begins, so no start-up backlog is left to work off.
            warmup = produce_generated(settings, console, WARMUP_EVENTS, span_hours=0.0, seed=3)
            deadline = time.monotonic() + 300
            while committed(r)[1] < warmup:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"the speed layer did not count its warm-up: see {log_path}")
                time.sleep(0.5)
            console.print(f"freshness, speed layer, {rate:,} events/s, probes through the API:")
            layer = _probed(settings, console, rate, seconds, port, PROBE_SITE, layer_ready)
        finally:
            _stop(proc)

        # The same Redis db: generation 0 and its view marks from the layer's run let the API serve
        # the floor's keys; its probes have a site of their own.
        floor_settings = _settings(base, "freshness-floor")
        delete_topics(floor_settings, [floor_settings.events_topic])
        ensure_topics(floor_settings)
        floor_dir = base.var_dir / "bench" / "freshness-floor"
        shutil.rmtree(floor_dir, ignore_errors=True)
        floor_dir.mkdir(parents=True)
        progress = floor_dir / "progress.jsonl"
        floor_log = base.log_dir / "bench-speed-freshness-floor.out"
        floor_proc = _spawn(
            [
                *("bench.speed_floor", "--topic", floor_settings.events_topic),
                *("--trigger-s", "0", "--starting-offsets", "latest"),
                *("--checkpoint", str(floor_dir / "checkpoint"), "--progress", str(progress)),
            ],
            {**os.environ, **floor_settings.to_env()},
            floor_log,
        )

        def floor_ready() -> bool:
            if floor_proc.poll() is not None:
                raise RuntimeError(f"the floor exited: see {floor_log}")
            return progress.exists() and len(progress.read_text().splitlines()) >= 3

        try:
            console.print("freshness floor (read, from_json, the same rows, one Redis write; back to back):")
            floor = _probed(floor_settings, console, rate, seconds, port, FLOOR_PROBE_SITE, floor_ready)
        finally:
            _stop(floor_proc)
    finally:
        api.terminate()
        api.wait(30)
    ratio = layer["p95_s"] / floor["p95_s"]
    console.print(
        f"freshness p95: speed layer [bold]{layer['p95_s']:.2f} s[/], floor {floor['p95_s']:.2f} s: "
        f"[bold]{ratio:.2f}x[/] the floor (target <= {TARGET_FRESHNESS_RATIO}x)"
    )
    breakdown = steps(log_path, progress, FRESHNESS_WARMUP_MICRO_BATCHES)
    show_steps(console, breakdown)
    return {
        "steps": breakdown,
        "events_per_s": rate,
        "measured_through": "GET /v1/pageviews of the probes' site, polled every 50 ms",
        "speed_layer": layer,
        "floor": floor,
        "p95_ratio_to_floor": round(ratio, 3),
        "target_p95_ratio_to_floor": TARGET_FRESHNESS_RATIO,
        "met": ratio <= TARGET_FRESHNESS_RATIO,
    }


def _probed(
    settings: Settings,
    console: Console,
    rate: int,
    seconds: float,
    port: int,
    site: str,
    ready: Callable[[], bool],
) -> dict[str, Any]:
    """Freshness as a user sees it: live traffic at ``rate`` into the settings' topic, and once
    ``ready()`` (the job keeps up; at most 120 s, else the result says it did not), a probe event
    on ``site`` every 100 ms for ``seconds``; then the traffic stops and the probes not seen yet
    are waited for (:data:`PROBE_WAIT_S`), so a job that fell behind is measured by how far. The
    API is asked for the site's page views every 50 ms, and a probe is seen when an answer first
    counts it (the probes share one visitor, hence one partition, so they become visible in the
    order they were sent)."""
    sent: list[float] = []
    seen: dict[int, float] = {}
    stop, polled = threading.Event(), threading.Event()
    traffic = threading.Thread(target=live_traffic, args=(settings, rate, seconds + 600, stop), daemon=True)
    traffic.start()
    try:
        deadline = time.monotonic() + 120
        while not (caught_up := ready()) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not caught_up:
            console.print("  [yellow]the job is still behind the live traffic after 120 s; probing anyway[/]")
        poller = threading.Thread(target=_poll_api, args=(port, site, sent, seen, polled), daemon=True)
        poller.start()
        probes = EventProducer(settings, **{"linger.ms": 1})  # type: ignore[arg-type]
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < seconds:
            url = f"https://{site}/p/{n}"
            sent.append(time.time())
            probes.add(
                PageView(
                    event_id=f"probe-{n}-{time.time_ns()}", ts=datetime.now(UTC), visitor_id="probe", url=url
                )
            )
            probes.poll(0)
            n += 1
            time.sleep(0.1)
        probes.flush()
        # The live traffic ends with the probes; a job that fell behind works off what it left
        # and its last probes are seen late, not never (up to PROBE_WAIT_S).
        stop.set()
        deadline = time.monotonic() + PROBE_WAIT_S
        while len(seen) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        polled.set()
    delays = sorted(seen[i] - sent[i] for i in seen)
    if not delays:
        raise RuntimeError(f"no probe of {site} was seen through the API in {PROBE_WAIT_S} s")
    p50 = statistics.median(delays)
    p95 = delays[int(0.95 * (len(delays) - 1))]
    missing = len(sent) - len(seen)
    console.print(
        f"  p50 [bold]{p50:.2f} s[/], p95 [bold]{p95:.2f} s[/], max {delays[-1]:.2f} s over {len(delays)} "
        f"probes ({missing} not seen)"
    )
    return {
        "caught_up_before_probes": caught_up,
        "probes": len(sent),
        "probes_not_seen": missing,
        "p50_s": round(p50, 3),
        "p95_s": round(p95, 3),
        "max_s": round(delays[-1], 3),
    }


def live_traffic(settings: Settings, rate: int, seconds: float, stop: threading.Event) -> None:
    def records() -> Any:
        for record in paced(_generator(int(rate * seconds), seed=2), rate):
            if stop.is_set():
                return
            yield record

    ingest(records(), EventProducer(settings), source="bench", bounds=bounds_from(settings))


def _poll_api(port: int, site: str, sent: list[float], seen: dict[int, float], stop: threading.Event) -> None:
    """Every 50 ms, the site's page views today through the API: probes 0..total-1 are visible."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    params = {
        "site": site,
        "granularity": "day",
        "from": today.isoformat().replace("+00:00", "Z"),
        "to": (today + timedelta(days=1)).isoformat().replace("+00:00", "Z"),
    }
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
        while not stop.is_set():
            answer = client.get("/v1/pageviews", params=params)
            now = time.time()
            if answer.status_code == 200:
                total = int(answer.json()["total"])
                for i in range(min(total, len(sent))):
                    seen.setdefault(i, now)
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=3_500_000)
    parser.add_argument("--batch", type=int, default=500_000, help="events per micro-batch (sustained)")
    parser.add_argument(
        "--min-seconds", type=float, default=60.0, help="each job timed for at least this long (sustained)"
    )
    parser.add_argument("--freshness-seconds", type=float, default=60.0)
    parser.add_argument(
        "--rate", type=int, default=FRESHNESS_RATE, help="events/s of live traffic during the freshness runs"
    )
    parser.add_argument(
        "--freshness-only",
        action="store_true",
        help="no sustained runs; the result goes to speed_freshness_<rate>.json (the defaults' stays)",
    )
    args = parser.parse_args()
    console = Console()
    base = get_settings()
    with running_stack(base):
        result: dict[str, Any] = {}
        if not args.freshness_only:
            result["sustained"] = sustained(base, console, args.backlog, args.batch, args.min_seconds)
        result["freshness"] = freshness(base, console, args.rate, args.freshness_seconds)
        path = write_result(f"speed_freshness_{args.rate}" if args.freshness_only else "speed", result)
        console.print(f"results: {path}")


if __name__ == "__main__":
    main()
