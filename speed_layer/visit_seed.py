"""The visit state of a fresh start, from the master dataset.

A fresh stream starts at offsets below every active generation's cut (speed_layer.stream.
starting_offsets); the visits it merges its first views into are those of the events before them.
The master dataset holds them (every event below the served generation's cut, deduplicated by the
same rule), so the state is seeded with the visits of its events below the stream's first offsets,
computed by the one definition (views.sessions.merge), as far back as the horizon needs: the
watermark is the newest log-append time among those events, and visits that ended before the
horizon's cut-off are left out (speed_layer.visits.Horizon). A stream from the start of the log
(no generation published yet) starts with an empty state.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from batch_layer.master import MasterDataset
from generations.model import Offsets
from speed_layer.stream import at_or_past
from speed_layer.visits import Horizon, dimensions_mark
from stores.mongo.manifest import MongoManifest
from stores.redis import visit_state
from views import sessions
from views.shared_pass import keyed_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from speed_layer.job import SpeedJob

log = logging.getLogger(__name__)


def seed(job: SpeedJob, start: Offsets | None) -> None:
    """Replace the visit state with the visits of the master dataset's events below ``start``."""
    t0 = time.monotonic()
    settings, dims = job.settings, job.dimensions
    mark = dimensions_mark(dims)
    visit_state.clear(job.redis, mark)
    if start is None:
        log.info("visit state: empty (the stream starts at the log start)")
        return
    master = MasterDataset(settings, MongoManifest(job.mongo[settings.mongo_db]))
    events = master.read(job.spark)
    if events is None:
        log.info("visit state: empty (the master dataset holds no events)")
        return
    from pyspark.sql import functions as F

    below = events.where(~at_or_past(start))
    newest = below.agg(F.max(F.unix_millis("log_time"))).first()
    if newest is None or newest[0] is None:
        log.info("visit state: empty (no event of the master dataset is below the stream's start)")
        return
    watermark_ms = int(newest[0])
    horizon = Horizon(watermark_ms, visit_state.NEVER, settings.visit_lateness_s, settings.session_gap_s)
    first_day = datetime.fromtimestamp(max(horizon.drop_before_us, 0) / 1e6, UTC).strftime("%Y-%m-%d")
    days = [d for d in master.days() if d >= first_day]
    recent = master.read(job.spark, days) if days else None
    written = 0
    if recent is not None:
        written = _write(job, _visits(recent.where(~at_or_past(start)), job), horizon)
    job.redis.hset(
        visit_state.META,
        mapping={"watermark_ms": watermark_ms, "dims": mark, "dropped_before_us": horizon.drop_before_us},
    )
    log.info(
        "visit state: %d visitor-days with open visits seeded from the master dataset's days %s.. in %.1f s",
        written,
        first_day,
        time.monotonic() - t0,
    )


def _visits(events: DataFrame, job: SpeedJob) -> DataFrame:
    from pyspark.sql import functions as F

    dims = job.dimensions
    columns = [c for c in job.input_columns if c in events.columns]
    keyed = keyed_events(events.select(*columns, "kafka_partition"), dims, ["kafka_partition"])
    part = F.col("kafka_partition").cast("int")
    summaries = (
        sessions.as_summaries(keyed, dims)
        .withColumn("p_lo", part)
        .withColumn("p_hi", part)
        .drop(
            "kafka_partition", "hour", "ts_us", "event_id", *[c for c in keyed.columns if c.startswith("_k")]
        )
    )
    return sessions.merge(summaries, [], job.settings.session_gap_s)


def _write(job: SpeedJob, visits: DataFrame, horizon: Horizon) -> int:
    from pyspark.sql import functions as F

    fields = [F.col(f) for f in visit_state.FIELDS]
    grouped = (
        visits.where(F.col("e_ts") >= horizon.drop_before_us)
        .groupBy("site", "visitor_id", F.date_format("day", "yyyy-MM-dd").alias("day"))
        .agg(F.collect_list(F.struct(*fields)).alias("visits"))
    )
    sink = visit_state.VisitStateSink(job.redis, horizon.drop_before_us, horizon.watermark_ms)
    count = 0
    for row in grouped.toLocalIterator():
        visits_of: list[dict[str, Any]] = [v.asDict(recursive=True) for v in row["visits"]]
        sink.add_state(row["site"], row["visitor_id"], row["day"], visits_of)
        count += 1
        if count % 10_000 == 0:
            sink.write()
            sink = visit_state.VisitStateSink(job.redis, horizon.drop_before_us, horizon.watermark_ms)
    sink.write()
    return count
