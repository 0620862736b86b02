"""What a view is: a declared dimension (a key per event) or, for the rare exotic view, a function.

A :class:`Dimension` is data: a name, the key it groups page views by as a Spark column expression
over the contract's fields, and whether it is per site. Both layers compute every declared
dimension in one shared aggregation pass (:mod:`views.shared_pass`), and the serving layer and the
API answer any of them with one generic code path, so adding a breakdown is one declaration.

Per-site dimensions store the key ``"{site}|{value}"``: "top referrers of shop.example.com" is then
one view whose keys of that site share a prefix, and a site (a host with an optional port) never
contains ``|``. The cross-site dimensions (``page``, keyed by the URL, and ``site`` itself) store
the value alone.

A dimension may also count **visits** (:mod:`views.sessions`): a visit is credited to the key
of its first view (``visits=True``), or, for the entry and exit pages, the view is keyed by a
visit's first or last view and counts visits only (``per_visit``).

"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SCOPE_SEPARATOR = "|"
"""Between the site and the value in the stored key of a per-site dimension."""

KeyExpression = Callable[[], "Column"]
"""Builds the key column (Spark needs an active session to build a Column, so it is a function)."""


def site_column() -> Column:
    """The site of an event: the host (with a non-default port) of its normalised URL."""
    from pyspark.sql import functions as F

    return F.regexp_extract(F.col("url"), r"^[a-z]+://([^/]+)", 1)


@dataclass(frozen=True)
class Dimension:
    """A view declared as data: page views and visitors per key, hourly and daily."""

    name: str
    key: KeyExpression
    """The value an event counts under, over contract fields (null counts as ``(none)``)."""
    description: str
    per_site: bool = True
    """Key by (site, value): every dimension but the site itself and the cross-site page view."""
    examples: tuple[str, ...] = ()
    """Typical values, for the API's documentation."""
    once_per_value: bool = False
    """Evaluate the key once per distinct value of the fields it reads and join it back (a
    broadcast join), instead of once per event. For a key that is costly per row over fields with
    few distinct values: the device rules are thirty-odd substring scans of the user agent per
    event, and a million events carry a few thousand user agents (docs/views.md has the figures).
    It changes the cost only, never the key."""
    visits: bool = False
    """Also count visits (visits, bounces, duration, views in visits: views.sessions) under the key
    of each visit's first view: where the visit came from, its country, its device, its site."""
    per_visit: str | None = None
    """A view of visits only, keyed by a visit's first view (``"entry"``) or last view (``"exit"``):
    the entry and exit pages. It counts no page views."""
    url_keys: bool = False
    """Its keys are normalised URLs (the page, the entry and exit pages): a value a client names
    is normalised as ingest normalises URLs before it is looked up."""
    given: tuple[tuple[str, KeyExpression], ...] = ()
    """Named values the key reads as columns (``F.col(name)``), computed once per event in a
    projection before the keys (:meth:`with_given`; dimensions that give the same name share
    it). Spark's expressions are trees: a value that many tests of a key read (the channel rules
    read the source and the medium in most of theirs) would otherwise be copied into each test,
    and planning every pass (each micro-batch of the speed layer) grows with the copies. Names
    start with ``_``."""

    @property
    def counts_page_views(self) -> bool:
        return self.per_visit is None

    @property
    def counts_visits(self) -> bool:
        return self.visits or self.per_visit is not None

    def stored_key(self, key: Column | None = None) -> Column:
        """The key as stored: ``site|value`` for a per-site dimension, the value otherwise.
        ``key``: the key's value when already computed (:attr:`once_per_value`)."""
        from pyspark.sql import functions as F

        value = F.coalesce((self.key() if key is None else key).cast("string"), F.lit(NONE))
        return F.concat(site_column(), F.lit(SCOPE_SEPARATOR), value) if self.per_site else value

    def expression(self) -> str:
        """Spark's rendering of the stored key expression and of the values it is given: what the
        fingerprint hashes."""
        return "".join([str(self.stored_key()), *(f" {name}={value()}" for name, value in self.given)])

    def with_given(self, frame: DataFrame) -> DataFrame:
        """``frame`` with the columns of :attr:`given` it does not have yet."""
        from views.columns import with_given

        return with_given(frame, self.given)

    def input_columns(self, spark: SparkSession, empty: DataFrame | None = None) -> tuple[str, ...]:
        """The contract fields the key reads, derived from the expression by Spark's analyser (the
        attributes its resolved plan references), so nobody lists them by hand. ``empty``: an
        empty DataFrame of the contract's schema, to share between calls."""
        from contract.spark_schema import event_schema

        if empty is None:
            empty = spark.createDataFrame([], event_schema())
        return self._fields(empty, self.stored_key())

    def key_columns(self, events: DataFrame) -> tuple[str, ...]:
        """The fields the key's value reads (without the site a per-site key adds)."""
        return self._fields(events, self.key())

    def _fields(self, frame: DataFrame, column: Column) -> tuple[str, ...]:
        """The columns of ``frame`` that ``column`` reads, through the values it is given."""
        names = {name for name, _ in self.given}
        found = set(references(self.with_given(frame), column)) - names
        for _, value in self.given:
            found.update(references(frame, value()))
        return tuple(sorted(found))


def references(frame: DataFrame, column: Column) -> tuple[str, ...]:
    """The columns of ``frame`` that ``column`` reads, as Spark's analyser resolves them."""
    found = frame.select(column)._jdf.queryExecution().analyzed().references()
    names, it = set(), found.iterator()
    while it.hasNext():
        names.add(str(it.next().name()))
    return tuple(sorted(names))


NONE = "(none)"


View = Dimension
"""A declared view: every view is a dimension, counted in the shared pass."""
