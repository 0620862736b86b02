"""The event contract: round trip, normalisation, and a reason for every rejection."""

from __future__ import annotations

import string
from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from contract import ContractError, PageView, TimeBounds, decode, encode, normalize_url, validate
from contract.events import MAX_ID_LENGTH, MAX_URL_LENGTH

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BOUNDS = TimeBounds(max_future=timedelta(minutes=5), max_past=timedelta(days=30), now=NOW)

ids = st.text(alphabet=string.ascii_letters + string.digits + "._:@-", min_size=1, max_size=MAX_ID_LENGTH)
hosts = st.lists(
    st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9\-]{0,10}[a-zA-Z0-9])?", fullmatch=True), min_size=1, max_size=4
).map(".".join)
paths = st.lists(
    st.text(alphabet=string.ascii_letters + string.digits + "-_.~%", max_size=8), max_size=4
).map(lambda parts: "/" + "/".join(parts) if parts else "")
queries = st.one_of(st.just(""), st.text(alphabet=string.ascii_letters + string.digits + "=&", max_size=12))
schemes = st.sampled_from(["http", "https", "HTTP", "Https"])
ports = st.one_of(st.none(), st.sampled_from([80, 443, 8080, 3000]))


@st.composite
def raw_urls(draw: st.DrawFn) -> str:
    """URLs as producers spell them: mixed-case scheme and host, ports, fragments."""
    port = draw(ports)
    netloc = draw(hosts) + (f":{port}" if port else "")
    query = draw(queries)
    fragment = draw(st.one_of(st.just(""), st.text(alphabet=string.ascii_letters, max_size=6)))
    url = f"{draw(schemes)}://{netloc}{draw(paths)}"
    return url + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")


# Instants within the bounds, spelled in various offsets (the bounds apply to the instant).
timestamps = st.builds(
    lambda instant, tz: instant.replace(tzinfo=UTC).astimezone(tz),
    st.datetimes(
        min_value=(NOW - timedelta(days=29)).replace(tzinfo=None),
        max_value=(NOW + timedelta(minutes=4)).replace(tzinfo=None),
    ),
    st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7, minutes=-30))]),
)


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, object]:
    event: dict[str, object] = {
        "event_id": draw(ids),
        "ts": draw(timestamps).isoformat(),
        "visitor_id": draw(ids),
        "url": draw(raw_urls()),
    }
    if draw(st.booleans()):
        event["referrer"] = draw(raw_urls())
    if draw(st.booleans()):
        event["user_agent"] = draw(st.text(alphabet=string.printable.strip() + " ", max_size=80))
    if draw(st.booleans()):
        event["country"] = draw(st.sampled_from(["us", "DE", "Fr"]))
    return event


@given(valid_events())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_json_round_trip(raw: dict[str, object]) -> None:
    event = decode(orjson.dumps(raw), BOUNDS)
    assert decode(encode(event), BOUNDS) == event
    assert event.ts.tzinfo is not None and event.ts.utcoffset() == timedelta(0)
    assert encode(event).count(b'"ts":"') == 1 and b"Z" in encode(event)


@given(valid_events())
@settings(max_examples=200)
def test_normalisation_is_idempotent(raw: dict[str, object]) -> None:
    once = decode(orjson.dumps(raw), BOUNDS)
    twice = validate(once.wire_dict(), BOUNDS)
    assert twice == once
    assert normalize_url(once.url) == once.url


@given(raw_urls())
def test_url_normalisation_rules(url: str) -> None:
    normalized = normalize_url(url)
    assert normalize_url(normalized) == normalized
    scheme, rest = normalized.split("://", 1)
    host = rest.split("/", 1)[0]
    assert scheme in ("http", "https")
    assert host == host.lower()
    assert "#" not in normalized
    assert not host.endswith({"http": ":80", "https": ":443"}[scheme])  # the scheme's default port goes
    assert "/" in rest  # an empty path becomes "/"


