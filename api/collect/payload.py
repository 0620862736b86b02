"""What the Plausible tracker posts, what the endpoint answers, and the event built from it.

The tracker (``@plausible-analytics/tracker``, and Plausible's script tag) posts a JSON object as
``text/plain``: ``n`` the event name, ``u`` the page's URL, ``d`` the site (its configured
domain), ``r`` the referrer, ``w`` the screen width (older scripts), ``h`` 1 for hash-based
routing, ``p`` custom properties; newer versions add ``v`` (the tracker's version), ``i``
(interactive), ``$`` (revenue) and, for ``engagement`` events, ``sd`` and ``e``. The contract has
no field for the width, the properties or the revenue: they are accepted and not kept.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.events import InvalidEvents, field_error, load_json
from contract.events import MAX_URL_LENGTH

PAGEVIEW = "pageview"


class TrackerEvent(BaseModel):
    """The tracker's payload. Unknown fields are ignored: the tracker adds some in new versions."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {"n": "pageview", "u": "https://shop.example.com/cart", "d": "shop.example.com", "r": None}
            ]
        },
    )

    n: str = Field(min_length=1, max_length=120, description="Event name; only `pageview` is counted.")
    u: str = Field(min_length=1, max_length=MAX_URL_LENGTH * 2, description="URL of the page.")
    d: str = Field(
        min_length=1, max_length=253, description="The site, as configured in LAMBDA_COLLECT_SITES."
    )
    r: str | None = Field(None, max_length=MAX_URL_LENGTH * 2, description="The page's referrer.")
    w: float | None = Field(None, description="Screen width (not kept).")
    h: bool | None = Field(None, description="1: the page routes by its URL's fragment (kept in the path).")
    p: dict[str, Any] | str | None = Field(None, description="Custom properties (not kept).")


class CollectAnswer(BaseModel):
    """What ``POST /api/event`` did with the event, once Kafka acknowledged it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"result": "counted", "event_id": "0b6f6c1e-3c55-4a43-9a0e-2f9c3f1d7a10", "reason": None},
                {
                    "result": "dead_lettered",
                    "event_id": None,
                    "reason": "n: only pageview events are counted",
                },
            ]
        }
    )

    result: Literal["counted", "dead_lettered", "dropped"] = Field(
        description="`counted`: in the events topic; `dead_lettered`: in the DLQ with `reason`; "
        "`dropped`: a bot's page view, dropped by LAMBDA_COLLECT_DROP_BOTS (counted in /metrics)."
    )
    event_id: str | None = Field(description="The event's id in the log (counted events).")
    reason: str | None = Field(description="Why the event is not counted.")


def parse(body: bytes) -> TrackerEvent:
    """The payload, or InvalidEvents (a 422) naming each broken field."""
    data = load_json(body)
    if not isinstance(data, dict):
        raise InvalidEvents(
            [field_error(["body"], "must be a JSON object (the tracker's event)", "type_error")]
        )
    try:
        return TrackerEvent.model_validate(data)
    except ValidationError as exc:
        raise InvalidEvents(
            [field_error(["body", *e["loc"]], e["msg"], e["type"]) for e in exc.errors(include_url=False)]
        ) from None


def page_url(u: str, site: str, hash_routing: bool) -> str:
    """The page's URL on the site: ``u``'s scheme, path and query under the site's host.

    The site is the tracker's ``d`` (what the owner configured), whatever host served the page (a
    ``www.`` alias, a preview host), as Plausible does. With hash-based routing the fragment is the
    page, so it stays, escaped into the path (``/app%23/settings``): the contract drops fragments.
    A ``u`` that is not an http(s) URL is left as it is, and the contract says why it is not one.
    """
    try:
        parts = urlsplit(u.strip())
    except ValueError:
        return u
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return u
    path = parts.path or "/"
    if hash_routing and parts.fragment:
        path = f"{path}%23{parts.fragment}"
    return urlunsplit((parts.scheme.lower(), site, path, parts.query, ""))
