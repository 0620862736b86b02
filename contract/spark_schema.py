"""The contract on the Spark side: the schema derived from :class:`~contract.events.PageView`, and
the parse both layers read the log with.

There is one definition of every rule: :func:`parse_kafka_records` runs the pydantic model itself
(:func:`contract.codec.decode`, the function ingest validates with) over Arrow batches of the raw
Kafka values, so a rule added to the contract reaches both layers without a second copy, and a
record ingest would reject is rejected by the layers with the same reason.
"""

from __future__ import annotations

import types
import typing
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

from pydantic import AwareDatetime

from contract.codec import ContractError, bounds_from, decode, encode
from contract.events import PageView, TimeBounds

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame
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

_CANONICAL = "_canonical"


def parsed_schema() -> StructType:
    """What :func:`parse_kafka_records` yields: the contract's columns, the record's log position,
    its original bytes and the verdict."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType(
        [
            *event_schema().fields,
            StructField("kafka_partition", IntegerType(), True),
            StructField("kafka_offset", LongType(), True),
            StructField("log_time", TimestampType(), True),
            StructField("_raw", BinaryType(), True),
            StructField(INVALID_COLUMN, StringType(), True),
        ]
    )


def judge_batches(batches: Iterable[pa.RecordBatch], bounds: TimeBounds) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: every Kafka record through :func:`contract.codec.decode`, the very code
    ingest validates with, its event-time window judged against the record's log-append time.

    Input columns: ``value`` (binary, never null), ``partition``, ``offset``, ``timestamp``. Output:
    the same, plus ``_canonical`` (the valid event as ingest would produce it, :func:`encode`; null
    for an invalid record) and :data:`INVALID_COLUMN` (the reason ingest would give). Returning one
    canonical encoding instead of eight columns keeps the Python side to the validation itself;
    Spark parses the canonical bytes back with the derived schema.
    """
    import pyarrow as pa

    for batch in batches:
        values = batch.column("value").to_pylist()
        log_us = batch.column("timestamp").cast(pa.int64()).to_pylist()
        canonical: list[bytes | None] = []
        invalid: list[str | None] = []
        for payload, t in zip(values, log_us, strict=True):
            try:
                canonical.append(encode(decode(payload, bounds, at=None if t is None else t / 1_000_000)))
                invalid.append(None)
            except ContractError as exc:
                canonical.append(None)
                invalid.append(exc.reason)
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("value"),
                batch.column("partition"),
                batch.column("offset"),
                batch.column("timestamp"),
                pa.array(canonical, pa.binary()),
                pa.array(invalid, pa.string()),
            ],
            names=["value", "partition", "offset", "timestamp", _CANONICAL, INVALID_COLUMN],
        )


def parse_kafka_records(records: DataFrame, bounds: TimeBounds | None = None) -> DataFrame:
    """Kafka rows (value, partition, offset, timestamp) -> contract columns plus log position.

    Every record is judged by the whole contract, exactly as ingest judges it (the same pydantic
    model, run over Arrow batches), with one difference: the event-time window is relative to the
    record's log-append time (``log_time``, the broker's LogAppendTime), not to the clock, so the
    batch layer, a recompute next month, a replay and the speed layer all agree on every record.
    Ingest validated every record it produced, so invalid ones are rare (a producer that bypassed
    ingest); they are kept with the reason ingest would have given in :data:`INVALID_COLUMN`, for the
    caller to count and dead-letter, never silently dropped. ``bounds`` gives the window's widths
    (default: from the settings); its ``now`` is ignored.
    """
    from functools import partial

    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    window = bounds or bounds_from()
    # A null value (a tombstone) is judged as the empty record ingest would see.
    source = records.select(
        F.coalesce(F.col("value"), F.lit(b"")).alias("value"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp"),
    )
    judged_schema = StructType(
        [
            *source.schema.fields,
            StructField(_CANONICAL, BinaryType(), True),
            StructField(INVALID_COLUMN, StringType(), True),
        ]
    )
    judged = source.mapInArrow(partial(judge_batches, bounds=window), judged_schema)
    schema = event_schema()
    # The canonical encoding parses to exactly the model's values (the property test holds it to
    # that); an invalid record has none.
    parsed = judged.select(
        F.from_json(F.col(_CANONICAL).cast("string"), schema).alias("e"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("log_time"),
        F.col("value").alias("_raw"),
        F.col(INVALID_COLUMN),
    )
    return parsed.select(
        *[F.col(f"e.{name}").alias(name) for name in schema.fieldNames()],
        "kafka_partition",
        "kafka_offset",
        "log_time",
        "_raw",
        INVALID_COLUMN,
    )
