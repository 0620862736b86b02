"""The JVM sessioniser (toolchain/contract-udf, ``lambda_platform.visits``) orders a visitor-day's
views itself, so its order of event ids and keys must be Spark's, which is the reference
sessioniser's (tests/oracle_visits.py orders Python strings): by code point, which is the order
of UTF-8 bytes that Spark compares, and not Java's order of UTF-16 units, which differs beyond
the basic plane. The property tests of both layers (test_visits_batch_property.py, the speed
layer's test_visits_speed_property.py) hold the whole function to the reference; this one holds
its comparison to Python's on any text, including what generated logs never contain."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ASTRAL = st.characters(min_codepoint=0xE000, max_codepoint=0x1F6FF, exclude_categories=["Cs"])
TEXT = st.text(st.one_of(st.characters(exclude_categories=["Cs"]), ASTRAL), max_size=6)


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=TEXT, b=TEXT)
def test_text_order_is_python_s(spark: Any, a: str, b: str) -> None:
    compare = spark.sparkContext._jvm.lambda_platform.visits.Summary.compareText
    assert _sign(compare(a, b)) == _sign((a > b) - (a < b))


def test_nulls_come_first(spark: Any) -> None:
    compare = spark.sparkContext._jvm.lambda_platform.visits.Summary.compareText
    assert compare(None, "") < 0 < compare("", None)
    assert compare(None, None) == 0
