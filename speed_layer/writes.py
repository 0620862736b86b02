"""A micro-batch's realtime rows (speed_layer.outputs.RealtimeRows) as the writes that store them:
the realtime views, the visit bookkeeping, the current visitors' minutes and the filter table's
rows, each by its store's sink, prepared (what the sinks read first) and then flushed into one
pipeline. The commit (speed_layer.commit) flushes them inside its transaction, beside the batch id
and the offsets; the speed layer's freshness floor (bench/speed_floor.py) flushes the same writes
with nothing around them."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from speed_layer import visits
from speed_layer.outputs import RealtimeRows
from stores.redis.current_visitors import CurrentVisitorsSink
from stores.redis.filter_rows import FilterRowsSink
from stores.redis.sink import RedisRealtimeSink


class RowWrites:
    """The sinks of one micro-batch's ``rows``; the time spent encoding the filter table's rows goes
    to :attr:`filter_seconds`."""

    def __init__(
        self,
        rows: RealtimeRows,
        views: RedisRealtimeSink,
        minute_sink: Callable[[], CurrentVisitorsSink] | None,
    ) -> None:
        minute_rows, filters = rows.minutes, rows.filters
        self.views = views
        for row in rows.views:
            views.add(row["gen"], row["view"], row)
        views.prepare()
        self.state = visits.state_sink(rows.visit_flags, rows.visit_progress)
        self.minutes = minute_sink() if minute_sink is not None and minute_rows else None
        if self.minutes is not None:
            for minute in minute_rows:
                self.minutes.add(minute)
            self.minutes.prepare()
        self.filters: FilterRowsSink | None = None
        self.filter_seconds = 0.0
        if filters is not None:
            t0 = time.monotonic()
            self.filters = FilterRowsSink()
            self.filters.add_table(filters)
            self.filters.prepare()
            self.filter_seconds = time.monotonic() - t0

    def flush(self, pipe: redis.client.Pipeline) -> int:
        """Queue every write into ``pipe``; returns the number of realtime view keys written."""
        written = self.views.flush(pipe)
        if self.state is not None:
            self.state.flush(pipe)
        if self.minutes is not None:
            self.minutes.flush(pipe)
        if self.filters is not None:
            self.filters.flush(pipe)
        return written
