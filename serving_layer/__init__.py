"""The serving layer: exact merge of batch and realtime views at query time (no HTTP here).

- ``engine``: the query engine (pageviews, unique visitors, top keys) and its answers;
- ``model``: the values and errors of a query (the readers it reads through are in ``stores``);
- ``tiling``: ranges as whole days plus hours at the edges;
- ``consistency``: offsets tokens for read-your-writes.
"""

from serving_layer.engine import (
    SITE_VIEW,
    URL_VIEW,
    Coverage,
    Distinct,
    PageviewsAnswer,
    QueryEngine,
    ReadAfter,
    SeriesQuery,
    TopAnswer,
    TopQuery,
    UniqueVisitorsAnswer,
    check_range,
)
from serving_layer.model import (
    BatchUnavailable,
    ConsistencyTimeout,
    InvalidQuery,
    NothingServed,
    RealtimeUnavailable,
    ServingError,
)
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
    "PageviewsAnswer",
    "QueryEngine",
    "ReadAfter",
    "RealtimeUnavailable",
    "SeriesQuery",
    "ServingError",
    "TopAnswer",
    "TopQuery",
    "UniqueVisitorsAnswer",
    "check_range",
]
