"""The shape of a view row, shared by every view and by both layers' writers, and of the stored
batch document made from it.

One row per (key, day): the day's totals and its hourly values. This is also the unit of the stored
documents (one per view, key and day: the "few, wide documents" of docs/design.md), so a 7-day
hourly query reads 7-8 documents.

    key    string                 the URL, the site, ...
    day    string                 UTC date, YYYY-MM-DD
    pv     bigint                 page views in the day (exact)
    uv     bigint                 distinct visitors in the day (exact)
    sk     binary                 HLL sketch of the day's visitors (DataSketches, Spark's format)
    hours  array<struct<hour:int, pv:bigint, uv:bigint, sk:binary>>   only hours with views

A document keeps the day's values as fields (``pv``, ``uv``, ``sk``) and packs the hours into one
binary field, ``h`` (:func:`pack_hours`, docs/views.md#the-stored-document): a MongoDB-protocol
server pays per BSON element, and the 72 elements of three 24-slot arrays were most of what
FerretDB spent on a document (measured in docs/ferretdb.md). Readers go through
:func:`decoded_hours`, which also reads the earlier layout (``h_pv``, ``h_uv``, ``h_sk`` arrays)
that generations written before this format still hold until they are retired.
"""

from __future__ import annotations

import struct
from typing import Any

HOURS = 24
HOURS_FORMAT = 1
"""The first byte of ``h``: the version of :func:`pack_hours`' layout."""
_HEADER = struct.Struct("<BI")  # format, bit mask of the hours present
_HOUR = struct.Struct("<QQI")  # page views, distinct visitors, sketch length

Hours = tuple[list[int], list[int], list[bytes | None]]
"""(page views, distinct visitors, sketch or None) per hour 0-23."""


class MalformedDocument(ValueError):
    """A stored document that does not decode: never counted, never a server error."""


def row_to_document(row: Any) -> dict[str, Any]:
    """A view row (Spark Row or dict) as the stored document."""
    return {
        "_id": document_id(row["key"], row["day"]),
        "key": row["key"],
        "day": row["day"],
        "pv": row["pv"],
        "uv": row["uv"],
        "sk": bytes(row["sk"]),
        "h": pack_hours(row["hours"]),
    }


def pack_hours(hours: Any) -> bytes:
    """The hours of a row (each with hour, pv, uv, sk) as one binary value: a version byte, a
    24-bit mask of the hours present, then per hour present, in order, its page views and distinct
    visitors (unsigned 64-bit, little-endian), its sketch's length (32-bit) and the sketch."""
    ordered = sorted(hours, key=lambda h: h["hour"])
    mask = 0
    parts = []
    for h in ordered:
        mask |= 1 << h["hour"]
        sketch = bytes(h["sk"]) if h["sk"] is not None else b""
        parts.append(_HOUR.pack(h["pv"], h["uv"], len(sketch)))
        parts.append(sketch)
    return _HEADER.pack(HOURS_FORMAT, mask) + b"".join(parts)


def unpack_hours(packed: bytes) -> Hours:
    """:func:`pack_hours` reversed: dense 24-slot lists; raises :class:`MalformedDocument`."""
    pv, uv = [0] * HOURS, [0] * HOURS
    sk: list[bytes | None] = [None] * HOURS
    try:
        version, mask = _HEADER.unpack_from(packed, 0)
        if version != HOURS_FORMAT or mask >> HOURS:
            raise MalformedDocument(f"hours: format {version}, mask {mask:#x}")
        at = _HEADER.size
        for hour in range(HOURS):
            if mask >> hour & 1:
                pv[hour], uv[hour], length = _HOUR.unpack_from(packed, at)
                at += _HOUR.size
                if at + length > len(packed):
                    raise MalformedDocument(f"hours: hour {hour}'s sketch runs past the end")
                sk[hour] = bytes(packed[at : at + length]) if length else None
                at += length
    except struct.error as exc:
        raise MalformedDocument(f"hours: {exc}") from exc
    if at != len(packed):
        raise MalformedDocument(f"hours: {len(packed) - at} bytes left over")
    return pv, uv, sk


def decoded_hours(doc: dict[str, Any]) -> Hours:
    """The 24 hours of a stored document, in either layout; raises :class:`MalformedDocument`."""
    if "h" in doc:
        return unpack_hours(bytes(doc["h"]))
    try:
        pv, uv, sk = doc["h_pv"], doc["h_uv"], doc["h_sk"]
        lengths_ok = len(pv) == len(uv) == len(sk) == HOURS
        hours = [int(v) for v in pv], [int(v) for v in uv], [None if s is None else bytes(s) for s in sk]
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedDocument(f"hours: {exc!r}") from exc
    if not lengths_ok:
        raise MalformedDocument("hours: arrays of the earlier layout are not 24 long")
    return hours


def decoded(doc: dict[str, Any]) -> dict[str, Any]:
    """A stored document with its hours as ``h_pv``, ``h_uv``, ``h_sk`` lists (diffs, tests)."""
    h_pv, h_uv, h_sk = decoded_hours(doc)
    out = {k: v for k, v in doc.items() if k not in ("h", "h_pv", "h_uv", "h_sk")}
    return {**out, "h_pv": h_pv, "h_uv": h_uv, "h_sk": h_sk}


def document_id(key: str, day: str) -> str:
    """Documents are read by _id only: the one lookup every MongoDB-protocol server serves fast."""
    return f"{day}|{key}"
