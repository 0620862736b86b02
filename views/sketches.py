"""HLL sketch bytes in Python: the union both the speed layer's writer and the serving layer use.

Spark writes DataSketches HLL sketches (``hll_sketch_agg``); the Python ``datasketches`` package
reads the same bytes. Unique visitors over several buckets are the union of their sketches, never
a sum. Python writes HLL_8, the type Spark emits, so Spark reads the result back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from datasketches import hll_sketch, hll_union, tgt_hll_type

MAX_LG_K = 21


@dataclass(frozen=True)
class Estimate:
    """A distinct count with its bounds (``bounds_sd`` standard deviations: 2 is about 95%)."""

    estimate: float
    lower: float
    upper: float


def union(sketches: Iterable[bytes | None], lg_k: int = MAX_LG_K) -> hll_union | None:
    """The union of serialised sketches (None entries skipped); None when there are none.

    ``lg_k`` caps the union's precision; with the default the result keeps the finest precision
    among its inputs, so sketches of different lgConfigK combine.
    """
    result: hll_union | None = None
    for raw in sketches:
        if raw is None:
            continue
        if result is None:
            result = hll_union(lg_k)
        result.update(hll_sketch.deserialize(bytes(raw)))
    return result


def union_bytes(sketches: Iterable[bytes | None], lg_k: int = MAX_LG_K) -> bytes | None:
    """Serialised union, in Spark's format (HLL_8, compact)."""
    merged = union(sketches, lg_k)
    return None if merged is None else bytes(merged.get_result(tgt_hll_type.HLL_8).serialize_compact())


def estimate(sketches: Iterable[bytes | None], bounds_sd: int = 2) -> Estimate:
    """Distinct count of the union of ``sketches`` (0 with no sketch at all)."""
    merged = union(sketches)
    if merged is None:
        return Estimate(0.0, 0.0, 0.0)
    return Estimate(
        merged.get_estimate(), merged.get_lower_bound(bounds_sd), merged.get_upper_bound(bounds_sd)
    )
