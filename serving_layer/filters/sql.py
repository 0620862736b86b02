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
from views.filter_table import DAY, DIMENSIONS, HOUR, SITE, VISITOR

BATCH = "read_parquet(?, hive_partitioning = true, hive_types = {'day': DATE})"
"""The batch part: its files (a bound list), the day from each file's ``day=`` directory."""
REALTIME = "realtime_rows"
"""The realtime part: the Arrow table a scan's connection registers under this name."""

COLUMNS = (SITE, DAY, HOUR, *DIMENSIONS, VISITOR, PAGEVIEWS)

_EXPR = {
    TIME_DAY: f"strftime({DAY}, '%Y-%m-%d')",
    TIME_HOUR: f"strftime({DAY}, '%Y-%m-%d') || ' ' || lpad(CAST({HOUR} AS VARCHAR), 2, '0') || ':00:00'",
    **{d: d for d in DIMENSIONS},
}
_METRIC = {PAGEVIEWS: f"CAST(sum({PAGEVIEWS}) AS BIGINT)", VISITORS: f"count(DISTINCT {VISITOR})"}


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
    if c.dimension not in DIMENSIONS:  # the parser resolves every name; never splice another
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
    :data:`REALTIME`; and its parameters in order."""
    relations = [*([BATCH] if files else []), *([REALTIME] if realtime else [])]
    if not relations:
        raise ValueError("nothing to scan")
    params: list[Any] = []
    union = " UNION ALL ".join(_part(r, params, q, files) for r in relations)
    dims = [f"{_EXPR[d]} AS d{i}" for i, d in enumerate(q.dimensions)]
    needed = list(dict.fromkeys([*q.metrics, *(n for n, _ in q.order_by if n in _METRIC)]))
    metrics = [f"{_METRIC[m]} AS {m}" for m in needed]
    columns = ", ".join([*dims, *metrics, "count(*) OVER () AS total"])
    sql = f"WITH scanned AS ({union}) SELECT {columns} FROM scanned"
    if q.filter is not None:
        sql += f" WHERE {where(q.filter, params)}"
    if dims:
        sql += " GROUP BY " + ", ".join(f"d{i}" for i in range(len(dims)))
    order = []
    for name, direction in q.order_by:
        ref = name if name in _METRIC else f"d{q.dimensions.index(name)}"
        order.append(f"{ref} {direction.upper()}")
    order += [f"d{i} ASC" for i in range(len(dims))]  # one order of equal figures
    sql += " ORDER BY " + ", ".join(order) + " LIMIT ? OFFSET ?"
    params.extend([q.limit, q.offset])
    return Compiled(sql, params)


def result_columns(q: FilterQuery) -> tuple[int, list[str]]:
    """What a result row holds: the number of dimension columns, then the metric columns' names."""
    return len(q.dimensions), list(dict.fromkeys([*q.metrics, *(n for n, _ in q.order_by if n in _METRIC)]))


def patterns(f: Filter | None) -> list[str]:
    """The patterns of the ``matches`` conditions of ``f``."""
    if f is None:
        return []
    if isinstance(f, Condition):
        return list(f.values) if f.op.startswith("matches") else []
    if isinstance(f, Not):
        return patterns(f.item)
    return [p for i in f.items for p in patterns(i)]
