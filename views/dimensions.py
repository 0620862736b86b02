"""The shipped dimensions: one declaration each, computed by both layers in one shared pass.

To add a breakdown, declare it here (or in any module that calls :func:`views.registry.declare`)
with a Spark column expression over the contract's fields; nothing else in the platform changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from views.devices import device_column
from views.dimension import Dimension, site_column
from views.registry import declare

if TYPE_CHECKING:
    from pyspark.sql import Column

DIRECT = "(direct)"
INTERNAL = "(internal)"
UNKNOWN_COUNTRY = "(unknown)"


def _url() -> Column:
    from pyspark.sql import functions as F

    return F.col("url")


def _referrer_source() -> Column:
    """The referrer's host; ``(direct)`` without a referrer, ``(internal)`` from the site itself.

    Referrers are normalised by the contract (lower-case scheme and host, default port dropped),
    so the host is what follows ``://`` up to the next ``/``.
    """
    from pyspark.sql import functions as F

    host = F.regexp_extract(F.col("referrer"), r"^[a-z]+://([^/]+)", 1)
    return (
        F.when(F.col("referrer").isNull() | (host == ""), F.lit(DIRECT))
        .when(host == site_column(), F.lit(INTERNAL))
        .otherwise(host)
    )


def _country() -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(F.upper(F.col("country")), F.lit(UNKNOWN_COUNTRY))


def _device() -> Column:
    from pyspark.sql import functions as F

    return device_column(F.col("user_agent"))


declare(
    Dimension(
        "page",
        _url,
        "Page views and visitors per page (the normalised URL), across sites.",
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
        _referrer_source,
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
        _url,
        "Visits per entry page: the URL of each visit's first view, across sites (views.sessions).",
        per_site=False,
        examples=("https://shop.example.com/",),
        url_keys=True,
        per_visit="entry",
    )
)
declare(
    Dimension(
        "exit_page",
        _url,
        "Visits per exit page: the URL of each visit's last view, across sites (views.sessions).",
        per_site=False,
        examples=("https://shop.example.com/cart",),
        url_keys=True,
        per_visit="exit",
    )
)
