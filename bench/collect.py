"""Collection bench: requests/s and latency of POST /api/event on one uvicorn worker.

The API (``python -m api``, one worker, its own topics) takes tracker page views
(bench/collect_load.py: pages, referrers, user agents, public addresses behind a listed proxy)
from vegeta's open loop (bench/vegeta.py) at each rate of ``--rates`` for ``--duration`` seconds,
after an unmeasured warm-up. Every answer is a page view produced and acknowledged by Kafka
(acks=all) before the 202; the figures are the rate of 202 answers, the latency percentiles and
the API's CPU per request. vegeta, Kafka, FerretDB and Redis share the machine with the API.
Writes bench/results/collect.json; prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from bench.collect_load import SITE, tracker_posts
from bench.common import running_stack, start_api, write_result
from bench.vegeta import OpenLoop, installed
from config.settings import get_settings
from ingest.topics import ensure_topics

STORES = {
    "events_topic": "bench.collect.events",
    "dlq_topic": "bench.collect.dlq",
    "mongo_db": "bench_collect",
}
"""The bench's own topics and database (the salts of its visitor ids live there)."""


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rates", type=int, nargs="+", default=[1000, 2000, 3000, 4000], help="requests/s")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured per rate")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before the first rate")
    parser.add_argument("--port", type=int, default=None, help="API port (default: settings + 110)")
    args = parser.parse_args(argv)
    console = Console()
    settings = get_settings().model_copy(update=STORES)
    port = args.port or settings.api_port + 110
    load = OpenLoop(installed(settings.cache_dir))
    posts = tracker_posts(f"http://127.0.0.1:{port}/api/event")
    # The API reads its settings from the environment (bench.common.start_api passes it on).
    os.environ["LAMBDA_COLLECT_SITES"] = json.dumps([SITE])
    os.environ["LAMBDA_COLLECT_TRUSTED_PROXIES"] = json.dumps(["127.0.0.1"])
    runs: dict[str, Any] = {}
    load_before = os.getloadavg()
    with running_stack(settings), tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        ensure_topics(settings)
        api = start_api(settings, port)
        try:
            process = psutil.Process(api.pid)
            load.attack(posts, min(args.rates), args.warmup, Path(tmp) / "warmup.bin")
            for rate in args.rates:
                results = Path(tmp) / f"{rate}.bin"
                cpu = _cpu_seconds(process)
                load.attack(posts, rate, args.duration, results)
                cpu = _cpu_seconds(process) - cpu
                figures = load.report(results)
                codes = [code for code, _ in load.answers(results)]
                accepted = codes.count(202)
                runs[str(rate)] = {
                    **figures,
                    "accepted": accepted,
                    "accepted_per_s": round(accepted / args.duration, 1),
                    "status_codes": {str(c): codes.count(c) for c in sorted(set(codes))},
                    "api_cpu_ms_per_request": round(cpu * 1000 / max(1, len(codes)), 3),
                }
        finally:
            api.terminate()
            api.wait(timeout=30)
    table = Table(title="POST /api/event, one uvicorn worker (vegeta open loop)")
    for column in ("offered req/s", "202/s", "other answers", "p50 ms", "p99 ms", "max ms", "API CPU ms/req"):
        table.add_column(column)
    for rate, r in runs.items():
        others = {c: n for c, n in r["status_codes"].items() if c != "202"}
        table.add_row(
            rate,
            f"{r['accepted_per_s']:,.0f}",
            str(others or "-"),
            f"{r['p50_ms']:.2f}",
            f"{r['p99_ms']:.2f}",
            f"{r['max_ms']:.1f}",
            f"{r['api_cpu_ms_per_request']:.3f}",
        )
    console.print(table)
    path = write_result(
        "collect",
        {
            "setup": {
                "workers": 1,
                "seconds_per_rate": args.duration,
                "warmup_seconds": args.warmup,
                "load_tool": "vegeta (open loop)",
                "distinct_requests": len(posts),
                "load_average_before": [round(x, 2) for x in load_before],
                "load_average_after": [round(x, 2) for x in os.getloadavg()],
            },
            "rates": runs,
        },
    )
    console.print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
