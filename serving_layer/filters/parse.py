"""A ``POST /v2/query`` body to a :class:`~serving_layer.filters.model.FilterQuery`, or an
InvalidQuery naming the parameter at fault (the API's 422).

The body has Plausible's Stats API v2 shape: ``site_id``, ``date_range``, ``metrics``,
``dimensions``, ``filters``, ``order_by``, ``pagination``. Page values of ``is`` and ``is_not`` are
URLs normalised as the views key pages (contract.normalize_url, views.campaigns.page_key), so
``https://Shop.example.com/cart?utm_source=x`` finds the page ``https://shop.example.com/cart``;
``contains`` and ``matches`` see the stored, normalised value as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from contract import normalize_url
from serving_layer.filters.model import (
    ALIASES,
    DEFAULT_LIMIT,
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_DIMENSIONS,
    MAX_LIMIT,
    MAX_OFFSET,
    MAX_PATTERN_CHARS,
    MAX_VALUE_CHARS,
    MAX_VALUES,
    METRICS,
    OPS,
    PAGEVIEWS,
    TIME_DIMENSIONS,
    VISIT_METRICS,
    And,
    Condition,
    Filter,
    FilterQuery,
    Not,
    Or,
    filtered_dimensions,
)
from serving_layer.model import InvalidQuery
from views.campaigns import page_key
from views.filter_table import VISIT_PAGES

KEYS = ("site_id", "date_range", "metrics", "dimensions", "filters", "order_by", "pagination", "include")
PERIODS = ("day", "7d", "30d", "month")


def parse_query(body: Any, today: date, max_days: int, site_key: Callable[[str], str]) -> FilterQuery:
    """``body`` (decoded JSON) as a query; ``today`` resolves the relative ranges, ``site_key``
    turns ``site_id`` into the site the views key (raising ValueError or InvalidQuery)."""
    if not isinstance(body, Mapping):
        raise InvalidQuery("body", "must be a JSON object")
    unknown = sorted(str(k) for k in body if k not in KEYS)
    if unknown:
        raise InvalidQuery(unknown[0], f"not a parameter of this query (they are {', '.join(KEYS[:-1])})")
    site = _site(body.get("site_id"), site_key)
    first, last, hours = _date_range(body.get("date_range"), today, max_days)
    metrics = _metrics(body.get("metrics"))
    dimensions = _dimensions(body.get("dimensions", []))
    raw_filters = body.get("filters", [])
    if not isinstance(raw_filters, list):
        raise InvalidQuery("filters", "must be a list of filters (their and)")
    counter = [0]
    items = tuple(_filter(f, 1, counter) for f in raw_filters)
    tree: Filter | None = None if not items else items[0] if len(items) == 1 else And(items)
    order_by = _order_by(body.get("order_by"), metrics, dimensions)
    _visits_and_pages(metrics, dimensions, tree, order_by)
    limit, offset = _pagination(body.get("pagination"))
    echo = {
        "site_id": site,
        "date_range": body.get("date_range") if hours != (0, 23) else [first.isoformat(), last.isoformat()],
        "metrics": list(metrics),
        "dimensions": list(dimensions),
        "filters": [_echo(f) for f in items],
        "order_by": [list(o) for o in order_by],
        "pagination": {"limit": limit, "offset": offset},
    }
    return FilterQuery(site, first, last, metrics, dimensions, tree, order_by, limit, offset, echo, *hours)


def _site(raw: Any, site_key: Callable[[str], str]) -> str:
    if not isinstance(raw, str) or not raw or len(raw) > 300:
        raise InvalidQuery("site_id", "required: the site (a host or an origin), at most 300 characters")
    try:
        return site_key(raw)
    except (ValueError, InvalidQuery) as exc:
        raise InvalidQuery("site_id", getattr(exc, "problem", str(exc))) from None


def _day(raw: Any) -> date:
    if not isinstance(raw, str) or len(raw) != 10:
        raise ValueError(raw)
    return date.fromisoformat(raw)


def _instant(raw: Any, last: bool) -> tuple[date, int]:
    """A range's end given as an ISO 8601 datetime with its offset, as (UTC day, UTC hour): the
    table counts by hour, so a first instant is at HH:00:00 and a last one at HH:59:59."""
    if not isinstance(raw, str) or len(raw) <= 10:
        raise ValueError(raw)
    at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    if at.tzinfo is None:
        raise ValueError(raw)
    at = at.astimezone(UTC)
    if (at.minute, at.second, at.microsecond) != ((59, 59, 0) if last else (0, 0, 0)):
        raise ValueError(raw)
    return at.date(), at.hour


def _date_range(raw: Any, today: date, max_days: int) -> tuple[date, date, tuple[int, int]]:
    """``day`` (today, UTC), ``7d`` and ``30d`` (the 7 or 30 days ending today, today included),
    ``month`` (the current calendar month up to today), ``[first, last]`` (both included), or
    two datetimes with their offsets ``["2026-11-25T15:00:00Z", "2026-11-26T14:59:59Z"]``, whole
    UTC hours, both included; and the first and last hour of the range's first and last days."""
    hours = (0, 23)
    if isinstance(raw, list) and len(raw) == 2 and all(isinstance(r, str) and len(r) > 10 for r in raw):
        try:
            (first, first_hour), (last, last_hour) = _instant(raw[0], False), _instant(raw[1], True)
        except ValueError:
            raise InvalidQuery(
                "date_range",
                "datetimes are ISO 8601 with an offset, the first at a whole hour (HH:00:00) and the last "
                "at the end of one (HH:59:59): the filter table counts by UTC hour",
            ) from None
        if (first, first_hour) > (last, last_hour):
            raise InvalidQuery("date_range", "the first datetime must not be after the last")
        hours = (first_hour, last_hour)
    elif raw == "day":
        first, last = today, today
    elif raw == "7d":
        first, last = today - timedelta(days=6), today
    elif raw == "30d":
        first, last = today - timedelta(days=29), today
    elif raw == "month":
        first, last = today.replace(day=1), today
    elif isinstance(raw, list) and len(raw) == 2:
        try:
            first, last = _day(raw[0]), _day(raw[1])
        except ValueError:
            raise InvalidQuery("date_range", "dates must be YYYY-MM-DD") from None
        if first > last:
            raise InvalidQuery("date_range", "the first day must not be after the last")
    else:
        raise InvalidQuery(
            "date_range",
            f'one of {", ".join(PERIODS)}, two days ["YYYY-MM-DD", "YYYY-MM-DD"] or two datetimes',
        )
    if (last - first).days + 1 > max_days:
        raise InvalidQuery("date_range", f"the range exceeds the maximum of {max_days} days")
    if first.year < 1970 or last.year >= 9000:
        raise InvalidQuery("date_range", "must be between 1970 and 9000")
    return first, last, hours


