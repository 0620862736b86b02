"""The benchmark figures quoted in the README and docs/, written from the JSON results only.

A figure is a reference to a value of a result file, ``{RESULT:PATH}`` or ``{RESULT:PATH:SPEC}``:
the value at ``PATH`` (keys and list indexes separated by ``/``; a last segment ``*`` sums the
values below) of ``bench/results/RESULT.json``, formatted with the format ``SPEC`` (``,.0f``,
``.1%``...; ``met`` writes a boolean as "met" or "not met"). Two places hold figures:

- a table, between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``: rendered from
  :data:`TABLES` [NAME] (rows of cells with references), followed by where each figure comes from:
  the result file, the run's end, its commit and dirty flag, and the command that produced it;
- a figure in prose, ``<!-- figure:TEMPLATE -->TEXT<!-- /figure -->``: ``TEXT`` is ``TEMPLATE``
  with its references rendered.

``python -m bench.figures`` rewrites both in the README and docs/ from the results;
``python -m bench.figures --check`` changes nothing and exits 1 naming every place that differs
(``tests/unit/bench/test_figures.py`` runs it, so a figure edited by hand or a result that changed
without its docs fails the tests). Run it after a benchmark wrote a new result.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
DOCUMENTS = ("README.md", "docs/*.md")
"""Where figures may be quoted (globs under the repository root)."""

COMMANDS = {
    "api": "make bench-api (python -m bench.api)",
    "batch": "make bench (python -m bench.batch)",
    "batch_filters": "python -m bench.batch --filter-table-cost --events 500000 --filter-table-repeat 3",
    "contract": "make bench-contract (python -m bench.contract --compare --layers)",
    "filters": "make bench-filters (python -m bench.filters)",
    "ingest": "make bench (python -m bench.ingest)",
    "render": "make bench (python -m bench.render)",
    "soak": "make bench-soak (python -m bench.soak)",
    "speed": "make bench-speed (python -m bench.speed)",
    "speed_freshness_5000": "python -m bench.speed --freshness-only --rate 5000",
    "views": "make bench-views (python -m bench.views)",
    "visits": "make bench-visits (python -m bench.visits)",
}
"""The command that writes each result (a result that records its own ``command`` says it)."""

REFERENCE = re.compile(r"\{([a-z][a-z0-9_]*):([^:{}]+)(?::([^{}]*))?\}")
TABLE = re.compile(r"(<!-- figures:([a-z0-9-]+) -->\n)(.*?)(<!-- /figures:\2 -->)", re.S)
INLINE = re.compile(r"(<!-- figure:(.*?) -->)(.*?)(<!-- /figure -->)", re.S)


class FigureError(Exception):
    """A reference that does not resolve (no such result, path or table)."""


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    """A sentence printed under the table, before where its figures come from."""


@cache
def result(name: str) -> dict[str, Any]:
    path = RESULTS_DIR / f"{name}.json"
    if not path.exists():
        raise FigureError(f"no result {path.relative_to(ROOT)}")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _step(node: Any, segment: str, where: str) -> Any:
    if isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
        return node[int(segment)]
    if isinstance(node, dict) and segment in node:
        return node[segment]
    raise FigureError(f"{where}: no {segment!r}")


def value(name: str, path: str) -> Any:
    """The value at ``path`` of result ``name`` (a ``*`` last segment: the sum of the values)."""
    node: Any = result(name)
    segments = path.split("/")
    for segment in segments[:-1] if segments[-1] == "*" else segments:
        node = _step(node, segment, f"{name}:{path}")
    if segments[-1] == "*":
        return sum(node.values())
    return node


def run_of(name: str, path: str) -> tuple[str, dict[str, Any]]:
    """The run a figure comes from: the deepest object on its path that records ``finished_at``
    (a result file, or one run of a file that keeps several), with its path."""
    node: Any = result(name)
    found, where = node, ""
    segments = [s for s in path.split("/") if s != "*"]
    for i, segment in enumerate(segments):
        node = _step(node, segment, f"{name}:{path}")
        if isinstance(node, dict) and "finished_at" in node:
            found, where = node, "/".join(segments[: i + 1])
    return where, found


def render_template(template: str) -> str:
    def one(m: re.Match[str]) -> str:
        v = value(m[1], m[2])
        if m[3] == "met":
            return "met" if v else "not met"
        return format(v, m[3]) if m[3] else str(v)

    return REFERENCE.sub(one, template)


def _provenance(run: dict[str, Any]) -> str:
    machine = run.get("machine", {})
    dirty = machine.get("dirty")
    state = {True: "uncommitted changes", False: "clean"}.get(dirty, "dirty flag not recorded")
    note = f"; {machine['commit_note']}" if "commit_note" in machine else ""
    return f"finished {run.get('finished_at', '?')}, commit {machine.get('commit', '?')} ({state}{note})"


def sources(templates: Sequence[str]) -> list[str]:
    """Where the figures of ``templates`` come from, one line per run, in order of appearance."""
    seen: dict[tuple[str, str], str] = {}
    for template in templates:
        for m in REFERENCE.finditer(template):
            where, run = run_of(m[1], m[2])
            if (m[1], where) in seen:
                continue
            label = f"`bench/results/{m[1]}.json`" + (f" `{where}`" if where else "")
            command = run.get("command") or COMMANDS.get(m[1], "?")
            seen[(m[1], where)] = f"{label}: {_provenance(run)}; `{command.strip()}`"
    return list(seen.values())


def render_table(table: Table) -> str:
    lines = ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(render_template(c) for c in row) + " |" for row in table.rows]
    out = "\n".join(lines) + "\n\n"
    if table.note:
        out += render_template(table.note) + "\n\n"
    origin = sources([c for row in (*table.rows, (table.note,)) for c in row])
    out += "Generated by `python -m bench.figures` from:\n\n" + "".join(f"- {line}\n" for line in origin)
    return out


def rendered(text: str) -> str:
    """``text`` with every table and inline figure rendered from the results."""

    def table(m: re.Match[str]) -> str:
        if m[2] not in TABLES:
            raise FigureError(f"no table {m[2]!r} in bench.figures.TABLES")
        return m[1] + render_table(TABLES[m[2]]) + m[4]

    text = TABLE.sub(table, text)
    return INLINE.sub(lambda m: m[1] + render_template(m[2]) + m[4], text)


def documents() -> Iterator[Path]:
    for pattern in DOCUMENTS:
        yield from sorted(ROOT.glob(pattern))


def stale() -> list[str]:
    """The documents whose figures differ from the results, each with the first place it does."""
    out = []
    for path in documents():
        text = path.read_text()
        new = rendered(text)
        if new != text:
            pairs = zip(text.splitlines(), new.splitlines(), strict=False)
            line = next((i for i, (a, b) in enumerate(pairs, 1) if a != b), len(text.splitlines()))
            out.append(f"{path.relative_to(ROOT)}:{line}: differs from bench/results")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a figure differs")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale()
        print("\n".join(problems) or "every quoted figure equals its result")
        return 1 if problems else 0
    for path in documents():
        text = path.read_text()
        new = rendered(text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.relative_to(ROOT)}")
    return 0


# --- the tables -------------------------------------------------------------------------------------
_API = "api:queries/{q}"
_STORE = "store:runs/{run}"
_WEEK_AFTER = "store:runs/after-2026-11-23/serving_reader_7_day_query_cold/max_concurrent_4"


def _api_row(what: str, q: str) -> tuple[str, ...]:
    a = _API.format(q=q)
    return (
        what,
        f"{{{a}/requests_per_s:,.0f}} req/s ({{{a}/healthz_ratio:.2f}}x /healthz), "
        f"p50 {{{a}/p50_ms:.1f}} ms, p99 {{{a}/p99_ms:.1f}} ms",
        "{api:targets/healthz_ratio}x the rate of /healthz on the same worker, p99 <= "
        "{api:targets/p99_ms:.0f} ms ({" + a + "/met_target:met})",
    )


def _throughput_row(label: str, root: str, workers: str) -> tuple[str, ...]:
    """One API measured by bench.api (``root``: the result itself or its ``baseline``)."""
    w = f"api:{root}by_workers/{workers}"
    cells = [label, f"{{{w}/healthz/requests_per_s:,.0f}} ({{{w}/healthz/api_cpu_ms_per_request:.2f}} ms)"]
    for q in ("pageviews_30d_daily_site", "pageviews_7d_hourly_url", "unique_visitors_7d_url"):
        f = f"{w}/queries/{q}"
        cells.append(
            f"{{{f}/requests_per_s:,.0f}} = {{{f}/healthz_ratio:.2f}}x, p99 {{{f}/p99_ms:.1f}} ms, "
            f"{{{f}/api_cpu_ms_per_request:.2f}} ms"
        )
    return tuple(cells)


def _store_row(layout: str, run: str) -> tuple[str, ...]:
    r = _STORE.format(run=run)
    return (
        layout,
        f"{{{r}/writes/0/docs_per_s:,}}",
        f"{{{r}/writes/0/ferretdb_cpu_ms_per_doc:.2f}} ms",
        f"{{{r}/read_by_id/cold/p50_ms}} ms",
        f"{{{r}/serving_reader_7_day_query_cold/max_concurrent_4/p50_ms}} ms",
    )


def _filters_floor(q: str) -> str:
    """The floor of one query of bench.filters, and the API's latency over it."""
    f = f"filters:queries/{q}"
    return (
        f"p50 {{{f}/floor/p50_ms:.1f}} ms, p95 {{{f}/floor/p95_ms:.1f}} ms, p99 {{{f}/floor/p99_ms:.1f}} ms, "
        f"{{{f}/floor/cpu_ms_per_query:.1f}} ms CPU per query: the API takes "
        f"**{{{f}/p50_ratio_to_floor:.2f}}x** its time at p50, **{{{f}/p95_ratio_to_floor:.2f}}x** at p95"
    )


