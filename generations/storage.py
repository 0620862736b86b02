"""The two stores the generation registry is kept in, as the registry (generations.registry) takes
them: the durable record of every generation with the served pointer (:class:`GenerationStore`,
MongoDB's: ``stores.mongo.generations``) and its hot copy (:class:`HotCopy`, Redis':
``stores.redis.handshake``).

The protocol owns these interfaces (they speak of its records, generations.model); the backends in
``stores`` implement them, and a composition root (the API's services, the jobs) hands them to the
registry, which imports no backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from datetime import datetime

    from generations.model import Generation, Offsets, Served
    from generations.state import GenerationState


class GenerationStore(Protocol):
    """The durable half of the generation registry (generations.registry keeps the protocol and
    the hot copy): a record per generation and the served pointer."""

    def get(self, gen: int) -> Generation | None: ...

    def all(self) -> list[Generation]:
        """Every generation, in ascending order."""
        ...

    def insert(self, gen: Generation) -> None:
        """A new generation's record (fails if the number is taken)."""
        ...

    def save(self, gen: Generation) -> None: ...

    def save_if(self, gen: Generation, expected: Iterable[GenerationState]) -> bool:
        """Save ``gen`` only if its stored state is one of ``expected``, atomically; whether it was."""
        ...

    def set_state(self, gen: int, state: GenerationState) -> None: ...

    def served_gen(self) -> int | None:
        """The served generation's number; None before the first publication."""
        ...

    def point_served(self, gen: int, at: datetime) -> None:
        """Switch the served pointer, atomically."""
        ...


class HotCopy(Protocol):
    """The generation registry's hot copy (generations.registry keeps the protocol: which
    generation, which cut, when): what the speed layer and the API read on every micro-batch and
    query. Every write here is atomic; :meth:`register_cut` is the opening handshake."""

    def active(self) -> dict[int, Offsets]:
        """The generations the speed layer counts for, with their cuts ({} when none is kept)."""
        ...

    def served(self) -> Served:
        """The served generation as the hot copy has it (``Served()`` when it has none)."""
        ...

    def register_cut(self, gen: int, cut_for: Callable[[Offsets], Offsets]) -> Offsets:
        """Add ``gen`` to the active generations with the cut ``cut_for(committed)`` computes from
        the speed layer's committed end offsets, in one transaction that fails and is tried again
        (``cut_for`` called again with fresh offsets) if the speed layer commits meanwhile."""
        ...

    def write(self, active: dict[int, Offsets], served: Served) -> None:
        """Replace the active generations and the served pointer, both in one transaction."""
        ...

    def write_if_absent(self, active: dict[int, Offsets], served: Served) -> None:
        """:meth:`write`, only if no active generations are kept (one transaction)."""
        ...

    def drop_active(self, gen: int) -> None:
        """Remove ``gen`` from the active generations (one transaction)."""
        ...
