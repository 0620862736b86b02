"""A :class:`FilterQuery` compiled to DuckDB SQL with every value a bound parameter.

No value of a query is ever spliced into the SQL text: the site, the days, each filter value, the
limit and the offset are ``?`` parameters; the SQL holds only column names from the fixed list of
the table's dimensions and the fixed operators. ``contains`` is ``contains(column, ?)`` (a plain
substring: no LIKE wildcard of the value), ``matches`` is ``regexp_matches(column, ?)``: RE2,
linear in the text, so no pattern can take exponential time (a partial match, as Plausible's).

The rows scanned are the union (ALL) of the batch part's Parquet files and the realtime part's
Arrow rows, each cut to the site and the days first (pushed down into the Parquet scan: the files
are sorted by site, their row groups' statistics skip the other sites). Visitors are
``count(DISTINCT visitor)`` over that union: a visitor seen in both parts counts once, exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from serving_layer.filters.model import (
    NEGATED,
    PAGEVIEWS,
    TIME_DAY,
    TIME_HOUR,
    VISITORS,
    And,
    Condition,
    Filter,
    FilterQuery,
    Not,
    Or,
)
from views.filter_table import COLUMNS, DAY, DIMENSIONS, HOUR, SITE, VISIT_COLUMNS, VISIT_PAGES, VISITOR

BATCH = "read_parquet(?, hive_partitioning = true, hive_types = {'day': DATE})"
"""The batch part: its files (a bound list), the day from each file's ``day=`` directory."""
REALTIME = "realtime_rows"
"""The realtime part: the Arrow table a scan's connection registers under this name."""

_EXPR = {
    TIME_DAY: f"strftime({DAY}, '%Y-%m-%d')",
    TIME_HOUR: f"strftime({DAY}, '%Y-%m-%d') || ' ' || lpad(CAST({HOUR} AS VARCHAR), 2, '0') || ':00:00'",
    **{d: d for d in (*DIMENSIONS, *VISIT_PAGES)},
}

FIGURES = ("pageviews", "visitors", "visits", "bounces", "duration_ms", "views")
"""What a result row holds after its dimensions: page views and visitors (of the page-view rows,
or, when the query names an entry or exit page, of the visits), and the visits' sums (visits,
bounces, their duration and page views). The metrics are made from them (serving_layer.answers.
Visits: the views path's own arithmetic); a figure no part of the query reads is null."""

_RATIO = {
    "visits": "visits",
    "bounce_rate": "round(100.0 * bounces / nullif(visits, 0), 2)",
    "visit_duration": "round(duration_ms / nullif(visits, 0) / 1000.0, 3)",
    "views_per_visit": "round(views / nullif(visits, 0), 3)",
}
"""How the query orders by a visit metric (the answer's own figures are computed in Python)."""


@dataclass(frozen=True)
class Compiled:
    sql: str
    params: list[Any]


def where(f: Filter, params: list[Any]) -> str:
    """The SQL condition of ``f``, its values appended to ``params``."""
    if isinstance(f, And):
        return "(" + " AND ".join(where(i, params) for i in f.items) + ")"
    if isinstance(f, Or):
        return "(" + " OR ".join(where(i, params) for i in f.items) + ")"
    if isinstance(f, Not):
        return f"(NOT {where(f.item, params)})"
    return _condition(f, params)


def _condition(c: Condition, params: list[Any]) -> str:
    if c.dimension not in (*DIMENSIONS, *VISIT_PAGES):  # the parser resolves names; splice no other
        raise ValueError(f"not a dimension of the filter table: {c.dimension!r}")
    col = c.dimension
    op = NEGATED.get(c.op, c.op)
    params.extend(c.values)
    if op == "is":
        sql = f"{col} IN ({', '.join('?' for _ in c.values)})"
    elif op == "contains":
        sql = "(" + " OR ".join(f"contains({col}, ?)" for _ in c.values) + ")"
    else:
        sql = "(" + " OR ".join(f"regexp_matches({col}, ?)" for _ in c.values) + ")"
    return f"(NOT {sql})" if c.op in NEGATED else sql


def _part(relation: str, params: list[Any], q: FilterQuery, files: Sequence[str]) -> str:
    if relation == BATCH:
        params.append(list(files))
    params.extend([q.site, q.first_day, q.last_day])
    sql = (
        f"SELECT {', '.join(COLUMNS)} FROM {relation} "
        f"WHERE {SITE} = ? AND {DAY} BETWEEN CAST(? AS DATE) AND CAST(? AS DATE)"
    )
    if q.first_hour > 0:  # a range of datetimes: whole UTC hours
        params.extend([q.first_day, q.first_hour])
        sql += f" AND ({DAY} > CAST(? AS DATE) OR {HOUR} >= ?)"
    if q.last_hour < 23:
        params.extend([q.last_day, q.last_hour])
        sql += f" AND ({DAY} < CAST(? AS DATE) OR {HOUR} <= ?)"
    return sql


