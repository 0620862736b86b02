"""What every benchmark shares: a running stack, machine facts and the JSON result file."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
from rich.console import Console
from tenacity import RetryError, retry, retry_if_exception_type, retry_if_result, stop_after_delay, wait_fixed

from config.settings import PROJECT_ROOT, Settings
from contract.codec import bounds_from
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import ingest, progress_bar
from ingest.producer import EventProducer
from stack import control

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@contextmanager
def running_stack(settings: Settings) -> Iterator[None]:
    """Use the local stack, starting it (and stopping it afterwards) if it is not up."""
    started = control.up(settings)
    try:
        yield
    finally:
        if started:
            control.down(settings, started)


def produce_generated(
    settings: Settings,
    console: Console,
    total: int,
    span_hours: float,
    seed: int,
    now: datetime | None = None,
) -> int:
    """Produce ``total`` generated events (no malformed ones) through the ingest path, with a
    progress bar; returns how many were sent. ``span_hours`` 0 is live traffic stamped now; a
    back-fill spans the ``span_hours`` before ``now`` (default: the clock)."""
    generator = TrafficGenerator(
        GeneratorConfig(total=total, seed=seed, span_hours=span_hours, malformed_fraction=0.0, now=now)
    )
    with progress_bar(console) as progress:
        stats = ingest(
            generator,
            EventProducer(settings),
            source="bench",
            bounds=bounds_from(settings),
            total=total,
            progress=progress,
            description=f"produce {total:,}",
        )
    return stats.sent


def machine() -> dict[str, Any]:
    """The machine and the code a result was measured on (every result file records it)."""
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **provenance(),
    }


def provenance() -> dict[str, Any]:
    """The commit the checkout was at and whether its tracked files differed from it (``dirty``):
    a figure measured on uncommitted code says so. The result files themselves do not count (an
    earlier bench of the same ``make bench`` has just rewritten one). Unknown (no git, not a
    checkout): ``unknown`` and None."""
    try:
        commit = _git("rev-parse", "--short", "HEAD").strip()
        dirty = bool(
            _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results").strip()
        )
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "dirty": None}
    return {"commit": commit, "dirty": dirty}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout


def peak_rss_mib(children: bool = False) -> float:
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024


def write_result(name: str, result: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {
        "benchmark": name,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        **result,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


@retry(
    stop=stop_after_delay(60),
    wait=wait_fixed(0.2),
    retry=retry_if_exception_type(httpx.HTTPError) | retry_if_result(lambda healthy: not healthy),
)
def _wait_healthy(port: int) -> bool:
    """True once the API answers its health check; retried for up to a minute while it starts."""
    return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200


def start_api(
    settings: Settings,
    port: int,
    workers: int = 1,
    root: Path = PROJECT_ROOT,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``python -m api`` on ``port`` with this benchmark's topic, database and Redis db, once healthy:
    ``workers`` uvicorn workers, the code of the checkout at ``root`` (another checkout's API can
    be measured against the same stores), ``extra_env`` on top (other settings)."""
    env = {
        **os.environ,
        **(extra_env or {}),
        "LAMBDA_EVENTS_TOPIC": settings.events_topic,
        "LAMBDA_DLQ_TOPIC": settings.dlq_topic,
        "LAMBDA_MONGO_DB": settings.mongo_db,
        "LAMBDA_REDIS_DB": str(settings.redis_db),
        "LAMBDA_API_PORT": str(port),
        "LAMBDA_VAR_DIR": str(settings.var_dir),
        "LAMBDA_FILTER_TABLE_PATH": settings.filter_table_uri,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "api", "--workers", str(workers)],
        cwd=root,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_healthy(port)
    except RetryError:
        proc.terminate()
        raise SystemExit("the API did not come up") from None
    return proc


def percentiles(ms: list[float]) -> dict[str, float]:
    """Count, p50 and p95 of latencies in milliseconds."""
    ordered = sorted(ms)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2),
    }