def test_normalisation_examples() -> None:
    assert normalize_url("HTTPS://Shop.Example.COM:443/Cart?x=1#top") == "https://shop.example.com/Cart?x=1"
    assert normalize_url("http://example.com") == "http://example.com/"
    assert normalize_url("http://example.com:8080/a") == "http://example.com:8080/a"
    event = validate(
        {
            "event_id": "e",
            "ts": "2026-06-01T13:00:00+01:00",
            "visitor_id": "v",
            "url": "http://A.b/",
            "country": "de",
        },
        BOUNDS,
    )
    assert event.ts == datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    assert event.country == "DE"
    assert event.site == "a.b"


BASE = {"event_id": "e1", "ts": "2026-06-01T11:00:00Z", "visitor_id": "v1", "url": "https://a.example/x"}

# (field the reason must name, the broken event)
INVALID_CASES: list[tuple[str, dict[str, object]]] = [
    ("event_id", {**BASE, "event_id": ""}),
    ("event_id", {**BASE, "event_id": "has space"}),
    ("event_id", {**BASE, "event_id": "x" * (MAX_ID_LENGTH + 1)}),
    ("visitor_id", {k: v for k, v in BASE.items() if k != "visitor_id"}),
    ("visitor_id", {**BASE, "visitor_id": 42}),
    ("ts", {k: v for k, v in BASE.items() if k != "ts"}),
    ("ts", {**BASE, "ts": "2026-06-01T11:00:00"}),
    ("ts", {**BASE, "ts": "yesterday"}),
    ("ts", {**BASE, "ts": "2026-06-01T12:06:00Z"}),
    ("ts", {**BASE, "ts": "2026-04-01T12:00:00Z"}),
    ("url", {**BASE, "url": "ftp://a.example/x"}),
    ("url", {**BASE, "url": "https:///nohost"}),
    ("url", {**BASE, "url": "https://a b.example/"}),
    ("url", {**BASE, "url": "https://user:pw@a.example/"}),
    ("url", {**BASE, "url": "https://a.example/" + "x" * MAX_URL_LENGTH}),
    ("url", {**BASE, "url": "https://a.example:99999/"}),
    ("referrer", {**BASE, "referrer": "javascript:alert(1)"}),
    ("country", {**BASE, "country": "DEU"}),
    ("user_agent", {**BASE, "user_agent": "bad\x01agent"}),
    ("user_agent", {**BASE, "user_agent": "a" * 600}),
    ("schema_version", {**BASE, "schema_version": 2}),
    ("campaign", {**BASE, "campaign": "x"}),
]


@pytest.mark.parametrize(
    ("field", "raw"), INVALID_CASES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(INVALID_CASES)]
)
def test_invalid_events_are_rejected_with_a_reason(field: str, raw: dict[str, object]) -> None:
    with pytest.raises(ContractError) as caught:
        decode(orjson.dumps(raw), BOUNDS)
    assert caught.value.reason.startswith(f"{field}:") or f"; {field}:" in caught.value.reason


@pytest.mark.parametrize(
    "payload", [b"", b"{", b"[1, 2]", b"null", b'"text"', b"\xff\xfe", b"{" + b" " * 20000 + b"}"]
)
def test_unparseable_payloads_are_rejected_with_a_reason(payload: bytes) -> None:
    with pytest.raises(ContractError) as caught:
        decode(payload, BOUNDS)
    assert caught.value.reason.startswith("event:")


@given(
    valid_events(),
    st.sampled_from(["event_id", "visitor_id", "url", "ts"]),
    st.sampled_from(["", None, 7, []]),
)
def test_any_broken_required_field_is_rejected_naming_it(
    raw: dict[str, object], field: str, bad: object
) -> None:
    broken = {**raw, field: bad}
    assume(not (field == "ts" and bad == 7))  # an integer is a valid epoch timestamp in pydantic's lax mode
    with pytest.raises(ContractError) as caught:
        decode(orjson.dumps(broken), BOUNDS)
    assert field in caught.value.reason


def test_model_is_immutable() -> None:
    event = validate(BASE, BOUNDS)
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError on frozen models
        event.url = "https://other.example/"  # type: ignore[misc]
    assert isinstance(event, PageView)
