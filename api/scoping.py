"""A key limited to some sites (``keys add --site``) reads those sites only: a query of another
site is a 403 that says so, and a listing of sites shows the key's sites only.

- A series names its site: the site itself, a page's host, or the site of a per-site dimension's
  value. A dimension whose values belong to no site is refused to a limited key.
- A ranking without ``site`` (top URLs, the pages) is of the key's one site, or needs ``site``
  when the key has several.
- The site listing (``/v1/breakdown?dimension=site``) ranks the key's sites only, read by name
  (serving_layer.listing); its totals are over those sites.
"""

from __future__ import annotations

from dataclasses import replace

from api import cost
from api.auth import Caller, Forbidden, require_site
from api.requests import TimeseriesRequest, TopRequest
from serving_layer import SITE_VIEW, URL_VIEW, InvalidQuery, QueryEngine, SeriesQuery
from serving_layer.answers import TopAnswer
from serving_layer.current_visitors import CurrentQuery
from serving_layer.listing import cost as listing_cost
from serving_layer.listing import top_sites
from views.scopes import scope_of


def _site_of(caller: Caller, site: str | None, what: str) -> None:
    assert caller.sites is not None
    if site is None:
        raise Forbidden(f"this API key may read the sites {', '.join(sorted(caller.sites))} only; {what}")
    require_site(caller, site)


def check_series(caller: Caller, q: SeriesQuery) -> None:
    """403 unless the caller may read the site of a pageviews / unique-visitors query."""
    if caller.sites is None:
        return
    site = q.key if q.view == SITE_VIEW else scope_of(q.key, False)
    _site_of(caller, site, "the page has no site")


def check_timeseries(caller: Caller, r: TimeseriesRequest) -> None:
    if caller.sites is None:
        return
    q = r.query
    site: str | None
    if q.view == SITE_VIEW:
        site = q.key
    elif q.view == URL_VIEW:
        site = scope_of(q.key, False)
    else:
        site = scope_of(q.key, True) if r.per_site else None
    _site_of(caller, site, f"the dimension {q.view!r} is not per site")


def check_current(caller: Caller, q: CurrentQuery) -> None:
    """403 unless the caller may read the site of a current-visitors query."""
    require_site(caller, q.site)


def scope_top(caller: Caller, r: TopRequest) -> TopRequest:
    """The ranking a caller may see of ``r``: the same, of its one site, or of its sites only."""
    if caller.sites is None:
        return r
    q = r.query
    if q.view == SITE_VIEW:
        return replace(r, only_sites=tuple(sorted(caller.sites)))
    if q.site is not None:
        require_site(caller, q.site)
        return r
    if q.view != URL_VIEW:
        _site_of(caller, None, f"the dimension {q.view!r} is not per site")
    if len(caller.sites) == 1:
        return replace(r, query=replace(q, site=next(iter(caller.sites))))
    raise InvalidQuery(
        "site", f"required: this API key reads the sites {', '.join(sorted(caller.sites))}; name one"
    )


def top_cost(r: TopRequest) -> int:
    return cost.top_cost(r.query) if r.only_sites is None else listing_cost(r.query, r.only_sites)


async def ranked(engine: QueryEngine, r: TopRequest) -> TopAnswer:
    """The answer of a ranking: the engine's, or the listing of the caller's sites."""
    if r.only_sites is None:
        return await engine.top(r.query, r.after)
    return await top_sites(engine, r.query, r.only_sites, r.after)
