"""The canonical wire form as one pattern: how the layers recognise, without Python, a record that
ingest produced.

Ingest writes every event as :func:`contract.codec.encode` makes it: fixed field order, UTC
timestamps with a ``Z``, normalised URLs, optional fields omitted when absent. A record that is
*already* in that form, byte for byte, and whose every value satisfies the contract decodes to
exactly the values it spells and encodes back to the same bytes, so the layers may take it as it
is. The pattern matches a conservative subset of those records (printable ASCII only, no port, the
strictest URL shape); anything else, valid or not, goes through the contract's own code as before
(``contract.spark_schema``). Recognising is therefore never a second definition of a rule: it can
only send a record to the full check, never accept one the contract rejects, and
``tests/unit/contract/test_canonical.py`` holds it to that with generated records.

The pattern is built from the contract's own constants (identifier characters and length, host
labels, length limits, the country rule), so tightening one of them tightens the pattern too. It is
written once, as the parts below, and rendered for two engines:

- :data:`CANONICAL_PATTERN`, a regular expression as Python's ``re`` (and Java's) read it: the
  readable reference, what the tests hold the recogniser to;
- :data:`AUTOMATON_PATTERN`, the same language in dk.brics.automaton's syntax: what the layers
  run, compiled into a DFA in the JVM (``toolchain/contract-udf``), a table lookup per byte where
  a backtracking regex engine cost five times as much (docs/contract.md).

The event-time window is not in the pattern: it depends on the record's log-append time and is
checked on the timestamp the record spells (after :data:`TS_FIELD`, read by the recogniser), with
a margin so that float rounding at the edge of the window sends a record to the full check rather
than deciding it here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contract.events import _HOST_RE, _ID_PATTERN, MAX_ID_LENGTH, MAX_URL_LENGTH, MAX_USER_AGENT_LENGTH

WINDOW_MARGIN_S = 0.001
"""A record closer than this to either edge of the event-time window is judged by the contract."""

# Printable ASCII without the JSON-escaped characters (", \): what a canonical string may hold
# without any escape, so that its bytes are its value.
_TEXT = r"\x20\x21\x23-\x5b\x5d-\x7e"
# In a URL: no space, no fragment (#); a path stops at ?, a query may hold it.
_PATH_CHARS = r"\x21\x24-\x3e\x40-\x5b\x5d-\x7e"
_QUERY_CHARS = r"\x21\x24-\x5b\x5d-\x7e"


@dataclass(frozen=True)
class _Engine:
    """How one engine spells what regular-expression syntax cannot share between the two."""

    name: str
    group: str
    """Opens a group that only groups."""
    start: str
    """Anchors the start of the record (a DFA always matches the whole input)."""
    end: str
    """Nothing may follow: ``$`` would also match before a final newline in ``re`` and Java."""
    fraction: str
    """A timestamp's six fraction digits that are not all zero (ingest drops a zero fraction)."""


_REGEX = _Engine("regex", group="(?:", start="^", end=r"(?![\s\S])", fraction=r"(?!000000)[0-9]{6}")
_AUTOMATON = _Engine("automaton", group="(", start="", end="", fraction=r"([0-9]{6}&~(000000))")

# dk.brics.automaton reads these as operators outside a character class; a backslash makes any
# character a literal there.
_AUTOMATON_OPERATORS = frozenset('|&?*+{}~[]^.#@"()<>\\-')
_REGEX_SYNTAX = re.compile(r"\\x[0-9a-f]{2}|\\.|\(\?:|\(\?|[*+?}][+]|\[|\]|.", re.DOTALL)


def _render(regex: str, engine: _Engine) -> str:
    """A part written in regular-expression syntax, for ``engine``.

    The parts use only: literal characters, ``\\xHH`` and ``\\c`` escapes, character classes,
    ``(?:...)`` groups, ``|``, ``?``, ``*``, ``+``, ``{m,n}`` and possessive quantifiers. In
    dk.brics.automaton's syntax a group is ``(...)``, every quantifier is possessive-free (a DFA
    never backtracks; each possessive run in the pattern ends at a character outside its class,
    so possessive and greedy match the same strings), and operator characters are escaped. Any
    other construct raises, so a new part cannot silently mean something else to the DFA."""
    if engine is _REGEX:
        return regex
    out: list[str] = []
    in_class = False
    for token in _REGEX_SYNTAX.findall(regex):
        if token.startswith("\\x"):
            out.append("\\" + chr(int(token[2:], 16)))
        elif token.startswith("\\"):
            if token[1] in "sSdDwWbBAZz0123456789":
                raise ValueError(f"{token!r} has no automaton rendering")
            out.append(token)
        elif token == "(?:":
            out.append("(")
        elif len(token) == 2 and token[1] == "+":  # a possessive quantifier
            out.append(token[0])
        elif token == "[":
            in_class = True
            out.append(token)
        elif token == "]":
            in_class = False
            out.append(token)
        elif token in ("^", "$") and not in_class:
            raise ValueError(f"{token!r}: anchors belong to the engine, not to a part")
        elif token.startswith("(?"):
            raise ValueError(f"{token!r} has no automaton rendering")
        elif (not in_class and token in '"#@<>~&') or (
            in_class and token in _AUTOMATON_OPERATORS - {"-", "^", "\\"}
        ):
            out.append("\\" + token)
        else:
            out.append(token)
    return "".join(out)


def _literal(text: str) -> str:
    return re.escape(text)


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


def _timestamp(engine: _Engine) -> str:
    date = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    time = r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    return f"{_render(date + time, engine)}{engine.group}{_render(chr(92) + '.', engine)}{engine.fraction})?Z"


def _opening(name: str) -> str:
    """What precedes the value of field ``name`` in a canonical record."""
    return f',"{name}":"'


def _pattern(engine: _Engine) -> str:
    """The whole canonical record for ``engine``."""

    def part(regex: str) -> str:
        return _render(regex, engine)

    def field(name: str, value: str, optional: bool = False) -> str:
        text = part(_literal(_opening(name))) + value + part(_literal('"'))
        return f"{engine.group}{text})?" if optional else text

    return (
        engine.start
        + part(_literal('{"schema_version":1'))
        + field("event_id", part(_identifier()))
        + field("ts", _timestamp(engine))
        + field("visitor_id", part(_identifier()))
        + field("url", part(_url()))
        + field("referrer", part(_url()), optional=True)
        + field("user_agent", part(f"[{_TEXT}]{{1,{MAX_USER_AGENT_LENGTH}}}+"), optional=True)
        + field("country", part("[A-Z]{2}"), optional=True)
        + part(_literal("}"))
        + engine.end
    )


CANONICAL_PATTERN = _pattern(_REGEX)
"""A record in canonical form, as Python's (and Java's) regular expressions read it."""

AUTOMATON_PATTERN = _pattern(_AUTOMATON)
"""The same records in dk.brics.automaton's syntax: what the layers' recogniser compiles."""

MAX_LENGTHS = {"url": MAX_URL_LENGTH, "referrer": MAX_URL_LENGTH}
"""Lengths the pattern leaves out (a bounded repeat of a whole URL would multiply the DFA's
states). The layers take a record as it is only when the whole record is no longer than the
smallest of them, so no field can exceed its limit; a longer record, valid or not, goes to the
contract's own check."""

TS_FIELD = _opening("ts")
"""What precedes the timestamp in a canonical record, and occurs nowhere else in one (no value may
hold a quote): the recogniser reads the event time after it (``toolchain/contract-udf``)."""
