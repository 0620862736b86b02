"""Campaign parameters of a page's URL: the page key without them, and the UTM values as keys.

The master dataset keeps every URL as it was sent (it is immutable, and a raw URL is evidence);
only the *key* a view counts a page under is cleaned. So ``/pricing?utm_source=x&id=3`` and
``/pricing?id=3`` are one page, and changing what is dropped is a change of the views'
fingerprints (the batch layer recomputes them), never a rewrite of the log.

The rules, over the query of a normalised URL (the text after its first ``?``; the contract has
already dropped the fragment):

- a **parameter** is one ``&``-separated piece of the query; its **name** is the text before its
  first ``=`` (the whole piece without one), compared in ASCII lower case and not percent-decoded;
- the **page key** leaves out every parameter named ``utm_*`` or listed in the setting
  ``page_drop_params`` (click and mailing ids), keeps the others in their order and drops the
  ``?`` when none is left;
- a **UTM value** (``utm_source``, ``utm_medium``, ``utm_campaign``) is the value of the first
  parameter of that name, percent-decoded with ``+`` as a space (a value with a malformed escape is
  taken as spelled), lower-cased, trimmed of spaces and cut to :data:`MAX_UTM_LENGTH` characters
  (then trimmed again); empty or absent is null, which the views count as ``(none)``.

Both are Spark expressions (regular expressions and string functions; no Python UDF on the hot
path), evaluated only for URLs that have a query. :func:`page_key` is the Python twin of the page
key, for the API to look up a page a client names (a unit test holds the two to the same keys);
the recount in the tests has its own implementation of both rules.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from config.settings import get_settings

if TYPE_CHECKING:
    from pyspark.sql import Column

UTM_PREFIX = "utm_"
MAX_UTM_LENGTH = 100
"""Characters of a UTM value a key keeps: a campaign name is a label, not a payload."""

_MALFORMED = "%(?![0-9A-Fa-f]{2})"
"""A ``%`` not followed by two hexadecimal digits (Java's decoder would also take ``%+1``)."""
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _query(url: Column) -> Column:
    """``&`` and the URL's query: every parameter then starts with ``&``, the first one too."""
    from pyspark.sql import functions as F

    return F.concat(F.lit("&"), F.substr(url, F.instr(url, "?") + 1))


def _dropped_pattern(names: list[str]) -> str:
    """Java regex: one dropped parameter with the ``&`` before it (ASCII case-insensitive, as
    Java's ``(?i)`` is without UNICODE_CASE; ``\\z``: the very end, even before a line break)."""
    listed = "".join(f"|{re.escape(n)}" for n in names)
    return rf"&(?i:{UTM_PREFIX}[^&=]*{listed})(?:=[^&]*)?(?=&|\z)"


def page_key_column(url: Column) -> Column:
    """The page key of a normalised URL: without its ``utm_*`` and listed parameters."""
    from pyspark.sql import functions as F

    rest = F.regexp_replace(_query(url), _dropped_pattern(get_settings().page_drop_params), "")
    base = F.substring_index(url, "?", 1)
    return (
        F.when(~url.contains("?"), url)
        .when(rest == "", base)
        .otherwise(F.concat(base, F.lit("?"), F.substr(rest, F.lit(2))))
    )


def utm_column(url: Column, name: str) -> Column:
    """The normalised value of parameter ``utm_{name}`` of a URL, null when absent or empty."""
    from pyspark.sql import functions as F

    raw = F.regexp_extract(_query(url), rf"&(?i:{UTM_PREFIX}{re.escape(name)})(?:=([^&]*))?(?=&|\z)", 1)
    decoded = F.when(raw.rlike(_MALFORMED), raw).otherwise(F.url_decode(raw))
    value = F.trim(F.substr(F.trim(F.lower(decoded)), F.lit(1), F.lit(MAX_UTM_LENGTH)))
    return F.when(url.contains("?") & (value != ""), value)


def page_key(url: str) -> str:
    """:func:`page_key_column` in Python, for a normalised URL a client names."""
    base, sep, query = url.partition("?")
    if not sep:
        return url
    dropped = set(get_settings().page_drop_params)
    kept = [
        p for p in query.split("&") if not _is_dropped(p.partition("=")[0].translate(_ASCII_LOWER), dropped)
    ]
    return f"{base}?{'&'.join(kept)}" if kept else base


def _is_dropped(name: str, dropped: set[str]) -> bool:
    return name.startswith(UTM_PREFIX) or name in dropped