def compile_query(q: FilterQuery, files: Sequence[str], realtime: bool) -> Compiled:
    """The SQL of ``q`` over the Parquet ``files`` and, with ``realtime``, the relation
    :data:`REALTIME`; and its parameters in order. Each result row: the dimensions, the
    :data:`FIGURES`, the number of groups.

    Page views and visitors come from the page-view rows (``visits`` null); the visit metrics from
    the visit rows, whose figures are summed per visitor first: the speed layer's retractions make
    a visitor's rows sum to what their visits are now, so a visitor counts among a group's visitors
    when their visits there sum to more than none. A query that names an entry or exit page
    (:attr:`FilterQuery.per_visit`) reads the visit rows alone."""
    relations = [*([BATCH] if files else []), *([REALTIME] if realtime else [])]
    if not relations:
        raise ValueError("nothing to scan")
    params: list[Any] = []
    union = " UNION ALL ".join(_part(r, params, q, files) for r in relations)
    dims = [f"{_EXPR[d]} AS d{i}" for i, d in enumerate(q.dimensions)]
    groups = [f"d{i}" for i in range(len(dims))]
    events = not q.per_visit and any(
        n in (PAGEVIEWS, VISITORS) for n in (*q.metrics, *(o for o, _ in q.order_by))
    )
    visits = q.per_visit or q.visits
    ctes = [f"scanned AS ({union})"]
    if events:
        event_figures = [
            f"CAST(sum({PAGEVIEWS}) AS BIGINT) AS {PAGEVIEWS}",
            f"count(DISTINCT {VISITOR}) AS {VISITORS}",
        ]
        ctes.append(_aggregation(q, "ev", "visits IS NULL", dims, groups, params, event_figures))
    if visits:
        sums = [*(f"sum({c}) AS {c}" for c in VISIT_COLUMNS), f"sum({PAGEVIEWS}) AS views"]
        ctes.append(
            _aggregation(q, "pv", "visits IS NOT NULL", [*dims, VISITOR], [*groups, VISITOR], params, sums)
        )
        totals = [*(f"CAST(sum({c}) AS BIGINT) AS {c}" for c in (*VISIT_COLUMNS, "views"))]
        totals.append("count(*) FILTER (WHERE visits > 0) AS visit_visitors")
        # Groups whose visits all were retracted are no groups; without groups, one row always.
        grouped = f" GROUP BY {', '.join(groups)} HAVING sum(visits) > 0" if groups else ""
        ctes.append(f"vs AS (SELECT {', '.join([*groups, *totals])} FROM pv{grouped})")
    if events and visits:
        joined = f"ev FULL JOIN vs USING ({', '.join(groups)})" if groups else "ev, vs"
    else:
        joined = "ev" if events else "vs"
    if q.per_visit:
        figures = [f"views AS {PAGEVIEWS}", f"visit_visitors AS {VISITORS}"]
    elif events:
        figures = [PAGEVIEWS, VISITORS]
    else:
        figures = [f"NULL AS {PAGEVIEWS}", f"NULL AS {VISITORS}"]
    figures += [*VISIT_COLUMNS, "views"] if visits else [f"NULL AS {c}" for c in (*VISIT_COLUMNS, "views")]
    selected = ", ".join([*groups, *figures, "count(*) OVER () AS total"])
    sql = f"WITH {', '.join(ctes)} SELECT {selected} FROM {joined}"
    order = []
    for name, direction in q.order_by:
        if name in (PAGEVIEWS, VISITORS):
            ref = ("views" if name == PAGEVIEWS else "visit_visitors") if q.per_visit else name
        elif name in _RATIO:
            ref = _RATIO[name]
        else:
            ref = f"d{q.dimensions.index(name)}"
        nulls = "FIRST" if direction == "asc" else "LAST"  # as serving_layer.filters.path orders
        order.append(f"{ref} {direction.upper()} NULLS {nulls}")
    order += [f"d{i} ASC" for i in range(len(dims))]  # one order of equal figures
    sql += " ORDER BY " + ", ".join(order) + " LIMIT ? OFFSET ?"
    params.extend([q.limit, q.offset])
    return Compiled(sql, params)


def _aggregation(
    q: FilterQuery,
    name: str,
    kind: str,
    selected: list[str],
    groups: list[str],
    params: list[Any],
    figures: list[str],
) -> str:
    """One aggregation of the scanned rows of one ``kind`` (a fixed SQL condition) under the
    query's filter, as the CTE ``name``."""
    sql = f"{name} AS (SELECT {', '.join([*selected, *figures])} FROM scanned WHERE {kind}"
    if q.filter is not None:
        sql += f" AND {where(q.filter, params)}"
    if groups:
        sql += " GROUP BY " + ", ".join(groups)
    return sql + ")"


def result_columns(q: FilterQuery) -> tuple[int, tuple[str, ...]]:
    """What a result row holds: the number of dimension columns, then the :data:`FIGURES`."""
    return len(q.dimensions), FIGURES


def patterns(f: Filter | None) -> list[str]:
    """The patterns of the ``matches`` conditions of ``f``."""
    if f is None:
        return []
    if isinstance(f, Condition):
        return list(f.values) if f.op.startswith("matches") else []
    if isinstance(f, Not):
        return patterns(f.item)
    return [p for i in f.items for p in patterns(i)]
