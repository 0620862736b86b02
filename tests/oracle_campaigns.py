"""The recount's own reading of campaign URLs and channels, written from the rules in words.

An independent implementation of the rules of :mod:`views.campaigns` (the page key, the UTM
values) and of the evaluation of the channel tables of :mod:`views.channels`, so that the recount
checks the layers' Spark expressions instead of repeating them: plain string operations and
``urllib`` where the layers use Java regular expressions. It reads the channel *tables* (they are
data, held to real referrers by their own unit tests) and the settings' list of dropped parameters,
never the production functions.
"""

from __future__ import annotations

import re
import string
from urllib.parse import unquote_plus

from config.settings import get_settings
from contract import PageView, site_of
from views.channels import RULES, SOURCES, Rule

UTM_VALUE_LENGTH = 100
"""Characters a UTM value keeps (views.campaigns says 100 in words)."""
_HEX = set(string.hexdigits)


def _name(piece: str) -> str:
    """A parameter's name in ASCII lower case (non-ASCII letters keep their case)."""
    name = piece.split("=", 1)[0]
    return "".join(c.lower() if c in string.ascii_uppercase else c for c in name)


def _pieces(url: str) -> list[str] | None:
    """The ``&``-separated parameters of the query, None without a ``?``."""
    at = url.find("?")
    return None if at < 0 else url[at + 1 :].split("&")


def page(url: str) -> str:
    """The page key: the URL without ``utm_*`` and listed parameters, no ``?`` when none is left."""
    pieces = _pieces(url)
    if pieces is None:
        return url
    drop = set(get_settings().page_drop_params)
    kept = [p for p in pieces if not (_name(p)[:4] == "utm_" or _name(p) in drop)]
    base = url[: url.find("?")]
    return base + ("?" + "&".join(kept) if kept else "")


def _well_formed(value: str) -> bool:
    """Every ``%`` is followed by two hexadecimal digits."""
    return all(
        len(h := value[i + 1 : i + 3]) == 2 and set(h) <= _HEX for i, c in enumerate(value) if c == "%"
    )


def utm(url: str, name: str) -> str | None:
    """The normalised value of the first ``utm_{name}`` parameter, None when absent or empty."""
    for piece in _pieces(url) or []:
        if _name(piece) == f"utm_{name}":
            raw = piece.partition("=")[2]
            text = unquote_plus(raw, errors="replace") if _well_formed(raw) else raw
            value = text.lower().strip(" ")[:UTM_VALUE_LENGTH].strip(" ")
            return value or None
    return None


def referrer_source(e: PageView) -> str:
    """The referrer's host, ``(direct)`` without one, ``(internal)`` from the site itself."""
    if not e.referrer:
        return "(direct)"
    host = site_of(e.referrer)
    return "(internal)" if host == site_of(e.url) else host


def _in_category(source: str, category: str) -> bool:
    labels = source.split(".")
    for entry in SOURCES[category]:
        if "." in entry:
            if source == entry or source.endswith("." + entry):
                return True
            continue
        for i, label in enumerate(labels):
            suffix = labels[i + 1 :]
            short = all(2 <= len(s) <= 3 and all(c in string.ascii_lowercase for c in s) for s in suffix)
            if label == entry and len(suffix) <= 2 and short:
                return True
    return False


def _whole(regex: str | None, value: str | None) -> bool:
    return regex is None or (value is not None and re.fullmatch(regex, value, re.DOTALL) is not None)


def channel(e: PageView) -> str:
    """The first rule of the channel table whose tests all hold, Unassigned when none does."""
    ref = referrer_source(e)
    kind = "none" if ref == "(direct)" else "internal" if ref == "(internal)" else "external"
    source, medium, campaign = (utm(e.url, n) for n in ("source", "medium", "campaign"))
    tagged = source is not None or medium is not None
    if source is None and kind == "external":
        source = ref

    def holds(rule: Rule) -> bool:
        return (
            (rule.source is None or (source is not None and _in_category(source, rule.source)))
            and _whole(rule.medium, medium)
            and _whole(rule.campaign, campaign)
            and rule.referrer in (None, kind)
            and rule.tagged in (None, tagged)
        )

    return next((rule.channel for rule in RULES if holds(rule)), "Unassigned")


def per_site(value: str | None, e: PageView) -> str:
    """The stored key of a per-site dimension: ``site|value``, ``(none)`` for no value."""
    return f"{site_of(e.url)}|{'(none)' if value is None else value}"