TABLES: dict[str, Table] = {
    "api-throughput": Table(
        (
            "API (commit), uvicorn workers",
            "/healthz req/s (CPU/req)",
            "30-day daily pageviews of a site",
            "7-day hourly pageviews of a URL",
            "7-day daily unique visitors of a URL",
        ),
        (
            _throughput_row("before: {api:baseline/label}, 1 worker", "baseline/", "1"),
            _throughput_row("after: {api:machine/commit}, 1 worker", "", "1"),
            _throughput_row("answer cache off: {api:machine/commit}, 1 worker", "answer_cache_off/", "1"),
            _throughput_row("before: {api:baseline/label}, 2 workers", "baseline/", "2"),
            _throughput_row("after: {api:machine/commit}, 2 workers", "", "2"),
        ),
        "Each query cell: requests/s = its share of the same API's /healthz rate, p99, API CPU per "
        "request (all workers). One run of `python -m bench.api --baseline <checkout of the "
        "baseline> --baseline-label <it>`: both APIs against the same data, one after the other, "
        "{api:setup/connections} connections, {api:setup/seconds_per_query:.0f} s measured per URL "
        "after {api:setup/warmup_seconds_per_query:.0f} s of warm-up; load average "
        "{api:setup/load_average_before/0} before and {api:setup/load_average_after/0} after. "
        "Meanwhile a stand-in of the speed layer (bench/commits.py) committed every "
        "{api:commit_interval_s:g} s, through the speed layer's commit transaction, adding page views "
        "to the queried keys: every commit makes each cached answer stale. Answer cache hit rate of "
        "the 1-worker run (its /metrics): "
        + ", ".join(
            f"{{{_API.format(q=q)}/answer_cache/hit_rate:.3f}} ({{{_API.format(q=q)}/answer_cache/hits:,}} "
            f"hits, {{{_API.format(q=q)}/answer_cache/misses}} misses, "
            f"{{{_API.format(q=q)}/answer_cache/commits}} commits)"
            for q in ("pageviews_30d_daily_site", "pageviews_7d_hourly_url", "unique_visitors_7d_url")
        )
        + " for the three queries in order.",
    ),
    "readme-benchmarks": Table(
        ("benchmark", "figure", "target"),
        (
            (
                "ingest pipeline (`bench/ingest.py`): validate + encode + produce, acks=all, idempotence, "
                "{ingest:pipeline/records:,} records",
                "{ingest:pipeline/records_per_s:,} records/s (median of 3)",
                "{ingest:target_records_per_s:,}",
            ),
            (
                "ingest end to end: the generator feeding the same path",
                "{ingest:end_to_end/records_per_s:,} records/s (median of 3)",
                "-",
            ),
            (
                "shared pass (`make bench-views`, defaults): {views:events:,} events cached, all five "
                "dimensions, no-op sink, beside the two-view code of before in the same run",
                "batch {views:views/five_dimensions/batch/events_per_s:,} events/s, "
                "{views:views/five_dimensions/batch/stages} stages (before: "
                "{views:views/two_views_before/batch/events_per_s:,}, "
                "{views:views/two_views_before/batch/stages}); micro-batch of 20K: p50 "
                "{views:views/five_dimensions/micro_batch/p50_seconds} s (before: "
                "{views:views/two_views_before/micro_batch/p50_seconds} s); micro-batch of 200K: "
                "{views:views/five_dimensions/micro_batch/large_events_per_s:,} events/s (before: "
                "{views:views/two_views_before/micro_batch/large_events_per_s:,})",
                "five dimensions not below the two views of before: "
                "{views:five_over_two_before/batch:.2f}x batch, {views:five_over_two_before/speed:.2f}x "
                "speed, [docs/views.md](docs/views.md#figures)",
            ),
            (
                "batch full recompute (`bench/batch.py`, defaults; {batch:bench_seconds/total} s from an "
                "empty var dir): {batch:full_recompute/events:,} events over the 29 days before today, all "
                "five dimensions, exact uniques and HLL, {batch:full_recompute/documents_written/*:,} "
                "day documents written",
                "{batch:full_recompute/events_per_s:,} events/s ({batch:full_recompute/seconds} s), "
                "peak RSS {batch:full_recompute/peak_rss_mib:,} MiB (driver heap "
                "{batch:spark/driver_memory})",
                "peak RSS <= 4 GB",
            ),
            (
                "its floor, same run, same JVM, same master dataset: the shared pass's own plan into a "
                "no-op sink (dedup, page views, exact and HLL visitors per key, hour and day, no documents)",
                "{batch:full_recompute/floor_events_per_s:,} events/s ({batch:full_recompute/floor_seconds} "
                "s): the recompute is **{batch:full_recompute/ratio_to_floor:.2f}** of it",
                ">= {batch:targets/full_ratio_to_floor:.2f} of the floor",
            ),
            (
                "batch incremental run: {batch:incremental/new_events:,} new events on top, steady state "
                "(it recomputes the days they fall on, holding "
                "{batch:incremental/events_in_days_recomputed:,} "
                "events)",
                "{batch:incremental/seconds} s = **{batch:incremental/share_of_full:.1%}** of the full "
                "recompute (absorb {batch:incremental/steps_seconds/absorb} s, views "
                "{batch:incremental/steps_seconds/views} s)",
                "<= {batch:targets/incremental_share_of_full:.0%}",
            ),
            (
                "batch incremental run right after a full recompute",
                "{batch:first_incremental_after_full/seconds} s = "
                "{batch:first_incremental_after_full/share_of_full:.1%}",
                "-",
            ),
            (
                "speed layer sustained (`make bench-speed`, defaults): {speed:sustained/backlog:,}-event "
                "backlog, {speed:sustained/events_per_micro_batch:,} events per micro-batch, timed after "
                "two warm-up micro-batches; Kafka + the whole contract + dedup + every shipped view (the "
                "visits with their retractions, the filter table, the current visitors) + Redis; last run "
                "{speed:finished_at}, on a machine about half as fast as the one of the run before (03:25 "
                "UTC: 18,491 events/s, 1.03 of its floor); at 20,000 events/s of live traffic the job falls "
                "behind here, so the freshness rows below time a growing backlog",
                "{speed:sustained/events_per_s:,} events/s",
                "-",
            ),
            (
                "its floor, same run, same backlog and micro-batches (`bench/speed_floor.py`): Kafka + "
                "`from_json` + the same rows by the speed layer's own function (`speed_layer/outputs.py`), "
                "one generation, collected, the visit state written back",
                "{speed:sustained/floor_events_per_s:,} events/s: the speed layer is "
                "**{speed:sustained/ratio_to_floor:.2f}** of it ([docs/speed-floor.md](docs/speed-floor.md))",
                ">= {speed:sustained/target_ratio_to_floor:.2f} of the floor",
            ),
            (
                "the same two, same run, counting page views and visitors only (no visits, no filter table)",
                "{speed:sustained/variants/page views and visitors only/events_per_s:,} against "
                "{speed:sustained/variants/page views and visitors only/floor_events_per_s:,} events/s: "
                "**{speed:sustained/variants/page views and visitors only/ratio_to_floor:.2f}** of the floor",
                "-",
            ),
            (
                "speed layer freshness as a user sees it: live generator at "
                "{speed:freshness/events_per_s:,} events/s on the same 2 cores, a probe event every 100 "
                "ms, `GET /v1/pageviews` of the probes' site every 50 ms",
                "p50 {speed:freshness/speed_layer/p50_s:.2f} s, p95 {speed:freshness/speed_layer/p95_s:.2f} "
                "s, max {speed:freshness/speed_layer/max_s:.2f} s ({speed:freshness/speed_layer/probes} "
                "probes, {speed:freshness/speed_layer/probes_not_seen} not seen by the end)",
                "-",
            ),
            (
                "its freshness floor, same traffic and probes through the same API "
                "(`bench/speed_floor.py`, back-to-back micro-batches): Kafka + `from_json` + the same "
                "rows + one Redis transaction",
                "p50 {speed:freshness/floor/p50_s:.2f} s, p95 {speed:freshness/floor/p95_s:.2f} s "
                "({speed:freshness/floor/probes} probes, {speed:freshness/floor/probes_not_seen} not seen): "
                "the speed layer's p95 is **{speed:freshness/p95_ratio_to_floor:.1f}x** it",
                "<= {speed:freshness/target_p95_ratio_to_floor}x the floor",
            ),
            (
                "what visits cost (`make bench-visits`, defaults): the batch recompute's shared pass over "
                "{visits:batch/events:,} events, and the speed layer's sustained rate in micro-batches of "
                "{visits:speed/events_per_micro_batch:,}, each with and without visits in the same run",
                "batch {visits:batch/events_per_s/with visits:,} against "
                "{visits:batch/events_per_s/without visits:,} events/s: time "
                "**x{visits:batch/time_ratio:.2f}**; speed {visits:speed/events_per_s/with visits:,.0f} "
                "against {visits:speed/events_per_s/without visits:,.0f} events/s: time "
                "**x{visits:speed/time_ratio:.2f}**; visit state "
                "{visits:speed/state/bytes_per_visitor_day:,} bytes of heap per visitor-day "
                "([docs/visits.md](docs/visits.md#cost))",
                "time x{visits:batch/target_time_ratio} or less in each layer: batch "
                "{visits:batch/met:met}, speed {visits:speed/met:met}",
            ),
            (
                "batch view store (`bench/store.py`, defaults): {store:runs/after/documents:,} documents "
                "shaped as Spark stores them ({store:runs/after/document_kb_bson} KB), written through the "
                "executors' insert code into FerretDB by two processes",
                "**{store:runs/after/writes/0/docs_per_s:,} docs/s**, FerretDB CPU "
                "{store:runs/after/writes/0/ferretdb_cpu_ms_per_doc:.2f} ms per document (the hours as "
                "three arrays, the layout before: {store:runs/hours-as-arrays/writes/0/docs_per_s:,} docs/s, "
                "{store:runs/hours-as-arrays/writes/0/ferretdb_cpu_ms_per_doc:.2f} ms; "
                "[docs/ferretdb.md](docs/ferretdb.md))",
                "10,000 docs/s",
            ),
            (
                "batch view store: read by `_id`, cold, {store:runs/after/documents:,}-document collection",
                "p50 {store:runs/after/read_by_id/cold/p50_ms} ms, p95 "
                "{store:runs/after/read_by_id/cold/p95_ms} ms",
                "p50 <= 5 ms",
            ),
            (
                "serving reader: cold 7-day query (8 documents, nothing cached)",
                "p50 {store:runs/after/serving_reader_7_day_query_cold/max_concurrent_4/p50_ms:.1f} ms, "
                "p95 {store:runs/after/serving_reader_7_day_query_cold/max_concurrent_4/p95_ms:.1f} ms",
                "<= 50 ms",
            ),
            _api_row(
                "API (`bench/api.py`, defaults), one uvicorn worker, 8 connections, 10M events: 7-day "
                "hourly pageviews of one URL",
                "pageviews_7d_hourly_url",
            ),
            _api_row(
                "API: 7-day unique visitors of one URL (daily, HLL unions, realtime included)",
                "unique_visitors_7d_url",
            ),
            _api_row("API: 30-day daily pageviews of a site", "pageviews_30d_daily_site"),
            (
                "API, same run: the first query of a key the warm worker has not read yet",
                "7-day hourly pageviews of {api:first_query_of_uncached_keys/pageviews_7d_hourly_url/n} "
                "URLs: p50 {api:first_query_of_uncached_keys/pageviews_7d_hourly_url/p50_ms} ms, p95 "
                "{api:first_query_of_uncached_keys/pageviews_7d_hourly_url/p95_ms} ms; 30-day daily "
                "pageviews of the other site: "
                "{api:first_query_of_uncached_keys/pageviews_30d_daily_site_ms/blog.example.com} ms; 7-day "
                "hourly unique visitors of the loaded site, the first read of its hour sketches: "
                "{api:first_query_of_uncached_keys/unique_visitors_7d_hourly_site_hour_sketches_ms} ms",
                "<= {api:first_query_of_uncached_keys/target_ms:.0f} ms",
            ),
            (
                "the batch layer's cost with the filter table (`python -m bench.batch --filter-table-cost`): "
                "full recomputes of {batch_filters:events:,} events, alternating without and with the "
                "table, {batch_filters:rounds} rounds, medians",
                "{batch_filters:variants/on MEMORY_AND_DISK zstd/ratio_to_off:.2f}x "
                "({batch_filters:variants/on MEMORY_AND_DISK zstd/median_seconds} s with, "
                "{batch_filters:off_median_seconds} s without; the table's own write "
                "{batch_filters:variants/on MEMORY_AND_DISK zstd/table_write_median_seconds} s)",
                "<= {batch_filters:target_ratio}x "
                "({batch_filters:variants/on MEMORY_AND_DISK zstd/met_target:met})",
            ),
            (
                "combined filters (`make bench-filters`, defaults), one worker, {filters:events:,} events "
                "plus {filters:realtime_rows:,} realtime rows: narrow filter (a page, a country and a "
                "device over 7 days: three `is`)",
                "p50 {filters:queries/narrow/p50_ms:.1f} ms, p95 {filters:queries/narrow/p95_ms:.1f} ms, "
                "p99 {filters:queries/narrow/p99_ms:.1f} ms, {filters:queries/narrow/cpu_ms_per_query:.1f} "
                "ms CPU per query",
                "p95 <= {filters:queries/narrow/target_p95_ms:.0f} ms ({filters:queries/narrow/met:met})",
            ),
            (
                "its floor, same run (load average {filters:load_average_before/0:.2f} before, "
                "{filters:load_average_after/0:.2f} after, 2 cores shared): DuckDB alone in the bench "
                "process, hand-written SQL over the same {filters:queries/narrow/floor/batch_files} "
                "Parquet files (the week has no realtime rows), one connection, {filters:floor/threads} "
                "thread as the API's scans; the same answer, checked before timing",
                _filters_floor("narrow"),
                "-",
            ),
            (
                "combined filters: visitors and page views per referrer of one country's mobile "
                "visitors over 30 days (a filtered breakdown with exact visitors)",
                "p50 {filters:queries/breakdown/p50_ms:.1f} ms, p95 {filters:queries/breakdown/p95_ms:.1f} "
                "ms, p99 {filters:queries/breakdown/p99_ms:.1f} ms, "
                "{filters:queries/breakdown/cpu_ms_per_query:.1f} ms CPU per query",
                "p95 <= {filters:queries/breakdown/target_p95_ms:.0f} ms "
                "({filters:queries/breakdown/met:met})",
            ),
            (
                "its floor, same run: the same {filters:queries/breakdown/floor/batch_files} Parquet files "
                "and the {filters:queries/breakdown/floor/realtime_rows:,} realtime rows as an Arrow table",
                _filters_floor("breakdown"),
                "-",
            ),
        ),
    ),
    "readme-contract": Table(
        ("", "before (shape checks)", "whole contract"),
        (
            (
                "batch layer: absorb + the views it feeds, {contract:batch_layer/events:,} valid events",
                "baseline",
                "{contract:batch_layer/throughput_drop:.1%} slower (target <= 10%)",
            ),
            (
                "speed layer: sustained events/s, {contract:speed_layer/backlog:,} backlog, median of 3 runs",
                "{contract:speed_layer/median_events_per_s/legacy:,} events/s",
                "{contract:speed_layer/median_events_per_s/current:,} events/s, "
                "{contract:speed_layer/throughput_drop:.1%} slower (target <= 10%)",
            ),
            (
                "the parse alone, batch absorb (parse + segment write), seconds per million valid records",
                "{contract:legacy_absorb_seconds_per_million}",
                "{contract:current_absorb_seconds_per_million}",
            ),
            (
                "the parse alone, speed stream (parse + watermark + dedup), seconds per million valid "
                "records",
                "{contract:legacy_stream_seconds_per_million}",
                "{contract:current_stream_seconds_per_million}",
            ),
            (
                "records that need the contract's Python (valid, respelled so none is recognised), seconds "
                "per million, absorb / stream",
                "-",
                "{contract:non_canonical_seconds_per_million/absorb} / "
                "{contract:non_canonical_seconds_per_million/stream}",
            ),
        ),
    ),
    "views-figures": Table(
        (
            "code, views",
            "batch events/s",
            "stages per batch run",
            "micro-batch of 20K, p50",
            "stages per micro-batch",
            "micro-batch of 200K, events/s",
        ),
        tuple(
            (
                label,
                f"{{views:views/{key}/batch/events_per_s:,}}",
                f"{{views:views/{key}/batch/stages}}",
                f"{{views:views/{key}/micro_batch/p50_seconds:.2f}} s",
                f"{{views:views/{key}/micro_batch/stages}}",
                f"{{views:views/{key}/micro_batch/large_events_per_s:,}}",
            )
            for label, key in (
                ("before views were declared: page, site", "two_views_before"),
                ("shared pass: page, site", "two_views"),
                ("shared pass: all five shipped dimensions", "five_dimensions"),
            )
        ),
        "Five dimensions against the two views of before, same run: batch throughput "
        "{views:five_over_two_before/batch:.2f}x, speed (200K micro-batch) "
        "{views:five_over_two_before/speed:.2f}x. The target was not to fall below 1.",
    ),
    "speed-floor": Table(
        ("", "speed layer", "floor", "ratio"),
        (
            (
                "sustained events/s",
                "{speed:sustained/events_per_s:,}",
                "{speed:sustained/floor_events_per_s:,}",
                "{speed:sustained/ratio_to_floor:.2f} (target >= "
                "{speed:sustained/target_ratio_to_floor:.2f})",
            ),
            (
                "sustained events/s, page views and visitors only (no visits, no filter table)",
                "{speed:sustained/variants/page views and visitors only/events_per_s:,}",
                "{speed:sustained/variants/page views and visitors only/floor_events_per_s:,}",
                "{speed:sustained/variants/page views and visitors only/ratio_to_floor:.2f}",
            ),
            (
                "freshness p50 / p95 / max",
                "{speed:freshness/speed_layer/p50_s:.2f} s / {speed:freshness/speed_layer/p95_s:.2f} s / "
                "{speed:freshness/speed_layer/max_s:.2f} s ({speed:freshness/speed_layer/probes_not_seen} "
                "of {speed:freshness/speed_layer/probes} probes not seen by the end)",
                "{speed:freshness/floor/p50_s:.2f} s / {speed:freshness/floor/p95_s:.2f} s / "
                "{speed:freshness/floor/max_s:.2f} s",
                "p95 {speed:freshness/p95_ratio_to_floor:.1f}x (target <= "
                "{speed:freshness/target_p95_ratio_to_floor}x)",
            ),
        ),
    ),
    "speed-freshness-5000": Table(
        ("at 5,000 events/s", "speed layer", "floor", "ratio"),
        (
            (
                "freshness p50 / p95 / max",
                "{speed_freshness_5000:freshness/speed_layer/p50_s:.2f} s / "
                "{speed_freshness_5000:freshness/speed_layer/p95_s:.2f} s / "
                "{speed_freshness_5000:freshness/speed_layer/max_s:.2f} s "
                "({speed_freshness_5000:freshness/speed_layer/probes_not_seen} of "
                "{speed_freshness_5000:freshness/speed_layer/probes} probes not seen by the end)",
                "{speed_freshness_5000:freshness/floor/p50_s:.2f} s / "
                "{speed_freshness_5000:freshness/floor/p95_s:.2f} s / "
                "{speed_freshness_5000:freshness/floor/max_s:.2f} s",
                "p95 {speed_freshness_5000:freshness/p95_ratio_to_floor:.2f}x (target <= "
                "{speed_freshness_5000:freshness/target_p95_ratio_to_floor}x)",
            ),
            (
                "events per micro-batch, seconds per micro-batch (medians)",
                "{speed_freshness_5000:freshness/steps/speed_layer/rows:,.0f}, "
                "{speed_freshness_5000:freshness/steps/speed_layer/total:.2f} s",
                "{speed_freshness_5000:freshness/steps/floor/rows:,.0f}, "
                "{speed_freshness_5000:freshness/steps/floor/total:.2f} s",
                "-",
            ),
        ),
    ),
    "speed-steps": Table(
        (
            "step (seconds, medians of the timed micro-batches)",
            "speed layer",
            "floor",
            "speed layer, page views only",
            "floor, page views only",
        ),
        (
            (
                "events per micro-batch",
                "{speed:sustained/steps/speed_layer/rows:,.0f}",
                "{speed:sustained/steps/floor/rows:,.0f}",
                "{speed:sustained/variants/page views and visitors only/steps/speed_layer/rows:,.0f}",
                "{speed:sustained/variants/page views and visitors only/steps/floor/rows:,.0f}",
            ),
            (
                "read: Kafka, the contract, the dedup (the floor: `from_json` alone), the keys; materialised",
                "{speed:sustained/steps/speed_layer/read:.2f}",
                "{speed:sustained/steps/floor/read:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/speed_layer/read:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/floor/read:.2f}",
            ),
            (
                "visits: the state read, sessionised",
                "{speed:sustained/steps/speed_layer/visits:.2f}",
                "{speed:sustained/steps/floor/visits:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/speed_layer/visits:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/floor/visits:.2f}",
            ),
            (
                "the rows: views, visits' deltas, filters, current visitors; collected",
                "{speed:sustained/steps/speed_layer/views:.2f}",
                "{speed:sustained/steps/floor/views:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/speed_layer/views:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/floor/views:.2f}",
            ),
            (
                "filter rows encoded",
                "{speed:sustained/steps/speed_layer/filter rows:.2f}",
                "{speed:sustained/steps/floor/filter rows:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/speed_layer/filter rows:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/floor/filter rows:.2f}",
            ),
            (
                "Redis commit (one transaction)",
                "{speed:sustained/steps/speed_layer/commit:.2f}",
                "{speed:sustained/steps/floor/commit:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/speed_layer/commit:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/floor/commit:.2f}",
            ),
            (
                "offset log, trigger, driver",
                "{speed:sustained/steps/speed_layer/other:.2f}",
                "{speed:sustained/steps/floor/other:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/speed_layer/other:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/floor/other:.2f}",
            ),
            (
                "whole micro-batch",
                "{speed:sustained/steps/speed_layer/total:.2f}",
                "{speed:sustained/steps/floor/total:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/speed_layer/total:.2f}",
                "{speed:sustained/variants/page views and visitors only/steps/floor/total:.2f}",
            ),
        ),
    ),
    "scaling-measured": Table(
        ("layer", "measured (2 cores)", "recorded in"),
        (
            (
                "ingest pipeline: validate + encode + produce, acks=all, idempotent, 1M records",
                "{ingest:pipeline/records_per_s:,} records/s (median of 3)",
                "`pipeline`",
            ),
            (
                "ingest end to end (generator feeding the same path)",
                "{ingest:end_to_end/records_per_s:,} records/s",
                "`end_to_end`",
            ),
            (
                "speed layer sustained: {speed:sustained/backlog:,} backlog, "
                "{speed:sustained/events_per_micro_batch:,} events per micro-batch, steady state, Kafka + "
                "the whole contract + dedup + every shipped view + Redis",
                "{speed:sustained/events_per_s:,} events/s ({speed:sustained/ratio_to_floor:.2f} of its "
                "floor)",
                "`sustained`",
            ),
            (
                "speed layer freshness through the API at {speed:freshness/events_per_s:,} events/s, "
                "generator on the same cores",
                "p50 {speed:freshness/speed_layer/p50_s:.2f} s, p95 {speed:freshness/speed_layer/p95_s:.2f} "
                "s (floor p95 {speed:freshness/floor/p95_s:.2f} s)",
                "`freshness`",
            ),
            (
                "batch full recompute: {batch:full_recompute/events:,} events, 30 days, five dimensions, "
                "driver heap {batch:spark/driver_memory}",
                "{batch:full_recompute/events_per_s:,} events/s ({batch:full_recompute/seconds} s), peak "
                "RSS {batch:full_recompute/peak_rss_mib:,} MiB ({batch:full_recompute/ratio_to_floor:.2f} "
                "of its floor)",
                "`full_recompute`",
            ),
            (
                "batch incremental: {batch:incremental/new_events:,} new events, the days they fall on "
                "recomputed (holding {batch:incremental/events_in_days_recomputed:,} events)",
                "{batch:incremental/seconds} s, {batch:incremental/share_of_full:.1%} of the full (absorb "
                "{batch:incremental/steps_seconds/absorb} s, views "
                "{batch:incremental/steps_seconds/views} s)",
                "`incremental`",
            ),
            (
                "day documents written by the full recompute, 30 days",
                "{batch:full_recompute/documents_written/*:,}: "
                "{batch:full_recompute/documents_written/site:,} site, "
                "{batch:full_recompute/documents_written/page:,} page, "
                "{batch:full_recompute/documents_written/country:,} country, "
                "{batch:full_recompute/documents_written/referrer:,} referrer, "
                "{batch:full_recompute/documents_written/device:,} device",
                "`full_recompute.documents_written`",
            ),
            (
                "batch documents into FerretDB, the executors' insert code, two processes",
                "{store:runs/after/writes/0/docs_per_s:,} documents/s ({store:runs/after/document_kb_bson} "
                "KB each), {store:runs/after/writes/0/ferretdb_cpu_ms_per_doc:.2f} ms of FerretDB CPU each",
                "`runs.after`",
            ),
            (
                "API, one uvicorn worker, 8 connections, 10M events, three queries",
                "{api:queries/pageviews_7d_hourly_url/requests_per_s:,.0f}, "
                "{api:queries/unique_visitors_7d_url/requests_per_s:,.0f} and "
                "{api:queries/pageviews_30d_daily_site/requests_per_s:,.0f} req/s; worker CPU per request "
                "{api:queries/pageviews_7d_hourly_url/api_cpu_ms_per_request:.2f}, "
                "{api:queries/unique_visitors_7d_url/api_cpu_ms_per_request:.2f} and "
                "{api:queries/pageviews_30d_daily_site/api_cpu_ms_per_request:.2f} ms",
                "`queries`",
            ),
        ),
    ),
    "ferretdb-before-after": Table(
        ("", "before", "after (2026-11-23)"),
        (
            (
                "write, docs/s",
                "{store:runs/before/writes/0/docs_per_s:,}",
                "{store:runs/after-2026-11-23/writes/1/docs_per_s:,} "
                "({store:runs/after-2026-11-23/writes/0/docs_per_s:,} with 1 connection per partition)",
            ),
            (
                "FerretDB CPU per document written",
                "{store:runs/before/writes/0/ferretdb_cpu_ms_per_doc:.2f} ms",
                "{store:runs/after-2026-11-23/writes/1/ferretdb_cpu_ms_per_doc:.2f} ms",
            ),
            (
                "read by `_id`, cold (fresh client, each document once), p50 / p95",
                "{store:runs/before/read_by_id/cold/p50_ms:,.0f} ms / "
                "{store:runs/before/read_by_id/cold/p95_ms:,.0f} ms "
                "(n={store:runs/before/read_by_id/cold/n})",
                "{store:runs/after-2026-11-23/read_by_id/cold/p50_ms:.2f} ms / "
                "{store:runs/after-2026-11-23/read_by_id/cold/p95_ms:.2f} ms "
                "(n={store:runs/after-2026-11-23/read_by_id/cold/n})",
            ),
            (
                "read by `_id`, warm (the same documents again), p50 / p95",
                "{store:runs/before/read_by_id/warm/p50_ms:,.0f} ms / "
                "{store:runs/before/read_by_id/warm/p95_ms:,.0f} ms",
                "{store:runs/after-2026-11-23/read_by_id/warm/p50_ms:.2f} ms / "
                "{store:runs/after-2026-11-23/read_by_id/warm/p95_ms:.2f} ms",
            ),
            (
                "serving reader (at most 4 reads at once), cold 7-day query (8 documents), p50 / p95",
                "{store:runs/before/serving_reader_7_day_query_cold/max_concurrent_4/p50_ms:,.0f} ms / "
                "{store:runs/before/serving_reader_7_day_query_cold/max_concurrent_4/p95_ms:,.0f} ms",
                f"{{{_WEEK_AFTER}/p50_ms:.1f}} ms / {{{_WEEK_AFTER}/p95_ms:.1f}} ms",
            ),
        ),
    ),
    "render": Table(
        ("answer", "by hand (orjson), per render", "through the models, per render", "models / hand"),
        tuple(
            (
                label,
                f"{{render:answers/{key}/hand_us:,.1f}} µs",
                f"{{render:answers/{key}/models_us:,.1f}} µs",
                f"{{render:answers/{key}/models_over_hand:.2f}}x",
            )
            for label, key in (
                ("30-day hourly timeseries (720 buckets)", "timeseries_720_hours"),
                ("breakdown of 10 values", "breakdown_10_values"),
            )
        ),
        "Best of {render:rounds} rounds of {render:renders:,} renders for the times; the median of the "
        "rounds for the ratio.",
    ),
    "ferretdb-layouts": Table(
        (
            "document layout",
            "documents/s",
            "FerretDB CPU per document",
            "read by `_id`, cold p50",
            "7-day query, cold p50",
        ),
        (
            _store_row(
                "hours in three arrays (`--hours-as-arrays --label hours-as-arrays`)", "hours-as-arrays"
            ),
            _store_row("hours packed in one binary field (the defaults, `--label after`)", "after"),
        ),
    ),
}

if __name__ == "__main__":
    sys.exit(main())
