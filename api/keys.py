"""From what a client names (a URL, a site, a dimension's value) to the stored key of a view.

A URL is normalised as ingest normalises events and keyed as the views key pages (without its
campaign and click-id parameters: views.campaigns), a site is the host (with a non-default port) the
views key it by, and a per-site dimension's key is ``site|value`` (:mod:`views.scopes`). A name
that does not translate raises InvalidQuery naming the parameter (a 422).
"""

from __future__ import annotations

from contract import normalize_url, site_of
from serving_layer import SITE_VIEW, URL_VIEW, InvalidQuery
from views.campaigns import page_key
from views.scopes import scope_of, stored_key


def normalize_site(raw: str) -> str:
    """A site as the views key it: the host (with a non-default port) of ``shop.example.com`` or
    ``https://shop.example.com``."""
    url = normalize_url(raw if "://" in raw else f"https://{raw}")
    if url.split("/", 3)[3:] not in ([], [""]):
        raise ValueError("must be a host (shop.example.com) or an origin, without a path")
    return site_of(url)


def site_key(site: str) -> str:
    try:
        return normalize_site(site)
    except ValueError as exc:
        raise InvalidQuery("site", str(exc)) from None


def target_of(url: str | None, site: str | None) -> tuple[str, str]:
    """(view, key) of a query: one page's URL, or a site for site-wide answers."""
    if url is not None and site is not None:
        raise InvalidQuery("site", "give either url or site, not both")
    if url is not None:
        try:
            return URL_VIEW, page_key(normalize_url(url))
        except ValueError as exc:
            raise InvalidQuery("url", str(exc)) from None
    if site is not None:
        return SITE_VIEW, site_key(site)
    raise InvalidQuery("url", "give url (one page) or site (site-wide)")


def series_key(
    dimension: str, per_site: bool, site: str | None, value: str | None, url_keys: bool = False
) -> tuple[str, str]:
    """(stored key, value) of a timeseries: ``site|value`` for a per-site dimension, the site itself
    for `site`, the normalised URL for a dimension keyed by URLs (`page`, `entry_page`,
    `exit_page`), the value as given otherwise."""
    if per_site:
        if site is None:
            raise InvalidQuery("site", f"required: {dimension!r} is a per-site dimension")
        if value is None:
            raise InvalidQuery("value", f"required for the dimension {dimension!r}")
        return stored_key(site_key(site), value, True), value
    if dimension == SITE_VIEW:
        if site is None:
            raise InvalidQuery("site", "required for the site dimension")
        if value is not None and value != site:
            raise InvalidQuery("value", "omit it for the site dimension (the site is the value)")
        key = site_key(site)
        return key, key
    if value is None:
        raise InvalidQuery("value", f"required for the dimension {dimension!r}")
    if dimension == URL_VIEW or url_keys:
        key = target_of(value, None)[1]
        if site is not None and scope_of(key, False) != site_key(site):
            raise InvalidQuery("value", f"the page is not on the site {site!r}")
        return key, key
    return value, value
