"""The serving layer: exact merge of batch and realtime views at query time (no HTTP here).

- ``engine``: the query engine (pageviews, unique visitors, top keys, series);
- ``queries`` and ``answers``: what it is asked and what it answers;
- ``snapshot``: the consistent read every query starts with; ``merge``: the arithmetic of batch
  plus realtime; ``readiness``: whether a generation answers a view exactly;
- the stores it reads through, their interfaces and backends, are in ``stores``;
- ``tiling``: ranges as whole days plus hours at the edges;
- ``consistency``: offsets tokens for read-your-writes.
"""

from serving_layer.answers import (
    Coverage,
    Distinct,
    PageviewPoint,
    PageviewsAnswer,
    SeriesAnswer,
    SeriesPoint,
    ServingState,
    TopAnswer,
    UniqueVisitorsAnswer,
)
from serving_layer.engine import QueryEngine
from serving_layer.model import (
    BatchUnavailable,
    ConsistencyTimeout,
    InvalidQuery,
    NothingServed,
    RealtimeUnavailable,
    ServingError,
)
from serving_layer.queries import SITE_VIEW, URL_VIEW, ReadAfter, SeriesQuery, TopQuery, check_range
from serving_layer.tiling import Granularity

__all__ = [
    "SITE_VIEW",
    "URL_VIEW",
    "BatchUnavailable",
    "ConsistencyTimeout",
    "Coverage",
    "Distinct",
    "Granularity",
    "InvalidQuery",
    "NothingServed",
    "PageviewPoint",
    "PageviewsAnswer",
    "QueryEngine",
    "ReadAfter",
    "RealtimeUnavailable",
    "SeriesAnswer",
    "SeriesPoint",
    "SeriesQuery",
    "ServingError",
    "ServingState",
    "TopAnswer",
    "TopQuery",
    "UniqueVisitorsAnswer",
    "check_range",
]
