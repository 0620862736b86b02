"""The stored batch document: hours packed into one binary value, heavy hour sketches in a document
of their own, read back exactly, never trusted."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stores.mongo.codec import (
    MalformedDocument,
    batch_doc,
    decoded_hours,
    document_id,
    hour_sketches_id,
    is_hour_sketches,
    pack_hours,
    row_to_documents,
    sketches_apart,
    unpack_hours,
    with_hour_sketches,
)
from views.rows import HOURS

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
@given(rows, st.sampled_from([-1, 300, 8192]))
def test_a_document_gives_back_every_hour_of_its_row(row: dict[str, Any], inline_max: int) -> None:
    docs = row_to_documents(row, inline_max)
    sketch_bytes = sum(len(h["sk"]) for h in row["hours"] if h["sk"] is not None)
    assert len(docs) == (2 if sketch_bytes > inline_max else 1)
    pv, uv, sk = decoded_hours(*docs)
    by_hour = {h["hour"]: h for h in row["hours"]}
    for hour in range(HOURS):
        h = by_hour.get(hour)
        assert pv[hour] == (h["pv"] if h else 0)
        assert uv[hour] == (h["uv"] if h else 0)
        assert sk[hour] == (h["sk"] if h else None)
    assert set(docs[0]) == {"_id", "key", "day", "pv", "uv", "sk", "h"}
    assert sketches_apart(docs[0]) == (len(docs) == 2) and not is_hour_sketches(docs[0])
    if len(docs) == 2:
        assert docs[1]["_id"] == hour_sketches_id(row["key"], row["day"]) != docs[0]["_id"]
        assert docs[1]["hours_of"] == docs[0]["_id"] and is_hour_sketches(docs[1])
        served = batch_doc(docs[0])
        assert served.h_sk is None and (served.h_pv, served.h_uv) == (pv, uv)
        assert with_hour_sketches(served, docs[0]["_id"], docs[1]).h_sk == sk


def test_hour_sketches_apart_must_be_there_and_be_their_documents() -> None:
    hours = [{"hour": 3, "pv": 5, "uv": 2, "sk": b"s" * 50}]
    row = {"key": "k", "day": "2026-11-24", "pv": 5, "uv": 2, "sk": b"day", "hours": hours}
    doc, companion = row_to_documents(row, inline_max=10)
    other = row_to_documents({**row, "hours": [{**hours[0], "pv": 6}]}, inline_max=10)[1]
    served = batch_doc(doc)
    for wrong in (None, other, {**companion, "h": pack_hours(hours, sketches=False)}, {"_id": "x"}):
        with pytest.raises(MalformedDocument):
            decoded_hours(doc, wrong)
        with pytest.raises(MalformedDocument):
            with_hour_sketches(served, doc["_id"], wrong)
    with pytest.raises(RuntimeError, match="not read"):
        served.hours_union((3,))


def test_a_key_ending_like_the_mark_of_hour_sketches_gets_its_own_ids() -> None:
    ids = {
        f(key, "2026-11-24")
        for key in ("https://x/", "https://x/#h")
        for f in (document_id, hour_sketches_id)
    }
    assert len(ids) == 4


def test_documents_of_the_retired_array_layout_are_malformed() -> None:
    """The three 24-slot arrays of the first layout are no longer read: the fingerprint retired
    every generation that wrote them."""
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
    with pytest.raises(MalformedDocument):
        decoded_hours(old)
    with pytest.raises(MalformedDocument):
        batch_doc(old)


@settings(max_examples=300, deadline=None)
@given(rows, st.data())
def test_a_damaged_value_is_refused_never_misread(row: dict[str, Any], data: st.DataObject) -> None:
    """Cut or extended anywhere, the packed hours either fail to decode or decode to what was
    packed (a cut inside a sketch can never shift the hours that follow)."""
    packed = pack_hours(row["hours"], sketches=data.draw(st.booleans()))
    cut = data.draw(st.integers(0, len(packed) - 1))
    for damaged in (packed[:cut], packed + b"\0", b"\x03" + packed[1:]):
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
        batch_doc(doc)
