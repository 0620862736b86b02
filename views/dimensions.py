"""The shipped dimensions: one declaration each, computed by both layers in one shared pass.

To add a breakdown, declare it here (or in any module that calls :func:`views.declarations.declare`)
with a Spark column expression over the contract's fields; nothing else in the platform changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from views.campaigns import MAX_UTM_LENGTH, page_key_column, utm_column
from views.channels import CHANNELS, DIRECT, INTERNAL, channel_column, referrer_source
from views.declarations import declare
from views.devices import device_column
from views.dimension import NONE, Dimension, KeyExpression, site_column

if TYPE_CHECKING:
    from pyspark.sql import Column

UNKNOWN_COUNTRY = "(unknown)"


def _url() -> Column:
    from pyspark.sql import functions as F

    return F.col("url")


def _page() -> Column:
    """The page key: the URL without its campaign and click-id parameters (views.campaigns)."""
    return page_key_column(_url())


def _utm_source() -> Column:
    return utm_column(_url(), "source")


def _utm_medium() -> Column:
    return utm_column(_url(), "medium")


def _utm_campaign() -> Column:
    return utm_column(_url(), "campaign")


CAMPAIGN_VALUES: tuple[tuple[str, KeyExpression], ...] = (
    ("_referrer", referrer_source),
    ("_utm_source", _utm_source),
    ("_utm_medium", _utm_medium),
    ("_utm_campaign", _utm_campaign),
)
"""What the UTM dimensions and the channel read, computed once per event (``Dimension.given``)."""


def _given(name: str) -> KeyExpression:
    from pyspark.sql import functions as F

    return lambda: F.col(name)


def _channel() -> Column:
    from pyspark.sql import functions as F

    return channel_column(*(F.col(name) for name, _ in CAMPAIGN_VALUES))


def _country() -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(F.upper(F.col("country")), F.lit(UNKNOWN_COUNTRY))


def _device() -> Column:
    from pyspark.sql import functions as F

    return device_column(F.col("user_agent"))


declare(
    Dimension(
        "page",
        _page,
        "Page views and visitors per page (the normalised URL without utm_* and click-id "
        "parameters), across sites.",
        per_site=False,
        examples=("https://shop.example.com/cart",),
        url_keys=True,
    )
)
declare(
    Dimension(
        "site",
        site_column,
        "Page views and visitors per site (the host, with a non-default port).",
        per_site=False,
        examples=("shop.example.com",),
        visits=True,
    )
)
declare(
    Dimension(
        "referrer",
        referrer_source,
        "Where visitors came from: the referrer's host, (direct) or (internal).",
        examples=("www.google.com", DIRECT, INTERNAL),
        visits=True,
    )
)
declare(
    Dimension(
        "country",
        _country,
        "The visitor's country (ISO 3166 alpha-2), or (unknown).",
        examples=("DE", "US", UNKNOWN_COUNTRY),
        visits=True,
    )
)
declare(
    Dimension(
        "device",
        _device,
        "Device class from the user agent: desktop, mobile, tablet, bot or (unknown).",
        examples=("desktop", "mobile", "tablet", "bot"),
        once_per_value=True,
        visits=True,
    )
)
declare(
    Dimension(
        "entry_page",
        _page,
        "Visits per entry page: the page of each visit's first view, across sites (views.sessions).",
        per_site=False,
        examples=("https://shop.example.com/",),
        url_keys=True,
        per_visit="entry",
    )
)
declare(
    Dimension(
        "exit_page",
        _page,
        "Visits per exit page: the page of each visit's last view, across sites (views.sessions).",
        per_site=False,
        examples=("https://shop.example.com/cart",),
        url_keys=True,
        per_visit="exit",
    )
)
for _name, _what, _example in (
    ("source", "who sent the visitor (a search engine, a newsletter, a partner)", "newsletter"),
    ("medium", "the kind of link (cpc, email, social)", "email"),
    ("campaign", "the campaign's name", "spring_sale"),
):
    declare(
        Dimension(
            f"utm_{_name}",
            _given(f"_utm_{_name}"),
            f"The page URL's utm_{_name}: {_what}; lower case, trimmed, at most "
            f"{MAX_UTM_LENGTH} characters, (none) without one (views.campaigns).",
            examples=(_example, NONE),
            visits=True,
            given=tuple(g for g in CAMPAIGN_VALUES if g[0] == f"_utm_{_name}"),
        )
    )
declare(
    Dimension(
        "channel",
        _channel,
        "The channel, from the referrer and the UTM values by rules modelled on GA4's default "
        "channel group (views.channels): " + ", ".join(CHANNELS) + ".",
        examples=("Organic Search", "Direct", "Email", "Paid Search"),
        visits=True,
        given=CAMPAIGN_VALUES,
    )
)
