"""``python -m ingest topics | generate | replay FILE``: get events into the log.

Every run ends with a summary (events produced, rejects by reason, failures, rate) and exits
non-zero if Kafka did not acknowledge every record.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

from config.settings import Settings, get_settings
from contract.codec import bounds_from
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import RawRecord, ingest, paced, progress_bar
from ingest.producer import EventProducer, ProduceStats
from ingest.replay import count_lines, read_file
from ingest.topics import ensure_topics


def _for_at_most(records: Iterable[RawRecord], seconds: float | None) -> Iterator[RawRecord]:
    if not seconds:
        yield from records
        return
    deadline = time.monotonic() + seconds
    for n, record in enumerate(records):
        if n % 1024 == 0 and time.monotonic() >= deadline:
            return
        yield record


def _summary(console: Console, title: str, stats: ProduceStats, seconds: float) -> int:
    table = Table(title=title, show_header=False)
    table.add_row("events produced", f"{stats.sent:,}")
    table.add_row("rejected to DLQ", f"{stats.rejected:,}")
    for field, count in sorted(stats.reject_reasons.items(), key=lambda kv: -kv[1]):
        table.add_row(f"  rejected on {field}", f"{count:,}")
    table.add_row("delivery failures", f"{stats.failed:,}")
    table.add_row("seconds", f"{seconds:.1f}")
    table.add_row("records/s", f"{(stats.sent + stats.rejected) / max(seconds, 1e-9):,.0f}")
    console.print(table)
    for error in stats.errors:
        console.print(f"[red]delivery error:[/] {error}")
    return 1 if stats.failed else 0


def _run(
    settings: Settings, console: Console, records: Iterable[RawRecord], total: int | None, source: str
) -> tuple[ProduceStats, float]:
    ensure_topics(settings)
    producer = EventProducer(settings)
    bounds = bounds_from(settings)
    start = time.monotonic()
    with progress_bar(console) as progress:
        stats = ingest(
            records,
            producer,
            source=source,
            bounds=bounds,
            total=total,
            progress=progress,
            description=source,
        )
    return stats, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ingest", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("topics", help="create the events and DLQ topics if missing")

    gen = sub.add_parser("generate", help="produce synthetic traffic")
    gen.add_argument("--events", type=int, default=100_000, help="records to produce (0: unbounded)")
    gen.add_argument("--rate", type=float, default=0, help="records per second (0: as fast as possible)")
    gen.add_argument("--duration", type=float, default=0, help="stop after this many seconds (0: no limit)")
    gen.add_argument("--seed", type=int, default=None, help="fixed seed: same records, same event ids")
    gen.add_argument("--span-hours", type=float, default=0, help="back-fill event times over this span")
    gen.add_argument("--urls", type=int, default=2_000)
    gen.add_argument("--visitors", type=int, default=200_000)
    gen.add_argument("--late", type=float, default=0.01, help="fraction of late events")
    gen.add_argument("--out-of-order", type=float, default=0.05, help="fraction of out-of-order events")
    gen.add_argument("--duplicates", type=float, default=0.01, help="fraction of re-sent events")
    gen.add_argument("--malformed", type=float, default=0.001, help="fraction of malformed records")

    rep = sub.add_parser("replay", help="replay a JSONL or CSV file")
    rep.add_argument("file", type=Path)
    rep.add_argument("--rate", type=float, default=0)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = get_settings()
    console = Console()

    if args.command == "topics":
        for topic, state in ensure_topics(settings).items():
            console.print(f"{topic}: {state}")
        return 0

    if args.command == "generate":
        total = args.events or None
        if args.span_hours and timedelta(hours=args.span_hours + 6) > timedelta(days=settings.max_past_days):
            console.print(
                f"[red]--span-hours exceeds the contract's max_past_days={settings.max_past_days}[/]"
            )
            return 2
        generator = TrafficGenerator(
            GeneratorConfig(
                total=total,
                seed=args.seed,
                urls=args.urls,
                visitors=args.visitors,
                span_hours=args.span_hours,
                late_fraction=args.late,
                out_of_order_fraction=args.out_of_order,
                duplicate_fraction=args.duplicates,
                malformed_fraction=args.malformed,
            )
        )
        console.print(f"generator seed {generator.seed} (event ids {generator.run_id}-*)")
        records = _for_at_most(paced(generator, args.rate), args.duration)
        stats, seconds = _run(settings, console, records, total, "generate")
        g = generator.stats
        console.print(
            f"generated: {g.originals:,} originals, {g.duplicates:,} duplicates, {g.late:,} late, "
            f"{g.out_of_order:,} out of order, {g.malformed:,} malformed"
        )
        return _summary(console, "generate", stats, seconds)

    path: Path = args.file
    if not path.exists():
        console.print(f"[red]no such file: {path}[/]")
        return 2
    records = paced(read_file(path), args.rate)
    stats, seconds = _run(settings, console, records, count_lines(path), f"replay:{path.name}")
    return _summary(console, f"replay {path}", stats, seconds)


if __name__ == "__main__":
    sys.exit(main())
