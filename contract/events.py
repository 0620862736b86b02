"""The page-view event: the one data contract between producers, the log and both layers.

Everything that enters the `events` topic has passed through :class:`PageView`; both layers parse
with the schema derived from it (``contract.spark_schema``). Normalisation happens here, once, so
that two spellings of the same page count as one URL everywhere downstream.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from config.memo import memo
from contract import utc

SCHEMA_VERSION: Literal[1] = 1

FIELD_RULE_ERROR = "field_rule"
"""Error type of the Python-side checks; their message already starts with the field name."""


MAX_URL_LENGTH = 2048
MAX_ID_LENGTH = 128
MAX_USER_AGENT_LENGTH = 512

_ID_PATTERN = r"^[A-Za-z0-9._:@\-]+$"
_HOST_RE = re.compile(
    r"^(?:[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?)*$"
)
_CONTROL_OR_SPACE_RE = re.compile(r"[\x00-\x20\x7f]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@memo("url_cache_bytes")
def normalize_url(raw: str) -> str:
    """Return the canonical spelling of an http(s) URL, or raise ``ValueError`` saying why not.

    Scheme and host are lower-cased, the default port and the fragment are dropped and an empty
    path becomes ``/``; path and query keep their case because servers treat them as distinct.
    The function is idempotent (a property test holds it to that), and cached because real traffic
    repeats a small set of URLs many times.
    """
    url = raw.strip()
    if not url:
        raise ValueError("must not be empty")
    if _CONTROL_OR_SPACE_RE.search(url):
        raise ValueError("must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError("scheme must be http or https")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry credentials")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ValueError("must have a host")
    if not _HOST_RE.match(host):
        raise ValueError(f"host {host!r} is not a valid DNS name")
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = parts.path or "/"
    normalized = f"{scheme}://{netloc}{path}" + (f"?{parts.query}" if parts.query else "")
    if len(normalized) > MAX_URL_LENGTH:
        raise ValueError(f"is longer than {MAX_URL_LENGTH} characters")
    return normalized


def site_of(url: str) -> str:
    """The site a normalised URL belongs to: its host (with a non-default port)."""
    return url.split("/", 3)[2]


@dataclass(frozen=True)
class TimeBounds:
    """How far from *now* an event time may lie. Passed as validation context.

    Bounds are relative to the moment of validation, so they are context rather than part of the
    model: replaying a historic file is a matter of widening ``max_past``.
    """

    max_future: timedelta = timedelta(minutes=5)
    max_past: timedelta = timedelta(days=30)
    now: datetime | None = field(default=None)
    # Compared as epoch seconds: datetime arithmetic per event is measurable at 100K+ events/s.
    _future_s: float = field(init=False, repr=False, compare=False)
    _past_s: float = field(init=False, repr=False, compare=False)
    _fixed_now: float | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_future_s", self.max_future.total_seconds())
        object.__setattr__(self, "_past_s", self.max_past.total_seconds())
        object.__setattr__(self, "_fixed_now", self.now.timestamp() if self.now else None)

    def check(self, ts: datetime, at: float | None = None) -> None:
        """Raise ``ValueError`` if ``ts`` lies outside the window around *now*.

        *now* is ``at`` (epoch seconds) when given, else the fixed ``now``, else the clock. The layers
        pass the record's log-append time as ``at``, so their verdict is the same on every run.
        """
        self.check_epoch(ts.timestamp(), at)

    def check_epoch(self, t: float, at: float | None = None) -> None:
        """:meth:`check` for an event time given as epoch seconds."""
        if at is not None:
            now = at
        elif self._fixed_now is not None:
            now = self._fixed_now
        else:
            now = time.time()
        if t > now + self._future_s:
            raise ValueError(f"is more than {int(self.max_future.total_seconds())} s in the future")
        if t < now - self._past_s:
            raise ValueError(f"is more than {self.max_past.days} days in the past")


Identifier = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=_ID_PATTERN)]
UrlText = Annotated[str, Field(min_length=1, max_length=MAX_URL_LENGTH * 2)]


class PageView(BaseModel):
    """One page view as it travels on the wire (JSON) and lands in the master dataset.

    ``event_id`` is the deduplication key: a producer that retries sends the same id again, and the
    layers count it once. ``ts`` is event time; it must carry a timezone and is stored in UTC.

    Type and size checks run in pydantic-core; the rules that need Python (URL normalisation, time
    bounds) run in one model validator, because ingest validates every event on the hot path and
    each Python validator call costs about as much as all the compiled checks together.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: Identifier
    ts: AwareDatetime
    visitor_id: Identifier
    url: UrlText
    referrer: Annotated[str | None, Field(max_length=MAX_URL_LENGTH * 2)] = None
    user_agent: Annotated[
        str | None, Field(max_length=MAX_USER_AGENT_LENGTH, pattern=r"^[^\x00-\x1f\x7f]*$")
    ] = None
    country: Annotated[str | None, Field(pattern=r"^[A-Za-z]{2}$")] = None

    @model_validator(mode="after")
    def _normalize(self, info: ValidationInfo) -> PageView:
        # Writing through __dict__ is how a frozen model's own validator finishes its values.
        values = self.__dict__
        ts: datetime = values["ts"]
        if ts.utcoffset():
            ts = values["ts"] = ts.astimezone(UTC)
        context = info.context if isinstance(info.context, dict) else {}
        bounds = context.get("bounds")
        try:
            (bounds if isinstance(bounds, TimeBounds) else _DEFAULT_BOUNDS).check_epoch(
                utc.epoch_seconds(ts), context.get("at")
            )
        except ValueError as exc:
            raise _field_error("ts", exc) from None
        try:
            values["url"] = normalize_url(values["url"])
        except ValueError as exc:
            raise _field_error("url", exc) from None
        if values["referrer"]:
            try:
                values["referrer"] = normalize_url(values["referrer"])
            except ValueError as exc:
                raise _field_error("referrer", exc) from None
        else:
            values["referrer"] = None
        if values["country"]:
            values["country"] = values["country"].upper()
        else:
            values["country"] = None
        values["user_agent"] = values["user_agent"] or None
        return self

    @property
    def site(self) -> str:
        return site_of(self.url)

    def wire_dict(self) -> dict[str, Any]:
        """The JSON-ready mapping, without absent optional fields."""
        return self.model_dump(exclude_none=True)


_DEFAULT_BOUNDS = TimeBounds()


def _field_error(field_name: str, exc: ValueError) -> PydanticCustomError:
    """An error for a Python-side check that names its field, as pydantic does for its own."""
    return PydanticCustomError(FIELD_RULE_ERROR, f"{field_name}: {exc}")
