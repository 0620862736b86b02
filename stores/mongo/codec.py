"""The stored batch document: the MongoDB layout of a view row, its ranking documents and its
collection names, in both directions (the writer encodes, the reader decodes; nothing else does).

One document per (view, key, day): the row's day totals as fields (``pv``, ``uv``, ``sk``) and its
hours packed into one binary field, ``h`` (:func:`pack_hours`, docs/views.md#the-stored-document):
a MongoDB-protocol server pays per BSON element, and the 72 elements of three 24-slot arrays were
most of what FerretDB spent on a document (docs/ferretdb.md). Readers decode through
:func:`decoded_hours` or :func:`batch_doc`.

A key with many visitors an hour (a whole site) has hourly sketches of kilobytes each, 100 KB a
day, and a server reads a document whole (FerretDB parses all of its stored JSON, projection or
not): a 30-day daily query would read 3 MB it never uses. Past :data:`INLINE_SKETCHES_MAX` bytes
the hourly sketches therefore go to a document of their own (:func:`row_to_documents`), read only
by queries that union hours of that day.

A view that counts visits (views.sessions) also stores their day totals as fields (``vi``, ``bo``,
``du``, ``vv``) and their hours packed in ``v`` (:func:`pack_visit_hours`).

Beside the (key, day) documents, every recomputed day has a **ranking**: the day's keys sorted by
page views (visits, for the entry and exit pages: stores.rows.ranking_score)
(``_id = "{day}|#rank"``, continued in ``"{day}|#rank:1"``, ... for very many keys), so
that "top N" reads one or a few documents per day instead of every key's.
"""

from __future__ import annotations

import inspect
import re
import struct
import sys
from collections.abc import Iterable
from typing import Any

from stores.batch_views import BatchDoc
from stores.rows import row_field, visit_metric
from views.rows import HOURS

WITH_SKETCHES = 1
"""The first byte of a packed ``h`` holding each hour's page views, distinct visitors and sketch."""
WITHOUT_SKETCHES = 2
"""The first byte of a packed ``h`` holding each hour's page views and distinct visitors only: the
sketches are in the document's companion (:func:`hour_sketches_id`)."""
INLINE_SKETCHES_MAX = 8192
"""Hourly sketches up to this many bytes stay in their document. Most pages' are a few hundred
bytes (a handful of visitors an hour: a sketch keeps them as a list), a busy site's 24 x 4 KB; 8 KB
adds about 0.25 ms to a document's read on FerretDB (docs/views.md#the-stored-document)."""
_HEADER = struct.Struct("<BI")  # format, bit mask of the hours present
_HOUR = struct.Struct("<QQI")  # page views, distinct visitors, sketch length
_HOUR_TOTALS = struct.Struct("<QQ")  # page views, distinct visitors

_MASK = struct.Struct("<I")  # the hours present
_VISIT_HOUR = struct.Struct("<qqqq")  # visits, bounces, duration ms, views in visits
VISIT_METRICS = ("vi", "bo", "du", "vv")
"""A document's visit metrics (views.sessions.METRICS): day totals as fields, hours packed in ``v``."""

Hours = tuple[list[int], list[int], list[bytes | None]]
"""(page views, distinct visitors, sketch or None) per hour 0-23."""


class MalformedDocument(ValueError):
    """A stored document that does not decode: never counted, never a server error."""


def row_to_documents(row: Any, inline_max: int = INLINE_SKETCHES_MAX) -> list[dict[str, Any]]:
    """A view row (Spark Row or dict) as its stored document, followed by the document of its hour
    sketches when they weigh more than ``inline_max`` bytes (then the first one's ``h`` holds the
    hours' counts only)."""
    doc = {
        "_id": document_id(row["key"], row["day"]),
        "key": row["key"],
        "day": row["day"],
        "pv": row["pv"],
        "uv": row["uv"],
        "sk": bytes(row["sk"]),
        "h": pack_hours(row["hours"]),
    }
    if row_field(row, "vi") is not None:
        doc.update((m, int(row[m] or 0)) for m in VISIT_METRICS)
        doc["v"] = pack_visit_hours(row["hours"])
    if sum(len(h["sk"]) for h in row["hours"] if h["sk"] is not None) <= inline_max:
        return [doc]
    # The companion keeps ``key`` and ``day`` (a scan by day finds it) and the hours in format 1.
    companion = {"_id": hour_sketches_id(row["key"], row["day"]), "hours_of": doc["_id"]}
    companion.update((field, doc[field]) for field in ("key", "day", "h"))
    doc["h"] = pack_hours(row["hours"], sketches=False)
    return [doc, companion]


def pack_visit_hours(hours: Any) -> bytes:
    """The visit metrics of a row's hours (views.sessions: visits, bounces, duration in ms, views
    in visits) as one binary value: a 24-bit mask of the hours with visits (little-endian 32-bit),
    then per such hour, in order, the four metrics (signed 64-bit, little-endian)."""
    mask, parts = 0, []
    for h in sorted(hours, key=lambda h: h["hour"]):
        values = tuple(visit_metric(h, m) for m in VISIT_METRICS)
        if any(values):
            mask |= 1 << h["hour"]
            parts.append(_VISIT_HOUR.pack(*values))
    return _MASK.pack(mask) + b"".join(parts)


