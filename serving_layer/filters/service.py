"""One ``POST /v2/query``'s answer, from one snapshot, by the path that answers it
(serving_layer.filters.path).

The filter table's path takes the same consistent read as every query: one atomic realtime read
gives the served generation ``g``, the speed layer's commit, what it counted ``g`` with, and ``g``'s
realtime rows of the site's days; the batch part is ``g``'s Parquet files of those days
(``g.day_map["filters"]``). The realtime rows are fetched only within the limits the batch part
leaves (:meth:`FilterService._parts`): a query over them is refused before they are. The table
answers ``g`` only where both parts were made by the same code (serving_layer.readiness: ``g``'s
batch fingerprint of the table equals the one the speed layer's mark records), else the query is a
409 naming ``filters``. With Redis down (or a realtime reader without the table's rows) the answer
is the batch part alone, flagged ``partial``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from serving_layer.answers import Coverage, Visits, lost_of
from serving_layer.engine import QueryEngine, visits_exactness
from serving_layer.filters.model import PAGEVIEWS, VISIT_METRICS, VISITORS, FilterQuery, QueryAnswer, Row
from serving_layer.filters.path import CostCheck, answer_from_views, views_plan
from serving_layer.filters.scan import Scanner
from serving_layer.filters.sql import result_columns
from serving_layer.model import (
    COUNTS_ONLY,
    FilterRowsBudget,
    GenerationInfo,
    NothingServed,
    NotReady,
    RealtimeUnavailable,
)
from serving_layer.readiness import readiness
from serving_layer.snapshot import REALTIME
from stores.parquet.filter_table import OtherLayout, batch_files, rows_for_site
from stores.redis.filter_rows import decode_blobs
from views.filter_table import NAME

READS = 3
"""Realtime reads one query makes at most: a read whose budget was for a generation no longer served
returns counts only and is made again; after this many the answer is the batch part's, partial."""


