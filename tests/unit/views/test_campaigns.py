"""The page key and the UTM values of campaign URLs: the layers' Spark expressions, the API's
Python twin of the page key and the recount's own reading of the rules agree, on hand-checked
URLs and on generated ones."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.settings import Settings
from tests import oracle_campaigns as oracle
from tests.unit.views.campaign_frames import stored_keys
from views.campaigns import MAX_UTM_LENGTH, page_key

SITE = "https://shop.example.com"
VIEWS = ("page", "utm_source", "utm_medium", "utm_campaign")

EXAMPLES = [
    # url, page key, (utm_source, utm_medium, utm_campaign)
    (f"{SITE}/pricing", f"{SITE}/pricing", (None, None, None)),
    (f"{SITE}/pricing?utm_source=x", f"{SITE}/pricing", ("x", None, None)),
    (f"{SITE}/p?id=3&utm_medium=cpc&b=2", f"{SITE}/p?id=3&b=2", (None, "cpc", None)),
    (f"{SITE}/p?gclid=Abc&fbclid=x&MSCLKID=y&id=1", f"{SITE}/p?id=1", (None, None, None)),
    (
        f"{SITE}/p?UTM_Source=News+Letter&utm_campaign=Spring%20Sale",
        f"{SITE}/p",
        ("news letter", None, "spring sale"),
    ),
    (f"{SITE}/p?utm_campaign=%E2%82%AC5-OFF", f"{SITE}/p", (None, None, "€5-off")),
    (f"{SITE}/p?utm_campaign=100%+off", f"{SITE}/p", (None, None, "100%+off")),  # malformed: as spelled
    (f"{SITE}/p?utm_source=%20%20a%20b%20", f"{SITE}/p", ("a b", None, None)),
    (f"{SITE}/p?utm_source=&utm_source=second", f"{SITE}/p", (None, None, None)),  # the first one
    (f"{SITE}/p?utm_source", f"{SITE}/p", (None, None, None)),
    (f"{SITE}/p?utm_sourcex=1&a", f"{SITE}/p?a", (None, None, None)),
    (f"{SITE}/p?x=utm_source%3Dy&gclidx=1", f"{SITE}/p?x=utm_source%3Dy&gclidx=1", (None, None, None)),
    (f"{SITE}/p?a=1&&b=2&utm_term=t", f"{SITE}/p?a=1&&b=2", (None, None, None)),
    (f"{SITE}/p?q=a?b&utm_medium=x?y", f"{SITE}/p?q=a?b", (None, "x?y", None)),
    (f"{SITE}/p?utm_campaign={'x' * 150}", f"{SITE}/p", (None, None, "x" * MAX_UTM_LENGTH)),
    (f"{SITE}/p?utm_campaign={'x' * 99}+y", f"{SITE}/p", (None, None, "x" * 99)),  # cut, then trimmed
]


@pytest.mark.parametrize(("url", "page", "utm"), EXAMPLES)
def test_the_recount_and_the_api_read_the_rules_as_written(
    url: str, page: str, utm: tuple[str | None, ...]
) -> None:
    assert page_key(url) == oracle.page(url) == page
    assert tuple(oracle.utm(url, n) for n in ("source", "medium", "campaign")) == utm


def test_the_spark_expressions_say_the_same(spark: Any) -> None:
    got = stored_keys(spark, [(url, None) for url, _, _ in EXAMPLES], VIEWS)
    want = [(page, *(f"shop.example.com|{v or '(none)'}" for v in utm)) for _, page, utm in EXAMPLES]
    assert got == want


def test_the_dropped_parameters_are_a_setting() -> None:
    names = Settings(page_drop_params=["Ref", "gclid", "ref"]).page_drop_params
    assert names == ["gclid", "ref"]
    with pytest.raises(ValueError, match="query parameter name"):
        Settings(page_drop_params=["a|b"])


_NAMES = st.sampled_from(
    ["utm_source", "UTM_Medium", "utm_campaign", "utm_term", "gclid", "FbClid", "id", "q", "", "utm_"]
)
_VALUE = st.lists(
    st.sampled_from([*"aZ09-_.~+?=", "%20", "%2B", "%E2%82%AC", "%C3%A9", "%zz", "%", "é", "Σ", "İ"]),
    max_size=8,
).map("".join)
_PIECE = st.one_of(st.tuples(_NAMES, _VALUE).map(lambda nv: f"{nv[0]}={nv[1]}"), _NAMES)
_URL = st.builds(
    lambda path, pieces: f"{SITE}/{path}" + ("?" + "&".join(pieces) if pieces is not None else ""),
    st.sampled_from(["", "p/1", "a&b", "x=y"]),
    st.one_of(st.none(), st.lists(_PIECE, min_size=1, max_size=6)),
)


@settings(max_examples=3, deadline=None)
@given(st.lists(_URL, min_size=60, max_size=60))
def test_generated_urls_get_the_same_keys_everywhere(spark: Any, urls: list[str]) -> None:
    got = stored_keys(spark, [(u, None) for u in urls], VIEWS)
    for url, (page, *utm) in zip(urls, got, strict=True):
        assert page == page_key(url) == oracle.page(url), url
        assert utm == [
            f"shop.example.com|{oracle.utm(url, n) or '(none)'}" for n in ("source", "medium", "campaign")
        ], url
