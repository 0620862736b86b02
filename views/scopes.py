"""Stored keys of views, read without Spark: the scope (site) a key belongs to, and its value.

The serving layer ranks and filters keys by site with these; they never trust a stored key to be
well-formed (a record that bypassed validation must not take an endpoint down): a key that does
not parse has no scope, and callers skip it.
"""

from __future__ import annotations

import re
from typing import Any

from views.dimension import SCOPE_SEPARATOR, View

_URL_SITE = re.compile(r"^[a-z]+://([^/?#|]+)")


def describe(view: View) -> dict[str, Any]:
    """What the API needs to serve a view (stored with each generation)."""
    return {
        "description": view.description,
        "per_site": view.per_site,
        "examples": list(view.examples),
        "visits": view.counts_visits,
        "pageviews": view.counts_page_views,
        "url_keys": view.url_keys,
    }


def scope_of(key: str, per_site: bool) -> str | None:
    """The site a stored key belongs to: the prefix of a per-site key, the host of a URL key;
    None for a key of no site (a site itself) or one that does not parse."""
    if per_site:
        site, sep, _ = key.partition(SCOPE_SEPARATOR)
        return site if sep and site else None
    match = _URL_SITE.match(key)
    return match.group(1) if match else None


def value_of(key: str, per_site: bool) -> str:
    """The value a stored key shows to users (the part after the site for a per-site key)."""
    return key.partition(SCOPE_SEPARATOR)[2] if per_site else key


def stored_key(site: str, value: str, per_site: bool) -> str:
    return f"{site}{SCOPE_SEPARATOR}{value}" if per_site else value
