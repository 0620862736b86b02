"""Where a page view came from: the referrer source and the channel, their rules written once as data.

The **referrer source** is the referrer's host, ``(direct)`` without a referrer and ``(internal)``
from the site itself. The **channel** groups the referrer and the URL's UTM values
(:mod:`views.campaigns`) into the kinds of traffic site owners compare, modelled on Google
Analytics 4's default channel group: an ordered table of :class:`Rule`, the first that holds
names the channel, ``Unassigned`` when none does. Beside GA4's channels there is ``Internal``: a
view reached from the site itself without UTM values (a navigation, not an acquisition; a visit's
channel is its first view's, which is rarely internal).

A rule's tests all have to hold. They read:

- the **source**: ``utm_source`` when the URL has one, else the referrer's host when it is
  another site's, else none; tested for being in a category of :data:`SOURCES`;
- the **medium** (``utm_medium``) and the **campaign** (``utm_campaign``): tested against a
  regular expression that must match the whole value (absent matches nothing);
- the **referrer**: ``none``, ``internal`` or ``external``;
- **tagged**: whether the URL has ``utm_source`` or ``utm_medium``.

A category of :data:`SOURCES` lists sites and names. An entry with a dot is a domain: it matches
that host and its subdomains (``t.co``, ``mail.google.com``). An entry without one is a name: it
matches a source that is the name itself (``utm_source=google``) and a host in which it follows
any subdomains and precedes at most two suffix labels of two or three letters (``google.com``,
``www.google.co.uk``, ``de.search.yahoo.com``). A source may be in two categories; the order of
the rules decides (``mail.google.com`` is Email: its rule comes before Organic Search's).

The Spark expression (:func:`channel_column`) is built from the tables: one ``CASE WHEN``, the
direct and internal views (most of them) decided by the first two conditions, one regular
expression per category test. ``tests/unit/views/test_channels.py`` holds it to real referrers and
campaign URLs; the recount in the tests interprets the tables with its own code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from views.dimension import site_column

if TYPE_CHECKING:
    from pyspark.sql import Column

DIRECT = "(direct)"
INTERNAL = "(internal)"
UNASSIGNED = "Unassigned"

SOURCES: dict[str, tuple[str, ...]] = {
    "email": (
        *("email", "e-mail", "e_mail", "e mail", "newsletter", "mail.google.com", "outlook.live.com"),
        *("outlook.office.com", "outlook.office365.com", "mail.yahoo.com", "mail.proton.me", "mail.aol.com"),
        *("webmail", "mail.yandex.ru", "mail.ru", "gmx", "web.de"),
    ),
    "shopping": (
        *("amazon", "ebay", "etsy", "walmart", "aliexpress", "alibaba", "target.com", "bestbuy"),
        *("shopping.google.com", "shopify", "mercadolibre", "rakuten", "zalando", "idealo"),
    ),
    "video": (
        *("youtube", "youtu.be", "vimeo", "twitch", "dailymotion", "wistia"),
        *("rumble", "bilibili", "netflix"),
    ),
    "social": (
        *("facebook", "fb", "fb.me", "instagram", "t.co", "twitter", "x.com", "linkedin", "lnkd.in"),
        *("reddit", "pinterest", "tiktok", "snapchat", "news.ycombinator.com", "mastodon.social"),
        *("threads.net", "bsky.app", "vk.com", "quora", "tumblr", "weibo", "discord", "telegram"),
        *("t.me", "whatsapp", "medium.com", "substack.com", "producthunt", "stackoverflow"),
    ),
    "search": (
        *("google", "bing", "duckduckgo", "yahoo", "yandex", "baidu", "ecosia", "search.brave.com"),
        *("startpage", "qwant", "naver", "seznam", "sogou", "so.com", "kagi", "perplexity.ai"),
        *("search.aol.com", "ask.com", "yep.com", "presearch"),
    ),
    "sms": ("sms",),
}
"""Source categories, each a list of domains (with a dot) and names (without)."""

PAID = r".*cp.*|ppc|retargeting|paid.*"
"""GA4's paid media (``cpc``, ``cpm``, ``ppc``, ``paid_social``...)."""
SHOP_CAMPAIGN = r"(.*(([^a-df-z]|^)shop|shopping).*)"

Referrer = Literal["none", "internal", "external"]


