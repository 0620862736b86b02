"""Device class of a user agent: the rules, written once as data.

The rules are an ordered table of (class, alternatives): the first class with an alternative
that matches the lower-cased user-agent string decides its class; a user agent no rule matches is
a desktop browser, and an event without a user agent is ``(unknown)``. The Spark expression
(:func:`device_column`) and the pure-Python classifier (:func:`classify`, used by the recount in
the tests) are both built from :data:`RULES`, so they cannot disagree, and the unit tests hold the
table to a list of real user-agent strings.

Most alternatives are plain substrings (Spark's ``contains``); the few patterns use only syntax
that Java's regex engine (Spark's ``rlike``) and Python's ``re`` read the same way: ASCII
character classes, ``.*`` and negative lookahead.
Bots come first (a crawler often claims to be a phone too); tablets before phones, because
Android tablets say ``Android`` without ``Mobile`` and iPads say ``iPad``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

UNKNOWN = "(unknown)"
DESKTOP = "desktop"

RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "bot",
        (
            r"bot(?![a-z0-9_])",
            *("crawl", "spider", "slurp", "mediapartners", "facebookexternalhit", "bingpreview"),
            *("headlesschrome", "phantomjs", "lighthouse", "curl/", "wget/", "python-requests"),
            *("python-urllib", "go-http-client", "okhttp", "java/", "libwww", "httpclient"),
            *("scrapy", "feedfetcher", "apachebench"),
        ),
    ),
    (
        "tablet",
        (
            *("ipad", "tablet", "kindle", "silk/", "playbook", "nexus 7", "nexus 9", "nexus 10"),
            r"sm-t[0-9]",
            r"android(?!.*mobile)",
        ),
    ),
    (
        "mobile",
        (
            *("mobi", "iphone", "ipod", "android", "windows phone", "blackberry", "bb10"),
            *("opera mini", "iemobile", "webos", "fennec"),
        ),
    ),
)
"""(class, alternatives) in order, first class with a matching alternative wins; none is
``desktop``. Alternatives match the lower-cased user agent: a plain string is a substring test, one
with regular-expression syntax a search."""

_SYNTAX = re.compile(r"[\\()\[\]{}?*+|^$.]")


def _is_literal(alternative: str) -> bool:
    """Plain text: matched as a substring, which is what keeps the Spark expression cheap (Java's
    regex engine tries every alternative of an alternation at every position; docs/views.md)."""
    return not _SYNTAX.search(alternative)


@lru_cache(maxsize=4096)
def classify(user_agent: str | None) -> str:
    """The device class of one user agent, in Python (the Spark expression's twin)."""
    if not user_agent:
        return UNKNOWN
    ua = user_agent.lower()
    for name, alternatives in RULES:
        for alt in alternatives:
            if (alt in ua) if _is_literal(alt) else re.search(alt, ua):
                return name
    return DESKTOP


def device_column(user_agent: Column) -> Column:
    """The device class as a Spark-native expression (no Python UDF on the hot path).

    One CASE WHEN whose first condition reads the lower-cased user agent: Spark evaluates the first
    condition of every row, so it computes ``lower`` once and shares it with the other conditions
    (nested CASE WHENs would lower the string once per alternative; docs/views.md)."""
    from functools import reduce

    from pyspark.sql import functions as F

    ua = F.lower(F.coalesce(user_agent, F.lit("")))
    result = F.when(ua == "", F.lit(UNKNOWN))
    for name, alternatives in RULES:
        tests = [ua.contains(alt) if _is_literal(alt) else ua.rlike(alt) for alt in alternatives]
        result = result.when(reduce(lambda a, b: a | b, tests), F.lit(name))
    return result.otherwise(F.lit(DESKTOP))
