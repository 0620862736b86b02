"""The contract on the Spark side: the schema derived from :class:`~contract.events.PageView`, and
the parse both layers read the log with.

There is one definition of every rule: :func:`parse_kafka_records` runs the pydantic model itself
(:func:`contract.codec.decode`, the function ingest validates with) over Arrow batches of the raw
Kafka values, so a rule added to the contract reaches both layers without a second copy, and a
record ingest would reject is rejected by the layers with the same reason. Records already in the
canonical form ingest writes are recognised in Spark and skip Python (:mod:`contract.canonical`):
that is every record ingest produced, and recognising can only send a record to the full check.

A vectorised UDF still costs every row that passes through it, recognised or not (a null crossing
to Python and back, cheaper the narrower the row, so it is kept as narrow as the Kafka record;
docs/contract.md has the figures). A caller that can afford a second pass over only the
records it did not recognise asks for ``judge=False`` and judges those with :func:`kafka_rows_of`
(the batch absorb does, over what it wrote); the stream cannot, and judges in one pass.
"""

from __future__ import annotations

import types
import typing
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

from pydantic import AwareDatetime

from contract.codec import MAX_PAYLOAD_BYTES, ContractError, bounds_from, decode, encode
from contract.events import PageView, TimeBounds

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


def _spark_type(annotation: Any) -> tuple[DataType, bool]:
    """Map one field annotation to (Spark type, nullable)."""
    from pyspark.sql.types import IntegerType, LongType, StringType, TimestampType

    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _spark_type(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"cannot map union {annotation!r} to a Spark type")
        spark_type, _ = _spark_type(members[0])
        return spark_type, True
    if origin is Literal:
        return _spark_type(type(get_args(annotation)[0]))
    mapping: dict[Any, DataType] = {
        str: StringType(),
        int: LongType(),
        bool: IntegerType(),
        datetime: TimestampType(),
        AwareDatetime: TimestampType(),
    }
    if annotation in mapping:
        return mapping[annotation], False
    raise TypeError(f"no Spark type for {annotation!r}")


def event_schema() -> StructType:
    """StructType with one field per contract field, in wire order.

    Every field is nullable in Spark, whatever the contract says: ``from_json`` yields nulls for a
    record that does not parse, and the layers must see that to route it to the dead-letter topic
    instead of counting it. Which fields are *required* is given by :func:`required_fields`.
    """
    from pyspark.sql.types import StructField, StructType

    fields = []
    for name, info in PageView.model_fields.items():
        spark_type, _ = _spark_type(info.annotation)
        fields.append(StructField(name, spark_type, nullable=True))
    return StructType(fields)


def required_fields() -> list[str]:
    """Fields a valid event always carries (non-null after parsing)."""
    return [name for name, info in PageView.model_fields.items() if info.is_required()]


INVALID_COLUMN = "_invalid"
"""Column :func:`parse_kafka_records` adds: null for a valid event, else why it is not one."""

UNJUDGED = "unjudged: not in the canonical form, for the contract's own check"
"""The :data:`INVALID_COLUMN` of a record :func:`parse_kafka_records` was asked not to judge
(``judge=False``) and did not recognise: not a verdict, a record the caller must still judge."""

_CANONICAL = "_canonical"


def judge_column(values: pd.Series, log_us: pd.Series, bounds: TimeBounds) -> pd.DataFrame:
    """Body of the vectorised UDF of :func:`parse_kafka_records`: each non-null record through
    :func:`contract.codec.decode`, the very code ingest validates with, its event-time window
    judged against the record's log-append time (``log_us``, epoch microseconds).

    Returns ``_canonical`` (the valid event as ingest would produce it, :func:`encode`; null for
    an invalid record) and :data:`INVALID_COLUMN` (the reason ingest would give). A null value is a
    record the layer already recognised as canonical (:mod:`contract.canonical`): it costs nothing
    here. Returning one canonical encoding instead of eight columns keeps the Python side to the
    validation itself; Spark parses the canonical bytes back with the derived schema.
    """
    import math

    import numpy as np
    import pandas as pd

    # Object arrays of nulls, filled only where a record is judged: in the stream every row comes
    # here, and almost all of them as a null (recognised) for which there is nothing to do.
    canonical = np.full(len(values), None, dtype=object)
    invalid = np.full(len(values), None, dtype=object)
    for i in np.flatnonzero(values.notna().to_numpy()):
        t = log_us.iat[i]
        at = None if t is None or math.isnan(t) else t / 1_000_000
        try:
            canonical[i] = encode(decode(values.iat[i], bounds, at=at))
        except ContractError as exc:
            invalid[i] = exc.reason
    return pd.DataFrame({_CANONICAL: canonical, INVALID_COLUMN: invalid})