@dataclass(frozen=True)
class Rule:
    """Names ``channel`` when all its tests hold (a test left None holds)."""

    channel: str
    source: str | None = None
    """A category of :data:`SOURCES` the source must be in."""
    medium: str | None = None
    """A regular expression the whole medium must match."""
    campaign: str | None = None
    """A regular expression the whole campaign must match."""
    referrer: Referrer | None = None
    tagged: bool | None = None
    """Whether the URL has ``utm_source`` or ``utm_medium``."""


RULES: tuple[Rule, ...] = (
    Rule("Direct", referrer="none", tagged=False),
    Rule("Internal", referrer="internal", tagged=False),
    Rule("Cross-network", campaign=r".*cross-network.*"),
    Rule("Paid Shopping", source="shopping", medium=PAID),
    Rule("Paid Shopping", campaign=SHOP_CAMPAIGN, medium=PAID),
    Rule("Paid Search", source="search", medium=PAID),
    Rule("Paid Social", source="social", medium=PAID),
    Rule("Paid Video", source="video", medium=PAID),
    Rule("Display", medium=r"display|banner|expandable|interstitial|cpm"),
    Rule("Paid Other", medium=PAID),
    Rule("Email", source="email"),
    Rule("Email", medium=r"e[-_ ]?mail|newsletter"),
    Rule("Affiliates", medium=r"affiliates?"),
    Rule("Organic Shopping", source="shopping"),
    Rule("Organic Shopping", campaign=SHOP_CAMPAIGN),
    Rule("Organic Social", source="social"),
    Rule("Organic Social", medium=r"social|social[-_ ]network|social[-_ ]media|sm"),
    Rule("Organic Video", source="video"),
    Rule("Organic Video", medium=r".*video.*"),
    Rule("Organic Search", source="search"),
    Rule("Organic Search", medium=r"organic"),
    Rule("SMS", source="sms"),
    Rule("SMS", medium=r"sms"),
    Rule("Audio", medium=r"audio|podcast"),
    Rule("Mobile Push Notifications", medium=r".*push|.*mobile.*|.*notification.*"),
    Rule("Referral", medium=r"referral|app|link"),
    Rule("Referral", referrer="external", tagged=False),
)
"""The channel rules, in order: the first whose tests all hold names the channel."""

CHANNELS: tuple[str, ...] = (*dict.fromkeys(r.channel for r in RULES), UNASSIGNED)
"""Every channel a view can have, in the order of the rules."""

NAME_SUFFIX = r"(\.[a-z]{2,3}){0,2}"
"""What may follow a name in a host (``.com``, ``.co.uk``)."""


def category_pattern(category: str) -> str:
    """A Java regular expression that finds the sources of ``category`` (for ``rlike``, which
    searches: it is anchored at both ends; ``(?s)``: ``.`` matches any character, a line break
    too, as the rules say in words)."""
    entries = SOURCES[category]
    domains = "|".join(re.escape(e) for e in entries if "." in e)
    names = "|".join(re.escape(e) for e in entries if "." not in e)
    parts = [f"(.*\\.)?({domains})" if domains else "", f"(.*\\.)?({names}){NAME_SUFFIX}" if names else ""]
    return "(?s)^(" + "|".join(p for p in parts if p) + r")\z"


def referrer_source() -> Column:
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


def channel_column(referrer: Column, source: Column, medium: Column, campaign: Column) -> Column:
    """The channel as a Spark-native expression, from the referrer source (:func:`referrer_source`)
    and the URL's UTM values (null when absent)."""
    from functools import reduce

    from pyspark.sql import functions as F

    tagged = source.isNotNull() | medium.isNotNull()
    kind = {"none": referrer == DIRECT, "internal": referrer == INTERNAL}
    kind["external"] = ~(kind["none"] | kind["internal"])
    src = F.coalesce(source, F.when(kind["external"], referrer))

    def whole(value: Column, regex: str) -> Column:
        return F.coalesce(value.rlike(f"(?s)^({regex})\\z"), F.lit(False))

    def holds(rule: Rule) -> Column:
        tests = [
            *([F.coalesce(src.rlike(category_pattern(rule.source)), F.lit(False))] if rule.source else []),
            *([whole(medium, rule.medium)] if rule.medium is not None else []),
            *([whole(campaign, rule.campaign)] if rule.campaign is not None else []),
            *([kind[rule.referrer]] if rule.referrer is not None else []),
            *([tagged if rule.tagged else ~tagged] if rule.tagged is not None else []),
        ]
        return reduce(lambda a, b: a & b, tests)

    first, *rest = RULES
    result = F.when(holds(first), F.lit(first.channel))
    for rule in rest:
        result = result.when(holds(rule), F.lit(rule.channel))
    return result.otherwise(F.lit(UNASSIGNED))
