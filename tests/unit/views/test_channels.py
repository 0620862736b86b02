"""The channel rules against real referrers and campaign URLs: the layers' Spark expression and the
recount's own reading of the tables (tests.oracle_campaigns) both say what a person would."""

from __future__ import annotations

from typing import Any

import pytest

from tests.oracle_campaigns import channel
from tests.unit.views.campaign_frames import events_of, stored_keys
from views.channels import CHANNELS, RULES, SOURCES, category_pattern

SITE = "https://shop.example.com"

REAL = [
    # no referrer, no campaign: typed in, a bookmark, an app
    (f"{SITE}/", None, "Direct"),
    (f"{SITE}/pricing?plan=pro", None, "Direct"),
    (f"{SITE}/?utm_campaign=launch", None, "Direct"),  # a campaign alone names no source
    # navigation inside the site
    (f"{SITE}/cart", f"{SITE}/p/1", "Internal"),
    # search engines
    (f"{SITE}/", "https://www.google.com/", "Organic Search"),
    (f"{SITE}/", "https://www.google.co.uk/", "Organic Search"),
    (f"{SITE}/", "https://www.google.com.br/", "Organic Search"),
    (f"{SITE}/", "https://www.bing.com/search?q=shop", "Organic Search"),
    (f"{SITE}/", "https://duckduckgo.com/", "Organic Search"),
    (f"{SITE}/", "https://search.yahoo.com/search?p=shop", "Organic Search"),
    (f"{SITE}/", "https://yandex.ru/", "Organic Search"),
    (f"{SITE}/", "https://www.ecosia.org/", "Organic Search"),
    (f"{SITE}/", "https://search.brave.com/search?q=shop", "Organic Search"),
    (f"{SITE}/", "https://www.baidu.com/link?url=x", "Organic Search"),
    (f"{SITE}/?utm_source=google&utm_medium=organic", None, "Organic Search"),
    # social networks
    (f"{SITE}/", "https://t.co/Ab1", "Organic Social"),
    (f"{SITE}/", "https://l.facebook.com/", "Organic Social"),
    (f"{SITE}/", "https://m.facebook.com/", "Organic Social"),
    (f"{SITE}/", "https://www.instagram.com/", "Organic Social"),
    (f"{SITE}/", "https://www.linkedin.com/", "Organic Social"),
    (f"{SITE}/", "https://lnkd.in/", "Organic Social"),
    (f"{SITE}/", "https://www.reddit.com/r/webdev/", "Organic Social"),
    (f"{SITE}/", "https://old.reddit.com/", "Organic Social"),
    (f"{SITE}/", "https://news.ycombinator.com/item?id=1", "Organic Social"),
    (f"{SITE}/", "https://x.com/", "Organic Social"),
    (f"{SITE}/", "https://bsky.app/profile/x", "Organic Social"),
    (f"{SITE}/", "https://mastodon.social/@x", "Organic Social"),
    (f"{SITE}/?utm_source=twitter&utm_medium=social", None, "Organic Social"),
    # video and shopping sites
    (f"{SITE}/", "https://www.youtube.com/", "Organic Video"),
    (f"{SITE}/", "https://m.youtube.com/watch?v=x", "Organic Video"),
    (f"{SITE}/", "https://vimeo.com/123", "Organic Video"),
    (f"{SITE}/", "https://www.amazon.de/", "Organic Shopping"),
    (f"{SITE}/", "https://www.ebay.co.uk/itm/1", "Organic Shopping"),
    (f"{SITE}/?utm_source=x&utm_medium=y&utm_campaign=black-friday-shopping", None, "Organic Shopping"),
    # webmail and newsletters
    (f"{SITE}/", "https://mail.google.com/", "Email"),
    (f"{SITE}/", "https://outlook.live.com/mail/0/", "Email"),
    (f"{SITE}/?utm_source=newsletter&utm_medium=email&utm_campaign=june", None, "Email"),
    (f"{SITE}/?utm_source=mailchimp&utm_medium=e-mail", None, "Email"),
    (f"{SITE}/?utm_source=Newsletter", None, "Email"),
    # paid
    (f"{SITE}/?utm_source=google&utm_medium=cpc&gclid=x1", "https://www.google.com/", "Paid Search"),
    (f"{SITE}/?utm_source=bing&utm_medium=ppc", "https://www.bing.com/", "Paid Search"),
    (
        f"{SITE}/?utm_source=facebook&utm_medium=paid_social&fbclid=y",
        "https://m.facebook.com/",
        "Paid Social",
    ),
    (f"{SITE}/?utm_source=linkedin.com&utm_medium=cpc", None, "Paid Social"),
    (f"{SITE}/?utm_source=youtube&utm_medium=cpv", None, "Paid Video"),
    (f"{SITE}/?utm_source=amazon&utm_medium=cpc", None, "Paid Shopping"),
    (f"{SITE}/?utm_source=x&utm_medium=cpc&utm_campaign=shop-summer", None, "Paid Shopping"),
    (f"{SITE}/?utm_source=gdn&utm_medium=display", "https://ads.example.net/", "Display"),
    (f"{SITE}/?utm_source=gdn&utm_medium=banner", None, "Display"),
    (f"{SITE}/?utm_source=partner&utm_medium=paid", None, "Paid Other"),
    (f"{SITE}/?utm_source=google&utm_medium=cpc&utm_campaign=cross-network-q4", None, "Cross-network"),
    # the rest of GA4's list
    (f"{SITE}/?utm_source=awin&utm_medium=affiliate", None, "Affiliates"),
    (f"{SITE}/?utm_source=sms&utm_medium=text", None, "SMS"),
    (f"{SITE}/?utm_source=spotify&utm_medium=audio", None, "Audio"),
    (f"{SITE}/?utm_source=app&utm_medium=push", None, "Mobile Push Notifications"),
    (f"{SITE}/?utm_source=partner.example.org&utm_medium=referral", None, "Referral"),
    # other sites: referral; a campaign on another site's link with an unknown medium: unassigned
    (f"{SITE}/", "https://partner.example.org/reviews", "Referral"),
    (f"{SITE}/", "https://blog.example.com/post", "Referral"),  # another site of the same owner
    (f"{SITE}/", "https://googleblog.example.org/", "Referral"),  # google is not its name
    (f"{SITE}/?utm_source=partner&utm_medium=qr", "https://partner.example.org/", "Unassigned"),
    (f"{SITE}/?utm_source=partner", "https://partner.example.org/", "Unassigned"),
]


@pytest.mark.parametrize(("url", "referrer", "expected"), REAL)
def test_the_recount_reads_the_tables_as_a_person_would(
    url: str, referrer: str | None, expected: str
) -> None:
    assert channel(events_of([(url, referrer)])[0]) == expected


def test_the_spark_expression_says_the_same(spark: Any) -> None:
    got = stored_keys(spark, [(url, ref) for url, ref, _ in REAL], ("channel",))
    assert [key for (key,) in got] == [f"shop.example.com|{expected}" for _, _, expected in REAL]


def test_the_tables_are_well_formed() -> None:
    """Every channel is reachable, every category is used, and no entry is spelled twice."""
    assert {r.channel for r in RULES} | {"Unassigned"} == set(CHANNELS)
    assert {r.source for r in RULES if r.source} == set(SOURCES)
    entries = [e for entries in SOURCES.values() for e in entries]
    assert len(entries) == len(set(entries)) and all(e == e.strip().lower() for e in entries)
    assert {c for _, _, c in REAL} == set(CHANNELS)  # the examples name every channel
    for category in SOURCES:
        assert category_pattern(category).startswith("(?s)^(")
