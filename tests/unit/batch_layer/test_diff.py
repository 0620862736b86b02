"""The comparison of two generations' documents of a view (batch_layer.diff)."""

from __future__ import annotations

from typing import Any

from batch_layer.diff import diff_view


def doc(key: str, day: str, pv: int, uv: int, sk: bytes = b"s") -> dict[str, Any]:
    return {
        "key": key,
        "day": day,
        "pv": pv,
        "uv": uv,
        "h_pv": [pv] + [0] * 23,
        "h_uv": [uv] + [0] * 23,
        "sk": sk,
    }


def test_documents_are_matched_by_key_and_day_and_compared_on_exact_values() -> None:
    a = [doc("/a", "d1", 5, 2), doc("/b", "d1", 3, 1), doc("/c", "d1", 1, 1), doc("/a", "d2", 4, 4)]
    b = [
        doc("/a", "d1", 5, 2, sk=b"other order"),
        doc("/b", "d1", 4, 1),
        doc("/a", "d2", 4, 4),
        doc("/d", "d2", 9, 9),
    ]
    d = diff_view("page", a, b)
    # Sketch bytes depend on insertion order: equal counts with other bytes are unchanged.
    assert (d.view, d.unchanged, d.changed, d.only_in_a, d.only_in_b) == ("page", 2, 1, 1, 1)
    assert d.sample == [
        {"key": "/b", "day": "d1", "a": {"pv": 3, "uv": 1}, "b": {"pv": 4, "uv": 1}},
        {"key": "/c", "day": "d1", "a": {"pv": 1, "uv": 1}, "b": None},
        {"key": "/d", "day": "d2", "a": None, "b": {"pv": 9, "uv": 9}},
    ]


def test_an_hourly_difference_alone_is_a_change() -> None:
    changed = doc("/a", "d1", 5, 2)
    changed["h_pv"] = [4, 1] + [0] * 22
    d = diff_view("page", [doc("/a", "d1", 5, 2)], [changed])
    assert (d.changed, d.unchanged) == (1, 0)


def test_the_sample_is_bounded_and_in_key_order() -> None:
    a = [doc(f"/{i:02d}", "d1", i, 1) for i in range(20)]
    b = [doc(f"/{i:02d}", "d1", i + 1, 1) for i in range(20)]
    d = diff_view("page", reversed(a), b, sample_size=3)
    assert d.changed == 20 and [s["key"] for s in d.sample] == ["/00", "/01", "/02"]


def test_identical_views_have_no_sample() -> None:
    docs = [doc("/a", "d1", 1, 1)]
    d = diff_view("page", docs, docs)
    assert (d.unchanged, d.changed, d.only_in_a, d.only_in_b, d.sample) == (1, 0, 0, 0, [])
