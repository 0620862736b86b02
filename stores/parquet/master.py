"""The master dataset's files and their read half: every committed segment's events, in Parquet.

Layout: ``<master>/segments/segment=<id>/event_date=YYYY-MM-DD/part-*.parquet``, and per segment a
``duplicates`` directory (kafka_partition, kafka_offset, event_date, the gap to the earlier copy in
ms: contract.duplicates). The batch layer writes segments and commits them in the manifest
(batch_layer.master, stores.manifest); readers (the batch layer's views, the speed layer's rebuild
of its visit state) read only the segments the manifest lists, so a crashed absorb is never read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contract.duplicates import GAP_COLUMN, is_duplicate
from stores.manifest import Segment, segments_end

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from stores.manifest import ManifestStore

DUPLICATES = "duplicates"
"""A segment's directory of its duplicates: (kafka_partition, kafka_offset, event_date, gap ms)."""
DUPLICATES_SCHEMA = "kafka_partition INT, kafka_offset BIGINT, event_date STRING, " + GAP_COLUMN + " BIGINT"


class NarrowDuplicates(RuntimeError):
    """A segment's duplicates were found with a narrower window than the dedup window now."""


def segments_root(root: str) -> str:
    """The directory of every segment of the master dataset at ``root``."""
    return f"{root.rstrip('/')}/segments"


def segment_path(root: str, segment_id: str) -> str:
    return f"{segments_root(root)}/segment={segment_id}"


class MasterReader:
    """The committed segments of the master dataset at ``root`` (its manifest, a
    stores.manifest.ManifestStore, says which) and their events."""

    def __init__(self, root: str, dedup_window_s: int, manifest: ManifestStore) -> None:
        self.root = root.rstrip("/")
        self.dedup_window_s = dedup_window_s
        self.manifest = manifest

    def segments(self) -> list[Segment]:
        return self.manifest.segments()

    def absorbed_until(self) -> dict[int, int]:
        """Per partition, the offset up to which the log has been absorbed."""
        return segments_end(self.segments())

    def days(self) -> list[str]:
        return sorted({d for s in self.segments() for d in s.days})

    def read(self, spark: SparkSession, days: list[str] | None = None) -> DataFrame | None:
        """Valid events of the committed segments, optionally only the given UTC days, without
        the duplicates (:mod:`contract.duplicates`, found at absorb: batch_layer.master).

        Spark is given exactly the day directories of the committed segments that hold those days
        (the manifest says which), so it lists nothing else: an incremental run does not pay for
        discovering every segment the master dataset has accumulated, and uncommitted segments (a
        crashed absorb) are never read. ``segment`` and ``event_date`` stay columns (``basePath``).
        """
        from pyspark.sql import functions as F

        wanted = None if days is None else set(days)
        # An accepted gap (Segment.gap) has no days: it holds no files to read.
        segments = [s for s in self.segments() if s.days and (wanted is None or wanted & set(s.days))]
        paths = [
            f"{segment_path(self.root, s.segment_id)}/event_date={day}"
            for s in segments
            for day in s.days
            if wanted is None or day in wanted
        ]
        if not paths:
            return None
        events = spark.read.option("basePath", segments_root(self.root)).parquet(*paths)
        window_ms = self.dedup_window_s * 1000
        for s in segments:
            if s.dedup_window_ms is None or s.dedup_window_ms < window_ms:
                raise NarrowDuplicates(
                    f"segment {s.segment_id} holds the duplicates of a "
                    f"{'unknown' if s.dedup_window_ms is None else s.dedup_window_ms // 1000} s window, "
                    f"less than the dedup window of {window_ms // 1000} s: absorb the log again into a "
                    "new master dataset to widen it"
                )
        found = spark.read.schema(DUPLICATES_SCHEMA).parquet(
            *[f"{segment_path(self.root, s.segment_id)}/{DUPLICATES}" for s in segments]
        )
        if wanted is not None:
            found = found.where(F.col("event_date").isin(sorted(wanted)))
        dropped = found.where(is_duplicate(F.col(GAP_COLUMN), window_ms)).select(
            "kafka_partition", "kafka_offset"
        )
        return events.join(F.broadcast(dropped), ["kafka_partition", "kafka_offset"], "left_anti")
