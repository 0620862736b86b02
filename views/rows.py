"""The shape of a view row, shared by every view and by both layers' writers.

One row per (view, key, day): the day's totals and its hourly values. Each store keeps a row as one
unit (a batch document in MongoDB: stores.mongo.codec; a realtime hash in Redis:
stores.redis.keys), so a 7-day hourly query reads 7-8 of them.

    key    string                 the URL, the site, ...
    day    string                 UTC date, YYYY-MM-DD
    pv     bigint                 page views in the day (exact)
    uv     bigint                 distinct visitors in the day (exact)
    sk     binary                 HLL sketch of the day's visitors (DataSketches, Spark's format)
    hours  array<struct<hour:int, pv:bigint, uv:bigint, sk:binary, vi, bo, du, vv: bigint>>
                                  only hours with views or visits
    vi     bigint                 visits in the day (views.sessions; null for a view without visits)
    bo     bigint                 bounces: visits of one view
    du     bigint                 total duration of the visits, milliseconds
    vv     bigint                 page views in the visits

The visit metrics are credited to the hour and day of a visit's first view. In the speed layer's
rows they are deltas and may be negative (retractions: views.sessions).
"""

from __future__ import annotations

HOURS = 24
"""Hours of a UTC day: the slots of a row's hourly values."""
