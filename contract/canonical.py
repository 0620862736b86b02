"""The canonical wire form as one pattern: how the layers recognise, without Python, a record that
ingest produced.

Ingest writes every event as :func:`contract.codec.encode` makes it: fixed field order, UTC
timestamps with a ``Z``, normalised URLs, optional fields omitted when absent. A record that is
*already* in that form, byte for byte, and whose every value satisfies the contract decodes to
exactly the values it spells and encodes back to the same bytes, so the layers may take it as it
is. :data:`CANONICAL_PATTERN` matches a conservative subset of those records (printable ASCII
only, no port, the strictest URL shape); anything else, valid or not, goes through the contract's
own code as before (``contract.spark_schema``). Recognising is therefore never a second definition
of a rule: it can only send a record to the full check, never accept one the contract rejects, and
``tests/unit/test_contract_canonical.py`` holds it to that with generated records.

The pattern is built from the contract's own constants (identifier characters and length, host
labels, length limits, the country rule), so tightening one of them tightens the pattern too. The
event-time window is not in the pattern: it depends on the record's log-append time and is
checked on the parsed timestamp, with a margin so that float rounding at the edge of the window
sends a record to the full check rather than deciding it here.
"""

from __future__ import annotations

from contract.events import _HOST_RE, _ID_PATTERN, MAX_ID_LENGTH, MAX_URL_LENGTH, MAX_USER_AGENT_LENGTH

WINDOW_MARGIN_S = 0.001
"""A record closer than this to either edge of the event-time window is judged by the contract."""

# Printable ASCII without the JSON-escaped characters (", \): what a canonical string may hold
# without any escape, so that its bytes are its value.
_TEXT = r"\x20\x21\x23-\x5b\x5d-\x7e"
# In a URL: no space, no fragment (#); a path stops at ?, a query may hold it.
_PATH_CHARS = r"\x21\x24-\x3e\x40-\x5b\x5d-\x7e"
_QUERY_CHARS = r"\x21\x24-\x5b\x5d-\x7e"


def _identifier() -> str:
    """The identifier rule of the contract (``Identifier``) as a sub-pattern."""
    chars = _ID_PATTERN.removeprefix("^").removesuffix("+$")
    return f"{chars}{{1,{MAX_ID_LENGTH}}}+"


def _url() -> str:
    """A URL already in :func:`contract.events.normalize_url`'s canonical form, without a port:
    lower-case http(s) scheme and DNS host, a non-empty path, a non-empty query if any, no
    fragment, no credentials. Its length is checked on the parsed value (:data:`MAX_URL_LENGTH`)."""
    host = _HOST_RE.pattern.removeprefix("^").removesuffix("$")
    return f"https?://{host}/[{_PATH_CHARS}]*+(?:\\?[{_QUERY_CHARS}]++)?"


_TIMESTAMP = (
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.(?!000000)[0-9]{6})?Z"
)

CANONICAL_PATTERN = (
    r'^\{"schema_version":1'
    rf',"event_id":"{_identifier()}"'
    rf',"ts":"{_TIMESTAMP}"'
    rf',"visitor_id":"{_identifier()}"'
    rf',"url":"{_url()}"'
    rf'(?:,"referrer":"{_url()}")?'
    rf'(?:,"user_agent":"[{_TEXT}]{{1,{MAX_USER_AGENT_LENGTH}}}+")?'
    r'(?:,"country":"[A-Z]{2}")?'
    r"\}(?![\s\S])"
)
"""A record in canonical form, as Java and Python regular expressions read it alike (the end is
"no character follows": ``$`` would also match before a final newline in both)."""

MAX_LENGTHS = {"url": MAX_URL_LENGTH, "referrer": MAX_URL_LENGTH}
"""Lengths the pattern leaves to the parsed values (a bounded repeat of a whole URL would cost the
regex engine more than a length check does)."""
