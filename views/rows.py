"""The shape of a view row, shared by every view and by both layers' writers.

One row per (key, day): the day's totals and its hourly values. This is also the shape of the
stored documents (one per view, key and day: the "few, wide documents" of docs/design.md), so a 7-day hourly
query reads 7-8 documents.

    key    string                 the URL, the site, ...
    day    string                 UTC date, YYYY-MM-DD
    pv     bigint                 page views in the day (exact)
    uv     bigint                 distinct visitors in the day (exact)
    sk     binary                 HLL sketch of the day's visitors (DataSketches, Spark's format)
    hours  array<struct<hour:int, pv:bigint, uv:bigint, sk:binary>>   only hours with views
"""

from __future__ import annotations

from typing import Any


def row_to_document(row: Any) -> dict[str, Any]:
    """A view row (Spark Row or dict) as the stored document: dense 24-slot hourly arrays."""
    pv = [0] * 24
    uv = [0] * 24
    sk: list[bytes | None] = [None] * 24
    for h in row["hours"]:
        pv[h["hour"]] = h["pv"]
        uv[h["hour"]] = h["uv"]
        sk[h["hour"]] = bytes(h["sk"])
    return {
        "_id": document_id(row["key"], row["day"]),
        "key": row["key"],
        "day": row["day"],
        "pv": row["pv"],
        "uv": row["uv"],
        "sk": bytes(row["sk"]),
        "h_pv": pv,
        "h_uv": uv,
        "h_sk": sk,
    }


def document_id(key: str, day: str) -> str:
    """Documents are read by _id only: the one lookup every MongoDB-protocol server serves fast."""
    return f"{day}|{key}"
