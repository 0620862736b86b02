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
from tests.oracle_visits import sessionise
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


def matches(tree: Any, row: Row | VisitRow) -> bool:
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


def dimension_value(row: Row | VisitRow, dimension: str) -> str | int:
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


def values_by_dimension(table: Iterable[Row | VisitRow], site: str) -> dict[str, list[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for row in table:
        if row.site == site:
            for d, v in row.values.items():
                found[d].add(v)
    return {d: sorted(v) for d, v in found.items()}


# --- visits: the visit rows, from tests.oracle_visits' reference sessioniser ---------------------------
VISIT_FIGURES = ("visits", "bounce_rate", "visit_duration", "views_per_visit")


@dataclass(frozen=True)
class VisitRow:
    """One visit as the filter table's visit rows hold it: its first view's site, day, hour and
    values, its entry and exit page."""

    site: str
    day: str
    hour: int
    values: dict[str, str]
    visitor: str
    views: int
    duration_ms: int
    bounced: bool


def visit_rows(events: Iterable[PageView]) -> list[VisitRow]:
    """One row per visit of ``events`` (tests.oracle_visits.sessionise)."""
    out = []
    for v in sessionise(events):
        first = rows([v.first])[0]
        values = {name: value for name, value in first.values.items() if name != "page"}
        values["entry_page"] = DIMENSION_KEYS["page"](v.first)
        values["exit_page"] = DIMENSION_KEYS["page"](v.last)
        out.append(
            VisitRow(v.site, v.day, v.hour, values, v.visitor_id, v.pageviews, v.duration_ms, v.bounced)
        )
    return out


def answer_visits(
    table: Iterable[Row],
    visits: Iterable[VisitRow],
    site: str,
    days: tuple[str, str],
    filters: Sequence[Any],
    dimensions: Sequence[str],
) -> dict[tuple[str | int, ...], dict[str, int | float | None]]:
    """(dimension values...) -> every metric (page views, visitors and :data:`VISIT_FIGURES`) of
    ``site`` in the day range under ``filters``. The visit figures are those of the visits that
    pass; page views and visitors those of the page views that pass, or, when the query names an
    entry or exit page (a dimension or a filter), those of the visits (their views, their
    visitors)."""
    per_visit = any(_names(f) & {"entry_page", "exit_page"} for f in filters) or bool(
        {"entry_page", "exit_page"} & set(dimensions)
    )
    out: dict[tuple[str | int, ...], dict[str, int | float | None]] = {}
    if not per_visit:
        for group, (pageviews, visitors) in answer(table, site, days, filters, dimensions).items():
            out[group] = {"pageviews": pageviews, "visitors": visitors}
    sums: dict[tuple[str | int, ...], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    who: dict[tuple[str | int, ...], set[str]] = defaultdict(set)
    for v in visits:
        if v.site != site or not days[0] <= v.day <= days[1]:
            continue
        if all(matches(f, v) for f in filters):
            group = tuple(dimension_value(v, d) for d in dimensions)
            s = sums[group]
            s[0], s[1], s[2], s[3] = s[0] + 1, s[1] + int(v.bounced), s[2] + v.duration_ms, s[3] + v.views
            who[group].add(v.visitor)
    for group, (vi, bo, du, vv) in sums.items():
        figures = out.setdefault(group, {"pageviews": 0, "visitors": 0})
        if per_visit:
            figures.update(pageviews=vv, visitors=len(who[group]))
        figures.update(
            visits=vi,
            bounce_rate=round(100.0 * bo / vi, 2),
            visit_duration=round(du / vi / 1000.0, 3),
            views_per_visit=round(vv / vi, 3),
        )
    for figures in out.values():
        figures.setdefault("visits", 0)
        for name in VISIT_FIGURES[1:]:
            figures.setdefault(name, None)
    return out


def _names(tree: Any) -> set[str]:
    if tree[0] in ("and", "or"):
        return {n for t in tree[1] for n in _names(t)}
    if tree[0] == "not":
        return _names(tree[1])
    return {tree[1]}
