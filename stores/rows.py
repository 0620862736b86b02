"""Reading a view row (views.rows) as the write halves store it: the helpers every backend's
writer and the in-memory twin share."""

from __future__ import annotations

from typing import Any

VISIT_FIELDS = ("vi", "bo", "du", "vv")
"""A view row's visit metrics (views.sessions): visits, bounces, total duration (ms), views in
visits; increments that may be negative in the speed layer's rows (retractions)."""


def row_field(row: Any, name: str) -> Any:
    """A field of a view row or hour (a Spark Row or a mapping); None when it has none (rows of
    code that predates the field)."""
    try:
        return row[name]
    except (KeyError, ValueError, IndexError):
        return None


def visit_metric(row: Any, name: str) -> int:
    """A visit metric of a row or hour (0 when the row has none: a view without visits)."""
    return int(row_field(row, name) or 0)


def ranking_score(row: Any) -> int:
    """What a day's ranking orders a row's key by: its page views, or, for a view of visits only
    (the entry and exit pages, which count no page views), its visits."""
    return int(row["pv"]) or visit_metric(row, "vi")