def _metrics(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(m, str) for m in raw):
        raise InvalidQuery("metrics", f"a non-empty list of metrics of {', '.join(METRICS)}")
    unknown = [m for m in raw if m not in METRICS]
    if unknown:
        raise InvalidQuery(
            "metrics", f"no metric named {unknown[0]!r} (the metrics are {', '.join(METRICS)})"
        )
    if len(set(raw)) != len(raw):
        raise InvalidQuery("metrics", "a metric is named twice")
    return tuple(raw)


def _dimension(raw: Any, param: str, time: bool) -> str:
    if isinstance(raw, str):
        if time and raw in TIME_DIMENSIONS:
            return raw
        if raw in ALIASES:
            return ALIASES[raw]
    names = sorted({*ALIASES, *(TIME_DIMENSIONS if time else ())})
    raise InvalidQuery(param, f"no dimension {str(raw)[:100]!r} here (the dimensions are {', '.join(names)})")


def _dimensions(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise InvalidQuery("dimensions", "must be a list")
    if len(raw) > MAX_DIMENSIONS:
        raise InvalidQuery("dimensions", f"at most {MAX_DIMENSIONS}")
    dims = tuple(_dimension(d, "dimensions", True) for d in raw)
    if len(set(dims)) != len(dims):
        raise InvalidQuery("dimensions", "a dimension is named twice")
    if all(t in dims for t in TIME_DIMENSIONS):
        raise InvalidQuery("dimensions", "time:day or time:hour, not both")
    return dims


def _filter(raw: Any, depth: int, counter: list[int]) -> Filter:
    if depth > MAX_DEPTH:
        raise InvalidQuery("filters", f"nested deeper than {MAX_DEPTH}")
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
        raise InvalidQuery("filters", 'each filter is [operator, ...]: ["is", "event:page", ["/"]]')
    op = raw[0]
    if op in ("and", "or"):
        if len(raw) != 2 or not isinstance(raw[1], list) or not raw[1]:
            raise InvalidQuery("filters", f'["{op}", [filter, ...]] with at least one filter')
        items = tuple(_filter(f, depth + 1, counter) for f in raw[1])
        return And(items) if op == "and" else Or(items)
    if op == "not":
        if len(raw) != 2:
            raise InvalidQuery("filters", '["not", filter]')
        return Not(_filter(raw[1], depth + 1, counter))
    if op not in OPS:
        raise InvalidQuery(
            "filters", f"no operator {op[:50]!r} (they are {', '.join((*OPS, 'and', 'or', 'not'))})"
        )
    if len(raw) not in (3, 4) or (len(raw) == 4 and raw[3] not in ({}, None)):
        raise InvalidQuery("filters", f'["{op}", dimension, [value, ...]]')
    counter[0] += 1
    if counter[0] > MAX_CONDITIONS:
        raise InvalidQuery("filters", f"more than {MAX_CONDITIONS} conditions")
    dimension = _dimension(raw[1], "filters", False)
    values = raw[2]
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise InvalidQuery("filters", f"the values of {raw[1]!r} must be a non-empty list of strings")
    if len(values) > MAX_VALUES:
        raise InvalidQuery("filters", f"at most {MAX_VALUES} values in one filter")
    bound = MAX_PATTERN_CHARS if op.startswith("matches") else MAX_VALUE_CHARS
    if any(len(v) > bound for v in values):
        raise InvalidQuery("filters", f"a value of {op!r} is longer than {bound} characters")
    if dimension in ("page", *VISIT_PAGES) and op in ("is", "is_not"):
        values = [_page(v) for v in values]
    return Condition(op, dimension, tuple(values))


def _visits_and_pages(
    metrics: tuple[str, ...],
    dimensions: tuple[str, ...],
    tree: Filter | None,
    order_by: tuple[tuple[str, str], ...],
) -> None:
    """A visit is filtered by its first view's values and its entry and exit pages: the table does
    not keep every page of a visit, so visit figures are never answered per page (Plausible's
    ``event:page`` with visit metrics). Ask for the entry or the exit page instead."""
    named = [name for name in (*metrics, *(n for n, _ in order_by)) if name in VISIT_METRICS]
    pages = {*dimensions, *filtered_dimensions(tree)} & set(VISIT_PAGES)
    if "page" not in (*dimensions, *filtered_dimensions(tree)) or not (named or pages):
        return
    param = "dimensions" if "page" in dimensions else "filters"
    what = f"the metric {named[0]}" if named else f"the dimension {sorted(pages)[0]}"
    raise InvalidQuery(
        param,
        f"{what} counts visits, which are not kept per page (only their entry and exit pages): "
        "use visit:entry_page or visit:exit_page instead of event:page",
    )


def _page(raw: str) -> str:
    try:
        return page_key(normalize_url(raw))
    except ValueError as exc:
        raise InvalidQuery("filters", f"the page {raw[:100]!r}: {exc}") from None


def _order_by(
    raw: Any, metrics: tuple[str, ...], dimensions: tuple[str, ...]
) -> tuple[tuple[str, Literal["asc", "desc"]], ...]:
    """As asked, or: the time dimension ascending, else page views descending; the dimensions
    ascending after it, so that equal figures come in one order whatever the path."""
    if raw is None:
        time = [d for d in dimensions if d in TIME_DIMENSIONS]
        first: list[tuple[str, Literal["asc", "desc"]]] = (
            [(time[0], "asc")] if time else [(PAGEVIEWS, "desc")]
        )
        return (*first, *((d, "asc") for d in dimensions if d not in time))
    if not isinstance(raw, list) or not raw or len(raw) > 5:
        raise InvalidQuery("order_by", 'a list of [metric or dimension, "asc" or "desc"] (at most 5)')
    out: list[tuple[str, Literal["asc", "desc"]]] = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and item[1] in ("asc", "desc")):
            raise InvalidQuery("order_by", 'each item is [metric or dimension, "asc" or "desc"]')
        name = item[0]
        if name in metrics or (name == PAGEVIEWS):
            out.append((name, item[1]))
            continue
        try:
            dim = _dimension(name, "order_by", True)
        except InvalidQuery:
            dim = ""
        if dim not in dimensions:
            raise InvalidQuery(
                "order_by", f"{str(name)[:100]!r} is neither a metric nor a dimension of the query"
            )
        out.append((dim, item[1]))
    if len({n for n, _ in out}) != len(out):
        raise InvalidQuery("order_by", "a name is ordered by twice")
    return tuple(out)


def _pagination(raw: Any) -> tuple[int, int]:
    if raw is None:
        return DEFAULT_LIMIT, 0
    if not isinstance(raw, Mapping) or set(raw) - {"limit", "offset"}:
        raise InvalidQuery("pagination", '{"limit": n, "offset": n}')
    limit, offset = raw.get("limit", DEFAULT_LIMIT), raw.get("offset", 0)
    for name, value, top in (("limit", limit, MAX_LIMIT), ("offset", offset, MAX_OFFSET)):
        if not isinstance(value, int) or isinstance(value, bool) or not (name == "offset" or value >= 1):
            raise InvalidQuery(
                "pagination", f"{name} must be an integer ({'>= 0' if name == 'offset' else '>= 1'})"
            )
        if value < 0 or value > top:
            raise InvalidQuery(
                "pagination", f"{name} must be between {0 if name == 'offset' else 1} and {top}"
            )
    return limit, offset


def _echo(f: Filter) -> list[Any]:
    if isinstance(f, Condition):
        return [f.op, f.dimension, list(f.values)]
    if isinstance(f, Not):
        return ["not", _echo(f.item)]
    return ["and" if isinstance(f, And) else "or", [_echo(i) for i in f.items]]
