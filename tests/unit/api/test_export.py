"""CSV answers (api.export): asked by ``Accept`` or ``format``, written from the JSON answer itself
(one row per point or entry, then the totals; coverage and exactness in every row), and no cell a
spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api import export, render
from serving_layer import TopAnswer, TopQuery
from tests.unit.api.test_render import BASE, END, FULL, RENDERED


def parsed(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


@pytest.mark.parametrize(
    ("accept", "csv_wanted"),
    [
        (None, False),
        ("", False),
        ("*/*", False),
        ("application/json", False),
        ("text/csv", True),
        ("text/csv; charset=utf-8", True),
        ("text/csv, */*;q=0.1", True),
        ("text/csv, */*", True),
        ("application/json, text/csv", False),
        ("application/json;q=0.5, text/csv", True),
        ("text/csv;q=0", False),
        ("text/csv;q=nonsense", False),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", False),
        ("text/*", True),
    ],
)
def test_accept_asks_for_csv_only_when_it_prefers_it(accept: str | None, csv_wanted: bool) -> None:
    assert export.prefers_csv(accept) is csv_wanted


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@given(st.text(max_size=40))
def test_text_cells_never_start_a_formula_and_read_back_unchanged(text: str) -> None:
    got = export.cell(text)
    assert isinstance(got, str)
    assert not got.startswith(FORMULA_STARTS)
    assert got == (f"'{text}" if text.startswith(FORMULA_STARTS) else text)


def test_cells_keep_numbers_booleans_and_times() -> None:
    assert export.cell(-12.5) == -12.5 and export.cell(0) == 0
    assert export.cell(True) == "true" and export.cell(None) == ""
    assert export.cell(BASE) == "2026-11-20T00:00:00Z"
    assert export.cell({"0": 5}) == '{"0":5}'
    assert export.cell('=HYPERLINK("http://x","y")') == '\'=HYPERLINK("http://x","y")'


@pytest.mark.parametrize(
    ("name", "table"),
    [
        ("pageviews", export.PAGEVIEWS),
        ("unique visitors", export.UNIQUE_VISITORS),
        ("top urls", export.TOP_URLS),
        ("timeseries with every metric, visits not exact", export.TIMESERIES),
        ("timeseries compared with the previous period, realtime missing in it", export.TIMESERIES),
        ("breakdown compared a year earlier", export.BREAKDOWN),
        ("breakdown without visitors or site", export.BREAKDOWN),
    ],
)
def test_every_row_is_a_point_or_entry_of_the_json_then_its_totals(name: str, table: export.Table) -> None:
    body = RENDERED[name][0]()
    rows = parsed(export.to_csv(body, table))
    periods = [("current", body), *([("comparison", body["comparison"])] if body.get("comparison") else [])]
    expected_rows = [
        (period, item_row)
        for period, part in periods
        for item_row in [table.item_row] * len(part[table.items]) + ([table.total] if table.total else [])
    ]
    assert [(r["period"], r["row"]) for r in rows] == expected_rows
    for period, part in periods:
        mine = [r for r in rows if r["period"] == period]
        for row, item in zip(mine, part[table.items], strict=False):
            for key, value in item.items():
                column = value["estimate"] if isinstance(value, dict) else value
                assert row[key] == ("" if column is None else str(export.cell(column)))
            assert row["partial"] == str(export.cell(part["partial"]))
            assert row["generation"] == str(part["covers"]["generation"])
            assert row["from"] == export.cell(part["from"])
        exactness = part.get("exactness", {})
        for metric, e in exactness.items():
            assert {r[f"exact_{metric}"] for r in mine} == {"true" if e["exact"] else "false"}
    if body.get("change"):
        totals = rows[len(body[table.items])]
        for metric, change in body["change"].items():
            assert totals[f"change_{metric}"] == ("" if change is None else str(change))


def test_the_change_is_of_the_totals_in_percent() -> None:
    body = RENDERED["breakdown compared a year earlier"][0]()
    now, then = body["totals"], body["comparison"]["totals"]
    assert body["change"]["pageviews"] == round(
        (now["pageviews"] - then["pageviews"]) / then["pageviews"] * 100, 2
    )
    assert body["change"]["visitors"] == round(
        (now["visitors"]["estimate"] - then["visitors"]["estimate"]) / then["visitors"]["estimate"] * 100, 2
    )


@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=5, unique=True))
def test_values_anyone_can_send_are_guarded_in_the_csv(values: list[str]) -> None:
    """A breakdown of page URLs or referrers chosen by whoever sends page views: each value reads
    back as sent, with ``'`` before one a spreadsheet would run."""
    answer = TopAnswer(
        TopQuery("page", BASE, END, len(values)), BASE, END, [(v, 1) for v in values], FULL, None, len(values)
    )
    body: dict[str, Any] = render.breakdown(answer, per_site=False, metrics=("pageviews",))
    rows = parsed(export.to_csv(body, export.BREAKDOWN))
    assert [r["value"] for r in rows[:-1]] == [f"'{v}" if v.startswith(FORMULA_STARTS) else v for v in values]


def test_a_one_record_answer_is_one_row_with_its_visitors_spread_even_without_a_number() -> None:
    counted = {
        "site": "=cmd",
        "covered": True,
        "visitors": {"estimate": 3.0, "lower": 3.0, "upper": 3.0, "exact": True},
    }
    uncovered = {"site": "shop.example.com", "covered": False, "visitors": None}
    header = "site,covered,visitors,visitors_lower,visitors_upper,visitors_exact"
    assert export.record_csv(counted, ("visitors",)).splitlines() == [header, "'=cmd,true,3.0,3.0,3.0,true"]
    assert export.record_csv(uncovered, ("visitors",)).splitlines() == [header, "shop.example.com,false,,,,"]
