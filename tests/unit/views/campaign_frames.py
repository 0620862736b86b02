"""Shared by the campaign and channel unit tests: the shipped dimensions' keys of a few URLs, as
the layers compute them (one Spark job)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from contract import PageView
from contract.spark_schema import event_schema
from views import get_view

TS = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def events_of(pairs: list[tuple[str, str | None]]) -> list[PageView]:
    """Page views of (url, referrer) pairs, already normalised."""
    return [
        PageView.model_construct(
            schema_version=1, event_id=f"e{i}", ts=TS, visitor_id="v", url=url, referrer=referrer
        )
        for i, (url, referrer) in enumerate(pairs)
    ]


def stored_keys(
    spark: Any, pairs: list[tuple[str, str | None]], views: tuple[str, ...]
) -> list[tuple[str, ...]]:
    """Each pair's stored key in each of ``views``, by the views' Spark expressions."""
    rows = [(1, f"e{i}", TS, "v", url, referrer, None, None) for i, (url, referrer) in enumerate(pairs)]
    frame = spark.createDataFrame(rows, event_schema())
    for v in views:
        frame = get_view(v).with_given(frame)
    keys = frame.select(*[get_view(v).stored_key().alias(v) for v in views]).collect()
    return [tuple(r[v] for v in views) for r in keys]
