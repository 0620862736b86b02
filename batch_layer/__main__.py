"""``python -m batch_layer run [--full] | loop --interval S | diff A B | status | accept-gap [--yes]``.

``run`` performs one generation (incremental unless ``--full``) and prints a summary; any failure
exits non-zero with the reason, and the served generation stays as it was. ``accept-gap`` lets the
batch layer go on after retention deleted records it had not absorbed (recorded in the manifest
with who and when); ``status`` lists the generations, the master dataset, accepted gaps and how
close the unabsorbed records are to the topic's retention.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import socket
import sys
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from batch_layer.master import lost_ranges
from config.logs import configure_logging
from config.settings import get_settings
from ingest import log_retention

if TYPE_CHECKING:
    from batch_layer.job import BatchJob


def _print_summary(console: Console, summary: dict[str, object]) -> None:
    table = Table(title=f"generation {summary['gen']} ({summary['kind']})", show_header=False)
    absorbed = int(summary["events_absorbed"])  # type: ignore[call-overload]
    seconds: dict[str, float] = summary["seconds"]  # type: ignore[assignment]
    table.add_row("events absorbed", f"{absorbed:,}")
    table.add_row("invalid records (to DLQ)", f"{summary['invalid_records']:,}")
    for view, days in summary["view_days_recomputed"].items():  # type: ignore[attr-defined]
        docs = summary["documents_written"].get(view, 0)  # type: ignore[attr-defined]
        table.add_row(f"{view}", f"{days} day bucket(s) recomputed, {docs:,} documents written")
    for step, s in seconds.items():
        table.add_row(f"{step} seconds", f"{s:.1f}")
    total = float(summary["total_seconds"])  # type: ignore[arg-type]
    table.add_row("total seconds", f"{total:.1f}")
    table.add_row("absorb rate", f"{absorbed / max(seconds.get('absorb', 0), 1e-9):,.0f} events/s")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m batch_layer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="one batch generation")
    run.add_argument("--full", action="store_true", help="recompute every view from the whole master dataset")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    loop = sub.add_parser("loop", help="scheduled incremental runs")
    loop.add_argument("--interval", type=float, default=300.0, help="seconds between runs")
    diff = sub.add_parser("diff", help="which view values changed between two generations")
    diff.add_argument("a", type=int)
    diff.add_argument("b", type=int)
    sub.add_parser("status", help="the generations and the master dataset")
    gap = sub.add_parser(
        "accept-gap", help="go on after retention deleted records never absorbed (they are lost for good)"
    )
    gap.add_argument("--yes", action="store_true", help="record the gap (without it: only show it)")
    args = parser.parse_args(argv)
    configure_logging("batch.log")
    console = Console(stderr=False)
    settings = get_settings()

    from batch_layer.job import BatchJob

    if args.command == "run":
        job = BatchJob(settings)
        try:
            summary = job.run(full=args.full).as_dict()
        except Exception as exc:
            console.print(f"[bold red]batch run failed:[/] {exc}", highlight=False)
            console.print("the served generation is unchanged")
            return 1
        finally:
            job.close()
        if args.json:
            print(json.dumps(summary))
        else:
            _print_summary(console, summary)
        return 0

    if args.command == "loop":
        job = BatchJob(settings)
        failures = 0
        try:
            while True:
                started = time.monotonic()
                try:
                    _print_summary(console, job.run().as_dict())
                    failures = 0
                except Exception as exc:
                    failures += 1
                    logging.getLogger("batch").error("run failed (%d in a row): %s", failures, exc)
                time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        except KeyboardInterrupt:
            return 0
        finally:
            job.close()

    job = BatchJob(settings)
    try:
        if args.command == "diff":
            from batch_layer.diff import diff_generations

            a, b = job.registry.get(args.a), job.registry.get(args.b)
            if a is None or b is None:
                console.print(f"[red]unknown generation: {args.a if a is None else args.b}[/]")
                return 2
            for d in diff_generations(job.store, a, b):
                console.print(
                    f"[bold]{d.view}[/]: {d.changed:,} changed, {d.unchanged:,} unchanged, "
                    f"{d.only_in_a:,} only in {a.gen}, {d.only_in_b:,} only in {b.gen}"
                )
                for s in d.sample:
                    console.print(f"  {s['day']} {s['key']}: {s['a']} -> {s['b']}")
            return 0
        if args.command == "accept-gap":
            return _accept_gap(console, job, args.yes)
        if job.registry.repair_hot_copy():
            console.print("[yellow]Redis served an older generation than MongoDB: brought it forward[/]")
        table = Table(title="generations")
        for col in ("gen", "kind", "state", "cut", "started", "events absorbed"):
            table.add_column(col)
        for g in job.registry.all():
            table.add_row(
                str(g.gen),
                g.kind,
                g.state,
                json.dumps(g.cut),
                f"{g.started_at:%Y-%m-%d %H:%M:%S}",
                str(g.stats.get("events_absorbed", "")),
            )
        console.print(table)
        segments = job.master.segments()
        console.print(
            f"master dataset: {len(segments)} segments, {sum(s.events for s in segments):,} events, "
            f"{len(job.master.days())} days, absorbed until {job.master.absorbed_until()}"
        )
        for lost in job.master.gaps():
            assert lost.gap is not None
            console.print(
                f"[yellow]accepted gap[/] {lost.ranges} by {lost.gap.get('accepted_by')} at "
                f"{lost.committed_at:%Y-%m-%d %H:%M:%S}: {lost.gap.get('reason')}"
            )
        retention = log_retention.watch(settings, job.master.absorbed_until())
        console.print(f"log retention: {retention.as_dict()}")
        if (warning := retention.warning()) is not None:
            console.print(f"[yellow]{warning}[/]")
        return 0
    finally:
        job.close()


def _accept_gap(console: Console, job: BatchJob, confirmed: bool) -> int:
    """Record in the manifest the offsets retention deleted before they were absorbed, holding the
    batch lease (no run may absorb meanwhile)."""
    from ingest.topics import log_start_offsets

    lost = lost_ranges(job.master.absorbed_until(), log_start_offsets(job.settings))
    if not lost:
        console.print("no gap: every offset retention deleted had been absorbed")
        return 0
    spans = ", ".join(f"partition {p}: offsets {a}..{b} ({b - a:,} records)" for p, (a, b) in lost.items())
    if not confirmed:
        console.print(
            f"lost to retention before absorption: {spans}. Run again with --yes to go on without them."
        )
        return 2
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    with job.lease.held(who) as held:
        held.check("accept the gap")
        served = job.registry.served()
        segment = job.master.accept_gap(served.gen if served else 0, log_start_offsets(job.settings), who)
    if segment is None:
        console.print("no gap any more")
        return 0
    console.print(
        f"[yellow]accepted the gap[/] {segment.segment_id}: {spans}, by {who}; the next run goes on after it"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
