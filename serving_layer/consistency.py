"""Read your writes: offsets tokens, and when a snapshot covers them.

``POST /v1/events`` answers with a token naming, per Kafka partition, the end offset of the events
it wrote (the offset after the last one). A query that passes the token back is answered only from
a snapshot that includes those events: for every partition, either the served generation's cut
(the batch views hold every event below it) or the speed layer's committed offsets (the realtime
views of every active generation hold every event below them) must reach the token's offset.
"""

from __future__ import annotations

import base64
import binascii

import orjson

from serving_layer.model import InvalidQuery, Offsets

TOKEN_PREFIX = "o1."


def encode_token(offsets: Offsets) -> str:
    """An opaque, URL-safe token for end offsets per partition."""
    body = orjson.dumps({str(p): o for p, o in sorted(offsets.items())})
    return TOKEN_PREFIX + base64.urlsafe_b64encode(body).decode().rstrip("=")


def decode_token(token: str, param: str = "after") -> Offsets:
    """The offsets of a token; InvalidQuery naming ``param`` if it is not one this API issued."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 4096:
        raise InvalidQuery(param, "is not an offsets token returned by POST /v1/events")
    body = token[len(TOKEN_PREFIX) :]
    try:
        data = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        offsets = {int(p): int(o) for p, o in data.items()}
    except (binascii.Error, ValueError, TypeError, AttributeError, orjson.JSONDecodeError):
        raise InvalidQuery(param, "is not an offsets token returned by POST /v1/events") from None
    if any(p < 0 or o < 0 for p, o in offsets.items()):
        raise InvalidQuery(param, "is not an offsets token returned by POST /v1/events")
    return offsets


def pending(required: Offsets, cut: Offsets, committed: Offsets | None) -> Offsets:
    """Partitions (with the offset still missing) that neither the cut nor the commit covers."""
    committed = committed or {}
    return {p: need for p, need in required.items() if cut.get(p, 0) < need and committed.get(p, 0) < need}
