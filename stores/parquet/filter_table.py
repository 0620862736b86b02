"""The batch filter table (views.filter_table) as Parquet files, one directory per generation.

Layout::

    <filter_table_uri>/gen=<g>/day=<YYYY-MM-DD>/part-*.parquet

Each file holds the columns of views.filter_table.COLUMNS but ``day``, which is its directory.
Spark writes them natively (``partitionBy("day")``), each task's rows sorted by (day, site, page,
hour) first (views.filter_table.SORT), so that a query naming its site (and often a page) skips
most row groups on their min/max statistics.

As with the batch views' collections (stores.mongo.writer), a generation writes only the days it
recomputed, into its own directory, and its day map's ``filters`` entry names which generation's
directory holds each day: an incremental run copies nothing, and garbage collection deletes whole
generation directories once no retained generation's day map names them
(generations.retention). A day with no events has no directory: it contributes no file.

The files are read by the API with pyarrow, not Spark, from the same filesystem: the root is a
local path or a ``file:`` URI (a mounted volume in a deployment). A generation directory being
written holds Spark's ``_temporary`` directory until the write commits; readers only ever list the
days of a published generation, whose files are complete.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence, Set
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from views import filter_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

GEN_DIR = re.compile(r"^gen=(\d+)$")
COMPRESSION = "zstd"
"""Parquet codec of the files (docs/filters.md has the measured choice)."""


def local_root(root_uri: str) -> Path:
    """The filesystem path of the table's root (a ``file:`` URI or a plain path)."""
    parsed = urlparse(root_uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "":
        return Path(root_uri)
    raise ValueError(
        f"the filter table must be on a filesystem its readers mount (a path or file: URI), not {root_uri!r}"
    )


def generation_dir(root_uri: str, gen: int) -> Path:
    """``<root>/gen=<gen>``: everything generation ``gen`` wrote of the table."""
    return local_root(root_uri) / f"gen={gen}"


def day_dir(root_uri: str, gen: int, day: str) -> Path:
    """``<root>/gen=<gen>/day=<day>``: one day's files as generation ``gen`` wrote them."""
    return generation_dir(root_uri, gen) / f"{filter_table.DAY}={day}"


def batch_files(root_uri: str, days: Mapping[str, int]) -> list[str]:
    """The Parquet files (filesystem paths) holding the given days, each from the generation the
    mapping names for it (a generation's ``day_map["filters"]``, or the part of it a query
    covers), by day then name. A day whose directory is absent had no events: no file."""
    out: list[str] = []
    for day, gen in sorted(days.items()):
        directory = day_dir(root_uri, gen, day)
        if directory.is_dir():
            out += sorted(str(p) for p in directory.glob("part-*.parquet"))
    return out


def generations(root_uri: str) -> list[int]:
    """The generations with a directory under the root, ascending."""
    root = local_root(root_uri)
    if not root.is_dir():
        return []
    found = (GEN_DIR.match(p.name) for p in root.iterdir() if p.is_dir())
    return sorted(int(m.group(1)) for m in found if m)


def write(rows: DataFrame, root_uri: str, gen: int, compression: str = COMPRESSION) -> None:
    """Write the filter table's rows (views.filter_table.filter_rows) of generation ``gen``, one
    directory per day, in the Spark job this action starts.

    The rows are sorted within their partitions, not across them: no exchange (the rows come out
    of the shared pass's partitions, by visitor), so each task writes one file per day it has
    rows of. Writing a generation again (a retried write) replaces the days it writes."""
    rows.select(*filter_table.COLUMNS).sortWithinPartitions(filter_table.DAY, *filter_table.SORT).write.mode(
        "overwrite"
    ).partitionBy(filter_table.DAY).option("compression", compression).parquet(
        _hadoop_uri(generation_dir(root_uri, gen))
    )


def _hadoop_uri(path: Path) -> str:
    """``path`` as Hadoop reads it: ``file://`` and the path as it is (Hadoop's Path does its own
    escaping: a percent-encoded URI such as ``Path.as_uri()``'s would name ``gen%3D1``)."""
    return f"file://{path}"


def drop_generation(root_uri: str, gen: int) -> bool:
    """Delete what generation ``gen`` wrote of the table (a failed or abandoned one, or one no
    retained generation references); whether there was anything."""
    directory = generation_dir(root_uri, gen)
    if not directory.exists():
        return False
    shutil.rmtree(directory)
    return True


def garbage_collect(root_uri: str, referenced: Set[tuple[str, int]], protected_gens: Set[int]) -> list[str]:
    """Delete the generation directories no retained generation references, never those of
    ``protected_gens``; returns the directories deleted.

    ``referenced`` is generations.retention's (name, generation) of every day map entry of the
    retained generations: only those named views.filter_table.NAME count here (the views' entries
    name their collections)."""
    keep = {gen for name, gen in referenced if name == filter_table.NAME} | set(protected_gens)
    dropped = []
    for gen in generations(root_uri):
        if gen not in keep and drop_generation(root_uri, gen):
            dropped.append(str(generation_dir(root_uri, gen)))
    return dropped


class ParquetFilterTableWriter:
    """The batch layer's write and garbage collection of the filter table
    (stores.filter_table.FilterTableWriter) under one root."""

    def __init__(self, root_uri: str, compression: str = COMPRESSION) -> None:
        local_root(root_uri)  # refuse a root readers could not open, before any run writes
        self.root_uri = root_uri
        self.compression = compression

    def write(self, gen: int, rows: DataFrame) -> None:
        write(rows, self.root_uri, gen, self.compression)

    def files(self, days: Mapping[str, int]) -> list[str]:
        return batch_files(self.root_uri, days)

    def drop_generation(self, gen: int) -> None:
        drop_generation(self.root_uri, gen)

    def garbage_collect(self, referenced: Set[tuple[str, int]], protected_gens: Set[int]) -> list[str]:
        return garbage_collect(self.root_uri, referenced, protected_gens)


FOOTERS_CACHED = 65_536
"""Files whose row-group counts a process remembers (a few hundred bytes each)."""


class OtherLayout(Exception):
    """A file of the table lacks columns this code reads (written by an earlier version)."""


def rows_for_site(files: Sequence[str], site: str) -> int:
    """Rows of ``files`` a scan of ``site`` may read: every row group whose ``site`` statistics do
    not exclude it. Raises :class:`OtherLayout` for a file without every column of the table."""
    total = 0
    for path in files:
        for low, high, rows in _row_groups(path):
            if low is None or high is None or low <= site <= high:
                total += rows
    return total


@lru_cache(maxsize=FOOTERS_CACHED)
def _row_groups(path: str) -> tuple[tuple[str | None, str | None, int], ...]:
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    missing = [c for c in filter_table.COLUMNS if c != filter_table.DAY and c not in names]
    if missing:
        raise OtherLayout(f"has no column {', '.join(missing)}")
    at = names.index(filter_table.SITE) if filter_table.SITE in names else None
    groups = []
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        low = high = None
        if at is not None:
            stats = rg.column(at).statistics
            if stats is not None and stats.has_min_max:
                low, high = _text(stats.min), _text(stats.max)
        groups.append((low, high, rg.num_rows))
    return tuple(groups)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
