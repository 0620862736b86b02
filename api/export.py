"""Answers as CSV: every query endpoint answers ``text/csv`` when asked (``format=csv``, or an
``Accept`` header that prefers ``text/csv``).

The CSV is written from the very dict the JSON answer is (api.render), so the two cannot disagree:
one row per point or entry, then one row with the totals, with the comparison range's rows after
them under ``period=comparison`` when one was asked for. A visitors figure takes four columns
(estimate, ``_lower``, ``_upper``, ``_exact``); every row repeats its period's range, its
exactness per metric (``exact_<metric>``) and its coverage (``partial``, ``missing``,
``generation``, the batch and realtime offsets as JSON), so a row read alone still says what it
includes. The current period's totals row carries the change in percent (``change_<metric>``).

Page URLs, referrers and other values come from page views anyone can send, so a cell a
spreadsheet would read as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return) is prefixed with ``'`` (OWASP, "CSV Injection"). Numbers are written as numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from fastapi import Request, Response

from api import render

CSV_MEDIA_TYPE = "text/csv"
JSON_MEDIA_TYPE = "application/json"

CSV_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The answer; as CSV (a header row, one row per point or entry, then the totals, "
        "with coverage and exactness columns) with `format=csv` or `Accept: text/csv`.",
        "content": {CSV_MEDIA_TYPE: {"schema": {"type": "string"}}},
    }
}
"""The CSV form of a query route's answer, for its ``responses`` (the OpenAPI document)."""

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True, slots=True)
class Table:
    """Where an answer's rows are: the list of points or entries, and its totals."""

    name: str
    items: str
    item_row: str
    total: str | None
    total_figure: str | None = None
    """The figure a bare-number total is (``pageviews``); None when the total is an object."""
    exact_metric: str | None = None
    """The metric of an answer without ``exactness`` (the older endpoints)."""


TIMESERIES = Table("timeseries", "series", "point", "total")
BREAKDOWN = Table("breakdown", "entries", "entry", "totals")
PAGEVIEWS = Table("pageviews", "series", "point", "total", "pageviews", "pageviews")
UNIQUE_VISITORS = Table("unique-visitors", "series", "point", "total", None, "visitors")
TOP_URLS = Table("top-urls", "urls", "entry", None, None, "pageviews")


def _q(part: str) -> tuple[str, float]:
    """A media range of an Accept header and its quality."""
    name, _, params = part.partition(";")
    q = 1.0
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "q":
            try:
                q = float(value)
            except ValueError:
                q = 0.0
    return name.strip().lower(), q


def prefers_csv(accept: str | None) -> bool:
    """Whether an Accept header asks for CSV over JSON: ``text/csv`` named with a quality above
    JSON's (which a wildcard may give), or equal to it when JSON is not named itself."""
    if not accept:
        return False
    ranges = dict(_q(part) for part in accept.split(",") if part.strip())
    csv_q = ranges.get(CSV_MEDIA_TYPE, ranges.get("text/*", 0.0))
    if csv_q <= 0:
        return False
    json_q = ranges.get(JSON_MEDIA_TYPE, ranges.get("application/*", ranges.get("*/*", 0.0)))
    return csv_q > json_q or (csv_q == json_q and JSON_MEDIA_TYPE not in ranges)


def wants_csv(request: Request) -> bool:
    """``format=csv``, or no ``format`` and an Accept header preferring CSV (``format`` was
    validated with the query's parameters)."""
    fmt = request.query_params.get("format")
    if fmt is not None:
        return fmt == "csv"
    return prefers_csv(request.headers.get("accept"))


