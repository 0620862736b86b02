"""The filter table's scans, bounded: how many at once, how many rows, how long, how much memory.

- **Rows**: a scan's rows are counted before it runs (stores.parquet.filter_table.rows_for_site, plus
  the realtime rows as the speed layer counted them, before they are fetched); above
  ``LAMBDA_API_FILTER_MAX_ROWS`` the query is refused (:class:`TooManyRows`, a 422 naming the limit
  and the estimate).
- **Realtime bytes**: what reading the realtime rows holds (the streams plus their rows decoded,
  counted by the speed layer too) is at most ``LAMBDA_API_FILTER_MAX_REALTIME_MB`` per query, else
  the query is refused before they are fetched (:class:`TooMuchRealtime`, a 422 naming the limit).
- **At once**: at most ``LAMBDA_API_FILTER_CONCURRENCY`` scans per worker; up to
  ``LAMBDA_API_FILTER_QUEUE`` more wait their turn (inside their time limit), any further one is
  refused at once (:class:`Busy`, a 429 with Retry-After) rather than queued without bound.
- **Time**: ``LAMBDA_API_FILTER_TIMEOUT_S`` from the query's turn; past it the scan is interrupted
  (DuckDB's ``interrupt()`` on its connection) and the query fails (:class:`ScanTimeout`, a 504).
- **Memory and threads**: each scan has a connection of its own, limited to
  ``LAMBDA_API_FILTER_MEMORY_MB`` and ``LAMBDA_API_FILTER_THREADS``, in a thread of a pool of its own:
  the event loop never waits on a scan.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from serving_layer.filters.model import FilterQuery
from serving_layer.filters.sql import REALTIME, compile_query, patterns
from serving_layer.model import InvalidQuery, ServingError


class TooManyRows(InvalidQuery):
    """The scan would read more rows than the limit allows."""

    def __init__(self, rows: int, limit: int) -> None:
        super().__init__(
            "date_range",
            f"the query would scan about {rows:,} rows of the filter table, above the limit of "
            f"{limit:,} (LAMBDA_API_FILTER_MAX_ROWS): shorten the range",
        )
        self.rows, self.limit = rows, limit

    @property
    def ctx(self) -> dict[str, int]:
        """The 422's ``ctx``: the estimate and the limit."""
        return {"rows": self.rows, "limit": self.limit}


class TooMuchRealtime(TooManyRows):
    """Reading the realtime rows would take more memory than the limit allows."""

    def __init__(self, nbytes: int, limit: int) -> None:
        InvalidQuery.__init__(
            self,
            "date_range",
            f"the query's realtime rows would take about {nbytes / 2**20:,.1f} MiB to read, above the limit "
            f"of {limit / 2**20:,.0f} MiB (LAMBDA_API_FILTER_MAX_REALTIME_MB): shorten the range",
        )
        self.rows, self.limit = nbytes, limit

    @property
    def ctx(self) -> dict[str, int]:
        return {"bytes": self.rows, "limit": self.limit}


class ScanTimeout(ServingError):
    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"the filter table's scan ran out of its {seconds:g} s (LAMBDA_API_FILTER_TIMEOUT_S) and was "
            "interrupted: shorten the range or simplify the filters"
        )


class Busy(ServingError):
    def __init__(self, concurrency: int, queue: int) -> None:
        super().__init__(
            f"this worker is scanning the filter table for {concurrency} queries with {queue} more waiting "
            "(LAMBDA_API_FILTER_CONCURRENCY, LAMBDA_API_FILTER_QUEUE): retry later"
        )


class InvalidPattern(InvalidQuery):
    def __init__(self, problem: str) -> None:
        super().__init__("filters", f"a pattern of matches is not a valid RE2 expression: {problem}")


@dataclass(frozen=True)
class Limits:
    max_rows: int
    concurrency: int
    queue: int
    timeout_s: float
    threads: int
    memory_mb: int
    max_realtime_bytes: int = 256 * 2**20


@dataclass(frozen=True)
class Scanned:
    rows: list[tuple[Any, ...]]
    total: int


class Scanner:
    """Runs the scans of one worker within :class:`Limits`."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._turns = asyncio.Semaphore(limits.concurrency)
        self._waiting = 0
        self._pool = ThreadPoolExecutor(limits.concurrency, thread_name_prefix="filter-scan")

    def check_rows(self, rows: int) -> None:
        if rows > self.limits.max_rows:
            raise TooManyRows(rows, self.limits.max_rows)

    def check_realtime_bytes(self, nbytes: int) -> None:
        if nbytes > self.limits.max_realtime_bytes:
            raise TooMuchRealtime(nbytes, self.limits.max_realtime_bytes)

    async def scan(self, q: FilterQuery, files: Sequence[str], realtime: Any | None) -> Scanned:
        """The rows of ``q`` over the Parquet ``files`` and the ``realtime`` Arrow table (None or
        empty: none)."""
        limits = self.limits
        if self._turns.locked() and self._waiting >= limits.queue:
            raise Busy(limits.concurrency, limits.queue)
        started = time.monotonic()
        self._waiting += 1
        try:
            async with asyncio.timeout(limits.timeout_s):
                await self._turns.acquire()
        except TimeoutError:
            raise ScanTimeout(limits.timeout_s) from None
        finally:
            self._waiting -= 1
        try:
            return await self._run(q, files, realtime, limits.timeout_s - (time.monotonic() - started))
        finally:
            self._turns.release()

    async def _run(
        self, q: FilterQuery, files: Sequence[str], realtime: Any | None, left_s: float
    ) -> Scanned:
        import duckdb

        con = duckdb.connect(
            ":memory:",
            config={"threads": self.limits.threads, "memory_limit": f"{self.limits.memory_mb}MB"},
        )
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self._pool, _execute, con, q, list(files), realtime)
        try:
            return await asyncio.wait_for(asyncio.shield(job), max(left_s, 0.001))
        except TimeoutError:
            con.interrupt()
            with contextlib.suppress(Exception):
                await job
            raise ScanTimeout(self.limits.timeout_s) from None
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(job)
            con.close()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _execute(con: Any, q: FilterQuery, files: list[str], realtime: Any | None) -> Scanned:
    """In a scan thread: check the patterns, register the realtime rows, run the compiled query."""
    import duckdb

    for pattern in patterns(q.filter):
        try:
            con.execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
        except duckdb.InvalidInputException as exc:
            raise InvalidPattern(str(exc).splitlines()[0][:200]) from None
    with_realtime = realtime is not None and realtime.num_rows > 0
    if not files and not with_realtime:
        return Scanned([], 0)
    if with_realtime:
        con.register(REALTIME, realtime)
    compiled = compile_query(q, files, with_realtime)
    rows = con.execute(compiled.sql, compiled.params).fetchall()
    total = int(rows[0][-1]) if rows else 0
    return Scanned([tuple(r[:-1]) for r in rows], total)
