"""The two small interfaces the query engine reads through, one implementation module per backend.

- :class:`BatchReader`: published generations and their batch views (MongoDB: ``serving_layer.mongo``).
- :class:`RealtimeReader`: the served pointer, the speed layer's commit and the realtime views in
  one consistent snapshot (Redis: ``serving_layer.redis_realtime``).

``serving_layer.memory`` implements both in memory for unit tests. Everything is async: the API
serves many queries per worker, and a query's reads wait on the network, not the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from serving_layer.model import BatchDoc, GenerationInfo, HashRead, RankRead, RealtimeSnapshot

DocRef = tuple[int, str, str]
"""(generation holding the document, key, day)."""


class BatchReader(Protocol):
    async def generation(self, gen: int) -> GenerationInfo:
        """A published generation (raises BatchUnavailable if it cannot be read)."""
        ...

    async def served_generation(self) -> GenerationInfo | None:
        """The served generation from the durable registry (used when Redis cannot say)."""
        ...

    async def documents(
        self, view: str, refs: Sequence[DocRef], hour_sketches: Sequence[bool] = ()
    ) -> list[BatchDoc | None]:
        """The documents of ``refs``, in order; None where a key had no traffic that day.

        Hour sketches stored apart (views.rows.row_to_documents) are read only where
        ``hour_sketches[i]`` is true (empty: nowhere); elsewhere such a document's ``h_sk`` may be
        None.
        """
        ...

    async def ranking(self, view: str, holder: int, day: str) -> list[tuple[str, int]]:
        """The day's keys by page views, descending, from the collection of ``holder``."""
        ...

    async def ping(self) -> None: ...


class RealtimeReader(Protocol):
    async def snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        """Served pointer, speed commit and the given realtime data of the served generation, all
        from one transaction (raises RealtimeUnavailable if Redis cannot be read)."""
        ...

    async def speed_stats(self) -> dict[str, object] | None:
        """The speed layer's report of its last micro-batch, if any."""
        ...

    async def ping(self) -> None: ...
