"""The states of a generation, as stored in its registry document.

A ``StrEnum``: each member *is* its string, so the documents in MongoDB keep exactly the values
they always had (generations stored before the enum existed load unchanged), comparisons with a
stored string hold, and anything that prints a state prints the same word as before.

The life of a generation: ``opening`` -> ``building`` -> ``served`` -> ``superseded`` ->
``retired`` -> ``retired-dropped``; a run that does not finish (or crashed while ``opening`` or
``building``) ends ``failed`` -> ``failed-dropped``.

``opening`` and ``building`` are a run in progress; ``served`` is the one generation the API
answers from, ``superseded`` a previously served one whose documents the served day map may still
name; ``retired`` keeps its data for a grace period (queries in flight, diffs); ``failed`` is a run
that did not finish. The ``-dropped`` states say that the data of a retired or failed generation
has been deleted: the document stays, as the record of the run.
"""

from __future__ import annotations

from enum import StrEnum


class GenerationState(StrEnum):
    OPENING = "opening"
    """Registered, its cut not yet taken."""
    BUILDING = "building"
    """Its cut is in the active set; its batch views are being written."""
    SERVED = "served"
    SUPERSEDED = "superseded"
    RETIRED = "retired"
    FAILED = "failed"
    RETIRED_DROPPED = "retired-dropped"
    FAILED_DROPPED = "failed-dropped"

    def dropped(self) -> GenerationState:
        """The state of this generation once its data is deleted; only retired and failed
        generations' data is ever deleted, so any other state is a bug in the caller."""
        try:
            return _DROPPED[self]
        except KeyError:
            raise ValueError(f"a {self.value} generation's data is never dropped") from None


_DROPPED = {
    GenerationState.RETIRED: GenerationState.RETIRED_DROPPED,
    GenerationState.FAILED: GenerationState.FAILED_DROPPED,
}

IN_PROGRESS = frozenset({GenerationState.OPENING, GenerationState.BUILDING})
"""A batch run is (or was, if it crashed) writing this generation."""
RETAINED = frozenset({GenerationState.SERVED, GenerationState.SUPERSEDED})
"""Published and not retired: its day map decides which batch documents must be kept."""
DROPPED = frozenset(_DROPPED.values())
"""Its data is gone; the registry document is all that is left."""