def _judge_udf(bounds: TimeBounds) -> Callable[[pd.Series, pd.Series], pd.DataFrame]:
    """:func:`judge_column` for ``bounds``, with the pandas annotations Spark reads the UDF's kind
    from (this module imports pandas only when a layer builds its parse, not for ingest)."""
    import pandas as pd

    def judge(values: pd.Series, log_us: pd.Series) -> pd.DataFrame:
        return judge_column(values, log_us, bounds)

    judge.__annotations__ = {"values": pd.Series, "log_us": pd.Series, "return": pd.DataFrame}
    return judge


def recognised(ts_us: Column, log_time: Column, bounds: TimeBounds) -> Column:
    """True for a record of the canonical shape whose event time (``ts_us``, epoch microseconds as
    :func:`canonical_time` reads it) lies inside the window around its log-append time by more than
    the margin: the layers take it as it is, with no Python."""
    from pyspark.sql import functions as F

    from contract.canonical import WINDOW_MARGIN_S

    log = F.unix_micros(log_time)
    future_us = round((bounds.max_future.total_seconds() - WINDOW_MARGIN_S) * 1_000_000)
    past_us = round((bounds.max_past.total_seconds() - WINDOW_MARGIN_S) * 1_000_000)
    return F.coalesce(ts_us.between(log - F.lit(past_us), log + F.lit(future_us)), F.lit(False))


RECOGNISED_COLUMN = "_recognised"

RECOGNISER_FUNCTION = "lambda_canonical_record"
"""The name the JVM recogniser (toolchain/contract-udf) is registered under in each session."""


def canonical_time(spark: SparkSession, value: Column) -> Column:
    """For a record whose bytes have the canonical form (:mod:`contract.canonical`), the event time
    it spells in epoch microseconds (``Long.MIN_VALUE`` if that is not a calendar date); null for
    any other record. By the DFA the contract's recogniser compiles from
    :data:`~contract.canonical.AUTOMATON_PATTERN` in the JVM (registered in ``spark``'s session on
    each call: the compiled DFA is kept per JVM), which reads the timestamp's digits at their fixed
    places in the form: parsing the record for it cost as much as the whole parse."""
    from pyspark.sql import functions as F

    from contract.canonical import AUTOMATON_PATTERN, TS_FIELD

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        recogniser = jvm.lambda_platform.contract.CanonicalRecogniser(AUTOMATON_PATTERN, TS_FIELD)
    except TypeError as exc:  # py4j: "'JavaPackage' object is not callable", a class it cannot find
        raise RuntimeError(
            "the contract's recogniser (lambda_platform.contract.CanonicalRecogniser) is not on the "
            "session's classpath: run `make setup`, which builds it into the contract jars directory"
        ) from exc
    spark._jsparkSession.udf().register(
        RECOGNISER_FUNCTION, recogniser, jvm.org.apache.spark.sql.types.DataTypes.LongType
    )
    return F.call_function(RECOGNISER_FUNCTION, value)


