"""One ``POST /v2/query``'s answer, from one snapshot, by the path that answers it
(serving_layer.filters.path).

The filter table's path takes the same consistent read as every query: one atomic realtime read
gives the served generation ``g``, the speed layer's commit, what it counted ``g`` with, and ``g``'s
realtime rows of the site's days; the batch part is ``g``'s Parquet files of those days
(``g.day_map["filters"]``). The table answers ``g`` only where both parts were made by the same
code (serving_layer.readiness: ``g``'s batch fingerprint of the table equals the one the speed
layer's mark records), else the query is a 409 naming ``filters``. With Redis down (or a realtime
reader without the table's rows) the answer is the batch part alone, flagged ``partial``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from serving_layer.answers import Coverage, Visits, lost_of
from serving_layer.engine import QueryEngine
from serving_layer.filters.model import PAGEVIEWS, VISITORS, FilterQuery, QueryAnswer, Row
from serving_layer.filters.path import CostCheck, answer_from_views, views_plan
from serving_layer.filters.scan import Scanner
from serving_layer.filters.sql import result_columns
from serving_layer.model import (
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

    async def answer(self, q: FilterQuery) -> QueryAnswer:
        plan = await views_plan(self.engine, q, self.max_top)
        if plan is not None:
            return await answer_from_views(self.engine, q, plan, self.check_cost)
        return await self.scan(q)

    async def scan(self, q: FilterQuery) -> QueryAnswer:
        gen, coverage, realtime = await self._snapshot(q)
        holders = gen.day_map.get(NAME, {})
        days = {d: holders[d] for d in q.days if d in holders}
        files = await asyncio.to_thread(self.files_of, self.root_uri, days) if days else []
        try:
            rows = (await asyncio.to_thread(rows_for_site, files, q.site)) if files else 0
        except OtherLayout as exc:
            raise NotReady(
                NAME, f"generation {gen.gen}'s filter table {exc}: the next batch run rewrites it"
            ) from None
        rows += 0 if realtime is None else int(realtime.num_rows)
        self.scanner.check_rows(rows)
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
        return QueryAnswer(q, "filter_table", out, coverage, {m: True for m in q.metrics}, total, (), rows)

    async def _snapshot(self, q: FilterQuery) -> tuple[GenerationInfo, Coverage, Any | None]:
        engine = self.engine
        rt = None
        try:
            rt = await engine.realtime.filter_rows_snapshot(q.site, q.days)
        except RealtimeUnavailable as exc:
            engine.on_degraded("redis", exc)
        if rt is not None and rt.served is not None:
            gen = await engine.batch.generation(rt.served.gen)
            _check_ready(gen, rt.views)
            coverage = Coverage(gen.gen, gen.cut, gen.started_at, rt.commit.offsets, False, (), lost_of(gen))
            table = await asyncio.to_thread(decode_blobs, list(rt.blobs)) if rt.blobs else None
            return gen, coverage, table
        served = await engine.batch.served_generation()
        if served is None:
            raise NothingServed("no generation has been published yet")
        _check_ready(served, None)
        coverage = Coverage(
            served.gen, served.cut, served.started_at, None, True, (REALTIME,), lost_of(served)
        )
        return served, coverage, None


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
