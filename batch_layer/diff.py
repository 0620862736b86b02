"""What changed between two generations' batch views: the check after a fix and a recompute."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from generations.model import Generation
from stores.batch_views import BatchViewWriter
from views import filter_table

COMPARED = ("pv", "uv", "h_pv", "h_uv")
"""Exact values; sketches are compared through these (their bytes depend on insertion order)."""


@dataclass
class ViewDiff:
    view: str
    unchanged: int = 0
    changed: int = 0
    only_in_a: int = 0
    only_in_b: int = 0
    sample: list[dict[str, Any]] = field(default_factory=list)


def diff_generations(
    store: BatchViewWriter, a: Generation, b: Generation, sample_size: int = 5
) -> list[ViewDiff]:
    """Every view either generation has, compared document by document as each one serves it."""
    return [
        diff_view(
            view,
            store.read_all(view, a.day_map.get(view, {})),
            store.read_all(view, b.day_map.get(view, {})),
            sample_size,
        )
        for view in sorted(set(a.day_map) | set(b.day_map))
        if view != filter_table.NAME  # Parquet files, not documents (stores.parquet.filter_table)
    ]


def diff_view(
    view: str, a: Iterable[dict[str, Any]], b: Iterable[dict[str, Any]], sample_size: int = 5
) -> ViewDiff:
    """Compare two generations' documents of one view by (key, day) on their exact values; the
    first ``sample_size`` differences, in (key, day) order, are kept as examples."""
    docs_a = {(d["key"], d["day"]): d for d in a}
    docs_b = {(d["key"], d["day"]): d for d in b}
    result = ViewDiff(view)
    for ident in sorted(set(docs_a) | set(docs_b)):
        da, db = docs_a.get(ident), docs_b.get(ident)
        if da is None:
            result.only_in_b += 1
        elif db is None:
            result.only_in_a += 1
        elif all(da[f] == db[f] for f in COMPARED):
            result.unchanged += 1
            continue
        else:
            result.changed += 1
        if len(result.sample) < sample_size:
            result.sample.append(
                {
                    "key": ident[0],
                    "day": ident[1],
                    "a": {f: da[f] for f in ("pv", "uv")} if da else None,
                    "b": {f: db[f] for f in ("pv", "uv")} if db else None,
                }
            )
    return result