def cell(value: Any) -> str | int | float:
    """One CSV cell: numbers as they are, booleans ``true``/``false``, times ISO 8601 UTC, nothing
    as an empty cell, dicts and lists as JSON, text guarded against formula injection."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    if isinstance(value, datetime):
        return orjson.dumps(value, option=render.JSON_OPTIONS).decode()[1:-1]
    if isinstance(value, dict | list):
        return orjson.dumps(value, option=render.JSON_OPTIONS).decode()
    text = str(value)
    return f"'{text}" if text.startswith(FORMULA_PREFIXES) else text


def _flat(item: dict[str, Any]) -> dict[str, Any]:
    """A point, entry or total with each visitors object spread over four columns."""
    out: dict[str, Any] = {}
    for name, value in item.items():
        if isinstance(value, dict) and "estimate" in value:
            out[name] = value["estimate"]
            out[f"{name}_lower"], out[f"{name}_upper"] = value["lower"], value["upper"]
            out[f"{name}_exact"] = value["exact"]
        else:
            out[name] = value
    return out


def _exactness(body: dict[str, Any], table: Table) -> dict[str, Any]:
    if "exactness" in body:
        return {f"exact_{m}": e["exact"] for m, e in body["exactness"].items()}
    if table.exact_metric == "visitors":
        figures = [*body[table.items], body["total"]]
        return {"exact_visitors": all(f["exact"] for f in figures)}
    return {f"exact_{table.exact_metric}": True}


def _coverage(part: dict[str, Any]) -> dict[str, Any]:
    covers = part["covers"]
    return {
        "partial": part["partial"],
        "missing": ";".join(part["missing"]),
        "generation": covers["generation"],
        "batch_offsets": covers["batch_offsets"],
        "batch_as_of": covers["batch_as_of"],
        "realtime_offsets": covers["realtime_offsets"],
        "lost_to_retention": covers["lost_to_retention"] or None,
    }


def _period_rows(period: str, part: dict[str, Any], table: Table) -> Iterator[dict[str, Any]]:
    """The rows of one period: its points or entries, then its totals."""
    shared = {**_exactness(part, table), **_coverage(part)}
    head = {"period": period, "from": part["from"], "to": part["to"]}
    for item in part[table.items]:
        yield {**head, "row": table.item_row, **_flat(item), **shared}
    if table.total is not None:
        total = part[table.total]
        figures = {table.total_figure: total} if table.total_figure is not None else _flat(total)
        change = {f"change_{m}": v for m, v in (part.get("change") or {}).items()}
        yield {**head, "row": table.total, **figures, **change, **shared}


def rows(body: dict[str, Any], table: Table) -> Iterator[dict[str, Any]]:
    """Every row of an answer (as api.render writes it): the period asked for, then its comparison."""
    yield from _period_rows("current", body, table)
    if body.get("comparison") is not None:
        yield from _period_rows("comparison", body["comparison"], table)


def _columns(all_rows: list[dict[str, Any]]) -> list[str]:
    """The union of the rows' columns in first-seen order (the range's columns when there is no row)."""
    seen: dict[str, None] = dict.fromkeys(("period", "from", "to", "row"))
    for row in all_rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def to_csv(body: dict[str, Any], table: Table) -> str:
    """The answer ``body`` as CSV text, header first."""
    all_rows = list(rows(body, table))
    return _written(all_rows, _columns(all_rows))


def _written(all_rows: list[dict[str, Any]], columns: list[str]) -> str:
    """The rows as CSV text under a header of ``columns`` (a column a row lacks is an empty cell)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, restval="", lineterminator="\r\n")
    writer.writeheader()
    writer.writerows({k: cell(v) for k, v in row.items()} for row in all_rows)
    return out.getvalue()


def respond(request: Request, body: dict[str, Any], table: Table) -> Response:
    """The answer as JSON, or as CSV when the request asks for it."""
    if not wants_csv(request):
        return render.json_response(body)
    return _csv_response(to_csv(body, table), table.name)


NO_DISTINCT = {"estimate": None, "lower": None, "upper": None, "exact": None}
"""A visitors object with no figure (an answer that gives no number), spread into empty cells."""


def record_csv(body: dict[str, Any], distinct: tuple[str, ...] = ()) -> str:
    """An answer that is one record (no points or entries) as CSV: a header and one row of its
    fields, each visitors object spread over four columns as :func:`to_csv` spreads them; the fields
    named in ``distinct`` hold a visitors object or null, and get their four columns either way."""
    row = _flat({**body, **{name: body[name] or NO_DISTINCT for name in distinct}})
    return _written([row], list(row))


def respond_record(
    request: Request, body: dict[str, Any], name: str, distinct: tuple[str, ...] = ()
) -> Response:
    """A one-record answer as JSON, or as CSV (:func:`record_csv`) when the request asks for it."""
    if not wants_csv(request):
        return render.json_response(body)
    return _csv_response(record_csv(body, distinct), name)


def _csv_response(text: str, name: str) -> Response:
    return Response(
        text,
        media_type=f"{CSV_MEDIA_TYPE}; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'},
    )
