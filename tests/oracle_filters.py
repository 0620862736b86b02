"""The recount of combined filters: what ``POST /v2/query`` must answer, computed in plain Python.

Each deduplicated event becomes one row of the filter table's dimensions (tests.oracle's keys of
each dimension, the ``site|`` prefix of a per-site key left out), and a Plausible v2 filter tree is
evaluated on it by :func:`matches` (Python's ``re`` for ``matches``: the trees the tests draw use
patterns both engines read alike). :func:`answer` groups what passes by the query's dimensions:
page views and the set of visitors, exact. :func:`filter_trees` draws random trees over the values
the events hold (hypothesis).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from contract import PageView, site_of
from tests.oracle import DIMENSION_KEYS
from views import filter_table

OPERATORS = ("is", "is_not", "contains", "contains_not", "matches", "matches_not")


@dataclass(frozen=True)
class Row:
    site: str
    day: str
    hour: int
    values: dict[str, str]
    visitor: str


def rows(events: Iterable[PageView]) -> list[Row]:
    """One row per event (already deduplicated by the caller: tests.oracle.first_copies)."""
    out = []
    for e in events:
        site = site_of(e.url)
        values = {}
        for name in filter_table.DIMENSIONS:
            key = DIMENSION_KEYS[name](e)
            values[name] = key[len(site) + 1 :] if key.startswith(f"{site}|") and name != "page" else key
        out.append(Row(site, e.ts.strftime("%Y-%m-%d"), e.ts.hour, values, e.visitor_id))
    return out


def matches(tree: Any, row: Row) -> bool:
    """Whether ``row`` passes one filter (``[op, dimension, values]``) or a tree of them."""
    op = tree[0]
    if op == "and":
        return all(matches(t, row) for t in tree[1])
    if op == "or":
        return any(matches(t, row) for t in tree[1])
    if op == "not":
        return not matches(tree[1], row)
    value = row.values[tree[1]]
    wanted: Sequence[str] = tree[2]
    if op in ("is", "is_not"):
        hit = value in wanted
    elif op in ("contains", "contains_not"):
        hit = any(w in value for w in wanted)
    else:
        hit = any(re.search(w, value) is not None for w in wanted)
    return hit if not op.endswith("_not") else not hit


def dimension_value(row: Row, dimension: str) -> str | int:
    if dimension == "time:day":
        return row.day
    if dimension == "time:hour":
        return f"{row.day} {row.hour:02d}:00:00"
    return row.values[dimension]


def answer(
    table: Iterable[Row], site: str, days: tuple[str, str], filters: Sequence[Any], dimensions: Sequence[str]
) -> dict[tuple[str | int, ...], tuple[int, int]]:
    """(dimension values...) -> (page views, visitors) of the rows of ``site`` in the day range that
    pass every filter of ``filters`` (a list: their conjunction)."""
    pageviews: dict[tuple[str | int, ...], int] = defaultdict(int)
    visitors: dict[tuple[str | int, ...], set[str]] = defaultdict(set)
    for row in table:
        if row.site != site or not days[0] <= row.day <= days[1]:
            continue
        if all(matches(f, row) for f in filters):
            group = tuple(dimension_value(row, d) for d in dimensions)
            pageviews[group] += 1
            visitors[group].add(row.visitor)
    return {g: (pv, len(visitors[g])) for g, pv in pageviews.items()}


def _pattern(value: str) -> st.SearchStrategy[str]:
    """A pattern both RE2 and Python read alike: an escaped piece of a value, maybe anchored."""
    if not value:
        return st.just("^$")
    return st.tuples(st.integers(0, len(value) - 1), st.integers(1, 6), st.booleans()).map(
        lambda t: ("^" if t[2] and t[0] == 0 else "") + re.escape(value[t[0] : t[0] + t[1]])
    )


def filter_trees(values: dict[str, list[str]], depth: int = 2) -> st.SearchStrategy[Any]:
    """Filter trees over the dimensions of ``values`` (each non-empty), drawing their operands from
    the values present (and their pieces), so that most filters keep some rows."""
    dims = sorted(d for d, v in values.items() if v)

    @st.composite
    def leaf(draw: st.DrawFn) -> list[Any]:
        dim = draw(st.sampled_from(dims))
        op = draw(st.sampled_from(OPERATORS))
        present = st.sampled_from(values[dim])
        if op.startswith("is"):
            operands = draw(st.lists(present, min_size=1, max_size=3, unique=True))
        elif op.startswith("contains"):
            operands = draw(
                st.lists(
                    present.flatmap(lambda v: st.just(v[len(v) // 3 : len(v) // 3 + 4] or v)),
                    min_size=1,
                    max_size=2,
                )
            )
        else:
            operands = draw(st.lists(present.flatmap(_pattern), min_size=1, max_size=2))
        return [op, dim, operands]

    return st.recursive(
        leaf(),
        lambda children: st.one_of(
            st.tuples(st.just("and"), st.lists(children, min_size=1, max_size=3)).map(list),
            st.tuples(st.just("or"), st.lists(children, min_size=1, max_size=3)).map(list),
            children.map(lambda c: ["not", c]),
        ),
        max_leaves=2 * depth,
    )


def values_by_dimension(table: Iterable[Row], site: str) -> dict[str, list[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for row in table:
        if row.site == site:
            for d, v in row.values.items():
                found[d].add(v)
    return {d: sorted(v) for d, v in found.items()}
