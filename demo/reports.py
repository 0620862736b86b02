"""The demo's examples of weeks and months, comparison ranges and CSV answers.

Printed by ``make demo`` after the other examples: a site's visitors and page views per ISO week
and per month (each bucket built from days, its visitors the union of the days' sketches), the last
24 hours beside the 24 hours before them (``compare=previous_period``) with the change in percent,
and a breakdown as CSV (``format=csv``).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import httpx

SITE = "shop.example.com"


def _get(
    base: str, path: str, params: dict[str, str | int], headers: dict[str, str], curl: str
) -> httpx.Response:
    request = httpx.Request("GET", f"{base}{path}", params=params)
    print(f"\n$ {curl} '{request.url}'")
    return httpx.get(str(request.url), headers=headers, timeout=60)


def _totals(answer: dict[str, Any]) -> dict[str, Any]:
    """What the compared answer says of its totals: the range's, the comparison's, the change."""
    comparison = answer["comparison"]
    return {
        "from": answer["from"],
        "to": answer["to"],
        "total": answer["total"],
        "comparison": {k: comparison[k] for k in ("compare", "from", "to", "total")},
        "change": answer["change"],
        "note": "... and per bucket: series, comparison.series; coverage and exactness of both",
    }


def print_reports(base: str, now: datetime, headers: dict[str, str], curl: str) -> None:
    """Weeks, months, a comparison with the previous period, and a CSV answer, with their curl."""
    metrics = "visitors,pageviews"
    for granularity, days in (("week", 21), ("month", 62)):
        params: dict[str, str | int] = {
            "site": SITE,
            "granularity": granularity,
            "metrics": metrics,
            "from": (now - timedelta(days=days)).isoformat(),
            "to": now.isoformat(),
        }
        answer = _get(base, "/v1/timeseries", params, headers, curl).json()
        print(f"  {granularity} starting (the first cut to the range)  page views   visitors")
        for point in answer.get("series", []):
            visitors = point["visitors"]
            shown = f"{'' if visitors['exact'] else '≈'}{visitors['estimate']:,.0f}"
            print(f"  {point['start']:<44}{point['pageviews']:>11,}{shown:>11}")

    compared: dict[str, str | int] = {
        "site": SITE,
        "granularity": "hour",
        "compare": "previous_period",
        "metrics": "visitors,visits,pageviews,bounce_rate",
        "from": (now - timedelta(hours=24)).isoformat(),
        "to": now.isoformat(),
    }
    answer = _get(base, "/v1/timeseries", compared, headers, curl).json()
    print(json.dumps(_totals(answer) if "comparison" in answer else answer, indent=2))

    as_csv: dict[str, str | int] = {"site": SITE, "dimension": "referrer", "limit": 5, "format": "csv"}
    response = _get(
        base, "/v1/breakdown", {**as_csv, "from": compared["from"], "to": now.isoformat()}, headers, curl
    )
    print(f"  ({response.headers.get('content-type')}; the same with -H 'Accept: text/csv')")
    for line in response.text.splitlines():
        print(f"  {line}")
