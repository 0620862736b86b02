"""The Spark schema of an event, derived from :class:`~contract.events.PageView`.

Both layers read the log with ``from_json(value, event_schema())``; deriving the schema from the
pydantic model means a field added to the contract reaches Spark without a second definition.
"""

from __future__ import annotations

import types
import typing
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

from pydantic import AwareDatetime

from contract.events import SCHEMA_VERSION, PageView

if TYPE_CHECKING:
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


def parse_kafka_records(records: DataFrame) -> DataFrame:
    """Kafka rows (value, partition, offset, timestamp) -> contract columns plus log position.

    Ingest validated every record before producing it, so invalid ones are rare (a producer that
    bypassed ingest); they are kept with a reason in :data:`INVALID_COLUMN` for the caller to count
    and dead-letter, never silently dropped. ``log_time`` is the broker's LogAppendTime.
    """
    from pyspark.sql import functions as F

    schema = event_schema()
    parsed = records.select(
        F.from_json(F.col("value").cast("string"), schema).alias("e"),
        F.col("value").alias("_raw"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("log_time"),
    )
    checks = [F.when(F.col("e").isNull(), F.lit("event: not a JSON object"))]
    checks += [
        F.when(F.col(f"e.{name}").isNull(), F.lit(f"{name}: missing or not of the contract's type"))
        for name in required_fields()
    ]
    checks.append(
        F.when(F.col("e.schema_version") != F.lit(SCHEMA_VERSION), F.lit("schema_version: unsupported"))
    )
    reason = F.concat_ws("; ", *checks)
    return parsed.select(
        *[F.col(f"e.{name}").alias(name) for name in schema.fieldNames()],
        "kafka_partition",
        "kafka_offset",
        "log_time",
        "_raw",
        F.when(reason == "", F.lit(None)).otherwise(reason).alias(INVALID_COLUMN),
    )
