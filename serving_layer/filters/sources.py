"""Where the filter table's rows are, and how many a scan would read.

- The batch part: the Parquet files of a generation's days (``day_map["filters"]``), under the
  table's root: ``<root>/gen=<g>/day=YYYY-MM-DD/part-*.parquet`` (stores.parquet.filter_table).
- The realtime part: Arrow IPC stream blobs of the served generation, read with the speed layer's
  commit (stores.redis: ``filter_rows_snapshot``), decoded to one table.

Until those stores are merged, :func:`batch_files`, :func:`table_root` and :func:`decode_blobs` fall
back on the layout and encoding above, and a realtime reader without ``filter_rows_snapshot`` makes
answers of the batch part alone, flagged partial.

The cost of a scan is known before it runs: the rows of the files' row groups that may hold the
site (their ``site`` statistics), read from the Parquet footers once per file (files never change:
a generation's files are written once), plus the realtime rows.
"""

from __future__ import annotations

import glob
import importlib
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

from config.settings import Settings
from serving_layer.model import Served, SpeedCommit
from views.filter_table import SITE

FOOTERS_CACHED = 65_536
"""Files whose row-group counts a process remembers (a few hundred bytes each)."""


class FilterRows(Protocol):
    """What the realtime reader's ``filter_rows_snapshot`` returns (one atomic read)."""

    served: Served | None
    commit: SpeedCommit
    views: frozenset[str] | None
    blobs: Sequence[bytes]


class FilterRowsReader(Protocol):
    async def filter_rows_snapshot(self, site: str, days: Sequence[str]) -> FilterRows: ...


def table_root(settings: Settings) -> str:
    """The filter table's root (``LAMBDA_FILTER_TABLE_URI``; by default ``var/filters``)."""
    uri = getattr(settings, "filter_table_uri", None)
    return str(uri) if uri else (settings.var_dir / "filters").resolve().as_uri()


def enabled(settings: Settings) -> bool:
    return bool(getattr(settings, "filter_table", True))


def batch_files(root_uri: str, days: Mapping[str, int]) -> list[str]:
    """The local Parquet files of ``days`` (day -> generation holding it)."""
    try:
        store = importlib.import_module("stores.parquet.filter_table")
    except ImportError:  # until the batch part's store is merged: its layout, read here
        return _batch_files(root_uri, days)
    files: list[str] = store.batch_files(root_uri, days)
    return files


def _batch_files(root_uri: str, days: Mapping[str, int]) -> list[str]:
    root = root_uri.removeprefix("file://")
    files: list[str] = []
    for day, gen in sorted(days.items()):
        files += sorted(
            glob.glob(os.path.join(glob.escape(root), f"gen={gen}", f"day={day}", "part-*.parquet"))
        )
    return files


def decode_blobs(blobs: Sequence[bytes]) -> Any:
    """The realtime rows of ``blobs`` (Arrow IPC streams of views.filter_table.arrow_schema) as one
    pyarrow Table."""
    try:
        store = importlib.import_module("stores.redis.filter_rows")
    except ImportError:  # until the realtime part's store is merged: its encoding, read here
        return _decode(blobs)
    return store.decode_blobs(blobs)


def _decode(blobs: Sequence[bytes]) -> Any:
    import pyarrow as pa

    from views.filter_table import arrow_schema

    tables = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in blobs]
    if not tables:
        return arrow_schema().empty_table()
    return pa.concat_tables(tables).cast(arrow_schema())


def rows_of(files: Sequence[str], site: str) -> int:
    """Rows of ``files`` a scan of ``site`` may read: every row group whose ``site`` statistics do
    not exclude it."""
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
    at = names.index(SITE) if SITE in names else None
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
