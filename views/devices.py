"""Device class of a user agent: the rules, written once as data.

The rules are an ordered table of (class, regular expression): the first pattern that matches
the user-agent string decides its class; a user agent no rule matches is a desktop browser, and
an event without a user agent is ``(unknown)``. The Spark expression (:func:`device_column`) and
the pure-Python classifier (:func:`classify`, used by the recount in the tests) are both built
from :data:`RULES`, so they cannot disagree, and the unit tests hold the table to a list of real
user-agent strings.

The patterns use only syntax that Java's regex engine (Spark's ``rlike``) and Python's ``re``
read the same way: ``(?i)``, alternation, character classes, ``.*`` and negative lookahead.
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

RULES: tuple[tuple[str, str], ...] = (
    (
        "bot",
        r"(?i)(bot\b|bot/|crawl|spider|slurp|mediapartners|facebookexternalhit|bingpreview|"
        r"headlesschrome|phantomjs|lighthouse|curl/|wget/|python-requests|python-urllib|"
        r"go-http-client|okhttp|java/|libwww|httpclient|scrapy|feedfetcher|apachebench)",
    ),
    ("tablet", r"(?i)(ipad|tablet|kindle|silk/|playbook|nexus (7|9|10)|sm-t\d|android(?!.*mobile))"),
    (
        "mobile",
        r"(?i)(mobi|iphone|ipod|android|windows phone|blackberry|bb10|opera mini|iemobile|"
        r"webos|fennec)",
    ),
)
"""(class, pattern), first match wins; no match is ``desktop``."""


@lru_cache(maxsize=4096)
def classify(user_agent: str | None) -> str:
    """The device class of one user agent, in Python (the Spark expression's twin)."""
    if not user_agent:
        return UNKNOWN
    for name, pattern in RULES:
        if re.search(pattern, user_agent):
            return name
    return DESKTOP


def device_column(user_agent: Column) -> Column:
    """The device class as a Spark-native expression (no Python UDF on the hot path)."""
    from pyspark.sql import functions as F

    result = F.lit(DESKTOP)
    for name, pattern in reversed(RULES):
        result = F.when(user_agent.rlike(pattern), F.lit(name)).otherwise(result)
    return F.when(F.coalesce(F.length(user_agent), F.lit(0)) == 0, F.lit(UNKNOWN)).otherwise(result)