def unpack_visit_hours(packed: bytes) -> list[tuple[int, int, int, int]]:
    """:func:`pack_visit_hours` reversed: 24 (visits, bounces, duration ms, views) tuples; raises
    :class:`MalformedDocument`."""
    out = [(0, 0, 0, 0)] * HOURS
    try:
        (mask,) = _MASK.unpack_from(packed, 0)
        if mask >> HOURS:
            raise MalformedDocument(f"visit hours: mask {mask:#x}")
        at = _MASK.size
        for hour in range(HOURS):
            if mask >> hour & 1:
                out[hour] = _VISIT_HOUR.unpack_from(packed, at)
                at += _VISIT_HOUR.size
    except struct.error as exc:
        raise MalformedDocument(f"visit hours: {exc}") from exc
    if at != len(packed):
        raise MalformedDocument(f"visit hours: {len(packed) - at} bytes left over")
    return out


def pack_hours(hours: Any, sketches: bool = True) -> bytes:
    """The hours of a row (each with hour, pv, uv, sk) as one binary value: a format byte, a
    24-bit mask of the hours present, then per hour present, in order, its page views and distinct
    visitors (unsigned 64-bit, little-endian) and, with ``sketches``, its sketch's length (32-bit)
    and the sketch."""
    ordered = sorted(hours, key=lambda h: h["hour"])
    mask = 0
    parts = []
    for h in ordered:
        mask |= 1 << h["hour"]
        if sketches:
            sketch = bytes(h["sk"]) if h["sk"] is not None else b""
            parts.append(_HOUR.pack(h["pv"], h["uv"], len(sketch)))
            parts.append(sketch)
        else:
            parts.append(_HOUR_TOTALS.pack(h["pv"], h["uv"]))
    return _HEADER.pack(WITH_SKETCHES if sketches else WITHOUT_SKETCHES, mask) + b"".join(parts)


def unpack_hours(packed: bytes) -> Hours:
    """:func:`pack_hours` reversed: dense 24-slot lists (no sketches if they were left out); raises
    :class:`MalformedDocument`."""
    pv, uv = [0] * HOURS, [0] * HOURS
    sk: list[bytes | None] = [None] * HOURS
    try:
        version, mask = _HEADER.unpack_from(packed, 0)
        if version not in (WITH_SKETCHES, WITHOUT_SKETCHES) or mask >> HOURS:
            raise MalformedDocument(f"hours: format {version}, mask {mask:#x}")
        at = _HEADER.size
        for hour in range(HOURS):
            if not mask >> hour & 1:
                continue
            if version == WITHOUT_SKETCHES:
                pv[hour], uv[hour] = _HOUR_TOTALS.unpack_from(packed, at)
                at += _HOUR_TOTALS.size
                continue
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


def sketches_apart(doc: dict[str, Any]) -> bool:
    """Whether a stored document's hour sketches are in a document of their own."""
    h = doc.get("h")
    return isinstance(h, bytes) and h[:1] == bytes([WITHOUT_SKETCHES])


def is_hour_sketches(doc: dict[str, Any]) -> bool:
    """Whether a stored document is the hour sketches of another (:func:`row_to_documents`)."""
    return "hours_of" in doc


def hour_sketches(
    of: str, pv: list[int], uv: list[int], companion: dict[str, Any] | None
) -> list[bytes | None]:
    """The 24 hour sketches of the document ``of`` (hourly page views ``pv``, distinct visitors
    ``uv``) from its companion; raises :class:`MalformedDocument` if the companion is missing, does
    not decode or holds other hours than its document."""
    if companion is None:
        raise MalformedDocument(f"hours: the hour sketches of {of!r} are missing")
    try:
        packed = bytes(companion["h"])
    except (KeyError, TypeError) as exc:
        raise MalformedDocument(f"hour sketches of {of!r}: {exc!r}") from exc
    own_pv, own_uv, sk = unpack_hours(packed)
    if packed[0] != WITH_SKETCHES or (own_pv, own_uv) != (pv, uv):
        raise MalformedDocument(f"hour sketches of {of!r}: not the hours of their document")
    return sk


def decoded_hours(doc: dict[str, Any], companion: dict[str, Any] | None = None) -> Hours:
    """The 24 hours of a stored document (the sketches from ``companion`` when they are apart);
    raises :class:`MalformedDocument`."""
    try:
        pv, uv, sk = unpack_hours(bytes(doc["h"]))
    except (KeyError, TypeError) as exc:
        raise MalformedDocument(f"hours: {exc!r}") from exc
    if sketches_apart(doc):
        return pv, uv, hour_sketches(str(doc.get("_id")), pv, uv, companion)
    return pv, uv, sk