def recognise(records: DataFrame, bounds: TimeBounds) -> DataFrame:
    """Kafka rows -> (value, partition, offset, timestamp, :data:`RECOGNISED_COLUMN`): whether
    the layers may take the record as it is: it has the canonical shape (:func:`canonical_time`),
    it is too short to hold a URL longer than its limit, and its event time is inside the window
    (:func:`recognised`). A null value (a tombstone) becomes the empty record ingest would see.

    Nothing is parsed here: the row stays as narrow as the Kafka record until the contract's Python
    has judged the rest (in the stream every row crosses to it, and a wide row crosses dearly)."""
    from pyspark.sql import functions as F

    from contract.canonical import MAX_LENGTHS

    value = F.coalesce(F.col("value"), F.lit(b""))
    longest = min(MAX_PAYLOAD_BYTES, *MAX_LENGTHS.values())
    # The event time in a projection of its own: the window reads it twice, and Spark does not
    # share a subexpression between the branches of a condition.
    timed = records.select(
        value.alias("value"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp"),
        F.when(F.length(value) <= longest, canonical_time(records.sparkSession, value)).alias("_ts_us"),
    )
    return timed.select(
        "value",
        "partition",
        "offset",
        "timestamp",
        recognised(F.col("_ts_us"), F.col("timestamp"), bounds).alias(RECOGNISED_COLUMN),
    )


def parse_kafka_records(
    records: DataFrame, bounds: TimeBounds | None = None, *, judge: bool = True
) -> DataFrame:
    """Kafka rows (value, partition, offset, timestamp) -> contract columns plus log position.

    Every record is judged by the whole contract, exactly as ingest judges it (the same pydantic
    model, run over Arrow batches, for every record not :func:`recognised` as canonical and
    inside the window), with one difference: the event-time window is relative to the
    record's log-append time (``log_time``, the broker's LogAppendTime), not to the clock, so the
    batch layer, a recompute next month, a replay and the speed layer all agree on every record.
    Ingest validated every record it produced, so invalid ones are rare (a producer that bypassed
    ingest); they are kept with the reason ingest would have given in :data:`INVALID_COLUMN`, for the
    caller to count and dead-letter, never silently dropped. ``bounds`` gives the window's widths
    (default: from the settings); its ``now`` is ignored.

    With ``judge=False`` nothing goes to Python: a record not recognised comes out with no
    contract values and :data:`UNJUDGED` as its verdict, for the caller to judge in a pass of its
    own (:func:`kafka_rows_of`).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    window = bounds or bounds_from()
    schema = event_schema()
    fast = F.col(RECOGNISED_COLUMN)
    candidates = recognise(records, window)
    if judge:
        canonical = StructField(_CANONICAL, BinaryType(), True)
        verdict = StructField(INVALID_COLUMN, StringType(), True)
        # A struct-returning Series -> DataFrame UDF, which pyspark's stubs do not list among the
        # overloads.
        udf = pandas_udf(_judge_udf(window), StructType([canonical, verdict]))  # type: ignore[call-overload]
        judged = candidates.select(
            "*",
            udf(
                F.when(~fast, F.col("value")), F.when(~fast, F.unix_micros(F.col("timestamp")).cast("double"))
            ).alias("_judged"),
        )
        # Either way the event is parsed from canonical bytes: the record's own when recognised,
        # the contract's encoding of it otherwise (which parses to exactly the model's values, as
        # the property test holds); an invalid record has none.
        canonical_bytes = F.when(fast, F.col("value")).otherwise(F.col(f"_judged.{_CANONICAL}"))
        reason = F.col(f"_judged.{INVALID_COLUMN}")
    else:
        judged = candidates
        canonical_bytes, reason = F.when(fast, F.col("value")), F.when(~fast, F.lit(UNJUDGED))
    event = F.from_json(canonical_bytes.cast("string"), schema)
    parsed = judged.select(
        event.alias("e"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("log_time"),
        F.col("value").alias("_raw"),
        reason.alias(INVALID_COLUMN),
    )
    return parsed.select(
        *[F.col(f"e.{name}").alias(name) for name in schema.fieldNames()],
        "kafka_partition",
        "kafka_offset",
        "log_time",
        "_raw",
        INVALID_COLUMN,
    )


def kafka_rows_of(parsed: DataFrame) -> DataFrame:
    """Rows :func:`parse_kafka_records` yielded (or a segment stored) back as the Kafka source's
    columns: the second pass over the :data:`UNJUDGED` records judges them exactly as a first pass
    would have, their log-append time included."""
    from pyspark.sql import functions as F

    return parsed.select(
        F.col("_raw").alias("value"),
        F.col("kafka_partition").alias("partition"),
        F.col("kafka_offset").alias("offset"),
        F.col("log_time").alias("timestamp"),
    )