class FilterService:
    def __init__(
        self,
        engine: QueryEngine,
        scanner: Scanner,
        root_uri: str,
        max_top: int,
        files_of: Callable[[str, dict[str, int]], list[str]] = batch_files,
        check_cost: CostCheck = lambda query: None,
    ) -> None:
        self.engine = engine
        self.scanner = scanner
        self.root_uri = root_uri
        self.max_top = max_top
        self.files_of = files_of
        self.check_cost = check_cost
        """The API's cost limit of the views path's engine queries (the scan has its own bounds)."""
        self._served: GenerationInfo | None = None
        """The generation the last realtime read found served: the next read's budget is for it."""

    async def answer(self, q: FilterQuery) -> QueryAnswer:
        plan = await views_plan(self.engine, q, self.max_top)
        if plan is not None:
            return await answer_from_views(self.engine, q, plan, self.check_cost)
        return await self.scan(q)

    async def scan(self, q: FilterQuery) -> QueryAnswer:
        coverage, files, rows, realtime, flags = await self._parts(q)
        scanned = await self.scanner.scan(q, files, realtime)
        n_dims, names = result_columns(q)
        out = []
        for r in scanned.rows:
            figures = dict(zip(names, r[n_dims:], strict=True))
            out.append(
                Row(metrics_of(q, figures), tuple(str(v) for v in r[:n_dims]), int(figures[PAGEVIEWS] or 0))
            )
        if not q.dimensions and not out and q.offset == 0:
            out = [Row(metrics_of(q, dict.fromkeys(names)), ())]
        total = scanned.total if scanned.rows or q.offset == 0 else None
        if not q.dimensions:
            total = 1
        # Visit figures are not exact where the realtime part flagged a day of the site (a view
        # later than its visit state's horizon: speed_layer.visits); with an entry or exit page,
        # every figure is the visits'.
        visits = visits_exactness(flags, {q.site}, q.days)
        exact = {m: visits.exact if q.per_visit or m in VISIT_METRICS else True for m in q.metrics}
        notes = () if visits.exact or visits.reason is None else (visits.reason,)
        return QueryAnswer(q, "filter_table", out, coverage, exact, total, notes, rows)

    async def _parts(
        self, q: FilterQuery
    ) -> tuple[Coverage, list[str], int, Any | None, frozenset[tuple[str, str]]]:
        """The coverage (of the served generation), the batch part's files, the rows to scan, the
        realtime part's Arrow rows (None without them) and its visit flags, within the limits.

        The realtime read carries a budget (serving_layer.model.FilterRowsBudget): the rows and bytes
        left by the batch part of the generation the last read found served. Redis returns the
        realtime rows only within it and for that generation, else their counts alone; the counts
        are checked against the limits first (a 422 before anything is fetched), and a generation
        other than the budget's is read again with a budget for it. The first read of a service,
        with no generation known yet, asks for the counts alone."""
        engine, scanner = self.engine, self.scanner
        limits = scanner.limits
        batch = None if self._served is None else await self._batch_part(self._served, q)
        for _ in range(READS):
            budget = (
                COUNTS_ONLY
                if batch is None
                else FilterRowsBudget(batch.gen, limits.max_rows - batch.rows, limits.max_realtime_bytes)
            )
            try:
                rt = await engine.realtime.filter_rows_snapshot(q.site, q.days, budget)
            except RealtimeUnavailable as exc:
                engine.on_degraded("redis", exc)
                break
            if rt.served is None:
                break
            gen = await engine.batch.generation(rt.served.gen)
            _check_ready(gen, rt.views)
            self._served = gen
            if batch is None or batch.gen != gen.gen:
                batch = await self._batch_part(gen, q)
            scanner.check_rows(batch.rows + rt.rows)
            scanner.check_realtime_bytes(rt.nbytes)
            if rt.withheld:
                continue  # the budget was for another generation: again, with one for this one
            coverage = Coverage(gen.gen, gen.cut, gen.started_at, rt.commit.offsets, False, (), lost_of(gen))
            table = await asyncio.to_thread(decode_blobs, list(rt.blobs)) if rt.blobs else None
            rows = batch.rows + (0 if table is None else int(table.num_rows))
            scanner.check_rows(rows)
            return coverage, batch.files, rows, table, rt.visit_flags
        else:
            engine.on_degraded("redis", RealtimeUnavailable(f"the served generation changed {READS} times"))
        served = await engine.batch.served_generation()
        if served is None:
            raise NothingServed("no generation has been published yet")
        _check_ready(served, None)
        coverage = Coverage(
            served.gen, served.cut, served.started_at, None, True, (REALTIME,), lost_of(served)
        )
        batch = await self._batch_part(served, q)
        scanner.check_rows(batch.rows)
        return coverage, batch.files, batch.rows, None, frozenset()

    async def _batch_part(self, gen: GenerationInfo, q: FilterQuery) -> _BatchPart:
        """``gen``'s Parquet files of the query's days and their rows a scan of its site may read
        (the row groups' footers, cached per file)."""
        holders = gen.day_map.get(NAME, {})
        days = {d: holders[d] for d in q.days if d in holders}
        files = await asyncio.to_thread(self.files_of, self.root_uri, days) if days else []
        try:
            rows = (await asyncio.to_thread(rows_for_site, files, q.site)) if files else 0
        except OtherLayout as exc:
            problem = f"generation {gen.gen}'s filter table {exc}: the next batch run rewrites it"
            raise NotReady(NAME, problem) from None
        return _BatchPart(gen.gen, files, rows)


@dataclass(frozen=True)
class _BatchPart:
    gen: int
    files: list[str]
    rows: int


def metrics_of(q: FilterQuery, figures: dict[str, Any]) -> tuple[int | float | None, ...]:
    """A result row's metrics in the query's order from its figures (serving_layer.filters.sql.
    FIGURES): counts as they are (0 where null), the visit ratios by the views path's arithmetic
    (None without visits)."""
    visits = Visits(*(int(figures[f] or 0) for f in ("visits", "bounces", "duration_ms", "views")))
    out: list[int | float | None] = []
    for m in q.metrics:
        if m in (PAGEVIEWS, VISITORS, "visits"):
            out.append(int(figures[m] or 0))
        else:
            out.append(getattr(visits, m))
    return tuple(out)


def _check_ready(gen: GenerationInfo, counted: frozenset[str] | None) -> None:
    problem = readiness(NAME, gen, counted)
    if problem is not None:
        raise NotReady(NAME, problem)
