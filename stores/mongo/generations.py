"""The generation registry on MongoDB: one document per generation (``generations``), the served
pointer (``registry``), and the one codec of a generation's document.

The served pointer is switched by a single-document write, and a conditional state change is one
conditional replace: both atomic on every MongoDB-protocol server. The protocol that uses them
(opening, publishing, retiring) is generations.registry's.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pymongo.database import Database

from contract import utc
from generations.model import Generation, GenerationError
from generations.state import GenerationState

if TYPE_CHECKING:
    from generations.storage import GenerationStore

GENERATIONS = "generations"
"""The collection of the generations' documents, ``_id`` the generation number."""
POINTERS = "registry"
"""The collection of the served pointer."""
SERVED_ID = "served"


def generation_document(g: Generation) -> dict[str, Any]:
    """A generation as its registry document."""
    return {
        "_id": g.gen,
        "kind": g.kind,
        "state": g.state,
        "cut": {str(p): o for p, o in g.cut.items()},
        "started_at": g.started_at,
        "finished_at": g.finished_at,
        "served_at": g.served_at,
        "retired_at": g.retired_at,
        "day_map": g.day_map,
        "fingerprints": g.fingerprints,
        "views": g.views,
        "stats": g.stats,
        "error": g.error,
    }


def generation_of(doc: dict[str, Any]) -> Generation:
    """A generation from its registry document; a state this code does not know (a newer
    version wrote it, or a hand edit) is an error rather than a guess: which data may be
    deleted depends on the state."""
    started = utc.as_utc(doc["started_at"])
    assert started is not None
    try:
        state = GenerationState(doc["state"])
    except ValueError:
        raise GenerationError(f"generation {doc['_id']}: unknown state {doc['state']!r}") from None
    return Generation(
        gen=int(doc["_id"]),
        kind=doc["kind"],
        state=state,
        cut={int(p): int(o) for p, o in doc["cut"].items()},
        started_at=started,
        finished_at=utc.as_utc(doc.get("finished_at")),
        served_at=utc.as_utc(doc.get("served_at")),
        retired_at=utc.as_utc(doc.get("retired_at")),
        day_map=doc.get("day_map") or {},
        fingerprints=doc.get("fingerprints") or {},
        views=doc.get("views") or {},
        stats=doc.get("stats") or {},
        error=doc.get("error"),
    )


class MongoGenerationStore:
    """The durable half of the generation registry (generations.storage.GenerationStore)."""

    def __init__(self, db: Database[dict[str, Any]]) -> None:
        self.generations = db[GENERATIONS]
        self.pointers = db[POINTERS]

    def get(self, gen: int) -> Generation | None:
        doc = self.generations.find_one({"_id": gen})
        return generation_of(doc) if doc else None

    def all(self) -> list[Generation]:
        return sorted((generation_of(d) for d in self.generations.find({})), key=lambda g: g.gen)

    def insert(self, gen: Generation) -> None:
        self.generations.insert_one(generation_document(gen))

    def save(self, gen: Generation) -> None:
        self.generations.replace_one({"_id": gen.gen}, generation_document(gen))

    def save_if(self, gen: Generation, expected: Iterable[GenerationState]) -> bool:
        replaced = self.generations.replace_one(
            {"_id": gen.gen, "state": {"$in": [str(state) for state in expected]}}, generation_document(gen)
        )
        return replaced.matched_count == 1

    def set_state(self, gen: int, state: GenerationState) -> None:
        self.generations.update_one({"_id": gen}, {"$set": {"state": state}})

    def served_gen(self) -> int | None:
        pointer = self.pointers.find_one({"_id": SERVED_ID})
        return int(pointer["gen"]) if pointer else None

    def point_served(self, gen: int, at: datetime) -> None:
        self.pointers.replace_one({"_id": SERVED_ID}, {"_id": SERVED_ID, "gen": gen, "at": at}, upsert=True)


if TYPE_CHECKING:
    _: type[GenerationStore] = MongoGenerationStore
