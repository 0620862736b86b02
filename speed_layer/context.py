"""What a micro-batch and the rebuilds of the speed layer's states work with: the streaming job's
long-lived parts, built once by the job (speed_layer.job.SpeedJob) and handed down, so that no
module below the job reaches into it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis
    from pyspark.sql import SparkSession

    from config.settings import Settings
    from ingest.producer import EventProducer
    from speed_layer.dedup import ScanDedup
    from speed_layer.visits import ScanVisits
    from stores.parquet.master import MasterReader
    from views.dimension import Dimension


@dataclass(frozen=True)
class SpeedContext:
    """The job's parts below its query: settings, Spark, its Redis client, the declared
    dimensions fixed for the life of the job and the columns they read, whether it makes the
    filter table's rows, the scan's dedup and visit states, the dead-letter producer, and the
    master dataset's read half (the visit state is rebuilt from it)."""

    settings: Settings
    spark: SparkSession
    redis: redis.Redis
    dimensions: list[Dimension]
    input_columns: tuple[str, ...]
    filter_table: bool
    dedup: ScanDedup
    visits: ScanVisits
    dlq: EventProducer
    master: MasterReader
