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

from contract.events import PageView

if TYPE_CHECKING:
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
