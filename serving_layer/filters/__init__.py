"""Combined filters (``POST /v2/query``, the shape of Plausible's Stats API v2): a query of any
filter tree over the filter table (views.filter_table), or over today's views when they answer it.

- ``model``: the parsed query (filters, dimensions, metrics, order, page) and its bounds;
- ``parse``: a request body to that query, or InvalidQuery naming the parameter;
- ``sql``: the query compiled to DuckDB SQL, every value a bound parameter;
- ``scan``: the bounded scan (concurrency, rows, time, memory) off the event loop;
- ``path``: whether today's views answer a query, and that answer;
- ``service``: one query's answer from one snapshot, by either path: the batch part's Parquet files
  and their row counts (the cost estimate before a scan) from stores.parquet.filter_table, the
  realtime part's Arrow rows from the realtime reader (stores.redis.filter_rows).
"""

from serving_layer.filters.model import FilterQuery, QueryAnswer
from serving_layer.filters.parse import parse_query
from serving_layer.filters.scan import Busy, ScanTimeout, TooManyRows
from serving_layer.filters.service import FilterService

__all__ = [
    "Busy",
    "FilterQuery",
    "FilterService",
    "QueryAnswer",
    "ScanTimeout",
    "TooManyRows",
    "parse_query",
]