def decoded(doc: dict[str, Any], companion: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stored document (and its hour sketches' companion, if apart) as one document with its
    hours as ``h_pv``, ``h_uv``, ``h_sk`` lists (diffs, tests)."""
    h_pv, h_uv, h_sk = decoded_hours(doc, companion)
    out = {k: v for k, v in doc.items() if k not in ("h", "v")}
    if "v" in doc:
        out["h_visits"] = unpack_visit_hours(bytes(doc["v"]))
    return {**out, "h_pv": h_pv, "h_uv": h_uv, "h_sk": h_sk}


def document_id(key: str, day: str) -> str:
    """Documents are read by _id only: the one lookup every MongoDB-protocol server serves fast."""
    return f"{day}|{key}"


def hour_sketches_id(key: str, day: str) -> str:
    """The _id of a document's hour sketches kept apart. The day has a fixed length, so ``#h`` in
    its place can be no key's :func:`document_id` (a URL may well end in ``#h``)."""
    return f"{day}#h|{key}"


def batch_doc(doc: dict[str, Any]) -> BatchDoc:
    """The engine's value of a stored document (hour sketches stored apart not yet read: ``h_sk``
    None); raises :class:`MalformedDocument` for one that does not decode."""
    h_sk: list[bytes | None] | None
    if sketches_apart(doc):
        h_pv, h_uv, _ = unpack_hours(doc["h"])
        h_sk = None
    else:
        h_pv, h_uv, h_sk = decoded_hours(doc)
    try:
        sk = doc.get("sk")
        visits, h_visits = None, None
        if "v" in doc:
            visits = (int(doc["vi"]), int(doc["bo"]), int(doc["du"]), int(doc["vv"]))
            h_visits = unpack_visit_hours(bytes(doc["v"]))
        return BatchDoc(
            pv=int(doc["pv"]),
            uv=int(doc["uv"]),
            sk=None if sk is None else bytes(sk),
            h_pv=h_pv,
            h_uv=h_uv,
            h_sk=h_sk,
            visits=visits,
            h_visits=h_visits,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedDocument(f"day totals: {exc!r}") from exc


def with_hour_sketches(doc: BatchDoc, of: str, companion: dict[str, Any] | None) -> BatchDoc:
    """``doc`` with its hour sketches read from their own document, ``companion`` (raises
    :class:`MalformedDocument` when it is missing or not the one of ``of``)."""
    h_sk = hour_sketches(of, doc.h_pv, doc.h_uv, companion)
    return BatchDoc(doc.pv, doc.uv, doc.sk, doc.h_pv, doc.h_uv, h_sk, doc.visits, doc.h_visits)


# --- collections and rankings ----------------------------------------------------------------------
_COLLECTION_RE = re.compile(r"^bv_(?P<view>[a-z0-9_]+)_g(?P<gen>\d+)$")
RANK_MARK = "#rank"
RANK_CHUNK = 20_000
"""Keys per ranking document: far below MongoDB's 16 MB document limit even for 2 KB URLs."""


def collection_name(view: str, gen: int) -> str:
    """One collection per (view, generation): garbage collection drops whole collections."""
    return f"bv_{view}_g{gen}"


def parse_collection_name(name: str) -> tuple[str, int] | None:
    """(view, generation) of a batch view collection's name; None for any other collection."""
    m = _COLLECTION_RE.match(name)
    return None if m is None else (m["view"], int(m["gen"]))


def rank_document_id(day: str, chunk: int = 0) -> str:
    """``{day}|#rank`` and its continuations; no key starts with ``#`` (URLs and hosts do not)."""
    return f"{day}|{RANK_MARK}" if chunk == 0 else f"{day}|{RANK_MARK}:{chunk}"


def rank_documents(day: str, counts: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    """The ranking of one day: keys by page views, descending (ties by key), in chunks.

    The first chunk says how many there are, so a reader knows which ``_id`` s to fetch; a day
    without keys still gets its (empty) first chunk, so a missing ranking always means an error.
    """
    ranked = sorted(counts, key=lambda kv: (-kv[1], kv[0]))
    chunks = [ranked[i : i + RANK_CHUNK] for i in range(0, len(ranked), RANK_CHUNK)] or [[]]
    return [
        {
            "_id": rank_document_id(day, i),
            "day": day,
            "chunk": i,
            "chunks": len(chunks),
            "keys": [k for k, _ in chunk],
            "pv": [v for _, v in chunk],
        }
        for i, chunk in enumerate(chunks)
    ]


def ranking_from_chunks(chunks: list[dict[str, Any] | None]) -> list[tuple[str, int]] | None:
    """The (key, page views) entries of a day's ranking documents; None if one is missing."""
    out: list[tuple[str, int]] = []
    for chunk in chunks:
        if chunk is None:
            return None
        out.extend(zip(chunk["keys"], (int(v) for v in chunk["pv"]), strict=True))
    return out


def is_rank_document(doc: dict[str, Any]) -> bool:
    return "key" not in doc


def stored_layout() -> str:
    """This layout as the views' fingerprints cover it (views.registry.pass_fingerprint): this
    module's code, so that a generation written in a layout the reader no longer decodes is never
    served (a changed codec recomputes every view)."""
    return inspect.getsource(sys.modules[__name__])
