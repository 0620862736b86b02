"""The stored batch document: hours packed into one binary value, read back exactly, never trusted."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serving_layer.model import BatchDoc
from views.rows import (
    HOURS,
    MalformedDocument,
    decoded,
    decoded_hours,
    pack_hours,
    row_to_document,
    unpack_hours,
)

hour_values = st.fixed_dictionaries(
    {
        "pv": st.integers(1, 2**63 - 1),
        "uv": st.integers(1, 2**63 - 1),
        "sk": st.one_of(st.none(), st.binary(min_size=1, max_size=300)),
    }
)
rows = st.builds(
    lambda key, hours: {
        "key": key,
        "day": "2026-11-24",
        "pv": sum(h["pv"] for h in hours.values()) % 2**63,
        "uv": 1,
        "sk": b"day",
        "hours": [{"hour": h, **v} for h, v in hours.items()],
    },
    st.text(min_size=1, max_size=40),
    st.dictionaries(st.integers(0, HOURS - 1), hour_values, max_size=HOURS),
)


@settings(max_examples=200, deadline=None)
@given(rows)
def test_a_document_gives_back_every_hour_of_its_row(row: dict[str, Any]) -> None:
    doc = row_to_document(row)
    pv, uv, sk = decoded_hours(doc)
    by_hour = {h["hour"]: h for h in row["hours"]}
    for hour in range(HOURS):
        h = by_hour.get(hour)
        assert pv[hour] == (h["pv"] if h else 0)
        assert uv[hour] == (h["uv"] if h else 0)
        assert sk[hour] == (h["sk"] if h else None)
    assert set(doc) == {"_id", "key", "day", "pv", "uv", "sk", "h"}


def test_documents_of_the_earlier_layout_still_read() -> None:
    old = {
        "_id": "2026-11-24|k",
        "key": "k",
        "day": "2026-11-24",
        "pv": 3,
        "uv": 2,
        "sk": b"day",
        "h_pv": [3] + [0] * 23,
        "h_uv": [2] + [0] * 23,
        "h_sk": [b"s"] + [None] * 23,
    }
    assert decoded_hours(old) == ([3] + [0] * 23, [2] + [0] * 23, [b"s"] + [None] * 23)
    assert decoded(old)["h_pv"] == old["h_pv"]
    assert BatchDoc.from_document(old).h_sk[0] == b"s"


@settings(max_examples=300, deadline=None)
@given(rows, st.data())
def test_a_damaged_value_is_refused_never_misread(row: dict[str, Any], data: st.DataObject) -> None:
    """Cut or extended anywhere, the packed hours either fail to decode or decode to what was
    packed (a cut inside a sketch can never shift the hours that follow)."""
    packed = pack_hours(row["hours"])
    cut = data.draw(st.integers(0, len(packed) - 1))
    for damaged in (packed[:cut], packed + b"\0", b"\x02" + packed[1:]):
        with pytest.raises(MalformedDocument):
            unpack_hours(damaged)


@pytest.mark.parametrize(
    "doc",
    [
        {"pv": 1, "uv": 1, "h": b"\x01"},
        {"pv": 1, "uv": 1, "h": b"\x01\x00\x00\x00\x01"},  # a mask past hour 23
        {"pv": 1, "uv": 1, "h_pv": [1], "h_uv": [1], "h_sk": [None]},
        {"pv": 1, "uv": 1},
        {"pv": "many", "uv": 1, "h": pack_hours([])},
    ],
)
def test_bad_stored_documents_are_malformed_not_crashes(doc: dict[str, Any]) -> None:
    with pytest.raises(MalformedDocument):
        BatchDoc.from_document(doc)
